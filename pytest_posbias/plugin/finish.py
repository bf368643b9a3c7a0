"""The end of a run on the controller (or a serial run): the run-level decision, the exit status
(:mod:`pytest_posbias.exitcodes`), the terminal summary, the run log and report, the JSON and Markdown summaries
and junit's global properties."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ..errors import PosbiasError
from ..exitcodes import NOT_MEASURED, label
from ..safe_text import inert, redact_value, strict_json
from .options import options, run_directory
from .state import PluginState, plugin_of, posbias_config
from .terminal import fresh_line, stop_progress


def summary_rows(config: pytest.Config) -> list[dict[str, Any]]:
    """Verdict rows in node id order: ``nodeid``, ``verdict``, ``p_bh`` and, once the run-level
    decision is taken (:func:`run_decision_of`), ``gate`` (its :class:`~pytest_posbias.gates.decision.GateDecision`)."""
    state = plugin_of(config)
    rows = sorted(state.verdicts, key=lambda x: x[0])  # node id order: same serial and with -n
    if not rows:
        return []
    from ..stats import benjamini_hochberg

    # a gate without a valid p-value (NaN, or outside [0, 1]) counts as 1, as in Holm's family: never as
    # evidence (max(0, nan) and max(0, -0.2) are 0)
    adj = benjamini_hochberg([float(v.p_value) if 0.0 <= v.p_value <= 1.0 else 1.0 for _, v in rows])
    dec = state.decision
    # the decision's gates come in this order (run_decision_of): by position, so a node id reported twice
    # (a re-run plugin) keeps each verdict's own part
    gates = list(getattr(dec, "gates", ()))
    if len(gates) != len(rows):
        gates = [dec.gate(nid) if dec is not None else None for nid, _ in rows]
    return [{"nodeid": nid, "verdict": v, "p_bh": float(p), "gate": g}
            for (nid, v), p, g in zip(rows, adj, gates, strict=True)]


def run_decision_of(config: pytest.Config) -> Any:
    """The run-level decision (:func:`pytest_posbias.gates.decision.run_decision`) over the session's verdicts, with the
    simulated-model and quick-size notices."""
    from ..gates.decision import quick_notice, run_decision, simulated_notice

    opts = options(config)
    state = plugin_of(config)
    notices = [simulated_notice([*opts.models, *(s for s in (opts.baseline, opts.parity) if s)]),
               quick_notice(posbias_config(config).probes)]
    return run_decision(sorted(state.verdicts, key=lambda x: x[0]), multiplicity=opts.multiplicity,
                        alpha=float(opts.alpha), skipped=state.skipped, notices=[n for n in notices if n],
                        not_run=([] if config.getoption("--collect-only", False)
                                 else sorted(state.gate_tests - state.ran)),
                        stopped=state.stopped)


def stop_reason(session: pytest.Session, exitstatus: int) -> tuple[str, bool]:
    """How the run stopped before its end, for the tests it never reached, and whether it was
    ``-x``/``--maxfail`` (then a gate failure stopped it, and the decision, not pytest's
    "interrupted", gives the exit status: under ``-n`` xdist ends such a run as interrupted).
    ``("", False)`` for a run that went to its end."""
    dsession = session.config.pluginmanager.get_plugin("dsession")  # the xdist controller's own stop flag
    said = session.shouldfail or session.shouldstop or getattr(dsession, "shouldstop", False)
    m = re.fullmatch(r"stopping after (\d+) failures?", str(said or ""))
    if m:
        maxfail = int(getattr(session.config.option, "maxfail", 0) or 0)
        how = "-x" if maxfail == 1 else f"--maxfail={maxfail}"
        n = int(m.group(1))
        return f"stopped by {how} after {n} failure{'s' if n != 1 else ''}", True
    if said:
        return f"stopped: {said}", False
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted", False
    return "", False


def exit_status(pytest_status: int, state: PluginState) -> int:
    """The run's exit status (:mod:`.exitcodes`): pytest's own unless the run held gate tests and
    pytest ended normally (0, or 1 from gate tests failing on their own verdicts), then the
    run-level decision's. A test that failed without a verdict keeps pytest's 1; a gate test that
    passed without one makes a passing pytest run NOT MEASURED (6). A run stopped by
    ``-x``/``--maxfail`` before some selected gates ran is never 0
    (:func:`pytest_posbias.gates.decision.run_decision`)."""
    if state.stopped_by_maxfail and pytest_status == pytest.ExitCode.INTERRUPTED:
        pytest_status = int(pytest.ExitCode.TESTS_FAILED)  # xdist's -x: as the serial run ends it
    if state.errored and pytest_status == 0:  # a gate test passed without a verdict: it decided nothing
        return NOT_MEASURED
    if state.decision is None or pytest_status not in (0, 1) or state.errored:
        return pytest_status
    if not state.verdicts and not state.skipped:
        return pytest_status  # no gate test in this run (the plugin is a guest)
    return int(state.decision.exit_code)


def terminal_summary(tr: Any, exitstatus: int, config: pytest.Config) -> None:
    """The posbias sections of the terminal summary: data problems, verdicts, the run decision."""
    if getattr(config, "workerinput", None) is not None:
        return
    rows = summary_rows(config)
    state = plugin_of(config)
    stop_progress(state)
    if state.left_out:
        tr.write_line(f"pytest-posbias: {state.left_out} robustness gate tests left out: no model named (give "
                      "--posbias-model MODEL, or --model where the suites' conftest registers it, to run them)",
                      yellow=True)
    _problem_summary(tr, config, state.problems)
    width = int(getattr(tr, "_screen_width", 0) or 100)
    if rows:
        from ..report.summary import calls_line, verdict_lines

        tr.section("posbias verdicts")
        _write_lines(tr, verdict_lines(rows, width=width), bold=False)
        workers = 1
        with contextlib.suppress(TypeError, ValueError):  # not a number: one worker
            if getattr(config.option, "dist", "no") != "no":
                workers = int(getattr(config.option, "numprocesses", 1) or 1)
        tr.write_line(calls_line(state.calls, verdict_calls=[dict(r["verdict"].extra.get("calls") or {}) for r in rows],
                                 workers=max(1, workers)))
        tr.write_line("p = the gate's own p-value; p_adj = its run-level p (p_run in --posbias-json: a sequential "
                      "gate's stage-wise p) Holm-adjusted over the detect gates; a certify-type gate's own p")
    collected_only = bool(config.getoption("--collect-only", False))
    # selected gate tests that never ran (a stop) or ended without a verdict (an error) still get the decision
    gates_selected = bool(state.gate_tests) and not collected_only
    if state.decision is not None and (rows or state.skipped or gates_selected):
        from ..report.summary import decision_lines

        if not rows:
            tr.section("posbias verdicts")
        _write_lines(tr, decision_lines(state.decision, exit_code=exit_status(int(exitstatus), state), width=width,
                                        failed_tests=[e["nodeid"] for e in state.errored]), bold=True)
    if not collected_only:  # collected only: no test was meant to run
        _not_run_line(tr, state)


def _write_lines(tr: Any, lines: Any, *, bold: bool) -> None:
    """Summary lines: a heading (ok None) in bold, else red or green (bold too with ``bold``)."""
    for text, ok in lines:
        if ok is None:
            tr.write_line(text, bold=True)
        else:
            tr.write_line(text, red=not ok, green=ok, bold=bold)


def _not_run_line(tr: Any, state: PluginState) -> None:
    """The selected gate tests that never reported (the run stopped before them: ``-x``,
    ``--maxfail``, an interrupt): they decided nothing, and the summary says how many."""
    missing = state.gate_tests - state.ran
    if missing:
        from ..report.summary import plural

        ran = len(state.gate_tests) - len(missing)
        tr.write_line(f"{len(missing)} of {plural(len(state.gate_tests), 'selected gate test')} did not run "
                      f"({state.stopped or 'the run stopped before them'}): they decided nothing; the summary above "
                      f"covers the {ran} that ran", yellow=True)


def _problem_summary(tr: Any, config: pytest.Config, problems: list[Any]) -> None:
    """The run's data problems on the terminal: per kind, the count and an example (every one with -v)."""
    if not problems:
        return
    from ..data.problems import summarize_problems

    tr.section("posbias data problems")
    tr.write_line(f"{len(problems)} data problems; an unusable video's units, and a rejected multiple-choice item "
                  "drawn into a sample, count as lost; other bad lines are left out:")
    for g in summarize_problems(problems):
        tr.write_line(inert(f"  {g['label']} [{g['kind']}]: {g['count']}, e.g. {g['example']}", newlines=False),
                      yellow=True)
    if config.get_verbosity() > 0:
        for p in problems:
            tr.write_line(inert(f"    {p}", newlines=False))


def _run_problems(run_log: Path | None) -> list[Any]:
    """The data problems a finished run log records (none when there is no log)."""
    if run_log is None:
        return []
    from ..data.problems import problems_in_records

    records = []
    try:  # only observation lines are parsed (the log is written with sorted keys); the rest is requests
        with run_log.open(encoding="utf-8") as fh:
            for line in fh:
                if '"kind": "observation"' in line:
                    with contextlib.suppress(ValueError):
                        records.append(json.loads(line))
    except OSError:
        return []
    return problems_in_records(records)


def posbias_used(config: pytest.Config, state: PluginState) -> bool:
    """Whether this run has anything for the end of the run: a gate's verdict, a selected gate
    test (one that never ran or ended without a verdict too), a run directory (a suite test set a
    run up), or a summary file asked for (``--posbias-json``,
    ``--posbias-markdown``: written also when no gate decided). A run of other tests has none, and
    its end imports nothing of the package's core."""
    if (state.verdicts or state.skipped or config.getoption("--posbias-json", None)
            or config.getoption("--posbias-markdown", None)):
        return True
    if state.gate_tests and not config.getoption("--collect-only", False):
        return True  # selected gate tests that a stop never reached or that errored: the decision says so
    try:
        return run_directory(config).is_dir()
    except (KeyError, OSError):
        return True


def session_finish(session: pytest.Session, exitstatus: int) -> None:
    """Merge the run log and write the report. First among the implementations: under ``-n N`` the
    workers have closed their logs when they report finished, and xdist's own sessionfinish then
    waits for each worker process to exit, which can overlap with this."""
    config = session.config
    if getattr(config, "workerinput", None) is not None:
        return
    state = plugin_of(config)
    stop_progress(state)  # no -n progress after this point (also when what follows raises)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if state.usage_error:  # -n: the workers' selection showed a usage error, and they ran nothing
        if tr is not None:
            tr.write_line(f"ERROR: {state.usage_error}", red=True)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return
    state.stopped, state.stopped_by_maxfail = stop_reason(session, int(exitstatus))
    if not posbias_used(config, state):
        return  # a run without the suites or gates: nothing to merge, report or write
    try:
        state.decision = run_decision_of(config)
    except PosbiasError as exc:  # a bad setting reaching here (e.g. multiplicity): pytest's failing status stands,
        state.decision = None    # and a passing one is a usage error: gates without a decision never ship
        if tr is not None:
            tr.write_line(f"[posbias] no run-level decision: {exc}", red=True)
    status = exit_status(int(exitstatus), state)
    if state.decision is None and status == 0:
        status = int(pytest.ExitCode.USAGE_ERROR)
    session.exitstatus = status  # pytest returns it after every sessionfinish implementation
    rows = summary_rows(config)
    record = decision_record(state.decision, status, [e["nodeid"] for e in state.errored])
    _junit_decision(config, state.decision, record)
    fresh_line(tr)
    written: list[Path | None] = []  # the merged run log, once the summaries are written

    def summaries(run_log: Path | None) -> None:
        """The JSON and Markdown summaries, written once the run log is merged and before the report
        renders, so that a run interrupted while the report renders still has them."""
        written.append(run_log)
        _write_summaries(config, state, rows, record, status=status, pytest_status=int(exitstatus), run_log=run_log)

    try:
        from ..run.finish import finish_run

        finish_run(config_rootdir=Path(str(config.rootpath)), options=options(config), verdict_rows=rows,
                   calls=state.calls, run_id=state.run_id, terminal=tr,
                   exitstatus=int(exitstatus) if state.decision is not None else status,  # none: the run's own
                   errored=state.errored, run_decision=record, on_merged=summaries)
    except PosbiasError as exc:  # the report must never turn a finished run into a crash
        if tr is not None:
            tr.write_line(f"[posbias] report not written: {exc}", red=True)
    except KeyboardInterrupt:  # Ctrl-C while the log merges or the report renders: an interrupted run
        if tr is not None:
            tr.write_line("[posbias] interrupted while writing the run's files", red=True)
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    if not written:  # no run log (no suite test set the run up), or it failed before the merge ended
        summaries(None)
    elif written[0] is not None and session.exitstatus != pytest.ExitCode.INTERRUPTED:
        _write_markdown(config, state, rows, record, status=status, run_log=written[0])  # now it links the report


def _write_summaries(config: pytest.Config, state: PluginState, rows: list[dict[str, Any]],
                     record: dict[str, Any] | None, *, status: int, pytest_status: int, run_log: Path | None) -> None:
    """``--posbias-json`` and ``--posbias-markdown``, and the data problems the run log records
    (``record``: :func:`decision_record`)."""
    state.problems = _run_problems(run_log)
    path = config.getoption("--posbias-json", None)
    if path:  # written even when no gate decided: a CI job reading it must see that nothing was measured
        from ..data.problems import summarize_problems

        out = {
            "schema_version": 1,
            "exitstatus": status,
            "pytest_exitstatus": pytest_status,
            "decision": record,
            "calls": state.calls,
            "verdicts": [{"nodeid": r["nodeid"], "p_bh": r["p_bh"], **r["verdict"].to_dict(),
                          **(r["gate"].to_dict() if r.get("gate") else {})} for r in rows],
            "data_problems": {"count": len(state.problems), "by_kind": summarize_problems(state.problems),
                              "problems": [p.to_dict() for p in state.problems]},
        }
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(strict_json(redact_value(out), indent=2, sort_keys=True))
    _write_markdown(config, state, rows, record, status=status, run_log=run_log)


def _write_markdown(config: pytest.Config, state: PluginState, rows: list[dict[str, Any]],
                    record: dict[str, Any] | None, *, status: int, run_log: Path | None) -> None:
    """``--posbias-markdown``, also when no gate decided (the job summary says so); written again
    once the report is, which it links."""
    md = config.getoption("--posbias-markdown", None)
    if md:
        from ..report.markdown import write_markdown

        write_markdown(md, rows, rootdir=Path(str(config.rootpath)), options=options(config), run_log=run_log,
                       errored=state.errored, exitstatus=status, decision=record)


def decision_record(decision: Any, status: int, failed_tests: Sequence[str] = ()) -> dict[str, Any] | None:
    """The run-level decision as JSON (None when none was taken), with the run's exit status and its
    reason (:func:`~pytest_posbias.report.summary.run_why`: the tests that failed without a verdict
    first where they set the status)."""
    if decision is None:
        return None
    from ..report.summary import run_why

    return {**decision.to_dict(), "exit_code": status, "label": label(status),
            "why": run_why(decision, exit_code=status, failed_tests=failed_tests)}


def _junit_decision(config: pytest.Config, decision: Any, rec: dict[str, Any] | None) -> None:
    """``--junitxml``: the run-level decision and every gate's adjusted decision as global
    properties (``posbias.run_decision``, ``posbias.exit_code``, ``posbias.adjusted``: JSON by node
    id; ``rec``: :func:`decision_record`). A test's own properties are written when it finishes,
    before the run decides."""
    if decision is None or rec is None:
        return
    with contextlib.suppress(ImportError):
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
        if xml is None:
            return
        xml.add_global_property("posbias.run_decision", f"{rec.get('label')}: {rec.get('why')}")
        xml.add_global_property("posbias.exit_code", str(rec["exit_code"]))
        xml.add_global_property("posbias.multiplicity", decision.method)
        xml.add_global_property("posbias.adjusted", strict_json({g.nodeid: {"p_adj": g.to_dict()["p_adj"],
                                                                            "adjusted_passed": g.adjusted_passed,
                                                                            "run_status": g.status}
                                                                 for g in decision.gates}, sort_keys=True))
