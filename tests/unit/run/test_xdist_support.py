"""The ``-n`` worker set-up (``run.xdist_support``): each worker's share of the CPU threads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def test_a_worker_gets_its_share_of_the_cpu_threads_and_blas_is_capped(monkeypatch):
    """Under -n N a worker sets OMP_NUM_THREADS to cores // N (torch reads it on import) and caps
    the BLAS numpy already loaded; a user's own setting stands."""
    import os

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from pytest_posbias.run import xdist_support

    cpus = len(os.sched_getaffinity(0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)  # torch may be loaded in this process
    config = SimpleNamespace(workerinput={"workercount": 2}, option=SimpleNamespace(dist="load"))
    with threadpoolctl.threadpool_limits(limits=None):  # restores the BLAS threads afterwards
        xdist_support.configure_xdist(config)
        assert os.environ["OMP_NUM_THREADS"] == str(max(1, cpus // 2))
        blas = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(n == max(1, cpus // 2) for n in blas)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    xdist_support.configure_xdist(config)
    assert os.environ["OMP_NUM_THREADS"] == "7"
