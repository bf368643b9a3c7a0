"""report.compare: candidate vs baseline from run-log records: which records each arm keeps, the pairing, the
paired differences against a direct computation, their direction, the side-by-side verdicts and the arms
two run logs (or one with a baseline) give."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_posbias.report.compare import (
    Arm,
    arms_for,
    compare,
    positional_differences,
    repetition_differences,
    side_by_side,
)
from pytest_posbias.report.render import Run

CAND, BASE = "sim:candidate", "sim:baseline"


def _instance(model, spec, P, group, order, cov, **kw):
    return {"kind": "observation", "probe": "positional", "type": "instance", "model": model, "spec": spec, "P": P,
            "group": group, "order": list(order), "slots": [{"coverage": c} for c in cov], **kw}


def _summary(model, frames, videos, flags):
    return {"kind": "observation", "probe": "stressor", "type": "summary", "model": model,
            "settings": {"frames": frames}, "videos": videos, "clean_flags": flags}


def _verdict(nodeid, name, passed, model=None, estimate=0.1):
    extra = {"model": model} if model else {}
    return {"kind": "verdict", "nodeid": nodeid, "name": name, "passed": passed, "estimate": estimate,
            "ci_low": estimate - 0.05, "ci_high": estimate + 0.05, "extra": extra}


def _arm(write_run_log, records, model=CAND, name="run"):
    return Arm(Run(write_run_log(name, header={"models": [model]}, records=records)), model, model)


def _dpb(cov):
    """DPB written out: Σ α_p C_p / Σ C_p with α_p = (2p − P − 1)/(P − 1), p = 1..P."""
    cov = np.asarray(cov, float)
    P = cov.shape[1]
    alpha = (2 * np.arange(1, P + 1) - P - 1) / (P - 1)
    return (cov * alpha).sum(axis=1) / cov.sum(axis=1)


def test_an_arm_keeps_its_models_valid_main_instances_with_some_coverage(write_run_log):
    """Other models, other variants, invalid, unmeasured, wrong-length and all-zero instances are not units."""
    spec = "cooking-short-P2"
    records = [_instance(CAND, spec, 2, "g1", (0, 1), [1, 0]),
               _instance(BASE, spec, 2, "g2", (0, 1), [1, 0]),
               _instance(CAND, spec, 2, "g3", (0, 1), [1, 0], variant="no-separator"),
               _instance(CAND, spec, 2, "g4", (0, 1), [1, 0], valid=False),
               _instance(CAND, spec, 2, "g5", (0, 1), [1, None]),
               _instance(CAND, spec, 2, "g6", (0, 1), [1]),
               _instance(CAND, spec, 2, "g7", (0, 1), [0, 0])]
    assert _arm(write_run_log, records).instances() == {(spec, 2): {("g1", (0, 1)): [1.0, 0.0]}}


def test_an_instance_logged_again_by_a_later_look_counts_once_with_its_last_record(write_run_log):
    """The same (group, order) twice: one unit, the later record's coverage."""
    spec = "news-long-P2"
    records = [_instance(CAND, spec, 2, "g1", (1, 0), [0.2, 0.4]), _instance(CAND, spec, 2, "g1", (1, 0), [0.5, 0.5])]
    assert _arm(write_run_log, records).instances() == {(spec, 2): {("g1", (1, 0)): [0.5, 0.5]}}


def test_clean_flags_come_from_each_frame_counts_final_look(write_run_log):
    """Per frame count the summary with the most videos (the last look) is kept; a ragged one is dropped."""
    records = [_summary(CAND, 8, ["a", "b", "c"], [1, 0, 1]), _summary(CAND, 8, ["a"], [0]),
               _summary(CAND, 16, ["a", "b"], [1]), _summary(BASE, 8, ["a", "b", "c", "d"], [0, 0, 0, 0])]
    assert _arm(write_run_log, records).clean_flags() == {8: {"a": 1, "b": 0, "c": 1}}


def test_an_arms_verdicts_are_keyed_by_test_function_and_gate_name(write_run_log):
    """(function without parameters, gate name) -> verdict; another model's verdicts belong to the other arm."""
    records = [_verdict("suites/test_positional.py::test_dpb[cooking-short-P2]", "DPB cooking-short-P2", True, CAND),
               _verdict("suites/test_positional.py::test_dpb[cooking-short-P2]", "DPB cooking-short-P2", False, BASE),
               _verdict("suites/test_phase.py::test_flip", "flip rate", True)]  # no model: the run's own
    got = _arm(write_run_log, records).verdicts()
    assert set(got) == {("test_dpb", "DPB cooking-short-P2"), ("test_flip", "flip rate")}
    assert got[("test_dpb", "DPB cooking-short-P2")]["passed"] is True


def _positional_arms(write_run_log, rng, *, cand_tilt, base_tilt, spec="leisure-short-P2", groups=12):
    recs = []
    for model, tilt in ((CAND, cand_tilt), (BASE, base_tilt)):
        for g in range(groups):
            for order in ((0, 1), (1, 0)):
                first = 0.6 + tilt + rng.uniform(-0.05, 0.05)
                second = 0.6 - tilt + rng.uniform(-0.05, 0.05)
                recs.append(_instance(model, spec, 2, f"g{g:02d}", order, [first, second]))
    recs.append(_instance(CAND, spec, 2, "only-cand", (0, 1), [1.0, 0.1]))  # unpaired: left out
    run = Run(write_run_log("both", header={"models": [CAND], "baseline": BASE}, records=recs))
    return Arm(run, CAND, CAND), Arm(run, BASE, BASE), recs


def test_positional_difference_is_the_paired_abs_mean_difference_computed_directly(write_run_log):
    """Δ = |mean DPB cand| − |mean DPB base| over the instances both arms measured, DPB written out by hand."""
    cand, base, recs = _positional_arms(write_run_log, np.random.default_rng(1), cand_tilt=0.3, base_tilt=0.0)
    [row] = positional_differences(cand, base, alpha=0.05)
    cov = {m: np.array([[s["coverage"] for s in r["slots"]] for r in recs if r["model"] == m and r["group"] != "only-cand"])
           for m in (CAND, BASE)}
    dc, db = _dpb(cov[CAND]).mean(), _dpb(cov[BASE]).mean()
    assert row["cand"] == pytest.approx(dc) and row["base"] == pytest.approx(db)
    assert row["delta"] == pytest.approx(abs(dc) - abs(db))
    assert (row["n_groups"], row["n_instances"], row["stat"]) == (12, 24, "DPB")
    assert row["low"] <= row["delta"] <= row["high"] and row["direction"] == "worse"


def test_the_direction_follows_the_interval(write_run_log):
    """A baseline with the primacy tilt and an even candidate: 'better'; two even arms: 'no clear change'."""
    cand, base, _ = _positional_arms(write_run_log, np.random.default_rng(2), cand_tilt=0.0, base_tilt=0.3)
    [row] = positional_differences(cand, base, alpha=0.05)
    assert row["high"] < 0 and row["direction"] == "better"
    cand, base, _ = _positional_arms(write_run_log, np.random.default_rng(3), cand_tilt=0.0, base_tilt=0.0)
    [row] = positional_differences(cand, base, alpha=0.05)
    assert row["low"] <= 0 <= row["high"] and row["direction"] == "no clear change"


def test_meg_is_compared_at_four_videos_only(write_run_log):
    """P = 4 gives a DPB and a MEG row, MEG = mean of (C2 + C3)/2 − (C1 + C4)/2; P = 2 gives DPB alone."""
    rng = np.random.default_rng(4)
    recs, covs = [], {CAND: [], BASE: []}
    for model in (CAND, BASE):
        for g in range(6):
            cov = list(rng.uniform(0.2, 1.0, size=4))
            covs[model].append(cov)
            recs.append(_instance(model, "news-short-P4", 4, f"g{g}", (0, 1, 2, 3), cov))
            recs.append(_instance(model, "news-short-P2", 2, f"g{g}", (0, 1), cov[:2]))
    run = Run(write_run_log("p4", header={"models": [CAND], "baseline": BASE}, records=recs))
    rows = positional_differences(Arm(run, CAND, CAND), Arm(run, BASE, BASE), alpha=0.05)
    assert [(r["config"], r["stat"]) for r in rows] == [("news-short-P2", "DPB"), ("news-short-P4", "DPB"),
                                                        ("news-short-P4", "MEG")]
    c = np.array(covs[CAND])
    assert rows[2]["cand"] == pytest.approx(((c[:, 1] + c[:, 2]) / 2 - (c[:, 0] + c[:, 3]) / 2).mean())


def test_repetition_difference_pairs_videos_and_uses_the_exact_mcnemar_interval(write_run_log):
    """Common videos only; δ = rate cand − rate base; 20 videos clean-repeating under the candidate only is worse,
    and the interval is the Clopper–Pearson one of n10 = 20 of m = 20 discordant pairs mapped to δ."""
    from scipy.stats import beta

    vids = [f"v{k:02d}" for k in range(30)]
    recs = [_summary(CAND, 16, [*vids, "extra"], [1] * 20 + [0] * 10 + [1]), _summary(BASE, 16, vids, [0] * 30)]
    run = Run(write_run_log("rep", header={"models": [CAND], "baseline": BASE}, records=recs))
    [row] = repetition_differences(Arm(run, CAND, CAND), Arm(run, BASE, BASE), alpha=0.05)
    assert (row["config"], row["cand"], row["base"], row["n_instances"]) == ("16 frames", 20 / 30, 0.0, 30)
    assert row["delta"] == pytest.approx(20 / 30)
    theta_lo = beta.ppf(0.05, 20, 1)  # one-sided 95% Clopper-Pearson lower bound at n10 = m = 20
    assert row["low"] == pytest.approx((2 * theta_lo - 1) * 20 / 30, rel=1e-6)
    assert row["direction"] == "worse"


def test_side_by_side_names_each_flip_and_each_gate_one_arm_lacks(write_run_log):
    """'now fails', 'now passes', '' for the same outcome, None where one arm has no verdict; compare counts them."""
    n = "suites/test_phase.py::"
    recs = [_verdict(n + "test_a", "a", False, CAND), _verdict(n + "test_a", "a", True, BASE),
            _verdict(n + "test_b", "b", True, CAND), _verdict(n + "test_b", "b", False, BASE),
            _verdict(n + "test_c", "c", True, CAND), _verdict(n + "test_c", "c", True, BASE),
            _verdict(n + "test_d", "d", True, CAND), _verdict(n + "test_e", "e", True, BASE)]
    run = Run(write_run_log("sbs", header={"models": [CAND], "baseline": BASE}, records=recs))
    cand, base = Arm(run, CAND, CAND), Arm(run, BASE, BASE)
    rows = {g["gate"]: g["change"] for g in side_by_side(cand, base)}
    assert rows == {"a": "now fails", "b": "now passes", "c": "", "d": None, "e": None}
    out = compare(cand, base, alpha=0.05)
    assert (out["common"], out["only_cand"], out["only_base"]) == (3, 1, 1)
    assert out["worse"] == [{"label": "a", "note": "now fails"}]
    assert out["better"] == [{"label": "b", "note": "now passes"}]


def test_a_worse_difference_and_its_failing_gate_are_listed_once(write_run_log):
    """A DPB difference that is worse and the DPB gate that now fails share a name: one entry, noted; one figure."""
    _, _, recs = _positional_arms(write_run_log, np.random.default_rng(5), cand_tilt=0.3, base_tilt=0.0)
    spec = "leisure-short-P2"
    recs += [_verdict("suites/test_positional.py::test_dpb[x]", f"DPB {spec}", False, CAND),
             _verdict("suites/test_positional.py::test_dpb[x]", f"DPB {spec}", True, BASE)]
    run = Run(write_run_log("dup", header={"models": [CAND], "baseline": BASE}, records=recs))
    out = compare(Arm(run, CAND, CAND), Arm(run, BASE, BASE), alpha=0.05)
    assert out["worse"] == [{"label": f"DPB {spec}", "note": "now fails"}]
    assert len(out["figures"]) == 1 and "<svg" in out["figures"][0]


def test_arms_of_one_run_with_a_baseline_and_of_two_runs(write_run_log):
    """One run: its model vs its --baseline (labelled so); none without one; two runs: A's first model vs B's, told
    apart by run id when they share a name; three runs: no comparison."""
    with_base = Run(write_run_log("r1", header={"models": [CAND], "baseline": BASE}))
    alone = Run(write_run_log("r2", header={"models": [CAND]}))
    a, b = arms_for([with_base])
    assert (a.model, a.label, b.model, b.label) == (CAND, CAND, BASE, f"{BASE} (baseline)")
    assert arms_for([alone]) is None
    a, b = arms_for([alone, Run(write_run_log("r3", header={"models": [CAND]}))])
    assert (a.label, b.label) == (f"{CAND} (A, run r2)", f"{CAND} (B, run r3)")
    a, b = arms_for([alone, Run(write_run_log("r4", header={"models": [BASE]}))])
    assert (a.label, b.label) == (CAND, BASE)
    assert arms_for([alone, alone, alone]) is None


def test_a_baseline_in_the_same_run_is_marked_same_run_and_two_logs_are_not(write_run_log):
    """same_run is true only for one model against itself in one run log (nothing to compare)."""
    run = Run(write_run_log("s", header={"models": [CAND]}))
    assert compare(Arm(run, CAND, "a"), Arm(run, CAND, "b"), alpha=0.05)["same_run"] is True
    other = Run(write_run_log("t", header={"models": [CAND]}))
    assert compare(Arm(run, CAND, "a"), Arm(other, CAND, "b"), alpha=0.05)["same_run"] is False


def test_too_few_groups_claim_no_change_however_large_the_difference(write_run_log):
    """Below MIN_CLUSTERS paired groups the interval is undecided: a large Δ is still 'no clear change'."""
    from pytest_posbias.stats.intervals import MIN_CLUSTERS

    cand, base, _ = _positional_arms(write_run_log, np.random.default_rng(6), cand_tilt=0.35, base_tilt=0.0,
                                     groups=MIN_CLUSTERS - 1)
    [row] = positional_differences(cand, base, alpha=0.05)
    assert row["delta"] > 0.3 and row["n_groups"] == MIN_CLUSTERS - 1
    assert row["direction"] == "no clear change"


def test_a_video_whose_clean_call_failed_is_not_compared_as_a_clean_output(write_run_log):
    """A video whose clean output was lost (``clean_valid`` false: a failed call, whose flag reads 0) is left out of
    the paired repetition comparison, never counted as a non-repeating output; a log without the field as before."""
    lost = {**_summary(CAND, 8, ["a", "b", "c"], [1, 0, 0]), "clean_valid": [True, True, False]}
    assert _arm(write_run_log, [lost]).clean_flags() == {8: {"a": 1, "b": 0}}
