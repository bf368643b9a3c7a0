"""The exact unconditional test of paired binary outcomes at a margin (stats.paired_binary): Tango's
score and restricted MLE, the p-value as the supremum of the multinomial tail over the nuisance
grid, the critical cut, and its size at the margin with one-directional discordance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st
from scipy.optimize import minimize_scalar

from pytest_posbias.stats import paired_change_verdict
from pytest_posbias.stats.paired_binary import (
    paired_binary_critical,
    paired_binary_p,
    paired_binary_pvalues,
    tango_score,
)


def test_tango_restricted_mle_matches_a_numerical_maximum():
    n, b, c, d = 30, 7, 2, 0.1

    def nll(p: float) -> float:
        return -(b * np.log(p + d) + c * np.log(p) + (n - b - c) * np.log(1 - 2 * p - d))

    p01 = minimize_scalar(nll, bounds=(1e-12, (1 - d) / 2 - 1e-12), method="bounded", options={"xatol": 1e-12}).x
    z = (b - c - n * d) / np.sqrt(n * (2 * p01 + d * (1 - d)))
    assert float(tango_score(b, c, n, d)) == pytest.approx(z, rel=1e-6)


def test_exact_p_value_is_the_supremum_of_the_multinomial_tail():
    """Brute force with scipy's multinomial on n = 8: P(Z <= z_obs) maximised over a fine, equally
    spaced nuisance grid (the rule's grid is arcsine-spaced, so the two suprema agree to the grid's
    resolution, not to the last digit)."""
    n, t, obs = 8, 0.1, (0, 0)
    z = {(x, y): float(tango_score(x, y, n, t)) for x in range(n + 1) for y in range(n + 1 - x)}
    tail = [k for k, v in z.items() if v <= z[obs] + 1e-9]
    counts = np.array([[x, y, n - x - y] for x, y in tail])
    best = max(float(st.multinomial.pmf(counts, n, [p01 + t, p01, 1 - 2 * p01 - t]).sum())
               for p01 in np.linspace(0, (1 - t) / 2, 4001))
    assert paired_binary_p(*obs, n, t, alternative="less", grid=2001) == pytest.approx(best, rel=1e-6)
    assert paired_binary_pvalues(n, t, alternative="less", grid=2001)[obs] == pytest.approx(best, rel=1e-6)


@pytest.mark.parametrize(("n", "t", "alt", "obs"), [(30, 0.1, "less", (2, 1)), (30, -0.05, "greater", (4, 2)),
                                                     (41, 0.02, "greater", (3, 0))])
def test_one_outcome_p_value_is_the_brute_force_tail_on_the_same_grid(n, t, alt, obs):
    """The one-outcome p-value sums its tail as a staircase of binomial terms; brute force sums scipy's
    multinomial pmf over every outcome of the tail at each nuisance value of the same grid."""
    from pytest_posbias.stats.paired_binary import _nuisance

    x, y = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = x + y <= n
    x, y = x[keep], y[keep]
    z, z0 = np.round(tango_score(x, y, n, t), 9), np.round(float(tango_score(*obs, n, t)), 9)
    tail = (z <= z0) if alt == "less" else (z >= z0)
    p10, p01 = _nuisance(t, 60)
    counts = np.stack([x[tail], y[tail], n - x[tail] - y[tail]], axis=1)
    best = max(float(st.multinomial.pmf(counts, n, [a, b, max(0.0, 1 - a - b)]).sum()) for a, b in zip(p10, p01, strict=True))
    assert paired_binary_p(*obs, n, t, alternative=alt, grid=60) == pytest.approx(best, rel=1e-9, abs=1e-13)


def test_tango_score_is_monotone_in_each_discordant_count():
    """The one-outcome p-value's staircase tails rest on Z non-decreasing in n10 and non-increasing in
    n01 (Barnard's convexity), checked here over every outcome of these sizes and margins."""
    for n in (1, 7, 24, 60, 200):
        x, y = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        for t in (-0.3, -0.05, -0.01, 0.01, 0.02, 0.05, 0.1, 0.3, 0.6):
            z = np.where(x + y <= n, np.round(tango_score(x, y, n, t), 9), np.nan)
            assert not np.any(np.diff(z, axis=0) < 0), (n, t)
            assert not np.any(np.diff(z, axis=1) > 0), (n, t)


def test_one_outcome_p_value_agrees_with_the_full_table():
    rng = np.random.default_rng(4)
    for n, t in ((24, 0.1), (60, 0.05), (60, -0.2), (150, 0.01)):
        for alt in ("less", "greater"):
            table = paired_binary_pvalues(n, t, alternative=alt)
            for _ in range(12):
                x = int(rng.integers(0, n + 1))
                y = int(rng.integers(0, n + 1 - x))
                assert paired_binary_p(x, y, n, t, alternative=alt) == pytest.approx(table[x, y], rel=1e-9, abs=1e-13)


def test_critical_cut_is_where_the_p_value_crosses_alpha():
    for n, t, alt in ((60, 0.05, "less"), (60, 0.05, "greater"), (300, 0.02, "greater")):
        zc = paired_binary_critical(n, t, 0.05, alternative=alt)
        for y in (0, 3, 10):
            z = np.round(tango_score(np.arange(n + 1 - y), y, n, t), 9)
            inside = np.flatnonzero(z <= zc) if alt == "less" else np.flatnonzero(z >= zc)
            outside = np.flatnonzero(z > zc) if alt == "less" else np.flatnonzero(z < zc)
            edge_in = inside.max() if alt == "less" else inside.min()
            edge_out = outside.min() if alt == "less" else outside.max()
            assert paired_binary_p(int(edge_in), y, n, t, alternative=alt) < 0.05
            assert paired_binary_p(int(edge_out), y, n, t, alternative=alt) >= 0.05


@pytest.mark.parametrize(("n", "t", "p01"), [(400, 0.01, 0.0025), (300, 0.02, 0.005)])
def test_detect_holds_its_size_at_small_margins_above_the_old_exact_limit(n, t, p01):
    """Tango's score referred to the normal (with the continuity correction) falsely fails 5.4% of
    these at 400 pairs, margin 0.01 and rare discordance. The exact size of the verdict's p-value
    rule: its rejection region (the p-value checked on each row's edge) summed under the
    multinomial at the margin."""
    from pytest_posbias.stats.paired_binary import _log_pmf, _outcomes

    zc = paired_binary_critical(n, t, 0.05, alternative="greater")
    for y in range(0, 8):
        z = np.round(tango_score(np.arange(n + 1 - y), y, n, t), 9)
        edge = int(np.flatnonzero(z >= zc).min())
        assert paired_binary_p(edge, y, n, t, alternative="greater") < 0.05
        assert paired_binary_p(edge - 1, y, n, t, alternative="greater") >= 0.05
    x, y = _outcomes(n)
    pmf = np.exp(_log_pmf(x, y, n, np.array([p01 + t]), np.array([p01])))[0]
    size = float(pmf @ (np.round(tango_score(x, y, n, t), 9) >= zc))
    assert size <= 0.05


@pytest.mark.parametrize(("n", "margin"), [(60, 0.05), (24, 0.10)])
def test_certify_at_the_margin_holds_its_size_with_one_directional_discordance(n, margin):
    """Exact size of the certify rule when the candidate is worse by the margin and the baseline is
    never better (p10 = margin, p01 = 0): McNemar conditional on the discordance passed 42% (n = 60)
    and 55% (n = 24) of these."""
    x, y = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = x + y <= n
    pmf = st.multinomial.pmf(np.stack([x[keep], y[keep], n - x[keep] - y[keep]], axis=1), n, [margin, 0.0, 1 - margin])
    p = paired_binary_pvalues(n, margin, alternative="less")[keep]
    assert float(np.sum(pmf * (p < 0.05))) <= 0.05
    # and the verdict decides as the table does on an outcome just inside the margin
    a = np.r_[np.ones(int(margin * n) - 1), np.zeros(n - int(margin * n) + 1)].astype(int)
    v = paired_change_verdict(a, np.zeros(n, dtype=int), name="flip", threshold=margin, mode="certify")
    table = paired_binary_pvalues(n, margin, alternative="less")
    assert v.passed == (v.p_value < 0.05) and v.p_value == pytest.approx(table[int(margin * n) - 1, 0])
