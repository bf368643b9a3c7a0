"""Frame specs and the frame store: what a model sees, named exactly and decoded once.

A :class:`FrameSpec` goes into the request key and the run log, so a request whose generation is
cached needs no decoding; the :class:`FrameStore` decodes on demand, caches (:func:`atomic_write_bytes`
for its PNG files) and records every unusable video as a :class:`~pytest_posbias.data.problems.DataProblem`.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..data.problems import DataProblem
from ..errors import VideoError
from .decode import VideoInfo, probe, read_frames_by, resize_frames, resized_shape
from .files import ChangedVideoError, TooShortError, problem_kind
from .pixel_ops import PixelOp, apply_pixel_op


@dataclass(frozen=True)
class Source:
    """A frame source: a clip (path + content hash) or a synthetic one (black / noise).

    ``decoder`` is the decoder the probe chose for the clip (``decord``, ``av`` or ``frames`` for an image
    folder; empty when unknown), recorded in the run log; frames decord then refuses are read by PyAV and
    cached as PyAV's. It is not part of the request key: decord and PyAV can differ by a few pixel levels
    (10-bit video), and an answer cached for the clip is the model's either way, as for the batch shape
    (:meth:`~pytest_posbias.engine.calls.Request.key`); the frame cache, which holds pixels, is kept per
    decoder (:meth:`FrameStore.frames`)."""

    kind: str  # "video" | "black" | "noise"
    sha256: str
    path: str = ""
    seed: int = 0
    decoder: str = field(default="", compare=False)

    def key(self) -> str:
        return self.sha256 if self.kind == "video" else f"{self.kind}:{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "sha256": self.sha256, "path": self.path, "seed": self.seed,
                **({"decoder": self.decoder} if self.decoder else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Source:
        return cls(str(d["kind"]), str(d["sha256"]), str(d.get("path", "")), int(d.get("seed", 0)),
                   str(d.get("decoder", "")))


@dataclass(frozen=True)
class FrameSpec:
    """Exactly which pixels a model sees: output frame j = ``sources[frames[j][0]]`` at
    frame index ``frames[j][1]``, resized by ``aspect``/``size``, then ``ops`` applied."""

    sources: tuple[Source, ...]
    frames: tuple[tuple[int, int], ...]
    size: int | None = 448
    aspect: str = "stretch"
    ops: tuple[PixelOp, ...] = ()
    fps: float = 0.0  # the source clip's frame rate (timestamps = index / fps)
    frame_count: int = 0  # frames in the primary source clip
    records: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)

    @classmethod
    def from_video(cls, path: str | Path, indices: Sequence[int], *, size: int | None = 448,
                   aspect: str = "stretch", info: VideoInfo | None = None) -> FrameSpec:
        """The spec of ``indices`` of one clip; a clip with fewer frames than the request raises
        :class:`TooShortError`. Indices a sampler repeats by its definition (``fps`` over a clip or
        window shorter than the budget in seconds: decimated to 1 per second, then ``endpoint`` over
        those) are kept, as the harness it reproduces sends them."""
        info = info or probe(path)
        if len(indices) > info.frame_count:
            raise TooShortError(path, f"too short for {len(indices)} frames: the clip has {info.frame_count} "
                                      f"(a short clip is not padded with repeated frames)")
        src = Source("video", info.sha256, str(path), decoder=info.backend)
        # a harness preset's provenance record goes into the run log, not into request keys
        rec = getattr(indices, "record", None)
        recs = (dict(rec),) if isinstance(rec, Mapping) else ()
        return cls((src,), tuple((0, int(i)) for i in indices), size, aspect, (), info.fps, info.frame_count,
                   records=recs)

    @classmethod
    def synthetic(cls, kind: str, count: int, *, size: int = 448, seed: int = 0) -> FrameSpec:
        """``count`` black or noise frames (the visual-input controls of VideoSTF table 2)."""
        if kind not in ("black", "noise"):
            raise VideoError(f"<{kind}>", "synthetic frame kind must be 'black' or 'noise'")
        src = Source(kind, kind, "", seed)
        return cls((src,), tuple((0, i) for i in range(count)), size, "stretch", (), 1.0, count)

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def indices(self) -> list[int]:
        """Frame indices of the output frames (in their own source clip)."""
        return [i for _, i in self.frames]

    @property
    def primary(self) -> Source:
        return self.sources[0]

    def with_frames(self, frames: Iterable[tuple[int, int]], *, sources: tuple[Source, ...] | None = None,
                    ops: tuple[PixelOp, ...] | None = None, record: Mapping[str, Any] | None = None) -> FrameSpec:
        recs = self.records + ((dict(record),) if record else ())
        return replace(self, frames=tuple((int(a), int(b)) for a, b in frames),
                       sources=self.sources if sources is None else sources,
                       ops=self.ops if ops is None else ops, records=recs)

    def _pixels(self) -> dict[str, Any]:
        return {"frames": [list(f) for f in self.frames], "size": self.size, "aspect": self.aspect,
                "ops": [o.to_dict() for o in self.ops]}

    def key(self) -> dict[str, Any]:
        """What identifies the pixels (content hashes, not paths): goes into request keys."""
        return {"sources": [s.key() for s in self.sources], **self._pixels()}

    def to_dict(self) -> dict[str, Any]:
        return {"sources": [s.to_dict() for s in self.sources], **self._pixels(), "fps": self.fps,
                "frame_count": self.frame_count, "records": [dict(r) for r in self.records]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FrameSpec:
        return cls(tuple(Source.from_dict(s) for s in d["sources"]), tuple((int(a), int(b)) for a, b in d["frames"]),
                   d.get("size"), str(d.get("aspect", "stretch")),
                   tuple(PixelOp.from_dict(o) for o in d.get("ops", [])), float(d.get("fps", 0.0)),
                   int(d.get("frame_count", 0)), tuple(d.get("records", [])))


_FrameKey = tuple[str, int, "int | None", str, str]  # content hash, frame index, size, aspect, decoder
DISK_WRITE_MIN_SECONDS = 0.02  # per decoded frame: below it the PNG cache costs more than it saves


class FrameStore:
    """Decodes frames once: per-frame in-memory LRU (bounded in bytes) + optional PNG disk cache.

    A decoded frame goes to the disk cache only when decoding cost at least ``disk_write_min_s``
    CPU seconds per frame (the process's CPU time, which the load of other processes does not
    stretch): a PNG round trip costs about as much as decoding a short clip's frame, while a seek
    into a long HD clip costs far more (``benchmarks/decode.py`` measures both); 0 caches every
    frame. ``decodes`` counts decoder calls, ``disk_writes`` the frames written.
    """

    def __init__(self, *, max_bytes: int = 1 << 30, disk_dir: str | Path | None = None,
                 on_problem: Callable[[DataProblem], None] | None = None,
                 disk_write_min_s: float = DISK_WRITE_MIN_SECONDS) -> None:
        if not disk_write_min_s >= 0:
            raise ValueError(f"`disk_write_min_s` must be >= 0 seconds per frame; got {disk_write_min_s!r}")
        self.disk_write_min_s = float(disk_write_min_s)
        self.max_bytes = int(max_bytes)
        self.on_problem = on_problem
        self.problems: dict[tuple[str, str], DataProblem] = {}  # (kind, path) -> the first problem of that kind
        self.disk_dir = Path(disk_dir) if disk_dir else None
        self._lru: OrderedDict[_FrameKey, NDArray[np.uint8]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.RLock()
        self._info: dict[str, VideoInfo] = {}
        self._unusable: dict[str, VideoError] = {}  # path -> why its probe failed
        self._read_by: dict[str, str] = {}  # path -> the decoder that read it, where not the probe's choice
        self._shapes: dict[tuple[str, int | None, str], tuple[int, int]] = {}  # (path, size, aspect) -> decoded (H, W)
        self.decodes = self.memory_hits = self.disk_hits = self.disk_writes = 0

    def report(self, exc: VideoError) -> None:
        """Record an unusable video once per (kind, file) and pass it to ``on_problem``."""
        kind = problem_kind(exc)
        problem = DataProblem(kind, exc.path, exc.problem, exc.path)
        with self._lock:
            if (kind, exc.path) in self.problems:
                return
            self.problems[(kind, exc.path)] = problem
        if self.on_problem is not None:
            self.on_problem(problem)

    def info(self, path: str | Path) -> VideoInfo:
        """Frame count, fps and content hash of a clip (probed once); an unusable clip is reported and raises,
        the same error again at each later call without opening the file again (a decoder's complaints about
        it are printed once)."""
        key = str(path)
        with self._lock:
            if key in self._info:
                return self._info[key]
            failed = self._unusable.get(key)
        if failed is not None:
            raise failed.with_traceback(None)
        try:
            got = probe(path)
        except VideoError as exc:
            self.report(exc)
            with self._lock:
                self._unusable[key] = exc
            raise
        with self._lock:
            return self._info.setdefault(key, got)

    def clip(self, path: str | Path, indices: Sequence[int], *, size: int | None = 448,
             aspect: str = "stretch") -> FrameSpec:
        """:meth:`FrameSpec.from_video` with the clip's info from this store; a clip that is unusable
        or too short for ``indices`` is reported (:meth:`report`) and raises."""
        info = self.info(path)
        try:
            return FrameSpec.from_video(path, indices, size=size, aspect=aspect, info=info)
        except VideoError as exc:
            self.report(exc)
            raise

    def _disk_path(self, key: _FrameKey) -> Path | None:
        if self.disk_dir is None:
            return None
        sha, idx, size, aspect, decoder = key
        return self.disk_dir / sha[:2] / sha / f"{size}-{aspect}-{decoder}" / f"{idx}.png"

    def _remember(self, key: _FrameKey, frame: NDArray[np.uint8]) -> None:
        with self._lock:
            if key in self._lru:
                self._lru.move_to_end(key)
                return
            self._lru[key] = frame
            self._bytes += frame.nbytes
            while self._bytes > self.max_bytes and self._lru:
                _, old = self._lru.popitem(last=False)
                self._bytes -= old.nbytes

    def frames(self, path: str | Path, sha: str, indices: Sequence[int], *, size: int | None,
               aspect: str) -> NDArray[np.uint8]:
        """Frames of one clip at ``indices`` (any order, repeats allowed). Cached frames are kept per decoder
        (the one this store's probe chooses for the clip, or the one that read them), so a cache shared by
        environments with and without decord never serves one decoder's pixels to the other. The clip is
        probed first: one deleted or changed since its frames were cached is reported, not served."""
        from PIL import Image

        info = self.info(path)
        if info.sha256 != sha:
            exc = ChangedVideoError(path, "changed after its frame request was made: the file now has another "
                                          "content hash than the one the request names")
            self.report(exc)
            raise exc
        with self._lock:
            decoder = self._read_by.get(str(path), info.backend)
        out: dict[int, NDArray[np.uint8]] = {}
        missing: list[int] = []
        shape = self._frame_shape(path, info, size, aspect)  # (H, W) its cached PNGs must have
        stale: set[int] = set()  # cached PNGs to decode again and rewrite
        for i in dict.fromkeys(int(x) for x in indices):
            key = (sha, i, size, aspect, decoder)
            with self._lock:
                hit = self._lru.get(key)
                if hit is not None:
                    self._lru.move_to_end(key)
                    self.memory_hits += 1
                    out[i] = hit
                    continue
            dp = self._disk_path(key)
            if dp is not None and dp.is_file():
                try:
                    arr = np.asarray(Image.open(dp).convert("RGB"), dtype=np.uint8)
                except OSError:
                    arr = None  # damaged cache file: decode again (and rewrite it)
                if arr is not None and arr.shape[:2] == shape:
                    with self._lock:
                        self.disk_hits += 1
                    self._remember(key, arr)
                    out[i] = arr
                    continue
                stale.add(i)  # damaged, or a frame of another resolution (an older cache, a copied folder)
            missing.append(i)
        if missing:
            with self._lock:
                self.decodes += 1
            started = time.process_time()  # CPU, not wall: a loaded machine must not make decoding look dear
            try:
                decoded, decoder = read_frames_by(path, missing, size=size, aspect=aspect, info=info)
            except VideoError as exc:
                self.report(exc)
                raise
            worth_storing = (time.process_time() - started) / len(missing) >= self.disk_write_min_s
            with self._lock:  # what this clip's frames decode to: the shape its cached PNGs must have
                self._shapes[(str(path), size, aspect)] = (int(decoded.shape[1]), int(decoded.shape[2]))
                if decoder != info.backend:  # decord refused them: later requests look among PyAV's frames
                    self._read_by[str(path)] = decoder
            for i, arr in zip(missing, decoded, strict=True):
                key = (sha, i, size, aspect, decoder)
                self._remember(key, arr)
                out[i] = arr
                dp = self._disk_path(key) if worth_storing or i in stale else None
                if dp is not None:
                    with self._lock:
                        self.disk_writes += 1
                    buf = io.BytesIO()
                    Image.fromarray(arr).save(buf, format="PNG", compress_level=1)
                    with contextlib.suppress(OSError):  # a cache that cannot be written (a full disk) costs a decode
                        atomic_write_bytes(dp, buf.getvalue())
        return np.stack([out[int(i)] for i in indices])

    def _frame_shape(self, path: str | Path, info: VideoInfo, size: int | None, aspect: str) -> tuple[int, int]:
        """(H, W) a cached PNG of the clip must have: as decoded in this store, else from its probed size."""
        if size is not None and aspect in ("stretch", "pad"):
            return size, size
        with self._lock:
            seen = self._shapes.get((str(path), size, aspect))
        return seen if seen is not None else resized_shape(info.height, info.width, size, aspect)

    def materialize(self, spec: FrameSpec) -> NDArray[np.uint8]:
        """The exact (N, H, W, 3) uint8 frames a spec names."""
        if not spec.frames:
            raise VideoError("<spec>", "frame spec names no frames")
        per_source: dict[int, list[int]] = {}
        for s, i in spec.frames:
            per_source.setdefault(s, []).append(i)
        decoded: dict[int, dict[int, NDArray[np.uint8]]] = {}
        for s, idx in per_source.items():
            src = spec.sources[s]
            if src.kind == "video":
                arr = self.frames(src.path, src.sha256, idx, size=spec.size, aspect=spec.aspect)
                decoded[s] = dict(zip(idx, arr, strict=True))
            else:
                decoded[s] = {i: _synthetic_frame(src, i, spec.size or 448) for i in idx}
        out = [decoded[s][i] for s, i in spec.frames]
        target = out[0].shape  # clips of different aspect under max-side/none: brought to the first frame's shape
        for j, f in enumerate(out):
            if f.shape != target:
                out[j] = resize_frames(f[None], max(target[:2]), "stretch")[0][: target[0], : target[1]]
        frames = np.stack(out)  # a new array: the ops below never touch the cached frames
        for op in spec.ops:
            frames = apply_pixel_op(frames, op)
        return frames


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a uniquely named temporary file in its folder and :func:`os.replace`:
    concurrent readers never see a partial file and concurrent writers never collide."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _synthetic_frame(src: Source, index: int, size: int) -> NDArray[np.uint8]:
    if src.kind == "black":
        return np.zeros((size, size, 3), dtype=np.uint8)
    rng = np.random.default_rng([src.seed, index])
    return rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
