"""Statistics against scipy/statsmodels/textbook values, and verdict semantics.

The tests of the ``stats`` package's public functions (``stats/__init__.py``, ``intervals.py``,
``verdicts.py``)."""

from __future__ import annotations

import math

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


def test_bca_keeps_the_false_failure_rate_where_the_percentile_interval_does_not():
    # per-video amplification of the stressor gate at its boundary: share of 30 stressed outputs that
    # repeat (rate 0.20) minus a rare clean flag (rate 0.10); true mean 0.10 = the threshold
    rng = np.random.default_rng(7)
    fails = {"percentile": 0, "bca": 0}
    reps = 300
    for _ in range(reps):
        x = rng.binomial(30, 0.2, size=64) / 30 - (rng.random(64) < 0.1)
        for method in fails:
            v = S.mean_verdict(x, None, name="amp", threshold=0.10, sides="upper", method=method, n_resamples=999, rng=rng)
            fails[method] += not v.passed
    # one-sided alpha = 0.05; 300 reps: binomial sd 1.3 points
    assert fails["bca"] / reps <= 0.07
    assert fails["percentile"] > fails["bca"]


# --------------------------------------------------------------------------- verdicts


def _v(values, clusters=None, **kw):
    kw.setdefault("name", "MEG")
    kw.setdefault("threshold", 0.02)
    return S.mean_verdict(values, clusters, rng=np.random.default_rng(0), n_resamples=1999, **kw)


def test_detect_fails_when_ci_wholly_below_minus_threshold():
    values = np.random.default_rng(1).normal(-0.10, 0.03, 40)
    v = _v(values, mode="detect")
    assert not v.passed
    assert v.ci_high < -0.02
    assert v.p_value < 0.05
    assert "MEG = " in v.reason and "CI" in v.reason and "n = 40" in v.reason and "below" in v.reason


def test_detect_passes_and_certify_fails_on_noisy_small_sample():
    values = np.random.default_rng(2).normal(0.0, 0.3, 8)
    assert _v(values, mode="detect").passed
    assert not _v(values, mode="certify").passed


def test_certify_passes_on_tight_compliant_data():
    values = np.random.default_rng(3).normal(0.0, 0.01, 60)
    v = _v(values, mode="certify")
    assert v.passed
    assert v.ci_low > -0.02 and v.ci_high < 0.02
    assert v.p_value < 0.05


def test_detect_decision_agrees_with_p_value():
    rng = np.random.default_rng(11)
    for _ in range(40):
        mu = rng.uniform(-0.12, 0.0)
        v = _v(rng.normal(mu, 0.05, 30), mode="detect")
        assert v.passed == (v.p_value > 0.05) or abs(v.p_value - 0.05) < 0.003


def test_rate_verdict_consistent_with_exact_test():
    for k in range(0, 41):
        v = S.rate_verdict(k, 100, name="flip", threshold=0.15, mode="detect")
        p = st.binomtest(k, 100, 0.15, alternative="greater").pvalue
        assert v.passed == (p >= 0.05)
        assert v.p_value == pytest.approx(p)
    c = S.rate_verdict(5, 100, name="flip", threshold=0.15, mode="certify")
    assert c.passed and c.ci_high < 0.15


def test_inconclusive_verdict_semantics():
    v = S.mean_verdict([0.1], None, name="DPB", threshold=0.05, rng=np.random.default_rng(0))
    assert v.passed and v.mode == "detect" and "fewer than 5 independent units" in v.reason
    c = S.mean_verdict([0.1], None, name="DPB", threshold=0.05, mode="certify", rng=np.random.default_rng(0))
    assert not c.passed


def test_verdict_round_trips_through_dict():
    v = S.rate_verdict(7, 50, name="order", threshold=0.15, extra={"k": 7})
    w = S.Verdict.from_dict(v.to_dict())
    assert w == v


# --------------------------------------------------------------------------- every error message (scipy style)

ERRORS = [
    (lambda: S.exact_interval(5, 0), "`n` must be >= 1"),
    (lambda: S.exact_interval(6, 5), "`k` must be <= `n`"),
    (lambda: S.exact_interval(-1, 5), "`k` must be a non-negative integer"),
    (lambda: S.exact_interval(1, 5, confidence_level=1.5), "`confidence_level` must be a float in (0, 1)"),
    (lambda: S.binomial_test(1, 5, 1.5), "`p0` must lie in [0, 1]"),
    (lambda: S.binomial_test(1, 5, 0.5, alternative="up"), "`alternative` must be 'greater', 'less' or 'two-sided'"),
    (lambda: S.mcnemar_exact(-1, 2), "`b` must be a non-negative integer"),
    (lambda: S.benjamini_hochberg([0.5, 1.5]), "`p_values` must all lie in [0, 1]"),
    (lambda: S.cluster_bootstrap([], rng=np.random.default_rng()), "`values` must be a non-empty 1-D array"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], rng=1), "`rng` must be a numpy.random.Generator"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], [0, 0], rng=np.random.default_rng()), "at least 2 distinct clusters"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], [0], rng=np.random.default_rng()), "`clusters` must have the same shape"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], n_resamples=5, rng=np.random.default_rng()), "`n_resamples` must be an integer >= 99"),
    (lambda: S.rate_verdict(1, 10, name="x", threshold=0.1, alpha=0.7), "`alpha` must be a number in (0, 0.5)"),
    (lambda: S.mean_verdict([0.1, 0.2], name="x", threshold=0.1, sides="left", rng=np.random.default_rng()), "`sides` must be 'both', 'upper' or 'lower'"),
    (lambda: S.mean_verdict([0.1, 0.2], name="x", threshold=0.1, mode="strict", rng=np.random.default_rng()), "`mode` must be one of"),
    (lambda: S.rate_verdict(1, 10, name="x", threshold=1.5), "`threshold` must lie in [0, 1] for a rate"),
]

from pytest_posbias import metrics as M  # noqa: E402

ERRORS += [
    (lambda: M.dpb([1, 2, 3]), "`coverage` must be a 2-D (N, P) array"),
    (lambda: M.dpb(np.zeros((0, 4))), "`coverage` must have at least one row"),
    (lambda: M.dpb([[1.0]]), "`coverage` must have at least 2 columns"),
    (lambda: M.dpb([[0.1, float("nan")]]), "`coverage` must contain only finite values"),
    (lambda: M.dpb([[0.1, -0.2]]), "`coverage` must be non-negative"),
    (lambda: M.dpb([[0.1, 0.2]], eps=-1), "`eps` must be a finite float >= 0"),
    (lambda: M.meg([[0.1, 0.2, 0.3]]), "`coverage` must have P = 4 columns for MEG"),
    (lambda: M.cyclic_orders(0), "`P` must be an integer >= 1"),
    (lambda: M.full_orders(9), "`P` must be <= 8"),
    (lambda: M.max_ngram_count("a b", 0), "`n` must be an integer >= 1"),
    (lambda: M.max_ngram_count(None), "`text` must be a str"),
    (lambda: M.repetition_rate("a b c"), "`texts` must be a sequence of strings"),
    (lambda: M.repetition_rate([]), "`texts` must contain at least one text"),
    (lambda: M.repetition_rate(["a"], tau=-1), "`tau` must be an integer >= 0"),
    (lambda: M.severity("a", finish_reason="eos"), "`finish_reason` must be None, 'stop' or 'length'"),
    (lambda: M.flip_rate([1, 2]), "`answers` must be a 2-D (N, K) array"),
    (lambda: M.flip_rate([[1]]), "`answers` must have at least one row and at least 2 columns"),
    (lambda: M.flip_rate([[0.5, 1.0]]), "`answers` must hold integer content indices"),
    (lambda: M.consensus([]), "`answers_row` must be a non-empty 1-D sequence"),
    (lambda: M.spr_margin({}), "`letter_logprobs` must be a non-empty mapping"),
    (lambda: M.spr_margin({"A": float("nan")}), "found NaN or +inf"),
    (lambda: M.spr_margin({"A": -math.inf}), "at least one letter a finite log-probability"),
    (lambda: M.fragment_coverage(None, "x"), "`reference` must be a str"),
    (lambda: M.length_matched_repetition_rate(["a"], words=0), "`words` must be an integer >= 1"),
]


@pytest.mark.parametrize(("call", "message"), ERRORS, ids=[m for _, m in ERRORS])
def test_every_invalid_argument_message_names_the_argument(call, message):
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        call()
    assert message in str(exc.value)
