"""Gate machinery shared by every suite: from a probe result to a :class:`~.stats.Verdict`.

Every gate is a function of the per-instance values of a probe and the run context
(thresholds per marker, per model and from the command line; detect/certify mode; α;
seeded bootstrap). With ``--baseline MODEL`` a gate becomes a paired non-inferiority
comparison on the same instances: d_i = candidate_i − baseline_i, oriented so that
positive is worse, must have mean <= the gate's baseline margin.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ConfigError
from .metrics import dpb_per_instance, meg_per_instance
from .probes.positional import PositionalResult, PositionalSpec
from .stats import Verdict, inconclusive_verdict


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


def positional_verdict(ctx: Any, gate: str, model: str, spec: PositionalSpec) -> Verdict:
    """DPB / MEG / coverage / contamination gate for one configuration (paired with the
    baseline on the same (group, order) instances when ``--baseline`` is set)."""
    r = ctx.positional(model, spec)
    name = f"{_NAMES[gate]} {spec.label()}"
    extra = {"probe": "positional", "spec": spec.label(), "excluded": r.excluded,
             "failures": {k: sum(v) for k, v in r.failures.items()}, "n_instances": int(r.coverage.shape[0])}
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
