"""``plugin.core``: the plugin object of one run (:class:`PosbiasPlugin`, made by
:func:`make_plugin`) and what its hooks keep: the run id an xdist worker shares with its
controller, the selected gate tests, a collection of gate tests without a model (a usage error
serially; on a worker nothing runs and the controller is told), the workers' lists merged on the
controller, and the report header of a posbias run only."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_posbias.plugin.checks import NO_MODEL
from pytest_posbias.plugin.core import PosbiasPlugin, make_plugin
from pytest_posbias.plugin.options import run_identity
from pytest_posbias.plugin.state import WORKEROUTPUT_GATE_TESTS, WORKEROUTPUT_USAGE_ERROR, plugin_of

GATE = ("request", "posbias_gate", "posbias_run")
PLAIN = ("request",)


def _items(*specs: tuple[str, tuple[str, ...]]) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=nid, name=nid.split("::")[-1], fixturenames=names) for nid, names in specs]


def _collect(plugin: PosbiasPlugin, config, items) -> None:
    """Drive the collection wrapper as pluggy does: up to its yield, then on with the other implementations' result."""
    gen = plugin.pytest_collection_modifyitems(config, items)
    next(gen)
    with pytest.raises(StopIteration):
        gen.send(None)


def test_a_worker_takes_the_controllers_run_id_and_a_controller_makes_a_new_one(fake_config):
    """make_plugin: on an xdist worker the run id handed over in workerinput (one run folder for all); else a fresh one each run."""
    worker = make_plugin(fake_config(workerinput={"workerid": "gw1", "posbias_run_id": "controller-id"}),
                         plugin_of(fake_config()).pcfg)
    assert worker.run_id == "controller-id" and worker.worker
    config = fake_config()
    a, b = make_plugin(config, plugin_of(config).pcfg), make_plugin(config, plugin_of(config).pcfg)
    assert a.run_id and a.run_id != b.run_id and not a.worker


def test_the_configured_run_registers_its_plugin_under_one_name(pytester: pytest.Pytester):
    """pytest_configure registers the run's PosbiasPlugin as "posbias-run": the object the stash holds."""
    config = pytester.parseconfigure()
    plugin = config.pluginmanager.get_plugin("posbias-run")
    assert isinstance(plugin, PosbiasPlugin) and plugin is plugin_of(config)


def test_the_selected_gate_tests_are_those_using_posbias_gate(fake_config):
    """After deselection: the gate tests are the items requesting posbias_gate; a worker lists them for the controller."""
    config = fake_config({"--posbias-model": ["sim:unbiased"]})
    config.workeroutput = {}
    plugin = PosbiasPlugin(config, plugin_of(config).pcfg, "r")
    items = _items(("t.py::b", GATE), ("t.py::plain", PLAIN), ("t.py::a", GATE))
    _collect(plugin, config, items)
    assert plugin.gate_tests == {"t.py::a", "t.py::b"} and len(items) == 3
    assert config.workeroutput[WORKEROUTPUT_GATE_TESTS] == ["t.py::a", "t.py::b"]


def test_serially_gate_tests_without_a_model_are_a_usage_error(fake_config):
    """No model anywhere and gate tests collected: the serial run stops with NO_MODEL before any test."""
    config = fake_config()
    plugin = PosbiasPlugin(config, plugin_of(config).pcfg, "r")
    gen = plugin.pytest_collection_modifyitems(config, _items(("t.py::a", GATE)))
    next(gen)
    with pytest.raises(pytest.UsageError) as err:
        gen.send(None)
    assert str(err.value) == NO_MODEL


def test_a_worker_without_a_model_runs_nothing_and_tells_the_controller(fake_config):
    """On a worker an exception would be xdist's internal error: the items are deselected, none is
    left, and workeroutput gives the no-model error (and no gate test selected)."""
    deselected: list[list] = []
    config = fake_config(workerinput={"workerid": "gw0"})
    config.workeroutput = {}
    config.hook = SimpleNamespace(pytest_deselected=lambda items: deselected.append(items))
    plugin = PosbiasPlugin(config, plugin_of(config).pcfg, "r")
    items = _items(("t.py::a", GATE), ("t.py::p", PLAIN))
    _collect(plugin, config, items)
    assert items == [] and [[i.nodeid for i in d] for d in deselected] == [["t.py::a", "t.py::p"]]
    assert config.workeroutput[WORKEROUTPUT_USAGE_ERROR] == NO_MODEL and config.workeroutput[WORKEROUTPUT_GATE_TESTS] == []


def test_the_controller_merges_what_the_workers_report(fake_config):
    """pytest_testnodedown: the union of the workers' gate tests and any worker's usage error;
    node_collection_finished: the tests planned (every worker collects all of them)."""
    config = fake_config()
    plugin = PosbiasPlugin(config, plugin_of(config).pcfg, "r")
    plugin.pytest_testnodedown(SimpleNamespace(workeroutput={WORKEROUTPUT_GATE_TESTS: ["t.py::a"]}), None)
    plugin.pytest_testnodedown(SimpleNamespace(workeroutput={WORKEROUTPUT_GATE_TESTS: ["t.py::b"],
                                                             WORKEROUTPUT_USAGE_ERROR: NO_MODEL}), None)
    plugin.pytest_testnodedown(SimpleNamespace(), "worker crashed")  # a node that died has no workeroutput
    assert plugin.gate_tests == {"t.py::a", "t.py::b"} and plugin.usage_error == NO_MODEL
    for ids in (["x"] * 5, ["x"] * 3):
        plugin.pytest_xdist_node_collection_finished(None, ids)
    assert plugin.tests_planned == 5


def test_the_report_header_names_a_posbias_run_only(fake_config):
    """pytest_report_header: no line for another project's run; the run identity for a posbias run."""
    guest = fake_config()
    assert PosbiasPlugin(guest, plugin_of(guest).pcfg, "r").pytest_report_header(guest) == []
    ours = fake_config({"--posbias-model": ["sim:unbiased"]}, run_id="r8")
    assert PosbiasPlugin(ours, plugin_of(ours).pcfg, "r8").pytest_report_header(ours) == [run_identity(ours, "r8")]
