"""Time of the exact unconditional test for paired proportions (``paired.paired_binary_p``) and of
a whole ``stats.paired_change_verdict`` (two p-values and two inverted bounds), per number of pairs,
and the gap between its nuisance supremum on the default grid and on a grid ``--fine`` times denser.

The p-value sums a staircase of binomial terms over n01 at each of ``paired.NUISANCE_GRID``
nuisance values, O(n) each, so one call stays far under a second up to ``paired.EXACT_MAX_N``
pairs, above which the rule is Tango's score referred to the normal. The outcome timed is at the
edge of rejection at margin 0.02 (two-way discordance, p01 = 0.3), where the tail's supremum is
widest; the grid gap is shown there and one-way (n01 = 0).

Each time is the median of ``--repeats`` calls (wall clock, this machine).

Run: python benchmarks/paired_exact.py [--pairs 300 1000 2000 5000] [--repeats 5] [--fine 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_posbias.stats import paired_change_verdict
from pytest_posbias.stats.paired_binary import EXACT_MAX_N, NUISANCE_GRID, paired_binary_p

MARGIN = 0.02


def timed(fn: Callable[[], object], repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[300, 1000, 2000, 5000])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--fine", type=int, default=20, help="the dense grid has this many times NUISANCE_GRID points")
    args = ap.parse_args()
    print(f"margin {MARGIN}, nuisance grid {NUISANCE_GRID} (dense: {args.fine * NUISANCE_GRID}), "
          f"EXACT_MAX_N = {EXACT_MAX_N}, median of {args.repeats} calls")
    head = (f"{'pairs':>6} {'p-value (s)':>12} {'verdict (s)':>12} {'rel. grid gap two-way':>22} "
            f"{'rel. grid gap one-way':>22}")
    print(head)
    print("-" * len(head))
    for n in args.pairs:
        if n > EXACT_MAX_N:
            print(f"{n:>6}  (above EXACT_MAX_N: normal)")
            continue
        b = int(0.3 * n)
        c = b + int(1.6 * np.sqrt(0.6 * n)) - int(MARGIN * n)
        one = max(0, int(MARGIN * n) - int(2 * np.sqrt(MARGIN * n)))
        t_p = timed(partial(paired_binary_p, b, c, n, MARGIN, alternative="less"), args.repeats)
        a = np.zeros(n, dtype=int)
        r = np.zeros(n, dtype=int)
        a[:b], r[b:b + c] = 1, 1
        t_v = timed(partial(paired_change_verdict, a, r, name="x", threshold=MARGIN, mode="certify"),
                    max(1, args.repeats // 2))
        gaps = []
        for x, y in ((b, c), (one, 0)):
            p = paired_binary_p(x, y, n, MARGIN, alternative="less")
            pf = paired_binary_p(x, y, n, MARGIN, alternative="less", grid=args.fine * NUISANCE_GRID)
            gaps.append((pf - p) / pf)
        print(f"{n:>6} {t_p:>12.3f} {t_v:>12.2f} {gaps[0]:>22.1e} {gaps[1]:>22.1e}", flush=True)


if __name__ == "__main__":
    main()
