"""The exit status of a posbias run (the contract every part of the plugin builds to).

* ``SHIP`` (0): the run-level decision passed and every selected gate decided.
* ``DO_NOT_SHIP`` (1): a gate failed on measured evidence, after the run-level decision
  (:mod:`~pytest_posbias.gates.decision`).
* 2, 3, 4, 5: pytest's own (interrupted, internal error, usage error — bad options or settings,
  no model —, no tests collected). A run that ``-x``/``--maxfail`` stopped is not "interrupted"
  here, also under ``-n`` (where xdist ends it so): its status is the decision's.
* ``NOT_MEASURED`` (6): no measured failure, but the run could not decide: a gate below its
  measurement floor, an endpoint unreachable mid-run, a gate inconclusive in certify mode, no
  gate reached a verdict, a gate test passed without one, a selected gate skipped because the data
  hold none of its items, or a selected gate never ran (``-x``/``--maxfail`` stopped the run).
  SHIP needs every selected gate to have run. A skip the user asked for (``-m``, ``-k``, an opt-in gate not opted
  into) is reported but does not by itself make this status while other gates decided.
"""

from __future__ import annotations

SHIP = 0
DO_NOT_SHIP = 1
INTERRUPTED = 2
INTERNAL_ERROR = 3
USAGE_ERROR = 4
NO_TESTS_COLLECTED = 5
NOT_MEASURED = 6

LABELS = {SHIP: "SHIP", DO_NOT_SHIP: "DO NOT SHIP", NOT_MEASURED: "NOT MEASURED"}
# pytest's own statuses as the run's summaries name them
PYTEST_LABELS = {INTERRUPTED: "INTERRUPTED", INTERNAL_ERROR: "INTERNAL ERROR", USAGE_ERROR: "USAGE ERROR",
                 NO_TESTS_COLLECTED: "NO TESTS COLLECTED"}


def label(status: int) -> str:
    """The name of an exit status: the plugin's (SHIP, DO NOT SHIP, NOT MEASURED) or pytest's."""
    return LABELS.get(status) or PYTEST_LABELS.get(status) or f"pytest exit {status}"

__all__ = ["DO_NOT_SHIP", "INTERNAL_ERROR", "INTERRUPTED", "LABELS", "NOT_MEASURED", "NO_TESTS_COLLECTED",
           "PYTEST_LABELS", "SHIP", "USAGE_ERROR", "label"]
