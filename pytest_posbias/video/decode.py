"""Video decoding: decord first, PyAV as fallback; content hashes; frames resized to a target.

Every error is a :class:`~pytest_posbias.errors.VideoError` naming the path and the problem.
Resizing policy (recorded with every frame request):

* ``stretch`` — resize to exactly ``size × size`` (the multi-video paper's 448×448);
* ``pad`` — keep the aspect ratio, fit inside ``size × size``, pad with black;
* ``max-side`` — keep the aspect ratio, longer side at most ``size`` px, never upscale
  (the phase paper's 360 px);
* ``none`` — keep the decoded resolution.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from ..errors import FrameRangeError, VideoDecodeError, VideoError, VideoNotFoundError
from .files import (
    FRAME_FOLDER_FPS,
    ChangedVideoError,
    TruncatedVideoError,
    check_video_path,
    folder_fps,
    frame_files,
    has_container_signature,
    nul_problem,
)

_T = TypeVar("_T")

ASPECTS = ("stretch", "pad", "max-side", "none")
DEFAULT_SIZE = 448

_hash_lock = threading.Lock()
_hash_memo: dict[tuple[object, ...], str] = {}


def content_hash(path: str | os.PathLike[str]) -> str:
    """SHA-256 of the file's bytes (hex), memoised per (absolute path, size, mtime): a video's
    identity in cache keys and run logs. A frame folder hashes its frames' names and bytes and,
    when it is not the default :data:`FRAME_FOLDER_FPS`, its frame rate (the model is sent it),
    memoised per the frames' names, sizes and mtimes."""
    p = Path(path)
    try:
        st = p.stat()
        if p.is_dir():
            fps = folder_fps(p)
            files = frame_files(p)
            key: tuple[object, ...] = (str(p.resolve()), fps, *((f.name, *_size_mtime(f)) for f in files))
        else:
            key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        raise VideoNotFoundError(p, "file does not exist") from None
    except OSError as exc:
        raise VideoDecodeError(p, f"cannot stat file ({exc})") from None
    except ValueError:
        raise nul_problem(p) from None
    with _hash_lock:
        if key in _hash_memo:
            return _hash_memo[key]
    if p.is_dir():
        h = hashlib.sha256(b"frame-folder")
        try:
            for f in files:
                h.update(f.name.encode())
                h.update(f.read_bytes())
        except OSError as exc:
            raise VideoDecodeError(p, f"cannot read a frame image ({exc})") from None
        if fps != FRAME_FOLDER_FPS:
            h.update(f"fps={fps!r}".encode())
        digest = h.hexdigest()
    else:
        try:
            with p.open("rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError as exc:
            raise VideoDecodeError(p, f"cannot read file ({exc})") from None
    with _hash_lock:
        _hash_memo[key] = digest
    return digest


def _size_mtime(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


@dataclass(frozen=True)
class VideoInfo:
    """What a decoder reports about a clip."""

    path: str
    sha256: str
    frame_count: int
    fps: float
    duration: float
    width: int
    height: int
    backend: str


def _optional(name: str) -> Any | None:
    """The module ``name`` (decord, av), or None when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _with_decord(path: Path, use: Callable[..., _T], *args: Any) -> _T | None:
    """``use(reader, *args)`` with a decord reader of ``path``; None when decord is missing or refuses the file."""
    decord = _optional("decord")
    if decord is None:
        return None
    try:
        return use(decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1), *args)
    except (RuntimeError, OSError, ValueError, IndexError, getattr(decord, "DECORDError", RuntimeError)):
        return None  # what decord raises for a file it cannot read (its DECORDError is no RuntimeError)


def _decord_info(vr: Any) -> tuple[int, float, int, int]:
    n = len(vr)
    h, w = vr[0].shape[:2] if n > 0 else (0, 0)
    return n, float(vr.get_avg_fps()), int(w), int(h)


def _probe_av(path: Path) -> tuple[int, float, int, int]:
    av = _optional("av")
    if av is None:
        raise VideoDecodeError(path, "no decoder available: install the `video` extra (decord, av)")
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoDecodeError(path, "file has no video stream")
            stream = container.streams.video[0]
            fps = float(stream.average_rate or stream.guessed_rate or 0.0)
            # the frames shown, counted as _read_av indexes them (no decoding): the container's frame count
            # includes the packets an edit list hides (a stream-copy cut), which are never shown
            hidden = [bool(getattr(pkt, "is_discard", False)) for pkt in container.demux(stream) if pkt.size]
            _check_whole(path, container.format.name)
            # a file cut short after its index: the demuxer stops where the data ends; the frames the index lists
            # beyond it are counted, so a request for them fails as truncated, not as a shorter clip
            n = hidden.count(False) + max(0, stream.frames - len(hidden))
            return n, fps, int(stream.codec_context.width), int(stream.codec_context.height)
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        if has_container_signature(path):
            raise TruncatedVideoError(path, f"truncated or damaged: the file starts like a video container but cannot "
                                            f"be read ({type(exc).__name__}: {exc})") from None
        raise VideoDecodeError(path, f"not a readable video: no known container signature "
                                     f"({type(exc).__name__}: {exc})") from None


class _EndsEarly(TruncatedVideoError):
    """The file ends inside the structure its own headers declare."""


def _ebml_number(fh: Any, *, keep_marker: bool) -> tuple[int, int]:
    """An EBML variable-length number at the file position: (value, its length in bytes); an element ID keeps
    its length marker bit, a size does not. (-1, 0) at the end of the file."""
    first = fh.read(1)
    if not first or first[0] == 0:
        return -1, 0
    n = 9 - first[0].bit_length()
    value = int.from_bytes(first + fh.read(n - 1), "big")
    return (value if keep_marker else value & ((1 << (7 * n)) - 1)), n


def _check_whole(path: Path, format_name: str) -> None:
    """Raise :class:`TruncatedVideoError` when a Matroska/WebM, FLV or MPEG-TS file ends inside its own
    structure: a Matroska Segment that declares more bytes than the file holds, an FLV whose tags do not end
    exactly at the end of the file, or a transport stream whose last packet is cut short. These containers
    keep no frame count, so a file cut short would otherwise probe as a shorter clip; which frames were lost
    cannot be told, so the whole clip is lost. A Matroska Segment of unknown size (a live recording) is not
    checked, and an FLV or MPEG-TS file cut exactly at a tag or packet boundary cannot be told from a whole one."""
    names = set(format_name.split(","))
    size = path.stat().st_size
    with path.open("rb") as fh:
        if "matroska" in names:
            for want in (0x1A45DFA3, 0x18538067):  # the EBML header, then the Segment
                ident, _ = _ebml_number(fh, keep_marker=True)
                length, n = _ebml_number(fh, keep_marker=False)
                if ident != want or n == 0 or length == (1 << (7 * n)) - 1:
                    return  # not the layout checked here, or a Segment of unknown size
                if want == 0x1A45DFA3:
                    fh.seek(length, os.SEEK_CUR)
            if fh.tell() + length > size:
                raise _EndsEarly(path, f"truncated: its Segment declares {fh.tell() + length} bytes, the file holds "
                                       f"{size}")
        elif "flv" in names:
            header = fh.read(9)
            at = int.from_bytes(header[5:9], "big") + 4 if len(header) == 9 else size
            while at + 11 <= size:  # each tag: 11 header bytes (its data size in bytes 1-3), data, 4-byte size
                fh.seek(at)
                at += 11 + int.from_bytes(fh.read(4)[1:4], "big") + 4
            if at != size:
                raise _EndsEarly(path, f"truncated: its last tag ends at byte {at}, the file holds {size}")
        elif "mpegts" in names:
            _check_transport_stream(path, fh, size)


def _check_transport_stream(path: Path, fh: Any, size: int) -> None:
    """Raise :class:`TruncatedVideoError` when the last packet of an MPEG-TS file is cut short: 188-byte packets,
    or 192 in M2TS (a 4-byte timestamp before each), found where their sync bytes (0x47) repeat, from a file that
    may start mid-packet. Bytes after the last whole packet that do not start a packet (padding) are no cut."""
    head = fh.read(4 * 192)
    found = next(((n, at) for at in range(192) for n in (188, 192)
                  if all(head[at + k * n:at + k * n + 1] == b"\x47" for k in range(3))), None)
    if found is None:
        return  # not a layout checked here (too short, or no repeating sync bytes)
    n, at = found
    tail = (size - (at - (n - 188))) % n  # bytes after the last whole packet
    sync = size - tail + n - 188  # where a packet cut among them has its sync byte
    if tail:
        fh.seek(min(sync, size - 1))
        if sync >= size or fh.read(1) == b"\x47":
            raise _EndsEarly(path, f"truncated: its last {n}-byte transport packet ends at byte {size - tail + n}, the "
                                   f"file holds {size}")


def _decord_misreads(path: Path, count: int) -> bool:
    """Whether decord would not give this clip's frames shown, as measured against PyAV: it counts the packets
    an edit list hides (a stream-copy cut) as frames, and its seeks land on other frames in AVI and in MPEG-4
    Part 2 with B-frames. Such a clip is read with PyAV; a clip PyAV cannot open stays with decord."""
    av = _optional("av")
    if av is None:
        return False
    try:
        with av.open(str(path)) as container:
            codec = container.streams.video[0].codec_context if container.streams.video else None
            if codec is None:
                return False
            if "avi" in container.format.name.split(",") or (codec.name == "mpeg4" and codec.has_b_frames):
                return True
        return _probe_av(path)[0] != count
    except _EndsEarly:
        raise
    except (av.error.FFmpegError, OSError, ValueError, VideoError):
        return False


def probe(path: str | os.PathLike[str]) -> VideoInfo:
    """Frame count, fps, duration and size of a clip (decord, else PyAV; PyAV where decord misreads it)."""
    p = Path(path)
    check_video_path(p)
    sha = content_hash(p)
    if p.is_dir():
        from PIL import Image

        files = frame_files(p)
        fps = folder_fps(p)
        try:
            w, h = Image.open(files[0]).size
        except OSError as exc:
            raise VideoDecodeError(files[0], f"not a readable image ({exc})") from None
        return VideoInfo(str(p), sha, len(files), fps, len(files) / fps, w, h, "frames")
    got = _with_decord(p, _decord_info)
    if got is not None and _decord_misreads(p, got[0]):
        got = None
    backend = "av" if got is None else "decord"
    n, fps, w, h = _probe_av(p) if got is None else got
    if n <= 0:
        raise VideoDecodeError(p, "video stream has no frames")
    if fps <= 0:
        raise VideoDecodeError(p, "video stream reports no frame rate")
    return VideoInfo(str(p), sha, n, fps, n / fps, w, h, backend)


def resized_shape(height: int, width: int, size: int | None, aspect: str) -> tuple[int, int]:
    """(H, W) of a ``height`` x ``width`` frame after :func:`resize_frames` with ``size`` and ``aspect``."""
    if aspect not in ASPECTS:
        raise VideoError("<frames>", f"`aspect` must be one of {', '.join(ASPECTS)}; got {aspect!r}")
    if aspect == "none" or size is None or (aspect == "max-side" and size >= max(height, width)):
        return int(height), int(width)
    return (size, size) if aspect == "pad" else _scaled_shape(height, width, size, aspect)


def _scaled_shape(h: int, w: int, size: int, aspect: str) -> tuple[int, int]:
    """(H, W) of the resized image before any padding: ``size`` square for stretch, else the
    longer side scaled to ``size`` with the aspect ratio kept (each side rounded, at least 1)."""
    if aspect == "stretch":
        return size, size
    scale = size / max(h, w)
    return max(1, round(h * scale)), max(1, round(w * scale))


def resize_frames(frames: NDArray[np.uint8], size: int | None, aspect: str) -> NDArray[np.uint8]:
    """Resize (N, H, W, 3) uint8 frames by the named aspect policy (bilinear, PIL)."""
    from PIL import Image

    n, h, w = frames.shape[:3]
    if resized_shape(h, w, size, aspect) == (h, w) or size is None or n == 0:
        return frames
    th, tw = _scaled_shape(h, w, size, aspect)
    out = np.stack([np.asarray(Image.fromarray(f).resize((tw, th), Image.Resampling.BILINEAR)) for f in frames])
    if aspect == "pad":
        canvas = np.zeros((n, size, size, 3), dtype=np.uint8)
        y0, x0 = (size - th) // 2, (size - tw) // 2
        canvas[:, y0 : y0 + th, x0 : x0 + tw] = out
        return canvas
    return out


def _decord_batch(vr: Any, indices: list[int]) -> NDArray[np.uint8] | None:
    if max(indices) >= len(vr):
        return None
    return np.ascontiguousarray(vr.get_batch(indices).asnumpy(), dtype=np.uint8)


def _decode_to(frames: Any, idx: int, target: int, order: dict[int, int]) -> tuple[int, NDArray[np.uint8] | None]:
    """Decode on from ``frames`` (index ``idx`` last seen) to frame ``target``: the last index seen and the
    target as RGB, or None when the decoder passed it or ended. A frame's index is its timestamp's place in
    ``order``, or one more than the last without timestamps."""
    for frame in frames:
        idx = idx + 1 if not order else order.get(frame.pts, -1)
        if idx == target:
            return idx, frame.to_ndarray(format="rgb24")
        if idx > target:
            break
    return idx, None


def _read_av(path: Path, indices: list[int], fps: float) -> NDArray[np.uint8]:
    """Exact frame indices with PyAV: sequential decode, seeking to a keyframe for long gaps.

    Frame k is the k-th frame in presentation order (as decord and the probe's count have it), found
    by its packet timestamp, never by ``k / fps``: on a variable-frame-rate clip that names another frame.
    """
    av = _optional("av")
    if av is None:
        raise VideoDecodeError(path, "decord could not read the file and PyAV is not installed")
    wanted = sorted(set(indices))
    got: dict[int, NDArray[np.uint8]] = {}
    try:
        with av.open(str(path)) as container, contextlib.ExitStack() as reopened:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            # the frames shown: a packet an edit list hides (a stream-copy cut's lead-in) is decoded, never shown
            shown = [(pkt.pts, pkt.is_keyframe) for pkt in container.demux(stream)
                     if pkt.size and not getattr(pkt, "is_discard", False)]
            # presentation timestamp -> frame index; without timestamps, count frames from the start
            order = {} if any(t is None for t, _ in shown) else {t: k for k, (t, _) in enumerate(sorted(shown))}
            pts = sorted(order)
            keys = sorted(t for t, key in shown if key) if order else []

            def landing(target: int) -> int:
                """Where to seek for ``target``: the last keyframe at or before it. A seek to the frame's own
                timestamp lands after it where the demuxer searches by byte position (MPEG-TS) or past its
                last index entry (FLV)."""
                if not order or target >= len(pts):
                    return 0
                return max((t for t in keys if t <= pts[target]), default=pts[0])

            def decode_from(ts: int) -> Any:
                container.seek(ts, stream=stream, backward=True, any_frame=False)
                return container.decode(stream)

            idx, it = -1, None
            for target in wanted:
                # a long gap is sought only across a keyframe: seeking to the keyframe already passed would
                # decode again the frames between it and the one last decoded
                sought = it is None or bool(order and target < len(pts) and target - idx > 2 * max(1, int(fps * 2))
                                            and (idx < 0 or landing(target) > pts[idx]))
                if sought:  # seek to a keyframe before the target and decode forward
                    idx, it = -1, decode_from(landing(target))
                idx, frame = _decode_to(it, idx, target, order)
                if frame is None and sought and order:  # the seek landed past the target: decode from the start
                    # of a new reader, as a seek to the first keyframe can land past it too (MPEG-TS)
                    idx, it = -1, reopened.enter_context(av.open(str(path))).decode(video=0)
                    idx, frame = _decode_to(it, idx, target, order)
                if frame is not None:
                    got[target] = frame
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        if not got:
            check_video_path(path)  # a file deleted, emptied or locked meanwhile is that problem, not a truncation
            raise TruncatedVideoError(path, f"truncated or damaged: decoding failed ({type(exc).__name__}: "
                                            f"{exc})") from None
    missing = [i for i in wanted if i not in got]
    if missing:
        raise TruncatedVideoError(path, f"truncated or damaged: frames {missing[:5]}"
                                        f"{'...' if len(missing) > 5 else ''} could not be decoded")
    return np.stack([got[i] for i in indices]).astype(np.uint8)


def read_frames(path: str | os.PathLike[str], indices: list[int] | tuple[int, ...], *, size: int | None = DEFAULT_SIZE,
                aspect: str = "stretch", info: VideoInfo | None = None, backend: str = "auto") -> NDArray[np.uint8]:
    """Frames at exactly ``indices`` as (N, H, W, 3) uint8, resized by ``aspect``/``size``. ``backend``:
    ``auto`` (decord, PyAV when decord is missing or refuses or ``info`` names PyAV), ``decord`` or ``av``."""
    return read_frames_by(path, indices, size=size, aspect=aspect, info=info, backend=backend)[0]


def read_frames_by(path: str | os.PathLike[str], indices: list[int] | tuple[int, ...], *,
                   size: int | None = DEFAULT_SIZE, aspect: str = "stretch", info: VideoInfo | None = None,
                   backend: str = "auto") -> tuple[NDArray[np.uint8], str]:
    """:func:`read_frames` and the decoder that read them (``decord``, ``av`` or ``frames``): under ``auto``,
    PyAV where decord refuses frames of a clip it probed."""
    p = Path(path)
    if backend not in ("auto", "decord", "av"):
        raise VideoError(p, f"`backend` must be 'auto', 'decord' or 'av'; got {backend!r}")
    idx = [int(i) for i in indices]
    if not idx:
        raise FrameRangeError(p, "no frame indices requested")
    if info is None:
        info = probe(p)
    elif content_hash(p) != info.sha256:  # cheap: memoised per size and mtime
        raise ChangedVideoError(p, "changed since it was probed: its content no longer has the content hash the "
                                   "frame request names")
    bad = [i for i in idx if i < 0 or i >= info.frame_count]
    if bad:
        raise FrameRangeError(p, f"clip has {info.frame_count} frames; requested indices outside [0, "
                                 f"{info.frame_count - 1}]: {bad[:5]}")
    if p.is_dir():
        from PIL import Image

        files = frame_files(p)
        if len(files) != info.frame_count:
            raise ChangedVideoError(p, f"changed since it was probed: the folder holds {len(files)} frame images, "
                                       f"{info.frame_count} when probed")
        try:
            imgs = [np.asarray(Image.open(files[i]).convert("RGB"), dtype=np.uint8) for i in idx]
        except OSError as exc:
            raise VideoDecodeError(p, f"a frame image is not readable ({exc})") from None
        if len({a.shape for a in imgs}) > 1:
            imgs = [resize_frames(a[None], max(imgs[0].shape[:2]), "stretch")[0] for a in imgs]
        return resize_frames(np.stack(imgs), size, aspect), "frames"
    use_av = backend == "av" or (backend == "auto" and info.backend == "av")  # a clip decord misreads too
    frames = None if use_av else _with_decord(p, _decord_batch, idx)
    if frames is not None:
        return resize_frames(frames, size, aspect), "decord"
    if backend == "decord":
        raise VideoDecodeError(p, "decord could not decode the requested frames")
    return resize_frames(_read_av(p, idx, info.fps), size, aspect), "av"
