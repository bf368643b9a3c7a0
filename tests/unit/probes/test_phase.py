"""The phase and option-order probe (``probes.phase``): the seeded option orderings and the prompt
that shows them, the letter parser, the phase paper's frame grids in the requests, failed and
unparseable answers as lost units, and the derived measures (flips, accuracy swing, CircularEval,
PhaseFusion, the margin's AUROC) against hand-worked cases. The run checks use the small synthetic
set and a scripted backend (``support.scripted_backend``)."""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.scripted_backend import ScriptedBackend

from pytest_posbias.data.manifest import McqItem
from pytest_posbias.engine import Generation
from pytest_posbias.probes import conditions as C
from pytest_posbias.probes.phase import (
    INSTRUCTION,
    PhaseResult,
    PhaseSpec,
    accept_letter,
    fused,
    margin_auroc,
    mcq_prompt,
    order_accuracy,
    order_flips,
    orderings,
    pair_flips,
    parse_letter,
    run_phase,
)


def _item(qid: str = "q1", n: int = 5, answer: int = 0) -> McqItem:
    return McqItem(qid, "v", Path("v.mp4"), "What is shown?", tuple(f"opt{c}" for c in range(n)), answer)


# --------------------------------------------------------------------------- orderings and prompt


@given(qid=st.text(min_size=1, max_size=12), n=st.integers(2, 6), k=st.integers(1, 10))
@settings(max_examples=40, deadline=None)
def test_orderings_are_the_identity_then_k_minus_1_permutations(qid, n, k):
    """k orderings, the first the identity, each a permutation of the n option indices."""
    out = orderings(_item(qid, n), k)
    assert len(out) == k and out[0] == tuple(range(n))
    assert all(sorted(p) == list(range(n)) for p in out)


def test_orderings_are_seeded_by_question_id_and_ordering_index():
    """Ordering j of a question is numpy's permutation under the seed sha256("<id>|<j>") (its first
    8 bytes, little-endian): the same in every run and process, and another question draws others."""
    item = _item("syn-q-7", 5)
    out = orderings(item, 10)
    for j in range(1, 10):
        seed = int.from_bytes(hashlib.sha256(f"syn-q-7|{j}".encode()).digest()[:8], "little")
        assert out[j] == tuple(np.random.default_rng(seed).permutation(5).tolist())
    assert orderings(item, 10) == out
    assert orderings(_item("syn-q-8", 5), 10)[1:] != out[1:]
    assert orderings(item, 4) == out[:4]  # a shorter list is a prefix: ordering j does not depend on k


def test_prompt_shows_content_perm_j_at_letter_j():
    """Position j (letter j) shows option perm[j]; question first, the letter-only instruction last."""
    item = McqItem("q", "v", Path("v.mp4"), "Which colour?", ("red", "green", "blue"), 1)
    lines = mcq_prompt(item, (2, 0, 1)).split("\n")
    assert lines == ["Which colour?", "A. blue", "B. red", "C. green", INSTRUCTION]


@pytest.mark.parametrize("text, letters, expected", [
    ("B", "ABCDE", 1),
    ("(C) because it is", "ABCDE", 2),
    ("D.", "ABCDE", 3),
    ("The answer is E", "ABCDE", 4),
    ("I think B", "ABCDE", 1),  # "I" is a standalone capital but no option letter here
    ("Apple", "ABCDE", None),  # a word starting with a letter is no letter
    ("E", "ABC", None),  # a letter past the item's options
    ("no idea", "ABCDE", None),
    ("", "ABCDE", None),  # an empty answer, all spaces or a lone bracket holds no letter (and does not crash)
    ("   ", "ABCDE", None),
    ("(", "ABCDE", None),
])
def test_parse_letter_finds_the_first_live_standalone_letter(text, letters, expected):
    """The first standalone letter among the item's live letters, or None."""
    assert parse_letter(text, letters) == expected


@given(text=st.text(max_size=12), n=st.integers(1, 10))
def test_parse_letter_never_raises_and_names_a_live_letter(text, n):
    """Any answer text: None or the index of one of the item's n letters, never an exception."""
    got = parse_letter(text, "ABCDEFGHIJ"[:n])
    assert got is None or 0 <= got < n


def test_accept_letter_rejects_an_answer_without_an_option_letter():
    """An answer whose text and log-probs give none of the request's letters is unusable; a failed
    call is left to the engine's own accounting (None)."""
    from pytest_posbias.engine import Decoding, Request
    from pytest_posbias.scoring.usable import NO_LETTER
    from pytest_posbias.video.compose import TextPart

    req = Request("sim:x", (TextPart("q"),), Decoding(max_new_tokens=4), meta={"perm": [0, 1, 2]})
    assert accept_letter(req, Generation("D")) == NO_LETTER  # D is no letter of a 3-option item
    assert accept_letter(req, Generation("C")) is None
    assert accept_letter(req, Generation("", letter_logprobs={"A": -math.inf, "D": -0.1})) == NO_LETTER
    assert accept_letter(req, Generation("", letter_logprobs={"B": -3.0})) is None
    assert accept_letter(req, Generation(finish_reason="error", error="HTTP 503")) is None
    for empty in ("", "  \n", "("):  # a successful call with an empty answer is a lost unit, not a crash
        assert accept_letter(req, Generation(empty)) == NO_LETTER


# --------------------------------------------------------------------------- the run


def _text_answers(script):
    """A text-mode backend answering ``script(item_id, perm)`` (a Generation or a text)."""
    def answer(req):
        out = script(req.meta["item"], tuple(req.meta["perm"]))
        return out if isinstance(out, Generation) else Generation(out)
    return ScriptedBackend(answer)


def test_requests_sample_the_phase_papers_grids(run_context):
    """Phase s of S grids of b frames shows ⌊(i + s/S)·T/b⌋; the shifted grid adds 1/(2S) of a step;
    the union pass is the dense left grid of S·b frames ⌊k·T/(S·b)⌋ (T: the clip's frame count)."""
    backend = _text_answers(lambda _i, _p: "A")
    ctx = run_context(backend=backend, probes={"phase": {"items": 2, "orderings": 1}})
    spec = ctx.phase_spec()
    S, b = spec.phases, spec.budget
    res = run_phase(ctx, "sim:unbiased", spec, ctx.manifest(), identity=C.fusion_conditions(S))
    assert len(res.items) == 2
    frame_count = {it.id: ctx.store.info(it.path).frame_count for it in res.items}
    seen = set()
    for req in backend.asked:
        T = frame_count[req.meta["item"]]
        cond = C.Condition.parse(req.meta["condition"])
        got = list(req.parts[0].frames.indices)
        if cond.kind in ("phase", "shift"):
            origin = Fraction(1, 2 * S) if cond.kind == "shift" else Fraction(0)
            want = [min(T - 1, math.floor((i + Fraction(cond.phase, S) + origin) * T / b)) for i in range(b)]
        elif cond.kind == "union":
            want = [math.floor(Fraction(k * T, S * b)) for k in range(S * b)]
        else:
            continue
        assert got == want, (req.meta, T)
        seen.add(cond.kind)
    assert seen == {"phase", "shift", "union"}


def test_each_ordering_request_shows_the_items_seeded_ordering(run_context):
    """Ordering k of an item is asked with ``orderings(item, K)[k]`` and its prompt shows it."""
    backend = _text_answers(lambda _i, _p: "A")
    ctx = run_context(backend=backend, probes={"phase": {"items": 2, "orderings": 4}})
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), conditions=[C.phase(0)])
    items = {it.id: it for it in res.items}
    asked = {(r.meta["item"], r.meta["ordering"]): r for r in backend.asked}
    assert len(asked) == 2 * 4
    for (iid, k), req in asked.items():
        perm = orderings(items[iid], 4)[k]
        assert tuple(req.meta["perm"]) == perm and mcq_prompt(items[iid], perm) in req.prompt_text


def test_an_answer_maps_back_to_content_through_the_ordering(run_context):
    """A text answer "B" under ordering perm means content perm[1]: a model that always picks the
    correct content is correct in every ordering, whatever letter that content sits at."""
    from pytest_posbias.probes.phase import LETTERS

    ctx = run_context(probes={"phase": {"items": 3, "orderings": 5}})
    items = {it.id: it for it in ctx.manifest().mcq}
    backend = _text_answers(lambda iid, perm: LETTERS[perm.index(items[iid].answer)])
    ctx = run_context(backend=backend, probes={"phase": {"items": 3, "orderings": 5}}, cache=ctx.cache_dir / "b")
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), conditions=[C.phase(0)])
    ans = res.condition_answers[C.phase(0)]
    assert (ans == res.correct()[:, None]).all()
    assert order_flips(res).tolist() == [0, 0, 0]
    assert order_accuracy(res)["circular_unanimity"] == 1.0 and res.errors == res.unparseable == 0


def _odd(perm):
    return sum(i * p for i, p in enumerate(perm)) % 2 == 1


def test_failed_and_unparseable_answers_are_lost_and_counted(run_context):
    """A failed call counts as an error, an answer without a letter as unparseable; both leave the
    answer at -1 (never a content); the identity ordering's "B" is content 1."""
    def script(iid, perm):
        if perm == tuple(range(len(perm))):
            return "B"
        return Generation(finish_reason="error", error="HTTP 503") if _odd(perm) else "no idea"

    backend = _text_answers(script)
    ctx = run_context(backend=backend, probes={"phase": {"items": 3, "orderings": 4}})
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), conditions=[C.phase(0)])
    assert res.mode == "text"
    failed = sum(1 for r in backend.asked if tuple(r.meta["perm"]) != tuple(sorted(r.meta["perm"]))
                 and _odd(tuple(r.meta["perm"])))
    others = sum(1 for r in backend.asked if tuple(r.meta["perm"]) != tuple(sorted(r.meta["perm"])))
    assert res.errors == failed and res.unparseable == others - failed and others > 0
    ans = res.condition_answers[C.phase(0)]
    assert (ans[:, 0] == 1).all() and (ans[:, 1:] == -1).all()


def test_no_answer_text_at_the_token_limit_is_lost_as_cut_off_not_unparseable(run_context):
    """A reasoning model whose thinking used the whole token limit (empty text, finish_reason length) leaves
    the answer at CUT_OFF, counted apart from unparseable answers, and the gate's measurement names it."""
    from pytest_posbias.gates.phase import phase_measurement
    from pytest_posbias.probes.phase import CUT_OFF

    def script(iid, perm):
        if perm == tuple(range(len(perm))):
            return "B"
        return Generation("", 64, "length") if _odd(perm) else "no idea"

    backend = _text_answers(script)
    ctx = run_context(backend=backend, probes={"phase": {"items": 3, "orderings": 4}})
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), conditions=[C.phase(0)])
    cut = sum(1 for r in backend.asked if tuple(r.meta["perm"]) != tuple(sorted(r.meta["perm"]))
              and _odd(tuple(r.meta["perm"])))
    others = sum(1 for r in backend.asked if tuple(r.meta["perm"]) != tuple(sorted(r.meta["perm"])))
    assert cut > 0 and res.cut_off == cut and res.unparseable == others - cut and res.errors == 0
    ans = res.condition_answers[C.phase(0)]
    assert int((ans == CUT_OFF).sum()) == cut and (ans[:, 0] == 1).all()
    lost = phase_measurement(res, [C.phase(0)]).lost
    items_cut = int(np.any(ans == CUT_OFF, axis=1).sum())
    assert lost["answer_cut_off"] == items_cut > 0
    assert lost["answer_cut_off"] + lost["failed_or_unparseable_answers"] == len(res.items)


def test_a_constant_letter_to_distinct_questions_is_lost_not_answered(run_context):
    """A model that answers "A" to every question whatever its content (and "A" rarely correct) is
    not measured: its answers are lost as constant (answer index CONSTANT), counted."""
    from pytest_posbias.probes.phase import CONSTANT

    backend = _text_answers(lambda _i, _p: "A")
    ctx = run_context(backend=backend, probes={"phase": {"items": 6, "orderings": 4}})
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), conditions=[C.phase(0)])
    correct_at_a = sum(1 for r in backend.asked if r.meta["perm"][0] == next(
        it.answer for it in res.items if it.id == r.meta["item"]))
    assert correct_at_a / len(backend.asked) <= 0.9  # the rule's premise: "A" is mostly wrong
    assert res.constant == len(backend.asked) == 24
    assert (res.condition_answers[C.phase(0)] == CONSTANT).all()


# --------------------------------------------------------------------------- derived measures


def _result(answers, correct, probs=None, n_opt=3):
    items = [_item(f"q{i}", n_opt, c) for i, c in enumerate(correct)]
    r = PhaseResult("m", PhaseSpec(items=len(items)), items, "logprobs")
    r.condition_answers = {k: np.array(v, dtype=int) for k, v in answers.items()}
    r.condition_probs = probs or {}
    return r


def test_order_flips_and_accuracy_swing_by_hand():
    """Three items, three orderings; correct = [0, 1, 2].
    q0 answers 0,0,0 (unanimous, correct); q1 answers 1,2,1 (a flip); q2 answers 0,0,2 (a flip).
    Per ordering accuracy: o0 = 2/3 (q0, q1), o1 = 1/3 (q0), o2 = 3/3: swing = 1 − 1/3 = 2/3;
    CircularEval unanimity (correct in every ordering) = 1/3; consensus (plurality) 0, 1, 0 → 2/3."""
    r = _result({C.phase(0): [[0, 0, 0], [1, 2, 1], [0, 0, 2]]}, [0, 1, 2])
    assert order_flips(r).tolist() == [0, 1, 1]
    acc = order_accuracy(r)
    assert acc["accuracy_identity"] == pytest.approx(2 / 3) and acc["swing"] == pytest.approx(2 / 3)
    assert acc["circular_unanimity"] == pytest.approx(1 / 3) and acc["consensus_accuracy"] == pytest.approx(2 / 3)


def test_pair_flips_compare_consensus_answers():
    """A phase flip is a change of the plurality answer over the orderings, not of any one ordering."""
    r = _result({C.phase(0): [[0, 0, 1], [2, 2, 2]], C.phase(1): [[0, 1, 0], [1, 1, 2]]}, [0, 2])
    assert pair_flips(r, C.phase(0), C.phase(1)).tolist() == [0, 1]


def test_phasefusion_is_the_argmax_of_the_mean_distribution():
    """Phase 0 favours option 0 (0.5), phases 1 and 2 weakly favour 1 and 2; the mean
    (0.5+0.1+0.1, 0.3+0.45+0.1, 0.2+0.45+0.8)/3 = (0.233, 0.283, 0.483): option 2, which no
    single phase's argmax majority gives."""
    probs = {C.phase(0): [np.array([[0.5, 0.3, 0.2]])], C.phase(1): [np.array([[0.1, 0.45, 0.45]])],
             C.phase(2): [np.array([[0.1, 0.1, 0.8]])]}
    r = _result({c: [[0]] for c in probs}, [0], probs)
    assert fused(r, C.phases(3)).tolist() == [2]
    assert fused(r, [*C.phases(3), C.shift(0)]) is None  # a condition without distributions: no fusion


def test_margin_auroc_is_the_probability_a_flip_has_the_lower_margin():
    """AUROC against a brute-force count over (flip, no-flip) pairs: 1 when the flip's margin is the
    lower, ½ on a tie; risk-coverage accuracy at full coverage is the identity accuracy."""
    rng = np.random.default_rng(3)
    n = 12
    answers = rng.integers(0, 3, size=(n, 4))
    answers[:6, 1:] = answers[:6, :1]  # half the items unanimous
    margins = np.round(rng.uniform(0, 1, n), 1)  # rounding makes ties
    r = _result({C.phase(0): answers.tolist()}, rng.integers(0, 3, n).tolist(),
                {f"margin:{C.phase(0)}": [np.array([m, 0, 0, 0]) for m in margins]})
    flips = order_flips(r).astype(bool)
    pairs = [(a, b) for a in margins[flips] for b in margins[~flips]]
    want = sum(1.0 if a < b else 0.5 if a == b else 0.0 for a, b in pairs) / len(pairs)
    out = margin_auroc(r)
    assert out["auroc"] == pytest.approx(want) and out["n"] == n
    assert out["risk_coverage"][-1]["accuracy"] == pytest.approx(np.mean(answers[:, 0] == r.correct()))


def _windowed(ctx, start, end):
    """The first multiple-choice item of the small set restricted to [start, end] seconds, alone in a manifest."""
    import dataclasses

    from pytest_posbias.data.manifest import Manifest

    m = ctx.manifest()
    item = dataclasses.replace(m.mcq[0], id="windowed", start=start, end=end)
    return item, Manifest(m.path, videos=m.videos, mcq=[item])


def test_a_windowed_item_samples_its_grids_inside_the_window(run_context):
    """With [start, end] seconds the grids cover frames lo..hi only (lo = round(start·fps),
    hi = round(end·fps)): phase s shows lo + ⌊(i + s/S)·n/b⌋, n = hi − lo + 1; the multiple-choice
    search's reference (``search_mcq``) is that very request."""
    from pytest_posbias.probes.search_mcq import McqProperty

    backend = _text_answers(lambda _i, _p: "A")
    ctx = run_context(backend=backend, probes={"phase": {"items": 1, "orderings": 1}})
    item, manifest = _windowed(ctx, 2.0, 9.0)
    info = ctx.store.info(item.path)
    lo, hi = round(2.0 * info.fps), round(9.0 * info.fps)
    n, spec = hi - lo + 1, ctx.phase_spec()
    res = run_phase(ctx, "sim:unbiased", spec, manifest, conditions=C.phases(spec.phases))
    assert [it.id for it in res.items] == ["windowed"] and res.problems == []
    for req in backend.asked:
        s = C.Condition.parse(req.meta["condition"]).phase
        want = [lo + math.floor((i + Fraction(s, spec.phases)) * n / spec.budget) for i in range(spec.budget)]
        assert list(req.parts[0].frames.indices) == want
    phase0 = next(r for r in backend.asked if r.meta["condition"] == C.phase(0))
    prop = McqProperty(ctx, "sim:unbiased", item, "phase", spec)
    assert ctx.engine.keys([prop.request(prop.reference_value())]) == ctx.engine.keys([phase0])


def test_an_item_whose_window_is_too_short_is_named_and_not_asked(run_context):
    """A window with fewer frames than the grid needs: the item is dropped from the measured items,
    named in the problems with its window, still counted as planned, and no request is sent for it."""
    backend = _text_answers(lambda _i, _p: "A")
    ctx = run_context(backend=backend, probes={"phase": {"items": 1, "orderings": 2}})
    _, manifest = _windowed(ctx, 1.0, 1.1)
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), manifest, conditions=[C.phase(0)])
    assert res.items == [] and res.planned == 1 and backend.asked == []
    (problem,) = res.problems
    assert problem.startswith("item windowed:") and "1.0-1.1 s" in problem


def test_an_item_whose_window_shows_two_compared_conditions_the_same_frames_is_lost(run_context):
    """A window of 2b frames makes phase 0 and phase 1 the same grid (a flip of 0 by construction):
    the item is named in the problems and counted planned, not measured as a non-flip."""
    backend = _text_answers(lambda _i, _p: "A")
    ctx = run_context(backend=backend, probes={"phase": {"items": 1, "orderings": 2}})
    spec = ctx.phase_spec()
    fps = ctx.store.info(ctx.manifest().mcq[0].path).fps
    _, manifest = _windowed(ctx, 0.0, (2 * spec.budget - 1) / fps)  # n = 2b frames: phase 0 == phase 1 at S = 3
    res = run_phase(ctx, "sim:unbiased", spec, manifest, conditions=C.phases(spec.phases))
    assert res.items == [] and res.planned == 1 and backend.asked == []
    (problem,) = res.problems
    assert problem.startswith("item windowed:") and "phase:0" in problem and "phase:1" in problem
    # one condition alone (the order gate) compares nothing across frames: the item is measured
    res = run_phase(ctx, "sim:unbiased", spec, manifest, conditions=[C.phase(0)])
    assert [it.id for it in res.items] == ["windowed"] and res.problems == []


def test_one_lost_answer_leaves_phasefusion_on_distributions_for_the_other_items(run_context):
    """In logprobs mode a failed call on one item's phase makes that item's fused answer -1 (lost);
    the other items keep PhaseFusion on their distributions, never a switch of every item to a vote."""
    from pytest_posbias.engine import Request

    lost_item: list[str] = []

    def answer(req: Request) -> Generation:
        if not lost_item:
            lost_item.append(req.meta["item"])
        if req.meta["item"] == lost_item[0] and req.meta["condition"] == C.phase(1):
            return Generation(finish_reason="error", error="HTTP 503")
        strong = {C.phase(0): "A", C.phase(1): "B", C.phase(2): "B"}[req.meta["condition"]]
        return Generation("", letter_logprobs={k: (-0.1 if k == strong else -3.0) for k in req.letters})

    ctx = run_context(backend=ScriptedBackend(answer, letters=True), probes={"phase": {"items": 3, "orderings": 2}})
    S = ctx.phase_spec().phases
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), identity=C.phases(S))
    assert res.mode == "logprobs" and res.errors == 1
    lost = [it.id for it in res.items].index(lost_item[0])
    f = fused(res, C.phases(S))
    assert f is not None and f[lost] == -1
    assert all(f[i] == 1 for i in range(len(res.items)) if i != lost)  # mean of (A, B, B): content 1 (B)


def _flip_on_a_window_of_budget_frames(run_context, monkeypatch, pair):
    """The flip gate on ``pair`` of samplers over one item whose window holds exactly b frames, every
    sampler asked in one run as the suite asks them: (verdict, the run's phase result)."""
    from pytest_posbias.gates import phase_verdict

    backend = _text_answers(lambda _i, _p: "A")
    ctx = run_context(backend=backend, probes={"phase": {"items": 1, "orderings": 2}})
    spec = ctx.phase_spec()
    fps = ctx.store.info(ctx.manifest().mcq[0].path).fps
    _, manifest = _windowed(ctx, 0.0, (spec.budget - 1) / fps)  # n = b frames
    monkeypatch.setattr(ctx, "manifest", lambda: manifest)
    v = phase_verdict(ctx, "flip", "sim:unbiased", (spec.budget, *pair))
    return v, ctx.phase("sim:unbiased", "flip", spec.budget), spec


def test_an_item_whose_window_makes_two_compared_samplers_coincide_is_lost(run_context, monkeypatch):
    """Left and midpoint of b frames in a b-frame window are the same frames: the item cannot flip, so
    the left-vs-midpoint flip gate counts it lost with its reason, never a measured stable answer."""
    v, res, spec = _flip_on_a_window_of_budget_frames(run_context, monkeypatch, ("left", "midpoint"))
    assert [it.id for it in res.items] == ["windowed"]  # the probe keeps it: other pairs can use it
    assert res.condition_frames[C.sampler("left")] == [tuple(range(spec.budget))]
    m = v.extra["measurement"]
    assert (m["planned"], m["measured"]) == (1, 0) and m["lost"] == {"same_frames_in_both_samplers": 1}
    assert not v.passed and "same frames in both samplers 1" in v.reason


def test_an_item_lost_for_two_coinciding_samplers_is_kept_by_another_pair(run_context, monkeypatch):
    """The same run's left-vs-fps pair (fps decimates the under-a-second window to one frame per
    second) shows the item different frames, so that pair measures it."""
    v, res, _spec = _flip_on_a_window_of_budget_frames(run_context, monkeypatch, ("left", "fps"))
    assert res.condition_frames[C.sampler("left")] != res.condition_frames[C.sampler("fps")]
    m = v.extra["measurement"]
    assert (m["planned"], m["measured"]) == (1, 1) and m["lost"] == {}
    assert v.n == 1 and v.estimate == 0.0


def test_a_letter_scored_answer_without_log_probabilities_is_unparseable(run_context):
    """In logprobs mode an answer with a letter in its text but no letter log-probabilities (a malformed
    or foreign row) is unparseable, never a measured answer without the distribution fusion reads."""
    def answer(req):
        if req.meta["condition"] == C.phase(1):
            return Generation("B")
        return Generation("", letter_logprobs={k: (-0.1 if k == "A" else -3.0) for k in req.letters})

    ctx = run_context(backend=ScriptedBackend(answer, letters=True), probes={"phase": {"items": 2, "orderings": 2}})
    S = ctx.phase_spec().phases
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), ctx.manifest(), identity=C.phases(S))
    assert (res.condition_answers[C.phase(1)] == -1).all() and res.unparseable == len(res.items)
    assert (res.condition_answers[C.phase(0)] == 0).all()


def test_a_rejected_multiple_choice_line_drawn_into_the_sample_is_a_lost_item(run_context, tmp_path):
    """A line meant as a multiple-choice item that fails validation is drawn with the valid items: one drawn is
    a planned item lost as unusable data, never replaced by another item, so a mostly broken manifest cannot
    pass on the few good lines it has."""
    import json

    from pytest_posbias.data.manifest import load_manifest
    from pytest_posbias.gates.phase import phase_measurement

    ctx = run_context(probes={"phase": {"items": 8, "orderings": 2}})
    src = ctx.manifest().path
    lines, broken = [], 0
    for line in src.read_text().splitlines():
        d = json.loads(line) if line.strip() else None
        if isinstance(d, dict) and d.get("type") == "mcq" and broken < 2 * sum(1 for x in lines if '"mcq"' in x):
            d["answer"], broken = 99, broken + 1  # two of every three items
            line = json.dumps(d)
        lines.append(line)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    m = load_manifest(bad)
    assert len(m.bad_mcq) == broken > 0 and all(p.kind == "bad-line" for p in m.bad_mcq)
    res = run_phase(ctx, "sim:unbiased", ctx.phase_spec(), m, conditions=[C.phase(0)])
    lost = 8 - len(res.items)
    assert res.planned == 8 and lost > 0 and len(res.problems) == lost
    assert all("field 'answer'" in p for p in res.problems)
    meas = phase_measurement(res, [C.phase(0)])
    assert (meas.planned, meas.lost["unusable_data"], meas.measured) == (8, lost, 8 - lost)


@pytest.mark.parametrize("damage", ["schema", "json", "encoding"])
def test_every_kind_of_broken_multiple_choice_line_is_drawn_once_per_id(tmp_path, damage):
    """A line meant as a multiple-choice item counts as a rejected item whether its schema, its JSON or its
    encoding is broken; repeats of one broken id, and a broken repeat of a valid item's id, are duplicates."""
    import json

    from pytest_posbias.data.manifest import load_manifest

    clip = tmp_path / "v.mp4"
    clip.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(64))
    video = {"type": "video", "id": "v", "path": "v.mp4", "domain": "d", "bucket": "short", "references": ["a b"]}

    def mcq(i, **kw):
        return {"type": "mcq", "id": f"q{i}", "video": "v", "question": "What?", "options": ["a", "b"], "answer": 0,
                **kw}

    def broken(i):
        line = json.dumps(mcq(i, answer=99))
        return {"schema": line, "json": line[:-1], "encoding": line.replace("What?", "Wh\u00e9t?")}[damage]

    lines = [json.dumps(video), json.dumps(mcq(0)), *(broken(i) for i in (1, 2, 2, 2, 0))]
    data = "\n".join(lines).encode("latin-1" if damage == "encoding" else "utf-8")
    (tmp_path / "m.jsonl").write_bytes(data)
    m = load_manifest(tmp_path / "m.jsonl", check_files=False)
    assert [q.id for q in m.mcq] == ["q0"] and len(m.bad_mcq) == 2  # q1 and q2; q2's repeats and q0's are not
    assert {p.line for p in m.bad_mcq} == {3, 4}
