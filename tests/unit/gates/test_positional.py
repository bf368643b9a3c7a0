"""The positional gates (gates.positional): DPB and contamination certify with Student's and the
skewness-corrected t together, each at alpha/2."""

from __future__ import annotations

import math

import numpy as np
from support.lattice_units import STEP, big_jump

from pytest_posbias import stats as S
from pytest_posbias.gates import LOOKS
from pytest_posbias.stats.sequential import gsd_decide


def test_dpb_certifies_with_both_t_rules_at_half_the_level() -> None:
    """DPB: Student's t certified |DPB| <= 0.05 from 7 groups at 0 and one at 1/16, and certified
    about 0.145 of samples at the boundary with rare jumps of 1/8 on a sparse base at 8 groups; the
    skewness-corrected t holds there but certified about 0.07 of boundary samples on heavy-tailed units
    on both sides (like sim:unbiased's group DPBs) at 48 groups. The certify rule (both at α/2) holds
    both. Detect keeps Student's t."""
    from pytest_posbias.gates.positional import t_rule

    assert t_rule("dpb", "certify") == "both-t" and t_rule("dpb", "detect") == "t" and t_rule("meg", "detect") == "skew-t"
    t_dpb = 0.05

    def certify(v: np.ndarray, method: str) -> bool:
        d = S.mean_verdict(v, None, name="DPB", threshold=t_dpb, sides="both", mode="certify", alpha=0.05,
                           unit="groups", rng=np.random.default_rng(0), method=method, value_range=(-1.0, 1.0))
        return d.passed and not d.inconclusive

    five = np.array([0.0, 0.0, 0.0, 0.0, STEP])
    assert not certify(five, "t") and not certify(five, t_rule("dpb", "certify"))  # fewer than 8 units: no t rule
    eight = np.array([0.0] * 7 + [2 * STEP])  # one group at 1/16 among eight
    assert certify(eight, "t") and not certify(eight, t_rule("dpb", "certify"))
    x = big_jump(np.random.default_rng(14), 400, 8, t_dpb, 0.125)
    bound = 0.05 * 400 + 2 * math.sqrt(0.05 * 0.95 * 400)
    assert sum(certify(v, "t") for v in x) > bound  # Student's t alone
    assert sum(certify(v, t_rule("dpb", "certify")) for v in x) <= bound
    seq = sum(gsd_decide(v, n_max=8, looks=LOOKS, lower=-t_dpb, upper=t_dpb, mode="certify", alpha=0.05, kind="mean",
                         rule=t_rule("dpb", "certify")).passed for v in x)
    assert seq <= bound
    # heavy tails on both sides at 48 groups: a normal core (SD 0.03) with rare +0.15 and −0.10 jumps
    rng = np.random.default_rng(15)
    reps = 1000
    core = 0.03 * rng.standard_normal((reps, 48))
    heavy = core + 0.15 * (rng.random((reps, 48)) < 0.04) - 0.10 * (rng.random((reps, 48)) < 0.03)
    heavy = heavy - (0.15 * 0.04 - 0.10 * 0.03) + t_dpb
    skew_alone = sum(certify(v, "skew-t") for v in heavy)
    both = sum(certify(v, t_rule("dpb", "certify")) for v in heavy)
    assert both <= 0.05 * reps < skew_alone


def test_contamination_certifies_with_both_t_rules_at_half_the_level() -> None:
    """A group's contamination rate is right-skewed near 0: most groups clean, a few contaminated in
    most slots. At the boundary (mean 0.10) Student's t alone certified about a fifth of such samples at
    24 groups; the certify rule (Student's and the skewness-corrected t at α/2 each) stays near α.
    Detect keeps Student's t."""
    from pytest_posbias.gates.positional import t_rule

    assert t_rule("contamination", "certify") == "both-t" and t_rule("contamination", "detect") == "t"
    assert t_rule("coverage", "certify") == "t"
    rng = np.random.default_rng(7)
    units = rng.binomial(4, rng.beta(0.2, 1.8, (400, 24))) / 4  # 4 slots a group, mean 0.10

    def certified(method: str) -> int:
        return sum(S.mean_verdict(v, None, name="contamination", threshold=0.10, sides="upper", mode="certify",
                                  unit="groups", rng=rng, method=method, value_range=(0.0, 1.0)).passed for v in units)

    bound = 0.05 * 400 + 2 * math.sqrt(0.05 * 0.95 * 400)
    assert certified("t") > bound  # the rule the gate does not use: past the size
    assert certified(t_rule("contamination", "certify")) <= bound


def test_a_gate_that_is_not_positional_is_refused_before_any_call() -> None:
    """positional_verdict(..., "bogus") raised a bare KeyError, and "flip" a ConfigError only after the probe's calls."""
    import pytest

    from pytest_posbias.errors import ConfigError
    from pytest_posbias.gates import positional_verdict

    class Ctx:
        mode, baseline, sequential = "detect", None, False

        def positional(self, *a, **k):
            raise AssertionError("a model call before the gate was checked")

        manifest = positional

    for gate in ("bogus", "flip"):
        with pytest.raises(ConfigError, match=repr(gate)):
            positional_verdict(Ctx(), gate, "m", None)  # type: ignore[arg-type]
