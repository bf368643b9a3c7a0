"""Sequential decisions: group-sequential boundaries, error rates after early stopping, the CS."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_posbias.stats.sequential import (
    gsd_best_stop,
    gsd_boundaries,
    gsd_decide,
    gsd_sizes,
    gsd_step,
    obf_spending,
    violation_alternative,
)


def test_obf_boundaries_match_the_textbook():
    # Lan-DeMets O'Brien-Fleming spending, one-sided 0.025, three equally spaced looks:
    # Jennison & Turnbull (2000) table 7.6 gives 3.71, 2.51, 1.99
    assert gsd_boundaries([1 / 3, 2 / 3, 1], 0.025) == pytest.approx([3.710, 2.511, 1.993], abs=2e-3)
    assert obf_spending(1.0, 0.05) == pytest.approx(0.05)
    assert obf_spending(0.25, 0.05) < 1e-4
    four = gsd_boundaries([0.25, 0.5, 0.75, 1.0], 0.05)
    assert four == sorted(four, reverse=True) and four[-1] > 1.6449  # the last look pays a little for the early ones


def test_sizes():
    assert gsd_sizes(60, 4) == [15, 30, 45, 60]
    assert gsd_sizes(5, 4) == [2, 3, 4, 5]


@pytest.mark.parametrize("kind", ["rate", "mean"])
def test_false_failure_rate_at_the_boundary_stays_below_alpha_with_early_stopping(kind):
    rng = np.random.default_rng(7)
    reps, n, t = 600, 60, 0.15
    fails = 0
    used = []
    for _ in range(reps):
        x = (rng.random(n) < t).astype(float) if kind == "rate" else rng.normal(t, 0.2, n)
        d = gsd_decide(x, n_max=n, looks=4, lower=-math.inf, upper=t, mode="detect", alpha=0.05, kind=kind)
        fails += not d.passed
        used.append(d.stopped_at)
    # binomial 95% upper bound of the observed rate must reach 0.05 or be below it
    from scipy.stats import binomtest

    assert binomtest(fails, reps).proportion_ci(0.95).low <= 0.05
    assert min(used) < n  # early looks did stop some runs


def test_false_pass_rate_in_certify_mode():
    rng = np.random.default_rng(8)
    reps, n = 500, 60
    passes = sum(gsd_decide((rng.random(n) < 0.15).astype(float), n_max=n, looks=4, lower=-math.inf, upper=0.15,
                            mode="certify", alpha=0.05, kind="rate").passed for _ in range(reps))
    assert passes / reps <= 0.07


def test_early_stop_for_a_large_violation_and_for_futility():
    rng = np.random.default_rng(9)
    strong = (rng.random(60) < 0.7).astype(float)
    d = gsd_decide(strong, n_max=60, looks=4, lower=-math.inf, upper=0.15, mode="detect", alpha=0.05, kind="rate")
    assert not d.passed and d.stopped_at <= 30 and "outside" in d.reason and d.p_value < 0.05
    clean = np.zeros(60)
    d0 = gsd_decide(clean, n_max=60, looks=4, lower=-math.inf, upper=0.15, mode="detect", alpha=0.05, kind="rate")
    assert d0.passed and d0.stopped_at < 60 and ("futility" in d0.reason or "inside" in d0.reason)


def test_step_returns_none_while_undecided():
    x = np.array([0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0], dtype=float)
    assert gsd_step(x, look=0, n_max=60, looks=4, lower=-math.inf, upper=0.15, mode="detect", alpha=0.05,
                    kind="rate", futility=0.0) is None
    last = gsd_step(x, look=3, n_max=60, looks=4, lower=-math.inf, upper=0.15, mode="detect", alpha=0.05, kind="rate")
    assert last is not None and last.stopped_at == 15


@pytest.mark.parametrize("rule,step", [("both-t", None), ("skew-t", 1 / 32)])
def test_certify_p_value_agrees_with_the_decision_for_the_t_rules(rule, step):
    """A certify-mode p-value is the rule's own p of "mean past a bound", so p <= α exactly when the
    repeated interval lies inside the region: for two rules at α/2 each (DPB) and for a floored
    skewness-corrected t (MEG), 1 − the detect side's p was 0 or the hull's smaller p."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        x = 0.03 * rng.standard_normal(48) + rng.normal(0, 0.02)
        d = gsd_decide(x, n_max=48, looks=4, lower=-0.05, upper=0.05, mode="certify", alpha=0.05, kind="mean",
                       rule=rule, lattice_step=step)
        assert (d.p_value <= 0.05) == d.passed, (d.p_value, d.passed, d.reason)
        if not d.passed:
            assert d.p_value > 0.05


@pytest.mark.parametrize(("lower", "upper", "est", "side"), [
    (0.25, math.inf, 0.3, "below"),   # a floor: the alternative lies below it
    (-math.inf, 0.15, 0.0, "above"),  # a rate ceiling: above it
    (-0.02, 0.02, 0.01, "above"),     # two-sided, estimate positive: above +t
    (-0.02, 0.02, -0.01, "below"),    # two-sided, estimate negative: below −t
])
def test_the_futility_alternative_always_violates_the_region(lower, upper, est, side):
    th1 = violation_alternative(lower, upper, est)
    assert (th1 < lower) if side == "below" else (th1 > upper)


def test_coverage_floor_fails_a_violating_model_in_the_sequential_design():
    """True mean 0.13 against the 0.25 floor passed ~90% of the time (futility
    looked for a violation of 0.5, on the compliant side). A fixed one-sided t-test at n = 48 has
    power ~1 here (scipy's noncentral t); the sequential gate must come close."""
    rng = np.random.default_rng(12)
    n, sd, mu, floor = 48, 0.12, 0.13, 0.25
    ncp = (floor - mu) / (sd / math.sqrt(n))
    power_fixed = float(st.nct.sf(st.t.isf(0.05, n - 1), n - 1, ncp))
    assert power_fixed > 0.99
    fails = sum(not gsd_decide(np.clip(rng.normal(mu, sd, n), 0, 1), n_max=n, looks=4, lower=floor, upper=math.inf,
                               mode="detect", alpha=0.05, kind="mean").passed for _ in range(200))
    assert fails / 200 >= 0.95
    # and a compliant model (mean 0.5) is not failed
    fp = sum(not gsd_decide(np.clip(rng.normal(0.5, sd, n), 0, 1), n_max=n, looks=4, lower=floor, upper=math.inf,
                            mode="detect", alpha=0.05, kind="mean").passed for _ in range(200))
    assert fp == 0


@pytest.mark.parametrize(("units", "n_max", "upper", "alpha", "kind"), [
    ([0, 0, 0, 1, 0, 1, 0], 10, 0.15, 0.05, "rate"),  # 2/7 = 0.29 over a 0.15 ceiling, θ1 = 0.3
    ([1, 0, 1, 1], 10, 0.02, 1e-9, "rate"),           # 3/4 over a 0.02 ceiling, θ1 = 0.04 at a tiny α
    ([0.07, -0.02, 0.02, 0.04, 0.0, -0.09, -0.02, 0.03, 0.07, 0.0, 0.02, 0.0, 0.99, 1.0], 20, 0.1, 0.05, "mean"),
])
def test_futility_never_stops_a_detect_gate_whose_estimate_is_past_the_bound(units, n_max, upper, alpha, kind):
    """The conditional power at θ1 can be small while the data already violate (θ1 nearer the bound
    than the estimate, or a last look too small for θ1): such a look goes on instead of passing."""
    x = np.asarray(units, dtype=float)
    assert x.mean() > upper
    looks = gsd_sizes(n_max, 3)
    k = looks.index(x.size)
    assert k < len(looks) - 1
    assert gsd_step(x, look=k, n_max=n_max, lower=0.0, upper=upper, mode="detect", alpha=alpha, kind=kind) is None


def test_every_futility_stop_has_its_estimate_inside_the_region():
    rng = np.random.default_rng(0)
    stops = 0
    for alpha in (0.05, 1e-3, 1e-9):
        for upper in (0.02, 0.1, 0.2, 0.4):
            for p in (0.0, 0.05, 0.3, 0.7):
                for n in (10, 40, 100):
                    x = (rng.random(n) < p).astype(float)
                    d = gsd_decide(x, n_max=n, lower=0.0, upper=upper, mode="detect", alpha=alpha, kind="rate")
                    if "futility" in d.reason:
                        stops += 1
                        assert d.estimate <= upper, (alpha, upper, p, n, d)
    assert stops > 0


def test_coverage_floor_futility_still_stops_a_clearly_compliant_model_early():
    rng = np.random.default_rng(3)
    d = gsd_decide(np.clip(rng.normal(0.6, 0.1, 48), 0, 1), n_max=48, looks=4, lower=0.25, upper=math.inf,
                   mode="detect", alpha=0.05, kind="mean")
    assert d.passed and d.stopped_at < 48


@pytest.mark.parametrize(("n_max", "threshold"), [(2, 0.25), (4, 0.5), (60, 0.99)])
def test_a_rate_gate_too_small_to_ever_fail_is_inconclusive_not_a_pass(n_max, threshold):
    """A sequential rate gate whose maximum sample cannot show any violation is inconclusive, as the fixed design's."""
    from pytest_posbias.stats import rate_min_sample, rate_verdict

    assert n_max < rate_min_sample(threshold=threshold, mode="detect", alpha=0.05)
    assert rate_verdict(n_max, n_max, name="r", threshold=threshold).inconclusive  # the fixed design
    d = gsd_decide(np.ones(n_max), n_max=n_max, looks=4, lower=-math.inf, upper=threshold, mode="detect",
                   alpha=0.05, kind="rate")
    assert d.inconclusive


def test_in_certify_mode_a_small_rate_gate_still_fails_on_a_shown_violation():
    """Certify mode at a size too small to certify: every unit violating is a FAIL (exit 1), not an inconclusive
    NOT MEASURED; the inconclusive rule guards detect mode, where such a gate would pass every model."""
    d = gsd_decide(np.ones(8), n_max=8, looks=3, lower=-math.inf, upper=0.15, mode="certify", alpha=0.05, kind="rate")
    assert not d.passed and not d.inconclusive


def test_a_rate_gate_that_can_fail_fails_when_every_unit_violates():
    """At the smallest sample that can show a violation, every unit violating fails the gate."""
    d = gsd_decide(np.ones(3), n_max=3, looks=4, lower=-math.inf, upper=0.25, mode="detect", alpha=0.05, kind="rate")
    assert not d.passed and not d.inconclusive


def test_the_design_decides_at_every_alpha_the_settings_accept():
    """At α = 1e-9 (accepted by [tool.posbias] alpha) the group-sequential design still decides."""
    from pytest_posbias.config import check_alpha

    assert check_alpha(1e-9, "alpha") == 1e-9
    d = gsd_decide(np.zeros(40), n_max=40, looks=4, lower=-math.inf, upper=0.15, mode="detect", alpha=1e-9,
                   kind="rate")
    assert d.passed and not d.inconclusive


def test_the_boundaries_at_a_small_alpha_decrease_and_stay_finite():
    """At α = 0.001 the four OBF boundaries are finite, decreasing and above z_{1−α}."""
    cs = gsd_boundaries([0.25, 0.5, 0.75, 1.0], 0.001)
    assert all(math.isfinite(c) for c in cs) and cs == sorted(cs, reverse=True) and cs[-1] > st.norm.isf(0.001)


def test_a_rate_ceiling_whose_measured_last_look_is_too_small_to_fail_is_inconclusive():
    """61 of 64 planned units measured, every one violating a 0.95 ceiling: below the 62 the last look needs, inconclusive."""
    from pytest_posbias.stats.sequential import gsd_sizes, gsd_step

    sizes = gsd_sizes(64, 4)
    d = gsd_step(np.ones(61), look=len(sizes) - 1, n_max=64, looks=4, lower=-math.inf, upper=0.95, mode="detect",
                 alpha=0.05, kind="rate")
    assert d is not None and d.inconclusive and "61 units" in d.reason and "62" in d.reason
    full = gsd_step(np.ones(64), look=len(sizes) - 1, n_max=64, looks=4, lower=-math.inf, upper=0.95, mode="detect",
                    alpha=0.05, kind="rate")
    assert full is not None and not full.passed and not full.inconclusive  # 64 of 64 shows the violation


# the suites' sequential gates: MEG (skew-t, variance floored on the coverage lattice), DPB-like two-sided
# means, the coverage floor, a rate ceiling
_BEST_STOP_CASES = [dict(kind="rate", lower=-math.inf, upper=0.15, value_range=(0.0, 1.0)),
                    dict(kind="mean", lower=-0.02, upper=0.02, value_range=(-1.0, 1.0), rule="skew-t",
                         lattice_step=0.03125),
                    dict(kind="mean", lower=-0.05, upper=0.05, value_range=(-1.0, 1.0)),
                    dict(kind="mean", lower=0.25, upper=math.inf, value_range=(0.0, 1.0))]


def _best_stop_sample(rng, case, n):
    """Units of the kinds the suites produce: rare events, skewed, zero-spread and few-cluster means."""
    if case["kind"] == "rate":
        return (rng.random(n) < rng.choice([0.0, 0.01, 0.05, 0.15, 0.3])).astype(float)
    lo, hi = case["value_range"]
    centre = rng.uniform(max(case["lower"], lo), min(case["upper"], hi))
    shape = rng.integers(3)
    if shape == 0:  # zero spread
        return np.full(n, centre)
    if shape == 1:  # skewed: a few large units among small ones
        x = centre + rng.exponential(rng.choice([0.01, 0.1, 0.5]), n) * rng.choice([-1, 1])
    else:
        x = rng.normal(centre, rng.choice([1e-4, 0.01, 0.1, 0.3, 1.0]), n)
    return np.clip(x, lo, hi)


@pytest.mark.parametrize("mode", ["detect", "certify"])
def test_no_sample_passes_before_the_best_stop(mode):
    """gsd_best_stop is the fewest units any sample passes on: 1,000 samples per design (250 per maximum
    size), none passes earlier; the next test pins the stops themselves, so the bound is not vacuous."""
    rng = np.random.default_rng(7)
    for case in _BEST_STOP_CASES:
        for n_max in (8, 12, 48, 60):
            best = gsd_best_stop(n_max=n_max, looks=4, mode=mode, alpha=0.05, **case)
            assert best in gsd_sizes(n_max, 4)
            stops = [gsd_decide(_best_stop_sample(rng, case, n_max), n_max=n_max, looks=4, mode=mode, alpha=0.05,
                                **{k: v for k, v in case.items() if k != "value_range"},
                                value_range=case["value_range"] if case["kind"] == "mean" else None)
                     for _ in range(250)]
            early = [d for d in stops if d.passed and not d.inconclusive and d.stopped_at < best]
            assert not early, (case, n_max, best, early[0])


def test_the_best_stop_follows_the_rule_s_minimum_sample():
    """A mean gate passes from 8 units on (the quick MEG design of 12 groups cannot stop at 3 or 6), a
    certify gate not before its ``certify_from``; the suites' default MEG design at its first look (12 of 48
    groups), the flip rate at its second (an all-zero sample of 15 items is no futility stop yet)."""
    meg = _BEST_STOP_CASES[1]
    assert gsd_best_stop(n_max=12, looks=4, mode="detect", alpha=0.05, **meg) == 9
    assert gsd_best_stop(n_max=48, looks=4, mode="detect", alpha=0.05, **meg) == 12
    assert gsd_best_stop(n_max=48, looks=4, mode="certify", alpha=0.05, certify_from=24,
                         **_BEST_STOP_CASES[2]) == 24
    assert gsd_best_stop(n_max=60, looks=4, mode="detect", alpha=0.05, **_BEST_STOP_CASES[0]) == 30
