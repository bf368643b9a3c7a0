"""Candidate vs. baseline in the report: paired differences from two arms' run-log records.

An arm is one model's records in one run log: the candidate and the ``--baseline`` model of one
run, or the first model of each of ``posbias report RUN_LOG_A RUN_LOG_B`` (A = candidate).

* DPB and MEG per configuration, paired by (configuration, group, order):
  :func:`~pytest_posbias.stats.paired.paired_abs_mean_verdict`, Δ = |mean cand| − |mean base|.
* Clean repetition rate per frame count, paired by video: the exact McNemar interval.
* Every other gate: the two verdicts side by side (the run log keeps no per-unit outcomes).

"Worse" means the whole (1 − 2α) CI of Δ lies above 0, "better" below 0, else "no clear change".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..metrics import dpb_per_instance, meg_per_instance
from ..stats import paired_change_verdict
from ..stats.paired import paired_abs_mean_verdict
from ..stats.verdicts import interval_level
from . import figures
from .sections import _final_looks


class Arm:
    """One model's observations and verdicts in one run log (``run``: a render.Run)."""

    def __init__(self, run: Any, model: str, label: str) -> None:
        self.run = run
        self.model = model
        self.label = label

    def instances(self) -> dict[tuple[str, int], dict[tuple[str, tuple[Any, ...]], list[float]]]:
        """(spec, P) -> {(group, order): coverage per slot} over the valid main-variant instances
        with some slot covered, as the DPB/MEG gates use them (an instance with zero coverage in
        every slot is a lost unit there); the last record of an instance logged again by a later
        sequential look wins."""
        out: dict[tuple[str, int], dict[tuple[str, tuple[Any, ...]], list[float]]] = {}
        for o in self.run.obs.get("positional", []):
            if (o.get("type") != "instance" or o.get("model") != self.model or o.get("variant", "main") != "main"
                    or not o.get("valid", True)):
                continue
            cov = [s.get("coverage") for s in o.get("slots", [])]
            if len(cov) != o["P"] or any(c is None for c in cov) or not any(cov):
                continue  # unmeasured, or no slot covered (no positional information: a lost unit for DPB/MEG)
            key = (str(o.get("group")), tuple(o.get("order") or ()))
            out.setdefault((o["spec"], int(o["P"])), {})[key] = [float(c) for c in cov]
        return out

    def clean_flags(self) -> dict[int, dict[str, int]]:
        """frames -> {video: clean repetition flag} from the final look of each stressor summary, over the
        videos whose clean output was measured (``clean_valid``: a lost output's flag reads 0, no clean answer)."""
        out = {}
        for o in _final_looks((o for o in self.run.obs.get("stressor", [])
                               if o.get("type") == "summary" and o.get("model") == self.model),
                              key=lambda o: int(o["settings"]["frames"]), size=lambda o: len(o.get("videos", []))):
            f, vids, flags = int(o["settings"]["frames"]), o.get("videos") or [], o.get("clean_flags") or []
            valid = o.get("clean_valid") or [True] * len(flags)  # a log written without it: every output
            if len(vids) == len(flags) == len(valid):
                out[f] = {str(v): int(bool(x)) for v, x, ok in zip(vids, flags, valid, strict=True) if ok is True}
        return out

    def verdicts(self) -> dict[tuple[str, str], Mapping[str, Any]]:
        """(test function, gate name) -> verdict, for this arm's model."""
        return {(v["nodeid"].split("::", 1)[-1].split("[", 1)[0], str(v.get("name"))): v for v in self.run.verdicts
                if (v.get("extra") or {}).get("model", self.model) == self.model}


def _direction(lo: float, hi: float) -> str:
    if math.isfinite(lo) and lo > 0:
        return "worse"
    if math.isfinite(hi) and hi < 0:
        return "better"
    return "no clear change"


def positional_differences(cand: Arm, base: Arm, *, alpha: float) -> list[dict[str, Any]]:
    """Per configuration and statistic (DPB; MEG at P = 4): both arms' means on the paired
    instances, Δ = |c̄| − |b̄| with its intersection–union CI, and the direction."""
    ci, bi = cand.instances(), base.instances()
    rows = []
    for key in sorted(set(ci) & set(bi)):
        spec, P = key
        common = sorted(set(ci[key]) & set(bi[key]))
        if not common:
            continue
        c = np.array([ci[key][k] for k in common], dtype=float)
        b = np.array([bi[key][k] for k in common], dtype=float)
        groups = np.array([k[0] for k in common])
        for stat, fn in [("DPB", dpb_per_instance)] + ([("MEG", meg_per_instance)] if P == 4 else []):
            xc, xb = fn(c), fn(b)
            v = paired_abs_mean_verdict(xc, xb, groups, name=f"{stat} {spec}", margin=0.0, alpha=alpha, unit="groups")
            rows.append({"config": spec, "stat": stat, "cand": float(xc.mean()), "base": float(xb.mean()),
                         "delta": v.estimate, "low": v.ci_low, "high": v.ci_high,
                         "n_groups": int(np.unique(groups).size),
                         "n_instances": len(common), "direction": _direction(v.ci_low, v.ci_high),
                         "method": "Δ = |mean cand| − |mean base|, intersection-union t bounds over groups"})
    return rows


def repetition_differences(cand: Arm, base: Arm, *, alpha: float) -> list[dict[str, Any]]:
    """Per frame count: clean repetition rates of both arms on the videos both measured, and
    δ = rate(cand) − rate(base) with the exact McNemar (1 − 2α) interval."""
    cf, bf = cand.clean_flags(), base.clean_flags()
    rows = []
    for f in sorted(set(cf) & set(bf)):
        vids = sorted(set(cf[f]) & set(bf[f]))
        if not vids:
            continue
        a = np.array([cf[f][v] for v in vids])
        b = np.array([bf[f][v] for v in vids])
        v = paired_change_verdict(a, b, name=f"clean repetition rate at {f} frames", threshold=0.0, alpha=alpha,
                                  unit="videos")
        rows.append({"config": f"{f} frames", "stat": "clean repetition rate", "cand": float(a.mean()),
                     "base": float(b.mean()), "delta": v.estimate, "low": v.ci_low, "high": v.ci_high,
                     "n_groups": len(vids), "n_instances": len(vids), "direction": _direction(v.ci_low, v.ci_high),
                     "method": "δ = rate cand − rate base, exact McNemar interval"})
    return rows


def side_by_side(cand: Arm, base: Arm) -> list[dict[str, Any]]:
    """Every gate both arms decided: the two verdicts (estimate, CI, pass/fail) side by side."""
    cv, bv = cand.verdicts(), base.verdicts()
    return [{"gate": key[1], "test": key[0], "cand": (c := cv.get(key)), "base": (b := bv.get(key)),
             "change": None if c is None or b is None else ("now fails" if b["passed"] and not c["passed"] else
                                                           "now passes" if c["passed"] and not b["passed"] else "")}
            for key in sorted(set(cv) | set(bv))]


def _changes(diffs: Sequence[Mapping[str, Any]], gates: Sequence[Mapping[str, Any]], *, direction: str,
             change: str) -> list[dict[str, str]]:
    """The front page's list: paired differences in ``direction`` and gates whose verdict flipped
    (``change``), one entry per gate name (a positional difference and its gate share a name)."""
    flipped = {str(g["gate"]) for g in gates if g["change"] == change}
    out = [{"label": f"{d['stat']} {d['config']}", "note": change if f"{d['stat']} {d['config']}" in flipped else ""}
           for d in diffs if d["direction"] == direction]
    seen = {o["label"] for o in out}
    out += [{"label": name, "note": change} for name in sorted(flipped - seen)]
    return out


def compare(cand: Arm, base: Arm, *, alpha: float) -> dict[str, Any]:
    """The comparison section: paired differences, their figure, the side-by-side verdicts and
    the front page's better/worse lists."""
    diffs = positional_differences(cand, base, alpha=alpha) + repetition_differences(cand, base, alpha=alpha)
    figs = [figures.forest([{"label": d["config"], "estimate": d["delta"], "low": d["low"], "high": d["high"],
                             "passed": None if d["direction"] != "worse" else False}
                            for d in diffs if d["stat"] == stat],
                           title=f"{stat}: {cand.label} − {base.label} (paired, {interval_level(alpha)}% CI)",
                           xlabel="Δ (> 0: candidate worse)", ref=0.0, width=5.6)
            for stat in sorted({d["stat"] for d in diffs})]
    gates = side_by_side(cand, base)
    worse = _changes(diffs, gates, direction="worse", change="now fails")
    better = _changes(diffs, gates, direction="better", change="now passes")
    both = sum(1 for g in gates if g["cand"] is not None and g["base"] is not None)
    return {"cand": cand.label, "base": base.label, "diffs": diffs, "figures": figs, "gates": gates,
            "worse": worse, "better": better, "alpha": alpha, "level": interval_level(alpha), "common": both,
            "only_cand": sum(1 for g in gates if g["base"] is None),
            "only_base": sum(1 for g in gates if g["cand"] is None),
            "same_run": cand.model == base.model and _run_id(cand) is not None and _run_id(cand) == _run_id(base)}


def _run_id(arm: Arm) -> Any:
    return (getattr(arm.run, "header", None) or {}).get("run_id")


def arms_for(runs: Sequence[Any]) -> tuple[Arm, Arm] | None:
    """The candidate and baseline arms: a run with ``--baseline`` compares its model with its
    baseline; two run logs compare the first model of A (candidate) with that of B (baseline)."""
    if len(runs) == 1:
        run, h = runs[0], runs[0].header
        if h.get("baseline") and h.get("models"):
            return Arm(run, h["models"][0], f"{h['models'][0]}"), Arm(run, h["baseline"], f"{h['baseline']} (baseline)")
        return None
    if len(runs) != 2:
        return None
    a, b = runs
    ma, mb = (a.header.get("models") or ["?"])[0], (b.header.get("models") or ["?"])[0]
    la, lb = ma, mb
    if ma == mb:  # two releases under one name: tell them apart by their run ids
        la, lb = f"{ma} (A, run {a.header.get('run_id')})", f"{mb} (B, run {b.header.get('run_id')})"
    return Arm(a, ma, la), Arm(b, mb, lb)


__all__ = ["Arm", "arms_for", "compare", "positional_differences", "repetition_differences", "side_by_side"]
