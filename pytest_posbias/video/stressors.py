"""Temporal stressors and controls (VideoSTF §3.3, appendix C.4; docs/design.md section 4).

Every stressor works on the sampled frame list of length T, a (T, H, W, 3) uint8 array or a
:class:`~.frames.FrameSpec` (then nothing is decoded: the spec records the new order and any seeded
pixel operation), takes an explicit ``numpy.random.Generator`` and returns a :class:`StressResult`
whose ``record`` says exactly what was done, for the run log. Where VideoSTF is silent, each
function's docstring states the decision taken.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError
from .frames import FrameSpec
from .pixel_ops import PixelOp, apply_pixel_op
from .sampling import _check_counts, frame_indices

Frames = NDArray[np.uint8] | FrameSpec

STRESSORS = ("add1", "add2", "delete1", "delete2", "replace1", "replace2", "reverse", "shuffle")

@dataclass(frozen=True)
class StressResult:
    """New frames (array or spec) and the record of what the stressor did."""

    frames: Frames
    record: dict[str, Any]


def _check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(f"`rng` must be a numpy.random.Generator; got {type(rng).__name__}")
    return rng


def _length(frames: Frames) -> int:
    if isinstance(frames, FrameSpec):
        return len(frames)
    arr = np.asarray(frames)
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise ConfigError(f"`frames` must be a (T, H, W, 3) array or a FrameSpec; got shape {arr.shape}")
    return int(arr.shape[0])


def _check_k(k: int, T: int, *, name: str, need: int = 0) -> None:
    _check_counts(k=k)
    if k > T - need:
        raise ConfigError(f"`k` = {k} is too large for {name} on {T} frames")


def _gather(frames: Frames, order: Sequence[int | tuple[str, int]], foreign: Frames | None,
            record: dict[str, Any]) -> StressResult:
    """Output frame j = frames[order[j]] or foreign[q] for order[j] = ("foreign", q)."""
    if isinstance(frames, FrameSpec):
        if foreign is not None and not isinstance(foreign, FrameSpec):
            raise ConfigError("`foreign` must be a FrameSpec when `frames` is a FrameSpec")
        fspec = foreign if isinstance(foreign, FrameSpec) else None
        shifted = [] if fspec is None else [(s + len(frames.sources), i) for s, i in fspec.frames]
        out = [shifted[o[1]] if isinstance(o, tuple) else frames.frames[o] for o in order]
        sources = frames.sources + (fspec.sources if fspec is not None else ())
        ops = _follow(frames.ops, order, False) + (_follow(fspec.ops, order, True) if fspec is not None else ())
        return StressResult(frames.with_frames(out, sources=sources, ops=ops, record=record), record)
    arr = np.asarray(frames)
    far = None if foreign is None else np.asarray(foreign)
    pieces = [far[o[1]] if isinstance(o, tuple) else arr[o] for o in order]  # type: ignore[index]
    return StressResult(np.stack(pieces).astype(np.uint8), record)


def _follow(ops: tuple[PixelOp, ...], order: Sequence[int | tuple[str, int]], foreign: bool) -> tuple[PixelOp, ...]:
    """A spec's pixel operations re-pointed at the output positions that now show the frames they touched
    (as the array path, which applied them before the frames moved; seeded noise and cutout draw their pattern
    from the new position); one left with no frame is dropped."""
    moved = (PixelOp(op.name, tuple(j for j, o in enumerate(order) if isinstance(o, tuple) == foreign
                                    and (o[1] if isinstance(o, tuple) else o) in op.positions), op.params)
             for op in ops)
    return tuple(op for op in moved if op.positions)


def add(frames: Frames, k: int, *, rng: np.random.Generator) -> StressResult:
    """Add(k): insert copies of k distinct random sampled frames at random positions (T → T + k)."""
    _check_rng(rng)
    T = _length(frames)
    _check_k(k, T, name="add")
    src = [int(x) for x in rng.choice(T, size=k, replace=False)]
    order: list[int | tuple[str, int]] = list(range(T))
    inserted_at = []
    for s in src:
        pos = int(rng.integers(0, len(order) + 1))
        order.insert(pos, s)
        inserted_at.append(pos)
    rec = {"stressor": f"add{k}", "k": k, "source_positions": src, "insert_positions": inserted_at,
           "order": list(order)}
    return _gather(frames, order, None, rec)


def delete(frames: Frames, k: int, *, rng: np.random.Generator) -> StressResult:
    """Delete(k): remove k distinct random positions (T → T − k)."""
    _check_rng(rng)
    T = _length(frames)
    _check_k(k, T, name="delete", need=1)
    return _deleted(frames, T, sorted(int(x) for x in rng.choice(T, size=k, replace=False)))


def _deleted(frames: Frames, T: int, gone: list[int]) -> StressResult:
    order = [i for i in range(T) if i not in gone]
    return _gather(frames, order, None, {"stressor": f"delete{len(gone)}", "k": len(gone), "deleted_positions": gone,
                                         "order": order})


def delete_all(frames: Frames) -> list[StressResult]:
    """Delete(1), exhaustive: the T variants that each remove one sampled frame."""
    T = _length(frames)
    _check_k(1, T, name="delete", need=1)
    return [_deleted(frames, T, [p]) for p in range(T)]


def replace(frames: Frames, k: int, *, rng: np.random.Generator) -> StressResult:
    """Replace(k): copy k distinct sampled frames over k other distinct positions (VideoSTF
    ``ReplaceOneFrame`` / ``ReplaceTwoFrames``): k sources drawn without replacement, then k targets
    among the T − k non-sources, target j receiving source j; no source is overwritten (T >= 2k).
    """
    _check_rng(rng)
    T = _length(frames)
    _check_k(k, T, name="replace", need=k)
    sources = [int(x) for x in rng.choice(T, size=k, replace=False)]
    rest = np.array([i for i in range(T) if i not in sources])
    targets = [int(x) for x in rng.choice(rest, size=k, replace=False)]
    order: list[int | tuple[str, int]] = list(range(T))
    for t, s in zip(targets, sources, strict=True):
        order[t] = s
    pairs = sorted(zip(targets, sources, strict=True))
    return _gather(frames, order, None, {"stressor": f"replace{k}", "k": k, "positions": [t for t, _ in pairs],
                                         "source_positions": [s for _, s in pairs], "order": order})


def replace_foreign(frames: Frames, foreign: Frames, k: int, *, rng: np.random.Generator,
                    positions: Sequence[int] | None = None) -> StressResult:
    """Replace k positions (``positions``, else drawn) with frames of another video's sample (VideoSTF
    appendix C.4)."""
    _check_rng(rng)
    T = _length(frames)
    F = _length(foreign)
    _check_k(k, T, name="replace_foreign")
    given = rng.choice(T, size=k, replace=False) if positions is None else list(positions)
    ints = all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in given)
    targets = sorted({int(p) for p in given}) if ints else []  # k >= 1: non-integers fail the count
    if len(targets) != k or any(not 0 <= p < T for p in targets):
        raise ConfigError(f"`positions` must be {k} distinct positions in [0, {T - 1}]; got {positions!r}")
    order: list[int | tuple[str, int]] = list(range(T))
    used = [int(rng.integers(0, F)) for _ in targets]
    for t, q in zip(targets, used, strict=True):
        order[t] = ("foreign", q)
    rec = {"stressor": "foreign", "k": k, "positions": targets, "foreign_positions": used,
           "order": [o if isinstance(o, int) else f"foreign:{o[1]}" for o in order]}
    return _gather(frames, order, foreign, rec)


def reverse(frames: Frames) -> StressResult:
    """Reverse: the sampled frames in reverse order."""
    T = _length(frames)
    order = list(range(T - 1, -1, -1))
    return _gather(frames, order, None, {"stressor": "reverse", "order": order})


def shuffle(frames: Frames, *, rng: np.random.Generator) -> StressResult:
    """Shuffle: a random permutation of the sampled frames (never the identity for T >= 2)."""
    _check_rng(rng)
    T = _length(frames)
    perm = [int(x) for x in rng.permutation(T)]
    tries = 0
    while T >= 2 and perm == list(range(T)) and tries < 100:
        perm = [int(x) for x in rng.permutation(T)]
        tries += 1
    return _gather(frames, perm, None, {"stressor": "shuffle", "order": perm})


def _check_clip(spec: FrameSpec, name: str) -> None:
    if not isinstance(spec, FrameSpec) or spec.frame_count <= 0:
        raise ConfigError(f"`spec` must be a FrameSpec of a clip ({name} needs the clip's frame count)")


def _resampled(spec: FrameSpec, idx: list[int], rec: dict[str, Any]) -> StressResult:
    return StressResult(spec.with_frames([(0, i) for i in idx], sources=spec.sources[:1], ops=(), record=rec), rec)


def resample(spec: FrameSpec, count: int, *, convention: str = "videostf") -> StressResult:
    """Count-matched control: re-sample the clip uniformly at ``count`` frames (VideoSTF table 8)."""
    _check_clip(spec, "resample")
    idx = frame_indices(spec.frame_count, count, convention=convention)
    return _resampled(spec, idx, {"stressor": "resample", "count": count, "convention": convention, "indices": idx})


def speed(spec: FrameSpec, factor: int = 2, *, convention: str = "videostf") -> StressResult:
    """2× speed re-sample: keep every ``factor``-th clip frame, re-sample at the same count (real order)."""
    _check_clip(spec, "speed")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
        raise ConfigError(f"`factor` must be an integer >= 2; got {factor!r}")
    fast_len = (spec.frame_count + factor - 1) // factor
    idx = [factor * i for i in frame_indices(fast_len, len(spec), convention=convention)]
    return _resampled(spec, idx, {"stressor": f"speed{factor}", "factor": factor, "indices": idx})


def _pixel(frames: Frames, op: PixelOp) -> StressResult:
    T = _length(frames)
    if any(not 0 <= p < T for p in op.positions):
        raise ConfigError(f"`positions` must lie in [0, {T - 1}]; got {list(op.positions)}")
    rec = {"stressor": op.name, "positions": list(op.positions), **dict(op.params)}
    if isinstance(frames, FrameSpec):
        return StressResult(frames.with_frames(frames.frames, ops=(*frames.ops, op), record=rec), rec)
    return StressResult(apply_pixel_op(np.asarray(frames).copy(), op), rec)


def _param(name: str, value: Any, *, hi: float = math.inf) -> float:
    """A pixel operation's parameter: a finite number in (0, ``hi``], checked before anything is decoded."""
    if (isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating))
            or not math.isfinite(value) or not 0 < value <= hi):
        raise ConfigError(f"`{name}` must be a finite number > 0{f' and <= {hi}' if hi < math.inf else ''}; "
                          f"got {value!r}")
    return float(value)


def _positions(positions: Sequence[int]) -> tuple[int, ...]:
    if any(isinstance(p, bool) or not isinstance(p, (int, np.integer)) for p in positions):
        raise ConfigError(f"`positions` must be integer frame positions; got {list(positions)!r}")
    pos = tuple(sorted({int(p) for p in positions}))
    if not pos:
        raise ConfigError("`positions` must name at least one frame position")
    return pos


def blur(frames: Frames, positions: Sequence[int], *, sigma: float = 2.0) -> StressResult:
    """Gaussian blur (radius ``sigma`` px) on the frames at ``positions``."""
    return _pixel(frames, PixelOp("blur", _positions(positions), (("sigma", _param("sigma", sigma)),)))


def noise(frames: Frames, positions: Sequence[int], *, rng: np.random.Generator, std: float = 25.0) -> StressResult:
    """Additive Gaussian noise (σ = ``std`` grey levels, seeded) on the frames at ``positions``."""
    seed, std = int(_check_rng(rng).integers(0, 2**31 - 1)), _param("std", std)
    return _pixel(frames, PixelOp("noise", _positions(positions), (("seed", seed), ("std", std))))


def jpeg(frames: Frames, positions: Sequence[int], *, quality: int = 10) -> StressResult:
    """JPEG re-compression at ``quality`` (VideoSTF: 10) of the frames at ``positions``."""
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or not 1 <= quality <= 95:
        raise ConfigError(f"`quality` must be in [1, 95]; got {quality!r}")
    return _pixel(frames, PixelOp("jpeg", _positions(positions), (("quality", int(quality)),)))


def cutout(frames: Frames, positions: Sequence[int], *, rng: np.random.Generator,
           fraction: float = 0.25) -> StressResult:
    """Cutout (DeVries & Taylor 2017): a random square of side ``fraction``·min(H, W) zeroed."""
    seed, fraction = int(_check_rng(rng).integers(0, 2**31 - 1)), _param("fraction", fraction, hi=1.0)
    return _pixel(frames, PixelOp("cutout", _positions(positions), (("fraction", fraction), ("seed", seed))))


def variants(frames: Frames, name: str, *, rng: np.random.Generator, count: int = 30,
             foreign: Frames | None = None) -> list[StressResult]:
    """Seeded variants of one stressor for the attack and the stress test: Delete 1 is exhaustive (T
    variants), Reverse has one, the others ``count`` random trials."""
    _check_rng(rng)
    _check_counts(count=count)
    if name == "reverse":
        return [reverse(frames)]
    if name == "delete1":
        return delete_all(frames)
    if name in ("add1", "add2", "delete2", "replace1", "replace2"):
        stressor = {"add": add, "delete": delete, "replace": replace}[name[:-1]]
        return [stressor(frames, int(name[-1]), rng=rng) for _ in range(count)]
    if name == "shuffle":
        return [shuffle(frames, rng=rng) for _ in range(count)]
    if name == "foreign":
        if foreign is None:
            raise ConfigError("`foreign` frames are required for the 'foreign' variant")
        return [replace_foreign(frames, foreign, 2, rng=rng) for _ in range(count)]
    raise ConfigError(f"`name` must be one of {', '.join((*STRESSORS, 'foreign'))}; got {name!r}")
