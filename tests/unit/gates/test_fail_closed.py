"""Gates that cannot be fooled: the futility side, the paired |mean| baseline, the measurement
floor, failed calls never scored as clean, and the attack's query cap (issues 12 and 15).

Placed with the gates, its subject; the rules checked live in ``gates/measurement.py``, ``stats/``
and ``probes/stressor.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_posbias.gates.measurement import Measurement, apply_floor, combine, floor_problem
from pytest_posbias.probes.stressor import StressorResult, StressorSpec, TextStats
from pytest_posbias.run_options import RunOptions
from pytest_posbias.stats import rate_verdict
from pytest_posbias.stats.paired import paired_abs_mean_verdict
from pytest_posbias.stats.sequential import gsd_decide, violation_alternative

LOOP = "the cat sat on the mat " * 4  # a 5-gram repeated: RR flag set
PLAIN = "a red circle moves left across a blue square in the frame"

# --------------------------------------------------------------------------- futility side


@pytest.mark.parametrize(("lower", "upper", "est", "side"), [
    (0.25, math.inf, 0.3, "below"),   # a floor: the alternative lies below it
    (-math.inf, 0.15, 0.0, "above"),  # a rate ceiling: above it
    (-0.02, 0.02, 0.01, "above"),     # two-sided, estimate positive: above +t
    (-0.02, 0.02, -0.01, "below"),    # two-sided, estimate negative: below −t
])
def test_the_futility_alternative_always_violates_the_region(lower, upper, est, side):
    th1 = violation_alternative(lower, upper, est)
    assert (th1 < lower) if side == "below" else (th1 > upper)


def test_coverage_floor_fails_a_violating_model_in_the_sequential_design():
    """True mean 0.13 against the 0.25 floor passed ~90% of the time (futility
    looked for a violation of 0.5, on the compliant side). A fixed one-sided t-test at n = 48 has
    power ~1 here (scipy's noncentral t); the sequential gate must come close."""
    rng = np.random.default_rng(12)
    n, sd, mu, floor = 48, 0.12, 0.13, 0.25
    ncp = (floor - mu) / (sd / math.sqrt(n))
    power_fixed = float(st.nct.sf(st.t.isf(0.05, n - 1), n - 1, ncp))
    assert power_fixed > 0.99
    fails = sum(not gsd_decide(np.clip(rng.normal(mu, sd, n), 0, 1), n_max=n, looks=4, lower=floor, upper=math.inf,
                               mode="detect", alpha=0.05, kind="mean").passed for _ in range(200))
    assert fails / 200 >= 0.95
    # and a compliant model (mean 0.5) is not failed
    fp = sum(not gsd_decide(np.clip(rng.normal(0.5, sd, n), 0, 1), n_max=n, looks=4, lower=floor, upper=math.inf,
                            mode="detect", alpha=0.05, kind="mean").passed for _ in range(200))
    assert fp == 0


def test_coverage_floor_futility_still_stops_a_clearly_compliant_model_early():
    rng = np.random.default_rng(3)
    d = gsd_decide(np.clip(rng.normal(0.6, 0.1, 48), 0, 1), n_max=48, looks=4, lower=0.25, upper=math.inf,
                   mode="detect", alpha=0.05, kind="mean")
    assert d.passed and d.stopped_at < 48


# --------------------------------------------------------------------------- paired |mean| baseline


def _groups(rng, mean, sd, groups=40, orders=4):
    vals = rng.normal(mean, sd, (groups, orders))
    return vals.ravel(), np.repeat(np.arange(groups), orders)


def _baseline_fail_rate(cand_mean, cand_sd, base_mean, base_sd, reps=60, margin=0.01):
    rng = np.random.default_rng(7)
    fails = 0
    for _ in range(reps):
        c, g = _groups(rng, cand_mean, cand_sd)
        b, _ = _groups(rng, base_mean, base_sd)
        v = paired_abs_mean_verdict(c, b, g, name="MEG", margin=margin)
        fails += not v.passed
    return fails / reps


def test_paired_baseline_estimate_is_the_difference_of_absolute_means():
    c = np.array([-0.1, -0.3, 0.1, -0.2, -0.1, 0.0])
    b = np.array([0.05, -0.05, 0.1, -0.1, 0.2, 0.0])
    v = paired_abs_mean_verdict(c, b, np.arange(6), name="MEG", margin=0.01)
    assert v.estimate == pytest.approx(abs(-0.6 / 6) - abs(0.2 / 6))  # |−0.1| − |0.0333|


def test_a_biased_candidate_fails_against_an_unbiased_baseline():
    # MEG −0.08 (4× the 0.02 threshold) with the per-instance spread of sim:unbiased (sd 0.18)
    assert _baseline_fail_rate(-0.08, 0.18, 0.0, 0.18) >= 0.8


def test_an_unbiased_but_noisier_candidate_passes():
    # the old mean |x_i| comparison failed this one ~90% of the time
    assert _baseline_fail_rate(0.0, 0.30, 0.0, 0.18) <= 0.1


def test_an_unbiased_candidate_passes_against_a_biased_baseline():
    assert _baseline_fail_rate(0.0, 0.18, -0.08, 0.18) == 0.0


# --------------------------------------------------------------------------- measurement floor


def _verdict():
    return rate_verdict(0, 8, name="order flip rate", threshold=0.15, mode="detect", alpha=0.05, unit="items")


def test_no_unit_measured_never_passes_in_either_mode():
    m = Measurement("items", planned=8, measured=0, lost={"failed_or_unparseable_answers": 8}, calls=8, failed_calls=8)
    for mode in ("detect", "certify"):
        v = rate_verdict(0, 1, name="x", threshold=0.15, mode=mode)
        out = apply_floor(v, m)
        assert not out.passed
        assert "no measurement: 8 of 8 model calls failed or returned nothing" in out.reason
        assert out.extra["measurement"]["floor_met"] is False


def test_measurement_floor_boundary():
    assert floor_problem(Measurement("items", 100, 95, {"x": 5}), 0.95) is None
    assert "94 of 100" in (floor_problem(Measurement("items", 100, 94, {"x": 6}), 0.95) or "")
    assert floor_problem(Measurement("items", 0, 0), 0.95).startswith("no measurement: no items planned")
    # failed calls past 1 − floor fail even when every unit has some measured outputs
    p = floor_problem(Measurement("videos", 10, 10, calls=100, failed_calls=6), 0.95)
    assert p is not None and "6 of 100" in p
    assert floor_problem(Measurement("videos", 10, 10, calls=100, failed_calls=5), 0.95) is None


def test_a_passing_verdict_with_enough_units_keeps_its_decision():
    v = apply_floor(_verdict(), Measurement("items", 8, 8))
    assert v.passed and v.extra["measurement"]["planned"] == 8


def test_combined_candidate_and_baseline_measurement_names_the_baseline_losses():
    m = combine(Measurement("items", 10, 10), Measurement("items", 10, 7, {"errors": 3}), prefix_b="baseline")
    assert m.measured == 7 and m.lost == {"baseline errors": 3}


# --------------------------------------------------------------------------- stressor probe: failed calls


def _result(clean, variants, cap=30):
    """A stressor result from (text, ok) pairs: ``clean`` per video, ``variants`` per video."""
    def ts(pairs):
        return TextStats([t for t, _ in pairs], ["stop"] * len(pairs), [ok for _, ok in pairs])

    spec = StressorSpec(videos=len(clean), frames=32, trials=len(variants[0]), attack_cap=cap)
    r = StressorResult("sim:test", spec, [f"v{i}" for i in range(len(clean))], ts(clean), planned=len(clean))
    r.variants["delete1"] = [ts(v) for v in variants]
    r.variants["shuffle"] = [ts(v) for v in variants]
    return r


def test_failed_calls_are_not_clean_outputs():
    r = _result([("", False), (PLAIN, True)], [[("", False)] * 4, [(LOOP, True), ("", False), (PLAIN, True), ("", False)]])
    assert r.clean.valid.tolist() == [False, True]
    assert r.clean.summary()["n"] == 1 and r.clean.summary()["failed"] == 1
    amp = r.amplification("shuffle")
    assert math.isnan(amp[0])  # clean call failed: the video is lost, not "no amplification"
    assert amp[1] == pytest.approx(0.5)  # 1 of the 2 measured variants repeats; failed ones excluded


def test_the_attack_walk_stops_at_the_cap_for_delete1_too():
    """Delete-1 walked all T variants; every walk stops at ``attack_cap``."""
    walk = [(PLAIN, True)] * 31 + [(LOOP, True)]  # the first repetitive output is query 32
    r = _result([(PLAIN, True)], [walk], cap=30)
    for s in ("delete1", "shuffle"):
        a = r.attack(s)
        assert a["attacked"] == 1 and a["successes"] == 0 and a["asr"] == 0.0
    r2 = _result([(PLAIN, True)], [walk], cap=32)
    assert r2.attack("delete1")["successes"] == 1 and r2.attack("delete1")["aq"] == 32


def test_an_attack_walk_that_meets_a_failed_call_is_lost_not_a_defence():
    r = _result([(PLAIN, True), (PLAIN, True)], [[(PLAIN, True), ("", False), (LOOP, True)], [(PLAIN, True)] * 3])
    out, lost = r.attack_outcomes("shuffle")
    assert out == [0.0] and lost == 1


# --------------------------------------------------------------------------- through the real probes


class _Flaky:
    """Wraps a backend: the calls whose request hash falls below ``share`` fail (as an endpoint
    error would), the others are answered by the wrapped backend."""

    def __init__(self, inner, share):
        self.inner, self.share = inner, share
        self.name, self.max_batch_size = inner.name, inner.max_batch_size
        self.supports_letter_logprobs = inner.supports_letter_logprobs

    def identity(self):
        return {**self.inner.identity(), "flaky": self.share}

    def _fails(self, r):
        import hashlib
        import json

        h = hashlib.sha256(json.dumps([str(r.meta), r.seed, r.replicate], sort_keys=True).encode()).digest()
        return int.from_bytes(h[:4], "little") / 2**32 < self.share

    def generate(self, reqs):
        from pytest_posbias.engine import Generation

        ok = [r for r in reqs if not self._fails(r)]
        gens = iter(self.inner.generate(ok) if ok else [])
        return [Generation(finish_reason="error", error="injected: HTTP 503") if self._fails(r) else next(gens)
                for r in reqs]

    def score_generations(self, reqs):
        from pytest_posbias.engine import Generation

        out = []
        for r in reqs:
            if self._fails(r):
                out.append(Generation(finish_reason="error", error="injected: HTTP 503"))
            else:
                out.append(Generation("", 0, "stop", dict(self.inner.score_options([r], r.letters)[0])))
        return out

    def score_options(self, reqs, letters):
        return self.inner.score_options(reqs, letters)

    def close(self):
        self.inner.close()


def _context(tmp_path, manifest, share, *, mode="detect"):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext

    pcfg = PosbiasConfig(probes={"phase": {"items": 12}, "stressor": {"videos": 6, "trials": 2, "frames": [16]}})
    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), cache=str(tmp_path / "cache"), data=str(manifest),
                                       sequential=False, mode=mode, judge="auto"),
                            pcfg, rootdir=tmp_path,
                            worker="t", run_id=f"flaky-{share}")
    if share:
        ctx._backends["sim:unbiased"] = _Flaky(ctx.backend("sim:unbiased"), share)
    return ctx


def test_every_call_failing_is_no_measurement_not_a_pass(tmp_path, small_set):
    """8/8 failed calls gave order PASS and clean repetition PASS."""
    from pytest_posbias.gates import phase_verdict, stressor_verdict

    ctx = _context(tmp_path, small_set, 1.0)
    try:
        for mode in ("detect", "certify"):
            ctx.mode = mode  # the probes are memoized: only the decision is recomputed
            for v in (phase_verdict(ctx, "order", "sim:unbiased"), stressor_verdict(ctx, "repetition", "sim:unbiased", 16),
                      stressor_verdict(ctx, "stressor", "sim:unbiased", 16, "shuffle"),
                      stressor_verdict(ctx, "attack", "sim:unbiased", 16, "shuffle")):
                assert not v.passed, v.reason
                assert "no measurement" in v.reason
                assert v.extra["measurement"]["measured"] == 0
    finally:
        ctx.close()


def test_a_few_failed_calls_past_the_floor_fail_and_below_it_pass(tmp_path, small_set):
    """10% of calls failing is past the 5% failure share: the stressor gates fail in detect mode
    although sim:unbiased never loops; with every call answered they pass."""
    from pytest_posbias.gates import stressor_verdict

    clean_ctx = _context(tmp_path / "a", small_set, 0.0)
    flaky_ctx = _context(tmp_path / "b", small_set, 0.10)
    try:
        good = stressor_verdict(clean_ctx, "stressor", "sim:unbiased", 16, "shuffle")
        bad = stressor_verdict(flaky_ctx, "stressor", "sim:unbiased", 16, "shuffle")
        assert good.passed and good.extra["measurement"]["failed_calls"] == 0
        m = bad.extra["measurement"]
        assert m["failed_calls"] > 0.05 * m["calls"]
        assert not bad.passed
        assert "too many failed model calls" in bad.reason or "measurement floor not met" in bad.reason
        # the gate counts exactly the failed calls behind it: the clean calls and the shuffle walk's
        res = flaky_ctx.stressor("sim:unbiased", 16)
        behind = [res.clean, *res.variants["shuffle"]]
        assert m["failed_calls"] == sum(not ok for t in behind for ok in t.ok) > 0
        assert m["calls"] == sum(len(t.ok) for t in behind)
        assert bad.extra["measurement"]["measured"] < 6 or m["failed_calls"] > 0.05 * m["calls"]
    finally:
        clean_ctx.close()
        flaky_ctx.close()


# --------------------------------------------------------------------------- PhaseFusion equivalence (TOST)


class _Ctx:
    """The few RunContext members the equivalence gate reads."""

    alpha, mode, n_resamples, floor = 0.05, "detect", 1999, 0.95

    def phase_spec(self):
        from pytest_posbias.probes.phase import PhaseSpec

        return PhaseSpec(items=240, budget=8, phases=3, orderings=1, samplers=("left",), resolution=64, max_new_tokens=4)

    def threshold(self, gate, model):
        return 0.025

    def rng(self, *keys):
        return np.random.default_rng(0)


def _phase_result(n_items, fused_wrong, single_wrong):
    """Text-mode result: the three phase answers vote; ``fused_wrong``/``single_wrong`` items answer 1
    (the truth is 0) in every phase / in the single pass at 32 frames."""
    from types import SimpleNamespace

    items = [SimpleNamespace(id=f"q{i}", video=f"v{i // 5}", answer=0) for i in range(n_items)]
    ph = np.zeros((n_items, 1), dtype=int)
    ph[list(fused_wrong)] = 1
    single = np.zeros((n_items, 1), dtype=int)
    single[list(single_wrong)] = 1
    answers = {f"phase:{s}": ph.copy() for s in range(3)} | {"budget:left@32": single}
    return SimpleNamespace(items=items, condition_answers=answers, condition_probs={}, mode="text", planned=n_items,
                           correct=lambda: np.zeros(n_items, dtype=int))


def test_equivalence_is_certified_only_when_shown_in_either_mode():
    from pytest_posbias.gates import equivalence_verdict, phase_gate_conditions, phase_measurement

    ctx = _Ctx()
    conds = phase_gate_conditions("equivalence", None, ctx.phase_spec(), lambda s: s)
    assert conds[-1] == "budget:left@32"
    # fusion and the single pass differ on a few items, both ways: equivalence shown
    close = _phase_result(240, fused_wrong=range(0, 240, 80), single_wrong=range(40, 240, 80))
    v = equivalence_verdict(ctx, "m", close, conds, phase_measurement(close, conds))
    assert v.passed and v.estimate == 0.0 and not v.inconclusive
    # identical on every item: zero spread gives a zero-width interval, which certifies nothing
    same = _phase_result(240, fused_wrong=range(0, 240, 10), single_wrong=range(0, 240, 10))
    v = equivalence_verdict(ctx, "m", same, conds, phase_measurement(same, conds))
    assert not v.passed and v.inconclusive and v.estimate == 0.0
    # fusion loses 5 points (12 of 240 items right in one pass only): equivalence not shown, in detect mode too
    worse = _phase_result(240, fused_wrong=range(0, 240, 20), single_wrong=())
    v = equivalence_verdict(ctx, "m", worse, conds, phase_measurement(worse, conds))
    assert not v.passed and v.estimate == pytest.approx(-12 / 240)
    assert v.extra["fusion_by"] == "plurality vote" and v.n == 48  # clustered by video


# --------------------------------------------------------------------------- the report never reads "ALL PASSED" by default


def _report_text(tmp_path, header_extra, verdicts=()):
    import json
    import re

    from pytest_posbias import SCHEMA_VERSION
    from pytest_posbias.report.render import render

    log = tmp_path / "run.jsonl"
    header = {"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": "r", "models": ["openai:x"], "seed": 0,
              "mode": "detect", "alpha": 0.05, "started": "2026-11-30T00:00:00+00:00", "command": ["pytest"],
              "calls": {}, "environment": {}, **header_extra}
    log.write_text("\n".join(json.dumps(r) for r in [header, *verdicts]) + "\n")
    html = re.sub(r"<style.*?</style>", "", render([log]), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_run_that_decided_nothing_is_not_reported_as_passed(tmp_path):
    """The run stopped at start (exit 4, endpoint unreachable): 0 gates must not read ALL PASSED."""
    txt = _report_text(tmp_path, {"exitstatus": 4})
    assert "ALL PASSED" not in txt
    assert "RUN DID NOT FINISH (pytest exit 4)" in txt and "NO GATE DECIDED" in txt


def test_tests_that_ended_without_a_verdict_are_named(tmp_path):
    v = _verdict().to_dict() | {"kind": "verdict", "nodeid": "suites/t.py::test_order", "p_bh": 1.0}
    txt = _report_text(tmp_path, {"exitstatus": 1, "errored_tests": [
        {"nodeid": "suites/t.py::test_dpb[x]", "when": "call", "message": ["KeyError: 'phase:0'"]}]}, [v])
    assert "ALL PASSED" not in txt
    assert "1 TESTS ENDED WITHOUT A VERDICT" in txt and "test_dpb[x]" in txt and "KeyError" in txt


class _Garbage(_Flaky):
    """Answers every request with ``text`` (an empty answer, or words that match no reference)."""

    def __init__(self, inner, text):
        super().__init__(inner, 0.0)
        self.text = text

    def identity(self):
        return {**self.inner.identity(), "garbage": self.text}

    def generate(self, reqs):
        from pytest_posbias.engine import Generation

        return [Generation(self.text, len(self.text.split()), "stop") for _ in reqs]


@pytest.mark.parametrize("text", ["", "Lorem ipsum dolor sit amet. Consectetur adipiscing elit."])
def test_a_model_writing_garbage_does_not_pass_meg_or_dpb(tmp_path, small_set, text):
    """Every multi-video output empty or unalignable gave 6 x MEG PASS (MEG = 0, CI ±5e-12)."""
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.gates import positional_verdict
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.run.suite_params import positional_spec

    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), cache=str(tmp_path / "c"), data=str(small_set),
                                       sequential=True, judge="auto"),
                            PosbiasConfig(probes={"positional": {"groups": 8, "scales": [4]}}), rootdir=tmp_path,
                            worker="t", run_id="garbage")
    ctx._backends["sim:unbiased"] = _Garbage(ctx.backend("sim:unbiased"), text)
    try:
        spec = positional_spec(ctx.probe_settings("positional"), "cooking", "short", 4)
        for gate in ("meg", "dpb"):
            v = positional_verdict(ctx, gate, "sim:unbiased", spec)
            assert not v.passed, v.reason
            assert "no measurement" in v.reason
            lost = v.extra["measurement"]["lost"]
            # an empty answer, and the same text to every group, are lost units with their reason
            assert lost == {("empty_answer" if not text else "constant_answer"): v.extra["measurement"]["planned"]}
        cov = positional_verdict(ctx, "coverage", "sim:unbiased", spec)
        assert not cov.passed and "no measurement" in cov.reason  # neither is scored at zero coverage
        contam = positional_verdict(ctx, "contamination", "sim:unbiased", spec)
        assert not contam.passed and "no measurement" in contam.reason  # no slot matches any reference
    finally:
        ctx.close()


# --------------------------------------------------------------------------- paired sign-flip permutation test


def test_sign_flip_p_is_exact_on_a_hand_worked_case():
    """Four clusters, d = (1, 2, 3, −1): of the 2^4 sign patterns of (1, 2, 3, 1), the sums >= 5
    are (1,2,3,±1) → 7, 5 and (−1,2,3,1) → 5: 3 of 16, so p = 3/16 for 'greater' at δ0 = 0."""
    from pytest_posbias.stats.paired import sign_flip_p

    assert sign_flip_p([1.0, 2.0, 3.0, -1.0], [0, 1, 2, 3], 0.0, alternative="greater") == pytest.approx(3 / 16)


def test_permutation_verdict_agrees_with_its_inverted_interval():
    from pytest_posbias.stats.paired import paired_permutation_verdict

    rng = np.random.default_rng(4)
    d = rng.normal(0.08, 0.1, 120)
    g = np.repeat(np.arange(30), 4)
    v = paired_permutation_verdict(d, g, name="Δ coverage", threshold=0.0, sides="upper", n_resamples=2000)
    assert not v.passed and v.ci_low > 0.0 and v.p_value < 0.05  # a clear violation, CI and p agree
    ok = paired_permutation_verdict(d - 0.08, g, name="Δ coverage", threshold=0.0, sides="upper", n_resamples=2000)
    assert ok.passed and ok.ci_low <= 0.0
    # the interval brackets the estimate and is close to the t interval on cluster means (symmetric data)
    means = d.reshape(30, 4).mean(axis=1)
    t_lo = means.mean() - st.t.ppf(0.95, 29) * means.std(ddof=1) / math.sqrt(30)
    assert v.ci_low < v.estimate < v.ci_high and v.ci_low == pytest.approx(t_lo, abs=0.01)


def test_empty_descriptions_are_lost_not_clean(tmp_path, small_set):
    """A server answering "" to every description gave repetition and attack PASS."""
    from pytest_posbias.gates import stressor_verdict

    ctx = _context(tmp_path, small_set, 0.0)
    ctx._backends["sim:unbiased"] = _Garbage(ctx.backend("sim:unbiased"), "")
    try:
        for gate, s in (("repetition", None), ("attack", "add1"), ("stressor", "add1")):
            v = stressor_verdict(ctx, gate, "sim:unbiased", 16, s)
            assert not v.passed and "no measurement" in v.reason, v.reason
    finally:
        ctx.close()


def test_amplification_counts_videos_whose_clean_output_repeats():
    """RR stressed − RR clean over every measured video (VideoSTF). Restricting to clean-benign videos
    selects on the clean outcome and, for loops that are random per request, reads regression to
    the mean as amplification; so a clean-repetitive video counts, with d = share − 1."""
    r = _result([(LOOP, True), (PLAIN, True)], [[(LOOP, True), (PLAIN, True)], [(LOOP, True), (PLAIN, True)]])
    amp = r.amplification("shuffle")
    assert amp[0] == pytest.approx(-0.5) and amp[1] == pytest.approx(0.5)
    from pytest_posbias.gates import stressor_measurement

    m = stressor_measurement(r, "stressor", "shuffle")
    assert (m.planned, m.measured, sum(m.lost.values())) == (2, 2, 0)


def test_paired_measurement_counts_the_units_both_arms_measured():
    """Candidate loses item 1, baseline item 2 (of 20): the paired decision rests on 18, below the floor."""
    m = combine(Measurement("items", 20, 19, {"f": 1}), Measurement("items", 20, 19, {"f": 1}), prefix_b="baseline",
                measured=18)
    assert m.measured == 18 and floor_problem(m, 0.95) is not None


@pytest.mark.parametrize(("line", "why"), [
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ('{"type": "video", "id": "v\\ud800", "path": "x.mp4"}', "lone surrogate"),  # the JSON escape \ud800
])
def test_hostile_manifest_lines_are_reported_not_raised(tmp_path, line, why):
    from pytest_posbias.data.manifest import load_manifest

    p = tmp_path / "m.jsonl"
    p.write_text(line + "\n", encoding="utf-8")
    m = load_manifest(p, check_files=False)
    assert any(why in str(x) for x in m.problems), [str(x) for x in m.problems]


def test_a_zero_spread_mean_gate_is_decided_on_the_exact_floor_in_the_sequential_design():
    """Every group's contamination rate 0: in certify mode 40 groups show the rate under 0.10 on the
    exact worst-case floor (the fixed design's rule), 20 groups cannot; neither is inconclusive."""
    from types import SimpleNamespace

    from pytest_posbias.gates.decision import not_measured_reason
    from pytest_posbias.gates.design import sequential_verdict

    ctx = SimpleNamespace(mode="certify", alpha=0.05, threshold=lambda gate, model: 0.10)
    kw = {"values_at": lambda n: np.zeros(n), "kind": "mean", "name": "contaminated-slot rate", "unit": "groups",
          "extra": {}}
    v = sequential_verdict(ctx, "contamination", "m", n_max=40, **kw)
    assert v.passed and not v.inconclusive and 0.0 == v.ci_low < v.ci_high < 0.10 and v.p_value < 0.05
    assert "exact worst-case floor" in v.extra["design"]
    w = sequential_verdict(ctx, "contamination", "m", n_max=20, **kw)
    assert not w.passed and not w.inconclusive and not_measured_reason(w) is None and w.ci_high > 0.10
    # a rate at the threshold in every group is never certified under it
    at = sequential_verdict(ctx, "contamination", "m", n_max=40, **{**kw, "values_at": lambda n: np.full(n, 0.10)})
    assert not at.passed


def test_a_baseline_contamination_rise_certifies_with_both_t_rules_and_from_40_groups_only():
    """Candidate − baseline slot rates are right-skewed rare events: at the margin the percentile
    bootstrap certified about a tenth of samples at 48 groups; the gate's certify rule (both t rules
    at α/2) stays near α there and does not decide from fewer than 40 groups. Detect keeps the bootstrap."""
    from types import SimpleNamespace

    from pytest_posbias.gates.verdict_builders import baseline_gate
    from pytest_posbias.stats import mean_verdict

    def ctx(mode: str) -> SimpleNamespace:
        return SimpleNamespace(mode=mode, alpha=0.05, baseline="b", n_resamples=999, paired_test="bootstrap",
                               pcfg=SimpleNamespace(margins=lambda: {"contamination": 0.05}),
                               rng=lambda *keys: np.random.default_rng(0))

    rng = np.random.default_rng(11)

    def rates(groups: int, mean: float) -> np.ndarray:
        return rng.binomial(4, np.repeat(rng.beta(0.2, 0.2 * (1 - mean) / mean, groups), 4)) / 4

    few = baseline_gate(ctx("certify"), "contamination", "m", rates(24, 0.02), rates(24, 0.02),
                        np.repeat(np.arange(24), 4), name="contaminated-slot rate", unit="groups", worse="higher")
    assert few.inconclusive and not few.passed and "fewer than 40 groups (24 on both sides)" in few.reason
    clusters = np.repeat(np.arange(48), 4)
    samples = [(rates(48, 0.07), rates(48, 0.02)) for _ in range(300)]  # mean rise 0.05: the margin
    gate = sum(baseline_gate(ctx("certify"), "contamination", "m", c, b, clusters, name="contaminated-slot rate",
                             unit="groups", worse="higher").passed for c, b in samples)
    boot = sum(mean_verdict(c - b, clusters, name="rise", threshold=0.05, sides="upper", mode="certify",
                            n_resamples=999, rng=np.random.default_rng(0)).passed for c, b in samples)
    bound = 0.05 * 300 + 2 * math.sqrt(0.05 * 0.95 * 300)
    assert boot > bound >= gate
    detect = baseline_gate(ctx("detect"), "contamination", "m", *samples[0], clusters, name="contaminated-slot rate",
                           unit="groups", worse="higher")
    assert "bootstrap" in detect.extra["method"]
