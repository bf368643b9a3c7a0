"""Sequential gates: stop drawing instances as soon as the decision is settled.

Two anytime-valid designs live here. The suites use the group-sequential design
(:func:`gsd_step`: four planned looks, Lan–DeMets O'Brien–Fleming α spending, exact
binomial tests for rates and t-tests for means at each look's spent level, a non-binding
futility stop). The confidence-sequence design (:func:`decide`) checks after every batch.

The code lives in :mod:`~pytest_posbias.stats.confseq` (the confidence-sequence design),
:mod:`~pytest_posbias.stats.group_sequential` (the group-sequential design) and
:mod:`~pytest_posbias.stats.sequential_decision` (the decision record both return); this module
re-exports their names.
"""

from __future__ import annotations

from .confseq import BURN_IN as BURN_IN
from .confseq import GRID as GRID
from .confseq import asymptotic_cs as asymptotic_cs
from .confseq import conditional_power as conditional_power
from .confseq import confidence_sequence as confidence_sequence
from .confseq import decide as decide
from .confseq import log_wealth as log_wealth
from .confseq import look_schedule as look_schedule
from .confseq import wealth_at as wealth_at
from .group_sequential import MIN_MEAN_UNITS as MIN_MEAN_UNITS
from .group_sequential import gsd_boundaries as gsd_boundaries
from .group_sequential import gsd_decide as gsd_decide
from .group_sequential import gsd_sizes as gsd_sizes
from .group_sequential import gsd_step as gsd_step
from .group_sequential import obf_spending as obf_spending
from .sequential_decision import SequentialDecision as SequentialDecision
from .sequential_decision import violation_alternative as violation_alternative
