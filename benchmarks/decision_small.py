"""Operating characteristics of the small-sample rules: the stressor amplification gate at its boundary.

The unit is a video (``pytest_posbias.probes.stressor``): d = share of its 30 stressed outputs
that repeat − its clean 0/1 repetition flag. At the gate's boundary the stressed rate is the clean
rate + 0.10 (threshold 0.10, detect mode, α = 0.05). The clean flag is the rare-event component: at
a clean rate of 0.10 a sample of 8 videos holds none of it 43% of the time. Rows:

* the gate's rule (:func:`pytest_posbias.stats.share_difference_verdict`: the BCa bootstrap of d
  when the sample holds >= 5 of the rarer flag outcome, else the t bound of the share plus the
  exact Clopper–Pearson bound of the flag) at 5, 8, 12, 20 and 60 videos with a clean rate of
  0.10, and at 60 videos with clean rates 0.02 and 0.30;
* the BCa bootstrap of d alone, the rule it replaces, at 8 and 60 videos, for comparison.

Each row: false failures at the boundary (size) and failures at twice the threshold (power), over
``replicates`` seeded replicates, with Clopper–Pearson 95% intervals; ``inconclusive`` counts
the replicates in which the gate refused to decide (below its minimum sample). The decomposed
branch of the rule is applied to all replicates at once (:func:`~pytest_posbias.stats.share_difference_rule`),
the bootstrap branch replicate by replicate through the verdict itself.

Run: python benchmarks/decision_small.py [--replicates 1000] [--seed 0] [--n-resamples 1999]
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias import stats as S

THRESHOLD = 0.10
TRIALS = 30
ALPHA = 0.05
CASES = (  # (videos, clean repetition rate, rule)
    (5, 0.10, "rule"), (8, 0.10, "rule"), (12, 0.10, "rule"), (20, 0.10, "rule"), (60, 0.10, "rule"),
    (60, 0.02, "rule"), (60, 0.30, "rule"), (8, 0.10, "bca"), (60, 0.10, "bca"),
)
RULES = {
    "rule": "BCa if >=5 rare, else t+CP",
    "bca": "BCa of d (rule replaced)",
}


@dataclass(frozen=True)
class Case:
    """One row: error rate at the boundary and power at 2 × threshold, with Clopper–Pearson 95% intervals."""

    name: str
    rule: str
    boundary: float
    n: int
    replicates: int
    rejections: int
    size: float
    size_ci: tuple[float, float]
    power_rejections: int
    power: float
    power_ci: tuple[float, float]
    inconclusive: int
    error: str = "detect false failure at the boundary"


def _cp(k: int, n: int) -> tuple[float, float]:
    ci = st.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def _units(rng: np.random.Generator, reps: int, n: int, p_clean: float, theta: float) -> tuple[np.ndarray, np.ndarray]:
    clean = (rng.random((reps, n)) < p_clean).astype(float)
    share = rng.binomial(TRIALS, min(1.0, p_clean + theta), size=(reps, n)) / TRIALS
    return share, clean


def _failures(rng: np.random.Generator, share: np.ndarray, clean: np.ndarray, rule: str, n_resamples: int
              ) -> tuple[int, int]:
    """(failed, inconclusive) replicates of the detect-mode gate at threshold 0.10."""
    reps, n = share.shape
    if rule == "bca":
        failed = sum(not S.mean_verdict(share[i] - clean[i], None, name="amp", threshold=THRESHOLD, sides="upper",
                                        method="bca", n_resamples=n_resamples, rng=rng).passed for i in range(reps))
        return int(failed), 0
    n_min = max(S.MIN_CLUSTERS, S.share_difference_min_sample(lower=-math.inf, upper=THRESHOLD, mode="detect",
                                                              alpha=ALPHA))
    if n < n_min:
        return 0, reps  # the verdict refuses every sample: inconclusive, never a failure
    _, passed = S.share_difference_rule(share, clean, lower=-math.inf, upper=THRESHOLD, mode="detect", alpha=ALPHA)
    fails = ~passed
    k = clean.sum(axis=1)
    for i in np.flatnonzero(np.minimum(k, n - k) >= S.RARE_MIN_COUNT):
        fails[i] = not S.share_difference_verdict(share[i], clean[i], name="amp", threshold=THRESHOLD, alpha=ALPHA,
                                                  n_resamples=n_resamples, rng=rng).passed
    return int(fails.sum()), 0


def cases(replicates: int = 1000, seed: int = 0, *, n_resamples: int = 1999) -> list[dict[str, Any]]:
    """The rows (as dicts of :class:`Case`), seeded per case from ``seed``."""
    if replicates < 1:
        raise ValueError(f"`replicates` must be >= 1; got {replicates!r}")
    out = []
    for j, (n, p_clean, rule) in enumerate(CASES):
        rng = np.random.default_rng([seed, j])
        size_k, inc = _failures(rng, *_units(rng, replicates, n, p_clean, THRESHOLD), rule, n_resamples)
        pow_k, _ = _failures(rng, *_units(rng, replicates, n, p_clean, 2 * THRESHOLD), rule, n_resamples)
        out.append(asdict(Case(
            name=f"stressor amplification, {n} videos, clean repetition {p_clean:.2f}", rule=RULES[rule],
            boundary=THRESHOLD, n=n, replicates=replicates, rejections=size_k, size=size_k / replicates,
            size_ci=_cp(size_k, replicates), power_rejections=pow_k, power=pow_k / replicates,
            power_ci=_cp(pow_k, replicates), inconclusive=inc)))
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a fixed-width text table."""
    lines = [f"{'case':<58} {'n':>3}  {'size at boundary [95% CI]':<26} {'power at 2t [95% CI]':<26} {'inconcl.':>8}  rule"]
    for r in rows:
        slo, shi = r["size_ci"]
        plo, phi = r["power_ci"]
        lines.append(f"{r['name']:<58} {r['n']:>3}  {r['size']:.3f} [{slo:.3f}, {shi:.3f}]{'':<6} "
                     f"{r['power']:.3f} [{plo:.3f}, {phi:.3f}]{'':<6} {r['inconclusive']:>8}  {r['rule']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-resamples", type=int, default=1999, help="bootstrap resamples of the BCa branch")
    args = ap.parse_args(argv)
    print(f"threshold {THRESHOLD}, α = {ALPHA}, detect mode, {args.replicates} replicates per cell, seed {args.seed}")
    print(table(cases(args.replicates, args.seed, n_resamples=args.n_resamples)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
