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


def test_manifest_loader_reports_bad_lines_with_numbers(tmp_path, synthetic_clips):
    """Bad manifest lines are reported with their line number and what is wrong; only valid videos are kept."""
    import json

    from pytest_posbias.data.manifest import load_manifest

    good = {"type": "video", "id": "a", "path": str(synthetic_clips[0]), "domain": "d", "bucket": "short", "references": ["x"]}
    lines = [json.dumps(good), "{not json", json.dumps({**good, "id": "b", "bucket": "medium"}),
             json.dumps({"type": "mcq", "id": "q", "video": "a", "question": "?", "options": ["a", "b"], "answer": 5}),
             json.dumps({"type": "group", "id": "g", "domain": "d", "bucket": "short", "P": 2, "videos": ["a", "zz"]})]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    m = load_manifest(path)
    msgs = [str(p) for p in m.problems]
    assert msgs == [
        f"{path}:2: not valid JSON (Expecting property name enclosed in double quotes)",
        f"{path}:3: field 'bucket' must be 'short' or 'long'; got 'medium'",
        f"{path}:4: field 'answer' must index the options (0..1); got 5",
        f"{path}:5: group 'g': unknown videos ['zz'] (no valid video line has these ids)",
    ]
    assert list(m.videos) == ["a"]
