"""Decoding, the frame store, stressors, composition and the synthetic set.

The tests of several ``video`` modules together: ``decode.py``, ``frames.py``, ``stressors.py``,
``compose.py``, ``synthetic.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from support.synthetic_frames import brief_event_grid_hits, read_barcode

from pytest_posbias.errors import FrameRangeError, VideoDecodeError, VideoError, VideoNotFoundError
from pytest_posbias.metrics import cyclic_orders
from pytest_posbias.video import stressors as ST
from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.compose import ImagePart, TextPart, VideoPart, compose, summary_prompt
from pytest_posbias.video.decode import content_hash, probe, read_frames
from pytest_posbias.video.frames import FrameSpec, FrameStore
from pytest_posbias.video.sampling import frame_indices, polyphase_grids


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[Path, SY.SceneSpec]:
    scene = SY.make_scene("t-clip", "leisure", "short", seed=3, event_probability=1.0)
    path = tmp_path_factory.mktemp("clips") / "clip.mp4"
    SY.render_clip(scene, path)
    return path, scene


@pytest.fixture(scope="module")
def other_clip(tmp_path_factory) -> Path:
    scene = SY.make_scene("t-other", "news", "short", seed=11)
    path = tmp_path_factory.mktemp("clips2") / "other.mp4"
    return SY.render_clip(scene, path)


# --------------------------------------------------------------------------- decoding


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


def test_frame_store_decodes_each_video_once_in_a_cyclic_probe(tmp_path):
    paths = []
    for k in range(4):
        scene = SY.make_scene(f"c{k}", "cooking", "short", seed=100 + k)
        paths.append(SY.render_clip(scene, tmp_path / f"c{k}.mp4"))
    store = FrameStore()
    specs = [FrameSpec.from_video(p, frame_indices(probe(p).frame_count, 16, convention="left"), info=store.info(p)) for p in paths]
    for order in cyclic_orders(4):
        for slot in order:
            store.materialize(specs[slot])
    assert store.decodes == 4  # not 16
    # the on-disk cache: a new process (new store) decodes nothing
    disk = tmp_path / "frames"
    first = FrameStore(disk_dir=disk, disk_write_min_s=0)
    a = first.materialize(specs[0])
    second = FrameStore(disk_dir=disk)
    b = second.materialize(specs[0])
    assert first.disk_writes == 16 and second.decodes == 0 and second.disk_hits == 16
    assert np.array_equal(a, b)


@pytest.mark.parametrize(("size", "aspect"), [(64, "stretch"), (48, "max-side"), (None, "none")])
def test_a_cached_frame_of_another_size_is_a_miss_decoded_again_and_rewritten(tmp_path, synthetic_clips, size, aspect):
    """A PNG in the frame cache that decodes but has another resolution (an older cache, a copied
    folder) is not served: the frame is decoded again, has the size the spec names, and the file is
    rewritten, so the next store reads it from disk. A damaged PNG is rewritten the same way."""
    from PIL import Image

    clip = synthetic_clips[1]
    spec = FrameSpec.from_video(clip, [0, 4, 8], size=size, aspect=aspect, info=probe(clip))
    expected = read_frames(clip, [0, 4, 8], size=size, aspect=aspect)  # decoded without any cache
    disk = tmp_path / "frames"
    FrameStore(disk_dir=disk, disk_write_min_s=0).materialize(spec)
    pngs = sorted(disk.rglob("*.png"), key=lambda q: int(q.stem))
    assert len(pngs) == 3
    h, w = expected.shape[1:3]
    Image.new("RGB", (w + 7, h + 3), (200, 10, 10)).save(pngs[0])  # another resolution
    pngs[2].write_bytes(pngs[2].read_bytes()[:40])  # truncated: does not decode
    store = FrameStore(disk_dir=disk, disk_write_min_s=60.0)  # writes nothing it was not asked to repair
    got = store.materialize(spec)
    assert got.shape == expected.shape and np.array_equal(got, expected)
    assert store.decodes == 1 and store.disk_hits == 1 and store.disk_writes == 2
    assert np.asarray(Image.open(pngs[0])).shape == (h, w, 3)
    again = FrameStore(disk_dir=disk)
    assert np.array_equal(again.materialize(spec), expected) and again.decodes == 0 and again.disk_hits == 3


def test_resized_shape_is_the_shape_resize_frames_gives():
    from pytest_posbias.video.decode import ASPECTS, resize_frames, resized_shape

    for h, w in ((30, 50), (50, 30), (40, 40), (7, 300)):
        frames = np.zeros((1, h, w, 3), dtype=np.uint8)
        for size in (None, 16, 40, 64, 333):
            for aspect in ASPECTS:
                assert resized_shape(h, w, size, aspect) == resize_frames(frames, size, aspect).shape[1:3], (h, w, size, aspect)
    with pytest.raises(VideoError, match="aspect"):
        resized_shape(10, 10, 8, "crop")


def test_the_disk_cache_keeps_only_frames_that_were_slow_to_decode(tmp_path, monkeypatch, synthetic_clips):
    """A frame goes to the PNG cache only when decoding it cost at least ``disk_write_min_s``: a
    short clip decodes faster than its PNG is written and read back, a seek into a long HD clip
    does not (``benchmarks/decode.py``)."""
    import pytest_posbias.video.frames as F

    clip = synthetic_clips[0]
    spec = FrameSpec.from_video(clip, [0, 5, 9], info=probe(clip))
    fast = FrameStore(disk_dir=tmp_path / "fast", disk_write_min_s=60.0)  # no decode takes a minute per frame
    fast.materialize(spec)
    assert fast.decodes == 1 and fast.disk_writes == 0 and not list((tmp_path / "fast").rglob("*.png"))
    real = F.read_frames

    def slow(*args, **kw):
        t = time.process_time()
        out = real(*args, **kw)
        while time.process_time() - t < 0.1 * len(out):  # 100 ms of CPU per frame, like a seek in a long HD clip
            pass
        return out

    monkeypatch.setattr(F, "read_frames", slow)
    kept = FrameStore(disk_dir=tmp_path / "slow", disk_write_min_s=0.05)
    a = kept.materialize(spec)
    assert kept.disk_writes == 3 and len(list((tmp_path / "slow").rglob("*.png"))) == 3
    again = FrameStore(disk_dir=tmp_path / "slow")
    assert np.array_equal(again.materialize(spec), a) and again.decodes == 0 and again.disk_hits == 3
    with pytest.raises(ValueError, match="disk_write_min_s"):
        FrameStore(disk_write_min_s=-1)


def test_a_decode_slowed_by_a_loaded_machine_is_not_written_to_the_disk_cache(tmp_path, monkeypatch,
                                                                              synthetic_clips):
    """The cost that decides a PNG write is the CPU time of the decode, not its wall time: a decode
    that waits (other processes holding the cores) costs the same CPU and writes no PNG."""
    import pytest_posbias.video.frames as F

    clip = synthetic_clips[0]
    spec = FrameSpec.from_video(clip, [0, 5, 9], info=probe(clip))
    real = F.read_frames

    def waiting(*args, **kw):
        out = real(*args, **kw)
        time.sleep(0.1 * len(out))  # 100 ms of wall time per frame, no CPU
        return out

    monkeypatch.setattr(F, "read_frames", waiting)
    store = FrameStore(disk_dir=tmp_path / "frames", disk_write_min_s=0.05)
    store.materialize(spec)
    assert store.decodes == 1 and store.disk_writes == 0 and not list((tmp_path / "frames").rglob("*.png"))


# --------------------------------------------------------------------------- stressors


@pytest.fixture
def frames() -> np.ndarray:
    # frame t is filled with value t: identity readable from pixels
    return np.stack([np.full((8, 8, 3), t, np.uint8) for t in range(16)])


def ids(arr: np.ndarray) -> list[int]:
    return [int(f[0, 0, 0]) for f in arr]


def test_reverse_and_shuffle_are_permutations(frames):
    assert ids(ST.reverse(frames).frames) == list(range(15, -1, -1))
    r = ST.shuffle(frames, rng=np.random.default_rng(0))
    assert sorted(ids(r.frames)) == list(range(16)) and ids(r.frames) != list(range(16))
    assert r.record["order"] == ids(r.frames)


def test_add_inserts_copies_of_the_same_clip(frames):
    r = ST.add(frames, 2, rng=np.random.default_rng(1))
    out = ids(r.frames)
    assert len(out) == 18
    extra = list(out)
    for t in range(16):
        extra.remove(t)
    assert sorted(extra) == sorted(r.record["source_positions"]) and len(set(extra)) == 2
    # the original order is kept around the insertions
    assert [x for x in out if x not in extra or out.count(x) == 1] == [t for t in range(16) if t not in extra]


def test_delete_and_exhaustive_delete1(frames):
    r = ST.delete(frames, 2, rng=np.random.default_rng(2))
    assert len(r.frames) == 14 and set(ids(r.frames)) == set(range(16)) - set(r.record["deleted_positions"])
    allv = ST.delete_all(frames)
    assert len(allv) == 16
    assert [v.record["deleted_positions"] for v in allv] == [[p] for p in range(16)]


def test_replace_uses_other_frames_of_the_same_clip(frames):
    r = ST.replace(frames, 2, rng=np.random.default_rng(3))
    out = ids(r.frames)
    for pos, src in zip(r.record["positions"], r.record["source_positions"], strict=True):
        assert out[pos] == src and src != pos


def test_replace_foreign_uses_only_the_other_videos_frames(frames):
    foreign = np.stack([np.full((8, 8, 3), 200 + t, np.uint8) for t in range(16)])
    r = ST.replace_foreign(frames, foreign, 2, rng=np.random.default_rng(4))
    out = ids(r.frames)
    changed = [i for i in range(16) if out[i] != i]
    assert changed == r.record["positions"]
    assert all(out[i] >= 200 for i in changed)


def test_stressors_are_reproducible_for_a_seed(frames):
    for fn in (lambda g: ST.add(frames, 1, rng=g), lambda g: ST.shuffle(frames, rng=g),
               lambda g: ST.replace(frames, 2, rng=g), lambda g: ST.delete(frames, 2, rng=g)):
        a, b = fn(np.random.default_rng(9)), fn(np.random.default_rng(9))
        assert np.array_equal(a.frames, b.frames) and a.record == b.record


def test_pixel_controls_touch_only_their_positions(frames):
    big = np.stack([np.full((32, 32, 3), 100, np.uint8)] * 6)
    big[:, 8:24, 8:24] = 220
    for r in (ST.blur(big, [1, 4]), ST.noise(big, [1, 4], rng=np.random.default_rng(0)),
              ST.jpeg(big, [1, 4], quality=10), ST.cutout(big, [1, 4], rng=np.random.default_rng(0))):
        diff = [not np.array_equal(a, b) for a, b in zip(r.frames, big, strict=True)]
        assert diff == [False, True, False, False, True, False], r.record


def test_spec_and_array_paths_agree(clip, other_clip):
    path, scene = clip
    store = FrameStore()
    spec = FrameSpec.from_video(path, frame_indices(scene.frame_count, 8, convention="left"), size=64)
    foreign = FrameSpec.from_video(other_clip, frame_indices(probe(other_clip).frame_count, 8, convention="left"), size=64)
    arr, farr = store.materialize(spec), store.materialize(foreign)
    cases = [
        (lambda f, g: ST.add(f, 2, rng=g)), (lambda f, g: ST.delete(f, 1, rng=g)),
        (lambda f, g: ST.replace(f, 2, rng=g)), (lambda f, g: ST.shuffle(f, rng=g)),
        (lambda f, g: ST.reverse(f)), (lambda f, g: ST.noise(f, [2, 5], rng=g)),
        (lambda f, g: ST.cutout(f, [0], rng=g)), (lambda f, g: ST.jpeg(f, [3])), (lambda f, g: ST.blur(f, [1])),
    ]
    for fn in cases:
        s = fn(spec, np.random.default_rng(5))
        a = fn(arr, np.random.default_rng(5))
        assert np.array_equal(store.materialize(s.frames), a.frames), s.record
    sf = ST.replace_foreign(spec, foreign, 2, rng=np.random.default_rng(6))
    af = ST.replace_foreign(arr, farr, 2, rng=np.random.default_rng(6))
    assert np.array_equal(store.materialize(sf.frames), af.frames)
    assert sf.frames.key() != spec.key()
    json.dumps(sf.frames.to_dict())  # records are JSON-serialisable for the run log
    assert FrameSpec.from_dict(json.loads(json.dumps(sf.frames.to_dict()))) == sf.frames


def test_resample_and_speed_controls(clip):
    path, scene = clip
    spec = FrameSpec.from_video(path, frame_indices(scene.frame_count, 16, convention="videostf"))
    r = ST.resample(spec, 18)
    assert r.frames.indices == frame_indices(scene.frame_count, 18, convention="videostf")
    s = ST.speed(spec, 2)
    assert len(s.frames) == 16 and all(i % 2 == 0 for i in s.frames.indices)
    assert s.frames.indices == sorted(s.frames.indices)  # real order, no jump


def test_attack_variants(frames):
    g = np.random.default_rng(0)
    assert len(ST.variants(frames, "reverse", rng=g)) == 1
    assert len(ST.variants(frames, "delete1", rng=g)) == 16
    assert len(ST.variants(frames, "shuffle", rng=g, count=30)) == 30
    a = [ids(v.frames) for v in ST.variants(frames, "add1", rng=np.random.default_rng(4), count=5)]
    b = [ids(v.frames) for v in ST.variants(frames, "add1", rng=np.random.default_rng(4), count=5)]
    assert a == b and len({tuple(x) for x in a}) > 1


# --------------------------------------------------------------------------- composition


def test_compose_black_frame_layout_prompt_first(clip):
    path, _scene = clip
    spec = FrameSpec.from_video(path, [0, 10, 20])
    vids = [VideoPart(spec, video_id="a"), VideoPart(spec, video_id="b")]
    prompt = summary_prompt(2, sentences=4)
    parts = compose(vids, prompt=prompt, boundary="black")
    kinds = [p.kind for p in parts]
    assert kinds == ["text", "text", "video", "image", "text", "video"]
    assert parts[0] == TextPart(prompt)
    assert parts[1].text == "Video 0: 3 uniformly sampled frames"
    assert parts[4].text == "Video 1: 3 uniformly sampled frames"
    assert isinstance(parts[3], ImagePart) and parts[3].name == "black-separator"
    assert [p.video_id for p in parts if isinstance(p, VideoPart)] == ["a", "b"]
    assert prompt.startswith("Different videos in the input are separated by black frames. Summarize each video in 4 sentences.")
    assert "[video0] summary [video1] summary" in prompt


def test_compose_text_labels_video_first_one_indexed(clip):
    path, _ = clip
    spec = FrameSpec.from_video(path, [0, 10])
    vids = [VideoPart(spec, video_id=k) for k in "abcd"]
    parts = compose(vids, prompt="P", boundary="text", placement="video-first", label_base=1)
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    assert texts[0] == "Video 1: 2 uniformly sampled frames"
    assert "--- Text separator: end of Video 1; next is Video 2. ---" in texts
    assert texts[-1] == "P" and not any(isinstance(p, ImagePart) for p in parts)
    p4 = summary_prompt(4, sentences=2, boundary="text", news=True)
    assert "separated by text labels only. Summarize each news video in 2 sentences." in p4
    assert p4.endswith("[video0] summary [video1] summary ... [video3] summary")


# --------------------------------------------------------------------------- synthetic set


def test_synthetic_set_small_build(tmp_path):
    manifest = SY.build_set(tmp_path, videos_per_config=4, groups_per_config=2, scales=(4,))
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    videos = [x for x in lines if x["type"] == "video"]
    assert len(videos) == 4 * len(SY.configurations())
    assert {(v["domain"], v["bucket"]) for v in videos} == set(SY.configurations())
    for v in videos:
        n = len(v["references"])
        assert (1 <= n <= 2) if v["domain"] == "news" else (3 <= n <= 4)
        assert (tmp_path / v["path"]).is_file()
        lo, hi = SY.BUCKETS[v["bucket"]]
        assert lo <= v["duration"] <= hi
    mcq = [x for x in lines if x["type"] == "mcq"]
    assert all(len(q["options"]) == 5 and 0 <= q["answer"] < 5 for q in mcq)
    assert any("brief-event" in q["tags"] for q in mcq)
    groups = [x for x in lines if x["type"] == "group"]
    assert all(len(set(g["videos"])) == 4 for g in groups)
    # deterministic and incremental: a second build renders nothing and writes the same manifest
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "videos").glob("*.mp4")}
    SY.build_set(tmp_path, videos_per_config=4, groups_per_config=2, scales=(4,))
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "videos").glob("*.mp4")} == before
    assert manifest.read_text() == "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines)


def test_brief_events_are_seen_by_some_phases_and_missed_by_others():
    seen_by_some_missed_by_others = 0
    scenes = [SY.make_scene(f"e{k}", "domestic", "short", seed=k, event_probability=1.0) for k in range(40)]
    for sc in scenes:
        hits = [brief_event_grid_hits(sc, g) for g in polyphase_grids(sc.frame_count, 8, 3)]
        assert sum(hits) <= 1  # an event of 5 frames is no longer than the spacing between phases
        seen_by_some_missed_by_others += sum(hits) == 1
    assert seen_by_some_missed_by_others >= 5


def test_cli_fixtures_build(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "fixtures", "build", "--out", str(tmp_path / "s"),
                          "--count", "2", "--groups", "1", "--scales", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stdout and (tmp_path / "s" / "manifest.jsonl").is_file()
    n_videos = sum(1 for line in (tmp_path / "s" / "manifest.jsonl").read_text().splitlines() if '"type": "video"' in line)
    assert n_videos == 2 * len(SY.configurations())
