"""The history page (report.history): undecided runs flagged, duplicate run ids and files that are not
run logs skipped, and a release's failures counted by the run-level decision."""

from __future__ import annotations

import json

import pytest


def _tiny_run_log(path, run_id, started, verdicts):
    from pytest_posbias.engine import SCHEMA_VERSION

    lines = [{"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": run_id, "started": started,
              "models": ["sim:unbiased"]}]
    for name, est, passed in verdicts:
        lines.append({"kind": "verdict", "nodeid": f"suites/test_positional.py::test_meg[{name}]", "name": name,
                      "estimate": est, "ci_low": est - 0.01, "ci_high": est + 0.01, "lower": -0.02, "upper": 0.02,
                      "passed": passed})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_history_flags_undecided_runs_duplicate_run_ids_and_skipped_files(tmp_path):
    from pytest_posbias.report.history import find_run_logs, history
    from pytest_posbias.report.render import Run

    _tiny_run_log(tmp_path / "r1" / "run.jsonl", "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    _tiny_run_log(tmp_path / "r2" / "run.jsonl", "b", "2026-02-01T00:00:00", [])  # a crashed run: no verdict
    _tiny_run_log(tmp_path / "r3" / "copy.jsonl", "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    (tmp_path / "junk.jsonl").write_text('{"not": "a run log"}\n')
    skipped: list[str] = []
    paths = find_run_logs(tmp_path, skipped)
    assert len(paths) == 3 and skipped == [f"{tmp_path / 'junk.jsonl'}: not a posbias run log (no run-log header on its first line)"]
    data = history([Run(p) for p in paths])
    assert [r["run_id"] for r in data["releases"]] == ["a", "b"]  # the copy of run a is not a release
    assert data["duplicates"] == [{"path": str(tmp_path / "r3" / "copy.jsonl"), "run_id": "a",
                                   "same_as": str(tmp_path / "r1" / "run.jsonl")}]
    assert [r["undecided"] for r in data["releases"]] == [False, True]


def test_a_gate_failing_alone_but_passing_the_run_decision_is_counted_apart(tmp_path):
    """A gate whose own verdict fails but whose run-level (Holm) decision passes: the history counts
    a release's failures and "fails in the latest release" by the run-level decision; the suite card
    gives both counts."""
    from pytest_posbias.report.front import suite_cards
    from pytest_posbias.report.history import history
    from pytest_posbias.report.render import Run

    log = tmp_path / "r1" / "run.jsonl"
    _tiny_run_log(log, "a", "2026-01-01T00:00:00", [("MEG cooking", -0.05, False), ("MEG leisure", -0.06, False)])
    records = [json.loads(x) for x in log.read_text().splitlines()]
    for r, adjusted in zip([r for r in records if r["kind"] == "verdict"], (True, False), strict=True):
        r["adjusted_passed"] = adjusted  # cooking fails alone, passes after Holm; leisure fails both
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = Run(log)
    data = history([run])
    assert data["releases"][0]["n_fail"] == 1
    assert {g["gate"]: g["failing_last"] for g in data["gates"]} == {"MEG cooking": False, "MEG leisure": True}
    (card,) = suite_cards(run.verdicts)
    assert card["n_fail"] == 2 and card["n_fail_run"] == 1
    records = [{k: v for k, v in r.items() if k != "adjusted_passed"} for r in records]  # a log without the field
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert history([Run(log)])["releases"][0]["n_fail"] == 2 and suite_cards(Run(log).verdicts)[0]["n_fail_run"] is None


def test_a_jsonl_file_nested_too_deeply_is_skipped_not_raised(tmp_path):
    """A *.jsonl whose first line is nested too deeply for the parser is listed in ``skipped``; the run logs are found."""
    from pytest_posbias.report.history import find_run_logs

    _tiny_run_log(tmp_path / "r1" / "run.jsonl", "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    (tmp_path / "deep.jsonl").write_text("[" * 200_000 + "\n")
    skipped: list[str] = []
    assert find_run_logs(tmp_path, skipped) == [tmp_path / "r1" / "run.jsonl"]
    assert len(skipped) == 1 and "deep.jsonl" in skipped[0]


def test_a_run_log_of_another_schema_version_is_skipped_with_its_version(tmp_path):
    """A run log of an unsupported schema version is listed in ``skipped`` (naming the version); the others are drawn."""
    from pytest_posbias.engine import SCHEMA_VERSION
    from pytest_posbias.report.history import find_run_logs, render_history

    _tiny_run_log(tmp_path / "r2" / "run.jsonl", "b", "2026-02-01T00:00:00", [("MEG cooking", 0.0, True)])
    old = tmp_path / "r1" / "run.jsonl"
    old.parent.mkdir()
    old.write_text(json.dumps({"kind": "header", "schema_version": SCHEMA_VERSION + 100, "run_id": "a"}) + "\n")
    skipped: list[str] = []
    assert find_run_logs(tmp_path, skipped) == [tmp_path / "r2" / "run.jsonl"]
    assert len(skipped) == 1 and str(SCHEMA_VERSION + 100) in skipped[0]
    assert "1 releases" in render_history(tmp_path)


@pytest.mark.parametrize("field", ["passed", "nodeid"])
def test_a_verdict_record_missing_a_field_is_not_a_bare_key_error(tmp_path, field):
    """A verdict lacking ``passed`` or ``nodeid`` is a ConfigError naming the log, or a release failure; never a pass."""
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.report.history import history
    from pytest_posbias.report.render import Run

    log = tmp_path / "r1" / "run.jsonl"
    _tiny_run_log(log, "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    records = [json.loads(x) for x in log.read_text().splitlines()]
    del records[1][field]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    try:
        data = history([Run(log)])
    except ConfigError as exc:
        assert "run.jsonl" in str(exc)
    else:
        assert data["releases"][0]["n_fail"] == 1


def test_releases_are_ordered_by_start_time_not_by_path(tmp_path):
    """Releases come in start order whatever their folders' names; each gate's points follow that order."""
    from pytest_posbias.report.history import find_run_logs, history
    from pytest_posbias.report.render import Run

    _tiny_run_log(tmp_path / "a" / "run.jsonl", "late", "2026-03-01T00:00:00", [("MEG cooking", 0.03, False)])
    _tiny_run_log(tmp_path / "b" / "run.jsonl", "early", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    data = history([Run(p) for p in find_run_logs(tmp_path)])
    assert [r["run_id"] for r in data["releases"]] == ["early", "late"]
    (gate,) = data["gates"]
    assert [p["passed"] for p in gate["points"]] == [True, False] and gate["failing_last"]


@pytest.mark.parametrize("value", ["false", "no"])
def test_a_verdict_whose_passed_is_not_a_boolean_is_never_a_pass(tmp_path, value):
    """A verdict whose ``passed`` is not true/false counts as a failure of its release (no decision is no pass)."""
    from pytest_posbias.report.history import history
    from pytest_posbias.report.render import Run

    log = tmp_path / "r1" / "run.jsonl"
    _tiny_run_log(log, "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, value)])
    data = history([Run(log)])
    assert data["releases"][0]["n_fail"] == 1 and data["gates"][0]["failing_last"]


def test_a_verdict_with_a_non_numeric_estimate_does_not_stop_the_history(tmp_path):
    """A verdict whose estimate is text that is not a number is drawn without a point (NaN), not raised."""
    from pytest_posbias.report.history import history
    from pytest_posbias.report.render import Run

    log = tmp_path / "r1" / "run.jsonl"
    _tiny_run_log(log, "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, False)])
    records = [json.loads(x) for x in log.read_text().splitlines()]
    records[1]["estimate"] = "n/a"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = history([Run(log)])
    assert data["releases"][0]["n_fail"] == 1


def test_a_release_whose_log_lost_verdicts_its_decision_counted_is_flagged(tmp_path):
    """A run log holding fewer verdicts than its recorded decision counted (cut short: the verdict lines come last)
    is flagged in the releases table with how many are missing, never a clean release with 0 failed."""
    from pytest_posbias.report.history import history, render_history
    from pytest_posbias.report.render import Run

    log = tmp_path / "r1" / "run.jsonl"
    _tiny_run_log(log, "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    lines = log.read_text().splitlines()
    head = json.loads(lines[0])
    head["run_decision"] = {"exit_code": 0, "label": "SHIP", "n_gates": 3}
    log.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    assert history([Run(log)])["releases"][0]["missing"] == 2
    assert "2 verdicts missing" in render_history(tmp_path)
