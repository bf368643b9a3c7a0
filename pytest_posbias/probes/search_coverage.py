"""Search property of a multi-video summary: no video's coverage falls below a floor when
its slot changes (the multi-video paper's positional bias, as a per-group invariance).

The request is the positional probe's (prompt, labels, boundaries, decoding of the
configuration, ``[tool.posbias.probes.positional]`` applied) with the videos of one group
in the drawn :class:`~pytest_posbias.strategies.Layout` (order, boundary, placement, label
base). Every layout of a group is decoded with the same seed, so only the layout changes.
Each answer is aligned to per-slot summaries and every slot is scored by the run's judge; the
coverage of video v is the coverage of the slot that shows it (0 for a slot without a usable
summary, as the positional probe). The property breaks when a video covered at or above the
floor in the identity layout falls below it; a group whose every video is below the floor
unperturbed is not searchable. A failed call, an answer the positional probe loses (too few words,
mostly not words, only repeating the prompt, one slot addressed), an unalignable answer or a judge
failure is a lost query.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..data.manifest import GroupItem, Manifest
from ..engine import Decoding, Generation, Request
from ..errors import ConfigError
from ..scoring import usable
from ..scoring.alignment import align
from ..strategies import Layout, change_size, multi_video_layouts
from ..video.compose import compose, summary_prompt
from .positional import BUDGET_SENTENCES, PositionalSpec, accept_summary, addressed_slots, video_parts
from .search import ItemProperty, Outcome

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from ..gate_context import SearchContext


class CoverageProperty(ItemProperty[Layout]):
    """Per-video coverage of one group stays >= ``floor`` under any layout (module docstring)."""

    property = "coverage"
    smallest_change = 1.0  # one transposition of two videos, or one layout switch
    accept = staticmethod(accept_summary)  # the probe's own rule

    def __init__(self, ctx: SearchContext, model: str, group: GroupItem, manifest: Manifest, spec: PositionalSpec, *,
                 floor: float) -> None:
        if not 0.0 <= floor <= 1.0:
            raise ConfigError(f"`floor` must lie in [0, 1]; got {floor!r}")
        self.ctx, self.model, self.group, self.manifest = ctx, model, group, manifest
        self.spec, self.floor = spec, floor
        self.item_id = group.id
        self.P = group.P
        self.news = all(manifest.videos[v].reference_style == "news" for v in group.videos)
        self.sentences = BUDGET_SENTENCES[spec.budget][0 if self.news else 1]
        self.parts = video_parts(ctx, spec, manifest, group.videos)
        self.seed = int(ctx.rng("search-coverage-seed", group.id).integers(0, 2**31 - 1))

    def corpus_key(self) -> str:
        return f"coverage[P{self.P}]|{self.item_id}"

    def strategy(self) -> SearchStrategy[Layout]:
        return multi_video_layouts(self.P)

    def reference_value(self) -> Layout:
        return Layout(tuple(range(self.P)))

    def request(self, lay: Layout) -> Request:
        videos = [self.parts[self.group.videos[k]] for k in lay.order]
        prompt = summary_prompt(self.P, sentences=self.sentences, boundary=lay.boundary, news=self.news,
                                label_base=lay.label_base, equal_attention=self.spec.equal_attention)
        parts = compose(videos, prompt=prompt, boundary=lay.boundary, placement=lay.placement,
                        label_base=lay.label_base)
        return Request(self.model, tuple(parts),
                       Decoding(self.spec.max_new_tokens, self.spec.temperature, self.spec.top_p),
                       seed=self.seed, meta={"probe": "search", "property": "coverage", "group": self.group.id,
                                             "layout": lay.to_json()})

    def score(self, lay: Layout, gen: Generation, reference: Outcome | None) -> Outcome:
        if not gen.ok:
            return Outcome(False, False, None, why_lost=gen.error or "failed call")
        vids = [self.group.videos[k] for k in lay.order]
        refs = [list(self.manifest.videos[v].references) for v in vids]
        al = align(gen.text, self.P, label_base=lay.label_base, references=refs)
        if al.mode == "empty" or all(s == "marker_failure" for s in al.status):
            return Outcome(False, False, None, why_lost="unalignable answer")
        # the positional probe's rules: too few words, mostly not words, an echo, one slot addressed
        why = accept_summary(self.request(lay), gen) or usable.slots_reason(addressed_slots(al), self.P)
        if why is not None:
            return Outcome(False, False, None, why_lost=f"unusable summary: {why}")
        judges = self.ctx.judges()
        cov: dict[str, float] = {}
        for slot, vid in enumerate(vids):
            if not al.scoreable(slot):
                cov[vid] = 0.0
                continue
            style = self.manifest.videos[vid].reference_style
            scored = judges.for_style(style).score([(refs[slot], al.summaries[slot])])[0]
            if scored.value is None:
                return Outcome(False, False, None, why_lost=f"judge failure on {vid}")
            cov[vid] = float(scored.value)
        coverage = [cov[v] for v in self.group.videos]  # in the group's own video order
        broken = reference is not None and any(
            ref >= self.floor and c < self.floor for ref, c in zip(reference.answer["coverage"], coverage, strict=True))
        return Outcome(True, broken, {"coverage": coverage, "text": gen.text},
                       {"slots": vids, "status": list(al.status)})

    def searchable(self, reference: Outcome) -> str | None:
        if all(c < self.floor for c in reference.answer["coverage"]):
            return f"every video's coverage is below the floor {self.floor:g} in the identity layout"
        return None

    def encode(self, value: Layout) -> dict[str, Any]:
        return value.to_json()

    def decode(self, data: Mapping[str, Any]) -> Layout:
        lay = Layout.from_json(data)
        if sorted(lay.order) != list(range(self.P)):
            raise ConfigError(f"stored layout order {list(lay.order)} is not an order of {self.P} videos")
        return lay

    def size(self, value: Layout) -> float:
        return change_size(value)

    def describe(self, lay: Layout, outcome: Outcome, reference: Outcome) -> dict[str, Any]:
        ref_cov, cov = reference.answer["coverage"], outcome.answer["coverage"]
        return {
            "perturbation": self.encode(lay), "size": self.size(lay), "layout": lay.to_json(),
            "videos": list(self.group.videos), "slots": [self.group.videos[k] for k in lay.order],
            "reference_coverage": ref_cov, "coverage": cov, "floor": self.floor,
            "fell_below": [v for v, a, b in zip(self.group.videos, ref_cov, cov, strict=True) if a >= self.floor > b],
            "reference_text": reference.answer["text"], "answer_text": outcome.answer["text"],
            "video_paths": {v: str(self.manifest.videos[v].path) for v in self.group.videos},
        }


__all__ = ["CoverageProperty"]
