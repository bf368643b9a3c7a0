"""``plugin.finish``: the end of a run on the controller. The verdict rows' Benjamini–Hochberg
p-values, how the run stopped (``-x``, ``--maxfail``, an interrupt), the exit status (pytest's
own unless gates decided), the decision record, and a guest run (no gate, no summary asked for)
left as pytest ends it. The functions are called on a stand-in config (``conftest.FakeConfig``)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.terminal_lines import Lines

from pytest_posbias.exitcodes import label
from pytest_posbias.plugin.checks import NO_MODEL
from pytest_posbias.plugin.finish import (
    decision_record,
    exit_status,
    posbias_used,
    run_decision_of,
    session_finish,
    stop_reason,
    summary_rows,
)
from pytest_posbias.plugin.state import plugin_of
from pytest_posbias.stats import rate_verdict


def _session(config, *, shouldfail: object = False, shouldstop: object = False):
    return SimpleNamespace(config=config, shouldfail=shouldfail, shouldstop=shouldstop, exitstatus=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 100), min_size=1, max_size=8))
def test_summary_rows_are_in_node_id_order_with_scipys_bh_p_values(fake_config, ks):
    """Rows come in node id order whatever order the reports arrived in, and p_bh is scipy's
    Benjamini–Hochberg adjustment of the verdicts' p-values in that order."""
    config = fake_config()  # a new config per example: the factory is the fixture, not its product
    state = plugin_of(config)
    state.verdicts = [(f"t.py::g{len(ks) - i:02d}", rate_verdict(k, 100, name="r", threshold=0.15))
                      for i, k in enumerate(ks)]  # arrival order: the reverse of node id order
    rows = summary_rows(config)
    assert [r["nodeid"] for r in rows] == sorted(nid for nid, _ in state.verdicts)
    ps = np.clip([r["verdict"].p_value for r in rows], 0, 1)
    np.testing.assert_allclose([r["p_bh"] for r in rows], scipy.stats.false_discovery_control(ps, method="bh"),
                               rtol=1e-12)
    assert all(r["gate"] is None for r in rows)  # no run-level decision taken yet


def test_a_gate_without_a_p_value_gets_no_benjamini_hochberg_evidence(fake_config):
    """A NaN p-value counts as 1 in the BH adjustment (as in Holm's): never p_bh = 0, and it lends
    no rank to the other gates."""
    config = fake_config()
    state = plugin_of(config)
    v = rate_verdict(20, 100, name="r", threshold=0.15)
    state.verdicts = [("t.py::a", dataclasses.replace(v, p_value=math.nan, passed=False)), ("t.py::b", v)]
    rows = summary_rows(config)
    expected = scipy.stats.false_discovery_control([1.0, v.p_value], method="bh")
    np.testing.assert_allclose([r["p_bh"] for r in rows], expected, rtol=1e-12)


def test_a_node_id_reported_twice_keeps_each_verdicts_own_run_level_part(fake_config):
    """A gate test that reported twice (a re-run plugin re-running a failed test under its node id): each row
    carries its own verdict's run-level part, not the first one's for both."""
    config = fake_config()
    state = plugin_of(config)
    state.verdicts = [("t.py::g", rate_verdict(60, 100, name="r", threshold=0.15)),
                      ("t.py::g", rate_verdict(5, 100, name="r", threshold=0.15))]
    state.decision = run_decision_of(config)
    rows = summary_rows(config)
    assert [r["gate"].own_passed for r in rows] == [r["verdict"].passed for r in rows] == [False, True]


@pytest.mark.parametrize("p", [-0.2, 1.5, math.inf])
def test_a_p_value_outside_0_1_gets_no_benjamini_hochberg_evidence(fake_config, p):
    """A p-value outside [0, 1] counts as 1 in the BH adjustment, as in Holm's family: -0.2 gave p_bh = 0."""
    config = fake_config()
    state = plugin_of(config)
    v = rate_verdict(20, 100, name="r", threshold=0.15)
    state.verdicts = [("t.py::a", dataclasses.replace(v, p_value=p, passed=False)), ("t.py::b", v)]
    rows = summary_rows(config)
    expected = scipy.stats.false_discovery_control([1.0, v.p_value], method="bh")
    np.testing.assert_allclose([r["p_bh"] for r in rows], expected, rtol=1e-12)


def test_no_verdict_no_rows(fake_config):
    """A run without verdicts has no summary rows (and imports no statistics for them)."""
    assert summary_rows(fake_config()) == []


@pytest.mark.parametrize(("shouldfail", "maxfail", "expected"), [
    ("stopping after 1 failures", 1, ("stopped by -x after 1 failure", True)),
    ("stopping after 3 failures", 3, ("stopped by --maxfail=3 after 3 failures", True)),
])
def test_a_maxfail_stop_names_the_option_and_the_count(fake_config, shouldfail, maxfail, expected):
    """pytest's "stopping after N failures": -x when maxfail is 1, else --maxfail=N, with the count in words."""
    config = fake_config(maxfail=maxfail)
    assert stop_reason(_session(config, shouldfail=shouldfail), int(pytest.ExitCode.TESTS_FAILED)) == expected


def test_other_stops_and_an_interrupt_are_not_maxfail(fake_config):
    """A plugin's own stop keeps its words, Ctrl-C is "interrupted", a finished run is ("", False)."""
    config = fake_config()
    assert stop_reason(_session(config, shouldstop="out of disk"), 1) == ("stopped: out of disk", False)
    assert stop_reason(_session(config), int(pytest.ExitCode.INTERRUPTED)) == ("interrupted", False)
    assert stop_reason(_session(config), 0) == ("", False)


def test_the_xdist_controllers_stop_flag_counts_as_a_stop(fake_config):
    """Under -n the stop is on xdist's dsession plugin, not the session: it is read there too."""
    dsession = SimpleNamespace(shouldstop="stopping after 1 failures")
    config = fake_config(plugins={"dsession": dsession}, maxfail=1)
    assert stop_reason(_session(config), int(pytest.ExitCode.INTERRUPTED)) == ("stopped by -x after 1 failure", True)


def _decided(fake_config, exit_code: int, **state_fields):
    state = plugin_of(fake_config())
    state.decision = SimpleNamespace(exit_code=exit_code)
    state.verdicts = [("t.py::g", rate_verdict(1, 100, name="r", threshold=0.15))]
    for k, v in state_fields.items():
        setattr(state, k, v)
    return state


@pytest.mark.parametrize("pytest_status", [2, 3, 4, 5])
def test_pytests_status_other_than_0_or_1_stands(fake_config, pytest_status):
    """An interrupt, an internal or usage error, no tests: the gates' decision never replaces it."""
    assert exit_status(pytest_status, _decided(fake_config, 0)) == pytest_status


def test_the_decision_gives_the_status_when_pytest_ended_normally(fake_config):
    """pytest's 1 from gates failing on their own verdicts becomes the run decision's (0 after Holm, or 6)."""
    assert exit_status(1, _decided(fake_config, 0)) == 0
    assert exit_status(0, _decided(fake_config, 6)) == 6


def test_a_test_failing_without_a_verdict_keeps_pytests_1(fake_config):
    """Fail-closed: an errored test decided nothing, so the decision cannot turn the run into a pass."""
    state = _decided(fake_config, 0, errored=[{"nodeid": "t.py::x", "when": "call", "message": ["boom"]}])
    assert exit_status(1, state) == 1


def test_a_gate_test_without_a_verdict_in_a_passing_pytest_run_is_not_measured(fake_config):
    """pytest ended 0 but a gate test ended without a verdict (it passed without calling the gate): the run
    decided nothing there, so the status is NOT MEASURED (6), never SHIP, with or without other verdicts."""
    errored = [{"nodeid": "t.py::x", "when": "call", "message": ["passed without a verdict"]}]
    assert exit_status(0, _decided(fake_config, 0, errored=errored)) == 6
    assert exit_status(0, _decided(fake_config, 6, verdicts=[], errored=errored)) == 6


def test_a_run_without_gates_keeps_pytests_status(fake_config):
    """No verdict and no skipped gate: the plugin is a guest and pytest's status is the run's."""
    assert exit_status(1, _decided(fake_config, 6, verdicts=[])) == 1
    assert exit_status(0, _decided(fake_config, 6, verdicts=[], skipped=[("t.py::g", "no data")])) == 6


def test_xdists_interrupted_after_maxfail_is_read_as_the_serial_runs_failure(fake_config):
    """-n with -x ends as INTERRUPTED: with the stop being -x, the decision gives the status as serially."""
    state = _decided(fake_config, 6, stopped_by_maxfail=True)
    assert exit_status(int(pytest.ExitCode.INTERRUPTED), state) == 6
    assert exit_status(int(pytest.ExitCode.INTERRUPTED), _decided(fake_config, 6)) == 2  # a real Ctrl-C


def test_the_decision_names_the_selected_gates_that_never_ran(fake_config):
    """run_decision_of: the selected gate tests that never reported are the decision's not_run, in
    order, with how the run stopped; under --collect-only none is "not run" (nor a stop to tell)."""
    for collect_only, expected in ((False, ["t.py::b", "t.py::c"]), (True, [])):
        config = fake_config({"--collect-only": collect_only})
        state = plugin_of(config)
        state.verdicts = [("t.py::a", rate_verdict(1, 100, name="r", threshold=0.15))]
        state.gate_tests, state.ran, state.stopped = {"t.py::c", "t.py::a", "t.py::b"}, {"t.py::a"}, "stopped: x"
        d = run_decision_of(config).to_dict()
        assert d["not_run"] == expected and d["stopped"] == ("stopped: x" if expected else "")


def test_the_decision_record_carries_the_runs_status_and_its_label(fake_config):
    """decision_record: None without a decision; else the decision's fields with the run's exit status and its label."""
    assert decision_record(None, 0) is None
    config = fake_config()
    state = plugin_of(config)
    state.verdicts = [("t.py::a", rate_verdict(60, 100, name="r", threshold=0.15))]
    rec = decision_record(run_decision_of(config), 1)
    assert rec is not None and rec["exit_code"] == 1 and rec["label"] == label(1) and rec["why"]


def test_a_guest_run_has_nothing_for_the_end_of_the_run(fake_config, tmp_path):
    """posbias_used: no verdict, skipped gate, selected gate, run folder or summary asked for: False;
    any one of them: True (a --collect-only of gate tests runs none)."""
    assert not posbias_used(fake_config(), plugin_of(fake_config()))
    assert posbias_used(fake_config({"--posbias-json": "s.json"}), plugin_of(fake_config()))
    gates = fake_config()
    plugin_of(gates).gate_tests = {"t.py::g"}
    assert posbias_used(gates, plugin_of(gates))
    listed = fake_config({"--collect-only": True})
    plugin_of(listed).gate_tests = {"t.py::g"}
    assert not posbias_used(listed, plugin_of(listed))
    ran = fake_config(run_id="r5")
    (tmp_path / ".posbias" / "runs" / "r5").mkdir(parents=True)
    assert posbias_used(ran, plugin_of(ran))


def test_a_guest_run_ends_as_pytest_ends_it_and_writes_nothing(fake_config, tmp_path):
    """session_finish on a run of other tests: pytest's status untouched, no line, no file."""
    tr = Lines()
    session = _session(fake_config(plugins={"terminalreporter": tr}))
    session.exitstatus = 1
    session_finish(session, 1)  # type: ignore[arg-type]
    assert session.exitstatus == 1 and tr.lines == [] and sorted(tmp_path.iterdir()) == []


def test_workers_that_found_no_model_end_the_run_as_a_usage_error(fake_config):
    """-n: a worker collected gate tests without a model; the controller's end says why, with exit 4."""
    tr = Lines()
    config = fake_config(plugins={"terminalreporter": tr})
    plugin_of(config).usage_error = NO_MODEL
    session = _session(config)
    session_finish(session, 0)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.USAGE_ERROR
    assert tr.lines == [f"ERROR: {NO_MODEL}"]


def test_gates_that_got_no_run_level_decision_never_end_the_run_as_a_pass(fake_config, monkeypatch):
    """A setting the run-level decision rejects (a ConfigError there) leaves the gates undecided: pytest's 0
    becomes a usage error (4), never SHIP; the line says why."""
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.plugin import finish

    def refuse(config):
        raise ConfigError("`multiplicity` must be one of holm, none; got 'bogus'")

    import pytest_posbias.run.finish as run_finish

    logged: dict[str, object] = {}
    monkeypatch.setattr(finish, "run_decision_of", refuse)
    monkeypatch.setattr(run_finish, "finish_run", lambda **kw: logged.update(kw))
    tr = Lines()
    config = fake_config(plugins={"terminalreporter": tr})
    plugin_of(config).verdicts = [("t.py::a", rate_verdict(5, 100, name="r", threshold=0.15))]
    session = _session(config)
    session_finish(session, 0)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.USAGE_ERROR
    assert any("no run-level decision" in line for line in tr.lines)
    # the run log records the run's status, so its report does not read Ship either
    assert logged["exitstatus"] == pytest.ExitCode.USAGE_ERROR and logged["run_decision"] is None


def test_a_worker_leaves_the_end_of_the_run_to_the_controller(fake_config):
    """session_finish on an xdist worker: nothing decided, the status as pytest left it."""
    config = fake_config(workerinput={"workerid": "gw0"})
    plugin_of(config).usage_error = NO_MODEL
    session = _session(config)
    session_finish(session, 0)  # type: ignore[arg-type]
    assert session.exitstatus == 0 and plugin_of(config).decision is None


class Summary(Lines):
    """A terminal reporter's summary: sections and lines."""

    def section(self, title: str, **markup: object) -> None:
        self.lines.append(f"== {title} ==")


def test_the_summary_counts_the_selected_gates_that_never_ran(fake_config):
    """terminal_summary: 3 selected gate tests, 1 ran before -x stopped the run: "2 of 3 ... did not
    run", with how it stopped and the 1 the summary covers; under --collect-only no such line."""
    from pytest_posbias.plugin.finish import terminal_summary

    for collect_only in (False, True):
        config = fake_config({"--collect-only": collect_only})
        state = plugin_of(config)
        state.gate_tests, state.ran, state.stopped = {"t.py::a", "t.py::b", "t.py::c"}, {"t.py::a"}, "stopped by -x"
        tr = Summary()
        terminal_summary(tr, 1, config)  # type: ignore[arg-type]
        expected = [] if collect_only else [
            "2 of 3 selected gate tests did not run (stopped by -x): they decided nothing; the summary above "
            "covers the 1 that ran"]
        assert tr.lines == expected


def test_the_summary_says_nothing_on_a_worker_or_in_a_guest_run(fake_config):
    """terminal_summary: an xdist worker's summary and a run without gates get no posbias lines."""
    from pytest_posbias.plugin.finish import terminal_summary

    for config in (fake_config(workerinput={"workerid": "gw0"}), fake_config()):
        tr = Summary()
        terminal_summary(tr, 0, config)  # type: ignore[arg-type]
        assert tr.lines == []
