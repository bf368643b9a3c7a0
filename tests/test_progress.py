"""The model-call progress bar: redrawn in place on a terminal, plain periodic lines in a CI log."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from suite_project import write_suite_project

SETTINGS = "\n[tool.posbias.probes.phase]\nitems = 8\norderings = 4\n"
# each call sleeps 0.1 s, two calls a batch: the option-order probe's 32 calls take about 3 s, past the 2 s a probe runs
# before it shows progress
ARGS = ["-m", "pytest", "-m", "option_order", "-p", "no:randomly", "-p", "no:cacheprovider",
        "--posbias-model", "sim:unbiased,latency=0.1", "--posbias-batch-size", "2", "--posbias-fixed"]


def _on_a_terminal(cwd: Path) -> tuple[int, str]:
    """Run pytest with its stdout on a pseudo-terminal; the exit status and everything it wrote."""
    parent, child = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, *ARGS], cwd=cwd, stdout=child, stderr=child, stdin=subprocess.DEVNULL,
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
