"""Gate machinery shared by every suite: from a probe result to a :class:`~.stats.Verdict`.

Every gate is a function of the per-instance values of a probe and the run context
(thresholds per marker, per model and from the command line; detect/certify mode; α;
seeded bootstrap). With ``--baseline MODEL`` a gate becomes a paired non-inferiority
comparison on the same instances: d_i = candidate_i − baseline_i, oriented so that
positive is worse, must have mean <= the gate's baseline margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from .config import BOOTSTRAP_METHOD, GATE_SIDES
from .errors import ConfigError
from .metrics import dpb_per_instance, meg_per_instance
from .probes.positional import PositionalResult, PositionalSpec
from .sequential import gsd_sizes, gsd_step
from .stats import Verdict, _bounds, _fmt, _region, inconclusive_verdict

VALUE_RANGE = {"dpb": (-1.0, 1.0), "meg": (-1.0, 1.0), "coverage": (0.0, 1.0), "contamination": (0.0, 1.0)}
LOOKS = 4  # analyses of the group-sequential design (at 1/4, 1/2, 3/4 and all of the maximum sample)


def sequential_verdict(ctx: Any, gate: str, model: str, *, values_at: Callable[[int], np.ndarray], n_max: int, kind: str,
                       name: str, unit: str, extra: dict[str, Any]) -> Verdict:
    """A gate under the group-sequential design (:mod:`~.sequential`): the probe draws the first
    quarter of the maximum sample, then a quarter more at each look while the decision is open
    (LOOKS = 4 analyses, O'Brien–Fleming spending: :func:`~.sequential.gsd_step`)."""
    threshold = ctx.threshold(gate, model)
    lower, upper = _bounds(threshold, GATE_SIDES[gate])
    d = None
    for k, n_k in enumerate(gsd_sizes(n_max, LOOKS)):
        d = gsd_step(values_at(n_k), look=k, n_max=n_max, looks=LOOKS, lower=lower, upper=upper, mode=ctx.mode,
                     alpha=ctx.alpha, kind=kind)
        if d is not None:
            break
    assert d is not None
    # the t-based repeated CI can reach past the values' range (coverage above 1, a rate below 0)
    # and, for constant values, spans a rounding error around them; the decision is taken on the
    # unclipped interval, where clipping to the range could not change it, so clip for the record
    lo_v, hi_v = VALUE_RANGE.get(gate, (-math.inf, math.inf))
    d = replace(d, ci_low=min(max(d.ci_low, lo_v), hi_v), ci_high=max(min(d.ci_high, hi_v), lo_v))
    level = round(100 * (1 - 2 * ctx.alpha))
    reason = (f"{name} = {_fmt(d.estimate)} ({level}% repeated CI [{_fmt(d.ci_low)}, {_fmt(d.ci_high)}], threshold "
              f"{_region(lower, upper)}, n = {d.stopped_at} of at most {n_max} {unit}, p = {_fmt(d.p_value)}): {d.reason} "
              f"({ctx.mode} mode, group-sequential, α = {ctx.alpha:g}).")
    ex = {**extra, "gate": gate, "model": model, "design": d.method, "looks": d.looks, "n_max": n_max,
          "stopped_at": d.stopped_at}
    est = d.estimate if math.isfinite(d.estimate) else math.nan
    return Verdict(name=name, estimate=est, ci_low=d.ci_low, ci_high=d.ci_high, threshold=threshold, n=d.stopped_at,
                   p_value=d.p_value, passed=d.passed, mode=ctx.mode, reason=reason, alpha=ctx.alpha, lower=lower,
                   upper=upper, unit=unit, extra=ex)


def _group_means(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Per-group mean of per-instance values, groups in order of first appearance."""
    order = list(dict.fromkeys(clusters.tolist()))
    return np.array([values[clusters == g].mean() for g in order], dtype=float)


def _positional_values(gate: str, r: PositionalResult) -> np.ndarray:
    if r.coverage.shape[0] == 0:
        return np.zeros(0)
    if gate == "dpb":
        return dpb_per_instance(r.coverage)
    if gate == "meg":
        return meg_per_instance(r.coverage)
    if gate == "coverage":
        return np.asarray(r.coverage.mean(axis=1), dtype=float)
    if gate == "contamination":
        return np.asarray(r.contamination.mean(axis=1), dtype=float)
    raise ConfigError(f"`gate` must be dpb, meg, coverage or contamination; got {gate!r}")


_NAMES = {"dpb": "DPB", "meg": "MEG", "coverage": "mean coverage", "contamination": "contaminated-slot rate"}
_WORSE = {"dpb": "abs", "meg": "abs", "coverage": "lower", "contamination": "higher"}


def _news_style(ctx: Any, spec: PositionalSpec) -> bool:
    """Whether the configuration's references are news descriptions (``reference_style: news``)."""
    m = ctx.manifest()
    vids = {v for g in m.groups_for(spec.domain, spec.bucket, spec.P) for v in g.videos}
    return bool(vids) and all(m.videos[v].reference_style == "news" for v in vids if v in m.videos)


def positional_verdict(ctx: Any, gate: str, model: str, spec: PositionalSpec) -> Verdict:
    """DPB / MEG / coverage / contamination gate for one configuration (paired with the
    baseline on the same (group, order) instances when ``--baseline`` is set)."""
    name = f"{_NAMES[gate]} {spec.label()}"

    def describe(res: PositionalResult) -> dict[str, Any]:
        return {"probe": "positional", "spec": spec.label(), "excluded": res.excluded,
                "failures": {k: sum(v) for k, v in res.failures.items()}, "n_instances": int(res.coverage.shape[0])}

    if gate == "contamination" and _news_style(ctx, spec):
        r = ctx.positional(model, spec)
        est = float(r.contamination.mean()) if r.contamination.size else math.nan
        return inconclusive_verdict(
            name=name, threshold=ctx.threshold(gate, model), sides=GATE_SIDES[gate], n=len(set(r.clusters.tolist())),
            mode=ctx.mode, alpha=ctx.alpha, unit="groups", estimate=est, extra={**describe(r), "gate": gate, "model": model},
            why="the references are news descriptions, which mention only part of what a clip shows, so a summary "
                "closer to another clip's description is no evidence of leakage (the rate is reported, not gated)")
    if ctx.sequential and not ctx.baseline:
        def at(n: int) -> np.ndarray:
            rr = ctx.positional(model, spec, n)
            return _group_means(_positional_values(gate, rr), rr.clusters) if rr.coverage.size else np.zeros(0)

        v = sequential_verdict(ctx, gate, model, values_at=at, n_max=spec.groups, kind="mean", name=name, unit="groups",
                               extra={})
        return _with_extra(v, describe(ctx.positional(model, spec, v.extra["looks"][-1])))
    r = ctx.positional(model, spec)
    extra = describe(r)
    values = _positional_values(gate, r)
    if ctx.baseline:
        b = ctx.positional(ctx.baseline, spec)
        key = lambda inst: (inst["group"], tuple(inst["order"]))  # noqa: E731
        cand_rows = {key(i): k for k, i in enumerate(x for x in r.instances if x["valid"])}
        base_rows = {key(i): k for k, i in enumerate(x for x in b.instances if x["valid"])}
        common = sorted(cand_rows.keys() & base_rows.keys())
        if len({c[0] for c in common}) < 2:
            return inconclusive_verdict(name=f"{name} vs baseline", threshold=ctx.pcfg.margins()[gate], sides="upper",
                                        n=len({c[0] for c in common}), mode=ctx.mode, alpha=ctx.alpha, unit="groups",
                                        why="fewer than 2 groups with both candidate and baseline", extra=extra)
        bvals = _positional_values(gate, b)
        cand = np.array([values[cand_rows[c]] for c in common])
        base = np.array([bvals[base_rows[c]] for c in common])
        clusters = np.array([c[0] for c in common])
        return ctx.baseline_gate(gate, model, cand, base, clusters, name=name, unit="groups", worse=_WORSE[gate], extra=extra)
    return ctx.mean_gate(gate, model, values, r.clusters, name=name, unit="groups", extra=extra)


# --------------------------------------------------------------------------- phase / order


def _paired_rate(ctx: Any, gate: str, model: str, cand: np.ndarray, base: np.ndarray, ids: list[str], *, name: str,
                 unit: str, extra: dict[str, Any]) -> Verdict:
    return ctx.baseline_gate(gate, model, cand, base, np.array(ids), name=name, unit=unit, worse="higher", extra=extra)


def _phase_extra(r: Any, flips: np.ndarray, gate: str) -> dict[str, Any]:
    """Diagnostics of a phase/order decision on the items it used."""
    from .probes.phase import margin_auroc, order_accuracy, pair_flips

    extra: dict[str, Any] = {"probe": "phase", "mode_scoring": r.mode, "unparseable": r.unparseable, "errors": r.errors,
                             "deterministic_backend": r.deterministic_backend, "n_items": len(r.items), "problems": r.problems[:5],
                             "rerun_floor": float(pair_flips(r, "phase:0", "rerun:0").mean())
                             if "rerun:0" in r.condition_answers and r.items else None}
    if gate == "order" and r.items:
        extra.update(order_accuracy(r))
        extra["margin"] = margin_auroc(r)
    brief = np.array(["brief-event" in i.tags for i in r.items], dtype=bool)
    if brief.size and len(flips) == brief.size:
        extra.update({"brief_event_items": int(brief.sum()), "brief_event_flips": int(flips[brief].sum()),
                      "other_flips": int(flips[~brief].sum()),
                      "flipped_items": [i.id for i, f in zip(r.items, flips, strict=True) if f][:20]})
    return extra


def phase_verdict(ctx: Any, gate: str, model: str, which: Any = None) -> Verdict:
    """flip (sampler pair at a budget), phase (pair of phases or any-of-S), order, fusion."""
    from .probes.phase import (
        any_flips,
        fusion_changes,
        margin_auroc,
        order_accuracy,
        order_flips,
        pair_flips,
    )
    from .stats import mcnemar_exact, paired_change_verdict

    spec = ctx.phase_spec()
    budget = which[0] if gate == "flip" else None
    seq = ctx.sequential and not ctx.baseline and gate != "fusion"
    r = ctx.phase(model, gate, budget, n=max(1, spec.items // LOOKS) if seq else None)
    base = ctx.phase(ctx.baseline, gate, budget) if ctx.baseline else None
    S = spec.phases
    floor = None
    if "rerun:0" in r.condition_answers and r.items:
        floor = float(pair_flips(r, "phase:0", "rerun:0").mean())
    extra: dict[str, Any] = {"probe": "phase", "mode_scoring": r.mode, "unparseable": r.unparseable, "errors": r.errors,
                             "rerun_floor": floor, "deterministic_backend": r.deterministic_backend,
                             "n_items": len(r.items), "problems": r.problems[:5]}

    def cond(sampler: str) -> str:
        return f"sampler:{sampler}" if budget in (None, spec.budget) else f"budget:{sampler}@{budget}"

    if gate == "flip":
        _, a, b = which
        flips = pair_flips(r, cond(a), cond(b))
        name = f"{a} vs {b} sampler flip rate at {budget} frames"
        def ref(res: Any) -> np.ndarray:
            return np.asarray(pair_flips(res, cond(a), cond(b)))
    elif gate == "phase":
        if which == "any":
            conds = [f"phase:{s}" for s in range(S)]
            flips = any_flips(r, conds)
            name = f"any-of-{S} phase flip rate ({S}x{spec.budget})"
            def ref(res: Any) -> np.ndarray:
                return np.asarray(any_flips(res, conds))
        else:
            s0, s1 = (int(x) for x in str(which).split("-"))
            flips = pair_flips(r, f"phase:{s0}", f"phase:{s1}")
            name = f"phase {s0} vs {s1} flip rate ({S}x{spec.budget})"
            def ref(res: Any) -> np.ndarray:
                return np.asarray(pair_flips(res, f"phase:{s0}", f"phase:{s1}"))
    elif gate == "order":
        flips = order_flips(r)
        name = f"option-order flip rate ({spec.orderings} orderings)"
        extra.update(order_accuracy(r) if r.items else {})
        extra["margin"] = margin_auroc(r)
        def ref(res: Any) -> np.ndarray:
            return np.asarray(order_flips(res))
    elif gate == "fusion":
        ch = fusion_changes(r)
        name = f"PhaseFusion minus single-pass changed-answer rate under an origin shift ({S}x{spec.budget})"
        if ch["fusion"] is None:
            return inconclusive_verdict(name=name, threshold=ctx.threshold("fusion", model), sides="upper", n=len(r.items),
                                        mode=ctx.mode, alpha=ctx.alpha, unit="items",
                                        why="PhaseFusion needs option-letter log-probs, which this backend does not give",
                                        extra=extra)
        extra.update({"single_changed": float(ch["single"].mean()), "union_changed": float(ch["union"].mean()),
                      "fusion_changed": float(ch["fusion"].mean()),
                      "fusion_vs_union_mcnemar_p": mcnemar_exact(
                          int(np.sum((ch["fusion"] == 1) & (ch["union"] == 0))), int(np.sum((ch["fusion"] == 0) & (ch["union"] == 1))))})
        if base is not None:
            bch = fusion_changes(base)
            if bch["fusion"] is not None:
                return _paired_rate(ctx, "fusion", model, ch["fusion"], bch["fusion"], [i.id for i in r.items], name=name,
                                    unit="items", extra=extra)
        return paired_change_verdict(ch["fusion"], ch["single"], name=name, threshold=ctx.threshold("fusion", model),
                                     mode=ctx.mode, alpha=ctx.alpha, unit="items",
                                     extra={"gate": "fusion", "model": model, **extra})
    else:
        raise ConfigError(f"`gate` must be flip, phase, order or fusion; got {gate!r}")
    brief = np.array(["brief-event" in i.tags for i in r.items], dtype=bool)
    if brief.size:
        extra.update({"brief_event_items": int(brief.sum()), "brief_event_flips": int(flips[brief].sum()),
                      "other_flips": int(flips[~brief].sum()),
                      "flipped_items": [i.id for i, f in zip(r.items, flips, strict=True) if f][:20]})
    if base is not None:
        return _paired_rate(ctx, gate, model, flips, ref(base), [i.id for i in r.items], name=name, unit="items", extra=extra)
    if seq:
        def at(n: int) -> np.ndarray:
            return np.asarray(ref(ctx.phase(model, gate, budget, n=n)), dtype=float)

        v = sequential_verdict(ctx, gate, model, values_at=at, n_max=spec.items, kind="rate", name=name, unit="items", extra={})
        final = ctx.phase(model, gate, budget, n=v.extra["looks"][-1])
        return _with_extra(v, _phase_extra(final, ref(final), gate))
    return ctx.rate_gate(gate, model, int(flips.sum()), int(flips.size), name=name, unit="items", extra=extra)


# --------------------------------------------------------------------------- stressors


def _with_extra(v: Verdict, more: dict[str, Any]) -> Verdict:
    return replace(v, extra={**v.extra, **more})


def stressor_verdict(ctx: Any, gate: str, model: str, frames: int, stressor: str | None = None) -> Verdict:
    """repetition (clean RR), stressor (paired amplification), attack (ASR) at a frame count."""
    spec = ctx.stressor_spec(frames)
    seq = ctx.sequential and not ctx.baseline
    r = ctx.stressor(model, frames, max(1, spec.videos // LOOKS) if seq else None)
    base = ctx.stressor(ctx.baseline, frames) if ctx.baseline else None
    extra: dict[str, Any] = {"probe": "stressor", "frames": frames, "errors": r.errors, "n_videos": len(r.videos),
                             "problems": r.problems[:5]}
    if gate == "repetition":
        flags = r.clean.flags.astype(int)
        extra.update(r.clean.summary())
        name = f"clean repetition rate at {frames} frames"
        if base is not None:
            return _paired_rate(ctx, gate, model, flags, base.clean.flags.astype(int), r.videos, name=name, unit="videos", extra=extra)
        if seq:
            v = sequential_verdict(ctx, gate, model, values_at=lambda n: ctx.stressor(model, frames, n).clean.flags.astype(float),
                                   n_max=spec.videos, kind="rate", name=name, unit="videos", extra=extra)
            return _with_extra(v, ctx.stressor(model, frames, v.n).clean.summary())
        return ctx.rate_gate(gate, model, int(flags.sum()), int(flags.size), name=name, unit="videos", extra=extra)
    if stressor is None:
        raise ConfigError("`stressor` is required for the stressor and attack gates")
    if gate == "stressor":
        d = r.amplification(stressor)
        ok = ~np.isnan(d)
        extra.update({"stressor": stressor, "stressed_rr": float(np.mean([s.flags.mean() for s in r.variants[stressor] if s.texts])),
                      "clean_rr": float(r.clean.flags.mean()), "variants_per_video": [len(s.texts) for s in r.variants[stressor]][:1]})
        name = f"{stressor} repetition amplification at {frames} frames"
        if base is not None:
            bd = base.amplification(stressor)
            both = ok & ~np.isnan(bd)
            return ctx.baseline_gate(gate, model, d[both], bd[both], np.array(r.videos)[both], name=name, unit="videos",
                                     worse="higher", extra=extra)
        # fixed design with the BCa bootstrap: the per-video amplification (a share minus a rare 0/1 clean
        # flag) has a long negative tail, which makes the t-test and the percentile interval reject a
        # compliant model too often (calibration table); BCa keeps the false-failure rate <= α
        full = ctx.stressor(model, frames)
        d = full.amplification(stressor)
        ok = ~np.isnan(d)
        extra.update({"stressed_rr": float(np.mean([s.flags.mean() for s in full.variants[stressor] if s.texts])),
                      "clean_rr": float(full.clean.flags.mean()), "n_videos": len(full.videos), "design": "fixed"})
        return ctx.mean_gate(gate, model, d[ok], np.array(full.videos)[ok], name=name, unit="videos", method=BOOTSTRAP_METHOD.get(gate, "percentile"),
                             extra=extra)
    if gate == "attack":
        a = r.attack(stressor)
        extra.update({"stressor": stressor, "asr": a["asr"], "aq": a["aq"], "attacked": a["attacked"],
                      "cap": r.spec.attack_cap})
        name = f"{stressor} attack success rate at {frames} frames"
        if seq:
            def successes(n: int) -> np.ndarray:
                res = ctx.stressor(model, frames, n)
                out = []
                for v, flag in enumerate(res.clean.flags):
                    if not flag:
                        walk = res.variants[stressor][v].flags
                        walk = walk if stressor == "delete1" else walk[: res.spec.attack_cap]
                        out.append(float(walk.any()))
                return np.array(out)

            v = sequential_verdict(ctx, gate, model, values_at=successes, n_max=spec.videos, kind="rate", name=name,
                                   unit="benign videos", extra=extra)
            drawn = ctx.stressor(model, frames, v.extra["looks"][-1]).attack(stressor)
            v = replace(v, reason=f"{v.reason[:-1]}; average queries AQ = {_fmt(drawn['aq'])}.")
            return _with_extra(v, {"asr": drawn["asr"], "aq": drawn["aq"], "attacked": drawn["attacked"],
                                   "videos_drawn": v.extra["looks"][-1]})
        v = ctx.rate_gate(gate, model, a["successes"], a["attacked"], name=name, unit="benign videos", extra=extra)
        return replace(v, reason=f"{v.reason[:-1]}; average queries AQ = {_fmt(a['aq'])}.")
    raise ConfigError(f"`gate` must be repetition, stressor or attack; got {gate!r}")
