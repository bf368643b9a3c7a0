"""Fixtures of the probe tests: a run context on the small synthetic set whose backend a test may
replace (``support.scripted_backend.ScriptedBackend``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def run_context(tmp_path, small_set, monkeypatch) -> Callable[..., Any]:
    """``run_context(model, probes=..., backend=..., **options)``: a RunContext on the small set with
    its own cache under tmp_path; ``backend`` (a ScriptedBackend) answers for every model spec. Closed
    at the end of the test."""
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run import context as context_module
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.run_options import RunOptions

    made: list[Any] = []

    def make(model: str = "sim:unbiased", *, probes: dict[str, Any] | None = None, backend: Any = None,
             run_id: str = "r1", cache: Path | None = None, **options: Any) -> Any:
        if backend is not None:
            monkeypatch.setattr(context_module, "load_backend", lambda *_a, **_k: (backend, {}))
        opts = {"sequential": False, **options}
        ctx = RunContext.create(RunOptions(models=(model,), data=str(small_set), cache=str(cache or tmp_path / "cache"),
                                           **opts),
                                PosbiasConfig(probes=probes or {}), rootdir=tmp_path, worker="main", run_id=run_id)
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.close()


def open_context(root: Path, manifest: Path, model: str, run_id: str, seed: int = 0) -> Any:
    """A RunContext on ``manifest`` with its cache in ``root/.posbias`` and the default settings (the
    caller closes it: a later context on the same root reads the same cache and corpus)."""
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.run_options import RunOptions

    return RunContext(RunOptions(models=(model,), data=str(manifest), cache=str(root / ".posbias"), seed=seed),
                      PosbiasConfig(), rootdir=root, worker="main", run_id=run_id)
