"""Hypothesis strategies for the papers' perturbation spaces (public API).

Every strategy draws a *change* of one input and shrinks toward "no change", so a failing example
that hypothesis shrinks is the least change that still fails: option orderings as transpositions
of the identity (phase paper), exact sampling phases p/q, frame samplers, multi-video orders and
layouts (multi-video paper §3.1, appendix A.1) and temporal stressors (VideoSTF §3.3). The values
are frozen dataclasses with ``to_json``/``from_json`` (the regression corpus stores them);
:func:`change_size` measures them. Importing this module imports hypothesis; ``import
pytest_posbias`` does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from .errors import ConfigError
from .video.compose import BOUNDARIES, PLACEMENTS
from .video.sampling import ALL as SAMPLER_NAMES

# stressor kinds, in shrink order (hypothesis's sampled_from shrinks toward the first)
STRESSOR_KINDS = ("replace", "add", "delete", "foreign", "reverse", "shuffle")

__all__ = [
    "STRESSOR_KINDS", "Layout", "SamplerChoice", "StressorEdit", "apply_transpositions", "cayley_distance",
    "change_size", "multi_video_layouts", "option_orderings", "samplers", "sampling_phases", "stressed_frames",
    "stressor_compositions", "stressor_edits", "transpositions", "video_orders",
]


def _int_ge(name: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"`{name}` must be an integer >= {lo}; got {v!r}")
    return int(v)


# --------------------------------------------------------------------------- orderings


@st.composite
def _swap(draw: Any, k: int) -> tuple[int, int]:
    i = draw(st.integers(0, k - 2))
    j = draw(st.integers(i + 1, k - 1))
    return (i, j)


def transpositions(k: int, *, max_swaps: int | None = None) -> st.SearchStrategy[tuple[tuple[int, int], ...]]:
    """Lists of transpositions (i, j), i < j < k, at most ``max_swaps`` (default k − 1, enough
    for any permutation). Shrinks toward the empty list (no change), then toward (0, 1)."""
    _int_ge("k", k, 1)
    m = k - 1 if max_swaps is None else _int_ge("max_swaps", max_swaps, 0)
    if k < 2 or m == 0:
        return st.just(())
    return st.lists(_swap(k), max_size=m).map(tuple)


def apply_transpositions(k: int, swaps: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The ordering obtained by swapping positions (i, j) of the identity (0..k−1), in turn:
    position j of the result shows content ``perm[j]`` (the convention of the phase probe)."""
    perm = list(range(k))
    for i, j in swaps:
        perm[i], perm[j] = perm[j], perm[i]
    return tuple(perm)


def cayley_distance(perm: Sequence[int]) -> int:
    """The fewest transpositions that turn the identity into ``perm``: k − (number of cycles)."""
    seen = [False] * len(perm)
    cycles = 0
    for s in range(len(perm)):
        if not seen[s]:
            cycles += 1
            j = s
            while not seen[j]:
                seen[j] = True
                j = int(perm[j])
    return len(perm) - cycles


def option_orderings(k: int, *, max_swaps: int | None = None) -> st.SearchStrategy[tuple[int, ...]]:
    """Orderings of k options (position j shows content perm[j]) reached by at most
    ``max_swaps`` transpositions of the identity; shrinks toward the identity, then toward
    a single swap of the first two options."""
    return transpositions(k, max_swaps=max_swaps).map(lambda sw: apply_transpositions(k, sw))


def video_orders(P: int) -> st.SearchStrategy[tuple[int, ...]]:
    """Orders of P videos in one prompt (slot p shows video order[p]); shrinks toward the identity."""
    return option_orderings(_int_ge("P", P, 1))


# --------------------------------------------------------------------------- phases and samplers


@st.composite
def _phase(draw: Any, max_denominator: int, denominator: int | None) -> Fraction:
    q = denominator if denominator is not None else draw(st.integers(1, max_denominator))
    p = draw(st.integers(0, q - 1))
    return Fraction(p, q)


def sampling_phases(*, max_denominator: int = 12, denominator: int | None = None) -> st.SearchStrategy[Fraction]:
    """Exact phases p/q in [0, 1): q in 1..``max_denominator`` (or fixed to ``denominator``,
    e.g. S = 3 for the phase paper's s/S grids). Shrinks toward phase 0."""
    _int_ge("max_denominator", max_denominator, 1)
    if denominator is not None:
        _int_ge("denominator", denominator, 1)
    return _phase(max_denominator, denominator)


@dataclass(frozen=True)
class SamplerChoice:
    """A sampler: ``convention`` (``left`` takes ``phase``), at ``budget`` frames."""

    convention: str = "left"
    budget: int = 8
    phase: Fraction = Fraction(0)

    def to_json(self) -> dict[str, Any]:
        return {"convention": self.convention, "budget": self.budget, "phase": str(self.phase)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SamplerChoice:
        return cls(str(d["convention"]), int(d["budget"]), Fraction(str(d.get("phase", "0"))))


@st.composite
def _sampler(draw: Any, budgets: tuple[int, ...], conventions: tuple[str, ...], max_denominator: int) -> SamplerChoice:
    conv = draw(st.sampled_from(conventions))
    b = draw(st.sampled_from(budgets))
    phase = draw(sampling_phases(max_denominator=max_denominator))  # drawn always: the same shape for every
    return SamplerChoice(conv, b, phase if conv == "left" else Fraction(0))  # convention, so "left" is the least


def samplers(budget: int, *, budgets: Sequence[int] = (), conventions: Sequence[str] = SAMPLER_NAMES,
             max_denominator: int = 12) -> st.SearchStrategy[SamplerChoice]:
    """Sampler presets with their knobs (convention, budget, phase of ``left``). Shrinks toward
    ``left`` at ``budget`` frames and phase 0 (the reference grid)."""
    _int_ge("budget", budget, 1)
    if not conventions or any(c not in SAMPLER_NAMES for c in conventions):
        raise ConfigError(f"`conventions` must be a non-empty subset of {', '.join(SAMPLER_NAMES)}; got "
                          f"{list(conventions)!r}")
    conv = ("left", *[c for c in conventions if c != "left"])
    bud = (budget, *[_int_ge("budgets", b, 1) for b in budgets if b != budget])
    return _sampler(bud, conv, max_denominator)


# --------------------------------------------------------------------------- multi-video layouts


@dataclass(frozen=True)
class Layout:
    """A multi-video prompt layout: slot p shows video ``order[p]``."""

    order: tuple[int, ...]
    boundary: str = "black"
    placement: str = "prompt-first"
    label_base: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"order": list(self.order), "boundary": self.boundary, "placement": self.placement,
                "label_base": self.label_base}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Layout:
        return cls(tuple(int(x) for x in d["order"]), str(d.get("boundary", "black")),
                   str(d.get("placement", "prompt-first")), int(d.get("label_base", 0)))


def multi_video_layouts(P: int, *, boundaries: Sequence[str] = BOUNDARIES, placements: Sequence[str] = PLACEMENTS,
                        label_bases: Sequence[int] = (0, 1)) -> st.SearchStrategy[Layout]:
    """Video order with boundary, placement and label-base variants; shrinks toward the identity
    order, the first boundary/placement given (black, prompt-first) and zero-indexed labels."""
    _int_ge("P", P, 1)
    for name, vals, allowed in (("boundaries", boundaries, BOUNDARIES), ("placements", placements, PLACEMENTS),
                                ("label_bases", label_bases, (0, 1))):
        if not vals or any(v not in allowed for v in vals):
            raise ConfigError(f"`{name}` must be a non-empty subset of {allowed}; got {list(vals)!r}")
    return st.builds(Layout, video_orders(P), st.sampled_from(tuple(boundaries)), st.sampled_from(tuple(placements)),
                     st.sampled_from(tuple(label_bases)))


# --------------------------------------------------------------------------- temporal stressors


@dataclass(frozen=True)
class StressorEdit:
    """One temporal stressor on a sampled frame list (positions refer to the list it is applied to;
    in a composition positions past the current length wrap around).

    * ``replace``: frame ``positions[m]`` shows the clip's sampled frame ``sources[m]`` (≠ itself);
    * ``foreign``: frame ``positions[m]`` shows the other video's sampled frame ``sources[m]``;
    * ``add``: a copy of sampled frame ``sources[m]`` is inserted before position ``positions[m]``;
    * ``delete``: the frames at ``positions`` are removed;
    * ``reverse``: the run of frames at ``positions`` (consecutive) is reversed;
    * ``shuffle``: the frames at ``positions`` are rotated by one (each moves to the next position).
    """

    kind: str
    positions: tuple[int, ...] = ()
    sources: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "positions": list(self.positions), "sources": list(self.sources)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> StressorEdit:
        kind = str(d["kind"])
        if kind not in STRESSOR_KINDS:
            raise ConfigError(f"stressor edit kind must be one of {', '.join(STRESSOR_KINDS)}; got {kind!r}")
        return cls(kind, tuple(int(x) for x in d.get("positions", [])), tuple(int(x) for x in d.get("sources", [])))

    @property
    def frames_changed(self) -> int:
        """Stressed frames: positions touched (a reverse or shuffle of one frame changes nothing)."""
        if self.kind in ("reverse", "shuffle") and len(self.positions) < 2:
            return 0
        return len(self.positions)


@st.composite
def _edit(draw: Any, T: int, max_frames: int, kinds: tuple[str, ...]) -> StressorEdit:
    kind = draw(st.sampled_from(kinds))
    hi = min(max_frames, T if kind in ("add", "foreign") else T - 1)
    n = draw(st.integers(0, max(0, hi)))
    if kind == "reverse":
        start = draw(st.integers(0, T - n)) if n else 0
        return StressorEdit(kind, tuple(range(start, start + n)))
    if kind == "add":
        pos = tuple(draw(st.integers(0, T)) for _ in range(n))
        src = tuple(draw(st.integers(0, T - 1)) for _ in range(n))
        return StressorEdit(kind, pos, src)
    pos = tuple(sorted(draw(st.lists(st.integers(0, T - 1), min_size=n, max_size=n, unique=True))))
    if kind == "replace":  # another frame of the same clip: offset 1..T-1 from the target
        src = tuple((p + draw(st.integers(1, T - 1))) % T for p in pos)
        return StressorEdit(kind, pos, src)
    if kind == "foreign":
        return StressorEdit(kind, pos, tuple(draw(st.integers(0, T - 1)) for _ in pos))
    return StressorEdit(kind, pos)


def stressor_edits(T: int, *, max_frames: int = 4,
                   kinds: Sequence[str] = STRESSOR_KINDS) -> st.SearchStrategy[StressorEdit]:
    """One stressor on T sampled frames touching 0..``max_frames`` frames; shrinks toward zero
    stressed frames, then the first kind (``replace``) and the first positions."""
    _int_ge("T", T, 2)
    _int_ge("max_frames", max_frames, 1)
    if not kinds or any(k not in STRESSOR_KINDS for k in kinds):
        raise ConfigError(f"`kinds` must be a non-empty subset of {', '.join(STRESSOR_KINDS)}; got {list(kinds)!r}")
    return _edit(T, max_frames, tuple(k for k in STRESSOR_KINDS if k in kinds))


def stressor_compositions(T: int, *, max_edits: int = 2, max_frames: int = 4,
                          kinds: Sequence[str] = STRESSOR_KINDS) -> st.SearchStrategy[tuple[StressorEdit, ...]]:
    """Compositions of up to ``max_edits`` stressors applied in turn; shrinks toward the empty
    composition (the clean frames), fewer edits and fewer stressed frames per edit."""
    _int_ge("max_edits", max_edits, 1)
    return st.lists(stressor_edits(T, max_frames=max_frames, kinds=kinds), max_size=max_edits).map(tuple)


def stressed_frames(edits: Sequence[StressorEdit]) -> int:
    """Total stressed frames of a composition (the size the search minimises)."""
    return sum(e.frames_changed for e in edits)


def change_size(value: Any) -> float:
    """How much a perturbation changes its input: transpositions for an ordering (Cayley
    distance), the phase for a Fraction, stressed frames for stressors, and for a layout or a
    sampler the sum of its parts that differ from the reference."""
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, StressorEdit):
        return float(value.frames_changed)
    if isinstance(value, Layout):
        return float(cayley_distance(value.order) + (value.boundary != BOUNDARIES[0])
                     + (value.placement != PLACEMENTS[0]) + value.label_base)
    if isinstance(value, SamplerChoice):
        return float((value.convention != "left") + float(value.phase))
    if isinstance(value, tuple) and all(isinstance(v, StressorEdit) for v in value):
        return float(stressed_frames(value))
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return float(cayley_distance(value))
    raise ConfigError(f"no change size for a value of type {type(value).__name__}")
