"""The property search under ``posbias plan`` (``probes.search_plan``): the longest search a run can
make is sent with no answer scored — the reference once, each replayable stored counterexample
once, then distinct perturbed requests up to ``budget + shrink_budget`` or until the space has no
more; a listed space is walked through, another drawn from its strategy. A fake engine counts the
requests that reach the model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_posbias import strategies as S
from pytest_posbias.probes.search import ItemProperty, Outcome, run_search
from pytest_posbias.probes.search_corpus import Corpus
from pytest_posbias.probes.search_plan import plan_search


class Engine:
    """Keys are the requests themselves; ``sent`` lists every request that reached the 'model'."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def keys(self, reqs: list[Any]) -> list[str]:
        return [json.dumps(r) for r in reqs]

    def run(self, reqs: list[Any], probe: str = "", accept: Any = None) -> list[Any]:
        self.sent.extend(json.dumps(r) for r in reqs)
        return list(reqs)

    def backend(self, model: str) -> Any:
        class B:
            def identity(self) -> dict[str, str]:
                return {"model": model}
        return B()


class Ctx:
    def __init__(self, run_id: str = "plan") -> None:
        self.engine, self.run_id, self.seed = Engine(), run_id, 0


class Orderings(ItemProperty):
    """Orderings of k options; ``listed`` says whether the property lists its space. Scoring an
    answer in plan mode is a bug: ``score`` fails unless ``scored`` allows it (the real-run corpus fill)."""

    property = "fake-order"
    smallest_change = 1.0

    def __init__(self, k: int, *, listed: bool, model: str = "m", breaks: Any = None) -> None:
        self.k, self.listed, self.model, self.item_id, self.breaks = k, listed, model, "it", breaks

    def strategy(self) -> Any:
        return S.option_orderings(self.k)

    def all_values(self) -> Any:
        import itertools

        return list(itertools.permutations(range(self.k))) if self.listed else None

    def request(self, value: Any) -> Any:
        return ["perm", list(value)]

    def reference_value(self) -> Any:
        return tuple(range(self.k))

    def score(self, value: Any, gen: Any, reference: Outcome | None) -> Outcome:
        if self.breaks is None:
            raise AssertionError("plan mode scored an answer")
        return Outcome(True, self.breaks(tuple(gen[1])), list(gen[1]))

    def encode(self, value: Any) -> dict[str, Any]:
        return {"order": list(value)}

    def decode(self, data: Any) -> Any:
        order = tuple(int(x) for x in data["order"])
        if sorted(order) != list(range(self.k)):
            raise ValueError(f"{order} is no ordering")
        return order

    def size(self, value: Any) -> float:
        return float(S.cayley_distance(value))


@pytest.mark.parametrize("listed", [True, False])
def test_a_large_space_sends_exactly_budget_plus_shrink_budget_distinct_requests(listed):
    """120 orderings of 5 options, budget 7 + shrink 5: the reference and 12 distinct perturbed
    requests, each sent once; 7 count as search queries and 5 as shrink queries; the item holds."""
    ctx = Ctx()
    res = plan_search(ctx, Orderings(5, listed=listed), budget=7, shrink_budget=5, corpus=None, seed=0)
    assert res.status == "held" and res.why.startswith("planned")
    assert (res.queries, res.search_queries, res.shrink_queries, res.replay_queries) == (12, 7, 5, 0)
    assert len(ctx.engine.sent) == 1 + 12 == len(set(ctx.engine.sent))
    assert ctx.engine.sent[0] == json.dumps(["perm", [0, 1, 2, 3, 4]])


@pytest.mark.parametrize("listed", [True, False])
def test_a_small_space_sends_all_it_holds_and_no_more(listed):
    """3 options have 3! − 1 = 5 orderings besides the identity: a cap of 30 sends those 5 (the
    identity is the reference, a repeat costs nothing); budget 3 takes 3 of them, shrink the other 2."""
    ctx = Ctx()
    res = plan_search(ctx, Orderings(3, listed=listed), budget=3, shrink_budget=27, corpus=None, seed=0)
    assert (res.queries, res.search_queries, res.shrink_queries) == (5, 3, 2)
    assert sorted(ctx.engine.sent) == sorted(json.dumps(["perm", list(p)]) for p in
                                             [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)])


def test_the_plan_is_at_least_what_a_real_search_sends():
    """A real search on a model that never breaks sends at most the plan's requests."""
    plan_ctx, run_ctx = Ctx(), Ctx()
    plan = plan_search(plan_ctx, Orderings(5, listed=False), budget=9, shrink_budget=4, corpus=None, seed=0)
    real = run_search(run_ctx, Orderings(5, listed=False, breaks=lambda p: False), budget=9, shrink_budget=4, seed=0)
    assert len(set(run_ctx.engine.sent)) <= len(set(plan_ctx.engine.sent)) and real.queries <= plan.queries


def test_stored_counterexamples_are_replayed_once_each_and_unusable_ones_skipped(tmp_path):
    """Another model's stored counterexample is sent once (replay query) before the search; an entry
    that does not decode is skipped, as a run skips it."""
    corpus = Corpus(tmp_path / "corpus")
    found = run_search(Ctx("run-1"), Orderings(5, listed=False, model="m1", breaks=lambda p: p[4] == 0),
                       corpus=corpus, budget=30)
    assert found.status == "broken"
    bad = Orderings(5, listed=False, model="m0")
    corpus.add(bad, Ctx("run-0"), {"order": [0, 0, 0, 0, 0]})  # decodes to no ordering
    ctx = Ctx("run-2")
    res = plan_search(ctx, Orderings(5, listed=False, model="m2"), budget=4, shrink_budget=2, corpus=corpus, seed=0)
    assert res.replay_queries == 1 and res.queries == 1 + 6
    assert ctx.engine.sent[1] == json.dumps(["perm", found.minimal["perturbation"]["order"]])  # type: ignore[index]
