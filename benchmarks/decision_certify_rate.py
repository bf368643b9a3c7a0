"""Operating characteristics of the contamination gate in certify mode: a mean of group rates on [0, 1].

The unit is a group's contaminated-slot rate (``pytest_posbias.gates.positional``): the share of its
slots (orders × P) whose summary lies closer to another clip's reference. The gate certifies
"rate <= 0.10" with the group-sequential design (four looks, O'Brien–Fleming spending; at each look
Student's t and Hall's skewness-corrected t together, each at half the look's level: ``both-t``) or
the fixed design (the same rule once, ``--posbias-fixed``) and, where every group has the same rate (zero spread, common for a clean
model: every rate 0), on the exact worst-case floor of
:func:`pytest_posbias.stats.zero_spread_interval` at that level (value range [0, 1]).

Unit types at the boundary (population mean 0.10; the share of certify passes there is the size)
and at half of it (0.05: certify power):

* ``whole-group``: a group is contaminated in every slot or in none (0/1 units): the worst case of
  the zero-spread floor (mass 0.9 at 0, the rest at 1) and rare events with a long right tail;
* ``slots P2`` / ``slots P4``: slots contaminated independently, 2 orders × 2 slots and 4 orders ×
  4 slots per group (Binomial(4, p)/4, Binomial(16, p)/16);
* ``beta-bin P2`` / ``beta-bin P4``: slots contaminated together within a group: a group's own rate
  drawn from Beta(0.2, 1.8) (mean 0.10: most groups near 0, a few contaminated in most slots),
  its 4 or 16 slots drawn at that rate (the lattice of the suite's units, with the correlation of
  a group's videos across its orders);
* ``skewed``: the Beta(0.2, 1.8) group rates themselves, off any lattice (the continuous limit);
* ``zero variance``: every group at exactly the boundary (never certified: size 0 by construction).

Two heavier-tailed types follow, where no t rule holds α and the gate's certification is not backed:
``Beta(0.05) rates`` (Beta(0.05, 0.45): almost every group clean, a few wholly contaminated) and
``1/16 + rare 0.5`` (80% of groups at one slot in sixteen, the rest at 0 or at 0.5, mean 0.10;
0.075 at the power point). They are printed and not counted in the exit status.

``--rule t`` (Student's t alone) and ``--design fixed --rule percentile`` (the expanded percentile
bootstrap) measure the rules the gate does not use in certify mode.

At 12 groups (few clusters: the P4 quick size), 24, 40 and 48; each over ``replicates`` seeded
replicates, Clopper–Pearson 95% intervals. ``flat`` counts the replicates decided on the floor.
Below 24 groups (``gates.positional.CERTIFY_MIN_GROUPS``) the rule certifies up to 0.08 of the
skewed samples, so the gate does not certify there: those rows are marked, and the exit status
(1 when some lower Clopper–Pearson bound lies above α) counts the rows from 24 groups on.

Run: python benchmarks/decision_certify_rate.py [--replicates 4000] [--seed 0] [--design sequential|fixed] [--rule both-t]
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from decision import clopper_pearson  # this folder is on the path of a script run from it

from pytest_posbias.gate_registry import GATES
from pytest_posbias.gates import LOOKS
from pytest_posbias.gates.positional import CERTIFY_MIN_GROUPS
from pytest_posbias.stats import mean_verdict
from pytest_posbias.stats.sequential import gsd_decide

THRESHOLD = GATES["contamination"].threshold
ALPHA = 0.05
SIZES = (12, 24, 40, 48)
MIN_GROUPS = CERTIFY_MIN_GROUPS["contamination"]  # the gate is inconclusive below it

Units = Callable[[np.random.Generator, int, float], np.ndarray]
UNIT_TYPES: dict[str, Units] = {
    "whole-group": lambda rng, n, mu: (rng.random(n) < mu).astype(float),
    "slots P2": lambda rng, n, mu: rng.binomial(4, mu, n) / 4,
    "slots P4": lambda rng, n, mu: rng.binomial(16, mu, n) / 16,
    "beta-bin P2": lambda rng, n, mu: rng.binomial(4, rng.beta(0.2, 0.2 * (1 - mu) / mu, n)) / 4,
    "beta-bin P4": lambda rng, n, mu: rng.binomial(16, rng.beta(0.2, 0.2 * (1 - mu) / mu, n)) / 16,
    "skewed": lambda rng, n, mu: rng.beta(0.2, 0.2 * (1 - mu) / mu, n),
    "zero variance": lambda rng, n, mu: np.full(n, mu),
    # heavier tails than the rows above, where no t rule holds α (printed, not counted in the exit status)
    "Beta(0.05) rates": lambda rng, n, mu: rng.beta(0.05, 0.05 * (1 - mu) / mu, n),
    "1/16 + rare 0.5": lambda rng, n, mu: rng.choice([1 / 16, 0.0, 0.5], size=n,
                                                    p=[0.8, 0.2 - (mu - 0.05) / 0.5, (mu - 0.05) / 0.5]),
}
BEYOND = ("Beta(0.05) rates", "1/16 + rare 0.5")



def passes(units: Units, n: int, mu: float, replicates: int, rng: np.random.Generator, *,
           rule: str, design: str, certify_from: int) -> tuple[int, int]:
    """(certify passes, replicates decided on the zero-spread floor) at population mean ``mu``; in the
    sequential design no look with fewer than ``certify_from`` groups passes (the gate's rule)."""
    ok = flat = 0
    value_range = GATES["contamination"].value_range
    for _ in range(replicates):
        x = units(rng, n, mu)
        if design == "fixed":
            v = mean_verdict(x, None, name="contamination", threshold=THRESHOLD, sides="upper", mode="certify",
                             alpha=ALPHA, method=rule, value_range=value_range, rng=rng, n_resamples=999)
            ok += v.passed
            flat += "zero spread" in str(v.extra.get("method", ""))
            continue
        d = gsd_decide(x, n_max=n, looks=LOOKS, lower=-math.inf, upper=THRESHOLD, mode="certify",
                       alpha=ALPHA, kind="mean", rule=rule, value_range=value_range, certify_from=certify_from)
        ok += d.passed
        flat += "zero spread" in d.method
    return ok, flat


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rule", default="both-t",
                    help="the rule: t, skew-t, both-t (the gate's), or, with --design fixed, percentile")
    ap.add_argument("--design", choices=("sequential", "fixed"), default="sequential")
    ap.add_argument("--certify-from", type=int, default=MIN_GROUPS,
                    help="sequential: no look with fewer groups certifies (the gate's minimum; 0: any look)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="groups per sample, comma-separated")
    ap.add_argument("--units", default=",".join(UNIT_TYPES), help="unit types, comma-separated")
    args = ap.parse_args(argv)
    if args.replicates < 1:
        raise SystemExit("--replicates must be >= 1")
    print(f"contamination certify, threshold {THRESHOLD}, α = {ALPHA}, {args.design} design"
          f"{f' ({LOOKS} looks)' if args.design == 'sequential' else ''}, rule {args.rule}, "
          f"{args.replicates} replicates per cell, seed {args.seed}")
    print(f"{'units':<14} {'n':>3}  {'size at 0.10 [95% CI]':<24} {'flat':>5}  {'power at 0.05 [95% CI]':<24} {'flat':>5}")
    worst = 0.0
    chosen = [u.strip() for u in args.units.split(",")]
    if any(u not in UNIT_TYPES for u in chosen):
        raise SystemExit(f"--units from {', '.join(UNIT_TYPES)}; got {args.units!r}")
    for j, (name, units) in enumerate(UNIT_TYPES.items()):
        if name not in chosen:
            continue
        for i, n in enumerate(int(x) for x in args.sizes.split(",")):
            rng = np.random.default_rng([args.seed, j, i])
            k, f0 = passes(units, n, THRESHOLD, args.replicates, rng, rule=args.rule, design=args.design,
                           certify_from=args.certify_from)
            kp, f1 = passes(units, n, THRESHOLD / 2, args.replicates, rng, rule=args.rule, design=args.design,
                           certify_from=args.certify_from)
            lo, hi = clopper_pearson(k, args.replicates)
            plo, phi = clopper_pearson(kp, args.replicates)
            below = n < MIN_GROUPS
            worst = worst if below or name in BEYOND else max(worst, lo)
            print(f"{name:<14} {n:>3}  {k / args.replicates:.4f} [{lo:.4f}, {hi:.4f}]   {f0:>5}  "
                  f"{kp / args.replicates:.3f} [{plo:.3f}, {phi:.3f}]     {f1:>5}"
                  f"{'  (below the gate minimum: not certified)' if below else ''}", flush=True)
    held = worst <= ALPHA
    print(f"size held from {MIN_GROUPS} groups on (every lower Clopper–Pearson bound <= α): {'yes' if held else 'NO'}")
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
