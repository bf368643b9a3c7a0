"""Chat-message content for OpenAI-compatible endpoints: frames as one video or as images.

* ``video``: one ``video_url`` part per :class:`VideoPart`, ``data:video/jpeg;base64,<frame 1>,
  <frame 2>,...``: vLLM's ``VideoMediaIO.load_base64`` splits a ``video/jpeg`` payload on ``,``
  and decodes each piece as a JPEG (vllm-project/vllm, ``vllm/multimodal/media/video.py``), so the
  model sees one video, as the ``hf`` backend sends it;
* ``images``: one ``image_url`` part per frame, for endpoints that take images only.

Text parts and the blank separator image keep the probe's order in one user message.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import numpy as np

from ..engine import Request
from ..video.compose import ImagePart, TextPart, VideoPart
from ..video.frames import FrameSpec, FrameStore

JPEG_QUALITY = 90


def jpeg_b64(frame: np.ndarray, quality: int = JPEG_QUALITY) -> str:
    """Base64 of ``frame`` (H, W, 3 uint8) encoded as JPEG at ``quality`` (PIL)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
    return base64.b64encode(buf.getvalue()).decode()


def jpeg_data_url(frame: np.ndarray, quality: int = JPEG_QUALITY) -> str:
    """``data:image/jpeg;base64,...`` of one frame."""
    return "data:image/jpeg;base64," + jpeg_b64(frame, quality)


def video_data_url(frames_b64: list[str]) -> str:
    """vLLM's frame-list video: ``data:video/jpeg;base64,`` + the base64 JPEG frames joined by ``,``."""
    return "data:video/jpeg;base64," + ",".join(frames_b64)


def _frame_keys(spec: FrameSpec, quality: int) -> list[Hashable]:
    """Cache key of each frame of ``spec``: pixels are fixed by (source, index, size, aspect)
    unless a pixel op changed them, then by the whole spec and the position."""
    if spec.ops:
        h = hashlib.sha256(json.dumps(spec.key(), sort_keys=True).encode()).hexdigest()
        return [("spec", h, pos, quality) for pos in range(len(spec.frames))]
    return [("frame", spec.sources[s].key(), int(i), spec.size, spec.aspect, quality) for s, i in spec.frames]


class FrameEncoder:
    """Base64 JPEG frames of a spec, each encoded once (LRU bounded by ``max_bytes`` of base64 text).

    Thread-safe; ``encoded`` counts frames encoded, ``hits`` frames served from the LRU."""

    def __init__(self, store: FrameStore, *, quality: int = JPEG_QUALITY, max_bytes: int = 256 << 20) -> None:
        self.store = store
        self.quality = int(quality)
        self.max_bytes = int(max_bytes)
        self._lru: OrderedDict[Hashable, str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._inflight: dict[tuple[Hashable, ...], threading.Event] = {}
        self.encoded = 0
        self.hits = 0

    def frames(self, spec: FrameSpec) -> list[str]:
        """The base64 JPEG of every frame of ``spec``, in order (frames decoded only when one is
        missing). Threads asking for the same spec at once decode and encode it once: the others
        wait for the first and read its frames from the LRU."""
        keys = _frame_keys(spec, self.quality)
        group = tuple(keys)
        while True:
            with self._lock:
                got = [self._lru.get(k) for k in keys]
                for k, g in zip(keys, got, strict=True):
                    if g is not None:
                        self._lru.move_to_end(k)
                if all(g is not None for g in got):
                    self.hits += len(keys)
                    return [g for g in got if g is not None]
                busy = self._inflight.get(group)
                if busy is None:
                    mine = self._inflight[group] = threading.Event()
                    break
            busy.wait()  # another thread is encoding this spec; then look again (evicted meanwhile: encode here)
        try:
            return self._encode(spec, keys, got)
        finally:
            with self._lock:
                del self._inflight[group]
            mine.set()

    def _encode(self, spec: FrameSpec, keys: list[Hashable], got: list[str | None]) -> list[str]:
        pixels = self.store.materialize(spec)
        out: list[str] = []
        fresh = 0
        for g, frame in zip(got, pixels, strict=True):
            if g is None:
                g = jpeg_b64(frame, self.quality)
                fresh += 1
            out.append(g)
        with self._lock:
            self.encoded += fresh
            self.hits += len(keys) - fresh
            for k, g in zip(keys, out, strict=True):
                if k not in self._lru:
                    self._lru[k] = g
                    self._bytes += len(g)
            while self._bytes > self.max_bytes and self._lru:
                _, old = self._lru.popitem(last=False)
                self._bytes -= len(old)
        return out

    def blank(self, size: int) -> str:
        """Base64 JPEG of a black ``size`` x ``size`` image (the separator between clips)."""
        return _blank(int(size), self.quality)


@functools.lru_cache(maxsize=16)
def _blank(size: int, quality: int) -> str:
    return jpeg_b64(np.zeros((size, size, 3), np.uint8), quality)


def content(request: Request, form: str, encoder: FrameEncoder) -> list[dict[str, Any]]:
    """The user message's content parts for ``request`` with frames in ``form`` (``video`` or ``images``)."""
    out: list[dict[str, Any]] = []
    for p in request.parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
        elif isinstance(p, VideoPart):
            frames = encoder.frames(p.frames)
            if form == "video":
                out.append({"type": "video_url", "video_url": {"url": video_data_url(frames)}})
            else:
                out += [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + f}} for f in frames]
        elif isinstance(p, ImagePart):
            out.append({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + encoder.blank(p.size)}})
    return out


def has_video(request: Request) -> bool:
    """Whether the request shows any video (its frames are then sent in the backend's input form)."""
    return any(isinstance(p, VideoPart) for p in request.parts)
