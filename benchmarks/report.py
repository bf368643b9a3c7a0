"""Report benchmark: size and render time of the report of a ~900-request run; prints a table.

Builds a small synthetic set, runs the three suites against sim:looping with settings that
make about 900 model requests (890 on 2026-12-01), then renders the report from the run log alone ``--repeats`` times (the median) and checks that
every render gives the same page. ``--log RUN_JSONL`` times the same
on a run log you have (e.g. the main job's, ``.posbias/runs/<run>/run.jsonl``) instead.

Run: python benchmarks/report.py [--repeats 3] [--log RUN_JSONL]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias.engine import gc_paused
from pytest_posbias.report.render import render
from pytest_posbias.video.synthetic import build_set

ROOT = Path(__file__).resolve().parent.parent


def _render_s(log: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    with gc_paused():  # as at the end of a run (session.finish_run)
        html = render([log], rendered_at="benchmark")
    return time.perf_counter() - t0, html


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--log", type=Path, help="time the render of this run.jsonl instead of a run made here")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.log is not None and not args.log.is_file():
        ap.error(f"--log: no file {args.log}")
    if args.log is not None:
        _time_renders(args.log, args.repeats, run_s=None)
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        manifest = build_set(tmp / "set", videos_per_config=6, groups_per_config=6)
        (tmp / "suites").mkdir()
        for f in ("conftest.py", "test_positional.py", "test_phase_order.py", "test_stressors.py"):
            shutil.copy(ROOT / "suites" / f, tmp / "suites" / f)
        (tmp / "pyproject.toml").write_text(f"""
[tool.pytest.ini_options]
testpaths = ["suites"]
[tool.posbias]
data = "{manifest}"
cache = ".posbias"
[tool.posbias.probes.positional]
groups = 6
[tool.posbias.probes.phase]
items = 6
orderings = 2
samplers = ["left", "midpoint"]
[tool.posbias.probes.stressor]
videos = 5
trials = 2
""")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-m", "not slow", "--posbias-model", "sim:looping", "-q", "-p", "no:randomly",
                        "-p", "no:cacheprovider"], cwd=tmp, capture_output=True, text=True, check=False)
        run_s = time.perf_counter() - t0
        [log] = list((tmp / ".posbias" / "runs").glob("*/run.jsonl"))
        _time_renders(log, args.repeats, run_s=run_s)


def _time_renders(log: Path, repeats: int, *, run_s: float | None) -> None:
    """Render ``log`` ``repeats`` times after a first render (matplotlib and the template loaded)
    and print the table (medians)."""
    n_req = sum(1 for line in log.read_text().splitlines() if '"kind": "request"' in line)
    _render_s(log)  # first use: matplotlib and the template, in this process
    times: list[float] = []
    pages = set()
    for _ in range(repeats):
        t, html = _render_s(log)
        times.append(t)
        pages.add(html)
    render_s = statistics.median(times)
    size = len(html.encode())
    print(f"{'measure':<34} {'value':>12} {'limit':>10}")
    print(f"{'request records in the run log':<34} {n_req:>12d} {'~900' if run_s is not None else '':>10}")
    print(f"{'run log size':<34} {log.stat().st_size / 1e6:>10.2f} MB {'':>10}")
    if run_s is not None:
        print(f"{'suite run (sim, wall)':<34} {run_s:>10.1f} s {'':>10}")
    print(f"{'report render':<34} {render_s:>10.2f} s {'10 s':>10}")
    print(f"{'same page every render':<34} {'yes' if len(pages) == 1 else 'NO':>12}")
    print(f"{'report size':<34} {size / 1e6:>10.2f} MB {'5 MB':>10}")
    print(f"{'render time / limit':<34} {render_s / 10:>12.3f}")
    print(f"{'size / limit':<34} {size / 5e6:>12.3f}")


if __name__ == "__main__":
    main()
