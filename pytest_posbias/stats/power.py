"""Statistics core, power: the smallest violation a detect-mode gate shows with 80% power at its n
(docs/design.md section 5). Re-exported by :mod:`pytest_posbias.stats`."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as _st
from scipy.optimize import brentq

from ..errors import ConfigError
from .intervals import _check_alpha, _check_count
from .rules import rate_min_sample
from .verdicts import _bounds


def detectable_effect(*, kind: str, n: int, threshold: float, sides: str = "upper", alpha: float = 0.05,
                      power: float = 0.8, sd: float | None = None) -> float:
    """The smallest violation a detect-mode gate shows with probability ``power`` at this n.

    Returned as the true value of the statistic on the violating side (for ``sides='both'`` its
    magnitude, e.g. 0.045 for |MEG|): a gate whose value exceeds 2 × threshold could not detect
    a violation of twice its threshold with 80% power ("underpowered").

    * ``kind='mean'`` (bootstrap mean gates, the stressor amplification): the one-sided Student-t
      test at level α with n − 1 degrees of freedom, which the cluster bootstrap approximates, at the
      observed unit SD ``sd`` (n = independent units): solves P(T'_{n−1}(δ√n / sd) > t_{1−α, n−1})
      = power for δ with the noncentral t (``scipy.stats.nct``) and returns bound ± δ.
    * ``kind='rate'`` (exact binomial gates, upper bound t): the smallest rate p1 with
      P(X >= k* | n, p1) >= power, where k* is the smallest count with P(X >= k* | n, t) < α.

    ``inf`` when no violation is detectable at this n (n < 2, zero SD, or k* > n).
    """
    a = _check_alpha(alpha)
    _check_count("n", n)
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not a < float(power) < 1.0:
        raise ConfigError(f"`power` must be a number in (alpha, 1); got {power!r}")
    if kind == "rate":
        if sides != "upper":
            raise ConfigError(f"`sides` must be 'upper' for a rate; got {sides!r}")
        if not 0.0 <= threshold < 1.0:
            raise ConfigError(f"`threshold` must lie in [0, 1) for a rate; got {threshold!r}")
        if n < rate_min_sample(threshold=threshold, mode="detect", alpha=a):
            return math.inf
        ks = np.arange(n + 1)
        k_star = int(ks[np.asarray(_st.binom.sf(ks - 1, n, threshold)) < a][0])
        return float(brentq(lambda p1: float(_st.binom.sf(k_star - 1, n, p1)) - power, threshold, 1.0, xtol=1e-9))
    if kind != "mean":
        raise ConfigError(f"`kind` must be 'mean' or 'rate'; got {kind!r}")
    lower, upper = _bounds(threshold, sides)
    if sd is None or not math.isfinite(sd) or sd < 0:
        raise ConfigError(f"`sd` must be a finite non-negative number for a mean; got {sd!r}")
    if n < 2 or sd == 0:
        return math.inf
    df = n - 1
    crit = float(_st.t.isf(a, df))

    def short(delta: float) -> float:
        return float(_st.nct.sf(crit, df, delta * math.sqrt(n) / sd)) - power

    hi = sd
    while short(hi) < 0:
        hi *= 2
    delta = float(brentq(short, 0.0, hi, xtol=1e-12))
    return lower - delta if sides == "lower" else upper + delta

