"""The generation cache: cache key -> :class:`~.calls.Generation` in SQLite (WAL, so pytest-xdist
workers share one file). Unusable answers live in a table of their own, never among the answers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .calls import Generation


def read_payload(payload: object) -> Generation | None:
    """The answer a row's ``payload`` holds, or None when the row is unreadable: not JSON (or not text
    at all: SQLite keeps whatever type was written), or JSON of another shape than a stored answer
    (:func:`~.calls.generation_problem`). The one reading of a payload, for the run and the check at
    its start (``run/cache_check.py``), so what one counts unreadable the other makes again. A JSON
    integer too large for a float (OverflowError where a number is checked finite) is unreadable too."""
    try:
        return Generation.from_dict(json.loads(payload))  # type: ignore[arg-type]
    except (ValueError, TypeError, RecursionError, OverflowError):  # JSONDecodeError is a ValueError; so is a shape
        return None


UNUSABLE_COLUMNS = ("key", "model", "runs", "updated", "reason", "payload")  # what a run reads and writes (and ``run``)


def unusable_shape_problem(columns: Iterable[str]) -> str:
    """Why an ``unusable`` table with these columns cannot be used ('' when it can): a damaged or foreign
    cache. A missing ``run`` column is no problem (a cache made before it; the run adds it)."""
    have = set(columns)  # once: ``columns`` may be a generator
    missing = [c for c in UNUSABLE_COLUMNS if c not in have]
    return f"its unusable table lacks the column{'s' * (len(missing) > 1)} {', '.join(missing)}" if missing else ""


class GenerationCache:
    """SQLite (WAL) key → Generation; safe for several processes (pytest-xdist workers).

    ``read_only`` opens an existing database read-only (``--posbias-cache-mode read-only``): nothing
    is ever written to the file. An answer that cannot be stored (read only, a refused write) is no
    error of the run: it is counted in ``unstored`` (first reason in ``unstored_reason``), reported
    through ``on_unstored(n, reason)``, kept in this object's memory so that the rest of the run (this
    process) reads it like a stored one, consulted after the file, and made again next run. A row that
    is not a valid Generation is a miss, counted in ``unreadable``. ``run_id`` names the run recording
    an unusable answer, so its other workers serve it."""

    def __init__(self, path: str | Path, *, read_only: bool = False, run_id: str = "") -> None:
        self.path = Path(path)
        self.read_only = bool(read_only)
        self.run_id = str(run_id)
        self.unstored = 0
        self.unstored_reason = ""
        self.unreadable = 0
        self.on_unstored: Callable[[int, str], None] | None = None
        self._lock = threading.Lock()
        self._kept: dict[str, Generation] = {}  # this run's answers the file does not hold (not stored)
        if self.read_only:
            self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0,
                                         check_same_thread=False, isolation_level=None)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        # Switching a new database to WAL takes an exclusive lock SQLite does not wait for, so workers
        # opening a fresh cache at once make the switch and the schema under a flock on a sidecar file.
        with open(self.path.with_name(self.path.name + ".open-lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, model TEXT NOT "
                                   "NULL, created REAL NOT NULL, payload TEXT NOT NULL)")
            finally:  # explicitly: a process forked meanwhile shares the open file, and closing ours would not unlock
                fcntl.flock(lock, fcntl.LOCK_UN)

    def get_many(self, keys: Iterable[str]) -> dict[str, Generation]:
        """The stored answers for ``keys``, then this run's answers the file could not store (missing and
        unreadable keys are absent; a failed call in the table is unreadable: only usable answers are stored)."""
        keys = list(keys)
        out: dict[str, Generation] = {}
        with self._lock:
            for k, payload in self._rows("SELECT key, payload FROM generations WHERE key IN ({})", keys):
                g = read_payload(payload)
                if g is None or not g.ok:  # a damaged row (a failed call is never stored): a miss, made again
                    self.unreadable += 1
                else:
                    out[k] = g
            out.update((k, self._kept[k]) for k in keys if k not in out and k in self._kept)
        return out

    def _rows(self, query: str, keys: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        """Rows of ``query`` for the distinct ``keys``, 500 placeholders per statement (caller holds the lock)."""
        keys = list(dict.fromkeys(keys))
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            yield from self._conn.execute(query.format(",".join("?" * len(chunk))), chunk)

    def put_many(self, items: Iterable[tuple[str, str, Generation]]) -> None:
        """Store answers in one transaction; what cannot be stored is counted (see the class)."""
        items = list(items)
        rows = [(k, m, time.time(), json.dumps(g.to_dict(), sort_keys=True)) for k, m, g in items]
        if not rows:
            return
        reason = f"the cache {self.path} is open read-only (--posbias-cache-mode read-only)"
        if not self.read_only:
            with self._lock:
                try:
                    with self._transaction():
                        self._conn.executemany("INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?)", rows)
                    return
                except sqlite3.Error as exc:  # read-only file, full disk, I/O error: the answers stand, unstored
                    reason = f"the cache {self.path} refused the write ({type(exc).__name__}: {exc})"
        self._not_stored(len(rows), reason, items)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction, rolled back on any error (caller holds the lock)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise

    def _not_stored(self, n: int, reason: str, kept: Iterable[tuple[str, str, Generation]] = ()) -> None:
        """Count ``n`` answers the file did not take, keeping ``kept`` for the rest of the run (:meth:`get_many`)."""
        with self._lock:
            self.unstored += n
            self.unstored_reason = self.unstored_reason or reason
            self._kept.update((k, g) for k, _m, g in kept)
        if self.on_unstored is not None:
            self.on_unstored(n, reason)

    def __len__(self) -> int:
        """The number of stored answers."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    def _unusable_table(self) -> bool | None:
        """Create the table if it is missing (and add the ``run`` column to one made without it);
        whether the table has that column (a read-only cache cannot add it); None when a read-only
        cache has no such table, or the table is of another shape (:func:`unusable_shape_problem`,
        which the check at the start of a run names before any model call)."""
        if self.read_only and self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                                 "name = 'unusable'").fetchone() is None:
            return None
        if not self.read_only:
            self._conn.execute("CREATE TABLE IF NOT EXISTS unusable (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                               "runs INTEGER NOT NULL, updated REAL NOT NULL, reason TEXT NOT NULL, payload TEXT NOT "
                               "NULL, run TEXT NOT NULL DEFAULT '')")
        columns = [str(row[1]) for row in self._conn.execute("PRAGMA table_info(unusable)")]
        if unusable_shape_problem(columns):
            return None
        if "run" in columns:
            return True
        if self.read_only:
            return False
        try:
            self._conn.execute("ALTER TABLE unusable ADD COLUMN run TEXT NOT NULL DEFAULT ''")
        except sqlite3.OperationalError as exc:  # another worker added it first
            if "duplicate column" not in str(exc):
                raise
        return True

    def record_unusable(self, items: Iterable[tuple[str, str, Generation, str]]) -> None:
        """Count one more run with an unusable answer for each (key, model, generation, reason) (once per
        ``run_id``, however many workers got it), keep the answer and reason, and drop the key from
        ``generations`` (an answer found unusable after it was stored). A read-only cache records
        nothing: the engine serves this run's unusable answers from its own memory, and the next run
        asks again without counting this one toward the cap. A write the database refuses, or an
        ``unusable`` table of another shape, records nothing either: counted in ``unstored`` and
        reported through ``on_unstored`` as :meth:`put_many` does."""
        rows = [(k, m, time.time(), why, json.dumps(g.to_dict(), sort_keys=True), self.run_id)
                for k, m, g, why in items]
        if not rows:
            return
        with self._lock:
            for r in rows:  # never served as an answer again, as the row dropped below
                self._kept.pop(r[0], None)
            if self.read_only:
                return
            try:
                if self._unusable_table() is None:
                    problem = unusable_shape_problem(r[1] for r in self._conn.execute("PRAGMA table_info(unusable)"))
                    reason = f"the cache {self.path} cannot record unusable answers ({problem})"
                else:
                    with self._transaction():
                        self._conn.executemany(
                            "INSERT INTO unusable (key, model, runs, updated, reason, payload, run) VALUES (?, ?, 1, "
                            "?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET runs = runs + (excluded.run = '' OR run != "
                            "excluded.run), model = excluded.model, updated = excluded.updated, reason = "
                            "excluded.reason, payload = excluded.payload, run = excluded.run", rows)
                        self._conn.executemany("DELETE FROM generations WHERE key = ?", [(r[0],) for r in rows])
                    return
            except sqlite3.Error as exc:  # read-only file, full disk, I/O error: unusable this run all the same
                reason = f"the cache {self.path} refused the write ({type(exc).__name__}: {exc})"
        self._not_stored(len(rows), reason)

    def unusable(self, keys: Iterable[str]) -> dict[str, tuple[int, Generation, str, bool]]:
        """key -> (runs that got an unusable answer, the last one, its reason, whether this cache's
        ``run_id`` recorded it), for the keys that have any; none from a table of another shape (its
        keys are asked again, never served from it)."""
        out: dict[str, tuple[int, Generation, str, bool]] = {}
        with self._lock:
            has_run = self._unusable_table()
            if has_run is None:
                return out
            run = "run" if has_run else "''"
            for k, runs, payload, why, by in self._rows(f"SELECT key, runs, payload, reason, {run} FROM unusable "
                                                        "WHERE key IN ({})", keys):
                g = read_payload(payload)
                if g is None or not isinstance(runs, int) or runs < 1:  # damaged: as if no run had got one
                    self.unreadable += 1
                    continue
                out[k] = (int(runs), g, str(why), bool(self.run_id) and by == self.run_id)
        return out

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()
