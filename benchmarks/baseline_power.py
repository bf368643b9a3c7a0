"""Power of the ``--baseline`` MEG comparison (|μc| − |μb| <= margin, detect mode) by margin and groups.

The unit is a group: its MEG under the candidate and under the baseline, drawn normal with the spread
of ``sim:unbiased``'s group MEG on the synthetic set (``--sd``, default 0.057), the baseline unbiased
(μb = 0) and the candidate at twice the margin (μc = 2·margin). Each row: the share of replicates in
which :func:`pytest_posbias.stats.paired.paired_abs_mean_verdict` fails the candidate (power at 2× the
margin, Clopper–Pearson 95% interval) and, over the passing verdicts, the median of what the verdict
itself reports (:func:`pytest_posbias.gates.decision.power_note`): the detectable |μc| − |μb| with 80%
power, the share marked underpowered and the median sample it says would be needed.

Run: python benchmarks/baseline_power.py [--replicates 600] [--seed 0] [--sd 0.057]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats as st

from pytest_posbias.gates.decision import power_note
from pytest_posbias.stats.paired import paired_abs_mean_verdict

ALPHA = 0.05
# (margin, groups): the default (0.01 at 48 groups) and the samples and margins the docs quote
ROWS = ((0.01, 48), (0.01, 200), (0.01, 650), (0.01, 750), (0.02, 48), (0.02, 150), (0.02, 175), (0.035, 48))


def row(margin: float, groups: int, *, sd: float, replicates: int, seed: int) -> str:
    """One table row (see the module docstring)."""
    rng = np.random.default_rng([seed, groups, round(margin * 1e4)])
    g = np.arange(groups)
    fails = 0
    notes = []
    for _ in range(replicates):
        v = paired_abs_mean_verdict(rng.normal(2 * margin, sd, groups), rng.normal(0.0, sd, groups), g, name="MEG",
                                    margin=margin, mode="detect", alpha=ALPHA)
        fails += not v.passed
        if v.passed:
            notes.append(power_note(v))
    ci = st.binomtest(fails, replicates).proportion_ci(confidence_level=0.95, method="exact")
    det = float(np.median([n.detectable for n in notes])) if notes else math.nan
    under = float(np.mean([n.underpowered for n in notes])) if notes else math.nan
    needs = [n.n_needed for n in notes if n.n_needed]
    need = f"{np.median(needs):.0f}" if needs else "-"
    return (f"{margin:>6.3f} {groups:>6}  {fails / replicates:.3f} [{ci.low:.3f}, {ci.high:.3f}]   "
            f"{det:>10.4f} {under:>12.2f} {need:>8}")


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sd", type=float, default=0.057)
    a = ap.parse_args(argv)
    print(f"--baseline MEG, detect mode, alpha {ALPHA}, group sd {a.sd}, {a.replicates} replicates, seed {a.seed}; "
          "candidate at 2x the margin, baseline unbiased")
    print(f"{'margin':>6} {'groups':>6}  {'power at 2x margin':<22} {'detectable':>10} {'underpowered':>12} "
          f"{'n needed':>8}  (last three: passing verdicts' own power notes, medians)")
    for margin, groups in ROWS:
        print(row(margin, groups, sd=a.sd, replicates=a.replicates, seed=a.seed), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
