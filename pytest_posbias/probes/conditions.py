"""The phase probe's conditions: which frames one pass over an item shows.

A condition is a typed :class:`Condition`; its name (``str(condition)``) keys the probe's answers
(``PhaseResult.condition_answers``), the run log and the report, so the names are the probe's
wire format and are built only here:

* ``sampler:NAME`` — a deployed frame sampler (``left``, ``midpoint``, ...) at the probe's budget b;
* ``budget:NAME@F`` — a sampler at F frames (another budget of the flip gate, or the equivalence
  gate's single pass at 4b frames);
* ``phase:s`` / ``shift:s`` — phase s of the S-phase polyphase grid of b frames, with origin 0 or
  1/(2S) (the phase paper's origin shift);
* ``union`` / ``union-shift`` — the S grids interleaved (S × b frames), with either origin;
* ``rerun:s`` — phase s asked again (the backend's own re-run floor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

Kind = Literal["sampler", "budget", "phase", "shift", "union", "union-shift", "rerun"]
KINDS: tuple[Kind, ...] = ("sampler", "budget", "phase", "shift", "union", "union-shift", "rerun")
# The equivalence gate's single pass sees 4b frames: the phase paper's confirmatory comparison of
# PhaseFusion (S × b) with one pass at 4b frames.
EQUIVALENCE_BUDGET_FACTOR = 4


@dataclass(frozen=True)
class Condition:
    """One condition (module docstring): ``kind``, its sampler name or phase index ``arg`` (empty
    for the union passes) and, for ``budget``, the frame count."""

    kind: Kind
    arg: str = ""
    frames: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if (self.kind == "budget") != (self.frames is not None):
            raise ValueError(f"a frame count belongs to a budget condition only; got {self.kind!r} with "
                             f"{self.frames!r}")
        if self.kind in ("union", "union-shift") and self.arg:
            raise ValueError(f"a {self.kind} condition takes no argument; got {self.arg!r}")
        if self.kind in ("phase", "shift", "rerun") and not self.arg.isdigit():
            raise ValueError(f"a {self.kind} condition takes a phase index; got {self.arg!r}")

    def __str__(self) -> str:
        if self.kind in ("union", "union-shift"):
            return self.kind
        if self.kind == "budget":
            return f"budget:{self.arg}@{self.frames}"
        return f"{self.kind}:{self.arg}"

    @property
    def phase(self) -> int:
        """The phase index of a ``phase``, ``shift`` or ``rerun`` condition."""
        return int(self.arg)

    @classmethod
    def parse(cls, name: str) -> Condition:
        """The condition named ``name`` (``str`` of a condition); ValueError for any other text."""
        kind, sep, arg = name.partition(":")
        if kind in ("union", "union-shift") and not sep:
            return cls(cast(Kind, kind))
        if kind == "budget":
            sampler, at, frames = arg.partition("@")
            if at and sampler and frames.isdigit():
                return cls("budget", sampler, int(frames))
        elif sep and kind in KINDS and arg:
            return cls(cast(Kind, kind), arg)
        raise ValueError(f"unknown condition {name!r}")


def sampler(name: str) -> str:
    """``sampler:NAME``: a deployed sampler at the probe's budget."""
    return str(Condition("sampler", name))


def phase(s: int) -> str:
    """``phase:s``."""
    return str(Condition("phase", str(s)))


def phases(S: int) -> list[str]:
    """The S phases of the grid, origin 0."""
    return [phase(s) for s in range(S)]


def shift(s: int) -> str:
    """``shift:s``: phase s of the origin-shifted grid."""
    return str(Condition("shift", str(s)))


def shifts(S: int) -> list[str]:
    """The S phases of the origin-shifted grid."""
    return [shift(s) for s in range(S)]


def rerun(s: int = 0) -> str:
    """Phase ``s`` asked again."""
    return str(Condition("rerun", str(s)))


UNION = str(Condition("union"))
UNION_SHIFT = str(Condition("union-shift"))


def sampler_at(sampler: str, frames: int, budget: int) -> str:
    """A sampler at ``frames`` frames: ``sampler:NAME`` at the probe's ``budget``, else ``budget:NAME@F``."""
    return str(Condition("sampler", sampler) if frames == budget else Condition("budget", sampler, frames))


def fusion_conditions(S: int) -> list[str]:
    """The fusion gate's passes: the S phases, the S shifted phases and both unions."""
    return [*phases(S), *shifts(S), UNION, UNION_SHIFT]


def equivalence_conditions(S: int, budget: int) -> list[str]:
    """The equivalence gate's passes: the S phases (fused), then the single left-sampler pass at
    ``EQUIVALENCE_BUDGET_FACTOR`` × ``budget`` frames (last)."""
    return [*phases(S), str(Condition("budget", "left", EQUIVALENCE_BUDGET_FACTOR * budget))]


__all__ = ["EQUIVALENCE_BUDGET_FACTOR", "KINDS", "UNION", "UNION_SHIFT", "Condition", "Kind", "equivalence_conditions",
           "fusion_conditions", "phase", "phases", "rerun", "sampler", "sampler_at", "shift", "shifts"]
