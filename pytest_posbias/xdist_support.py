"""pytest-xdist support: one probe, one worker (``pytest -n N``).

The plugin's xdist hooks delegate here; this module does not import pytest (it works on the
config and item objects the hooks hand it). What it does:

* :func:`configure_xdist` -- the controller picks xdist's ``loadgroup`` unless ``--dist`` was
  given, tells the workers, and gives each worker its share of the CPU threads;
* :func:`probe_groups_of` and :func:`suffix_group_nodeids` -- each suite test's probe group, and
  the ``@group`` node-id suffix the scheduler groups by (lost on pytest 9.2,
  pytest-dev/pytest-xdist#1386);
* :func:`plain_nodeid`, :func:`match_last_failed_across_modes`, :func:`junit_plain_names` --
  the ids a serial run shows, in reports, ``--lf``/``--ff`` and ``--junitxml``;
* :func:`start_controller_warm_up` / :func:`join_warm_up` -- the controller's background imports;
* :func:`start_log_follower` / :func:`stop_log_follower` -- the controller reads the workers' logs while they grow.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

XDIST_GROUP_PREFIX = "posbias:"  # the start of a suite test's xdist group (suite_support.probe_group)


def dist_given(config: Any) -> bool:
    """Whether the user chose an xdist distribution mode (``--dist``/``-d``, also in addopts)."""
    import contextlib
    import os
    import shlex

    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    with contextlib.suppress(ValueError, TypeError):
        args += shlex.split(" ".join(config.getini("addopts")))
    return any(str(a) == "-d" or str(a).startswith("--dist") for a in args)


def configure_xdist(config: Any) -> None:
    """``pytest -n N``: schedule by probe (xdist ``loadgroup``; :func:`~.suite_support.probe_group`)
    unless a ``--dist`` mode was given, and give each worker its share of the CPU threads (torch
    reads OMP_NUM_THREADS when the embed judge first imports it): N workers each running
    all-core torch kernels on the same cores only slow each other down."""
    import os
    import sys

    wi = getattr(config, "workerinput", None)
    if wi is None:
        if getattr(config.option, "dist", "no") == "load" and not dist_given(config):
            config.option.dist = "loadgroup"
        return
    if wi.get("posbias_loadgroup"):
        # A worker re-parses the command line, which has no --dist when the plugin chose
        # loadgroup, so xdist's worker setup leaves ``loadgroup`` False: it would neither read
        # the group marks nor suffix the node ids, and the controller would spread a probe's gates.
        config.option.loadgroup = True
    workers = int(wi.get("workercount", 1) or 1)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ and "torch" not in sys.modules:
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:
            cpus = os.cpu_count() or 1
        share = max(1, cpus // workers)
        os.environ["OMP_NUM_THREADS"] = str(share)
        _cap_loaded_blas(share)


def _cap_loaded_blas(threads: int) -> None:
    """Limit the BLAS numpy has already loaded (OpenBLAS reads its thread count when it loads,
    before the worker sets OMP_NUM_THREADS) to ``threads``, through threadpoolctl where it is
    installed: two workers each running two-thread BLAS calls on two cores wait on each other."""
    import os

    if "OPENBLAS_NUM_THREADS" in os.environ or "MKL_NUM_THREADS" in os.environ:
        return  # the user's setting stands
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    with contextlib.suppress(Exception):  # an unknown BLAS build: leave it as it is
        threadpool_limits(limits=threads, user_api="blas")


def match_last_failed_across_modes(config: Any, items: list[Any]) -> None:
    """``--lf``/``--ff``: a failure that a ``-n`` run recorded (the node id carries the plugin's
    ``@posbias:...`` group suffix) selects the test in a serial run, and one recorded serially
    selects it under ``-n`` (on the workers, whose ids carry the suffix): the id the test has in
    this run is added to last-failed's record before it selects (its filter runs after this
    wrapper). Before, either switch found no recorded failure and reran every test."""
    lf = config.pluginmanager.get_plugin("lfplugin")
    failed = getattr(lf, "lastfailed", None)
    if not failed or not getattr(lf, "active", False):
        return
    marker = "@" + XDIST_GROUP_PREFIX
    recorded = {str(k) for k in failed}
    plain_of_grouped = {plain_nodeid(k) for k in recorded if marker in k}
    structured = not isinstance(next(iter(failed)), str)  # pytest >= 9.2 keys by the structured id
    for item in items:
        key = getattr(item, "id", item.nodeid) if structured else item.nodeid
        if key in failed:
            continue
        nodeid = item.nodeid
        plain = plain_nodeid(nodeid)
        if (plain != nodeid and plain in recorded) or (plain == nodeid and nodeid in plain_of_grouped):
            failed[key] = True


def probe_groups_of(items: list[Any], *, search_frames: int | None) -> list[tuple[Any, str]]:
    """(item, group) for each suite test that shares a probe, from :func:`~.suite_support.probe_group`;
    a test that carries its own ``xdist_group`` mark keeps it. The plugin marks them."""
    from .suite_support import probe_group

    out = []
    for item in items:
        if any(True for _ in item.iter_markers("xdist_group")):
            continue  # the test chose its own group
        fn = getattr(item, "function", None)
        callspec = getattr(item, "callspec", None)
        group = probe_group(str(getattr(fn, "__module__", "") or ""), str(getattr(fn, "__name__", "")),
                            dict(callspec.params) if callspec is not None else {}, search_frames=search_frames)
        if group:
            out.append((item, group))
    return out


def suffix_group_nodeids(items: list[Any]) -> None:
    """The ``@group`` suffix xdist's worker hook means to add, on pytest versions where it is lost."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if not names or item.nodeid.endswith("@" + "_".join(names)):
            continue
        suffixed = f"{item.nodeid}@{'_'.join(names)}"
        node_id = getattr(item, "_id", None)
        if node_id is not None and hasattr(type(node_id), "parse"):  # pytest >= 9.2: structured ids
            item._id = type(node_id).parse(suffixed)
        else:
            item._nodeid = suffixed  # pytest < 9.2
        if item.nodeid != suffixed:
            raise ConfigError(f"posbias: cannot set the xdist group of {item.nodeid} under this pytest; "
                              "run with --dist load, or without -n")


def plain_nodeid(nodeid: str) -> str:
    """A node id without the ``@posbias:...`` group suffix xdist's loadgroup appends (same as serial)."""
    return nodeid.split("@" + XDIST_GROUP_PREFIX, 1)[0]


def start_controller_warm_up(config: Any) -> threading.Thread | None:
    """xdist controller: import, on a background thread while the workers run, what the end of the
    run needs and the controller has not loaded (the report's renderer, matplotlib, jinja2,
    scipy.stats, and the hypothesis module its pytest plugin imports in its terminal summary), and
    compile the report's template: about 6 s that were paid
    after the last test, on the run's critical path, while a core sat idle waiting for the workers."""
    if getattr(config, "workerinput", None) is not None or getattr(config.option, "dist", "no") == "no":
        return None
    if config.getoption("--collect-only", False):  # no test runs, no report: nothing to warm up
        return None
    import importlib

    def warm() -> None:
        for name in ("pytest_posbias.report.render", "jinja2", "matplotlib.figure", "matplotlib.backends.backend_svg",
                     "scipy.stats", "hypothesis.internal.observability"):
            try:
                importlib.import_module(name)
            except Exception:  # a warm-up only: the real import reports any problem later
                continue
        with contextlib.suppress(Exception):
            from .report.render import report_template

            report_template()  # the jinja2 compile of the report template

    thread = threading.Thread(target=warm, name="posbias-warm-up", daemon=True)
    thread.start()
    return thread


LOG_POLL_S = 2.0  # how often the controller of an -n run reads what the workers added to their logs


@dataclass(frozen=True)
class FollowedLogs:
    """The controller's follower of the workers' logs and the thread that polls it."""

    follower: Any  # run_merge.RunLogFollower
    thread: threading.Thread
    freezes: bool = True  # whether the thread calls gc.freeze (and unfreeze_after_merge gc.unfreeze)


def start_log_follower(config: Any, run_dir: Any, stop: threading.Event) -> FollowedLogs | None:
    """xdist controller: a :class:`~pytest_posbias.run_merge.RunLogFollower` of this run's worker
    logs, polled every LOG_POLL_S by a daemon thread until ``stop`` is set. Parsing the logs (about
    2 s of CPU per 35,000 records) then happens while the workers run instead of at the end, on one
    core while the others sit idle; the merge reads the rest.

    The thread runs at the process's priority. At nice 19 it took only idle CPU time, but on cores
    kept busy it got about 1.5 % of one: the warm-up's imports took over 195 s instead of 4 s on
    this machine beside two busy processes, and a lowered thread holding the GIL delayed the
    controller's main thread by 270 ms (median) per wake-up. The gain measured at nice 19 was under
    1 s on a 28 s run."""
    if getattr(config, "workerinput", None) is not None or getattr(config.option, "dist", "no") == "no":
        return None
    if config.getoption("--collect-only", False) or config.getoption("--posbias-plan", None):
        return None
    import gc

    from .engine import gc_paused
    from .run_merge import RunLogFollower

    follower = RunLogFollower(run_dir)
    # Only where nothing is frozen yet: gc.unfreeze, after the merge, unfreezes everything, and a
    # process that froze objects of its own (a run started inside a test: pytester, pytest.main)
    # must find them frozen still.
    freezes = gc.get_freeze_count() == 0

    helpers_started = False

    def follow() -> None:
        nonlocal helpers_started
        while not stop.wait(LOG_POLL_S):
            with gc_paused():
                follower.poll()
            if not helpers_started and any(Path(run_dir).glob("log-*.jsonl")):
                # a worker has started a posbias run: this run will write a report, so start the
                # processes that draw its figures beside this one (not in a run of other tests:
                # `pytest -n N` in any project with the plugin installed)
                helpers_started = True
                with contextlib.suppress(Exception):
                    from .report.figure_pool import start_figure_helpers

                    start_figure_helpers()
            # The parsed records (acyclic dicts, freed by reference counting) out of the cyclic
            # collector's reach: its full passes over a growing heap of them, paid by whichever
            # thread allocates, cost more CPU than the parse. The collection first frees the cycles
            # that died since the last poll (it walks only what is not frozen yet), so what stays
            # frozen until :func:`unfreeze_after_merge` is what was alive at a poll.
            if freezes:
                gc.collect()
                gc.freeze()

    thread = threading.Thread(target=follow, name="posbias-log-follower", daemon=True)
    thread.start()
    return FollowedLogs(follower, thread, freezes)


def stop_log_follower(followed: FollowedLogs | None) -> None:
    """xdist controller, ``stop`` set, before the merge: wait for the polling thread to end. A poll still
    running when the merge began held the merge on its lock, and its ``gc_paused`` and ``gc.freeze``
    then ran inside the merge (the collector back on for the render, the merged records frozen)."""
    if followed is not None:
        followed.thread.join(timeout=60)


def unfreeze_after_merge(followed: FollowedLogs | None) -> None:
    """xdist controller, the run log merged (``stop`` set): once the polling thread has ended, the
    objects it froze (``gc.freeze``) go back to the collector's oldest generation."""
    if followed is not None:
        import gc

        followed.thread.join(timeout=60)
        if followed.freezes:
            gc.unfreeze()


def join_warm_up(thread: threading.Thread | None) -> None:
    """Wait for the warm-up thread before the end of the run imports anything itself: a module the
    two threads import at once can come out partially initialized in one of them (a circular
    import across threads: hypothesis's terminal summary raised ImportError on
    ``hypothesis.internal.observability`` when a run ended while the warm-up was importing it)."""
    if thread is not None:
        thread.join(timeout=120)


def junit_plain_names(xml: Any) -> None:
    """xdist controller, before ``--junitxml`` writes its file (``xml``: pytest's LogXML): the test
    names without the plugin's ``@posbias:...`` group suffix, as a serial run names them. pytest's
    junitxml takes a report's name before the plugin's ``pytest_runtest_logreport`` drops the
    suffix (it must stay until last-failed has recorded it), so its records are renamed here; a
    user's own groups keep their suffix. LogXML has no public API for this: where it changes, the
    names keep the suffix."""
    with contextlib.suppress(Exception):
        for reporter in getattr(xml, "node_reporters_ordered", ()):
            # a finished test's record is its XML element already; an unfinished one's, its attributes
            attrs = reporter.__dict__.get("attrs")
            if attrs is None:
                element = reporter.to_xml()
                name = element.get("name")
                if isinstance(name, str) and plain_nodeid(name) != name:
                    element.set("name", plain_nodeid(name))
            elif isinstance(attrs.get("name"), str):
                attrs["name"] = plain_nodeid(attrs["name"])
