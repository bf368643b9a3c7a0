"""The gates' sequential design (gates.design): a zero-spread mean gate is decided on the exact floor
over its value range."""

from __future__ import annotations

import numpy as np


def test_a_zero_spread_mean_gate_is_decided_on_the_exact_floor_in_the_sequential_design():
    """Every group's contamination rate 0: in certify mode 40 groups show the rate under 0.10 on the
    exact worst-case floor (the fixed design's rule), 20 groups cannot; neither is inconclusive."""
    from types import SimpleNamespace

    from pytest_posbias.gates.decision import not_measured_reason
    from pytest_posbias.gates.design import sequential_verdict

    ctx = SimpleNamespace(mode="certify", alpha=0.05, threshold=lambda gate, model: 0.10)
    kw = {"values_at": lambda n: np.zeros(n), "kind": "mean", "name": "contaminated-slot rate", "unit": "groups",
          "extra": {}}
    v = sequential_verdict(ctx, "contamination", "m", n_max=40, **kw)
    assert v.passed and not v.inconclusive and 0.0 == v.ci_low < v.ci_high < 0.10 and v.p_value < 0.05
    assert "exact worst-case floor" in v.extra["design"]
    w = sequential_verdict(ctx, "contamination", "m", n_max=20, **kw)
    assert not w.passed and not w.inconclusive and not_measured_reason(w) is None and w.ci_high > 0.10
    # a rate at the threshold in every group is never certified under it
    at = sequential_verdict(ctx, "contamination", "m", n_max=40, **{**kw, "values_at": lambda n: np.full(n, 0.10)})
    assert not at.passed


def test_the_reason_states_the_interval_level_it_used():
    """At α = 0.001 the verdict's reason names a 99.8% repeated CI, not 100%."""
    from types import SimpleNamespace

    from pytest_posbias.gates.design import sequential_verdict

    ctx = SimpleNamespace(mode="detect", alpha=0.001, threshold=lambda gate, model: 0.15)
    rng = np.random.default_rng(0)
    v = sequential_verdict(ctx, "flip", "m", values_at=lambda n: (rng.random(n) < 0.1).astype(float), n_max=60,
                           kind="rate", name="flip rate", unit="items", extra={})
    assert "100% repeated CI" not in v.reason and "99.8% repeated CI" in v.reason
