"""Thumbnails for the report's examples (probes.thumbnails): a frame as a JPEG data URI no wider
than asked, one thumbnail per distinct frame index of a clip, and an unreadable clip, an index past
its end or an unknown video giving no image instead of an error."""

from __future__ import annotations

import base64
import io
import types

import numpy as np
from PIL import Image

from pytest_posbias.data.manifest import load_manifest
from pytest_posbias.probes.thumbnails import frame_thumbnails, thumbnail, video_thumbnails
from pytest_posbias.video.decode import probe
from pytest_posbias.video.frames import FrameStore


def _image(uri: str) -> Image.Image:
    assert uri.startswith("data:image/jpeg;base64,")
    return Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))


def test_a_thumbnail_is_a_jpeg_no_wider_than_asked_with_the_frame_s_aspect():
    frame = Image.new("RGB", (320, 180), (200, 30, 40))
    img = _image(thumbnail(np.asarray(frame), width=96))
    assert img.format == "JPEG" and img.size == (96, 54)
    assert abs(img.getpixel((48, 27))[0] - 200) < 12  # the colour survives the compression


def test_frame_thumbnails_one_per_distinct_index_and_none_for_a_bad_clip_or_index(synthetic_clips, tmp_path):
    ctx = types.SimpleNamespace(store=FrameStore())
    clip = str(synthetic_clips[0])
    got = frame_thumbnails(ctx, clip, [5, 0, 5, 12], width=32)
    assert sorted(got) == [0, 5, 12] and all(max(_image(u).size) <= 32 for u in got.values())
    n = probe(clip).frame_count
    assert frame_thumbnails(ctx, clip, [0, n]) == {}  # an index past the end
    assert frame_thumbnails(ctx, clip, []) == {}
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video")
    assert frame_thumbnails(ctx, str(bad), [0]) == {}


def test_video_thumbnails_of_a_manifest_video_and_none_for_an_unknown_one(small_set):
    manifest = load_manifest(small_set)
    ctx = types.SimpleNamespace(store=FrameStore(), manifest=lambda: manifest)
    vid = next(iter(manifest.videos))
    uris = video_thumbnails(ctx, vid, (0.0, 0.5), width=48)
    assert len(uris) == 2 and all(max(_image(u).size) <= 48 for u in uris)
    assert video_thumbnails(ctx, "no-such-video", (0.0, 0.5)) == ["", ""]


def test_video_thumbnails_of_a_frame_store_that_cannot_write_give_no_image(small_set):
    """A frame store whose disk write fails (OSError: a full disk) gives no image, as an unreadable
    clip does, instead of failing the probe after every model call was made."""
    manifest = load_manifest(small_set)

    class FullDisk(FrameStore):
        def materialize(self, spec):
            raise OSError(28, "No space left on device")

    ctx = types.SimpleNamespace(store=FullDisk(), manifest=lambda: manifest)
    assert video_thumbnails(ctx, next(iter(manifest.videos)), (0.0, 0.5)) == ["", ""]
