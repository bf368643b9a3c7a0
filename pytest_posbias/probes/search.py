"""Property search: the least change that breaks a model, found by hypothesis, per item.

For one item and one property (:class:`ItemProperty`: option order, sampling phase, stressor
repetition, slot coverage), every query goes through the engine (cached and counted);
docs/search.md describes the budgets. The steps:

1. **reference** — the unperturbed input, queried once and not counted. A lost reference makes
   the item lost; one that already violates the property is not searchable.
2. **replay** — the regression corpus's (:mod:`.search_corpus`) counterexamples, in a fixed
   order; the first that still breaks the item ends the search (``replayed``), and one lost
   (failed or unparseable) makes the item lost.
3. **search** — ``hypothesis.find`` over the property's strategy, seeded by (run seed, property,
   item): at most ``budget`` distinct queries before the first break, then ``shrink_budget``; as
   hypothesis's shrinker is local, the search then looks again, in the same budget, for a failing
   example of strictly smaller :meth:`ItemProperty.size` until it finds none.

A failed or unparseable query before the first break makes the item lost (fail closed); after it,
it counts as "does not fail". An item no perturbation changes (no query made) is lost, never held.
Under ``posbias plan`` the item's longest search is sent instead (:mod:`.search_plan`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from random import Random
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..engine import Generation, Request
from ..errors import ConfigError
from .settings import _int_ge

if TYPE_CHECKING:  # annotations only: importing this module does not import hypothesis
    from hypothesis.strategies import SearchStrategy

    from ..gate_context import SearchContext
    from .search_corpus import Corpus

DEFAULT_BUDGET = 30  # VideoSTF's attack cap
DEFAULT_SHRINK_BUDGET = 60

V = TypeVar("V")  # a property's perturbation (an ordering, a phase, a layout, stressor edits)


@dataclass(frozen=True)
class Outcome:
    """One query's result: ``ok`` (measured), ``broken`` (the property fails), the answer in
    JSON form (content index, text, coverage per video) and what the report shows of it."""

    ok: bool
    broken: bool
    answer: Any = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    why_lost: str = ""


class ItemProperty(ABC, Generic[V]):
    """A property of one item under a space of perturbations of type ``V`` (subclasses: one per
    property)."""

    property: str  # e.g. "order", "phase", "stressor", "coverage"
    item_id: str
    model: str

    @abstractmethod
    def strategy(self) -> SearchStrategy[V]:
        """The hypothesis strategy of perturbations (shrinks toward no change)."""

    @abstractmethod
    def request(self, value: V) -> Request:
        """The model request that shows the item perturbed by ``value``."""

    @abstractmethod
    def reference_value(self) -> V:
        """The perturbation that changes nothing (identity ordering, phase 0, no stressor)."""

    @abstractmethod
    def score(self, value: V, gen: Generation, reference: Outcome | None) -> Outcome:
        """Score one answer; ``reference`` is None when scoring the reference itself."""

    @abstractmethod
    def encode(self, value: V) -> dict[str, Any]:
        """JSON form of a perturbation (the corpus and the report store it)."""

    @abstractmethod
    def decode(self, data: Mapping[str, Any]) -> V:
        """A perturbation from its JSON form (raises ConfigError when it does not fit the item)."""

    @abstractmethod
    def size(self, value: V) -> float:
        """How much ``value`` changes (transpositions, phase, stressed frames)."""

    smallest_change: float = 0.0  # no perturbation changes less (1 for counts: transpositions, frames)

    def accept(self, req: Request, gen: Generation) -> str | None:
        """The engine's ``accept`` rule for the property's requests (the probe's own): None when usable;
        an unusable answer is not cached as an answer, so a later run asks again."""
        return None

    def all_values(self) -> Sequence[V] | None:
        """Every perturbation the strategy can draw, where the space is small enough to list (``posbias plan``
        sends each once when a run could ask them all); None for a space too large to list."""
        return None

    def searchable(self, reference: Outcome) -> str | None:
        """Why the item cannot be searched given its reference outcome, or None."""
        return "the unperturbed input already violates the property" if reference.broken else None

    def describe(self, value: V, outcome: Outcome, reference: Outcome) -> dict[str, Any]:
        """What the report shows of a counterexample (JSON)."""
        return {"perturbation": self.encode(value), "size": self.size(value), "answer": outcome.answer,
                "reference_answer": reference.answer, **dict(outcome.detail)}

    def corpus_key(self) -> str:
        """The regression corpus key: property (with its space's parameters) and item."""
        return f"{self.property}|{self.item_id}"


@dataclass
class ItemSearch:
    """The search of one item: ``status`` is ``broken``, ``held`` (no break within the budget),
    ``lost`` (the reference or a query before the first break failed) or ``excluded`` (the
    unperturbed input already violates the property)."""

    property: str
    item: str
    model: str
    status: str
    why: str = ""
    queries_to_first_break: int | None = None
    queries: int = 0  # distinct perturbed queries: replay + search + shrinking
    replay_queries: int = 0
    search_queries: int = 0
    shrink_queries: int = 0
    failed_queries: int = 0
    replayed: bool = False  # the break came from a stored counterexample
    minimal: dict[str, Any] | None = None  # describe() of the minimal counterexample
    replay: list[dict[str, Any]] = field(default_factory=list)  # stored counterexamples and their outcome here
    reference: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The search as JSON (the run log's ``search`` item record): every field."""
        return asdict(self)


def _shown(out: Outcome, reference: Outcome) -> dict[str, Any]:
    """What the report shows of a replayed query beside its answer: the chosen option's letter and
    text here and unperturbed (multiple-choice properties; empty for the others)."""
    return {f"{name}_{k}": o.detail[f"answer_{k}"] for name, o in (("answer", out), ("reference", reference))
            for k in ("letter", "text") if f"answer_{k}" in o.detail}


class _Stop(BaseException):
    """Ends a hypothesis run from inside the property (a BaseException passes through hypothesis)."""


def item_seed(run_seed: int, *keys: object) -> int:
    """The search's seed: SHA-256 of (run seed, keys), so every item has its own fixed search."""
    h = hashlib.sha256(json.dumps([int(run_seed), *map(str, keys)]).encode()).digest()
    return int.from_bytes(h[:8], "little")


def _find(prop: ItemProperty[V], condition: Callable[[V], bool], max_examples: int, seed: int, *keys: object,
          shrink: bool) -> None:
    """``hypothesis.find`` of ``condition`` over the property's strategy (quiet, no database, shrinking
    only with ``shrink``), seeded by (run seed, ``keys``, corpus key, model); a :class:`_Stop` or no
    failing example ends it quietly."""
    from hypothesis import Phase, Verbosity, find, settings
    from hypothesis.errors import NoSuchExample

    cfg = settings(max_examples=max_examples, database=None, deadline=None, derandomize=False, print_blob=False,
                   phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate], verbosity=Verbosity.quiet)
    with contextlib.suppress(_Stop, NoSuchExample):
        find(prop.strategy(), condition, settings=cfg,
             random=Random(item_seed(seed, *keys, prop.corpus_key(), prop.model)))


class _Runner(Generic[V]):
    """Counts queries by request key and enforces the budgets (one instance per item search)."""

    def __init__(self, ctx: SearchContext, prop: ItemProperty[V], reference: Outcome, ref_key: str) -> None:
        self.ctx, self.prop, self.reference = ctx, prop, reference
        self.seen: dict[str, Outcome] = {ref_key: reference}
        self.order: list[str] = []  # query keys in the order they were first asked
        self.failed = 0
        self.first_break: int | None = None
        self.last: tuple[V, Outcome] | None = None  # the last failing example and its outcome
        self.lost: str = ""

    def key(self, req: Request) -> str:
        return str(self.ctx.engine.keys([req])[0])

    def query(self, value: V) -> tuple[Outcome, bool]:
        """The outcome of ``value`` and whether it was a new query."""
        req = self.prop.request(value)
        k = self.key(req)
        if k in self.seen:
            return self.seen[k], False
        gen = self.ctx.engine.run([req], probe="search", accept=self.prop.accept)[0]
        out = self.prop.score(value, gen, self.reference)
        self.seen[k] = out
        self.order.append(k)
        self.failed += int(not out.ok)
        return out, True


def run_search(ctx: SearchContext, prop: ItemProperty[V], *, budget: int = DEFAULT_BUDGET,
               shrink_budget: int = DEFAULT_SHRINK_BUDGET, corpus: Corpus | None = None, seed: int = 0) -> ItemSearch:
    """Search one item (module docstring): reference, replay of the corpus, hypothesis search
    with shrinking. ``corpus`` (:class:`~.search_corpus.Corpus`) is read for replay and gets the
    new minimal counterexample."""
    _int_ge(1, "queries before the first break")("`budget`", budget)
    _int_ge(0)("`shrink_budget`", shrink_budget)
    if getattr(ctx.engine.backend(prop.model), "plans_only", False):  # posbias plan: answers steer nothing
        from .search_plan import plan_search

        return plan_search(ctx, prop, budget=budget, shrink_budget=shrink_budget, corpus=corpus, seed=seed)
    res = ItemSearch(prop.property, prop.item_id, prop.model, "held")
    ref_value = prop.reference_value()
    ref_req = prop.request(ref_value)
    ref_gen = ctx.engine.run([ref_req], probe="search", accept=prop.accept)[0]
    reference = prop.score(ref_value, ref_gen, None)
    res.reference = reference.answer
    if not reference.ok:
        res.status, res.why = "lost", f"reference query lost: {reference.why_lost or 'failed call'}"
        return res
    if why := prop.searchable(reference):
        res.status, res.why = "excluded", why
        return res
    runner = _Runner(ctx, prop, reference, str(ctx.engine.keys([ref_req])[0]))

    # 2. replay the stored counterexamples of other models / earlier runs
    for entry in corpus.replayable(prop, ctx) if corpus is not None else []:
        try:
            value = prop.decode(entry["value"])
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            res.replay.append({**entry, "outcome": "unusable", "why": str(exc)})
            continue
        out, new = runner.query(value)
        res.replay_queries += int(new)
        result = "lost" if not out.ok else ("broken" if out.broken else "survived")
        res.replay.append({**entry, "answer": out.answer, "outcome": result, **_shown(out, reference)})
        if not out.ok:  # its outcome is unknown: lost, as a search query lost before any break
            runner.lost = out.why_lost or "failed call"
            break
        if out.broken:
            runner.first_break = max(1, len(runner.order))
            res.replayed = True
            res.minimal = prop.describe(value, out, reference)
            break
    if res.replayed:
        res.status = "broken"
    elif runner.lost:
        res.status, res.why = "lost", f"replayed query {len(runner.order)} lost before any break: {runner.lost}"
    else:
        # 3. hypothesis search + shrinking under the budgets
        def condition(value: V) -> bool:
            spent = len(runner.order) - res.replay_queries
            over = spent >= budget if runner.first_break is None else spent - res.search_queries >= shrink_budget
            # past the budget a repeat of a known query still answers; a new one stops the search
            if over and runner.key(prop.request(value)) not in runner.seen:
                raise _Stop
            out, _new = runner.query(value)
            if not out.ok:
                if runner.first_break is None:
                    runner.lost = out.why_lost or "failed call"
                    raise _Stop
                return False
            if out.broken:
                if runner.first_break is None:
                    runner.first_break = len(runner.order)
                    res.search_queries = len(runner.order) - res.replay_queries
                runner.last = (value, out)
            return out.broken

        _find(prop, condition, max(4 * budget, 100), seed, "search", shrink=True)
        # refine (module docstring): only strictly smaller examples are queried, within the shrink budget
        rounds = 0
        while runner.last is not None:  # a break was found (a lost query ends the search before any)
            best = prop.size(runner.last[0])
            if best <= prop.smallest_change:
                break
            rounds += 1
            before = len(runner.order)

            def smaller(value: V, best: float = best) -> bool:
                return prop.size(value) < best and condition(value)

            _find(prop, smaller, max(4 * budget, 100), seed, "refine", rounds, shrink=True)
            if prop.size(runner.last[0]) >= best or len(runner.order) == before:
                break
        if runner.first_break is None:
            res.search_queries = len(runner.order) - res.replay_queries
            if runner.lost:
                res.status, res.why = "lost", f"query {len(runner.order)} lost before any break: {runner.lost}"
            elif not runner.order:  # every value drawn was the reference request: nothing was tested
                res.status, res.why = "lost", ("no perturbation changes the model's input (a window too short for "
                                               "its phases to differ)")
            else:
                res.why = f"no counterexample within {budget} queries"
        else:
            res.status = "broken"
            res.shrink_queries = len(runner.order) - res.replay_queries - res.search_queries
            assert runner.last is not None  # set with first_break by the search's condition
            failing, outcome = runner.last
            res.minimal = prop.describe(failing, outcome, reference)
            if corpus is not None:
                corpus.add(prop, ctx, prop.encode(failing))
    res.queries = len(runner.order)
    res.failed_queries = runner.failed
    res.queries_to_first_break = runner.first_break
    return res


def search_items(ctx: SearchContext, props: Sequence[ItemProperty[Any]], *, budget: int, shrink_budget: int,
                 corpus: Corpus | None) -> list[ItemSearch]:
    """:func:`run_search` over items in turn, each observed in the run log (``search`` probe)."""
    out = []
    for p in props:
        out.append(run_search(ctx, p, budget=budget, shrink_budget=shrink_budget, corpus=corpus, seed=ctx.seed))
        ctx.observe("search", {"type": "item", **out[-1].to_dict()})
    return out


__all__ = ["DEFAULT_BUDGET", "DEFAULT_SHRINK_BUDGET", "ItemProperty", "ItemSearch", "Outcome", "item_seed",
           "run_search", "search_items"]
