"""The dose of a dose-controlled simulated model: ``sim:dose,GATE=VALUE[,GATE=VALUE…]``.

:func:`parse_dose` reads a dose string into a :class:`Dose`, refusing an unknown gate, a target
outside its range (``DOSE_RANGE``) and a combination of gates whose targets cannot all hold; the
behaviour a dose produces is :mod:`~pytest_posbias.models.sim_dose`'s.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..errors import ConfigError

DOSE_GATES = ("dpb", "meg", "coverage", "contamination", "flip", "phase", "order", "repetition", "stressor", "attack",
              "parity")
# allowed targets (inclusive); the positional limits keep every keep-probability in [0, 1]
DOSE_RANGE: dict[str, tuple[float, float]] = {
    "dpb": (-0.6, 0.6), "meg": (-0.4, 0.4), "coverage": (0.0, 0.47), "contamination": (0.0, 0.5),
    "flip": (0.0, 1.0), "phase": (0.0, 1.0), "order": (0.0, 0.99), "repetition": (0.0, 0.95),
    "stressor": (0.0, 0.95), "attack": (0.0, 1.0), "parity": (0.0, 1.0),
}


@dataclass(frozen=True)
class Dose:
    """Targets per gate, in ``DOSE_GATES`` order."""

    targets: tuple[tuple[str, float], ...]

    def get(self, gate: str) -> float | None:
        """The target of ``gate``, None when the dose does not name it."""
        return dict(self.targets).get(gate)

    def canonical(self) -> str:
        """``dose,GATE=VALUE,…`` in a fixed order with exact float reprs (part of the revision)."""
        return "dose," + ",".join(f"{g}={v!r}" for g, v in self.targets) if self.targets else "dose"


def _allowed() -> str:
    return ", ".join(f"{g} in [{lo:g}, {hi:g}]" for g, (lo, hi) in DOSE_RANGE.items())


def is_dose(profile: str) -> bool:
    """Whether a sim profile string is a dose (``dose`` or ``dose,…``)."""
    return profile == "dose" or profile.startswith("dose,")


def parse_dose(profile: str) -> Dose:
    """Parse ``dose,GATE=VALUE[,GATE=VALUE…]`` (without the ``sim:`` prefix); ConfigError names
    the bad part, the allowed gates and their ranges.

    Which gates combine (each named target then holds as it does alone):

    * at most one positional gate (``dpb``, ``meg``, ``coverage``, ``contamination``): all four
      act on the same slots of the same summaries. ``dpb``, ``meg`` and ``coverage`` each set
      the per-slot keep shares w_p, and the rescue of all-dropped answers that ``dpb``/``meg``
      need moves mass between slots once ``coverage`` makes such answers common;
      ``contamination`` lowers a kept slot's own coverage, which the other three are solved
      for. A pair is refused, naming both gates and the reason;
    * any positional gate with any of ``flip``, ``phase``, ``order`` (multiple-choice items,
      another probe) and ``repetition``, ``stressor``, ``attack`` (single-video descriptions);
    * ``flip``, ``phase`` and ``order`` together: each moves the answer under its own
      conditions (sampler, phase grid, option order), on items drawn by separate sequences;
    * ``repetition``, ``stressor`` and ``attack`` together: solved jointly
      (:func:`stressor_params`), refused when no (r, σ, ρ) meets all three.
    """
    if not is_dose(profile):
        raise ConfigError(f"sim profile {profile!r} is not a dose; write sim:dose,GATE=VALUE[,GATE=VALUE...]")
    parts = [p.strip() for p in profile.split(",")[1:]]
    seen: dict[str, float] = {}
    for part in parts:
        m = re.fullmatch(r"([a-z]+)\s*=\s*(\S+)", part)
        if not m:
            raise ConfigError(f"sim:{profile}: {part!r} is not GATE=VALUE; gates: {', '.join(DOSE_GATES)}")
        gate, raw = m.group(1), m.group(2)
        if gate not in DOSE_RANGE:
            raise ConfigError(f"sim:{profile}: unknown gate {gate!r}; allowed gates: {', '.join(DOSE_GATES)}")
        if gate in seen:
            raise ConfigError(f"sim:{profile}: gate {gate!r} is given twice")
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"sim:{profile}: {gate}={raw!r} is not a number; allowed: {_allowed()}") from None
        lo, hi = DOSE_RANGE[gate]
        if not math.isfinite(value) or not lo <= value <= hi:
            raise ConfigError(f"sim:{profile}: {gate}={raw} is outside [{lo:g}, {hi:g}]; allowed: {_allowed()}")
        seen[gate] = value + 0.0  # -0.0 -> 0.0
    pos = [g for g in POSITIONAL_GATES if g in seen]
    if len(pos) > 1:
        a, b = pos[0], pos[1]
        raise ConfigError(f"sim:{profile}: {a} and {b} cannot be dosed together: {_CONFLICT[frozenset((a, b))]}; "
                          f"dose one of {', '.join(POSITIONAL_GATES)} per model (any of them combines with the "
                          "multiple-choice and description gates)")
    dose = Dose(tuple((g, seen[g]) for g in DOSE_GATES if g in seen))
    # imported here: sim_dose builds on this module (it re-exports the names above)
    from .sim_dose import stressor_params

    stressor_params(dose)  # raises when infeasible
    return dose


POSITIONAL_GATES = ("dpb", "meg", "coverage", "contamination")
_SHARES = "both set the per-slot keep shares w_p"
# why two positional doses cannot both land (parse_dose refuses every pair)
_CONFLICT: dict[frozenset[str], str] = {
    frozenset(("dpb", "meg")): f"{_SHARES}: the DPB slope is solved on top of the MEG shares and the MEG target "
                               "assumes the other slots keep their summaries",
    frozenset(("dpb", "coverage")): f"{_SHARES}: at low coverage most answers drop every slot, and the rescue DPB "
                                    "needs (a lost unit otherwise) moves that mass onto one slot",
    frozenset(("meg", "coverage")): f"{_SHARES}: at low coverage most answers drop every slot, and the rescue MEG "
                                    "needs (a lost unit otherwise) moves that mass onto the edge slots",
    frozenset(("contamination", "dpb")): "a confused slot covers little of its own video, so the contamination "
                                         "dose changes the slot coverages the DPB keep shares are solved for",
    frozenset(("contamination", "meg")): "a confused slot covers little of its own video, so the contamination "
                                         "dose scales the slot coverages the MEG keep shares are solved for",
    frozenset(("contamination", "coverage")): "a confused slot covers little of its own video, so the "
                                              "contamination dose lowers the coverage the coverage dose sets",
}
