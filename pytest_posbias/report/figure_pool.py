"""The report's figures drawn side by side: this process and helper processes at once.

Drawing the figures is most of a report's render (about 4.5 of 6 s for the main job's report on
this project's 2-core machine), and it comes at the end of a run, on one core, while the others
sit idle. Inside :func:`deferred`, each figure function of :mod:`.figures` returns a placeholder
(an HTML comment with a random nonce: model text reaches the page escaped, so it cannot forge one)
and records its arguments; :meth:`FigureBatch.fill` then draws the recorded figures, this process
and the helpers taking the next undrawn one until none is left, and puts each SVG where its
placeholder is.

The helpers are plain subprocesses (``python -m pytest_posbias.report.figure_worker``, one figure
at a time over a pipe: a pickled call in, the SVG out). The ``-n`` controller (its log follower, once a worker has begun its run log)
and ``posbias report`` start them early (:func:`start_figure_helpers`), so that their matplotlib
import is done when the figures are drawn; elsewhere (a serial run) a batch of at least
``START_AT_FILL_MIN`` figures starts them when it is drawn, and they join in once ready, so that a
short run with a few figures starts no process. Not a
``multiprocessing`` pool: its processes (``spawn``/``forkserver``) run the parent's main script
again first, which costs each of them the script's imports, fails where the script is not a file
(``python - < script``), and re-runs an unguarded user script; ``fork`` would copy a process whose
other threads may hold locks. A helper that is gone (killed, or its pipe broken) is dropped and its
figure drawn here. A figure depends on its arguments only (the SVG is deterministic: fixed hash
salt, no date), so the page is byte for byte the one drawn in one process; a figure that raised in
a helper is drawn again here, so it fails as it always did. ``POSBIAS_FIGURE_PROCESSES=1`` (or 0)
draws every figure in this process.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import os
import pickle
import queue
import re
import secrets
import select
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

F = TypeVar("F", bound=Callable[..., str])
Call = tuple[str, tuple[Any, ...], dict[str, Any]]

_BATCH: contextvars.ContextVar[FigureBatch | None] = contextvars.ContextVar("posbias_figure_batch", default=None)
_FIRST = ("coverage_curves",)  # the costliest figure (one panel per configuration) goes out first
_HEADER = struct.Struct("!Q")
HELPER_TIMEOUT_S = 120.0  # a figure a helper has not drawn by then is drawn here (the helper is ended)
START_AT_FILL_MIN = 8  # figures in a batch from which helpers not started earlier are started at fill time


def figure_processes() -> int:
    """How many processes draw a report's figures, this one included: ``POSBIAS_FIGURE_PROCESSES``
    when set, else the CPUs this process may run on (at most 8). 1 on Windows, where ``select``
    cannot wait on a pipe (every helper would be ended at its first figure)."""
    if os.name == "nt":
        return 1
    raw = os.environ.get("POSBIAS_FIGURE_PROCESSES", "").strip()
    if raw:
        try:
            return max(0, int(raw))
        except ValueError:
            warnings.warn(f"POSBIAS_FIGURE_PROCESSES={raw!r} is not a whole number of processes (0 or 1: "
                          "figures drawn in this process; N: this one and N - 1 helpers); drawing here only",
                          RuntimeWarning, stacklevel=2)
            return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(8, cpus)


def send_message(fh: IO[bytes], obj: Any) -> None:
    """One length-prefixed pickle on ``fh`` (the helpers' pipe protocol)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_HEADER.pack(len(data)) + data)
    fh.flush()


def read_message(fh: IO[bytes]) -> Any:
    """The next length-prefixed pickle on ``fh``; EOFError when the other side has gone."""
    head = fh.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the pipe closed")
    (n,) = _HEADER.unpack(head)
    data = fh.read(n)
    if len(data) < n:
        raise EOFError("the pipe closed mid-message")
    return pickle.loads(data)


class _Helper:
    """One helper process and its pipes. Its first message says it is ready (matplotlib imported);
    no figure is sent to it before that. Every exchange has a deadline, the write of a call too (a
    call larger than the pipe's buffer would block on a helper that has stopped reading)."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])  # the same pytest_posbias as this process's
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        # -P: the working directory is not put first on the helper's path (`python -m` would), so a
        # pytest_posbias there (another checkout) cannot shadow this process's
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", "pytest_posbias.report.figure_worker"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._wfd, self._rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._wfd, False)
        self.ready = False

    def wait_ready(self, keep_waiting: Callable[[], bool], *, poll_s: float = 0.05) -> bool:
        """Wait for the helper's ready message while ``keep_waiting()`` (work is left) and at most
        ``HELPER_TIMEOUT_S``; True once it is ready. Raises when it is gone or sent something else."""
        deadline = time.monotonic() + HELPER_TIMEOUT_S
        while not self.ready:
            ready, _, _ = select.select([self._rfd], [], [], poll_s)
            if ready:
                if self._read(deadline) != (True, "ready"):
                    raise EOFError("the helper's first message was not its ready message")
                self.ready = True
            elif not keep_waiting():
                return False
            elif time.monotonic() > deadline:
                raise TimeoutError(f"the helper was not ready in {HELPER_TIMEOUT_S:.0f} s")
        return True

    def draw(self, call: Call) -> tuple[bool, str]:
        """(True, svg), or (False, why) when the figure raised there. Raises when the helper is gone
        or has not taken the call and answered it within ``HELPER_TIMEOUT_S``."""
        deadline = time.monotonic() + HELPER_TIMEOUT_S
        data = pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL)
        self._write(_HEADER.pack(len(data)) + data, deadline)
        ok, value = self._read(deadline)
        return bool(ok), str(value)

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            _, ready, _ = select.select([], [self._wfd], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"the helper took no call in {HELPER_TIMEOUT_S:.0f} s")
            with contextlib.suppress(BlockingIOError):
                view = view[os.write(self._wfd, view):]

    def _read_exact(self, n: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        while n:
            ready, _, _ = select.select([self._rfd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no figure from the helper in {HELPER_TIMEOUT_S:.0f} s")
            chunk = os.read(self._rfd, min(n, 1 << 20))
            if not chunk:
                raise EOFError("the pipe closed")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _read(self, deadline: float) -> Any:
        (n,) = _HEADER.unpack(self._read_exact(_HEADER.size, deadline))
        return pickle.loads(self._read_exact(n, deadline))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # the helper's loop ends at the end of its input
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=2)
        with contextlib.suppress(Exception):
            self.proc.kill()
            self.proc.wait(timeout=2)


_HELPERS: list[_Helper] = []
_HELPERS_LOCK = threading.Lock()  # one batch at a time uses the helpers


def start_figure_helpers() -> None:
    """Start (once per process, in the background: returns at once) the helper processes that
    draw figures beside this one, ``figure_processes() - 1`` of them; they import matplotlib now,
    while there is time. Does nothing where figures are drawn in this process only, or where a
    subprocess cannot be started (the figures are then all drawn here)."""
    with _HELPERS_LOCK:
        _HELPERS[:] = [h for h in _HELPERS if h.alive()]
        want = figure_processes() - 1 - len(_HELPERS)
        for _ in range(max(0, want)):
            try:
                _HELPERS.append(_Helper())
            except OSError:
                break


@atexit.register
def stop_figure_helpers() -> None:
    """End the helper processes (they also end by themselves when this process does)."""
    with _HELPERS_LOCK:
        for h in _HELPERS:
            h.close()
        _HELPERS.clear()


def deferrable(fn: F) -> F:
    """A figure function that, inside :func:`deferred`, records its call and returns a placeholder."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        batch = _BATCH.get()
        if batch is None:
            return isolated(fn, args, kwargs)
        return batch.add(fn.__name__, args, kwargs)

    return call  # type: ignore[return-value]


class FigureBatch:
    """The figure calls made inside one :func:`deferred` block."""

    def __init__(self) -> None:
        self._nonce = secrets.token_hex(8)
        self._calls: list[Call] = []
        self.drawn_by_helpers = 0  # figures a helper process drew (the rest were drawn here)

    def add(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        self._calls.append((name, args, kwargs))
        return f"<!--posbias-figure-{self._nonce}-{len(self._calls) - 1}-->"

    def __len__(self) -> int:
        return len(self._calls)

    def fill(self, html: str) -> str:
        """``html`` with every placeholder of this batch replaced by its figure's SVG."""
        svgs = self._draw()
        return re.sub(rf"<!--posbias-figure-{self._nonce}-(\d+)-->", lambda m: svgs[int(m.group(1))], html)

    def _draw(self) -> list[str]:
        if len(self._calls) >= START_AT_FILL_MIN and figure_processes() > 1:
            start_figure_helpers()  # none running yet: they join in as soon as their imports are done
        out: list[str | None] = [None] * len(self._calls)
        todo: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in sorted(range(len(self._calls)), key=lambda i: self._calls[i][0] not in _FIRST):
            todo.put(i)
        with _HELPERS_LOCK:
            helpers = [h for h in _HELPERS if h.alive()] if figure_processes() > 1 and len(self._calls) > 1 else []
            drawn = [0] * len(helpers)
            threads = [threading.Thread(target=self._helper_loop, args=(h, todo, out, drawn, k), daemon=True)
                       for k, h in enumerate(helpers)]
            for t in threads:
                t.start()
            try:
                while True:  # this process draws too, taking the next figure as the helpers do
                    try:
                        i = todo.get_nowait()
                    except queue.Empty:
                        break
                    out[i] = draw_call(self._calls[i])
            finally:  # also when a figure raised here (or Ctrl-C): the helpers finish their figure, take no other
                with contextlib.suppress(queue.Empty):
                    while True:
                        todo.get_nowait()
                for t in threads:
                    t.join()
                _HELPERS[:] = [h for h in _HELPERS if h.alive()]
        self.drawn_by_helpers = sum(drawn)
        return [svg if svg is not None else draw_call(call) for svg, call in zip(out, self._calls, strict=True)]

    def _helper_loop(self, helper: _Helper, todo: queue.SimpleQueue[int], out: list[str | None], drawn: list[int],
                     k: int) -> None:
        try:  # a helper still importing takes no figure: it joins in once ready, or not at all
            if not helper.wait_ready(lambda: not todo.empty()):
                return
        except Exception:
            helper.close()
            return
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                ok, svg = helper.draw(self._calls[i])
            except Exception:  # gone, hung, or the call would not pickle: this figure is drawn here
                helper.close()
                return
            if ok:
                out[i] = svg
                drawn[k] += 1


def draw_call(call: Call) -> str:
    """Draw one recorded figure call in this process (what a helper does with each message)."""
    name, args, kwargs = call
    from . import figures

    return isolated(getattr(figures, name).__wrapped__, args, kwargs)


def isolated(fn: Callable[..., str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """``fn(*args, **kwargs)`` under matplotlib's settings as loaded (its defaults and any matplotlibrc:
    ``matplotlib.rc_file_defaults``), not as this process may have changed them since (a user's
    conftest or test setting ``rcParams``), and with this process's settings restored after
    (``rc_context``): a helper process, which never sees such changes, draws the same bytes."""
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rc_file_defaults()
        return str(fn(*args, **kwargs))


@contextlib.contextmanager
def deferred() -> Iterator[FigureBatch]:
    """Inside the block, figure functions return placeholders; ``batch.fill(html)`` draws them."""
    batch = FigureBatch()
    token = _BATCH.set(batch)
    try:
        yield batch
    finally:
        _BATCH.reset(token)
