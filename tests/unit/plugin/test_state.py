"""``plugin.state``: the run's :class:`PluginState` kept on the pytest config (one per config,
absent under ``-p no:posbias``), its lazily made call counters, and the accessors the suites use.
The config of a real run comes from ``pytester.parseconfigure``."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from types import SimpleNamespace

import pytest

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.engine import CallStats
from pytest_posbias.plugin.state import (
    PLUGIN_KEY,
    PluginState,
    collected_verdicts,
    plugin_active,
    plugin_of,
    posbias_config,
)


def test_a_configured_run_holds_its_state_and_the_projects_table(pytester: pytest.Pytester):
    """After pytest_configure the config's stash holds the plugin, whose pcfg is the project's [tool.posbias]."""
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\nseed = 11\n')
    config = pytester.parseconfigure()
    assert plugin_active(config)
    state = plugin_of(config)
    assert isinstance(state, PluginState) and state.config is config
    assert posbias_config(config) is state.pcfg and posbias_config(config).get("seed") == 11


def test_the_plugin_disabled_leaves_no_state(pytester: pytest.Pytester):
    """-p no:posbias: plugin_active is False, and plugin_of is a KeyError rather than another run's state."""
    config = pytester.parseconfigure("-p", "no:posbias")
    assert not plugin_active(config)
    with pytest.raises(KeyError):
        plugin_of(config)


def test_two_configs_have_two_states(pytester: pytest.Pytester):
    """A run started inside another (pytester, pytest.main) has its own state, never the enclosing run's."""
    first, second = pytester.parseconfigure(), pytester.parseconfigure()
    assert plugin_of(first) is not plugin_of(second)
    assert plugin_of(first).run_id != plugin_of(second).run_id


def test_the_state_starts_empty_and_a_worker_is_told_apart():
    """A new state has no verdicts, errors, skips, decision or gate tests; ``worker`` is set by xdist's workerinput alone."""
    serial = PluginState(SimpleNamespace(), PosbiasConfig(), "r")  # type: ignore[arg-type]
    assert (serial.verdicts, serial.errored, serial.skipped, serial.gate_tests, serial.ran) == ([], [], [], set(), set())
    assert serial.decision is None and serial.stopped == "" and not serial.worker and not serial.stop.is_set()
    worker = PluginState(SimpleNamespace(workerinput={"workerid": "gw0"}), PosbiasConfig(), "r")  # type: ignore[arg-type]
    assert worker.worker


def test_the_call_counters_are_the_engines_keys_at_zero_and_kept():
    """``calls``: every CallStats field at 0, made once (the same dict on each read, so sums accumulate)."""
    state = PluginState(SimpleNamespace(), PosbiasConfig(), "r")  # type: ignore[arg-type]
    assert state.calls == dict.fromkeys((f.name for f in dataclasses.fields(CallStats)), 0)
    state.calls["made"] += 3
    assert state.calls["made"] == 3


def test_collected_verdicts_is_a_copy_in_arrival_order():
    """collected_verdicts: the (node id, verdict) pairs in the order reports came; changing the list leaves the run's."""
    config = SimpleNamespace(stash=pytest.Stash())
    state = PluginState(config, PosbiasConfig(), "r")  # type: ignore[arg-type]
    config.stash[PLUGIN_KEY] = state
    state.verdicts += [("b::t", "vb"), ("a::t", "va")]  # type: ignore[list-item]
    got = collected_verdicts(config)  # type: ignore[arg-type]
    assert got == [("b::t", "vb"), ("a::t", "va")]
    got.clear()
    assert len(state.verdicts) == 2


def test_the_state_module_imports_neither_numpy_nor_the_engine():
    """A run without the suites pays nothing: importing the state (and making one) loads no numpy."""
    code = ("import sys; from types import SimpleNamespace; from pytest_posbias.plugin.state import PluginState; "
            "from pytest_posbias.config import PosbiasConfig; PluginState(SimpleNamespace(), PosbiasConfig(), 'r'); "
            "print(sorted(m for m in ('numpy', 'pytest_posbias.engine') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
