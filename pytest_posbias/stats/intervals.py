"""Statistics core, intervals and tests: argument checks, binomial (Clopper–Pearson, exact test),
exact McNemar, Benjamini–Hochberg and the seeded cluster bootstrap (expanded percentile, BCa)
(docs/design.md section 5). Re-exported by :mod:`pytest_posbias.stats`."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from ..config import check_alpha
from ..errors import ConfigError


def _check_alpha(alpha: float) -> float:
    return check_alpha(alpha, "`alpha`")


def _check_confidence(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < float(level) < 1.0:
        raise ConfigError(f"`confidence_level` must be a float in (0, 1); got {level!r}")
    return float(level)


def _check_count(name: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ConfigError(f"`{name}` must be a non-negative integer; got {v!r}")


def _check_counts(k: int, n: int) -> None:
    _check_count("k", k)
    _check_count("n", n)
    if n == 0:
        raise ConfigError("`n` must be >= 1 (no trials to estimate a rate from)")
    if k > n:
        raise ConfigError(f"`k` must be <= `n`; got k = {k}, n = {n}")


def _check_alternative(alternative: str) -> None:
    if alternative not in ("greater", "less", "two-sided"):
        raise ConfigError(f"`alternative` must be 'greater', 'less' or 'two-sided'; got {alternative!r}")


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
    _check_alternative(alternative)
    return _binomtest_p(int(k), int(n), float(p0), alternative)


def mcnemar_exact(b: int, c: int, *, alternative: str = "two-sided") -> float:
    """Exact McNemar test on the discordant counts of a paired 2×2 table.

    b = pairs changed only under arm 1, c = only under arm 2; p = binomial test of
    b out of b + c at 1/2. ``less`` tests whether arm 1 changes fewer (b < c).
    Returns 1.0 when there are no discordant pairs.
    """
    _check_count("b", b)
    _check_count("c", c)
    _check_alternative(alternative)
    return _binomtest_p(int(b), int(b + c), 0.5, alternative) if b + c else 1.0


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


def _expanded_p(p: float, g: int) -> float:
    """A bootstrap tail share ``p`` over ``g`` clusters through the expanded percentile interval's
    normal-to-t correction (:func:`cluster_bootstrap`): T_{g−1}(Φ⁻¹(p) / sqrt(g/(g − 1))), ``p`` below 3 clusters."""
    if g < 3:
        return p
    return float(_st.t.cdf(float(_st.norm.ppf(min(max(p, 1e-300), 1.0))) / math.sqrt(g / (g - 1)), g - 1))


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
        return _expanded_p(p, self.n_clusters) if self.expanded else p

    def p_greater(self, value: float) -> float:
        """Bootstrap p-value of H0: θ <= value (share of θ* <= value, +1 corrected)."""
        d = self.distribution
        return self._adjust(float((np.count_nonzero(d <= value) + 1) / (d.size + 1)), upper_tail=False)

    def p_less(self, value: float) -> float:
        """Bootstrap p-value of H0: θ >= value (share of θ* >= value, +1 corrected)."""
        d = self.distribution
        return self._adjust(float((np.count_nonzero(d >= value) + 1) / (d.size + 1)), upper_tail=True)


MIN_CLUSTERS = 5  # below this a cluster bootstrap has too few distinct resamples to trust


def cluster_bootstrap(values: ArrayLike, clusters: ArrayLike | None = None, *, confidence_level: float = 0.90,
                      n_resamples: int = 9999, rng: np.random.Generator, method: str = "percentile") -> BootstrapResult:
    """Seeded cluster bootstrap CI for the mean of per-instance values.

    Whole clusters are resampled with replacement (``scipy.stats.bootstrap``, paired) and the
    statistic is the instance mean of the resample, Σ_g S_g / Σ_g n_g with S_g, n_g the sum and size
    of cluster g. Without ``clusters`` every instance is its own cluster. At least two clusters.

    ``method='percentile'``: the expanded percentile interval (Hesterberg 2015, "What teachers
    should know about the bootstrap", §3.6): the percentiles are taken at
    α' = Φ(−sqrt(G/(G − 1)) · t_{1−α, G−1}) instead of α (from G = 3 clusters), which matches the t
    interval for normal data and keeps the coverage of small-G intervals. The p-values use the same
    correction. ``method='bca'``: the bias-corrected and accelerated interval (Efron 1987;
    acceleration from the leave-one-cluster-out jackknife), for skewed unit values where the
    percentile interval is too short on the long-tail side.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ConfigError(f"`values` must be a non-empty 1-D array; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ConfigError("`values` must be finite; found NaN or inf")
    if not isinstance(rng, np.random.Generator):
        raise ConfigError("`rng` must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)); got "
                          f"{type(rng).__name__}")
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
    if np.allclose(sums / counts, estimate, rtol=0, atol=1e-15):
        dist = np.full(int(n_resamples), estimate)
        return BootstrapResult(estimate, estimate, estimate, level, v.size, sums.size, dist, expanded=False)
    g = int(sums.size)
    bca = method == "bca"
    expanded = not bca and g >= 3
    tail = (1 - level) / 2
    if expanded:
        tail = float(_st.norm.cdf(-math.sqrt(g / (g - 1)) * _st.t.ppf(1 - tail, g - 1)))
    res = _st.bootstrap((sums, counts), lambda s, n, axis=-1: s.sum(axis=axis) / n.sum(axis=axis), paired=True,
                        vectorized=True, n_resamples=int(n_resamples), confidence_level=level if bca else 1 - 2 * tail,
                        method="BCa" if bca else "percentile", rng=rng)
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not bca:
        return BootstrapResult(estimate, lo, hi, level, int(v.size), g, dist, expanded=expanded)
    # z0 (as scipy computes it) and the acceleration from the leave-one-cluster-out jackknife, for the p-values
    share = float((np.count_nonzero(dist < estimate) + np.count_nonzero(dist <= estimate)) / (2 * dist.size))
    z0 = float(_st.norm.ppf(min(max(share, 1e-12), 1 - 1e-12)))
    loo = (sums.sum() - sums) / (counts.sum() - counts)
    dev = loo.mean() - loo
    den = 6.0 * float(np.sum(dev**2)) ** 1.5
    accel = float(np.sum(dev**3)) / den if den > 0 else 0.0
    return BootstrapResult(estimate, lo, hi, level, int(v.size), g, dist, method="bca", z0=z0, accel=accel)
