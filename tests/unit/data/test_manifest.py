"""The manifest loader (data.manifest): hostile lines are reported with what is wrong, not raised."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("line", "why"), [
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"type": "video", "id": "v\\ud800", "path": "x.mp4"}', "lone surrogate"),  # the JSON escape \ud800
])
def test_hostile_manifest_lines_are_reported_not_raised(tmp_path, line, why):
    from pytest_posbias.data.manifest import load_manifest

    p = tmp_path / "m.jsonl"
    p.write_text(line + "\n", encoding="utf-8")
    m = load_manifest(p, check_files=False)
    assert any(why in str(x) for x in m.problems), [str(x) for x in m.problems]
