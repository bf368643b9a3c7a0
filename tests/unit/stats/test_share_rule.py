"""The stressor gate's rule on the difference of shares (stats.share_rule): its size at the quick size
where the bootstrap broke, the bootstrap where the rare outcome is well represented, the decomposed
bounds (exact for the clean flag, t for the stressed share), an inconclusive verdict where the
sample can never show a violation, and the vectorised rule agreeing with the verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_posbias import stats as S


def _stressor_units(rng: np.random.Generator, n: int, theta: float, p_clean: float = 0.10, trials: int = 30
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per video: share of ``trials`` stressed outputs that repeat (rate p_clean + θ) and the clean 0/1 flag."""
    clean = (rng.random(n) < p_clean).astype(float)
    return rng.binomial(trials, p_clean + theta, size=n) / trials, clean


def test_the_stressor_rule_holds_its_size_at_the_quick_size_where_the_bootstrap_did_not():
    """At 8 videos and the boundary (amplification = 0.10), the clean repeat (rate 0.10) is absent from
    43% of samples; a BCa bootstrap of the difference then fails a compliant model (about 45%)."""
    rng = np.random.default_rng(31)
    reps, n = 200, 8
    new = old = 0
    for _ in range(reps):
        share, clean = _stressor_units(rng, n, 0.10)
        new += not S.share_difference_verdict(share, clean, name="amp", threshold=0.10, n_resamples=999, rng=rng).passed
        old += not S.mean_verdict(share - clean, None, name="amp", threshold=0.10, sides="upper", method="bca",
                                  n_resamples=999, rng=rng).passed
    # 200 reps: the upper 99.9% Clopper-Pearson bound of 0 failures at the old rate is far below 0.3
    assert new / reps <= 0.05
    assert old / reps > 0.3


def test_the_stressor_rule_bootstraps_when_the_rare_outcome_is_well_represented_and_still_detects():
    rng = np.random.default_rng(5)
    share, clean = _stressor_units(rng, 64, 0.40)  # amplification 0.4, four times the threshold
    v = S.share_difference_verdict(share, clean, name="amp", threshold=0.10, n_resamples=999, rng=rng)
    assert not v.passed and not v.inconclusive
    assert v.extra["rare_count"] >= S.RARE_MIN_COUNT and "BCa" in v.extra["method"]
    share0, clean0 = share, np.zeros(64)  # no clean repeat at all: the exact bound of the flag decides
    w = S.share_difference_verdict(share0, clean0, name="amp", threshold=0.10, n_resamples=999, rng=rng)
    assert not w.passed and "Clopper-Pearson" in w.extra["method"]
    assert w.p_value < 0.05


def _parts(share: np.ndarray, flag: np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """By hand: the share's Student-t half-width at α_s and the flag's exact Clopper-Pearson bounds at α_c."""
    a_s, a_c = alpha * S.SHARE_ALPHA_FRACTION, alpha * (1 - S.SHARE_ALPHA_FRACTION)
    n = share.size
    cp = st.binomtest(int(flag.sum()), n).proportion_ci(confidence_level=1 - 2 * a_c, method="exact")
    return st.t.isf(a_s, n - 1) * share.std(ddof=1) / math.sqrt(n), cp.low, cp.high


def test_the_decomposed_bounds_are_exact_for_the_flag_and_t_for_the_share():
    share = np.array([0.1, 0.2, 0.3, 0.2, 0.1, 0.4, 0.2, 0.3])
    flag = np.array([0, 1, 0, 0, 0, 0, 0, 0], dtype=float)
    lo, hi = S.share_difference_bounds(share, flag, alpha=0.05)
    t_half, cp_low, cp_high = _parts(share, flag)
    assert lo[0] == pytest.approx(share.mean() - t_half - cp_high)
    assert hi[0] == pytest.approx(share.mean() + t_half - cp_low)


def test_a_stressor_sample_too_small_to_ever_show_a_violation_is_inconclusive():
    n_min = S.share_difference_min_sample(lower=-math.inf, upper=0.10, mode="detect", alpha=0.05)
    assert n_min > 5
    v = S.share_difference_verdict(np.ones(n_min - 1), np.zeros(n_min - 1), name="amp", threshold=0.10,
                                   rng=np.random.default_rng(0))
    assert v.inconclusive and v.outcome == "inconclusive" and v.passed  # detect: no violation shown, flagged
    w = S.share_difference_verdict(np.ones(n_min), np.zeros(n_min), name="amp", threshold=0.10,
                                   rng=np.random.default_rng(0))
    assert not w.inconclusive and not w.passed


def test_the_vectorised_rule_matches_the_verdict_on_its_decomposed_branch():
    rng = np.random.default_rng(11)
    shares = np.stack([_stressor_units(rng, 12, th)[0] for th in np.linspace(0.0, 0.4, 30)])
    flags = np.stack([_stressor_units(rng, 12, 0.1)[1] for _ in range(30)])
    _, passed = S.share_difference_rule(shares, flags, lower=-math.inf, upper=0.10, mode="detect", alpha=0.05)
    for i in range(30):
        v = S.share_difference_verdict(shares[i], flags[i], name="amp", threshold=0.10, rng=rng)
        assert v.extra["rare_count"] < S.RARE_MIN_COUNT and v.passed == bool(passed[i])
    assert passed.any() and not passed.all()


@pytest.mark.parametrize(("share", "flag", "what"), [(1.5, 0.0, "share"), (0.5, 0.5, "indicator")])
def test_out_of_range_units_are_refused_on_the_bootstrap_branch_too(share, flag, what):
    """A share outside [0, 1] or a non-0/1 flag is a ConfigError naming the array, whichever branch would decide."""
    from pytest_posbias.errors import ConfigError

    sh = np.linspace(0.1, 0.9, 40)
    ind = np.tile([0.0, 1.0], 20)
    sh[3], ind[3] = share, flag
    with pytest.raises(ConfigError, match=f"`{what}`"):
        S.share_difference_verdict(sh, ind, name="amp", threshold=0.1, rng=np.random.default_rng(0), n_resamples=999)


def test_the_share_bounds_stay_in_the_unit_interval_and_the_rule_keeps_its_size():
    """A share's mean lies in [0, 1], so its t bounds are kept there: the amplification's interval stays in
    [-1, 1] (a looping model's all-or-nothing shares over 8 videos gave a lower bound of -1.14), and the rule
    still holds its size at the boundary on such skewed units (2,000 seeded samples per size, Clopper-Pearson)."""
    share = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    flag = np.array([1, 1, 1, 0, 0, 0, 0, 0], dtype=float)
    lo, hi = S.share_difference_bounds(share, flag, alpha=0.05)
    t_half, cp_low, cp_high = _parts(share, flag)
    assert share.mean() - t_half < 0 and lo[0] == pytest.approx(0.0 - cp_high) and -1 <= lo[0] < hi[0] <= 1
    assert hi[0] == pytest.approx(min(share.mean() + t_half, 1.0) - cp_low)
    rng = np.random.default_rng(20261206)
    for n in (8, 16):
        reps = 2000
        flags = (rng.random((reps, n)) < 0.10).astype(float)
        shares = (rng.random((reps, n)) < 0.20).astype(float)  # all-or-nothing shares: E[d] = 0.20 - 0.10
        decided, passed = S.share_difference_rule(shares, flags, lower=-math.inf, upper=0.10, mode="detect",
                                                  alpha=0.05)
        fails = int((decided & ~passed).sum())
        assert st.binomtest(fails, reps).proportion_ci(confidence_level=0.95, method="exact").high < 0.05
