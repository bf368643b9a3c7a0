"""Exact binomial intervals and tests, McNemar, Benjamini–Hochberg and the cluster bootstrap
(``stats.intervals``) against statsmodels, scipy and hand-worked values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from pytest_posbias import stats as S


def test_exact_interval_matches_statsmodels_beta():
    for k, n in [(0, 10), (3, 10), (18, 100), (100, 100)]:
        lo, hi = S.exact_interval(k, n, confidence_level=0.9)
        slo, shi = proportion_confint(k, n, alpha=0.1, method="beta")
        assert lo == pytest.approx(slo, abs=1e-9)
        assert hi == pytest.approx(shi, abs=1e-9)


def test_mcnemar_exact_known_table():
    # discordant b = 10, c = 2: p = 2 * P(X <= 2 | 12, 1/2) = 2 * 79 / 4096
    assert S.mcnemar_exact(10, 2) == pytest.approx(2 * 79 / 4096)
    table = [[30, 10], [2, 40]]
    assert S.mcnemar_exact(10, 2) == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert S.mcnemar_exact(0, 0) == 1.0
    assert S.mcnemar_exact(2, 10, alternative="less") == pytest.approx(79 / 4096)


def test_binomial_one_sided_matches_survival_function():
    # H0: flip <= 15%, 30 flips out of 120
    p = S.binomial_test(30, 120, 0.15, alternative="greater")
    assert p == pytest.approx(st.binom.sf(29, 120, 0.15))
    p_less = S.binomial_test(10, 120, 0.15, alternative="less")
    assert p_less == pytest.approx(st.binom.cdf(10, 120, 0.15))


def test_phase_paper_least_extreme_cell_is_far_below_1e15():
    # Table S4: Q3/EgoSchema flip 40.8% on 500 items; p for H0 flip <= 15% is ~3.4e-44
    p = S.binomial_test(204, 500, 0.15, alternative="greater")
    assert p < 1e-15
    assert 1e-46 < p < 1e-41


def test_benjamini_hochberg_hand_worked_and_statsmodels():
    p = [0.01, 0.04, 0.03, 0.2]
    adj = S.benjamini_hochberg(p)
    assert adj == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.2])
    assert adj == pytest.approx(multipletests(p, method="fdr_bh")[1])


def test_cluster_bootstrap_estimate_is_instance_mean_and_reproducible():
    rng_values = np.random.default_rng(0)
    values = rng_values.normal(size=40)
    clusters = np.repeat(np.arange(10), 4)
    a = S.cluster_bootstrap(values, clusters, rng=np.random.default_rng(5), n_resamples=999)
    b = S.cluster_bootstrap(values, clusters, rng=np.random.default_rng(5), n_resamples=999)
    assert a.estimate == pytest.approx(values.mean())
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert a.ci_low < a.estimate < a.ci_high
    assert a.n_clusters == 10


def test_cluster_bootstrap_wider_than_naive_for_correlated_clusters():
    rng = np.random.default_rng(3)
    cluster_effect = np.repeat(rng.normal(size=12), 8)
    values = cluster_effect + 0.1 * rng.normal(size=96)
    clusters = np.repeat(np.arange(12), 8)
    clustered = S.cluster_bootstrap(values, clusters, rng=np.random.default_rng(1), n_resamples=1999)
    naive = S.cluster_bootstrap(values, None, rng=np.random.default_rng(1), n_resamples=1999)
    assert (clustered.ci_high - clustered.ci_low) > 2 * (naive.ci_high - naive.ci_low)


def test_bootstrap_ci_of_a_mean_covers_truth_about_95_percent():
    rng = np.random.default_rng(2024)
    hits = 0
    reps = 200
    for _ in range(reps):
        x = rng.exponential(1.0, size=60)  # true mean 1
        r = S.cluster_bootstrap(x, None, confidence_level=0.95, n_resamples=999, rng=rng)
        hits += r.ci_low <= 1.0 <= r.ci_high
    # percentile bootstrap on a skewed n = 60 sample: ~93-95%; wide tolerance, fixed seed
    assert 0.88 <= hits / reps <= 0.99


def test_bca_interval_is_scipys_and_its_p_values_invert_it():
    x = np.random.default_rng(11).exponential(1.0, size=50) - 1.0
    r = S.cluster_bootstrap(x, None, confidence_level=0.90, n_resamples=4999, rng=np.random.default_rng(4), method="bca")
    ref = st.bootstrap((x,), np.mean, confidence_level=0.90, n_resamples=4999, method="BCa", rng=np.random.default_rng(4))
    assert (r.ci_low, r.ci_high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-12)
    # the p-value of H0: theta <= bound is the one-sided level at which the bound sits (5% each side)
    assert r.p_greater(r.ci_low) == pytest.approx(0.05, abs=0.004)
    assert r.p_less(r.ci_high) == pytest.approx(0.05, abs=0.004)
    # acceleration by hand from the jackknife (Efron and Tibshirani 1993, eq. 14.15)
    loo = (x.sum() - x) / (x.size - 1)
    d = loo.mean() - loo
    assert r.accel == pytest.approx((d**3).sum() / (6 * ((d**2).sum()) ** 1.5))
