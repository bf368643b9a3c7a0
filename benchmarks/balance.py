"""Load balance where the model calls are: wall time against the ideal, GPU-shaped calls on CPU.

Each model call takes a fixed wall time without using the CPU (a stand-in for a GPU-bound call),
so two cores can show how well the calls are spread, whatever the machine:

* ``main``: the main job (the three suites, ``-m "not slow"``; ``--sizes small``: small probe
  settings, a few minutes; ``--sizes default``: the suites' default sizes, what a release run makes,
  where start-up and the report weigh what they weigh on a runner) on
  ``sim:unbiased,latency=L`` under ``pytest -n W`` (the plugin's probe-group scheduler). A batch
  of B requests holds B × L (:mod:`pytest_posbias.models.sim`), so the run's total call time is
  ``made × L`` and the ideal wall time ``made × L / W``;
* ``openai``: the phase suite (larger phase settings: more calls, so start-up weighs less) on ``openai:x`` against W stub replicas
  (``benchmarks/openai_stub.py --one-at-a-time``: each answers one request at a time after L),
  serially, the backend's pool spreading the calls over the replicas (``--api-base`` repeated,
  ``--concurrency 2W``); the ideal is ``calls received × L / W``.

Both print wall time, the ideal and their ratio (target ≤ 1.2). The wall time is the whole
``pytest`` run (start-up, collection, report, and the simulator's own CPU work, which two cores
shared with other processes stretch), so the ratio also carries what is not a call. ``main`` also
prints the schedule's own bound: the calls made on the busiest worker × L (from the ``-v`` lines'
worker and each gate's calls in the JSON summary) against the ideal, the ratio the wall time
would have were the calls the only cost, and the time from the first test's start to the last
test's end (a root ``conftest.py`` in the run's project records each test's start, end and
worker), the wall time without start-up, collection and report (both printed: the seconds before
the first test started and after the last one ended), and the busiest worker's time in
tests against the mean over the workers: how evenly the schedule spread the time the tests took,
calls and CPU together (on two cores the CPU of some groups, which the call weights do not see,
decides which worker runs out first, so the calls per worker may differ where the time does not).
``CPU s`` is the CPU time (user + system) of pytest
and its workers: divided by the cores it is the wall time the run needs however its calls are
spread, so where it comes near the ideal the ratio says more about the machine than about the
balance. ``openai`` also prints the time from the first call a
replica received to the last answer it sent against the ideal (the stubs record both), and the
seconds before (start-up, collection, the data) and after (report, exit).
The coverage judge is ``fragment`` in both (the ``embed`` judge's torch work would be CPU time
on the two cores, not call time).

Run: python benchmarks/balance.py [--jobs main,openai] [--workers 4] [--latency 0.2] [--sizes small|default]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = """
[tool.posbias.probes.positional]
groups = 6
[tool.posbias.probes.phase]
items = 12
orderings = 2
samplers = ["left", "midpoint"]
[tool.posbias.probes.stressor]
videos = 8
trials = 2
"""


OPENAI_SETTINGS = """
[tool.posbias.probes.phase]
items = 48
orderings = 4
samplers = ["left", "midpoint"]
"""


def _project(tmp: Path, settings: str = SETTINGS) -> None:
    from pytest_posbias.run.context import synthetic_manifest

    manifest = synthetic_manifest(ROOT)  # built once, outside the timed runs
    (tmp / "suites").mkdir()
    for f in ("conftest.py", "test_positional.py", "test_phase_order.py", "test_stressors.py"):
        shutil.copy(ROOT / "suites" / f, tmp / "suites" / f)
    (tmp / "conftest.py").write_text(TIMING_CONFTEST)
    (tmp / "pyproject.toml").write_text(f'[tool.pytest.ini_options]\ntestpaths = ["suites"]\n\n[tool.posbias]\n'
                                        f'data = "{manifest}"\njudge = "fragment"\n{settings}')


# the project's root conftest: each test's start and end (wall clock) on its worker, one JSON line
# each, appended to the file $BALANCE_TIMES names (the whole run's tests, from every worker)
TIMING_CONFTEST = '''import json, os, time

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    t0 = time.time()
    yield
    path = os.environ.get("BALANCE_TIMES")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"nodeid": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                                "start": t0, "end": time.time()}) + "\\n")
'''


CPU_SECONDS: dict[str, float] = {}  # job tag -> CPU seconds (user + system) of pytest and its workers


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


LAUNCH: dict[str, tuple[float, float]] = {}  # job tag -> wall clock when pytest started and when it exited


def _pytest(tmp: Path, tag: str, args: list[str]) -> tuple[float, dict, str]:
    out = tmp / f"{tag}.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
           f"--posbias-cache={tmp / ('cache-' + tag)}", f"--posbias-json={out}", *args]
    t0 = time.perf_counter()
    c0 = _children_cpu()
    started = time.time()
    proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    LAUNCH[tag] = (started, time.time())
    CPU_SECONDS[tag] = _children_cpu() - c0
    if proc.returncode not in (0, 1, 6) or not out.is_file():
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, json.loads(out.read_text()), proc.stdout


def main_job(tmp: Path, workers: int, latency: float) -> tuple[float, float, int, float, float, float, float,
                                                                tuple[float, float]]:
    """Wall time, ideal, calls made, the busiest worker's call time, the seconds from the first
    test's start to the last test's end (the run without its start-up and report), the busiest
    worker's time in tests against the mean over the workers (both in seconds), and the seconds
    before the first test started and after the last one ended."""
    times = tmp / "times.jsonl"
    os.environ["BALANCE_TIMES"] = str(times)
    try:
        wall, data, stdout = _pytest(tmp, "main", ["suites", "-m", "not slow", "-v", "-v", "--posbias-model",
                                                   f"sim:unbiased,latency={latency}", "-n", str(workers)])
    finally:
        del os.environ["BALANCE_TIMES"]
    spans = [json.loads(line) for line in times.read_text(encoding="utf-8").splitlines()] if times.is_file() else []
    tests = max((t["end"] for t in spans), default=float("nan")) - min((t["start"] for t in spans), default=float("nan"))
    busy: dict[str, float] = {}
    for t in spans:
        busy[t["worker"]] = busy.get(t["worker"], 0.0) + t["end"] - t["start"]
    mean_busy = sum(busy.values()) / workers if busy else float("nan")
    made = int(data["calls"]["made"])
    worker_of = {m.group(2): m.group(1) for m in re.finditer(r"^\[(gw\d+)\] \[\s*\d+%\] \w+ (\S+)", stdout, re.M)}
    per_worker: dict[str, int] = {}
    for v in data["verdicts"]:
        calls = (v.get("extra") or {}).get("calls") or {}
        w = worker_of.get(v["nodeid"], "?")
        per_worker[w] = per_worker.get(w, 0) + int(calls.get("made", 0))
    started, ended = LAUNCH["main"]
    edges = (min((t["start"] for t in spans), default=float("nan")) - started,
             ended - max((t["end"] for t in spans), default=float("nan")))
    return (wall, made * latency / workers, made, max(per_worker.values(), default=0) * latency, tests,
            max(busy.values(), default=float("nan")), mean_busy, edges)


def openai_job(tmp: Path, workers: int, latency: float) -> tuple[float, float, int, float, float]:
    """Wall time, ideal, calls received, and the seconds before the first call reached a replica
    and after the last answer (start-up; report and exit)."""
    stub = ROOT / "benchmarks" / "openai_stub.py"
    procs = [subprocess.Popen([sys.executable, str(stub), "--latency", str(latency), "--one-at-a-time"],
                              stdout=subprocess.PIPE, text=True) for _ in range(workers)]
    try:
        urls = [p.stdout.readline().strip() for p in procs if p.stdout is not None]
        args = ["suites/test_phase_order.py", "-m", "not slow", "--posbias-model", "openai:x",
                "--posbias-concurrency", str(2 * workers)]
        for u in urls:
            args += ["--posbias-api-base", u]
        t0 = time.time()
        wall, _, _ = _pytest(tmp, "openai", args)
        t1 = time.time()
        received = 0
        first, last = [], []
        for u in urls:
            with urllib.request.urlopen(u.removesuffix("/v1") + "/stats", timeout=10) as r:
                st = json.loads(r.read())
            received += int(st["requests"])
            first += [st["first"]] if st.get("first") else []
            last += [st["last"]] if st.get("last") else []
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    before = min(first) - t0 if first else float("nan")
    after = t1 - max(last) if last else float("nan")
    return wall, received * latency / workers, received, before, after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="main,openai")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--sizes", choices=("small", "default"), default="small",
                    help="the main job's probe sizes: small settings, or the suites' defaults")
    args = ap.parse_args()
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    if any(j not in ("main", "openai") for j in jobs) or args.workers < 1 or args.latency <= 0:
        raise SystemExit("--jobs from main, openai; --workers >= 1; --latency > 0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cores = len(os.sched_getaffinity(0))
    print(f"{'job':<38} {'calls':>6} {'wall s':>8} {'ideal s':>8} {'ratio':>6} {'CPU s':>7}   (load average "
          f"{os.getloadavg()[0]:.1f} on {cores} cores at the start)")
    with tempfile.TemporaryDirectory() as d:
        for job in jobs:
            tmp = Path(d) / job
            tmp.mkdir()
            _project(tmp, OPENAI_SETTINGS if job == "openai" else SETTINGS if args.sizes == "small" else "")
            busiest = tests = busy = mean_busy = None
            edges = None
            if job == "main":
                wall, ideal, n, busiest, tests, busy, mean_busy, edges = main_job(tmp, args.workers, args.latency)
                label = f"main ({args.sizes}), -n {args.workers}, sim {args.latency:g} s/call"
            else:
                wall, ideal, n, before, after = openai_job(tmp, args.workers, args.latency)
                edges = (before, after)
                label = f"openai, {args.workers} replicas, {args.latency:g} s/call"
            print(f"{label:<38} {n:>6d} {wall:>8.1f} {ideal:>8.1f} {wall / ideal:>6.2f} {CPU_SECONDS[job]:>7.1f}",
                  flush=True)
            if busiest is not None and tests is not None:
                print(f"{'  first test start to last end':<38} {'':>6} {tests:>8.1f} {ideal:>8.1f} {tests / ideal:>6.2f}")
                print(f"{'  busiest worker, calls only':<38} {'':>6} {busiest:>8.1f} {ideal:>8.1f} {busiest / ideal:>6.2f}")
            if busy is not None and mean_busy is not None:
                print(f"{'  busiest worker in tests / mean':<38} {'':>6} {busy:>8.1f} {mean_busy:>8.1f} "
                      f"{busy / mean_busy:>6.2f}")
            if edges is not None and job == "main":
                print(f"  (before the first test started {edges[0]:.1f} s: start-up, collection on every worker; "
                      f"after the last test ended {edges[1]:.1f} s: run log, decision, report, exit)")
            elif edges is not None:
                between = wall - edges[0] - edges[1]
                print(f"{'  first call to last answer':<38} {'':>6} {between:>8.1f} {ideal:>8.1f} {between / ideal:>6.2f}")
                print(f"  (before the first call {edges[0]:.1f} s: start-up, collection, data; after the last answer "
                      f"{edges[1]:.1f} s: report, exit)")


if __name__ == "__main__":
    main()
