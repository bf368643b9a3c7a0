"""Model calls shared between pytest-xdist workers: each request made once, an idle worker helps.

Under ``pytest -n N`` every worker has its own engine on the one generation cache, and xdist hands
out whole probe groups (``suite_support.probe_group``). One group can be half of a run (the
stressor probe of the main job: 3,100 generations on one worker while the other has finished its
groups), so the run waits on one core. This module lets the idle worker make part of those calls:

* an engine with more than one batch of uncached requests *publishes* them (their keys, the
  requests, the probe, the backend's identity) under ``<run dir>/work/<worker>-<pid>-<n>/`` and
  makes them batch by batch, each batch under an exclusive ``fcntl`` lock on its own lock file;
  a batch another worker holds is deferred, then waited for and read from the cache and the
  publication (a batch the other worker could not finish, a killed worker, is made here);
* a worker that has run its last test (at its end of session, its fixtures released), or waits for
  a probe result another worker is computing
  (``RunContext.memo``), takes the unclaimed batches of the others' publications (of running
  workers only), from the last one back, under the same locks, skipping a batch marked made, and
  makes their uncached requests with its own copy of the model (only a model it has loaded, and
  only when its backend identity equals the publisher's, so the keys are the same): the good
  answers go to the shared cache, the failed ones into the publication (the publisher takes them
  as its own, so a failing call is sent once, as serially), all of them to this worker's run log;
* every lock is released by the kernel when its process dies, so a killed worker leaves no claim.

A request is made once across the workers (the claim and the cache are checked before a batch is
made), the answers are the same as serially (a request's output depends on the request alone), and
the summed ``made`` counts equal a serial run's. It is xdist's own scheduling that hands out the
work; this only keeps a worker that has none from idling while another makes the last calls.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import pickle
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

IDLE_POLL_S = 0.1  # how often an idle worker looks for new publications while another worker is busy

Item = tuple[str, Any]  # (cache key, Request)


@dataclass
class Publication:
    """The uncached requests of one engine call, in batches, as another worker reads them."""

    folder: Path
    probe: str
    model: str
    identity: dict[str, Any]
    batches: list[list[Item]]

    @contextlib.contextmanager
    def claim(self, index: int, *, wait: bool) -> Iterator[bool]:
        """Hold batch ``index`` exclusively while the block runs; yields False (holding nothing) when
        another process holds it and ``wait`` is False. The lock goes when the block ends or the
        process dies."""
        try:
            fh: IO[str] = open(self.folder / f"batch-{index}.lock", "a")  # noqa: SIM115 (closed below)
        except OSError:  # the publisher removed the folder: it has finished with these batches
            yield False
            return
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            fh.close()

    def mark_done(self, index: int, failed: Mapping[str, Any] | None = None) -> None:
        """Record (holding its claim) that batch ``index`` was made, with the failed generations of
        its requests (``failed``: cache key -> Generation; the cache keeps only good answers). Nobody
        sends those requests again: a helper skips the batch and the publisher takes the failures
        from here as its own calls' (:meth:`failed`), so a call that fails is made once, as serially."""
        with contextlib.suppress(OSError):
            if failed:
                tmp = self.folder / f".batch-{index}.failed.tmp"
                tmp.write_bytes(pickle.dumps(dict(failed), protocol=pickle.HIGHEST_PROTOCOL))
                tmp.rename(self.folder / f"batch-{index}.failed.pkl")
            (self.folder / f"batch-{index}.done").touch()

    def is_done(self, index: int) -> bool:
        return (self.folder / f"batch-{index}.done").exists()

    def failed(self, index: int) -> dict[str, Any]:
        """The failed generations recorded with batch ``index`` (empty when it is not done)."""
        if not self.is_done(index):
            return {}
        try:
            return dict(pickle.loads((self.folder / f"batch-{index}.failed.pkl").read_bytes()))
        except (OSError, EOFError, pickle.UnpicklingError):
            return {}


class WorkShare:
    """One worker's side of the sharing: its publications, its activity lock, its help."""

    def __init__(self, folder: str | Path, worker: str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.worker = worker
        self._seq = itertools.count()
        self._active: IO[str] | None = open(self.folder / f"active-{worker}.lock", "a")  # noqa: SIM115
        fcntl.flock(self._active, fcntl.LOCK_EX)  # held while this worker may still publish work
        self._exhausted: set[str] = set()  # publications this worker has walked to the front

    # -- the publisher's side
    def publish(self, batches: Sequence[Sequence[Item]], *, probe: str, model: str,
                identity: Mapping[str, Any]) -> Publication:
        """Write ``batches`` where the other workers look (atomically: a temporary name, then a rename)."""
        name = f"{self.worker}-{os.getpid()}-{next(self._seq)}"
        tmp = self.folder / f".{name}.tmp"
        tmp.mkdir()
        pub = Publication(self.folder / name, probe, model, dict(identity), [list(b) for b in batches])
        (tmp / "items.pkl").write_bytes(pickle.dumps((probe, model, pub.identity, pub.batches),
                                                     protocol=pickle.HIGHEST_PROTOCOL))
        tmp.rename(pub.folder)
        return pub

    @staticmethod
    def withdraw(pub: Publication) -> None:
        """Remove a finished publication: first renamed to a hidden name (atomically: no helper finds
        or claims it after this, and a helper's late ``open`` of a lock file cannot recreate it under
        the listed name), then deleted (a helper still holding one of its locks keeps its file open)."""
        gone = pub.folder.with_name(f".{pub.folder.name}.gone")
        try:
            pub.folder.rename(gone)
        except OSError:
            return
        shutil.rmtree(gone, ignore_errors=True)

    # -- the helper's side
    def others(self) -> list[Publication]:
        """The other workers' open publications (oldest first); one being removed is skipped."""
        out = []
        for d in sorted(self.folder.iterdir(), key=lambda p: p.name):
            if not d.is_dir() or d.name.startswith((".", f"{self.worker}-")) or d.name in self._exhausted:
                continue
            if not self._is_active(d.name.split("-", 1)[0]):
                continue  # its worker died (killed) or finished: nobody waits for these answers
            try:
                probe, model, identity, batches = pickle.loads((d / "items.pkl").read_bytes())
            except (OSError, EOFError, pickle.UnpicklingError):
                continue
            out.append(Publication(d, probe, model, identity, batches))
        return out

    def help_once(self, make: Callable[[Publication, int], tuple[int, Mapping[str, Any]]]) -> int:
        """Walk every other publication from its last batch to its first, making each batch nobody
        holds while its publisher runs (``make(pub, index)`` makes its uncached requests and returns
        how many it sent and the failed generations among them). Returns the requests made."""
        made = 0
        for pub in self.others():
            publisher = pub.folder.name.split("-", 1)[0]
            for i in reversed(range(len(pub.batches))):
                if not self._is_active(publisher):
                    break  # it died: its replacement makes these requests, not this worker too
                with pub.claim(i, wait=False) as held:
                    if held and not pub.is_done(i):  # a batch made already is left to its publisher
                        n, failed = make(pub, i)
                        made += n
                        pub.mark_done(i, failed)
            self._exhausted.add(pub.folder.name)
        return made

    def _is_active(self, worker: str) -> bool:
        """Whether ``worker`` holds its activity lock (it is running and may publish work)."""
        try:
            with open(self.folder / f"active-{worker}.lock", "a") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when closed
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False

    def others_active(self) -> bool:
        """Whether another worker may still publish work (holds its activity lock)."""
        return any(self._is_active(f.name[len("active-"):-len(".lock")]) for f in self.folder.glob("active-*.lock")
                   if f.name != f"active-{self.worker}.lock")

    def help_until_idle(self, make: Callable[[Publication, int], tuple[int, Mapping[str, Any]]], *,
                        should_stop: Callable[[], bool] = lambda: False) -> int:
        """This worker has no tests left: stop publishing, then help the others until none is
        active (or ``should_stop()``). Returns the requests made for them."""
        self.retire()
        made = 0
        while not should_stop():
            n = self.help_once(make)
            made += n
            if n == 0:
                if not self.others_active():
                    break
                time.sleep(IDLE_POLL_S)
        return made

    def retire(self) -> None:
        """Release the activity lock: this worker publishes nothing more."""
        if self._active is not None:
            self._active.close()
            self._active = None
