"""The decision designs every gate shares: the group-sequential analysis, the measurement floor
applied to a verdict, and a paired rate against the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..gate_context import GateContext
from ..gate_registry import GATES
from ..stats import Verdict, _bounds, _fmt, _region
from ..stats.rules import RULE_NAMES
from ..stats.sequential import gsd_sizes, gsd_step
from ..stats.verdicts import interval_level
from .measurement import DEFAULT_FLOOR, Measurement, apply_floor

LOOKS = 4  # analyses of the group-sequential design (at 1/4, 1/2, 3/4 and all of the maximum sample)


def sequential_verdict(ctx: GateContext, gate: str, model: str, *, values_at: Callable[[int], np.ndarray], n_max: int,
                       kind: str, name: str, unit: str, extra: dict[str, Any], rule: str = "t",
                       lattice_step: float | None = None, certify_from: int = 0) -> Verdict:
    """A gate under the group-sequential design (:mod:`~pytest_posbias.stats.sequential`): the probe draws the
    first quarter of the maximum sample, then a quarter more at each look while the decision is open
    (LOOKS = 4 analyses, O'Brien–Fleming spending: :func:`~pytest_posbias.stats.sequential.gsd_step`; ``rule``
    and ``lattice_step`` choose a mean gate's test there, and the gate's registered value range decides
    a zero-spread sample on the exact worst-case floor, as in the fixed design; in certify mode no look
    with fewer than ``certify_from`` units passes)."""
    threshold = ctx.threshold(gate, model)
    lower, upper = _bounds(threshold, GATES[gate].side)
    d = next(filter(None, (gsd_step(values_at(n_k), look=k, n_max=n_max, looks=LOOKS, lower=lower, upper=upper,
                                    mode=ctx.mode, alpha=ctx.alpha, kind=kind, rule=rule, lattice_step=lattice_step,
                                    value_range=GATES[gate].value_range if kind == "mean" else None,
                                    certify_from=certify_from)
                           for k, n_k in enumerate(gsd_sizes(n_max, LOOKS)))))
    # the t-based repeated CI of a mean can reach past the values' range; the decision was taken on
    # the unclipped interval, where clipping could not change it, so clip for the record
    lo_v, hi_v = GATES[gate].value_range
    d = replace(d, ci_low=min(max(d.ci_low, lo_v), hi_v), ci_high=max(min(d.ci_high, hi_v), lo_v))
    level = interval_level(ctx.alpha)
    reason = (f"{name} = {_fmt(d.estimate)} ({level}% repeated CI [{_fmt(d.ci_low)}, {_fmt(d.ci_high)}], threshold "
              f"{_region(lower, upper)}, n = {d.stopped_at} of at most {n_max} {unit}, p = {_fmt(d.p_value)}): "
              f"{d.reason} ({ctx.mode} mode, group-sequential, α = {ctx.alpha:g}).")
    ex = {**extra, "gate": gate, "model": model, "design": d.method, "looks": d.looks, "n_max": n_max,
          "stopped_at": d.stopped_at, "kind": kind}
    if kind == "mean":
        ex["rule"] = RULE_NAMES[rule] + (
            f", variance floored at |bound|·δ, δ = {_fmt(lattice_step)}" if lattice_step else "")
    if d.inconclusive:
        ex["inconclusive_why"] = d.reason.removeprefix("inconclusive: ")
    est = d.estimate if math.isfinite(d.estimate) else math.nan
    return Verdict(name=name, estimate=est, ci_low=d.ci_low, ci_high=d.ci_high, threshold=threshold, n=d.stopped_at,
                   p_value=d.p_value, passed=d.passed, mode=ctx.mode, reason=reason, alpha=ctx.alpha, lower=lower,
                   upper=upper, unit=unit, extra=ex, inconclusive=d.inconclusive)


def sequential_form(n_max: int, kind: str, *, rule: str = "t", lattice_step: float | None = None,
                    certify_from: int = 0) -> dict[str, Any]:
    """The ``extra`` of a gate decided under the fixed design that :func:`sequential_verdict` would decide
    in the sequential one: the arguments it would take (``posbias plan``, whose run uses the fixed
    design, sizes the sequential cost from them with :func:`~pytest_posbias.stats.sequential.gsd_best_stop`)."""
    return {"sequential_form": {"n_max": n_max, "kind": kind, "rule": rule, "lattice_step": lattice_step,
                                "certify_from": certify_from}}


def floored(ctx: GateContext, v: Verdict, m: Measurement) -> Verdict:
    """``v`` with its measurement ``m`` applied: below the run's measurement floor it does not
    pass (:func:`~pytest_posbias.gates.measurement.apply_floor`)."""
    return apply_floor(v, m, floor=getattr(ctx, "floor", DEFAULT_FLOOR))


def with_extra(v: Verdict, more: dict[str, Any]) -> Verdict:
    """``v`` with ``more`` added to its ``extra``."""
    return replace(v, extra={**v.extra, **more})
