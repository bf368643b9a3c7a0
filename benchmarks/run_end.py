"""The end of a run on one core: merging the workers' logs and rendering the report.

Given the run directory of an ``-n N`` run (``<cache>/runs/<run id>``, which keeps the workers'
``log-*.jsonl`` after the merge), the script times, in this process:

* ``merge, whole``: :func:`~pytest_posbias.run_merge.merge_run_log_lines` on the finished logs
  (what a serial run, and the controller before 2026-12-01, did at the end);
* ``merge, followed``: a :class:`~pytest_posbias.run_merge.RunLogFollower` that polled the logs
  while they grew (here: the files are replayed in ``--chunks`` appends, each followed by a poll,
  into a temporary directory, as the controller's thread polls them every 2 s), then merged: the
  time of the polls (during the run, on CPU the workers leave idle) and of the final merge (at
  the end). The two merges must give the same records;
* ``render, gc on`` and ``render, gc off``: the report rendered from the merged records with the
  cyclic garbage collector as the process left it after the merge, and paused (``finish_run``
  renders with it paused).

Each step runs in a fresh interpreter (``--repeats`` times; the table gives the median), so that
imports and first-use costs count as they do at the end of a run.

Run: python benchmarks/run_end.py RUN_DIR [--chunks 60] [--repeats 3]
e.g. pytest suites -m "not slow" --model sim:primacy -n 2 --posbias-cache=/tmp/c, then
python benchmarks/run_end.py /tmp/c/runs/<run id>
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

STEP = r'''
import gc, json, shutil, sys, tempfile, time
from pathlib import Path
from pytest_posbias.engine import gc_paused
from pytest_posbias.run_merge import RunLogFollower, merge_run_log_lines
from pytest_posbias.report import render
run_dir, step, chunks = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
render.report_template()  # compiled during the run on the controller (its warm-up thread)
out = {}
if step == "merge-whole":
    t = time.perf_counter()
    with gc_paused():
        header, pairs = merge_run_log_lines(run_dir)
    out["end"] = time.perf_counter() - t
elif step == "merge-followed":
    logs = {p.name: p.read_bytes() for p in sorted(run_dir.glob("log-*.jsonl"))}
    with tempfile.TemporaryDirectory() as d:
        follower, polls = RunLogFollower(Path(d)), 0.0
        for k in range(chunks):
            for name, data in logs.items():
                a, b = len(data) * k // chunks, len(data) * (k + 1) // chunks
                with (Path(d) / name).open("ab") as fh:
                    fh.write(data[a:b])
            t = time.perf_counter()
            with gc_paused():
                follower.poll()
            gc.freeze()
            polls += time.perf_counter() - t
        t = time.perf_counter()
        with gc_paused():
            header, pairs = follower.merge()
        out["end"] = time.perf_counter() - t
        out["during"] = polls
        with gc_paused():
            same = (header, pairs) == merge_run_log_lines(Path(d))
        out["same"] = same
        gc.unfreeze()
else:
    with gc_paused():
        header, pairs = merge_run_log_lines(run_dir)
    verdicts = []
    runlog = run_dir / "run.jsonl"
    if runlog.is_file():
        verdicts = [json.loads(l) for l in runlog.open(encoding="utf-8") if '"kind": "verdict"' in l]
    path = run_dir / "run.jsonl"
    loaded = {path: (header, [r for r, _ in pairs] + verdicts)}
    t = time.perf_counter()
    if step == "render-gc-off":
        with gc_paused():
            render.render([path], loaded=loaded)
    else:
        render.render([path], loaded=loaded)
    out["end"] = time.perf_counter() - t
print(json.dumps(out))
'''

STEPS = {"merge-whole": "merge, whole", "merge-followed": "merge, followed", "render-gc-on": "render, gc on",
         "render-gc-off": "render, gc off"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--chunks", type=int, default=60, help="appends (and polls) the followed merge replays the logs in")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    logs = sorted(args.run_dir.glob("log-*.jsonl"))
    if not logs:
        raise SystemExit(f"{args.run_dir}: no log-*.jsonl (give the run directory of a run: <cache>/runs/<run id>)")
    if args.chunks < 1 or args.repeats < 1:
        raise SystemExit("--chunks and --repeats must be at least 1")
    size = sum(p.stat().st_size for p in logs)
    lines = sum(1 for p in logs for _ in p.open("rb"))
    print(f"{args.run_dir}: {len(logs)} worker logs, {lines} lines, {size / 1e6:.1f} MB; median of {args.repeats} runs")
    print(f"{'step':18s} {'at the end s':>13s} {'during the run s':>17s}  same records")
    print("-" * 64)
    for step, label in STEPS.items():
        results = []
        for _ in range(args.repeats):
            proc = subprocess.run([sys.executable, "-c", STEP, str(args.run_dir), step, str(args.chunks)],
                                  capture_output=True, text=True, check=False)
            if proc.returncode:
                raise SystemExit(f"{step} failed:\n{proc.stderr[-3000:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        end = statistics.median(r["end"] for r in results)
        during = statistics.median(r["during"] for r in results) if "during" in results[0] else None
        same = "yes" if all(r.get("same") for r in results) else "NO" if "same" in results[0] else ""
        print(f"{label:18s} {end:13.2f} {'' if during is None else f'{during:17.2f}':>17s}  {same}")


if __name__ == "__main__":
    main()
