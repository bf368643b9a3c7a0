"""The end of a run: :func:`finish_run`, on the controller at the end of the session (the report
renders from the merged log alone)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import SCHEMA_VERSION
from ..engine import gc_paused
from ..run_options import RunOptions
from ..safe_text import redact_value, strict_json
from .merge import merge_run_log_lines


@gc_paused()  # the whole end of the run (see the docstring)
def finish_run(
    *,
    config_rootdir: Path,
    options: RunOptions,
    verdict_rows: Sequence[Mapping[str, Any]],
    calls: Mapping[str, Any],
    run_id: str | None,
    terminal: Any = None,
    exitstatus: int | None = None,
    errored: Sequence[Mapping[str, Any]] = (),
    run_decision: Mapping[str, Any] | None = None,
    on_merged: Callable[[Path], None] | None = None,
) -> Path | None:
    """Merge the workers' logs into ``run.jsonl`` (+ verdicts, with their Benjamini–Hochberg ``p_bh``),
    remove the workers' logs (the merged log is the run's one copy), remove the run folders beyond
    ``options.keep_runs`` (:func:`.run.retention.prune_runs`; never this run's) and render the report.

    Returns the run log path, or None when no run context was created in this run.
    ``run_decision``: the run-level decision (:mod:`.gates.decision`), kept in the header; each verdict
    record carries its gate's part of it (``row["gate"]``). ``on_merged`` is called with the run log's
    path once it is written, before the report renders (the plugin writes its summaries there). A
    KeyboardInterrupt while the report renders says how to render it later, and propagates.

    The cyclic garbage collector is off until it returns: the report's figures would otherwise set
    off collections that walk the merged log's many acyclic records and can free none of them.
    """
    cache_dir = Path(config_rootdir) / options.cache  # an absolute cache path replaces the rootdir
    if run_id is None:
        return None
    run_dir = cache_dir / "runs" / run_id
    say = terminal.write_line if terminal is not None else lambda *_a, **_k: None
    if not run_dir.is_dir() or not any(run_dir.glob("log-*.jsonl")):
        for empty in (run_dir, run_dir.parent, cache_dir):  # no suite test set the run up: leave no
            with contextlib.suppress(OSError):               # empty folder behind
                empty.rmdir()
        if run_decision is None or run_decision.get("n_gates") or not run_decision.get("skipped"):
            return None
        # gate tests were selected and every one skipped: no decision, and the report says so
        header: dict[str, Any] = {"run_id": run_id, "models": list(options.models), "mode": options.mode,
                                  "alpha": options.alpha, "seed": options.seed, "config": {},
                                  "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
        pairs: list[tuple[dict[str, Any], str | None]] = []
    else:
        header, pairs = merge_run_log_lines(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    header["finished"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    header["calls"] = dict(calls)
    if exitstatus is not None:
        header["exitstatus"] = int(exitstatus)  # the report says when a run did not finish (errors, usage, interrupt)
    header["errored_tests"] = [redact_value(dict(e)) for e in errored]
    if run_decision is not None:
        header["run_decision"] = dict(run_decision)
    path = run_dir / "run.jsonl"
    tmp = path.with_name(f"run.jsonl.{os.getpid()}.tmp")  # unique per process, then an atomic rename
    head_line = strict_json({**header, "kind": "header", "schema_version": SCHEMA_VERSION}, sort_keys=True)
    verdict_lines = [strict_json({"kind": "verdict", "nodeid": row["nodeid"], "p_bh": row["p_bh"],
                                 **row["verdict"].to_dict(), **(row["gate"].to_dict() if row.get("gate") else {})},
                                sort_keys=True) for row in verdict_rows]
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(head_line + "\n")
        for r, line in pairs:
            fh.write((line if line is not None else strict_json(r, sort_keys=True)) + "\n")
        fh.writelines(line + "\n" for line in verdict_lines)
    tmp.replace(path)
    # one copy of the run's log: the workers' logs are in run.jsonl now (an interrupted run that
    # never got here keeps them, and `posbias report` / the history read them there)
    for worker_log in run_dir.glob("log-*.jsonl"):
        with contextlib.suppress(OSError):
            worker_log.unlink()
    # The report reads what was just written; the records are already parsed JSON, so they are
    # handed over instead of parsed a second time (header and verdicts go through their lines).
    loaded = (json.loads(head_line), [r for r, _ in pairs] + [json.loads(line) for line in verdict_lines])
    del pairs
    say(f"[posbias] run log: {path}")
    if on_merged is not None:
        on_merged(path)
    if options.keep_runs:  # [tool.posbias] keep_runs: the older run folders go (never this run's)
        from .retention import prune_runs

        try:
            pruned = prune_runs(cache_dir, keep_runs=options.keep_runs, keep=[run_id])
        except OSError as exc:  # the cache folder refused: the run's report still renders
            say(f"[posbias] keep_runs = {options.keep_runs}: nothing pruned ({type(exc).__name__}: {exc})", red=True)
        else:
            if pruned.removed or pruned.not_removed:
                say(f"[posbias] keep_runs = {options.keep_runs}: {pruned.line()}")
    try:
        from ..report.render import write_reports
    except ImportError:
        return path
    try:
        written = write_reports([path], rootdir=config_rootdir, explicit=options.report,
                                report_dir=options.report_dir, loaded={path: loaded})
    except KeyboardInterrupt:
        say(f"[posbias] report not written (interrupted); render it with: posbias report {path} -o report.html",
            red=True)
        raise
    except Exception as exc:
        say(f"[posbias] report not written ({type(exc).__name__}: {exc}); "
            f"re-render with: posbias report {path} -o report.html", red=True)
        return path
    for w in written:
        say(f"[posbias] report: {w}")
    return path


__all__ = ["finish_run"]
