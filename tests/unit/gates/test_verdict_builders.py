"""The verdict builders (gates.verdict_builders): a baseline contamination rise certifies with both t
rules at alpha/2 and only from 40 groups."""

from __future__ import annotations

import math

import numpy as np


def test_a_baseline_contamination_rise_certifies_with_both_t_rules_and_from_40_groups_only():
    """Candidate − baseline slot rates are right-skewed rare events: at the margin the percentile
    bootstrap certified about a tenth of samples at 48 groups; the gate's certify rule (both t rules
    at α/2) stays near α there and does not decide from fewer than 40 groups. Detect keeps the bootstrap."""
    from types import SimpleNamespace

    from pytest_posbias.gates.verdict_builders import baseline_gate
    from pytest_posbias.stats import mean_verdict

    def ctx(mode: str) -> SimpleNamespace:
        return SimpleNamespace(mode=mode, alpha=0.05, baseline="b", n_resamples=999, paired_test="bootstrap",
                               pcfg=SimpleNamespace(margins=lambda: {"contamination": 0.05}),
                               rng=lambda *keys: np.random.default_rng(0))

    rng = np.random.default_rng(11)

    def rates(groups: int, mean: float) -> np.ndarray:
        return rng.binomial(4, np.repeat(rng.beta(0.2, 0.2 * (1 - mean) / mean, groups), 4)) / 4

    few = baseline_gate(ctx("certify"), "contamination", "m", rates(24, 0.02), rates(24, 0.02),
                        np.repeat(np.arange(24), 4), name="contaminated-slot rate", unit="groups", worse="higher")
    assert few.inconclusive and not few.passed and "fewer than 40 groups (24 on both sides)" in few.reason
    clusters = np.repeat(np.arange(48), 4)
    samples = [(rates(48, 0.07), rates(48, 0.02)) for _ in range(300)]  # mean rise 0.05: the margin
    gate = sum(baseline_gate(ctx("certify"), "contamination", "m", c, b, clusters, name="contaminated-slot rate",
                             unit="groups", worse="higher").passed for c, b in samples)
    boot = sum(mean_verdict(c - b, clusters, name="rise", threshold=0.05, sides="upper", mode="certify",
                            n_resamples=999, rng=np.random.default_rng(0)).passed for c, b in samples)
    bound = 0.05 * 300 + 2 * math.sqrt(0.05 * 0.95 * 300)
    assert boot > bound >= gate
    detect = baseline_gate(ctx("detect"), "contamination", "m", *samples[0], clusters, name="contaminated-slot rate",
                           unit="groups", worse="higher")
    assert "bootstrap" in detect.extra["method"]
