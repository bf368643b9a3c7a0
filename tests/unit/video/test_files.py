"""A video's file before decoding (video.files): the path checks and the error kind each problem is lost
with, container signatures, frame folders and shortened paths in messages."""

from __future__ import annotations

import os

import pytest

from pytest_posbias.errors import VideoDecodeError, VideoNotFoundError
from pytest_posbias.video import files as F


def test_each_path_problem_is_its_own_error_kind(tmp_path):
    """Missing, a dangling link, empty, a folder without frames, a NUL character: each a named error and kind."""
    cases = []
    cases.append((tmp_path / "missing.mp4", VideoNotFoundError, "file does not exist", "missing-video"))
    link = tmp_path / "dangling.mp4"
    os.symlink(tmp_path / "nowhere.mp4", link)
    cases.append((link, VideoNotFoundError, "a symbolic link to a missing target", "missing-video"))
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    cases.append((empty, F.EmptyVideoError, r"file is empty \(0 bytes\)", "empty-video"))
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "notes.txt").write_text("no images")
    cases.append((folder, VideoDecodeError, "folder holds no frame images", "unreadable-video"))
    cases.append((tmp_path / "a\x00.mp4", F.InaccessibleVideoError, r"holds a NUL character \(\\x00\)",
                  "inaccessible-video"))
    for path, cls, words, kind in cases:
        with pytest.raises(cls, match=words) as exc:
            F.check_video_path(path)
        assert F.problem_kind(exc.value) == kind, path


def test_a_readable_file_and_a_frame_folder_pass_the_path_check(tmp_path):
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"\x00\x00\x00\x18ftypisom")
    F.check_video_path(clip)
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "0.png").write_bytes(b"")
    F.check_video_path(folder)


@pytest.mark.parametrize(("head", "want"), [
    (b"\x00\x00\x00\x18ftypisom", True), (b"\x1a\x45\xdf\xa3\x01", True), (b"FLV\x01", True), (b"OggS\x00", True),
    (b"RIFF\x00\x00\x00\x00AVI LIST", True), (b"\x00\x00\x01\xba", True), (b"RIFF\x00\x00\x00\x00WAVEfmt ", False),
    (b"this is not a video", False), (b"\x47" + bytes(187) + b"\x47", True), (b"\x47" + bytes(187) + b"\x00", False)])
def test_container_signatures(tmp_path, head, want):
    """A file starting like MP4/MOV, Matroska, FLV, Ogg, AVI, MPEG-PS or MPEG-TS (a sync byte every 188) is a container."""
    path = tmp_path / "f.bin"
    path.write_bytes(head + bytes(200))
    assert F.has_container_signature(path) is want


def test_frame_files_are_in_natural_order_and_images_only(tmp_path):
    for name in ("10.png", "2.PNG", "1.jpg", "fps.txt", "frame_11.jpeg", "frame_9.jpeg"):
        (tmp_path / name).write_bytes(b"")
    assert [f.name for f in F.frame_files(tmp_path)] == ["1.jpg", "2.PNG", "10.png", "frame_9.jpeg", "frame_11.jpeg"]


def test_folder_fps_reads_fps_txt_or_defaults(tmp_path):
    assert F.folder_fps(tmp_path) == F.FRAME_FOLDER_FPS
    (tmp_path / "fps.txt").write_text("12.5\n")
    assert F.folder_fps(tmp_path) == 12.5
    (tmp_path / "fps.txt").write_text("-1")
    with pytest.raises(VideoDecodeError, match="positive finite number"):
        F.folder_fps(tmp_path)


def test_short_path_keeps_both_ends_of_a_long_path():
    assert F.short_path("a/b.mp4") == "a/b.mp4"
    long = "d/" * 150 + "clip.mp4"
    short = F.short_path(long)
    assert short.startswith("d/d/") and short.endswith("clip.mp4") and len(short) < len(long)
    assert "characters ...]" in short
