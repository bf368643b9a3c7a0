"""The frame store (video.frames): each video decoded once in a cyclic probe, a cached frame of another
size decoded again, and the disk cache keeping only frames that were slow to decode."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pytest_posbias.metrics import cyclic_orders
from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.decode import probe, read_frames
from pytest_posbias.video.frames import FrameSpec, FrameStore
from pytest_posbias.video.sampling import frame_indices


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
    real = F.read_frames_by

    def slow(*args, **kw):
        t = time.process_time()
        out = real(*args, **kw)
        while time.process_time() - t < 0.1 * len(out[0]):  # 100 ms of CPU per frame, like a seek in a long HD clip
            pass
        return out

    monkeypatch.setattr(F, "read_frames_by", slow)
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
    real = F.read_frames_by

    def waiting(*args, **kw):
        out = real(*args, **kw)
        time.sleep(0.1 * len(out[0]))  # 100 ms of wall time per frame, no CPU
        return out

    monkeypatch.setattr(F, "read_frames_by", waiting)
    store = FrameStore(disk_dir=tmp_path / "frames", disk_write_min_s=0.05)
    store.materialize(spec)
    assert store.decodes == 1 and store.disk_writes == 0 and not list((tmp_path / "frames").rglob("*.png"))


def test_a_clip_replaced_after_its_spec_was_made_is_not_served_as_the_old_content(tmp_path, synthetic_clips):
    """Materialising a spec whose clip file now holds other content raises a VideoError instead of serving new pixels."""
    import shutil

    from pytest_posbias.errors import VideoError

    path = shutil.copy(synthetic_clips[0], tmp_path / "clip.mp4")
    spec = FrameStore().clip(path, [0, 5, 10], size=32)
    shutil.copy(synthetic_clips[1], path)
    store = FrameStore(disk_dir=tmp_path / "frames", disk_write_min_s=0)
    with pytest.raises(VideoError, match="clip.mp4"):
        store.materialize(spec)


def test_a_frame_folder_that_loses_frames_mid_run_is_a_reported_problem(tmp_path):
    """A frame folder that loses frames after its spec was made is a VideoError recorded once in ``problems``."""
    from PIL import Image

    from pytest_posbias.errors import VideoError

    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(4):
        Image.fromarray(np.full((8, 8, 3), 10 * i, np.uint8)).save(folder / f"{i}.png")
    store = FrameStore()
    spec = store.clip(folder, [0, 3], size=8)
    (folder / "3.png").unlink()
    with pytest.raises(VideoError):
        store.materialize(spec)
    assert len(store.problems) == 1


def test_a_damaged_png_in_the_disk_cache_is_decoded_again_and_rewritten(tmp_path, synthetic_clips):
    """A cached frame PNG cut short is a miss: the frame is decoded again, equal to a fresh decode, and its file rewritten."""
    first = FrameStore(disk_dir=tmp_path / "frames", disk_write_min_s=0)
    spec = first.clip(synthetic_clips[0], [0, 7], size=32)
    want = first.materialize(spec)
    pngs = sorted((tmp_path / "frames").rglob("*.png"))
    assert len(pngs) == 2
    pngs[0].write_bytes(pngs[0].read_bytes()[:40])
    again = FrameStore(disk_dir=tmp_path / "frames", disk_write_min_s=0)
    assert np.array_equal(again.materialize(spec), want)
    assert again.decodes == 1 and again.disk_hits == 1 and len(pngs[0].read_bytes()) > 40


def test_fps_sampling_on_a_clip_shorter_than_its_budget_in_seconds_keeps_its_repeats(synthetic_clips):
    """The ``fps`` convention (1 frame per second, then ``endpoint`` over those) repeats frames on a clip with fewer
    whole seconds than frames asked: the unit is measured with those indices, as the convention defines it; a clip
    with fewer frames than asked is still too short."""
    from pytest_posbias.video.files import TooShortError

    info = probe(synthetic_clips[0])
    idx = frame_indices(info.frame_count, int(info.duration) + 4, convention="fps", fps=info.fps)
    assert len(set(idx)) < len(idx)  # the sampler itself repeats frames here
    spec = FrameStore().clip(synthetic_clips[0], idx, size=32)
    assert [i for _src, i in spec.frames] == [int(i) for i in idx]
    with pytest.raises(TooShortError):
        FrameStore().clip(synthetic_clips[0], list(range(info.frame_count + 1)), size=32)


def test_a_frame_folder_at_another_frame_rate_is_another_request_key(tmp_path):
    """Two frame folders with the same images but different fps.txt give FrameSpecs with different keys."""
    import json

    from PIL import Image

    keys = []
    for name, fps in (("a", "3"), ("b", "8")):
        folder = tmp_path / name
        folder.mkdir()
        for i in range(4):
            Image.fromarray(np.full((8, 8, 3), 10 * i, np.uint8)).save(folder / f"{i}.png")
        (folder / "fps.txt").write_text(fps)
        spec = FrameStore().clip(folder, [0, 2], size=8)
        keys.append(json.dumps(spec.key(), sort_keys=True))
    assert keys[0] != keys[1]


def test_a_disk_cache_that_cannot_be_written_costs_a_decode_not_the_frames(tmp_path, monkeypatch, synthetic_clips):
    """A full disk under the PNG cache (OSError on write) leaves the decoded frames served, not an error."""
    import pytest_posbias.video.frames as F

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(F, "atomic_write_bytes", full)
    clip = synthetic_clips[0]
    spec = FrameSpec.from_video(clip, [0, 5, 9], info=probe(clip))
    store = FrameStore(disk_dir=tmp_path / "png", disk_write_min_s=0.0)
    frames = store.materialize(spec)
    assert frames.shape[0] == 3 and store.decodes == 1
    assert np.array_equal(frames, FrameStore().materialize(spec))


def test_the_disk_cache_keeps_each_decoders_frames_apart(tmp_path, monkeypatch, synthetic_clips):
    """A frame cache shared by an environment with decord and one without (an x86 and an ARM runner) never
    serves one decoder's pixels to the other: decord and PyAV can differ by a few levels (10-bit video).
    The clip's decoder is recorded in the spec, which the run log holds."""
    pytest.importorskip("decord")
    from pytest_posbias.video import decode

    clip = synthetic_clips[0]
    disk = tmp_path / "frames"
    with_decord = FrameSpec.from_video(clip, [0, 5, 9], size=32, info=probe(clip))
    assert with_decord.primary.decoder == "decord" and with_decord.to_dict()["sources"][0]["decoder"] == "decord"
    FrameStore(disk_dir=disk, disk_write_min_s=0).materialize(with_decord)
    monkeypatch.setattr(decode, "_with_decord", lambda *a, **k: None)  # as where decord is not installed
    without = FrameSpec.from_video(clip, [0, 5, 9], size=32, info=probe(clip))
    assert without.primary.decoder == "av" and without.key() == with_decord.key()  # the request key: content
    store = FrameStore(disk_dir=disk, disk_write_min_s=0)
    assert np.array_equal(store.materialize(without), read_frames(clip, [0, 5, 9], size=32, backend="av"))
    assert (store.decodes, store.disk_hits, store.disk_writes) == (1, 0, 3)
    assert sorted(p.parent.name for p in disk.rglob("*.png")) == ["32-stretch-av"] * 3 + ["32-stretch-decord"] * 3


def test_frames_decord_refuses_are_cached_as_pyavs(tmp_path, monkeypatch, synthetic_clips):
    """A clip decord probed whose frames it then refuses is read by PyAV: those frames are cached as PyAV's, so an
    environment where decord reads the clip decodes its own."""
    pytest.importorskip("decord")
    from pytest_posbias.video import decode

    clip = synthetic_clips[0]
    spec = FrameSpec.from_video(clip, [0, 5, 9], size=32, info=probe(clip))
    assert spec.primary.decoder == "decord"
    disk = tmp_path / "frames"
    with monkeypatch.context() as m:
        m.setattr(decode, "_decord_batch", lambda *a: (_ for _ in ()).throw(RuntimeError("refused")))
        refused = FrameStore(disk_dir=disk, disk_write_min_s=0)
        first = refused.materialize(spec)
        assert np.array_equal(refused.materialize(spec), first)  # from memory, not decoded again
        assert (refused.decodes, refused.memory_hits) == (1, 3)
    assert {p.parent.name for p in disk.rglob("*.png")} == {"32-stretch-av"}
    store = FrameStore(disk_dir=disk, disk_write_min_s=0)
    assert np.array_equal(store.materialize(spec), read_frames(clip, [0, 5, 9], size=32, backend="decord"))
    assert (store.decodes, store.disk_hits) == (1, 0)


@pytest.mark.parametrize("change", ["replaced", "deleted"])
def test_cached_frames_of_a_clip_changed_since_its_request_are_not_served(tmp_path, synthetic_clips, change):
    """The frame cache is read only for the content the request names: a clip replaced or deleted since is
    reported (changed-video, missing-video) and its frames are not served from the cache."""
    import shutil

    from pytest_posbias.errors import VideoError

    clip = tmp_path / "clip.mp4"
    shutil.copy(synthetic_clips[0], clip)
    spec = FrameSpec.from_video(clip, [0, 5, 9], size=32, info=probe(clip))
    disk = tmp_path / "frames"
    FrameStore(disk_dir=disk, disk_write_min_s=0).materialize(spec)
    if change == "replaced":
        shutil.copy(synthetic_clips[1], clip)
    else:
        clip.unlink()
    store = FrameStore(disk_dir=disk)
    with pytest.raises(VideoError):
        store.materialize(spec)
    assert [k for k, _ in store.problems] == [{"replaced": "changed-video", "deleted": "missing-video"}[change]]
    assert store.disk_hits == 0


def test_an_unusable_clip_is_probed_once_and_its_error_raised_again(tmp_path, monkeypatch):
    """A clip that cannot be read is opened once per store: every later request for it raises the same error,
    reported once, without the decoder opening (and complaining about) the file again."""
    import pytest_posbias.video.frames as F
    from pytest_posbias.errors import VideoError

    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video\n" * 20)
    opened = []
    real = F.probe
    monkeypatch.setattr(F, "probe", lambda p: opened.append(p) or real(p))
    store = FrameStore()
    for _ in range(3):
        with pytest.raises(VideoError, match="notes.mp4"):
            store.info(bad)
    assert len(opened) == 1 and len(store.problems) == 1
