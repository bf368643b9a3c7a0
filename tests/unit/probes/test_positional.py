"""The positional probe (``probes.positional``): the cyclic orders of the multi-video paper and
which video sits in which slot of each request, one seed per instance, the single-target and
full-permutation variants, lost instances (failed calls, empty and constant answers) counted
by cause and never scored, and the spec's labels and settings. The run checks use the small
synthetic set and a scripted backend (``support.scripted_backend``)."""

from __future__ import annotations

import itertools

import pytest
from support.scripted_backend import ScriptedBackend

from pytest_posbias.engine import Generation
from pytest_posbias.probes.positional import (
    LOST_CAUSES,
    PositionalSpec,
    build_requests,
    positional_spec,
    run_positional,
    summary_text,
    with_overrides,
)
from pytest_posbias.scoring import usable
from pytest_posbias.video.compose import VideoPart


def _videos_shown(req):
    return [p.video_id for p in req.parts if isinstance(p, VideoPart)]


def _build(ctx, spec, n):
    m = ctx.manifest()
    groups = m.groups_for(spec.domain, spec.bucket, spec.P)[:n]
    return groups, build_requests(ctx, "sim:unbiased", spec, groups, m)


@pytest.mark.parametrize("P", [2, 4])
def test_cyclic_orders_put_every_video_in_every_slot_once(run_context, P):
    """P requests per group, the rotations of the group's videos: slot k of order o shows video
    (o + k) mod P, so each video sits at each slot exactly once; the prompt shows the videos in
    the order the meta says."""
    ctx = run_context()
    spec = PositionalSpec("cooking", "short", P, frames=4, resolution=64)
    groups, (reqs, plan, problems) = _build(ctx, spec, 2)
    assert problems == [] and len(reqs) == len(plan) == 2 * P
    for g in groups:
        mine = [r for r in reqs if r.meta["group"] == g.id]
        assert [tuple(r.meta["order"]) for r in mine] == [tuple((o + k) % P for k in range(P)) for o in range(P)]
        for r in mine:
            assert r.meta["videos"] == [g.videos[k] for k in r.meta["order"]] == _videos_shown(r)
        for slot in range(P):
            assert sorted(r.meta["videos"][slot] for r in mine) == sorted(g.videos)


def test_full_permutations_ask_every_order_once(run_context):
    """``orders = "full"``: all P! orders of the group, each once."""
    ctx = run_context()
    spec = PositionalSpec("cooking", "short", 4, frames=2, resolution=64, orders="full")
    _, (reqs, _, _) = _build(ctx, spec, 1)
    assert sorted(tuple(r.meta["order"]) for r in reqs) == list(itertools.permutations(range(4)))


def test_single_target_asks_each_slot_of_each_order(run_context):
    """Single-target: one request per (order, target slot), the prompt naming that slot."""
    ctx = run_context()
    spec = PositionalSpec("cooking", "short", 2, frames=2, resolution=64, single_target=True)
    _, (reqs, _, _) = _build(ctx, spec, 1)
    assert sorted((tuple(r.meta["order"]), r.meta["target"]) for r in reqs) == [
        ((0, 1), 0), ((0, 1), 1), ((1, 0), 0), ((1, 0), 1)]


def test_each_instance_has_its_own_seed_and_a_rerun_the_same(run_context):
    """Sampled at temperature 0.9, each (group, order) is seeded on its own, reproducibly."""
    ctx = run_context()
    spec = PositionalSpec("cooking", "short", 4, frames=2, resolution=64)
    _, (reqs, _, _) = _build(ctx, spec, 2)
    _, (again, _, _) = _build(ctx, spec, 2)
    assert len({r.seed for r in reqs}) == len(reqs)
    assert [r.seed for r in reqs] == [r.seed for r in again]
    assert all(r.decoding.temperature == spec.temperature for r in reqs)


def _run(run_context, answer, n=2, P=2):
    backend = ScriptedBackend(answer)
    ctx = run_context(backend=backend)
    spec = PositionalSpec("cooking", "short", P, frames=2, resolution=64)
    return run_positional(ctx, "sim:unbiased", spec, ctx.manifest(), ctx.judges(), n_groups=n), backend


def test_failed_calls_are_lost_instances_never_scored(run_context):
    """Every call failing: all planned instances lost as generation errors, no coverage row."""
    res, backend = _run(run_context, lambda r: Generation(finish_reason="error", error="HTTP 503"))
    assert res.planned == len(backend.asked) == 4 and res.groups_planned == 2
    assert res.lost["generation_error"] == 4 and sum(res.lost.values()) == 4
    assert res.coverage.shape == (0, 2) and res.excluded == 4
    assert res.failures["generation_error"] == [4, 4]  # counted at every slot of every instance
    assert set(res.lost) == set(LOST_CAUSES)


def test_empty_answers_are_lost_as_unusable(run_context):
    """An empty summary of a succeeded call is lost (empty answer), counted, not a 0 coverage row."""
    res, _ = _run(run_context, lambda r: Generation(""))
    assert res.lost[usable.EMPTY] == res.planned == 4 and res.coverage.shape[0] == 0


def test_a_summary_cut_off_at_the_token_limit_with_no_text_is_lost_as_cut_off(run_context):
    """No answer text at the token limit (a reasoning model's thinking used it up) is lost as answer_cut_off,
    told apart from an empty answer."""
    res, _ = _run(run_context, lambda r: Generation("", 512, "length"))
    assert res.lost[usable.CUT_OFF] == res.planned == 4 and res.lost[usable.EMPTY] == 0


def test_a_summary_with_text_at_the_token_limit_is_judged_as_any_other(run_context):
    res, _ = _run(run_context, lambda r: Generation("[video0] A", 512, "length"))
    assert res.lost[usable.CUT_OFF] == 0 and res.lost[usable.FEW_WORDS] == res.planned == 4


def test_the_same_summary_to_distinct_groups_is_lost_as_constant(run_context):
    """A model that writes one summary whatever the videos does not look at them: lost as constant."""
    text = "[video0] A person is doing something in a room. [video1] A person is doing something outside."
    res, _ = _run(run_context, lambda r: Generation(text), n=3)
    assert res.lost[usable.CONSTANT] == res.planned == 6 and res.coverage.shape[0] == 0


def test_a_summary_that_echoes_the_prompt_is_lost_and_not_cached(run_context):
    """A summary that only repeats the request's instruction (whole, or a run of it under slot
    markers) is lost as ``prompt_echo``, counted, never judged, and not a row of the cache; a real
    summary in the same run is scored."""
    def answer(r):
        if r.meta["group"] == first:
            return Generation(r.prompt_text if r.meta["order"][0] == 0 else "[video0] Different videos in the input "
                                                                            "[video1] are separated by black frames.")
        return Generation(f"[video0] A cook in group {r.meta['group']} chops onions on a board. "
                          f"[video1] A cook in order {r.meta['order'][0]} stirs a pot of soup.")

    backend = ScriptedBackend(answer)
    ctx = run_context(backend=backend)
    spec = PositionalSpec("cooking", "short", 2, frames=2, resolution=64)
    first = ctx.manifest().groups_for("cooking", "short", 2)[0].id
    res = run_positional(ctx, "sim:unbiased", spec, ctx.manifest(), ctx.judges(), n_groups=2)
    assert res.planned == 4 and res.lost[usable.PROMPT_ECHO] == 2 and sum(res.lost.values()) == 2
    assert res.coverage.shape[0] == 2 and res.failures[usable.PROMPT_ECHO] == [2, 2]
    echoed = [r for r in backend.asked if r.meta["group"] == first]
    keys = ctx.engine.keys(echoed)
    assert ctx.engine.cache.get_many(keys) == {}
    assert {why for _runs, _g, why, _this in ctx.engine.cache.unusable(keys).values()} == {usable.PROMPT_ECHO}


def test_summary_text_drops_the_slot_markers():
    """A marker is not a word of the summary."""
    assert summary_text("[video0] A cat sits. [video1] A dog runs.").split() == "A cat sits. A dog runs.".split()


def test_spec_labels_name_what_differs_from_the_main_setting():
    """The main setting is ``main``; a variant lists its differences, and the label carries them."""
    main = PositionalSpec("news", "short", 4)
    assert main.variant() == "main" and main.label() == "news-short-P4"
    v = PositionalSpec("news", "short", 4, boundary="text", orders="full")
    assert v.variant() == "text-boundary+full-permutations" and v.label() == "news-short-P4[text-boundary+full-permutations]"
    assert main.key() != v.key()


def test_frames_follow_the_bucket_and_an_override_only_when_it_differs():
    """16 frames per short and 24 per long video; a ``frames_short`` setting equal to the default
    leaves the spec's ``frames`` unset (the main setting), another value sets it."""
    assert PositionalSpec("news", "short", 2).n_frames == 16 and PositionalSpec("news", "long", 2).n_frames == 24
    same = with_overrides(PositionalSpec("news", "short", 2), {"frames_short": 16})
    other = with_overrides(PositionalSpec("news", "short", 2), {"frames_short": 8})
    assert same.frames is None and same.variant() == "main"
    assert other.frames == 8 and other.n_frames == 8 and "8f" in other.variant()
    assert positional_spec({"groups": 5}, "news", "long", 4, boundary="text").groups == 5
    assert positional_spec({}, "news", "long", 4, boundary="text").boundary == "text"


class WordJudge:
    """Scores a slot's summary by its words: ``good`` 0.9, ``bad`` 0.1, ``judge-error`` no value."""

    spec = "fragment"  # no embedding similarity for the alignment
    embedder = None

    def for_style(self, style):
        return self

    def score(self, items):
        from types import SimpleNamespace

        def one(summary):
            if "judge-error" in summary:
                return SimpleNamespace(value=None, judge="word", error="judge down", covered=None, reasons=None)
            return SimpleNamespace(value=0.9 if "good" in summary else 0.1, judge="word", error=None, covered=[],
                                   reasons=[])
        return [one(summary) for _refs, summary in items]


def _judged(run_context, words):
    """Two groups of P = 2 in both cyclic orders; slot k's summary carries ``words(order)[k]`` (and
    its group's id, so no two groups get the same answer)."""
    def answer(req):
        w = words(tuple(req.meta["order"]))
        g = req.meta["group"]
        return Generation(f"[video0] A {w[0]} account of the first clip in {g} with a circle. "
                          f"[video1] A {w[1]} account of the second clip in {g} with a square.")

    ctx = run_context(backend=ScriptedBackend(answer))
    spec = PositionalSpec("cooking", "short", 2, frames=2, resolution=64)
    return run_positional(ctx, "sim:unbiased", spec, ctx.manifest(), WordJudge(), n_groups=2)


def test_coverage_rows_are_slots_in_order_clustered_by_group(run_context):
    """Each instance is a row of coverage at slots 1..P: a model that covers slot 1 well and slot 2
    badly has rows [0.9, 0.1] whatever the order; each row's cluster is its group's index."""
    res = _judged(run_context, lambda order: ("good", "bad"))
    assert res.coverage.shape == (4, 2) and res.excluded == 0 and sum(res.lost.values()) == 0
    assert res.coverage.tolist() == [[0.9, 0.1]] * 4
    assert sorted(res.clusters.tolist()) == [0, 0, 1, 1] and res.n_groups == 2


def test_a_judge_failure_loses_the_instance(run_context):
    """A slot the judge could not score makes its instance lost (judge failure), never a 0 coverage."""
    res = _judged(run_context, lambda order: ("good", "judge-error") if order == (0, 1) else ("good", "bad"))
    assert res.lost["judge_failure"] == 2 and res.coverage.shape == (2, 2) and res.excluded == 2
    assert res.failures["judge_failure"] == [0, 2]


def test_a_missing_slot_marker_scores_zero_and_keeps_the_instance(run_context):
    """P = 4, an answer with markers for slots 1-3 only: slot 4 is a marker failure scored 0
    (appendix C.1), counted at that slot, and the instance stays measured."""
    def answer(req):
        g = req.meta["group"]
        return Generation(" ".join(f"[video{k}] A good account of clip {k} in {g} with shapes." for k in range(3)))

    ctx = run_context(backend=ScriptedBackend(answer))
    spec = PositionalSpec("cooking", "short", 4, frames=2, resolution=64)
    res = run_positional(ctx, "sim:unbiased", spec, ctx.manifest(), WordJudge(), n_groups=1)
    assert res.coverage.tolist() == [[0.9, 0.9, 0.9, 0.0]] * 4 and sum(res.lost.values()) == 0
    assert res.failures["marker_failure"] == [0, 0, 0, 4]
