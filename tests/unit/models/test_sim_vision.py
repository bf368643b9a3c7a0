"""The simulated models' perception (models.sim_vision): the scene read back from the pixels, each
pixel classed by its nearest palette colour, and reversed frames reversing the perceived motion."""

from __future__ import annotations

import numpy as np
from support.synthetic_frames import scene_of

from pytest_posbias.models import sim_vision as SV
from pytest_posbias.models.sim_vision import view_frame, view_video
from pytest_posbias.video import stressors as ST
from pytest_posbias.video.frames import FrameSpec
from pytest_posbias.video.sampling import frame_indices


def test_perception_reads_the_scene_from_pixels(manifest, store):
    right = total = 0
    for item in manifest.videos.values():
        scene = scene_of(item)
        info = store.info(item.path)
        view = view_video(store.materialize(FrameSpec.from_video(item.path, frame_indices(info.frame_count, 16, convention="left"), info=info)))
        truth = sorted((o.shape, o.colour, o.motion, o.change_to or o.colour) for o in scene.objects)
        seen = sorted((o.shape, o.first_colour, o.motion, o.last_colour) for o in view.objects)
        right += truth == seen
        total += 1
    assert right == total


def _labels_by_euclidean_distance(frame):
    """Each sampled scene pixel's nearest palette colour by Euclidean distance, -1 beyond the cut."""
    h, w = frame.shape[:2]
    scene_h = max(1, int(h * SV._SCENE_FRACTION) - max(1, h // 64))
    step = max(1, min(h, w) // 112)
    px = frame[:scene_h:step, ::step].astype(np.float64)
    d = np.linalg.norm(px[:, :, None, :] - SV._COLOURS.astype(np.float64)[None, None], axis=3)
    return np.where(d.min(axis=2) < SV._MAX_DIST, d.argmin(axis=2), -1), px


def test_a_frame_view_classifies_every_pixel_by_its_nearest_palette_colour(manifest, store):
    """view_frame's blobs are those of the plain Euclidean rule (nearest palette colour, cut at
    _MAX_DIST), on clean frames and on noisy ones whose pixels fall near the cut and between colours."""
    item = next(iter(manifest.videos.values()))
    info = store.info(item.path)
    clean = store.materialize(FrameSpec.from_video(item.path, frame_indices(info.frame_count, 8, convention="left"),
                                                   info=info))
    rng = np.random.default_rng(0)
    noisy = np.clip(clean.astype(int) + rng.integers(-60, 61, clean.shape), 0, 255).astype(np.uint8)
    checked = 0
    for frame in [*clean, *noisy]:
        labels, px = _labels_by_euclidean_distance(frame)
        view = view_frame(frame)
        if view.event is not None:
            continue
        want = []
        for ci, name in enumerate(SV._NAMES):
            ys, xs = np.nonzero(labels == ci)
            if ys.size >= max(6, labels.size // 2000):
                want.append((name, xs.mean() / px.shape[1], ys.mean() / px.shape[0]))
        got = [(b.colour, b.x, b.y) for b in view.blobs]
        assert [w[0] for w in want] == [g[0] for g in got]
        assert np.allclose([w[1:] for w in want], [g[1:] for g in got], rtol=0, atol=1e-12)
        checked += 1
    assert checked >= 8


def test_reversed_frames_reverse_the_perceived_motion(manifest, store):
    item = next(v for v in manifest.videos.values() if any(o.motion == "left-to-right" for o in scene_of(v).objects))
    info = store.info(item.path)
    spec = FrameSpec.from_video(item.path, frame_indices(info.frame_count, 16, convention="left"), info=info)
    fwd = {o.shape: o.motion for o in view_video(store.materialize(spec)).objects}
    rev = {o.shape: o.motion for o in view_video(store.materialize(ST.reverse(spec).frames)).objects}
    flip = {"left-to-right": "right-to-left", "right-to-left": "left-to-right", "top-to-bottom": "bottom-to-top",
            "bottom-to-top": "top-to-bottom", "static": "static"}
    assert rev == {k: flip[v] for k, v in fwd.items()}
