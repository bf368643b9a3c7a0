"""posbias text-audit: its numbers equal the metrics functions on the same texts.

Placed with the CLI (``cli/commands.py``), which the tests run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pytest_posbias import metrics as M

CAPTIONS = [
    "The puppies sit in the corner, facing each other. They sit in the corner, facing each other again.",
    "A man rides a bicycle down a quiet street while birds fly overhead and cars pass slowly by.",
    " ".join(["The video continues to show the red car driving on the road."] * 12),
    "Short one.",
]


@pytest.mark.parametrize("fmt", ["jsonl", "lines"])
def test_text_audit_matches_the_metrics(tmp_path, fmt):
    path = tmp_path / f"caps.{fmt}"
    if fmt == "jsonl":
        path.write_text("\n".join(json.dumps({"caption": c}) for c in CAPTIONS) + "\n")
    else:
        path.write_text("\n".join(CAPTIONS) + "\n")
    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "text-audit", str(path), "--words", "10", "100", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["n"] == 4
    assert got["rr"] == pytest.approx(M.repetition_rate(CAPTIONS))
    assert got["rr"] == pytest.approx(0.5)  # the puppies caption and the looping one
    assert got["ri"] == pytest.approx(np.mean([M.repetition_intensity(c) for c in CAPTIONS]))
    assert got["ie"] == pytest.approx(np.mean([M.information_entropy(c) for c in CAPTIONS]))
    rr10, kept10 = M.length_matched_repetition_rate(CAPTIONS, words=10)
    assert got["length_matched"]["10"] == {"rr": pytest.approx(rr10), "kept": kept10}
    assert got["length_matched"]["100"]["kept"] == 1  # only the looping caption reaches 100 words


def test_text_audit_bad_line_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"caption": "fine"}\n{"label": 3}\n')
    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "text-audit", str(path)], capture_output=True, text=True)
    assert out.returncode == 2 and "bad.jsonl:2: JSON line has no text, caption or output string field" in out.stderr
