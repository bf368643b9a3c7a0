"""Fixtures of the video tests: one rendered synthetic clip, and frames whose pixels carry their index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_posbias.video import synthetic as SY


@pytest.fixture(scope="package")
def clip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SY.SceneSpec]:
    """A short leisure clip with a brief event, rendered once, and its scene."""
    scene = SY.make_scene("t-clip", "leisure", "short", seed=3, event_probability=1.0)
    path = tmp_path_factory.mktemp("clips") / "clip.mp4"
    SY.render_clip(scene, path)
    return path, scene


@pytest.fixture
def frames() -> np.ndarray:
    """16 frames of 8 x 8 pixels, frame t filled with the value t: a frame's index reads from its pixels."""
    return np.stack([np.full((8, 8, 3), t, np.uint8) for t in range(16)])
