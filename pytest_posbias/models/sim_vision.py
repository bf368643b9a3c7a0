"""What the simulated model sees: objects, colours, motions and brief events read from pixels.

Works on any frames of the synthetic set, at any resolution and aspect policy: pixels are
classified to the nearest palette colour, each colour blob gives a centroid and a shape
(from its fill of the bounding box: square ≈ 1, circle ≈ π/4, triangle ≈ 1/2), and a
frame whose scene area is almost all white or all black is a brief event. Across the
frames of one video, a shape's first and last positions give its motion, its first and
last colours a colour change. Sampling, phase, stressors and composition therefore change
what the simulated model perceives, for real. :func:`facts` turns a video's view into the
sentences the model can write about it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..video.synthetic import BARCODE_ROWS, DOMAINS, HEIGHT, PALETTE

_NAMES = list(PALETTE)
_COLOURS = np.array([PALETTE[n] for n in _NAMES], dtype=np.float32)
_BACKGROUNDS = {v["bg_name"]: np.array(v["background"], dtype=np.float32) for v in DOMAINS.values()}
_SCENE_FRACTION = (HEIGHT - BARCODE_ROWS) / HEIGHT
_MAX_DIST = 70.0
_COLOURS_SQ = (_COLOURS * _COLOURS).sum(axis=1)


@dataclass(frozen=True)
class Blob:
    """One colour blob of a frame: its palette colour, shape and centroid."""

    colour: str
    shape: str
    x: float  # centroid, fraction of width
    y: float  # centroid, fraction of scene height


@dataclass(frozen=True)
class FrameView:
    """What one frame shows: its blobs, a brief event if any, and its background colour."""

    blobs: tuple[Blob, ...]
    event: str | None  # "flash" | "blackout" | None
    background: str | None


@dataclass(frozen=True)
class ObjectTrack:
    """One shape followed across a video's frames: its first and last colour and its motion."""

    shape: str
    first_colour: str
    last_colour: str
    motion: str  # left-to-right, right-to-left, top-to-bottom, bottom-to-top, static


@dataclass(frozen=True)
class VideoView:
    """What a video shows: its object tracks, brief events, background and temporal discontinuity."""

    objects: tuple[ObjectTrack, ...]
    events: tuple[str, ...]
    background: str | None
    discontinuity: float  # share of adjacent frame pairs with a jump the motion does not explain


def view_frame(frame: NDArray[np.uint8]) -> FrameView:
    """Read one RGB frame (any size) of the synthetic set."""
    h, w = frame.shape[:2]
    scene_h = max(1, int(h * _SCENE_FRACTION) - max(1, h // 64))
    step = max(1, min(h, w) // 112)
    px = frame[:scene_h:step, ::step].astype(np.float32)
    mean = float(px.mean())
    if mean > 235.0:
        return FrameView((), "flash", None)
    if mean < 10.0:
        return FrameView((), "blackout", None)
    flat = px.reshape(-1, 3)
    # squared distances |x|^2 - 2 x.c + |c|^2, (N, colours): pixels and palette are integers, so every term
    # and partial sum is an integer below 2^24, exact in float32; elementwise (a BLAS product adds threads)
    cross = flat[:, 0:1] * _COLOURS[:, 0] + flat[:, 1:2] * _COLOURS[:, 1] + flat[:, 2:3] * _COLOURS[:, 2]
    d2 = (flat * flat).sum(axis=1)[:, None] - 2.0 * cross + _COLOURS_SQ[None, :]
    nearest = d2.argmin(axis=1)
    ok = d2[np.arange(d2.shape[0]), nearest] < _MAX_DIST * _MAX_DIST
    labels = np.where(ok, nearest, -1).reshape(px.shape[:2])
    total = labels.size
    blobs = []
    for ci, name in enumerate(_NAMES):
        ys, xs = np.nonzero(labels == ci)
        if ys.size < max(6, total // 2000):
            continue
        fill = ys.size / float((xs.max() - xs.min() + 1) * (ys.max() - ys.min() + 1))
        shape = "square" if fill > 0.9 else "circle" if fill > 0.64 else "triangle"
        blobs.append(Blob(name, shape, float(xs.mean() / px.shape[1]), float(ys.mean() / px.shape[0])))
    bg = flat[~ok]
    background = None
    if bg.shape[0]:
        med = np.median(bg, axis=0)
        name, dist = min(((n, float(np.linalg.norm(med - c))) for n, c in _BACKGROUNDS.items()), key=lambda t: t[1])
        background = name if dist < 60 else None
    return FrameView(tuple(blobs), None, background)


def _motion(first: Blob, last: Blob) -> str:
    dx, dy = last.x - first.x, last.y - first.y
    if max(abs(dx), abs(dy)) < 0.12:
        return "static"
    if abs(dx) >= abs(dy):
        return "left-to-right" if dx > 0 else "right-to-left"
    return "top-to-bottom" if dy > 0 else "bottom-to-top"


def view_video(frames: NDArray[np.uint8]) -> VideoView:
    """Read a video's frames (:func:`summarize` of each frame's :func:`view_frame`)."""
    return summarize([view_frame(f) for f in frames])


def summarize(views: list[FrameView]) -> VideoView:
    """A video's view from its frames' views (in the order shown)."""
    tracks: dict[str, list[tuple[int, Blob]]] = {}
    for i, v in enumerate(views):
        for b in v.blobs:
            tracks.setdefault(b.shape, []).append((i, b))
    scene_frames = sum(1 for v in views if v.event is None)
    objects = []
    for shape, obs in tracks.items():
        if len(obs) < max(2, int(0.25 * scene_frames)):
            continue  # a shape seen in one or two frames only (a foreign frame) is not an object of the video
        first, last = obs[0][1], obs[-1][1]
        objects.append(ObjectTrack(shape, first.colour, last.colour, _motion(first, last)))
    objects.sort(key=lambda o: (o.shape != "circle", o.shape != "square", o.shape))
    events = tuple(sorted({v.event for v in views if v.event}))
    bgs = [v.background for v in views if v.background]
    background = max(set(bgs), key=bgs.count) if bgs else None
    return VideoView(tuple(objects), events, background, _discontinuity(views))


def _discontinuity(views: list[FrameView]) -> float:
    """Share of adjacent frame pairs that break the clip's own motion (jumps, reversals,
    another clip's content): the "local temporal disruption" VideoSTF links to repetition."""
    if len(views) < 3:
        return 0.0
    steps: dict[str, list[tuple[float, float]]] = {}
    pos: list[dict[str, tuple[float, float]]] = [{b.shape: (b.x, b.y) for b in v.blobs} for v in views]
    for p0, p1 in itertools.pairwise(pos):
        for s in p0.keys() & p1.keys():
            steps.setdefault(s, []).append((p1[s][0] - p0[s][0], p1[s][1] - p0[s][1]))
    med = {s: (float(np.median([d[0] for d in v])), float(np.median([d[1] for d in v]))) for s, v in steps.items()}
    bad = 0
    for (a, b), (p0, p1) in zip(itertools.pairwise(views), itertools.pairwise(pos), strict=True):
        if a.event or b.event:
            continue
        if a.background != b.background or {x.shape for x in a.blobs} != {x.shape for x in b.blobs}:
            bad += 1
            continue
        for s in p0.keys() & p1.keys():
            mx, my = med.get(s, (0.0, 0.0))
            tol = max(0.04, 2.5 * max(abs(mx), abs(my)))
            if abs(p1[s][0] - p0[s][0] - mx) > tol or abs(p1[s][1] - p0[s][1] - my) > tol:
                bad += 1
                break
    return bad / (len(views) - 1)


@dataclass(frozen=True)
class Fact:
    """One statement the model can make about a video: its kind (object, change, event,
    background), its sentence, and the sentence it writes for a news video."""

    kind: str
    text: str
    news_text: str


# varied wording per object so a plain description repeats no 5-gram by itself
_OPENERS = ("{A} {c} {s}", "Beside it, {a} {c} {s}", "There is also {a} {c} {s} that")
_MOVES = {
    "left-to-right": ("moves from left to right", "travels rightwards across the frame",
                      "heads over to the right side"),
    "right-to-left": ("moves from right to left", "travels leftwards across the frame", "heads over to the left side"),
    "top-to-bottom": ("moves from top to bottom", "travels downwards through the frame",
                      "sinks towards the bottom edge"),
    "bottom-to-top": ("moves from bottom to top", "travels upwards through the frame", "rises towards the top edge"),
    "static": ("stays still in the same place", "remains where it is", "does not move at all"),
}


def facts(view: VideoView) -> list[Fact]:
    """What the model can say about a video, most important first."""
    out: list[Fact] = []
    for i, o in enumerate(view.objects):
        c, s = o.first_colour, o.shape
        k = i % 3
        a = "An" if c[0] in "aeiou" else "A"
        opener = _OPENERS[k].format(A=a, a=a.lower(), c=c, s=s)
        t = f"{opener} {_MOVES[o.motion][k]}."
        out.append(Fact("object", t, t))
    for o in view.objects:
        if o.last_colour != o.first_colour:
            t = f"The {o.shape} turns from {o.first_colour} to {o.last_colour} partway through."
            out.append(Fact("change", t, t))
    for e in view.events:
        t = "A white flash briefly fills the screen." if e == "flash" else "The screen briefly goes black."
        news = "There is a white flash." if e == "flash" else "There is a sudden blackout."
        out.append(Fact("event", t, news))
    if view.background:
        t = f"The shapes are shown on a plain {view.background} background."
        out.append(Fact("background", t, f"The shapes appear on a {view.background} backdrop."))
    return out
