"""Search properties of a multiple-choice item (the phase paper's two invariances).

* ``order``: the chosen *content* is the same under every reordering of the options
  (perturbations: :func:`~pytest_posbias.strategies.option_orderings`, shrinking toward
  fewer transpositions);
* ``phase``: the chosen content is the same under every phase p/q of the item's uniform
  ``left`` grid of b frames, ⌊(i + p/q)·T/b⌋ over its window
  (:func:`~pytest_posbias.strategies.sampling_phases`, shrinking toward phase 0).

The requests are the phase probe's (same frames, prompt, decoding and letter scoring), so the
reference query — phase 0, identity ordering — is the phase probe's ``phase:0`` identity
request and comes from the cache when that suite ran. An unparseable answer is a lost query.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeAlias

from ..data.manifest import McqItem
from ..engine import Generation, Request
from ..errors import ConfigError
from ..scoring import usable
from ..strategies import cayley_distance, option_orderings, sampling_phases
from ..video.frames import FrameSpec
from ..video.sampling import frame_indices
from . import conditions as C
from .phase import LETTERS, PhaseSpec, _answer, _grid, accept_letter, mcq_request
from .search import ItemProperty, Outcome

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from ..gate_context import ProbeContext

MCQ_PROPERTIES = ("order", "phase")
MAX_LISTED_OPTIONS = 8  # 8! = 40,320 orderings: listed for posbias plan; more options are drawn instead

# a perturbation: an option ordering (``order``, a permutation of the K option indices) or a
# sampling phase in [0, 1) (``phase``)
McqValue: TypeAlias = tuple[int, ...] | Fraction


class McqProperty(ItemProperty[McqValue]):
    """``order`` or ``phase`` invariance of one multiple-choice item (module docstring)."""

    accept = staticmethod(accept_letter)  # the phase probe's rule

    def __init__(self, ctx: ProbeContext, model: str, item: McqItem, kind: str, spec: PhaseSpec, *,
                 max_denominator: int = 12) -> None:
        if kind not in MCQ_PROPERTIES:
            raise ConfigError(f"`kind` must be one of {', '.join(MCQ_PROPERTIES)}; got {kind!r}")
        self.ctx, self.model, self.item, self.spec = ctx, model, item, spec
        self.property = kind
        self.item_id = item.id
        self.k = len(item.options)
        self.max_denominator = int(max_denominator)
        self.smallest_change = 1.0 if kind == "order" else 1.0 / self.max_denominator
        backend = ctx.engine.backend(model)
        self.want = "letters" if getattr(backend, "supports_letter_logprobs", False) else "text"
        info = ctx.store.info(item.path)
        self.T, self.fps = info.frame_count, info.fps
        _grid(ctx, item, C.phase(0), spec)  # a window shorter than the budget: TooShortError, as in the phase probe
        self._clips: dict[Fraction, FrameSpec] = {}

    def corpus_key(self) -> str:
        extra = f"K{self.k}" if self.property == "order" else f"b{self.spec.budget}"
        return f"{self.property}[{extra}]|{self.item_id}"

    def strategy(self) -> SearchStrategy[McqValue]:
        if self.property == "order":
            return option_orderings(self.k)
        return sampling_phases(max_denominator=self.max_denominator)

    def all_values(self) -> list[McqValue] | None:
        """Every ordering of the K options (up to 8 options), or every phase p/q with q <= max_denominator."""
        if self.property == "order":
            return list(itertools.permutations(range(self.k))) if self.k <= MAX_LISTED_OPTIONS else None
        return sorted({Fraction(p, q) for q in range(1, self.max_denominator + 1) for p in range(q)})

    def reference_value(self) -> McqValue:
        return tuple(range(self.k)) if self.property == "order" else Fraction(0)

    def _perm_phase(self, value: McqValue) -> tuple[tuple[int, ...], Fraction]:
        """The option ordering and the phase ``value`` stands for (the other one unchanged); a value of
        the other property's kind is a ConfigError naming the item."""
        if self.property == "order" and not isinstance(value, Fraction):
            return tuple(value), Fraction(0)
        if self.property == "phase" and isinstance(value, Fraction):
            return tuple(range(self.k)), value
        raise ConfigError(f"item {self.item_id}: {value!r} is not a perturbation of the {self.property!r} property")

    def indices(self, phase: Fraction) -> list[int]:
        """The item's ``left`` grid at ``phase`` (absolute frame indices)."""
        return frame_indices(self.T, self.spec.budget, convention="left", phase=phase, fps=self.fps,
                             start=self.item.start, end=self.item.end)

    def _clip(self, phase: Fraction) -> FrameSpec:
        if phase not in self._clips:
            self._clips[phase] = self.ctx.store.clip(self.item.path, self.indices(phase), size=self.spec.resolution,
                                                     aspect="max-side")
        return self._clips[phase]

    def request(self, value: McqValue) -> Request:
        perm, phase = self._perm_phase(value)
        return mcq_request(self.model, self.item, self._clip(phase), perm, self.spec, self.want,
                           {"probe": "search", "property": self.property, "item": self.item.id, "perm": list(perm),
                            "phase": str(phase)})

    def score(self, value: McqValue, gen: Generation, reference: Outcome | None) -> Outcome:
        perm, phase = self._perm_phase(value)
        a = _answer(gen, perm)
        if not gen.ok or a.content < 0:
            why = (gen.error or "failed call" if not gen.ok
                   else usable.cut_off_reason(gen) or f"unparseable answer {gen.text[:40]!r}")
            return Outcome(False, False, None, why_lost=why)
        broken = reference is not None and a.content != reference.answer
        pos = list(perm).index(a.content)
        detail = {"answer_text": self.item.options[a.content], "answer_letter": LETTERS[pos],
                  "option_order": list(perm), "phase": str(phase), "frames": self.indices(phase),
                  "correct": a.content == self.item.answer}
        return Outcome(True, broken, int(a.content), detail)

    def encode(self, value: McqValue) -> dict[str, Any]:
        perm, phase = self._perm_phase(value)
        return {"order": [int(x) for x in perm]} if self.property == "order" else {"phase": str(phase)}

    def decode(self, data: Mapping[str, Any]) -> McqValue:
        if self.property == "order":
            perm = tuple(int(x) for x in data["order"])
            if sorted(perm) != list(range(self.k)):
                raise ConfigError(f"stored ordering {list(perm)} is not a permutation of {self.k} options")
            return perm
        ph = Fraction(str(data["phase"]))
        if not 0 <= ph < 1:
            raise ConfigError(f"stored phase {ph} is not in [0, 1)")
        return ph

    def size(self, value: McqValue) -> float:
        perm, phase = self._perm_phase(value)
        return float(cayley_distance(perm)) if self.property == "order" else float(phase)

    def describe(self, value: McqValue, outcome: Outcome, reference: Outcome) -> dict[str, Any]:
        perm, phase = self._perm_phase(value)
        ref_frames = self.indices(Fraction(0))
        new_frames = self.indices(phase)
        return {
            "perturbation": self.encode(value), "size": self.size(value),
            "transpositions": cayley_distance(perm), "option_order": list(perm), "phase": str(phase),
            "question": self.item.question, "options": list(self.item.options), "correct": int(self.item.answer),
            "reference_answer": reference.answer, "reference_text": reference.detail.get("answer_text"),
            "reference_letter": reference.detail.get("answer_letter"),
            "answer": outcome.answer, "answer_text": outcome.detail.get("answer_text"),
            "answer_letter": outcome.detail.get("answer_letter"),
            "video": self.item.video, "video_path": str(self.item.path),
            "frames": {"original": [{"source": "clip", "index": i} for i in ref_frames],
                       "perturbed": [{"source": "clip", "index": i, "changed": i not in ref_frames}
                                     for i in new_frames]},
        }


__all__ = ["MCQ_PROPERTIES", "McqProperty"]
