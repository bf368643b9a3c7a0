"""Small inline JPEG thumbnails of video frames for the report's examples (data: URIs)."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import PosbiasError
from ..video.frames import FrameSpec


def thumbnail(frame: np.ndarray, width: int = 96) -> str:
    """One uint8 HxWx3 frame as a JPEG data URI at most ``width`` pixels on its long side."""
    from PIL import Image

    img = Image.fromarray(frame)
    img.thumbnail((width, width))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=70)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def video_thumbnails(ctx: Any, video_id: str, positions: Sequence[float] = (0.5,), *, width: int = 96) -> list[str]:
    """Thumbnails of a manifest video at relative ``positions`` in [0, 1) of its frames; an
    unreadable video gives empty strings (the report then shows no image, the run goes on)."""
    try:
        item = ctx.manifest().videos[video_id]
        info = ctx.store.info(item.path)
        idx = [min(info.frame_count - 1, int(p * info.frame_count)) for p in positions]
        spec = FrameSpec.from_video(item.path, idx, size=160, info=info)
        return [thumbnail(f, width) for f in ctx.store.materialize(spec)]
    except (PosbiasError, KeyError):
        return ["" for _ in positions]
