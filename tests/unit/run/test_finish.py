"""The end of a run (``run.finish.finish_run``): the workers' logs merged into one ``run.jsonl``
(header first, then the records, then the verdicts with their adjusted p-values), the workers'
logs removed, the callback before the report, no folder left behind by a run that set nothing up,
a run whose gate tests all skipped still logged, credentials redacted from errored tests, and a
report that fails or is interrupted saying how to render it later. The report renderer is replaced
by a recorder (rendering is the report package's subject)."""

from __future__ import annotations

import json

import pytest

from pytest_posbias import SCHEMA_VERSION
from pytest_posbias.engine import RunLog
from pytest_posbias.report import render
from pytest_posbias.run.finish import finish_run
from pytest_posbias.run_options import RunOptions
from pytest_posbias.stats import rate_verdict

RUN = "20260101T000000Z-abcdef"


class Terminal:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write_line(self, line: str, **_kw) -> None:
        self.lines.append(line)


@pytest.fixture
def reports(monkeypatch):
    """The report calls finish_run makes: (paths, loaded) per call."""
    calls: list[tuple[list, dict]] = []

    def write_reports(paths, *, rootdir, explicit=None, report_dir="reports", loaded=None):
        calls.append((list(paths), dict(loaded or {})))
        return [rootdir / "report.html"]

    monkeypatch.setattr(render, "write_reports", write_reports)
    return calls


def _worker_logs(tmp_path, workers=("gw0", "gw1")):
    run_dir = tmp_path / ".posbias" / "runs" / RUN
    for w in workers:
        log = RunLog(run_dir / f"log-{w}.jsonl", {"run_id": RUN, "worker": w, "models": ["sim:unbiased"]})
        log.write({"kind": "observation", "probe": "phase", "worker": w, "type": "item", "item": f"q-{w}"})
        log.close()
    return run_dir


def _finish(tmp_path, **kw):
    args = {"config_rootdir": tmp_path, "options": RunOptions(models=("sim:unbiased",)), "verdict_rows": [],
            "calls": {"made": 3}, "run_id": RUN, **kw}
    return finish_run(**args)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_without_a_run_id_nothing_is_written(tmp_path, reports):
    """No run context was created: no log, no report."""
    assert _finish(tmp_path, run_id=None) is None and reports == []
    assert not (tmp_path / ".posbias").exists()


def test_a_run_that_set_nothing_up_leaves_no_empty_folder(tmp_path, reports):
    """No worker log: None, and the empty run, runs and cache folders are removed."""
    (tmp_path / ".posbias" / "runs" / RUN).mkdir(parents=True)
    assert _finish(tmp_path) is None and reports == []
    assert not (tmp_path / ".posbias").exists()


def test_worker_logs_merge_into_one_log_header_records_verdicts(tmp_path, reports):
    """One header (kind, schema version, calls, exit status, decision), both workers' records, then
    one verdict line per row carrying its BH-adjusted p; the workers' logs are gone; the callback
    sees the merged log before the report renders from the records handed over."""
    run_dir = _worker_logs(tmp_path)
    v = rate_verdict(1, 40, name="order flip rate", threshold=0.15, mode="detect", alpha=0.05, unit="items")
    seen: list[tuple[str, int]] = []
    path = _finish(tmp_path, verdict_rows=[{"nodeid": "t.py::test_order", "p_bh": 0.02, "verdict": v}],
                   exitstatus=1, run_decision={"n_gates": 1, "passed": False},
                   on_merged=lambda p: seen.append((p.name, len(reports))))
    assert path == run_dir / "run.jsonl" and seen == [("run.jsonl", 0)]
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.jsonl"]
    lines = _lines(path)
    head = lines[0]
    assert head["kind"] == "header" and head["schema_version"] == SCHEMA_VERSION and head["run_id"] == RUN
    assert head["calls"] == {"made": 3} and head["exitstatus"] == 1 and head["run_decision"]["n_gates"] == 1
    assert sorted(r["item"] for r in lines if r.get("kind") == "observation") == ["q-gw0", "q-gw1"]
    assert lines[-1]["kind"] == "verdict" and lines[-1]["nodeid"] == "t.py::test_order"
    assert lines[-1]["p_bh"] == 0.02 and lines[-1]["passed"] == v.passed
    assert [k for k, _ in enumerate(lines) if lines[k]["kind"] == "header"] == [0]
    (paths, loaded), = reports
    assert paths == [path] and loaded[path][0]["run_id"] == RUN and len(loaded[path][1]) == len(lines) - 1


def test_a_run_whose_gate_tests_all_skipped_still_logs_its_decision(tmp_path, reports):
    """Gate tests selected and every one skipped: a header-only log says no decision was made."""
    path = _finish(tmp_path, run_decision={"n_gates": 0, "skipped": 3})
    assert path is not None and path.exists()
    (head,) = _lines(path)
    assert head["run_decision"] == {"n_gates": 0, "skipped": 3} and head["models"] == ["sim:unbiased"]


def test_credentials_in_errored_tests_are_redacted(tmp_path, reports):
    """An errored test's message quoting an endpoint URL with user-info keeps no password."""
    _worker_logs(tmp_path, ("main",))
    path = _finish(tmp_path, errored=[{"nodeid": "t.py::x", "message": "refused: http://user:s3cret@host:8000/v1"}])
    text = path.read_text()
    assert "s3cret" not in text and "t.py::x" in text


def test_a_failed_report_says_how_to_render_it_and_keeps_the_log(tmp_path, monkeypatch):
    """The log stays; the line names the error and the command that renders the report later."""
    _worker_logs(tmp_path, ("main",))

    def boom(*_a, **_k):
        raise RuntimeError("figure failed")

    monkeypatch.setattr(render, "write_reports", boom)
    term = Terminal()
    path = _finish(tmp_path, terminal=term)
    assert path.exists()
    assert any("report not written (RuntimeError: figure failed)" in line and f"posbias report {path}" in line
               for line in term.lines)


def test_an_interrupted_report_says_how_to_render_it_and_propagates(tmp_path, monkeypatch):
    """Ctrl-C while the report renders: the log is written, the line says how to render, and the
    interrupt goes on."""
    _worker_logs(tmp_path, ("main",))

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "write_reports", interrupted)
    term = Terminal()
    with pytest.raises(KeyboardInterrupt):
        _finish(tmp_path, terminal=term)
    path = tmp_path / ".posbias" / "runs" / RUN / "run.jsonl"
    assert path.exists() and any("interrupted" in line and f"posbias report {path}" in line for line in term.lines)


def test_a_prune_that_cannot_read_the_cache_folder_still_renders_the_report(tmp_path, reports, monkeypatch):
    """keep_runs whose prune fails on the file system (a runs folder it may not list) is said in one line; the
    run's report is still rendered (it raised out of the run's end before the report, an internal error)."""
    from pytest_posbias.run import retention

    def refused(*_a, **_k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(retention, "prune_runs", refused)
    _worker_logs(tmp_path, ("main",))
    term = Terminal()
    path = _finish(tmp_path, terminal=term, options=RunOptions(models=("sim:unbiased",), keep_runs=2))
    assert path is not None and path.exists() and len(reports) == 1
    assert any("keep_runs" in line and "Permission denied" in line for line in term.lines)
