"""The suites' fixtures (``posbias_run``: the run context; ``posbias_gate``: a gate's verdict onto
its report) and the collection of those verdicts from the reports."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..safe_text import inert, strict_json
from .checks import as_typed
from .options import options, worker_id
from .state import CALLS_KEY, GATE_FIXTURE, GATE_TEST_KEY, VERDICT_KEY, PluginState, plugin_of, posbias_config
from .terminal import progress_writer

if TYPE_CHECKING:
    from ..stats import Verdict


@pytest.fixture(scope="session")
def posbias_run(request: pytest.FixtureRequest) -> Any:
    """The run context every suite test uses: models, engine, data, thresholds, rng seeds."""
    from ..errors import ModelLoadError
    from ..run.context import RunContext

    config = request.config
    ctx, load_error = None, None
    try:
        ctx = RunContext.create(options(config), posbias_config(config), rootdir=Path(str(config.rootpath)),
                                worker=worker_id(config), run_id=plugin_of(config).run_id,
                                invocation=list(config.invocation_params.args), quiet=config.get_verbosity() < 0,
                                progress=progress_writer(config))
        ctx.load_models()
    except ModelLoadError as exc:
        load_error = as_typed(config, str(exc))
    if load_error is not None:
        if ctx is not None:
            ctx.close()
        if getattr(config, "workerinput", None) is not None:
            # pytest.exit in an xdist worker ends in the controller's INTERNALERROR without this
            # message: every suite test of this worker errors with it (a session fixture's error is
            # kept), the other workers go on, and the run fails
            pytest.fail(f"posbias: {load_error} (on xdist worker {worker_id(config)})", pytrace=False)
        pytest.exit(f"posbias: {load_error}", returncode=pytest.ExitCode.USAGE_ERROR)
    assert ctx is not None
    yield ctx
    ctx.close()


@pytest.fixture
def posbias_gate(request: pytest.FixtureRequest) -> Any:
    """``posbias_gate(verdict)``: record a verdict on this test's report and fail on it."""

    def gate(verdict: Verdict, *, calls: dict[str, Any] | None = None) -> Verdict:
        if calls is not None:  # the decision's cost travels with the verdict (JSON summary, report)
            verdict = replace(verdict, extra={**verdict.extra, "calls": dict(calls)})
        record_verdict(request.node, verdict, calls=calls)
        # text from data (a domain in the gate's name) shown escaped on the terminal and in junit
        if not verdict.passed:
            pytest.fail(inert(verdict.message()), pytrace=False)
        return verdict

    return gate


def record_verdict(item: pytest.Item, verdict: Verdict, *, calls: dict[str, Any] | None = None) -> None:
    """Attach a verdict (JSON plus flat properties for --junitxml) to a test's report."""
    d = verdict.to_dict()
    item.user_properties.append((VERDICT_KEY, strict_json(d, sort_keys=True)))
    for key in ("name", "estimate", "ci_low", "ci_high", "threshold", "n", "p_value", "passed", "inconclusive", "mode"):
        item.user_properties.append((f"posbias.{key}", inert(d[key]) if isinstance(d[key], str) else d[key]))
    if calls:
        item.user_properties.append((CALLS_KEY, strict_json(calls, sort_keys=True)))


def collect_from_report(state: PluginState, report: pytest.TestReport) -> None:
    props = getattr(report, "user_properties", [])
    if report.when == "call" or (report.when == "setup" and not report.passed):
        state.ran.add(report.nodeid)
    verdicts = [json.loads(v) for k, v in props if k == VERDICT_KEY] if report.when == "call" else []
    # a failure only a failing verdict of the call explains; a test that ended without a verdict (an
    # exception, a setup error), or failed after a passing one (an assertion after the gate, its
    # teardown), decided nothing: the report must not read "ALL PASSED" for the gates that did
    if report.failed and not any(not v.get("passed") for v in verdicts):
        state.errored.append({"nodeid": report.nodeid, "when": report.when,
                              "message": str(getattr(report, "longrepr", "") or "").strip().splitlines()[-1:] or [""]})
    elif report.when == "call" and report.passed and not verdicts and _is_gate_report(report):
        # a gate test that returned without giving posbias_gate a verdict decided nothing: never a silent pass
        state.errored.append({"nodeid": report.nodeid, "when": "call",
                              "message": ["the gate test passed without a verdict (posbias_gate was never called)"]})
    if report.when == "teardown":
        state.tests_done += 1
    if report.skipped and report.when in ("setup", "call") and _is_gate_report(report):
        lr = getattr(report, "longrepr", None)
        reason = str(lr[2]) if isinstance(lr, tuple) and len(lr) == 3 else str(lr or "")
        state.skipped.append((report.nodeid, reason.removeprefix("Skipped: ")))
    if report.when != "call":  # user properties ride on every phase's report; count them once
        return
    if verdicts:
        from ..stats import Verdict

        state.verdicts += [(report.nodeid, Verdict.from_dict(v)) for v in verdicts]
    for c in (json.loads(v) for k, v in props if k == CALLS_KEY):
        for k in state.calls:
            state.calls[k] += c.get(k, 0)


def mark_gate_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """Tag the setup and call reports of a gate test (one that requests the ``posbias_gate``
    fixture) with the user property ``(GATE_TEST_KEY, 1)``. The fixture is in the item's
    ``fixturenames`` from collection on, so a gate test skipped by a mark or in a fixture's setup
    is tagged too; the property travels with the report from an xdist worker to the controller.
    The teardown report, whose properties junit writes, is left as it is."""
    if report.when in ("setup", "call") and GATE_FIXTURE in getattr(item, "fixturenames", ()):
        report.user_properties.append((GATE_TEST_KEY, 1))


def _is_gate_report(report: pytest.TestReport) -> bool:
    """A report of a gate test: tagged by :func:`mark_gate_report`. Markers and keywords do not
    decide it: a report's keywords hold its directory and module names, and a project's own
    ``tests/search/`` would read as the search gates."""
    return any(k == GATE_TEST_KEY for k, _ in getattr(report, "user_properties", None) or ())
