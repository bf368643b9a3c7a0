"""Exact tests for paired binary outcomes: H0: p10 − p01 = δ0 on n pairs (docs/design.md section 5).

Tango's score (:func:`tango_score`) referred to its exact unconditional distribution, maximised
over the nuisance p01 (:func:`paired_binary_p`); :func:`paired_binary_critical` gives a level's
rejection region, :func:`paired_binary_bound` a confidence bound of p10 − p01 by test inversion.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st
from scipy.special import bdtr, bdtrc, gammaln, xlog1py, xlogy

from ..errors import ConfigError

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


def paired_binary_pvalues(n: int, delta0: float, *, alternative: str, grid: int = NUISANCE_GRID) -> NDArray[np.float64]:
    """Exact unconditional p-values of H0 on the difference δ = p10 − p01 of paired proportions for
    every outcome (n10, n01) of n pairs: an (n + 1, n + 1) array (nan where n10 + n01 > n).

    ``alternative='less'`` tests H0: δ >= δ0 (non-inferiority: reject for small Z),
    ``'greater'`` H0: δ <= δ0. The outcomes are ordered by Tango's score Z (:func:`tango_score`) and
    p = sup over the nuisance p01 on the boundary δ = δ0 of P(Z ≤ z_obs) (resp. P(Z ≥ z_obs)) under
    the trinomial (n10, n01, rest) ~ Multinomial(n; p01 + δ0, p01, 1 − 2·p01 − δ0), over the
    ``grid`` values of p01 of :func:`_nuisance` (Chan 1998, Statistics in Medicine 17:1403–1413).
    The size at the margin is at most α for every p01 on the grid, including p01 = 0. Enumerates
    all (n + 1)(n + 2)/2 outcomes (a table for benchmarks and tests; :func:`paired_binary_p` gives
    one outcome's p-value and agrees with it)."""
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
    in n01 (Barnard's convexity; checked over every outcome in tests/unit/stats/test_paired_binary.py),
    so the 'less' tail of a row is {n10 <= k(y)} (k = −1: empty) and the 'greater' tail
    {n10 >= k(y)} (k = n − y + 1: empty); one bisection over all rows at once (log2 n steps) finds
    the largest n10 with Z <= z_obs ('less': k) or Z < z_obs ('greater': k − 1)."""
    y = np.arange(n + 1)
    lo, hi = np.full(n + 1, -1), n - y  # the largest n10 in [-1, n - y] on the near side of z_obs (-1: none)
    while np.any(hi > lo):
        mid = (lo + hi + 1) // 2
        act = hi > lo
        z = _z(np.maximum(mid, 0), y, n, delta0)
        ok = z <= z_obs if alternative == "less" else z < z_obs
        lo, hi = np.where(act & ok, mid, lo), np.where(act & ~ok, mid - 1, hi)
    return lo if alternative == "less" else lo + 1


def _staircase_tail(n: int, delta0: float, k: NDArray[np.int64], alternative: str,
                    p01: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(tail) at each nuisance value p01 (p10 = p01 + δ0), the tail given per row by
    :func:`_tail_bounds`: Σ_y P(N01 = y)·P(N10 in the row's run | N01 = y), with N01 ~ Bin(n, p01)
    and, given N01 = y, N10 ~ Bin(n − y, p10/(1 − p01)) (the trinomial factorised), so the cost is
    O(n) per nuisance value, not O(n²). Rows with P(N01 = y) below ``TAIL_EPS`` on either side
    (binomial quantiles) are left out and their mass, at most 2·``TAIL_EPS``, is added back."""
    p01 = np.asarray(p01, dtype=float)
    rows_lo = np.clip(_st.binom.ppf(TAIL_EPS, n, p01).astype(np.int64) - 1, 0, n)
    rows_hi = np.clip(_st.binom.isf(TAIL_EPS, n, p01).astype(np.int64) + 1, 0, n)
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


def paired_binary_p(n10: int, n01: int, n: int, delta0: float, *, alternative: str, grid: int = NUISANCE_GRID) -> float:
    """The p-value of :func:`paired_binary_pvalues` for one observed outcome (n10, n01), computed
    without enumerating the outcomes: the tail {Z ≤ z_obs} is a staircase over n01
    (:func:`_tail_bounds`) and its probability a sum of binomial terms (:func:`_staircase_tail`),
    O(n) per nuisance value; exact unconditional up to ``EXACT_MAX_N`` pairs. Beyond, Tango's score
    test referred to the normal distribution with a continuity correction (Z with n10 moved half a
    count towards the null: n10 + ½ for ``'less'``, n10 − ½ for ``'greater'``), whose size exceeds α
    at small margins (docs/design.md section 5): the exact test covers every size the suites produce."""
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

    def rejects(i: int) -> bool:  # the p-value of a level: any outcome on it (the tail depends on z only)
        return _p_at_level(n, float(delta0), float(levels[i]), alternative, grid) < alpha

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
    lo, hi = (anchor, 1 - eps) if rejects_at_anchor == (side == "lower") else (-1 + eps, anchor)
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        rej = paired_binary_p(n10, n01, n, mid, alternative=alt, grid=NUISANCE_GRID // 4) < alpha
        lo, hi = (mid, hi) if rej == (side == "lower") else (lo, mid)
    return (lo + hi) / 2
