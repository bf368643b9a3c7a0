"""Which items each search property runs on, with what budget: the suites' entry point.

Items are prefixes of the probes' own seeded orders (multiple-choice items as the phase
probe, videos as the stressor probe, groups of four videos in a seeded order), so a search
shares its reference queries with those probes' cache entries where the requests coincide.
Sizes and budgets come from ``[tool.posbias.probes.search]`` (defaults: 24 items, 8 videos,
4 groups, budget 30, shrink budget 60); ``slow`` runs the heavier variant (``slow_budget``
queries, twice the items). An item whose data cannot be used is a lost unit, named.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..data.problems import DataProblem
from ..errors import ConfigError, PosbiasError, VideoError
from ..video.decode import content_hash
from .search import ItemProperty, ItemSearch, search_items
from .search_corpus import corpus_for

if TYPE_CHECKING:
    from ..gate_context import SearchContext

PROPERTIES = ("order", "phase", "stressor", "coverage")


@dataclass
class PropertySearch:
    """The searches of one property on one model."""

    property: str
    model: str
    results: list[ItemSearch]
    planned: int
    budget: int
    shrink_budget: int
    unusable: list[str] = field(default_factory=list)
    unit: str = "items"
    calls: dict[str, Any] = field(default_factory=dict)


def _clip(path: str | os.PathLike[str]) -> str:
    """A video's content hash (its path when it cannot be read: the property then reports the problem)."""
    try:
        return content_hash(path)
    except VideoError:
        return str(path)


def _props(ctx: SearchContext, model: str, kind: str, n: int, st: dict[str, Any]
           ) -> tuple[list[ItemProperty[Any]], int, list[str]]:
    manifest = ctx.manifest()
    props: list[ItemProperty[Any]] = []
    unusable: list[str] = []
    if kind in ("order", "phase"):
        from .phase import item_order
        from .search_mcq import McqProperty

        items = item_order(ctx, manifest)[:n]
        for it in items:
            if isinstance(it, DataProblem):
                unusable.append(f"{it.item}: {it.message}")
                continue
            try:
                props.append(McqProperty(ctx, model, it, kind, ctx.phase_spec(), max_denominator=st["max_denominator"]))
            except PosbiasError as exc:
                unusable.append(f"item {it.id}: {exc}")
        return props, len(items), unusable
    if kind == "stressor":
        from .search_stressor import StressorProperty
        from .stressor import select_videos

        frames = ctx.probe_settings("stressor")["frames"][0]
        spec = ctx.stressor_spec(frames)
        videos = select_videos(ctx, manifest, n)
        clips = [_clip(v.path) for v in videos]
        for i, v in enumerate(videos):
            # the next video showing another clip (another item of the same clip would be no foreign frames)
            foreign = next((f for f, c in zip(videos[i + 1:] + videos[:i], clips[i + 1:] + clips[:i], strict=True)
                            if c != clips[i]), None)
            try:
                props.append(StressorProperty(ctx, model, v, foreign, spec, max_edits=st["max_edits"],
                                              max_frames=st["max_frames"]))
            except PosbiasError as exc:
                unusable.append(f"video {v.id}: {exc}")
        return props, len(videos), unusable
    # coverage (``kind`` is checked by property_search)
    from .positional import positional_spec
    from .search_coverage import CoverageProperty

    groups = [g for g in manifest.groups if g.P == 4] or list(manifest.groups)
    chosen = [groups[int(i)] for i in ctx.rng("search-groups").permutation(len(groups))[:n]]
    pos = ctx.probe_settings("positional")
    for g in chosen:
        try:
            pspec = positional_spec(pos, g.domain, g.bucket, g.P)
            props.append(CoverageProperty(ctx, model, g, manifest, pspec, floor=ctx.threshold("coverage", model)))
        except PosbiasError as exc:
            unusable.append(f"group {g.id}: {exc}")
    return props, len(chosen), unusable


def _note(ctx: SearchContext, ps: PropertySearch) -> None:
    """One progress line per search: broken items, and the replay of stored counterexamples."""
    rows = [row for r in ps.results for row in r.replay]
    broken = sum(r.status == "broken" for r in ps.results)
    searched = sum(r.status in ("broken", "held") for r in ps.results)
    line = f"search {ps.property} on {ps.model}: {broken}/{searched} {ps.unit} broken within {ps.budget} queries"
    if rows:
        found_by = sorted({m for row in rows for m in row.get("found_by", [])})
        line += (f"; replayed {len(rows)} stored counterexamples first (found by {', '.join(found_by)}): "
                 f"{sum(row['outcome'] == 'broken' for row in rows)} still break, "
                 f"{sum(row['outcome'] == 'survived' for row in rows)} survived")
    ctx.note(line)


def property_search(ctx: SearchContext, model: str, kind: str, *, slow: bool = False) -> PropertySearch:
    """Search every item of ``kind`` for ``model`` (memoised per process)."""
    if kind not in PROPERTIES:
        raise ConfigError(f"`property` must be one of {', '.join(PROPERTIES)}; got {kind!r}")
    st = ctx.probe_settings("search")
    budget = st["slow_budget"] if slow else st["budget"]
    unit = {"order": "items", "phase": "items", "stressor": "videos", "coverage": "groups"}[kind]  # and its size key
    n = st[unit] * (2 if slow else 1)

    def run() -> PropertySearch:
        before = ctx.engine.stats.snapshot()
        corpus = corpus_for(ctx)  # an unusable corpus folder stops the gate here, naming it (not once per item)
        props, planned, unusable = _props(ctx, model, kind, n, st)
        results: list[ItemSearch] = []
        for p in props:
            try:
                results.extend(search_items(ctx, [p], budget=budget, shrink_budget=st["shrink_budget"], corpus=corpus))
            except PosbiasError as exc:
                unusable.append(f"{p.item_id}: {exc}")
        out = PropertySearch(kind, model, results, planned, budget, st["shrink_budget"], unusable, unit,
                             ctx.engine.stats.since(before))
        _note(ctx, out)
        return out

    return ctx.memo(f"search|{model}|{kind}|{slow}|{sorted(st.items())}", run)


__all__ = ["PROPERTIES", "PropertySearch", "property_search"]
