"""Parity gates: the tested deployment against a reference deployment on the same requests
(``--posbias-parity REFERENCE``; docs/design.md section 5, "Parity", gives the rules and their sizes).
Every gate is paired on the units measured on both sides; a unit lost on either side is a lost unit of the gate.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..gate_context import GateContext
from ..probes import conditions as C
from ..probes.positional import PositionalSpec
from ..stats import Verdict, inconclusive_verdict, paired_change_verdict
from .design import floored
from .measurement import combine
from .phase import answered, no_item_verdict, phase_measurement
from .positional import instance_rows, positional_measurement, positional_values
from .stressor import stressor_measurement
from .verdict_builders import mean_difference

MAX_LISTED = 50  # changed items listed in a verdict (and the report); the counts cover all of them
NO_REFERENCE = "the parity gates compare two deployments: opt in with --posbias-parity REFERENCE"


def _require(ctx: GateContext) -> str:
    ref = ctx.parity
    if not ref:
        raise ConfigError(f"no reference deployment: {NO_REFERENCE}")
    return str(ref)


def changed_items(items: list[Any], test: np.ndarray, ref: np.ndarray, floor: np.ndarray) -> list[dict[str, Any]]:
    """The items whose consensus answer changed, with both answers (option texts; model-made
    choices of data text, escaped where shown) and whether the reference's own re-run changed it too."""
    out = []
    for it, a, b, f in zip(items, test, ref, floor, strict=True):
        if a == b:
            continue
        opts = list(it.options)
        out.append({"item": it.id, "video": it.video, "question": it.question,
                    "answer_model": opts[a] if 0 <= a < len(opts) else None,
                    "answer_reference": opts[b] if 0 <= b < len(opts) else None,
                    "correct": opts[it.answer] if 0 <= it.answer < len(opts) else None,
                    "reference_rerun_changed": bool(f)})
    return out


def parity_answers_verdict(ctx: GateContext, model: str) -> Verdict:
    """``parity``: per MCQ item, c_i = 1 when the tested model's consensus answer (plurality content over
    the option orderings at phase 0) differs from the reference's, f_i = 1 when the reference's own re-run
    (``rerun:0``) changes its consensus; compliant when δ = P(c = 1) − P(f = 1) <= threshold, by the exact
    unconditional test for paired proportions (:func:`~pytest_posbias.stats.paired_change_verdict`). It
    does not decide (fail closed) when the reference's re-run floor exceeds the threshold or the two sides'
    answers were scored differently. Items lost on either side (failed or unparseable answers in any
    ordering, a constant answer, unusable video) are lost units, counted and shown."""
    ref = _require(ctx)
    r = ctx.phase(model, "order")  # phase 0 in every ordering: the order gate's requests
    b = ctx.phase(ref, "parity")  # the same, plus the re-run of phase 0 (the floor)
    ok_r, ok_b = answered(r, [C.phase(0)]), answered(b, [C.phase(0), C.rerun(0)])
    where_b = {it.id: k for k, it in enumerate(b.items)}
    rows = [(i, where_b[it.id]) for i, it in enumerate(r.items) if it.id in where_b and ok_r[i]
            and ok_b[where_b[it.id]]]
    m = combine(phase_measurement(r, [C.phase(0)]), phase_measurement(b, [C.phase(0), C.rerun(0)]),
                prefix_b="reference", measured=len(rows))
    name = f"changed-answer share against {ref} minus its re-run floor"
    if not (r.items and b.items):
        return no_item_verdict(ctx, "parity", model, name, m)
    cons_r, cons_b, cons_b2 = r.consensus(C.phase(0)), b.consensus(C.phase(0)), b.consensus(C.rerun(0))
    ia, ib = np.array(rows, dtype=int).reshape(-1, 2).T
    test, base, again = cons_r[ia], cons_b[ib], cons_b2[ib]
    changed = (test != base).astype(int)
    floor = (base != again).astype(int)
    items = [r.items[i] for i in ia]
    listed = changed_items(items, test, base, floor)
    extra: dict[str, Any] = {
        "gate": "parity", "model": model, "reference": ref, "probe": "phase", "comparison": "parity",
        "n_items": len(items), "changed": int(changed.sum()), "changed_share": float(changed.mean()) if rows else None,
        "reference_rerun_floor": float(floor.mean()) if rows else None, "reference_rerun_changed": int(floor.sum()),
        "mode_scoring": r.mode, "reference_mode_scoring": b.mode,
        "reference_deterministic_backend": b.deterministic_backend,
        "rule": "delta = changed share - reference re-run floor (paired on the same items) <= threshold",
        "changed_items": listed[:MAX_LISTED], "changed_items_total": len(listed),
    }
    threshold = ctx.threshold("parity", model)
    if r.mode != b.mode:  # letter log-probabilities on one side, parsed text on the other: not the same answers
        why, est = (f"the two deployments' answers were scored differently ({r.mode} for {model}, {b.mode} for "
                    f"{ref}): an endpoint without log-probabilities, or serving a reasoning model, is read from its "
                    "text"), math.nan
    elif rows and float(floor.mean()) > threshold:  # a noisy reference hides any change below its own flips
        why = (f"the reference's own re-run changes {floor.mean():.3g} of its answers, more than the threshold "
               f"{threshold:g}: a change of that size cannot be told from its noise (make the reference "
               "deterministic: greedy decoding, a fixed seed)")
        est = float(changed.mean() - floor.mean())
    else:
        return floored(ctx, paired_change_verdict(changed, floor, name=name, threshold=threshold, mode=ctx.mode,
                                                  alpha=ctx.alpha, unit="items", extra=extra), m)
    return floored(ctx, inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=len(items),
                                             mode=ctx.mode, alpha=ctx.alpha, unit="items", extra=extra,
                                             fail_closed=True, estimate=est, why=why), m)


def parity_coverage_verdict(ctx: GateContext, model: str, spec: PositionalSpec) -> Verdict:
    """``parity_coverage``: the drop of mean coverage of the same (group, order) instances against the
    reference, d_i = coverage_ref − coverage_test, compliant when mean d <= threshold."""
    ref = _require(ctx)
    r, b = ctx.positional(model, spec), ctx.positional(ref, spec)
    cr, br = instance_rows(r), instance_rows(b)
    common = sorted(cr.keys() & br.keys())
    m = combine(positional_measurement(r), positional_measurement(b), prefix_b="reference", measured=len(common))
    name = f"coverage drop against {ref} {spec.label()}"
    threshold = ctx.threshold("parity_coverage", model)
    vt, vb = positional_values("coverage", r), positional_values("coverage", b)
    cand = np.array([vt[cr[c]] for c in common], dtype=float)
    base = np.array([vb[br[c]] for c in common], dtype=float)
    clusters = np.array([c[0] for c in common])
    extra: dict[str, Any] = {"gate": "parity_coverage", "model": model, "reference": ref, "probe": "positional",
                             "spec": spec.label(), "comparison": "parity", "n_instances": len(common),
                             "coverage_model": float(cand.mean()) if cand.size else None,
                             "coverage_reference": float(base.mean()) if base.size else None}
    groups = len(set(clusters.tolist()))
    if groups < 2:
        v = inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=groups, mode=ctx.mode,
                                 alpha=ctx.alpha, unit="groups", extra=extra,
                                 why="fewer than 2 groups measured on both the tested model and the reference")
    else:
        v = mean_difference(ctx, base - cand, clusters, name=name, threshold=threshold, sides="upper", mode=ctx.mode,
                            unit="groups", rng_keys=("parity", "coverage", name, model), extra=extra)
    return floored(ctx, v, m)


def parity_repetition_verdict(ctx: GateContext, model: str, frames: int) -> Verdict:
    """``parity_repetition``: the clean repetition rate of the same videos against the reference,
    paired 0/1 flags, compliant when RR_test − RR_ref <= threshold."""
    ref = _require(ctx)
    r, b = ctx.stressor_clean(model, frames), ctx.stressor_clean(ref, frames)
    where_b = {v: k for k, v in enumerate(b.videos)}
    rows = [(i, where_b[v]) for i, v in enumerate(r.videos)
            if v in where_b and r.clean.valid[i] and b.clean.valid[where_b[v]]]
    m = combine(stressor_measurement(r, "repetition"), stressor_measurement(b, "repetition"), prefix_b="reference",
                measured=len(rows))
    ia, ib = np.array(rows, dtype=int).reshape(-1, 2).T
    ft = np.asarray(r.clean.flags, dtype=int)[ia]
    fb = np.asarray(b.clean.flags, dtype=int)[ib]
    extra: dict[str, Any] = {"gate": "parity_repetition", "model": model, "reference": ref, "probe": "stressor",
                             "frames": frames, "comparison": "parity", "n_videos": len(rows),
                             "repetition_model": float(ft.mean()) if rows else None,
                             "repetition_reference": float(fb.mean()) if rows else None}
    v = paired_change_verdict(ft, fb, name=f"repetition-rate increase against {ref} at {frames} frames",
                              threshold=ctx.threshold("parity_repetition", model), mode=ctx.mode, alpha=ctx.alpha,
                              unit="videos", extra=extra)
    return floored(ctx, v, m)


__all__ = ["MAX_LISTED", "NO_REFERENCE", "changed_items", "parity_answers_verdict", "parity_coverage_verdict",
           "parity_repetition_verdict"]
