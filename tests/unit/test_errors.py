"""The package's error types (``errors``): every one is a ``PosbiasError`` (one ``except`` catches
what the package raises on purpose, nothing else), a bad setting is also a ``ValueError``, a model
that cannot load is a backend error, and each message names the item it is about."""

from __future__ import annotations

import inspect

import pytest

from pytest_posbias import errors
from pytest_posbias.errors import (
    BackendError,
    ConfigError,
    FrameRangeError,
    ManifestError,
    ModelLoadError,
    PosbiasError,
    VideoDecodeError,
    VideoError,
    VideoNotFoundError,
)


def test_every_error_of_the_package_is_a_posbias_error():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) >= 9
    assert all(issubclass(c, PosbiasError) and issubclass(c, Exception) for c in classes)


def test_the_hierarchy_callers_rely_on():
    assert issubclass(ConfigError, ValueError)  # argparse and pytest report a bad value as such
    assert issubclass(ModelLoadError, BackendError)
    assert all(issubclass(c, VideoError) for c in (VideoNotFoundError, VideoDecodeError, FrameRangeError))


@pytest.mark.parametrize("cls", [VideoError, VideoNotFoundError, VideoDecodeError, FrameRangeError])
def test_a_video_error_names_the_file_and_the_problem(cls, tmp_path):
    e = cls(tmp_path / "clip.mp4", "truncated after frame 12")
    assert str(e) == f"{tmp_path / 'clip.mp4'}: truncated after frame 12"
    assert (e.path, e.problem) == (str(tmp_path / "clip.mp4"), "truncated after frame 12")


def test_a_manifest_error_names_the_line_or_the_whole_file():
    assert str(ManifestError("data/m.jsonl", 7, "not JSON")) == "data/m.jsonl:7: not JSON"
    whole = ManifestError("data/m.jsonl", 0, "not UTF-8")
    assert str(whole) == "data/m.jsonl: not UTF-8" and whole.line == 0
