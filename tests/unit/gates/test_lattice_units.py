"""The positional mean gates on lattice-valued units: a group's MEG on four-sentence references is a
multiple of 1/32, and a sample piled on one lattice point has a small sample variance exactly where
its mean is far out. The gates decide MEG with Hall's skewness-corrected t, its variance floored at
|bound|·δ (the floor only removes rejections: the larger of the floored and unfloored p-values), and
DPB with Student's t in detect mode and in certify mode with Student's and the skewness-corrected t together,
each at α/2 (docs/design.md section 5); the operating characteristics over 10,000 replicates are in
``benchmarks/decision_lattice.py``.

Placed with the gates' decision (``gates/decision.py``); the rules are ``stats/``'s."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from support import SYNTHETIC

from pytest_posbias import stats as S
from pytest_posbias.gates import LOOKS
from pytest_posbias.gates.decision import gate_p_value, holm_adjust
from pytest_posbias.stats.sequential import gsd_decide

STEP = 1 / 32  # one judged fact of a four-sentence reference at P = 4, four cyclic orders: 1/(2·4·4)
T = 0.02  # the MEG threshold

# sim:unbiased, equal-attention prompt, leisure-short P = 4 on the quick set (12 groups, seed 0):
# 8 of the 12 group MEGs are exactly -1/32; the population MEG of the simulator is 0
EQUAL_ATTENTION_QUICK = np.array([-3, -2] + [-1] * 8 + [0, 0]) / 32


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


def test_skew_t_interval_inverts_its_test() -> None:
    x = np.random.default_rng(2).gamma(2.0, 0.02, 20) - 0.03
    for floor in (0.0, T * STEP):
        st = S.skew_t(x, floor=floor)
        lo, hi = st.interval(0.05)
        assert st.p_greater(lo) == pytest.approx(0.05, abs=1e-9)
        assert st.p_less(hi) == pytest.approx(0.05, abs=1e-9)
        assert lo < float(x.mean()) < hi
    # no skewness and no floor: the Student t interval
    sym = np.array([-2.0, -1.0, 0.0, 1.0, 2.0]) / 32
    st = S.skew_t(sym)
    q = 2.131846786326649  # t_{0.95, 4}
    assert st.interval(0.05) == pytest.approx((-q * sym.std(ddof=1) / math.sqrt(5), q * sym.std(ddof=1) / math.sqrt(5)))


def test_lattice_floor_is_the_variance_of_net_lattice_events_at_the_bound() -> None:
    assert S.lattice_floor(-T, STEP) == pytest.approx(T * STEP)
    assert S.lattice_floor(T, None) == 0.0
    st = S.skew_t(np.array([0.0] * 11 + [-STEP]), floor=S.lattice_floor(T, STEP))
    assert st.floored and st.sd == pytest.approx(math.sqrt(T * STEP))


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


def test_null_variance_interval_inverts_its_test() -> None:
    lo, hi = S.null_variance_interval(EQUAL_ATTENTION_QUICK, alpha=0.05)
    assert S.null_variance_p(EQUAL_ATTENTION_QUICK, hi, "less") == pytest.approx(0.05, abs=1e-9)
    assert S.null_variance_p(EQUAL_ATTENTION_QUICK, lo, "greater") == pytest.approx(0.05, abs=1e-9)
    # the t interval widened by sqrt(n / (n - c^2))
    n, c = EQUAL_ATTENTION_QUICK.size, 1.7958848187036691
    s = EQUAL_ATTENTION_QUICK.std(ddof=1)
    assert hi - lo == pytest.approx(2 * c * s / math.sqrt(n - c * c), rel=1e-6)


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


def _big_jump(rng: np.random.Generator, reps: int, n: int, shift: float, jump: float) -> np.ndarray:
    """A sparse lattice (λ = 0.05 per side, step 1/32) plus Poisson(|shift|/|jump|) jumps of ``jump`` per group
    (benchmarks/decision_lattice.py ``big-jump``: one slot's fact dropped in one of four orders, −1/8)."""
    base = (rng.poisson(0.05, (reps, n)) - rng.poisson(0.05, (reps, n))) * STEP
    return np.clip(base + rng.poisson(abs(shift) / abs(jump), (reps, n)) * jump, -1.0, 1.0)


def test_the_floor_only_removes_rejections() -> None:
    """The floored SD shrinks γ = m₃/s_eff³; each p-value is the larger of the floored and unfloored
    statistics', so no sample is rejected with the floor that is not rejected without it."""
    rng = np.random.default_rng(4)
    shrunk = 0
    for _ in range(300):
        n = int(rng.integers(5, 30))
        lam = rng.uniform(0.02, 3.0)
        x = (rng.poisson(lam, n) - rng.poisson(lam + rng.uniform(0, 2), n)) / 32
        if np.ptp(x) == 0:
            continue
        floor = T / 32 * rng.uniform(0.5, 20)
        raw, fl = S.skew_t(x), S.skew_t(x, floor=floor)
        for b in (-T, T):
            assert fl.p_greater(b) >= raw.p_greater(b) - 1e-12
            assert fl.p_less(b) >= raw.p_less(b) - 1e-12
        lo, hi = fl.interval(0.05)
        rlo, rhi = raw.interval(0.05)
        assert lo <= rlo + 1e-12 and hi >= rhi - 1e-12
        if fl.unfloored is not None:
            alone = dataclasses.replace(fl, unfloored=None)
            shrunk += any(alone.p_less(b) < raw.p_less(b) or alone.p_greater(b) < raw.p_greater(b) for b in (-T, T))
    assert shrunk > 0  # the floored statistic alone does reject where the unfloored one does not


def test_certify_size_held_on_sparse_lattice_with_rare_big_jumps() -> None:
    """At MEG = −t, 12 groups, jumps of −1/8 on a sparse lattice: the floored statistic alone certified
    about 0.10 (benchmark); with the hull the fixed and sequential designs stay within two Monte Carlo
    SDs of α."""
    x = _big_jump(np.random.default_rng(13), 400, 12, -T, -0.125)
    bound = 0.05 * 400 + 2 * math.sqrt(0.05 * 0.95 * 400)
    assert sum(_gate(v, "certify").passed for v in x) <= bound
    assert sum(_seq(v, "certify").passed for v in x) <= bound


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
    x = _big_jump(np.random.default_rng(14), 400, 8, t_dpb, 0.125)
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
