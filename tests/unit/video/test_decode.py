"""Decoding (video.decode): a video's frame count, fps and duration, exactly the requested indices,
resizing that keeps the frame barcode, and named errors for bad inputs and truncated files."""

from __future__ import annotations

import numpy as np
import pytest
from support.synthetic_frames import read_barcode

from pytest_posbias.errors import FrameRangeError, VideoDecodeError, VideoError, VideoNotFoundError
from pytest_posbias.video import files
from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.decode import content_hash, probe, read_frames
from pytest_posbias.video.sampling import frame_indices


def test_probe_reports_count_fps_duration(clip):
    path, scene = clip
    info = probe(path)
    assert info.frame_count == scene.frame_count
    assert info.fps == pytest.approx(SY.FPS)
    assert info.duration == pytest.approx(scene.frame_count / SY.FPS)
    assert (info.width, info.height) == (SY.WIDTH, SY.HEIGHT)
    assert info.sha256 == content_hash(path) and len(info.sha256) == 64


@pytest.mark.parametrize("backend", ["decord", "av"])
def test_decoding_returns_exactly_the_requested_indices(clip, backend):
    if backend == "decord":
        pytest.importorskip("decord")  # installed on x86_64 only: an ARM machine reads with PyAV
    path, scene = clip
    idx = sorted({0, 1, 7, 57, 58, scene.frame_count // 2, scene.frame_count - 1})
    frames = read_frames(path, idx, size=None, aspect="none", backend=backend)
    assert [read_barcode(f) for f in frames] == idx
    # out of order and repeated indices come back in the order asked
    order = [idx[3], idx[0], idx[3]]
    again = read_frames(path, order, size=None, aspect="none", backend=backend)
    assert [read_barcode(f) for f in again] == order


def test_resized_frames_keep_their_barcode(clip):
    path, scene = clip
    idx = frame_indices(scene.frame_count, 16, convention="left")
    frames = read_frames(path, idx)  # default 448×448 stretch
    assert frames.shape == (16, 448, 448, 3) and frames.dtype == np.uint8
    assert [read_barcode(f) for f in frames] == idx
    pad = read_frames(path, idx[:2], size=448, aspect="pad")
    assert pad.shape == (2, 448, 448, 3) and pad[:, :20].max() == 0  # letterbox rows are black
    small = read_frames(path, idx[:2], size=128, aspect="max-side")
    assert small.shape == (2, 96, 128, 3)
    same = read_frames(path, idx[:2], size=360, aspect="max-side")  # never upscales
    assert same.shape == (2, SY.HEIGHT, SY.WIDTH, 3)


def test_bad_inputs_give_named_errors(tmp_path, clip):
    path, scene = clip
    with pytest.raises(VideoNotFoundError, match="missing.mp4: file does not exist"):
        probe(tmp_path / "missing.mp4")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(VideoDecodeError, match=r"empty.mp4: file is empty \(0 bytes\)"):
        probe(empty)
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 10)
    with pytest.raises(VideoDecodeError, match="notes.mp4: not a readable video"):
        probe(text)
    data = path.read_bytes()
    trunc = tmp_path / "truncated.mp4"
    trunc.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoDecodeError, match="truncated.mp4"):
        probe(trunc)
    with pytest.raises(FrameRangeError, match=rf"clip has {scene.frame_count} frames"):
        read_frames(path, [0, scene.frame_count + 5])
    with pytest.raises(FrameRangeError, match="window start 500.0 s lies after the clip's end"):
        frame_indices(scene.frame_count, 8, convention="left", fps=SY.FPS, start=500.0, end=600.0)
    assert issubclass(VideoDecodeError, VideoError)


def test_truncated_faststart_file_is_an_error_not_a_crash(tmp_path):
    import av

    src = tmp_path / "fs.mp4"
    with av.open(str(src), "w", options={"movflags": "faststart"}) as c:
        s = c.add_stream("libx264", rate=6)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        for i in range(120):
            for p in s.encode(av.VideoFrame.from_ndarray(np.full((64, 64, 3), i, np.uint8), format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    data = src.read_bytes()
    bad = tmp_path / "fs_trunc.mp4"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoError, match="fs_trunc.mp4"):
        info = probe(bad)  # may succeed from the header ...
        read_frames(bad, [0, info.frame_count - 1], info=info)  # ... but the tail cannot be decoded


def test_resized_shape_is_the_shape_resize_frames_gives():
    from pytest_posbias.video.decode import ASPECTS, resize_frames, resized_shape

    for h, w in ((30, 50), (50, 30), (40, 40), (7, 300)):
        frames = np.zeros((1, h, w, 3), dtype=np.uint8)
        for size in (None, 16, 40, 64, 333):
            for aspect in ASPECTS:
                assert resized_shape(h, w, size, aspect) == resize_frames(frames, size, aspect).shape[1:3], (h, w, size, aspect)
    with pytest.raises(VideoError, match="aspect"):
        resized_shape(10, 10, 8, "crop")




def _frame_folder(folder, n=4):
    from PIL import Image

    folder.mkdir()
    for i in range(n):
        Image.fromarray(np.full((8, 8, 3), 10 * i, np.uint8)).save(folder / f"{i}.png")
    return folder


@pytest.mark.parametrize("text", ["0", "three", "", "nan", "-3", "inf"])
def test_a_frame_folder_with_an_unusable_fps_file_is_a_video_error(tmp_path, text):
    """A frame folder whose fps.txt is not a positive finite number is a VideoDecodeError naming the folder."""
    folder = _frame_folder(tmp_path / "frames")
    (folder / "fps.txt").write_text(text)
    with pytest.raises(VideoDecodeError, match="frames"):
        probe(folder)


def test_a_frame_folder_with_a_good_fps_file_uses_it(tmp_path):
    """fps.txt sets a frame folder's frame rate; without it the folder is read at 3 fps."""
    folder = _frame_folder(tmp_path / "frames")
    assert probe(folder).fps == 3.0 and probe(folder).duration == pytest.approx(4 / 3)
    (folder / "fps.txt").write_text(" 8\n")
    info = probe(folder)
    assert (info.frame_count, info.fps, info.duration, info.backend) == (4, 8.0, 0.5, "frames")


def test_frames_removed_from_a_folder_after_its_probe_are_a_video_error(tmp_path):
    """Reading a frame a folder lost after it was probed is a VideoError naming the folder (a lost unit, no crash)."""
    folder = _frame_folder(tmp_path / "frames")
    info = probe(folder)
    (folder / "3.png").unlink()
    with pytest.raises(VideoError, match="frames"):
        read_frames(folder, [0, 3], size=None, aspect="none", info=info)


def test_a_video_deleted_after_its_probe_is_reported_missing(tmp_path, clip):
    """A clip removed after it was probed is a VideoNotFoundError (kind missing-video), not a truncated file."""
    import shutil

    from pytest_posbias.video.files import problem_kind

    path = shutil.copy(clip[0], tmp_path / "gone.mp4")
    info = probe(path)
    path.unlink()
    with pytest.raises(VideoError) as exc:
        read_frames(path, [0, 1], info=info)
    assert problem_kind(exc.value) == "missing-video", exc.value


def test_a_path_with_a_nul_character_is_a_video_error():
    """probe of a path holding a NUL character raises a VideoError, the kind a unit is lost with."""
    with pytest.raises(VideoError):
        probe("clip\x00.mp4")


def test_pyav_reads_the_kth_frame_of_a_variable_frame_rate_clip(tmp_path):
    """PyAV's frame k is the k-th frame shown, as decord's, not the frame at time k / average fps."""
    import fractions

    import av

    path = tmp_path / "vfr.mp4"
    tb = fractions.Fraction(1, 1000)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=10)
        s.width, s.height, s.pix_fmt, s.options = 64, 64, "yuv420p", {"crf": "0"}
        s.codec_context.time_base = tb
        for i in range(30):  # 20 fps for 15 frames, then about 6.7 fps
            f = av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 8, np.uint8), format="rgb24")
            f.pts, f.time_base = 50 * min(i, 15) + 150 * max(0, i - 15), tb
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    info = probe(path)
    for idx in ([0, 3, 6, 9], list(range(30))):
        frames = read_frames(path, idx, size=None, aspect="none", backend="av", info=info)
        assert [round(int(f[0, 0, 0]) / 8) for f in frames] == idx


def _edit_list_clip(path):
    """A 40-frame MP4 (frame i has value 6i) whose edit list hides its first 5 frames, as a stream-copy cut does."""
    import fractions

    import av

    tb = fractions.Fraction(1, 1000)
    with av.open(str(path), "w") as c:  # pts below 0: the muxer writes an edit list that hides those frames
        s = c.add_stream("libx264", rate=25)
        s.width, s.height, s.pix_fmt, s.options = 64, 64, "yuv420p", {"crf": "0", "bf": "0"}
        s.codec_context.time_base = tb
        for i in range(40):
            f = av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 6, np.uint8), format="rgb24")
            f.pts, f.time_base = (i - 5) * 40, tb
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_pyav_counts_only_the_frames_shown_of_a_clip_with_an_edit_list(tmp_path):
    """PyAV's frame k of an MP4 whose edit list hides its first packets is the k-th frame shown, not lost or shifted."""
    import av

    path = _edit_list_clip(tmp_path / "cut.mp4")
    with av.open(str(path)) as c:
        shown = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(shown) == 35
    idx = [0, 3, 10, 20, 34]
    frames = read_frames(path, idx, size=None, aspect="none", backend="av", info=probe(path))
    assert [int(f[0, 0, 0]) for f in frames] == [int(shown[k][0, 0, 0]) for k in idx]


def test_pyav_probe_counts_the_frames_an_edit_list_shows(tmp_path, monkeypatch):
    """Without decord, the frame count of an MP4 whose edit list hides its first packets is the frames shown."""
    from pytest_posbias.video import decode

    path = _edit_list_clip(tmp_path / "cut.mp4")
    monkeypatch.setattr(decode, "_with_decord", lambda *a, **k: None)
    info = probe(path)
    assert (info.backend, info.frame_count) == ("av", 35)
    last = read_frames(path, [info.frame_count - 1], size=None, aspect="none", backend="av", info=info)
    assert int(last[0, 0, 0, 0]) == 39 * 6


def _encoded_clip(path, codec, options, *, frames=90, size=64, fmt=None):
    """A clip of ``frames`` frames at 30 fps (frame i has value 2i mod 250) encoded with ``codec``; the
    container ``fmt``, else from the suffix."""
    import av

    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=30)
        s.width, s.height, s.pix_fmt, s.options = size, size, "yuv420p", options
        for i in range(frames):
            pixels = np.full((size, size, 3), i * 2 % 250, np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


@pytest.mark.parametrize("fmt", ["mpegts", "flv"])
def test_pyav_reads_any_frame_of_a_clip_whose_demuxer_seeks_past_timestamps(tmp_path, fmt):
    """PyAV reads every frame of an MPEG-TS or FLV clip, where a seek to a frame's own timestamp lands after it."""
    import av

    path = _encoded_clip(tmp_path / f"clip.{fmt}", "libx264", {"crf": "0", "g": "30", "sc_threshold": "0"},
                         frames=120, fmt=fmt)
    with av.open(str(path)) as c:
        shown = [int(f.to_ndarray(format="rgb24")[0, 0, 0]) for f in c.decode(video=0)]
    info = probe(path)
    assert info.frame_count == len(shown) == 120
    for idx in ([4], [75, 76], [9, 28, 119], [119]):
        frames = read_frames(path, idx, size=None, aspect="none", backend="av", info=info)
        assert [int(f[0, 0, 0]) for f in frames] == [shown[k] for k in idx]


@pytest.mark.parametrize("name", ["cut.mp4", "mpeg4-bframes.mp4", "mpeg4-bframes.mkv", "h264.avi"])
def test_the_default_backend_reads_the_frames_shown_where_decord_seeks_wrong(tmp_path, name):
    """probe and read_frames' default backend give the frames shown of an edit-list cut, MPEG-4 Part 2 with B-frames, AVI."""
    import av

    if name == "cut.mp4":
        path = _edit_list_clip(tmp_path / name)
    elif name == "h264.avi":
        path = _encoded_clip(tmp_path / name, "libx264", {"crf": "0", "g": "30"})
    else:
        path = _encoded_clip(tmp_path / name, "mpeg4", {"qscale": "2", "bf": "2"})
    with av.open(str(path)) as c:
        shown = [int(f.to_ndarray(format="rgb24")[0, 0, 0]) for f in c.decode(video=0)]
    info = probe(path)
    assert info.frame_count == len(shown)
    for idx in ([len(shown) - 1], [len(shown) // 2, len(shown) // 2 + 1], [3, 17, 31]):
        frames = read_frames(path, idx, size=None, aspect="none", info=info)
        assert [int(f[0, 0, 0]) for f in frames] == [shown[k] for k in idx]


def test_pyav_probe_of_an_mp4_cut_short_after_its_header_is_a_truncation(tmp_path, monkeypatch):
    """Without decord, an MP4 cut short after its index has the frames the index lists; the lost ones fail as truncated."""
    import av

    from pytest_posbias.video import decode

    whole = tmp_path / "whole.mp4"
    with av.open(str(whole), "w", options={"movflags": "faststart"}) as c:  # the index first, then the frames
        s = c.add_stream("libx264", rate=30)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        for i in range(90):
            noise = np.random.default_rng(i).integers(0, 256, (64, 64, 3), np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(noise, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 6 // 10])
    monkeypatch.setattr(decode, "_with_decord", lambda *a, **k: None)
    info = probe(cut)
    assert (info.backend, info.frame_count) == ("av", 90)
    assert read_frames(cut, [0], size=None, aspect="none", info=info).shape == (1, 64, 64, 3)
    with pytest.raises(files.TruncatedVideoError, match="truncated"):
        read_frames(cut, [0, 45, 89], size=None, aspect="none", info=info)


def test_pyav_reads_the_first_frames_of_an_mpeg2_transport_stream(tmp_path):
    """A seek to the first keyframe of an MPEG-TS file lands past it: the reader then decodes from the start of
    the file, so the first frames are read, not lost as truncated."""
    import av

    path = _encoded_clip(tmp_path / "m2.ts", "mpeg2video", {"g": "300", "bf": "2", "qscale": "2"}, frames=400,
                         fmt="mpegts")
    with av.open(str(path)) as c:
        shown = [int(f.to_ndarray(format="rgb24")[0, 0, 0]) for f in c.decode(video=0)]
    info = probe(path)
    for idx in ([0], [5], [0, 5, 200, 399]):
        frames = read_frames(path, idx, size=None, aspect="none", backend="av", info=info)
        assert [int(f[0, 0, 0]) for f in frames] == [shown[k] for k in idx]


def test_pyav_decodes_forward_within_a_long_gop_and_seeks_across_keyframes(tmp_path, monkeypatch):
    """Far-apart frames with no keyframe between them are decoded on from the last one (one seek), while a
    frame past a later keyframe is sought; the frames read are the frames shown either way."""
    import av

    path = _encoded_clip(tmp_path / "long-gop.mp4", "libx264",  # keyframes at 0 and 300
                         {"crf": "0", "g": "300", "keyint_min": "300", "sc_threshold": "0"}, frames=600, size=32)
    with av.open(str(path)) as c:
        shown = [int(f.to_ndarray(format="rgb24")[0, 0, 0]) for f in c.decode(video=0)]
    info = probe(path)
    seeks: list[int] = []
    real_open = av.open

    class Counting:
        def __init__(self, container):
            self._c = container

        def __enter__(self):
            self._c.__enter__()
            return self

        def __exit__(self, *exc):
            return self._c.__exit__(*exc)

        def __getattr__(self, name):
            return getattr(self._c, name)

        def seek(self, ts, **kw):
            seeks.append(ts)
            return self._c.seek(ts, **kw)

    monkeypatch.setattr(av, "open", lambda *a, **kw: Counting(real_open(*a, **kw)))
    for idx, n_seeks in (([10, 150, 290], 1), ([10, 290, 450], 2)):
        seeks.clear()
        frames = read_frames(path, idx, size=None, aspect="none", backend="av", info=info)
        assert [int(f[0, 0, 0]) for f in frames] == [shown[k] for k in idx]
        assert len(seeks) == n_seeks, (idx, seeks)


def _clip_with_audio(path, video_codec, audio_codec, audio_seconds):
    """3 s of 30 fps video (frame i has value 2i) and ``audio_seconds`` of mono noise, interleaved as muxed."""
    import av

    with av.open(str(path), "w") as c:
        v = c.add_stream(video_codec, rate=30)
        v.width, v.height, v.pix_fmt = 64, 64, "yuv420p"
        a = c.add_stream(audio_codec, rate=48000)
        for i in range(90):
            for p in v.encode(av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 2, np.uint8), format="rgb24")):
                c.mux(p)
        for p in v.encode():
            c.mux(p)
        step = a.codec_context.frame_size or 1024
        for k in range(0, int(audio_seconds * 48000), step):
            samples = (np.random.default_rng(k).standard_normal((1, step)) * 0.1).astype(np.float32)
            frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 48000, k
            for p in a.encode(frame):
                c.mux(p)
        for p in a.encode():
            c.mux(p)
    return path


@pytest.mark.parametrize("decord", [True, False], ids=["default", "without-decord"])
@pytest.mark.parametrize(("name", "video_codec", "audio_codec"),
                         [("clip.mkv", "libx264", "aac"), ("clip.mkv", "mpeg4", "libopus"),
                          ("clip.flv", "libx264", "aac"), ("clip.ts", "libx264", "aac"),
                          ("clip.ts", "mpeg2video", "mp2")])
def test_a_matroska_flv_or_mpegts_file_cut_short_is_truncated_not_a_shorter_clip(tmp_path, monkeypatch, name,
                                                                                   video_codec, audio_codec, decord):
    """Matroska, WebM, FLV and MPEG-TS keep no frame count: a file that ends inside its own structure (a Matroska
    Segment declaring more bytes than the file holds, an FLV tag or a transport packet cut short) is lost as
    truncated, however few bytes are missing (it probed as a shorter clip); a whole file whose audio outlasts
    its video is not.
    WebM is read by the Matroska demuxer the check keys on; it is not written here, as libvpx cannot open
    in a process that has loaded decord (decord bundles its own FFmpeg libraries)."""
    from pytest_posbias.video import decode

    if not decord:
        monkeypatch.setattr(decode, "_with_decord", lambda *a, **k: None)
    whole = _clip_with_audio(tmp_path / name, video_codec, audio_codec, 3.7)
    assert probe(whole).frame_count == 90
    data = whole.read_bytes()
    for cut_bytes in (len(data) * 4 // 10 + 3, len(data) // 20, 5):  # at 5% every video frame is left, not the audio
        cut = tmp_path / f"cut-{cut_bytes}-{name}"
        cut.write_bytes(data[:-cut_bytes])
        with pytest.raises(files.TruncatedVideoError, match=r"truncated: its (Segment declares \d+ bytes|last (tag|"
                                                           r"188-byte transport packet) ends at byte \d+), the file holds"
                                                           rf" {len(data) - cut_bytes}$") as exc:
            probe(cut)
        assert files.problem_kind(exc.value) == "truncated-video"


@pytest.mark.parametrize("decord", [True, False], ids=["default", "without-decord"])
def test_a_transport_stream_is_checked_from_its_first_sync_byte_and_padding_is_no_cut(tmp_path, monkeypatch, decord):
    """A whole MPEG-TS file followed by padding (bytes that start no packet) is read whole; one that starts
    mid-packet (a capture cut at its start) and is cut short at its end is truncated; M2TS has 192-byte packets."""
    from pytest_posbias.video import decode

    if not decord:
        monkeypatch.setattr(decode, "_with_decord", lambda *a, **k: None)
    for name in ("clip.ts", "clip.m2ts"):
        data = _clip_with_audio(tmp_path / name, "libx264", "aac", 3.7).read_bytes()
        n = 192 if name.endswith("m2ts") else 188
        padded = tmp_path / f"padded-{name}"
        padded.write_bytes(data + bytes(2048 - len(data) % 2048))
        assert probe(padded).frame_count == 90
        late = tmp_path / f"late-{name}"
        late.write_bytes(data[100:-50])
        with pytest.raises(files.TruncatedVideoError, match=rf"its last {n}-byte transport packet ends at byte "
                                                            rf"{len(data) - 100}, the file holds {len(data) - 150}$"):
            probe(late)
        cut = tmp_path / f"cut-{name}"
        cut.write_bytes(data[:-2])  # M2TS: what is left of the last packet holds its sync byte
        with pytest.raises(files.TruncatedVideoError):
            probe(cut)
