"""The model-call progress bar: redrawn in place on a terminal, plain periodic lines in a CI log."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from support.suite_project import write_suite_project

SETTINGS = "\n[tool.posbias.probes.phase]\nitems = 8\norderings = 4\n"
# each call sleeps 0.1 s, two calls a batch: the option-order probe's 32 calls take about 3 s, past the 2 s a probe runs
# before it shows progress
ARGS = ["-m", "pytest", "-m", "option_order", "-p", "no:randomly", "-p", "no:cacheprovider",
        "--posbias-model", "sim:unbiased,latency=0.1", "--posbias-batch-size", "2", "--posbias-fixed"]


def _on_a_terminal(cwd: Path, args: list[str] = ARGS) -> tuple[int, str]:
    """Run pytest with its stdout on a pseudo-terminal; the exit status and everything it wrote."""
    parent, child = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, stdout=child, stderr=child, stdin=subprocess.DEVNULL,
                            env=env)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(parent, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(parent)
    return proc.wait(timeout=300), b"".join(chunks).decode("utf-8", "replace")


def test_progress_is_one_bar_redrawn_in_place_on_a_terminal_and_plain_lines_in_a_log(small_set, tmp_path):
    project = tmp_path / "project"
    write_suite_project(project, small_set, ("test_phase_order.py",), SETTINGS, model=None)
    code, out = _on_a_terminal(project)
    assert code == 0, out[-3000:]
    draws = re.findall(r"\r\[posbias\] \[([#-]{24})\] model calls (\d+)/(\d+)", out)
    assert len(draws) >= 2, out[-3000:]  # redrawn, not printed once
    assert "\x1b[K" in out  # each redraw erases what the longer one before it left
    bars, done, total = zip(*draws, strict=True)
    assert [int(d) for d in done] == sorted(int(d) for d in done) and done[-1] == total[-1]
    assert bars[-1] == "#" * 24
    # the bar's line is ended before pytest goes on: the result letters are not glued to it
    assert not re.search(r"ETA[^\n]*\x1b\[K[.FEs]", out), out[-3000:]
    # in a log (no terminal): no carriage return, no bar; the same calls as plain lines
    log = subprocess.run([sys.executable, *ARGS, f"--posbias-cache={tmp_path / 'fresh'}"], cwd=project,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert log.returncode == 0, log.stdout[-3000:]
    assert "\r" not in log.stdout and "[#" not in log.stdout
    assert re.search(r"^\[posbias\] model calls \d+/32 ", log.stdout, re.M), log.stdout[-3000:]


BAR = re.compile(r"\[posbias\] \[[#-]{24}\]")
_SEQ = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\r|\n|[^\x1b\r\n]+", re.S)


def _screen(out: str) -> tuple[list[str], int]:
    """What a terminal shows after ``out``: its lines (colours dropped), and the most lines that held
    a progress bar at once. Understands the sequences pytest and the plugin write: carriage return,
    new line, erase to the end of the line (ESC[K), cursor up (ESC[A), cursor to a column (ESC[nG)
    and colours (ESC[...m); any other sequence fails the test."""
    rows, row, col, most = [[]], 0, 0, 0

    def put(text: str) -> None:
        nonlocal col
        line = rows[row]
        line.extend(" " * (col - len(line)))
        line[col:col + len(text)] = list(text)
        col += len(text)

    for m in _SEQ.finditer(out):
        tok = m.group(0)
        if tok == "\r":
            col = 0
        elif tok == "\n":
            row, col = row + 1, 0
            if row == len(rows):
                rows.append([])
        elif m.group(2) is not None:
            arg, cmd = m.group(1), m.group(2)
            if cmd == "K":
                del rows[row][col:]
                most = max(most, sum(bool(BAR.search("".join(r))) for r in rows))
            elif cmd == "A":
                row = max(0, row - int(arg or 1))
            elif cmd == "G":
                col = int(arg or 1) - 1
            else:
                assert cmd == "m", f"unexpected control sequence {tok!r}"
        else:
            put(tok)
    return ["".join(r).rstrip() for r in rows], most


def test_under_xdist_the_controller_redraws_one_bar_in_place_and_leaves_results_intact(small_set, tmp_path):
    project = tmp_path / "project"
    write_suite_project(project, small_set, ("test_phase_order.py",), SETTINGS, model=None)
    args = [*ARGS, "-n", "2", "--posbias-model", "sim:unbiased,latency=0.2"]
    code, out = _on_a_terminal(project, args)
    assert code == 0, out[-3000:]
    draws = re.findall(r"\r\[posbias\] \[[#-]{24}\] (\d+)/(\d+) tests", out)
    assert len(draws) >= 2, out[-3000:]  # redrawn in place, not printed once
    assert re.search(r"\[posbias\] \[[#-]{24}\] \d+/\d+ tests · model calls \d+/\d+ \(\d+%\), [0-9.]+/s, ETA", out), \
        out[-3000:]
    screen, most = _screen(out)
    assert most == 1, out[-3000:]  # one bar line at a time
    assert not any(BAR.search(line) or "[posbias] [" in line for line in screen), screen  # taken off at the end
    letters = [line for line in screen if re.fullmatch(r"[.FEsx]+ +\[100%\]", line)]
    n_tests = int(re.search(r"(\d+) passed", out).group(1))
    assert len(letters) == 1 and letters[0].count(".") == n_tests, screen  # the result letters on one clean line
    assert re.fullmatch(r"=+ \d+ passed in [0-9.]+s( \(\d+:\d+:\d+\))? =+", screen[-1].strip() or screen[-2].strip()), \
        screen[-5:]
    assert any(line.startswith("model calls: ") for line in screen), screen  # the plugin's calls line, intact
    # in a log (no terminal): plain lines, no control sequence at all
    log = subprocess.run([sys.executable, *args, f"--posbias-cache={tmp_path / 'fresh'}"], cwd=project,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert log.returncode == 0, log.stdout[-3000:]
    assert "\r" not in log.stdout and "\x1b" not in log.stdout and "[#" not in log.stdout, log.stdout[-3000:]
    assert re.search(r"^\[posbias\] \d+/\d+ tests · gw\d: model calls \d+/32 ", log.stdout, re.M), log.stdout[-3000:]


GUEST_CONFTEST = """
import threading


def pytest_sessionfinish(session):
    if getattr(session.config, "workerinput", None) is None:
        names = sorted(t.name for t in threading.enumerate())
        (session.config.rootpath / "threads.txt").write_text("\\n".join(names))
"""


def test_in_an_unrelated_project_under_xdist_nothing_is_drawn_and_no_thread_starts(tmp_path):
    project = tmp_path / "guest"
    project.mkdir()
    (project / "conftest.py").write_text(GUEST_CONFTEST)
    (project / "test_other.py").write_text("import time\nimport pytest\n\n\n@pytest.mark.parametrize('k', range(4))\n"
                                           "def test_slow(k):\n    time.sleep(1.5)\n")
    code, out = _on_a_terminal(project, ["-m", "pytest", "-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider"])
    assert code == 0, out[-3000:]
    assert "posbias" in out.split("plugins:", 1)[1].splitlines()[0], out[:2000]  # the plugin was loaded
    assert "[posbias]" not in out and "\x1b[K" not in out and "\x1b[A" not in out, out[-3000:]
    threads = (project / "threads.txt").read_text().split("\n")
    assert "posbias-progress" not in threads and threads, threads
    assert not (project / ".posbias").exists()


def test_shared_terminal_puts_the_bar_below_pytests_line_and_takes_it_off_before_pytest_writes():
    import io
    import threading

    from pytest_posbias.plugin.terminal import SharedTerminal

    raw = io.StringIO()
    term = SharedTerminal(raw, threading.RLock())
    term.write("\x1b[32m.\x1b[0m\x1b[32m.\x1b[0m")  # two result letters, coloured: column 2
    assert term.col == 2
    term.draw("[posbias] [" + "#" * 24 + "] 1/4 tests", 80)  # below pytest's line
    term.draw("[posbias] [" + "#" * 24 + "] 2/4 tests", 80)  # redrawn in place
    term.write("F")
    term.draw("[posbias] [" + "#" * 24 + "] 3/4 tests", 80)
    term.write("   [100%]\n")
    term.draw("[posbias] [" + "#" * 24 + "] 4/4 tests", 80)  # pytest's line is empty: the bar takes it
    term.erase()
    term.write("== 1 failed, 2 passed ==\n")
    screen, most = _screen(raw.getvalue())
    assert most == 1
    assert screen == ["..F   [100%]", "== 1 failed, 2 passed ==", ""]
    assert raw.getvalue().count("\r[posbias]") == 4
    term.write("x" * 79)  # a line as wide as the terminal: no bar (the line below it is not known)
    term.draw("[posbias] [" + "#" * 24 + "] 4/4 tests", 80)
    assert not term.shown


def test_the_controllers_progress_sums_the_workers_probes(tmp_path):
    from pytest_posbias.plugin.terminal import combined_progress

    (tmp_path / "progress-gw0.txt").write_text("model calls 30/120 (25%), 2.5/s, ETA 36 s")
    (tmp_path / "progress-gw1.txt").write_text("model calls 60/60 (100%), 4/s, ETA 0 s")
    (tmp_path / "progress-gw2.txt").write_text("loading the judge")
    share, text = combined_progress(tmp_path, tests_done=3, tests_planned=10)
    assert text == "3/10 tests · model calls 90/180 (50%), 6.5/s, ETA 36 s (2 workers)"
    assert share == (3 + 30 / 120) / 10  # a finished probe's test counts once it reported
    assert combined_progress(tmp_path / "none", tests_done=0, tests_planned=0) == (0.0, "0 tests done")
