"""The plugin object of one run (:class:`PosbiasPlugin`): registered by ``pytest_configure``, it
holds the run's state and implements the hooks that fill it; each hook hands its work to the
module that does that job (options, checks, terminal, xdist hooks, fixtures, finish)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from ..config import PosbiasConfig
from ..run.xdist_support import configure_xdist
from .checks import (
    check_cache_before_calls,
    check_endpoints_before_workers,
    check_models,
    check_output_paths,
    check_threshold_overrides,
    collection_problem,
    gates_asked,
    model_missing,
    posbias_asked,
    uses_model,
    warn_unusable_videos,
)
from .finish import session_finish, terminal_summary
from .fixtures import collect_from_report, mark_gate_report
from .options import run_identity
from .state import GATE_FIXTURE, WORKEROUTPUT_GATE_TESTS, WORKEROUTPUT_LEFT_OUT, WORKEROUTPUT_USAGE_ERROR, PluginState
from .terminal import hold_terminal, maybe_start_controller_progress, stop_progress
from .xdist_hooks import configure_node, make_scheduler, start_vllm_for_workers, stop_vllm


class PosbiasPlugin(PluginState):
    """The plugin's state for one run with the hooks that fill and use it. One per pytest config:
    a run started inside another (pytester, ``pytest.main`` in a test) has its own, so the
    enclosing run's reports never reach it."""

    def start(self) -> None:
        """The checks of ``pytest_configure`` (before collection, before any worker starts): the
        models, data and output paths, and under ``-n`` the vLLM servers."""
        config, pcfg = self.config, self.pcfg
        if not config.getoption("--help", False) and not config.getoption("--markers", False):
            check_threshold_overrides(config)
            check_models(config, pcfg)
            check_output_paths(config, pcfg)
            start_vllm_for_workers(config)
            plan = config.getoption("--posbias-plan", None)
            if plan and not self.worker:
                from ..models.plan import write_configured_design

                # a run against a baseline decides every gate on the fixed design, whichever sets the baseline
                baseline = config.getoption("--posbias-baseline") or pcfg.get("baseline")
                write_configured_design(plan, sequential=bool(pcfg.get("sequential", True)) and not baseline)
        if posbias_asked(config):  # another project's -n workers keep their threads as they are
            configure_xdist(config)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> Generator[None, None, None]:
        """After every other implementation (``-m``/``-k`` deselection done): record the selected gate
        tests, told apart from those that ran, and check what only the selection tells
        (:func:`.checks.collection_problem`: a model when gate tests were collected, the selected rate
        gates' sizes): a usage error serially; an ``-n`` worker runs nothing and tells the controller,
        which ends the run with the same error (an exception raised on a worker would be xdist's
        internal error)."""
        result = yield
        out = getattr(config, "workeroutput", None)
        if model_missing(config, items) and not all(map(uses_model, items)) and not gates_asked(config):
            # a project's own run (no test paths, -m, -k or posbias option on the command line) that collected
            # the suites beside its tests, no model named: the suites are left out and the summary says so; a
            # run that asks for gate tests stays a usage error
            left = [i for i in items if uses_model(i)]
            config.hook.pytest_deselected(items=left)
            items[:] = [i for i in items if not uses_model(i)]
            self.left_out = len(left)
            if out is not None:
                out[WORKEROUTPUT_LEFT_OUT] = len(left)
        self.gate_tests = {i.nodeid for i in items if GATE_FIXTURE in getattr(i, "fixturenames", ())}
        if out is not None:  # an xdist worker: the controller collects nothing, and learns the list at node down
            out[WORKEROUTPUT_GATE_TESTS] = sorted(self.gate_tests)
        problem = collection_problem(config, self.pcfg, items)
        if problem:  # nothing runs, so no selected gate test is left to name as never run
            self.gate_tests = set()
            if out is None:
                raise pytest.UsageError(problem)
            out[WORKEROUTPUT_USAGE_ERROR] = problem
            out[WORKEROUTPUT_GATE_TESTS] = []
            config.hook.pytest_deselected(items=list(items))
            items[:] = []
        return result

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """``pytest -n N`` without ``--dist``: schedule by probe group (:func:`.xdist_hooks.make_scheduler`)."""
        return make_scheduler(config, log)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: every worker writes into the controller's run directory (:func:`.xdist_hooks.configure_node`)."""
        configure_node(node)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Generator[None, None, None]:
        """xdist controller: pytest's writes of a test's start, and as ``pytest_runtest_logfinish`` its
        progress percentage, hold the terminal (:func:`.terminal.hold_terminal`)."""
        with hold_terminal(self):
            return (yield)

    pytest_runtest_logfinish = pytest_runtest_logstart

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """Collect the verdicts and the calls a test's report carries, after every other implementation.
        On the xdist controller pytest's result letter holds the terminal, and the progress display
        starts once a worker has set the run up (:func:`.terminal.maybe_start_controller_progress`)."""
        with hold_terminal(self):
            result = yield
        collect_from_report(self, report)
        maybe_start_controller_progress(self.config, self)  # once, on the controller
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A gate test's setup and call reports say so (:func:`.fixtures.mark_gate_report`), also
        when they come from an xdist worker."""
        report = yield
        mark_gate_report(item, report)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> None:
        """Before pytest writes a test's result letter: end the progress bar's line, if one is open."""
        if self.live_line is not None:
            self.live_line.close()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist controller: the selected gate tests of a worker that finished (the same list on every
        worker), so that the summary can name the ones a stopped run never reached."""
        out = getattr(node, "workeroutput", None) or {}
        self.gate_tests.update(out.get(WORKEROUTPUT_GATE_TESTS) or ())
        self.usage_error = self.usage_error or str(out.get(WORKEROUTPUT_USAGE_ERROR) or "")
        self.left_out = max(self.left_out, int(out.get(WORKEROUTPUT_LEFT_OUT) or 0))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """xdist controller: the tests planned (every worker collects the same ids)."""
        self.tests_planned = max(self.tests_planned, len(ids))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """A suite test's call (one using ``posbias_run``) is its current test: plan mode records its
        requests under it, and a probe result it reads again counts as its own, not as shared."""
        if "posbias_run" not in getattr(item, "fixturenames", ()):
            yield
            return
        from ..models.plan import current_test

        with current_test(item.nodeid):
            yield

    @pytest.hookimpl
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """The run's identity at the top of the terminal, a posbias run only (:func:`.options.run_identity`)."""
        return [run_identity(config, self.run_id)] if posbias_asked(config) else []

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Serial run or xdist controller, before any model call: the cache, the endpoints, the data's
        unusable video files."""
        check_cache_before_calls(session.config)
        check_endpoints_before_workers(session.config)
        warn_unusable_videos(session.config)

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """The posbias sections of the summary (:func:`.finish.terminal_summary`)."""
        terminal_summary(terminalreporter, exitstatus, config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Merge the run log and write the report, first among the implementations (:func:`.finish.session_finish`)."""
        session_finish(session, exitstatus)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """The -n progress thread ended, the vLLM servers this run started stopped."""
        stop_progress(self)
        stop_vllm(config)


def make_plugin(config: pytest.Config, pcfg: PosbiasConfig) -> PosbiasPlugin:
    """The run's plugin object: the run id is the controller's on an xdist worker, else a new one."""
    wi = getattr(config, "workerinput", None)
    if wi is not None and "posbias_run_id" in wi:
        run_id = str(wi["posbias_run_id"])
    else:
        from ..run.run_id import new_run_id

        run_id = new_run_id()
    return PosbiasPlugin(config, pcfg, run_id)
