"""How often the constant-letter rule (``scoring/usable.py``) flags a model, by the share of its
answers that go to one letter: ``python benchmarks/constant_rule.py [--replicates 10000] [--seed 0]``.

A model answers letter 0 with probability ``p`` and one of the other k − 1 letters uniformly
otherwise; the correct letters are uniform over k (permuted option orders). For each (k, m, p),
``replicates`` seeded samples of m answers go through the rule's statistic (modal share above
``LETTER_CONSTANT_BOUND``, the modal letter correct in at most that share); the table gives the
flag rate with its 95% Clopper–Pearson interval. ``p = 1/k`` is a model that reads the options,
``p = 1`` a constant answer, and p near the bound (0.9) is the rule's boundary.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from pytest_posbias.scoring.usable import LETTER_CONSTANT_BOUND, MIN_LETTER_REQUESTS


def flag_rate(k: int, m: int, p: float, *, replicates: int, rng: np.random.Generator) -> tuple[int, int]:
    """(flagged, replicates) for m answers over k letters, letter 0 with probability ``p``."""
    other = rng.integers(1, k, size=(replicates, m)) if k > 1 else np.zeros((replicates, m), dtype=int)
    letters = np.where(rng.random((replicates, m)) < p, 0, other)
    correct = rng.integers(0, k, size=(replicates, m))
    counts = np.stack([(letters == j).sum(axis=1) for j in range(k)], axis=1)
    modal = counts.argmax(axis=1)  # ties to the lowest letter, as the rule's max over (count, -letter)
    share = counts.max(axis=1) / m
    correct_share = (correct == modal[:, None]).mean(axis=1)
    flagged = (m >= MIN_LETTER_REQUESTS) & (share > LETTER_CONSTANT_BOUND) & (correct_share <= LETTER_CONSTANT_BOUND)
    return int(flagged.sum()), replicates


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--replicates", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"constant-letter rule: flagged when the modal share > {LETTER_CONSTANT_BOUND} "
          f"(m >= {MIN_LETTER_REQUESTS}); {args.replicates} replicates per row, seed {args.seed}")
    print(f"{'k':>2} {'m':>4} {'p(letter A)':>11} {'flag rate':>9}  95% CI")
    for k in (3, 5):
        for m in (8, 32, 120):
            for p in (1 / k, 0.6, 0.8, 0.9, 0.95, 1.0):
                x, n = flag_rate(k, m, p, replicates=args.replicates, rng=rng)
                ci = stats.binomtest(x, n).proportion_ci(0.95, method="exact")
                print(f"{k:>2} {m:>4} {p:>11.3f} {x / n:>9.4f}  [{ci.low:.4f}, {ci.high:.4f}]")


if __name__ == "__main__":
    main()
