"""Search properties of a multiple-choice item (``probes.search_mcq``): the order and phase
perturbation spaces, the left grid ⌊(i + p/q)·T/b⌋ of a phase, the reference request shared with
the phase probe, lost queries (failed calls, unparseable answers), a break as a change of the
chosen content, stored counterexamples checked on decoding, and the search of ``sim:letter-bias``
end to end on the small synthetic set."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from support.scripted_backend import ScriptedBackend

from pytest_posbias import strategies as S
from pytest_posbias.engine import Generation
from pytest_posbias.errors import ConfigError
from pytest_posbias.probes import conditions as C
from pytest_posbias.probes.phase import LETTERS, run_phase
from pytest_posbias.probes.search import ItemSearch, run_search
from pytest_posbias.probes.search_mcq import McqProperty

from .conftest import open_context


def _order_search(ctx: Any, model: str, n: int) -> list[ItemSearch]:
    from pytest_posbias.probes.phase import item_order
    from pytest_posbias.probes.search_corpus import corpus_for
    from pytest_posbias.probes.search_mcq import McqProperty

    items = item_order(ctx, ctx.manifest())[:n]
    return [run_search(ctx, McqProperty(ctx, model, it, "order", ctx.phase_spec()), corpus=corpus_for(ctx), seed=ctx.seed)
            for it in items]


def test_letter_bias_breaks_by_one_transposition_unbiased_holds_and_replays(tmp_path, small_set):
    """sim:letter-bias breaks by one transposition, a re-run is free, sim:unbiased survives the replay."""
    from pytest_posbias.engine import Decoding, Request
    from pytest_posbias.probes.phase import _answer, mcq_prompt
    from pytest_posbias.video.compose import TextPart, VideoPart

    ctx = open_context(tmp_path, small_set, "sim:letter-bias", "r1")
    res = _order_search(ctx, "sim:letter-bias", 10)
    broken = [r for r in res if r.status == "broken"]
    assert broken and all(r.status in ("broken", "held") for r in res)
    items = {it.id: it for it in ctx.manifest().mcq}
    spec = ctx.phase_spec()
    for r in broken:
        m = r.minimal
        assert m is not None and m["transpositions"] == 1 and S.cayley_distance(m["option_order"]) == 1
        # independently: the identity and the minimal ordering give different contents
        it = items[r.item]
        frames = ctx.store.clip(it.path, [f["index"] for f in m["frames"]["original"]],
                                size=spec.resolution, aspect="max-side")
        answers = []
        for perm in (tuple(range(len(it.options))), tuple(m["option_order"])):
            req = Request("sim:letter-bias", (VideoPart(frames, video_id=it.video), TextPart(mcq_prompt(it, perm))),
                          Decoding(max_new_tokens=spec.max_new_tokens), want="letters",
                          letters=tuple(LETTERS[: len(it.options)]))
            answers.append(_answer(ctx.engine.run([req])[0], perm).content)
        assert answers[0] != answers[1] and answers == [m["reference_answer"], m["answer"]]
    made = ctx.engine.stats.made
    ctx.close()

    # a second run on the same model: the same searches, 0 model calls
    ctx2 = open_context(tmp_path, small_set, "sim:letter-bias", "r2")
    assert [r.to_dict() for r in _order_search(ctx2, "sim:letter-bias", 10)] == [r.to_dict() for r in res]
    assert ctx2.engine.stats.made == 0 and made > 0
    ctx2.close()

    # another model replays the stored counterexamples first; sim:unbiased survives every one and holds
    ctx3 = open_context(tmp_path, small_set, "sim:unbiased", "r3")
    res3 = _order_search(ctx3, "sim:unbiased", 10)
    ctx3.close()
    assert all(r.status == "held" for r in res3)
    replayed = {r.item: r.replay for r in res3 if r.replay}
    assert set(replayed) == {r.item for r in broken}
    for r in broken:
        (row,) = replayed[r.item]
        assert row["outcome"] == "survived" and row["found_by"] == ["sim:letter-bias"]
        assert row["value"] == r.minimal["perturbation"]  # type: ignore[index]
    assert all(r.queries == r.replay_queries + 30 for r in res3)  # replay first, then the full budget


def _prop(ctx, kind, **kw):
    item = ctx.manifest().mcq[0]
    return item, McqProperty(ctx, "sim:unbiased", item, kind, ctx.phase_spec(), **kw)


def test_an_unknown_kind_is_refused_naming_it(run_context):
    """Only the order and phase invariances exist; another kind is an error that names it."""
    ctx = run_context()
    with pytest.raises(ConfigError, match="'colour'"):
        _prop(ctx, "colour")


def test_the_perturbation_spaces_are_every_ordering_and_every_phase_p_over_q(run_context):
    """Order: the K! orderings of K options. Phase: the distinct p/q in [0, 1) with q <= 4:
    0, 1/4, 1/3, 1/2, 2/3, 3/4 (six). The reference is the identity at phase 0."""
    ctx = run_context()
    item, order = _prop(ctx, "order")
    _, phase = _prop(ctx, "phase", max_denominator=4)
    assert len(order.all_values()) == math.factorial(len(item.options)) == len(set(order.all_values()))
    assert phase.all_values() == [Fraction(0), Fraction(1, 4), Fraction(1, 3), Fraction(1, 2), Fraction(2, 3),
                                  Fraction(3, 4)]
    assert order.reference_value() == tuple(range(len(item.options))) and phase.reference_value() == 0
    assert order.corpus_key() == f"order[K{len(item.options)}]|{item.id}"
    assert phase.corpus_key() == f"phase[b{ctx.phase_spec().budget}]|{item.id}"
    assert phase.smallest_change == pytest.approx(1 / 4) and order.smallest_change == 1.0


def test_a_phase_is_the_left_grid_shifted_by_that_fraction_of_a_step(run_context):
    """Phase p/q of b frames over T: ⌊(i + p/q)·T/b⌋, i = 0..b−1."""
    ctx = run_context()
    item, prop = _prop(ctx, "phase")
    T, b = ctx.store.info(item.path).frame_count, ctx.phase_spec().budget
    for ph in (Fraction(0), Fraction(1, 3), Fraction(5, 12)):
        assert prop.indices(ph) == [min(T - 1, math.floor((i + ph) * T / b)) for i in range(b)]


def test_the_reference_request_is_the_phase_probes_identity_phase_0_request(run_context):
    """The search's reference query and the phase probe's ``phase:0`` identity request have one cache key."""
    backend = ScriptedBackend(lambda r: Generation("A"))
    ctx = run_context(backend=backend, probes={"phase": {"items": 1, "orderings": 1}})
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), conditions=[C.phase(0)])
    (asked,) = backend.asked
    for kind in ("order", "phase"):
        prop = McqProperty(ctx, "sim:unbiased", res.items[0], kind, ctx.phase_spec())
        assert ctx.engine.keys([prop.request(prop.reference_value())]) == ctx.engine.keys([asked])


def test_failed_and_unparseable_answers_are_lost_queries(run_context):
    """A failed call or an answer without an option letter scores no outcome: a lost query, saying why."""
    ctx = run_context()
    _, prop = _prop(ctx, "order")
    ref = prop.reference_value()
    failed = prop.score(ref, Generation(finish_reason="error", error="HTTP 503"), None)
    assert not failed.ok and failed.why_lost == "HTTP 503"
    garbled = prop.score(ref, Generation("I cannot tell"), None)
    assert not garbled.ok and "unparseable" in garbled.why_lost and "I cannot tell" in garbled.why_lost
    cut = prop.score(ref, Generation("", 64, "length"), None)  # no answer text within the token limit
    assert not cut.ok and cut.why_lost == "answer_cut_off"


def test_a_break_is_another_content_not_another_letter(run_context):
    """Under ordering (1, 0, 2, ...) the letter "B" shows content 0: the same content as "A" at the
    identity (held), while "A" there is content 1 (broken)."""
    ctx = run_context()
    item, prop = _prop(ctx, "order")
    k = len(item.options)
    swap = (1, 0, *range(2, k))
    ref = prop.score(prop.reference_value(), Generation("A"), None)
    assert ref.ok and ref.answer == 0
    same = prop.score(swap, Generation("B"), ref)
    moved = prop.score(swap, Generation("A"), ref)
    assert same.ok and not same.broken and same.answer == 0 and same.detail["answer_letter"] == "B"
    assert moved.ok and moved.broken and moved.answer == 1 and moved.detail["answer_text"] == item.options[1]
    assert prop.size(swap) == 1.0 == S.cayley_distance(swap)


def test_stored_values_are_checked_on_decoding(run_context):
    """A stored ordering that is no permutation of the item's options, or a phase outside [0, 1), is
    refused (the corpus skips it); a value of the other property's kind names the item."""
    ctx = run_context()
    item, order = _prop(ctx, "order")
    _, phase = _prop(ctx, "phase")
    k = len(item.options)
    assert order.decode(order.encode((1, 0, *range(2, k)))) == (1, 0, *range(2, k))
    assert phase.decode(phase.encode(Fraction(5, 12))) == Fraction(5, 12)
    with pytest.raises(ConfigError, match=f"not a permutation of {k} options"):
        order.decode({"order": [0] * k})
    with pytest.raises(ConfigError, match="not in \\[0, 1\\)"):
        phase.decode({"phase": "1"})
    with pytest.raises(ConfigError, match=item.id):
        order.request(Fraction(1, 2))


def test_an_unusable_answer_to_a_search_query_is_not_cached_as_an_answer(run_context):
    """A reference answer without an option letter is a lost query now and asked again by a later run
    (the probe's accept rule), never stored as the item's answer and served lost to every later run."""
    backend = ScriptedBackend(lambda r: Generation("I cannot tell"))
    ctx = run_context(backend=backend, probes={"phase": {"items": 1, "orderings": 1}})
    prop = McqProperty(ctx, "sim:unbiased", ctx.manifest().mcq[0], "order", ctx.phase_spec())
    res = run_search(ctx, prop, budget=3, shrink_budget=0)
    assert res.status == "lost" and "unparseable" in res.why
    assert ctx.engine.cache.get_many(ctx.engine.keys([prop.request(prop.reference_value())])) == {}


@pytest.mark.parametrize("kind", ["order", "phase"])
def test_an_item_whose_window_is_too_short_for_the_grid_is_not_searched_on_repeated_frames(run_context, kind):
    """A window with fewer frames than the budget is too short, as in the phase probe (TooShortError
    naming the item's window: a lost unit), never searched on a grid padded with repeated frames."""
    import dataclasses

    from pytest_posbias.video.files import TooShortError

    ctx = run_context()
    item = dataclasses.replace(ctx.manifest().mcq[0], id="windowed", start=1.0, end=1.5)
    with pytest.raises(TooShortError, match="1.0-1.5 s"):
        McqProperty(ctx, "sim:unbiased", item, kind, ctx.phase_spec())
