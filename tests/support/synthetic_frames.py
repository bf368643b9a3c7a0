"""Readers of the synthetic set (:mod:`pytest_posbias.video.synthetic`) for the tests: a scene's spec
from its JSON file, the barcode that encodes a frame's index, and whether sampled indices show a
scene's brief event."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pytest_posbias.video.synthetic import EVENT_FRAMES, HEIGHT, SCENE_ROWS, EventSpec, ObjectSpec, SceneSpec, event_at


def scene_from_dict(d: dict[str, Any]) -> SceneSpec:
    """The scene a ``videos/<id>.json`` file of the set holds (inverse of ``SceneSpec.to_dict``)."""
    objs = tuple(ObjectSpec(o["shape"], o["colour"], o["radius"], o["motion"], tuple(o["start"]), tuple(o["end"]),
                            o.get("change_to"), o.get("change_at")) for o in d["objects"])
    evs = tuple(EventSpec(e["kind"], e["frame"], e.get("length", EVENT_FRAMES)) for e in d.get("events", []))
    return SceneSpec(d["id"], d["domain"], d["bucket"], d["duration"], d["fps"], d["frame_count"], objs, evs,
                     d.get("seed", 0))


def scene_of(item: Any) -> SceneSpec:
    """The scene of a video of the set: its ``<id>.json`` beside the clip (``item`` a manifest video)."""
    return scene_from_dict(json.loads((item.path.parent / f"{item.id}.json").read_text()))


def read_barcode(frame: NDArray[np.uint8]) -> int | None:
    """Read the frame index back from a (possibly resized) frame; None when the check fails."""
    h, w = frame.shape[:2]
    y0 = round((SCENE_ROWS + 4) / HEIGHT * h)
    y1 = max(y0 + 1, round((HEIGHT - 4) / HEIGHT * h))
    bits = []
    for k in range(16):
        x0 = round((k + 0.35) / 16 * w)
        x1 = max(x0 + 1, round((k + 0.65) / 16 * w))
        bits.append(1 if frame[y0:y1, x0:x1].mean() > 127 else 0)
    value = int("".join(map(str, bits[:12])), 2)
    check = int("".join(map(str, bits[12:])), 2)
    return value if value % 16 == check else None


def brief_event_grid_hits(scene: SceneSpec, indices: Sequence[int]) -> bool:
    """Whether a set of sampled frame indices shows the scene's brief event."""
    return any(event_at(scene, int(i)) is not None for i in indices)
