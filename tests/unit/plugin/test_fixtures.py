"""``plugin.fixtures``: a verdict rides on its test's report and is collected back unchanged once
(the call report), a gate test that ends without a verdict is counted as errored (never clean), a
skipped gate test is told apart by the tag :func:`mark_gate_report` puts on its reports, and
``posbias_gate`` fails its test on a failing verdict (a small pytester run)."""

from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import pytest

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.plugin.fixtures import collect_from_report, mark_gate_report, record_verdict
from pytest_posbias.plugin.state import CALLS_KEY, GATE_TEST_KEY, VERDICT_KEY, PluginState
from pytest_posbias.stats import rate_verdict


def _state() -> PluginState:
    return PluginState(SimpleNamespace(), PosbiasConfig(), "r")  # type: ignore[arg-type]


def _report(when: str, outcome: str = "passed", *, props=(), nodeid: str = "t.py::test_g", longrepr=None):
    """A test report as collect_from_report reads it."""
    return SimpleNamespace(when=when, nodeid=nodeid, user_properties=list(props), longrepr=longrepr,
                           passed=outcome == "passed", failed=outcome == "failed", skipped=outcome == "skipped")


def _recorded(verdict, calls=None) -> list[tuple[str, object]]:
    item = SimpleNamespace(user_properties=[])
    record_verdict(item, verdict, calls=calls)  # type: ignore[arg-type]
    return item.user_properties


def test_a_recorded_verdict_is_collected_back_equal_once():
    """record_verdict then collect_from_report gives the same verdict; the setup and teardown reports,
    which carry the same properties, do not add it again."""
    v = rate_verdict(12, 100, name="order flip rate", threshold=0.15)
    props = _recorded(v)
    state = _state()
    for when in ("setup", "call", "teardown"):
        collect_from_report(state, _report(when, props=props))
    assert [(nid, got) for nid, got in state.verdicts] == [("t.py::test_g", v)]
    assert state.verdicts[0][1].to_dict() == v.to_dict()
    assert state.tests_done == 1 and state.ran == {"t.py::test_g"} and state.errored == []


def test_the_flat_junit_properties_repeat_the_verdicts_numbers():
    """record_verdict: the JSON property and the posbias.* properties junit writes hold the same numbers."""
    v = rate_verdict(30, 100, name="order flip rate", threshold=0.15)
    props = _recorded(v)
    flat = dict(props)
    d = json.loads(flat[VERDICT_KEY])
    for key in ("estimate", "ci_low", "ci_high", "threshold", "n", "p_value", "passed", "mode"):
        assert flat[f"posbias.{key}"] == d[key] == v.to_dict()[key]
    assert d["estimate"] == pytest.approx(30 / 100)


def test_call_counts_are_summed_over_the_gates_call_reports_only():
    """Two gates' calls {made 3, cache_hits 1} and {made 2}: the run counts 5 made, 1 hit; a key the
    engine does not count is ignored."""
    state = _state()
    v = rate_verdict(1, 50, name="r", threshold=0.15)
    for k, calls in enumerate(({"made": 3, "cache_hits": 1}, {"made": 2, "bogus": 9})):
        props = _recorded(v, calls=calls)
        assert json.loads(dict(props)[CALLS_KEY]) == calls
        for when in ("setup", "call", "teardown"):
            collect_from_report(state, _report(when, props=props, nodeid=f"t.py::g{k}"))
    assert state.calls["made"] == 5 and state.calls["cache_hits"] == 1 and "bogus" not in state.calls


@pytest.mark.parametrize("when", ["setup", "call"])
def test_a_test_failing_without_a_verdict_is_an_error_naming_its_last_line(when):
    """Fail-closed: a failed report with no verdict is recorded as errored with the failure's last
    line; a setup that failed counts as ran (its call never comes)."""
    state = _state()
    collect_from_report(state, _report(when, "failed", longrepr="Traceback ...\nTypeError: a probe crashed"))
    assert state.errored == [{"nodeid": "t.py::test_g", "when": when, "message": ["TypeError: a probe crashed"]}]
    assert state.verdicts == [] and state.ran == {"t.py::test_g"}


@pytest.mark.parametrize("when", ["call", "teardown"])
def test_a_failure_a_passing_verdict_does_not_explain_is_an_error(when):
    """A gate test that recorded a passing verdict and then failed (an assertion after the gate, or its
    teardown) is errored: its verdict does not explain the failure, and the run must not read SHIP
    (exit 0) over pytest's failure."""
    v = rate_verdict(5, 100, name="order flip rate", threshold=0.15)
    assert v.passed
    state = _state()
    collect_from_report(state, _report("setup", props=()))
    if when == "teardown":
        collect_from_report(state, _report("call", props=_recorded(v)))
    collect_from_report(state, _report(when, "failed", props=_recorded(v), longrepr="OSError: disk full"))
    assert state.errored == [{"nodeid": "t.py::test_g", "when": when, "message": ["OSError: disk full"]}]
    assert len(state.verdicts) == 1


def test_a_gate_test_passing_without_a_verdict_is_an_error():
    """A gate test (tagged by mark_gate_report) whose call passed without recording a verdict decided
    nothing: it is errored, never a silent pass beside the gates that decided."""
    state = _state()
    tag = [(GATE_TEST_KEY, 1)]
    for when in ("setup", "call", "teardown"):
        collect_from_report(state, _report(when, props=tag if when != "teardown" else ()))
    assert [e["nodeid"] for e in state.errored] == ["t.py::test_g"] and "without a verdict" in state.errored[0][
        "message"][0]
    other = _state()  # a passing test that is no gate test is none of the plugin's business
    collect_from_report(other, _report("call"))
    assert other.errored == []


def test_a_failing_verdict_is_not_an_error():
    """A gate failing on its own verdict decided something: it is a verdict, not an errored test."""
    v = rate_verdict(60, 100, name="order flip rate", threshold=0.15)
    assert not v.passed
    state = _state()
    collect_from_report(state, _report("call", "failed", props=_recorded(v), longrepr="order flip rate ..."))
    assert state.errored == [] and len(state.verdicts) == 1


def test_a_passed_setup_is_not_yet_a_test_that_ran():
    """Only a call report, or a setup that did not pass, marks a test as ran (the summary's never-ran count)."""
    state = _state()
    collect_from_report(state, _report("setup"))
    assert state.ran == set()


def test_only_a_tagged_report_is_a_skipped_gate_with_its_reason():
    """A skip is a skipped gate only on a report mark_gate_report tagged; the reason loses pytest's
    "Skipped: " prefix. An untagged skip (a project's own test) is not counted."""
    gate_item = SimpleNamespace(fixturenames=("request", "posbias_gate"))
    plain_item = SimpleNamespace(fixturenames=("request",))
    lr = ("t.py", 3, "Skipped: m.jsonl: no usable multiple-choice item")
    tagged, untagged = _report("setup", "skipped", longrepr=lr), _report("setup", "skipped", longrepr=lr, nodeid="t.py::o")
    mark_gate_report(gate_item, tagged)  # type: ignore[arg-type]
    mark_gate_report(plain_item, untagged)  # type: ignore[arg-type]
    state = _state()
    collect_from_report(state, tagged)
    collect_from_report(state, untagged)
    assert state.skipped == [("t.py::test_g", "m.jsonl: no usable multiple-choice item")]


def test_the_gate_tag_goes_on_setup_and_call_reports_not_teardown():
    """mark_gate_report tags a gate test's setup and call reports (they travel from xdist workers),
    never its teardown report (whose properties junit writes)."""
    item = SimpleNamespace(fixturenames=("posbias_gate",))
    reports = {when: _report(when) for when in ("setup", "call", "teardown")}
    for r in reports.values():
        mark_gate_report(item, r)  # type: ignore[arg-type]
    assert [len(r.user_properties) for r in reports.values()] == [1, 1, 0]


GATES = textwrap.dedent(
    """
    from pytest_posbias.stats import rate_verdict

    def test_clean(posbias_gate):
        v = posbias_gate(rate_verdict(2, 100, name="order flip rate", threshold=0.15))
        assert v.passed

    def test_biased(posbias_gate):
        posbias_gate(rate_verdict(60, 100, name="order flip rate", threshold=0.15), calls={"made": 4})
        raise AssertionError("not reached: the gate failed the test")
    """
)


def test_posbias_gate_fails_its_test_on_a_failing_verdict_with_the_verdicts_message(pytester: pytest.Pytester):
    """posbias_gate(verdict): a passing verdict is returned, a failing one fails the test with its
    message and no traceback, and its calls ride in the verdict's extra."""
    pytester.makepyfile(test_gates=GATES)
    res = pytester.runpytest("-p", "no:randomly", "--posbias-json=v.json")
    res.assert_outcomes(passed=1, failed=1)
    out = res.stdout.str()
    assert "order flip rate" in out and "not reached" not in out and "Traceback" not in out
    verdicts = {v["nodeid"]: v for v in json.loads((pytester.path / "v.json").read_text())["verdicts"]}
    assert verdicts["test_gates.py::test_biased"]["extra"]["calls"] == {"made": 4}
    assert verdicts["test_gates.py::test_clean"]["passed"] is True


def test_a_model_that_cannot_load_stops_a_serial_run_as_a_usage_error(pytester: pytest.Pytester, monkeypatch):
    """posbias_run: a ModelLoadError while loading the models closes the run context and ends the
    run with exit 4 and the error as the user typed the model; no gate test runs on without a model."""
    from pytest_posbias.errors import ModelLoadError
    from pytest_posbias.run import context

    closed: list[bool] = []

    class Broken:
        def load_models(self) -> None:
            raise ModelLoadError("--posbias-model sim:unbiased: the weights are damaged")

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(context.RunContext, "create", classmethod(lambda cls, *a, **k: Broken()))
    pytester.makepyfile(test_g="def test_a(posbias_run):\n    raise AssertionError('GATE BODY RAN')\n\n"
                               "def test_b(posbias_run):\n    pass\n")
    res = pytester.runpytest("-p", "no:randomly", "--posbias-model", "sim:unbiased")
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, out[-2000:]
    assert "posbias: --posbias-model sim:unbiased: the weights are damaged" in out
    assert "GATE BODY RAN" not in out and closed == [True]
