"""Operating characteristics of the parity gate's rule for changed MCQ answers (``parity``).

The rule (docs/design.md section 5, "Parity"): per item, c = 1 when the tested deployment's
consensus answer differs from the reference's, f = 1 when the reference's own re-run changes the
reference's answer; the gate is on δ = P(c = 1) − P(f = 1), compliant when δ <= t (t = 0.05),
decided by the exact unconditional test for paired proportions (Tango's score, supremum over the
nuisance; :func:`pytest_posbias.stats.paired.paired_binary_p`, the function the gate's verdict
inverts, exact up to ``paired.EXACT_MAX_N`` items). Its rejection region is a cut on Tango's Z
(:func:`pytest_posbias.stats.paired.paired_binary_critical`), found once per (items, margin, side), so
each replicate costs one comparison.

Items are drawn independently. An item is unstable with probability u (a near tie that GPU
nondeterminism decides): each run of either deployment picks one of two answers at random, so
the reference's re-run floor is F = u/2 and the tested deployment differs from the reference on
it with probability 1/2 with no deployment effect at all. A stable item's answer is changed by
the deployment with probability d. So P(c = 1) = u/2 + (1 − u)·d and δ = (1 − u)·d: at the
boundary d = t/(1 − u), at twice the threshold d = 2t/(1 − u).

Rows per (items n, margin t, floor F); ``--margins`` sets t (default the gate's 0.05; the same
p-value serves ``--baseline`` comparisons of binary units at their own margins, e.g. 0.01, 0.02):

* ``gate``: detect mode, false failures at the boundary (size, must be <= α) and failures at 2t
  (power); certify mode, false passes at the boundary (must be <= α); ``exact`` beside each size:
  the size computed over every outcome (the trinomial of (c, f) pairs: p10 = u/4 + (1 − u)·d,
  p01 = u/4), which the Monte-Carlo rate estimates;
* ``naive``: the exact binomial test of the changed share c against t, ignoring the floor (the
  rule the floor correction replaces): its false failures at the boundary grow with F.

Each rate over ``replicates`` seeded replicates, with Clopper–Pearson 95% intervals.

Run: python benchmarks/parity.py [--replicates 2000] [--seed 0] [--items 40 60 120 300] [--floors 0 0.02 0.05 0.1]
     [--margins 0.05]
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np
from scipy import stats as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias.gate_registry import GATES
from pytest_posbias.stats import exact_interval
from pytest_posbias.stats.paired_binary import (
    _log_pmf,
    _outcomes,
    paired_binary_critical,
    tango_score,
)

ALPHA = 0.05
THRESHOLD = GATES["parity"].threshold
ITEMS = (40, 60, 120, 300)
FLOORS = (0.0, 0.02, 0.05, 0.10)


def draw(rng: np.random.Generator, n: int, floor: float, delta: float,
         reps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n10, n01, changed) per replicate over n items (module doc): n10 = #(c = 1, f = 0),
    n01 = #(c = 0, f = 1), changed = #(c = 1)."""
    u = 2 * floor
    d = delta / (1 - u)
    unstable = rng.random((reps, n)) < u
    f = unstable & (rng.random((reps, n)) < 0.5)
    c = np.where(unstable, rng.random((reps, n)) < 0.5, rng.random((reps, n)) < d)
    return (c & ~f).sum(axis=1), (~c & f).sum(axis=1), c.sum(axis=1)


@functools.cache
def _cut(n: int, t: float, alternative: str) -> float:
    return paired_binary_critical(n, t, ALPHA, alternative=alternative)


def rejects(n10: np.ndarray, n01: np.ndarray, n: int, t: float, alternative: str) -> np.ndarray:
    """Whether paired_binary_p(n10, n01, n, t) < α, through the test's cut on Tango's Z."""
    z = np.round(tango_score(n10, n01, n, t), 9)
    zc = _cut(n, t, alternative)
    out: np.ndarray = z <= zc if alternative == "less" else z >= zc
    return out


def exact_size(n: int, t: float, floor: float, alternative: str) -> float:
    """P(reject) over every outcome at the boundary δ = t (module doc's trinomial)."""
    u = 2 * floor
    p01 = u / 4
    p10 = p01 + t
    x, y = _outcomes(n)
    pmf = np.exp(_log_pmf(x, y, n, np.array([p10]), np.array([p01])))[0]
    return float(pmf @ rejects(x, y, n, t, alternative))


def rate(k: int, n: int) -> str:
    lo, hi = exact_interval(k, n, confidence_level=0.95)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--items", type=int, nargs="+", default=list(ITEMS), help="item counts (rows)")
    ap.add_argument("--floors", type=float, nargs="+", default=list(FLOORS), help="reference re-run floors F < 0.5")
    ap.add_argument("--margins", type=float, nargs="+", default=[THRESHOLD], help="margins t (rows)")
    args = ap.parse_args()
    reps = args.replicates
    if reps < 1000:
        ap.error("--replicates must be >= 1000")
    print(f"parity rule: margins {', '.join(f'{t:g}' for t in args.margins)}, alpha = {ALPHA:g}, {reps} replicates "
          f"per cell, seed {args.seed}")
    print("rates with Clopper-Pearson 95% intervals (exact: the size over every outcome); size columns must stay <= alpha")
    head = (f"{'items':>5} {'t':>5} {'floor':>5}  {'detect size at t':<24} {'exact':>6}  {'certify size at t':<24} "
            f"{'exact':>6}  {'detect power at 2t':<24} {'naive binomial: size':<24}")
    print(head)
    print("-" * len(head))
    for n in args.items:
        for t in args.margins:
            for floor in args.floors:
                rng = np.random.default_rng([args.seed, n, round(floor * 1000), round(t * 1000)])
                b10, b01, changed = draw(rng, n, floor, t, reps)
                p10, p01, _ = draw(rng, n, floor, 2 * t, reps)
                detect = int(rejects(b10, b01, n, t, "greater").sum())
                certify = int(rejects(b10, b01, n, t, "less").sum())
                power = int(rejects(p10, p01, n, t, "greater").sum())
                naive = int(np.sum(st.binom.sf(changed - 1, n, t) < ALPHA))
                ed, ec = exact_size(n, t, floor, "greater"), exact_size(n, t, floor, "less")
                print(f"{n:>5} {t:>5.2f} {floor:>5.2f}  {rate(detect, reps):<24} {ed:>6.4f}  {rate(certify, reps):<24} "
                      f"{ec:>6.4f}  {rate(power, reps):<24} {rate(naive, reps):<24}", flush=True)


if __name__ == "__main__":
    main()
