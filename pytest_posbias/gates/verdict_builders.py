"""The verdict builders a gate calls through its run context: a mean gate, a rate gate and a
paired non-inferiority comparison against the baseline, each with the gate's threshold (or
baseline margin) and side from the registry (:mod:`~pytest_posbias.gate_registry`) and the run's
mode, α, resamples and seeds. :class:`~pytest_posbias.run.context.RunContext` exposes them as its
``mean_gate``, ``rate_gate`` and ``baseline_gate`` methods (the :class:`~pytest_posbias.gate_context.GateContext`
protocol).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import ConfigError
from ..gate_context import GateContext
from ..gate_registry import GATES
from ..stats import Verdict, inconclusive_verdict, mean_verdict, paired_change_verdict, rate_verdict
from ..stats.paired import paired_abs_mean_verdict, paired_amplification_verdict, paired_permutation_verdict


def mean_gate(ctx: GateContext, gate: str, model: str, values: ArrayLike, clusters: ArrayLike, *, name: str, unit: str,
              method: str | None = None, extra: Mapping[str, Any] | None = None,
              lattice_step: float | None = None) -> Verdict:
    """A mean gate: cluster bootstrap of the mean of ``values`` (the gate's registered interval
    method unless ``method`` is given; ``skew-t`` with ``lattice_step`` for the positional MEG
    gates, ``t`` for DPB) against the gate's threshold and side (docs/design.md section 5). The registry's
    ``value_range`` goes to the rule, so a zero-spread sample is decided on the exact worst-case
    floor of :func:`~pytest_posbias.stats.verdicts.zero_spread_interval`, not on a zero-width interval."""
    spec = GATES[gate]
    return mean_verdict(values, clusters, name=name, threshold=ctx.threshold(gate, model), sides=spec.side,
                        mode=ctx.mode, alpha=ctx.alpha, unit=unit, n_resamples=ctx.n_resamples,
                        method=method or spec.bootstrap, lattice_step=lattice_step, value_range=spec.value_range,
                        rng=ctx.rng("bootstrap", gate, name, model),
                        extra={"gate": gate, "model": model, **(extra or {})})


def rate_gate(ctx: GateContext, gate: str, model: str, k: int, n: int, *, name: str, unit: str,
              extra: Mapping[str, Any] | None = None) -> Verdict:
    """A rate gate: ``k`` of ``n`` units, an exact binomial (Clopper–Pearson) bound against the
    gate's threshold (:func:`~pytest_posbias.stats.rate_verdict`)."""
    return rate_verdict(k, n, name=name, threshold=ctx.threshold(gate, model), mode=ctx.mode, alpha=ctx.alpha,
                        unit=unit, extra={"gate": gate, "model": model, **(extra or {})})


# paired mean differences a gate certifies with Student's and the skewness-corrected t at α/2 each, and the
# fewest groups it certifies from: on a right-skewed contamination rise the percentile bootstrap, and the two
# t rules below 40 groups, certify past the size (benchmarks/decision_paired_mean.py; docs/calibration.md)
PAIRED_CERTIFY_MIN_GROUPS = {"contamination": 40}


def baseline_gate(ctx: GateContext, gate: str, model: str, cand: ArrayLike, base: ArrayLike, clusters: ArrayLike, *,
                  name: str, unit: str, worse: str, extra: Mapping[str, Any] | None = None) -> Verdict:
    """Paired non-inferiority against ``--baseline`` on the same instances; compliant when the
    candidate is worse by at most the gate's margin.

    * ``worse='abs'`` (DPB, MEG): Δ = |mean cand| − |mean base|, intersection–union bounds over
      groups (:func:`~pytest_posbias.stats.paired.paired_abs_mean_verdict`);
    * ``worse='binary'`` (rates): Δ = rate cand − rate base, the exact unconditional test for
      paired proportions (:func:`~pytest_posbias.stats.paired_change_verdict`);
    * ``worse='amplification'`` (stressor): (n, 2) arrays of (stressed share, clean flag) per
      video (:func:`~pytest_posbias.stats.paired.paired_amplification_verdict`);
    * ``worse='higher'``/``'lower'`` (means): d_i = cand_i − base_i (or its negative), by
      :func:`mean_difference`; in certify mode a gate in :data:`PAIRED_CERTIFY_MIN_GROUPS`
      (contamination) by Student's and the skewness-corrected t at α/2 each, and only from that
      many groups (inconclusive below).
    """
    c = np.asarray(cand, dtype=float)
    b = np.asarray(base, dtype=float)
    label = f"{name} vs baseline"  # the rng keys take the gate's own name
    margin = ctx.pcfg.margins()[gate]
    ex = {"gate": gate, "model": model, "baseline": ctx.baseline, "comparison": "non-inferiority",
          "margin": margin, **(extra or {})}
    if worse == "abs":
        return paired_abs_mean_verdict(c, b, clusters, name=label, margin=margin, mode=ctx.mode, alpha=ctx.alpha,
                                       unit=unit, extra=ex)
    if worse == "binary":
        return paired_change_verdict(c, b, name=label, threshold=margin, mode=ctx.mode, alpha=ctx.alpha, unit=unit,
                                     extra=ex)
    if worse == "amplification":
        return paired_amplification_verdict(c[:, 0], c[:, 1], b[:, 0], b[:, 1], name=label, margin=margin,
                                            mode=ctx.mode, alpha=ctx.alpha, unit=unit, extra=ex)
    if worse not in ("higher", "lower"):
        raise ConfigError(f"`worse` must be abs, binary, amplification, higher or lower; got {worse!r}")
    d = c - b if worse == "higher" else b - c
    need = PAIRED_CERTIFY_MIN_GROUPS.get(gate, 0) if ctx.mode == "certify" else 0
    n_groups = int(np.unique(np.asarray(clusters)).size)
    if need and n_groups < need:
        return inconclusive_verdict(name=label, threshold=margin, sides="upper", n=n_groups,
                                    mode=ctx.mode, alpha=ctx.alpha, unit=unit, extra=ex,
                                    estimate=float(d.mean()) if d.size else math.nan,
                                    why=f"fewer than {need} groups ({n_groups} on both sides), too few to certify a "
                                        "right-skewed rate difference with a t rule")
    return mean_difference(ctx, d, clusters, name=label, threshold=margin, sides="upper",
                           mode=ctx.mode, unit=unit, rng_keys=("baseline", gate, name, model), extra=ex,
                           method="both-t" if need else "percentile")


def mean_difference(ctx: GateContext, d: np.ndarray, clusters: ArrayLike, *, name: str, threshold: float, sides: str,
                    mode: str, unit: str, rng_keys: tuple[str, ...], extra: Mapping[str, Any],
                    method: str = "percentile") -> Verdict:
    """The mean of paired differences ``d`` against ``threshold``: ``method`` (the cluster bootstrap's
    expanded percentile, or a t rule of :func:`~pytest_posbias.stats.mean_verdict` on the clusters'
    linearized means), or the sign-flip permutation test with ``paired_test = "permutation"``
    (:func:`~pytest_posbias.stats.paired.paired_permutation_verdict`)."""
    if getattr(ctx, "paired_test", "bootstrap") == "permutation":
        return paired_permutation_verdict(d, clusters, name=name, threshold=threshold, sides=sides, mode=mode,
                                          alpha=ctx.alpha, unit=unit, seed=getattr(ctx, "seed", 0), extra=extra)
    return mean_verdict(d, clusters, name=name, threshold=threshold, sides=sides, mode=mode, alpha=ctx.alpha,
                        unit=unit, n_resamples=ctx.n_resamples, rng=ctx.rng(*rng_keys), extra=extra, method=method)
