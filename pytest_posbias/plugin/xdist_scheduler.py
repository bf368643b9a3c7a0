"""The ``pytest -n N`` scheduler: one probe group at a time to each worker (docs/design.md,
section 9).

As xdist's ``loadgroup`` scheduler, a ``LoadScopeScheduling`` whose scope is a test's probe group
(:func:`~pytest_posbias.run.suite_params.probe_group`; a test that shares no probe is a scope of its
own), the heaviest in model calls first. A result several groups read
(:func:`~pytest_posbias.run.suite_params.shared_probes`) is computed by the first scope handed out
that needs it, its owner; another worker gets a scope that needs it only once the owner completed.
Node ids are left as collected, so ``--lf``, junit and the reports read as in a serial run.
Imported by ``pytest_xdist_make_scheduler`` only (it imports xdist).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from xdist.scheduler import LoadScopeScheduling


class ProbeGroupScheduling(LoadScopeScheduling):
    """The module's scheduling: ``group_of(nodeid)`` the scope (None: its own), ``weight_of(scope)``
    its model calls (:func:`~pytest_posbias.run.suite_params.group_weight`), ``shares_of(nodeid)``
    the results a test shares with other groups. ``merge_shared``: groups that share a result are one
    scope (a cache that stores nothing cannot pass a result from one group to the next)."""

    def __init__(self, config: Any, log: Any = None, *, group_of: Callable[[str], str | None],
                 weight_of: Callable[[str], int] | None = None,
                 shares_of: Callable[[str], Iterable[str]] | None = None, merge_shared: bool = False) -> None:
        super().__init__(config, log)
        self._group_of = group_of
        self._weight_of = weight_of
        self._shares_of = shares_of
        self._merge_shared = merge_shared
        self._merged: dict[str, str] | None = None  # group -> the group it is merged into (merge_shared)
        self._shares: dict[str, frozenset[str]] = {}  # scope -> the shared results its tests need
        self._owner: dict[str, tuple[Any, str]] = {}  # shared result -> (node, scope) that computes it

    def _split_scope(self, nodeid: str) -> str:
        """The scope of ``nodeid``: its probe group, or the node id itself; with ``merge_shared``
        the first of the groups it shares a result with, directly or through others."""
        group = self._group_of(nodeid) or nodeid
        if not self._merge_shared or self._shares_of is None:
            return group
        if self._merged is None:
            self._merged = self._merge_groups(next(iter(self.registered_collections.values()), []))
        return self._merged.get(group, group)

    def _merge_groups(self, collection: Iterable[str]) -> dict[str, str]:
        """Each group of ``collection`` -> the first group of the groups it shares results with."""
        assert self._shares_of is not None
        parent: dict[str, str] = {}
        order: dict[str, int] = {}

        def root(g: str) -> str:
            order.setdefault(g, len(order))
            while parent.setdefault(g, g) != g:
                g = parent[g]
            return g

        maker: dict[str, str] = {}  # shared result -> the first group that needs it
        for nodeid in collection:
            group = self._group_of(nodeid) or nodeid
            for name in self._shares_of(nodeid):
                a, b = root(maker.setdefault(name, group)), root(group)
                if a != b:
                    first, later = sorted((a, b), key=order.__getitem__)
                    parent[later] = first
            root(group)
        return {g: root(g) for g in parent}

    def _reschedule(self, node: Any) -> None:
        """xdist's rescheduling, giving a worker its next scope only when it is down to its last
        test (the least that keeps it going), not at two left and two scopes at the start as xdist
        does: a scope bound early to a busy worker waits there while another worker runs out. When
        every scope left waits on a shared result and no worker can run on, one is handed out
        anyway (:meth:`_unblock`)."""
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)
        self._unblock()

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        """xdist's bookkeeping; when the test was the last of a scope that owns a shared result,
        the scopes waiting on it may start now, so every other worker gets a look too."""
        super().mark_test_complete(node, item_index, duration)
        scope = self._split_scope(self.registered_collections[node][item_index])
        if self._shares.get(scope) and all(self.assigned_work.get(node, {}).get(scope, {None: False}).values()):
            for other in self.nodes:
                if other is not node:
                    self._reschedule(other)

    def _assign_work_unit(self, node: Any) -> None:
        """xdist's assignment of the next scope among those that may start on ``node`` now
        (:meth:`_may_start`), by model calls (``weight_of``), not by number of tests as xdist does:

        * a scope that would own a shared result other queued scopes wait for, the lightest first;
        * else the heaviest that may start on ``node``, unless another worker has fewer calls left
          (:meth:`_left_on`): then the heaviest of those waiting for an owner on ``node``
          (:meth:`_waits_here`; no other worker can start them sooner), or if there is none the
          lightest, and the heavy ones wait for the worker that runs out first."""
        scope = self._next_scope(node)
        if scope is not None:
            self._give(node, scope)

    def _give(self, node: Any, scope: str) -> None:
        """Assign queued ``scope`` to ``node`` and record it as the owner of the shared results it
        is the first to need (or whose owner's worker went down)."""
        self.workqueue.move_to_end(scope, last=False)
        for name in self._shares_for(scope):
            if self._live_owner(name) is None:
                self._owner[name] = (node, scope)
        super()._assign_work_unit(node)

    def _shares_for(self, scope: str) -> frozenset[str]:
        """The shared results the queued ``scope``'s tests need (kept once read)."""
        if scope not in self._shares:
            shares_of = self._shares_of or (lambda _n: ())
            self._shares[scope] = frozenset(name for n in self.workqueue.get(scope, {}) for name in shares_of(n))
        return self._shares[scope]

    def _live_owner(self, name: str) -> tuple[Any, str] | None:
        """The (node, scope) that owns ``name``, None when no scope does or its owner is no longer
        assigned (its worker went down and xdist put its scope back in the queue)."""
        owner = self._owner.get(name)
        return owner if owner is not None and owner[1] in self.assigned_work.get(owner[0], {}) else None

    def _computing(self, name: str) -> Any:
        """The node whose unfinished scope is computing ``name``, or None."""
        owner = self._live_owner(name)
        return owner[0] if owner is not None and not all(self.assigned_work[owner[0]][owner[1]].values()) else None

    def _may_start(self, scope: str, node: Any) -> bool:
        """Whether ``scope`` may go to ``node`` now: no shared result it needs is being computed on
        another worker."""
        return all(self._computing(name) in (None, node) for name in self._shares_for(scope))

    def _next_scope(self, node: Any) -> str | None:
        """The scope ``node`` gets next (class docstring of :meth:`_assign_work_unit`), or None."""
        ready = [s for s in self.workqueue if self._may_start(s, node)]
        if not ready:
            return None
        counts = Counter(name for s in self.workqueue for name in self._shares_for(s)
                         if self._live_owner(name) is None)  # results not owned yet: how many scopes wait
        weight = self._weight_of or (lambda _s: 1)
        owners = [s for s in ready if any(counts[name] > 1 for name in self._shares_for(s))]
        if owners:
            return min(owners, key=weight)  # the first of equal weights: the queue's order
        here = [s for s in ready if self._waits_here(s, node)]  # no other worker may start these sooner
        free = [s for s in ready if s not in here]
        mine = self._left_on(node, weight)
        sooner = any(self._left_on(n, weight) < mine for n in self.nodes if n is not node and not n.shutting_down)
        pool = here if sooner else ready  # another worker runs out first: the heavy free scopes wait for it
        return max(pool, key=weight) if pool else min(free, key=weight)  # the first of equal weights

    def _left_on(self, node: Any, weight: Callable[[str], int]) -> float:
        """The model calls ``node`` has left, as its scopes' weights share out over their tests not
        yet completed (its current test counted whole)."""
        return sum(weight(scope) * list(unit.values()).count(False) / len(unit)
                   for scope, unit in self.assigned_work.get(node, {}).items() if unit)

    def _waits_here(self, scope: str, node: Any) -> bool:
        """Whether ``scope`` needs a result an unfinished scope on ``node`` is making (it may go to
        ``node``, where it runs after that scope, but would be bound there while it waits)."""
        return any(self._computing(name) is node for name in self._shares_for(scope))

    def _unblock(self) -> None:
        """When scopes are queued, every worker is down to its last test and none may start
        anywhere, no test can complete: hand the first queued scope to the worker of an owner it
        waits for. A result owned on yet another worker may then be computed twice (same verdicts)."""
        live = [n for n in self.nodes if not n.shutting_down]
        if not self.workqueue or not live or any(self._pending_of(self.assigned_work[n]) > 1 for n in live):
            return
        for n in live:
            ready = self._next_scope(n)
            if ready is not None:
                self._give(n, ready)
                return
        scope = next(iter(self.workqueue))
        owners = [self._computing(name) for name in sorted(self._shares_for(scope))]
        node = next((n for n in owners if n in live), live[0])
        self._give(node, scope)


def heaviest_first(queue: OrderedDict[str, Any], weight_of: Callable[[str], int]) -> None:
    """Move the heaviest scope of ``queue`` to its front (the first of equal weights: the queue's
    own order among them)."""
    if queue:
        queue.move_to_end(max(queue, key=weight_of), last=False)


__all__ = ["ProbeGroupScheduling", "heaviest_first"]
