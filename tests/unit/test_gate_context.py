"""The gates' view of the run (:class:`pytest_posbias.gate_context.GateContext`): the run context
provides every member the protocol names (mypy checks the types), and the protocol module is
light enough for any layer to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_posbias.gate_context import GateContext, ProbeContext, SearchContext
from pytest_posbias.run.context import RunContext


def _members(proto: type) -> set[str]:
    names = set(getattr(proto, "__annotations__", {}))
    names |= {k for k, v in vars(proto).items() if callable(v) and not k.startswith("_")}
    return names


@pytest.mark.parametrize(("proto", "some"), [
    (GateContext, {"mode", "alpha", "baseline", "threshold", "phase", "stressor", "positional", "rate_gate"}),
    (ProbeContext, {"engine", "store", "runlog", "rng", "observe", "manifest"}),
    (SearchContext, {"seed", "run_id", "cache_dir", "probe_settings", "phase_spec", "stressor_spec",
                     "threshold", "judges", "note", "memo"}),
])
def test_the_run_context_has_every_member_the_gates_and_probes_use(proto, some):
    members = _members(proto)
    assert some <= members
    methods = {k for k in members if callable(getattr(proto, k, None))}
    assert methods <= set(dir(RunContext)), methods - set(dir(RunContext))
    # data members are set in RunContext.__init__: each is assigned there as self.<name>
    import inspect

    init = inspect.getsource(RunContext.__init__)
    for name in members - methods:
        assert f"self.{name} " in init or f"self.{name}:" in init, name


def test_importing_the_protocol_imports_no_numeric_library():
    code = "import sys, pytest_posbias.gate_context, pytest_posbias.gate_registry; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
