"""The confidence-sequence design: look after every batch, stop as soon as the decision is settled.

The interval is an anytime-valid confidence sequence for the mean of bounded i.i.d. units
(the per-group mean for positional gates, the per-item or per-video value for the
others): the hedged betting CS with predictable plug-in bets of Waudby-Smith & Ramdas
(2023, JRSS-B, "Estimating means of bounded random variables by betting", §4–5). Each
side is a one-sided level-α sequence, so the pair is a (1 − 2α) CS, matching the
fixed-sample convention of :mod:`~pytest_posbias.stats`. Because it holds uniformly over
time, looking after every batch and stopping at any point keeps the stated error rates:

* ``detect``: stop with FAIL as soon as the CS lies wholly outside the allowed region;
  stop with PASS as soon as it lies wholly inside it (compliance shown); else PASS at the
  maximum sample size (no violation shown). P(FAIL | compliant) <= α.
* ``certify``: stop with PASS as soon as the CS lies wholly inside the region; stop with
  FAIL as soon as it lies wholly outside; else FAIL at the maximum. P(PASS | violating) <= α.

p-values are anytime-valid: p = min(1, 1 / max over looks of the betting wealth against
the boundary), by Ville's inequality.

:func:`decide` applies the rule; :func:`confidence_sequence` (betting, bounded values) and
:func:`asymptotic_cs` (variance-adaptive) are the two sequences it uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..config import check_alpha
from ..errors import ConfigError
from .sequential_decision import SequentialDecision, _non_finite, violation_alternative

GRID = np.linspace(0.0, 1.0, 2001)


def _bets(x: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """Predictable plug-in bets (WSR 2023, eq. 26 with log(1/α) for a one-sided test):
    λ_t = sqrt(2 log(1/α) / (σ̂²_{t−1} · t · log(1 + t))), with μ̂_t = (1/2 + Σ_{i<=t} x_i)/(t + 1)
    and σ̂²_t = (1/4 + Σ_{i<=t} (x_i − μ̂_i)²)/(t + 1), σ̂²_0 = 1/4."""
    n = x.size
    t = np.arange(1, n + 1, dtype=float)
    mu_hat = (0.5 + np.cumsum(x)) / (t + 1)
    var_hat = (0.25 + np.cumsum((x - mu_hat) ** 2)) / (t + 1)
    var_prev = np.concatenate([[0.25], var_hat[:-1]])
    return np.sqrt(2 * math.log(1 / alpha) / (var_prev * t * np.log1p(t)))


def log_wealth(x: ArrayLike, alpha: float, *, grid: NDArray[np.float64] = GRID, c: float = 0.5
               ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Cumulative log wealth of the two betting processes for every candidate mean m on ``grid``.

    Returns (log K⁺, log K⁻), each (n, len(grid)): K⁺ bets that the mean exceeds m (large
    wealth rejects m as too small: the lower bound), K⁻ that it is below m (the upper bound).
    ``x`` must lie in [0, 1].
    """
    xs = np.asarray(x, dtype=float)
    if xs.ndim != 1:
        raise ConfigError("`x` must be 1-D")
    if xs.size and (xs.min() < -1e-12 or xs.max() > 1 + 1e-12):
        raise ConfigError("`x` must lie in [0, 1] (rescale the values to the unit interval first)")
    lam = _bets(xs, alpha)[:, None]
    m = grid[None, :]
    lam_up = np.minimum(lam, c / np.maximum(m, 1e-12))
    lam_dn = np.minimum(lam, c / np.maximum(1 - m, 1e-12))
    d = xs[:, None] - m
    up = np.cumsum(np.log1p(lam_up * d), axis=0)
    dn = np.cumsum(np.log1p(-lam_dn * d), axis=0)
    return up, dn


def confidence_sequence(x: ArrayLike, alpha: float, *, lo: float = 0.0, hi: float = 1.0
                        ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Running (1 − 2α) confidence sequence (lower_t, upper_t) for the mean of values in [lo, hi].

    Each bound is one-sided level α and the running intersection is taken, so
    P(∃t: mean ∉ [lower_t, upper_t]) <= 2α.
    """
    check_alpha(alpha, "`alpha`")
    if not hi > lo:
        raise ConfigError(f"`hi` must exceed `lo`; got {lo}, {hi}")
    xs = (np.asarray(x, dtype=float) - lo) / (hi - lo)
    up, dn = log_wealth(np.clip(xs, 0, 1), alpha)
    thr = math.log(1 / alpha)
    keep_lo = up < thr  # m not rejected as too small
    keep_hi = dn < thr
    first_kept = np.where(keep_lo.any(axis=1), keep_lo.argmax(axis=1), GRID.size - 1)
    last_kept = np.where(keep_hi.any(axis=1), GRID.size - 1 - keep_hi[:, ::-1].argmax(axis=1), 0)
    lower = np.maximum.accumulate(GRID[first_kept])
    upper = np.minimum.accumulate(GRID[last_kept])
    return lo + (hi - lo) * lower, lo + (hi - lo) * upper


BURN_IN = 10  # the asymptotic CS starts (and is intersected) from this many units


def asymptotic_cs(x: ArrayLike, alpha: float, *, t_opt: int = 30) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Running asymptotic (1 − 2α) confidence sequence for a mean (Waudby-Smith, Arbour, Sinha,
    Kennedy & Ramdas, "Time-uniform central limit theory and asymptotic confidence sequences",
    Ann. Statist. 2024, Thm 2.2): μ̂_t ± σ̂_t · sqrt(2(tρ² + 1)/(t²ρ²) · log(sqrt(tρ² + 1)/α)),
    each side at level α, with ρ tuned to be tightest at ``t_opt`` units. Variance-adaptive and free of
    the a priori range, so it suits per-group DPB/MEG values that sit in a narrow band of [−1, 1].
    """
    xs = np.asarray(x, dtype=float)
    t = np.arange(1, xs.size + 1, dtype=float)
    mean = np.cumsum(xs) / t
    sq = np.cumsum(xs**2) / t
    var = np.maximum(sq - mean**2, 0.0) * t / np.maximum(t - 1, 1)
    sd = np.sqrt(np.where(t > 1, var, np.inf))
    la = -2 * math.log(alpha)
    rho2 = (la + math.log(la + 1)) / t_opt
    half = sd * np.sqrt(2 * (t * rho2 + 1) / (t**2 * rho2) * np.log(np.sqrt(t * rho2 + 1) / alpha))
    lower, upper = mean - half, mean + half
    early = t < BURN_IN  # the plug-in variance is unreliable before the burn-in: no bound yet
    lower[early], upper[early] = -np.inf, np.inf
    return np.maximum.accumulate(lower), np.minimum.accumulate(upper)


def _normal_p(x: NDArray[np.float64], value: float, side: str, alpha: float, t_opt: int = 30) -> float:
    """Smallest α' at which the asymptotic CS excludes ``value`` on ``side`` at some look (anytime p)."""
    best = 1.0
    for a in np.geomspace(1e-6, 0.5, 120):
        lo, hi = asymptotic_cs(x, float(a), t_opt=t_opt)
        if (side == "upper" and np.any(lo > value)) or (side == "lower" and np.any(hi < value)):
            best = min(best, float(a))
            break
    return best


def wealth_at(x: ArrayLike, alpha: float, value: float, *, lo: float = 0.0, hi: float = 1.0) -> tuple[float, float]:
    """Max over time of the two wealth processes at the single mean ``value`` (for p-values)."""
    xs = np.clip((np.asarray(x, dtype=float) - lo) / (hi - lo), 0, 1)
    m = np.array([min(1.0, max(0.0, (value - lo) / (hi - lo)))])
    up, dn = log_wealth(xs, alpha, grid=m)
    return float(np.exp(up.max())) if up.size else 1.0, float(np.exp(dn.max())) if dn.size else 1.0

def conditional_power(x: NDArray[np.float64], n_max: int, theta1: float, upper: float, lower: float, alpha: float,
                      method: str, lo: float, hi: float) -> float:
    """P(the CS at n_max ends wholly outside the region | data so far, true mean θ1), normal approximation
    (stochastic curtailment; used only to stop a *detect* gate early for futility, which cannot raise
    its false-failure rate)."""
    from scipy.stats import norm

    k = x.size
    if k >= n_max:
        return 0.0
    sd = float(np.std(x, ddof=1)) if k > 1 else (hi - lo) / 2
    sd = max(sd, 1e-9)
    mu_k = float(x.mean())
    # half-width of the final CS, assuming the same spread
    if method == "betting":
        p = min(max(theta1, 1e-3), 1 - 1e-3)
        sd = max(sd, math.sqrt(p * (1 - p)))
    t = float(n_max)
    la = -2 * math.log(alpha)
    rho2 = (la + math.log(la + 1)) / 30
    half = sd * math.sqrt(2 * (t * rho2 + 1) / (t**2 * rho2) * math.log(math.sqrt(t * rho2 + 1) / alpha))
    m = n_max - k
    mean_final = (k * mu_k + m * theta1) / n_max
    sd_final = sd * math.sqrt(m) / n_max
    cp = 0.0
    if math.isfinite(upper):
        cp += float(norm.sf((upper + half - mean_final) / sd_final))
    if math.isfinite(lower):
        cp += float(norm.cdf((lower - half - mean_final) / sd_final))
    return min(1.0, cp)


def decide(x: ArrayLike, *, looks: Sequence[int], lower: float, upper: float, mode: str, alpha: float,
           lo: float, hi: float, method: str = "auto", futility: float = 0.10,
           theta1: float | None = None) -> SequentialDecision:
    """Apply the sequential rule to units ``x`` (in arrival order) at the given look sizes.

    ``method``: ``betting`` (exact, for {0, 1} units and other bounded values with a known
    range), ``asymptotic`` (variance-adaptive, for means in a wide nominal range), ``auto``
    (betting for 0/1 data, asymptotic otherwise). The asymptotic CS gives no bound before
    ``BURN_IN`` units, so a look earlier than that cannot stop the gate. In detect mode a look also stops with PASS
    when the conditional power to show a violation of size ``theta1`` (default:
    :func:`violation_alternative`, on the violating side) by the maximum sample is below ``futility``.
    """
    xs = np.asarray(x, dtype=float)
    if mode not in ("detect", "certify"):
        raise ConfigError(f"`mode` must be 'detect' or 'certify'; got {mode!r}")
    if xs.size and not np.all(np.isfinite(xs)):
        return _non_finite(xs, xs.size, [xs.size], "confidence sequence")
    if method == "auto":
        method = "betting" if np.all((xs == 0) | (xs == 1)) else "asymptotic"
    looks = sorted({int(k) for k in looks if 0 < k <= xs.size}) or [xs.size]
    if (method == "asymptotic" and xs.size > 1 and float(np.ptp(xs)) == 0.0
            and not (mode == "detect" and (xs[0] > upper or xs[0] < lower))):
        # the plug-in variance is 0: a zero-width sequence shows nothing about the units not drawn
        what = "no violation can be shown" if mode == "detect" else "compliance cannot be certified"
        return SequentialDecision(mode == "detect", xs.size, xs.size, math.nan, math.nan, float(xs[0]), 1.0,
                                  f"inconclusive: zero spread (every unit equals {xs[0]:.4g}), so {what}", looks,
                                  method, inconclusive=True)
    if method == "betting":
        cs_lo, cs_hi = confidence_sequence(xs, alpha, lo=lo, hi=hi)
    else:
        cs_lo, cs_hi = asymptotic_cs(xs, alpha)
    done: list[int] = []
    for k in looks:
        done.append(k)
        L, U = float(cs_lo[k - 1]), float(cs_hi[k - 1])
        outside = upper < L or lower > U
        inside = lower < L and upper > U
        th1 = theta1 if theta1 is not None else violation_alternative(lower, upper, float(xs[:k].mean()))
        futile = (mode == "detect" and not outside and k < looks[-1] and k >= 5
                  and conditional_power(xs[:k], looks[-1], th1, upper, lower, alpha, method, lo, hi) < futility)
        if outside or inside or futile or k == looks[-1]:
            if mode == "detect":
                passed = not outside
                why = ("the CS lies wholly outside the allowed region" if outside else
                       "the CS lies wholly inside the allowed region" if inside else
                       f"futility: under {th1:.3g} a violation is unlikely to be shown by n = {looks[-1]} "
                       f"(conditional power < {futility:g})" if futile else
                       "no violation shown at the maximum sample")
            else:
                passed = inside
                why = ("the CS lies wholly inside the allowed region" if inside else
                       "the CS lies wholly outside the allowed region" if outside
                       else "compliance not shown at the maximum sample")
            seg = xs[:k]
            p = _p_value(seg, mode=mode, lower=lower, upper=upper, alpha=alpha, method=method, lo=lo, hi=hi)
            return SequentialDecision(passed, k, xs.size, L, U, float(seg.mean()), p, why, done, method)
    raise AssertionError("unreachable")  # pragma: no cover

def _p_value(seg: NDArray[np.float64], *, mode: str, lower: float, upper: float, alpha: float, method: str,
             lo: float, hi: float) -> float:
    """Anytime-valid p-value of the mode's null at the region bounds."""
    if method == "betting":
        if mode == "detect":
            w_up = wealth_at(seg, alpha, upper, lo=lo, hi=hi)[0] if math.isfinite(upper) else 1.0
            w_lo = wealth_at(seg, alpha, lower, lo=lo, hi=hi)[1] if math.isfinite(lower) else 1.0
            return min(1.0, 1.0 / max(w_up, w_lo, 1.0))
        w_hi = wealth_at(seg, alpha, upper, lo=lo, hi=hi)[1] if math.isfinite(upper) else math.inf
        w_lo = wealth_at(seg, alpha, lower, lo=lo, hi=hi)[0] if math.isfinite(lower) else math.inf
        return min(1.0, 1.0 / max(min(w_hi, w_lo), 1e-300))
    # detect: evidence of a violation past either bound (the smaller p decides); certify:
    # evidence of lying inside both bounds (the larger p decides, TOST)
    detect = mode == "detect"
    ps = [_normal_p(seg, bound, side if detect else ("lower" if side == "upper" else "upper"), alpha)
          for bound, side in ((upper, "upper"), (lower, "lower")) if math.isfinite(bound)]
    if not ps:
        return 1.0
    return min(ps) if detect else max(ps)


def look_schedule(n_max: int, *, first: int, step: int) -> list[int]:
    """Look after ``first`` units, then every ``step``, and at ``n_max``."""
    if n_max < 1:
        return [n_max]
    out = list(range(max(1, min(first, n_max)), n_max, max(1, step)))
    return [*out, n_max] if (not out or out[-1] != n_max) else out
