"""A video's file, before any decoding: the kinds of video error a unit is lost with, and what the file
system alone says of a path (missing, not openable, empty, a frame folder, a container signature).

The manifest loader checks every video path with :func:`check_video_path`; :mod:`.decode` checks again
when it opens the file, so a file that vanished or changed meanwhile is that problem, not a decoding one.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
from pathlib import Path

from ..errors import FrameRangeError, VideoDecodeError, VideoError, VideoNotFoundError


class EmptyVideoError(VideoDecodeError):
    """The video file has no bytes."""


class TruncatedVideoError(VideoDecodeError):
    """The file starts like a video container but cannot be read to the end (cut short or damaged)."""


class InaccessibleVideoError(VideoDecodeError):
    """The path cannot be opened: permission denied, a symbolic link loop, a name too long for the file system."""


class ChangedVideoError(VideoDecodeError):
    """The file (or frame folder) at a clip's path no longer holds the content it was probed and hashed with."""


class TooShortError(FrameRangeError):
    """The clip has fewer frames than a request asks for (docs/design.md section 8: never padded with repeats)."""


def problem_kind(exc: VideoError) -> str:
    """The data-problem kind of a video error (see :data:`pytest_posbias.data.problems.PROBLEM_KINDS`)."""
    for cls, kind in ((VideoNotFoundError, "missing-video"), (EmptyVideoError, "empty-video"),
                      (InaccessibleVideoError, "inaccessible-video"),
                      (TruncatedVideoError, "truncated-video"), (ChangedVideoError, "changed-video"),
                      (TooShortError, "too-short"),
                      (VideoDecodeError, "unreadable-video")):
        if isinstance(exc, cls):
            return kind
    return "other"


def has_container_signature(path: Path) -> bool:
    """Whether the file starts like a video container (MP4/MOV, Matroska/WebM, AVI, FLV, MPEG-PS/TS,
    Ogg): an unreadable file with one is truncated or damaged, one without is not a video."""
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
            fh.seek(188)
            ts = fh.read(1)
    except OSError:
        return False
    return (head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip")
            or head.startswith((b"\x1a\x45\xdf\xa3", b"FLV", b"OggS", b"\x00\x00\x01\xba"))
            or (head.startswith(b"RIFF") and head[8:12] == b"AVI ")
            or (head[:1] == b"\x47" and ts == b"\x47"))

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
FRAME_FOLDER_FPS = 3.0  # MVBench stores some tasks as JPEG frames at 3 fps; override with an fps.txt in the folder


def frame_files(folder: Path) -> list[Path]:
    """Image files of a frame folder, in natural order (frame 2 before frame 10)."""
    return sorted((f for f in folder.iterdir() if f.suffix.lower() in IMAGE_EXTS),
                  key=lambda p: tuple((0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", p.name)))

def folder_fps(folder: Path) -> float:
    """A frame folder's frame rate: the number in its ``fps.txt``, else :data:`FRAME_FOLDER_FPS`; an
    ``fps.txt`` that is not a positive finite number is a :class:`VideoDecodeError` naming it."""
    fps_file = folder / "fps.txt"
    if not fps_file.is_file():
        return FRAME_FOLDER_FPS
    try:
        text = fps_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise VideoDecodeError(fps_file, f"cannot read the frame folder's frame rate ({exc})") from None
    try:
        fps = float(text)
    except ValueError:
        fps = math.nan
    if not (math.isfinite(fps) and fps > 0):
        raise VideoDecodeError(fps_file, f"must hold the frame folder's frame rate, a positive finite number of "
                                         f"frames per second; got {text!r}")
    return fps


def nul_problem(path: Path) -> VideoError:
    """The error for a path holding a NUL character, which no file system accepts (shown escaped)."""
    return InaccessibleVideoError(str(path).replace("\x00", "\\x00"),
                                  "cannot be opened: the path holds a NUL character (\\x00)")


LONG_PATH = 200  # characters of a path shown whole in a message; a longer one is shortened (:func:`short_path`)


def short_path(path: str | os.PathLike[str], *, limit: int = LONG_PATH) -> str:
    """``path`` as text for a message: whole up to ``limit`` characters, else its two ends (``limit // 2 - 20``
    characters each) around the count of characters left out."""
    text = str(path)
    if len(text) <= limit:
        return text
    keep = max(10, limit // 2 - 20)
    return f"{text[:keep]}[... {len(text) - 2 * keep} characters ...]{text[-keep:]}"


def _os_problem(exc: OSError, path: Path) -> VideoError:
    """The video error for an ``OSError`` met while looking at ``path`` (before any decoding)."""
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        dangling = code == errno.ENOENT and os.path.islink(path)
        link = " (a symbolic link to a missing target)" if dangling else ""
        return VideoNotFoundError(path, "file does not exist" + link)
    if code == errno.ELOOP:
        return InaccessibleVideoError(path, "cannot be opened: a symbolic link loop (too many levels of symbolic "
                                            "links)")
    if code == errno.ENAMETOOLONG:
        longest = max((len(part.encode("utf-8", "surrogateescape")) for part in path.parts), default=0)
        return InaccessibleVideoError(path, f"cannot be opened: the path is too long for the file system "
                                            f"({len(str(path))} characters, longest name {longest} bytes)")
    if code in (errno.EACCES, errno.EPERM):
        return InaccessibleVideoError(path, "cannot be opened: permission denied (a folder on the path cannot be "
                                            "searched, or the file cannot be read)")
    return InaccessibleVideoError(path, f"cannot be opened: {exc.strerror or exc}")


def check_video_path(path: str | os.PathLike[str]) -> None:
    """Raise the :class:`~pytest_posbias.errors.VideoError` saying why ``path`` cannot be a video, from
    the file system alone: missing (a dangling link too), not openable (:class:`InaccessibleVideoError`),
    neither a regular file nor a frame folder, or empty (:class:`EmptyVideoError`). The manifest loader
    and :func:`probe` call it, so a unit needing such a video is planned and lost with this reason."""
    p = Path(path)
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            if not os.access(p, os.R_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "permission denied")
            if not frame_files(p):
                raise VideoDecodeError(p, "folder holds no frame images")
            return
        if not stat.S_ISREG(st.st_mode):
            raise VideoDecodeError(p, "not a regular file")
        if st.st_size == 0:
            raise EmptyVideoError(p, "file is empty (0 bytes)")
        if not os.access(p, os.R_OK):
            raise PermissionError(errno.EACCES, "permission denied")
    except OSError as exc:
        raise _os_problem(exc, p) from None
    except ValueError:  # os.stat of a path holding a NUL character
        raise nul_problem(p) from None
