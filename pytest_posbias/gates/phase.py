"""The phase/order suite's gates: sampler flips, phase flips, option-order flips, PhaseFusion and
the confirmatory equivalence, from a phase probe result (:mod:`~pytest_posbias.probes.phase`) to
a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeAlias

import numpy as np

from ..errors import ConfigError
from ..gate_context import GateContext
from ..gate_registry import GATES, paired_direction
from ..probes import conditions as C
from ..probes import phase as ph
from ..probes.phase import PhaseResult, PhaseSpec
from ..stats import Verdict, inconclusive_verdict, mcnemar_exact, paired_change_verdict
from .design import LOOKS, floored, sequential_form, sequential_verdict, with_extra
from .measurement import Measurement, combine
from .verdict_builders import mean_difference

# which comparison a phase/order gate makes: (budget, sampler, sampler) for ``flip``, "any" or "s0-s1"
# (two phase indices) for ``phase``, None for ``order``, ``fusion`` and ``equivalence``
PhaseWhich: TypeAlias = tuple[int, str, str] | str | None


def _sampler_pair(which: PhaseWhich) -> tuple[int, str, str]:
    """The flip gate's ``which``: (budget, sampler a, sampler b), two different samplers (a sampler
    against itself has no flip to find); a ConfigError for anything else."""
    if not isinstance(which, (tuple, list)) or len(which) != 3 or str(which[1]) == str(which[2]):
        raise ConfigError(f"the flip gate's `which` must be (budget, sampler, sampler); got {which!r} (two different "
                          "samplers: a sampler against itself never flips)")
    budget, a, b = which
    return int(budget), str(a), str(b)


def same_frames(r: PhaseResult, conditions: Sequence[str]) -> np.ndarray:
    """Per item: True when the gate compares two samplers that show the item the same frames (left and
    midpoint of b frames in a b-frame window; fps and endpoint on a 1 fps source): a flip of 0 by
    construction, so the item is lost for this pair only, never a stable answer. The probe asks every
    sampler at once and cannot drop it for one pair; it keeps the phase grids distinct itself."""
    shown = getattr(r, "condition_frames", {})
    if len(conditions) != 2 or any(C.Condition.parse(c).kind not in ("sampler", "budget") or c not in shown
                                   for c in conditions):
        return np.zeros(len(r.items), dtype=bool)
    return np.array([a == b for a, b in zip(shown[conditions[0]], shown[conditions[1]], strict=True)], dtype=bool)


def answered(r: PhaseResult, conditions: Sequence[str]) -> np.ndarray:
    """Per item: True when every answer the gate uses (each condition, each ordering) was measured:
    the call succeeded and the answer parsed, and the two samplers compared show it different frames
    (:func:`same_frames`). Other items are lost units, never counted as flips or as stable answers."""
    ok = ~same_frames(r, conditions)
    for c in conditions:
        a = r.condition_answers.get(c)
        ok &= a is not None and np.all(np.asarray(a).reshape(len(r.items), -1) >= 0, axis=1)
    return ok


def phase_measurement(r: PhaseResult, conditions: Sequence[str]) -> Measurement:
    """Items planned, measured and lost (failed or unparseable answers, a constant answer across
    distinct questions, two compared samplers showing the same frames, unusable videos)."""
    ok = answered(r, conditions)
    same = same_frames(r, conditions)
    planned = max(int(getattr(r, "planned", 0)), len(r.items))
    constant, cut = np.zeros(len(r.items), dtype=bool), np.zeros(len(r.items), dtype=bool)
    for c in conditions:
        a = r.condition_answers.get(c)
        if a is not None:
            constant |= np.any(np.asarray(a).reshape(len(r.items), -1) == ph.CONSTANT, axis=1)
            cut |= np.any(np.asarray(a).reshape(len(r.items), -1) == ph.CUT_OFF, axis=1)
    constant &= ~same  # an item is lost for one cause, counted once
    cut &= ~same & ~constant
    lost = {"failed_or_unparseable_answers": int((~ok & ~constant & ~same & ~cut).sum()),
            "answer_cut_off": int(cut.sum()), "constant_answer": int(constant.sum()),
            "same_frames_in_both_samplers": int(same.sum()), "unusable_data": planned - len(r.items)}
    return Measurement("items", planned, int(ok.sum()), lost,
                       examples=[i.id for i, o in zip(r.items, ok, strict=True) if not o][:5])


def no_item_verdict(ctx: GateContext, gate: str, model: str, name: str, m: Measurement) -> Verdict:
    """Not measured: no drawn item could be used (every video unusable), so the result holds no
    answer to compare; every planned item is a lost unit of ``m`` and the gate does not pass."""
    v = inconclusive_verdict(name=name, threshold=ctx.threshold(gate, model), sides=GATES[gate].side, n=0,
                             mode="certify" if gate == "equivalence" else ctx.mode, alpha=ctx.alpha, unit="items",
                             why="no usable item", fail_closed=True,
                             extra={"gate": gate, "model": model, "probe": "phase"})
    return floored(ctx, v, m)


def phase_gate_conditions(gate: str, which: PhaseWhich, spec: PhaseSpec, cond: Callable[[str], str]) -> list[str]:
    """The conditions a phase/order gate compares (:mod:`~pytest_posbias.probes.conditions`)."""
    S = spec.phases
    if gate == "flip":
        _, a, b = _sampler_pair(which)
        return [cond(a), cond(b)]
    if gate == "phase":
        if which == "any":
            return C.phases(S)
        pair = re.fullmatch(r"(\d+)-(\d+)", str(which))
        if not pair or int(pair[1]) == int(pair[2]) or max(int(pair[1]), int(pair[2])) >= S:  # itself: never flips
            raise ConfigError(f"the phase gate's `which` must be \"any\" or two different phase indices below {S} "
                              f"(\"0-1\"); got {which!r}")
        return [C.phase(int(pair[1])), C.phase(int(pair[2]))]
    if gate == "order":
        return [C.phase(0)]
    if gate == "fusion":
        return C.fusion_conditions(S)
    if gate == "equivalence":
        return C.equivalence_conditions(S, spec.budget)
    raise ConfigError(f"`gate` must be flip, phase, order, fusion or equivalence; got {gate!r}")


def fused_or_voted(r: PhaseResult, conditions: Sequence[str]) -> np.ndarray:
    """PhaseFusion answers over ``conditions`` (identity ordering): the argmax of the mean
    content-space distribution (phase paper); in text mode, where no distribution is given, the
    mean of one-hot answers (a plurality vote, ties to the lowest content index)."""
    if (f := ph.fused(r, conditions)) is not None:
        return f
    votes = np.stack([ph.identity_answer(r, c) for c in conditions], axis=1)
    return np.array([np.bincount(row[row >= 0]).argmax() if (row >= 0).any() else -1 for row in votes], dtype=int)


def voted_changes(r: PhaseResult, S: int) -> np.ndarray:
    """Per item: 1 when the plurality vote of the S phase grids changes under an origin shift."""
    return np.asarray(fused_or_voted(r, C.phases(S)) != fused_or_voted(r, C.shifts(S)), dtype=int)


def equivalence_verdict(ctx: GateContext, model: str, r: PhaseResult, conds: Sequence[str], m: Measurement) -> Verdict:
    """The phase paper's confirmatory equivalence: PhaseFusion (S × b) accuracy against one pass at
    4b frames, d_i = correct_fused − correct_single per item, TOST on mean d with ±threshold
    (default 2.5 points), cluster bootstrap over videos. Certify-type in either mode: it passes
    only when the whole (1 − 2α) CI lies inside ±threshold."""
    spec = ctx.phase_spec()
    name = (f"PhaseFusion ({spec.phases}x{spec.budget}) minus single pass at {C.Condition.parse(conds[-1]).frames} "
            "frames accuracy")
    if not r.items:
        return no_item_verdict(ctx, "equivalence", model, name, m)
    ok = answered(r, conds)
    truth = r.correct()
    fused_ans = fused_or_voted(r, conds[:-1])
    single = ph.identity_answer(r, conds[-1])
    d = ((fused_ans == truth).astype(float) - (single == truth).astype(float))[ok]
    videos = np.array([i.video for i in r.items])[ok]
    extra = {"gate": "equivalence", "model": model, "probe": "phase", "mode_scoring": r.mode,
             "unparseable": getattr(r, "unparseable", 0), "answers": answers_returned(r),
             "fusion_accuracy": float((fused_ans == truth)[ok].mean()) if ok.any() else None,
             "single_accuracy": float((single == truth)[ok].mean()) if ok.any() else None,
             "design": "TOST (certify-type)",
             "fusion_by": "distributions" if r.mode == "logprobs" else "plurality vote"}
    v = mean_difference(ctx, d, videos, name=name, threshold=ctx.threshold("equivalence", model), sides="both",
                        mode="certify", unit="videos", rng_keys=("bootstrap", "equivalence", name, model), extra=extra)
    return floored(ctx, v, m)


def _phase_extra(r: PhaseResult, flips: np.ndarray, ok: np.ndarray, gate: str) -> dict[str, Any]:
    """Diagnostics of a phase/order decision on the items it used (``flips`` over the measured items)."""
    extra: dict[str, Any] = {"probe": "phase", "mode_scoring": r.mode, "unparseable": r.unparseable, "errors": r.errors,
                             "answers": answers_returned(r), "deterministic_backend": r.deterministic_backend,
                             "n_items": len(r.items), "problems": r.problems[:5],
                             "rerun_floor": float(ph.pair_flips(r, C.phase(0), C.rerun(0)).mean())
                             if C.rerun(0) in r.condition_answers and r.items else None}
    if gate == "order" and r.items:
        extra.update(ph.order_accuracy(r))
        extra["margin"] = ph.margin_auroc(r)
    items = [i for i, o in zip(r.items, ok, strict=True) if o]
    brief = np.array(["brief-event" in i.tags for i in items], dtype=bool)
    if brief.size and len(flips) == brief.size:
        extra.update({"brief_event_items": int(brief.sum()), "brief_event_flips": int(flips[brief].sum()),
                      "other_flips": int(flips[~brief].sum()),
                      "flipped_items": [i.id for i, f in zip(items, flips, strict=True) if f][:20]})
    return extra


def answers_returned(r: PhaseResult) -> int:
    """Answers the model returned for a phase result (calls planned minus failed calls)."""
    return int(sum(np.asarray(a).size for a in r.condition_answers.values())) - int(getattr(r, "errors", 0))


def no_letter_note(extra: Mapping[str, Any]) -> str:
    """``27 of 300 answers (9.0%) had no option letter among the top-20 logprobs`` (or ``... no parseable
    option letter`` in text mode), from a phase verdict's extra; empty when every answer had one."""
    n, bad = int(extra.get("answers") or 0), int(extra.get("unparseable") or 0)
    if not n or not bad:
        return ""
    where = "among the top-20 logprobs" if extra.get("mode_scoring") == "logprobs" else "parseable from the answer text"
    return f"{bad} of {n} answers ({bad / n:.1%}) had no option letter {where} (lost units, not scored)"


def phase_verdict(ctx: GateContext, gate: str, model: str, which: PhaseWhich = None) -> Verdict:
    """:func:`phase_verdict_core`, with the share of answers that had no option letter
    in the reason and in ``extra["no_option_letter"]``, so a verdict built on a minority of
    parseable answers says so in the terminal and the report, not only in the JSON.

    ``which`` names the comparison: ``(budget, sampler a, sampler b)`` for ``flip`` (anything else
    is a ConfigError), ``"s0-s1"`` (two phase indices) or ``"any"`` for ``phase``, None for
    ``order``, ``fusion`` and ``equivalence``."""
    v = phase_verdict_core(ctx, gate, model, which)
    note = no_letter_note(v.extra)
    if not note:
        return v
    n, bad = int(v.extra["answers"]), int(v.extra["unparseable"])
    return replace(v, reason=f"{v.reason}; {note}",
                   extra={**v.extra, "no_option_letter": {"answers": n, "without_letter": bad, "share": bad / n}})


def phase_verdict_core(ctx: GateContext, gate: str, model: str, which: PhaseWhich = None) -> Verdict:
    """flip (sampler pair at a budget), phase (pair of phases or any-of-S), order, fusion.

    Items with a failed call or an unparseable answer in any condition the gate uses are lost
    units: excluded from the flip rate (never counted as a flip or as a stable answer), counted,
    and below the measurement floor the gate does not pass."""
    spec = ctx.phase_spec()
    pair = _sampler_pair(which) if gate == "flip" else None
    budget = pair[0] if pair is not None else None
    seq = ctx.sequential and not ctx.baseline and gate not in ("fusion", "equivalence")
    S = spec.phases

    def cond(sampler: str) -> str:
        return C.sampler_at(sampler, spec.budget if budget is None else budget, spec.budget)

    conds = phase_gate_conditions(gate, which, spec, cond)  # a bad comparison is refused before any model call
    r = ctx.phase(model, gate, budget, n=max(1, spec.items // LOOKS) if seq else None)
    base = ctx.phase(ctx.baseline, gate, budget) if ctx.baseline else None
    m = phase_measurement(r, conds)
    if gate == "equivalence":
        return equivalence_verdict(ctx, model, r, conds, m)

    def all_flips(res: PhaseResult) -> np.ndarray:
        """Per item (all items of ``res``): 1 when the gate's answers differ."""
        if not res.items:  # no usable item: no answers to compare
            return np.zeros(0, dtype=int)
        if gate == "flip" or (gate == "phase" and which != "any"):
            return np.asarray(ph.pair_flips(res, conds[0], conds[1]))
        if gate == "phase":
            return np.asarray(ph.any_flips(res, conds))
        return np.asarray(ph.order_flips(res))

    if pair is not None:  # the flip gate
        name = f"{pair[1]} vs {pair[2]} sampler flip rate at {budget} frames"
    elif gate == "phase":
        name = (f"any-of-{S} phase flip rate ({S}x{spec.budget})" if which == "any" else
                f"phase {C.Condition.parse(conds[0]).arg} vs {C.Condition.parse(conds[1]).arg} flip rate "
                f"({S}x{spec.budget})")
    elif gate == "order":
        name = f"option-order flip rate ({spec.orderings} orderings)"
    else:
        name = f"PhaseFusion minus single-pass changed-answer rate under an origin shift ({S}x{spec.budget})"
    ok = answered(r, conds)
    if base is not None:
        ok_b = answered(base, conds)
        ok = ok & ok_b if ok_b.size == ok.size else np.zeros_like(ok)  # different item sets: nothing paired
        m = combine(m, phase_measurement(base, conds), prefix_b="baseline", measured=int(ok.sum()))
        ids = np.array([i.id for i in r.items])
    if not seq and not (r.items and (base is None or base.items)):
        return no_item_verdict(ctx, gate, model, name, m)
    if gate == "fusion":
        ch = ph.fusion_changes(r)
        extra: dict[str, Any] = {"probe": "phase", "mode_scoring": r.mode, "unparseable": r.unparseable,
                                 "errors": r.errors, "answers": answers_returned(r), "n_items": len(r.items),
                                 "problems": r.problems[:5], "fusion_by": "distributions"}
        if ch["fusion"] is None:  # text mode (no letter log-probs): a plurality vote of the S grids
            ch["fusion"] = voted_changes(r, S)
            extra["fusion_by"] = "plurality vote (no letter log-probs)"
        fus, single, union = ch["fusion"][ok], ch["single"][ok], ch["union"][ok]
        extra.update({"single_changed": float(single.mean()) if single.size else None,
                      "union_changed": float(union.mean()) if union.size else None,
                      "fusion_changed": float(fus.mean()) if fus.size else None,
                      "fusion_vs_union_mcnemar_p": mcnemar_exact(
                          int(np.sum((fus == 1) & (union == 0))), int(np.sum((fus == 0) & (union == 1))))})
        if base is not None:
            b_fus = ph.fusion_changes(base)["fusion"]
            b_fus = voted_changes(base, S) if b_fus is None else b_fus
            if b_fus.size == ok.size:
                return floored(ctx, ctx.baseline_gate("fusion", model, fus, b_fus[ok], ids[ok], name=name,
                                                      unit="items", worse=paired_direction("fusion"), extra=extra), m)
        v = paired_change_verdict(fus, single, name=name, threshold=ctx.threshold("fusion", model), mode=ctx.mode,
                                  alpha=ctx.alpha, unit="items", extra={"gate": "fusion", "model": model, **extra})
        return floored(ctx, v, m)
    if base is not None:
        flips = all_flips(r)[ok]
        v = ctx.baseline_gate(gate, model, flips, all_flips(base)[ok], ids[ok], name=name, unit="items",
                              worse=paired_direction(gate), extra=_phase_extra(r, flips, ok, gate))
        return floored(ctx, v, m)
    if seq:
        def at(n: int) -> np.ndarray:  # flips over the measured items only
            res = ctx.phase(model, gate, budget, n=n)
            return np.asarray(all_flips(res)[answered(res, conds)] if res.items else np.zeros(0), dtype=float)

        v = sequential_verdict(ctx, gate, model, values_at=at, n_max=spec.items, kind="rate", name=name, unit="items",
                               extra={})
        final = ctx.phase(model, gate, budget, n=v.extra["looks"][-1])
        ok_f = answered(final, conds)
        v = with_extra(v, _phase_extra(final, all_flips(final)[ok_f], ok_f, gate))
        return floored(ctx, v, phase_measurement(final, conds))
    flips = all_flips(r)[ok]
    v = ctx.rate_gate(gate, model, int(flips.sum()), int(flips.size), name=name, unit="items",
                      extra={**_phase_extra(r, flips, ok, gate), **sequential_form(spec.items, "rate")})
    return floored(ctx, v, m)
