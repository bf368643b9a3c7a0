"""Statistics core, the share-minus-indicator rule for units with a rare-event 0/1 component (the
stressor amplification; docs/design.md section 5). Re-exported by :mod:`pytest_posbias.stats`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st
from scipy.optimize import brentq

from ..errors import ConfigError
from .intervals import MIN_CLUSTERS, _check_alpha
from .rules import mean_verdict
from .verdicts import Verdict, _bounds, _check_mode, _decide, inconclusive_verdict, region_p

RARE_MIN_COUNT = 5  # the bootstrap decides a share-minus-indicator mean only with this many of the rarer outcome
SHARE_ALPHA_FRACTION = 0.2  # of α spent on the share's bound in the decomposed rule; the rest on the indicator's


def share_difference_bounds(share: ArrayLike, indicator: ArrayLike, *, alpha: float
                            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """One-sided (1 − α) lower and upper bounds of μ = E[share] − P(indicator), decomposed.

    ``share`` (values in [0, 1]) and ``indicator`` (0/1) hold one value per independent unit, in the
    last axis (rows of a 2-D array are separate samples). By Bonferroni over the two parts,
    with α_s = ``SHARE_ALPHA_FRACTION``·α and α_c = α − α_s:

        L = L_t(share; α_s) − U_CP(indicator; α_c),   U = U_t(share; α_s) − L_CP(indicator; α_c)

    where L_t/U_t are Student-t bounds of the share's mean, kept in [0, 1] where its mean lies (with the exact
    zero-spread floor of :func:`zero_spread_interval` on [0, 1] when every share is equal) and L_CP/U_CP are the exact
    Clopper–Pearson bounds of the indicator's rate. Each bound holds at level α whatever the rate of
    the indicator, also when it is rare and the sample holds none of it.
    """
    a = _check_alpha(alpha)
    sh = np.atleast_2d(np.asarray(share, dtype=float))
    ind = np.atleast_2d(np.asarray(indicator, dtype=float))
    if sh.shape != ind.shape or sh.shape[-1] < 2:
        raise ConfigError(f"`share` and `indicator` must have the same shape with at least 2 units; got {sh.shape} "
                          f"and {ind.shape}")
    _check_units(sh, ind)
    a_s = SHARE_ALPHA_FRACTION * a
    a_c = a - a_s
    n = sh.shape[-1]
    mean = sh.mean(axis=-1)
    sd = sh.std(axis=-1, ddof=1)
    q = float(_st.t.isf(a_s, n - 1))
    shrink = 1.0 - a_s ** (1.0 / n)
    flat = sd == 0
    half = np.where(flat, 0.0, q * sd / math.sqrt(n))
    s_lo = np.where(flat, mean - shrink * mean, np.maximum(mean - half, 0.0))  # E[share] lies in [0, 1]
    s_hi = np.where(flat, mean + shrink * (1 - mean), np.minimum(mean + half, 1.0))
    k = ind.sum(axis=-1)
    c_hi = np.where(k < n, _st.beta.isf(a_c, k + 1, np.maximum(n - k, 1)), 1.0)
    c_lo = np.where(k > 0, _st.beta.ppf(a_c, np.maximum(k, 1), n - k + 1), 0.0)
    return np.asarray(s_lo - c_hi, dtype=float), np.asarray(s_hi - c_lo, dtype=float)


def _check_units(sh: NDArray[np.float64], ind: NDArray[np.float64]) -> None:
    if not (np.all(np.isfinite(sh)) and np.all((sh >= 0) & (sh <= 1))):
        raise ConfigError("`share` must hold finite values in [0, 1]")
    if not np.all((ind == 0) | (ind == 1)):
        raise ConfigError("`indicator` must hold only 0 and 1")


def share_difference_rule(share: ArrayLike, indicator: ArrayLike, *, lower: float, upper: float, mode: str,
                          alpha: float) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """The decomposed rule of :func:`share_difference_verdict` on one or many samples (rows):
    (decided, passed) per sample. Detect fails when the bounds of :func:`share_difference_bounds`
    lie wholly outside [lower, upper]; certify passes when both lie inside (the bootstrap branch is
    the verdict's own).
    """
    lo, hi = share_difference_bounds(share, indicator, alpha=alpha)
    passed = ~((lo > upper) | (hi < lower)) if mode == "detect" else (lo > lower) & (hi < upper)
    return np.ones_like(passed), passed


def share_difference_min_sample(*, lower: float, upper: float, mode: str, alpha: float, n_max: int = 10_000) -> int:
    """Smallest n at which the decomposed rule could decide on the most extreme sample.

    Detect (upper bound t): every share 1 and no indicator; certify: every share 0 and every
    indicator 1 (and the mirror images for a lower bound). Below it the verdict is inconclusive.
    """
    for n in range(2, n_max + 1):
        one, zero = np.ones(n), np.zeros(n)
        if mode == "detect":
            hit = ((math.isfinite(upper) and share_difference_bounds(one, zero, alpha=alpha)[0][0] > upper)
                   or (math.isfinite(lower) and share_difference_bounds(zero, one, alpha=alpha)[1][0] < lower))
        else:
            mid = (max(lower, -1.0) + min(upper, 1.0)) / 2
            lo, hi = share_difference_bounds(one * max(0.0, mid), one if mid < 0 else zero, alpha=alpha)
            hit = bool(lo[0] > lower and hi[0] < upper)
        if hit:
            return n
    return n_max + 1


def share_difference_verdict(share: ArrayLike, indicator: ArrayLike, *, name: str, threshold: float,
                             sides: str = "upper", mode: str = "detect", alpha: float = 0.05, unit: str = "units",
                             n_resamples: int = 9999, rng: np.random.Generator,
                             extra: Mapping[str, Any] | None = None) -> Verdict:
    """Gate on the mean of d_i = share_i − indicator_i, one value per independent unit (the stressor
    amplification: share of a video's stressed outputs that repeat minus its clean 0/1 flag).

    A bootstrap of d cannot see a rare indicator outcome the sample happened to miss, so the BCa
    cluster bootstrap of d decides only when the sample holds at least ``RARE_MIN_COUNT`` units of
    the rarer outcome; otherwise the decomposed rule :func:`share_difference_bounds` decides, which
    holds its level at every indicator rate. Below :func:`share_difference_min_sample` units the
    verdict is inconclusive; non-finite values never pass.
    """
    a = _check_alpha(alpha)
    _check_mode(mode)
    lower, upper = _bounds(threshold, sides)
    sh = np.asarray(share, dtype=float)
    ind = np.asarray(indicator, dtype=float)
    if sh.ndim != 1 or sh.shape != ind.shape:
        raise ConfigError(f"`share` and `indicator` must be 1-D arrays of the same length; got {sh.shape} and "
                          f"{ind.shape}")
    n = int(sh.size)
    if n and not (np.all(np.isfinite(sh)) and np.all(np.isfinite(ind))):
        bad = int(np.count_nonzero(~np.isfinite(sh) | ~np.isfinite(ind)))
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=n, mode=mode, alpha=a, unit=unit,
                                    fail_closed=True, extra=extra,
                                    why=f"{bad} of {n} units have non-finite values (NaN or inf), and a unit that was "
                                        "not measured is never scored")
    _check_units(sh, ind)  # before the branch: the bootstrap would decide on out-of-range units as on any others
    n_min = max(MIN_CLUSTERS, share_difference_min_sample(lower=lower, upper=upper, mode=mode, alpha=a))
    d = sh - ind
    est = float(d.mean()) if n else math.nan
    if n < n_min:
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=n, mode=mode, alpha=a, unit=unit,
                                    estimate=est, extra={"min_sample": n_min, **(extra or {})},
                                    why=f"fewer than {n_min} units, below which no sample could "
                                        + ("show a violation" if mode == "detect" else "certify compliance"))
    rare = int(min(ind.sum(), n - ind.sum()))
    if rare >= RARE_MIN_COUNT:
        v = mean_verdict(d, None, name=name, threshold=threshold, sides=sides, mode=mode, alpha=a, unit=unit,
                         n_resamples=n_resamples, rng=rng, method="bca", extra=extra, value_range=(-1.0, 1.0))
        return replace(v, extra={**v.extra, "rare_count": rare, "min_sample": n_min})
    lo_b, hi_b = share_difference_bounds(sh, ind, alpha=a)
    lo, hi = float(lo_b[0]), float(hi_b[0])

    def p_of(side: str, bound: float) -> float:
        """Smallest α' at which the decomposed bound on ``side`` passes ``bound`` (0.5 caps it)."""
        def f(x: float) -> float:
            lb, ub = share_difference_bounds(sh, ind, alpha=x)
            return float(lb[0] - bound) if side == "lower" else float(bound - ub[0])

        if f(0.4999) <= 0:
            return 1.0
        if f(1e-12) > 0:
            return 1e-12
        return float(brentq(f, 1e-12, 0.4999, xtol=1e-10))

    p_det, p_cert = region_p(lambda b: p_of("lower", b), lambda b: p_of("upper", b), lower, upper)
    ex = {"n_instances": n, "rare_count": rare, "min_sample": n_min,
          "method": f"decomposed: t bound of the share + exact Clopper-Pearson bound of the 0/1 indicator "
                    f"(fewer than {RARE_MIN_COUNT} of the rarer outcome for a bootstrap)", **(extra or {})}
    return _decide(name=name, estimate=est, ci_low=lo, ci_high=hi, lower=lower, upper=upper, threshold=threshold, n=n,
                   unit=unit, mode=mode, alpha=a, p_detect=p_det, p_certify=p_cert, extra=ex)

