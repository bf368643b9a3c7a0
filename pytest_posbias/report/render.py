"""The HTML robustness report, rendered from run logs alone.

``render(paths)`` reads one or more run logs (several models, or a candidate and its
baseline) and returns one self-contained HTML page: inline CSS, inline SVG figures, frame
thumbnails as small inline JPEGs; nothing is fetched when it is opened. Model text,
references and judge reasons are untrusted and escaped by jinja2's autoescape; figures
draw text as paths. Rendering is deterministic: the same logs give the same bytes apart
from the render timestamp.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import re
import shlex
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..data.problems import problems_in_records, summarize_problems
from ..engine import read_run_header, read_run_log, run_log_references
from ..exitcodes import DO_NOT_SHIP, NOT_MEASURED, SHIP
from ..models.registry import model_label
from ..safe_text import inert, redact_value
from . import compare, front
from . import search as search_section
from .sections import _phase, _positional, _stressor, highlight_repeats
from .summary import calls_line, num_text

SECTION_CAPTIONS = {
    "coverage": "Mean coverage at each slot position, with a 90% cluster-bootstrap band over video groups. "
                "A position-invariant model draws flat lines: the same coverage in every slot.",
    "sampler": "Share of items whose consensus answer differs between two frame samplers at the same budget. "
               "A phase-robust model is near 0 everywhere, at the level of its re-run floor.",
    "flips": "Flip rates of each gate with the threshold and the measured re-run floor. A robust model stays at the "
             "floor.",
    "fusion": "Share of answers that change when every grid moves by half the phase spacing. "
              "PhaseFusion should change fewer answers than one pass.",
    "risk": "Accuracy on the answered items as low-margin items are abstained on. A useful margin makes the curve rise "
            "as coverage falls.",
    "repetition": "Repetition rate (share of outputs with a repeated 5-gram) on clean and stressed frames per frame "
                  "count (dark: low, light: high). A stable model is dark in every cell and no stressor row is "
                  "lighter than the clean row.",
    "ri": "Repetition intensity (1 − distinct unigrams / unigrams) per output. Lower and tighter is better.",
    "ie": "Normalised unigram entropy per output. Higher is better (more distinct words).",
    "severity": "Share of outputs that are benign (no repeated 5-gram), ordinary (2–4 repeats) or severe (> 4 or token "
                "cap).",
}


MAX_LISTED_PROBLEMS = 200  # data problems listed one by one per run (all are counted by kind)


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, str):
        return {"inf": "∞", "-inf": "−∞"}.get(v, v)
    if isinstance(v, float):
        return num_text(v, f".{digits}g" if abs(v) >= 1e-3 or v == 0 else ".2e")
    return str(v)


class Run:
    """One run log, split by record kind."""

    def __init__(self, path: Path, loaded: tuple[dict[str, Any], list[dict[str, Any]]] | None = None) -> None:
        """``loaded``: the header and records of ``path`` already parsed (by the run that wrote it)."""
        self.path = path
        header, records = loaded if loaded is not None else read_run_log(path)
        self.header = redact_value(header)  # credentials inside URLs are never shown, also from an older log
        self.models = {r["spec"]: r.get("identity", {}) for r in records if r.get("kind") == "model"}
        self.references = run_log_references(records)  # a slot's reference texts, by id
        # only JSON true is a pass: a missing or non-boolean ``passed`` (a damaged log) is a failure
        self.verdicts = [{**r, "passed": r.get("passed") is True} for r in records if r.get("kind") == "verdict"]
        self.obs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.requests = 0  # distinct request records in the log (calls are counted from the header's totals)
        for r in records:
            if r.get("kind") == "observation":
                self.obs[r.get("probe", "")].append(r)
            elif r.get("kind") == "request":
                self.requests += 1

    def relabel(self, suffix: str) -> None:
        """Append ``suffix`` to every model name of this run (two runs of one model side by side)."""
        def new(m: Any) -> Any:
            return f"{m} {suffix}" if isinstance(m, str) else m

        self.header["models"] = [new(m) for m in self.header.get("models") or []]
        if self.header.get("baseline"):
            self.header["baseline"] = new(self.header["baseline"])
        for recs in self.obs.values():
            for o in recs:
                if "model" in o:
                    o["model"] = new(o["model"])
        for v in self.verdicts:
            if "model" in (v.get("extra") or {}):
                v["extra"] = {**v["extra"], "model": new(v["extra"]["model"])}


def _examples(runs: Sequence[Run], failing: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"positional": [], "stressor": [], "phase": []}
    for run in runs:
        seen: set[tuple[Any, ...]] = set()
        for o in run.obs.get("positional", []):
            if o.get("type") == "instance" and o.get("thumbnails") and o["spec"] in failing:
                key = (o["model"], o["spec"], o.get("group"), tuple(o.get("order") or ()))
                if key in seen:  # the same instance logged again by a later sequential look
                    continue
                seen.add(key)
                slots = []
                for k, s in enumerate(o["slots"]):
                    covered = s.get("covered") or []
                    reasons = s.get("reasons") or []
                    texts = run.references.get(str(s.get("references_id")),
                                               s.get("references") or [])  # by id, or inline
                    refs = [{"text": r, "covered": bool(covered[i]) if i < len(covered) else None,
                             "reason": reasons[i] if i < len(reasons) else ""}
                            for i, r in enumerate(texts)]
                    slots.append({"slot": k + 1, "video": s["video"],
                                  "thumb": o["thumbnails"][k] if k < len(o["thumbnails"]) else "",
                                  "summary": s.get("summary", ""), "status": s.get("status"),
                                  "coverage": s.get("coverage"), "judge": s.get("judge"), "refs": refs})
                out["positional"].append({"model": o["model"], "spec": o["spec"], "group": o["group"],
                                          "order": o["order"], "slots": slots, "raw": o.get("text", [])})
        for o in run.obs.get("stressor", []):
            if (o.get("type") == "example" and o["model"] in failing
                    and (o["model"], o["video"], o.get("condition")) not in seen):
                seen.add((o["model"], o["video"], o.get("condition")))
                out["stressor"].append({"model": o["model"], "video": o["video"], "finish": o.get("finish"),
                                        "thumbs": [t for t in o.get("thumbnails", []) if t],
                                        "tokens": highlight_repeats(o["text"])})
    for v in (v for run in runs for v in run.verdicts):
        ex = v.get("extra", {})
        if ex.get("probe") == "phase" and not v["passed"] and ex.get("flipped_items"):
            out["phase"].append({"model": ex.get("model"), "gate": v["name"], "item_ids": ex["flipped_items"][:10]})
    out["positional"] = out["positional"][:6]
    out["stressor"] = out["stressor"][:4]
    return out


def _parity(verdicts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The parity gates' answers verdicts (``--posbias-parity``): per verdict the tested model, the
    reference, the changed share beside the reference's re-run floor, and the items whose consensus
    answer changed with both answers (option texts from the data, chosen by the models: the
    template escapes them, as every model text)."""
    return [{**{k: v.get(k) for k in ("model", "anchor", "passed", "name", "estimate")},
             **{k: ex.get(k) for k in ("reference", "changed", "n_items", "changed_share")},
             "floor": ex.get("reference_rerun_floor"), "rows": list(ex.get("changed_items") or []),
             "total": ex.get("changed_items_total", 0)}
            for v in verdicts if (ex := v.get("extra") or {}).get("gate") == "parity"]


def _details(runs: Sequence[Run]) -> list[dict[str, Any]]:
    out = []
    for run in runs:
        h = run.header
        env = h.get("environment", {})
        problems = problems_in_records(run.obs.get("data", []))
        gate_calls = [dict((v.get("extra") or {}).get("calls") or {}) for v in run.verdicts]
        out.append({"path": run.path.name,
                    **{k: h.get(k) for k in ("run_id", "started", "finished", "seed", "mode", "alpha", "judge")},
                    "calls_line": calls_line(h.get("calls") or {}, verdict_calls=gate_calls,
                                             workers=max(1, len(h.get("workers") or []))),
                    "command": shlex.join(str(a) for a in h.get("command", [])), "workers": h.get("workers", []),
                    "models": [{"spec": s, **i} for s, i in run.models.items()], "calls": h.get("calls", {}),
                    "requests": run.requests, "packages": {k: v for k, v in env.get("packages", {}).items() if v},
                    **{k: env.get(k) for k in ("python", "platform", "cuda", "git_commit")},
                    "gpus": env.get("gpus", []),
                    "problems": [str(p) for p in problems[:MAX_LISTED_PROBLEMS]], "n_problems": len(problems),
                    "problem_kinds": summarize_problems(problems)})
    return out


def _inert_output(value: Any) -> Any:
    """Every ``{{ ... }}`` of the templates, before autoescape: control characters, bidi overrides
    and isolates, and NUL from data (a domain, a reference, a model's answer) shown escaped
    (:func:`~pytest_posbias.safe_text.inert`), so what the page shows is what the data hold."""
    if not isinstance(value, str):
        return value
    out = inert(value)
    if out == value:
        return value
    import markupsafe

    return markupsafe.Markup(out) if isinstance(value, markupsafe.Markup) else out


@functools.cache
def template_environment() -> Any:
    """The jinja2 environment of the package's templates (the report and the history page), one
    per process: strict undefined, autoescape on, the ``num`` and ``pct`` filters."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("pytest_posbias", "report/templates"),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _fmt
    env.finalize = _inert_output
    env.filters["gate_anchor"] = front.anchor
    env.filters["pct"] = lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"
    return env


def _unfinished(header: Mapping[str, Any]) -> int | None:
    """pytest's status of a run that did not finish (an interrupt, an internal or usage error), or
    None. A status the run-level decision replaced is no such run: under ``-n`` xdist ends a run
    stopped by ``-x``/``--maxfail`` as 2, and the decision recorded its own status for it."""
    x = header.get("exitstatus")
    if x in (None, 0, 1) or (header.get("run_decision") or {}).get("exit_code") in (SHIP, DO_NOT_SHIP, NOT_MEASURED):
        return None
    return int(x)


def render(paths: Iterable[str | Path], *, rendered_at: str | None = None,
           loaded: Mapping[Path, tuple[dict[str, Any], list[dict[str, Any]]]] | None = None) -> str:
    """The report for one or more run logs (``loaded``: some of them already parsed, by path)."""
    runs = [Run(Path(p), (loaded or {}).get(Path(p))) for p in paths]
    if len(runs) == 2 and set(runs[0].header.get("models") or []) & set(runs[1].header.get("models") or []):
        for run, tag in zip(runs, ("A", "B"), strict=True):  # two releases of one model: keep them apart
            run.relabel(f"({tag})")
    verdicts = [{**v, "model": v.get("extra", {}).get("model") or (run.header.get("models") or ["?"])[0],
                 "anchor": front.anchor(f"{run.header.get('run_id')}-{v['nodeid']}" if len(runs) > 1 else v["nodeid"]),
                 "ci": f"[{_fmt(v['ci_low'])}, {_fmt(v['ci_high'])}]" if v.get("ci_low") is not None else "–"}
                for run in runs for v in run.verdicts]
    verdicts.sort(key=lambda v: (v["passed"], v["model"], v["nodeid"]))
    unfinished = [x for run in runs if (x := _unfinished(run.header)) is not None]
    errored = [e for run in runs for e in (run.header.get("errored_tests") or [])]
    # the verdict lines come last in a run log: a log cut short keeps its header's decision over gates it lost
    counted = [(len(run.verdicts), n) for run in runs
               if type(n := (run.header.get("run_decision") or {}).get("n_gates")) is int and n > len(run.verdicts)]
    stops = [run.header.get("run_decision") or {} for run in runs]
    not_run = [n for d in stops for n in (d.get("not_run") or [])]  # selected gates a stopped run never reached
    stopped = "; ".join(sorted({str(d["stopped"]) for d in stops if d.get("not_run") and d.get("stopped")}))
    arms = compare.arms_for(runs)
    alpha = float(runs[0].header.get("alpha") or 0.05) if runs else 0.05
    # candidate vs baseline: the release decision and the cards' counts are the candidate's gates
    decided = [v for v in verdicts if v["model"] == arms[0].model] if arms else verdicts
    failing = {v.get("extra", {}).get("spec") for v in verdicts if not v["passed"]} | {
        v["model"] for v in verdicts if not v["passed"] and v.get("extra", {}).get("probe") == "stressor"}
    models = sorted({m for run in runs for m in (run.header.get("models") or [])})
    html = template_environment().get_template("report.html.j2").render(
        title="pytest-posbias robustness report: " + ", ".join(models),
        version=__version__,
        rendered_at=rendered_at or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        verdicts=verdicts,
        n_fail=sum(not v["passed"] for v in verdicts),
        unfinished=unfinished,
        errored=errored,
        not_run=not_run,
        stopped=stopped,
        decision=front.decision(decided, unfinished=unfinished, errored=errored, cut=counted,
                                run=(arms[0].run if arms else runs[0]).header.get("run_decision")
                                if arms or len(runs) == 1 else None),
        decided_for=arms[0].label if arms else None,
        cards=front.suite_cards(decided, also=[v for v in verdicts if v not in decided]),
        table=front.grouped_table(verdicts),
        comparison=compare.compare(*arms, alpha=alpha) if arms else None,
        positional=_positional(runs),
        phase=_phase(runs),
        stressor=_stressor(runs),
        search=search_section.search_gates(verdicts, anchor=lambda v: str(v["anchor"])),
        parity=_parity(verdicts),
        examples=_examples(runs, failing),
        details=_details(runs),
        captions=SECTION_CAPTIONS,
    )
    # matplotlib's SVG keeps each label's text in an XML comment beside its paths: the figures'
    # text from data is escaped here, as the template's is (_inert_output)
    return inert(html)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "model"


def write_reports(paths: Sequence[str | Path], *, rootdir: Path, explicit: str | None = None,
                  report_dir: str = "reports",
                  loaded: Mapping[Path, tuple[dict[str, Any], list[dict[str, Any]]]] | None = None) -> list[Path]:
    """Write the report: to ``explicit``, or to reports/<model>-<UTC timestamp>.html plus reports/latest.html."""
    html = render(paths, loaded=loaded)
    if explicit:
        out = rootdir / explicit  # an absolute path stays as it is
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
        return [out]
    d = rootdir / report_dir
    d.mkdir(parents=True, exist_ok=True)
    header = read_run_header(paths[0])  # the name needs the header only, not the whole log again
    models = "+".join(_slug(model_label(m)) for m in header.get("models") or ["model"])
    stamp = str(header.get("started", "")).replace(":", "").replace("-", "").replace("+0000", "Z") or "run"
    written = [d / f"{_slug(models)}-{_slug(stamp)}.html", d / "latest.html"]
    for out in written:
        out.write_text(html, encoding="utf-8")
    return written
