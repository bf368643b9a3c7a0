"""Which items each search property runs on, with what budget (``probes.search_run``): the
properties it knows, items as prefixes of the probes' own seeded orders, the sizes and budgets of
``[tool.posbias.probes.search]`` and their doubled slow variant, one search per process (memoised),
every item lost when the model errs, and the progress line. Runs on the small synthetic set."""

from __future__ import annotations

import pytest
from support.scripted_backend import ScriptedBackend

from pytest_posbias.engine import Generation
from pytest_posbias.errors import ConfigError
from pytest_posbias.probes.phase import item_order
from pytest_posbias.probes.search_run import PROPERTIES, property_search
from pytest_posbias.probes.stressor import select_videos

SMALL = {"search": {"items": 3, "videos": 2, "groups": 2, "budget": 4, "shrink_budget": 2, "slow_budget": 6}}


def test_an_unknown_property_is_refused_naming_it_and_the_known_ones(run_context):
    """The error names the property asked for and lists order, phase, stressor and coverage."""
    ctx = run_context()
    with pytest.raises(ConfigError) as err:
        property_search(ctx, "sim:unbiased", "layout")
    assert "'layout'" in str(err.value) and all(p in str(err.value) for p in PROPERTIES)


def test_order_search_runs_on_the_phase_probes_first_items_once_per_process(run_context):
    """The items are the first ``items`` of the phase probe's seeded order, at the configured budget;
    asking again returns the memoised searches (no new model call)."""
    ctx = run_context("sim:letter-bias", probes=SMALL)
    ps = property_search(ctx, "sim:letter-bias", "order")
    assert (ps.property, ps.unit, ps.planned, ps.budget, ps.shrink_budget) == ("order", "items", 3, 4, 2)
    assert [r.item for r in ps.results] == [it.id for it in item_order(ctx, ctx.manifest())[:3]]
    assert all(r.search_queries <= 4 and r.shrink_queries <= 2 for r in ps.results)
    made = ctx.engine.stats.made
    assert property_search(ctx, "sim:letter-bias", "order") is ps and ctx.engine.stats.made == made


def test_the_slow_variant_doubles_the_items_at_the_slow_budget(run_context):
    """``slow``: twice the items (videos here) and ``slow_budget`` queries each."""
    ctx = run_context(probes=SMALL, backend=ScriptedBackend(lambda r: Generation("a plain description of it")))
    fast = property_search(ctx, "sim:unbiased", "stressor")
    slow = property_search(ctx, "sim:unbiased", "stressor", slow=True)
    assert (fast.unit, fast.planned, fast.budget) == ("videos", 2, 4)
    assert (slow.planned, slow.budget) == (4, 6)
    assert [r.item for r in slow.results] == [v.id for v in select_videos(ctx, ctx.manifest(), 4)]


def test_every_item_is_lost_when_every_call_fails(run_context):
    """A model whose every call fails: each planned group's search is lost (its reference failed),
    none is held or broken."""
    ctx = run_context(probes=SMALL, backend=ScriptedBackend(lambda r: Generation(finish_reason="error", error="down")))
    ps = property_search(ctx, "sim:unbiased", "coverage")
    assert ps.unit == "groups" and ps.planned == 2 == len(ps.results)
    assert all(r.status == "lost" and r.why.startswith("reference") for r in ps.results)


def test_the_progress_line_counts_broken_items(run_context, monkeypatch):
    """One line per search: broken of searched items within the budget."""
    ctx = run_context("sim:letter-bias", probes=SMALL)
    lines: list[str] = []
    monkeypatch.setattr(ctx, "note", lines.append)
    ps = property_search(ctx, "sim:letter-bias", "order")
    broken = sum(r.status == "broken" for r in ps.results)
    searched = sum(r.status in ("broken", "held") for r in ps.results)
    assert f"search order on sim:letter-bias: {broken}/{searched} items broken within 4 queries" in lines


def test_an_item_whose_video_cannot_be_read_is_lost_and_named(run_context, monkeypatch, tmp_path):
    """A multiple-choice item whose video file is missing is no search: it is named among the
    unusable items with the problem, still planned, and the other items are searched."""
    import dataclasses

    from pytest_posbias.data.manifest import Manifest

    ctx = run_context("sim:letter-bias", probes=SMALL)
    m = ctx.manifest()
    first = item_order(ctx, m)[0]
    broken = dataclasses.replace(first, path=tmp_path / "gone.mp4")
    bad = Manifest(m.path, videos=m.videos, mcq=[broken if it.id == first.id else it for it in m.mcq])
    monkeypatch.setattr(ctx, "manifest", lambda: bad)
    ps = property_search(ctx, "sim:letter-bias", "order")
    assert ps.planned == 3 and len(ps.results) == 2 and first.id not in [r.item for r in ps.results]
    (why,) = ps.unusable
    assert why.startswith(f"item {first.id}:") and "gone.mp4" in why
