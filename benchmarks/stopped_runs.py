"""False DO NOT SHIP of a run stopped by ``-x``: every gate compliant (uniform p-values, the
boundary case), the run stops after the first gate that fails on its own, and the run-level
decision (``decision.run_decision``) sees the gates that ran plus the ones that never ran.

Prints, per number of selected gates, the rate of exit 1 with ``-x`` and in the full run, with
Clopper–Pearson 95% intervals; both must stay at or under α = 0.05.

Run: python benchmarks/stopped_runs.py [--replicates 4000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.stats import binomtest

from pytest_posbias.gates.decision import run_decision
from pytest_posbias.stats import Verdict

ALPHA = 0.05


def _verdict(p: float) -> Verdict:
    return Verdict(name="g", estimate=0.0, ci_low=-0.1, ci_high=0.1, threshold=0.05, n=60, p_value=p,
                   passed=p >= ALPHA, mode="detect", reason="r", alpha=ALPHA, lower=-math.inf, upper=0.05,
                   unit="items")


def _ci(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(method="exact")
    return f"{k / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gates", type=int, nargs="+", default=[6, 40, 160])
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"false DO NOT SHIP (exit 1) with every gate compliant, {args.replicates} replicates, seed {args.seed}")
    print(f"{'gates':>5}  {'stopped by -x':<24}{'full run':<24}")
    for m in args.gates:
        stopped = full = 0
        ids = [f"t{i:03d}" for i in range(m)]
        for _ in range(args.replicates):
            ps = rng.uniform(size=m)
            k = next((i + 1 for i, p in enumerate(ps) if p < ALPHA), m)  # -x: stop after the first own failure
            ran = [(ids[i], _verdict(float(ps[i]))) for i in range(k)]
            stopped += run_decision(ran, not_run=ids[k:], stopped="stopped by -x after 1 failure").exit_code == 1
            full += run_decision([(ids[i], _verdict(float(ps[i]))) for i in range(m)]).exit_code == 1
        print(f"{m:>5}  {_ci(stopped, args.replicates):<24}{_ci(full, args.replicates):<24}")


if __name__ == "__main__":
    main()
