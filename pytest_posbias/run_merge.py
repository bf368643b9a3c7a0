"""One run log from the workers' logs of a run (``<cache>/runs/<run id>/log-*.jsonl``).

Each pytest process of a run (the serial process, or each xdist worker) appends its records to
its own log. At the end the controller merges them into ``run.jsonl`` in a deterministic order
(:func:`merge_run_log_lines`), so that a serial run and an ``-n N`` run of the same gates give the
same log. Under ``-n N`` the controller reads the workers' logs while they grow
(:class:`RunLogFollower`, polled by a thread), so the end of the run, on one core
while the others sit idle, no longer parses tens of megabytes of JSON.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .engine import RunLogLines, gc_paused
from .errors import ConfigError

Record = dict[str, Any]


@dataclass
class _FollowedLog:
    lines: RunLogLines
    offset: int = 0  # bytes of the file read so far
    partial: bytes = b""  # the start of a line its writer has not finished yet


class RunLogFollower:
    """Reads the logs of one run directory as their writers append to them.

    :meth:`poll` parses the whole lines added to every ``log-*.jsonl`` since the last poll (a line
    still being written waits for the next poll); :meth:`merge`, once the writers have finished,
    reads the rest and merges. Polling is only a head start: the merged log is the same as
    :func:`merge_run_log_lines` on the finished files, however the writes and polls interleave.
    Thread-safe (one lock); after :meth:`merge` a poll does nothing."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._logs: dict[Path, _FollowedLog] = {}
        self._lock = threading.Lock()
        self._merged = False
        self._broken = False

    def poll(self) -> None:
        """Parse the whole lines appended to each log since the last poll (a line that is not
        UTF-8 or not JSON is skipped, as :func:`merge_run_log_lines` skips it). Should reading fail
        (a file unreadable or replaced), polling stops and :meth:`merge` reads every
        log from its start, as :func:`merge_run_log_lines` does, and reports what it finds."""
        with self._lock:
            if self._merged or self._broken:
                return
            try:
                self._read(final=False)
            except Exception:
                self._broken = True

    def _read(self, *, final: bool) -> None:
        for path in sorted(self.run_dir.glob("log-*.jsonl")):
            log = self._logs.setdefault(path, _FollowedLog(RunLogLines(path)))
            with path.open("rb") as fh:
                fh.seek(log.offset)
                data = fh.read()
            log.offset += len(data)
            buf = log.partial + data
            cut = len(buf) if final else buf.rfind(b"\n") + 1
            log.partial = buf[cut:]
            if cut:
                log.lines.feed(buf[:cut].split(b"\n"))

    def merge(self) -> tuple[Record, list[tuple[Record, str | None]]]:
        """Read what is left of every log, then merge them: see :func:`merge_run_log_lines`. The
        cyclic collector is paused meanwhile (its passes over the parsed records cost more than the parse)."""
        with self._lock, gc_paused():
            if self._merged:
                raise RuntimeError(f"{self.run_dir}: the logs were merged already")
            if self._broken:
                self._logs.clear()
            self._read(final=True)
            self._merged = True
            logs = [log.lines.result() for _, log in sorted(self._logs.items())]
            self._logs.clear()  # the records live on in the merge only (the caller frees them)
            return _merge(logs, self.run_dir)


def merge_run_logs(run_dir: Path) -> tuple[Record, list[Record]]:
    """Headers and records of every worker log of one run, in a deterministic order: see
    :func:`merge_run_log_lines`."""
    header, pairs = merge_run_log_lines(run_dir)
    return header, [r for r, _ in pairs]


def merge_run_log_lines(run_dir: Path) -> tuple[Record, list[tuple[Record, str | None]]]:
    """Headers and records of every worker log of one run, in a deterministic order.

    Order: models first, then requests, then observations, then the rest, each sorted by (spec,
    probe, key, cache hit) and, where those tie, by the record's canonical JSON (the line as its
    writer wrote it: sorted keys).

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
    return RunLogFollower(run_dir).merge()


def _started(h: Record) -> str:
    return str(h.get("started", ""))


def _prefix(r: Record) -> tuple[Any, ...]:
    rank = {"model": 0, "request": 1, "attempt": 1, "observation": 2}.get(r.get("kind", ""), 3)
    hit = {False: 0, True: 1}.get(r.get("cache_hit"), 2)  # type: ignore[arg-type]  # a key's answer and its re-reads tie on the rest
    return (rank, r.get("spec", ""), r.get("probe", ""), r.get("key", ""), hit)


def _failed(r: Record) -> bool:
    """A send that gave no usable answer: a failed call, or an answer the probe's rule rejected."""
    g = r.get("generation") or {}
    return g.get("finish_reason") == "error" or bool(g.get("error")) or bool(r.get("unusable"))


def _merge(logs: list[tuple[Record, list[tuple[Record, str]]]], run_dir: Path) -> tuple[Record, list[tuple[Record, str | None]]]:
    if not logs:
        raise ConfigError(f"{run_dir}: no run logs to merge")
    headers = [h for h, _ in logs]
    first: Record = min(headers, key=_started)
    header = dict(first)
    header["workers"] = sorted(h.get("worker", "?") for h in headers)
    header.pop("worker", None)
    pairs = [pair for _, recs in logs for pair in recs]

    # sorted by prefix; records whose prefix ties (a key sent twice, observations) by their line
    keyed = sorted(((_prefix(r), (r, line)) for r, line in pairs), key=lambda kp: kp[0])
    ordered: list[tuple[Record, str]] = []
    for _, tied in itertools.groupby(keyed, key=lambda kp: kp[0]):
        run = [pair for _, pair in tied]
        ordered += sorted(run, key=lambda p: p[1]) if len(run) > 1 else run

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


__all__ = ["RunLogFollower", "merge_run_log_lines", "merge_run_logs"]
