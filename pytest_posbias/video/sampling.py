"""Frame samplers (docs/design.md section 4): the four deployed conventions, the harness presets
that reproduce deployed code exactly (:mod:`pytest_posbias.video.samplers`), and the
polyphase grids of PhaseFusion.

Indices are returned as a list of ints and recorded by the caller. Phases are exact rationals
(:func:`as_fraction`: 1/3 given as 0.3333… is exactly 1/3), so grids are computed in integers.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import ConfigError
from .samplers import PRESETS as _PRESETS
from .samplers import is_preset_spec, preset_indices
from .samplers.base import window

CONVENTIONS = ("left", "midpoint", "endpoint", "fps")
PRESETS = tuple(_PRESETS)
ALL = CONVENTIONS + PRESETS


def as_fraction(x: float | Fraction | str, *, name: str = "phase") -> Fraction:
    """Exact rational of a phase: Fraction, "p/q" string, or float (limit_denominator(10**6))."""
    try:
        if isinstance(x, (Fraction, str)):
            return Fraction(x)
        if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x):
            return Fraction(float(x)).limit_denominator(10**6)
    except (ValueError, ZeroDivisionError):
        pass
    raise ConfigError(f"`{name}` must be a finite number, a Fraction or a 'p/q' string; got {x!r}")


def _check_counts(**counts: int) -> None:
    for name, v in counts.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(f"`{name}` must be an integer >= 1; got {v!r}")


def _endpoint(T: int, b: int) -> list[int]:
    return [int(v) for v in np.round(np.linspace(0, T - 1, b))]


def frame_indices(T: int, b: int, *, convention: str, phase: float | Fraction | str = 0.0, fps: float | None = None,
                  start: float | None = None, end: float | None = None) -> list[int]:
    """Indices of ``b`` frames of a ``T``-frame clip under a sampling convention or preset.

    * ``left``: ⌊(i + phase)·T/b⌋;  ``midpoint``: left with phase ½;
    * ``endpoint``: ``np.linspace(0, T−1, b)`` rounded half to even;
    * ``fps``: frames ⌊k·fps⌋ for each whole second k, then ``endpoint`` over those;
    * a harness preset spec (``"qwen-vl-utils"``, ``"lmms-eval:fps=1"``, ``"internvl"``,
      ``"vlmevalkit"``, ``"videostf"``; see :mod:`pytest_posbias.video.samplers`): the
      indices the upstream code requests, as a :class:`SampledIndices` whose ``record``
      names the preset, its knobs and the upstream version; its window rules are upstream's.

    ``start``/``end`` (seconds, needs ``fps``) restrict sampling to a window; indices
    stay absolute. ``phase`` applies to ``left`` only (midpoint is phase ½).
    """
    _check_counts(T=T, b=b)
    if not isinstance(convention, str) or (convention not in CONVENTIONS and not is_preset_spec(convention)):
        raise ConfigError(f"`convention` must be one of {', '.join(ALL)} (a preset may add ':knob=value,...'); "
                          f"got {convention!r}")
    ph = as_fraction(phase)
    if not 0 <= ph < 1:
        raise ConfigError(f"`phase` must lie in [0, 1); got {phase!r}")
    if ph != 0 and convention != "left":
        raise ConfigError(f"`phase` applies to the 'left' convention only; got phase {phase!r} with {convention!r}")
    if fps is not None and (not math.isfinite(fps) or fps <= 0):
        raise ConfigError(f"`fps` must be a positive number; got {fps!r}")
    for name, sec in (("start", start), ("end", end)):
        if sec is not None and (isinstance(sec, bool) or not isinstance(sec, (int, float, np.integer, np.floating))
                                or not math.isfinite(sec)):
            raise ConfigError(f"`{name}` must be a finite number of seconds; got {sec!r}")
    if convention not in CONVENTIONS:
        return preset_indices(convention, int(T), int(b), fps=fps, start=start, end=end)

    lo, hi = window(T, fps, start, end)
    n = hi - lo + 1

    if convention in ("left", "midpoint"):  # ⌊(i + p/q)·n/b⌋ = ⌊(i·q + p)·n / (q·b)⌋ in integers
        p, q = (ph if convention == "left" else Fraction(1, 2)).as_integer_ratio()
        rel = [min(n - 1, ((i * q + p) * n) // (q * b)) for i in range(b)]
    elif convention == "endpoint":
        rel = _endpoint(n, b)
    else:  # fps
        if fps is None:
            raise ConfigError("`fps` is required for the 'fps' convention (decimation to 1 frame per second)")
        per_second: list[int] = []  # frame ⌊k·fps⌋ of each whole second k
        while (f := math.floor(len(per_second) * fps)) <= n - 1:
            per_second.append(f)
        rel = [per_second[j] for j in _endpoint(len(per_second), b)]
    return [lo + r for r in rel]


def polyphase_grids(T: int, b: int, S: int, *, origin: float | Fraction | str = 0.0) -> list[list[int]]:
    """The S phase grids of budget b: grid s is ⌊(i + s/S + origin)·T/b⌋, i = 0..b−1.

    With ``origin = 0`` grid s equals ``(i·S + s)·T // (S·b)`` and the S grids interleave
    into the dense S·b-frame left grid (sample i of phase s is dense sample k = i·S + s).
    ``origin`` shifts every grid by that fraction of a b-grid step (the phase paper's
    reproducibility test uses half the spacing between adjacent phases, 1/(2S)).
    Indices past the last frame are clipped to T − 1.
    """
    _check_counts(T=T, b=b, S=S)
    o = as_fraction(origin, name="origin")
    if not 0 <= o < 1:
        raise ConfigError(f"`origin` must lie in [0, 1) grid steps; got {origin!r}")
    p, q = o.numerator, o.denominator
    # ⌊((i·S + s)·q + p·S)·T / (S·b·q)⌋
    return [[min(T - 1, (((i * S + s) * q + p * S) * T) // (S * b * q)) for i in range(b)] for s in range(S)]
