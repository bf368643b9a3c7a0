"""Retention of the cache folder: :func:`prune_runs` removes run folders (``<cache>/runs/<run id>/``)
by count or age, and old cached answers on request, at the end of a run with ``[tool.posbias]
keep_runs = N`` and as ``posbias cache prune``. A run's age is the newest modification time of its
folder and its files, so a run still writing counts as new; a run without its merged log written
within a day (another run sharing the cache) is not removed by count. The HTML reports are never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError

DAY_S = 86400.0
LIVE_S = DAY_S  # a run folder without its merged log (``run.jsonl``) written this recently is a run still writing


@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune_runs` removed (or would remove, ``dry_run``): run folders, their bytes,
    answers deleted from the cache, the run folders kept, and those it was to remove but could not
    (``not_removed``: still on disk, a symbolic link or a folder it may not delete; counted as kept)."""

    removed: tuple[Path, ...]
    freed_bytes: int
    kept: int
    answers_removed: int = 0
    dry_run: bool = False
    not_removed: tuple[Path, ...] = ()

    def line(self) -> str:
        """One line: what was removed and what was kept."""
        verb = "would remove" if self.dry_run else "removed"
        text = f"{verb} {len(self.removed)} run folders ({self.freed_bytes / 1e6:.1f} MB), kept {self.kept}"
        if self.not_removed:
            text += f"; could not remove {len(self.not_removed)} run folders: {', '.join(map(str, self.not_removed))}"
        if self.answers_removed:
            text += f"; {verb} {self.answers_removed} cached answers"
        return text


def _age_key(run: Path) -> float | None:
    """The newest modification time of ``run`` and the files directly in it; None when ``run`` is gone
    (removed meanwhile by another run pruning the same cache)."""
    try:
        times = [run.stat().st_mtime]
        entries = list(run.iterdir())
    except FileNotFoundError:
        return None
    for p in entries:
        with contextlib.suppress(OSError):  # removed meanwhile
            times.append(p.stat().st_mtime)
    return max(times)


def _size(run: Path) -> int:
    """The bytes of the files under ``run``; a file removed meanwhile (another run pruning the same cache) counts 0."""
    total = 0
    for p in run.rglob("*"):
        with contextlib.suppress(OSError):
            total += p.stat().st_size if p.is_file() else 0
    return total


def prune_runs(cache_dir: str | Path, *, keep_runs: int | None = None, older_than_days: float | None = None,
               answers_older_than_days: float | None = None, keep: Sequence[str] = (), dry_run: bool = False,
               now: float | None = None) -> PruneResult:
    """Remove run folders of ``cache_dir/runs`` beyond the newest ``keep_runs`` (an integer >= 1)
    or older than ``older_than_days`` (> 0); either or both. ``keep``: run ids never removed
    (the current run); they count first among the ``keep_runs``. ``answers_older_than_days`` (> 0): also delete cached
    answers created before that age and VACUUM the database. ``now``: the reference time (``time.time()``).
    Raises ConfigError naming the parameter for a value out of range."""
    if keep_runs is not None and (isinstance(keep_runs, bool) or not isinstance(keep_runs, int) or keep_runs < 1):
        raise ConfigError(f"keep_runs must be an integer >= 1 (the newest runs kept); got {keep_runs!r}")
    for name, value in (("older_than_days", older_than_days), ("answers_older_than_days", answers_older_than_days)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise ConfigError(f"{name} must be a number of days > 0; got {value!r}")
    now = time.time() if now is None else float(now)
    runs_dir = Path(cache_dir) / "runs"
    listed = [p for p in runs_dir.iterdir() if p.is_dir()] if runs_dir.is_dir() else []
    ages = {p: age for p in listed if (age := _age_key(p)) is not None}  # a folder gone meanwhile is no run
    runs = sorted(ages, key=lambda p: (p.name in keep, ages[p], p.name), reverse=True)  # kept ones, then newest first
    live = {r for r in runs if now - ages[r] < LIVE_S and not (r / "run.jsonl").exists()}
    doomed = [run for rank, run in enumerate(runs) if run.name not in keep and (
        (keep_runs is not None and rank >= keep_runs and run not in live)  # too many
        or (older_than_days is not None and now - ages[run] > older_than_days * DAY_S))]  # too old
    sizes = {r: _size(r) for r in doomed}
    failed: list[Path] = []
    if not dry_run:
        for run in doomed:
            shutil.rmtree(run, ignore_errors=True)
            if run.exists() or run.is_symlink():  # rmtree refuses a link, or a file it may not delete stays
                failed.append(run)
    removed = [r for r in doomed if r not in failed]
    answers = 0 if answers_older_than_days is None else _prune_answers(
        Path(cache_dir) / "generations.sqlite", now - answers_older_than_days * DAY_S, dry_run=dry_run)
    return PruneResult(tuple(removed), sum(sizes[r] for r in removed), len(runs) - len(removed), answers, dry_run,
                       tuple(failed))


def _prune_answers(path: Path, cutoff: float, *, dry_run: bool) -> int:
    """Delete answers created before ``cutoff`` (epoch seconds) and compact the file; their count."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'generations'").fetchone() is None:
            return 0
        if dry_run:
            return int(conn.execute("SELECT COUNT(*) FROM generations WHERE created < ?", (cutoff,)).fetchone()[0])
        n = conn.execute("DELETE FROM generations WHERE created < ?", (cutoff,)).rowcount
        if n:
            conn.execute("VACUUM")
        return int(n)
    except sqlite3.Error as exc:
        raise ConfigError(f"posbias cache prune: {path}: {type(exc).__name__}: {exc}") from None
    finally:
        conn.close()


def _cache_command(args: argparse.Namespace) -> int:
    """``posbias cache prune``."""
    folder = Path(args.cache)
    try:
        if args.keep_runs is None and args.older_than is None and args.answers_older_than is None:
            raise ConfigError("give --keep-runs N, --older-than DAYS and/or --answers-older-than DAYS")
        if not folder.is_dir():
            raise ConfigError(f"--cache {folder}: no such folder")
        if not ((folder / "generations.sqlite").is_file() or (folder / "runs").is_dir()):
            raise ConfigError(f"--cache {folder}: not a posbias cache folder (it holds neither generations.sqlite "
                              "nor runs/)")
        result = prune_runs(folder, keep_runs=args.keep_runs, older_than_days=args.older_than,
                            answers_older_than_days=args.answers_older_than, dry_run=args.dry_run)
    except ConfigError as exc:
        print(f"posbias cache prune: error: {exc}", file=sys.stderr)
        return 2
    print(f"posbias cache prune: {folder}: {result.line()}")
    for run in result.removed:
        print(f"  {run.name}")
    if result.not_removed:  # asked to go, still on disk: the command did not do what it was asked
        print(f"posbias cache prune: error: could not remove {', '.join(map(str, result.not_removed))}",
              file=sys.stderr)
        return 1
    return 0


def register(sub: Any, register: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``posbias cache prune`` to the command line."""
    p = register(sub, "cache", _cache_command, "keep the cache folder from growing: remove old run logs (and answers)")
    p.add_argument("action", choices=["prune"], help="what to do")
    p.add_argument("--cache", default=".posbias", help="the cache folder (default .posbias)")
    p.add_argument("--keep-runs", type=int, default=None, metavar="N", help="keep the newest N run folders (N >= 1)")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="remove run folders older than DAYS")
    p.add_argument("--answers-older-than", type=float, default=None, metavar="DAYS",
                   help="also delete cached answers made more than DAYS ago (they are made again when needed)")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")


__all__ = ["PruneResult", "prune_runs", "register"]
