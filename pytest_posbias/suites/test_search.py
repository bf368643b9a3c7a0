"""Property search with hypothesis: the least change that breaks the model, per item.

Each test searches every item of its property through the engine (cached, counted) with a
query budget per item (``[tool.posbias.probes.search] budget``, default VideoSTF's 30),
shrinks what it finds to a minimal counterexample and gates the share of items broken within
the budget (exact binomial, ``search`` threshold). Counterexamples are kept in the regression
corpus under the cache directory and replayed first on the next model.

* option order: the chosen content is invariant under reorderings of the options;
* sampling phase: the chosen content is invariant under the phase of the uniform grid (slow: every query
  shows new frames);
* stressor: a clean-benign description does not become repetitive (RR flag, n = 5, τ = 1)
  under compositions of temporal stressors;
* slot coverage: no video's coverage falls below the coverage floor when its slot, the
  boundary or the placement changes (slow: every query is judged);
* heavy variants (slow): ``slow_budget`` queries and twice the items.
"""

from __future__ import annotations

import pytest

from pytest_posbias.gates.search import search_gate

_DATA = {"order": "phase", "phase": "phase", "stressor": "stressor", "coverage": "positional"}


def _search(run, posbias_gate, model, prop, slow=False):
    why = run.manifest().missing(_DATA[prop])
    if why:
        pytest.skip(why)
    before = run.calls()
    posbias_gate(search_gate(run, model, prop, slow=slow), calls=run.engine.stats.since(before))


@pytest.mark.search
def test_search_option_order(posbias_run, posbias_model, posbias_gate):
    _search(posbias_run, posbias_gate, posbias_model, "order")


@pytest.mark.search
def test_search_stressor_repetition(posbias_run, posbias_model, posbias_gate):
    _search(posbias_run, posbias_gate, posbias_model, "stressor")


@pytest.mark.slow
@pytest.mark.search
def test_search_sampling_phase(posbias_run, posbias_model, posbias_gate):
    _search(posbias_run, posbias_gate, posbias_model, "phase")


@pytest.mark.slow
@pytest.mark.search
def test_search_slot_coverage(posbias_run, posbias_model, posbias_gate):
    _search(posbias_run, posbias_gate, posbias_model, "coverage")


@pytest.mark.slow
@pytest.mark.search
@pytest.mark.parametrize("prop", ["order", "stressor"])
def test_search_heavy(posbias_run, posbias_model, posbias_gate, prop):
    _search(posbias_run, posbias_gate, posbias_model, prop, slow=True)
