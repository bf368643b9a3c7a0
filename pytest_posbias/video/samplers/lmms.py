"""The ``lmms-eval`` preset: lmms-eval 0.7.3's video frame selection (:data:`UPSTREAM`), checked by
the tests against that PyPI module itself with fake decoders that record the requested indices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ConfigError
from .base import Knob, SampledIndices, window

NAME = "lmms-eval"
UPSTREAM = ("lmms-eval 0.7.3 (PyPI), lmms_eval/models/model_utils/load_video.py: read_video "
            "(pyav load_video_stream, torchcodec), load_video_decord")
KNOBS = {
    "backend": Knob("backend", "choice", "pyav", "decode path: pyav (upstream default, mp4 stream), torchcodec, decord",
                    ("pyav", "torchcodec", "decord")),
    "fps": Knob("fps", "float", None, "upstream `fps`: caps the count at int(duration·fps)"),
    "force_include_last_frame": Knob("force_include_last_frame", "bool", False,
                                     "upstream `force_include_last_frame`: make the last frame one of the samples"),
}


def _linspace_int(a: int, b: int, n: int) -> list[int]:
    return [int(v) for v in np.linspace(a, b, n, dtype=int)]


def _stream(T: int, n: int, clip_fps: float | None, fps: float | None, force: bool, backend: str) -> list[int]:
    # pyav load_video_stream / torchcodec: k = min(T, n, int(duration·fps)), unique indices in order;
    # k = 0 makes pyav (its exception path) decode every frame and torchcodec take one frame
    k = min(T, n)
    if fps is not None and clip_fps:
        k = min(k, int(T / clip_fps * fps))
    if k <= 0 and backend == "pyav":
        return list(range(T))
    k = max(1, k)
    idx = _linspace_int(0, T - 1, k)
    if force and T - 1 not in idx:
        idx = [*_linspace_int(0, T - 2, k - 1), T - 1]
    return sorted(set(idx))  # frames are kept when their decode position is in the index set


def lmms_indices(T: int, b: int, *, fps: float | None, start: float | None, end: float | None,
                 knobs: dict[str, Any]) -> SampledIndices:
    """Frame indices lmms-eval 0.7.3 decodes for ``num_frm = b`` from a ``T``-frame clip.

    * ``pyav`` (default): k = min(T, b, int(T/clip_fps·fps) when ``fps``); indices
      ``np.linspace(0, T−1, k, dtype=int)`` (with ``force_include_last_frame``: the last
      frame appended to ``linspace(0, T−2, k−1)`` when missing), kept once each in order
      (min(T, b) unique frames); k = 0 makes upstream decode every frame.
    * ``torchcodec``: the same with k = max(1, k) and ``np.unique``.
    * ``decord`` (``load_video_decord``): ``np.linspace(0, T−1, b, dtype=int)`` with repeats;
      no fps or force_include_last_frame upstream.

    lmms-eval has no seconds window: a ``start``/``end`` window is cut first (MVBench
    bounds, :func:`window`) and the sampler runs on the cut clip; indices stay absolute.
    """
    backend = knobs.get("backend", "pyav")
    sfps = knobs.get("fps")
    force = bool(knobs.get("force_include_last_frame", False))
    if backend == "decord" and (sfps is not None or force):
        raise ConfigError(f"sampler {NAME!r}: knobs `fps` and `force_include_last_frame` do not exist for backend "
                          f"decord (upstream load_video_decord takes the frame count only)")
    if sfps is not None and (fps is None or fps <= 0):
        raise ConfigError(f"sampler {NAME!r}: knob `fps` needs the clip's `fps` (> 0)")
    lo, hi = window(T, fps, start, end)
    n = hi - lo + 1
    rel = _linspace_int(0, n - 1, b) if backend == "decord" else _stream(n, b, fps, sfps, force, backend)
    return SampledIndices([lo + r for r in rel], {"sampler": NAME, "knobs": dict(knobs), "upstream": UPSTREAM})
