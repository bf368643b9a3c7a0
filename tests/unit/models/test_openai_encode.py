"""Chat content for OpenAI-compatible endpoints (``models.openai_encode``): the probe's parts in
their order in one user message; a video as one ``video/jpeg`` data URL of its frames joined by
``,`` (split here on ``,`` as the module describes vLLM reading it; vLLM itself is not called) or
as one image per frame; the blank separator a black JPEG of its size; each frame encoded once per
spec and quality."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from pytest_posbias.engine import Request
from pytest_posbias.models.openai_encode import FrameEncoder, content, has_video, jpeg_b64, video_data_url
from pytest_posbias.video.compose import ImagePart, TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec


def _pixels(b64: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB")).astype(int)


@pytest.fixture
def request_parts(synthetic_clips):
    a = VideoPart(FrameSpec.from_video(synthetic_clips[0], [0, 10, 20], size=32), video_id="a")
    b = VideoPart(FrameSpec.from_video(synthetic_clips[1], [5, 15], size=32), video_id="b")
    return a, b, (TextPart("Video 1:"), a, ImagePart(size=16), TextPart("Video 2:"), b, TextPart("Summarise."))


def test_video_form_keeps_the_parts_in_order_one_video_url_per_clip(store, request_parts):
    a, b, parts = request_parts
    enc = FrameEncoder(store)
    got = content(Request("openai:x", parts), "video", enc)
    assert [p["type"] for p in got] == ["text", "video_url", "image_url", "text", "video_url", "text"]
    assert [p["text"] for p in got if p["type"] == "text"] == ["Video 1:", "Video 2:", "Summarise."]
    for part, spec in ((got[1], a.frames), (got[4], b.frames)):
        url = part["video_url"]["url"]
        assert url == video_data_url(enc.frames(spec))
        pieces = url.removeprefix("data:video/jpeg;base64,").split(",")  # split on "," as the module says vLLM does (not vLLM itself)
        want = store.materialize(spec)
        assert len(pieces) == len(want)
        for piece, frame in zip(pieces, want, strict=True):  # lossy JPEG: close to its frame
            assert np.abs(_pixels(piece) - frame.astype(int)).mean() < 8


def test_images_form_sends_one_image_per_frame_and_the_separator_is_black(store, request_parts):
    *_, parts = request_parts
    got = content(Request("openai:x", parts), "images", FrameEncoder(store))
    assert [p["type"] for p in got] == ["text", *["image_url"] * 3, "image_url", "text", *["image_url"] * 2, "text"]
    blank = got[4]["image_url"]["url"].removeprefix("data:image/jpeg;base64,")
    assert _pixels(blank).shape == (16, 16, 3) and _pixels(blank).max() <= 2
    assert has_video(Request("openai:x", parts)) and not has_video(Request("openai:x", (TextPart("no video"),)))


def test_each_frame_is_encoded_once_per_quality(store, request_parts):
    a, _, _ = request_parts
    enc = FrameEncoder(store)
    first = enc.frames(a.frames)
    assert enc.frames(a.frames) == first and (enc.encoded, enc.hits) == (3, 3)
    other = FrameEncoder(store, quality=50)
    assert other.frames(a.frames) != first and other.encoded == 3
    assert first[0] == jpeg_b64(store.materialize(a.frames)[0])
