"""The power cost of the run-level decision: power at 2× the threshold per gate, Holm vs none.

A gate designed at the default sizes for power ``--design-power`` at twice its threshold (a
one-sided z-test at α: the violation sits δ = (z_{1−α} + z_power)·se past the bound) keeps that
power when decided alone. Inside the run's Holm family of m gates, in the worst case for it (every
other gate compliant, so Holm's first step applies) it is tested at α/m. The table gives, for
m = 1, 6 (``-m meg``), 20 and 164 (every gate), the power of one violating gate at 2t with and
without the adjustment, simulated (seeded, ``--reps`` replicates, Clopper–Pearson 95%
intervals) with the other m − 1 gates at their boundary (uniform p-values), and the closed form.

Run: python benchmarks/decision_power.py [--reps 20000] [--design-power 0.8] [--alpha 0.05]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import binomtest, norm

from pytest_posbias.gates.decision import holm_adjust


def main(argv: list[str] | None = None) -> int:
    """Print the table (markdown)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20000)
    ap.add_argument("--design-power", type=float, default=0.8)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.reps < 1000:
        ap.error("--reps must be >= 1000")
    za = norm.isf(a.alpha)
    shift = za + norm.ppf(a.design_power)  # the violating gate's mean z at 2t
    rng = np.random.default_rng(a.seed)
    print(f"α = {a.alpha}, per-gate design power at 2t = {a.design_power}, {a.reps} seeded replicates per row\n")
    print("| gates m | power alone (none) | power in Holm, simulated [95% CI] | closed form α/m |")
    print("|---:|---:|---|---:|")
    for m in (1, 6, 20, 164):
        z = rng.standard_normal((a.reps, m))
        z[:, 0] += shift
        p = norm.sf(z)
        own = p[:, 0] <= a.alpha
        holm = np.array([holm_adjust(row)[0] <= a.alpha for row in p])
        k = int(holm.sum())
        ci = binomtest(k, a.reps).proportion_ci(confidence_level=0.95, method="exact")
        closed = norm.sf(norm.isf(a.alpha / m) - shift)
        print(f"| {m} | {own.mean():.3f} | {k / a.reps:.3f} [{ci.low:.3f}, {ci.high:.3f}] | {closed:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
