"""The gate registry agrees with the suites: every gate has a suite test carrying its marker,
every marker a suite test uses is registered, every suite module has its record, and each
record's defaults lie where its gate measures something."""

from __future__ import annotations

import dataclasses
import importlib
import math

import pytest
from support import PACKAGE
from support import SUITES as REPO_SUITES

from pytest_posbias.config import (
    MARGIN_RANGE,
    PosbiasConfig,
    in_interval,
    parse_threshold_override,
    validate_thresholds,
)
from pytest_posbias.errors import ConfigError
from pytest_posbias.gate_registry import (
    GATE_SPECS,
    GATES,
    OTHER_MARKERS,
    SUITE_SPECS,
    SUITES,
    gate_of_test,
    markers,
    suite_of_module,
    suite_of_test,
)

SUITES_DIR = PACKAGE / "suites"


def _suite_tests(module: str) -> dict[str, set[str]]:
    """Test function name -> the marker names on it, for one suite module."""
    mod = importlib.import_module(f"pytest_posbias.suites.{module}")
    out: dict[str, set[str]] = {}
    for name, fn in vars(mod).items():
        if name.startswith("test_") and callable(fn) and getattr(fn, "__module__", "") == mod.__name__:
            out[name] = {m.name for m in getattr(fn, "pytestmark", [])}
    return out


def test_every_suite_module_has_a_record_and_every_record_a_module():
    files = {p.stem for p in SUITES_DIR.glob("test_*.py")}
    assert files == set(SUITES)
    assert {p.stem for p in REPO_SUITES.glob("test_*.py")} == set(SUITES)  # the scaffolded folder of this repository
    assert [s.module for s in SUITE_SPECS] == list(SUITES)
    assert suite_of_module("test_positional") is SUITES["test_positional"]
    assert suite_of_module("test_mine") is None


@pytest.mark.parametrize("suite", SUITE_SPECS, ids=[s.module for s in SUITE_SPECS])
def test_every_suite_test_function_is_known_by_its_name(suite):
    """Each test function of a suite module is that suite's by name (the -n scheduler and
    ``posbias plan`` read nothing else), and names the gate whose record lists it, if any; every
    function a record lists exists in its suite."""
    tests = _suite_tests(suite.module)
    for name in tests:
        assert suite_of_test(name) is suite, name
        gate = gate_of_test(name)
        assert (gate is None) == (name in suite.other_tests), name
        assert gate is None or gate.suite == suite.module, name
    listed = {t for g in GATE_SPECS if g.suite == suite.module for t in g.tests} | set(suite.other_tests)
    assert listed == set(tests)
    assert suite_of_test("test_mine") is None and gate_of_test("test_stressor_controls") is None


@pytest.mark.parametrize("gate", GATE_SPECS, ids=[g.name for g in GATE_SPECS])
def test_every_gate_has_a_suite_test_with_its_marker(gate):
    assert gate.suite in SUITES, gate.suite
    tests = _suite_tests(gate.suite)
    carrying = [name for name, marks in tests.items() if gate.marker in marks]
    assert carrying, f"no test in {gate.suite} is marked {gate.marker}"


def test_every_marker_on_a_suite_test_is_registered_and_every_registered_marker_is_used():
    used = set().union(*(marks for s in SUITES for marks in _suite_tests(s).values())) - {"parametrize"}
    registered = markers()
    assert used <= set(registered), used - set(registered)
    assert set(registered) <= used, set(registered) - used  # no marker selects nothing


def test_the_suites_conftest_registers_every_marker_with_its_help():
    from pytest_posbias.suites import conftest

    lines: list[tuple[str, str]] = []

    class Config:
        def addinivalue_line(self, name: str, line: str) -> None:
            lines.append((name, line))

    conftest.pytest_configure(Config())  # type: ignore[arg-type]
    assert lines == [("markers", f"{m}: {doc}") for m, doc in markers().items()]
    assert "option_order" in markers() and "order" not in markers()  # pytest-order owns ``order``
    assert GATES["order"].marker == "option_order"
    assert list(markers())[-len(OTHER_MARKERS):] == list(OTHER_MARKERS)


def test_gate_names_and_markers_are_unique_and_records_frozen():
    names = [g.name for g in GATE_SPECS]
    assert len(set(names)) == len(names) and list(GATES) == names
    for marker in {g.marker for g in GATE_SPECS}:  # gates sharing a marker: one suite, one help line
        sharing = [g for g in GATE_SPECS if g.marker == marker]
        assert len({(g.suite, g.description) for g in sharing}) == 1, marker
    with pytest.raises(dataclasses.FrozenInstanceError):
        GATES["meg"].threshold = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        GATES["new"] = GATES["meg"]  # type: ignore[index]


@pytest.mark.parametrize("gate", GATE_SPECS, ids=[g.name for g in GATE_SPECS])
def test_each_record_is_consistent(gate):
    assert gate.side in ("both", "upper", "lower")
    assert gate.bootstrap in ("percentile", "bca")
    assert gate.worse in ("abs", "higher", "lower", "binary", "amplification", None)
    lo, hi = gate.value_range
    assert lo < hi and math.isfinite(lo) and math.isfinite(hi)
    t_lo, t_hi, _, _ = gate.threshold_range
    assert lo <= t_lo < t_hi <= hi  # every allowed threshold is a value the statistic can take
    assert in_interval(gate.threshold, gate.threshold_range)
    assert in_interval(gate.margin, MARGIN_RANGE)
    assert gate.statistic and gate.description
    # the worse direction agrees with the side: a floor gets worse downwards, a ceiling upwards
    if gate.side == "lower":
        assert gate.worse == "lower"
    if gate.side == "both" and gate.worse is not None:
        assert gate.worse == "abs"


def test_config_defaults_come_from_the_registry():
    cfg = PosbiasConfig()
    assert cfg.thresholds_for(None) == {g.name: g.threshold for g in GATE_SPECS}
    assert cfg.margins() == {g.name: g.margin for g in GATE_SPECS}
    assert parse_threshold_override("meg=0.03") == ("meg", 0.03)
    with pytest.raises(ConfigError, match="known gates: dpb, meg, coverage"):
        validate_thresholds("t", {"nope": 0.1})


@pytest.mark.parametrize("gate", GATE_SPECS, ids=[g.name for g in GATE_SPECS])
def test_a_threshold_just_outside_the_range_is_refused_naming_the_statistic(gate):
    t_lo, t_hi, lo_closed, hi_closed = gate.threshold_range
    outside = [t_hi + 1e-9 if hi_closed else t_hi, t_lo - 1e-9 if lo_closed else t_lo]
    for v in outside:
        with pytest.raises(ConfigError, match=rf"must lie in .*{gate.statistic}"):
            validate_thresholds("[tool.posbias.thresholds]", {gate.name: v})


def test_the_summary_orders_and_titles_suites_by_the_registry():
    from pytest_posbias.report.summary import suite_order, suite_title

    shown = sorted(["suites/test_search.py", "x/test_mine.py", "suites/test_stressors.py", "suites/test_positional.py"],
                   key=suite_order)
    assert shown == ["suites/test_positional.py", "suites/test_stressors.py", "suites/test_search.py", "x/test_mine.py"]
    assert suite_title("suites/test_phase_order.py") == f"suites/test_phase_order.py — {SUITES['test_phase_order'].title}"
    assert suite_title("x/test_mine.py") == "x/test_mine.py"
    # a renamed copy of a suite: the title of the suite its test functions are
    assert suite_title("x/test_mine.py", ["x/test_mine.py::test_meg[m-c-P4]", "x/test_mine.py::test_dpb[m-c-P2]"]) \
        == f"x/test_mine.py — {SUITES['test_positional'].title}"
    assert suite_title("x/test_mine.py", ["x/test_mine.py::test_meg[m]", "x/test_mine.py::test_own"]) == "x/test_mine.py"


def test_each_suite_needs_a_kind_of_item_the_manifest_checks(tmp_path):
    from pytest_posbias.data.manifest import Manifest

    empty = Manifest(tmp_path / "m.jsonl")
    for suite in SUITE_SPECS:
        if suite.data is not None:  # a kind Manifest.missing knows (it raises ValueError on any other)
            assert "has no usable" in str(empty.missing(suite.data))


def test_paired_direction_reads_the_record_and_refuses_gates_without_one():
    from pytest_posbias.gate_registry import paired_direction

    assert [paired_direction(g) for g in ("dpb", "coverage", "contamination", "flip", "stressor", "search")] == [
        "abs", "lower", "higher", "binary", "amplification", "binary"]
    for gate in ("equivalence", "attack"):  # certify-type TOST and the attack walk: no baseline form
        with pytest.raises(ConfigError, match=f"the {gate} gate has no paired comparison"):
            paired_direction(gate)
    with pytest.raises(ConfigError, match="unknown gate 'nope'"):
        paired_direction("nope")


def test_per_test_data_kinds_name_real_tests_of_their_suite():
    for suite in SUITE_SPECS:
        tests = _suite_tests(suite.module)
        for test, kind in suite.tests_data:
            assert test in tests, (suite.module, test)
            assert suite.data_for(test) == kind
        assert suite.data_for("test_not_listed") == suite.data
    assert SUITES["test_parity"].data_for("test_parity_coverage") == "positional"
