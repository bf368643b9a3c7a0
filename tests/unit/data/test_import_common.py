"""data.import_common: the import report, the video index, the paper's duration buckets, reading annotation
files (errors name the option and the file) and an import with nothing usable."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_posbias.data.import_captions import import_activitynet
from pytest_posbias.data.import_common import ImportReport, VideoIndex, bucket_of
from pytest_posbias.errors import ConfigError


def test_an_import_with_no_usable_entry_is_an_error_that_writes_nothing(tmp_path, capsys):
    """Every entry skipped: the command names the annotations and why, exits 2 and leaves no empty manifest."""
    from pytest_posbias.cli import main

    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps([{"video": "a.mp4"}, {"video": "b.mp4"}]))
    out = tmp_path / "m.jsonl"
    assert main(["data", "import", "mvbench", "--annotations", str(ann), "--videos", str(tmp_path),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--annotations {ann}: no usable mvbench entry" in err
    assert "all 2 entries skipped: 2 missing 'question' or 'video' string" in err
    assert not out.exists() and not out.with_suffix(".jsonl.import.json").exists()


def test_report_counts_every_skip_keeps_five_examples_and_counts_missing_videos():
    """skip(): every entry counted by reason, the first five ids kept as examples, missing videos counted apart."""
    rep = ImportReport("news")
    for k in range(7):
        rep.skip(f"id{k}", "video not found under --videos")
    rep.skip("x", "not valid JSON")
    assert rep.skipped == {"video not found under --videos": 7, "not valid JSON": 1}
    assert rep.examples["video not found under --videos"] == [f"id{k}" for k in range(5)]
    assert rep.missing_videos == 7


def test_report_lines_list_reasons_most_common_first_and_to_dict_survives_json():
    """lines(): the totals, then the reasons most common first with their examples; to_dict() is JSON as it is."""
    rep = ImportReport("mvbench")
    rep.written.update({"mcq": 3})
    rep.skip("a", "rare")
    for k in range(3):
        rep.skip(f"b{k}", "common")
    lines = rep.lines()
    assert lines[0] == "mvbench: wrote 3 mcq lines"
    assert lines[1] == "skipped 4 entries; videos missing: 0"
    assert [line.split()[1] for line in lines[2:]] == ["common", "rare"]
    assert "(e.g. b0, b1, b2)" in lines[2]
    assert json.loads(json.dumps(rep.to_dict())) == {"format": "mvbench", "written": {"mcq": 3},
                                                      "skipped": {"rare": 1, "common": 3},
                                                      "examples": {"rare": ["a"], "common": ["b0", "b1", "b2"]},
                                                      "missing_videos": 0}


def test_video_index_of_a_missing_folder_is_an_error_naming_the_option(tmp_path):
    """--videos that is no directory: a ConfigError naming the option and the path."""
    with pytest.raises(ConfigError, match=r"--videos .*nowhere: no such directory"):
        VideoIndex(tmp_path / "nowhere")


def test_video_index_holds_video_files_of_any_case_and_frame_folders_not_other_files(tmp_path):
    """The index keeps video extensions (any case) and frame folders by stem; other files are not videos."""
    for name in ("a.mp4", "b.MKV", "c.webm", "notes.txt", "d.json"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "frames_e").mkdir()
    index = VideoIndex(tmp_path)
    assert set(index.by_stem) == {"a", "b", "c", "frames_e"}
    assert index.find("notes") is None and index.find("d") is None
    assert index.find("frames_e") == tmp_path / "frames_e"


def test_video_index_finds_the_first_stem_it_holds_in_the_order_asked(tmp_path):
    """find(*stems): the first of the stems, in argument order, that the index holds."""
    for name in ("v_x.mp4", "x.mp4"):
        (tmp_path / name).write_bytes(b"")
    index = VideoIndex(tmp_path)
    assert index.find("missing", "x", "v_x") == tmp_path / "x.mp4"
    assert index.find("v_x", "x") == tmp_path / "v_x.mp4"
    assert index.find("missing") is None


def test_video_index_looks_into_subfolders_only_when_recursive(tmp_path):
    """A video in a subfolder is found by a recursive index only (NExT-QA and MVBench keep videos in subfolders)."""
    sub = tmp_path / "1025"
    sub.mkdir()
    (sub / "4000.mp4").write_bytes(b"")
    assert VideoIndex(tmp_path).find("4000") is None
    assert VideoIndex(tmp_path, recursive=True).find("4000") == sub / "4000.mp4"


def test_video_index_paths_are_relative_to_the_manifest_folder(tmp_path):
    """relative(): a video's path as the manifest in ``out_dir`` refers to it."""
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "a.mp4").write_bytes(b"")
    index = VideoIndex(tmp_path / "videos")
    (tmp_path / "out").mkdir()
    assert index.relative(index.find("a"), tmp_path / "out") == "../videos/a.mp4"


@pytest.mark.parametrize(("duration", "bucket"), [
    (0.0, None), (0.001, "short"), (60.0, "short"), (60.001, "long"), (120.0, "long"), (120.001, None), (-5.0, None),
])
def test_bucket_edges_are_the_papers(duration, bucket):
    """Buckets are (0, 60] s short and (60, 120] s long, nothing outside."""
    assert bucket_of(duration) == bucket


@given(st.floats(allow_nan=False, allow_infinity=True))
def test_bucket_of_any_duration_agrees_with_the_interval_rule(duration):
    """bucket_of over any float matches the two half-open intervals written out directly."""
    want = "short" if 0 < duration <= 60 else "long" if 60 < duration <= 120 else None
    assert bucket_of(duration) == want


def _anet(path, text: bytes):
    path.write_bytes(text)
    return path


def test_a_missing_annotations_file_names_the_option_and_the_file(tmp_path):
    """An annotations file that is not there: a ConfigError naming --annotations and the file."""
    ann = tmp_path / "val_1.json"
    with pytest.raises(ConfigError, match=rf"--annotations {ann}: no such file"):
        import_activitynet(tmp_path, ann, tmp_path / "m.jsonl")


def test_annotations_not_in_utf8_name_the_byte_and_its_offset(tmp_path):
    """A Latin-1 file: the ConfigError names the offending byte and where it is, and writes nothing."""
    ann = _anet(tmp_path / "val_1.json", '{"v_a": {"sentences": ["caf\u00e9"]}}'.encode("latin-1"))
    offset = ann.read_bytes().index(b"\xe9")
    with pytest.raises(ConfigError, match=rf"--annotations {ann}: not UTF-8 text \(byte 0xe9 at byte offset {offset}\)"):
        import_activitynet(tmp_path, ann, tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()


def test_annotations_with_a_byte_order_mark_are_read(tmp_path):
    """A UTF-8 file saved with a byte-order mark (as Windows tools write it) imports like one without."""
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "a.mp4").write_bytes(b"")
    ann = _anet(tmp_path / "val_1.json",
                b"\xef\xbb\xbf" + json.dumps({"v_a": {"duration": 30, "sentences": ["One."]}}).encode())
    rep = import_activitynet(tmp_path / "videos", ann, tmp_path / "m.jsonl", groups=1)
    assert rep.written["video"] == 1


def test_annotations_that_are_not_json_name_the_line(tmp_path):
    """Broken JSON: the ConfigError names the file, the parser's message and the line."""
    ann = _anet(tmp_path / "val_1.json", b'{\n"v_a": {\n"duration": 3,,\n}}')
    with pytest.raises(ConfigError, match=rf"--annotations {ann}: not valid JSON \(.* at line 3\)"):
        import_activitynet(tmp_path, ann, tmp_path / "m.jsonl")


def test_a_finished_import_writes_its_summary_beside_the_manifest(tmp_path):
    """The .import.json summary counts exactly the lines the manifest holds, by type, and the skips."""
    (tmp_path / "videos").mkdir()
    data = {}
    for k in range(4):
        (tmp_path / "videos" / f"v{k}.mp4").write_bytes(b"")
        data[f"v_v{k}"] = {"duration": 30, "sentences": ["One."]}
    data["v_gone"] = {"duration": 30, "sentences": ["One."]}
    ann = _anet(tmp_path / "val_1.json", json.dumps(data).encode())
    out = tmp_path / "m.jsonl"
    import_activitynet(tmp_path / "videos", ann, out, groups=5)
    types = Counter(json.loads(x)["type"] for x in out.read_text().splitlines())
    summary = json.loads((tmp_path / "m.jsonl.import.json").read_text())
    assert summary["written"] == dict(types) and types["video"] == 4
    assert summary["skipped"] == {"video not found under --videos": 1} and summary["missing_videos"] == 1
