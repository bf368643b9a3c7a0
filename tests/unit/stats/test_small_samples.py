"""Small and degenerate samples refuse instead of guess: each rule below decides only where its
sample can carry the decision, and says "inconclusive" otherwise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_posbias import stats as S
from pytest_posbias.errors import ConfigError
from pytest_posbias.stats.sequential import gsd_boundaries, gsd_decide, gsd_sizes, gsd_step, violation_alternative


def test_fewer_than_min_clusters_is_inconclusive_not_a_plain_pass():
    v = S.mean_verdict([0.1, 0.2, 0.3], None, name="MEG", threshold=0.02, rng=np.random.default_rng(0))
    assert v.inconclusive and v.outcome == "inconclusive"
    c = S.mean_verdict([0.1, 0.2, 0.3], None, name="MEG", threshold=0.02, mode="certify", rng=np.random.default_rng(0))
    assert c.inconclusive and not c.passed
    assert S.Verdict.from_dict(c.to_dict()) == c  # the new state survives the run log


def test_a_rate_below_its_minimum_sample_is_inconclusive():
    # certify against 0.15: 0/n has p = 0.85^n, below α = 0.05 only from n = 19 on
    assert S.rate_min_sample(threshold=0.15, mode="certify", alpha=0.05) == 19
    v = S.rate_verdict(0, 18, name="flip", threshold=0.15, mode="certify")
    assert v.inconclusive and not v.passed and v.extra["min_sample"] == 19
    w = S.rate_verdict(0, 19, name="flip", threshold=0.15, mode="certify")
    assert w.passed and not w.inconclusive
    assert S.rate_min_sample(threshold=0.15, mode="detect", alpha=0.05) == 2


@pytest.mark.parametrize(("threshold", "what"), [(0.025, "equivalence"), (0.02, "DPB")])
def test_zero_spread_never_certifies(threshold, what):
    v = S.mean_verdict(np.zeros(5), None, name=what, threshold=threshold, sides="both", mode="certify",
                       rng=np.random.default_rng(0))
    assert not v.passed and v.inconclusive
    # 60 clusters all zero: still no spread to bound the mean with
    assert not S.mean_verdict(np.zeros(60), np.repeat(np.arange(12), 5), name=what, threshold=threshold, sides="both",
                              mode="certify", rng=np.random.default_rng(0)).passed


def test_zero_spread_with_a_known_range_uses_the_exact_floor():
    # 0/1 units all 0: the floor is the Clopper-Pearson bound of 0/n
    lo, hi, _, p_cert = S.zero_spread_interval(0.0, 40, lower=-math.inf, upper=0.15, alpha=0.05, value_range=(0, 1))
    assert hi == pytest.approx(S.exact_interval(0, 40, confidence_level=0.90)[1])
    assert lo == 0.0
    assert p_cert == pytest.approx(S.binomial_test(0, 40, 0.15, alternative="less"))
    v = S.mean_verdict(np.zeros(48), None, name="DPB", threshold=0.02, sides="both", mode="certify",
                       rng=np.random.default_rng(0), value_range=(-1.0, 1.0))
    assert not v.passed and v.ci_high == pytest.approx(1 - 0.05 ** (1 / 48))


def test_the_sequential_mean_design_does_not_certify_zero_spread():
    d = gsd_decide(np.zeros(8), n_max=8, looks=4, lower=-0.02, upper=0.02, mode="certify", alpha=0.05, kind="mean")
    assert not d.passed and d.inconclusive


def test_the_sequential_mean_design_decides_zero_spread_on_the_exact_floor_with_a_value_range():
    # 40 groups, every contamination rate 0: the floor at the last look's level is inside <= 0.10
    sizes = gsd_sizes(40, 4)
    a_last = float(st.norm.sf(gsd_boundaries([s / 40 for s in sizes], 0.05)[-1]))
    d = gsd_decide(np.zeros(40), n_max=40, looks=4, lower=-math.inf, upper=0.10, mode="certify", alpha=0.05,
                   kind="mean", value_range=(0.0, 1.0))
    assert d.passed and not d.inconclusive and d.stopped_at == 40
    assert d.ci_high == pytest.approx(1 - a_last ** (1 / 40))
    assert d.p_value == pytest.approx(0.9**40 * 0.05 / a_last)  # the worst case: mass 0.9 at 0, the rest at 1
    # just past what 40 flat units can certify: an upper bound under the floor is not shown
    assert not gsd_decide(np.zeros(40), n_max=40, looks=4, lower=-math.inf, upper=0.99 * d.ci_high, mode="certify",
                          alpha=0.05, kind="mean", value_range=(0.0, 1.0)).passed
    # 20 flat units cannot certify 0.10 (1 − a^(1/20) > 0.10): a decision, not an inconclusive one
    d20 = gsd_decide(np.zeros(20), n_max=20, looks=4, lower=-math.inf, upper=0.10, mode="certify", alpha=0.05,
                     kind="mean", value_range=(0.0, 1.0))
    assert not d20.passed and not d20.inconclusive
    # flat at the bound itself never certifies; flat past it in detect mode fails
    assert not gsd_decide(np.full(40, 0.10), n_max=40, looks=4, lower=-math.inf, upper=0.10, mode="certify",
                          alpha=0.05, kind="mean", value_range=(0.0, 1.0)).passed
    assert not gsd_decide(np.full(40, 0.12), n_max=40, looks=4, lower=-math.inf, upper=0.10, mode="detect",
                          alpha=0.05, kind="mean", value_range=(0.0, 1.0)).passed


def test_zero_spread_past_the_bound_still_fails_in_detect_mode():
    d = gsd_decide(np.zeros(8), n_max=8, looks=4, lower=0.25, upper=math.inf, mode="detect", alpha=0.05, kind="mean")
    assert not d.passed and not d.inconclusive


def test_nan_in_the_first_look_never_passes_the_sequential_mean_gate():
    x = np.r_[np.nan, np.zeros(39)]
    for mode in ("detect", "certify"):
        d = gsd_decide(x, n_max=40, looks=4, lower=-0.02, upper=0.02, mode=mode, alpha=0.05, kind="mean")
        assert not d.passed and d.inconclusive and "not finite" in d.reason
        assert gsd_step(x[:10], look=0, n_max=40, looks=4, lower=-0.02, upper=0.02, mode=mode, alpha=0.05,
                        kind="mean") is not None  # stops at the look that holds it


def test_nan_in_any_unit_never_passes_a_mean_or_stressor_gate():
    x = np.r_[np.linspace(-0.01, 0.01, 20), np.nan]
    for mode in ("detect", "certify"):
        v = S.mean_verdict(x, None, name="MEG", threshold=0.02, mode=mode, rng=np.random.default_rng(0))
        assert not v.passed and v.inconclusive
    w = S.share_difference_verdict(np.r_[np.full(20, 0.1), np.nan], np.zeros(21), name="amp", threshold=0.1,
                                   rng=np.random.default_rng(0))
    assert not w.passed


def test_the_sequential_rate_certify_p_value_is_exact():
    d = gsd_decide(np.zeros(20), n_max=20, looks=1, lower=-math.inf, upper=0.15, mode="certify", alpha=0.05, kind="rate")
    assert d.passed
    assert d.p_value == pytest.approx(0.85**20)  # P(X <= 0 | n = 20, p = 0.15) = 0.039


@pytest.mark.parametrize(("lower", "upper", "est", "theta1"), [
    (-0.02, 0.02, 0.01, 0.04), (-0.02, 0.02, -0.01, -0.04), (-math.inf, 0.15, 0.0, 0.30), (0.25, math.inf, 0.3, 0.125),
])
def test_the_futility_alternative_is_twice_the_threshold(lower, upper, est, theta1):
    assert violation_alternative(lower, upper, est) == pytest.approx(theta1)


def test_the_run_level_decision_reads_the_inconclusive_state():
    from pytest_posbias.gates import decision as D

    few = S.mean_verdict([0.1, 0.2, 0.3], None, name="MEG", threshold=0.02, mode="certify", rng=np.random.default_rng(0))
    assert D.not_measured_reason(few) == "inconclusive (fewer than 5 independent units for a cluster bootstrap)"
    flat = S.mean_verdict(np.full(12, 0.3), None, name="MEG", threshold=0.02, mode="certify",
                          rng=np.random.default_rng(0))
    assert D.not_measured_reason(flat) == "inconclusive (zero spread)"  # the why, not "too few units"
    nan = S.mean_verdict(np.r_[np.zeros(9), np.nan], None, name="MEG", threshold=0.02, rng=np.random.default_rng(0))
    assert not nan.passed and D.not_measured_reason(nan) == "inconclusive (unit values not measured)"
    ok = S.mean_verdict(np.linspace(-0.01, 0.01, 20), None, name="MEG", threshold=0.02, rng=np.random.default_rng(0),
                        n_resamples=999)
    assert not D.inconclusive(ok) and D.not_measured_reason(ok) is None


def test_the_power_note_of_a_rate_gate_is_the_exact_binomial_figure():
    from pytest_posbias.gates import decision as D

    v = S.rate_verdict(6, 60, name="flip", threshold=0.15)
    assert D.detectable_effect(v) == pytest.approx(S.detectable_effect(kind="rate", n=60, threshold=0.15) - 0.15)


def test_the_mean_gate_passes_the_registry_value_range_to_its_rule():
    """Five MEG groups all at −1/32 (past −0.02) in detect mode: without the gate's
    value range the zero-spread branch fails on a zero-width interval (p = 0); with it the exact
    worst-case floor shows no violation from five units."""
    from types import SimpleNamespace

    from pytest_posbias.gates.verdict_builders import mean_gate

    ctx = SimpleNamespace(mode="detect", alpha=0.05, n_resamples=999, threshold=lambda gate, model: 0.02,
                          rng=lambda *a: np.random.default_rng(0))
    v = mean_gate(ctx, "meg", "m", np.full(5, -1 / 32), np.arange(5), name="meg", unit="groups", method="skew-t",
                  lattice_step=1 / 32)
    assert v.passed and v.p_value > 0.5
    assert v.ci_low < -0.02 and v.ci_high > 0.02


def test_a_t_rule_never_certifies_from_fewer_than_eight_units():
    """Near-zero spread: [0, 0, 0, 0, 0.001] certified |DPB| <= 0.05 from 5 groups (p ~ 1e-9) with a
    t rule; from fewer than MIN_T_UNITS units certify mode is inconclusive (the group-sequential
    design already decides a mean from that many units on). Detect keeps its minimum."""
    import numpy as np

    from pytest_posbias.stats import mean_verdict
    from pytest_posbias.stats.rules import MIN_T_UNITS

    near = np.array([0.0, 0.0, 0.0, 0.0, 0.001])
    for method in ("t", "skew-t", "both-t"):
        v = mean_verdict(near, None, name="DPB", threshold=0.05, sides="both", mode="certify", alpha=0.05,
                         rng=np.random.default_rng(0), method=method)
        assert not v.passed and v.inconclusive and f"fewer than {MIN_T_UNITS}" in v.reason
        d = mean_verdict(near, None, name="DPB", threshold=0.05, sides="both", mode="detect", alpha=0.05,
                         rng=np.random.default_rng(0), method=method)
        assert d.passed and not d.inconclusive
    eight = np.array([0.0] * 7 + [0.001])
    assert mean_verdict(eight, None, name="DPB", threshold=0.05, sides="both", mode="certify", alpha=0.05,
                        rng=np.random.default_rng(0), method="both-t").passed


def test_a_sample_flat_up_to_rounding_is_zero_spread_not_a_tiny_variance():
    # 24 groups at 0.08, one a rounding step higher: a t rule would read sd ≈ 1e-17 and certify
    x = np.full(24, 0.08)
    x[0] = np.nextafter(0.08, 1.0)
    v = S.mean_verdict(x, None, name="c", threshold=0.10, sides="upper", mode="certify", method="both-t",
                       rng=np.random.default_rng(0), value_range=(0.0, 1.0))
    assert not v.passed and "zero spread" in v.extra["method"]
    d = gsd_decide(x, n_max=24, looks=4, lower=-math.inf, upper=0.10, mode="certify", alpha=0.05, kind="mean",
                   rule="both-t", value_range=(0.0, 1.0))
    assert not d.passed and "zero spread" in d.method


def test_the_sequential_detect_design_decides_a_flat_sample_past_the_bound_on_the_floor():
    # every one of 12 groups at 0.12 against <= 0.10: a null with mass 0.83 at 0.12 and the rest at 0
    # gives this sample 11% of the time, so the floor does not fail it (the fixed design agrees); at 40
    # groups it fails
    kw = {"looks": 4, "lower": -math.inf, "upper": 0.10, "mode": "detect", "alpha": 0.05, "kind": "mean",
          "value_range": (0.0, 1.0)}
    assert gsd_decide(np.full(12, 0.12), n_max=12, **kw).passed
    assert S.mean_verdict(np.full(12, 0.12), None, name="c", threshold=0.10, sides="upper",
                          rng=np.random.default_rng(0), value_range=(0.0, 1.0)).passed
    assert not gsd_decide(np.full(40, 0.12), n_max=40, **kw).passed


def test_no_look_under_the_certify_minimum_passes():
    # a sample that certifies at the 12-group look of a 48-group design when any look may pass
    x = np.r_[np.full(11, 1 / 16), 0.0, np.full(36, 0.3)]
    kw = {"n_max": 48, "looks": 4, "lower": -math.inf, "upper": 0.10, "mode": "certify", "alpha": 0.05,
          "kind": "mean", "rule": "both-t", "value_range": (0.0, 1.0)}
    early = gsd_decide(x, **kw)
    assert early.passed and early.stopped_at == 12
    late = gsd_decide(x, certify_from=24, **kw)
    assert not late.passed and late.stopped_at > 12  # the later groups show the rate past 0.10


def test_a_flat_sample_is_decided_on_the_floor_from_the_fixed_designs_minimum_in_both_designs():
    # 6 groups at 0.9 against <= 0.10: under any null the floor excludes, six equal units at 0.9 have
    # probability <= (1/9)^6; the exact floor needs no t interval's 8 units, only MIN_CLUSTERS
    kw = {"looks": 4, "lower": -math.inf, "upper": 0.10, "mode": "detect", "alpha": 0.05, "kind": "mean",
          "value_range": (0.0, 1.0)}
    seq = gsd_decide(np.full(6, 0.9), n_max=6, **kw)
    fixed = S.mean_verdict(np.full(6, 0.9), None, name="c", threshold=0.10, sides="upper",
                           rng=np.random.default_rng(0), value_range=(0.0, 1.0))
    assert not seq.passed and not seq.inconclusive
    assert not fixed.passed and not fixed.inconclusive
    # under the fixed design's minimum both say so instead of deciding
    few = gsd_decide(np.full(4, 0.9), n_max=4, **kw)
    assert few.inconclusive and "fewer than 5 units" in few.reason
    assert S.mean_verdict(np.full(4, 0.9), None, name="c", threshold=0.10, sides="upper",
                          rng=np.random.default_rng(0), value_range=(0.0, 1.0)).inconclusive


@pytest.mark.parametrize(("option", "value"), [("alpha", 1.5), ("alpha", 0.0), ("n_max", 0), ("looks", 0)])
def test_gsd_step_names_the_bad_option(option, value):
    kw = {"look": 0, "n_max": 12, "looks": 4, "lower": -math.inf, "upper": 0.10, "mode": "detect", "alpha": 0.05,
          "kind": "mean", option: value}
    with pytest.raises(ConfigError, match=f"`{option}`"):
        gsd_step(np.zeros(3), **kw)
