"""The ``pytest -n N`` scheduler: one probe group at a time to each worker.

xdist's own pattern (``xdist/scheduler/loadgroup.py``): a ``LoadScopeScheduling`` whose
``_split_scope`` maps each node id to its scope, here the suite test's probe group
(:func:`~pytest_posbias.suite_support.probe_group`). The tests of one group go to one worker
together, so the probe behind them is computed once and the worker's in-process caches serve
every gate of the group; a test that shares no probe is a scope of its own. xdist hands out the
largest scopes first (``--loadscope-reorder``, its default) and the next scope to whichever worker
finishes. Node ids are left as collected, so ``--lf``, junit and the reports read as in a serial run.
Imported by the plugin's ``pytest_xdist_make_scheduler`` only (it imports xdist).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdist.scheduler import LoadScopeScheduling


class ProbeGroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the probe group as the scope (``group_of(nodeid)``, None:
    the test is a scope of its own)."""

    def __init__(self, config: Any, log: Any = None, *, group_of: Callable[[str], str | None]) -> None:
        super().__init__(config, log)
        self._group_of = group_of

    def _split_scope(self, nodeid: str) -> str:
        """The scope of ``nodeid``: its probe group, or the node id itself."""
        return self._group_of(nodeid) or nodeid


__all__ = ["ProbeGroupScheduling"]
