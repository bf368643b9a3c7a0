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


__all__ = ["abs_mean_difference", "paired_abs_mean_verdict"]
