"""Fixtures of the data tests: a videos folder the importers' tests fill with synthetic clips named like
each dataset's files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def vids(tmp_path, synthetic_clips):
    """A videos directory; ``put(name)`` copies a synthetic clip there under the dataset's file name."""
    d = tmp_path / "videos"
    d.mkdir()

    def put(name: str, k: int = 0) -> Path:
        return Path(shutil.copy(synthetic_clips[k % len(synthetic_clips)], d / name))

    put.dir = d  # type: ignore[attr-defined]
    return put
