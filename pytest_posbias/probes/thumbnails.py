"""Small inline JPEG thumbnails of video frames for the report's examples (data: URIs)."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import PosbiasError
from ..video.frames import FrameSpec

if TYPE_CHECKING:
    from ..gate_context import ProbeContext


def thumbnail(frame: np.ndarray, width: int = 96) -> str:
    """One uint8 HxWx3 frame as a JPEG data URI at most ``width`` pixels on its long side."""
    from PIL import Image

    img = Image.fromarray(frame)
    img.thumbnail((width, width))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=70)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def video_thumbnails(ctx: ProbeContext, video_id: str, positions: Sequence[float] = (0.5,), *,
                     width: int = 96) -> list[str]:
    """Thumbnails of a manifest video at relative ``positions`` in [0, 1) of its frames; an
    unreadable video, or a frame store that cannot write its disk cache, gives empty strings (the
    report then shows no image, the run goes on)."""
    try:
        item = ctx.manifest().videos[video_id]
        info = ctx.store.info(item.path)
        idx = [min(info.frame_count - 1, int(p * info.frame_count)) for p in positions]
        distinct = sorted(set(idx))  # positions of a clip shorter than their count share frames (a spec never repeats)
        spec = FrameSpec.from_video(item.path, distinct, size=160, info=info)
        thumbs = {i: thumbnail(f, width) for i, f in zip(distinct, ctx.store.materialize(spec), strict=True)}
        return [thumbs[i] for i in idx]
    except (PosbiasError, KeyError, OSError, ValueError):
        return ["" for _ in positions]


def frame_thumbnails(ctx: ProbeContext, path: str, indices: Sequence[int], *, width: int = 64) -> dict[int, str]:
    """Thumbnails of frames ``indices`` (absolute frame indices) of the clip at ``path``, one per
    distinct index: ``{index: JPEG data URI}``; an unreadable clip (or an index past its end) gives
    ``{}`` (the report then shows the frame index without an image, the run goes on)."""
    idx = sorted({int(i) for i in indices})
    if not idx:
        return {}
    try:
        info = ctx.store.info(path)
        if idx[0] < 0 or idx[-1] >= info.frame_count:
            return {}
        spec = FrameSpec.from_video(path, idx, size=2 * width, info=info)
        return {i: thumbnail(f, width) for i, f in zip(idx, ctx.store.materialize(spec), strict=True)}
    except (PosbiasError, OSError, ValueError):
        return {}
