"""First run vs cached re-run of a gate selection with a simulated model: prints both wall times and the ratio.

Each repeat runs ``pytest suites -m SELECTION --posbias-model MODEL`` twice on one generation cache
in a temporary folder, without ``-q`` (the line saying the judge loads is progress output): first on an empty cache (every model call made, every summary sentence
embedded by the embed judge), then again (0 model calls: every answer and every sentence
embedding comes from the cache, so neither sentence-transformers nor torch is imported). The
synthetic set in ``fixtures/`` is built once before the clock, as in a checkout, and one short
warm-up run fills the bytecode cache (``PYTHONPYCACHEPREFIX`` in the temporary folder). The re-run
must make 0 model calls and not load the judge, and both runs must give the same verdicts; the
script stops otherwise. The target is a ratio of at most 0.15.

The default selection, ``(meg or dpb) and not slow``, is the positional gates of the main job: the
ones that score summaries with the embed judge, and the ones whose first run is the longest;
``--selection "not slow"`` times the whole main job (several minutes on a 2-core machine).

Run: python benchmarks/rerun.py [--selection "(meg or dpb) and not slow"] [--model sim:primacy] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JUDGE_LINE = "loading the embed judge"


def run_once(selection: str, model: str, cache: Path, out: Path, env: dict[str, str], *,
             allow_empty: bool = False) -> dict[str, Any]:
    """One ``pytest suites`` run on ``cache``: wall seconds, model calls made, judge loaded, verdicts.
    Stops the benchmark when pytest exits other than 0/1 (5, no test selected, only where ``allow_empty``)."""
    cmd = [sys.executable, "-m", "pytest", "suites", "-m", selection, "--posbias-model", model, "-p", "no:randomly",
           "-p", "no:cacheprovider", f"--posbias-cache={cache}", f"--posbias-json={out}.json",
           f"--posbias-report={out}.html"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if allow_empty and proc.returncode == 5:
        return {"wall": wall, "made": 0, "judge": False, "verdicts": []}
    if proc.returncode not in (0, 1) or not Path(f"{out}.json").is_file():
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    text = proc.stdout + proc.stderr
    m = re.search(r"model calls: (\d+) made", text)
    data = json.loads(Path(f"{out}.json").read_text())
    verdicts = [(v["nodeid"], v["passed"], v["estimate"], v["ci_low"], v["ci_high"], v["n"]) for v in data["verdicts"]]
    return {"wall": wall, "made": int(m.group(1)) if m else -1, "judge": JUDGE_LINE in text, "verdicts": verdicts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--selection", default="(meg or dpb) and not slow", help="pytest -m expression")
    ap.add_argument("--model", default="sim:primacy")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    if args.repeats < 1:
        raise SystemExit("--repeats must be >= 1")
    from pytest_posbias.run.context import synthetic_manifest

    synthetic_manifest(ROOT)  # built once (as in a checkout), outside the timed runs
    firsts, reruns = [], []
    with tempfile.TemporaryDirectory(prefix="posbias-rerun-") as d:
        tmp = Path(d)
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("PYTHONPYCACHEPREFIX", str(tmp / "pycache"))
        run_once("option_order and not slow", args.model, tmp / "warm-cache", tmp / "warm", env,  # bytecode cache
                 allow_empty=True)
        for i in range(args.repeats):
            cache = tmp / f"cache-{i}"
            first = run_once(args.selection, args.model, cache, tmp / f"first-{i}", env)
            again = run_once(args.selection, args.model, cache, tmp / f"rerun-{i}", env)
            if again["made"] != 0 or again["judge"] or again["verdicts"] != first["verdicts"]:
                raise SystemExit(f"the re-run made {again['made']} model calls, loaded the judge: {again['judge']}, "
                                 f"same verdicts: {again['verdicts'] == first['verdicts']}")
            firsts.append(first)
            reruns.append(again)
            print(f"  repeat {i + 1}: first {first['wall']:6.1f} s ({first['made']} calls, judge loaded: {first['judge']}), "
                  f"re-run {again['wall']:6.1f} s (0 calls), ratio {again['wall'] / first['wall']:.3f}",
                  file=sys.stderr, flush=True)
    f = statistics.median(r["wall"] for r in firsts)
    r = statistics.median(r["wall"] for r in reruns)
    print(f"\nselection -m \"{args.selection}\", model {args.model}, {len(firsts[0]['verdicts'])} gate tests, "
          f"{os.cpu_count()} CPUs, {args.repeats} repeat(s), median wall time")
    print(f"first run (empty cache): {f:7.1f} s, {firsts[0]['made']} model calls")
    print(f"cached re-run:           {r:7.1f} s, 0 model calls, judge not loaded")
    print(f"ratio re-run / first:    {r / f:7.3f}  (target <= 0.15: {'met' if r / f <= 0.15 else 'NOT met'})")


if __name__ == "__main__":
    main()
