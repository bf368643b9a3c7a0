"""The property search: budgets, shrinking, the regression corpus and the gate.

Placed with ``probes/search.py``, its main subject; the gate's checks run the search suite through
pytester."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.suite_project import write_suite_project

from pytest_posbias import strategies as S
from pytest_posbias.probes.search import ItemProperty, Outcome, run_search
from pytest_posbias.probes.search_corpus import Corpus


class FakeBackend:
    def __init__(self, name: str) -> None:
        self.name = name

    def identity(self) -> dict[str, str]:
        return {"model": self.name}


class FakeEngine:
    """Keys are the request tuples themselves; ``runs`` counts what reached the 'model'."""

    def __init__(self) -> None:
        self.runs = 0

    def keys(self, reqs: list[Any]) -> list[str]:
        return [json.dumps(r) for r in reqs]

    def run(self, reqs: list[Any], probe: str = "", accept: Any = None) -> list[Any]:
        self.runs += len(reqs)
        return list(reqs)

    def backend(self, model: str) -> FakeBackend:
        return FakeBackend(model)


class FakeCtx:
    def __init__(self, run_id: str = "run-1") -> None:
        self.engine = FakeEngine()
        self.run_id = run_id
        self.seed = 0


class PermProperty(ItemProperty):
    """Orderings of k items; the property breaks when ``breaks(perm)``; calls on ``fails`` perms fail."""

    property = "fake-order"
    smallest_change = 1.0

    def __init__(self, k: int, breaks: Callable[[tuple[int, ...]], bool], *, fails: Callable[[tuple[int, ...]], bool] = lambda p: False,
                 model: str = "m1", item: str = "it") -> None:
        self.k, self.breaks, self.fails, self.model, self.item_id = k, breaks, fails, model, item

    def strategy(self) -> Any:
        return S.option_orderings(self.k)

    def request(self, value: Any) -> Any:
        return ["perm", list(value)]

    def reference_value(self) -> Any:
        return tuple(range(self.k))

    def score(self, value: Any, gen: Any, reference: Outcome | None) -> Outcome:
        p = tuple(gen[1])
        if self.fails(p):
            return Outcome(False, False, None, why_lost="boom")
        return Outcome(True, self.breaks(p), list(p))

    def encode(self, value: Any) -> dict[str, Any]:
        return {"order": list(value)}

    def decode(self, data: Any) -> Any:
        return tuple(int(x) for x in data["order"])

    def size(self, value: Any) -> float:
        return float(S.cayley_distance(value))


def test_no_break_spends_exactly_the_budget():
    ctx = FakeCtx()
    r = run_search(ctx, PermProperty(6, lambda p: False), budget=7, shrink_budget=50)
    assert r.status == "held" and r.queries == 7 and r.search_queries == 7 and r.queries_to_first_break is None
    assert ctx.engine.runs == 1 + 7  # the reference, then the budget (6! = 720 orderings, so never exhausted)


class SameInputProperty(PermProperty):
    """Every perturbation shows the model the unperturbed input (a window too short for phases to differ)."""

    def request(self, value: Any) -> Any:
        return ["perm", list(range(self.k))]


def test_an_item_no_perturbation_changes_is_lost_not_held():
    """An item whose every perturbation is the reference request makes no query: lost, never a held unit."""
    ctx = FakeCtx()
    r = run_search(ctx, SameInputProperty(4, lambda p: False), budget=7, shrink_budget=50)
    assert r.status == "lost" and r.queries == 0 and "no perturbation" in r.why
    assert ctx.engine.runs == 1  # the reference only


def test_break_is_shrunk_to_the_fewest_transpositions():
    three_cycle = lambda p: p[:3] == (1, 2, 0)  # noqa: E731 - needs 2 transpositions, no fewer
    ctx = FakeCtx()
    r = run_search(ctx, PermProperty(5, three_cycle), budget=400, shrink_budget=400)
    assert r.status == "broken" and r.minimal is not None
    perm = tuple(r.minimal["perturbation"]["order"])
    assert three_cycle(perm) and S.cayley_distance(perm) == 2 == r.minimal["size"]
    assert r.queries == r.search_queries + r.shrink_queries and r.queries_to_first_break == r.search_queries
    assert ctx.engine.runs == 1 + r.queries  # every query reached the model once, duplicates cost nothing


def test_shrink_budget_caps_the_queries_after_the_first_break():
    breaks = lambda p: p[4] != 4  # noqa: E731
    free = run_search(FakeCtx(), PermProperty(5, breaks), budget=30, shrink_budget=100)
    capped = run_search(FakeCtx(), PermProperty(5, breaks), budget=30, shrink_budget=0)
    assert capped.shrink_queries == 0 and capped.queries == capped.queries_to_first_break
    assert free.queries_to_first_break == capped.queries_to_first_break  # the same seeded search up to the break
    assert free.minimal is not None and S.cayley_distance(free.minimal["perturbation"]["order"]) == 1
    assert breaks(tuple(capped.minimal["perturbation"]["order"]))  # type: ignore[index]


def test_failed_query_before_a_break_loses_the_item_and_after_it_does_not():
    lost = run_search(FakeCtx(), PermProperty(5, lambda p: False, fails=lambda p: p != (0, 1, 2, 3, 4)), budget=30)
    assert lost.status == "lost" and "boom" in lost.why and lost.failed_queries == 1 and lost.queries == 1
    ref_lost = run_search(FakeCtx(), PermProperty(5, lambda p: False, fails=lambda p: True), budget=30)
    assert ref_lost.status == "lost" and ref_lost.why.startswith("reference")
    excluded = run_search(FakeCtx(), PermProperty(5, lambda p: True), budget=30)
    assert excluded.status == "excluded" and excluded.queries == 0


def test_same_seed_same_search_other_seed_other_walk():
    prop = lambda: PermProperty(6, lambda p: p[5] == 0 and p[0] == 5)  # noqa: E731
    a = run_search(FakeCtx(), prop(), budget=60, seed=3).to_dict()
    b = run_search(FakeCtx(), prop(), budget=60, seed=3).to_dict()
    assert a == b
    c = run_search(FakeCtx(), prop(), budget=60, seed=4).to_dict()
    assert c["minimal"] is None or c["minimal"]["perturbation"]["order"][5] == 0


def test_corpus_replays_other_models_first_and_keeps_what_they_survive(tmp_path):
    corpus = Corpus(tmp_path / "hypothesis")
    breaks = lambda p: p[4] == 0  # noqa: E731
    first = run_search(FakeCtx("run-1"), PermProperty(5, breaks, model="m1"), corpus=corpus, budget=30)
    assert first.status == "broken" and first.replay == []
    stored = corpus.entries(PermProperty(5, breaks))
    assert [e["value"] for e in stored] == [first.minimal["perturbation"]] and stored[0]["model"] == "m1"  # type: ignore[index]
    # the same model in a later run: its own counterexample is not replayed (the same search runs again)
    again = run_search(FakeCtx("run-2"), PermProperty(5, breaks, model="m1"), corpus=corpus, budget=30)
    assert again.to_dict() == first.to_dict()
    # another model that breaks the same way: the stored one breaks it at query 1
    other = run_search(FakeCtx("run-3"), PermProperty(5, breaks, model="m2"), corpus=corpus, budget=30)
    assert other.replayed and other.queries_to_first_break == 1 and other.queries == 1
    assert other.replay[0]["outcome"] == "broken" and other.replay[0]["found_by"] == ["m1"]
    # a model that survives it: listed as survived, then searched; the entry stays in the corpus
    fixed = run_search(FakeCtx("run-4"), PermProperty(5, lambda p: False, model="m3"), corpus=corpus, budget=10)
    assert fixed.replay[0]["outcome"] == "survived" and fixed.status == "held"
    assert fixed.replay_queries == 1 and fixed.search_queries == 10
    assert len(corpus.entries(PermProperty(5, breaks))) == 1
    # entries written in this run are not replayed in it (the same result serially and with -n 2)
    same_run = run_search(FakeCtx("run-1"), PermProperty(5, breaks, model="m4"), corpus=corpus, budget=30)
    assert same_run.replay == []


def test_a_replayed_query_lost_before_any_break_loses_the_item(tmp_path):
    """A stored counterexample whose query fails for this model leaves its outcome unknown: the item
    is lost (as a lost search query before any break), never searched on and counted held."""
    corpus = Corpus(tmp_path / "hypothesis")
    first = run_search(FakeCtx("run-1"), PermProperty(5, lambda p: p[4] == 0, model="m1"), corpus=corpus, budget=30)
    stored = tuple(first.minimal["perturbation"]["order"])  # type: ignore[index]
    other = run_search(FakeCtx("run-2"), PermProperty(5, lambda p: False, fails=lambda p: p == stored, model="m2"),
                       corpus=corpus, budget=10)
    assert other.replay[0]["outcome"] == "lost"
    assert other.status == "lost" and "boom" in other.why and other.queries == 1 and other.failed_queries == 1


def _project(pytester: Any, manifest: Path) -> None:
    # a basename no test of this repository has: pytest imports the suite into this process
    write_suite_project(pytester.path, manifest, ("test_search.py",), rename={"test_search.py": "test_search_suite.py"})


def _made(output: str) -> int:
    import re

    m = re.search(r"model calls: (\d+) made", output)
    assert m, output[-2000:]
    return int(m.group(1))


def _verdicts(path: Path) -> dict[str, Any]:
    return {v["nodeid"].split("::")[-1]: v for v in json.loads(path.read_text())["verdicts"]}


@pytest.mark.slow
@pytest.mark.usefixtures("heavy_modules")
def test_suite_fails_letter_bias_rerun_is_free_candidate_replays_and_xdist_agrees(pytester, small_set):
    _project(pytester, small_set)
    quick = ("-m", "search and not slow", "-p", "no:randomly", "--posbias-threshold", "search=0.1")
    bad = pytester.runpytest(*quick, "--posbias-model", "sim:letter-bias", "--posbias-json=lb.json")
    assert bad.ret == 1
    v = _verdicts(pytester.path / "lb.json")
    order = v["test_search_option_order[sim:letter-bias]"]
    assert not order["passed"] and order["extra"]["broken"] == len(order["extra"]["counterexamples"]) > 0
    assert all(c["transpositions"] == 1 for c in order["extra"]["counterexamples"])
    assert v["test_search_stressor_repetition[sim:letter-bias]"]["passed"]  # letter bias never loops
    again = pytester.runpytest(*quick, "--posbias-model", "sim:letter-bias", "--posbias-json=lb2.json")
    assert again.ret == 1 and _made(again.stdout.str()) == 0
    assert _verdicts(pytester.path / "lb2.json")["test_search_option_order[sim:letter-bias]"]["extra"]["items"] == \
        order["extra"]["items"]
    cand = pytester.runpytest(*quick, "--posbias-model", "sim:unbiased", "--posbias-json=ub.json")
    assert cand.ret == 0
    rep = _verdicts(pytester.path / "ub.json")["test_search_option_order[sim:unbiased]"]["extra"]["replay"]
    assert len(rep["survived"]) == order["extra"]["broken"] and rep["still_break"] == []
    assert f"replayed {order['extra']['broken']} stored counterexamples first (found by sim:letter-bias)" in cand.stdout.str()
    # sim:looping serially and with -n 2, each on a fresh cache: the same searches
    loop = (*quick, "--posbias-model", "sim:looping")
    ser = pytester.runpytest_subprocess(*loop, "--posbias-cache=c1", "--posbias-json=s.json", timeout=600)
    par = pytester.runpytest_subprocess(*loop, "--posbias-cache=c2", "--posbias-json=p.json", "-n", "2", timeout=600)
    assert ser.ret == par.ret == 1  # the stressor search breaks every clean-benign video
    s, p = _verdicts(pytester.path / "s.json"), _verdicts(pytester.path / "p.json")
    for name in s:
        assert s[name]["extra"]["items"] == p[name]["extra"]["items"]
        assert s[name]["extra"]["counterexamples"] == p[name]["extra"]["counterexamples"]
    stress = s["test_search_stressor_repetition[sim:looping]"]["extra"]
    assert stress["broken"] > 0 and all(c["stressed_frames"] == 1 for c in stress["counterexamples"])
