"""``plugin.terminal``: the controller's combined ``-n`` progress (hand-worked shares and sums over
the workers' progress files), the shared terminal whose bar never changes what pytest's own
output shows (checked on a small terminal emulator), and when progress is shown at all."""

from __future__ import annotations

import io
import re
import threading
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_posbias.plugin.state import plugin_of
from pytest_posbias.plugin.terminal import (
    SharedTerminal,
    combined_progress,
    fresh_line,
    hold_terminal,
    is_terminal,
    maybe_start_controller_progress,
    progress_writer,
)
from pytest_posbias.report.summary import progress_file, progress_text, write_progress


def test_combined_progress_sums_the_workers_and_takes_the_longest_eta(tmp_path):
    """Two workers at 30/60 calls (15 s: 2/s) and 10/40 (10 s: 1/s), 1 of 4 tests done: share
    (1 + 30/60 + 10/40) / 4 = 0.4375; 40/100 calls (40%), 3/s together, ETA max(30/2, 30/1) = 30 s."""
    write_progress(progress_file(tmp_path, "gw0"), progress_text(30, 60, 0, 15.0))
    write_progress(progress_file(tmp_path, "gw1"), progress_text(10, 40, 0, 10.0))
    share, text = combined_progress(tmp_path, tests_done=1, tests_planned=4)
    assert share == 0.4375
    assert text == "1/4 tests · model calls 40/100 (40%), 3/s, ETA 30 s (2 workers)"


def test_a_finished_probe_adds_calls_but_no_running_share_and_a_garbled_file_is_ignored(tmp_path):
    """A worker whose probe made all its calls counts them, not a share on top of its test's (its
    test is counted when it reports); a file that is not a progress line is left out."""
    write_progress(progress_file(tmp_path, "gw0"), progress_text(20, 20, 0, 10.0))
    write_progress(progress_file(tmp_path, "gw1"), "setting up the run")
    share, text = combined_progress(tmp_path, tests_done=2, tests_planned=8)
    assert share == 2 / 8
    assert text.startswith("2/8 tests · model calls 20/20 (100%), 2/s, ETA 0 s (1 worker)")


def test_without_worker_progress_the_line_counts_tests_only(tmp_path):
    """No progress file yet: the text is the test count, the share tests done / planned (capped at 1)."""
    assert combined_progress(tmp_path, tests_done=3, tests_planned=4) == (0.75, "3/4 tests")
    assert combined_progress(tmp_path, tests_done=5, tests_planned=0) == (0.0, "5 tests done")


_SEQ = re.compile(r"\x1b\[(\d*)([A-Za-z])|(.)", re.S)


def _screen(stream: str) -> list[str]:
    """What a terminal shows after ``stream`` (``\\n`` moves to the next line's start, as a tty's
    output translation does; ESC[K, ESC[A and ESC[<col>G as a VT100), trailing blank lines dropped."""
    lines, row, col = [""], 0, 0
    for m in _SEQ.finditer(stream):
        n, code, ch = m.groups()
        if code == "K":
            lines[row] = lines[row][:col]
        elif code == "A":
            row = max(0, row - 1)
        elif code == "G":
            col = int(n or 1) - 1
        elif ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif ch is not None:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + ch + line[col + 1:]
            col += 1
    while len(lines) > 1 and not lines[-1]:
        lines.pop()
    return lines


_TEXT = st.text(alphabet="abc.F[]% \n", min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_TEXT, st.just(None)), max_size=12))
def test_the_progress_bar_never_changes_what_pytest_wrote(ops):
    """Any interleaving of pytest's writes (text, None: the progress thread draws its bar): while the
    bar is up it shows on the screen, and once it is erased the screen is exactly pytest's output alone."""
    out = io.StringIO()
    term = SharedTerminal(out, threading.RLock())
    for k, op in enumerate(ops):
        if op is None:
            bar = f"[posbias] bar {k}"
            term.draw(bar, 200)
            assert bar in _screen(out.getvalue())
        else:
            term.write(op)
    term.erase()
    pytest_only = "".join(op for op in ops if op is not None)
    assert _screen(out.getvalue()) == _screen(pytest_only)


def test_the_bar_is_not_drawn_over_a_full_line():
    """Once pytest's line reaches the terminal's width the next line is unknown: no bar is drawn."""
    out = io.StringIO()
    term = SharedTerminal(out, threading.RLock())
    term.write("." * 79)
    term.draw("[posbias] bar", 80)
    assert out.getvalue() == "." * 79 and not term.shown


class _File(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_only_a_tty_that_is_not_dumb_is_a_terminal(monkeypatch):
    """is_terminal: a CI log (no tty) gets plain lines; so does TERM=dumb; a closed file is not one."""
    def tr(f):
        return SimpleNamespace(_tw=SimpleNamespace(_file=f))

    monkeypatch.setenv("TERM", "xterm")
    assert is_terminal(tr(_File(True))) and not is_terminal(tr(_File(False)))
    assert not is_terminal(SimpleNamespace())  # no terminal writer at all
    monkeypatch.setenv("TERM", "dumb")
    assert not is_terminal(tr(_File(True)))


def test_fresh_line_ends_only_a_started_line():
    """fresh_line: after -q dots the line is ended and pytest's file prefix forgotten; at a line start nothing."""
    ended: list[int] = []
    tw = SimpleNamespace(width_of_current_line=7, line=lambda: ended.append(1))
    tr = SimpleNamespace(_tw=tw, currentfspath="t.py")
    fresh_line(tr)
    assert ended == [1] and tr.currentfspath is None
    tw.width_of_current_line, tr.currentfspath = 0, "t.py"
    fresh_line(tr)
    assert ended == [1] and tr.currentfspath == "t.py"


def test_the_terminal_is_held_only_while_the_controllers_progress_runs(fake_config):
    """hold_terminal: nothing to hold in a serial run; the state's lock once -n progress runs."""
    state = plugin_of(fake_config())
    with hold_terminal(state) as held:
        assert held is None
    state.progress = object()  # type: ignore[assignment]
    assert hold_terminal(state) is state.terminal_lock


def test_a_quiet_run_gets_no_progress_and_a_worker_writes_its_progress_file(fake_config, tmp_path):
    """progress_writer: None under -q; on an xdist worker a callback writing the worker's file, which
    the controller's combined_progress reads back."""
    assert progress_writer(fake_config({"verbose": -1})) is None
    config = fake_config(run_id="r3", workerinput={"workerid": "gw2"})
    write = progress_writer(config)
    write(progress_text(6, 12, 0, 3.0))
    run_dir = tmp_path / ".posbias" / "runs" / "r3"
    assert (run_dir / "progress-gw2.txt").is_file()
    assert combined_progress(run_dir, tests_done=0, tests_planned=2)[1].endswith("6/12 (50%), 2/s, ETA 3 s (1 worker)")


def test_controller_progress_starts_only_for_an_n_run_that_set_a_run_up(fake_config, tmp_path):
    """maybe_start_controller_progress: not serially, not under -q, not before a run folder exists
    (another project's -n run); no thread is left running by these calls."""
    tr = SimpleNamespace(_tw=SimpleNamespace(_file=io.StringIO(), fullwidth=80))
    cases = [fake_config(plugins={"terminalreporter": tr}),  # serial
             fake_config({"verbose": -1}, plugins={"terminalreporter": tr}, dist="load"),  # -q
             fake_config(plugins={"terminalreporter": tr}, dist="load")]  # no run folder yet
    for config in cases:
        maybe_start_controller_progress(config, plugin_of(config))
        assert plugin_of(config).progress is None
    assert not any(t.name == "posbias-progress" for t in threading.enumerate())


class _Writer:
    """A terminal writer as LiveLine uses it: raw writes, line(), the current line's width, the screen's width."""

    def __init__(self, fullwidth: int = 80) -> None:
        self.out = ""
        self.fullwidth = fullwidth

    @property
    def width_of_current_line(self) -> int:
        return len(re.split(r"[\r\n]", self.out)[-1])

    def write_raw(self, text: str, *, flush: bool = False) -> None:
        self.out += text

    def line(self) -> None:
        self.out += "\n"


def test_the_live_line_is_redrawn_in_place_below_pytests_letters(fake_config):
    """LiveLine: the bar starts on a fresh line after the result letters, each update replaces the
    last, the final one ends the line, and pytest's file prefix is restored (no repeated header)."""
    from pytest_posbias.plugin.terminal import LiveLine

    tw = _Writer()
    tw.out = "test_a.py .."
    tr = SimpleNamespace(_tw=tw, currentfspath="test_a.py")
    live = LiveLine(tr, fake_config())
    for k in (1, 2):
        live.draw(f"[posbias] model calls {k}/3", final=False)
    tr.currentfspath = None  # pytest forgets it while the line is open
    live.draw("[posbias] model calls 3/3", final=True)
    assert _screen(tw.out) == ["test_a.py ..", "[posbias] model calls 3/3"]
    assert tw.out.endswith("\n") and not live.open and tr.currentfspath == "test_a.py"


def test_the_live_line_is_cut_to_the_terminals_width(fake_config):
    """A bar longer than the terminal is cut to its width less one column (no wrap onto a second line)."""
    from pytest_posbias.plugin.terminal import LiveLine

    tw = _Writer(fullwidth=30)
    live = LiveLine(SimpleNamespace(_tw=tw, currentfspath=None), fake_config())
    live.draw("[posbias] " + "x" * 100, final=True)
    assert _screen(tw.out) == ["[posbias] " + "x" * 19]


def test_a_progress_line_quoting_data_is_inert_on_the_terminal_and_in_the_workers_file(fake_config, tmp_path):
    """A line the run prints through the progress writer (e.g. ``manifest: <item>: ... (skipped)`` naming a file
    from the data) shows control characters escaped: an escape sequence from a file name never reaches the
    terminal, serially or through an -n worker's progress file."""
    from support.terminal_lines import Lines

    evil = "manifest: clip\x1b[2J\x1b]0;pwned\x07.mp4: not a video (skipped)"
    tr = Lines()
    tr._tw = SimpleNamespace(_file=io.StringIO(), width_of_current_line=0)
    progress_writer(fake_config(plugins={"terminalreporter": tr}))(evil)
    assert tr.lines and "\x1b" not in tr.lines[-1] and "\x07" not in tr.lines[-1] and "\\x1b[2J" in tr.lines[-1]
    config = fake_config(run_id="r9", workerinput={"workerid": "gw0"})
    progress_writer(config)(evil)
    text = (tmp_path / ".posbias" / "runs" / "r9" / "progress-gw0.txt").read_text()
    assert "\x1b" not in text and "\\x1b[2J" in text
