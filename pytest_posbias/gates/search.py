"""The search gate: the share of items a property search breaks within its query budget, a
search-based attack success rate (VideoSTF's ASR, §4.4) gated like the other rate gates, with the
median and mean (AQ) queries to the first break beside it (docs/search.md, also for the schema of
the verdict's ``extra``). Items that violate the property unperturbed are not searched nor planned;
unusable items, a failed reference or a failed query before any break are lost units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..gate_context import ProbeContext, SearchGateContext
from ..gate_registry import paired_direction
from ..probes.search import ItemSearch
from ..probes.search_strips import MAX_WITH_THUMBNAILS, strip_thumbnails
from ..stats import Verdict
from .design import floored
from .measurement import Measurement, combine

SHOWN = ("answer_letter", "answer_text", "reference_letter", "reference_text")  # of a replayed multiple-choice query
TEXT_LIMIT = 1000  # characters of an answer text kept in the verdict (the run log keeps it whole)


def _short(x: object) -> object:
    return x[:TEXT_LIMIT] + "…" if isinstance(x, str) and len(x) > TEXT_LIMIT else x


def counterexample_record(r: ItemSearch, ctx: ProbeContext | None = None) -> dict[str, Any]:
    """One broken item's minimal counterexample for the report (texts cut at TEXT_LIMIT); with
    ``ctx``, the thumbnails of its original and perturbed frame strips
    (:func:`~.probes.search_strips.strip_thumbnails`), as the report reads the run log alone."""
    m = {k: _short(v) for k, v in (r.minimal or {}).items()}
    rec = {"item": r.item, "property": r.property, "model": r.model, "replayed": r.replayed,
           "queries_to_first_break": r.queries_to_first_break, "queries": r.queries,
           "shrink_queries": r.shrink_queries, **m}
    if r.replayed:
        rec["found_by"] = next((row.get("found_by", []) for row in r.replay if row.get("outcome") == "broken"), [])
    if ctx is not None and r.minimal:
        rec["thumbnails"] = strip_thumbnails(ctx, r.minimal)
    return rec


def _replay_answer(answer: object) -> object:
    """What the summary keeps of a replayed query's answer: a content index as is, a text cut short."""
    return {k: _short(v) for k, v in answer.items()} if isinstance(answer, Mapping) else answer


def _replay_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A replayed stored counterexample that was queried, as the summary keeps it."""
    return {"item": row["item"], "value": row["value"], "found_by": row.get("found_by", []),
            "answer": _replay_answer(row.get("answer")), "reference": _replay_answer(row.get("reference")),
            **{k: row[k] for k in SHOWN if k in row}}


def search_summary(results: Sequence[ItemSearch]) -> dict[str, Any]:
    """Counts, ASR and queries to the first break (median, mean = AQ) over broken items."""
    broken = [r for r in results if r.status == "broken"]
    held = [r for r in results if r.status == "held"]
    q = [int(r.queries_to_first_break) for r in broken if r.queries_to_first_break is not None]
    n = len(broken) + len(held)
    replayed_rows = [dict(row, item=r.item, reference=r.reference) for r in results for row in r.replay]
    return {
        "searched": n, "broken": len(broken), "held": len(held),
        "excluded": sum(r.status == "excluded" for r in results), "lost": sum(r.status == "lost" for r in results),
        "asr": len(broken) / n if n else None,
        "median_queries_to_first_break": float(np.median(q)) if q else None,
        "mean_queries_to_first_break": float(np.mean(q)) if q else None,
        "queries_to_first_break": q,
        "total_queries": int(sum(r.queries for r in results)),
        "shrink_queries": int(sum(r.shrink_queries for r in results)),
        "replay": {"queried": sum(1 for row in replayed_rows if row.get("outcome") in ("broken", "survived", "lost")),
                   "still_break": [_replay_row(row) for row in replayed_rows if row.get("outcome") == "broken"],
                   "survived": [_replay_row(row) for row in replayed_rows if row.get("outcome") == "survived"],
                   "lost": [{"item": row["item"], "value": row["value"], "found_by": row.get("found_by", [])}
                            for row in replayed_rows if row.get("outcome") in ("lost", "unusable")],
                   "found_by": sorted({m for row in replayed_rows for m in row.get("found_by", [])}),
                   "broken_by_replay": sum(r.replayed for r in results)},
    }


def replay_line(summary: Mapping[str, Any]) -> str:
    """The replay of stored counterexamples in words (empty when none was replayed), e.g.
    ``replayed 5 stored counterexamples first (found by sim:letter-bias): 0 still break, 5 survived``."""
    rp = summary.get("replay") or {}
    if not rp.get("queried"):
        if rp.get("lost"):  # every stored entry was unusable here: say so rather than nothing
            return (f"{len(rp['lost'])} stored counterexamples (found by {', '.join(rp.get('found_by', [])) or '?'}) "
                    "could not be replayed: lost or not applicable here")
        return ""
    lost = f", {len(rp.get('lost', []))} lost or not applicable here" if rp.get("lost") else ""
    return (f"replayed {rp['queried']} stored counterexamples first (found by "
            f"{', '.join(rp.get('found_by', [])) or '?'}): {len(rp.get('still_break', []))} still break, "
            f"{len(rp.get('survived', []))} survived{lost}")


def search_measurement(results: Sequence[ItemSearch], *, planned: int, unusable: Sequence[str] = (), unit: str = "items"
                       ) -> Measurement:
    """Items planned (drawn, minus those not searchable), measured (searched) and lost, and the
    queries behind the gate (reference queries included) with the failed ones."""
    excluded = sum(r.status == "excluded" for r in results)
    lost_ref = sum(r.status == "lost" and r.why.startswith("reference") for r in results)
    lost_walk = sum(r.status == "lost" and not r.why.startswith("reference") for r in results)
    measured = sum(r.status in ("broken", "held") for r in results)
    calls = sum(r.queries + 1 for r in results)  # every item's reference query, then its search queries
    failed = sum(r.failed_queries for r in results) + lost_ref
    return Measurement(unit, max(planned - excluded, measured), measured,
                       {"reference_lost": lost_ref, "query_lost_before_a_break": lost_walk,
                        "unusable_data": len(unusable)},
                       calls=calls, failed_calls=failed,
                       examples=[*list(unusable)[:3],
                                 *[f"{r.item}: {r.why}" for r in results if r.status == "lost"][:3]])


def _search_extra(ctx: ProbeContext, prop: str, results: Sequence[ItemSearch], s: Mapping[str, Any],
                  head: Mapping[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """A search verdict's ``extra``: the property, ``head`` (budgets, the baseline's counts), the
    summary ``s``, every item's outcome and the counterexamples, and the replay line the terminal
    summary prints under the gate."""
    budgets = {k: head[k] for k in ("budget", "shrink_budget")}
    ex: dict[str, Any] = {
        "property": prop, **budgets, **s, **{k: v for k, v in head.items() if k not in budgets},
        "items": [{k: v for k, v in r.to_dict().items() if k not in ("minimal", "replay", "reference")}
                  for r in results],
        "counterexamples": [counterexample_record(r, ctx if i < MAX_WITH_THUMBNAILS else None)
                            for i, r in enumerate(r for r in results if r.status == "broken")],
        **(extra or {}),
    }
    if line := replay_line(s):
        ex["summary_line"] = line
    return ex


def search_verdict(ctx: SearchGateContext, model: str, prop: str, results: Sequence[ItemSearch], *, planned: int,
                   budget: int, shrink_budget: int, unusable: Sequence[str] = (), name: str | None = None,
                   unit: str = "items", extra: Mapping[str, Any] | None = None) -> Verdict:
    """The ``search`` gate for one property (module docstring): exact binomial rate of broken
    items among searched ones <= threshold, then the measurement floor."""
    s = search_summary(results)
    name = name or f"{prop} search success rate (budget {budget} queries)"
    ex = _search_extra(ctx, prop, results, s, {"budget": budget, "shrink_budget": shrink_budget}, extra)
    v = ctx.rate_gate("search", model, s["broken"], s["searched"], name=name, unit=f"searched {unit}", extra=ex)
    notes = [f"Median queries to the first break {s['median_queries_to_first_break']:g} "
             f"(AQ {s['mean_queries_to_first_break']:.3g})."] if s["median_queries_to_first_break"] is not None else []
    if line := replay_line(s):
        notes.append(line + ".")
    if notes:
        v = replace(v, reason=" ".join([v.reason, *notes]))
    return floored(ctx, v, search_measurement(results, planned=planned, unusable=unusable, unit=unit))


def paired_search_verdict(ctx: SearchGateContext, model: str, baseline: str, prop: str, results: Sequence[ItemSearch],
                          base_results: Sequence[ItemSearch], *, planned: int, budget: int, shrink_budget: int,
                          unusable: Sequence[str] = (), base_unusable: Sequence[str] = (), unit: str = "items",
                          extra: Mapping[str, Any] | None = None) -> Verdict:
    """The ``search`` gate against ``--baseline``: on the items searched for both models (broken
    or held in both), Δ = share broken (candidate) − share broken (baseline), the exact unconditional
    paired non-inferiority test (:meth:`~pytest_posbias.run.context.RunContext.baseline_gate`, ``worse='binary'``),
    compliant when the candidate is worse by at most the ``search`` margin (default 0.10). The
    extra keeps the candidate's counterexamples and names the items only the candidate breaks
    (``newly_broken``) and those only the baseline breaks (``fixed``)."""
    base = {r.item: r for r in base_results if r.status in ("broken", "held")}
    paired = [r for r in results if r.status in ("broken", "held") and r.item in base]
    cand = np.array([int(r.status == "broken") for r in paired], dtype=int)
    bas = np.array([int(base[r.item].status == "broken") for r in paired], dtype=int)
    ex = _search_extra(ctx, prop, results, search_summary(results), {
        "budget": budget, "shrink_budget": shrink_budget, "baseline_model": baseline,
        "baseline_broken": int(bas.sum()), "paired": len(paired),
        "newly_broken": [r.item for r, a, b in zip(paired, cand, bas, strict=True) if a and not b],
        "fixed": [r.item for r, a, b in zip(paired, cand, bas, strict=True) if b and not a]}, extra)
    name = f"{prop} search success rate (budget {budget} queries)"  # baseline_gate appends " vs baseline"
    v = ctx.baseline_gate("search", model, cand, bas, np.array([r.item for r in paired]), name=name,
                          unit=f"searched {unit}", worse=paired_direction("search"), extra=ex)
    m = combine(search_measurement(results, planned=planned, unusable=unusable, unit=unit),
                search_measurement(base_results, planned=planned, unusable=base_unusable, unit=unit),
                prefix_b="baseline", measured=len(paired))
    return floored(ctx, v, m)


def search_gate(ctx: SearchGateContext, model: str, prop: str, *, slow: bool = False) -> Verdict:
    """Run (or reuse) the property search of ``prop`` on ``model`` and gate it; with
    ``--baseline``, search the baseline too and gate the paired change (:func:`paired_search_verdict`)."""
    from ..probes.search_run import property_search

    ps = property_search(ctx, model, prop, slow=slow)
    baseline = getattr(ctx, "baseline", None)
    if baseline and baseline != model:
        bs = property_search(ctx, baseline, prop, slow=slow)
        return paired_search_verdict(ctx, model, baseline, prop, ps.results, bs.results, planned=ps.planned,
                                     budget=ps.budget, shrink_budget=ps.shrink_budget, unusable=ps.unusable,
                                     base_unusable=bs.unusable, unit=ps.unit, extra={"slow": slow})
    return search_verdict(ctx, model, prop, ps.results, planned=ps.planned, budget=ps.budget,
                          shrink_budget=ps.shrink_budget, unusable=ps.unusable, unit=ps.unit, extra={"slow": slow})


__all__ = ["counterexample_record", "paired_search_verdict", "replay_line", "search_gate", "search_measurement",
           "search_summary", "search_verdict"]
