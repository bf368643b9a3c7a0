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


def _video_line(**over):
    line = {"type": "video", "id": "v1", "path": "v1.mp4", "domain": "cooking", "bucket": "short",
            "references": ["A man cuts onions."]}
    return {**line, **over}


def _load_lines(tmp_path, *lines):
    import json

    from pytest_posbias.data.manifest import load_manifest

    p = tmp_path / "m.jsonl"
    p.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return load_manifest(p, check_files=False)


def test_a_duration_integer_too_large_for_a_float_is_a_bad_line(tmp_path):
    """A duration written as a 400-digit integer is a bad line naming 'duration', and the loader goes on."""
    huge = ('{"type": "video", "id": "v1", "path": "v1.mp4", "domain": "d", "bucket": "short", "references": ["a"], '
            '"duration": 1' + "0" * 400 + "}")
    m = _load_lines(tmp_path, huge, _video_line(id="v2"))
    assert list(m.videos) == ["v2"]
    assert any("duration" in str(x) for x in m.problems), [str(x) for x in m.problems]


def test_a_video_whose_references_are_all_blank_is_a_bad_line(tmp_path):
    """A video line whose reference sentences are all empty or whitespace is rejected naming 'references'."""
    m = _load_lines(tmp_path, _video_line(references=["", "  "]), _video_line(id="v2"))
    assert list(m.videos) == ["v2"]
    assert any("references" in str(x) for x in m.problems), [str(x) for x in m.problems]


def test_an_mcq_window_that_ends_before_zero_seconds_is_a_bad_line(tmp_path):
    """An mcq line with ``end`` < 0 (an empty window for any clip) is rejected naming 'end'."""
    mcq = {"type": "mcq", "id": "q1", "video": "v1", "question": "What?", "options": ["a", "b"], "answer": 0}
    m = _load_lines(tmp_path, _video_line(), {**mcq, "end": -1}, {**mcq, "id": "q2", "start": -5, "end": -2},
                    {**mcq, "id": "q3"})
    assert [q.id for q in m.mcq] == ["q3"]
    assert sum("end" in str(x) for x in m.problems) == 2, [str(x) for x in m.problems]


def test_write_manifest_refuses_a_non_finite_number(tmp_path):
    """write_manifest raises ValueError for a NaN duration instead of writing a line its own loader rejects."""
    from pytest_posbias.data.manifest import write_manifest

    out = tmp_path / "w.jsonl"
    with pytest.raises(ValueError):
        write_manifest(out, [_video_line(duration=float("nan"))])
    assert not out.exists()


def test_duplicate_keys_bools_and_nan_are_bad_lines(tmp_path):
    """A repeated key, a bool where a number goes and a NaN duration are each a bad line naming the field."""
    m = _load_lines(tmp_path, '{"type": "video", "id": "v1", "id": "v9", "path": "p", "domain": "d", "bucket": '
                    '"short", "references": ["a"]}',
                    _video_line(id="v2", duration=True), '{"type": "video", "id": "v3", "path": "p", "domain": "d", '
                    '"bucket": "short", "references": ["a"], "duration": NaN}',
                    {"type": "group", "id": "g", "domain": "d", "bucket": "short", "P": True, "videos": ["a", "b"]},
                    {"type": "mcq", "id": "q", "video": "v", "question": "?", "options": ["a", "b"], "answer": False})
    assert not m.videos and not m.groups and not m.mcq
    text = [str(x) for x in m.problems]
    assert len(text) == 5, text
    for needle, t in zip(["'id' appears twice", "'duration'", "'duration'", "'P'", "'answer'"], text, strict=True):
        assert needle in t, t


@pytest.mark.parametrize("line", [
    _video_line(path="clip\u0000.mp4"),
    {"type": "mcq", "id": "q1", "video": "clip\u0000.mp4", "question": "?", "options": ["a", "b"], "answer": 0},
], ids=["video-path", "mcq-video"])
def test_a_path_with_a_nul_character_is_a_problem_naming_the_line(tmp_path, line):
    """A video path holding a NUL character is a data problem naming the item and line; the loader goes on."""
    import json

    from pytest_posbias.data.manifest import load_manifest

    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps(line) + "\n" + json.dumps(_video_line(id="v2")) + "\n", encoding="utf-8")
    m = load_manifest(p)
    assert "v2" in m.videos
    assert any(x.line == 1 or "line 1" in x.message for x in [*m.problems, *m.file_problems])


def test_a_group_repeating_another_groups_videos_is_a_duplicate(tmp_path):
    """A group whose video set equals an earlier group's in the same configuration is a duplicate-id problem, skipped."""
    vids = [_video_line(id=f"v{i}", path=f"v{i}.mp4") for i in range(4)]
    group = {"type": "group", "id": "g1", "domain": "cooking", "bucket": "short", "P": 4,
             "videos": ["v0", "v1", "v2", "v3"]}
    m = _load_lines(tmp_path, *vids, group, {**group, "id": "g2", "videos": ["v1", "v2", "v3", "v0"]})
    assert [g.id for g in m.groups] == ["g1"]
    assert any("g2" in str(x) for x in m.problems), [str(x) for x in m.problems]


def test_an_mcq_item_repeating_another_under_a_new_id_is_a_duplicate(tmp_path):
    """An mcq item identical to an earlier one but for its id is reported and skipped."""
    mcq = {"type": "mcq", "id": "q1", "video": "v1", "question": "What is cut?", "options": ["onions", "bread"],
           "answer": 0}
    m = _load_lines(tmp_path, _video_line(), mcq, {**mcq, "id": "q2"})
    assert [q.id for q in m.mcq] == ["q1"]
    assert any("q2" in str(x) for x in m.problems), [str(x) for x in m.problems]


def test_an_mcq_item_repeated_under_another_spelling_is_a_duplicate(tmp_path):
    """The same clip under another path spelling and video id, the question in other case and spacing, the
    options permuted with the answer following them: the same item, counted once (counted twice, it would
    double the sample a certify run decides on). One text in two Unicode normal forms is one question;
    "Masse" and "Maße" are two."""
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "v1.mp4").write_bytes(b"a clip")
    mcq = {"type": "mcq", "id": "q1", "video": "v1", "question": "What is cut?", "options": ["onions", "bread"],
           "answer": 0}
    copy = {**mcq, "id": "q2", "video": "v2", "question": "  what IS  cut? ", "options": ["bread", "Onions"],
            "answer": 1}
    other = {**copy, "id": "q3", "answer": 0}  # another answer: another item
    composed = {**mcq, "id": "q6", "question": "Caf\u00e9?"}
    decomposed = {**mcq, "id": "q7", "question": "Cafe\u0301?"}  # the same text in NFD
    words = {**mcq, "id": "q8", "question": "Masse?"}, {**mcq, "id": "q9", "question": "Maße?"}  # two words
    m = _load_lines(tmp_path, _video_line(path="videos/v1.mp4"), _video_line(id="v2", path="videos/../videos/v1.mp4"),
                    mcq, copy, other, composed, decomposed, *words)
    assert [q.id for q in m.mcq] == ["q1", "q3", "q6", "q8", "q9"]
    assert any("q2" in str(x) and "repeats" in str(x) for x in m.problems), [str(x) for x in m.problems]


def test_a_group_listing_one_file_under_two_ids_is_a_bad_group(tmp_path):
    """A group whose video ids resolve to the same file is reported naming the group and skipped."""
    vids = [_video_line(id="v0", path="same.mp4"), _video_line(id="v1", path="same.mp4"),
            _video_line(id="v2", path="v2.mp4"), _video_line(id="v3", path="v3.mp4")]
    group = {"type": "group", "id": "g1", "domain": "cooking", "bucket": "short", "P": 4,
             "videos": ["v0", "v1", "v2", "v3"]}
    m = _load_lines(tmp_path, *vids, group)
    assert m.groups == []
    assert any("g1" in str(x) for x in m.problems), [str(x) for x in m.problems]


def test_one_file_under_two_spellings_is_one_file(tmp_path):
    """``sub/../same.mp4`` and a link to ``same.mp4`` name ``same.mp4``: a group holding two of them is a bad
    group (the clip would take two positions of every ordering), and the file's problem is reported once."""
    from pytest_posbias.data.manifest import load_manifest

    (tmp_path / "sub").mkdir()
    (tmp_path / "same.mp4").write_text("not a video")
    (tmp_path / "link.mp4").symlink_to(tmp_path / "same.mp4")
    vids = [_video_line(id="v0", path="same.mp4"), _video_line(id="v1", path="sub/../same.mp4"),
            _video_line(id="v2", path="link.mp4"), _video_line(id="v3", path="v3.mp4")]
    group = {"type": "group", "id": "g1", "domain": "cooking", "bucket": "short", "P": 4,
             "videos": ["v0", "v1", "v2", "v3"]}
    m = _load_lines(tmp_path, *vids, group)
    assert m.groups == []
    assert any("'v0' and 'v1' are the same file" in str(x) for x in m.problems), [str(x) for x in m.problems]
    m = load_manifest(tmp_path / "m.jsonl", open_videos=True)
    assert sorted(x.item for x in m.file_problems) == ["video 'v0'", "video 'v3'"], [str(x) for x in m.file_problems]
    # through a folder that does not exist, the path opens no file: its own problem, not the file's it spells
    m = _load_lines(tmp_path, _video_line(id="v0", path="same.mp4"), _video_line(id="v1", path="nope/../same.mp4"))
    m = load_manifest(tmp_path / "m.jsonl")
    assert sorted(x.item for x in m.file_problems) == ["video 'v1'"], [str(x) for x in m.file_problems]


def test_an_mcq_window_after_its_videos_declared_end_is_a_problem(tmp_path):
    """An mcq whose start lies past its manifest video's declared duration is reported naming the item and skipped."""
    mcq = {"type": "mcq", "id": "q1", "video": "v1", "question": "What?", "options": ["a", "b"], "answer": 0,
           "start": 50.0, "end": 55.0}
    m = _load_lines(tmp_path, _video_line(duration=42.0), mcq, {**mcq, "id": "q2", "start": 10.0, "end": 20.0})
    assert [q.id for q in m.mcq] == ["q2"]
    assert any("q1" in str(x) for x in m.problems), [str(x) for x in m.problems]
