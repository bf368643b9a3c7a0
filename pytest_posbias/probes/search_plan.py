"""The property search under ``posbias plan``: every item at the most queries a run can make.

A plan run's backend answers no request (:class:`~pytest_posbias.models.plan.PlanBackend`), so a
search steered by its answers would stop at a lost reference or at a first "break" and plan a small
fraction of what a run can send. In plan mode :func:`~.search.run_search` hands the item here: the
requests of a run's longest search are sent, each once, with no answer scored:

1. the reference query (the unperturbed input);
2. one query per stored counterexample the run would replay (a replay that still breaks ends a run's
   search, so the longest search replays every one and finds no break);
3. distinct perturbed requests until ``budget + shrink_budget`` of them (a run asks at most ``budget``
   new requests before its first break and ``shrink_budget`` after it, each one distinct, a repeat or the
   reference costing nothing), or until the space has no more: a run cannot ask more than it holds (a
   5-option ordering has 119 besides the identity). A property that lists its space
   (:meth:`~.search.ItemProperty.all_values`: option orderings, phases) is walked through it; any
   other is drawn from its strategy, seeded per item, with ``DRAWS_PER_QUERY`` draws per planned query.

So a real run's model calls for a search gate are at most the plan's, and equal to it for an item
whose search holds without a break on a space larger than ``budget``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .search import ItemSearch, V, _find, _Stop

if TYPE_CHECKING:
    from ..gate_context import SearchContext
    from .search import ItemProperty
    from .search_corpus import Corpus

DRAWS_PER_QUERY = 20  # hypothesis draws per planned query of a space the property does not list: a large space
MIN_DRAWS = 2000  # gives a new request at almost every draw, a small one is drawn through many times


def plan_search(ctx: SearchContext, prop: ItemProperty[V], *, budget: int, shrink_budget: int,
                corpus: Corpus | None, seed: int) -> ItemSearch:
    """Send the requests of the longest search of ``prop`` (module docstring); the item is ``held``,
    with ``queries`` the distinct perturbed requests sent."""
    res = ItemSearch(prop.property, prop.item_id, prop.model, "held", why="planned: the most queries a run can make")
    ref_req = prop.request(prop.reference_value())
    ctx.engine.run([ref_req], probe="search")
    seen = {str(ctx.engine.keys([ref_req])[0])}

    def ask(value: V) -> bool:
        req = prop.request(value)
        key = str(ctx.engine.keys([req])[0])
        if key in seen:
            return False
        seen.add(key)
        ctx.engine.run([req], probe="search")
        return True

    for entry in corpus.replayable(prop, ctx) if corpus is not None else []:
        try:
            value = prop.decode(entry["value"])
        except (ConfigError, KeyError, TypeError, ValueError):
            continue  # a run does not query an unusable entry either
        res.replay_queries += int(ask(value))
    cap = budget + shrink_budget

    def condition(value: V) -> bool:  # cap >= 1 (run_search checks the budgets): it stops at the cap
        res.search_queries += int(ask(value))
        if res.search_queries >= cap:
            raise _Stop
        return False

    if (listed := prop.all_values()) is not None:  # a small space: each perturbation a run may ask, once, up to the cap
        with contextlib.suppress(_Stop):
            for value in listed:
                condition(value)
    else:  # drawn from the property's strategy, seeded per item, until the cap or the draws run out
        _find(prop, condition, max(DRAWS_PER_QUERY * cap, MIN_DRAWS), seed, "plan", shrink=False)
    drawn = res.search_queries
    res.search_queries, res.shrink_queries = min(drawn, budget), max(0, drawn - budget)
    res.queries = res.replay_queries + drawn
    return res


__all__ = ["plan_search"]
