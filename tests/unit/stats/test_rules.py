"""The mean and rate verdict rules (``stats.rules``): detect and certify decisions, their agreement
with the p-values, inconclusive samples, and the BCa interval's size at a skewed boundary."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as st
from support.lattice_units import EQUAL_ATTENTION_QUICK, STEP, T

from pytest_posbias import stats as S


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


def test_skew_t_interval_inverts_its_test() -> None:
    x = np.random.default_rng(2).gamma(2.0, 0.02, 20) - 0.03
    for floor in (0.0, T * STEP):
        st = S.skew_t(x, floor=floor)
        lo, hi = st.interval(0.05)
        assert st.p_greater(lo) == pytest.approx(0.05, abs=1e-9)
        assert st.p_less(hi) == pytest.approx(0.05, abs=1e-9)
        assert lo < float(x.mean()) < hi
    # no skewness and no floor: the Student t interval
    sym = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]) / 32
    st = S.skew_t(sym)
    q = 2.131846786326649  # t_{0.95, 4}
    assert st.interval(0.05) == pytest.approx((-q * sym.std(ddof=1) / math.sqrt(5), q * sym.std(ddof=1) / math.sqrt(5)))


def test_skew_t_interval_is_continuous_in_a_vanishing_skewness() -> None:
    """A skewness of rounding size (a sample symmetric about a mean that floats cannot hold) gives the
    Student t interval, not a point: ∛(1 + u) − 1 loses every digit there unless computed as
    expm1(log1p(u)/3); and the inverse inverts g across skewness and level."""
    t0 = S.SkewT(0.0, 1.0, 0.0, 10, False).interval(0.005)
    for g in (1e-300, 1e-16, -1e-16, 1e-12, 1e-8):
        assert S.SkewT(0.0, 1.0, g, 10, False).interval(0.005) == pytest.approx(t0, rel=1e-6)
    for g in (-2.0, -0.3, -1e-9, 1e-9, 0.3, 2.0):
        st_ = S.SkewT(0.0, 1.0, g, 12, False)
        for y in np.linspace(-1.5, 1.5, 13):
            assert st_._g(st_._g_inv(float(y))) == pytest.approx(y, abs=1e-9)
    # MEG units on a 1/40 lattice, symmetric up to rounding, SD three times the 0.02 threshold: the
    # interval was [-0.0125, -0.0125] and certified compliance with p = 0.342
    x = np.array([-0.0125, 0.037500000000000006, -0.0625, 0.08750000000000001, 0.06250000000000001, -0.0625,
                  -0.037500000000000006, -0.1125, 0.0125, 0.037500000000000006, -0.0125, -0.08750000000000001])
    v = S.mean_verdict(x, np.arange(12), name="MEG", threshold=0.02, sides="both", mode="certify", alpha=0.05,
                       unit="groups", rng=np.random.default_rng(0), method="skew-t", value_range=(-1, 1),
                       lattice_step=1 / 40)
    assert not v.passed and v.ci_high - v.ci_low > 0.05, v.reason


def test_lattice_floor_is_the_variance_of_net_lattice_events_at_the_bound() -> None:
    assert S.lattice_floor(-T, STEP) == pytest.approx(T * STEP)
    assert S.lattice_floor(T, None) == 0.0
    st = S.skew_t(np.array([0.0] * 11 + [-STEP]), floor=S.lattice_floor(T, STEP))
    assert st.floored and st.sd == pytest.approx(math.sqrt(T * STEP))


def test_null_variance_interval_inverts_its_test() -> None:
    lo, hi = S.null_variance_interval(EQUAL_ATTENTION_QUICK, alpha=0.05)
    assert S.null_variance_p(EQUAL_ATTENTION_QUICK, hi, "less") == pytest.approx(0.05, abs=1e-9)
    assert S.null_variance_p(EQUAL_ATTENTION_QUICK, lo, "greater") == pytest.approx(0.05, abs=1e-9)
    # the t interval widened by sqrt(n / (n - c^2))
    n, c = EQUAL_ATTENTION_QUICK.size, 1.7958848187036691
    s = EQUAL_ATTENTION_QUICK.std(ddof=1)
    assert hi - lo == pytest.approx(2 * c * s / math.sqrt(n - c * c), rel=1e-6)


def test_the_floor_only_removes_rejections() -> None:
    """The floored SD shrinks γ = m₃/s_eff³; each p-value is the larger of the floored and unfloored
    statistics', so no sample is rejected with the floor that is not rejected without it."""
    rng = np.random.default_rng(4)
    shrunk = 0
    for _ in range(300):
        n = int(rng.integers(5, 30))
        lam = rng.uniform(0.02, 3.0)
        x = (rng.poisson(lam, n) - rng.poisson(lam + rng.uniform(0, 2), n)) / 32
        if np.ptp(x) == 0:
            continue
        floor = T / 32 * rng.uniform(0.5, 20)
        raw, fl = S.skew_t(x), S.skew_t(x, floor=floor)
        for b in (-T, T):
            assert fl.p_greater(b) >= raw.p_greater(b) - 1e-12
            assert fl.p_less(b) >= raw.p_less(b) - 1e-12
        lo, hi = fl.interval(0.05)
        rlo, rhi = raw.interval(0.05)
        assert lo <= rlo + 1e-12 and hi >= rhi - 1e-12
        if fl.unfloored is not None:
            alone = dataclasses.replace(fl, unfloored=None)
            shrunk += any(alone.p_less(b) < raw.p_less(b) or alone.p_greater(b) < raw.p_greater(b) for b in (-T, T))
    assert shrunk > 0  # the floored statistic alone does reject where the unfloored one does not


def test_clusters_of_another_length_name_the_argument() -> None:
    """`clusters` shorter than `values` is a ConfigError naming both shapes, not numpy's bincount ValueError."""
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="`clusters` must have the same shape as `values`"):
        S.mean_verdict(np.arange(6.0), np.arange(5), name="m", threshold=1.0, rng=np.random.default_rng(0))


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("mode", ["detect", "certify"])
def test_a_bootstrap_too_coarse_for_alpha_does_not_decide(method: str, mode: str) -> None:
    """At α = 1e-5 with 9,999 resamples the interval is the extreme resample and p >= 1e-4: inconclusive, not decided."""
    x = np.random.default_rng(1).normal(0.5, 0.1, 40)
    threshold = 0.1 if mode == "detect" else 0.9
    kw = {"name": "m", "threshold": threshold, "mode": mode, "method": method, "n_resamples": 9999}
    v = S.mean_verdict(x, None, alpha=1e-5, rng=np.random.default_rng(0), **kw)
    assert v.inconclusive and not (mode == "certify" and v.passed) and "resamples" in v.reason
    ok = S.mean_verdict(x, None, alpha=1e-3, rng=np.random.default_rng(0), **kw)  # 9,999 resolve α = 0.001
    assert not ok.inconclusive and ok.passed == (mode == "certify") and ok.p_value < 1e-3
