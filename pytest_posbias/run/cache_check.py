"""The cache folder checked at the start of a run, before any model call.

:func:`check_cache` opens ``<cache>/generations.sqlite`` as a run will and says in one line what is
wrong, naming the file and the choices: a damaged database (truncated, garbage bytes, a failed
``PRAGMA quick_check``, a 0-byte file SQLite would take for a new cache) stops the run unless
``--posbias-cache-repair=move-aside`` renames it (with its ``-wal``/``-shm``) to
``generations.sqlite.damaged-<UTC time>`` (an ``unusable`` or ``generations`` table lacking the columns a
run reads or writes is damage too); a cache that cannot be written stops it unless
``--posbias-cache-mode=read-only`` with a writable folder (the run logs go there); rows whose payload
the run cannot read (:func:`pytest_posbias.engine.cache.read_payload`) are counted and made again.

The check reads the whole database once (``quick_check``), decodes every payload (its time grows with
the cache) and writes nothing but a rolled-back transaction and a temporary file removed at once.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..engine.cache import read_payload, unusable_shape_problem
from ..errors import ConfigError

CACHE_FILE = "generations.sqlite"
CACHE_MODES = ("read-write", "read-only")
CACHE_REPAIRS = ("stop", "move-aside")
SQLITE_MAGIC = b"SQLite format 3\x00"
SIDE_FILES = ("-wal", "-shm")  # SQLite's write-ahead log and shared-memory index of the database

_OTHER = "--posbias-cache=DIR (another cache folder)"


class CacheError(ConfigError):
    """The cache cannot be used as asked: the message names the file, the problem and the choices."""


@dataclass(frozen=True)
class CacheCheck:
    """What :func:`check_cache` found: the database ``path``, whether it ``exists``, its
    ``rows`` and ``unreadable`` rows (payload not a stored answer), where a damaged file was moved
    (``moved_to``, None when nothing was moved) and why (``damage``), and whether the run opens
    it ``read_only``."""

    path: Path
    exists: bool
    rows: int
    unreadable: int
    read_only: bool
    moved_to: Path | None = None
    damage: str = ""

    def lines(self) -> list[str]:
        """What the run says about the cache at its start (nothing when all is well)."""
        out = []
        if self.moved_to is not None:
            out.append(f"the damaged generation cache {self.path} ({self.damage}) was moved aside to {self.moved_to}; "
                       "a new cache starts (the answers it held are made again)")
        if self.unreadable:
            out.append(f"{self.unreadable} cached answers in {self.path} are unreadable (payload not valid JSON, "
                       "or not the shape of an answer): each is made again and its row replaced")
        if self.read_only:
            out.append(f"the generation cache {self.path} is used read-only: new answers are made but not stored "
                       "(counted as not stored; made once in this run, again by the next run)")
        return out


def check_cache(cache_dir: str | Path, *, mode: str = "read-write", repair: str = "stop",
                now: _dt.datetime | None = None) -> CacheCheck:
    """Check the cache folder ``cache_dir`` and its database before a run (see the module).

    ``mode``: ``read-write`` (the default) or ``read-only``; ``repair``: ``stop`` (a damaged
    database is a :class:`CacheError`) or ``move-aside``. ``now`` names a moved file (default:
    the current UTC time). Raises CacheError, one line naming the file and the choices."""
    if mode not in CACHE_MODES:
        raise CacheError(f"--posbias-cache-mode must be one of {', '.join(CACHE_MODES)}; got {mode!r}")
    if repair not in CACHE_REPAIRS:
        raise CacheError(f"--posbias-cache-repair must be one of {', '.join(CACHE_REPAIRS)}; got {repair!r}")
    folder = Path(cache_dir)
    path = folder / CACHE_FILE
    _check_folder(folder, read_only=mode == "read-only")
    if not path.exists():
        if mode == "read-only":
            raise CacheError(f"--posbias-cache-mode read-only: there is no generation cache at {path} to read; "
                             f"drop the option to start one, or use {_OTHER}")
        return CacheCheck(path, exists=False, rows=0, unreadable=0, read_only=False)
    damage = _damage(path)
    if not damage:
        try:
            rows, unreadable = _count_rows(path)
        except sqlite3.Error as exc:  # a table the run cannot read: move-aside repairs it as any damage
            damage = f"{type(exc).__name__}: {exc}"
            if repair != "move-aside":
                raise CacheError(f"the generation cache {path} cannot be read ({damage}); no model call was made. "
                                 f"Choose: --posbias-cache-repair=move-aside, or {_OTHER}") from None
    if damage:
        if repair != "move-aside":
            raise CacheError(f"the generation cache {path} is damaged ({damage}); no model call was made. Choose: "
                             f"--posbias-cache-repair=move-aside (renames it to {path.name}.damaged-<UTC time> "
                             f"and starts a new cache; its answers are made again), or {_OTHER}")
        moved = _move_aside(path, now or _dt.datetime.now(_dt.UTC))
        return CacheCheck(path, exists=False, rows=0, unreadable=0, read_only=False, moved_to=moved, damage=damage)
    if mode == "read-write" and (refused := _write_refused(path)):
        raise CacheError(f"the generation cache {path} cannot be written ({refused}); no model call was made. "
                         "Choose: --posbias-cache-mode=read-only (use its answers; new ones are made, counted "
                         f"and not stored), make it writable, or {_OTHER}")
    return CacheCheck(path, exists=True, rows=rows, unreadable=unreadable, read_only=mode == "read-only")


def _check_folder(folder: Path, *, read_only: bool) -> None:
    """The folder exists (or can be made) and takes a new file: run logs and frames go there."""
    if folder.exists() and not folder.is_dir():
        raise CacheError(f"the cache folder {folder} is not a folder; choose {_OTHER}")
    made: list[Path] = []
    try:
        if not folder.exists():
            missing = [p for p in [folder, *folder.parents] if not p.exists()]
            folder.mkdir(parents=True)
            made = missing
        fd, probe = tempfile.mkstemp(prefix=".posbias-write-check-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        why = f"{type(exc).__name__}: {exc.strerror or exc}"
        extra = (" --posbias-cache-mode=read-only needs a writable folder too (the run logs are written there);"
                 if read_only else "")
        raise CacheError(f"the cache folder {folder} cannot be written ({why}): the run logs and new answers go "
                         f"there; no model call was made.{extra} Choose: make it writable, or {_OTHER}") from None
    finally:
        for p in made:  # leave no trace of the check: the run makes the folder when it starts
            with contextlib.suppress(OSError):
                p.rmdir()


def _damage(path: Path) -> str:
    """Why the database at ``path`` cannot be used ('' when it passes ``quick_check``)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if size == 0:
        return "the file is empty (0 bytes): a truncated cache, not a new one"
    if head != SQLITE_MAGIC:
        return "not an SQLite database: its first bytes are not the SQLite header"
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)) as conn:
            result = [str(r[0]) for r in conn.execute("PRAGMA quick_check(3)")]
            unusable = [str(r[1]) for r in conn.execute("PRAGMA table_info(unusable)")]
    except sqlite3.Error as exc:
        return f"{type(exc).__name__}: {exc}"
    if result != ["ok"]:
        return "PRAGMA quick_check: " + "; ".join(result)
    return unusable_shape_problem(unusable) if unusable else ""


def _count_rows(path: Path) -> tuple[int, int]:
    """Rows of the generations table and those whose payload the run cannot read (0, 0 without the table);
    sqlite3.Error when the table cannot be read."""
    with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'generations'").fetchone() is None:
            return 0, 0
        rows = bad = 0
        for (payload,) in conn.execute("SELECT payload FROM generations"):
            rows += 1
            g = read_payload(payload)
            bad += g is None or not g.ok  # a failed call is never stored: the run asks it again, as a damaged row
        # the other columns every stored answer needs: without them no answer of the run is stored
        columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(generations)")}
        missing = [c for c in ("key", "model", "created") if c not in columns]
        if missing:
            raise sqlite3.DatabaseError(f"its generations table lacks the column{'s' * (len(missing) > 1)} "
                                        f"{', '.join(missing)}")
        return rows, bad


def _write_refused(path: Path) -> str:
    """Why SQLite refuses to write ``path`` ('' when a write transaction, rolled back, goes through)."""
    try:
        with contextlib.closing(sqlite3.connect(str(path), timeout=10.0, isolation_level=None)) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE posbias_write_check (x INTEGER)")
            finally:
                conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _move_aside(path: Path, now: _dt.datetime) -> Path:
    """Rename the database and its side files to ``<name>.damaged-<UTC time>[-wal|-shm]``."""
    stamp = now.astimezone(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    try:
        for suffix in ("", *SIDE_FILES):
            src = path.with_name(path.name + suffix)
            if src.exists():
                src.replace(target.with_name(target.name + suffix))
    except OSError as exc:
        raise CacheError(f"the damaged generation cache {path} could not be moved aside ({exc.strerror or exc}); "
                         f"no model call was made. Choose: move it yourself, or {_OTHER}") from None
    return target


__all__ = ["CACHE_MODES", "CACHE_REPAIRS", "CacheCheck", "CacheError", "check_cache"]
