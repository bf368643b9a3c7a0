"""Gate machinery shared by every suite: from a probe result to a :class:`~pytest_posbias.stats.Verdict`.

Every gate is a function of the per-instance values of a probe and the run context (thresholds,
mode, α, seeded bootstrap):

* :mod:`.design` — the group-sequential analysis, the measurement floor, the paired rate;
* :mod:`.verdict_builders` — mean, rate and ``--baseline`` (paired non-inferiority) verdicts with a
  gate's threshold and side;
* :mod:`.positional`, :mod:`.phase`, :mod:`.stressor` — each suite's gates;
* :mod:`.search`, :mod:`.parity` — the search gate and the parity gates (imported from there);
* :mod:`.measurement` — planned, measured and lost units and the measurement floor;
* :mod:`.decision` — the run-level decision over every gate of a run.

The names below are the gates' API (the suites and custom gates import them from here).
"""

from .design import LOOKS, sequential_verdict
from .phase import (
           answered,
           equivalence_verdict,
           no_letter_note,
           phase_gate_conditions,
           phase_measurement,
           phase_verdict,
)
from .positional import positional_measurement, positional_values, positional_verdict
from .stressor import stressor_measurement, stressor_verdict

__all__ = ["LOOKS", "answered", "equivalence_verdict", "no_letter_note", "phase_gate_conditions", "phase_measurement",
           "phase_verdict", "positional_measurement", "positional_values", "positional_verdict", "sequential_verdict",
           "stressor_measurement", "stressor_verdict"]
