"""The positional suite's gates: DPB, MEG, coverage and contamination of multi-video summaries,
from a positional probe result (:mod:`~pytest_posbias.probes.positional`) to a verdict.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..gate_context import GateContext
from ..gate_registry import GATES, paired_direction
from ..metrics import dpb_per_instance, meg_per_instance
from ..probes.positional import PositionalResult, PositionalSpec
from ..stats import Verdict, inconclusive_verdict
from .design import floored, sequential_form, sequential_verdict, with_extra
from .measurement import Measurement, combine


def _informative(gate: str, r: PositionalResult) -> np.ndarray:
    """Which measured instances a gate can use. DPB and MEG compare slots, so an instance with zero
    coverage in every slot carries no positional information (DPB = 0/(0 + ε), MEG = 0 by
    construction): it is a lost unit for them (``no slot covered``), not a compliant 0; likewise for
    contamination (a summary that matches no reference cannot be closer to another video's).
    Coverage uses every measured instance (zero coverage is its evidence)."""
    if gate in ("dpb", "meg", "contamination") and r.coverage.size:
        return np.asarray(r.coverage.sum(axis=1) > 0, dtype=bool)
    return np.ones(r.coverage.shape[0], dtype=bool)


def positional_values(gate: str, r: PositionalResult) -> np.ndarray:
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
# MEG by the skewness-corrected t with the lattice floor, DPB by Student's t in detect mode (see t_rule)
T_RULES = {"meg": "skew-t", "dpb": "t"}
BOTH_T_CERTIFY = ("dpb", "contamination")
# the fewest groups from which a gate certifies: below 24, the t rules certified 0.06-0.08 of
# right-skewed contamination samples at the boundary (docs/calibration.md, "Contamination certify")
CERTIFY_MIN_GROUPS = {"contamination": 24}


def t_rule(gate: str, mode: str) -> str:
    """The t rule of a positional mean gate in ``mode``: ``T_RULES[gate]`` (Student's t for a gate
    not listed), except DPB and contamination in certify mode, which take Student's t and Hall's
    skewness-corrected t together, each at level α/2 (:class:`~pytest_posbias.stats.rules.BothT`): on
    a group's DPB (rare large jumps on near-zero spread) and contamination rate (right-skewed near 0),
    Student's t and the percentile bootstrap certify past the size (docs/calibration.md, "DPB certify"
    and "Contamination certify")."""
    return "both-t" if gate in BOTH_T_CERTIFY and mode == "certify" else T_RULES.get(gate, "t")


def meg_lattice_step(ctx: GateContext, spec: PositionalSpec) -> float | None:
    """The smallest step one judged fact moves a group's MEG by: 1/(2 · orders · m), m the largest
    number of reference sentences among the configuration's videos (coverage of a slot is the share
    of its video's m reference sentences judged covered, MEG_i = (C2 + C3)/2 − (C1 + C4)/2, and a
    group's MEG is the mean over its orders). The variance floor of the MEG gate
    (:func:`~pytest_posbias.stats.lattice_floor`) uses it; None when the configuration's videos are unknown."""
    m = ctx.manifest()
    counts = [len(m.videos[v].references) for g in m.groups_for(spec.domain, spec.bucket, spec.P) for v in g.videos
              if v in m.videos]
    if not counts or max(counts) < 1:
        return None
    orders = spec.P if spec.orders == "cyclic" else math.factorial(spec.P)
    return 1.0 / (2 * orders * max(counts))


def _news_style(ctx: GateContext, spec: PositionalSpec) -> bool:
    """Whether the configuration's references are news descriptions (``reference_style: news``)."""
    m = ctx.manifest()
    vids = {v for g in m.groups_for(spec.domain, spec.bucket, spec.P) for v in g.videos}
    return bool(vids) and all(m.videos[v].reference_style == "news" for v in vids if v in m.videos)


def instance_rows(res: PositionalResult, keep: np.ndarray | None = None) -> dict[tuple[str, tuple[int, ...]], int]:
    """(group, video order) -> row of each valid instance among those ``keep`` marks (all by default):
    an instance's identity across two runs."""
    valid = [x for x in res.instances if x["valid"]]
    used = valid if keep is None else [x for x, k in zip(valid, keep, strict=True) if k]
    return {(x["group"], tuple(x["order"])): k for k, x in enumerate(used)}


def positional_measurement(r: PositionalResult, gate: str = "coverage") -> Measurement:
    """Instances (group × order) planned, measured (scored) and lost, by cause."""
    keep = _informative(gate, r)
    measured = int(keep.sum())
    lost = {k: int(v) for k, v in r.lost.items() if v}
    if (~keep).any():
        lost["no_slot_covered"] = int((~keep).sum())
    examples = [f"group {i['group']} order {i['order']}: {i.get('lost', 'lost')}" for i in r.instances
                if not i["valid"]]
    return Measurement("instances (group x order)", max(r.planned, measured), measured, lost, examples=examples[:5])


def _inconclusive(ctx: GateContext, gate: str, model: str, name: str, n: int, estimate: float, extra: dict[str, Any],
                  why: str) -> Verdict:
    """An inconclusive verdict on ``n`` groups against the gate's threshold and side."""
    return inconclusive_verdict(name=name, threshold=ctx.threshold(gate, model), sides=GATES[gate].side, n=n,
                                mode=ctx.mode, alpha=ctx.alpha, unit="groups", estimate=estimate,
                                extra={**extra, "gate": gate, "model": model}, why=why)


def _too_few_to_certify(ctx: GateContext, gate: str, model: str, name: str, r: PositionalResult, n: int, how: str,
                        extra: dict[str, Any]) -> Verdict:
    """Inconclusive: fewer groups (``n``, ``how``: planned or measured) than the gate's
    :data:`CERTIFY_MIN_GROUPS` to certify on."""
    values = positional_values(gate, r)
    return _inconclusive(ctx, gate, model, name, n, float(np.mean(values)) if len(values) else math.nan, extra,
                         f"fewer than {CERTIFY_MIN_GROUPS[gate]} groups ({n} {how}), too few to certify a "
                         "right-skewed rate with a t rule")


def positional_verdict(ctx: GateContext, gate: str, model: str, spec: PositionalSpec) -> Verdict:
    """DPB / MEG / coverage / contamination gate for one configuration (paired with the
    baseline on the same (group, order) instances when ``--baseline`` is set: DPB and MEG on
    |mean candidate| − |mean baseline|, coverage and contamination on the mean difference).
    Lost instances (failed calls, judge failures, unalignable answers, unreadable videos) are
    never scored; below the measurement floor the gate does not pass."""
    if gate not in ("dpb", "meg", "coverage", "contamination"):  # checked before any model call
        raise ConfigError(f"`gate` must be dpb, meg, coverage or contamination; got {gate!r}")
    name = f"{GATES[gate].statistic} {spec.label()}"

    def describe(res: PositionalResult) -> dict[str, Any]:
        return {"probe": "positional", "spec": spec.label(), "excluded": res.excluded,
                "failures": {k: sum(v) for k, v in res.failures.items()}, "n_instances": int(res.coverage.shape[0])}

    if gate == "contamination" and _news_style(ctx, spec):
        r = ctx.positional(model, spec)
        est = float(r.contamination.mean()) if r.contamination.size else math.nan
        v = _inconclusive(ctx, gate, model, name, len(set(r.clusters.tolist())), est, describe(r),
                          "the references are news descriptions, which mention only part of what a clip shows, so a "
                          "summary closer to another clip's description is no evidence of leakage (the rate is "
                          "reported, not gated)")
        return floored(ctx, v, positional_measurement(r, gate))
    need = CERTIFY_MIN_GROUPS.get(gate, 0) if ctx.mode == "certify" and not ctx.baseline else 0
    if need and spec.groups < need:
        r = ctx.positional(model, spec)
        return floored(ctx, _too_few_to_certify(ctx, gate, model, name, r, spec.groups, "planned", describe(r)),
                       positional_measurement(r, gate))
    if ctx.sequential and not ctx.baseline:
        def at(n: int) -> np.ndarray:  # per group, in order of first appearance: the mean of its values
            rr = ctx.positional(model, spec, n)
            if not rr.coverage.size:
                return np.zeros(0)
            vals, cl = positional_values(gate, rr), rr.clusters[_informative(gate, rr)]
            return np.array([vals[cl == g].mean() for g in dict.fromkeys(cl.tolist())], dtype=float)

        v = sequential_verdict(ctx, gate, model, values_at=at, n_max=spec.groups, kind="mean", name=name, unit="groups",
                               extra={}, rule=t_rule(gate, ctx.mode),
                               lattice_step=meg_lattice_step(ctx, spec) if gate == "meg" else None, certify_from=need)
        final = ctx.positional(model, spec, v.extra["looks"][-1])
        groups = len(set(final.clusters[_informative(gate, final)].tolist()))
        outside = v.ci_low > v.upper or v.ci_high < v.lower  # a failure on evidence stays one
        if need and not v.passed and groups < need and not outside:  # groups lost: too few left to certify on
            v = _too_few_to_certify(ctx, gate, model, name, final, groups, "measured", {})
        return floored(ctx, with_extra(v, describe(final)), positional_measurement(final, gate))
    r = ctx.positional(model, spec)
    lattice = meg_lattice_step(ctx, spec) if gate == "meg" else None
    extra = describe(r) if ctx.baseline else {**describe(r), **sequential_form(
        spec.groups, "mean", rule=t_rule(gate, ctx.mode), lattice_step=lattice, certify_from=need)}
    m = positional_measurement(r, gate)
    values = positional_values(gate, r)
    if ctx.baseline:
        b = ctx.positional(ctx.baseline, spec)
        cand_rows, base_rows = instance_rows(r, _informative(gate, r)), instance_rows(b, _informative(gate, b))
        common = sorted(cand_rows.keys() & base_rows.keys())
        both = combine(m, positional_measurement(b, gate), prefix_b="baseline", measured=len(common))
        if len({c[0] for c in common}) < 2:
            v = inconclusive_verdict(name=f"{name} vs baseline", threshold=ctx.pcfg.margins()[gate], sides="upper",
                                     n=len({c[0] for c in common}), mode=ctx.mode, alpha=ctx.alpha, unit="groups",
                                     why="fewer than 2 groups with both candidate and baseline", extra=extra)
            return floored(ctx, v, both)
        bvals = positional_values(gate, b)
        cand = np.array([values[cand_rows[c]] for c in common])
        base = np.array([bvals[base_rows[c]] for c in common])
        clusters = np.array([c[0] for c in common])
        v = ctx.baseline_gate(gate, model, cand, base, clusters, name=name, unit="groups", worse=paired_direction(gate),
                              extra=extra)
        return floored(ctx, v, both)
    groups = len(set(r.clusters[_informative(gate, r)].tolist()))
    if need and groups < need:
        return floored(ctx, _too_few_to_certify(ctx, gate, model, name, r, groups, "measured", extra), m)
    rule = t_rule(gate, ctx.mode) if gate in T_RULES or t_rule(gate, ctx.mode) == "both-t" else None  # else bootstrap
    return floored(ctx, ctx.mean_gate(gate, model, values, r.clusters[_informative(gate, r)], name=name, unit="groups",
                                      extra=extra, method=rule, lattice_step=lattice), m)
