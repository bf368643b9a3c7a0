"""Serial vs ``pytest -n N`` on the suites with a simulated model: prints a table.

For each job (``dpb``: ``-m "dpb and not slow"``; ``main``: ``-m "not slow"``, the default quick
gate set) the script runs ``pytest suites`` in this repository serially and with ``-n N`` (xdist's
default invocation: the plugin schedules by probe group), each run on a fresh generation cache in a
temporary folder (the synthetic set in ``fixtures/`` is built once first and reused, as in a
checkout), the two modes back to back, ``--repeats`` times. Columns: median wall time of each mode,
the speed-up (serial / -n N), the CPU seconds of all processes (user + sys; what -n N adds over
serial is work done twice or start-up paid per worker), the model calls made, and whether the
verdicts (node id, pass/fail, estimate, CI, n, p, p_BH) of every -n run equal the serial run's.
The two modes alternate which goes first (serial, -n, -n, serial, ...), so that a machine speeding up
or slowing down during the runs does not favour one mode; the speed-up is given both as the ratio of
the medians and as the median of the per-pair ratios (each pair measured back to back).

``--bytecode`` sets how the pytest processes get their bytecode. ``cached`` (default): Python's
default, a bytecode cache (here under a ``PYTHONPYCACHEPREFIX``, warmed by one short run before the
clock), as ``scripts/env.sh`` sets up for the project's commands and as any pip-installed package has.
``env``: whatever the calling environment says; where it sets ``PYTHONDONTWRITEBYTECODE`` (this
project's containers do), every process compiles this package and redoes pytest's assertion
rewriting of the plugins' modules (about 2 s of CPU per process here), and ``-n N`` starts N + 1
processes against serial's one.

The machine is shared: run it under the project's CPU lock so that other heavy jobs queue,
``flock /tmp/posbias-cpu.lock python benchmarks/xdist.py``; the README's numbers come from it.

Run: python benchmarks/xdist.py [--model sim:primacy] [--jobs dpb,main] [--workers 2] [--repeats 2]
     [--bytecode cached|env]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JOBS = {"dpb": "dpb and not slow", "main": "not slow"}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_job(marker: str, model: str, workers: int, tmp: Path, tag: str, env: dict[str, str],
            extra: tuple[str, ...] = (), allow_empty: bool = False) -> dict[str, Any]:
    """One ``pytest suites -m MARKER`` run on a fresh cache; wall and CPU seconds, calls, verdicts.
    Stops the benchmark when pytest exits other than 0/1 (5, no test selected, only where
    ``allow_empty``: a timed job that selects nothing is an error, not a run of 0 gates)."""
    cache = tmp / f"cache-{tag}"
    out_json = tmp / f"{tag}.json"
    cmd = [sys.executable, "-m", "pytest", "suites", "-m", marker, "--posbias-model", model, "-q", "-p", "no:randomly",
           "-p", "no:cacheprovider", f"--posbias-cache={cache}", f"--posbias-json={out_json}",
           f"--posbias-report={tmp / (tag + '.html')}"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    cmd += list(extra)
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode not in ((0, 1, 5) if allow_empty else (0, 1)) or not out_json.is_file():
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    m = re.search(r"model calls: (\d+) made", proc.stdout)
    data = json.loads(out_json.read_text())
    verdicts = [(v["nodeid"], v["passed"], v["estimate"], v["ci_low"], v["ci_high"], v["n"], v["p_value"], v["p_bh"])
                for v in data["verdicts"]]
    return {"wall": wall, "cpu": cpu, "made": int(m.group(1)) if m else -1, "verdicts": verdicts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="sim:primacy")
    ap.add_argument("--jobs", default="dpb,main", help=f"comma-separated, from {', '.join(JOBS)}")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--bytecode", choices=("cached", "env"), default="cached",
                    help="cached: a warmed bytecode cache (Python's default); env: the calling environment's setting")
    args = ap.parse_args()
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    bad = [j for j in jobs if j not in JOBS]
    if bad or args.workers < 2 or args.repeats < 1:
        raise SystemExit(f"--jobs from {sorted(JOBS)} (got {bad}), --workers >= 2, --repeats >= 1")
    from pytest_posbias.session import synthetic_manifest

    synthetic_manifest(ROOT)  # built once (as in a checkout), outside the timed runs
    rows = []
    with tempfile.TemporaryDirectory(prefix="posbias-xdist-") as d:
        tmp = Path(d)
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        if args.bytecode == "cached":
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env.setdefault("PYTHONPYCACHEPREFIX", str(tmp / "pycache"))
            for w in (1, args.workers):  # warm the cache: every module a run imports, report included
                run_job("order", args.model, w, tmp, f"warm-up-{w}", env, ("-k", "test_order_flip"), allow_empty=True)
        bytecode = ("PYTHONDONTWRITEBYTECODE=1: no bytecode cache" if env.get("PYTHONDONTWRITEBYTECODE")
                    else f"bytecode cache {env.get('PYTHONPYCACHEPREFIX') or 'beside the sources'}")
        pair_ratios: dict[str, list[float]] = {}
        for job in jobs:
            got: dict[str, list[dict[str, Any]]] = {"serial": [], "xdist": []}
            for i in range(args.repeats):
                order = (("serial", 1), ("xdist", args.workers))
                for mode, w in (order if i % 2 == 0 else order[::-1]):
                    r = run_job(JOBS[job], args.model, w, tmp, f"{job}-{mode}-{i}", env)
                    got[mode].append(r)
                    print(f"  {job:5s} {mode:6s} run {i + 1}: {r['wall']:6.1f} s wall, {r['cpu']:6.1f} s CPU, "
                          f"{r['made']} calls made", file=sys.stderr, flush=True)
            pair_ratios[job] = [s["wall"] / x["wall"] for s, x in zip(got["serial"], got["xdist"], strict=True)]
            s_wall = statistics.median(r["wall"] for r in got["serial"])
            x_wall = statistics.median(r["wall"] for r in got["xdist"])
            same = all(r["verdicts"] == got["serial"][0]["verdicts"] for r in got["serial"] + got["xdist"])
            rows.append({"job": job, "tests": len(got["serial"][0]["verdicts"]), "serial": s_wall, "xdist": x_wall,
                         "speedup": s_wall / x_wall, "pairs": statistics.median(pair_ratios[job]), "cpu_s": statistics.median(r["cpu"] for r in got["serial"]),
                         "cpu_x": statistics.median(r["cpu"] for r in got["xdist"]),
                         "made_s": got["serial"][0]["made"], "made_x": got["xdist"][0]["made"], "same": same})
    n = args.workers
    print(f"\nmodel {args.model}, {os.cpu_count()} CPUs, {args.repeats} repeat(s), median wall time, fresh generation "
          f"caches, {bytecode}")
    head = (f"{'job':5s} {'gates':>5s} {'serial s':>9s} {f'-n {n} s':>8s} {'speed-up':>8s} {'pairs':>6s} {'CPU serial':>10s} "
            f"{f'CPU -n {n}':>9s} {'calls serial':>12s} {f'calls -n {n}':>11s} {'same verdicts':>13s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['job']:5s} {r['tests']:5d} {r['serial']:9.1f} {r['xdist']:8.1f} {r['speedup']:7.2f}x {r['pairs']:5.2f}x "
              f"{r['cpu_s']:10.1f} {r['cpu_x']:9.1f} {r['made_s']:12d} {r['made_x']:11d} {'yes' if r['same'] else 'NO':>13s}")
    for job, ratios in pair_ratios.items():
        print(f"{job}: per-pair speed-ups {', '.join(f'{x:.2f}x' for x in ratios)}")


if __name__ == "__main__":
    main()
