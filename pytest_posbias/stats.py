"""Statistics core: intervals, tests and the gate verdict (docs/design.md section 5).

Conventions (stated once, used everywhere):

* A gate at level α reports a two-sided (1 − 2α) confidence interval, so each of its
  bounds is a one-sided (1 − α) bound (the TOST convention: α = 0.05 gives a 90% CI).
* ``detect`` mode fails only when the CI lies wholly outside the compliance region
  (the data show a violation at level α); ``certify`` passes only when the CI lies
  wholly inside it (the data show compliance at level α, TOST for two-sided regions).
* Confidence intervals of means are cluster bootstraps over the independent unit
  (video group, question), seeded through an explicit ``numpy.random.Generator``;
  rates use exact binomial (Clopper–Pearson) bounds and tests; paired binary changes
  use the exact McNemar test at margin 0 and an exact unconditional non-inferiority test at a
  non-zero margin; multiplicity across gates uses Benjamini–Hochberg.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from .config import check_alpha
from .errors import ConfigError

Mode = Literal["detect", "certify"]
MODES: tuple[str, ...] = ("detect", "certify")

__all__ = [
    "MODES",
    "BootstrapResult",
    "SkewT",
    "TostResult",
    "Verdict",
    "benjamini_hochberg",
    "binomial_test",
    "cluster_bootstrap",
    "detectable_effect",
    "exact_interval",
    "inconclusive_verdict",
    "lattice_floor",
    "mcnemar_exact",
    "mean_verdict",
    "paired_change_verdict",
    "rate_min_sample",
    "rate_verdict",
    "sample_for_effect",
    "share_difference_bounds",
    "share_difference_min_sample",
    "share_difference_rule",
    "share_difference_verdict",
    "skew_t",
    "tost_paired",
    "wilson_interval",
    "zero_spread_interval",
]


# --------------------------------------------------------------------------- validation


def _check_alpha(alpha: float, *, name: str = "alpha") -> float:
    return check_alpha(alpha, f"`{name}`")


def _check_confidence(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise ConfigError(f"`confidence_level` must be a float in (0, 1); got {level!r}")
    return float(level)


def _check_counts(k: int, n: int) -> None:
    for name, v in (("k", k), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ConfigError(f"`{name}` must be a non-negative integer; got {v!r}")
    if n == 0:
        raise ConfigError("`n` must be >= 1 (no trials to estimate a rate from)")
    if k > n:
        raise ConfigError(f"`k` must be <= `n`; got k = {k}, n = {n}")


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(f"`rng` must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)); got {type(rng).__name__}")
    return rng


# --------------------------------------------------------------------------- intervals and tests


def wilson_interval(k: int, n: int, *, confidence_level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial rate k/n (scipy ``binomtest(...).proportion_ci('wilson')``)."""
    _check_counts(k, n)
    ci = _st.binomtest(int(k), int(n)).proportion_ci(confidence_level=_check_confidence(confidence_level), method="wilson")
    return float(ci.low), float(ci.high)


def exact_interval(k: int, n: int, *, confidence_level: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson (exact) two-sided interval for a binomial rate k/n."""
    _check_counts(k, n)
    return _clopper_pearson(int(k), int(n), float(_check_confidence(confidence_level)))


@functools.lru_cache(maxsize=65536)
def _clopper_pearson(k: int, n: int, confidence_level: float) -> tuple[float, float]:
    # Memoized: calibration and sequential looks ask for the same (k, n) thousands of times,
    # and scipy finds each bound by root search.
    ci = _st.binomtest(k, n).proportion_ci(confidence_level=confidence_level, method="exact")
    return float(ci.low), float(ci.high)


@functools.lru_cache(maxsize=65536)
def _binomtest_p(k: int, n: int, p0: float, alternative: str) -> float:
    return float(_st.binomtest(k, n, p0, alternative=alternative).pvalue)


def binomial_test(k: int, n: int, p0: float, *, alternative: str = "greater") -> float:
    """Exact binomial test p-value of H0: rate = p0 against ``alternative``.

    ``greater`` tests H0: rate <= p0 (the phase paper's H0: flip <= 15%).
    """
    _check_counts(k, n)
    if not 0.0 <= p0 <= 1.0:
        raise ConfigError(f"`p0` must lie in [0, 1]; got {p0!r}")
    if alternative not in ("greater", "less", "two-sided"):
        raise ConfigError(f"`alternative` must be 'greater', 'less' or 'two-sided'; got {alternative!r}")
    return _binomtest_p(int(k), int(n), float(p0), alternative)


def mcnemar_exact(b: int, c: int, *, alternative: str = "two-sided") -> float:
    """Exact McNemar test on the discordant counts of a paired 2×2 table.

    b = pairs changed only under arm 1, c = only under arm 2; p = binomial test of
    b out of b + c at 1/2. ``less`` tests whether arm 1 changes fewer (b < c).
    Returns 1.0 when there are no discordant pairs.
    """
    for name, v in (("b", b), ("c", c)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ConfigError(f"`{name}` must be a non-negative integer; got {v!r}")
    if alternative not in ("greater", "less", "two-sided"):
        raise ConfigError(f"`alternative` must be 'greater', 'less' or 'two-sided'; got {alternative!r}")
    if b + c == 0:
        return 1.0
    return float(_st.binomtest(int(b), int(b + c), 0.5, alternative=alternative).pvalue)


def benjamini_hochberg(p_values: Sequence[float]) -> NDArray[np.float64]:
    """Benjamini–Hochberg adjusted p-values (``scipy.stats.false_discovery_control``, method 'bh')."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ConfigError(f"`p_values` must be 1-D; got shape {p.shape}")
    if p.size == 0:
        return p
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ConfigError("`p_values` must all lie in [0, 1]")
    out: NDArray[np.float64] = _st.false_discovery_control(p, method="bh")
    return out


@dataclass(frozen=True)
class BootstrapResult:
    """A cluster-bootstrap estimate of a mean: the instance mean, the percentile CI
    and the bootstrap distribution it came from (kept for one-sided p-values)."""

    estimate: float
    ci_low: float
    ci_high: float
    confidence_level: float
    n: int
    n_clusters: int
    distribution: NDArray[np.float64] = field(repr=False, compare=False)

    expanded: bool = field(default=False, compare=False)
    method: str = field(default="percentile", compare=False)
    z0: float = field(default=0.0, compare=False)  # BCa bias correction
    accel: float = field(default=0.0, compare=False)  # BCa acceleration

    def _adjust(self, p: float, *, upper_tail: bool) -> float:
        """Map a bootstrap tail share to the p-value of the interval's method, so that p < α
        exactly when the matching (1 − 2α) bound excludes the value.

        Expanded percentile: the normal-to-t correction of the interval. BCa: invert
        α₁ = Φ(z0 + (z0 + z_α)/(1 − a(z0 + z_α))) for the lower tail (Efron 1987), the mirror
        image for the upper tail.
        """
        if self.method == "bca":
            q = min(max(p, 1e-300), 1 - 1e-16)
            z0 = -self.z0 if upper_tail else self.z0
            a = -self.accel if upper_tail else self.accel
            w = float(_st.norm.ppf(q)) - z0
            denom = 1 + a * w
            if denom <= 0:
                return 1.0 if w > 0 else 0.0
            return float(_st.norm.cdf(w / denom - z0))
        if not self.expanded or self.n_clusters < 3:
            return p
        g = self.n_clusters
        z = float(_st.norm.ppf(min(max(p, 1e-300), 1.0)))
        return float(_st.t.cdf(z / math.sqrt(g / (g - 1)), g - 1))

    def p_greater(self, value: float) -> float:
        """Bootstrap p-value of H0: θ <= value (share of θ* <= value, +1 corrected)."""
        d = self.distribution
        return self._adjust(float((np.count_nonzero(d <= value) + 1) / (d.size + 1)), upper_tail=False)

    def p_less(self, value: float) -> float:
        """Bootstrap p-value of H0: θ >= value (share of θ* >= value, +1 corrected)."""
        d = self.distribution
        return self._adjust(float((np.count_nonzero(d >= value) + 1) / (d.size + 1)), upper_tail=True)


MIN_CLUSTERS = 5  # below this a cluster bootstrap has too few distinct resamples to trust


def cluster_bootstrap(
    values: ArrayLike,
    clusters: ArrayLike | None = None,
    *,
    confidence_level: float = 0.90,
    n_resamples: int = 9999,
    rng: np.random.Generator,
    expand: bool = True,
    method: str = "percentile",
) -> BootstrapResult:
    """Seeded cluster bootstrap CI for the mean of per-instance values.

    Whole clusters are resampled with replacement (``scipy.stats.bootstrap``, paired,
    percentile method) and the statistic is the instance mean of the resample,
    Σ_g S_g / Σ_g n_g with S_g, n_g the sum and size of cluster g. Without
    ``clusters`` every instance is its own cluster. At least two clusters are needed.

    ``expand`` (default): the expanded percentile interval (Hesterberg 2015, "What teachers
    should know about the bootstrap", §3.6): the percentiles are taken at
    α' = Φ(−sqrt(G/(G − 1)) · t_{1−α, G−1}) instead of α, which matches the t interval for
    normal data and keeps the coverage of small-G intervals (the plain percentile interval is
    too narrow for few clusters). The p-values use the same correction.

    ``method='bca'``: the bias-corrected and accelerated interval of ``scipy.stats.bootstrap``
    (Efron 1987; acceleration from the leave-one-cluster-out jackknife) instead, for skewed
    unit values where the percentile interval is too short on the long-tail side; ``expand``
    is then ignored.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ConfigError(f"`values` must be a non-empty 1-D array; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ConfigError("`values` must be finite; found NaN or inf")
    _check_rng(rng)
    level = _check_confidence(confidence_level)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 99:
        raise ConfigError(f"`n_resamples` must be an integer >= 99; got {n_resamples!r}")
    if method not in ("percentile", "bca"):
        raise ConfigError(f"`method` must be 'percentile' or 'bca'; got {method!r}")
    if clusters is None:
        c = np.arange(v.size)
    else:
        c = np.asarray(clusters)
        if c.shape != v.shape:
            raise ConfigError(f"`clusters` must have the same shape as `values`; got {c.shape} vs {v.shape}")
    _, inverse = np.unique(c, return_inverse=True)
    sums = np.asarray(np.bincount(inverse, weights=v), dtype=float)
    counts = np.bincount(inverse).astype(float)
    if sums.size < 2:
        raise ConfigError(f"`clusters` must hold at least 2 distinct clusters to bootstrap; got {sums.size}")
    estimate = float(v.mean())

    def ratio(s: NDArray[np.float64], n: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
        out: NDArray[np.float64] = s.sum(axis=axis) / n.sum(axis=axis)
        return out

    if np.allclose(sums / counts, estimate, rtol=0, atol=1e-15):
        dist = np.full(int(n_resamples), estimate)
        return BootstrapResult(estimate, estimate, estimate, level, v.size, sums.size, dist, expanded=False)
    g = int(sums.size)
    tail = (1 - level) / 2
    if method == "bca":
        return _bca(sums, counts, estimate, level, int(v.size), int(n_resamples), rng, ratio)
    if expand and g >= 3:
        tail = float(_st.norm.cdf(-math.sqrt(g / (g - 1)) * _st.t.ppf(1 - tail, g - 1)))
    res = _st.bootstrap(
        (sums, counts),
        ratio,
        paired=True,
        vectorized=True,
        n_resamples=int(n_resamples),
        confidence_level=1 - 2 * tail,
        method="percentile",
        rng=rng,
    )
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return BootstrapResult(estimate, lo, hi, level, int(v.size), g, dist, expanded=expand and g >= 3)


def _bca(sums: NDArray[np.float64], counts: NDArray[np.float64], estimate: float, level: float, n: int,
         n_resamples: int, rng: np.random.Generator, ratio: Any) -> BootstrapResult:
    """The BCa branch of :func:`cluster_bootstrap`: scipy's interval, and z0 and a for the p-values."""
    res = _st.bootstrap((sums, counts), ratio, paired=True, vectorized=True, n_resamples=n_resamples,
                        confidence_level=level, method="BCa", rng=rng)
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    share = float((np.count_nonzero(dist < estimate) + np.count_nonzero(dist <= estimate)) / (2 * dist.size))  # as scipy
    z0 = float(_st.norm.ppf(min(max(share, 1e-12), 1 - 1e-12)))
    g = sums.size
    loo = (sums.sum() - sums) / (counts.sum() - counts)  # leave-one-cluster-out means
    dev = loo.mean() - loo
    den = 6.0 * float(np.sum(dev**2)) ** 1.5
    accel = float(np.sum(dev**3)) / den if den > 0 else 0.0
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return BootstrapResult(estimate, lo, hi, level, n, int(g), dist, expanded=False, method="bca", z0=z0, accel=accel)


@dataclass(frozen=True)
class TostResult:
    """Two one-sided tests for a paired mean difference with a cluster-robust SE."""

    estimate: float
    se: float
    df: int
    ci_low: float
    ci_high: float
    p_lower: float
    p_upper: float
    p_value: float
    equivalent: bool


def tost_paired(
    differences: ArrayLike,
    clusters: ArrayLike | None = None,
    *,
    margin: float,
    alpha: float = 0.05,
) -> TostResult:
    """TOST for a paired difference within ±margin (phase paper: ±2.5 points, clustered SE).

    d̄ = mean of the per-instance differences; the cluster-robust (CR1) standard error
    is SE = sqrt(G/(G−1) · Σ_g (Σ_{i∈g} (d_i − d̄))²) / n with G clusters and t with
    G − 1 degrees of freedom. p_lower tests H0: δ <= −margin, p_upper H0: δ >= margin;
    the TOST p-value is their maximum and the CI is the (1 − 2α) interval. Zero spread (SE = 0)
    never shows equivalence: the CI is unbounded and both p-values are 1.
    """
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1 or d.size < 2:
        raise ConfigError(f"`differences` must be a 1-D array of at least 2 values; got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ConfigError("`differences` must be finite")
    if not (isinstance(margin, (int, float)) and margin > 0):
        raise ConfigError(f"`margin` must be a positive number; got {margin!r}")
    a = _check_alpha(alpha)
    c = np.arange(d.size) if clusters is None else np.asarray(clusters)
    if c.shape != d.shape:
        raise ConfigError(f"`clusters` must have the same shape as `differences`; got {c.shape} vs {d.shape}")
    _, inv = np.unique(c, return_inverse=True)
    g = int(inv.max()) + 1
    if g < 2:
        raise ConfigError("`clusters` must hold at least 2 distinct clusters")
    mean = float(d.mean())
    resid_sums = np.bincount(inv, weights=d - mean)
    se = math.sqrt(g / (g - 1) * float(np.sum(resid_sums**2))) / d.size
    df = g - 1
    if se == 0.0:
        # zero spread: no variance to test with, and equivalence is never shown from it
        return TostResult(mean, 0.0, df, -math.inf, math.inf, 1.0, 1.0, 1.0, False)
    p_lo = float(_st.t.sf((mean + margin) / se, df))
    p_hi = float(_st.t.cdf((mean - margin) / se, df))
    q = float(_st.t.ppf(1 - a, df))
    p = max(p_lo, p_hi)
    return TostResult(mean, se, df, mean - q * se, mean + q * se, p_lo, p_hi, p, p < a)


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """The outcome of one gate: what the test asserts on and the report shows.

    ``lower``/``upper`` bound the compliance region (either may be infinite); the
    ``threshold`` is the number a user configured (e.g. 0.02 for |MEG| <= 0.02).
    ``p_value`` is the one-sided p-value of the mode's test: in ``detect`` mode of
    H0 "compliant", in ``certify`` mode of H0 "violating" (TOST maximum for
    two-sided regions). The CI is two-sided at 1 − 2α.
    """

    name: str
    estimate: float
    ci_low: float
    ci_high: float
    threshold: float
    n: int
    p_value: float
    passed: bool
    mode: str
    reason: str
    alpha: float = 0.05
    lower: float = -math.inf
    upper: float = math.inf
    unit: str = "instances"
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    inconclusive: bool = False

    @property
    def outcome(self) -> str:
        """``pass``, ``fail`` or ``inconclusive``: the verdict state the report counts.

        An inconclusive verdict is one whose data could not decide (too few units, a rare outcome
        too rarely expected in the sample, zero spread, non-finite unit values). Its ``passed``
        keeps the mode's conservative reading: in detect mode no violation was shown (True, except
        for non-finite values, which never pass), in certify mode compliance was not shown (False).
        """
        if self.inconclusive:
            return "inconclusive"
        return "pass" if self.passed else "fail"

    def message(self) -> str:
        """One sentence with estimate, CI, threshold, n and p (used as the failure message)."""
        return self.reason

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("estimate", "ci_low", "ci_high", "threshold", "p_value", "lower", "upper"):
            v = d[k]
            d[k] = None if v is None or (isinstance(v, float) and math.isnan(v)) else (
                "inf" if v == math.inf else "-inf" if v == -math.inf else v
            )
        d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        def num(v: Any) -> float:
            if v is None:
                return math.nan
            if v == "inf":
                return math.inf
            if v == "-inf":
                return -math.inf
            return float(v)

        kw = dict(d)
        for k in ("estimate", "ci_low", "ci_high", "threshold", "p_value", "lower", "upper"):
            if k in kw:
                kw[k] = num(kw[k])
        kw["extra"] = dict(kw.get("extra") or {})
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in kw.items() if k in known})


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def _region(lower: float, upper: float) -> str:
    if math.isinf(lower) and not math.isinf(upper):
        return f"<= {_fmt(upper)}"
    if math.isinf(upper) and not math.isinf(lower):
        return f">= {_fmt(lower)}"
    if lower == -upper:
        return f"within ±{_fmt(upper)}"
    return f"within [{_fmt(lower)}, {_fmt(upper)}]"


def _decide(
    *,
    name: str,
    estimate: float,
    ci_low: float,
    ci_high: float,
    lower: float,
    upper: float,
    threshold: float,
    n: int,
    unit: str,
    mode: str,
    alpha: float,
    p_detect: float,
    p_certify: float,
    extra: Mapping[str, Any] | None,
) -> Verdict:
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}; got {mode!r}")
    region = _region(lower, upper)
    level = round(100 * (1 - 2 * alpha))
    nums = (
        f"{name} = {_fmt(estimate)} ({level}% CI [{_fmt(ci_low)}, {_fmt(ci_high)}], "
        f"threshold {region}, n = {n} {unit}"
    )
    if mode == "detect":
        violated_above = ci_low > upper
        violated_below = ci_high < lower
        passed = not (violated_above or violated_below)
        p = p_detect
        if passed:
            reason = f"{nums}, p = {_fmt(p)}): no violation shown at α = {alpha:g} (detect mode)."
        else:
            side = "above" if violated_above else "below"
            reason = f"{nums}, p = {_fmt(p)}): the whole CI lies {side} the allowed region, a violation at α = {alpha:g} (detect mode)."
    else:
        passed = ci_low > lower and ci_high < upper
        p = p_certify
        if passed:
            reason = f"{nums}, p = {_fmt(p)}): the whole CI lies inside the allowed region, compliance certified at α = {alpha:g}."
        else:
            reason = f"{nums}, p = {_fmt(p)}): the CI is not wholly inside the allowed region, so compliance is not certified at α = {alpha:g} (certify mode)."
    return Verdict(
        name=name,
        estimate=float(estimate),
        ci_low=float(ci_low),
        ci_high=float(ci_high),
        threshold=float(threshold),
        n=int(n),
        p_value=float(min(1.0, max(0.0, p))),
        passed=bool(passed),
        mode=mode,
        reason=reason,
        alpha=alpha,
        lower=float(lower),
        upper=float(upper),
        unit=unit,
        extra=dict(extra or {}),
    )


def _bounds(threshold: float, sides: str) -> tuple[float, float]:
    if not (isinstance(threshold, (int, float)) and math.isfinite(threshold)):
        raise ConfigError(f"`threshold` must be a finite number; got {threshold!r}")
    if sides == "both":
        if threshold < 0:
            raise ConfigError(f"`threshold` must be >= 0 for a two-sided region; got {threshold!r}")
        return -float(threshold), float(threshold)
    if sides == "upper":
        return -math.inf, float(threshold)
    if sides == "lower":
        return float(threshold), math.inf
    raise ConfigError(f"`sides` must be 'both', 'upper' or 'lower'; got {sides!r}")


def zero_spread_interval(value: float, n: int, *, lower: float, upper: float, alpha: float,
                         value_range: tuple[float, float]) -> tuple[float, float, float, float]:
    """The (1 − 2α) interval and p-values for n independent units that all took the same ``value``.

    Zero spread gives no variance to build an interval from, so the floor is the exact worst case
    over every distribution on ``value_range = (lo, hi)``: the sample is n draws equal to ``value``,
    which has probability at most q^n when the distribution puts mass q on it. A mean μ above the
    value needs the rest of the mass above it, q <= (hi − μ)/(hi − value); so μ is excluded at
    level α exactly when ((hi − μ)/(hi − value))^n < α, which gives the upper bound
    value + (1 − α^(1/n))·(hi − value), and the lower bound value − (1 − α^(1/n))·(value − lo).
    For 0/1 units this is the Clopper–Pearson bound of 0/n or n/n (1 − α^(1/n)).

    Returns (ci_low, ci_high, p_detect, p_certify): p_detect of H0 "inside [lower, upper]",
    p_certify of H0 "outside" (the larger of the two one-sided p-values, TOST).
    """
    lo, hi = (float(value_range[0]), float(value_range[1]))
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and lo <= value <= hi):
        raise ConfigError(f"`value_range` must be a finite (lo, hi) with lo < hi that holds the value {value!r}; "
                          f"got {value_range!r}")
    shrink = 1.0 - alpha ** (1.0 / n)
    ci_low, ci_high = value - shrink * (value - lo), value + shrink * (hi - value)

    def p_at_least(mu: float) -> float:  # H0: mean >= mu, observed all equal to value
        if mu <= value:
            return 1.0
        return 0.0 if mu >= hi else ((hi - mu) / (hi - value)) ** n

    def p_at_most(mu: float) -> float:  # H0: mean <= mu
        if mu >= value:
            return 1.0
        return 0.0 if mu <= lo else ((mu - lo) / (value - lo)) ** n

    p_det = min(p_at_most(upper) if math.isfinite(upper) else 1.0, p_at_least(lower) if math.isfinite(lower) else 1.0)
    p_cert = max(p_at_least(upper) if math.isfinite(upper) else 0.0, p_at_most(lower) if math.isfinite(lower) else 0.0)
    return ci_low, ci_high, p_det, p_cert


def null_variance_interval(means: ArrayLike, *, alpha: float) -> tuple[float, float]:
    """The (1 − 2α) interval {μ0 : |x̄ − μ0| <= c·s0(μ0)/√n} of the t statistic with the
    variance taken at the tested mean, s0(μ0)² = s² + (x̄ − μ0)² (s² the sample variance of the n
    unit means, c the one-sided 1 − α quantile of Student t with n − 1 degrees of freedom): solved,
    x̄ ± c·s/√(n − c²), the t interval widened by √(n/(n − c²)); the whole line when n <= c².

    Why: on lattice-valued units (a group's MEG is a multiple of 1/32 on four-sentence references)
    a sample piled on one lattice point has both an extreme mean and a small sample variance, so
    intervals built on the sample variance (t, bootstrap) are too short exactly where the mean is
    far out; the variance at the tested value does not shrink with the spread (as the Wilson
    interval does for a proportion). Sizes at the boundary: ``benchmarks/decision_lattice.py``.
    """
    x = np.asarray(means, dtype=float)
    n = x.size
    if n < 2:
        return -math.inf, math.inf
    c = float(_st.t.ppf(1.0 - alpha, n - 1))
    if n <= c * c:
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
    so under a null at ``bound`` its variance is at least |bound|·δ. A sample piled on one lattice
    point has a sample variance far below that; the floor keeps the statistic from taking it at its
    word. Under-dispersed units (events that happen almost surely) can sit below the floor: there the
    floor is conservative (it lowers power, never the size).
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
    units, e.g. the certify side of sparse lattice MEGs); g(S) = ((1 + γS/3)³ − 1)/γ + γ/(6n) is
    increasing in S, so T grows without bound with the distance |x̄ − μ0| and the p-values go to 0,
    and the interval inverts the test exactly: L = x̄ − s_eff·g⁻¹(q/√n), U = x̄ − s_eff·g⁻¹(−q/√n),
    q = t_{1−α, n−1}, g⁻¹(y) = (3/γ)·(∛(1 + γ(y − γ/(6n))) − 1).
    """

    mean: float
    sd: float
    gamma: float
    n: int
    floored: bool

    def _g(self, s_: float) -> float:
        g = self.gamma
        return s_ + g * s_ * s_ / 3 + g * g * s_**3 / 27 + g / (6 * self.n)

    def _g_inv(self, y: float) -> float:
        g = self.gamma
        if g == 0.0:
            return y
        return 3.0 / g * (float(np.cbrt(1.0 + g * (y - g / (6 * self.n)))) - 1.0)

    def statistic(self, mu0: float) -> float:
        """T(μ0) (see the class docstring)."""
        return math.sqrt(self.n) * self._g((self.mean - mu0) / self.sd)

    def p_greater(self, bound: float) -> float:
        """p-value of H0: μ <= ``bound`` (large T rejects)."""
        return float(_st.t.sf(self.statistic(bound), self.n - 1))

    def p_less(self, bound: float) -> float:
        """p-value of H0: μ >= ``bound`` (small T rejects)."""
        return float(_st.t.cdf(self.statistic(bound), self.n - 1))

    def interval(self, alpha: float) -> tuple[float, float]:
        """The (1 − 2α) interval: each bound one-sided at level α, p_greater(L) = p_less(U) = α."""
        q = float(_st.t.isf(alpha, self.n - 1))
        r = math.sqrt(self.n)
        return self.mean - self.sd * self._g_inv(q / r), self.mean - self.sd * self._g_inv(-q / r)


def skew_t(units: ArrayLike, *, floor: float = 0.0) -> SkewT:
    """:class:`SkewT` of independent unit values (at least 2, not all equal unless ``floor`` > 0),
    with the variance floored at ``floor`` (:func:`lattice_floor`)."""
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
    gamma = float(np.mean((x - m) ** 3)) / sd**3
    return SkewT(m, sd, gamma, int(x.size), sd > s)


def mean_verdict(
    values: ArrayLike,
    clusters: ArrayLike | None = None,
    *,
    name: str,
    threshold: float,
    sides: str = "both",
    mode: str = "detect",
    alpha: float = 0.05,
    unit: str = "instances",
    n_resamples: int = 9999,
    rng: np.random.Generator,
    method: str = "percentile",
    extra: Mapping[str, Any] | None = None,
    value_range: tuple[float, float] | None = None,
    null_variance: bool = False,
    lattice_step: float | None = None,
) -> Verdict:
    """Gate on the mean of per-instance values with a cluster-bootstrap (1 − 2α) CI, or with
    Hall's skewness-corrected t (``method='skew-t'``).

    ``sides='both'``: compliant when −threshold <= θ <= threshold (DPB, MEG);
    ``'upper'``: θ <= threshold; ``'lower'``: θ >= threshold. Detect p-value: the
    bootstrap share on the compliant side of the nearer violated bound; certify:
    the larger of the two one-sided shares (TOST). ``method``: ``percentile`` (expanded
    percentile, the default), ``bca`` (for skewed units, e.g. the stressor amplification) or
    ``skew-t`` (the positional mean gates: :class:`SkewT` on the clusters' linearized means
    u_g = x̄ + (S_g − x̄·n_g)/n̄, which average to the instance mean x̄ and equal the cluster means
    when the clusters have equal sizes; with ``lattice_step`` δ the variance is floored at
    :func:`lattice_floor` of the larger finite bound; its p-values go to 0 with the distance from
    the bound, which a bootstrap's cannot below 1/(resamples + 1)).

    Refusals (an *inconclusive* verdict, :attr:`Verdict.inconclusive`):

    * fewer than ``MIN_CLUSTERS`` independent units;
    * any non-finite value (a lost unit that reached the rule): it does not pass in either mode;
    * zero spread (every cluster mean equal): a bootstrap interval has zero width there and would
      certify from a handful of units. With ``value_range = (lo, hi)`` (the values' possible range)
      the gate decides on the exact worst-case floor of :func:`zero_spread_interval` instead;
      without it, a detect-mode sample whose every unit lies past a bound still fails (fail
      closed: e.g. zero coverage everywhere), and any other zero-spread sample is inconclusive.

    ``null_variance=True`` (lattice-valued units, e.g. a group's MEG on four-sentence references):
    the interval is the hull of the bootstrap interval and :func:`null_variance_interval` (the
    t test with the variance taken at the tested bound, inverted), and each p-value the larger of
    the two rules'; a violation (detect) or compliance (certify) is shown only when both show it
    (docs/design.md section 5).
    """
    a = _check_alpha(alpha)
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}; got {mode!r}")
    lower, upper = _bounds(threshold, sides)
    v = np.asarray(values, dtype=float)
    clusters_arr = None if clusters is None else np.asarray(clusters)
    n_clusters = v.size if clusters_arr is None else np.unique(clusters_arr).size
    if v.size and not np.all(np.isfinite(v)):
        bad = int(np.count_nonzero(~np.isfinite(v)))
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=int(n_clusters), mode=mode,
                                    alpha=a, unit=unit, fail_closed=True, extra=extra,
                                    why=f"{bad} of {v.size} unit values are not finite (NaN or inf), and a unit that "
                                        "was not measured is never scored")
    if v.size == 0 or n_clusters < MIN_CLUSTERS:
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=int(n_clusters), mode=mode,
                                    alpha=a, unit=unit, why=f"fewer than {MIN_CLUSTERS} independent units for a cluster bootstrap",
                                    estimate=float(v.mean()) if v.size else math.nan, extra=extra)
    _, inv = np.unique(np.arange(v.size) if clusters_arr is None else clusters_arr, return_inverse=True)
    cmeans = np.bincount(inv, weights=v) / np.bincount(inv)
    if np.ptp(cmeans) == 0.0:
        est = float(v.mean())
        outside = est > upper or est < lower
        if value_range is None and not (mode == "detect" and outside):
            return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=int(n_clusters), mode=mode,
                                        alpha=a, unit=unit, estimate=est, extra=extra,
                                        why=f"zero spread: every independent unit has the value {_fmt(est)}, and an "
                                            "interval of zero width says nothing about the units not drawn")
        if value_range is None:  # detect, every unit past the bound: the violation is in every unit
            zlo = zhi = est
            p_det, p_cert = 0.0, 1.0
            how = "zero spread, every unit past the bound"
        else:
            zlo, zhi, p_det, p_cert = zero_spread_interval(est, int(n_clusters), lower=lower, upper=upper, alpha=a,
                                                           value_range=value_range)
            how = "zero spread: exact worst-case floor on the interval"
        ex0 = {"n_instances": int(v.size), "method": how}
        ex0.update(extra or {})
        return _decide(name=name, estimate=est, ci_low=zlo, ci_high=zhi, lower=lower, upper=upper, threshold=threshold,
                       n=int(n_clusters), unit=unit, mode=mode, alpha=a, p_detect=p_det, p_certify=p_cert, extra=ex0)
    if method == "skew-t":
        return _skew_t_verdict(v, inv, name=name, threshold=threshold, lower=lower, upper=upper, mode=mode, alpha=a,
                               unit=unit, extra=extra, lattice_step=lattice_step)
    bs = cluster_bootstrap(v, clusters_arr, confidence_level=1 - 2 * a, n_resamples=n_resamples, rng=rng, method=method)
    p_above = bs.p_greater(upper) if math.isfinite(upper) else 1.0  # H0: θ <= upper
    p_below = bs.p_less(lower) if math.isfinite(lower) else 1.0  # H0: θ >= lower
    p_detect = min(p_above, p_below)
    p_cert_hi = bs.p_less(upper) if math.isfinite(upper) else 0.0  # H0: θ >= upper
    p_cert_lo = bs.p_greater(lower) if math.isfinite(lower) else 0.0  # H0: θ <= lower
    p_certify = max(p_cert_hi, p_cert_lo)
    ex: dict[str, Any] = {"n_instances": int(v.size), "n_resamples": int(n_resamples), "method": ("cluster bootstrap (BCa)" if bs.method == "bca" else
                                                                             "cluster bootstrap (expanded percentile)")}
    ci_low, ci_high = bs.ci_low, bs.ci_high
    if null_variance:
        t_low, t_high = null_variance_interval(cmeans, alpha=a)
        ci_low, ci_high = min(ci_low, t_low), max(ci_high, t_high)
        t_p = {b: null_variance_p(cmeans, b, side) for b, side in ((upper, "greater"), (lower, "less"))
               if math.isfinite(b)}
        t_c = {b: null_variance_p(cmeans, b, side) for b, side in ((upper, "less"), (lower, "greater"))
               if math.isfinite(b)}
        p_above = max(p_above, t_p.get(upper, 1.0))
        p_below = max(p_below, t_p.get(lower, 1.0))
        p_detect = min(p_above, p_below)
        p_certify = max(p_certify, *t_c.values()) if t_c else p_certify
        ex["method"] = f"{ex['method']} and null-variance t (hull)"
        ex["null_variance_interval"] = [t_low, t_high]
    ex.update(extra or {})
    return _decide(name=name, estimate=bs.estimate, ci_low=ci_low, ci_high=ci_high, lower=lower, upper=upper,
                   threshold=threshold, n=bs.n_clusters, unit=unit, mode=mode, alpha=a,
                   p_detect=p_detect, p_certify=p_certify, extra=ex)


def _skew_t_verdict(v: NDArray[np.float64], inv: NDArray[np.intp], *, name: str, threshold: float, lower: float,
                    upper: float, mode: str, alpha: float, unit: str, extra: Mapping[str, Any] | None,
                    lattice_step: float | None) -> Verdict:
    """The ``skew-t`` branch of :func:`mean_verdict` (``inv``: each value's cluster index)."""
    sums = np.bincount(inv, weights=v)
    counts = np.bincount(inv).astype(float)
    est = float(v.mean())
    units = est + (sums - est * counts) / counts.mean()
    floor = max(lattice_floor(b, lattice_step) for b in (lower, upper))
    st_ = skew_t(units, floor=floor)
    ci_low, ci_high = st_.interval(alpha)
    p_above = st_.p_greater(upper) if math.isfinite(upper) else 1.0  # H0: θ <= upper
    p_below = st_.p_less(lower) if math.isfinite(lower) else 1.0  # H0: θ >= lower
    p_cert_hi = st_.p_less(upper) if math.isfinite(upper) else 0.0  # H0: θ >= upper
    p_cert_lo = st_.p_greater(lower) if math.isfinite(lower) else 0.0  # H0: θ <= lower
    ex: dict[str, Any] = {"n_instances": int(v.size), "skewness": st_.gamma, "sd": st_.sd,
                          "method": "skewness-corrected t (Hall 1992)" + (
                              f", variance floored at |bound|·δ, δ = {_fmt(lattice_step)}" if lattice_step else "")}
    if lattice_step:
        ex["lattice_step"] = float(lattice_step)
        ex["variance_floor_applied"] = st_.floored
    ex.update(extra or {})
    return _decide(name=name, estimate=est, ci_low=ci_low, ci_high=ci_high, lower=lower, upper=upper,
                   threshold=threshold, n=int(units.size), unit=unit, mode=mode, alpha=alpha,
                   p_detect=min(p_above, p_below), p_certify=max(p_cert_hi, p_cert_lo), extra=ex)


RARE_MIN_COUNT = 5  # the bootstrap decides a share-minus-indicator mean only with this many of the rarer outcome
SHARE_ALPHA_FRACTION = 0.2  # of α spent on the share's bound in the decomposed rule; the rest on the indicator's


def share_difference_bounds(share: ArrayLike, indicator: ArrayLike, *, alpha: float
                            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """One-sided (1 − α) lower and upper bounds of μ = E[share] − P(indicator), decomposed.

    ``share`` (values in [0, 1]) and ``indicator`` (0/1) hold one value per independent unit, in the
    last axis (rows of a 2-D array are separate samples). By Bonferroni over the two parts,
    with α_s = ``SHARE_ALPHA_FRACTION``·α and α_c = α − α_s:

        L = L_t(share; α_s) − U_CP(indicator; α_c),   U = U_t(share; α_s) − L_CP(indicator; α_c)

    where L_t/U_t are Student-t bounds of the share's mean (with the exact zero-spread floor of
    :func:`zero_spread_interval` on [0, 1] when every share is equal) and L_CP/U_CP are the exact
    Clopper–Pearson bounds of the indicator's rate. Each bound holds at level α whatever the rate of
    the indicator, also when it is rare and the sample holds none of it.
    """
    a = _check_alpha(alpha)
    sh = np.atleast_2d(np.asarray(share, dtype=float))
    ind = np.atleast_2d(np.asarray(indicator, dtype=float))
    if sh.shape != ind.shape or sh.shape[-1] < 2:
        raise ConfigError(f"`share` and `indicator` must have the same shape with at least 2 units; got {sh.shape} "
                          f"and {ind.shape}")
    if not (np.all(np.isfinite(sh)) and np.all((sh >= 0) & (sh <= 1))):
        raise ConfigError("`share` must hold finite values in [0, 1]")
    if not np.all((ind == 0) | (ind == 1)):
        raise ConfigError("`indicator` must hold only 0 and 1")
    a_s = SHARE_ALPHA_FRACTION * a
    a_c = a - a_s
    n = sh.shape[-1]
    mean = sh.mean(axis=-1)
    sd = sh.std(axis=-1, ddof=1)
    q = float(_st.t.isf(a_s, n - 1))
    shrink = 1.0 - a_s ** (1.0 / n)
    flat = sd == 0
    half = np.where(flat, 0.0, q * sd / math.sqrt(n))
    s_lo = np.where(flat, mean - shrink * mean, mean - half)
    s_hi = np.where(flat, mean + shrink * (1 - mean), mean + half)
    k = ind.sum(axis=-1)
    c_hi = np.where(k < n, _st.beta.isf(a_c, k + 1, np.maximum(n - k, 1)), 1.0)
    c_lo = np.where(k > 0, _st.beta.ppf(a_c, np.maximum(k, 1), n - k + 1), 0.0)
    return np.asarray(s_lo - c_hi, dtype=float), np.asarray(s_hi - c_lo, dtype=float)


def share_difference_rule(share: ArrayLike, indicator: ArrayLike, *, lower: float, upper: float, mode: str,
                          alpha: float) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """The decomposed rule of :func:`share_difference_verdict` on one or many samples (rows).

    Returns (decided, passed) per sample: detect fails when the lower bound of
    :func:`share_difference_bounds` lies above ``upper`` or its upper bound below ``lower``;
    certify passes when both bounds lie inside [lower, upper]. (The bootstrap branch for samples
    with ``RARE_MIN_COUNT`` rare outcomes is applied by the verdict itself.)
    """
    lo, hi = share_difference_bounds(share, indicator, alpha=alpha)
    if mode == "detect":
        outside = (lo > upper) | (hi < lower)
        return np.ones_like(outside), ~outside
    inside = (lo > lower) & (hi < upper)
    return np.ones_like(inside), inside


def share_difference_min_sample(*, lower: float, upper: float, mode: str, alpha: float, n_max: int = 10_000) -> int:
    """Smallest n at which the decomposed rule could decide on the most extreme sample.

    Detect (upper bound t): every share 1 and no indicator; certify: every share 0 and every
    indicator 1 (and the mirror images for a lower bound). Below it the verdict is inconclusive.
    """
    for n in range(2, n_max + 1):
        if mode == "detect":
            hit = False
            if math.isfinite(upper):
                lo, _ = share_difference_bounds(np.ones(n), np.zeros(n), alpha=alpha)
                hit = hit or bool(lo[0] > upper)
            if math.isfinite(lower):
                _, hi = share_difference_bounds(np.zeros(n), np.ones(n), alpha=alpha)
                hit = hit or bool(hi[0] < lower)
        else:
            mid = (max(lower, -1.0) + min(upper, 1.0)) / 2
            best = np.full(n, max(0.0, mid)), np.full(n, 1.0 if mid < 0 else 0.0)
            lo, hi = share_difference_bounds(*best, alpha=alpha)
            hit = bool(lo[0] > lower and hi[0] < upper)
        if hit:
            return n
    return n_max + 1


def share_difference_verdict(
    share: ArrayLike,
    indicator: ArrayLike,
    *,
    name: str,
    threshold: float,
    sides: str = "upper",
    mode: str = "detect",
    alpha: float = 0.05,
    unit: str = "units",
    n_resamples: int = 9999,
    rng: np.random.Generator,
    extra: Mapping[str, Any] | None = None,
) -> Verdict:
    """Gate on the mean of d_i = share_i − indicator_i, one value per independent unit (the stressor
    amplification: share of a video's stressed outputs that repeat minus its clean 0/1 flag).

    The indicator is a rare-event component: a bootstrap of d (BCa or percentile) cannot see a rare
    outcome the sample happened to miss, and then decides on a mean that lacks it (at the boundary
    of the stressor gate it false-failed about half of the runs at 5–8 videos). So:

    * when the sample holds at least ``RARE_MIN_COUNT`` units of the rarer indicator outcome (its
      observed count estimates the expected count n·p), the BCa cluster bootstrap of d decides;
    * otherwise the decomposed rule :func:`share_difference_bounds` decides (t bound of the share,
      exact Clopper–Pearson bound of the indicator, Bonferroni), which holds its level at every
      indicator rate;
    * below :func:`share_difference_min_sample` units, where not even the most extreme sample could
      decide, the verdict is inconclusive; non-finite values never pass.
    """
    a = _check_alpha(alpha)
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}; got {mode!r}")
    lower, upper = _bounds(threshold, sides)
    sh = np.asarray(share, dtype=float)
    ind = np.asarray(indicator, dtype=float)
    if sh.ndim != 1 or sh.shape != ind.shape:
        raise ConfigError(f"`share` and `indicator` must be 1-D arrays of the same length; got {sh.shape} and {ind.shape}")
    n = int(sh.size)
    if n and not (np.all(np.isfinite(sh)) and np.all(np.isfinite(ind))):
        bad = int(np.count_nonzero(~np.isfinite(sh) | ~np.isfinite(ind)))
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=n, mode=mode, alpha=a, unit=unit,
                                    fail_closed=True, extra=extra,
                                    why=f"{bad} of {n} units have non-finite values (NaN or inf), and a unit that was "
                                        "not measured is never scored")
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
        return float(_st_optimize_brentq(f, 1e-12, 0.4999))

    p_det = min(p_of("lower", upper) if math.isfinite(upper) else 1.0,
                p_of("upper", lower) if math.isfinite(lower) else 1.0)
    p_cert = max(p_of("upper", upper) if math.isfinite(upper) else 0.0,
                 p_of("lower", lower) if math.isfinite(lower) else 0.0)
    ex = {"n_instances": n, "rare_count": rare, "min_sample": n_min,
          "method": f"decomposed: t bound of the share + exact Clopper-Pearson bound of the 0/1 indicator "
                    f"(fewer than {RARE_MIN_COUNT} of the rarer outcome for a bootstrap)"}
    ex.update(extra or {})
    return _decide(name=name, estimate=est, ci_low=lo, ci_high=hi, lower=lower, upper=upper, threshold=threshold, n=n,
                   unit=unit, mode=mode, alpha=a, p_detect=p_det, p_certify=p_cert, extra=ex)


def _st_optimize_brentq(f: Any, a: float, b: float) -> float:
    from scipy.optimize import brentq

    return float(brentq(f, a, b, xtol=1e-10))


def rate_min_sample(*, threshold: float, mode: str, alpha: float) -> int:
    """The smallest n at which the exact binomial rule of :func:`rate_verdict` could decide.

    Detect fails only when even n/n has p = t^n < α, so n_min = ⌊log α / log t⌋ + 1 (1 when t = 0,
    none when t = 1); certify passes only when 0/n has p = (1 − t)^n < α, so
    n_min = ⌊log α / log(1 − t)⌋ + 1 (none when t = 0). "None" is returned as a huge n.
    """
    a = _check_alpha(alpha)
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}; got {mode!r}")
    q = threshold if mode == "detect" else 1.0 - threshold
    if q <= 0.0:
        return 1
    if q >= 1.0:
        return 2**62
    return math.floor(math.log(a) / math.log(q)) + 1


def rate_verdict(
    k: int,
    n: int,
    *,
    name: str,
    threshold: float,
    mode: str = "detect",
    alpha: float = 0.05,
    unit: str = "instances",
    extra: Mapping[str, Any] | None = None,
) -> Verdict:
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
    if not 0.0 <= threshold <= 1.0:
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
    ex = {"k": int(k), "method": "exact binomial (Clopper-Pearson)"}
    ex.update(extra or {})
    # Clopper-Pearson bounds invert the exact test, so the CI rule and p < α agree.
    return _decide(name=name, estimate=k / n, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(threshold),
                   threshold=threshold, n=n, unit=unit, mode=mode, alpha=a,
                   p_detect=p_detect, p_certify=p_certify, extra=ex)


def paired_change_verdict(
    a: ArrayLike,
    b: ArrayLike,
    *,
    name: str,
    threshold: float = 0.0,
    mode: str = "detect",
    alpha: float = 0.05,
    unit: str = "items",
    extra: Mapping[str, Any] | None = None,
) -> Verdict:
    """Gate on δ = rate(a) − rate(b) for paired binary outcomes (e.g. answers changed by
    PhaseFusion vs by a single pass on the same items); compliant when δ <= threshold.

    n10 = #(a=1, b=0), n01 = #(a=0, b=1), δ̂ = (n10 − n01)/n.

    * threshold 0: exact McNemar, conditional on the m = n10 + n01 discordant pairs:
      n10 ~ Bin(m, θ) and δ = (2θ − 1)·m/n, so the Clopper–Pearson (1 − 2α) interval of θ maps to
      the CI of δ; exact because H0: δ = 0 is θ = 1/2 whatever m.
    * threshold t ≠ 0: conditioning on m treats the discordance as known, which does not hold
      the size at the margin; the test is instead the exact unconditional non-inferiority test
      for paired proportions ordered by Tango's score, maximised over the nuisance p01
      (:func:`~pytest_posbias.paired.paired_binary_p`; Tango's score test referred to the normal
      beyond ``EXACT_MAX_N`` pairs), and each CI bound inverts it
      (:func:`~pytest_posbias.paired.paired_binary_bound`).
    """
    x = np.asarray(a, dtype=int)
    y = np.asarray(b, dtype=int)
    if x.shape != y.shape or x.ndim != 1:
        raise ConfigError(f"`a` and `b` must be 1-D arrays of the same length; got {x.shape} and {y.shape}")
    al = _check_alpha(alpha)
    n = int(x.size)
    if n == 0:
        return inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=0, mode=mode, alpha=al, unit=unit,
                                    why="no paired observations", extra=extra)
    n10 = int(np.sum((x == 1) & (y == 0)))
    n01 = int(np.sum((x == 0) & (y == 1)))
    m = n10 + n01
    delta = (n10 - n01) / n
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1.0 < float(threshold) < 1.0:
        raise ConfigError(f"`threshold` must be a number in (-1, 1) for a difference of paired rates; got {threshold!r}")
    ex = {"n10": n10, "n01": n01, "rate_a": float(x.mean()), "rate_b": float(y.mean()),
          "mcnemar_two_sided_p": mcnemar_exact(n10, n01), "method": "exact conditional (McNemar)"}
    ex.update(extra or {})
    if threshold != 0.0:
        from .paired import EXACT_MAX_N, paired_binary_bound, paired_binary_p

        t = float(threshold)
        ex["method"] = ("exact unconditional non-inferiority test (Tango score, supremum over the nuisance)"
                        if n <= EXACT_MAX_N else "Tango score test (normal)")
        lo = paired_binary_bound(n10, n01, n, al, side="lower", anchor=t)
        hi = paired_binary_bound(n10, n01, n, al, side="upper", anchor=t)
        p_detect = paired_binary_p(n10, n01, n, t, alternative="greater")
        p_certify = paired_binary_p(n10, n01, n, t, alternative="less")
    elif m == 0:  # margin 0 and no discordant pair: nothing to test
        lo = hi = 0.0
        p_detect = p_certify = 1.0
    else:
        tlo, thi = exact_interval(n10, m, confidence_level=1 - 2 * al)
        lo, hi = (2 * tlo - 1) * m / n, (2 * thi - 1) * m / n
        p_detect = binomial_test(n10, m, 0.5, alternative="greater")
        p_certify = binomial_test(n10, m, 0.5, alternative="less")
    return _decide(name=name, estimate=delta, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(threshold),
                   threshold=threshold, n=n, unit=unit, mode=mode, alpha=al, p_detect=p_detect, p_certify=p_certify,
                   extra=ex)


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
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ConfigError(f"`n` must be a non-negative integer; got {n!r}")
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not a < float(power) < 1.0:
        raise ConfigError(f"`power` must be a number in (alpha, 1); got {power!r}")
    from scipy.optimize import brentq

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
    if sides == "lower":
        return lower - delta
    return upper + delta


def sample_for_effect(*, kind: str, effect: float, threshold: float, sides: str = "upper", alpha: float = 0.05,
                      power: float = 0.8, sd: float | None = None, n_max: int = 1_000_000) -> int | None:
    """The smallest n at which :func:`detectable_effect` reaches ``effect`` (a true value on the
    violating side, e.g. 2 × threshold): the sample a gate needs to detect it with ``power``, found
    by bisection (the exact binomial's power is saw-toothed in n, so for a rate a slightly smaller n
    may also reach it). None when not even ``n_max`` units suffice."""
    def reaches(n: int) -> bool:
        d = detectable_effect(kind=kind, n=n, threshold=threshold, sides=sides, alpha=alpha, power=power, sd=sd)
        return d >= effect if sides == "lower" else d <= effect

    if not reaches(n_max):
        return None
    lo, hi = 1, n_max  # reaches(hi) holds; find the smallest such n (monotone in n)
    while lo < hi:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def inconclusive_verdict(
    *,
    name: str,
    threshold: float,
    sides: str,
    n: int,
    mode: str,
    alpha: float,
    unit: str,
    why: str,
    estimate: float = math.nan,
    extra: Mapping[str, Any] | None = None,
    fail_closed: bool = False,
) -> Verdict:
    """A verdict when the data cannot decide: ``inconclusive`` is set, the CI is nan and p = 1.

    ``passed`` is the mode's conservative reading (detect: no violation shown; certify: compliance
    not shown); with ``fail_closed`` (non-finite unit values, data that should never reach a rule)
    it is False in both modes.
    """
    lower, upper = _bounds(threshold, sides)
    passed = mode == "detect" and not fail_closed
    what = ("the gate does not pass in either mode" if fail_closed else
            "no violation can be shown" if passed else "compliance cannot be certified")
    reason = (f"{name}: inconclusive, {why} (n = {n} {unit}), so {what} at α = {alpha:g} ({mode} mode); "
              f"threshold {_region(lower, upper)}.")
    return Verdict(name=name, estimate=estimate, ci_low=math.nan, ci_high=math.nan, threshold=float(threshold),
                   n=int(n), p_value=1.0, passed=passed, mode=mode, reason=reason, alpha=alpha, lower=lower,
                   upper=upper, unit=unit, extra={**(extra or {}), "inconclusive_why": why}, inconclusive=True)
