"""Gate machinery shared by every suite: from a probe result to a :class:`~.stats.Verdict`.

Every gate is a function of the per-instance values of a probe and the run context
(thresholds per marker, per model and from the command line; detect/certify mode; α;
seeded bootstrap). With ``--baseline MODEL`` a gate becomes a paired non-inferiority
comparison on the same instances: d_i = candidate_i − baseline_i, oriented so that
positive is worse, must have mean <= the gate's baseline margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .errors import ConfigError
from .gate_context import GateContext
from .gate_registry import GATES, paired_direction
from .measurement import DEFAULT_FLOOR, Measurement, apply_floor, combine
from .metrics import dpb_per_instance, meg_per_instance
from .probes import conditions as C
from .probes.positional import PositionalResult, PositionalSpec
from .sequential import gsd_sizes, gsd_step
from .stats import Verdict, _bounds, _fmt, _region, inconclusive_verdict, share_difference_verdict

LOOKS = 4  # analyses of the group-sequential design (at 1/4, 1/2, 3/4 and all of the maximum sample)


def sequential_verdict(ctx: GateContext, gate: str, model: str, *, values_at: Callable[[int], np.ndarray], n_max: int, kind: str,
                       name: str, unit: str, extra: dict[str, Any], rule: str = "t",
                       lattice_step: float | None = None) -> Verdict:
    """A gate under the group-sequential design (:mod:`~.sequential`): the probe draws the first
    quarter of the maximum sample, then a quarter more at each look while the decision is open
    (LOOKS = 4 analyses, O'Brien–Fleming spending: :func:`~.sequential.gsd_step`; ``rule`` and
    ``lattice_step`` choose a mean gate's test there)."""
    threshold = ctx.threshold(gate, model)
    lower, upper = _bounds(threshold, GATES[gate].side)
    d = None
    for k, n_k in enumerate(gsd_sizes(n_max, LOOKS)):
        d = gsd_step(values_at(n_k), look=k, n_max=n_max, looks=LOOKS, lower=lower, upper=upper, mode=ctx.mode,
                     alpha=ctx.alpha, kind=kind, rule=rule, lattice_step=lattice_step)
        if d is not None:
            break
    assert d is not None
    # the t-based repeated CI of a mean can reach past the values' range (coverage above 1, DPB
    # below -1) and, for constant values, spans a rounding error around them; the decision is taken
    # on the unclipped interval, where clipping to the range could not change it, so clip for the
    # record (a rate's exact interval lies in [0, 1] already)
    lo_v, hi_v = GATES[gate].value_range
    d = replace(d, ci_low=min(max(d.ci_low, lo_v), hi_v), ci_high=max(min(d.ci_high, hi_v), lo_v))
    level = round(100 * (1 - 2 * ctx.alpha))
    reason = (f"{name} = {_fmt(d.estimate)} ({level}% repeated CI [{_fmt(d.ci_low)}, {_fmt(d.ci_high)}], threshold "
              f"{_region(lower, upper)}, n = {d.stopped_at} of at most {n_max} {unit}, p = {_fmt(d.p_value)}): {d.reason} "
              f"({ctx.mode} mode, group-sequential, α = {ctx.alpha:g}).")
    ex = {**extra, "gate": gate, "model": model, "design": d.method, "looks": d.looks, "n_max": n_max,
          "stopped_at": d.stopped_at, "kind": kind}
    if kind == "mean":
        ex["rule"] = ("skewness-corrected t (Hall 1992)" if rule == "skew-t" else "t") + (
            f", variance floored at |bound|·δ, δ = {_fmt(lattice_step)}" if lattice_step else "")
    est = d.estimate if math.isfinite(d.estimate) else math.nan
    return Verdict(name=name, estimate=est, ci_low=d.ci_low, ci_high=d.ci_high, threshold=threshold, n=d.stopped_at,
                   p_value=d.p_value, passed=d.passed, mode=ctx.mode, reason=reason, alpha=ctx.alpha, lower=lower,
                   upper=upper, unit=unit, extra=ex, inconclusive=d.inconclusive)


def _group_means(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Per-group mean of per-instance values, groups in order of first appearance."""
    order = list(dict.fromkeys(clusters.tolist()))
    return np.array([values[clusters == g].mean() for g in order], dtype=float)


def _informative(gate: str, r: PositionalResult) -> np.ndarray:
    """Which measured instances a gate can use. DPB and MEG compare slots, so an instance with zero
    coverage in every slot carries no positional information (DPB = 0/(0 + ε), MEG = 0 by
    construction): it is a lost unit for them (``no slot covered``), not a compliant 0; likewise for
    contamination (a summary that matches no reference cannot be closer to another video's).
    Coverage uses every measured instance (zero coverage is its evidence)."""
    if gate in ("dpb", "meg", "contamination") and r.coverage.size:
        return np.asarray(r.coverage.sum(axis=1) > 0, dtype=bool)
    return np.ones(r.coverage.shape[0], dtype=bool)


def _positional_values(gate: str, r: PositionalResult) -> np.ndarray:
    """Per informative instance (see :func:`_informative`): the gate's value."""
    keep = _informative(gate, r)
    if not keep.any():
        return np.zeros(0)
    if gate == "dpb":
        return dpb_per_instance(r.coverage[keep])
    if gate == "meg":
        return meg_per_instance(r.coverage[keep])
    if gate == "coverage":
        return np.asarray(r.coverage.mean(axis=1), dtype=float)
    if gate == "contamination":
        return np.asarray(r.contamination[keep].mean(axis=1), dtype=float)
    raise ConfigError(f"`gate` must be dpb, meg, coverage or contamination; got {gate!r}")


# positional mean gates decided by t statistics over groups, not the bootstrap (docs/design.md section 5):
# MEG by the skewness-corrected t with the lattice floor, DPB by Student's t
T_RULES = {"meg": "skew-t", "dpb": "t"}


def meg_lattice_step(ctx: GateContext, spec: PositionalSpec) -> float | None:
    """The smallest step one judged fact moves a group's MEG by: 1/(2 · orders · m), m the largest
    number of reference sentences among the configuration's videos (coverage of a slot is the share
    of its video's m reference sentences judged covered, MEG_i = (C2 + C3)/2 − (C1 + C4)/2, and a
    group's MEG is the mean over its orders). The variance floor of the MEG gate
    (:func:`~.stats.lattice_floor`) uses it; None when the configuration's videos are unknown."""
    from math import factorial

    m = ctx.manifest()
    counts = [len(m.videos[v].references) for g in m.groups_for(spec.domain, spec.bucket, spec.P) for v in g.videos
              if v in m.videos]
    if not counts or max(counts) < 1:
        return None
    orders = spec.P if spec.orders == "cyclic" else factorial(spec.P)
    return 1.0 / (2 * orders * max(counts))


def _news_style(ctx: GateContext, spec: PositionalSpec) -> bool:
    """Whether the configuration's references are news descriptions (``reference_style: news``)."""
    m = ctx.manifest()
    vids = {v for g in m.groups_for(spec.domain, spec.bucket, spec.P) for v in g.videos}
    return bool(vids) and all(m.videos[v].reference_style == "news" for v in vids if v in m.videos)


def positional_measurement(r: PositionalResult, gate: str = "coverage") -> Measurement:
    """Instances (group × order) planned, measured (scored) and lost, by cause."""
    keep = _informative(gate, r)
    measured = int(keep.sum())
    lost = {k: int(v) for k, v in r.lost.items() if v}
    if (~keep).any():
        lost["no_slot_covered"] = int((~keep).sum())
    examples = [f"group {i['group']} order {i['order']}: {i.get('lost', 'lost')}" for i in r.instances if not i["valid"]]
    return Measurement("instances (group x order)", max(r.planned, measured), measured, lost, examples=examples[:5])


def _floored(ctx: GateContext, v: Verdict, m: Measurement) -> Verdict:
    return apply_floor(v, m, floor=getattr(ctx, "floor", DEFAULT_FLOOR))


def positional_verdict(ctx: GateContext, gate: str, model: str, spec: PositionalSpec) -> Verdict:
    """DPB / MEG / coverage / contamination gate for one configuration (paired with the
    baseline on the same (group, order) instances when ``--baseline`` is set: DPB and MEG on
    |mean candidate| − |mean baseline|, coverage and contamination on the mean difference).
    Lost instances (failed calls, judge failures, unalignable answers, unreadable videos) are
    never scored; below the measurement floor the gate does not pass."""
    name = f"{GATES[gate].statistic} {spec.label()}"

    def describe(res: PositionalResult) -> dict[str, Any]:
        return {"probe": "positional", "spec": spec.label(), "excluded": res.excluded,
                "failures": {k: sum(v) for k, v in res.failures.items()}, "n_instances": int(res.coverage.shape[0])}

    if gate == "contamination" and _news_style(ctx, spec):
        r = ctx.positional(model, spec)
        est = float(r.contamination.mean()) if r.contamination.size else math.nan
        v = inconclusive_verdict(
            name=name, threshold=ctx.threshold(gate, model), sides=GATES[gate].side, n=len(set(r.clusters.tolist())),
            mode=ctx.mode, alpha=ctx.alpha, unit="groups", estimate=est, extra={**describe(r), "gate": gate, "model": model},
            why="the references are news descriptions, which mention only part of what a clip shows, so a summary "
                "closer to another clip's description is no evidence of leakage (the rate is reported, not gated)")
        return _floored(ctx, v, positional_measurement(r, gate))
    if ctx.sequential and not ctx.baseline:
        def at(n: int) -> np.ndarray:
            rr = ctx.positional(model, spec, n)
            return (_group_means(_positional_values(gate, rr), rr.clusters[_informative(gate, rr)]) if rr.coverage.size
                    else np.zeros(0))

        v = sequential_verdict(ctx, gate, model, values_at=at, n_max=spec.groups, kind="mean", name=name, unit="groups",
                               extra={}, rule=T_RULES.get(gate, "t"),
                               lattice_step=meg_lattice_step(ctx, spec) if gate == "meg" else None)
        final = ctx.positional(model, spec, v.extra["looks"][-1])
        return _floored(ctx, _with_extra(v, describe(final)), positional_measurement(final, gate))
    r = ctx.positional(model, spec)
    extra = describe(r)
    m = positional_measurement(r, gate)
    values = _positional_values(gate, r)
    if ctx.baseline:
        b = ctx.positional(ctx.baseline, spec)
        key = lambda inst: (inst["group"], tuple(inst["order"]))  # noqa: E731

        def rows(res: PositionalResult) -> dict[Any, int]:
            valid = [x for x in res.instances if x["valid"]]
            used = [x for x, k in zip(valid, _informative(gate, res), strict=True) if k]
            return {key(i): k for k, i in enumerate(used)}

        cand_rows, base_rows = rows(r), rows(b)
        common = sorted(cand_rows.keys() & base_rows.keys())
        both = combine(m, positional_measurement(b, gate), prefix_b="baseline", measured=len(common))
        if len({c[0] for c in common}) < 2:
            v = inconclusive_verdict(name=f"{name} vs baseline", threshold=ctx.pcfg.margins()[gate], sides="upper",
                                     n=len({c[0] for c in common}), mode=ctx.mode, alpha=ctx.alpha, unit="groups",
                                     why="fewer than 2 groups with both candidate and baseline", extra=extra)
            return _floored(ctx, v, both)
        bvals = _positional_values(gate, b)
        cand = np.array([values[cand_rows[c]] for c in common])
        base = np.array([bvals[base_rows[c]] for c in common])
        clusters = np.array([c[0] for c in common])
        v = ctx.baseline_gate(gate, model, cand, base, clusters, name=name, unit="groups", worse=paired_direction(gate), extra=extra)
        return _floored(ctx, v, both)
    if gate in T_RULES:
        return _floored(ctx, ctx.mean_gate(gate, model, values, r.clusters[_informative(gate, r)], name=name, unit="groups",
                                           extra=extra, method=T_RULES[gate],
                                           lattice_step=meg_lattice_step(ctx, spec) if gate == "meg" else None), m)
    return _floored(ctx, ctx.mean_gate(gate, model, values, r.clusters[_informative(gate, r)], name=name, unit="groups",
                                       extra=extra), m)


# --------------------------------------------------------------------------- phase / order


def _paired_rate(ctx: GateContext, gate: str, model: str, cand: np.ndarray, base: np.ndarray, ids: list[str], *, name: str,
                 unit: str, extra: dict[str, Any]) -> Verdict:
    """Binary outcomes of candidate and baseline on the same units: exact McNemar."""
    return ctx.baseline_gate(gate, model, cand, base, np.array(ids), name=name, unit=unit, worse=paired_direction(gate),
                             extra=extra)


def answered(r: Any, conditions: Sequence[str]) -> np.ndarray:
    """Per item: True when every answer the gate uses (each condition, each ordering) was measured:
    the call succeeded and the answer parsed. Other items are lost units, never counted as flips
    or as stable answers."""
    ok = np.ones(len(r.items), dtype=bool)
    for c in conditions:
        a = r.condition_answers.get(c)
        if a is None:
            ok[:] = False
            continue
        ok &= np.all(np.asarray(a).reshape(len(r.items), -1) >= 0, axis=1)
    return ok


def phase_measurement(r: Any, conditions: Sequence[str]) -> Measurement:
    """Items planned, measured and lost (failed or unparseable answers, a constant answer across
    distinct questions, unusable videos)."""
    ok = answered(r, conditions)
    planned = max(int(getattr(r, "planned", 0)), len(r.items))
    constant = np.zeros(len(r.items), dtype=bool)
    for c in conditions:
        a = r.condition_answers.get(c)
        if a is not None:
            constant |= np.any(np.asarray(a).reshape(len(r.items), -1) == -2, axis=1)
    lost = {"failed_or_unparseable_answers": int((~ok & ~constant).sum()), "constant_answer": int(constant.sum()),
            "unusable_data": planned - len(r.items)}
    return Measurement("items", planned, int(ok.sum()), lost,
                       examples=[i.id for i, o in zip(r.items, ok, strict=True) if not o][:5])


def _phase_conditions(gate: str, which: Any, spec: Any, cond: Callable[[str], str]) -> list[str]:
    """The conditions a phase/order gate compares (:mod:`~.probes.conditions`)."""
    S = spec.phases
    if gate == "flip":
        return [cond(which[1]), cond(which[2])]
    if gate == "phase":
        if which == "any":
            return C.phases(S)
        s0, s1 = (int(x) for x in str(which).split("-"))
        return [C.phase(s0), C.phase(s1)]
    if gate == "order":
        return [C.phase(0)]
    if gate == "fusion":
        return C.fusion_conditions(S)
    if gate == "equivalence":
        return C.equivalence_conditions(S, spec.budget)
    raise ConfigError(f"`gate` must be flip, phase, order, fusion or equivalence; got {gate!r}")


def fused_or_voted(r: Any, conditions: Sequence[str]) -> np.ndarray:
    """PhaseFusion answers over ``conditions`` (identity ordering): the argmax of the mean
    content-space distribution (phase paper); in text mode, where no distribution is given, the
    mean of one-hot answers (a plurality vote, ties to the lowest content index)."""
    from .probes.phase import fused, identity_answer

    f = fused(r, conditions)
    if f is not None:
        return f
    votes = np.stack([identity_answer(r, c) for c in conditions], axis=1)
    out = []
    for row in votes:
        vals = row[row >= 0]
        out.append(int(np.bincount(vals).argmax()) if vals.size else -1)
    return np.array(out, dtype=int)


def equivalence_verdict(ctx: GateContext, model: str, r: Any, conds: Sequence[str], m: Measurement) -> Verdict:
    """The phase paper's confirmatory equivalence: PhaseFusion (S × b) accuracy against one pass at
    4b frames, d_i = correct_fused − correct_single per item, TOST on mean d with ±threshold
    (default 2.5 points), cluster bootstrap over videos. Certify-type in either mode: it passes
    only when the whole (1 − 2α) CI lies inside ±threshold."""
    from .probes.phase import identity_answer
    from .stats import mean_verdict

    spec = ctx.phase_spec()
    ok = answered(r, conds)
    truth = r.correct()
    fused_ans = fused_or_voted(r, conds[:-1])
    single = identity_answer(r, conds[-1])
    d = ((fused_ans == truth).astype(float) - (single == truth).astype(float))[ok]
    videos = np.array([i.video for i in r.items])[ok]
    name = (f"PhaseFusion ({spec.phases}x{spec.budget}) minus single pass at {C.Condition.parse(conds[-1]).frames} frames "
            f"accuracy")
    extra = {"gate": "equivalence", "model": model, "probe": "phase", "mode_scoring": r.mode,
             "unparseable": getattr(r, "unparseable", 0), "answers": answers_returned(r),
             "fusion_accuracy": float((fused_ans == truth)[ok].mean()) if ok.any() else None,
             "single_accuracy": float((single == truth)[ok].mean()) if ok.any() else None,
             "design": "TOST (certify-type)", "fusion_by": "distributions" if r.mode == "logprobs" else "plurality vote"}
    if getattr(ctx, "paired_test", "bootstrap") == "permutation":
        from .paired import paired_permutation_verdict

        v = paired_permutation_verdict(d, videos, name=name, threshold=ctx.threshold("equivalence", model), sides="both",
                                       mode="certify", alpha=ctx.alpha, unit="videos", seed=getattr(ctx, "seed", 0),
                                       extra=extra)
    else:
        v = mean_verdict(d, videos, name=name, threshold=ctx.threshold("equivalence", model), sides="both",
                         mode="certify", alpha=ctx.alpha, unit="videos", n_resamples=ctx.n_resamples,
                         rng=ctx.rng("bootstrap", "equivalence", name, model), extra=extra)
    return _floored(ctx, v, m)


def _phase_extra(r: Any, flips: np.ndarray, ok: np.ndarray, gate: str) -> dict[str, Any]:
    """Diagnostics of a phase/order decision on the items it used (``flips`` over the measured items)."""
    from .probes.phase import margin_auroc, order_accuracy, pair_flips

    extra: dict[str, Any] = {"probe": "phase", "mode_scoring": r.mode, "unparseable": r.unparseable, "errors": r.errors,
                             "answers": answers_returned(r), "deterministic_backend": r.deterministic_backend, "n_items": len(r.items), "problems": r.problems[:5],
                             "rerun_floor": float(pair_flips(r, C.phase(0), C.rerun(0)).mean())
                             if C.rerun(0) in r.condition_answers and r.items else None}
    if gate == "order" and r.items:
        extra.update(order_accuracy(r))
        extra["margin"] = margin_auroc(r)
    items = [i for i, o in zip(r.items, ok, strict=True) if o]
    brief = np.array(["brief-event" in i.tags for i in items], dtype=bool)
    if brief.size and len(flips) == brief.size:
        extra.update({"brief_event_items": int(brief.sum()), "brief_event_flips": int(flips[brief].sum()),
                      "other_flips": int(flips[~brief].sum()),
                      "flipped_items": [i.id for i, f in zip(items, flips, strict=True) if f][:20]})
    return extra


def answers_returned(r: Any) -> int:
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


def phase_verdict(ctx: GateContext, gate: str, model: str, which: Any = None) -> Verdict:
    """:func:`phase_verdict_core`, with the share of answers that had no option letter
    in the reason and in ``extra["no_option_letter"]``, so a verdict built on a minority of
    parseable answers says so in the terminal and the report, not only in the JSON."""
    v = phase_verdict_core(ctx, gate, model, which)
    note = no_letter_note(v.extra)
    if not note:
        return v
    n, bad = int(v.extra["answers"]), int(v.extra["unparseable"])
    return replace(v, reason=f"{v.reason}; {note}",
                   extra={**v.extra, "no_option_letter": {"answers": n, "without_letter": bad, "share": bad / n}})


def phase_verdict_core(ctx: GateContext, gate: str, model: str, which: Any = None) -> Verdict:
    """flip (sampler pair at a budget), phase (pair of phases or any-of-S), order, fusion.

    Items with a failed call or an unparseable answer in any condition the gate uses are lost
    units: excluded from the flip rate (never counted as a flip or as a stable answer), counted,
    and below the measurement floor the gate does not pass."""
    from .probes.phase import any_flips, fusion_changes, order_flips, pair_flips
    from .stats import mcnemar_exact, paired_change_verdict

    spec = ctx.phase_spec()
    budget = which[0] if gate == "flip" else None
    seq = ctx.sequential and not ctx.baseline and gate not in ("fusion", "equivalence")
    r = ctx.phase(model, gate, budget, n=max(1, spec.items // LOOKS) if seq else None)
    base = ctx.phase(ctx.baseline, gate, budget) if ctx.baseline else None
    S = spec.phases

    def cond(sampler: str) -> str:
        return C.sampler_at(sampler, spec.budget if budget is None else budget, spec.budget)

    conds = _phase_conditions(gate, which, spec, cond)

    def all_flips(res: Any) -> np.ndarray:
        """Per item (all items of ``res``): 1 when the gate's answers differ."""
        if gate == "flip" or (gate == "phase" and which != "any"):
            return np.asarray(pair_flips(res, conds[0], conds[1]))
        if gate == "phase":
            return np.asarray(any_flips(res, conds))
        return np.asarray(order_flips(res))

    def ref(res: Any) -> np.ndarray:
        """Flips over the measured items only."""
        return all_flips(res)[answered(res, conds)] if res.items else np.zeros(0, dtype=int)

    if gate == "flip":
        name = f"{which[1]} vs {which[2]} sampler flip rate at {budget} frames"
    elif gate == "phase":
        name = (f"any-of-{S} phase flip rate ({S}x{spec.budget})" if which == "any" else
                f"phase {conds[0].split(':')[1]} vs {conds[1].split(':')[1]} flip rate ({S}x{spec.budget})")
    elif gate == "order":
        name = f"option-order flip rate ({spec.orderings} orderings)"
    elif gate == "equivalence":
        name = "equivalence"
    else:
        name = f"PhaseFusion minus single-pass changed-answer rate under an origin shift ({S}x{spec.budget})"
    m = phase_measurement(r, conds)
    if gate == "equivalence":
        return equivalence_verdict(ctx, model, r, conds, m)
    ok = answered(r, conds)
    if base is not None:
        ok_b = answered(base, conds)
        ok = ok & ok_b if ok_b.size == ok.size else np.zeros_like(ok)  # different item sets: nothing paired
        m = combine(m, phase_measurement(base, conds), prefix_b="baseline", measured=int(ok.sum()))
    if gate == "fusion":
        ch = fusion_changes(r)
        extra: dict[str, Any] = {"probe": "phase", "mode_scoring": r.mode, "unparseable": r.unparseable,
                                 "errors": r.errors, "answers": answers_returned(r), "n_items": len(r.items),
                                 "problems": r.problems[:5]}
        extra["fusion_by"] = "distributions"
        if ch["fusion"] is None:
            # text mode (no letter log-probs): PhaseFusion over one-hot answers, a plurality vote of the S grids
            grids, shifted = C.phases(S), C.shifts(S)
            ch["fusion"] = (fused_or_voted(r, grids) != fused_or_voted(r, shifted)).astype(int)
            extra["fusion_by"] = "plurality vote (no letter log-probs)"
        fus, single, union = ch["fusion"][ok], ch["single"][ok], ch["union"][ok]
        extra.update({"single_changed": float(single.mean()) if single.size else None,
                      "union_changed": float(union.mean()) if union.size else None,
                      "fusion_changed": float(fus.mean()) if fus.size else None,
                      "fusion_vs_union_mcnemar_p": mcnemar_exact(
                          int(np.sum((fus == 1) & (union == 0))), int(np.sum((fus == 0) & (union == 1))))})
        if base is not None:
            bch = fusion_changes(base)
            if bch["fusion"] is None:
                bch["fusion"] = (fused_or_voted(base, C.phases(S)) != fused_or_voted(base, C.shifts(S))).astype(int)
            if bch["fusion"].size == ok.size:
                return _floored(ctx, _paired_rate(ctx, "fusion", model, fus, bch["fusion"][ok],
                                                  [i.id for i, o in zip(r.items, ok, strict=True) if o], name=name,
                                                  unit="items", extra=extra), m)
        v = paired_change_verdict(fus, single, name=name, threshold=ctx.threshold("fusion", model), mode=ctx.mode,
                                  alpha=ctx.alpha, unit="items", extra={"gate": "fusion", "model": model, **extra})
        return _floored(ctx, v, m)
    if base is not None:
        flips, bflips = all_flips(r)[ok], all_flips(base)[ok]
        extra = _phase_extra(r, flips, ok, gate)
        ids = [i.id for i, o in zip(r.items, ok, strict=True) if o]
        return _floored(ctx, _paired_rate(ctx, gate, model, flips, bflips, ids, name=name, unit="items", extra=extra), m)
    if seq:
        def at(n: int) -> np.ndarray:
            return np.asarray(ref(ctx.phase(model, gate, budget, n=n)), dtype=float)

        v = sequential_verdict(ctx, gate, model, values_at=at, n_max=spec.items, kind="rate", name=name, unit="items", extra={})
        final = ctx.phase(model, gate, budget, n=v.extra["looks"][-1])
        ok_f = answered(final, conds)
        v = _with_extra(v, _phase_extra(final, all_flips(final)[ok_f], ok_f, gate))
        return _floored(ctx, v, phase_measurement(final, conds))
    flips = all_flips(r)[ok]
    extra = _phase_extra(r, flips, ok, gate)
    v = ctx.rate_gate(gate, model, int(flips.sum()), int(flips.size), name=name, unit="items", extra=extra)
    return _floored(ctx, v, m)


# --------------------------------------------------------------------------- stressors


def _with_extra(v: Verdict, more: dict[str, Any]) -> Verdict:
    return replace(v, extra={**v.extra, **more})


def stressor_measurement(r: Any, gate: str, stressor: str | None = None) -> Measurement:
    """Videos planned, measured and lost for a stressor-suite gate, and the model calls behind it.

    * repetition: a video is lost when its clean call failed;
    * stressor: lost when its clean call failed or none of its variants was measured; failed
      variant calls are excluded from the share and counted;
    * attack: the clean-benign videos are attacked; a video is lost when its clean call failed
      or its walk reached a failed call before a repetitive output.
    """
    planned = max(int(getattr(r, "planned", 0)), len(r.videos))
    unusable = planned - len(r.videos)
    clean_ok = r.clean.valid
    clean_failed = int((~clean_ok).sum())
    if gate == "repetition":
        return Measurement("videos", planned, int(clean_ok.sum()),
                           {"generation_errors": clean_failed - r.clean.empty, **r.clean.unusable(),
                            "unusable_data": unusable}, calls=len(clean_ok),
                           failed_calls=clean_failed,
                           examples=[v for v, o in zip(r.videos, clean_ok, strict=True) if not o][:5])
    if stressor is None:
        raise ConfigError("`stressor` is required for the stressor and attack gates")
    variants = r.variants.get(stressor, [])
    repetitive_clean = int((r.clean.flags & clean_ok).sum())  # not attacked by design: not lost
    if gate == "stressor":
        d = r.amplification(stressor)
        eligible = [v for v in range(len(r.videos)) if clean_ok[v]]
        no_variant = sum(1 for v in eligible if not variants[v].valid.any())
        calls = len(clean_ok) + sum(len(s.ok) for s in variants)
        failed = clean_failed + sum(s.failed for s in variants)
        return Measurement("videos", planned, int((~np.isnan(d)).sum()),
                           {"clean_output_lost": clean_failed, "every_variant_lost": no_variant, "unusable_data": unusable},
                           calls=calls, failed_calls=failed,
                           examples=[r.videos[v] for v in eligible if not variants[v].valid.any()][:5])
    if gate == "attack":
        outcomes, walk_lost = r.attack_outcomes(stressor)
        calls = clean_failed
        failed = clean_failed
        for v in range(len(r.videos)):
            if clean_ok[v] and not r.clean.flags[v]:
                _, ok = r.walk(stressor, v)
                calls += len(ok)
                failed += int((~ok).sum())
        return Measurement("clean-benign videos", planned - repetitive_clean, len(outcomes),
                           {"clean_output_lost": clean_failed, "walk_hit_a_lost_output": walk_lost,
                            "unusable_data": unusable}, calls=calls, failed_calls=failed)
    raise ConfigError(f"`gate` must be repetition, stressor or attack; got {gate!r}")


def stressor_verdict(ctx: GateContext, gate: str, model: str, frames: int, stressor: str | None = None) -> Verdict:
    """repetition (clean RR), stressor (paired amplification), attack (ASR) at a frame count.

    Failed calls are lost units, never clean outputs: excluded from numerator and denominator,
    counted, and above the failure share (1 − measurement floor, default 5%) or below the floor of
    measured videos the gate does not pass in either mode. Every attack walk stops at the cap."""
    spec = ctx.stressor_spec(frames)
    seq = ctx.sequential and not ctx.baseline
    if gate == "repetition":
        part = "clean"
        # the controls (VideoSTF's count, pixel and visual-input controls) are reported beside the
        # clean repetition rate, on every video; they are a part of the probe of their own
        for who in (model, *([ctx.baseline] if ctx.baseline else [])):
            ctx.stressor(who, frames, part="controls")
    elif stressor is None:
        raise ConfigError("`stressor` is required for the stressor and attack gates")
    else:
        part = stressor
    r = ctx.stressor(model, frames, max(1, spec.videos // LOOKS) if seq else None, part=part)
    base = ctx.stressor(ctx.baseline, frames, part=part) if ctx.baseline else None
    extra: dict[str, Any] = {"probe": "stressor", "frames": frames, "errors": r.errors, "n_videos": len(r.videos),
                             "problems": r.problems[:5]}
    if gate == "repetition":
        name = f"clean repetition rate at {frames} frames"
        extra.update(r.clean.summary())
        if base is not None:
            both = r.clean.valid & base.clean.valid
            m = combine(stressor_measurement(r, gate), stressor_measurement(base, gate), prefix_b="baseline",
                        measured=int(both.sum()))
            v = _paired_rate(ctx, gate, model, r.clean.flags[both].astype(int), base.clean.flags[both].astype(int),
                             [x for x, o in zip(r.videos, both, strict=True) if o], name=name, unit="videos", extra=extra)
            return _floored(ctx, v, m)
        if seq:
            def rep_at(n: int) -> np.ndarray:
                res = ctx.stressor(model, frames, n, part=part)
                return res.clean.flags[res.clean.valid].astype(float)

            v = sequential_verdict(ctx, gate, model, values_at=rep_at, n_max=spec.videos, kind="rate", name=name,
                                   unit="videos", extra=extra)
            final = ctx.stressor(model, frames, v.extra["looks"][-1], part=part)
            return _floored(ctx, _with_extra(v, final.clean.summary()), stressor_measurement(final, gate))
        flags = r.clean.flags[r.clean.valid].astype(int)
        v = ctx.rate_gate(gate, model, int(flags.sum()), int(flags.size), name=name, unit="videos", extra=extra)
        return _floored(ctx, v, stressor_measurement(r, gate))
    if stressor is None:
        raise ConfigError("`stressor` is required for the stressor and attack gates")
    if gate == "stressor":
        name = f"{stressor} repetition amplification at {frames} frames"
        extra["stressor"] = stressor
        if base is not None:
            d, bd = r.amplification(stressor), base.amplification(stressor)
            both = ~np.isnan(d) & ~np.isnan(bd)
            m = combine(stressor_measurement(r, gate, stressor), stressor_measurement(base, gate, stressor),
                        prefix_b="baseline", measured=int(both.sum()))
            # (stressed share, clean flag) per video: the rare clean flags get an exact paired bound
            cand = np.column_stack([d + r.clean.flags, r.clean.flags])[both]
            bas = np.column_stack([bd + base.clean.flags, base.clean.flags])[both]
            v = ctx.baseline_gate(gate, model, cand, bas, np.array(r.videos)[both], name=name, unit="videos",
                                  worse=paired_direction(gate), extra=extra)
            return _floored(ctx, v, m)
        # fixed design: the per-video amplification is a share minus a rare 0/1 clean flag, whose rare
        # outcome a small sample misses; share_difference_verdict bootstraps (BCa) only when the sample
        # holds enough of it and otherwise bounds the flag's rate exactly (Clopper-Pearson)
        full = ctx.stressor(model, frames, part=part)
        d = full.amplification(stressor)
        ok = ~np.isnan(d)
        stressed = [s.flags[s.valid].mean() for s in full.variants[stressor] if s.valid.any()]
        extra.update({"stressed_rr": float(np.mean(stressed)) if stressed else None,
                      "clean_rr": float(full.clean.flags[full.clean.valid].mean()) if full.clean.valid.any() else None,
                      "n_videos": len(full.videos), "design": "fixed",
                      "variants_per_video": [len(s.texts) for s in full.variants[stressor]][:1]})
        clean_flag = np.asarray(full.clean.flags, dtype=float)[ok]
        v = share_difference_verdict(np.clip(d[ok] + clean_flag, 0.0, 1.0), clean_flag, name=name,
                                     threshold=ctx.threshold(gate, model), sides=GATES[gate].side, mode=ctx.mode,
                                     alpha=ctx.alpha, unit="videos", n_resamples=ctx.n_resamples,
                                     rng=ctx.rng("bootstrap", gate, name, model),
                                     extra={"gate": gate, "model": model, **extra})
        return _floored(ctx, v, stressor_measurement(full, gate, stressor))
    if gate == "attack":
        name = f"{stressor} attack success rate at {frames} frames"
        extra.update({"stressor": stressor, "cap": r.spec.attack_cap})
        if seq:
            def successes(n: int) -> np.ndarray:
                return np.array(ctx.stressor(model, frames, n, part=part).attack_outcomes(stressor)[0], dtype=float)

            v = sequential_verdict(ctx, gate, model, values_at=successes, n_max=spec.videos, kind="rate", name=name,
                                   unit="benign videos", extra=extra)
            final = ctx.stressor(model, frames, v.extra["looks"][-1], part=part)
            drawn = final.attack(stressor)
            v = replace(v, reason=f"{v.reason[:-1]}; average queries AQ = {_fmt(drawn['aq'])}.")
            v = _with_extra(v, {"asr": drawn["asr"], "aq": drawn["aq"], "attacked": drawn["attacked"],
                                "videos_drawn": v.extra["looks"][-1]})
            return _floored(ctx, v, stressor_measurement(final, gate, stressor))
        a = r.attack(stressor)
        extra.update({"asr": a["asr"], "aq": a["aq"], "attacked": a["attacked"]})
        v = ctx.rate_gate(gate, model, a["successes"], a["attacked"], name=name, unit="benign videos", extra=extra)
        v = replace(v, reason=f"{v.reason[:-1]}; average queries AQ = {_fmt(a['aq'])}.")
        return _floored(ctx, v, stressor_measurement(r, gate, stressor))
    raise ConfigError(f"`gate` must be repetition, stressor or attack; got {gate!r}")
