"""Paired comparisons of a candidate against a baseline on the same units (``--baseline``).

docs/design.md section 5: DPB and MEG are compared on the gate statistic itself,
Δ = |μ_cand| − |μ_base| over the same (group, order) instances. Δ has a kink where either mean
is 0, so a bootstrap of |ĉ| − |b̂| does not hold its size there; :func:`paired_abs_mean_verdict`
uses intersection–union bounds of the paired linear combinations ±μ_cand ∓ μ_base instead.
Binary outcomes use :func:`~pytest_posbias.stats.paired_change_verdict` (exact McNemar at margin
0, an exact unconditional non-inferiority test otherwise, :func:`paired_binary_pvalues`).

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


def _cluster_se(x: NDArray[np.float64], inv: NDArray[np.intp], g: int) -> float:
    """CR1 cluster-robust standard error of the instance mean of ``x``:
    sqrt(G/(G − 1) · Σ_g (Σ_{i∈g} (x_i − x̄))²) / N (as :func:`~.stats.tost_paired`)."""
    resid = np.bincount(inv, weights=x - x.mean(), minlength=g)
    return math.sqrt(g / (g - 1) * float(np.sum(resid**2))) / x.size


def _ratio(num: float, se: float) -> float:
    """num / se, with se = 0 read as an exact bound: +inf when num > 0, −inf otherwise."""
    if se > 0:
        return num / se
    return math.inf if num > 0 else -math.inf


def abs_bias_bounds(c_mean: float, b_mean: float, se_diff: float, se_sum: float, q: float) -> tuple[float, float]:
    """Lower and upper confidence bounds of Δ = |μc| − |μb| by intersection–union over the four
    linear combinations s·μc − s′·μb (s, s′ = ±1).

    |μc| − |μb| = max_s min_s′ (s·μc − s′·μb), so with one-sided bounds of the linear combinations
    (estimate ∓ q·SE, SE = ``se_diff`` for c − b and ``se_sum`` for c + b):

    * L = max_s min_s′ (s·ĉ − s′·b̂ − q·SE(s, s′)),
    * U = max_s min_s′ (s·ĉ − s′·b̂ + q·SE(s, s′)).

    U < Δ needs a miss of (sign μc, +) or (sign μc, −); L > Δ a miss of (+, sign μb) or
    (−, sign μb): two one-sided bounds each, so q = t_{1−α/2} (Bonferroni over the pair) makes
    each bound a (1 − α) bound for every (μc, μb), also at μc = 0 or μb = 0 where |·| has its kink.
    """
    se = {(1, 1): se_diff, (1, -1): se_sum, (-1, 1): se_sum, (-1, -1): se_diff}
    lo = max(min(s * c_mean - t * b_mean - q * se[s, t] for t in (1, -1)) for s in (1, -1))
    hi = max(min(s * c_mean - t * b_mean + q * se[s, t] for t in (1, -1)) for s in (1, -1))
    return float(lo), float(hi)


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
    extra: Mapping[str, Any] | None = None,
) -> Verdict:
    """Non-inferiority of a two-sided statistic: compliant when Δ = |μc| − |μb| <= ``margin``.

    ĉ, b̂ are instance means (Σ_g S_g / Σ_g n_g over the clusters g) of the same instances. Δ is
    not smooth at μc = 0 or μb = 0, where a bootstrap of |ĉ| − |b̂| is not a valid test; the bounds
    are intersection–union bounds instead (:func:`abs_bias_bounds`): one-sided t bounds of the four
    paired linear combinations ±μc ∓ μb, with CR1 cluster-robust standard errors of c − b and
    c + b over the G clusters, t_{1−α/2, G−1} (Bonferroni over the two combinations that can miss).
    The CI is [L, U], each a one-sided (1 − α) bound. Detect fails when L > ``margin``; certify
    passes when U < ``margin``. The p-values invert the same bounds:
    p_detect = 2·t_sf(max_s min_s′ (s·ĉ − s′·b̂ − margin)/SE(s, s′)) and
    p_certify = 2·t_sf(min_s max_s′ (margin − s·ĉ + s′·b̂)/SE(s, s′)), capped at 1, so p < α
    exactly when the CI rule decides. Fewer than ``MIN_CLUSTERS`` clusters, or no variation of
    either arm across clusters, is inconclusive.
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
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin):
        raise ConfigError(f"`margin` must be a finite number; got {margin!r}")
    n_clusters = int(np.unique(g_ids).size) if g_ids.size else 0
    ex: dict[str, Any] = {"cand_mean": float(c.mean()) if c.size else None,
                          "base_mean": float(b.mean()) if b.size else None, "n_instances": int(c.size),
                          "statistic": "|mean candidate| - |mean baseline|",
                          "method": "intersection-union t bounds of ±cand ∓ base (cluster-robust SE, Bonferroni)"}
    ex.update(extra or {})
    estimate = abs_mean_difference(c, b) if c.size else math.nan
    if n_clusters < MIN_CLUSTERS:
        return inconclusive_verdict(name=name, threshold=margin, sides="upper", n=n_clusters, mode=mode, alpha=a,
                                    unit=unit, why=f"fewer than {MIN_CLUSTERS} groups with both candidate and baseline",
                                    estimate=estimate, extra=ex)
    _, inv = np.unique(g_ids, return_inverse=True)
    g = n_clusters
    se_diff, se_sum = _cluster_se(c - b, inv, g), _cluster_se(c + b, inv, g)
    if se_diff == 0 and se_sum == 0:
        return inconclusive_verdict(name=name, threshold=margin, sides="upper", n=g, mode=mode, alpha=a, unit=unit,
                                    why="neither the candidate's nor the baseline's values vary across groups",
                                    estimate=estimate, extra=ex)
    cm, bm = float(c.mean()), float(b.mean())
    df = g - 1
    q = float(_st.t.ppf(1 - a / 2, df))
    lo, hi = abs_bias_bounds(cm, bm, se_diff, se_sum, q)
    se = {(1, 1): se_diff, (1, -1): se_sum, (-1, 1): se_sum, (-1, -1): se_diff}
    q_detect = max(min(_ratio(s * cm - t * bm - margin, se[s, t]) for t in (1, -1)) for s in (1, -1))
    q_certify = min(max(_ratio(margin - s * cm + t * bm, se[s, t]) for t in (1, -1)) for s in (1, -1))
    p_detect = min(1.0, 2 * float(_st.t.sf(q_detect, df)))
    p_certify = min(1.0, 2 * float(_st.t.sf(q_certify, df)))
    ex.update({"se_cand_minus_base": se_diff, "se_cand_plus_base": se_sum, "df": df})
    return _decide(name=name, estimate=estimate, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(margin),
                   threshold=margin, n=g, unit=unit, mode=mode, alpha=a, p_detect=p_detect, p_certify=p_certify,
                   extra=ex)


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
    so the interval rule and p < α agree.

    Sign flips are exchangeable only when d is symmetric about the tested value: at threshold 0
    that is the sharp null of two exchangeable arms (candidate and baseline interchangeable per
    cluster), where the test is exact. At a non-zero threshold nothing makes d − threshold
    symmetric, and on skewed or rare-event differences (a rare ±1 component, e.g. the stressor
    amplification or a paired 0/1 outcome) the test rejects at the margin 7–11% of the time at 8,
    16 and 60 clusters, studentized or not; so a non-zero threshold is a refusal to decide
    (inconclusive and not passed in either mode: the run is NOT MEASURED, never a detect-mode pass),
    and the default paired test decides such gates."""
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
    if threshold != 0:
        return inconclusive_verdict(name=name, threshold=threshold, sides=sides, n=n_clusters, mode=mode, alpha=a,
                                    unit=unit, why=(f"the sign-flip permutation test does not hold its size at a non-zero "
                                                    f"margin ({threshold:g}) for skewed or rare-event differences; "
                                                    f"the default paired test (paired_test = \"bootstrap\") decides it"),
                                    estimate=float(x.mean()) if x.size else math.nan, extra=ex, fail_closed=True)
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


# --------------------------------------------------------------------------- paired binary outcomes

NUISANCE_GRID = 400  # points of the nuisance parameter p01 for the supremum (arcsine-spaced, see _nuisance)
EXACT_MAX_N = 5000  # above this many pairs the score test is referred to the normal distribution
TAIL_EPS = 1e-15  # binomial mass of N01 left out on each side per nuisance value (added back to the p-value)


def tango_score(n10: ArrayLike, n01: ArrayLike, n: int, delta0: float) -> NDArray[np.float64]:
    """Tango's score statistic for H0: p10 − p01 = δ0 on n paired binary outcomes (Tango 1998,
    Statistics in Medicine 17:891–908, eq. 3): Z = (n10 − n01 − n·δ0) / sqrt(n·(2·p̃01 + δ0·(1 − δ0))),
    with p̃01 the restricted maximum-likelihood estimate of p01 under the null,
    p̃01 = (sqrt(B² − 8n·C) − B) / (4n), B = −n10 − n01 + (2n − n10 + n01)·δ0, C = −n01·δ0·(1 − δ0).
    n10 counts pairs with (a = 1, b = 0), n01 pairs with (a = 0, b = 1). Vectorised over n10, n01."""
    b = np.asarray(n10, dtype=float)
    c = np.asarray(n01, dtype=float)
    d = float(delta0)
    B = -b - c + (2 * n - b + c) * d
    C = -c * d * (1 - d)
    p01 = (np.sqrt(np.maximum(B * B - 8 * n * C, 0.0)) - B) / (4 * n)
    var = n * (2 * p01 + d * (1 - d))
    num = b - c - n * d
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, num / np.sqrt(np.where(var > 0, var, 1.0)), np.sign(num) * np.inf)
    out: NDArray[np.float64] = np.nan_to_num(z, nan=0.0, posinf=np.inf, neginf=-np.inf)
    return out


def _z(n10: ArrayLike, n01: ArrayLike, n: int, delta0: float) -> NDArray[np.float64]:
    """Tango's Z rounded to 9 decimals, so outcomes of equal Z in exact arithmetic tie."""
    out: NDArray[np.float64] = np.round(tango_score(n10, n01, n, delta0), 9)
    return out


def _outcomes(n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every (n10, n01) with n10 + n01 <= n."""
    x, y = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = x + y <= n
    return x[keep], y[keep]


def _log_pmf(x: NDArray[np.int64], y: NDArray[np.int64], n: int, p10: NDArray[np.float64],
             p01: NDArray[np.float64]) -> NDArray[np.float64]:
    """log multinomial probabilities of the outcomes (rows: nuisance values, columns: outcomes)."""
    from scipy.special import gammaln, xlogy

    rest = n - x - y
    coef = gammaln(n + 1) - gammaln(x + 1) - gammaln(y + 1) - gammaln(rest + 1)
    pc = np.clip(1 - p10 - p01, 0.0, 1.0)
    out: NDArray[np.float64] = (coef[None, :] + xlogy(x[None, :], p10[:, None]) + xlogy(y[None, :], p01[:, None])
                                + xlogy(rest[None, :], pc[:, None]))
    return out


def _nuisance(delta0: float, points: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(p10, p01) on the null boundary p10 − p01 = δ0: ``points`` values of p01 in
    [lo, hi] = [max(0, −δ0), (1 − δ0)/2], both ends included, equally spaced in the arcsine scale
    θ = arcsin sqrt((p01 − lo)/(hi − lo)) ∈ [0, π/2]: the scale in which a binomial proportion's
    standard error is constant, so the grid is as fine (relative to the tail probability's
    variation) near the ends, where a cell probability vanishes (p01 or p10 at lo, the
    concordant cell at hi), as in the middle."""
    lo, hi = max(0.0, -delta0), (1 - delta0) / 2
    p01 = lo + (hi - lo) * np.sin(np.linspace(0.0, math.pi / 2, points)) ** 2
    p01[0], p01[-1] = lo, hi
    return p01 + delta0, p01


def _check_test(delta0: float, alternative: str) -> None:
    if alternative not in ("less", "greater"):
        raise ConfigError(f"`alternative` must be 'less' or 'greater'; got {alternative!r}")
    if not -1.0 < float(delta0) < 1.0:
        raise ConfigError(f"`delta0` must lie in (-1, 1); got {delta0!r}")


def paired_binary_pvalues(n: int, delta0: float, *, alternative: str,
                          grid: int = NUISANCE_GRID) -> NDArray[np.float64]:
    """Exact unconditional p-values of H0 on the difference δ = p10 − p01 of paired proportions for
    every outcome (n10, n01) of n pairs: an (n + 1, n + 1) array (nan where n10 + n01 > n).

    ``alternative='less'`` tests H0: δ >= δ0 (non-inferiority: reject for small Z),
    ``'greater'`` H0: δ <= δ0. The outcomes are ordered by Tango's score Z (:func:`tango_score`) and
    p = sup over the nuisance p01 on the boundary δ = δ0 of P(Z ≤ z_obs) (resp. P(Z ≥ z_obs)) under
    the trinomial (n10, n01, rest) ~ Multinomial(n; p01 + δ0, p01, 1 − 2·p01 − δ0), the supremum
    taken over ``grid`` values of p01 in [max(0, −δ0), (1 − δ0)/2], both ends included, equally
    spaced in the arcsine scale (:func:`_nuisance`) (Chan 1998, Statistics in Medicine
    17:1403–1413: exact unconditional tests maximised over the nuisance parameter). The size at
    the margin is at most α for every p01 on the grid, including one-directional discordance
    (p01 = 0). This enumerates all (n + 1)(n + 2)/2 outcomes at every grid value (a table for
    benchmarks and tests); one outcome's p-value is :func:`paired_binary_p`, which agrees with it."""
    _check_test(delta0, alternative)
    x, y = _outcomes(n)
    z = _z(x, y, n, delta0)
    sign = 1.0 if alternative == "less" else -1.0
    levels, inv = np.unique(sign * z, return_inverse=True)  # ascending: the first level is the most extreme
    order = np.argsort(inv, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inv[order]) != 0])
    p10, p01 = _nuisance(float(delta0), grid)
    tail = np.zeros(levels.size)
    for chunk in range(0, grid, 50):
        prob = np.exp(_log_pmf(x, y, n, p10[chunk:chunk + 50], p01[chunk:chunk + 50]))
        per_level = np.add.reduceat(prob[:, order], starts, axis=1)
        tail = np.maximum(tail, np.cumsum(per_level, axis=1).max(axis=0))
    out = np.full((n + 1, n + 1), np.nan)
    out[x, y] = np.minimum(tail[inv], 1.0)
    return out


def _tail_bounds(n: int, delta0: float, z_obs: float, alternative: str) -> NDArray[np.int64]:
    """Per n01 = y (0..n), the tail {n10 : Z(n10, y) ≤ z_obs} ('less') or {Z ≥ z_obs} ('greater')
    as one end of a run in n10 ∈ [0, n − y]. Tango's Z is non-decreasing in n10 and non-increasing
    in n01 (Barnard's convexity; checked over every outcome in tests/test_paired_rules.py), so the
    'less' tail of a row is {n10 <= k(y)} (k = −1: empty) and the 'greater' tail {n10 >= k(y)}
    (k = n − y + 1: empty); k found by a bisection over all rows at once (log2 n steps)."""
    y = np.arange(n + 1)
    if alternative == "less":  # largest n10 in [-1, n - y] with Z <= z_obs (-1 stands for none)
        lo, hi = np.full(n + 1, -1), n - y
        while np.any(hi > lo):
            mid = (lo + hi + 1) // 2
            act = hi > lo
            ok = _z(np.maximum(mid, 0), y, n, delta0) <= z_obs
            lo, hi = np.where(act & ok, mid, lo), np.where(act & ~ok, mid - 1, hi)
        return lo
    lo, hi = np.zeros(n + 1, dtype=np.int64), n - y + 1  # smallest n10 in [0, n - y + 1] with Z >= z_obs
    while np.any(hi > lo):
        mid = (lo + hi) // 2
        act = hi > lo
        ok = _z(np.minimum(mid, n - y), y, n, delta0) >= z_obs
        lo, hi = np.where(act & ~ok, mid + 1, lo), np.where(act & ok, mid, hi)
    return lo


def _staircase_tail(n: int, delta0: float, k: NDArray[np.int64], alternative: str,
                    p01: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(tail) at each nuisance value p01 (p10 = p01 + δ0), the tail given per row by
    :func:`_tail_bounds`: Σ_y P(N01 = y)·P(N10 in the row's run | N01 = y), with N01 ~ Bin(n, p01)
    and, given N01 = y, N10 ~ Bin(n − y, p10/(1 − p01)) (the trinomial factorised), so the cost is
    O(n) per nuisance value, not O(n²). Rows with P(N01 = y) below ``TAIL_EPS`` on either side
    (binomial quantiles) are left out and their mass, at most 2·``TAIL_EPS``, is added back."""
    from scipy.special import bdtr, bdtrc, gammaln, xlog1py, xlogy

    p01 = np.asarray(p01, dtype=float)
    rows_lo = _st.binom.ppf(TAIL_EPS, n, p01).astype(np.int64)
    rows_hi = _st.binom.isf(TAIL_EPS, n, p01).astype(np.int64)
    rows_lo = np.clip(np.nan_to_num(rows_lo, nan=0) - 1, 0, n)
    rows_hi = np.clip(np.nan_to_num(rows_hi, nan=n) + 1, 0, n)
    width = int(np.max(rows_hi - rows_lo)) + 1
    y = np.minimum(rows_lo[:, None] + np.arange(width)[None, :], n)
    inside = (rows_lo[:, None] + np.arange(width)[None, :]) <= rows_hi[:, None]
    q = p01[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.clip(np.where(q < 1.0, (q + delta0) / (1.0 - q), 1.0), 0.0, 1.0)
    log_py = gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1) + xlogy(y, q) + xlog1py(n - y, -q)
    m = n - y
    kk = k[y]
    if alternative == "less":  # P(N10 <= k | y)
        cond = np.where(kk < 0, 0.0, np.where(kk >= m, 1.0, bdtr(np.clip(kk, 0, None), m, theta)))
    else:  # P(N10 >= k | y)
        cond = np.where(kk <= 0, 1.0, np.where(kk > m, 0.0, bdtrc(np.clip(kk - 1, 0, None), m, theta)))
    out: NDArray[np.float64] = np.sum(np.where(inside, np.exp(log_py) * cond, 0.0), axis=1) + 2 * TAIL_EPS
    return out


def paired_binary_p(n10: int, n01: int, n: int, delta0: float, *, alternative: str,
                    grid: int = NUISANCE_GRID) -> float:
    """The p-value of :func:`paired_binary_pvalues` for one observed outcome (n10, n01), computed
    without enumerating the outcomes: the tail {Z ≤ z_obs} is a staircase over n01
    (:func:`_tail_bounds`) and its probability a sum of binomial terms (:func:`_staircase_tail`),
    O(n) per nuisance value; exact unconditional up to ``EXACT_MAX_N`` pairs
    (``benchmarks/paired_exact.py`` times it). Beyond, Tango's score test referred to the normal
    distribution with a continuity correction: Z is computed with n10 moved half a count towards
    the null (n10 + ½ for ``'less'``, n10 − ½ for ``'greater'``); at small margins (δ0 = 0.01–0.02,
    200–400 pairs, small p01) that form's exact size reaches 0.055–0.056 (docs/design.md
    section 5), which is why the exact test covers every size the suites and parity produce."""
    _check_test(delta0, alternative)
    if n > EXACT_MAX_N:
        half = 0.5 if alternative == "less" else -0.5
        z_cc = float(tango_score(n10 + half, n01, n, delta0))
        return float(_st.norm.cdf(z_cc) if alternative == "less" else _st.norm.sf(z_cc))
    return _p_at_level(n, float(delta0), float(_z(n10, n01, n, delta0)), alternative, grid)


def paired_binary_critical(n: int, delta0: float, alpha: float, *, alternative: str,
                           grid: int = NUISANCE_GRID) -> float:
    """The rejection region of the exact test at level α as a cut on Tango's Z: the 'less' test
    (:func:`paired_binary_p` < α) rejects exactly when Z ≤ z*, the 'greater' test when Z ≥ z*
    (−inf, resp. inf, when no outcome is rejected). The tails are nested in Z, so p is monotone
    in Z and z* is found by bisection over the distinct Z values of the outcomes (about
    2·log2 n calls of the p-value): a size or power computation over many outcomes then costs one
    comparison per outcome (``benchmarks/parity.py``)."""
    _check_test(delta0, alternative)
    levels = np.unique(_z(*_outcomes(n), n, delta0))
    if alternative == "greater":
        levels = levels[::-1]

    def rejects(i: int) -> bool:
        z = float(levels[i])
        # the p-value of a level: any outcome on it (the tail depends on z only)
        return _p_at_level(n, float(delta0), z, alternative, grid) < alpha

    if not rejects(0):
        return -math.inf if alternative == "less" else math.inf
    lo, hi = 0, levels.size - 1  # rejects(lo) holds; find the last rejected level
    if rejects(hi):
        return float(levels[hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return float(levels[lo])


def _p_at_level(n: int, delta0: float, z: float, alternative: str, grid: int) -> float:
    """The exact unconditional p-value of the tail {Z ≤ z} ('less') or {Z ≥ z} ('greater')."""
    k = _tail_bounds(n, delta0, z, alternative)
    _p10, p01 = _nuisance(delta0, grid)
    return float(min(1.0, _staircase_tail(n, delta0, k, alternative, p01).max()))


def paired_binary_bound(n10: int, n01: int, n: int, alpha: float, *, side: str, anchor: float) -> float:
    """One-sided (1 − α) confidence bound of δ = p10 − p01 by inverting :func:`paired_binary_p`:
    the lower bound is where the 'greater' test stops rejecting H0: δ <= δ0, the upper bound where
    the 'less' test stops rejecting H0: δ >= δ0. Bisection to 1e-4 on a bracket with ``anchor`` (the
    gate's margin) as one end, so the bound lies on the side of the margin that the test at the
    margin decides (on the full nuisance grid; the bisection steps use a quarter of it, which moves
    the displayed bound by less than its 1e-4 resolution in practice)."""
    alt = "greater" if side == "lower" else "less"
    eps = 1e-9
    rejects_at_anchor = paired_binary_p(n10, n01, n, anchor, alternative=alt) < alpha
    if side == "lower":
        lo, hi = (anchor, 1 - eps) if rejects_at_anchor else (-1 + eps, anchor)
    else:
        lo, hi = (-1 + eps, anchor) if rejects_at_anchor else (anchor, 1 - eps)
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        rej = paired_binary_p(n10, n01, n, mid, alternative=alt, grid=NUISANCE_GRID // 4) < alpha
        if side == "lower":
            lo, hi = (mid, hi) if rej else (lo, mid)
        else:
            lo, hi = (lo, mid) if rej else (mid, hi)
    return (lo + hi) / 2


def paired_amplification_verdict(
    cand_share: ArrayLike,
    cand_clean: ArrayLike,
    base_share: ArrayLike,
    base_clean: ArrayLike,
    *,
    name: str,
    margin: float,
    mode: str = "detect",
    alpha: float = 0.05,
    unit: str = "videos",
    extra: Mapping[str, Any] | None = None,
) -> Verdict:
    """Paired stressor comparison: compliant when δ = E[a_cand − a_base] <= ``margin``, with a the
    per-video amplification a = S − F (S: share of the stressed variants that repeat, F: the 0/1
    clean repetition flag).

    d = a_cand − a_base has rare ±1 components (the clean flags) that a small sample often misses,
    which makes a t, bootstrap or sign-flip interval of mean d reject at the margin far more often
    than α. The bound is split by Bonferroni into the two parts, δ = δ_S − δ_F:

    * δ_S = E[S_cand − S_base]: one-sided t bound at α/2 on the per-video differences (n − 1 df);
    * δ_F = P(F_cand = 1) − P(F_base = 1): the exact unconditional bound for paired proportions at
      α/2 (:func:`paired_binary_bound`), which holds for rare and one-directional discordance.

    L = LB_S − UB_F and U = UB_S − LB_F are one-sided (1 − α) bounds of δ; detect fails when
    L > ``margin``, certify passes when U < ``margin``. p-values: the smallest α at which the rule
    decides, min over the split point of 2·max(p_S, p_F) (bisection). Inconclusive below
    ``MIN_CLUSTERS`` videos or when the stressed shares' differences do not vary (a zero standard
    error would make the t bound exact on no evidence).
    """
    a = _check_alpha(alpha)
    arrs = [np.asarray(v, dtype=float) for v in (cand_share, cand_clean, base_share, base_clean)]
    if any(v.ndim != 1 or v.shape != arrs[0].shape for v in arrs):
        raise ConfigError("`cand_share`, `cand_clean`, `base_share` and `base_clean` must be 1-D arrays of one length; "
                          f"got {[v.shape for v in arrs]}")
    if not all(np.all(np.isfinite(v)) for v in arrs):
        raise ConfigError("`cand_share`, `cand_clean`, `base_share` and `base_clean` must be finite; found NaN or inf")
    sc, fc, sb, fb = arrs
    if not all(np.all((v == 0) | (v == 1)) for v in (fc, fb)):
        raise ConfigError("`cand_clean` and `base_clean` must hold 0/1 repetition flags")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not -1.0 < float(margin) < 1.0:
        raise ConfigError(f"`margin` must be a number in (-1, 1); got {margin!r}")
    n = int(sc.size)
    ds = sc - sb
    n10, n01 = int(np.sum((fc == 1) & (fb == 0))), int(np.sum((fc == 0) & (fb == 1)))
    estimate = float(ds.mean() - (n10 - n01) / n) if n else math.nan
    ex: dict[str, Any] = {"n10_clean": n10, "n01_clean": n01, "stressed_share_difference": float(ds.mean()) if n else None,
                          "method": "Bonferroni split: t bound of the stressed-share difference + exact unconditional "
                                    "bound of the clean-flag difference", **(extra or {})}
    if n < MIN_CLUSTERS:
        return inconclusive_verdict(name=name, threshold=margin, sides="upper", n=n, mode=mode, alpha=a, unit=unit,
                                    why=f"fewer than {MIN_CLUSTERS} videos with both candidate and baseline",
                                    estimate=estimate, extra=ex)
    se = float(ds.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return inconclusive_verdict(name=name, threshold=margin, sides="upper", n=n, mode=mode, alpha=a, unit=unit,
                                    why="the stressed repetition shares of candidate and baseline differ by the same "
                                        "amount on every video", estimate=estimate, extra=ex)
    df = n - 1
    mean_s = float(ds.mean())
    q = float(_st.t.ppf(1 - a / 2, df))
    lb_s, ub_s = mean_s - q * se, mean_s + q * se
    # L > margin ⇔ UB_F < LB_S − margin; U < margin ⇔ LB_F > UB_S − margin: anchoring each exact bound
    # at that point makes the CI decide exactly as the exact test there does.
    ub_f = paired_binary_bound(n10, n01, n, a / 2, side="upper", anchor=max(-1 + 1e-6, min(1 - 1e-6, lb_s - margin)))
    lb_f = paired_binary_bound(n10, n01, n, a / 2, side="lower", anchor=max(-1 + 1e-6, min(1 - 1e-6, ub_s - margin)))
    lo, hi = lb_s - ub_f, ub_s - lb_f

    def split_p(detect: bool) -> float:
        # p(δ0) of the binary part is monotone in the split point δ0, p_S the other way: bisect their crossing
        def p_s(x: float) -> float:
            return float(_st.t.sf((mean_s - x) / se, df) if detect else _st.t.cdf((mean_s - x) / se, df))

        def p_f(x: float) -> float:
            x = max(-1 + 1e-6, min(1 - 1e-6, x))
            return paired_binary_p(n10, n01, n, x, alternative="less" if detect else "greater", grid=NUISANCE_GRID // 4)

        lo_x, hi_x = -1.0, 1.0
        for _ in range(20):
            mid = (lo_x + hi_x) / 2
            ps, pf = p_s(margin + mid), p_f(mid)
            if (ps < pf) == detect:
                lo_x = mid
            else:
                hi_x = mid
        mid = (lo_x + hi_x) / 2
        return min(1.0, 2 * max(p_s(margin + mid), p_f(mid)))

    p_detect, p_certify = split_p(True), split_p(False)
    ex.update({"stressed_share_bounds": [lb_s, ub_s], "clean_flag_bounds": [lb_f, ub_f]})
    return _decide(name=name, estimate=estimate, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(margin),
                   threshold=margin, n=n, unit=unit, mode=mode, alpha=a, p_detect=p_detect, p_certify=p_certify, extra=ex)


__all__ = [
    "EXACT_MAX_N",
    "NUISANCE_GRID",
    "PERMUTATIONS",
    "abs_bias_bounds",
    "abs_mean_difference",
    "paired_abs_mean_verdict",
    "paired_amplification_verdict",
    "paired_binary_bound",
    "paired_binary_critical",
    "paired_binary_p",
    "paired_binary_pvalues",
    "paired_permutation_verdict",
    "sign_flip_p",
    "tango_score",
]
