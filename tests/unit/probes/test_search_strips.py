"""A minimal counterexample's frame strip (``probes.search_strips``): one thumbnail per distinct frame
of its original and perturbed strips, keyed by source (its own clip, or the foreign video an edit
drew from) and index; the middle frame of each video of a coverage group; nothing for a source it
has no path for, an unreadable clip or an unknown video."""

from __future__ import annotations

import types

from pytest_posbias.data.manifest import load_manifest
from pytest_posbias.probes.search_strips import strip_thumbnails
from pytest_posbias.video.frames import FrameStore


def _strip(original, perturbed):
    return {"original": [{"index": i} for i in original],
            "perturbed": [{"index": i, **({"source": s} if s else {})} for i, s in perturbed]}


def test_one_thumbnail_per_distinct_frame_of_each_source(synthetic_clips):
    ctx = types.SimpleNamespace(store=FrameStore())
    minimal = {"frames": _strip([0, 4, 8], [(0, None), (8, None), (2, "foreign"), (4, "clip")]),
               "video_path": str(synthetic_clips[0]), "foreign_path": str(synthetic_clips[1])}
    got = strip_thumbnails(ctx, minimal, width=24)
    assert sorted(got) == ["clip:0", "clip:4", "clip:8", "foreign:2"]
    assert all(u.startswith("data:image/jpeg;base64,") for u in got.values())


def test_a_source_without_a_path_or_an_unreadable_clip_gives_no_image(synthetic_clips, tmp_path):
    ctx = types.SimpleNamespace(store=FrameStore())
    no_foreign = {"frames": _strip([1], [(3, "foreign")]), "video_path": str(synthetic_clips[0])}
    assert sorted(strip_thumbnails(ctx, no_foreign)) == ["clip:1"]
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video")
    assert strip_thumbnails(ctx, {"frames": _strip([0], []), "video_path": str(bad)}) == {}


def test_a_coverage_group_shows_the_middle_frame_of_each_known_video(small_set):
    manifest = load_manifest(small_set)
    ctx = types.SimpleNamespace(store=FrameStore(), manifest=lambda: manifest)
    a, b = list(manifest.videos)[:2]
    got = strip_thumbnails(ctx, {"videos": [a, "no-such-video", b]}, width=24)
    assert sorted(got) == sorted([f"video:{a}", f"video:{b}"])
