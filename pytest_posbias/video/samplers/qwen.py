"""The ``qwen-vl-utils`` preset: Qwen2-VL / Qwen2.5-VL frame selection of qwen-vl-utils 0.0.14
(:data:`UPSTREAM`), checked by the tests against that PyPI package with a fake ``decord.VideoReader``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import ConfigError
from .base import Knob, SampledIndices

NAME = "qwen-vl-utils"
UPSTREAM = ("qwen-vl-utils 0.0.14 (PyPI), qwen_vl_utils/vision_process.py: smart_nframes, "
            "calculate_video_frame_range, _read_video_decord")
FPS = 2.0  # upstream FPS
FRAME_FACTOR = 2
FPS_MIN_FRAMES = 4
FPS_MAX_FRAMES = 768
KNOBS = {
    "nframes": Knob("nframes", "int", None,
                    "frames requested (upstream `nframes`, rounded half to even to a multiple of 2); default: the "
                    "budget"),
    "fps": Knob("fps", "float", None,
                "upstream fps mode: sampled frames per second (upstream default 2.0 when any fps-mode knob is set)"),
    "min_frames": Knob("min_frames", "int", None,
                       "fps mode: lower clamp, ceiled to a multiple of 2 (upstream default 4)"),
    "max_frames": Knob("max_frames", "int", None,
                       "fps mode: upper clamp, floored to a multiple of 2 (upstream default min(768, frames))"),
}
FPS_MODE_KNOBS = ("fps", "min_frames", "max_frames")


def _emulated_linspace_f32(start: float, end: float, steps: int) -> np.ndarray:
    """torch.linspace(start, end, steps) in float32 as torch's scalar CPU kernel computes it:
    step = (end − start)/(steps − 1) in float32, the first half start + step·i, the second
    half end − step·(steps − 1 − i). torch's vectorised kernel can differ by one float32 ulp."""
    if steps == 1:
        return np.array([start], dtype=np.float32)
    s, e = np.float32(start), np.float32(end)
    step = np.float32((e - s) / np.float32(steps - 1))
    i = np.arange(steps)
    half = steps // 2
    lo = s + step * i[:half].astype(np.float32)
    hi = e - step * (steps - 1 - i[half:]).astype(np.float32)
    return np.concatenate([lo, hi]).astype(np.float32)


def linspace_round(start: int, end: int, steps: int, *, backend: str = "auto") -> tuple[list[int], str]:
    """``torch.linspace(start, end, steps).round().long().tolist()`` (upstream's exact call)
    and the arithmetic that produced it: ``"torch"`` when torch is importable (``backend``
    "auto" or "torch"), else ``"emulation"`` (:func:`_emulated_linspace_f32`, np.round half to even)."""
    if backend not in ("auto", "torch", "emulation"):
        raise ConfigError(f"`backend` must be auto, torch or emulation; got {backend!r}")
    if backend != "emulation":
        try:
            import torch
        except ImportError:
            if backend == "torch":
                raise ConfigError("`backend` 'torch' needs torch installed") from None
        else:
            return [int(v) for v in torch.linspace(start, end, steps).round().long().tolist()], "torch"
    vals = np.round(_emulated_linspace_f32(float(start), float(end), steps)).astype(np.int64)
    return [int(v) for v in vals], "emulation"


def _frame_range(T: int, video_fps: float | None, start: float | None, end: float | None) -> tuple[int, int, int]:
    # upstream calculate_video_frame_range: clamp to [0, T/fps], ceil(start·fps), floor(end·fps)
    if start is None and end is None:
        return 0, T - 1, T
    if video_fps is None or video_fps <= 0:
        raise ConfigError(f"sampler {NAME!r}: `fps` of the clip is required (> 0) for a video_start/video_end window")
    max_duration = T / video_fps
    s = math.ceil(max(0.0, min(start, max_duration)) * video_fps) if start is not None else 0
    e = min(math.floor(max(0.0, min(end, max_duration)) * video_fps), T - 1) if end is not None else T - 1
    if s >= e:
        raise ConfigError(f"sampler {NAME!r}: window start={start}, end={end} s gives start frame {s} >= end frame {e} "
                          f"for a clip of {T} frames at {video_fps} fps (upstream raises 'Invalid time range')")
    return s, e, e - s + 1


def _nframes(b: int, total: int, video_fps: float | None, knobs: dict[str, Any]) -> int:
    # upstream smart_nframes
    if "nframes" in knobs and any(k in knobs for k in FPS_MODE_KNOBS):
        raise ConfigError(f"sampler {NAME!r}: knob `nframes` cannot be combined with fps-mode knobs "
                          f"{', '.join(FPS_MODE_KNOBS)} (upstream: 'Only accept either `fps` or `nframes`')")
    if any(k in knobs for k in FPS_MODE_KNOBS):
        if video_fps is None or video_fps <= 0:
            raise ConfigError(f"sampler {NAME!r}: knob `fps` mode needs the clip's `fps` (> 0)")
        fps = knobs.get("fps", FPS)
        lo = math.ceil(knobs.get("min_frames", FPS_MIN_FRAMES) / FRAME_FACTOR) * FRAME_FACTOR
        hi = math.floor(knobs.get("max_frames", min(FPS_MAX_FRAMES, total)) / FRAME_FACTOR) * FRAME_FACTOR
        nf = math.floor(min(max(total / video_fps * fps, lo), hi, total) / FRAME_FACTOR) * FRAME_FACTOR
    else:
        nf = round(knobs.get("nframes", b) / FRAME_FACTOR) * FRAME_FACTOR
    if not FRAME_FACTOR <= nf <= total:
        raise ConfigError(f"sampler {NAME!r}: {nf} frames (from budget {b}, knobs {knobs or 'none'}) is outside "
                          f"[{FRAME_FACTOR}, {total}] for a clip/window of {total} frames (upstream raises)")
    return int(nf)


def qwen_indices(T: int, b: int, *, fps: float | None, start: float | None, end: float | None,
                 knobs: dict[str, Any]) -> SampledIndices:
    """Indices qwen-vl-utils 0.0.14 ``_read_video_decord`` requests from a ``T``-frame clip.

    Window (``calculate_video_frame_range``): start = ⌈clamp(video_start)·fps⌉,
    end = min(⌊clamp(video_end)·fps⌋, T − 1), clamp to [0, T/fps]; start ≥ end raises.
    Count (``smart_nframes``): ``nframes`` mode (default; nframes = the budget ``b`` unless
    the knob is set) rounds half to even to a multiple of 2 (3 → 4, 5 → 4, 7 → 8); fps mode
    (any of the knobs fps, min_frames, max_frames; unset ones take upstream's defaults 2.0,
    4, min(768, frames)) takes frames/clip_fps·fps clamped to [min, max] and to the frame
    count, floored to a multiple of 2. A count outside [2, frames] raises as upstream does.
    Indices: ``torch.linspace(start, end, n).round().long()`` (float32), computed by torch
    when importable, else emulated; ``record["arithmetic"]`` says which.
    """
    s, e, total = _frame_range(T, fps, start, end)
    n = _nframes(b, total, fps, knobs)
    idx, how = linspace_round(s, e, n)
    return SampledIndices(idx, {"sampler": NAME, "knobs": dict(knobs), "upstream": UPSTREAM, "arithmetic": how,
                                "frames_requested": n})
