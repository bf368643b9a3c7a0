"""The positional mean gates on lattice-valued units: a group's MEG on four-sentence references is a
multiple of 1/32, and a sample piled on one lattice point has a small sample variance exactly where
its mean is far out. The gates decide MEG with Hall's skewness-corrected t, its variance floored at
|bound|·δ (the floor only removes rejections: the larger of the floored and unfloored p-values)
(docs/design.md section 5): seeded size and power at the boundary, the run decision under Holm, and
the lattice step read from the references; the operating characteristics over 10,000 replicates
are in ``benchmarks/decision_lattice.py``. The intervals' own inversions are in
``stats/test_rules.py``, DPB's and contamination's certify rules in ``gates/test_positional.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import SYNTHETIC
from support.lattice_units import EQUAL_ATTENTION_QUICK, STEP, T, big_jump

from pytest_posbias import stats as S
from pytest_posbias.gates import LOOKS
from pytest_posbias.gates.decision import gate_p_value, holm_adjust
from pytest_posbias.stats.sequential import gsd_decide


def _verdict(values: np.ndarray, *, null_variance: bool = False, mode: str = "detect", threshold: float = T,
             method: str = "percentile", lattice_step: float | None = None) -> S.Verdict:
    return S.mean_verdict(values, None, name="MEG", threshold=threshold, sides="both", mode=mode, alpha=0.05,
                          unit="groups", n_resamples=1999, rng=np.random.default_rng(0), null_variance=null_variance,
                          method=method, lattice_step=lattice_step)


def _gate(values: np.ndarray, mode: str = "detect") -> S.Verdict:
    """The fixed design's MEG gate: skewness-corrected t with the lattice floor."""
    return _verdict(values, mode=mode, method="skew-t", lattice_step=STEP)


def _seq(values: np.ndarray, mode: str = "detect", rule: str = "skew-t") -> S.Verdict:
    """The group-sequential MEG gate (n_max = the sample) as a Verdict with the fields the run-level
    decision reads (gates.sequential_verdict records the same)."""
    n = values.size
    d = gsd_decide(values, n_max=n, looks=LOOKS, lower=-T, upper=T, mode=mode, alpha=0.05, kind="mean", rule=rule,
                   lattice_step=STEP if rule == "skew-t" else None)
    return S.Verdict(name="MEG", estimate=d.estimate, ci_low=d.ci_low, ci_high=d.ci_high, threshold=T, n=d.stopped_at,
                     p_value=d.p_value, passed=d.passed, mode=mode, reason=d.reason, lower=-T, upper=T, unit="groups",
                     extra={"design": d.method, "looks": d.looks, "n_max": n, "kind": "mean"},
                     inconclusive=d.inconclusive)


def _sparse(rng: np.random.Generator, reps: int, n: int, meg: float) -> np.ndarray:
    """The benchmark's sparse lattice: (X − Y)/32, X ~ Poisson(0.05), Y ~ Poisson(0.05 + 32·|meg|)."""
    return (rng.poisson(0.05, (reps, n)) - rng.poisson(0.05 + abs(meg) / STEP, (reps, n))) * STEP


def test_certify_size_held_on_the_sparse_lattice_where_the_plain_rules_exceed_it() -> None:
    """At the boundary MEG = −t, 12 groups (the quick size), sparse lattice: the plain t and the
    bootstrap certified 0.068–0.080 of samples (benchmark); the gates' rule certifies at most α."""
    x = _sparse(np.random.default_rng(11), 400, 12, -T)
    gate = sum(_gate(v, "certify").passed for v in x)
    seq = sum(_seq(v, "certify").passed for v in x)
    plain = sum(_seq(v, "certify", rule="t").passed for v in x)
    assert gate <= 0.05 * 400 and seq <= 0.05 * 400
    assert plain > 0.05 * 400  # the rule it replaces does not hold the size here


def test_detect_size_held_at_the_boundary_on_the_dense_lattice() -> None:
    rng = np.random.default_rng(12)
    x = (rng.poisson(2.0, (400, 12)) - rng.poisson(2.0 + T / STEP, (400, 12))) * STEP
    fails = sum(not _gate(v).passed for v in x)
    assert fails <= 0.05 * 400 + 2 * math.sqrt(0.05 * 0.95 * 400)  # within two Monte Carlo SDs of α


def test_lattice_gate_fails_past_the_threshold_and_passes_at_zero() -> None:
    rng = np.random.default_rng(3)
    past = (rng.poisson(2.0, 48) - rng.poisson(2.0 + 0.06 * 32, 48)) / 32  # MEG -0.06, 3x the threshold
    assert not _gate(past).passed and not _seq(past).passed
    zero = (rng.poisson(2.0, 48) - rng.poisson(2.0, 48)) / 32
    assert _gate(zero).passed and _seq(zero).passed


def test_zero_spread_never_certifies() -> None:
    flat = np.full(12, -STEP / 4)
    v = _gate(flat, "certify")
    assert not v.passed and v.inconclusive
    d = _seq(flat, "certify")
    assert not d.passed and d.inconclusive
    # every unit past the bound still fails in detect mode (fail closed), with or without a floor
    past = np.full(12, -0.1)
    for threshold in (0.0, T):
        for step in (STEP, None):
            seq = gsd_decide(past, n_max=12, looks=LOOKS, lower=-threshold, upper=threshold, mode="detect", alpha=0.05,
                             kind="mean", rule="skew-t", lattice_step=step)
            assert not seq.passed and not seq.inconclusive


@pytest.mark.parametrize("groups", [9, 12])
def test_a_blatant_violation_fails_the_run_under_holm_at_164_gates(groups: int) -> None:
    """MEG −0.5 (middle-weak's on the quick set): the gates' rule gives p small enough that Holm over
    164 gates (163 compliant ones at p = 1) still fails the run, in the fixed and the sequential design;
    the null-variance t, whose statistic stays below √n, cannot (its p stays above α/164)."""
    blatant = np.random.default_rng(1).normal(-0.5, 0.08, groups)
    for v in (_gate(blatant), _seq(blatant)):
        assert not v.passed
        p = gate_p_value(v)
        assert p < 0.05 / 164
        assert holm_adjust([p] + [1.0] * 163)[0] <= 0.05
        assert holm_adjust([p] + [1.0] * 5)[0] <= 0.05
    nv = _verdict(blatant, null_variance=True)
    assert not nv.passed and nv.p_value > 0.05 / 164
    dpb = _verdict(blatant, method="t")  # the DPB gates' rule: Student's t, p falls with the distance too
    assert not dpb.passed and dpb.p_value < 0.05 / 164 and dpb.extra["method"] == "Student t"


def test_the_equal_attention_sample_is_a_per_gate_failure_but_not_a_run_failure_over_six_gates() -> None:
    """The quick-set sample that made sim:unbiased fail its equal-attention MEG gate: 8 of 12 groups
    at −1/32 (mean −0.034, SD 0.025, at the lattice floor). The gates' rule still reads it as a
    violation at α (p ≈ 0.02), as the plain rules did; Holm over the six MEG gates of ``-m meg``
    does not fail the run on it. The null-variance t passes it, at the price of bounded p-values."""
    v = _gate(EQUAL_ATTENTION_QUICK)
    assert not v.passed and 0.01 < v.p_value < 0.05
    assert v.extra["variance_floor_applied"]
    assert holm_adjust([v.p_value] + [1.0] * 5)[0] > 0.05
    assert _verdict(EQUAL_ATTENTION_QUICK, null_variance=True).passed


def test_hull_never_certifies_what_the_bootstrap_does_not() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        x = (rng.poisson(0.3, 12) - rng.poisson(0.3, 12)) / 32
        if np.ptp(x) == 0:
            continue
        boot = _verdict(x, mode="certify")
        hull = _verdict(x, null_variance=True, mode="certify")
        assert hull.ci_low <= boot.ci_low and hull.ci_high >= boot.ci_high
        assert not (hull.passed and not boot.passed)


def test_meg_lattice_step_comes_from_the_references() -> None:
    """One judged fact of a four-sentence reference at P = 4 over four cyclic orders moves a group's
    MEG by 1/32 (the synthetic set); every order of P = 4 (24) makes the step 24/4 times finer."""

    from pytest_posbias.data.manifest import load_manifest
    from pytest_posbias.gates.positional import meg_lattice_step
    from pytest_posbias.probes.positional import PositionalSpec
    from pytest_posbias.run.context import synthetic_manifest

    # built on first use (a test run alone in a fresh clone finds no set yet)
    manifest = load_manifest(synthetic_manifest(SYNTHETIC.parent.parent), check_files=False)

    class Ctx:
        def manifest(self) -> object:
            return manifest

    spec = PositionalSpec(domain="leisure", bucket="short", P=4)
    assert meg_lattice_step(Ctx(), spec) == pytest.approx(1 / 32)  # type: ignore[arg-type]
    full = PositionalSpec(domain="leisure", bucket="short", P=4, orders="full")
    assert meg_lattice_step(Ctx(), full) == pytest.approx(1 / (2 * 24 * 4))  # type: ignore[arg-type]


def test_certify_size_held_on_sparse_lattice_with_rare_big_jumps() -> None:
    """At MEG = −t, 12 groups, jumps of −1/8 on a sparse lattice: the floored statistic alone certified
    about 0.10 (benchmark); with the hull the fixed and sequential designs stay within two Monte Carlo
    SDs of α."""
    x = big_jump(np.random.default_rng(13), 400, 12, -T, -0.125)
    bound = 0.05 * 400 + 2 * math.sqrt(0.05 * 0.95 * 400)
    assert sum(_gate(v, "certify").passed for v in x) <= bound
    assert sum(_seq(v, "certify").passed for v in x) <= bound
