"""Operating characteristics of the mean gate on lattice-valued units (MEG per group at P = 4).

The unit is a group's MEG, the mean over its 4 cyclic orders of (C2 + C3)/2 − (C1 + C4)/2
(multi-video paper eq. 7). On references of four sentences each slot's coverage is a multiple of
1/4, so a group's MEG is a multiple of 1/32: a fact the model drops from a middle slot moves it by
−1/32, one dropped from an edge slot by +1/32. ``sim:unbiased`` drops each fact with probability
0.072 at temperature 0.9, a few facts per group, so its group MEGs sit on that lattice with a large
mass at a few points (on the quick set, 8 of 12 groups of one configuration at exactly −1/32).
The generator here is that mechanism: MEG = (X − Y)/32, X ~ Poisson(λ_edge), Y ~ Poisson(λ_middle),
with λ_middle − λ_edge = 32·|MEG| putting the population MEG at the boundary (−threshold) or at
twice it, and three spreads: ``dense`` (λ_edge = 2.0: the simulator's, about 0.06 per group),
``sparse`` (λ_edge = 0.05: mostly zeros and a few −1/32, near-zero spread) and ``rare-jump``
(an unbiased dense lattice plus, in a share of groups, a whole middle slot dropped: −0.8/8 per
slot, the dose model's unit) and ``big-jump`` (a sparse lattice plus rare jumps of −1/8, one slot's
fact dropped in one of the four orders).

Rows (``RULES``): ``bootstrap``, the fixed design's cluster bootstrap
(:func:`pytest_posbias.stats.mean_verdict`, expanded percentile); ``fixed``, the null-variance
alternative (the same with ``null_variance=True``: the hull of the bootstrap interval and the
null-variance t interval); ``skew-t``, the gates' fixed-design rule (``method='skew-t'``: Hall's
skewness-corrected t with the variance floored at |bound|·δ, δ = 1/32 the step one judged fact moves
a group's MEG by on four-sentence references, :func:`pytest_posbias.stats.lattice_floor`);
``seq-t``, the group-sequential design (four looks, O'Brien–Fleming spending) with plain t tests;
``seq-gate``, the same with the null-variance t; ``seq-skew``, the same with the gates' rule
(``rule='skew-t'``, the same floor). The floor is the variance of net Poisson-like lattice events, the
mechanism the ``dense`` and ``sparse`` generators draw from; ``rare-jump`` adds jumps of 0.1 that are
not on the 1/32 lattice. docs/design.md section 5 says why the gates use ``skew-t``.
MEG threshold 0.02, α = 0.05, at 12 groups (the ``--quick`` size) and 48 (the default), in detect mode (false failures at the
boundary = size; failures at twice the threshold = power) and certify mode (false passes at the
boundary = size; passes at MEG 0 = certify power). Each over ``replicates`` seeded replicates, Clopper–Pearson 95% intervals;
``inconclusive`` counts refusals.

``--dpb`` prints the DPB gate's certify rows instead: a sparse base with rare +1/8 jumps at 8, 12, 24
and 48 groups, Student's t, the skewness-corrected t and the two together at half the level (both-t,
the certify rule), then two unit types with heavier tails at 48 groups (rare large jumps both ways;
rare large upward jumps), where the certify rule does not hold α.

Run: python benchmarks/decision_lattice.py [--replicates 1000] [--seed 0] [--n-resamples 1999] [--rules skew-t,seq-skew] [--dpb]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np
from scipy import stats as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias import stats as S
from pytest_posbias.gates import LOOKS
from pytest_posbias.stats.sequential import gsd_decide

THRESHOLD = 0.02
ALPHA = 0.05
STEP = 1.0 / 32.0

Generator = Callable[[np.random.Generator, int, float], np.ndarray]


def poisson_lattice(edge_rate: float) -> Generator:
    """Group MEGs (X − Y)/32 with X ~ Poisson(edge_rate), Y ~ Poisson(edge_rate + 32·|meg|)."""
    def gen(rng: np.random.Generator, n: int, meg: float) -> np.ndarray:
        x = rng.poisson(edge_rate, n)
        y = rng.poisson(edge_rate + abs(meg) / STEP, n)
        return np.clip((x - y) * STEP * (1 if meg <= 0 else -1), -1.0, 1.0)
    return gen


def rare_jump(rng: np.random.Generator, n: int, meg: float) -> np.ndarray:
    """An unbiased dense lattice (λ = 2 per side) plus whole middle slots dropped: a dropped slot
    of coverage 0.8 moves its group's MEG by −0.8/8 = −0.1; a group drops Poisson(|meg|/0.1) of them."""
    base = (rng.poisson(2.0, n) - rng.poisson(2.0, n)) * STEP
    jumps = rng.poisson(abs(meg) / 0.1, n) * -0.1
    return np.clip(base + jumps, -1.0, 1.0)


def big_jump(rng: np.random.Generator, n: int, meg: float) -> np.ndarray:
    """A sparse lattice (λ = 0.05 per side) plus rare jumps of −1/8: one slot's fact dropped in one
    of the four orders moves a group's MEG by −(1/2)/4 = −1/8; a group takes Poisson(|meg|·8) of them.
    Near-zero spread with a long lower tail: the case where a floored SD alone shrinks the skewness
    correction (docs/design.md section 5)."""
    base = (rng.poisson(0.05, n) - rng.poisson(0.05, n)) * STEP
    jumps = rng.poisson(abs(meg) / 0.125, n) * -0.125
    return np.clip(base + jumps, -1.0, 1.0)


# (label, null-variance t, group-sequential design, rule): the fixed design's bootstrap alone, its hull
# with the null-variance t, and the skewness-corrected t with the lattice floor (the gates' rule); the
# sequential design (the default) with the plain t, the null-variance t and the gates' rule
RULES = (("bootstrap", False, False, "bootstrap"), ("fixed", True, False, "bootstrap"), ("skew-t", False, False, "skew-t"),
         ("seq-t", False, True, "t"), ("seq-gate", True, True, "t"), ("seq-skew", False, True, "skew-t"))
CASES: dict[str, Generator] = {"dense": poisson_lattice(2.0), "sparse": poisson_lattice(0.05), "rare-jump": rare_jump,
                               "big-jump": big_jump}


def rate(k: int, n: int) -> str:
    """k/n with its Clopper–Pearson 95% interval."""
    ci = st.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact") if n else None
    return f"{k / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]" if ci else "-"


def run(case: str, n: int, meg: float, mode: str, replicates: int, seed: int, n_resamples: int,
        null_variance: bool, sequential: bool = False, rule: str = "bootstrap") -> tuple[int, int]:
    """(outcomes counted, inconclusive): detect counts failures, certify counts passes."""
    gen = CASES[case]
    rng = np.random.default_rng([seed, n, round(abs(meg) * 1e4), len(case), 1 if mode == "detect" else 2])
    hits = inconc = 0
    for r in range(replicates):
        v = gen(rng, n, -abs(meg))
        if sequential:
            d = gsd_decide(v, n_max=n, looks=LOOKS, lower=-THRESHOLD, upper=THRESHOLD, mode=mode, alpha=ALPHA,
                           kind="mean", null_variance=null_variance, rule="skew-t" if rule == "skew-t" else "t",
                           lattice_step=STEP if rule == "skew-t" else None)
            inconc += d.inconclusive
            hits += (not d.passed) if mode == "detect" else (d.passed and not d.inconclusive)
            continue
        verdict = S.mean_verdict(v, None, name="MEG", threshold=THRESHOLD, sides="both", mode=mode, alpha=ALPHA,
                                 unit="groups", n_resamples=n_resamples, rng=np.random.default_rng([seed, r]),
                                 value_range=(-1.0, 1.0), null_variance=null_variance,
                                 method="skew-t" if rule == "skew-t" else "percentile",
                                 lattice_step=STEP if rule == "skew-t" else None)
        inconc += verdict.inconclusive
        hits += (not verdict.passed) if mode == "detect" else (verdict.passed and not verdict.inconclusive)
    return hits, inconc


DPB_THRESHOLD = 0.05
DPB_JUMP = 0.125


def dpb_jump(rng: np.random.Generator, n: int, dpb: float) -> np.ndarray:
    """Group DPBs: a sparse base ((X − Y)/32, X, Y ~ Poisson(0.05)) plus Poisson(|dpb|/(1/8)) jumps of
    +1/8 per group (a slot's fact dropped in one order moves the weighted share by a sizeable step)."""
    base = (rng.poisson(0.05, n) - rng.poisson(0.05, n)) * STEP
    return np.clip(base + rng.poisson(abs(dpb) / DPB_JUMP, n) * DPB_JUMP, -1.0, 1.0)


def dpb_two_sided(rng: np.random.Generator, n: int, dpb: float) -> np.ndarray:
    """Group DPBs with rare large jumps both ways on a normal core: N(0, 0.03²), +0.25 with probability
    0.03, −0.12 with probability 0.03, centred, shifted to ``dpb`` (skewness about 2, excess kurtosis 10)."""
    x = 0.03 * rng.standard_normal(n) + 0.25 * (rng.random(n) < 0.03) - 0.12 * (rng.random(n) < 0.03)
    return np.clip(x - 0.03 * (0.25 - 0.12) + dpb, -1.0, 1.0)


def dpb_up_jumps(rng: np.random.Generator, n: int, dpb: float) -> np.ndarray:
    """Group DPBs with rare large upward jumps: N(0, 0.035²) plus +0.35 with probability 0.02, centred,
    shifted to ``dpb`` (skewness about 3.7, excess kurtosis 20)."""
    x = 0.035 * rng.standard_normal(n) + 0.35 * (rng.random(n) < 0.02)
    return np.clip(x - 0.02 * 0.35 + dpb, -1.0, 1.0)


def dpb_run(n: int, dpb: float, rule: str, sequential: bool, replicates: int, seed: int,
            units: Generator = dpb_jump) -> int:
    """Certify passes of the DPB gate (threshold 0.05, no floor) on ``units`` samples at ``dpb``."""
    rng = np.random.default_rng([seed, n, round(abs(dpb) * 1e4), 3])
    hits = 0
    for _ in range(replicates):
        v = units(rng, n, dpb)
        if sequential:
            d = gsd_decide(v, n_max=n, looks=LOOKS, lower=-DPB_THRESHOLD, upper=DPB_THRESHOLD, mode="certify",
                           alpha=ALPHA, kind="mean", rule=rule)
            hits += d.passed and not d.inconclusive
            continue
        verdict = S.mean_verdict(v, None, name="DPB", threshold=DPB_THRESHOLD, sides="both", mode="certify",
                                 alpha=ALPHA, unit="groups", rng=rng, method=rule, value_range=(-1.0, 1.0))
        hits += verdict.passed and not verdict.inconclusive
    return hits


def dpb_table(replicates: int, seed: int) -> None:
    """The DPB certify rows: Student's t, the skewness-corrected t and the two together at half the level
    (both-t, the gate's certify rule, gates.positional.t_rule), fixed and sequential, at the boundary
    +0.05 and at 0."""
    print(f"DPB certify on a sparse base with rare +1/8 jumps (threshold {DPB_THRESHOLD}, alpha {ALPHA}, "
          f"{replicates} replicates)")
    print(f"{'groups':>6} {'rule':<10}  {'certify size at boundary':<26} certify power at 0")
    for n in (8, 12, 24, 48):
        for label, rule, seq in (("t", "t", False), ("skew-t", "skew-t", False), ("both-t", "both-t", False),
                                 ("seq-t", "t", True), ("seq-skew", "skew-t", True), ("seq-both", "both-t", True)):
            cs = dpb_run(n, DPB_THRESHOLD, rule, seq, replicates, seed)
            cp = dpb_run(n, 0.0, rule, seq, replicates, seed)
            print(f"{n:>6} {label:<10}  {rate(cs, replicates):<26} {rate(cp, replicates)}", flush=True)
    print("heavier tails than the synthetic set's group DPBs, 48 groups: where the certify rule does not hold")
    for units in (dpb_two_sided, dpb_up_jumps):
        for label, rule, seq in (("t", "t", False), ("skew-t", "skew-t", False), ("both-t", "both-t", False),
                                 ("seq-both", "both-t", True)):
            cs = dpb_run(48, DPB_THRESHOLD, rule, seq, replicates, seed, units)
            cp = dpb_run(48, 0.0, rule, seq, replicates, seed, units)
            print(f"{units.__name__:<14} {label:<10}  {rate(cs, replicates):<26} {rate(cp, replicates)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-resamples", type=int, default=1999)
    ap.add_argument("--sizes", default="12,48")
    ap.add_argument("--rules", default="", help="comma-separated rule labels (default: all)")
    ap.add_argument("--dpb", action="store_true", help="print only the DPB certify rows")
    a = ap.parse_args(argv)
    if a.dpb:
        dpb_table(a.replicates, a.seed)
        return 0
    sizes = [int(x) for x in a.sizes.split(",")]
    print(f"mean gate on lattice units (MEG threshold {THRESHOLD}, alpha {ALPHA}, {a.replicates} replicates, "
          f"seed {a.seed}, {a.n_resamples} resamples)")
    print(f"{'case':<10} {'groups':>6} {'rule':<10}  {'detect size at boundary':<26} {'detect power at 2t':<26} "
          f"{'certify size at boundary':<26} {'certify power at 0':<26} inconclusive (det/cert)")
    for case in CASES:
        for n in sizes:
            for label, nv, seq, rule in RULES:
                if a.rules and label not in a.rules.split(","):
                    continue
                fs, i1 = run(case, n, THRESHOLD, "detect", a.replicates, a.seed, a.n_resamples, nv, seq, rule)
                fp, _ = run(case, n, 2 * THRESHOLD, "detect", a.replicates, a.seed, a.n_resamples, nv, seq, rule)
                cs, i2 = run(case, n, THRESHOLD, "certify", a.replicates, a.seed, a.n_resamples, nv, seq, rule)
                cp, _ = run(case, n, 0.0, "certify", a.replicates, a.seed, a.n_resamples, nv, seq, rule)
                print(f"{case:<10} {n:>6} {label:<10}  {rate(fs, a.replicates):<26} {rate(fp, a.replicates):<26} "
                      f"{rate(cs, a.replicates):<26} {rate(cp, a.replicates):<26} {i1}/{i2}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
