"""Statistics core, mean and rate rules: the mean gate (cluster bootstrap, Hall's skewness-corrected
t with the lattice floor, Student's t, the null-variance t) and the exact binomial rate gate
(docs/design.md section 5). Re-exported by :mod:`pytest_posbias.stats`."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as _st

from ..errors import ConfigError
from .intervals import MIN_CLUSTERS, _check_alpha, _check_counts, binomial_test, cluster_bootstrap, exact_interval
from .verdicts import Verdict, _bounds, _check_mode, _decide, _fmt, inconclusive_verdict, region_p, zero_spread_interval


def null_variance_interval(means: ArrayLike, *, alpha: float) -> tuple[float, float]:
    """The (1 − 2α) interval {μ0 : |x̄ − μ0| <= c·s0(μ0)/√n} of the t statistic with the
    variance taken at the tested mean, s0(μ0)² = s² + (x̄ − μ0)² (s² the sample variance of the n
    unit means, c = t_{1−α, n−1}): solved, x̄ ± c·s/√(n − c²); the whole line when n <= c².

    On lattice-valued units (a group's MEG is a multiple of 1/32) a sample piled on one lattice
    point has both an extreme mean and a small sample variance, so intervals built on the sample
    variance are too short exactly where the mean is far out; the variance at the tested value does
    not shrink with the spread. Sizes at the boundary: ``benchmarks/decision_lattice.py``.
    """
    x = np.asarray(means, dtype=float)
    n = x.size
    c = float(_st.t.ppf(1.0 - alpha, n - 1)) if n >= 2 else math.inf
    if n <= c * c:  # also every n < 2
        return -math.inf, math.inf
    half = c * float(x.std(ddof=1)) / math.sqrt(n - c * c)
    m = float(x.mean())
    return m - half, m + half


def null_variance_p(means: ArrayLike, bound: float, alternative: str) -> float:
    """One-sided p-value of H0 "mean <= bound" (``alternative='greater'``) or "mean >= bound"
    (``'less'``) from T = (x̄ − bound)/(s0/√n), s0² = s² + (x̄ − bound)², Student t with n − 1
    degrees of freedom (:func:`null_variance_interval` inverts it)."""
    x = np.asarray(means, dtype=float)
    n = x.size
    if n < 2:
        return 1.0
    m = float(x.mean())
    s0 = math.sqrt(float(x.var(ddof=1)) + (m - bound) ** 2)
    if s0 == 0.0:
        return 0.5
    t = (m - bound) / (s0 / math.sqrt(n))
    return float(_st.t.sf(t, n - 1) if alternative == "greater" else _st.t.cdf(t, n - 1))


def lattice_floor(bound: float, step: float | None) -> float:
    """The variance floor of a lattice-valued unit at a tested mean ``bound``: |bound|·δ (0 without a step).

    A unit that is a net count of independent events, each moving it by at least δ (a group's MEG:
    a fact dropped from a middle or an edge slot moves it by ±1/(2·orders·sentences)), has
    variance Σ_e q_e·δ_e² >= δ·Σ_e q_e·δ_e >= δ·|mean| when its events are rare (Poisson-like),
    so under a null at ``bound`` its variance is at least |bound|·δ; a sample piled on one lattice
    point has a sample variance far below that. Under-dispersed units can sit below the floor, where
    it lowers power; :class:`SkewT` keeps the floor from adding rejections.
    """
    if step is None:
        return 0.0
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not (math.isfinite(step) and step > 0):
        raise ConfigError(f"`lattice_step` must be a positive finite number; got {step!r}")
    return abs(float(bound)) * float(step) if math.isfinite(bound) else 0.0


@dataclass(frozen=True)
class SkewT:
    """Hall's skewness-corrected t statistic for a mean (Hall 1992, "On the removal of skewness by
    transformation", JRSS-B 54, 221–228), with an optional variance floor.

    For n unit values with mean x̄, SD s_eff = max(s, √floor) and skewness γ = m₃/s_eff³
    (m₃ the third central sample moment), the statistic for a tested mean μ0 is

        T(μ0) = √n · g(S),  S = (x̄ − μ0)/s_eff,  g(S) = S + γS²/3 + γ²S³/27 + γ/(6n),

    referred to Student t with n − 1 degrees of freedom. g removes the n^(−1/2) skewness term of the
    studentized mean's Edgeworth expansion (the plain t is too liberal on the short-tail side of skewed
    units); g(S) = ((1 + γS/3)³ − 1)/γ + γ/(6n) is increasing in S, so the p-values go to 0 with the
    distance |x̄ − μ0| and the interval inverts the test exactly: L = x̄ − s_eff·g⁻¹(q/√n),
    U = x̄ − s_eff·g⁻¹(−q/√n), q = t_{1−α, n−1}, g⁻¹(y) = (3/γ)·(∛(1 + γ(y − γ/(6n))) − 1).

    A floor that binds (s < √floor) also shrinks γ = m₃/s_eff³ below the sample's m₃/s³ and could
    reject where the unfloored statistic does not; ``unfloored`` then holds the statistic without
    the floor, each p-value is the larger of the two and the interval their hull, so the floor can
    only remove rejections.
    """

    mean: float
    sd: float
    gamma: float
    n: int
    floored: bool
    unfloored: SkewT | None = None

    def _g(self, s_: float) -> float:
        g = self.gamma
        return s_ + g * s_ * s_ / 3 + g * g * s_**3 / 27 + g / (6 * self.n)

    def _g_inv(self, y: float) -> float:
        g = self.gamma
        if g == 0.0:
            return y
        u = g * (y - g / (6 * self.n))
        # ∛(1 + u) − 1 as expm1(log1p(u)/3): the plain difference loses every digit when |γ| is tiny (a
        # sample symmetric up to rounding), and the interval would collapse to a point
        root = math.expm1(math.log1p(u) / 3) if u > -1.0 else float(np.cbrt(1.0 + u)) - 1.0
        return 3.0 / g * root

    def statistic(self, mu0: float) -> float:
        """T(μ0) (see the class docstring)."""
        return math.sqrt(self.n) * self._g((self.mean - mu0) / self.sd)

    def p_greater(self, bound: float) -> float:
        """p-value of H0: μ <= ``bound`` (large T rejects)."""
        p = float(_st.t.sf(self.statistic(bound), self.n - 1))
        return p if self.unfloored is None else max(p, self.unfloored.p_greater(bound))

    def p_less(self, bound: float) -> float:
        """p-value of H0: μ >= ``bound`` (small T rejects)."""
        p = float(_st.t.cdf(self.statistic(bound), self.n - 1))
        return p if self.unfloored is None else max(p, self.unfloored.p_less(bound))

    def interval(self, alpha: float) -> tuple[float, float]:
        """The (1 − 2α) interval: each bound one-sided at level α, p_greater(L) = p_less(U) = α."""
        q = float(_st.t.isf(alpha, self.n - 1))
        r = math.sqrt(self.n)
        lo, hi = self.mean - self.sd * self._g_inv(q / r), self.mean - self.sd * self._g_inv(-q / r)
        if self.unfloored is not None:
            ulo, uhi = self.unfloored.interval(alpha)
            lo, hi = min(lo, ulo), max(hi, uhi)
        return lo, hi


def skew_t(units: ArrayLike, *, floor: float = 0.0, correct: bool = True) -> SkewT:
    """:class:`SkewT` of independent unit values (at least 2, not all equal unless ``floor`` > 0),
    the variance floored at ``floor`` (:func:`lattice_floor`); ``correct=False`` sets γ = 0, which
    leaves Student's t (same floor and hull)."""
    x = np.asarray(units, dtype=float)
    if x.ndim != 1 or x.size < 2 or not np.all(np.isfinite(x)):
        raise ConfigError(f"`units` must be a 1-D array of at least 2 finite values; got shape {x.shape}")
    if not (math.isfinite(floor) and floor >= 0):
        raise ConfigError(f"`floor` must be a finite number >= 0; got {floor!r}")
    m = float(x.mean())
    s = float(x.std(ddof=1))
    sd = max(s, math.sqrt(floor))
    if sd == 0.0:
        raise ConfigError("`units` have zero spread and no variance floor: no t statistic")
    m3 = float(np.mean((x - m) ** 3))
    # a binding floor on a sample with spread: keep the unfloored statistic too (the hull, see SkewT)
    raw = SkewT(m, s, m3 / s**3 if correct else 0.0, int(x.size), False) if 0.0 < s < sd else None
    return SkewT(m, sd, m3 / sd**3 if correct else 0.0, int(x.size), sd > s, raw)


T_METHODS = ("t", "skew-t", "both-t")  # the t-based rules of mean_verdict and of the group-sequential design
# a t rule certifies only from this many units on: from fewer, a sample that happens to miss a rare large
# unit has a tiny spread, and its interval says nothing about the units not drawn
MIN_T_UNITS = 8


@dataclass(frozen=True)
class BothT:
    """Student's t and Hall's skewness-corrected t together, each at half the level: a hypothesis is
    rejected only when both reject it at α/2 (each p-value is twice the larger of the two, capped at
    1), and the (1 − 2α) interval is the hull of the two (1 − α) intervals.

    Neither t rule alone holds its level on units with a heavy tail on both sides at a few dozen
    clusters (a sample that misses the tail has a small SD and a skewness near 0); halving the
    level is the margin measured to hold (docs/calibration.md, "DPB certify")."""

    student: SkewT
    skew: SkewT

    @property
    def sd(self) -> float:
        """The units' (floored) SD."""
        return self.skew.sd

    @property
    def gamma(self) -> float:
        """The skewness correction's γ."""
        return self.skew.gamma

    @property
    def floored(self) -> bool:
        """Whether the variance floor binds."""
        return self.skew.floored

    def p_greater(self, bound: float) -> float:
        """p-value of H0: μ <= ``bound``."""
        return min(1.0, 2.0 * max(self.student.p_greater(bound), self.skew.p_greater(bound)))

    def p_less(self, bound: float) -> float:
        """p-value of H0: μ >= ``bound``."""
        return min(1.0, 2.0 * max(self.student.p_less(bound), self.skew.p_less(bound)))

    def interval(self, alpha: float) -> tuple[float, float]:
        """The (1 − 2α) interval: the hull of the two rules' (1 − α) intervals."""
        (l1, h1), (l2, h2) = self.student.interval(alpha / 2), self.skew.interval(alpha / 2)
        return min(l1, l2), max(h1, h2)


def flat(values: ArrayLike) -> bool:
    """Zero spread: every value equal up to floating-point rounding (a spread within 1e-12 of the
    values' magnitude), so a sample that differs only by rounding is not read as a tiny variance
    that a t rule would certify on."""
    x = np.asarray(values, dtype=float)
    return bool(x.size) and float(np.ptp(x)) <= 1e-12 * max(1.0, float(np.max(np.abs(x))))


def t_statistic(units: ArrayLike, *, floor: float = 0.0, rule: str) -> SkewT | BothT:
    """The statistic of a t ``rule`` (:data:`T_METHODS`) on independent unit values: ``t`` Student's t,
    ``skew-t`` Hall's skewness-corrected t (:func:`skew_t`), ``both-t`` the two at half the level
    (:class:`BothT`); the variance floored at ``floor`` in each."""
    if rule not in T_METHODS:
        raise ConfigError(f"`rule` must be one of {', '.join(T_METHODS)}; got {rule!r}")
    if rule == "both-t":
        return BothT(skew_t(units, floor=floor, correct=False), skew_t(units, floor=floor))
    return skew_t(units, floor=floor, correct=rule == "skew-t")


def mean_verdict(values: ArrayLike, clusters: ArrayLike | None = None, *, name: str, threshold: float,
                 sides: str = "both", mode: str = "detect", alpha: float = 0.05, unit: str = "instances",
                 n_resamples: int = 9999, rng: np.random.Generator, method: str = "percentile",
                 extra: Mapping[str, Any] | None = None, value_range: tuple[float, float] | None = None,
                 null_variance: bool = False, lattice_step: float | None = None) -> Verdict:
    """Gate on the mean of per-instance values with a cluster-bootstrap (1 − 2α) CI or a t rule.

    ``sides='both'``: compliant when −threshold <= θ <= threshold (DPB, MEG); ``'upper'``:
    θ <= threshold; ``'lower'``: θ >= threshold. Detect p-value: that of the nearer violated bound;
    certify: the larger of the two one-sided p-values (TOST). ``method``:

    * ``percentile`` (expanded percentile bootstrap, the default) or ``bca`` (for skewed units, e.g.
      the stressor amplification);
    * ``skew-t`` (the positional MEG gates): :class:`SkewT` on the clusters' linearized means
      u_g = x̄ + (S_g − x̄·n_g)/n̄, which average to x̄ and equal the cluster means for equal cluster
      sizes; with ``lattice_step`` δ the variance is floored at :func:`lattice_floor` of the larger
      finite bound. Its p-values go to 0 with the distance from the bound, which a bootstrap's cannot
      below 1/(resamples + 1);
    * ``t``: the same with γ = 0 (Student's t, the positional DPB gate, whose heavy-tailed units the
      skewness correction over-corrects at the sequential design's small early levels); ``both-t``:
      the two at level α/2 each (:class:`BothT`, DPB in certify mode).

    Inconclusive (:attr:`Verdict.inconclusive`): fewer than ``MIN_CLUSTERS`` independent units (with
    a t rule in certify mode, ``MIN_T_UNITS``); any non-finite value (passes in neither mode); zero
    spread (every cluster mean equal), where an interval has zero width: with ``value_range =
    (lo, hi)`` the gate decides on the exact worst-case floor of :func:`zero_spread_interval`
    instead, and without it only a detect-mode sample whose every unit lies past a bound decides
    (it fails).

    ``null_variance=True`` (lattice-valued units): the interval is the hull of the bootstrap's and
    :func:`null_variance_interval`, each p-value the larger of the two rules' (docs/design.md section 5).
    """
    a = _check_alpha(alpha)
    _check_mode(mode)
    lower, upper = _bounds(threshold, sides)
    v = np.asarray(values, dtype=float)
    clusters_arr = None if clusters is None else np.asarray(clusters)
    if clusters_arr is not None and clusters_arr.shape != v.shape:
        raise ConfigError(f"`clusters` must have the same shape as `values`; got {clusters_arr.shape} vs {v.shape}")
    n_clusters = int(v.size if clusters_arr is None else np.unique(clusters_arr).size)
    inconclusive = functools.partial(inconclusive_verdict, name=name, threshold=threshold, sides=sides, n=n_clusters,
                                     mode=mode, alpha=a, unit=unit, extra=extra)
    if v.size and not np.all(np.isfinite(v)):
        bad = int(np.count_nonzero(~np.isfinite(v)))
        return inconclusive(fail_closed=True, why=f"{bad} of {v.size} unit values are not finite (NaN or inf), and a "
                                                  "unit that was not measured is never scored")
    if v.size == 0 or n_clusters < MIN_CLUSTERS:
        return inconclusive(why=f"fewer than {MIN_CLUSTERS} independent units for a cluster bootstrap",
                            estimate=float(v.mean()) if v.size else math.nan)
    _, inv = np.unique(np.arange(v.size) if clusters_arr is None else clusters_arr, return_inverse=True)
    sums, counts = np.bincount(inv, weights=v), np.bincount(inv).astype(float)
    cmeans = sums / counts
    if flat(cmeans):
        est = float(v.mean())
        outside = est > upper or est < lower
        if value_range is None and not (mode == "detect" and outside):
            return inconclusive(estimate=est, why=f"zero spread: every independent unit has the value {_fmt(est)}, and "
                                                  "an interval of zero width says nothing about the units not drawn")
        if value_range is None:  # detect, every unit past the bound: the violation is in every unit
            ci_low, ci_high, p_detect, p_certify = est, est, 0.0, 1.0
            how = "zero spread, every unit past the bound"
        else:
            ci_low, ci_high, p_detect, p_certify = zero_spread_interval(est, n_clusters, lower=lower, upper=upper,
                                                                        alpha=a, value_range=value_range)
            how = "zero spread: exact worst-case floor on the interval"
        n = n_clusters
        ex: dict[str, Any] = {"n_instances": int(v.size), "method": how}
    elif method in T_METHODS and mode == "certify" and n_clusters < MIN_T_UNITS:
        return inconclusive(estimate=float(v.mean()),
                            why=f"fewer than {MIN_T_UNITS} independent units for a t-based certification")
    elif method in T_METHODS:  # the clusters' linearized means, each rule's statistic on them
        est = float(v.mean())
        units = est + (sums - est * counts) / counts.mean()
        st_ = t_statistic(units, floor=max(lattice_floor(b, lattice_step) for b in (lower, upper)), rule=method)
        ci_low, ci_high = st_.interval(a)
        p_detect, p_certify = region_p(st_.p_greater, st_.p_less, lower, upper)
        n = int(units.size)
        ex = {"n_instances": int(v.size), "skewness": st_.gamma, "sd": st_.sd,
              "method": RULE_NAMES[method] + (
                  f", variance floored at |bound|·δ, δ = {_fmt(lattice_step)}" if lattice_step else "")}
        if lattice_step:
            ex["lattice_step"] = float(lattice_step)
            ex["variance_floor_applied"] = st_.floored
    else:
        bs = cluster_bootstrap(v, clusters_arr, confidence_level=1 - 2 * a, n_resamples=n_resamples, rng=rng,
                               method=method)
        est, n = bs.estimate, bs.n_clusters
        ex = {"n_instances": int(v.size), "n_resamples": int(n_resamples),
              "method": f"cluster bootstrap ({'BCa' if bs.method == 'bca' else 'expanded percentile'})"}
        ci_low, ci_high = bs.ci_low, bs.ci_high
        p_detect, p_certify = region_p(bs.p_greater, bs.p_less, lower, upper)
        if null_variance:  # the hull: each bound the outer one, each p-value the larger of the two rules'
            t_low, t_high = null_variance_interval(cmeans, alpha=a)
            ci_low, ci_high = min(ci_low, t_low), max(ci_high, t_high)
            p_detect, p_certify = region_p(lambda b: max(bs.p_greater(b), null_variance_p(cmeans, b, "greater")),
                                           lambda b: max(bs.p_less(b), null_variance_p(cmeans, b, "less")), lower,
                                           upper)
            ex["method"] = f"{ex['method']} and null-variance t (hull)"
            ex["null_variance_interval"] = [t_low, t_high]
        # resamples too few for α: a p-value cannot go below the tail share of one resample, 1/(B + 1), and the
        # interval's end is then read at the extreme resamples, narrower than its level: no decision at α
        floor = min(bs._adjust(1 / (n_resamples + 1), upper_tail=tail) for tail in (False, True))
        decided = (ci_low > upper or ci_high < lower) if mode == "detect" else (ci_low > lower and ci_high < upper)
        if decided and floor >= a and (p_detect if mode == "detect" else p_certify) >= a:
            return inconclusive(estimate=bs.estimate, why=f"{n_resamples} bootstrap resamples cannot resolve "
                                                          f"α = {a:g}: no p-value below {_fmt(floor)} (about "
                                                          f"{math.ceil(10 / a)} resamples resolve it)")
    ex.update(extra or {})
    return _decide(name=name, estimate=est, ci_low=ci_low, ci_high=ci_high, lower=lower, upper=upper,
                   threshold=threshold, n=n, unit=unit, mode=mode, alpha=a, p_detect=p_detect, p_certify=p_certify,
                   extra=ex)

RULE_NAMES = {"t": "Student t", "skew-t": "skewness-corrected t (Hall 1992)",
              "both-t": "Student t and skewness-corrected t (Hall 1992), each at level α/2"}


def rate_min_sample(*, threshold: float, mode: str, alpha: float) -> int:
    """The smallest n at which the exact binomial rule of :func:`rate_verdict` could decide.

    Detect fails only when even n/n has p = t^n < α, so n_min = ⌊log α / log t⌋ + 1 (1 when t = 0,
    none when t = 1); certify passes only when 0/n has p = (1 − t)^n < α, so
    n_min = ⌊log α / log(1 − t)⌋ + 1 (none when t = 0). "None" is returned as a huge n.
    """
    a = _check_alpha(alpha)
    _check_mode(mode)
    q = threshold if mode == "detect" else 1.0 - threshold
    if q <= 0.0:
        return 1
    if q >= 1.0:
        return 2**62
    return math.floor(math.log(a) / math.log(q)) + 1


def rate_verdict(k: int, n: int, *, name: str, threshold: float, mode: str = "detect", alpha: float = 0.05,
                 unit: str = "instances", extra: Mapping[str, Any] | None = None) -> Verdict:
    """Gate on a binomial rate k/n with compliance rate <= threshold.

    Detect: exact one-sided binomial test of H0: rate <= threshold (fail when
    p < α, i.e. the Clopper–Pearson (1 − 2α) lower bound exceeds the threshold).
    Certify: H0: rate >= threshold (pass when the upper bound is below it). Below
    :func:`rate_min_sample` units no outcome could decide, and the verdict is inconclusive.
    """
    a = _check_alpha(alpha)
    if n == 0:
        return inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=0, mode=mode, alpha=a,
                                    unit=unit, why="no observations", extra=extra)
    _check_counts(k, n)
    if isinstance(threshold, bool) or not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"`threshold` must lie in [0, 1] for a rate; got {threshold!r}")
    n_min = rate_min_sample(threshold=threshold, mode=mode, alpha=a)
    if n < n_min:
        return inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=n, mode=mode, alpha=a, unit=unit,
                                    estimate=k / n, extra={"k": int(k), "min_sample": n_min, **(extra or {})},
                                    why=f"fewer than {n_min} units, below which no outcome could "
                                        + ("show a violation" if mode == "detect" else "certify compliance"))
    lo, hi = exact_interval(k, n, confidence_level=1 - 2 * a)
    p_detect = binomial_test(k, n, threshold, alternative="greater") if threshold < 1 else 1.0
    p_certify = binomial_test(k, n, threshold, alternative="less") if threshold > 0 else 1.0
    ex = {"k": int(k), "method": "exact binomial (Clopper-Pearson)", **(extra or {})}
    return _decide(name=name, estimate=k / n, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(threshold),
                   threshold=threshold, n=n, unit=unit, mode=mode, alpha=a,
                   p_detect=p_detect, p_certify=p_certify, extra=ex)
