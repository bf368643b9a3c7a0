"""Search property of a video description: it does not become repetitive under a stressor.

VideoSTF's repetition flag (RR indicator: the largest 5-gram count exceeds τ = 1) on the
stressor probe's request (prompt, greedy decoding, 500 new tokens, ``videostf`` sampling of
``frames`` frames). The reference is the clean description: a video whose clean description
already repeats is not searchable (VideoSTF attacks clean-benign videos only). Perturbations
are compositions of temporal stressors (:func:`~pytest_posbias.strategies.stressor_compositions`)
applied to the sampled frame list by :func:`apply_edits`; the shrinker minimises the number of
stressed frames. The foreign source of ``foreign`` edits is the next video of the probe's
seeded video order showing another clip (as the stressor probe's Replace-foreign control). A failed call or an
unusable description (the stressor probe's rule, an echo of the prompt included) is a lost query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from ..data.manifest import VideoItem
from ..engine import Generation, Request
from ..errors import ConfigError
from ..strategies import STRESSOR_KINDS, StressorEdit, stressed_frames, stressor_compositions
from ..video.frames import FrameSpec
from .search import ItemProperty, Outcome
from .stressor import StressorSpec, _clean_spec, _request, accept_description, repeats

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from ..gate_context import ProbeContext

# a perturbation: stressor edits applied in turn (the empty composition is the clean frames)
Edits: TypeAlias = tuple[StressorEdit, ...]


def apply_edits(clean: FrameSpec, edits: Sequence[StressorEdit], foreign: FrameSpec | None = None
                ) -> tuple[FrameSpec, list[dict[str, Any]]]:
    """The frames after applying ``edits`` in turn, and the strip of output frames:
    ``{"source": "clip"|"foreign", "index": frame index, "changed": bool, "gap_before": bool}``
    (changed: the frame was replaced, inserted or moved by a stressor; gap_before: a frame was
    deleted just before it). Positions and sources wrap modulo the current length. Edits that
    change no frame are dropped, so a composition of no-ops gives the clean spec itself."""
    edits = [e for e in edits if e.frames_changed]
    if not edits:
        return clean, [{"source": "clip", "index": i, "changed": False, "gap_before": False} for i in clean.indices]
    # per output frame: ((source, index), changed, gap_before)
    cur: list[tuple[tuple[int, int], bool, bool]] = [(f, False, False) for f in clean.frames]
    sources = clean.sources
    offset: int | None = None
    for e in edits:
        n = len(cur)
        if e.kind == "delete":
            gone = set(sorted({p % n for p in e.positions})[: max(0, n - 1)])  # never below one frame
            cur = [(f, m, g or (i - 1) in gone) for i, (f, m, g) in enumerate(cur) if i not in gone]
        elif e.kind == "replace":
            before = list(cur)
            for p, s in zip(e.positions, e.sources, strict=True):
                cur[p % n] = (before[s % n][0], True, cur[p % n][2])
        elif e.kind == "foreign":
            if foreign is None:
                raise ConfigError("a 'foreign' stressor edit needs the frames of another video")
            if offset is None:
                offset = len(sources)
                sources = sources + foreign.sources
            for p, s in zip(e.positions, e.sources, strict=True):
                src, idx = foreign.frames[s % len(foreign)]
                cur[p % n] = ((src + offset, idx), True, cur[p % n][2])
        elif e.kind == "add":
            inserts: dict[int, list[tuple[tuple[int, int], bool, bool]]] = {}
            for p, s in zip(e.positions, e.sources, strict=True):
                inserts.setdefault(p % (n + 1), []).append((cur[s % n][0], True, False))
            cur = [x for i in range(n + 1) for x in [*inserts.get(i, []), *cur[i:i + 1]]]
        elif e.kind in ("reverse", "shuffle"):
            pos = sorted({p % n for p in e.positions})
            vals = [cur[p][0] for p in pos]
            for p, v in zip(pos, vals[::-1] if e.kind == "reverse" else vals[-1:] + vals[:-1], strict=True):
                f, m, g = cur[p]
                cur[p] = (v, m or v != f, g)
        else:
            raise ConfigError(f"unknown stressor edit kind {e.kind!r}")
    record = {"stressor": "search", "edits": [e.to_json() for e in edits]}
    spec = clean.with_frames([f for f, _m, _g in cur], sources=sources, record=record)
    strip = [{"source": "clip" if src < len(clean.sources) else "foreign", "index": idx, "changed": m, "gap_before": g}
             for (src, idx), m, g in cur]
    return spec, strip


class StressorProperty(ItemProperty[Edits]):
    """A video's description does not become repetitive under a composition of stressors."""

    property = "stressor"
    smallest_change = 1.0  # one stressed frame
    accept = staticmethod(accept_description)  # the probe's own rule

    def __init__(self, ctx: ProbeContext, model: str, item: VideoItem, foreign: VideoItem | None, spec: StressorSpec, *,
                 max_edits: int = 2, max_frames: int = 4) -> None:
        self.ctx, self.model, self.item, self.spec = ctx, model, item, spec
        self.item_id = item.id
        self.max_edits, self.max_frames = int(max_edits), int(max_frames)
        self.clean = _clean_spec(ctx, item, spec.frames, spec)
        self.foreign_item = foreign
        self.foreign = _clean_spec(ctx, foreign, spec.frames, spec) if foreign is not None else None

    def corpus_key(self) -> str:
        return f"stressor[{self.spec.frames}f]|{self.item_id}"

    def strategy(self) -> SearchStrategy[Edits]:
        kinds = [k for k in STRESSOR_KINDS if k != "foreign" or self.foreign is not None]
        return stressor_compositions(len(self.clean), max_edits=self.max_edits, max_frames=self.max_frames, kinds=kinds)

    def reference_value(self) -> Edits:
        return ()

    def frames(self, value: Sequence[StressorEdit]) -> tuple[FrameSpec, list[dict[str, Any]]]:
        return apply_edits(self.clean, value, self.foreign)

    def request(self, value: Edits) -> Request:
        frames = self.frames(value)[0]
        meta: dict[str, Any] = {"video": self.item.id, "condition": "search" if value else "clean",
                                "frames": self.spec.frames}
        if value:
            meta["edits"] = [e.to_json() for e in value]
        return _request(self.model, frames, self.spec, meta)

    def score(self, value: Edits, gen: Generation, reference: Outcome | None) -> Outcome:
        if not gen.ok:
            return Outcome(False, False, None, why_lost=gen.error or "failed call")
        if (why := accept_description(self.request(value), gen)) is not None:  # the probe's rule, an echo included
            return Outcome(False, False, None, why_lost=f"unusable description: {why}")
        flag = repeats(gen.text)
        return Outcome(True, flag, {"text": gen.text, "finish_reason": gen.finish_reason, "repeats": flag})

    def encode(self, value: Edits) -> dict[str, Any]:
        return {"edits": [e.to_json() for e in value]}

    def decode(self, data: Mapping[str, Any]) -> Edits:
        edits = tuple(StressorEdit.from_json(d) for d in data["edits"])
        if any(e.kind == "foreign" for e in edits) and self.foreign is None:
            raise ConfigError("stored counterexample uses a foreign video, and this run has none")
        self.frames(edits)  # a corrupted entry (positions without their sources, ...) is unusable, not a crash
        return edits

    def size(self, value: Edits) -> float:
        return float(stressed_frames(value))

    def describe(self, value: Edits, outcome: Outcome, reference: Outcome) -> dict[str, Any]:
        _, strip = self.frames(value)
        return {
            "perturbation": self.encode(value), "size": self.size(value), "stressed_frames": stressed_frames(value),
            "edits": [e.to_json() for e in value],
            "reference_text": reference.answer["text"], "answer_text": outcome.answer["text"],
            "finish_reason": outcome.answer["finish_reason"],
            "video": self.item.id, "video_path": str(self.item.path),
            "foreign_video": self.foreign_item.id if self.foreign_item is not None else None,
            "foreign_path": str(self.foreign_item.path) if self.foreign_item is not None else None,
            "frames": {"original": [{"source": "clip", "index": i} for i in self.clean.indices], "perturbed": strip},
        }


__all__ = ["StressorProperty", "apply_edits"]
