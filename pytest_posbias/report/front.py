"""The report's front page, from the run logs' verdict records: the release decision, one card per
suite (the test file of a gate's node id: counts, the worst effect, a forest plot of that gate over
the suite's configurations, links to the failing rows) and the verdict table grouped by suite and
configuration.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import figures
from .summary import allowed, by_suite, plural, suite_of, suite_title

MAX_CARD_LINKS = 12  # failing gates linked on a card (the rest are counted, and all are in the table)
MAX_FOREST_ROWS = 8  # configurations in a card's figure (worst first)


def num(v: Any) -> float:
    """A verdict field as a float (``"inf"``/``"-inf"`` strings, None -> nan)."""
    return math.nan if v is None else float(v)


def anchor(nodeid: str) -> str:
    """A stable HTML id for a gate's row (node ids hold spaces, brackets, colons)."""
    return "gate-" + re.sub(r"[^A-Za-z0-9_-]+", "-", nodeid).strip("-")


def configuration(v: Mapping[str, Any]) -> str:
    """The configuration a verdict belongs to: the positional spec, else the searched property and
    its query budget, else the stressor and ``N frames`` from its name, else its gate kind."""
    ex = v.get("extra") or {}
    if ex.get("spec"):
        return str(ex["spec"])
    if ex.get("property"):  # the same property searched at two budgets (the heavy variant): two rows
        return str(ex["property"]) + (f", budget {ex['budget']}" if ex.get("budget") else "")
    if m := re.search(r"at (\d+) frames", str(v.get("name", ""))):
        return (f"{ex['stressor']}, " if ex.get("stressor") else "") + f"{m.group(1)} frames"
    return str(ex.get("gate") or v.get("name") or "other")


def exceedance(v: Mapping[str, Any]) -> float:
    """How far the verdict stands past what fails it, relative to the bound's magnitude (divided by
    max(|bound|, 0.01)); larger is worse, negative is the distance still to go. A detect-mode gate fails
    when its CI lies wholly past a bound, so its nearer end counts ((ci_low − upper) or (lower − ci_high)):
    a wide CI around the middle is far from failing. A certify-mode gate fails when its CI reaches past a
    bound, so its farther end counts ((ci_high − upper) or (lower − ci_low)). The largest over the finite
    bounds."""
    est = num(v.get("estimate"))
    lo, hi = (est if math.isnan(x) else x for x in (num(v.get("ci_low")), num(v.get("ci_high"))))
    if v.get("mode") == "detect":
        lo, hi = hi, lo
    up, low = num(v.get("upper")), num(v.get("lower"))
    gaps = [(hi - up) / max(abs(up), 0.01)] if math.isfinite(up) and not math.isnan(hi) else []
    gaps += [(low - lo) / max(abs(low), 0.01)] if math.isfinite(low) and not math.isnan(lo) else []
    return max(gaps, default=-math.inf)


def decision(verdicts: Sequence[Mapping[str, Any]], *, unfinished: Sequence[int], errored: Sequence[Any],
             run: Mapping[str, Any] | None = None, cut: Sequence[tuple[int, int]] = ()) -> dict[str, Any]:
    """``{"ship": bool, "why": str, ...}``: ship only when every gate decided and passed in a finished run.

    ``run``: the run-level decision recorded in the run log's header (:mod:`..decision`); when
    given, a gate counts as failed by its adjusted decision (``adjusted_passed``), the banner
    carries its label, reason, notices (simulated model, quick sizes) and the underpowered gates;
    the selected gate tests a stopped run never reached (``not_run``) count against shipping in either case.
    ``cut``: (verdicts held, gates decided) of each run log holding fewer verdicts than its decision
    counted (cut short or damaged): no ship, and the label is no longer the log's.
    """
    lost = "; ".join(f"the run log holds {have} of the {n} verdicts its decision counted (cut short or damaged)"
                     for have, n in cut)
    if run is not None and not unfinished:
        run_why = str(run.get("why", ""))
        if errored:
            run_why += f"; {len(errored)} tests ended without a verdict"
        if lost:
            run_why = f"{lost}; the log's decision: {run_why}"
        return {"ship": run.get("exit_code") == 0 and not errored and not lost, "why": run_why,
                "label": "" if lost else str(run.get("label", "")), "cut": bool(lost),
                "n": len(verdicts),
                "n_fail": sum(not v.get("adjusted_passed", v["passed"]) for v in verdicts),
                "notices": list(run.get("notices") or []), "underpowered": list(run.get("underpowered") or []),
                "inconclusive": list(run.get("inconclusive") or []),
                "method": str(run.get("method", "")), "no_data": _no_data(run)}
    n_fail = sum(not v["passed"] for v in verdicts)
    why = []
    if unfinished:
        why.append(f"the run did not finish (pytest exit {', '.join(map(str, unfinished))})")
    if not_run := list((run or {}).get("not_run") or []):
        why.append(f"{plural(len(not_run), 'selected gate test')} never ran "
                   f"({(run or {}).get('stopped') or 'the run stopped before them'})")
    if errored:
        why.append(f"{len(errored)} tests ended without a verdict")
    if lost:
        why.append(lost)
    n_inc = sum(bool(v["passed"] and v.get("inconclusive")) for v in verdicts)  # passed, deciding nothing
    if not verdicts:
        why.append("no gate decided")
    elif n_inc == len(verdicts):
        why.append(f"no gate decided: all {n_inc} gates were inconclusive")
    if n_fail:
        why.append(f"{n_fail} of {len(verdicts)} gates failed")
    passed = f"all {len(verdicts)} gates passed" if not n_inc else (
        f"{len(verdicts) - n_inc} of {len(verdicts)} gates passed and {n_inc} inconclusive")
    # a run that did not finish is no DO NOT SHIP (that is a failure on measured evidence): its own label where
    # ``run`` is that run (an interrupted run's INTERRUPTED), else "not finished" (in a comparison ``run`` is the
    # candidate's, which may have finished while the other log did not)
    label = ""
    if unfinished and not lost:
        own = run is not None and run.get("exit_code") in unfinished
        label = str(run.get("label") or "not finished") if own and run is not None else "not finished"
    return {"ship": not why, "why": "; ".join(why) if why else passed, "label": label,
            "n_fail": n_fail, "n": len(verdicts), "cut": bool(lost), "no_data": _no_data(run or {}),
            "inconclusive": [str(v.get("nodeid", "")) for v in verdicts if v["passed"] and v.get("inconclusive")]}


def _no_data(run: Mapping[str, Any]) -> int:
    """Selected gate tests the recorded decision counts as skipped for missing data (not measured: the
    verdicts shown are not all the selected gates); 0 without the record."""
    skipped = run.get("skipped")
    n = skipped.get("no data", 0) if isinstance(skipped, dict) else 0
    return n if type(n) is int and n > 0 else 0


def _forest_for(mine: Sequence[Mapping[str, Any]], worst: Mapping[str, Any], *, title: str) -> str:
    """The worst gate's kind over the suite's configurations (worst first); with several models
    (candidate and baseline) each configuration shows every model's row, on the same axis."""
    gate = (worst.get("extra") or {}).get("gate")
    same = [v for v in mine if (v.get("extra") or {}).get("gate") == gate
            and num(v.get("upper")) == num(worst.get("upper"))
            and num(v.get("lower")) == num(worst.get("lower"))] or [worst]
    models = sorted({str(v.get("model")) for v in same})
    by_conf: dict[str, list[Mapping[str, Any]]] = {}
    for v in same:
        by_conf.setdefault(configuration(v), []).append(v)
    confs = sorted(by_conf, key=lambda c: max(exceedance(v) for v in by_conf[c]), reverse=True)
    confs = confs[:max(1, MAX_FOREST_ROWS // len(models))]  # MAX_FOREST_ROWS rows, one per model in each
    rows = [{"label": (configuration(v) + (f" · {v['model']}" if len(models) > 1 else ""))[:44],
             "estimate": num(v.get("estimate")), "low": num(v.get("ci_low")), "high": num(v.get("ci_high")),
             "passed": v["passed"]} for c in confs for v in sorted(by_conf[c], key=lambda v: str(v.get("model")))]
    return figures.forest(rows, title=title, xlabel="estimate with its (1 − 2α) CI; dashed: allowed bound",
                          lower=num(worst.get("lower")), upper=num(worst.get("upper")), width=5.2)


def suite_cards(verdicts: Sequence[Mapping[str, Any]], *,
                also: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """One card per suite: counts (``n_fail`` by the gates' own verdicts, ``n_fail_run`` by the
    run-level decision where every verdict carries it), the worst effect with its CI and bound, a
    small forest plot, and the failing gates (anchor, label). ``also``: verdicts drawn beside them in the figure but
    not counted (the baseline's, in a candidate-vs-baseline report)."""
    extra: dict[str, list[Mapping[str, Any]]] = {}
    for v in also:
        extra.setdefault(suite_of(v["nodeid"]), []).append(v)
    multi_model = len({v.get("model") for v in verdicts}) > 1
    cards = []
    for suite, mine in by_suite(verdicts):
        decided = [v for v in mine if not math.isnan(num(v.get("estimate")))]
        worst = max(decided or mine, key=lambda v: (not v["passed"], exceedance(v)))
        gate_name = re.sub(r"\s+\S+-\S+-P\d(\[.*\])?$", "", str(worst.get("name", "")))
        if stressor := (worst.get("extra") or {}).get("stressor"):  # the kind, not the worst one's configuration
            gate_name = re.sub(rf"^{re.escape(str(stressor))} | at \d+ frames\b", "", gate_name)
        fails = [v for v in mine if not v["passed"]]
        n_inc = sum(bool(v["passed"] and v.get("inconclusive")) for v in mine)
        adjusted = [v["adjusted_passed"] for v in mine if v.get("adjusted_passed") is not None]
        cards.append({
            "suite": suite, "file": suite,
            "title": suite_title(suite, [str(v["nodeid"]) for v in mine]).split(" — ", 1)[-1],
            "n": len(mine), "n_fail": len(fails), "n_pass": len(mine) - len(fails) - n_inc, "n_inconclusive": n_inc,
            "n_fail_run": adjusted.count(False) if len(adjusted) == len(mine) else None,
            "worst": {"name": worst.get("name"), "model": worst.get("model"), "estimate": num(worst.get("estimate")),
                      "ci_low": num(worst.get("ci_low")), "ci_high": num(worst.get("ci_high")),
                      "allowed": allowed(num(worst.get("lower")), num(worst.get("upper"))), "passed": worst["passed"],
                      "anchor": worst.get("anchor") or anchor(worst["nodeid"])},
            "figure": _forest_for([*mine, *extra.get(suite, [])], worst, title=f"{gate_name}: worst configurations"),
            "failing": [{"anchor": v.get("anchor") or anchor(v["nodeid"]),
                         "label": str(v.get("name")) + (f" · {v.get('model')}" if multi_model else "")}
                        for v in sorted(fails, key=exceedance, reverse=True)[:MAX_CARD_LINKS]],
            "more_failing": max(0, len(fails) - MAX_CARD_LINKS),
        })
    return cards


def grouped_table(verdicts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Suites -> configurations -> verdict rows; a configuration with a failure is ``open``.
    Failing configurations come first, then by name; rows failures first."""
    out = []
    multi_model = len({v["model"] for v in verdicts}) > 1
    for suite, mine in by_suite(verdicts):
        confs: dict[str, list[Mapping[str, Any]]] = {}
        for v in mine:
            confs.setdefault(configuration(v) + (f" · {v['model']}" if multi_model else ""), []).append(v)
        groups: list[dict[str, Any]] = [
            {"config": k, "open": any(not v["passed"] for v in rows), "n_fail": sum(not v["passed"] for v in rows),
             "n_inconclusive": sum(bool(v["passed"] and v.get("inconclusive")) for v in rows),
             "rows": sorted(rows, key=lambda v: (v["passed"], v["nodeid"]))} for k, rows in confs.items()]
        groups.sort(key=lambda g: (not g["open"], g["config"]))
        out.append({"suite": suite, "title": suite_title(suite, [str(v["nodeid"]) for v in mine]), "groups": groups,
                    "n_fail": sum(int(g["n_fail"]) for g in groups), "n": len(mine)})
    return out


__all__ = ["anchor", "configuration", "decision", "exceedance", "grouped_table", "num", "suite_cards"]
