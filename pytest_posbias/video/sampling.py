"""Frame samplers (DESIGN.md section 4): the four deployed conventions, the harness presets
that reproduce deployed code exactly, and the polyphase grids of PhaseFusion.

Indices are always returned as a list of ints and recorded by the caller. Phases are
exact rationals: a float phase is read as ``Fraction(phase).limit_denominator(10**6)``
(so 1/3 given as 0.3333… is exactly 1/3) and the grid is computed in integers.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import ConfigError, FrameRangeError

CONVENTIONS = ("left", "midpoint", "endpoint", "fps")
PRESETS = ("qwen-vl-utils", "lmms-eval", "videostf", "internvl", "vlmevalkit")
ALL = CONVENTIONS + PRESETS

__all__ = ["ALL", "CONVENTIONS", "PRESETS", "as_fraction", "frame_indices", "polyphase_grids", "window"]


def as_fraction(x: float | Fraction | str, *, name: str = "phase") -> Fraction:
    """Exact rational of a phase: Fraction, "p/q" string, or float (limit_denominator(10**6))."""
    try:
        if isinstance(x, Fraction):
            f = x
        elif isinstance(x, str):
            f = Fraction(x)
        elif isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool):
            if not math.isfinite(float(x)):
                raise ValueError
            f = Fraction(float(x)).limit_denominator(10**6)
        else:
            raise ValueError
    except (ValueError, ZeroDivisionError):
        raise ConfigError(f"`{name}` must be a finite number, a Fraction or a 'p/q' string; got {x!r}") from None
    return f


def _check_tb(T: int, b: int) -> None:
    for name, v in (("T", T), ("b", b)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(f"`{name}` must be an integer >= 1; got {v!r}")


def _left(T: int, b: int, phase: Fraction) -> list[int]:
    # ⌊(i + p/q)·T/b⌋ = ⌊(i·q + p)·T / (q·b)⌋ in integers
    p, q = phase.numerator, phase.denominator
    return [min(T - 1, ((i * q + p) * T) // (q * b)) for i in range(b)]


def _endpoint(T: int, b: int) -> list[int]:
    # np.linspace(0, T-1, b) rounded half to even (np.round)
    return [int(v) for v in np.round(np.linspace(0, T - 1, b))]


def _torch_linspace_f32(start: float, end: float, steps: int) -> np.ndarray:
    """torch.linspace(start, end, steps) in float32 (torch's CPU kernel: the first half is
    start + step·i, the second half end − step·(steps − 1 − i), all in float32)."""
    if steps == 1:
        return np.array([start], dtype=np.float32)
    s = np.float32(start)
    e = np.float32(end)
    step = np.float32((e - s) / np.float32(steps - 1))
    i = np.arange(steps)
    half = steps // 2
    lo = s + step * i[:half].astype(np.float32)
    hi = e - step * (steps - 1 - i[half:]).astype(np.float32)
    return np.concatenate([lo, hi]).astype(np.float32)


def window(T: int, fps: float | None, start: float | None, end: float | None) -> tuple[int, int]:
    """First and last frame index of the [start, end] seconds window (MVBench bounds).

    start_idx = max(0, round(start·fps)), end_idx = min(round(end·fps), T − 1).
    """
    if start is None and end is None:
        return 0, T - 1
    if fps is None or fps <= 0:
        raise ConfigError("`fps` is required (> 0) when `start`/`end` seconds are given")
    s = 0 if start is None else max(0, round(start * fps))
    e = T - 1 if end is None else min(round(end * fps), T - 1)
    if s > T - 1:
        raise FrameRangeError("<clip>", f"window start {start} s lies after the clip's end ({T / fps:.2f} s)")
    if e < s:
        raise FrameRangeError("<clip>", f"window [{start}, {end}] s is empty or reversed for a clip of {T / fps:.2f} s")
    return s, e


def frame_indices(
    T: int,
    b: int,
    *,
    convention: str,
    phase: float | Fraction | str = 0.0,
    fps: float | None = None,
    start: float | None = None,
    end: float | None = None,
) -> list[int]:
    """Indices of ``b`` frames of a ``T``-frame clip under a sampling convention.

    * ``left``: ⌊(i + phase)·T/b⌋;  ``midpoint``: left with phase ½;
    * ``endpoint``: ``np.linspace(0, T−1, b)`` rounded half to even;
    * ``fps``: frames ⌊k·fps⌋ for each whole second k, then ``endpoint`` over those;
    * ``qwen-vl-utils``: ``torch.linspace(0, T−1, n).round()`` (float32), n = b floored to even;
    * ``lmms-eval``, ``videostf``: ``np.linspace(0, T−1, n, dtype=int)`` (truncation);
    * ``internvl``: seg = (T−1)/n, ``int(seg/2 + np.round(seg·i))`` (InternVL ``get_index``);
    * ``vlmevalkit``: ``int(i·T/(n+1))``, i = 1..n.

    ``start``/``end`` (seconds, needs ``fps``) restrict sampling to a window; indices
    stay absolute. ``phase`` applies to ``left`` only (midpoint is phase ½).
    """
    _check_tb(T, b)
    if convention not in ALL:
        raise ConfigError(f"`convention` must be one of {', '.join(ALL)}; got {convention!r}")
    ph = as_fraction(phase)
    if not 0 <= ph < 1:
        raise ConfigError(f"`phase` must lie in [0, 1); got {phase!r}")
    if ph != 0 and convention != "left":
        raise ConfigError(f"`phase` applies to the 'left' convention only; got phase {phase!r} with {convention!r}")
    if fps is not None and (not math.isfinite(fps) or fps <= 0):
        raise ConfigError(f"`fps` must be a positive number; got {fps!r}")

    if convention == "internvl":
        # InternVL get_index: bound -> start_idx/end_idx; max_frame = T - 1
        if start is None and end is None:
            s_idx, e_idx = 0, T - 1
        else:
            s_idx, e_idx = window(T, fps, start, end)
        seg = float(e_idx - s_idx) / b
        return [int(s_idx + seg / 2 + np.round(seg * i)) for i in range(b)]

    lo, hi = window(T, fps, start, end)
    n = hi - lo + 1

    if convention == "left":
        rel = _left(n, b, ph)
    elif convention == "midpoint":
        rel = _left(n, b, Fraction(1, 2))
    elif convention == "endpoint":
        rel = _endpoint(n, b)
    elif convention == "fps":
        if fps is None:
            raise ConfigError("`fps` is required for the 'fps' convention (decimation to 1 frame per second)")
        per_second = []
        k = 0
        while True:
            f = math.floor(k * fps)
            if f > n - 1:
                break
            per_second.append(f)
            k += 1
        rel = [per_second[j] for j in _endpoint(len(per_second), b)]
    elif convention == "qwen-vl-utils":
        m = b - (b % 2)
        if m < 2:
            raise ConfigError(f"`b` must be >= 2 for 'qwen-vl-utils' (frame count floored to even); got {b}")
        rel = [int(v) for v in np.round(_torch_linspace_f32(0.0, float(n - 1), m)).astype(np.int64)]
    elif convention in ("lmms-eval", "videostf"):
        rel = [int(v) for v in np.linspace(0, n - 1, b, dtype=int)]
    else:  # vlmevalkit
        rel = [int(i * n / (b + 1)) for i in range(1, b + 1)]
    return [lo + r for r in rel]


def polyphase_grids(
    T: int, b: int, S: int, *, origin: float | Fraction | str = 0.0
) -> list[list[int]]:
    """The S phase grids of budget b: grid s is ⌊(i + s/S + origin)·T/b⌋, i = 0..b−1.

    With ``origin = 0`` grid s equals ``(i·S + s)·T // (S·b)`` and the S grids interleave
    into the dense S·b-frame left grid (sample i of phase s is dense sample k = i·S + s).
    ``origin`` shifts every grid by that fraction of a b-grid step (the phase paper's
    reproducibility test uses half the spacing between adjacent phases, 1/(2S)).
    Indices past the last frame are clipped to T − 1.
    """
    _check_tb(T, b)
    if isinstance(S, bool) or not isinstance(S, (int, np.integer)) or S < 1:
        raise ConfigError(f"`S` must be an integer >= 1; got {S!r}")
    o = as_fraction(origin, name="origin")
    if not 0 <= o < 1:
        raise ConfigError(f"`origin` must lie in [0, 1) grid steps; got {origin!r}")
    p, q = o.numerator, o.denominator
    # ⌊((i·S + s)·q + p·S)·T / (S·b·q)⌋
    return [[min(T - 1, (((i * S + s) * q + p * S) * T) // (S * b * q)) for i in range(b)] for s in range(S)]
