"""The plugin's state for one run (:class:`PluginState`), kept on the pytest config, and the keys
under which verdicts travel on test reports and xdist's worker input/output."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from ..config import PosbiasConfig

if TYPE_CHECKING:  # numpy and scipy: imported when a gate reports, never by a run without the suites
    from ..stats import Verdict
    from .terminal import ControllerProgress, LiveLine

VERDICT_KEY = "posbias_verdict"  # user property: the verdict as JSON
CALLS_KEY = "posbias_calls"  # user property: the gate's model-call counts as JSON
GATE_TEST_KEY = "posbias_gate_test"  # user property on a gate test's setup and call reports (fixtures.mark_gate_report)
GATE_FIXTURE = "posbias_gate"  # the fixture that makes a test a gate test
WORKEROUTPUT_GATE_TESTS = "posbias_gate_tests"  # workeroutput key: the worker's selected gate tests (node ids)
WORKEROUTPUT_USAGE_ERROR = "posbias_usage_error"  # workeroutput key: the usage error the worker's selection showed
WORKEROUTPUT_LEFT_OUT = "posbias_left_out"  # workeroutput key: the gate tests the worker left out (no model named)
WORKERINPUT_VLLM = "posbias_vllm"  # workerinput key: {spec: {"urls": [...], "identity": {...}}}
WORKERINPUT_GATES_ASKED = "posbias_gates_asked"  # workerinput key: the command line asks for gate tests
PLUGIN_KEY = pytest.StashKey["PluginState"]()  # the run's plugin object (core.PosbiasPlugin)


class PluginState:
    """What the plugin knows about one run: its configuration, run id and, on the controller (or
    in a serial run), the verdicts and call counts collected from every test report. The plugin
    object (:class:`.core.PosbiasPlugin`) is this state with the hooks that fill it."""

    def __init__(self, config: pytest.Config, pcfg: PosbiasConfig, run_id: str) -> None:
        self.config = config
        self.pcfg = pcfg  # [tool.posbias] of the project
        self.run_id = run_id  # the controller's: every worker writes into one run directory
        self.worker = getattr(config, "workerinput", None) is not None  # an xdist worker's (reports go on)
        self.vllm: list[Any] = []  # the xdist controller's vLLM servers (models/vllm_managed.ManagedVllm)
        self.file_problems: list[Any] = []  # the manifest's unusable video files (warned at session start)
        self.live_line: LiveLine | None = None  # the progress bar's line on a terminal (serial runs)
        self.verdicts: list[tuple[str, Verdict]] = []
        self.errored: list[dict[str, Any]] = []
        self.skipped: list[tuple[str, str]] = []  # gate tests skipped (node id, reason)
        self.decision: Any = None  # the run-level decision (decision.RunDecision), set at session finish
        self._calls: dict[str, float] | None = None
        self.gate_tests: set[str] = set()  # node ids of the selected tests that use posbias_gate (-n: the workers')
        self.ran: set[str] = set()  # node ids of the tests that ended: a call report, or a setup that did not pass
        self.stopped = ""  # how the run stopped early (-x, --maxfail, an interrupt), "" when it did not
        self.stopped_by_maxfail = False
        self.usage_error = ""  # -n: the usage error a worker's selection showed (no model, ...), told at the end
        self.left_out = 0  # gate tests left out of a run of other tests too that named no model
        self.problems: list[Any] = []  # DataProblem records of the run (filled at session finish)
        self.tests_planned = 0  # -n progress (controller)
        self.tests_done = 0
        self.stop = threading.Event()  # set at the end of the run: no progress is drawn after it
        self.progress: ControllerProgress | None = None  # -n progress on the controller, once the suites run
        self.terminal_lock = threading.RLock()  # the controller's terminal: pytest's writes and the progress thread's

    @property
    def calls(self) -> dict[str, float]:
        """The run's model-call counts (engine.CallStats' keys), summed over the gates' reports;
        made on first use, so that a run without the suites never imports the engine (numpy)."""
        if self._calls is None:
            from ..engine import CallStats

            self._calls = dict.fromkeys(CallStats().snapshot(), 0)
        return self._calls


def plugin_of(config: pytest.Config) -> PluginState:
    """The run's plugin object (the plugin configured the run)."""
    return config.stash[PLUGIN_KEY]


def plugin_active(config: pytest.Config) -> bool:
    """Whether this plugin configured the run (False under ``-p no:posbias``)."""
    return PLUGIN_KEY in config.stash


def posbias_config(config: pytest.Config) -> PosbiasConfig:
    """The project's ``[tool.posbias]`` settings."""
    return plugin_of(config).pcfg


def collected_verdicts(config: pytest.Config) -> list[tuple[str, Verdict]]:
    """Verdicts in the order their reports arrived (test node id, verdict)."""
    return list(plugin_of(config).verdicts)
