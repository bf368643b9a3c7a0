"""pytest-xdist support: one probe group, one worker (``pytest -n N``). The plugin's xdist hooks
delegate here; this module does not import pytest (it works on the config objects the hooks hand it).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from typing import Any

XDIST_GROUP_PREFIX = "posbias:"  # the start of a suite test's probe group (suite_params.probe_group)


def dist_given(config: Any) -> bool:
    """Whether the user chose an xdist distribution mode (``--dist``/``-d``, also in addopts): then
    xdist schedules as asked, otherwise the plugin's :class:`.plugin.xdist_scheduler.ProbeGroupScheduling`
    does."""
    args = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))]
    with contextlib.suppress(ValueError, TypeError):
        args += shlex.split(" ".join(config.getini("addopts")))
    return any(str(a) == "-d" or str(a).startswith("--dist") for a in args)


def configure_xdist(config: Any) -> None:
    """``pytest -n N`` worker: its share of the CPU threads (torch reads OMP_NUM_THREADS when the
    embed judge first imports it): N workers each running all-core torch kernels on the same cores
    only slow each other down."""
    wi = getattr(config, "workerinput", None)
    if wi is None:
        return
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
    if "OPENBLAS_NUM_THREADS" in os.environ or "MKL_NUM_THREADS" in os.environ:
        return  # the user's setting stands
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    with contextlib.suppress(Exception):  # an unknown BLAS build: leave it as it is
        threadpool_limits(limits=threads, user_api="blas")
