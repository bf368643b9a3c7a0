"""Paired comparisons of a candidate against a baseline on the same units (``--baseline``; docs/design.md
section 5, docs/concepts/statistics.md): DPB and MEG on Δ = |μ_cand| − |μ_base|
(:func:`paired_abs_mean_verdict`), mean differences by sign flips (:func:`paired_permutation_verdict`),
the stressor amplification (:func:`paired_amplification_verdict`); binary outcomes use
:func:`~pytest_posbias.stats.paired_change_verdict`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _st

from ..errors import ConfigError
from .intervals import MIN_CLUSTERS, _check_alpha
from .paired_binary import NUISANCE_GRID, paired_binary_bound, paired_binary_p
from .verdicts import Verdict, _bounds, _decide, inconclusive_verdict, region_p


def _cluster_se(x: NDArray[np.float64], inv: NDArray[np.intp], g: int) -> float:
    """CR1 cluster-robust standard error of the instance mean of ``x``:
    sqrt(G/(G − 1) · Σ_g (Σ_{i∈g} (x_i − x̄))²) / N."""
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
    lo = max(min(s * c_mean - t * b_mean - q * (se_diff if s == t else se_sum) for t in (1, -1)) for s in (1, -1))
    hi = max(min(s * c_mean - t * b_mean + q * (se_diff if s == t else se_sum) for t in (1, -1)) for s in (1, -1))
    return float(lo), float(hi)


def paired_abs_mean_verdict(cand: ArrayLike, base: ArrayLike, clusters: ArrayLike, *, name: str, margin: float,
                            mode: str = "detect", alpha: float = 0.05, unit: str = "groups",
                            extra: Mapping[str, Any] | None = None) -> Verdict:
    """Non-inferiority of a two-sided statistic: compliant when Δ = |μc| − |μb| <= ``margin``.

    ĉ, b̂ are instance means (Σ_g S_g / Σ_g n_g) of the same instances; the CI [L, U] is
    :func:`abs_bias_bounds` with CR1 cluster-robust standard errors of c − b and c + b over the G
    clusters and q = t_{1−α/2, G−1}. Detect fails when L > ``margin``; certify passes when
    U < ``margin``. The p-values invert the same bounds:
    p_detect = 2·t_sf(max_s min_s′ (s·ĉ − s′·b̂ − margin)/SE(s, s′)) and
    p_certify = 2·t_sf(min_s max_s′ (margin − s·ĉ + s′·b̂)/SE(s, s′)), capped at 1, so p < α
    exactly when the CI rule decides. Inconclusive below ``MIN_CLUSTERS`` clusters, when neither arm
    varies across clusters, and in certify mode when c − b or c + b does not (its zero standard
    error would read as an exact bound).
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
                          "method": "intersection-union t bounds of ±cand ∓ base (cluster-robust SE, Bonferroni)",
                          **(extra or {})}
    estimate = float(abs(c.mean()) - abs(b.mean())) if c.size else math.nan
    inconclusive = functools.partial(inconclusive_verdict, name=name, threshold=margin, sides="upper", n=n_clusters,
                                     mode=mode, alpha=a, unit=unit, estimate=estimate, extra=ex)
    if n_clusters < MIN_CLUSTERS:
        return inconclusive(why=f"fewer than {MIN_CLUSTERS} groups with both candidate and baseline")
    _, inv = np.unique(g_ids, return_inverse=True)
    g = n_clusters
    se_diff, se_sum = _cluster_se(c - b, inv, g), _cluster_se(c + b, inv, g)
    if se_diff == 0 and se_sum == 0:
        return inconclusive(why="neither the candidate's nor the baseline's values vary across groups")
    if mode == "certify" and (se_diff == 0 or se_sum == 0):
        # a zero standard error would be read as an exact bound: the groups not drawn could differ
        which = "candidate − baseline" if se_diff == 0 else "candidate + baseline"
        return inconclusive(why=f"{which} does not vary across the {g} groups, and a zero-width bound says nothing "
                                "about the groups not drawn, so compliance cannot be certified")
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


def sign_flip_p(d: ArrayLike, clusters: ArrayLike, delta0: float, *, alternative: str, n_resamples: int = PERMUTATIONS,
                seed: int = 0) -> float:
    """Paired sign-flip permutation p-value of H0: mean d = δ0 against ``alternative`` ('greater':
    mean > δ0, 'less': mean < δ0): the cluster sums S_g = Σ_{i∈g}(d_i − δ0), symmetric about 0 under
    H0, have exchangeable signs; the statistic is Σ_g S_g / N (``scipy.stats.permutation_test``, sign
    flips, exact when 2^G <= ``n_resamples``). The seed is fixed per call, so p is a deterministic
    function of δ0 (the CI inverts it)."""
    x = np.asarray(d, dtype=float)
    _, inv = np.unique(np.asarray(clusters), return_inverse=True)
    sums = np.bincount(inv, weights=x - delta0).astype(float)
    n = float(x.size)
    res = _st.permutation_test((sums,), lambda a, axis=-1: a.sum(axis=axis) / n, permutation_type="samples",
                               n_resamples=int(n_resamples), alternative=alternative, vectorized=True,
                               rng=np.random.default_rng(seed))
    return float(res.pvalue)


def _invert(d: NDArray[np.float64], clusters: ArrayLike, alpha: float, *, side: str, n_resamples: int,
            seed: int) -> float:
    """The one-sided (1 − α) bound by bisection: the lower bound is the smallest δ0 whose 'greater'
    test no longer rejects at α; the upper bound the largest δ0 whose 'less' test does not."""
    lo, hi = float(d.min()) - 1e-9, float(d.max()) + 1e-9
    alt = "greater" if side == "lower" else "less"
    for _ in range(18):  # the bracket shrinks 2^18-fold: far below any reported digit
        mid = (lo + hi) / 2
        rejects = sign_flip_p(d, clusters, mid, alternative=alt, n_resamples=n_resamples, seed=seed) <= alpha
        lo, hi = (mid, hi) if rejects == (side == "lower") else (lo, mid)
    return (lo + hi) / 2


def paired_permutation_verdict(d: ArrayLike, clusters: ArrayLike, *, name: str, threshold: float, sides: str = "upper",
                               mode: str = "detect", alpha: float = 0.05, unit: str = "groups",
                               n_resamples: int = PERMUTATIONS, seed: int = 0,
                               extra: Mapping[str, Any] | None = None) -> Verdict:
    """Gate on the mean of paired differences d_i with the sign-flip permutation test
    (:func:`sign_flip_p`, 20,000 seeded sign flips by default) instead of the bootstrap:
    ``sides='upper'`` compliant when mean d <= threshold (non-inferiority), ``'both'`` when
    |mean d| <= threshold (TOST equivalence). The (1 − 2α) CI inverts the two one-sided tests,
    so the interval rule and p < α agree.

    Sign flips are exchangeable only when d is symmetric about the tested value: at threshold 0
    that is the sharp null of two exchangeable arms, where the test is exact. At a non-zero
    threshold nothing makes d − threshold symmetric and the test does not hold its size on skewed
    or rare-event differences (docs/design.md section 5), so a non-zero threshold is a refusal to
    decide: inconclusive and not passed in either mode."""
    a = _check_alpha(alpha)
    x = np.asarray(d, dtype=float)
    g = np.asarray(clusters)
    if x.ndim != 1 or x.shape != g.shape:
        raise ConfigError(f"`d` and `clusters` must be 1-D arrays of one length; got {x.shape} and {g.shape}")
    lower, upper = _bounds(threshold, sides)
    n_clusters = int(np.unique(g).size) if g.size else 0
    ex = {"method": f"paired sign-flip permutation test ({n_resamples} seeded flips, clusters as units)",
          "n_instances": int(x.size), **(extra or {})}
    inconclusive = functools.partial(inconclusive_verdict, name=name, threshold=threshold, sides=sides, n=n_clusters,
                                     mode=mode, alpha=a, unit=unit, estimate=float(x.mean()) if x.size else math.nan,
                                     extra=ex)
    if x.size and not np.all(np.isfinite(x)):  # a lost unit: a NaN CI would read as "no violation shown"
        return inconclusive(fail_closed=True, why=f"{int(np.count_nonzero(~np.isfinite(x)))} of {x.size} differences "
                                                  "are not finite (NaN or inf), and a unit that was not measured is "
                                                  "never scored")
    if n_clusters < MIN_CLUSTERS:
        return inconclusive(why=f"fewer than {MIN_CLUSTERS} independent units for a permutation test")
    if threshold != 0:
        return inconclusive(fail_closed=True,
                            why=f"the sign-flip permutation test does not hold its size at a non-zero margin "
                                f"({threshold:g}) for skewed or rare-event differences; the default paired test "
                                "(paired_test = \"bootstrap\") decides it")
    floor = max(2.0 ** -n_clusters, 1.0 / (n_resamples + 1))  # the smallest p-value of the sign flips
    if floor >= a:  # no outcome rejects: the inverted bounds would stop at the data's range and decide on it
        return inconclusive(why=f"{n_clusters} groups and {n_resamples} sign flips give no p-value below "
                                f"{floor:.4g}, so none below α = {a:g}")
    if np.ptp(x) == 0:
        lo_ci = hi_ci = float(x[0])
    else:
        lo_ci, hi_ci = (_invert(x, g, a, side=side, n_resamples=n_resamples, seed=seed) for side in ("lower", "upper"))

    def p(delta0: float, alt: str) -> float:
        if np.ptp(x) == 0:  # constant differences: the test is degenerate, decide on the value itself
            return 0.0 if (x[0] > delta0 if alt == "greater" else x[0] < delta0) else 1.0
        return sign_flip_p(x, g, delta0, alternative=alt, n_resamples=n_resamples, seed=seed)

    p_det, p_cert = region_p(lambda b: p(b, "greater"), lambda b: p(b, "less"), lower, upper)
    return _decide(name=name, estimate=float(x.mean()), ci_low=lo_ci, ci_high=hi_ci, lower=lower, upper=upper,
                   threshold=threshold, n=n_clusters, unit=unit, mode=mode, alpha=a, p_detect=p_det,
                   p_certify=p_cert, extra=ex)


def paired_amplification_verdict(cand_share: ArrayLike, cand_clean: ArrayLike, base_share: ArrayLike,
                                 base_clean: ArrayLike, *, name: str, margin: float, mode: str = "detect",
                                 alpha: float = 0.05, unit: str = "videos",
                                 extra: Mapping[str, Any] | None = None) -> Verdict:
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
    ex: dict[str, Any] = {"n10_clean": n10, "n01_clean": n01,
                          "stressed_share_difference": float(ds.mean()) if n else None,
                          "method": "Bonferroni split: t bound of the stressed-share difference + exact unconditional "
                                    "bound of the clean-flag difference", **(extra or {})}
    inconclusive = functools.partial(inconclusive_verdict, name=name, threshold=margin, sides="upper", n=n, mode=mode,
                                     alpha=a, unit=unit, estimate=estimate, extra=ex)
    if n < MIN_CLUSTERS:
        return inconclusive(why=f"fewer than {MIN_CLUSTERS} videos with both candidate and baseline")
    se = float(ds.std(ddof=1)) / math.sqrt(n)
    if se == 0:
        return inconclusive(why="the stressed repetition shares of candidate and baseline differ by the same amount "
                                "on every video")
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
            lo_x, hi_x = (mid, hi_x) if (p_s(margin + mid) < p_f(mid)) == detect else (lo_x, mid)
        mid = (lo_x + hi_x) / 2
        return min(1.0, 2 * max(p_s(margin + mid), p_f(mid)))

    p_detect, p_certify = split_p(True), split_p(False)
    ex.update({"stressed_share_bounds": [lb_s, ub_s], "clean_flag_bounds": [lb_f, ub_f]})
    return _decide(name=name, estimate=estimate, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(margin),
                   threshold=margin, n=n, unit=unit, mode=mode, alpha=a, p_detect=p_detect, p_certify=p_certify,
                   extra=ex)

