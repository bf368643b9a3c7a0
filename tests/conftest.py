"""Test configuration: offline Hugging Face hub, pytester, shared helpers."""

from __future__ import annotations

import os

# Must be set before huggingface_hub is imported anywhere, or a missing hub id
# costs ~20 s of retries.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

pytest_plugins = ["pytester"]

import fcntl  # noqa: E402
import json  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

# pytester's in-process runs drop the modules first imported inside them, and numpy's extension
# modules load once per process: scipy.stats (which the gates use) is imported here, before any.
import scipy.stats  # noqa: E402, F401


def pytest_configure(config: pytest.Config) -> None:
    """The suites' markers (the tests import suite modules and mark their own slow tests)."""
    from pytest_posbias.gate_registry import markers

    for name, doc in markers().items():
        config.addinivalue_line("markers", f"{name}: {doc}")


def _built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Any]) -> Any:
    """Build a session fixture's files once per test run, also under pytest-xdist: workers share
    the parent of their base temp dirs, the first one builds under an exclusive file lock and
    records what ``build(root)`` returned (paths: a Path, a list or a dict of them); the others
    wait on the lock and read that record back (the recipe of xdist's docs)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / f"shared-{name}"
    record = shared / f"shared-{name}.json"
    with open(shared / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            root.mkdir(exist_ok=True)
            value = build(root)
            encoded = ({k: str(v) for k, v in value.items()} if isinstance(value, dict)
                       else [str(v) for v in value] if isinstance(value, list) else str(value))
            record.write_text(json.dumps(encoded))
            return value
    data = json.loads(record.read_text())
    if isinstance(data, dict):
        return {k: Path(v) for k, v in data.items()}
    return [Path(v) for v in data] if isinstance(data, list) else Path(data)


@pytest.fixture(scope="session")
def synthetic_clips(tmp_path_factory) -> list[Path]:
    """Three short synthetic clips (rendered once per test session)."""
    from pytest_posbias.video import synthetic as SY

    def build(root: Path) -> list[Path]:
        out = []
        for k, domain in enumerate(("cooking", "leisure", "news")):
            scene = SY.make_scene(f"clip{k}", domain, "short", seed=40 + k, event_probability=1.0)
            out.append(SY.render_clip(scene, root / f"clip{k}.mp4"))
        return out

    return _built_once(tmp_path_factory, "synthetic-clips", build)


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """A tiny random-weight checkpoint directory of every supported family (built offline)."""
    pytest.importorskip("transformers")
    from pytest_posbias.models.tiny import FAMILIES, build_tiny_checkpoint

    return _built_once(tmp_path_factory, "tiny-models",
                       lambda root: {f: build_tiny_checkpoint(f, root / f) for f in FAMILIES})


@pytest.fixture(scope="session")
def small_set(tmp_path_factory) -> Path:
    """A small synthetic set (6 clips per configuration, 12 groups per scale): its manifest."""
    from pytest_posbias.video.synthetic import build_set

    return _built_once(tmp_path_factory, "small-set",
                       lambda root: build_set(root, videos_per_config=6, groups_per_config=12))


@pytest.fixture(scope="session")
def heavy_modules() -> None:
    """pytester's in-process runs drop modules first imported inside them, and re-importing torch
    in one process crashes it: import everything the suites use once, before the first run."""
    import contextlib
    import importlib

    for name in ("torch", "transformers", "sentence_transformers", "decord", "av", "openai",
                 "pytest_posbias.run.context", "pytest_posbias.gates", "pytest_posbias.run.suite_params",
                 "pytest_posbias.models.sim", "pytest_posbias.models.hf", "pytest_posbias.models.openai_backend",
                 "pytest_posbias.report.render"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from pytest_posbias.scoring.judges import load_embedder

    with contextlib.suppress(Exception):
        load_embedder()


# The longest test files, longest first (worker-seconds each in a CI run: the xdist agreement runs,
# the real vLLM servers, a wheel install, plan on a tiny checkpoint, the report runs, the dose
# calibrations). Under `-n 2 --dist loadfile --no-loadscope-reorder` (scripts/test) they start
# first and the many short files fill in around them, instead of one worker running them alone at
# the end (xdist's default order puts the files with the most tests first).
_LONG_FILES = ("e2e/test_xdist.py", "e2e/test_vllm_managed.py", "project/test_packaging.py", "unit/cli/test_plan.py",
               "e2e/test_report.py", "e2e/test_vllm_server.py", "e2e/test_suite_positional.py",
               "project/test_ci_recipes.py", "e2e/test_faults.py", "e2e/test_dose_gates.py",
               "unit/models/test_vllm_managed.py", "e2e/test_report_front.py", "unit/models/test_sim_dose.py",
               "e2e/test_plugin.py", "e2e/test_progress.py", "unit/cli/test_sim_check.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the items of ``_LONG_FILES`` to the front, in that order (stable otherwise)."""
    rank = {name: k for k, name in enumerate(_LONG_FILES)}
    here = Path(__file__).parent

    def key(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.relative_to(here).as_posix(), len(rank))
        except ValueError:  # a file outside tests/ (pytester's own projects)
            return len(rank)

    items.sort(key=key)
