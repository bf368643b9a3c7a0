"""Data that vanished is planned and lost, never unplanned: a manifest item whose video file is
missing, a symbolic link loop, a path too long for the file system, unreadable or empty stays in
the plan, its units count as lost with the problem as their reason, and a warning at the start of
the run names each one. Bad annotation files and paths get one clear line, never a traceback."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.data.manifest import load_manifest, require_usable
from pytest_posbias.errors import ConfigError, VideoNotFoundError
from pytest_posbias.run_options import RunOptions
from pytest_posbias.video import decode as D
from pytest_posbias.video import files as F

GONE = ("syn-news-short-00", "syn-news-short-05")  # 2 of the configuration's 6 videos


def _without(small_set: Path, out: Path, gone: tuple[str, ...] = GONE) -> Path:
    """``small_set``'s manifest with absolute paths, the videos ``gone`` pointing at files that do not exist."""
    lines = []
    for line in small_set.read_text().splitlines():
        d = json.loads(line)
        if d["type"] == "video":
            d["path"] = str(small_set.parent / d["path"])
            if d["id"] in gone:
                d["path"] = str(out.parent / f"gone-{d['id']}.mp4")
        lines.append(json.dumps(d))
    out.write_text("\n".join(lines) + "\n")
    return out


def _ctx(tmp_path: Path, manifest: Path):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext

    return RunContext.create(RunOptions(models=("sim:middle-weak",), data=str(manifest), cache=str(tmp_path / "cache"),
                                        sequential=False, n_resamples=999),
                             PosbiasConfig(), rootdir=tmp_path, worker="t",
                             run_id="vanished")


def test_missing_videos_are_planned_and_lost_so_a_middle_weak_model_no_longer_passes_meg(tmp_path, small_set):
    """2 of 6 videos missing: the groups that need them are lost (44 of the 48 instances), below the
    floor, so MEG does not pass; before, they were dropped at load and MEG passed on the one group left."""
    from pytest_posbias.gates import positional_verdict
    from pytest_posbias.probes.positional import PositionalSpec

    manifest = _without(small_set, tmp_path / "m.jsonl")
    m = load_manifest(manifest)
    assert set(GONE) <= set(m.videos)  # kept: the plan is the manifest
    assert {p.item for p in m.file_problems} == {f"video {v!r}" for v in GONE}
    assert all(p.kind == "missing-video" and "file does not exist" in p.message for p in m.file_problems)
    groups = m.groups_for("news", "short", 4)
    needing = [g for g in groups if set(g.videos) & set(GONE)]
    assert len(groups) == 12 and len(needing) == 11
    ctx = _ctx(tmp_path, manifest)
    try:
        v = positional_verdict(ctx, "meg", "sim:middle-weak", PositionalSpec("news", "short", 4, groups=12))
        r = ctx.positional("sim:middle-weak", PositionalSpec("news", "short", 4, groups=12))
        seen = {p.file: p for p in ctx.store.problems.values()}
    finally:
        ctx.close()
    assert r.planned == 48 and r.lost["unusable_data"] == 44 and r.groups_planned == 12
    assert not v.passed
    assert "measurement floor not met: 4 of 48 planned" in v.reason and "unusable data 44" in v.reason
    gone_files = {str(tmp_path / f"gone-{g}.mp4") for g in GONE}
    assert gone_files <= set(seen) and all(seen[f].kind == "missing-video" for f in gone_files)


def test_every_kind_of_vanished_file_is_kept_and_named_like_an_empty_one(tmp_path, synthetic_clips):
    good = synthetic_clips[0]
    loop = tmp_path / "loop.mp4"
    os.symlink(loop, loop)  # a link to itself
    dangling = tmp_path / "dangling.mp4"
    os.symlink(tmp_path / "nowhere.mp4", dangling)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    long_path = tmp_path / ("x" * 5000 + ".mp4")
    paths = {"good": good, "missing": tmp_path / "missing.mp4", "loop": loop, "dangling": dangling, "empty": empty,
             "long": long_path, "folder": tmp_path}
    lines = [{"type": "video", "id": k, "path": str(p), "domain": "d", "bucket": "short", "references": ["x"]}
             for k, p in paths.items()]
    lines += [{"type": "mcq", "id": f"q-{k}", "video": k, "question": "?", "options": ["a", "b"], "answer": 0} for k in paths]
    lines.append({"type": "mcq", "id": "q-path", "video": str(tmp_path / "by-path.mp4"), "question": "?",
                  "options": ["a", "b"], "answer": 1})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    m = load_manifest(manifest)
    assert m.problems == [] and list(m.videos) == list(paths) and len(m.mcq) == len(paths) + 1
    by_item = {p.item: p for p in m.file_problems}
    expected = {"video 'missing'": ("missing-video", "file does not exist"),
                "video 'loop'": ("inaccessible-video", "symbolic link loop"),
                "video 'dangling'": ("missing-video", "a symbolic link to a missing target"),
                "video 'empty'": ("empty-video", "file is empty (0 bytes)"),
                "video 'long'": ("inaccessible-video", "the path is too long for the file system (5"),
                "video 'folder'": ("unreadable-video", "folder holds no frame images"),
                "mcq 'q-path'": ("missing-video", "is not a video id of the manifest either")}
    assert set(by_item) == set(expected)
    for item, (kind, words) in expected.items():
        assert by_item[item].kind == kind and words in by_item[item].message, by_item[item]
        assert "(manifest line " in by_item[item].message
    text = str(by_item["video 'long'"])
    assert len(text) < 600 and "characters ...]" in text  # the 5,000-character path is shown by its two ends
    # the probe-time check gives the same kind: the unit is lost with this reason
    for k in ("loop", "long", "dangling"):
        with pytest.raises(D.VideoError) as info:
            D.probe(paths[k])
        assert F.problem_kind(info.value) == by_item[f"video {k!r}"].kind


def test_permission_denied_is_an_inaccessible_video(tmp_path, monkeypatch):
    """(Root reads everything, so the refusal is simulated where the check asks the file system.)"""
    f = tmp_path / "locked.mp4"
    f.write_bytes(b"\x00" * 64)
    real = Path.stat

    def stat(self, *a, **kw):
        if self == f:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "stat", stat)
    with pytest.raises(F.InaccessibleVideoError, match="permission denied"):
        F.check_video_path(f)
    monkeypatch.setattr(Path, "stat", real)
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != f)
    with pytest.raises(F.InaccessibleVideoError, match="permission denied"):
        F.check_video_path(f)


def test_missing_file_is_still_a_not_found_error(tmp_path):
    with pytest.raises(VideoNotFoundError, match="file does not exist"):
        F.check_video_path(tmp_path / "none.mp4")


def test_a_manifest_whose_every_video_is_gone_is_a_usage_error(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"type": "video", "id": "v", "path": "nope.mp4", "domain": "d", "bucket": "short",
                                    "references": ["x"]}) + "\n")
    with pytest.raises(ConfigError, match=r"no usable item in the manifest \(1 unusable video files: video 'v' .*file does "
                                          r"not exist"):
        require_usable(manifest)


def test_the_warning_at_start_names_each_unusable_video_before_any_model_call(pytester, tmp_path, small_set):
    manifest = _without(small_set, tmp_path / "m.jsonl")
    long_line = {"type": "video", "id": "far", "path": str(tmp_path / ("y" * 5000)), "domain": "news", "bucket": "short",
                 "references": ["x"]}
    with manifest.open("a") as fh:
        fh.write(json.dumps(long_line) + "\n")
    write_suite_project(pytester.path, manifest, ("test_positional.py",))
    res = pytester.runpytest("--collect-only", "-q", "-m", "meg", "--posbias-model", "sim:middle-weak")
    out = res.stdout.str()
    assert res.ret == 0 and "INTERNALERROR" not in out and "Traceback" not in out, out[-3000:]
    warning = [ln for ln in out.splitlines() if ln.startswith("[posbias]")]
    assert "3 video files of the manifest cannot be used" in warning[0]
    for vid in GONE:
        assert any(f"video {vid!r}" in ln and "file does not exist" in ln for ln in warning), warning
    assert any("video 'far'" in ln and "too long" in ln and len(ln) < 600 for ln in warning), warning


def test_data_validate_lists_unusable_video_files(tmp_path, synthetic_clips):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"type": "video", "id": k, "path": str(p), "domain": "d", "bucket": "short",
                                            "references": ["x"]}) + "\n"
                                for k, p in (("ok", synthetic_clips[0]), ("gone", tmp_path / "gone.mp4"))))
    res = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "data", "validate", "--out", str(manifest)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "0 bad lines; 1 unusable video files" in res.stdout and "video 'gone'" in res.stdout


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_posbias.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("fmt", "name", "body"), [
    ("activitynet", "train.json", '{"v_1": {"duration": 30, "sentences": ["Un caf\u00e9."], "timestamps": [[0, 5]]}}'),
    ("egoschema", "questions.json", '[{"q_uid": "1", "question": "Qu\u2019est-ce que c\u2019est ?"}]'),
    ("nextqa", "val.csv", "video,qid,question,answer,a0,a1,a2,a3,a4\n1,0,pourquoi l\u00e0,0,a,b,c,d,e\n"),
], ids=["activitynet", "egoschema", "nextqa"])
def test_import_of_annotations_that_are_not_utf8_names_the_file_and_the_byte(tmp_path, fmt, name, body):
    videos = tmp_path / "videos"
    videos.mkdir()
    ann = tmp_path / name
    ann.write_bytes(body.encode("cp1252"))
    bad = next(i for i, b in enumerate(ann.read_bytes()) if b > 0x7F)
    res = _cli("data", "import", fmt, "--videos", str(videos), "--annotations", str(ann), "--out", str(tmp_path / "m.jsonl"))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip() == (f"posbias data: error: --annotations {ann}: not UTF-8 text (byte "
                                  f"0x{ann.read_bytes()[bad]:02x} at byte offset {bad}); save it as UTF-8")
    assert not (tmp_path / "m.jsonl").exists()


def test_import_accepts_utf8_annotations_with_a_byte_order_mark(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    ann = tmp_path / "val.csv"
    ann.write_bytes(b"\xef\xbb\xbf" + "video,qid,question,answer,a0,a1,a2,a3,a4\n1,0,pourquoi là,0,a,b,c,d,e\n".encode())
    res = _cli("data", "import", "nextqa", "--videos", str(videos), "--annotations", str(ann), "--out", str(tmp_path / "m.jsonl"))
    # the header and the row were read through the byte order mark: the one entry is skipped only
    # because its video is not there, and with no usable entry the import is an error naming why
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "all 1 entries skipped: 1 video not found under --videos (e.g. nextqa-1-0)" in res.stderr
