"""The report's figures rendered side by side in worker processes.

Drawing the figures is most of a report's render (about 4.5 of 6 s for the main job's report on
this project's 2-core machine), and it comes at the end of a run, on one core, while the others
sit idle. Inside :func:`deferred`, each figure function of :mod:`.figures` returns a placeholder
(an HTML comment with a random nonce: model text reaches the page escaped, so it cannot forge one)
and records its arguments; :meth:`FigureBatch.fill` then draws the recorded figures in a
:class:`~concurrent.futures.ProcessPoolExecutor` and puts each SVG where its placeholder is.

The pool's processes are forked from a ``forkserver`` that has imported matplotlib and
:mod:`.figures` already (:func:`start_figure_server`, called early in a run, while there is time:
the end of the run then forks ready processes instead of importing matplotlib in each). A figure
depends on its arguments only (the SVG is deterministic: fixed hash salt, no date), so the page is
byte for byte the one drawn in-process. Where the pool cannot be had (no ``forkserver`` on the
platform, no semaphores in a sandbox, a process that died, a figure that raised there), the figures
concerned are drawn in-process, as without the pool: a figure that fails there fails as it always
did. ``POSBIAS_FIGURE_PROCESSES=0`` (or 1) draws every figure in-process.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., str])

_PRELOAD = ["matplotlib", "matplotlib.pyplot", "matplotlib.backends.backend_svg", "pytest_posbias.report.figures"]
_BATCH: contextvars.ContextVar[FigureBatch | None] = contextvars.ContextVar("posbias_figure_batch", default=None)
_FIRST = ("coverage_curves",)  # the costliest figure (one panel per configuration) goes out first


def figure_processes() -> int:
    """How many processes draw a report's figures: ``POSBIAS_FIGURE_PROCESSES`` when set, else the
    CPUs this process may run on (at most 8)."""
    raw = os.environ.get("POSBIAS_FIGURE_PROCESSES", "").strip()
    if raw:
        try:
            return max(0, int(raw))
        except ValueError:
            return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(8, cpus)


def start_figure_server() -> None:
    """Start, in the background, the ``forkserver`` that the figure processes are forked from,
    with matplotlib imported (returns at once; the imports run in that process). Does nothing
    where the pool would not be used or cannot be had."""
    if figure_processes() < 2:
        return
    with contextlib.suppress(Exception):
        import multiprocessing
        from multiprocessing import forkserver

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        forkserver.ensure_running()


def deferrable(fn: F) -> F:
    """A figure function that, inside :func:`deferred`, records its call and returns a placeholder."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        batch = _BATCH.get()
        if batch is None:
            return fn(*args, **kwargs)
        return batch.add(fn.__name__, args, kwargs)

    return call  # type: ignore[return-value]


class FigureBatch:
    """The figure calls made inside one :func:`deferred` block."""

    def __init__(self) -> None:
        self._nonce = secrets.token_hex(8)
        self._calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.drawn_in_pool = 0  # figures the pool drew (the rest were drawn in-process)

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
        n = len(self._calls)
        out: list[str | None] = [None] * n
        procs = min(figure_processes(), n)
        if procs >= 2:
            order = sorted(range(n), key=lambda i: self._calls[i][0] not in _FIRST)
            with contextlib.suppress(Exception):  # no pool here: every figure is drawn in-process below
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                ctx = multiprocessing.get_context("forkserver")
                with ProcessPoolExecutor(max_workers=procs, mp_context=ctx) as pool:
                    futures = {i: pool.submit(_draw_one, *self._calls[i]) for i in order}
                    for i, fut in futures.items():
                        with contextlib.suppress(Exception):  # drawn in-process below: fails there as ever
                            out[i] = fut.result()
                            self.drawn_in_pool += 1
        return [svg if svg is not None else _draw_one(*call) for svg, call in zip(out, self._calls, strict=True)]


def _draw_one(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    from . import figures

    fn = getattr(figures, name)
    return str(fn.__wrapped__(*args, **kwargs))


@contextlib.contextmanager
def deferred() -> Iterator[FigureBatch]:
    """Inside the block, figure functions return placeholders; ``batch.fill(html)`` draws them."""
    batch = FigureBatch()
    token = _BATCH.set(batch)
    try:
        yield batch
    finally:
        _BATCH.reset(token)
