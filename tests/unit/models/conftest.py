"""Fixtures of the model tests: one frame store per test file, the small synthetic set's manifest, and
a checkpoint folder that holds only its ``config.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_posbias.data.manifest import Manifest, load_manifest
from pytest_posbias.video.frames import FrameStore


@pytest.fixture(scope="module")
def store() -> FrameStore:
    """A frame store shared by one file's tests (each clip decoded once per file)."""
    return FrameStore()


@pytest.fixture(scope="module")
def manifest(small_set: Path) -> Manifest:
    """The small synthetic set's manifest."""
    return load_manifest(small_set)


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    """A qwen2_vl checkpoint folder with a config and no weights: enough to resolve and plan a server."""
    d = tmp_path / "tiny-ckpt"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}))
    return d
