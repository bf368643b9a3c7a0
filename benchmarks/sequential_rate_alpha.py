"""Operating characteristics of the group-sequential rate gate across α, small samples included.

The unit is a Bernoulli outcome (a flip, a repetition, a successful attack) with true rate θ. The
gate (:func:`pytest_posbias.stats.sequential.gsd_decide`, ``kind="rate"``, three looks, upper
threshold t = 0.15) is run on ``replicates`` seeded samples per row, at θ = t (the boundary) and
θ = 2t. Rows cover α = 0.05 (the default), 0.001 and 1e-5 (where the boundaries are solved by
numerical integration) and maximum samples of 3 (too small to show a violation at α = 1e-5), 8 (a
quick run) and 60 (the phase probe's default).

Columns, each with its Clopper–Pearson 95% interval: detect mode, the fail rate at θ = t (the
size: at most α) and at 2t (power); certify mode, the pass rate at θ = t (the false-pass rate: at
most α); and the share of inconclusive decisions. A detect gate whose largest sample cannot show a
violation at the last look's level is inconclusive at every θ, never a pass.

Run: python benchmarks/sequential_rate_alpha.py [--replicates 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from pytest_posbias.stats import exact_interval
from pytest_posbias.stats.sequential import gsd_decide

THRESHOLD = 0.15
ALPHAS = (0.05, 0.001, 1e-5)
SIZES = (3, 8, 60)


def _rate(k: int, n: int) -> str:
    lo, hi = exact_interval(k, n, confidence_level=0.95)
    return f"{k / n:.4f} [{lo:.4f},{hi:.4f}]"


def _run(theta: float, *, n_max: int, alpha: float, mode: str, reps: int, rng: np.random.Generator) -> tuple[int, int]:
    """(decisions that failed, decisions that were inconclusive) over ``reps`` samples at rate ``theta``."""
    fails = inconclusive = 0
    for _ in range(reps):
        x = (rng.random(n_max) < theta).astype(float)
        d = gsd_decide(x, n_max=n_max, looks=3, lower=-math.inf, upper=THRESHOLD, mode=mode, alpha=alpha, kind="rate")
        inconclusive += bool(d.inconclusive)
        fails += (not d.passed) and not d.inconclusive
    return fails, inconclusive


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    reps = args.replicates
    print(f"rate gate, threshold {THRESHOLD}, 3 looks, {reps} replicates per cell, seed {args.seed}; "
          "Clopper-Pearson 95% intervals")
    print(f"{'alpha':>7} {'n_max':>5}  {'detect: fail at t':>26}  {'detect: fail at 2t':>26}  "
          f"{'certify: pass at t':>26}  inconclusive (detect t / certify t)")
    for alpha in ALPHAS:
        for n_max in SIZES:
            f_t, inc_t = _run(THRESHOLD, n_max=n_max, alpha=alpha, mode="detect", reps=reps, rng=rng)
            f_2t, _ = _run(2 * THRESHOLD, n_max=n_max, alpha=alpha, mode="detect", reps=reps, rng=rng)
            c_fail, c_inc = _run(THRESHOLD, n_max=n_max, alpha=alpha, mode="certify", reps=reps, rng=rng)
            print(f"{alpha:>7g} {n_max:>5}  {_rate(f_t, reps):>26}  {_rate(f_2t, reps):>26}  "
                  f"{_rate(reps - c_fail - c_inc, reps):>26}  {inc_t / reps:.3f} / {c_inc / reps:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
