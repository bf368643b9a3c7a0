"""Operating characteristics of the paired mean-difference rule: ``--posbias-baseline`` coverage and
contamination, and the parity coverage gate, at their margin.

The rule (``gates.verdict_builders.mean_difference``) takes the per-instance paired differences d
(candidate against baseline on the same (group, order) instances, in the direction that is worse)
and decides "mean d <= margin" with the cluster bootstrap over groups (expanded percentile), in
detect mode (false failure at mean d = margin: the size) and certify mode (false pass there). Unit
types, 4 orders per group:

* ``coverage``: d = a group effect N(0, 0.05) + instance noise N(0, 0.12) + the mean difference
  (symmetric, the coverage drop of two similar models);
* ``contamination``: each side's slot rate per instance from its group's rate (Beta with mean 0.02
  for the baseline, 0.02 + δ for the candidate, shape 0.2: most groups clean, a few contaminated
  in most slots), 4 slots an instance; d = candidate − baseline (right-skewed rare events);
* ``zero variance``: d = 0 on every instance (the same model twice): detect must pass; certify is
  not shown (no spread to bound the mean with).

At 12 groups (few clusters) and 48; margin 0.05 (both gates' default). Power: detect at 2 × margin,
certify at 0. Each over ``replicates`` seeded replicates with Clopper–Pearson 95% intervals;
``--n-resamples`` bootstrap resamples per verdict (the gates' default is 9999; fewer here for time:
the interval's Monte-Carlo error grows, its coverage does not change).

``--rules DETECT,CERTIFY`` measures other rules (``t``, ``both-t``: Student's t, and it with Hall's
skewness-corrected t at α/2 each, on the groups' linearized means).

Run: python benchmarks/decision_paired_mean.py [--replicates 1000] [--seed 0] [--n-resamples 1999] [--rules percentile,percentile]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from decision import clopper_pearson  # this folder is on the path of a script run from it

from pytest_posbias.gate_registry import GATES
from pytest_posbias.stats import mean_verdict

ALPHA = 0.05
MARGIN = GATES["coverage"].margin
ORDERS = 4
SIZES = (12, 48)

Units = Callable[[np.random.Generator, int, float], np.ndarray]


def _coverage(rng: np.random.Generator, groups: int, delta: float) -> np.ndarray:
    u = np.repeat(rng.normal(0.0, 0.05, groups), ORDERS)
    return np.clip(delta + u + rng.normal(0.0, 0.12, groups * ORDERS), -1.0, 1.0)


def _rates(rng: np.random.Generator, groups: int, mean: float) -> np.ndarray:
    g = np.repeat(rng.beta(0.2, 0.2 * (1 - mean) / mean, groups), ORDERS)
    return rng.binomial(4, g) / 4


def _contamination(rng: np.random.Generator, groups: int, delta: float) -> np.ndarray:
    return _rates(rng, groups, 0.02 + delta) - _rates(rng, groups, 0.02)


UNIT_TYPES: dict[str, Units] = {
    "coverage": _coverage,
    "contamination": _contamination,
    "zero variance": lambda rng, groups, delta: np.full(groups * ORDERS, 0.0 if delta < MARGIN else delta),
}



def rate(units: Units, groups: int, delta: float, mode: str, replicates: int, rng: np.random.Generator,
         n_resamples: int, method: str) -> tuple[int, int]:
    """(wrong-or-right decisions counted as: detect failures / certify passes, inconclusive verdicts)."""
    clusters = np.repeat(np.arange(groups), ORDERS)
    hits = inconclusive = 0
    for _ in range(replicates):
        v = mean_verdict(units(rng, groups, delta), clusters, name="paired", threshold=MARGIN, sides="upper",
                         mode=mode, alpha=ALPHA, unit="groups", n_resamples=n_resamples, rng=rng, method=method)
        hits += (not v.passed) if mode == "detect" else v.passed
        inconclusive += bool(v.inconclusive)
    return hits, inconclusive


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-resamples", type=int, default=1999)
    ap.add_argument("--rules", default="percentile,percentile",
                    help="the rule in detect and in certify mode, comma-separated (percentile, bca, t, skew-t, both-t)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="groups per sample, comma-separated")
    ap.add_argument("--units", default=",".join(UNIT_TYPES), help="unit types, comma-separated")
    args = ap.parse_args(argv)
    if args.replicates < 1 or args.n_resamples < 99:
        raise SystemExit("--replicates >= 1, --n-resamples >= 99")
    print(f"paired mean difference, margin {MARGIN}, α = {ALPHA}, {ORDERS} orders a group, {args.replicates} "
          f"replicates per cell, {args.n_resamples} resamples, seed {args.seed}")
    print(f"{'units':<14} {'groups':>6}  {'mode':<7} {'size at the margin [95% CI]':<30} {'power [95% CI]':<24} "
          f"{'inconcl.':>8}")
    worst = 0.0
    rules = dict(zip(("detect", "certify"), args.rules.split(","), strict=True))
    print(f"rules: detect {rules['detect']}, certify {rules['certify']}")
    chosen = [u.strip() for u in args.units.split(",")]
    if any(u not in UNIT_TYPES for u in chosen):
        raise SystemExit(f"--units from {', '.join(UNIT_TYPES)}; got {args.units!r}")
    for j, (name, units) in enumerate(UNIT_TYPES.items()):
        if name not in chosen:
            continue
        for i, groups in enumerate(int(x) for x in args.sizes.split(",")):
            for m, mode in enumerate(("detect", "certify")):
                rng = np.random.default_rng([args.seed, j, i, m])
                k, inc = rate(units, groups, MARGIN, mode, args.replicates, rng, args.n_resamples, rules[mode])
                kp, _ = rate(units, groups, 2 * MARGIN if mode == "detect" else 0.0, mode, args.replicates, rng,
                             args.n_resamples, rules[mode])
                lo, hi = clopper_pearson(k, args.replicates)
                plo, phi = clopper_pearson(kp, args.replicates)
                worst = max(worst, lo)
                print(f"{name:<14} {groups:>6}  {mode:<7} {k / args.replicates:.4f} [{lo:.4f}, {hi:.4f}]{'':<6} "
                      f"{kp / args.replicates:.3f} [{plo:.3f}, {phi:.3f}]{'':<4} {inc:>8}", flush=True)
    held = worst <= ALPHA
    print(f"size held (every lower Clopper–Pearson bound <= α): {'yes' if held else 'NO'}")
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
