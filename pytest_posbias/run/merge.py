"""One run log from the workers' logs of a run (``<cache>/runs/<run id>/log-*.jsonl``), merged in a
deterministic order (:func:`merge_run_log_lines`) so that a serial run and an ``-n N`` run of the
same gates give the same ``run.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..engine import RunLogLines, gc_paused
from ..errors import ConfigError

Record = dict[str, Any]


def _prefix(r: Record) -> tuple[Any, ...]:
    rank = {"model": 0, "request": 1, "attempt": 1, "observation": 2}.get(r.get("kind", ""), 3)
    # a key's answer and its re-reads tie on the rest
    hit = {False: 0, True: 1}.get(r.get("cache_hit"), 2)  # type: ignore[arg-type]
    return (rank, r.get("spec", ""), r.get("probe", ""), r.get("key", ""), hit)


def _failed(r: Record) -> bool:
    """A send that gave no usable answer: a failed call, or an answer the probe's rule rejected."""
    g = r.get("generation") or {}
    return g.get("finish_reason") == "error" or bool(g.get("error")) or bool(r.get("unusable"))


def merge_run_logs(run_dir: Path) -> tuple[Record, list[Record]]:
    """Headers and records of every worker log of one run, in a deterministic order: see
    :func:`merge_run_log_lines`."""
    header, pairs = merge_run_log_lines(run_dir)
    return header, [r for r, _ in pairs]


@gc_paused()  # the parsed records are acyclic: the cyclic collector's passes over them cost more than the parse
def merge_run_log_lines(run_dir: Path) -> tuple[Record, list[tuple[Record, str | None]]]:
    """Headers and records of every worker log of one run, in a deterministic order.

    Order: models first, then requests, then observations, then the rest, each sorted by (spec,
    probe, key, cache hit) and, where those tie, by the record's canonical JSON (the line as its
    writer wrote it: sorted keys).

    A worker log holding no whole line (a worker killed while opening it) is skipped.

    References: one ``reference`` record per id (every worker that used a reference text wrote it).

    Requests: one ``request`` record per (key, cache hit or not). A key sent more than once
    (a failed call re-sent later in the run, or by another worker) keeps a successful record
    as its ``request`` when there is one; every failed send of that key is kept as an
    ``attempt`` record (same fields, ``kind: "attempt"``), and further successful duplicates
    are dropped. A key that never succeeded keeps its last failed send (in the deterministic
    order) as the ``request``, so the failure is counted once, and the others as attempts.

    Each record comes with its line as the worker wrote it (canonical JSON: sorted keys), or None
    when the merge changed the record (its kind); the merged log copies the unchanged lines.
    """
    logs = []
    for path in sorted(Path(run_dir).glob("log-*.jsonl")):
        lines = RunLogLines(path)
        with path.open("rb") as fh:
            lines.feed(fh)
        if lines.header is None and not lines.records:
            continue  # a worker killed while opening its log (empty, or a torn header): nothing in it to keep
        logs.append(lines.result())
    if not logs:
        raise ConfigError(f"{run_dir}: no run logs to merge")
    headers = [h for h, _ in logs]
    header = {k: v for k, v in min(headers, key=lambda h: str(h.get("started", ""))).items() if k != "worker"}
    header["workers"] = sorted(h.get("worker", "?") for h in headers)
    pairs = [pair for _, recs in logs for pair in recs]

    # sorted by prefix; records whose prefix ties (a key sent twice, observations) by their line
    ordered = sorted(pairs, key=lambda p: (_prefix(p[0]), p[1]))

    chosen: dict[tuple[str, bool], Record] = {}  # per (key, cache hit): the record that stays the request
    for r, _ in ordered:
        if r.get("kind") in ("request", "attempt"):
            sig = (str(r.get("key", "")), bool(r.get("cache_hit")))
            best = chosen.get(sig)
            if best is None or (_failed(best) and (not _failed(r) or r.get("kind") == "request")):
                chosen[sig] = r

    models: dict[str, tuple[Record, str | None]] = {}
    references: set[str] = set()
    out: list[tuple[Record, str | None]] = []
    for r, line in ordered:
        if r.get("kind") == "model":
            models.setdefault(r["spec"], (r, line))
            continue
        if r.get("kind") == "reference":  # a reference text every worker that used it wrote: once is enough
            if str(r.get("id")) in references:
                continue
            references.add(str(r.get("id")))
        if r.get("kind") in ("request", "attempt"):
            sig = (str(r.get("key", "")), bool(r.get("cache_hit")))
            kind = "request" if chosen[sig] is r else "attempt" if _failed(r) else None
            if kind is None:
                continue  # the same successful answer twice (two workers): once is enough
            if r.get("kind") != kind:
                out.append(({**r, "kind": kind}, None))
                continue
        out.append((r, line))
    return header, list(models.values()) + out


__all__ = ["merge_run_log_lines", "merge_run_logs"]
