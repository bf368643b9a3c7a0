"""``--posbias-markdown PATH``: a short Markdown verdict table for CI job summaries and PR comments
(``$GITHUB_STEP_SUMMARY``, a GitLab artifact).

One table, failures first: result, gate, estimate, the 1 − 2α CI, the allowed region with the
threshold, n, the gate's p-value and the run-level decision's part (``run``, ``p adj``). Tests that
ended without a verdict, or that a stopped run never reached, are listed under it, then a link to
the HTML report. The file is written even when no gate decided.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..run_options import RunOptions
from ..safe_text import inert, md_code, md_text, redact_text
from ..stats import Verdict
from ..stats.verdicts import interval_level
from .summary import allowed, num_text, plural

MAX_NOT_RUN = 20  # node ids listed of the gate tests a stopped run never reached (then a count)


def _cell(text: str) -> str:
    """This module's own text (numbers, regions, units) inside a Markdown table cell: one line,
    pipes escaped, control and bidi characters escaped. Text from data goes through
    :func:`~pytest_posbias.safe_text.md_text` or :func:`~pytest_posbias.safe_text.md_code`."""
    return " ".join(inert(str(text)).replace("|", "\\|").split())


def markdown_summary(rows: Sequence[Mapping[str, Any]], *, errored: Sequence[Mapping[str, Any]] = (),
                     models: Sequence[str] = (), mode: str = "", alpha: float | None = None,
                     exitstatus: int | None = None, report_link: str | None = None,
                     decision: Mapping[str, Any] | None = None) -> str:
    """The Markdown text for verdict rows ``{"nodeid", "verdict", "p_bh"}`` (see the module doc).

    ``decision``: the run-level decision's record (``label``, ``exit_code``, ``why``, ``notices``,
    ``underpowered``): it titles the summary, and each row with a ``gate`` part shows its
    adjusted decision in the ``run`` column."""
    n = len(rows)
    # a gate below its measurement floor is not measured, by the run-level decision's part where rows carry it
    measured = [r for r in rows if getattr(r.get("gate"), "status", "") != "not measured"]
    unmeasured = n - len(measured)
    failed = sum(not r["verdict"].passed for r in measured)
    n_inc = sum(r["verdict"].passed and r["verdict"].outcome == "inconclusive" for r in measured)  # decided nothing
    parts = [f"{failed} of {n} gates failed" if failed else "", f"{unmeasured} of {n} gates not measured" if unmeasured
             else "", f"{n_inc} of {n} inconclusive" if n_inc and (failed or unmeasured) else ""]
    title = ("no gate decided" if n == 0 else ", ".join(p for p in parts if p) if failed or unmeasured
             else f"no gate failed, {n_inc} of {n} inconclusive" if n_inc else f"all {n} gates passed")
    if errored:
        title += f", {len(errored)} tests ended without a verdict"
    not_run = list((decision or {}).get("not_run") or [])
    if not_run:
        title += f", {plural(len(not_run), 'selected gate test')} never ran"
    icon = "❌" if failed or errored or n == 0 else "⚠️" if n_inc == n or unmeasured else "✅"
    if decision is not None:
        icon = "✅" if decision.get("exit_code") == 0 else "❌" if decision.get("exit_code") == 1 else "⚠️"
        title = f"{decision.get('label')} (exit {decision.get('exit_code')}): {title}"
    lines = [f"## {icon} pytest-posbias: {_cell(title)}", ""]
    if decision is not None:
        lines += [_cell(str(decision.get("why", ""))) + f" · {_cell(str(decision.get('method', '')))}", ""]
        for notice in decision.get("notices") or []:
            lines += [f"**{_cell(notice)}**", ""]
        if under := list(decision.get("underpowered") or []):
            lines += [f"**UNDERPOWERED:** {len(under)} passing gates could not detect 2× their threshold with 80% "
                      f"power: " + ", ".join(md_code(u.split("::", 1)[-1]) for u in under[:10])
                      + (f" and {len(under) - 10} more" if len(under) > 10 else ""), ""]
    facts = []
    if models:
        facts.append("model " + ", ".join(md_code(m) for m in models))
    if mode:
        facts.append(f"mode {mode}")
    if alpha is not None:
        facts.append(f"α = {num_text(alpha)} (CI {interval_level(alpha)}% two-sided)")
    if exitstatus is not None:
        facts.append(f"exit status {exitstatus}")
    if facts:
        lines += [" · ".join(facts), ""]
    if rows:
        has_run = any(r.get("gate") is not None for r in rows)  # the run-level decision's columns
        lines += ["| result | gate | estimate | CI | allowed | n | p |" + (" run | p adj |" if has_run else ""),
                  "|---|---|---:|---|---|---:|---:|" + ("---|---:|" if has_run else "")]
        for r in sorted(rows, key=lambda r: (r["verdict"].passed, r["nodeid"])):
            v: Verdict = r["verdict"]
            ci = "–" if math.isnan(v.ci_low) else f"[{num_text(v.ci_low, '.3f')}, {num_text(v.ci_high, '.3f')}]"
            g = r.get("gate")
            run = "–" if g is None else {"pass": "pass", "fail": "**fail**"}.get(g.status, g.status)
            p_adj = num_text(g.p_adjusted, '.3g') if g is not None else "–"
            result = ("⚠️ NOT MEASURED" if g is not None and g.status == "not measured" else "❌ FAIL" if not v.passed
                      else "➖ INCONCLUSIVE" if v.outcome == "inconclusive" else "✅ PASS")
            region = _cell(f"{allowed(v.lower, v.upper)} (threshold {num_text(v.threshold)})")
            lines.append(f"| {result} | {md_code(r['nodeid'].split('::', 1)[-1])} | "
                         f"{num_text(v.estimate)} | {ci} | {region} | {v.n} {_cell(v.unit)} | "
                         f"{num_text(v.p_value, '.3g')} |" + (f" {run} | {p_adj} |" if has_run else ""))
        lines.append("")
    if errored:
        lines += ["Ended without a verdict (decided nothing):", ""]
        for e in errored:
            msg = " ".join(str(m) for m in (e.get("message") or []))
            lines.append(f"- {md_code(str(e.get('nodeid', '?')))} ({md_text(str(e.get('when', '')))}): "
                         f"{md_text(redact_text(msg))}")
        lines.append("")
    if not_run:
        stopped = str((decision or {}).get("stopped") or "the run stopped before them")
        lines += [f"Not run ({_cell(stopped)}; they decided nothing):", ""]
        lines += [f"- {md_code(n)}" for n in not_run[:MAX_NOT_RUN]]
        if len(not_run) > MAX_NOT_RUN:
            lines.append(f"- and {len(not_run) - MAX_NOT_RUN} more")
        lines.append("")
    if report_link:
        lines += [f"[HTML report]({quote(report_link, safe='/')})", ""]  # no space, parenthesis or < can end the link
    return "\n".join(lines)


def find_report(*, rootdir: Path, options: RunOptions, run_log: Path | None) -> Path | None:
    """The HTML report this run wrote: ``--posbias-report`` when given, else the newest
    ``<report_dir>/*.html`` (other than latest.html) written after the run log; None if none was."""
    if run_log is None or not run_log.is_file():
        return None
    since = run_log.stat().st_mtime - 1.0
    if options.report:
        p = rootdir / options.report  # an absolute path stays as it is
        return p if p.is_file() and p.stat().st_mtime >= since else None
    d = rootdir / options.report_dir
    if not d.is_dir():
        return None
    found = [p for p in d.glob("*.html") if p.name != "latest.html" and p.stat().st_mtime >= since]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def write_markdown(path: str | Path, rows: Sequence[Mapping[str, Any]], *, rootdir: Path, options: RunOptions,
                   run_log: Path | None, errored: Sequence[Mapping[str, Any]] = (), exitstatus: int | None = None,
                   decision: Mapping[str, Any] | None = None) -> Path:
    """Write :func:`markdown_summary` to ``path`` (relative paths under the current folder)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = find_report(rootdir=rootdir, options=options, run_log=run_log)
    link = None if report is None else os.path.relpath(report.resolve(), out.resolve().parent).replace(os.sep, "/")
    text = markdown_summary(rows, errored=errored, models=list(options.models),
                            mode=options.mode, alpha=options.alpha,
                            exitstatus=exitstatus, report_link=link, decision=decision)
    out.write_text(text, encoding="utf-8")
    return out
