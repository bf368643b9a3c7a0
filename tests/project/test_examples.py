"""examples/custom_gate: a user's own stricter MEG gate on their manifest, run as the user would."""

from __future__ import annotations

import json
import shutil

import pytest
from support import REPO

from pytest_posbias.cli import scaffold

EXAMPLE = REPO / "examples" / "custom_gate"
pytestmark = [pytest.mark.usefixtures("heavy_modules"), pytest.mark.slow]


def test_strict_meg_example_gates_at_its_own_threshold_on_the_suite_probe(pytester, small_set):
    shutil.copytree(EXAMPLE / "robustness", pytester.path / "robustness")
    shutil.copy(EXAMPLE / "conftest.py", pytester.path / "conftest.py")  # the short options, as posbias init writes them
    # beside it, the suite's own MEG gate (as `posbias init` would add it) to compare with
    (pytester.path / "robustness" / "test_positional.py").write_text(scaffold._TEST_MODULE.format(name="test_positional"))
    toml = (EXAMPLE / "pyproject.toml").read_text().replace('data = "data/manifest.jsonl"', f'data = "{small_set}"')
    assert f'data = "{small_set}"' in toml
    (pytester.path / "pyproject.toml").write_text(toml + "\n[tool.posbias.probes.positional]\ngroups = 12\n")

    bad = pytester.runpytest("-m", "meg and not slow", "--posbias-model", "sim:middle-weak", "--posbias-fixed", "-p", "no:randomly",
                             "--posbias-json=bad.json")
    assert bad.ret == 1, bad.stdout.str()[-3000:]
    verdicts = json.loads((pytester.path / "bad.json").read_text())["verdicts"]
    strict = {v["nodeid"].split("[", 1)[1]: v for v in verdicts if "test_meg_strict[" in v["nodeid"]}
    suite = {v["nodeid"].split("[", 1)[1]: v for v in verdicts if "::test_meg[" in v["nodeid"]}
    assert strict and strict.keys() == suite.keys()  # one strict gate per P = 4 configuration of the manifest
    for key, v in strict.items():
        s = suite[key]
        assert (v["threshold"], v["lower"], v["upper"]) == (0.01, -0.01, 0.01)
        assert (s["threshold"], s["lower"], s["upper"]) == (0.02, -0.02, 0.02)
        # the same probe (shared in the run, fixed-sample design): the same estimate and sample, judged
        # stricter; the interval is the gate's own, since MEG's variance floor is |bound|·δ (docs/design.md §5)
        assert (v["estimate"], v["n"]) == (s["estimate"], s["n"])
        assert v["passed"] == (v["ci_low"] <= 0.01 and v["ci_high"] >= -0.01)  # detect: fail only when shown outside
    assert not all(v["passed"] for v in strict.values())
    good = pytester.runpytest("-m", "meg and not slow", "--posbias-model", "sim:unbiased", "--posbias-fixed", "-p", "no:randomly",
                              "-k", "strict")
    assert good.ret == 0, good.stdout.str()[-3000:]
    good.assert_outcomes(passed=len(strict))
