"""The synthetic video set (docs/design.md section 6): clips rendered by code with a fixed seed.

Each clip shows 2–3 coloured shapes (circle, square, triangle) that move, may change
colour, and sometimes a *brief event* (a white flash or a blackout lasting a few frames,
so some sampling phases see it and others miss it). A scene spec per clip drives
everything else: 3–4 reference sentences (ActivityNet style) or 1–2 (News style), and
multiple-choice questions with five options, some about the brief events, some that
cannot be answered from the frames (the simulated model is unsure there).

Four domains named like the multi-video paper's settings (:data:`DOMAINS`; ``news`` has a ticker
bar and News-style references), short and long buckets (:data:`BUCKETS`). Every frame carries a
16-block barcode strip at the bottom encoding its index (12 bits + a 4-bit check), so decoding
can be verified.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError

WIDTH, HEIGHT = 256, 192
BARCODE_ROWS = 12  # bottom rows hold the frame-index barcode
SCENE_ROWS = HEIGHT - BARCODE_ROWS
FPS = 6
EVENT_FRAMES = 5  # 0.8 s at 6 fps: shorter than the spacing of S = 3 phase grids of 8 frames

PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 60),
    "blue": (40, 80, 230),
    "yellow": (235, 205, 20),
    "purple": (140, 50, 190),
    "orange": (250, 130, 20),
}
DOMAINS: dict[str, dict[str, Any]] = {
    "cooking": {"background": (240, 228, 205), "bg_name": "cream", "buckets": ("short",), "style": "sentences"},
    "domestic": {"background": (205, 205, 215), "bg_name": "light grey", "buckets": ("short", "long"),
                 "style": "sentences"},
    "leisure": {"background": (165, 215, 235), "bg_name": "sky blue", "buckets": ("short", "long"),
                "style": "sentences"},
    "news": {"background": (25, 30, 60), "bg_name": "dark blue", "buckets": ("short",), "style": "news"},
}
SHAPES = ("circle", "square", "triangle")
MOTIONS = ("left-to-right", "right-to-left", "top-to-bottom", "bottom-to-top", "static")
EVENTS = ("flash", "blackout")
BUCKETS = {"short": (20.0, 58.0), "long": (62.0, 110.0)}

# Phrases shared by the references, the questions and the simulated model's answers.
MOTION_PHRASE = {
    "left-to-right": "from left to right",
    "right-to-left": "from right to left",
    "top-to-bottom": "from top to bottom",
    "bottom-to-top": "from bottom to top",
    "static": "it does not move",
}
EVENT_OPTION = {
    "flash": "a white flash fills the screen",
    "blackout": "the screen goes black for a moment",
    None: "nothing unusual happens",
}
EVENT_DISTRACTORS = ("a shape disappears for good", "the camera zooms in")
WHY_OPTIONS = ("it is following a fixed path", "it is being pushed", "it is chasing another shape",
               "it is blown by the wind", "it is sliding downhill")
NEXT_OPTIONS = ("the shapes keep doing the same", "the screen fades to black", "a new shape appears",
                "the video starts over", "all the shapes stop")


@dataclass(frozen=True)
class ObjectSpec:
    shape: str
    colour: str
    radius: float  # px at WIDTH×HEIGHT
    motion: str
    start: tuple[float, float]  # normalised (x, y) in the scene area
    end: tuple[float, float]
    change_to: str | None = None
    change_at: float | None = None  # fraction of the duration


@dataclass(frozen=True)
class EventSpec:
    kind: str
    frame: int
    length: int = EVENT_FRAMES


@dataclass(frozen=True)
class SceneSpec:
    id: str
    domain: str
    bucket: str
    duration: float
    fps: int
    frame_count: int
    objects: tuple[ObjectSpec, ...]
    events: tuple[EventSpec, ...] = ()
    seed: int = 0


def make_scene(scene_id: str, domain: str, bucket: str, *, seed: int, event_probability: float = 0.5) -> SceneSpec:
    """A random scene for one clip (all randomness from ``seed``)."""
    if domain not in DOMAINS:
        raise ConfigError(f"`domain` must be one of {', '.join(DOMAINS)}; got {domain!r}")
    if bucket not in BUCKETS:
        raise ConfigError(f"`bucket` must be 'short' or 'long'; got {bucket!r}")
    rng = random.Random(seed)
    lo, hi = BUCKETS[bucket]
    duration = round(rng.uniform(lo, hi), 1)
    frame_count = round(duration * FPS)
    n_obj = rng.choice((2, 3, 3))
    shapes = rng.sample(SHAPES, n_obj)
    colours = rng.sample(list(PALETTE), n_obj + 1)  # the extra colour is free for a change
    vertical_slot = rng.random() < 0.3
    objects = []
    change_obj = rng.randrange(n_obj) if rng.random() < 0.5 else None
    for i, (shape, colour) in enumerate(zip(shapes, colours, strict=False)):
        lane_y = (i + 0.5) / n_obj
        if vertical_slot and i == n_obj - 1:
            motion = rng.choice(("top-to-bottom", "bottom-to-top"))
            start, end = ((0.9, 0.15), (0.9, 0.85)) if motion == "top-to-bottom" else ((0.9, 0.85), (0.9, 0.15))
        else:
            motion = rng.choice(("left-to-right", "right-to-left", "static"))
            if motion == "left-to-right":
                start, end = (0.1, lane_y), (0.72, lane_y)
            elif motion == "right-to-left":
                start, end = (0.72, lane_y), (0.1, lane_y)
            else:
                x = rng.uniform(0.3, 0.6)
                start, end = (x, lane_y), (x, lane_y)
        radius = rng.uniform(13.0, 18.0) if n_obj == 3 else rng.uniform(15.0, 22.0)
        change_to = colours[-1] if change_obj == i else None
        change_at = round(rng.uniform(0.35, 0.65), 3) if change_to else None
        objects.append(ObjectSpec(shape, colour, round(radius, 2), motion, start, end, change_to, change_at))
    events = ((EventSpec(rng.choice(EVENTS), rng.randrange(int(0.15 * frame_count), int(0.85 * frame_count))),)
              if rng.random() < event_probability else ())
    return SceneSpec(scene_id, domain, bucket, duration, FPS, frame_count, tuple(objects), events, seed)


def _shape_mask(shape: str, cx: float, cy: float, r: float, yy: NDArray[np.float32],
                xx: NDArray[np.float32]) -> NDArray[np.bool_]:
    if shape == "circle":
        return (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
    if shape == "square":
        h = r * 0.886  # same area as the circle
        return (np.abs(xx - cx) <= h) & (np.abs(yy - cy) <= h)
    # upward triangle inside a (2a × 2a) box: half the box area
    a = r * 1.2
    top = cy - a
    frac = (yy - top) / (2 * a)
    return (frac >= 0) & (frac <= 1) & (np.abs(xx - cx) <= frac * a)


def event_at(scene: SceneSpec, index: int) -> str | None:
    return next((e.kind for e in scene.events if e.frame <= index < e.frame + e.length), None)


def draw_barcode(frame: NDArray[np.uint8], index: int) -> None:
    """Write ``index`` into the bottom strip: 12 bits (MSB first) + 4 check bits (index mod 16)."""
    bits = [(index >> (11 - k)) & 1 for k in range(12)] + [((index % 16) >> (3 - k)) & 1 for k in range(4)]
    bw = WIDTH // 16
    frame[SCENE_ROWS:, :] = 0
    for k, bit in enumerate(bits):
        if bit:
            frame[SCENE_ROWS + 2 : HEIGHT - 2, k * bw + 2 : (k + 1) * bw - 2] = 255


def render_frame(scene: SceneSpec, index: int, *, yy: NDArray[np.float32] | None = None,
                 xx: NDArray[np.float32] | None = None) -> NDArray[np.uint8]:
    """One RGB frame of a scene at ``index``."""
    if yy is None or xx is None:
        yy, xx = np.mgrid[0:SCENE_ROWS, 0:WIDTH].astype(np.float32)
    style = DOMAINS[scene.domain]
    frame = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
    frame[:] = style["background"]
    if scene.domain == "news":
        frame[SCENE_ROWS - 16 : SCENE_ROWS - 4, :] = (180, 180, 180)  # static ticker bar
    t = index / max(1, scene.frame_count - 1)
    scene_area = frame[:SCENE_ROWS]
    for obj in scene.objects:
        cx = (obj.start[0] + (obj.end[0] - obj.start[0]) * t) * WIDTH
        cy = (obj.start[1] + (obj.end[1] - obj.start[1]) * t) * SCENE_ROWS
        colour = obj.change_to if obj.change_to and obj.change_at is not None and t >= obj.change_at else obj.colour
        scene_area[_shape_mask(obj.shape, cx, cy, obj.radius, yy, xx)] = PALETTE[colour]
    ev = event_at(scene, index)
    if ev == "flash":
        frame[:SCENE_ROWS] = 255
    elif ev == "blackout":
        frame[:SCENE_ROWS] = 0
    draw_barcode(frame, index)
    return frame


def render_clip(scene: SceneSpec, path: str | Path, *, crf: int = 18, gop: int = 250) -> Path:
    """Encode a scene as H.264 mp4 (PyAV, libx264, yuv420p)."""
    import av

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part.mp4")
    yy, xx = np.mgrid[0:SCENE_ROWS, 0:WIDTH].astype(np.float32)
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream("libx264", rate=scene.fps)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.options = {"crf": str(crf), "preset": "ultrafast", "g": str(gop), "tune": "animation"}
        for i in range(scene.frame_count):
            frame = av.VideoFrame.from_ndarray(render_frame(scene, i, yy=yy, xx=xx), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    tmp.replace(out)
    return out


def motion_sentence_ref(obj: ObjectSpec) -> str:
    does = ("sits still in the same spot the whole time" if obj.motion == "static"
            else f"slides across the screen {MOTION_PHRASE[obj.motion]}")
    return f"{'An' if obj.colour[0] in 'aeiou' else 'A'} {obj.colour} {obj.shape} {does}."


def references(scene: SceneSpec) -> list[str]:
    """Reference sentences: 3–4 for ActivityNet-style domains, 1–2 for News (paraphrase wording)."""
    style = DOMAINS[scene.domain]
    if style["style"] == "news":
        objs = scene.objects
        names = " and ".join(f"a {o.colour} {o.shape}" for o in objs[:2])
        first = f"Footage shows {names} on a {style['bg_name']} backdrop with a news ticker."
        movers = [o for o in objs if o.motion != "static"]
        if scene.events:
            ev = "a white flash" if scene.events[0].kind == "flash" else "a sudden blackout"
            second = f"Midway through the report there is {ev}."
        elif movers:
            second = f"The {movers[0].colour} {movers[0].shape} moves {MOTION_PHRASE[movers[0].motion]}."
        else:
            return [first]
        return [first, second]
    sents = [motion_sentence_ref(o) for o in scene.objects]
    sents += [f"Partway through, the {o.shape} changes its colour from {o.colour} to {o.change_to}."
              for o in scene.objects if o.change_to]
    sents += ["At one moment a bright white flash lights up the whole frame." if e.kind == "flash"
              else "For an instant the whole screen goes completely dark." for e in scene.events]
    sents.append(f"The shapes are shown against a plain {style['bg_name']} background.")
    rng = random.Random(scene.seed + 1)
    while len(sents) > 4:  # keep the event and colour-change sentences, drop an object or the background
        drop = [i for i, s in enumerate(sents) if s.endswith("background.") or "slides" in s or "sits still" in s]
        sents.pop(rng.choice(drop))
    return sents


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    options: tuple[str, ...]
    answer: int
    kind: str
    tags: tuple[str, ...] = field(default=())


def questions(scene: SceneSpec) -> list[Question]:
    """Five-option questions from the spec: colour, direction, count, brief event, and two
    that the frames cannot answer (why something moves, what happens after the end)."""
    rng = random.Random(scene.seed + 2)
    out: list[Question] = []

    def mk(kind: str, q: str, correct: str, distractors: Sequence[str], tags: tuple[str, ...] = ()) -> None:
        opts = [correct, *[d for d in distractors if d != correct][:4]]
        rng.shuffle(opts)
        out.append(Question(f"{scene.id}-{kind}", q, tuple(opts), opts.index(correct), kind, tags))

    obj = scene.objects[0]
    mk("colour", f"What colour is the {obj.shape} at the start of the video?", obj.colour,
       rng.sample([c for c in PALETTE if c != obj.colour], 4))
    mover = next((o for o in scene.objects if o.motion != "static"), scene.objects[-1])
    mk("direction", f"In which direction does the {mover.colour} {mover.shape} move?", MOTION_PHRASE[mover.motion],
       [MOTION_PHRASE[m] for m in MOTIONS if m != mover.motion])
    mk("count", "How many coloured shapes appear in the video?", str(len(scene.objects)),
       [str(k) for k in (1, 2, 3, 4, 5) if k != len(scene.objects)])
    ev = scene.events[0].kind if scene.events else None
    mk("event", "What brief event happens during the video?", EVENT_OPTION[ev],
       [v for k, v in EVENT_OPTION.items() if k != ev] + list(EVENT_DISTRACTORS),
       ("brief-event",) if ev else ())
    mk("why", f"Why does the {mover.colour} {mover.shape} move the way it does?", WHY_OPTIONS[0], WHY_OPTIONS[1:],
       ("unanswerable",))
    mk("next", "What will most likely happen right after the video ends?", NEXT_OPTIONS[0], NEXT_OPTIONS[1:],
       ("unanswerable",))
    return out


def configurations() -> list[tuple[str, str]]:
    return [(d, b) for d, s in DOMAINS.items() for b in s["buckets"]]


def build_set(out_dir: str | Path, *, videos_per_config: int = 10, groups_per_config: int = 40, seed: int = 0,
              scales: Sequence[int] = (2, 4), overwrite: bool = False, progress: Any = None) -> Path:
    """Render the synthetic set into ``out_dir`` and write ``manifest.jsonl``; returns its path.

    Incremental and deterministic for a seed: a clip whose spec is unchanged is kept. Groups of P
    videos are drawn per configuration with a seeded ``random.Random``; a video may be in several
    groups but never twice in one, and no two groups of a scale have the same videos: asking for more
    groups than that allows is refused before anything is rendered.
    """
    if videos_per_config < max(scales):
        raise ConfigError(f"`videos_per_config` must be >= the largest scale ({max(scales)}); got {videos_per_config}")
    for P in scales:
        if groups_per_config > (most := math.comb(videos_per_config, P)):
            raise ConfigError(f"`groups_per_config` = {groups_per_config} is more than {videos_per_config} videos per "
                              f"configuration allow: at most {most} distinct groups of P = {P}")
    root = Path(out_dir)
    (root / "videos").mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = []
    for ci, (domain, bucket) in enumerate(configurations()):
        ids = []
        for k in range(videos_per_config):
            vid = f"syn-{domain}-{bucket}-{k:02d}"
            scene = make_scene(vid, domain, bucket, seed=seed * 1_000_003 + ci * 1009 + k)
            path = root / "videos" / f"{vid}.mp4"
            spec_path = root / "videos" / f"{vid}.json"
            spec_json = json.dumps(asdict(scene), sort_keys=True)
            if overwrite or not path.exists() or not spec_path.exists() or spec_path.read_text() != spec_json:
                render_clip(scene, path)
                spec_path.write_text(spec_json)
                if progress:
                    progress(f"rendered {vid} ({scene.frame_count} frames)")
            ids.append(vid)
            lines.append({"type": "video", "id": vid, "path": f"videos/{vid}.mp4", "domain": domain, "bucket": bucket,
                          "duration": scene.duration, "references": references(scene),
                          "reference_style": DOMAINS[domain]["style"], "scene": f"videos/{vid}.json"})
            for q in questions(scene):
                lines.append({"type": "mcq", "id": q.id, "video": vid, "question": q.question,
                              "options": list(q.options), "answer": q.answer, "kind": q.kind, "tags": list(q.tags)})
        for P in scales:
            rng = random.Random(seed * 7919 + ci * 31 + P)
            seen: set[tuple[str, ...]] = set()  # member sets drawn so far: group g is the g-th new one
            while len(seen) < groups_per_config:  # ends: at most comb(videos, P) groups are asked
                members = rng.sample(ids, P)
                if tuple(sorted(members)) not in seen:
                    lines.append({"type": "group", "id": f"syn-{domain}-{bucket}-P{P}-g{len(seen):02d}",
                                  "domain": domain, "bucket": bucket, "P": P, "videos": members})
                    seen.add(tuple(sorted(members)))
    from ..data.manifest import write_manifest

    return write_manifest(root / "manifest.jsonl", lines)


def default_set_dir(rootdir: str | Path) -> Path:
    return Path(rootdir) / "fixtures" / "synthetic"
