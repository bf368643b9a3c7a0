"""A probe result computed once across the run's pytest-xdist workers.

The first worker that needs a result computes it holding an exclusive ``fcntl`` lock keyed on
the memo key under the run folder, and leaves it there pickled; a worker that needs it meanwhile
waits on the lock and reads it, making no model call. :func:`~.run.finish.finish_run` removes
the folder at the end of the run.
"""

from __future__ import annotations

import fcntl
import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any


def computed_once_across_workers(folder: Path, key: str, fn: Callable[[], Any], *, worker: str) -> tuple[Any, bool]:
    """``(fn(), False)`` computed here, or ``(value, True)`` read from another worker.

    Under an exclusive lock on ``<folder>/<sha256(key)>.lock``: read the result another worker
    stored as ``<sha256(key)>.pkl``, or compute it and store it (written to a temporary file
    named for ``worker``, then renamed). A result that cannot be stored, or a stored file that
    cannot be read (truncated, foreign), is simply computed again by the next worker that needs
    it (its requests then come from the generation cache). The lock is released when its file
    closes, also when a killed worker exits."""
    folder.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    stored = folder / f"{name}.pkl"
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if stored.is_file():
                try:
                    value = pickle.loads(stored.read_bytes())
                except Exception:  # a truncated or foreign file: compute it here instead
                    value = None
                if value is not None:
                    return value, True
            value = fn()
            tmp = folder / f"{name}.{worker}.tmp"
            try:
                tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
                tmp.replace(stored)
            except (pickle.PicklingError, TypeError, AttributeError, OSError):
                tmp.unlink(missing_ok=True)
            return value, False
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
