"""Fail closed: what a gate planned to measure, what it measured and what it lost (docs/design.md
section 5). Lost units (failed calls, empty or unparseable outputs, unusable data) are never scored
as clean or compliant. :func:`apply_floor` makes a verdict fail in either mode when no unit was
measured, when the measured share of the planned units is below the measurement floor (default
0.95), or when the failed share of the model calls behind it exceeds ``1 − floor``; the statistics
on the measured units stay in the reason and in ``extra``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from ..stats import Verdict

DEFAULT_FLOOR = 0.95


def check_floor(floor: float, *, name: str = "measurement_floor") -> float:
    """Validate a measurement floor: a number in (0, 1]."""
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0.0 < float(floor) <= 1.0:
        raise ConfigError(f"`{name}` must be a number in (0, 1] (the share of planned units a gate must measure); "
                          f"got {floor!r}")
    return float(floor)


@dataclass(frozen=True)
class Measurement:
    """Units of one gate: ``planned`` = measured + Σ lost. ``calls``/``failed_calls`` count the
    model calls behind the gate (0 when the gate does not count them separately)."""

    unit: str
    planned: int
    measured: int
    lost: Mapping[str, int] = field(default_factory=dict)
    calls: int = 0
    failed_calls: int = 0
    examples: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.planned < 0 or self.measured < 0 or self.measured > self.planned:
            raise ConfigError(f"a measurement needs 0 <= measured <= planned; got measured = {self.measured}, "
                              f"planned = {self.planned}")

    @property
    def share(self) -> float:
        """Measured share of the planned units (nan when nothing was planned)."""
        return self.measured / self.planned if self.planned else math.nan

    @property
    def failed_share(self) -> float:
        """Failed share of the model calls behind the gate (0 when none were counted)."""
        return self.failed_calls / self.calls if self.calls else 0.0

    def lost_text(self) -> str:
        """``generation errors 3, unusable data 1`` (causes with a non-zero count)."""
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.lost.items() if v) or "none"

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit, "planned": self.planned, "measured": self.measured,
                "lost": {k: int(v) for k, v in self.lost.items() if v}, "calls": self.calls,
                "failed_calls": self.failed_calls, "examples": list(self.examples)[:5]}


def combine(a: Measurement, b: Measurement, *, prefix_b: str, measured: int | None = None) -> Measurement:
    """Two measurements of the same units (candidate and baseline): the lost causes of ``b``
    are prefixed and calls add up. ``measured`` is the number of units measured in *both* arms
    that the paired decision uses (a unit lost in either arm is lost); without it, the smaller
    count (an upper bound)."""
    lost = dict(a.lost)
    for k, v in b.lost.items():
        lost[f"{prefix_b} {k}"] = lost.get(f"{prefix_b} {k}", 0) + v
    planned = max(a.planned, b.planned)
    both = min(a.measured, b.measured, planned) if measured is None else min(int(measured), planned)
    return Measurement(a.unit, planned, both, lost, a.calls + b.calls,
                       a.failed_calls + b.failed_calls, [*a.examples, *b.examples][:5])


def floor_problem(m: Measurement, floor: float) -> str | None:
    """Why the measurement does not support a pass, or None when it does."""
    f = check_floor(floor)
    if m.planned == 0:
        return f"no measurement: no {m.unit} planned (the data hold none usable for this gate)"
    if m.measured == 0:
        calls = f"{m.failed_calls} of {m.calls} model calls failed or returned nothing; " if m.calls else ""
        return (f"no measurement: {calls}0 of {m.planned} planned {m.unit} measured "
                f"(lost: {m.lost_text()})")
    if m.share < f - 1e-12:
        return (f"measurement floor not met: {m.measured} of {m.planned} planned {m.unit} measured "
                f"({m.share:.0%} < {f:.0%}; lost: {m.lost_text()})")
    if m.calls and m.failed_share > 1 - f + 1e-12:
        return (f"too many failed model calls: {m.failed_calls} of {m.calls} ({m.failed_share:.0%} > {1 - f:.0%}); "
                f"failed calls are excluded, never scored as clean")
    return None


def apply_floor(verdict: Verdict, m: Measurement, *, floor: float = DEFAULT_FLOOR) -> Verdict:
    """Attach ``m`` to the verdict and make it fail (in either mode) when the floor is not met.

    The reason starts with the cause and the counts, e.g. ``no measurement: 8 of 8 model calls
    failed; 0 of 8 planned items measured``; the statistics on the measured units follow.
    """
    problem = floor_problem(m, floor)
    extra = {**verdict.extra, "measurement": {**m.to_dict(), "floor": float(floor), "floor_met": problem is None}}
    if problem is None:
        return replace(verdict, extra=extra)
    reason = (f"{verdict.name}: {problem}, so the gate does not pass in either mode "
              f"(statistics on what was measured: {verdict.reason})")
    return replace(verdict, passed=False, reason=reason, extra=extra)


__all__ = ["DEFAULT_FLOOR", "Measurement", "apply_floor", "check_floor", "combine", "floor_problem"]
