"""The ``pytest -n N`` scheduler: one probe group at a time to each worker.

xdist's own pattern (``xdist/scheduler/loadgroup.py``): a ``LoadScopeScheduling`` whose
``_split_scope`` maps each node id to its scope, here the suite test's probe group
(:func:`~pytest_posbias.run.suite_params.probe_group`). The tests of one group go to one worker
together, so the probe behind them is computed once and the worker's in-process caches serve
every gate of the group; a test that shares no probe is a scope of its own. xdist hands the next
scope to whichever worker runs out; of the scopes left, the heaviest in model calls goes first
(longest-processing-time-first), not the one with the most tests. Node ids are left as
collected, so ``--lf``, junit and the reports read as in a serial run.
Imported by the plugin's ``pytest_xdist_make_scheduler`` only (it imports xdist).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from xdist.scheduler import LoadScopeScheduling


class ProbeGroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the probe group as the scope (``group_of(nodeid)``, None:
    the test is a scope of its own), the heaviest scope handed out first (``weight_of(scope)``:
    its model calls, :func:`~pytest_posbias.run.suite_params.group_weight`)."""

    def __init__(self, config: Any, log: Any = None, *, group_of: Callable[[str], str | None],
                 weight_of: Callable[[str], int] | None = None) -> None:
        super().__init__(config, log)
        self._group_of = group_of
        self._weight_of = weight_of

    def _split_scope(self, nodeid: str) -> str:
        """The scope of ``nodeid``: its probe group, or the node id itself."""
        return self._group_of(nodeid) or nodeid

    def _reschedule(self, node: Any) -> None:
        """xdist's rescheduling, giving a worker its next scope only when it is down to its last
        test (a worker runs a test once it knows the next one, so one pending test is the least that
        keeps it going). xdist gives it when two are left, and at the start gives every worker two
        scopes: a scope bound early to a busy worker waits there while another worker runs out,
        which with scopes of two tests and hundreds of calls leaves workers idle at the end."""
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)

    def _assign_work_unit(self, node: Any) -> None:
        """xdist's assignment of the next scope, the heaviest one first: xdist orders the scopes by
        their number of tests, which says little about their model calls (a stressor's two gates
        share hundreds of calls, a positional configuration's seven gates a few dozen)."""
        if self._weight_of is not None:
            heaviest_first(self.workqueue, self._weight_of)
        super()._assign_work_unit(node)


def heaviest_first(queue: OrderedDict[str, Any], weight_of: Callable[[str], int]) -> None:
    """Move the heaviest scope of ``queue`` to its front (the first of equal weights: the queue's
    own order among them)."""
    if queue:
        queue.move_to_end(max(queue, key=weight_of), last=False)


__all__ = ["ProbeGroupScheduling", "heaviest_first"]
