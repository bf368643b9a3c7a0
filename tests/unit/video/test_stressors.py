"""The temporal stressors (video.stressors), as VideoSTF defines them: reverse and shuffle are
permutations, add, delete, replace and replace-foreign, the pixel controls, the resample and speed
controls and the attack variants, reproducible for a seed, with the spec and array paths agreeing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_posbias.errors import ConfigError
from pytest_posbias.video import stressors as ST
from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.decode import probe
from pytest_posbias.video.frames import FrameSpec, FrameStore
from pytest_posbias.video.sampling import frame_indices


@pytest.fixture(scope="module")
def other_clip(tmp_path_factory) -> Path:
    scene = SY.make_scene("t-other", "news", "short", seed=11)
    path = tmp_path_factory.mktemp("clips2") / "other.mp4"
    return SY.render_clip(scene, path)


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


@pytest.mark.parametrize("positions", [[3, 3], [True, 2]])
def test_replace_foreign_positions_must_be_distinct_ints(frames, positions):
    """Given positions that repeat or are bools are a ConfigError, never fewer replacements than k."""
    foreign = np.stack([np.full((8, 8, 3), 200 + t, np.uint8) for t in range(4)])
    with pytest.raises(ConfigError, match="distinct positions"):
        ST.replace_foreign(frames, foreign, 2, rng=np.random.default_rng(0), positions=positions)


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


def test_a_temporal_stressor_after_a_pixel_operation_moves_it_with_its_frame(clip, other_clip):
    """On a spec, blur then delete/reverse/add/foreign blurs the frame it blurred in the array path, never a crash."""
    path, scene = clip
    store = FrameStore()
    spec = ST.blur(FrameSpec.from_video(path, frame_indices(scene.frame_count, 8, convention="left"), size=64),
                   [1, 6]).frames
    foreign = ST.jpeg(FrameSpec.from_video(other_clip, [0, 5, 9], size=64), [0, 1, 2]).frames
    arr, farr = store.materialize(spec), store.materialize(foreign)
    for fn in ((lambda f, g, h: ST.delete(f, 2, rng=g)), (lambda f, g, h: ST.reverse(f)),
               (lambda f, g, h: ST.add(f, 2, rng=g)), (lambda f, g, h: ST.replace_foreign(f, h, 2, rng=g))):
        s = fn(spec, np.random.default_rng(3), foreign)
        a = fn(arr, np.random.default_rng(3), farr)
        assert np.array_equal(store.materialize(s.frames), a.frames), s.record


@pytest.mark.parametrize("make", [
    lambda s, g: ST.noise(s, [1], rng=g, std=-1.0), lambda s, g: ST.noise(s, [1], rng=g, std=float("inf")),
    lambda s, g: ST.cutout(s, [1], rng=g, fraction=2.0), lambda s, g: ST.cutout(s, [1], rng=g, fraction=float("nan")),
    lambda s, g: ST.cutout(s, [1], rng=g, fraction=0.0), lambda s, g: ST.blur(s, [1], sigma=float("nan")),
    lambda s, g: ST.blur(s, [1], sigma=-2.0), lambda s, g: ST.blur(s, [True]), lambda s, g: ST.jpeg(s, [1], quality=True),
])
def test_pixel_operation_parameters_are_checked_when_the_spec_is_made(make):
    """A negative, non-finite or out-of-range pixel parameter is a ConfigError at once, not a crash when decoded."""
    with pytest.raises(ConfigError, match="must be"):
        make(FrameSpec.synthetic("noise", 4, size=8), np.random.default_rng(0))


@pytest.mark.parametrize("count", [0, -3, True, 2.5])
def test_variants_count_must_be_a_positive_integer(frames, count):
    """A count that is not an integer >= 1 is a ConfigError, never an empty variant list that nothing can fail."""
    with pytest.raises(ConfigError, match="`count` must be an integer >= 1"):
        ST.variants(frames, "shuffle", rng=np.random.default_rng(0), count=count)


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
