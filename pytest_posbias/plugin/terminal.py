"""The plugin's lines on the terminal: the model-call progress (a bar redrawn in place on a
terminal, plain lines in a CI log; under ``-n`` one bar for the controller, drawn by a thread that
shares the terminal with pytest through :class:`SharedTerminal`), and the plugin's own lines
placed so that pytest's result letters and file headers stay as pytest writes them."""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from ..safe_text import inert
from .options import run_directory, worker_id
from .state import PluginState, plugin_of


def progress_writer(config: pytest.Config) -> Any:
    """A callback that shows probe progress: on the controller, a line of its own that does not make
    pytest print the test file's header again; on an xdist worker (no terminal), the worker's
    latest progress in ``progress-<worker>.txt`` of the run directory, which the controller prints
    (:class:`ControllerProgress`). None when quiet."""
    if config.get_verbosity() < 0:
        return None
    if getattr(config, "workerinput", None) is not None:
        from ..report.summary import progress_file, write_progress

        path = progress_file(run_directory(config), worker_id(config))
        return lambda line: write_progress(path, inert(line, newlines=False))  # the controller prints it
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return None

    capman = config.pluginmanager.get_plugin("capturemanager")

    def uncaptured() -> Any:  # while a test runs, pytest's capture points stdout at a file
        return capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()

    with uncaptured():
        live = LiveLine(tr, config) if is_terminal(tr) else None
    if live is not None:
        plugin_of(config).live_line = live

    def write(line: str, *, transient: bool = False, final: bool = False) -> None:
        line = inert(line, newlines=False)  # a line may quote data (a file name): no control character reaches the tty
        with uncaptured():  # on a line of its own (a progress bar: redrawn in place)
            if live is not None and transient:
                live.draw(f"[posbias] {line}", final=final)
                return
            if live is not None:
                live.close()
            write_keeping_prefix(tr, config, f"[posbias] {line}")

    write.live = live is not None  # type: ignore[attr-defined]
    return write


def is_terminal(tr: Any) -> bool:
    """Whether pytest writes to an interactive terminal (a CI log gets plain lines instead)."""
    f = getattr(getattr(tr, "_tw", None), "_file", None)
    try:
        return bool(f is not None and f.isatty() and os.environ.get("TERM") != "dumb")
    except (AttributeError, ValueError):
        return False


class LiveLine:
    """The progress bar's line on a terminal: drawn on a fresh line, redrawn in place (carriage
    return, erase to the end of the line) at each update, and ended by the last update, by any other
    line the plugin prints, or before pytest writes the next test's result."""

    def __init__(self, tr: Any, config: pytest.Config) -> None:
        self.tr, self.config = tr, config
        self.open = False
        self._prefix: Any = None

    def draw(self, text: str, *, final: bool) -> None:
        tw = self.tr._tw
        if not self.open:
            self._prefix = getattr(self.tr, "currentfspath", None)
            if int(getattr(tw, "width_of_current_line", 0) or 0):
                tw.line()  # leave pytest's result letters on their line
            self.open = True
        width = max(20, int(getattr(tw, "fullwidth", 80)) - 1)
        tw.write_raw("\r" + text[:width] + "\x1b[K", flush=True)
        if final:
            self.close()

    def close(self) -> None:
        if not self.open:
            return
        self.open = False
        self.tr._tw.line()
        # results continue on a fresh line without pytest repeating the file's header
        self.tr.currentfspath = self._prefix if self.config.get_verbosity() <= 0 else None


def write_keeping_prefix(tr: Any, config: pytest.Config, line: str) -> None:
    """``tr.write_line`` forgets the file whose results are being printed, so pytest would print
    the file's header again after the line; at default verbosity keep it (results continue on
    the next line without repeating the header)."""
    prefix = getattr(tr, "currentfspath", None)
    tw = getattr(tr, "_tw", None)
    at_line_start = tw is not None and not int(getattr(tw, "width_of_current_line", 0) or 0)
    if at_line_start:
        tr.currentfspath = None  # already on a fresh line: no blank line before ours
    elif prefix in (None, -2) and tw is not None:
        tw.line()  # xdist writes result letters without a prefix: start a line of our own
    tr.write_line(line)
    if config.get_verbosity() <= 0 and prefix not in (None, -2):
        tr.currentfspath = prefix


PROGRESS_POLL_S = 5.0  # the controller of an -n run writes a plain progress line (a CI log) at most this often
PROGRESS_REDRAW_S = 0.5  # and redraws its bar on a terminal this often (when it changed or pytest's output hid it)
_CSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # a terminal control sequence (colours): no width on the screen
_WORKER_CALLS = re.compile(r"model calls (\d+)/(\d+) \(\d+%\), ([0-9.e+-]+)/s")  # summary.progress_text's numbers


class SharedTerminal:
    """The xdist controller's terminal file, written by pytest and by the progress thread under one
    :attr:`lock`: each write of pytest's first erases the bar and puts the cursor back where pytest
    left it. The bar takes pytest's line when it is empty, else the line below (``\n``), erased with
    ``\r``, ``ESC[K``, ``ESC[A`` and ``ESC[<col>G``; no other control sequence is used."""

    def __init__(self, file: Any, lock: threading.RLock) -> None:
        self._file = file
        self.lock = lock
        self.col = 0  # pytest's column: visible characters written since its last line start
        self.shown = False  # the bar is on the screen
        self.below = False  # ... on the line below pytest's (pytest's line holds result letters)

    def write(self, text: str) -> int:
        with self.lock:
            if self.shown:
                self._erase()
            n = self._file.write(text)
            tail = re.split(r"[\r\n]", text)[-1]
            visible = len(_CSI.sub("", tail))
            self.col = visible if ("\n" in text or "\r" in text) else self.col + visible
            return int(n or 0)

    def draw(self, text: str, columns: int) -> None:
        """Show ``text`` as the bar (cut to ``columns - 1``); not drawn while pytest's line fills the
        terminal's width (the terminal wrapped it: the line below is not known)."""
        with self.lock:
            if self.col >= columns - 1:
                return
            lead = ""
            if not self.shown:
                self.below = self.col > 0
                lead = "\n" if self.below else ""
            self._file.write(f"{lead}\r{text[:max(10, columns - 1)]}\x1b[K")
            self._file.flush()
            self.shown = True

    def flush(self) -> None:
        with self.lock:
            self._file.flush()

    def erase(self) -> None:
        """Take the bar off the screen (the end of the run)."""
        with self.lock:
            if self.shown:
                self._erase()
                self._file.flush()

    def _erase(self) -> None:
        self._file.write("\r\x1b[K" + (f"\x1b[A\x1b[{self.col + 1}G" if self.below else ""))
        self.shown = self.below = False

    def __getattr__(self, name: str) -> Any:  # flush, isatty, encoding, ...: the terminal's own
        return getattr(self._file, name)


def combined_progress(run_dir: Path, *, tests_done: int, tests_planned: int) -> tuple[float, str]:
    """The controller's progress under ``-n``: (share of the run done, text). The text sums the
    workers' current probes (``progress-<worker>.txt``): ``12/40 tests · model calls 150/480 (31%),
    5.0/s, ETA 1 min (2 workers)``, the rates summed, the longest ETA. The share is (tests done + the
    done share of each unfinished probe) / tests planned."""
    tests = f"{tests_done}/{tests_planned} tests" if tests_planned else f"{tests_done} tests done"
    running = 0.0  # the done share of the probes still making calls
    done = total = 0
    rate, eta, workers = 0.0, 0.0, 0
    for f in sorted(run_dir.glob("progress-*.txt")):
        try:
            m = _WORKER_CALLS.search(f.read_text(encoding="utf-8"))
        except OSError:
            continue
        if m is None:
            continue
        d, t, r = int(m.group(1)), int(m.group(2)), float(m.group(3))
        done, total, rate, workers = done + d, total + t, rate + r, workers + 1
        running += d / t if t > 0 and d < t else 0.0
        eta = max(eta, (t - d) / r if r > 0 else (0.0 if d >= t else math.inf))
    share = (tests_done + running) / tests_planned if tests_planned else 0.0
    if not workers:
        return min(1.0, share), tests
    eta_text = "–" if math.isinf(eta) else (f"{eta:.0f} s" if eta < 120 else f"{eta / 60:.0f} min")
    pct = 100 * done // total if total else 100
    return min(1.0, share), (f"{tests} · model calls {done}/{total} ({pct}%), {rate:.3g}/s, ETA {eta_text} "
                             f"({workers} worker{'s' if workers != 1 else ''})")


class ControllerProgress:
    """xdist controller: the run's progress while the workers run the suites, a bar redrawn every
    PROGRESS_REDRAW_S through a :class:`SharedTerminal` on a terminal, a plain line every
    PROGRESS_POLL_S when it changed in a CI log (:func:`maybe_start_controller_progress`)."""

    def __init__(self, tr: Any, config: pytest.Config, state: PluginState, run_dir: Path, *, live: bool) -> None:
        self.tr, self.config, self.state, self.run_dir = tr, config, state, run_dir
        self.lock = state.terminal_lock
        self.terminal: SharedTerminal | None = None
        tw = tr._tw
        if live:
            self.terminal = SharedTerminal(tw._file, self.lock)
            tw._file = self.terminal
        self.thread = threading.Thread(target=self._loop, name="posbias-progress", daemon=True)

    def stop(self) -> None:
        """End the thread and take the bar off the screen, handing pytest its own file back."""
        self.state.stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)
        if self.terminal is not None:
            with self.lock:
                self.terminal.erase()
                tw = self.tr._tw
                if tw._file is self.terminal:
                    tw._file = self.terminal._file
            self.terminal = None

    def _loop(self) -> None:
        from ..report.summary import BAR_WIDTH, worker_progress_line

        last, fill = "", 0
        wait = 0.0  # the first line at once: the thread starts when a worker has set the run up
        while not self.state.stop.wait(wait):
            wait = PROGRESS_REDRAW_S if self.terminal is not None else PROGRESS_POLL_S
            if self.terminal is not None:
                share, text = combined_progress(self.run_dir, tests_done=self.state.tests_done,
                                                tests_planned=self.state.tests_planned)
                fill = max(fill, int(BAR_WIDTH * share))  # never back (a probe's end, before its test's report)
                line = f"[posbias] [{'#' * fill}{'-' * (BAR_WIDTH - fill)}] {text}"
                with self.lock:
                    if line != last or not self.terminal.shown:
                        self.terminal.draw(line, int(getattr(self.tr._tw, "fullwidth", 80)))
                        last = line
                continue
            line = worker_progress_line(self.run_dir, tests_done=self.state.tests_done,
                                        tests_planned=self.state.tests_planned)
            if line != last and (self.state.tests_done or ":" in line):
                last = line
                with self.lock:  # pytest's own writes on the main thread hold it (hold_terminal)
                    write_keeping_prefix(self.tr, self.config, f"[posbias] {line}")


def maybe_start_controller_progress(config: pytest.Config, state: PluginState) -> None:
    """xdist controller, at a test's report: start :class:`ControllerProgress` once a worker has set
    this run's folder up (a suite test ran its ``posbias_run`` fixture, or wrote progress). Not in
    a serial run, under ``-q`` (as a serial run shows no progress then) or on a worker."""
    if (state.progress is not None or state.worker or state.stop.is_set()
            or getattr(config.option, "dist", "no") == "no" or config.get_verbosity() < 0):
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or getattr(tr, "_tw", None) is None:
        return
    run_dir = run_directory(config)
    if not run_dir.is_dir():  # no suite test has set up a run: another project's -n run, say nothing
        return
    state.progress = ControllerProgress(tr, config, state, run_dir, live=is_terminal(tr))
    state.progress.thread.start()


def stop_progress(state: PluginState) -> None:
    """End the -n progress display, if one runs: no progress is drawn after this point."""
    state.stop.set()
    if state.progress is not None:
        state.progress.stop()


def hold_terminal(state: PluginState) -> Any:
    """The terminal's lock while the controller's progress thread runs (its writes and pytest's
    never interleave; pytest's line state is not changed under it), else nothing to hold."""
    return contextlib.nullcontext() if state.progress is None else state.terminal_lock


def fresh_line(tr: Any) -> None:
    """End the line of test results (``-q`` dots, the ``[100%]`` counter) before the plugin's own
    lines at the end of the run: ``write_line`` starts a new line only after a file's header."""
    tw = getattr(tr, "_tw", None)
    if tw is not None and int(getattr(tw, "width_of_current_line", 0) or 0):
        tw.line()
        tr.currentfspath = None
