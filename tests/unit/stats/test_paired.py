"""Paired comparisons against a baseline hold their size at the margin (docs/design.md section 5).

Each rule is checked at the boundary of its null where the previous rule broke: the kink of
|μc| − |μb| at μb = 0 and the rare ±1 clean-flag component of the stressor amplification
difference; the paired binary verdict's margins and McNemar case. The exact test of paired binary
outcomes itself is in test_paired_binary.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_posbias.errors import ConfigError
from pytest_posbias.run_options import RunOptions
from pytest_posbias.stats import paired_change_verdict
from pytest_posbias.stats.paired import abs_bias_bounds, paired_abs_mean_verdict, paired_amplification_verdict


def _certify_pass_rate(base_sd: float, reps: int = 300) -> float:
    """MEG margin 0.01, 48 groups × 4 orders, candidate at the margin (μc = 0.01) and an unbiased
    baseline (μb = 0): every certify pass is a false pass."""
    rng = np.random.default_rng(11)
    g = np.repeat(np.arange(48), 4)
    passes = 0
    for _ in range(reps):
        c = rng.normal(0.01, 0.18, g.size)
        b = rng.normal(0.0, base_sd, g.size)
        passes += paired_abs_mean_verdict(c, b, g, name="MEG", margin=0.01, mode="certify").passed
    return passes / reps


def test_certify_at_the_margin_holds_its_size_with_a_noisier_baseline():
    """The bootstrap of |c̄| − |b̄| certified 29–61% of these candidates; 300 replicates at α = 0.05
    put a valid rule under 0.09 (binomial 99.9% bound)."""
    for k in (1, 3, 6):
        assert _certify_pass_rate(0.18 * k) <= 0.09, k


def test_detect_does_not_fail_an_unbiased_noisy_candidate_too_often():
    rng = np.random.default_rng(12)
    g = np.repeat(np.arange(48), 4)
    fails = sum(not paired_abs_mean_verdict(rng.normal(0, 0.18, g.size), rng.normal(0, 0.18 / 25, g.size), g,
                                            name="MEG", margin=0.01).passed for _ in range(300))
    assert fails / 300 <= 0.09


def test_abs_bounds_cover_the_truth_on_the_worked_corners():
    # ĉ = 0.03, b̂ = 0, SE 0.01 for both combinations, q = 2: L = 0.03 − 0.02 − 0 = 0.01 at best sign
    lo, hi = abs_bias_bounds(0.03, 0.0, 0.01, 0.01, 2.0)
    assert lo == pytest.approx(0.01) and hi == pytest.approx(0.05)
    # a baseline far from 0 with the same sign: the paired difference c − b decides
    lo, hi = abs_bias_bounds(0.5, 0.4, 0.01, 0.3, 2.0)
    assert lo == pytest.approx(0.5 - 0.4 - 0.02) and hi == pytest.approx(0.5 - 0.4 + 0.02)


def test_abs_verdict_p_value_agrees_with_its_interval():
    rng = np.random.default_rng(3)
    g = np.repeat(np.arange(30), 4)
    for mc in (0.0, 0.03, 0.08, -0.08):
        c, b = rng.normal(mc, 0.1, g.size), rng.normal(0.02, 0.1, g.size)
        for mode in ("detect", "certify"):
            v = paired_abs_mean_verdict(c, b, g, name="MEG", margin=0.02, mode=mode)
            decided = (not v.passed) if mode == "detect" else v.passed
            assert decided == (v.p_value < 0.05), (mc, mode, v.reason)
            assert v.ci_low <= v.estimate <= v.ci_high


def test_abs_verdict_without_variation_is_inconclusive():
    g = np.repeat(np.arange(6), 2)
    v = paired_abs_mean_verdict(np.zeros(12), np.zeros(12), g, name="MEG", margin=0.01, mode="certify")
    assert not v.passed and "vary" in v.reason


def test_no_discordance_at_n_24_does_not_certify_a_tenth():
    """24 items, none discordant: a candidate worse by 0.10 with all discordance one way shows this
    0.9^24 = 8% of the time, so compliance is not shown (the conditional rule certified it)."""
    z = np.zeros(24, dtype=int)
    v = paired_change_verdict(z, z, name="search", threshold=0.10, mode="certify")
    assert not v.passed and v.p_value == pytest.approx(0.9**24, rel=1e-6)


def test_margin_zero_stays_exact_mcnemar():
    a = np.r_[np.ones(9), np.zeros(31)].astype(int)
    b = np.r_[np.zeros(7), np.ones(3), np.zeros(30)].astype(int)
    v = paired_change_verdict(a, b, name="fusion", threshold=0.0, mode="detect")
    n10, n01 = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    assert v.p_value == pytest.approx(st.binomtest(n10, n10 + n01, 0.5, alternative="greater").pvalue)
    assert "McNemar" in v.extra["method"]


def test_a_margin_outside_the_unit_interval_names_the_parameter():
    with pytest.raises(ConfigError, match="`threshold`"):
        paired_change_verdict(np.zeros(5, dtype=int), np.zeros(5, dtype=int), name="x", threshold=1.5)


def _stressor_fail_rate(n: int, reps: int, rule: str) -> float:
    """Left-skewed differences at the margin 0.05: the candidate's rare clean repeats (10%) give
    d = a_cand − a_base a rare −1 that small samples miss."""
    rng = np.random.default_rng(21)
    fails = 0
    for _ in range(reps):
        fc, fb = (rng.random(n) < 0.10).astype(float), (rng.random(n) < 0.02).astype(float)
        sc, sb = rng.binomial(10, 0.18, n) / 10, rng.binomial(10, 0.05, n) / 10
        if rule == "new":
            v = paired_amplification_verdict(sc, fc, sb, fb, name="add1", margin=0.05)
            fails += not v.passed
        else:  # the t interval of mean d, which the percentile bootstrap approximates
            d = (sc - fc) - (sb - fb)
            fails += d.mean() - st.t.ppf(0.95, n - 1) * d.std(ddof=1) / np.sqrt(n) > 0.05
    return fails / reps


def test_paired_stressor_comparison_holds_its_size_on_left_skewed_differences():
    assert _stressor_fail_rate(16, 400, "t") >= 0.09  # the mean-d interval: ~14% false failures here
    assert _stressor_fail_rate(16, 60, "new") <= 0.05


def test_amplification_verdict_rejects_bad_flags_and_decides_as_its_interval():
    with pytest.raises(ConfigError, match="`cand_clean`"):
        paired_amplification_verdict(np.zeros(6), np.full(6, 0.5), np.zeros(6), np.zeros(6), name="x", margin=0.05)
    rng = np.random.default_rng(5)
    n = 40
    sc, sb = rng.binomial(4, 0.6, n) / 4, rng.binomial(4, 0.1, n) / 4
    fc, fb = np.zeros(n), (rng.random(n) < 0.1).astype(float)
    v = paired_amplification_verdict(sc, fc, sb, fb, name="x", margin=0.05)
    assert not v.passed and v.ci_low > 0.05 and v.p_value < 0.05
    w = paired_amplification_verdict(sb, fb, sb, fb, name="x", margin=0.05, mode="certify")
    assert not w.passed and "same amount on every video" in w.reason  # no variation: no certificate


def test_benchmark_stressor_decisions_are_the_verdicts():
    """benchmarks/decision.py decides the paired stressor rows vectorised; on the same units the
    verdict itself must decide the same way (fails, passes and undecided alike)."""
    from benchmarks.decision import (
        ALPHA,
        SCENARIOS,
        STRESS_MARGIN,
        _exact_bounds,
        stressor_decisions,
        stressor_units,
    )

    n, trials, reps = 60, 30, 5
    bounds = _exact_bounds(n, ALPHA / 2)
    seen = 0
    for label, shift in (("left-skewed", 0.10), ("cand loops", -0.10)):
        cand, base = SCENARIOS[label]
        units = stressor_units(np.random.default_rng(4), reps, n, trials, (cand.moved(shift), base))
        for mode in ("detect", "certify"):
            vec = stressor_decisions(units, bounds, mode)
            for r in range(reps):
                sc, fc, sb, fb = (u[r].astype(float) for u in units)
                v = paired_amplification_verdict(sc, fc, sb, fb, name="x", margin=STRESS_MARGIN, mode=mode)
                rejected = v.passed if mode == "certify" else not (v.passed or v.inconclusive)
                assert rejected == bool(vec[r]), (label, mode, r)
            seen += int(vec.sum())
    assert seen > 0  # the comparison covers rejections, not only non-rejections


@pytest.mark.parametrize(("label", "mode"), [("cand loops", "certify"), ("base loops", "detect"),
                                             ("rare repeats", "certify"), ("rare loops", "certify")])
def test_paired_stressor_comparison_holds_its_size_when_the_stressed_share_carries_it(label, mode):
    """No clean repeats (the exact clean-flag bound at its narrowest) and a rare-event or skewed
    stressed-share difference from whole looping videos: at the margin the split rule fails (detect)
    or passes (certify) at most α of 2000 samples at 16 videos × 4 trials and 60 × 30."""
    from benchmarks.decision import (
        ALPHA,
        SCENARIOS,
        _exact_bounds,
        stressor_decisions,
        stressor_units,
    )

    for n, trials in ((16, 4), (60, 30)):
        units = stressor_units(np.random.default_rng([9, n]), 2000, n, trials, SCENARIOS[label])
        assert stressor_decisions(units, _exact_bounds(n, ALPHA / 2), mode).mean() <= ALPHA


def test_sign_flip_at_a_margin_refuses_instead_of_failing_skewed_differences():
    """Left-skewed differences with mean exactly at the margin 0.05 (a rare −1): the sign-flip
    test failed them far more often than α; at a non-zero margin it now refuses to decide."""
    from pytest_posbias.stats.paired import paired_permutation_verdict, sign_flip_p

    rng = np.random.default_rng(8)
    n, reps, fails = 16, 200, 0
    for _ in range(reps):
        d = np.where(rng.random(n) < 0.05, -1.0, 0.1 + rng.normal(0, 0.02, n))
        fails += sign_flip_p(d, np.arange(n), 0.05, alternative="greater", n_resamples=999) < 0.05
    assert fails / reps >= 0.15  # the old rule: E d = 0.05·(−1) + 0.95·0.1 = 0.045 <= 0.05, yet it fails these
    v = paired_permutation_verdict(d, np.arange(n), name="Δ", threshold=0.05, sides="upper", mode="detect")
    assert np.isnan(v.ci_low) and "does not hold its size at a non-zero margin" in v.reason
    # a refusal is not a detect-mode pass: the run is NOT MEASURED, whatever the difference
    from pytest_posbias.gates.decision import run_decision

    assert not v.passed and v.inconclusive
    big = paired_permutation_verdict(np.full(n, 0.6), np.arange(n), name="Δ", threshold=0.05, sides="upper", mode="detect")
    assert run_decision([("t::drop", big)]).exit_code == 6
    w = paired_permutation_verdict(d, np.arange(n), name="Δ", threshold=0.05, sides="upper", mode="certify")
    assert not w.passed


def test_stressor_gate_against_a_baseline_uses_the_split_rule(tmp_path, small_set):
    """Through the gate: ``--baseline`` on the stressor gate pairs the videos both models measured and
    decides with :func:`paired_amplification_verdict` on (stressed share, clean flag) per video."""
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.gates import stressor_verdict
    from pytest_posbias.run.context import RunContext

    pcfg = PosbiasConfig(probes={"stressor": {"videos": 6, "trials": 2, "frames": [16]}})
    ctx = RunContext.create(RunOptions(models=("sim:looping",), baseline="sim:unbiased", cache=str(tmp_path / "cache"),
                                       data=str(small_set), sequential=False, mode="detect", judge="auto"),
                            pcfg, rootdir=tmp_path, worker="t", run_id="paired-stressor")
    try:
        v = stressor_verdict(ctx, "stressor", "sim:looping", 16, "shuffle")
        d = ctx.stressor("sim:looping", 16).amplification("shuffle")
        bd = ctx.stressor("sim:unbiased", 16).amplification("shuffle")
    finally:
        ctx.close()
    both = ~np.isnan(d) & ~np.isnan(bd)
    assert "exact unconditional bound of the clean-flag difference" in v.extra["method"], v.reason
    assert v.estimate == pytest.approx(float(np.mean(d[both] - bd[both])))
    assert v.n == int(both.sum()) and v.extra["baseline"] == "sim:unbiased"


@pytest.mark.parametrize("mode", ["certify", "detect"])
def test_nan_pairs_are_lost_units_not_unchanged_pairs(mode):
    """3 changed + 50 unchanged pairs do not certify a 0.10 margin; 40 NaN pairs added must not make
    them certify (read as unchanged pairs they dilute the rate) and fail closed in detect mode too."""
    a = np.array([1.0] * 3 + [0.0] * 50)
    b = np.zeros(53)
    assert not paired_change_verdict(a, b, name="x", threshold=0.1, mode="certify").passed
    a_nan = np.concatenate([a, np.full(40, np.nan)])
    b_nan = np.concatenate([b, np.full(40, np.nan)])
    v = paired_change_verdict(a_nan, b_nan, name="x", threshold=0.1, mode=mode)
    assert not v.passed and v.inconclusive
    assert "40 of 93" in v.reason


def test_outcomes_other_than_zero_or_one_name_the_array():
    with pytest.raises(ConfigError, match="`a` must hold 0/1"):
        paired_change_verdict(np.array([2, 0, 1, 1, 0]), np.zeros(5), name="x")
    with pytest.raises(ConfigError, match="`b` must hold 0/1"):
        paired_change_verdict(np.zeros(5), np.array([0, 0.5, 1, 1, 0]), name="x")


def test_baseline_abs_bias_never_certifies_from_differences_that_do_not_vary():
    """A candidate identical to its baseline on the groups drawn (c − b = 0 everywhere) has a zero
    standard error of c − b; read as an exact bound it certified |μc| − |μb| <= margin in a third of
    runs at 5 groups where 20% of groups differ by 0.25. Certify is inconclusive there; detect keeps
    its rule."""
    from pytest_posbias.stats.paired import paired_abs_mean_verdict

    base = np.array([0.01, -0.02, 0.03, 0.0, -0.01])
    v = paired_abs_mean_verdict(base.copy(), base, np.arange(5), name="MEG", margin=0.01, mode="certify")
    assert not v.passed and v.inconclusive and "does not vary" in v.reason
    d = paired_abs_mean_verdict(base.copy(), base, np.arange(5), name="MEG", margin=0.01, mode="detect")
    assert d.passed and not d.inconclusive
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(400):
        b = rng.normal(0, 0.05, 5)
        c = b - 0.25 * (rng.random(5) < 0.2)
        hits += paired_abs_mean_verdict(c, b, np.arange(5), name="MEG", margin=0.01, mode="certify").passed
    assert hits <= 0.05 * 400


def _groups(rng, mean, sd, groups=40, orders=4):
    vals = rng.normal(mean, sd, (groups, orders))
    return vals.ravel(), np.repeat(np.arange(groups), orders)


def _baseline_fail_rate(cand_mean, cand_sd, base_mean, base_sd, reps=60, margin=0.01):
    rng = np.random.default_rng(7)
    fails = 0
    for _ in range(reps):
        c, g = _groups(rng, cand_mean, cand_sd)
        b, _ = _groups(rng, base_mean, base_sd)
        v = paired_abs_mean_verdict(c, b, g, name="MEG", margin=margin)
        fails += not v.passed
    return fails / reps


def test_paired_baseline_estimate_is_the_difference_of_absolute_means():
    c = np.array([-0.1, -0.3, 0.1, -0.2, -0.1, 0.0])
    b = np.array([0.05, -0.05, 0.1, -0.1, 0.2, 0.0])
    v = paired_abs_mean_verdict(c, b, np.arange(6), name="MEG", margin=0.01)
    assert v.estimate == pytest.approx(abs(-0.6 / 6) - abs(0.2 / 6))  # |−0.1| − |0.0333|


def test_a_biased_candidate_fails_against_an_unbiased_baseline():
    # MEG −0.08 (4× the 0.02 threshold) with the per-instance spread of sim:unbiased (sd 0.18)
    assert _baseline_fail_rate(-0.08, 0.18, 0.0, 0.18) >= 0.8


def test_an_unbiased_but_noisier_candidate_passes():
    # the old mean |x_i| comparison failed this one ~90% of the time
    assert _baseline_fail_rate(0.0, 0.30, 0.0, 0.18) <= 0.1


def test_an_unbiased_candidate_passes_against_a_biased_baseline():
    assert _baseline_fail_rate(0.0, 0.18, -0.08, 0.18) == 0.0


def test_sign_flip_p_is_exact_on_a_hand_worked_case():
    """Four clusters, d = (1, 2, 3, −1): of the 2^4 sign patterns of (1, 2, 3, 1), the sums >= 5
    are (1,2,3,±1) → 7, 5 and (−1,2,3,1) → 5: 3 of 16, so p = 3/16 for 'greater' at δ0 = 0."""
    from pytest_posbias.stats.paired import sign_flip_p

    assert sign_flip_p([1.0, 2.0, 3.0, -1.0], [0, 1, 2, 3], 0.0, alternative="greater") == pytest.approx(3 / 16)


def test_permutation_verdict_agrees_with_its_inverted_interval():
    from pytest_posbias.stats.paired import paired_permutation_verdict

    rng = np.random.default_rng(4)
    d = rng.normal(0.08, 0.1, 120)
    g = np.repeat(np.arange(30), 4)
    v = paired_permutation_verdict(d, g, name="Δ coverage", threshold=0.0, sides="upper", n_resamples=2000)
    assert not v.passed and v.ci_low > 0.0 and v.p_value < 0.05  # a clear violation, CI and p agree
    ok = paired_permutation_verdict(d - 0.08, g, name="Δ coverage", threshold=0.0, sides="upper", n_resamples=2000)
    assert ok.passed and ok.ci_low <= 0.0
    # the interval brackets the estimate and is close to the t interval on cluster means (symmetric data)
    means = d.reshape(30, 4).mean(axis=1)
    t_lo = means.mean() - st.t.ppf(0.95, 29) * means.std(ddof=1) / math.sqrt(30)
    assert v.ci_low < v.estimate < v.ci_high and v.ci_low == pytest.approx(t_lo, abs=0.01)


@pytest.mark.parametrize("mode", ["detect", "certify"])
def test_permutation_verdict_counts_a_nan_difference_as_a_lost_unit(mode):
    """A NaN paired difference is a lost unit: the sign-flip verdict is inconclusive and passes in neither mode."""
    from pytest_posbias.stats.paired import paired_permutation_verdict

    d = np.array([0.1, -0.2, 0.05, np.nan, 0.3, -0.1, 0.2, 0.0])
    v = paired_permutation_verdict(d, np.arange(8), name="Δ", threshold=0.0, mode=mode, n_resamples=999)
    assert v.inconclusive and not v.passed and v.p_value == 1.0
    assert "1 of 8" in v.reason


@pytest.mark.parametrize(("n", "threshold"), [(4, 0.0), (2, 0.05)])
def test_paired_change_below_the_sample_that_could_decide_is_inconclusive(n, threshold):
    """Too few pairs for even the most extreme outcome to decide: inconclusive in both modes, not a silent detect pass."""
    ones, zeros = np.ones(n), np.zeros(n)
    det = paired_change_verdict(ones, zeros, name="x", threshold=threshold, mode="detect")
    cert = paired_change_verdict(zeros, ones, name="x", threshold=threshold, mode="certify")
    assert det.inconclusive and cert.inconclusive and not cert.passed
    assert "too few for any outcome to show a violation" in det.reason
    assert not paired_change_verdict(np.ones(5), np.zeros(5), name="x", mode="detect").passed  # 5/5 at margin 0 fails


@pytest.mark.parametrize("mode", ["detect", "certify"])
def test_permutation_verdict_with_too_few_groups_for_alpha_is_inconclusive(mode):
    """5 groups give no sign-flip p-value below 1/32: at α = 0.01 the verdict is inconclusive, not decided on the data's range."""
    from pytest_posbias.stats.paired import paired_permutation_verdict

    d = np.array([0.05, 0.2, 0.1, 0.3, 0.15]) * (1 if mode == "detect" else -1)
    v = paired_permutation_verdict(d, np.arange(5), name="Δ", threshold=0.0, mode=mode, alpha=0.01)
    assert v.inconclusive and not (mode == "certify" and v.passed)
    assert "0.03125" in v.reason
    at_05 = paired_permutation_verdict(d, np.arange(5), name="Δ", threshold=0.0, mode=mode, alpha=0.05)
    assert not at_05.inconclusive and at_05.passed == (mode == "certify") and at_05.p_value < 0.05
