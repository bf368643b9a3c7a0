"""Paired comparisons of a candidate against a baseline on the same units (``--baseline``).

DESIGN.md section 5: DPB and MEG are compared on the gate statistic itself,
Δ = |mean(candidate)| − |mean(baseline)| over the same (group, order) instances, with a
cluster bootstrap over groups (both arms resampled together, so the pairing is kept); binary
outcomes use the exact McNemar test on discordant units
(:func:`~pytest_posbias.stats.paired_change_verdict`).

Comparing mean |x_i| instead would measure the per-instance spread, not the bias: an
unbiased but noisier candidate would fail and a biased but steadier one would pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from .errors import ConfigError
from .stats import (
    MIN_CLUSTERS,
    BootstrapResult,
    Verdict,
    _check_alpha,
    _decide,
    inconclusive_verdict,
)


def abs_mean_difference(cand: ArrayLike, base: ArrayLike) -> float:
    """Δ = |mean(cand)| − |mean(base)| (positive: the candidate's statistic is further from 0)."""
    c = np.asarray(cand, dtype=float)
    b = np.asarray(base, dtype=float)
    return float(abs(c.mean()) - abs(b.mean()))


def paired_abs_mean_verdict(
    cand: ArrayLike,
    base: ArrayLike,
    clusters: ArrayLike,
    *,
    name: str,
    margin: float,
    mode: str = "detect",
    alpha: float = 0.05,
    unit: str = "groups",
    n_resamples: int = 9999,
    rng: np.random.Generator,
    extra: Mapping[str, Any] | None = None,
) -> Verdict:
    """Non-inferiority of a two-sided statistic: compliant when Δ = |c̄| − |b̄| <= ``margin``.

    c̄, b̄ are instance means (Σ_g S_g / Σ_g n_g over the clusters g); the CI is the expanded
    percentile cluster bootstrap (Hesterberg 2015 §3.6, as :func:`~.stats.cluster_bootstrap`)
    of Δ with whole clusters resampled in both arms at once. Detect fails when the whole
    (1 − 2α) CI lies above the margin; certify passes when it lies wholly below it.
    """
    a = _check_alpha(alpha)
    c = np.asarray(cand, dtype=float)
    b = np.asarray(base, dtype=float)
    g_ids = np.asarray(clusters)
    if c.shape != b.shape or c.shape != g_ids.shape or c.ndim != 1:
        raise ConfigError(f"`cand`, `base` and `clusters` must be 1-D arrays of one length; got {c.shape}, {b.shape}, "
                          f"{g_ids.shape}")
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(b))):
        raise ConfigError("`cand` and `base` must be finite; found NaN or inf")
    if not math.isfinite(margin):
        raise ConfigError(f"`margin` must be a finite number; got {margin!r}")
    n_clusters = int(np.unique(g_ids).size) if g_ids.size else 0
    ex: dict[str, Any] = {"cand_mean": float(c.mean()) if c.size else None,
                          "base_mean": float(b.mean()) if b.size else None, "n_instances": int(c.size),
                          "statistic": "|mean candidate| - |mean baseline|",
                          "method": "paired cluster bootstrap (expanded percentile)"}
    ex.update(extra or {})
    if n_clusters < MIN_CLUSTERS:
        return inconclusive_verdict(name=name, threshold=margin, sides="upper", n=n_clusters, mode=mode, alpha=a,
                                    unit=unit, why=f"fewer than {MIN_CLUSTERS} groups with both candidate and baseline",
                                    estimate=abs_mean_difference(c, b) if c.size else math.nan, extra=ex)
    _, inv = np.unique(g_ids, return_inverse=True)
    sc = np.bincount(inv, weights=c)
    sb = np.bincount(inv, weights=b)
    cnt = np.bincount(inv).astype(float)

    def stat(sc_: NDArray[np.float64], sb_: NDArray[np.float64], n_: NDArray[np.float64], axis: int = -1
             ) -> NDArray[np.float64]:
        tot = n_.sum(axis=axis)
        out: NDArray[np.float64] = np.abs(sc_.sum(axis=axis) / tot) - np.abs(sb_.sum(axis=axis) / tot)
        return out

    estimate = abs_mean_difference(c, b)
    g = n_clusters
    tail = float(_st.norm.cdf(-math.sqrt(g / (g - 1)) * _st.t.ppf(1 - a, g - 1)))
    res = _st.bootstrap((sc, sb, cnt), stat, paired=True, vectorized=True, n_resamples=int(n_resamples),
                        confidence_level=1 - 2 * tail, method="percentile", rng=rng)
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):  # a degenerate distribution (all resamples equal)
        lo = hi = estimate
    bs = BootstrapResult(estimate, lo, hi, 1 - 2 * a, int(c.size), g, dist, expanded=True)
    p_detect = bs.p_greater(margin)  # H0: Δ <= margin
    p_certify = bs.p_less(margin)  # H0: Δ >= margin
    return _decide(name=name, estimate=estimate, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(margin),
                   threshold=margin, n=g, unit=unit, mode=mode, alpha=a, p_detect=p_detect, p_certify=p_certify,
                   extra={"n_resamples": int(n_resamples), **ex})


PERMUTATIONS = 20_000


def _cluster_sums(d: NDArray[np.float64], clusters: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    _, inv = np.unique(np.asarray(clusters), return_inverse=True)
    return np.bincount(inv, weights=d).astype(float), np.bincount(inv).astype(float)


def sign_flip_p(d: ArrayLike, clusters: ArrayLike, delta0: float, *, alternative: str, n_resamples: int = PERMUTATIONS,
                seed: int = 0) -> float:
    """Paired sign-flip permutation p-value of H0: mean d = δ0 against ``alternative`` ('greater':
    mean > δ0, 'less': mean < δ0). Under H0 the cluster sums S_g = Σ_{i∈g}(d_i − δ0) are taken as
    symmetric about 0, so their signs are exchangeable; the statistic is Σ_g S_g / N
    (``scipy.stats.permutation_test``, one sample, ``permutation_type='samples'``: sign flips,
    exact when 2^G <= ``n_resamples``). The seed is fixed per call, so p is a deterministic function
    of δ0 (needed to invert the test into a CI)."""
    x = np.asarray(d, dtype=float)
    sums, counts = _cluster_sums(x - delta0, clusters)
    n = counts.sum()
    res = _st.permutation_test((sums,), lambda a, axis=-1: a.sum(axis=axis) / n, permutation_type="samples",
                               n_resamples=int(n_resamples), alternative=alternative, vectorized=True,
                               rng=np.random.default_rng(seed))
    return float(res.pvalue)


def _invert(d: NDArray[np.float64], clusters: ArrayLike, alpha: float, *, side: str, n_resamples: int, seed: int) -> float:
    """The one-sided (1 − α) bound by bisection: the lower bound is the smallest δ0 whose 'greater'
    test no longer rejects at α; the upper bound the largest δ0 whose 'less' test does not."""
    lo, hi = float(d.min()) - 1e-9, float(d.max()) + 1e-9
    alt = "greater" if side == "lower" else "less"
    for _ in range(18):  # the bracket shrinks 2^18-fold: far below any reported digit
        mid = (lo + hi) / 2
        rejects = sign_flip_p(d, clusters, mid, alternative=alt, n_resamples=n_resamples, seed=seed) <= alpha
        if side == "lower":
            lo, hi = (mid, hi) if rejects else (lo, mid)
        else:
            lo, hi = (lo, mid) if rejects else (mid, hi)
    return (lo + hi) / 2


def paired_permutation_verdict(
    d: ArrayLike,
    clusters: ArrayLike,
    *,
    name: str,
    threshold: float,
    sides: str = "upper",
    mode: str = "detect",
    alpha: float = 0.05,
    unit: str = "groups",
    n_resamples: int = PERMUTATIONS,
    seed: int = 0,
    extra: Mapping[str, Any] | None = None,
) -> Verdict:
    """Gate on the mean of paired differences d_i with the sign-flip permutation test
    (:func:`sign_flip_p`, 20,000 seeded sign flips by default) instead of the bootstrap:
    ``sides='upper'`` compliant when mean d <= threshold (non-inferiority), ``'both'`` when
    |mean d| <= threshold (TOST equivalence). The (1 − 2α) CI inverts the two one-sided tests,
    so the interval rule and p < α agree."""
    from .stats import _bounds

    a = _check_alpha(alpha)
    x = np.asarray(d, dtype=float)
    g = np.asarray(clusters)
    if x.ndim != 1 or x.shape != g.shape:
        raise ConfigError(f"`d` and `clusters` must be 1-D arrays of one length; got {x.shape} and {g.shape}")
    lower, upper = _bounds(threshold, sides)
    n_clusters = int(np.unique(g).size) if g.size else 0
    ex = {"method": f"paired sign-flip permutation test ({n_resamples} seeded flips, clusters as units)",
          "n_instances": int(x.size), **(extra or {})}
    if n_clusters < MIN_CLUSTERS:
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=n_clusters, mode=mode, alpha=a,
                                    unit=unit, why=f"fewer than {MIN_CLUSTERS} independent units for a permutation test",
                                    estimate=float(x.mean()) if x.size else math.nan, extra=ex)
    if np.ptp(x) == 0:
        lo_ci = hi_ci = float(x[0])
    else:
        lo_ci = _invert(x, g, a, side="lower", n_resamples=n_resamples, seed=seed)
        hi_ci = _invert(x, g, a, side="upper", n_resamples=n_resamples, seed=seed)

    def p(delta0: float, alt: str) -> float:
        if np.ptp(x) == 0:  # constant differences: the test is degenerate, decide on the value itself
            return 0.0 if (x[0] > delta0 if alt == "greater" else x[0] < delta0) else 1.0
        return sign_flip_p(x, g, delta0, alternative=alt, n_resamples=n_resamples, seed=seed)

    p_up = p(upper, "greater") if math.isfinite(upper) else 1.0  # H0: mean <= upper
    p_lo = p(lower, "less") if math.isfinite(lower) else 1.0  # H0: mean >= lower
    p_cert = max(p(upper, "less") if math.isfinite(upper) else 0.0, p(lower, "greater") if math.isfinite(lower) else 0.0)
    return _decide(name=name, estimate=float(x.mean()), ci_low=lo_ci, ci_high=hi_ci, lower=lower, upper=upper,
                   threshold=threshold, n=n_clusters, unit=unit, mode=mode, alpha=a, p_detect=min(p_up, p_lo),
                   p_certify=p_cert, extra=ex)


__all__ = ["PERMUTATIONS", "abs_mean_difference", "paired_abs_mean_verdict", "paired_permutation_verdict", "sign_flip_p"]
