"""Sequential gates: stop drawing instances as soon as the decision is settled.

Two anytime-valid designs live here. The suites use the group-sequential design
(:func:`gsd_step`: four planned looks, Lan–DeMets O'Brien–Fleming α spending, exact
binomial tests for rates and t-tests for means at each look's spent level, a non-binding
futility stop). The confidence-sequence design (:func:`decide`) checks after every batch:

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
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..config import check_alpha
from ..errors import ConfigError
from . import binomial_test, exact_interval, lattice_floor
from .rules import T_METHODS, t_statistic

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
           lo: float, hi: float, method: str = "auto", futility: float = 0.10, theta1: float | None = None) -> SequentialDecision:
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
                       "the CS lies wholly outside the allowed region" if outside else "compliance not shown at the maximum sample")
            seg = xs[:k]
            p = _p_value(seg, mode=mode, lower=lower, upper=upper, alpha=alpha, method=method, lo=lo, hi=hi)
            return SequentialDecision(passed, k, xs.size, L, U, float(seg.mean()), p, why, done, method)
    raise AssertionError("unreachable")  # pragma: no cover


def _non_finite(xs: NDArray[np.float64], n_max: int, looks: list[int], method: str) -> SequentialDecision:
    """Non-finite unit values (a lost unit that reached the rule): stop, pass in neither mode."""
    bad = int(np.count_nonzero(~np.isfinite(xs)))
    return SequentialDecision(False, int(xs.size), n_max, math.nan, math.nan, math.nan, 1.0,
                              f"inconclusive: {bad} of {xs.size} unit values are not finite (NaN or inf), and a unit "
                              "that was not measured is never scored, so the gate does not pass in either mode",
                              looks, method, inconclusive=True)


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


# --------------------------------------------------------------------------- group-sequential design


def obf_spending(tau: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming-type spending: α(τ) = 2 − 2Φ(z_{1−α/2} / sqrt(τ)), α(1) = α."""
    from scipy.stats import norm

    if tau <= 0:
        return 0.0
    return float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(min(1.0, tau))))


def gsd_boundaries(fractions: Sequence[float], alpha: float) -> list[float]:
    """Cached wrapper of :func:`_gsd_boundaries` (the boundaries depend only on the design)."""
    return list(_gsd_boundaries(tuple(round(float(f), 12) for f in fractions), float(alpha)))


@functools.lru_cache(maxsize=256)
def _gsd_boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """One-sided efficacy boundaries c_1..c_K on the z scale for looks at information fractions
    ``fractions`` (increasing, ending at 1), spending α with :func:`obf_spending`:
    P(Z_1 < c_1, …, Z_{k−1} < c_{k−1}, Z_k >= c_k) = α(τ_k) − α(τ_{k−1}) under H0, with
    corr(Z_i, Z_j) = sqrt(τ_i/τ_j) (Jennison & Turnbull 2000, ch. 7)."""
    from scipy.optimize import brentq
    from scipy.stats import multivariate_normal, norm

    taus = [float(f) for f in fractions]
    cs: list[float] = []
    spent = 0.0
    for k, tau in enumerate(taus):
        target = obf_spending(tau, alpha) - spent
        if k == 0:
            c = float(norm.isf(max(target, 1e-12)))
        else:
            idx = list(range(k + 1))
            cov = np.array([[math.sqrt(min(taus[i], taus[j]) / max(taus[i], taus[j])) for j in idx] for i in idx])
            mvn_prev = multivariate_normal(mean=np.zeros(k), cov=cov[:k, :k], seed=0)
            p_prev = float(mvn_prev.cdf(np.array(cs), rng=np.random.default_rng(0))) if k > 1 else float(norm.cdf(cs[0]))
            mvn = multivariate_normal(mean=np.zeros(k + 1), cov=cov, seed=0)

            def f(c: float, p_prev: float = p_prev, mvn: Any = mvn, target: float = target) -> float:
                # a fixed QMC seed: the same design always gets the same boundaries
                return p_prev - float(mvn.cdf(np.array([*cs, c]), rng=np.random.default_rng(0))) - target

            c = float(brentq(f, 0.0, 8.0, xtol=1e-6))
        cs.append(c)
        spent += target
    return tuple(cs)


MIN_MEAN_UNITS = 8  # a mean gate decides only from this many units on (t-intervals from fewer are unreliable)


def gsd_sizes(n_max: int, looks: int) -> list[int]:
    """Planned look sizes: ``looks`` equally spaced analyses ending at ``n_max``."""
    return sorted({max(1, math.ceil(n_max * k / looks)) for k in range(1, looks + 1)})


def gsd_step(x: ArrayLike, *, look: int, n_max: int, looks: int = 3, lower: float, upper: float, mode: str, alpha: float,
             kind: str, futility: float = 0.10, theta1: float | None = None,
             null_variance: bool = False, rule: str = "t", lattice_step: float | None = None) -> SequentialDecision | None:
    """One analysis of the group-sequential design on the units ``x`` gathered so far.

    Returns the decision when this look stops the gate (always at the last look), else None.
    ``kind``: ``rate`` (0/1 units: exact binomial tests at the look's nominal level 1 − Φ(c_k))
    or ``mean`` (Student-t tests on the unit values at the same nominal levels; ``null_variance=True``:
    the variance taken at the tested bound, :func:`pytest_posbias.stats.null_variance_interval`, measured
    in ``benchmarks/decision_lattice.py`` and not used by the gates: docs/design.md section 5). ``rule='skew-t'``
    (the positional MEG gates): Hall's skewness-corrected t
    (:class:`pytest_posbias.stats.SkewT`) at the same nominal levels (``rule='both-t'``, DPB in certify
    mode: Student's and Hall's t each at half of it, :class:`pytest_posbias.stats.rules.BothT`), its variance floored at
    |bound|·``lattice_step`` (:func:`pytest_posbias.stats.lattice_floor`) when a lattice step is given,
    each p-value the larger of the floored and unfloored statistics' (the floor only removes
    rejections); ``null_variance`` applies to the plain t only. Early FAIL in
    detect mode needs the look's one-sided test of "compliant" to reject at its spent level, so
    the false-failure rate stays <= α; a PASS may stop early when the repeated CI lies inside the
    region or when the conditional power to show a violation of size θ1 (default:
    :func:`violation_alternative`, on the violating side) by the last look drops below ``futility`` (non-binding: it can only lower the
    false-failure rate). In certify mode a PASS needs the repeated CI wholly inside the region.
    """
    from scipy import stats as st

    xs = np.asarray(x, dtype=float)
    if mode not in ("detect", "certify"):
        raise ConfigError(f"`mode` must be 'detect' or 'certify'; got {mode!r}")
    if kind not in ("rate", "mean"):
        raise ConfigError(f"`kind` must be 'rate' or 'mean'; got {kind!r}")
    if rule not in T_METHODS:
        raise ConfigError(f"`rule` must be one of {', '.join(T_METHODS)}; got {rule!r}")
    sizes = gsd_sizes(n_max, looks)
    k = min(look, len(sizes) - 1)
    cs = gsd_boundaries([s_ / n_max for s_ in sizes], alpha)
    a_k = float(st.norm.sf(cs[k]))
    last = k == len(sizes) - 1
    n_k = int(xs.size)
    if n_k and not np.all(np.isfinite(xs)):
        return _non_finite(xs, n_max, sizes[: k + 1], "group-sequential (OBF)")
    # zero spread never shows compliance (a zero-width interval says nothing about the units not
    # drawn); a detect-mode sample whose every unit lies past a bound still fails (fail closed)
    flat = (kind == "mean" and n_k > 1 and float(np.ptp(xs)) == 0.0
            and not (mode == "detect" and (xs[0] > upper or xs[0] < lower)))
    if n_k == 0 or (kind == "mean" and n_k < MIN_MEAN_UNITS) or flat:
        if not last:
            return None
        what = "no violation can be shown" if mode == "detect" else "compliance cannot be certified"
        why = ("inconclusive: no units to decide on" if n_k == 0 else
               f"inconclusive: zero spread (every unit equals {xs[0]:.4g}), and an interval of zero width says "
               f"nothing about the units not drawn, so {what}" if flat else
               f"inconclusive: fewer than {MIN_MEAN_UNITS} units, too few for a t-based interval, so {what}")
        est0 = float(xs.mean()) if n_k else math.nan
        return SequentialDecision(mode == "detect", n_k, n_max, math.nan, math.nan, est0, 1.0, why, sizes[: k + 1],
                                  "group-sequential (OBF)", inconclusive=True)
    est = float(xs.mean())
    if theta1 is None:
        theta1 = violation_alternative(lower, upper, est)
    df = max(n_k - 1, 1)
    cert: tuple[float, float] | None = None  # the t rules' own certify p-values (upper, lower)
    if kind == "rate":
        succ = round(float(xs.sum()))
        L, U = exact_interval(succ, n_k, confidence_level=1 - 2 * a_k)
        p_up = binomial_test(succ, n_k, min(max(upper, 0.0), 1.0), alternative="greater") if math.isfinite(upper) else 1.0
        p_lo = binomial_test(succ, n_k, min(max(lower, 0.0), 1.0), alternative="less") if math.isfinite(lower) else 1.0
        sd = math.sqrt(theta1 * (1 - theta1)) if 0 < theta1 < 1 else 0.5
    elif rule != "t" and (float(np.ptp(xs)) > 0 or max(lattice_floor(b, lattice_step) for b in (lower, upper)) > 0):
        # zero spread reaches here only past a bound in detect mode with a floor; without one the
        # plain branch below fails it closed
        floor = max(lattice_floor(b, lattice_step) for b in (lower, upper))
        sk = t_statistic(xs, floor=floor, rule=rule)  # n_k >= MIN_MEAN_UNITS
        sd = sk.sd
        L, U = sk.interval(a_k)
        p_up = sk.p_greater(upper) if math.isfinite(upper) else 1.0
        p_lo = sk.p_less(lower) if math.isfinite(lower) else 1.0
        # certify: H0 "mean >= upper" and "mean <= lower", each the rule's own p-value (with a
        # floor or two rules, not 1 − the detect side's, which takes the smaller p of the hull)
        cert = (sk.p_less(upper) if math.isfinite(upper) else 0.0, sk.p_greater(lower) if math.isfinite(lower) else 0.0)
    else:
        # the t test with the variance taken at the tested bound, s0² = s² + (x̄ − bound)², and its
        # inverted interval x̄ ± q·s/√(n − q²) (stats.null_variance_interval): on lattice-valued
        # units (a group's MEG is a multiple of 1/32) a sample piled on one lattice point has a small
        # sample variance exactly where its mean is far out (docs/design.md section 5)
        sd = float(xs.std(ddof=1)) if n_k > 1 else math.inf
        q = float(st.t.isf(a_k, df))
        nv = 1.0 if null_variance else 0.0
        if 0 < sd < math.inf and n_k > nv * q * q:
            half_k = q * sd / math.sqrt(n_k - nv * q * q)
            L, U = est - half_k, est + half_k
        else:
            L, U = (-math.inf, math.inf) if sd != 0 else (est, est)

        def t_null(bound: float, side: str) -> float:
            if sd == 0 and math.isfinite(bound):  # every unit equal (past a bound: detect fails closed)
                return 0.0 if (est > bound if side == "greater" else est < bound) else 1.0
            if not (math.isfinite(bound) and 0 < sd < math.inf):
                return 1.0
            se0 = math.sqrt((sd * sd + nv * (est - bound) ** 2) / n_k)
            z = (est - bound) / se0
            return float(st.t.sf(z, df) if side == "greater" else st.t.cdf(z, df))

        p_up = t_null(upper, "greater")
        p_lo = t_null(lower, "less")
    outside = upper < L or lower > U
    inside = lower < L and upper > U
    futile = False
    if mode == "detect" and not outside and not inside and not last and 0 < sd < math.inf:
        from scipy.stats import norm

        m = max(sizes[-1] - n_k, 0)
        mean_final = (n_k * est + m * theta1) / sizes[-1]
        sd_final = max(sd * math.sqrt(m) / sizes[-1], 1e-12)
        half = cs[-1] * sd / math.sqrt(sizes[-1])
        cp = 0.0
        if math.isfinite(upper):
            cp += float(norm.sf((upper + half - mean_final) / sd_final))
        if math.isfinite(lower):
            cp += float(norm.cdf((lower - half - mean_final) / sd_final))
        futile = cp < futility
    if not (outside or inside or futile or last):
        return None

    def rescale(p: float) -> float:  # repeated p-value: <= α exactly when the look's boundary is crossed
        return min(1.0, p * alpha / a_k)

    if mode == "detect":
        passed = not outside
        p = rescale(min(p_up, p_lo))
        why = ("the repeated CI lies wholly outside the allowed region" if outside else
               "the repeated CI lies wholly inside the allowed region" if inside else
               f"futility: a violation of {theta1:.3g} is unlikely to be shown by n = {sizes[-1]} "
               f"(conditional power < {futility:g})" if futile else
               "no violation shown at the last look")
    else:
        passed = inside
        # certify: H0 "rate >= upper" (and "rate <= lower"); for rates the exact binomial tail that
        # includes the observed count, P(X <= k | upper), for means the t tail
        if kind == "rate":
            p_c_up = binomial_test(succ, n_k, min(max(upper, 0.0), 1.0), alternative="less") if math.isfinite(upper) else 0.0
            p_c_lo = binomial_test(succ, n_k, min(max(lower, 0.0), 1.0), alternative="greater") if math.isfinite(lower) else 0.0
        elif cert is not None:
            p_c_up, p_c_lo = cert
        else:
            p_c_up = (1 - p_up) if math.isfinite(upper) else 0.0  # Student's t: the other tail of the same statistic
            p_c_lo = (1 - p_lo) if math.isfinite(lower) else 0.0
        p = rescale(max(p_c_up, p_c_lo))
        why = ("the repeated CI lies wholly inside the allowed region" if inside else
               "the repeated CI lies wholly outside the allowed region" if outside else
               "compliance not shown at the last look")
    return SequentialDecision(passed, n_k, n_max, L, U, est, p, why, sizes[: k + 1], "group-sequential (OBF)")


def gsd_decide(x: ArrayLike, *, n_max: int, looks: int = 3, lower: float, upper: float, mode: str, alpha: float,
               kind: str, futility: float = 0.10, theta1: float | None = None,
               null_variance: bool = False, rule: str = "t", lattice_step: float | None = None) -> SequentialDecision:
    """Run :func:`gsd_step` at each planned look over the units ``x`` (in arrival order)."""
    xs = np.asarray(x, dtype=float)
    for k, n_k in enumerate(gsd_sizes(n_max, looks)):
        d = gsd_step(xs[: min(n_k, xs.size)], look=k, n_max=n_max, looks=looks, lower=lower, upper=upper, mode=mode,
                     alpha=alpha, kind=kind, futility=futility, theta1=theta1, null_variance=null_variance,
                     rule=rule, lattice_step=lattice_step)
        if d is not None:
            return d
    raise AssertionError("unreachable: the last look always decides")  # pragma: no cover
