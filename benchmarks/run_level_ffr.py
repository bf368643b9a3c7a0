"""Run-level false-failure rate of ``sim:unbiased`` on the whole suite at quick sizes.

For each seed, one pytest run of every suite (slow variants included) on ``sim:unbiased`` in a
folder made by ``posbias init --quick`` (made once under ``--workdir``), with
``--posbias-seed SEED`` and a cache of its own; the run's exit status (0 SHIP, 1 DO NOT SHIP,
6 NOT MEASURED) and its ``--posbias-json`` are kept. The table gives the share of runs that
exited 1 (the run-level false-failure rate, Clopper–Pearson 95% interval), and, from the JSON, the
share that would have failed with ``multiplicity = "none"`` (any gate's own verdict failed).
It is CPU heavy (one whole-suite run per seed); ``--seeds`` sets how many (≥ 20 for the figure).

Run: python benchmarks/run_level_ffr.py --seeds 20 [--workdir /tmp/ffr] [--first-seed 0] [--marker EXPR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from scipy.stats import binomtest


def main(argv: list[str] | None = None) -> int:
    """Run the seeds and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/posbias-ffr")
    ap.add_argument("--marker", default="", help="a -m expression (default: every gate, slow included)")
    a = ap.parse_args(argv)
    work = Path(a.workdir)
    if not (work / "pyproject.toml").is_file():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "init", str(work), "--quick"], check=True)
    rows = []
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        out = work / f"ffr-{seed}.json"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--model", "sim:unbiased",
               f"--posbias-seed={seed}", f"--posbias-cache=.posbias-ffr-{seed}", f"--posbias-json={out}",
               f"--posbias-report=reports/ffr-{seed}.html"] + (["-m", a.marker] if a.marker else [])
        res = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ})
        data = json.loads(out.read_text()) if out.is_file() else {}
        own = sum(not v.get("passed", True) for v in data.get("verdicts", []))
        rows.append((seed, res.returncode, len(data.get("verdicts", [])), own))
        print(f"seed {seed}: exit {res.returncode}, {rows[-1][2]} gates, {own} failed on their own", flush=True)
    n = len(rows)
    fails = sum(r[1] == 1 for r in rows)
    unadj = sum(r[3] > 0 for r in rows)
    other = sorted({r[1] for r in rows} - {0, 1})
    ci = binomtest(fails, n).proportion_ci(confidence_level=0.95, method="exact")
    ci0 = binomtest(unadj, n).proportion_ci(confidence_level=0.95, method="exact")
    print(f"\nruns: {n}; run-level false failures (exit 1): {fails}/{n} = {fails / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]")
    print(f"without adjustment (any gate's own verdict failed): {unadj}/{n} = {unadj / n:.3f} [{ci0.low:.3f}, {ci0.high:.3f}]")
    if other:
        print(f"other exit statuses seen: {other}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
