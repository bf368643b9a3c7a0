"""The positional mean gates on lattice-valued units: a group's MEG on four-sentence references is a
multiple of 1/32, and a sample piled on one lattice point has a small sample variance exactly where
its mean is far out (docs/design.md section 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_posbias import stats as S

# sim:unbiased, equal-attention prompt, leisure-short P = 4 on the quick set (12 groups, seed 0):
# 8 of the 12 group MEGs are exactly -1/32; the population MEG of the simulator is 0
EQUAL_ATTENTION_QUICK = np.array([-3, -2] + [-1] * 8 + [0, 0]) / 32


def _verdict(values: np.ndarray, *, null_variance: bool, mode: str = "detect", threshold: float = 0.02) -> S.Verdict:
    return S.mean_verdict(values, None, name="MEG", threshold=threshold, sides="both", mode=mode, alpha=0.05,
                          unit="groups", n_resamples=1999, rng=np.random.default_rng(0), null_variance=null_variance)


def test_null_variance_interval_inverts_its_test() -> None:
    lo, hi = S.null_variance_interval(EQUAL_ATTENTION_QUICK, alpha=0.05)
    assert S.null_variance_p(EQUAL_ATTENTION_QUICK, hi, "less") == pytest.approx(0.05, abs=1e-9)
    assert S.null_variance_p(EQUAL_ATTENTION_QUICK, lo, "greater") == pytest.approx(0.05, abs=1e-9)
    # the t interval widened by sqrt(n / (n - c^2))
    n, c = EQUAL_ATTENTION_QUICK.size, 1.7958848187036691
    s = EQUAL_ATTENTION_QUICK.std(ddof=1)
    assert hi - lo == pytest.approx(2 * c * s / math.sqrt(n - c * c), rel=1e-6)


def test_lattice_sample_of_an_unbiased_model_is_not_a_violation() -> None:
    # the bootstrap alone puts the whole interval below -0.02 (the false failure of the equal-attention
    # MEG gate); the gate's rule (hull with the null-variance t interval) does not
    boot = _verdict(EQUAL_ATTENTION_QUICK, null_variance=False)
    gate = _verdict(EQUAL_ATTENTION_QUICK, null_variance=True)
    assert not boot.passed and boot.ci_high < -0.02
    assert gate.passed and gate.ci_high > -0.02
    assert gate.p_value >= boot.p_value
    assert "null-variance t" in gate.extra["method"]


def test_lattice_gate_fails_past_the_threshold_and_passes_at_zero() -> None:
    rng = np.random.default_rng(3)
    past = (rng.poisson(2.0, 48) - rng.poisson(2.0 + 0.06 * 32, 48)) / 32  # MEG -0.06, 3x the threshold
    assert not _verdict(past, null_variance=True).passed
    zero = (rng.poisson(2.0, 48) - rng.poisson(2.0, 48)) / 32
    assert _verdict(zero, null_variance=True).passed


def test_hull_never_certifies_what_the_bootstrap_does_not() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        x = (rng.poisson(0.3, 12) - rng.poisson(0.3, 12)) / 32
        if np.ptp(x) == 0:
            continue
        boot = _verdict(x, null_variance=False, mode="certify")
        gate = _verdict(x, null_variance=True, mode="certify")
        assert gate.ci_low <= boot.ci_low and gate.ci_high >= boot.ci_high
        assert not (gate.passed and not boot.passed)


def test_the_null_variance_t_bounds_the_p_value_below_so_the_gates_keep_the_plain_t() -> None:
    """With the variance taken at the bound, t0 = √n·d/√(s² + d²) < √n whatever the distance d, so at
    the quick sizes a blatant violation keeps p above what the run-level Holm adjustment needs over a
    few gates; the gates' sequential rule is the plain t, whose p falls with the distance
    (docs/design.md section 5)."""
    from pytest_posbias.gates import LOOKS
    from pytest_posbias.sequential import gsd_decide

    kw = {"n_max": 12, "looks": LOOKS, "lower": -0.02, "upper": 0.02, "mode": "detect", "alpha": 0.05, "kind": "mean"}
    blatant = np.random.default_rng(1).normal(-0.5, 0.08, 12)  # middle-weak's MEG on the quick set
    plain = gsd_decide(blatant, **kw)  # type: ignore[arg-type]
    null_var = gsd_decide(blatant, null_variance=True, **kw)  # type: ignore[arg-type]
    assert not plain.passed and not null_var.passed
    assert plain.p_value < 0.05 / 6 <= null_var.p_value  # six MEG gates under Holm: only the plain t can fail the run
    # the gates' default is the plain rule
    assert gsd_decide(EQUAL_ATTENTION_QUICK, **kw).ci_high == gsd_decide(EQUAL_ATTENTION_QUICK, null_variance=False, **kw).ci_high  # type: ignore[arg-type]
