"""Statistics core: intervals, tests and the gate verdict (DESIGN.md section 5).

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
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import ConfigError


class _ScipyStats:
    """``scipy.stats``, imported on first use (about 1.5 s): importing this module, which the
    plugin does at pytest's start-up in every process (the xdist controller and each worker),
    stays cheap, so ``pytest -n N`` starts its workers sooner."""

    def __getattr__(self, name: str) -> Any:
        from scipy import stats

        return getattr(stats, name)


_st: Any = _ScipyStats()

Mode = Literal["detect", "certify"]
MODES: tuple[str, ...] = ("detect", "certify")

__all__ = [
    "MODES",
    "BootstrapResult",
    "TostResult",
    "Verdict",
    "benjamini_hochberg",
    "binomial_test",
    "cluster_bootstrap",
    "exact_interval",
    "inconclusive_verdict",
    "mcnemar_exact",
    "mean_verdict",
    "paired_change_verdict",
    "rate_verdict",
    "tost_paired",
    "wilson_interval",
]


# --------------------------------------------------------------------------- validation


def _check_alpha(alpha: float, *, name: str = "alpha") -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 0.5:
        raise ConfigError(f"`{name}` must be a float in (0, 0.5); got {alpha!r}")
    return float(alpha)


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
    the TOST p-value is their maximum and the CI is the (1 − 2α) interval.
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
        inside = -margin < mean < margin
        p_lo = 0.0 if mean > -margin else 1.0
        p_hi = 0.0 if mean < margin else 1.0
        return TostResult(mean, 0.0, df, mean, mean, p_lo, p_hi, max(p_lo, p_hi), inside)
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
) -> Verdict:
    """Gate on the mean of per-instance values with a cluster-bootstrap (1 − 2α) CI.

    ``sides='both'``: compliant when −threshold <= θ <= threshold (DPB, MEG);
    ``'upper'``: θ <= threshold; ``'lower'``: θ >= threshold. Detect p-value: the
    bootstrap share on the compliant side of the nearer violated bound; certify:
    the larger of the two one-sided shares (TOST). ``method``: ``percentile`` (expanded
    percentile, the default) or ``bca`` (for skewed units, e.g. the stressor amplification).
    """
    a = _check_alpha(alpha)
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}; got {mode!r}")
    lower, upper = _bounds(threshold, sides)
    v = np.asarray(values, dtype=float)
    clusters_arr = None if clusters is None else np.asarray(clusters)
    n_clusters = v.size if clusters_arr is None else np.unique(clusters_arr).size
    if v.size == 0 or n_clusters < MIN_CLUSTERS:
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=int(n_clusters), mode=mode,
                                    alpha=a, unit=unit, why=f"fewer than {MIN_CLUSTERS} independent units for a cluster bootstrap",
                                    estimate=float(v.mean()) if v.size else math.nan, extra=extra)
    bs = cluster_bootstrap(v, clusters_arr, confidence_level=1 - 2 * a, n_resamples=n_resamples, rng=rng, method=method)
    p_above = bs.p_greater(upper) if math.isfinite(upper) else 1.0  # H0: θ <= upper
    p_below = bs.p_less(lower) if math.isfinite(lower) else 1.0  # H0: θ >= lower
    p_detect = min(p_above, p_below)
    p_cert_hi = bs.p_less(upper) if math.isfinite(upper) else 0.0  # H0: θ >= upper
    p_cert_lo = bs.p_greater(lower) if math.isfinite(lower) else 0.0  # H0: θ <= lower
    p_certify = max(p_cert_hi, p_cert_lo)
    ex = {"n_instances": int(v.size), "n_resamples": int(n_resamples), "method": ("cluster bootstrap (BCa)" if bs.method == "bca" else
                                                                             "cluster bootstrap (expanded percentile)")}
    ex.update(extra or {})
    return _decide(name=name, estimate=bs.estimate, ci_low=bs.ci_low, ci_high=bs.ci_high, lower=lower, upper=upper,
                   threshold=threshold, n=bs.n_clusters, unit=unit, mode=mode, alpha=a,
                   p_detect=p_detect, p_certify=p_certify, extra=ex)


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
    Certify: H0: rate >= threshold (pass when the upper bound is below it).
    """
    a = _check_alpha(alpha)
    if n == 0:
        return inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=0, mode=mode, alpha=a,
                                    unit=unit, why="no observations", extra=extra)
    _check_counts(k, n)
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"`threshold` must lie in [0, 1] for a rate; got {threshold!r}")
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
) -> Verdict:
    """A verdict when the data cannot decide (too few units): detect passes, certify fails."""
    lower, upper = _bounds(threshold, sides)
    passed = mode == "detect"
    what = "no violation can be shown" if passed else "compliance cannot be certified"
    reason = (f"{name}: {why} (n = {n} {unit}), so {what} at α = {alpha:g} ({mode} mode); "
              f"threshold {_region(lower, upper)}.")
    return Verdict(name=name, estimate=estimate, ci_low=math.nan, ci_high=math.nan, threshold=float(threshold),
                   n=int(n), p_value=1.0, passed=passed, mode=mode, reason=reason, alpha=alpha, lower=lower,
                   upper=upper, unit=unit, extra=dict(extra or {}))
