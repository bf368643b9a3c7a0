"""Per-slot diagnostics of a multi-video answer (multi-video paper §4.1 table 2, §4.4, §5.2, §5.3).

* allocation: words and sentences per slot, over-rate against the requested count, and whether the slot is in the
  exact-budget subset (sentence count equals the request);
* contamination: TF-IDF content-token similarity of a slot summary to its own reference and to the other references of
  the group; flagged when another reference is more similar by more than ``CONTAMINATION_MARGIN`` = 0.10
  ("substantially", §4.4 — a proxy, not a verified leak);
* target addressing for single-target prompting: a *hit* when the target's reference is the most similar (alone, and
  above zero), a *margin confusion* when another beats it by more than 0.05 (§5.2);
* leakage candidates (§5.3): a generated sentence whose concrete anchor words are weakly supported by the claimed
  target's reference but better supported by another video's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .text import content_words, sentences, tfidf_cosine, words

CONTAMINATION_MARGIN = 0.10
TARGET_MARGIN = 0.05
# words too generic to anchor a leak (concrete action/object words only)
GENERIC = frozenset("""video videos scene frame frames screen shows show shown showing appears appear begins ends
continues seen clip camera person people man woman someone something things thing time moment way side
also first then next finally another different various several one two three simple plain background""".split())


@dataclass(frozen=True)
class Allocation:
    words: int
    sentences: int
    requested: int

    @property
    def over(self) -> bool:
        return self.sentences > self.requested

    @property
    def exact(self) -> bool:
        return self.sentences == self.requested


def allocation(summary: str, requested: int) -> Allocation:
    return Allocation(len(words(summary)), len(sentences(summary)), requested)


@dataclass(frozen=True)
class SlotSimilarity:
    own: float
    others: tuple[float, ...]  # similarity to the other slots' references, in slot order (own slot skipped)
    best_other_slot: int | None

    @property
    def contaminated(self) -> bool:
        return bool(self.others) and max(self.others) - self.own > CONTAMINATION_MARGIN


def slot_similarity(summary: str, references: Sequence[str], slot: int) -> SlotSimilarity:
    """TF-IDF similarity of one slot summary to its own reference vs the group's others."""
    sims = tfidf_cosine(summary, references)
    own = sims[slot]
    others = [(s, k) for k, s in enumerate(sims) if k != slot]
    best = max(others)[1] if others else None
    return SlotSimilarity(own, tuple(s for s, _ in others), best)


@dataclass(frozen=True)
class TargetCheck:
    hit: bool
    margin_confusion: bool
    best_slot: int | None  # None when no reference is similar, or several are equally most similar


def target_check(summary: str, references: Sequence[str], target: int) -> TargetCheck:
    """Whether ``summary`` is most similar to the target's reference. An answer similar to no reference, or tied between
    several, addresses no slot: taking the first maximum would make it a hit for slot 0 only (a primacy artefact)."""
    sims = tfidf_cosine(summary, references)
    top = max(sims, default=0.0)
    tied = [k for k, s in enumerate(sims) if s == top]
    best = tied[0] if top > 0 and len(tied) == 1 else None
    others = [s for k, s in enumerate(sims) if k != target]
    return TargetCheck(best == target, bool(others) and max(others) - sims[target] > TARGET_MARGIN, best)


@dataclass(frozen=True)
class LeakCandidate:
    slot: int
    source_slot: int
    sentence: str
    anchors: tuple[str, ...]  # other-specific anchors: in the source reference, not in the target's
    support_target: float
    support_source: float


def leakage_candidates(summary: str, references: Sequence[str], slot: int, *, min_gap: float = 0.25,
                       min_support: float = 0.5) -> list[LeakCandidate]:
    """Sentences of slot ``slot``'s summary whose anchors another video's reference supports better."""
    ref_words = [set(content_words(r)) for r in references]
    out = []
    for sent in sentences(summary):
        anchors = {w for w in content_words(sent) if w not in GENERIC and len(w) >= 3}
        if not anchors:
            continue
        support = [len(anchors & rw) / len(anchors) for rw in ref_words]
        s_t = support[slot]
        others = [(s, k) for k, s in enumerate(support) if k != slot]
        if not others:
            continue
        s_o, k_o = max(others)
        if s_o >= min_support and s_o - s_t >= min_gap:
            specific = tuple(sorted((anchors & ref_words[k_o]) - ref_words[slot]))
            out.append(LeakCandidate(slot, k_o, sent, specific, s_t, s_o))
    return out
