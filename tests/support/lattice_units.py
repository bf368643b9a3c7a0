"""Lattice-valued units of the positional gates, for the tests of their rules: the MEG lattice step,
the MEG threshold, a measured sample of sim:unbiased, and the sparse lattice with rare big jumps."""

from __future__ import annotations

import numpy as np

STEP = 1 / 32  # one judged fact of a four-sentence reference at P = 4, four cyclic orders: 1/(2·4·4)
T = 0.02  # the MEG threshold

# sim:unbiased, equal-attention prompt, leisure-short P = 4 on the quick set (12 groups, seed 0):
# 8 of the 12 group MEGs are exactly -1/32; the population MEG of the simulator is 0
EQUAL_ATTENTION_QUICK = np.array([-3, -2] + [-1] * 8 + [0, 0]) / 32


def big_jump(rng: np.random.Generator, reps: int, n: int, shift: float, jump: float) -> np.ndarray:
    """A sparse lattice (λ = 0.05 per side, step 1/32) plus Poisson(|shift|/|jump|) jumps of ``jump`` per group
    (benchmarks/decision_lattice.py ``big-jump``: one slot's fact dropped in one of four orders, −1/8)."""
    base = (rng.poisson(0.05, (reps, n)) - rng.poisson(0.05, (reps, n))) * STEP
    return np.clip(base + rng.poisson(abs(shift) / abs(jump), (reps, n)) * jump, -1.0, 1.0)
