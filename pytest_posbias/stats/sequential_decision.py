"""The outcome of a sequential gate, shared by both sequential designs.

:class:`SequentialDecision` records where a gate stopped and why; :func:`violation_alternative` is
the futility rule's alternative θ1 that both designs' early PASS stops test against; a gate whose
unit values are not all finite stops with :func:`_non_finite`'s inconclusive decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError


def violation_alternative(lower: float, upper: float, estimate: float) -> float:
    """The futility rule's alternative θ1: a violation as far past the violated bound as the
    bound lies from zero, always on the *violating* side of the region.

    * upper bound only (rates, x <= t): θ1 = 2t (``t + |t|``; ``t + 0.05`` when t = 0);
    * lower bound only (a floor, x >= f): θ1 = f/2 (``f − |f|/2``: halfway from the floor to 0;
      ``f − 0.05`` when f = 0);
    * two-sided (|x| <= t): θ1 = ±2t on the side of the current estimate (``±0.05`` when t = 0).

    Futility stops a detect gate with PASS only when even θ1 could no longer be shown by the last
    look, so θ1 must violate the region; an alternative on the compliant side (the old
    ``2 × lower`` for a floor) made futility stop a violating gate with PASS.
    """
    up, lo = math.isfinite(upper), math.isfinite(lower)
    if up and lo:
        above = estimate >= (lower + upper) / 2
        return upper + (abs(upper) or 0.05) if above else lower - (abs(lower) or 0.05)
    if up:
        return upper + (abs(upper) if upper != 0 else 0.05)
    if lo:
        return lower - (abs(lower) / 2 if lower != 0 else 0.05)
    raise ConfigError("a region with no finite bound has no violation to look for")


@dataclass
class SequentialDecision:
    """Where a sequential gate stopped and why."""

    passed: bool
    stopped_at: int
    n_max: int
    ci_low: float
    ci_high: float
    estimate: float
    p_value: float
    reason: str
    looks: list[int] = field(default_factory=list)
    method: str = ""
    inconclusive: bool = False  # the data could not decide (too few units, zero spread, non-finite values)


def _non_finite(xs: NDArray[np.float64], n_max: int, looks: list[int], method: str) -> SequentialDecision:
    """Non-finite unit values (a lost unit that reached the rule): stop, pass in neither mode."""
    bad = int(np.count_nonzero(~np.isfinite(xs)))
    return SequentialDecision(False, int(xs.size), n_max, math.nan, math.nan, math.nan, 1.0,
                              f"inconclusive: {bad} of {xs.size} unit values are not finite (NaN or inf), and a unit "
                              "that was not measured is never scored, so the gate does not pass in either mode",
                              looks, method, inconclusive=True)
