"""The exit status of a posbias run (the contract every part of the plugin builds to).

* ``SHIP`` (0): the run-level decision passed and every selected gate decided.
* ``DO_NOT_SHIP`` (1): a gate failed on measured evidence, after the run-level decision
  (:mod:`~pytest_posbias.decision`).
* 2, 3, 4, 5: pytest's own (interrupted, internal error, usage error — bad options or settings,
  no model —, no tests collected).
* ``NOT_MEASURED`` (6): no measured failure, but the run could not decide: a gate below its
  measurement floor, an endpoint unreachable mid-run, a gate inconclusive in certify mode, or no
  gate reached a verdict. A skip the user asked for (``-m``, ``-k``, an opt-in gate not opted
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

__all__ = ["DO_NOT_SHIP", "INTERNAL_ERROR", "INTERRUPTED", "LABELS", "NOT_MEASURED", "NO_TESTS_COLLECTED", "SHIP",
           "USAGE_ERROR"]
