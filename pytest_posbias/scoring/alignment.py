"""Alignment of a multi-video answer to per-video summaries (multi-video paper §3.2, appendix C.1).

Stage 1, markers: the answer is cut at ``[videoK]`` markers. Parsing is tolerant of case,
spacing, bold (``**[Video 1]**``), colons, and of a model that answers a zero-indexed
request with one-indexed markers (``[video1]``..``[videoP]``), which is detected and
shifted. A slot whose marker is missing or malformed is a *marker failure* for that slot.

Stage 2, fallback: when the answer uses no marker at all, each sentence goes to the
reference it is most similar to (embedding similarity; TF-IDF when no embedder is
installed) and the sentences of a slot are concatenated. Counted as a *fallback* per slot.

A slot whose text is only template filler (``summary``, ``...``) is a *placeholder* and is
scored zero coverage (appendix C.1); so is an empty slot.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .text import sentences, tfidf_cosine

# Each optional piece carries the whitespace after it ("\s*(?:X\s*)?", not "\s*X?\s*") and a
# line-start marker skips only the blanks of its own line, so no run of spaces or blank lines can be
# split two ways: matching is linear in the answer's length.
_MARKER = re.compile(
    # [video0], [ Video 1 ], **[video2]**
    r"(?:\*\*|__)?\[\s*(?:\*\*\s*)?video\s*(?:[_-]\s*)?(\d+)\s*(?:\*\*\s*)?\](?:\*\*|__)?\s*:?"
    # **Video 1:** / ## Video 1 at line start
    r"|(?m:^)[^\S\n]*(?:\*\*|__|#+)\s*video\s*(?:[_-]\s*)?(\d+)\s*:?\s*(?:\*\*|__)?\s*:?",
    re.IGNORECASE,
)
# Filler around the word is any run of non-word characters or underscores (``...``, ``…``, ``___``,
# a leading ``[``); the leading run is possessive, so a long run before a word is scanned once.
_PLACEHOLDER = re.compile(r"^[\W_]*+(?:summary|summaries|n/?a|none|tbd|video\s*(?:\d+\]?\s*|\]\s*)?summary)?"
                          r"[\W_]*+$", re.IGNORECASE)

SLOT_OK, SLOT_MISSING, SLOT_EMPTY = "ok", "marker_failure", "empty"
SLOT_PLACEHOLDER, SLOT_FALLBACK = "placeholder", "fallback"


@dataclass(frozen=True)
class Alignment:
    """Per-slot summaries (slot order) and what happened to each slot."""

    summaries: tuple[str, ...]
    status: tuple[str, ...]
    mode: str  # "markers" | "fallback" | "empty"
    one_indexed_shift: bool = False
    extra_markers: tuple[int, ...] = field(default=())

    def scoreable(self, slot: int) -> bool:
        return self.status[slot] in (SLOT_OK, SLOT_FALLBACK)


def is_placeholder(text: str) -> bool:
    """True for template filler such as ``summary`` or ``...`` (appendix C.1)."""
    return bool(_PLACEHOLDER.match(text.strip()))


def find_markers(text: str) -> list[tuple[int, int, int]]:
    """(label, start, end) of every marker in the text, in order."""
    return [(int(m.group(1) if m.group(1) is not None else m.group(2)), m.start(), m.end())
            for m in _MARKER.finditer(text)]


def align(
    text: str,
    P: int,
    *,
    label_base: int = 0,
    references: Sequence[Sequence[str]] | None = None,
    similarity: Callable[[Sequence[str], Sequence[str]], np.ndarray] | None = None,
) -> Alignment:
    """Cut ``text`` into P slot summaries (slot k = marker ``[video{label_base + k}]``).

    ``references[k]`` (sentences of slot k's video) are needed only for the fallback;
    ``similarity(sentences, docs)`` returns an (n_sentences, n_docs) matrix, TF-IDF by default.
    """
    if not text.strip():
        return Alignment(("",) * P, (SLOT_EMPTY,) * P, "empty")
    if not (markers := find_markers(text)):
        return _fallback(text, P, references, similarity)
    labels = [m[0] for m in markers]
    shift = label_base == 0 and 0 not in labels and set(labels) <= set(range(1, P + 1)) and P in labels
    if shift:  # answered [video1]..[videoP] to a zero-indexed request
        markers = [(lab - 1, s, e) for lab, s, e in markers]
    segments: dict[int, list[str]] = {}
    for i, (lab, _, end) in enumerate(markers):
        stop = markers[i + 1][1] if i + 1 < len(markers) else len(text)
        segments.setdefault(lab, []).append(text[end:stop].strip())
    summaries = [" ".join(s for s in segments.get(label_base + k, []) if s).strip() for k in range(P)]
    status = [SLOT_MISSING if label_base + k not in segments else SLOT_EMPTY if not seg else
              SLOT_PLACEHOLDER if is_placeholder(seg) else SLOT_OK for k, seg in enumerate(summaries)]
    extra = tuple(sorted(lab for lab in segments if not label_base <= lab < label_base + P))
    return Alignment(tuple(summaries), tuple(status), "markers", shift, extra)


def _fallback(text: str, P: int, references: Sequence[Sequence[str]] | None,
              similarity: Callable[[Sequence[str], Sequence[str]], np.ndarray] | None) -> Alignment:
    sents = sentences(text)
    if references is None or len(references) != P or not sents:
        return Alignment(("",) * P, (SLOT_MISSING,) * P, "fallback")
    docs = [" ".join(r) for r in references]
    sim = (np.array([tfidf_cosine(s, docs) for s in sents]) if similarity is None
           else np.asarray(similarity(sents, docs)))
    assigned: list[list[str]] = [[] for _ in range(P)]
    for s, row in zip(sents, sim, strict=True):
        if np.max(row) > 0:  # a sentence similar to no reference (a refusal) belongs to no slot, not to slot 0
            assigned[int(np.argmax(row))].append(s)
    summaries = tuple(" ".join(a) for a in assigned)
    status = tuple(SLOT_FALLBACK if s else SLOT_EMPTY for s in summaries)
    return Alignment(summaries, status, "fallback")
