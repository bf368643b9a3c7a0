"""The probe sections of the report (positional, phase, stressor): the figures and tables each
draws from the runs' observations, a sequential gate's observations taken at its final look.
:func:`~pytest_posbias.report.render.render` lays them out.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..metrics import consensus, dpb_per_instance, meg_per_instance
from . import figures

if TYPE_CHECKING:
    from .render import Run


def _slot_ci(cov: np.ndarray, clusters: np.ndarray,
             rng: np.random.Generator) -> tuple[list[float], list[float], list[float]]:
    """Per-slot mean and 90% cluster-bootstrap percentile band (999 resamples, fixed seed)."""
    if cov.size == 0:
        return [], [], []
    groups = np.unique(clusters)
    means = cov.mean(axis=0)
    if groups.size < 2:
        return means.tolist(), means.tolist(), means.tolist()
    sums = np.stack([cov[clusters == g].sum(axis=0) for g in groups])
    counts = np.array([(clusters == g).sum() for g in groups], dtype=float)
    idx = rng.integers(0, groups.size, size=(999, groups.size))
    boot = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)[:, None]
    lo, hi = np.percentile(boot, [5, 95], axis=0)
    return means.tolist(), lo.tolist(), hi.tolist()


def _final_looks(items: Iterable[Any], key: Any, size: Any) -> list[Any]:
    """A sequential gate runs its probe on growing prefixes of the instances and each run logs a
    summary; keep, per ``key``, the largest one (the look the decision stopped at), in log order."""
    best: dict[Any, Any] = {}  # a key keeps its first place when a larger look replaces its item
    for it in items:
        k = key(it)
        if k not in best or size(it) >= size(best[k]):
            best[k] = it
    return list(best.values())


def _means(cov: np.ndarray, P: int) -> dict[str, float | None]:
    """Mean coverage, DPB and MEG (at P = 4) of per-instance slot coverages; None where undefined."""
    return {"coverage": float(cov.mean()) if cov.size else None,
            "dpb": float(np.mean(dpb_per_instance(cov))) if cov.size else None,
            "meg": float(np.mean(meg_per_instance(cov))) if cov.size and P == 4 else None}


def _positional(runs: Sequence[Run]) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    summaries = _final_looks(((run, o) for run in runs for o in run.obs.get("positional", [])
                              if o.get("type") == "summary"),
                             key=lambda ro: (str(ro[0].path), ro[1]["model"], ro[1]["spec"], ro[1].get("variant")),
                             size=lambda ro: len(ro[1]["coverage"]))
    if not summaries:
        return {}
    main = [(r, o) for r, o in summaries if o.get("variant") == "main"]
    panels: dict[str, dict[str, Any]] = {}
    table = []
    alloc = []
    for _run, o in sorted(main, key=lambda x: (x[1]["P"], x[1]["domain"], x[1]["bucket"], x[1]["model"])):
        title = f"{o['domain'].capitalize()}-{o['P']} {o['bucket'].capitalize()}"
        cov = np.array(o["coverage"], dtype=float).reshape(-1, o["P"])
        clusters = np.array(o["clusters"])
        mean, lo, hi = _slot_ci(cov, clusters, rng)
        panels.setdefault(title, {"title": title, "series": []})["series"].append(
            {"model": o["model"], "mean": mean, "low": lo, "high": hi})
        contam = np.array(o["contamination"], dtype=float).reshape(-1, o["P"])
        table.append({"config": title, "model": o["model"], "n": int(np.unique(clusters).size),
                      "instances": int(cov.shape[0]), **_means(cov, o["P"]),
                      "failures": {k: sum(v) for k, v in o["failures"].items()}, "excluded": o["excluded"],
                      "leaks": o.get("n_leak_candidates", 0),
                      "contamination": [float(x) for x in contam.mean(axis=0)] if contam.size else []})
        alloc.append({"config": title, "model": o["model"], **o["allocation"]})
    variants = [{"config": o["spec"], "model": o["model"], "variant": o["variant"],
                 **_means(np.array(o["coverage"], dtype=float).reshape(-1, o["P"]), o["P"]),
                 "target": o.get("target") or {}} for _run, o in summaries if o.get("variant") != "main"]
    return {"figure": figures.coverage_curves(list(panels.values())) if panels else "", "table": table, "alloc": alloc,
            "variants": sorted(variants, key=lambda v: (v["config"], v["model"]))}


def _phase(runs: Sequence[Run]) -> dict[str, Any]:
    out: dict[str, Any] = {"heatmaps": [], "flip_figure": "", "fusion_figure": "", "risk_figure": "", "margins": []}
    for run in runs:
        by_model: dict[str, dict[str, dict[str, list[int]]]] = defaultdict(dict)
        for it in (o for o in run.obs.get("phase", []) if o.get("type") == "item"):
            by_model[it["model"]].setdefault(it["item"], {}).update(it["answers"])
        for model, answers in sorted(by_model.items()):
            samplers = sorted({c for a in answers.values() for c in a if c.startswith("sampler:")})
            if len(samplers) < 2:
                continue
            names = [s.split(":", 1)[1] for s in samplers]
            m = np.full((len(samplers), len(samplers)), np.nan)
            for i, j in itertools.product(range(len(samplers)), repeat=2):
                pairs = [(x, y) for a in answers.values() if samplers[i] in a and samplers[j] in a
                         if (x := consensus(a[samplers[i]])) >= 0 and (y := consensus(a[samplers[j]])) >= 0]
                if pairs:
                    m[i, j] = float(np.mean([x != y for x, y in pairs]))
            out["heatmaps"].append(figures.heatmap(m.tolist(), names, names, title=f"{model}: sampler disagreement"))
    verdicts = [v for run in runs for v in run.verdicts if v.get("extra", {}).get("probe") == "phase"]
    if flips := [v for v in verdicts if v["extra"].get("gate") in ("flip", "phase", "order")]:
        models = sorted({v["extra"]["model"] for v in flips})
        groups = sorted({v["name"] for v in flips})
        series = {m: [next((v["estimate"] for v in flips if v["name"] == g and v["extra"]["model"] == m), None)
                      for g in groups]
                  for m in models}
        floors = {f"re-run floor ({m})": v["extra"]["rerun_floor"] for m in models for v in flips
                  if v["extra"]["model"] == m and v["extra"].get("rerun_floor") is not None}
        thr = {"threshold": float(flips[0]["threshold"])}
        out["flip_figure"] = figures.bars([re.sub(r" \(.*\)", "", g).replace(" flip rate", "") for g in groups], series,
                                          title="Flip rates", ylabel="share of items",
                                          ref={**thr, **dict(list(floors.items())[:1])})
    if fusion := [v for v in verdicts if v["extra"].get("gate") == "fusion" and "single_changed" in v["extra"]]:
        out["fusion_figure"] = figures.bars(
            ["single pass", "union pass", "PhaseFusion"],
            {v["extra"]["model"]: [v["extra"]["single_changed"], v["extra"]["union_changed"],
                                   v["extra"]["fusion_changed"]] for v in fusion},
            title="Answers changed by an origin shift", ylabel="share of items")
    order = [v for v in verdicts if v["extra"].get("gate") == "order"]
    curves = {}
    for v in order:
        mg = v["extra"].get("margin") or {}
        out["margins"].append({"model": v["extra"]["model"], "auroc": mg.get("auroc"), "n": mg.get("n"),
                               "swing": v["extra"].get("swing"), "unanimity": v["extra"].get("circular_unanimity"),
                               "accuracy": v["extra"].get("accuracy_identity")})
        if pts := mg.get("risk_coverage") or []:
            curves[v["extra"]["model"]] = ([p["coverage"] for p in pts], [p["accuracy"] for p in pts])
    if curves:
        out["risk_figure"] = figures.lines(curves, title="Risk–coverage of the one-pass margin",
                                           xlabel="coverage (answered share)", ylabel="accuracy on answered")
    return out


def _settings_key(o: Mapping[str, Any]) -> tuple[str, str]:
    return o["model"], json.dumps({k: v for k, v in o["settings"].items() if k != "videos"}, sort_keys=True)


_PART_FIELDS = ("stressors", "controls", "ri_values", "ie_values", "severity")


def stressor_summaries(observations: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The stressor probe's summary per (model, settings). The probe is computed in parts (the clean
    outputs, the controls, each stressor's variants), each logging its own summary: of each part's
    final look, the stressors, controls and per-condition values are joined, the clean outputs are the first's."""
    joined: dict[tuple[str, str], dict[str, Any]] = {}
    for o in _final_looks((o for o in observations if o.get("type") == "summary"),
                          key=lambda o: (*_settings_key(o), o.get("part")), size=lambda o: len(o["videos"])):
        k = _settings_key(o)
        if k not in joined:
            joined[k] = {**o, **{f: dict(o.get(f) or {}) for f in _PART_FIELDS}}
            continue
        for f in _PART_FIELDS:
            joined[k][f].update({n: x for n, x in (o.get(f) or {}).items() if n not in joined[k][f]})
    return list(joined.values())


def _stressor(runs: Sequence[Run]) -> dict[str, Any]:
    summaries = stressor_summaries(o for run in runs for o in run.obs.get("stressor", []))
    if not summaries:
        return {}
    out: dict[str, Any] = {"heatmaps": [], "ri": [], "ie": [], "severity": [], "attack": [], "controls": [],
                           "remedy": [], "decoding": []}
    for model in sorted({o["model"] for o in summaries}):
        mine = sorted((o for o in summaries if o["model"] == model), key=lambda o: o["settings"]["frames"])
        frames = [o["settings"]["frames"] for o in mine]
        names = ["clean", *sorted({n for o in mine for n in o["stressors"]})]
        matrix = [[(o["clean"].get("rr") if n == "clean" else (o["stressors"].get(n) or {}).get("rr")) for o in mine]
                  for n in names]
        out["heatmaps"].append(figures.heatmap(matrix, names, [f"{f} frames" for f in frames],
                                               title=f"{model}: repetition rate", vmax=1.0, cmap="magma"))
        last = mine[-1]
        at = f"at {last['settings']['frames']} frames"
        for key, ylabel in (("ri", "repetition intensity"), ("ie", "information entropy")):
            out[key].append(figures.distributions(last.get(f"{key}_values", {}), title=f"{model}: {key.upper()} {at}",
                                                  ylabel=ylabel))
        if sev := last.get("severity", {}):
            conds = list(sev)
            out["severity"].append(figures.stacked(conds, {k: [sev[c].get(k, 0.0) for c in conds]
                                                           for k in ("benign", "ordinary", "severe")},
                                                   title=f"{model}: severity shares"))
        for o in mine:
            for n, s in sorted(o["stressors"].items()):
                a = s.get("attack") or {}
                out["attack"].append({"model": model, "frames": o["settings"]["frames"], "stressor": n,
                                      "rr": s.get("rr"),
                                      "amplification": s.get("amplification"), "asr": a.get("asr"), "aq": a.get("aq"),
                                      "attacked": a.get("attacked")})
            for n, c in sorted(o.get("controls", {}).items()):
                out["controls"].append({"model": model, "frames": o["settings"]["frames"], "control": n,
                                        "rr": c.get("rr"), "ri": c.get("ri"), "n": c.get("n")})
    for o in (o for run in runs for o in run.obs.get("stressor", [])):
        if o.get("type") in ("remedy", "decoding"):
            out[o["type"]].append(o)
    return out


def highlight_repeats(text: str, n: int = 5) -> list[tuple[str, bool]]:
    """Whitespace tokens of ``text`` with a flag for tokens inside a repeated n-gram."""
    toks = text.split()
    starts = range(len(toks) - n + 1)
    grams = Counter(tuple(toks[i : i + n]) for i in starts)
    marked = {k for i in starts if grams[tuple(toks[i : i + n])] > 1 for k in range(i, i + n)}
    return [(t, k in marked) for k, t in enumerate(toks)]
