"""Exception types shared by every layer.

Each error names the item it is about (a parameter, a file, a manifest line, a
request) and what is wrong with it, so a user can act on the message alone.
"""

from __future__ import annotations


class PosbiasError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(PosbiasError, ValueError):
    """A bad option, a bad ``[tool.posbias]`` key or value, or a bad argument."""


class VideoError(PosbiasError):
    """A video cannot be used: missing, unreadable, truncated or too short."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class VideoNotFoundError(VideoError):
    """The video file does not exist."""


class VideoDecodeError(VideoError):
    """The file exists but no decoder can read it (empty, truncated, not a video)."""


class FrameRangeError(VideoError):
    """The clip has fewer frames than asked for, or the window lies outside it."""


class ManifestError(PosbiasError):
    """A manifest line is malformed; ``line`` is its 1-based number (0: the file as a whole, which
    the message then names without a line)."""

    def __init__(self, path: object, line: int, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        super().__init__(f"{self.path}:{line}: {problem}" if line else f"{self.path}: {problem}")


class BackendError(PosbiasError):
    """A model backend failed for a request (endpoint error, bad output)."""


class ModelLoadError(BackendError):
    """A model cannot be loaded; raised at start, never midway through a run."""


class JudgeError(PosbiasError):
    """A coverage judge returned something that is not the required JSON."""
