"""The search gates (gates.search): the exact binomial rate of broken items, failing closed when
searches are lost."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from scipy import stats as sst

from pytest_posbias.probes.search import ItemSearch


def _item(status: str, q: int | None = None, queries: int = 0, failed: int = 0, why: str = "") -> ItemSearch:
    return ItemSearch("order", "i", "m", status, why=why, queries_to_first_break=q, queries=queries, failed_queries=failed)


class GateCtx:
    floor = 0.95
    mode = "detect"
    alpha = 0.05

    def rate_gate(self, gate: str, model: str, k: int, n: int, **kw: Any) -> Any:
        from pytest_posbias.stats import rate_verdict

        return rate_verdict(k, n, threshold=0.25, mode=self.mode, alpha=self.alpha, **kw)


def test_gate_is_the_exact_binomial_rate_of_broken_items():
    from pytest_posbias.gates.search import search_verdict

    results = [_item("broken", q, queries=q + 3) for q in (1, 2, 5, 9, 1, 3)] + [_item("held", None, 30)] * 6 + [
        _item("excluded")] * 2
    v = search_verdict(GateCtx(), "m", "order", results, planned=14, budget=30, shrink_budget=60)
    ci = sst.binomtest(6, 12).proportion_ci(confidence_level=0.90, method="exact")
    assert v.estimate == pytest.approx(0.5) and v.n == 12
    assert (v.ci_low, v.ci_high) == pytest.approx((ci.low, ci.high))
    assert v.p_value == pytest.approx(sst.binomtest(6, 12, 0.25, alternative="greater").pvalue)
    assert v.extra["median_queries_to_first_break"] == float(np.median([1, 2, 5, 9, 1, 3]))
    assert v.extra["mean_queries_to_first_break"] == pytest.approx(np.mean([1, 2, 5, 9, 1, 3]))
    m = v.extra["measurement"]
    assert m["planned"] == 12 and m["measured"] == 12 and m["floor_met"]  # excluded items are not planned
    json.dumps(v.to_dict())


def test_gate_fails_closed_when_searches_are_lost():
    from pytest_posbias.gates.search import search_verdict

    results = [_item("held", None, 30)] * 8 + [_item("lost", why="reference query lost: x", failed=0)] * 2
    v = search_verdict(GateCtx(), "m", "order", results, planned=10, budget=30, shrink_budget=60)
    assert not v.passed and "measurement floor not met" in v.reason
    assert v.extra["measurement"]["lost"] == {"reference_lost": 2}
