"""What the temporal-stressor probe (:mod:`.stressor`) measured (VideoSTF §4), and the rates read from it."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import PosbiasError
from ..metrics import information_density, information_entropy, max_ngram_count, repetition_intensity, severity
from ..scoring import usable
from .settings import DEFAULTS, spec_kwargs

# The text metrics below are pure functions of the text that a run scores many times (sequential looks,
# the attack replay, doses sharing a description): each is memoized on the text (a bounded LRU, same values).
_TEXT_CACHE = 1 << 16


@functools.lru_cache(maxsize=_TEXT_CACHE)
def repeats(text: str) -> bool:
    """RR's indicator: the largest 5-gram count exceeds τ = 1."""
    return max_ngram_count(text, 5) > 1


ri_of = functools.lru_cache(maxsize=_TEXT_CACHE)(repetition_intensity)
ie_of = functools.lru_cache(maxsize=_TEXT_CACHE)(information_entropy)
density_of = functools.lru_cache(maxsize=_TEXT_CACHE)(information_density)
severity_of = functools.lru_cache(maxsize=_TEXT_CACHE)(severity)


_DEFAULTS = DEFAULTS["stressor"]  # the one source of the probe's defaults (probes/settings.py)


@dataclass(frozen=True)
class StressorSpec:
    """The stressor probe's parameters at one frame count; the defaults are the probe settings'
    (:data:`~.settings.DEFAULTS`, VideoSTF's 30 trials and attack cap, 500 new tokens), at the first
    configured frame count."""

    videos: int = _DEFAULTS["videos"]
    frames: int = _DEFAULTS["frames"][0]
    trials: int = _DEFAULTS["trials"]
    attack_cap: int = _DEFAULTS["attack_cap"]
    max_new_tokens: int = _DEFAULTS["max_new_tokens"]
    resolution: int = _DEFAULTS["resolution"]

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], frames: int) -> StressorSpec:
        """The spec at ``frames`` frames of validated ``[tool.posbias.probes.stressor]`` settings
        (:func:`~.settings.settings_for`); a key they lack keeps its default."""
        return cls(**{**spec_kwargs("stressor", cls, settings), "frames": frames})

    def key(self) -> str:
        """The spec as a string (the repr of its fields): a memo key of the probe's results."""
        return repr(asdict(self))


@dataclass
class TextStats:
    """Outputs of one condition, in request order. ``ok[i]`` is False for a failed call (backend
    error, timeout, empty or malformed response) and for an unusable description (``reasons[i]``:
    too few words, not words, an echo of the prompt, a constant answer: ``scoring/usable.py``): such
    an output is a lost unit, never a clean one, so every rate below is computed over the ok outputs
    only and the failures are counted."""

    texts: list[str]
    finish: list[str]
    ok: list[bool] = field(default_factory=list)
    reasons: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.ok:
            self.ok = [True] * len(self.texts)
        if not self.reasons:
            self.reasons = [None] * len(self.texts)

    def unusable(self) -> dict[str, int]:
        """Unusable outputs of succeeded calls, by reason (``scoring/usable.py``)."""
        return dict(Counter(why or usable.EMPTY for ok, f, why in zip(self.ok, self.finish, self.reasons, strict=True)
                            if not ok and f != "error"))

    @property
    def valid(self) -> np.ndarray:
        """Which outputs are measured (the call succeeded)."""
        return np.array(self.ok, dtype=bool)

    @property
    def failed(self) -> int:
        """Outputs not measured: failed calls and empty answers."""
        return int(len(self.ok) - sum(self.ok))

    @property
    def empty(self) -> int:
        """Outputs whose call succeeded but returned no usable text (a lost unit, counted apart from errors)."""
        return sum(self.unusable().values())

    @property
    def flags(self) -> np.ndarray:
        """RR indicator per output; False for a failed call (use with :attr:`valid`)."""
        return np.array([ok and repeats(t) for t, ok in zip(self.texts, self.ok, strict=True)], dtype=bool)

    def measured(self) -> TextStats:
        """The ok outputs only."""
        return self.take([i for i, ok in enumerate(self.ok) if ok])

    def take(self, keep: Sequence[int]) -> TextStats:
        """The outputs at indices ``keep``, in that order."""
        return TextStats([self.texts[i] for i in keep], [self.finish[i] for i in keep], [self.ok[i] for i in keep],
                         [self.reasons[i] for i in keep])

    def summary(self) -> dict[str, Any]:
        """Over the measured outputs: n, failed, RR (share repeating), mean RI and IE (n = 1),
        mean information density, severity shares and mean word count (VideoSTF §4)."""
        m = self.measured()
        if not m.texts:
            return {"n": 0, "failed": self.failed}
        sev = [severity_of(t, f if f in ("stop", "length") else None) for t, f in zip(m.texts, m.finish, strict=True)]
        return {"n": len(m.texts), "failed": self.failed, "rr": float(m.flags.mean()),
                "ri": float(np.mean([ri_of(t) for t in m.texts])),
                "ie": float(np.mean([ie_of(t) for t in m.texts])),
                "density": float(np.mean([density_of(t) for t in m.texts])),
                "severity": {s: sev.count(s) / len(sev) for s in ("benign", "ordinary", "severe")},
                "mean_words": float(np.mean([len(t.split()) for t in m.texts]))}


@dataclass
class StressorResult:
    """One model's stressor probe at one frame count: the clean outputs per video, each
    stressor's variants per video, the controls, the videos that could not be used
    (``problems``), failed calls and the engine's call counts."""

    model: str
    spec: StressorSpec
    videos: list[str]
    clean: TextStats
    variants: dict[str, list[TextStats]] = field(default_factory=dict)  # stressor -> per video
    controls: dict[str, TextStats] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    errors: int = 0
    calls: dict[str, Any] = field(default_factory=dict)
    planned: int = 0  # videos drawn (kept + those that could not be used)

    def amplification(self, stressor: str) -> np.ndarray:
        """Per video: share of its *measured* variants that repeat − its clean repetition indicator
        (VideoSTF: RR stressed − RR clean, over every video); nan (a lost video) when its clean output
        was not measured or none of its variants was.

        Every measured video counts, also one whose clean output repeats (its d is <= 0). Keeping only
        clean-benign videos would select on the clean outcome: for a model whose loops are random per
        request the stressed RR of those videos exceeds their clean RR of 0 by regression to the mean,
        a spurious amplification (sim:looping under Delete and Reverse). A model that loops
        everywhere shows no amplification here; the repetition gate fails it."""
        clean = self.clean.flags
        return np.array([float(s.flags[s.valid].mean()) - float(clean[v]) if self.clean.ok[v] and s.valid.any()
                         else np.nan for v, s in enumerate(self.variants[stressor])], dtype=float)

    def walk(self, stressor: str, v: int) -> tuple[np.ndarray, np.ndarray]:
        """The attack walk of video ``v``: (RR flags, ok) of its first ``attack_cap`` variants
        (every stressor, Delete 1 included, is capped as in VideoSTF)."""
        s = self.variants[stressor][v]
        cap = self.spec.attack_cap
        return s.flags[:cap], s.valid[:cap]

    def _walks(self, stressor: str) -> list[int | None]:
        """Per attacked (clean-benign, measured) video in order: the 1-based query of the first
        repetitive output of its capped walk before any failed call, 0 when the walk ends without
        one, None when a failed call came first (the walk cannot go on past a query whose answer is
        unknown: the video is lost) or the walk is empty (no variant of the video was run: a planned
        unit lost, as in :meth:`amplification`)."""
        out: list[int | None] = []
        for v, flag in enumerate(self.clean.flags):
            if flag or not self.clean.ok[v]:
                continue  # only videos whose clean output is measured and benign are attacked
            flags, ok = self.walk(stressor, v)
            if not ok.size:
                out.append(None)
                continue
            first_fail = int(np.argmin(ok)) if not ok.all() else len(ok)
            hit = np.flatnonzero(flags[:first_fail])
            out.append(int(hit[0]) + 1 if hit.size else (None if first_fail < len(ok) else 0))
        return out

    def attack_outcomes(self, stressor: str) -> tuple[list[float], int]:
        """Per attacked video whose walk is not lost (:meth:`_walks`): 1.0 when it hits a repetitive
        output, 0.0 when it ends without one; and the number of lost videos."""
        walks = self._walks(stressor)
        return [float(q > 0) for q in walks if q is not None], walks.count(None)

    def attack(self, stressor: str) -> dict[str, Any]:
        """Replay the attack walk (capped at ``attack_cap`` queries) over each clean-benign video:
        ASR = successes / attacked, AQ = mean queries over successes (VideoSTF §4.4)."""
        walks = self._walks(stressor)
        queries = [q for q in walks if q]
        attacked = len(walks) - walks.count(None)
        successes = len(queries)
        return {"attacked": attacked, "successes": successes, "asr": successes / attacked if attacked else float("nan"),
                "aq": float(np.mean(queries)) if queries else float("nan"), "queries": queries,
                "lost": walks.count(None)}


def merge_parts(parts: Sequence[StressorResult]) -> StressorResult:
    """One result from parts of the probe on the same videos (the clean outputs of the first; the
    variants and controls of each; failed calls and calls summed over the parts' own requests)."""
    first = parts[0]
    out = StressorResult(first.model, first.spec, list(first.videos), first.clean, problems=list(first.problems),
                         planned=first.planned, errors=first.errors)
    clean_errors = sum(1 for f in first.clean.finish if f == "error")
    calls: dict[str, Any] = dict(first.calls)
    for p in parts:
        if p.videos != first.videos:
            raise PosbiasError("stressor probe parts on different videos cannot be merged")
        out.variants.update(p.variants)
        out.controls.update(p.controls)
        if p is not first:
            out.errors += p.errors - clean_errors
            for k, v in p.calls.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    calls[k] = calls.get(k, 0) + v
    out.calls = calls
    return out
