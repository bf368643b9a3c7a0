"""The terminal summary of a run as plain lines (the plugin prints them): the verdicts grouped by
suite, the run-level decision, each gate's cost, the session's call accounting and the ``-n``
controller's progress line from the workers' progress files.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..exitcodes import NOT_MEASURED
from ..gate_registry import SUITE_SPECS, suite_of_test
from ..safe_text import inert


def suite_order(suite: str) -> tuple[int, str]:
    """Sort key: the ready-made suites in the registry's order (positional first), then by name."""
    names = [s.filename for s in SUITE_SPECS]
    name = suite.rsplit("/", 1)[-1]
    return (names.index(name) if name in names else len(names), suite)


def suite_of(nodeid: str) -> str:
    """The suite of a test: the file part of its node id (``suites/test_positional.py``)."""
    return nodeid.split("::", 1)[0]


def by_suite(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """Rows with a ``nodeid`` grouped by suite, in node id order, the suites in :func:`suite_order`."""
    groups = itertools.groupby(sorted(rows, key=lambda r: r["nodeid"]), key=lambda r: suite_of(r["nodeid"]))
    return sorted(((suite, list(mine)) for suite, mine in groups), key=lambda kv: suite_order(kv[0]))


def suite_title(suite: str, nodeids: Sequence[str] = ()) -> str:
    """``suites/test_positional.py`` -> ``suites/test_positional.py — positional bias (...)``: the
    title of the suite the file is named for, else of the suite whose test functions ``nodeids``
    (the file's tests) are (a renamed copy of a suite); the file alone for any other."""
    name = suite.rsplit("/", 1)[-1]
    titles = {s.filename: s.title for s in SUITE_SPECS}
    if name in titles:
        return f"{suite} — {titles[name]}"
    titles_of_tests = {getattr(suite_of_test(n.partition("::")[2].partition("[")[0]), "title", None) for n in nodeids}
    title = titles_of_tests.pop() if len(titles_of_tests) == 1 else None
    return f"{suite} — {title}" if title else suite


def plural(n: int, noun: str) -> str:
    """``1 gate``, ``2 gates``, ``0 gates``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


BAR_WIDTH = 24


def progress_text(done: int, total: int, hits: int, elapsed: float, *, bar: bool = False) -> str:
    """One progress line of a probe's model calls: ``model calls 120/216 (56%), 4.0/s, ETA 24 s;
    30 more answered from the cache``. ``done``/``total`` count the calls to make; ``hits`` the
    requests the cache answered instead (not among them); the rate is calls made per second so far.
    ``bar``: led by a bar of ``BAR_WIDTH`` cells, ``[#############-----------]`` (a terminal's line)."""
    if bar:
        filled = BAR_WIDTH * done // total if total else BAR_WIDTH
        return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] " + progress_text(done, total, hits, elapsed)
    pct = 100 * done // total if total else 100
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (total - done) / rate if rate > 0 else float("nan")
    eta_text = "–" if math.isnan(eta) else (f"{eta:.0f} s" if eta < 120 else f"{eta / 60:.0f} min")
    text = f"model calls {done}/{total} ({pct}%), {rate:.3g}/s, ETA {eta_text}"
    return text + (f"; {hits} more answered from the cache" if hits else "")


def num_text(v: float | None, fmt: str = ".4g") -> str:
    """``v`` formatted, – for a missing value, ∞ for an infinite one."""
    if v is None or math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return format(v, fmt)


def allowed(lower: float, upper: float) -> str:
    """The compliant region of a gate as text: ``≤ u``, ``≥ l`` or ``[l, u]``."""
    if lower is None or not math.isfinite(lower):
        return f"≤ {num_text(upper)}"
    if upper is None or not math.isfinite(upper):
        return f"≥ {num_text(lower)}"
    return f"[{num_text(lower)}, {num_text(upper)}]"


def verdict_lines(rows: Sequence[Mapping[str, Any]], *, width: int = 100) -> list[tuple[str, bool | None]]:
    """Lines (text, passed or None for a heading) for the verdict rows ``{"nodeid", "verdict", "p_bh"}``.

    Grouped by suite in node id order, failures first within a suite. The gate's test name (the
    node id after the file) is wrapped at ``width`` with a hanging indent and never truncated, so
    two gates are always told apart; its numbers follow on the next line.
    """
    width = max(40, int(width))
    out: list[tuple[str, bool | None]] = []
    for suite, mine in by_suite(rows):
        unmeasured = [getattr(r.get("gate"), "status", "") == "not measured" for r in mine]
        n_nm = sum(unmeasured)
        n_fail = sum(not r["verdict"].passed and not nm for r, nm in zip(mine, unmeasured, strict=True))
        n_inc = sum(r["verdict"].passed and r["verdict"].outcome == "inconclusive" for r in mine)
        out.append((f"{suite_title(suite, [r['nodeid'] for r in mine])}: {plural(len(mine), 'gate')}, {n_fail} failed"
                    + (f", {n_nm} not measured" if n_nm else "") + (f", {n_inc} inconclusive" if n_inc else ""), None))
        for r in sorted(mine, key=lambda r: (r["verdict"].passed, r["nodeid"])):
            v = r["verdict"]
            status = ("NOT MEASURED" if getattr(r.get("gate"), "status", "") == "not measured" else "FAIL"
                      if not v.passed else v.outcome.upper())  # a passed verdict: PASS or INCONCLUSIVE
            name = inert(r["nodeid"].split("::", 1)[-1], newlines=False)
            wrapped = textwrap.wrap(name, width=width - 7, break_long_words=True, break_on_hyphens=False) or [name]
            out.append((f"  {status} {wrapped[0]}", v.passed and status == "PASS"))
            out += [(f"       {w}", v.passed) for w in wrapped[1:]]
            ci = "–" if math.isnan(v.ci_low) else f"[{num_text(v.ci_low, '.3f')}, {num_text(v.ci_high, '.3f')}]"
            out.append((f"       estimate {num_text(v.estimate)}  CI {ci}  allowed {allowed(v.lower, v.upper)}  "
                        f"n {v.n} {v.unit}  p {num_text(v.p_value, '.3g')}", v.passed))
            g = r.get("gate")
            if g is not None:  # the run-level decision's part (pytest_posbias.gates.decision)
                line = f"       run: {g.status.upper()}"
                if g.family in ("holm", "iut", "none"):
                    line += f" (p_adj {num_text(g.p_adjusted, '.3g')}, {g.family})"
                elif g.why_not_measured:
                    line += f" ({g.why_not_measured})"
                pn = g.power
                if pn is not None and not math.isnan(pn.target) and math.isinf(pn.detectable):
                    line += f"; {pn.why_none or 'no interval, so no power to detect a violation'}"
                elif pn is not None and not math.isnan(pn.target):
                    line += f"; detects {num_text(pn.detectable, '.3g')} with 80% power"
                    if pn.underpowered and g.status == "pass":
                        line += f", UNDERPOWERED for {num_text(pn.target, '.3g')} (2× threshold)"
                        if pn.n_needed:
                            line += f": needs n ≈ {pn.n_needed}"
                out.append((line, g.adjusted_passed))
            extra = getattr(v, "extra", None) or {}
            if extra.get("calls"):
                out.append((f"       cost: {cost_text(extra['calls'])}", v.passed))
            if extra.get("summary_line"):  # e.g. the search's replay of stored counterexamples
                note = inert(str(extra["summary_line"]), newlines=False)
                out += [(f"       {w}", v.passed) for w in textwrap.wrap(note, width=width - 7) or [note]]
    return out


def run_why(decision: Any, *, exit_code: int, failed_tests: Sequence[str] = ()) -> str:
    """The reason the run ends with ``exit_code``: the decision's own (:attr:`RunDecision.why`), or,
    where tests that failed or errored without a verdict set a status other than the decision's,
    that first, then the gates' reason. The terminal, JSON, Markdown, junit and report all give it."""
    failed = list(dict.fromkeys(failed_tests))
    if failed and exit_code != int(decision.exit_code):
        how = "not measured" if exit_code == NOT_MEASURED else "pytest's status stands"
        return (f"{plural(len(failed), 'test')} failed or errored without a verdict ({how}); "
                f"the gates alone: {decision.why}")
    return str(decision.why)


def decision_lines(decision: Any, *, exit_code: int, width: int = 100,
                   failed_tests: Sequence[str] = ()) -> list[tuple[str, bool | None]]:
    """Lines (text, passed or None) for the run-level decision (:class:`~.gates.decision.RunDecision`):
    the decision and exit status with its reason, the method, the notices (simulated model, quick
    sizes), the gates a SHIP rests on that could not detect 2× their threshold, and skips.
    ``failed_tests``: node ids of the tests that failed or errored without a verdict, listed after
    the first line, which says so where they, not the gates, set the exit status."""
    from ..exitcodes import label as status_label

    why = run_why(decision, exit_code=exit_code, failed_tests=failed_tests)
    failed = list(dict.fromkeys(failed_tests))
    out: list[tuple[str, bool | None]] = [(f"RUN DECISION: {status_label(exit_code)} (exit {exit_code}): {why}",
                                           exit_code == 0)]
    if failed:
        if exit_code == int(decision.exit_code):
            out.append((f"  also {plural(len(failed), 'test')} failed or errored without a verdict:", False))
        out += _listed(failed, width, "pytest's summary lists them")
    scope = "for the whole run" if decision.method.startswith("Holm") else "per gate, not for the whole run"
    out.append((f"  multiplicity: {decision.method}; α = {decision.alpha:g} {scope}", None))
    out += [(f"  {n}", False) for n in decision.notices]
    if decision.underpowered:
        under = [g for g in decision.gates if g.nodeid in decision.underpowered]
        out.append((f"  UNDERPOWERED: {len(under)} passing gates could not detect 2× their threshold with 80% power "
                    f"(a pass there is weak evidence):", False))
        out += _listed([g.nodeid.split("::", 1)[-1] + (f" (needs n ≈ {g.power.n_needed})" if g.power is not None
                                                      and g.power.n_needed else "") for g in under],
                       width, "--posbias-json lists every gate's power")
    if inc := list(getattr(decision, "inconclusive", ()) or ()):
        out.append((f"  INCONCLUSIVE: {len(inc)} gates could not decide (too few units, zero spread or no interval); "
                    "they do not fail the run and show nothing:", False))
        out += _listed([nid.split("::", 1)[-1] for nid in inc], width, "--posbias-json lists them")
    if decision.skipped:
        parts = ", ".join(f"{n} {k}" for k, n in sorted(decision.skipped.items()))
        out.append((f"  skipped gate tests: {parts} (an opt-in gate not opted into does not fail the run; "
                    f"a gate skipped for missing data, or a run in which no gate decided, is not measured: exit 6 "
                    "unless a gate fails)", None))
    return out


def _listed(names: Sequence[str], width: int, more: str) -> list[tuple[str, bool | None]]:
    """The first 20 gate names, wrapped and indented, then how many more (``more``: where they are)."""
    out: list[tuple[str, bool | None]] = [(f"    {w}", False) for n in names[:20]
                                          for w in textwrap.wrap(n, width=max(40, width - 6))]
    if len(names) > 20:
        out.append((f"    ... and {len(names) - 20} more ({more})", False))
    return out


def cost_text(calls: Mapping[str, Any]) -> str:
    """What one gate cost, in words: ``12 model calls made (1 failed), 30 answered from the cache of
    earlier runs, 40 reused from a probe another gate ran; 8.2 s waiting on the model``, from the
    gate's :class:`~pytest_posbias.engine.CallStats` counters (parts that are zero are left out)."""
    made, failed = int(calls.get("made", 0) or 0), int(calls.get("failed", 0) or 0)
    parts = [f"{plural(made, 'model call')} made" + (f" ({failed} failed)" if failed else "")]
    parts += _counted(calls, (("cache_hits", "answered from the cache of earlier runs"),
                              ("rereads", "repeats answered from this run's own calls"),
                              ("shared", "reused from a probe another gate ran")))
    wall = float(calls.get("wall_seconds", 0) or 0)
    return ", ".join(parts) + (f"; {wall:.1f} s waiting on the model" if wall >= 0.05 else "")


def _counted(calls: Mapping[str, Any], words: Sequence[tuple[str, str]]) -> list[str]:
    """``N words`` for every call counter of ``words`` (key, words) that is not zero, in that order."""
    return [f"{n} {text}" for key, text in words if (n := int(calls.get(key, 0) or 0))]


def _count(n: float) -> str:
    n = int(n)
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}k"
    return str(n)


def calls_line(calls: Mapping[str, Any], *, verdict_calls: Sequence[Mapping[str, Any]] = (), workers: int = 1) -> str:
    """One line: calls made, served from the cache, failed (+ retries), wall time, tokens, reuse.

    The numbers are the session totals of :class:`~pytest_posbias.engine.CallStats` summed over
    the gates (the same numbers the report and the JSON summary show). The wall time is the time
    spent waiting on the backends (summed over ``workers`` processes when there are several),
    not the summed per-call client time. Reuse is reported only when at least one gate reused a
    probe result already computed in the run and more than one gate decided."""
    made, hits, failed = int(calls.get("made", 0)), int(calls.get("cache_hits", 0)), int(calls.get("failed", 0))
    parts = [f"model calls: {made} made, {hits} served from the cache, {failed} failed"]
    if calls.get("retries"):
        parts[-1] += f" ({int(calls['retries'])} retries of transient errors)"
    parts += _counted(calls, (("unstored", "answers not stored in the cache"),
                              ("unusable", "unusable answers (lost units, never cached as answers)"),
                              ("rereads", "repeated requests answered from this run's own calls")))
    wall = float(calls.get("wall_seconds", 0) or 0)
    parts.append(f"wall time {wall:.1f} s" + (f" (summed over {workers} workers)" if workers > 1 else ""))
    prompt, visual, output = (int(calls.get(k, 0) or 0) for k in ("prompt_tokens", "visual_tokens", "output_tokens"))
    tokens = []  # a backend that does not report a count (e.g. prompt tokens of sim:) leaves it out
    if prompt:
        tokens.append(f"{_count(prompt)} in" + (f" ({_count(visual)} visual)" if visual else ""))
    if output:
        tokens.append(f"{_count(output)} out")
    if tokens:
        parts.append("tokens " + ", ".join(tokens))
    shared = [n for c in verdict_calls if (n := int(c.get("shared", 0) or 0)) > 0]  # requests served from memory
    n_gates, saved = len(shared), sum(shared)
    if n_gates and len(verdict_calls) > 1:
        parts.append(f"{n_gates} gates reused probe results already computed in this run, saving {saved} requests")
    return "; ".join(parts)


# --------------------------------------------------------------------------- -n progress


def progress_file(run_dir: Path, worker: str) -> Path:
    """The progress file of ``worker`` in the run folder (:func:`worker_progress_line` reads it)."""
    return run_dir / f"progress-{worker}.txt"


def write_progress(path: Path, message: str) -> None:
    """Replace the worker's progress file atomically (a reader never sees half a line). Best effort:
    it never raises, a character UTF-8 cannot encode (a lone surrogate from a file name) is written
    replaced, and a temporary file it could not move into place is removed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(message, encoding="utf-8", errors="replace")
        tmp.replace(path)
    except OSError:  # progress is best-effort: a full disk never fails a run
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def worker_progress_line(run_dir: Path, *, tests_done: int, tests_planned: int) -> str:
    """``12/40 tests · gw0: model calls 30/120 (25%), 2.5/s, ETA 36 s · gw1: ...`` from the
    workers' progress files (missing, unreadable or damaged files are left out)."""
    parts = [f"{tests_done}/{tests_planned} tests" if tests_planned else f"{tests_done} tests done"]
    for f in sorted(run_dir.glob("progress-*.txt")):
        try:
            msg = f.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):  # a damaged file is left out of the line
            continue
        if msg:
            parts.append(f"{f.stem.removeprefix('progress-')}: {msg}")
    return " · ".join(parts)


__all__ = ["allowed", "by_suite", "calls_line", "cost_text", "decision_lines", "num_text", "plural", "progress_file",
           "progress_text", "run_why", "suite_of", "suite_order", "suite_title", "verdict_lines",
           "worker_progress_line", "write_progress"]
