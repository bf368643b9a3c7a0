"""The parity gates (``--posbias-parity REFERENCE``, marker ``parity``).

* the changed-answer rule on crafted phase results: the reference's re-run floor is subtracted
  (a changed share equal to the floor passes; the same share with no floor fails), and an item
  lost on either side is a lost unit, never a stable or a changed answer;
* end to end through pytest in a project folder on ``sim:`` models that differ by a known dose:
  the gate fails just past its threshold and passes at dose 0; without a reference the tests
  are skipped with the way to opt in and the run is not measured (exit 6, never a pass);
* the coverage and repetition parity gates on the coverage and repetition doses.

Placed with ``gates/parity.py``, its subject; the end-to-end checks above run pytest on a project
through pytester.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from support import REPO
from support.suite_project import write_suite_project

from pytest_posbias.config import validate_thresholds
from pytest_posbias.data.manifest import McqItem
from pytest_posbias.errors import ConfigError
from pytest_posbias.gate_registry import GATES, markers
from pytest_posbias.probes.phase import PhaseResult, PhaseSpec

PARITY_GATES = ("parity", "parity_coverage", "parity_repetition")


def test_parity_gates_are_registered_under_one_marker():
    for gate in PARITY_GATES:
        assert gate in GATES and GATES[gate].marker == "parity" and GATES[gate].side == "upper"
        assert GATES[gate].threshold == 0.05
    assert "parity" in markers()
    assert validate_thresholds("t", {"parity": 0.0}) == {"parity": 0.0}  # "no change beyond the floor"
    with pytest.raises(ConfigError, match="parity must lie in"):
        validate_thresholds("t", {"parity": 1.0})


def test_parity_dose_parses_and_is_described():
    from pytest_posbias.models.sim_dose import describe, dosed_share, parse_dose

    dose = parse_dose("dose,parity=0.1")
    assert dosed_share(dose, "parity") == pytest.approx(0.1)
    assert describe(dose)["parity_share"] == pytest.approx(0.1)
    with pytest.raises(ConfigError, match="parity=1.5 is outside"):
        parse_dose("dose,parity=1.5")


# --------------------------------------------------------------------------- the rule on crafted results

N_ITEMS = 60


def _items(n: int = N_ITEMS) -> list[McqItem]:
    return [McqItem(f"q{i}", f"v{i}", Path(f"v{i}.mp4"), f"question <b>{i}</b>?", ("red", "green", "blue"), 0)
            for i in range(n)]


def _result(model: str, answers: np.ndarray, rerun: np.ndarray | None = None) -> PhaseResult:
    """A phase result with two orderings that agree (consensus = the answer)."""
    conds = {"phase:0": np.stack([answers, answers], axis=1)}
    if rerun is not None:
        conds["rerun:0"] = np.stack([rerun, rerun], axis=1)
    return PhaseResult(model, PhaseSpec(items=N_ITEMS, orderings=2), _items(), "logprobs", condition_answers=conds,
                       planned=N_ITEMS)


class _Ctx(SimpleNamespace):
    """The parts of a RunContext the parity gate reads."""

    def threshold(self, gate: str, model: str) -> float:
        return GATES[gate].threshold


def _ctx(test: PhaseResult, ref: PhaseResult) -> Any:
    return _Ctx(parity="ref", mode="detect", alpha=0.05, floor=0.95,
                phase=lambda model, gate, *a, **k: ref if model == "ref" else test)


def _changed(k: int) -> np.ndarray:
    a = np.zeros(N_ITEMS, dtype=int)
    a[:k] = 1
    return a


def test_the_reference_rerun_floor_is_subtracted():
    from pytest_posbias.gates.parity import parity_answers_verdict

    ref = np.zeros(N_ITEMS, dtype=int)
    # the reference's own re-run changes 3 of 60 answers (5%, the threshold), and so does the tested
    # deployment: two runs of one deployment disagree as much
    noisy_ref = _result("ref", ref, rerun=_changed(3))
    v = parity_answers_verdict(_ctx(_result("m", _changed(3)), noisy_ref), "m")
    assert v.passed and v.estimate == 0.0, v.reason
    assert v.extra["changed_share"] == 0.05 and v.extra["reference_rerun_floor"] == 0.05
    assert v.extra["measurement"]["floor_met"]
    changed = _changed(15)  # 25% of the items change between the deployments
    # a reference that re-runs identically: the same 25% is a deployment change, far past 0.05
    steady_ref = _result("ref", ref, rerun=ref)
    v = parity_answers_verdict(_ctx(_result("m", changed), steady_ref), "m")
    assert not v.passed and v.estimate == 0.25, v.reason
    assert v.extra["changed"] == 15 and v.extra["changed_items_total"] == 15
    row = v.extra["changed_items"][0]
    assert row == {"item": "q0", "video": "v0", "question": "question <b>0</b>?", "answer_model": "green",
                   "answer_reference": "red", "correct": "red", "reference_rerun_changed": False}


def test_a_reference_noisier_than_the_threshold_or_scored_otherwise_decides_nothing():
    """A reference whose own re-run flips more answers than the threshold hides any change of that
    size, and answers scored from log-probabilities on one side and from text on the other are not
    the same answers: the gate is not measured (no pass), whatever the estimate."""
    from pytest_posbias.gates.decision import run_decision
    from pytest_posbias.gates.parity import parity_answers_verdict

    ref = np.zeros(N_ITEMS, dtype=int)
    noisy = parity_answers_verdict(_ctx(_result("m", _changed(30)), _result("ref", ref, rerun=_changed(30))), "m")
    assert not noisy.passed and noisy.inconclusive and "re-run changes 0.5" in noisy.reason, noisy.reason
    assert run_decision([("t::parity", noisy)]).exit_code == 6
    text_ref = _result("ref", ref, rerun=ref)
    text_ref.mode = "text"
    mixed = parity_answers_verdict(_ctx(_result("m", ref), text_ref), "m")
    assert not mixed.passed and "scored differently (logprobs for m, text for ref)" in mixed.reason, mixed.reason
    assert run_decision([("t::parity", mixed)]).exit_code == 6


def test_an_item_lost_on_either_side_is_a_lost_unit():
    from pytest_posbias.gates.parity import parity_answers_verdict

    ref = np.zeros(N_ITEMS, dtype=int)
    test = np.zeros(N_ITEMS, dtype=int)
    test[0] = -1  # an unparseable answer of the tested model
    rerun = ref.copy()
    rerun[1] = -1  # a failed call of the reference's re-run
    v = parity_answers_verdict(_ctx(_result("m", test), _result("ref", ref, rerun=rerun)), "m")
    m = v.extra["measurement"]
    assert v.n == N_ITEMS - 2 and m["measured"] == N_ITEMS - 2 and m["planned"] == N_ITEMS
    assert m["lost"] == {"failed_or_unparseable_answers": 1, "reference failed_or_unparseable_answers": 1}
    assert v.passed and m["floor_met"]  # 58 of 60 is above the 95% floor
    # every reference answer lost: nothing measured, no pass in either mode
    gone = _result("ref", np.full(N_ITEMS, -1), rerun=np.full(N_ITEMS, -1))
    v = parity_answers_verdict(_ctx(_result("m", test), gone), "m")
    assert not v.passed and "no measurement" in v.reason


def test_no_usable_item_on_either_side_is_no_measurement():
    """A side with no usable item (every video gone) loses every planned item, not a KeyError."""
    from pytest_posbias.gates.parity import parity_answers_verdict

    ref = np.zeros(N_ITEMS, dtype=int)
    empty = {m: PhaseResult(m, PhaseSpec(items=N_ITEMS, orderings=2), [], "logprobs", planned=N_ITEMS)
             for m in ("m", "ref")}
    for pair in ((_result("m", ref), empty["ref"]), (empty["m"], _result("ref", ref, rerun=ref))):
        v = parity_answers_verdict(_ctx(*pair), "m")
        assert not v.passed and "no measurement" in v.reason and v.extra["measurement"]["measured"] == 0, v.reason


def test_no_reference_is_a_usage_error_of_the_verdict():
    from pytest_posbias.gates.parity import parity_answers_verdict

    with pytest.raises(ConfigError, match="opt in with --posbias-parity REFERENCE"):
        parity_answers_verdict(_Ctx(parity=None), "m")


# --------------------------------------------------------------------------- end to end through pytest

SMALL = """
[tool.posbias.probes.phase]
items = {items}
orderings = 2
[tool.posbias.probes.stressor]
videos = 24
[tool.posbias.probes.positional]
groups = 12
"""


def _project(pytester: pytest.Pytester, manifest: Path, items: int, keys: str = "") -> None:
    """``keys``: more lines of the ``[tool.posbias]`` table."""
    write_suite_project(pytester.path, manifest, ("test_parity.py",), keys + SMALL.format(items=items),
                        rename={"test_parity.py": "test_parity_suite.py"})  # this file's module is test_parity


def _gates(pytester: pytest.Pytester, name: str) -> list[dict[str, Any]]:
    return list(json.loads((pytester.path / name).read_text())["verdicts"])


@pytest.mark.usefixtures("heavy_modules")
def test_parity_fails_past_its_threshold_and_passes_at_zero_dose(pytester, small_set):
    _project(pytester, small_set, items=60)
    sel = ["-m", "parity", "-k", "answers", "-p", "no:randomly"]
    # 3t: about 9 of 60 items change; the exact test at t = 0.05 needs 7
    bad = pytester.runpytest(*sel, "--posbias-model", "sim:dose,parity=0.15", "--posbias-parity", "sim:unbiased",
                             "--posbias-json=bad.json", "--posbias-markdown=bad.md")
    assert bad.ret == 1, bad.stdout.str()[-3000:]
    (v,) = _gates(pytester, "bad.json")
    assert not v["passed"] and v["extra"]["reference"] == "sim:unbiased"
    assert v["extra"]["measurement"]["floor_met"]  # failed on the data, not on lost units
    assert 0.05 < v["estimate"] <= 0.25 and v["extra"]["reference_rerun_floor"] == 0.0
    assert v["extra"]["changed_items_total"] == v["extra"]["changed"] > 0
    assert "test_parity_answers" in (pytester.path / "bad.md").read_text()
    html = (pytester.path / "reports" / "latest.html").read_text()
    assert "Items whose answer changed against the reference deployment" in html
    q = v["extra"]["changed_items"][0]["question"]
    assert q.replace("'", "&#39;") in html
    good = pytester.runpytest(*sel, "--posbias-model", "sim:dose,parity=0", "--posbias-parity", "sim:unbiased",
                              "--posbias-json=good.json")
    assert good.ret == 0, good.stdout.str()[-3000:]
    (v,) = _gates(pytester, "good.json")
    assert v["passed"] and v["estimate"] == 0.0 and v["extra"]["changed"] == 0


@pytest.mark.usefixtures("heavy_modules")
def test_without_a_reference_the_parity_gates_skip_and_the_run_is_not_measured(pytester, small_set):
    _project(pytester, small_set, items=8)
    res = pytester.runpytest("-m", "parity", "-p", "no:randomly", "--posbias-model", "sim:unbiased")
    assert res.ret == 6, res.stdout.str()[-3000:]
    out = res.stdout.str()
    assert "opt in with --posbias-parity REFERENCE" in out and "passed" not in res.parseoutcomes()
    assert res.parseoutcomes()["skipped"] >= 3


@pytest.mark.usefixtures("heavy_modules")
def test_the_reference_can_come_from_the_pyproject_table(pytester, small_set):
    _project(pytester, small_set, items=8, keys='parity = "sim:unbiased"\n')
    res = pytester.runpytest("-m", "parity", "-k", "answers", "-p", "no:randomly", "--posbias-model",
                             "sim:dose,parity=0")
    assert res.ret == 0, res.stdout.str()[-3000:]
    res.assert_outcomes(passed=1)


def test_a_bad_reference_is_a_usage_error(pytester, small_set):
    _project(pytester, small_set, items=8)
    res = pytester.runpytest("-m", "parity", "--posbias-model", "sim:unbiased", "--posbias-parity", "sim:dose,parity=2")
    assert res.ret == 4
    assert "--posbias-parity" in res.stderr.str() + res.stdout.str()
    # the tested model as its own reference compares nothing: a usage error naming both
    res = pytester.runpytest("-m", "parity", "--posbias-model", "sim:unbiased", "--posbias-parity", "sim:unbiased")
    out = res.stderr.str() + res.stdout.str()
    assert res.ret == 4 and "--posbias-parity sim:unbiased: the parity reference is the tested model" in out, out


@pytest.mark.slow  # two runs: 12 groups of one configuration and 24 clean descriptions per model
@pytest.mark.usefixtures("heavy_modules")
def test_coverage_and_repetition_parity_fail_on_their_doses_and_pass_at_zero(pytester, small_set):
    _project(pytester, small_set, items=8)
    # by test name: the dose model's id holds the words "coverage" and "repetition" too
    sel = ["-m", "parity", "-k", "test_parity_repetition or (test_parity_coverage and leisure and short and P4)",
           "-p", "no:randomly", "--posbias-parity", "sim:unbiased"]
    # coverage 0.47 against the unbiased ~0.87 of leisure-short-P4: a drop of about 0.4; repetition 0.8: +0.8
    bad = pytester.runpytest(*sel, "--posbias-model", "sim:dose,coverage=0.47,repetition=0.8", "--posbias-json=b.json")
    assert bad.ret == 1, bad.stdout.str()[-3000:]
    verdicts = {v["extra"]["gate"]: v for v in _gates(pytester, "b.json")}
    assert set(verdicts) == {"parity_coverage", "parity_repetition"}
    for v in verdicts.values():
        assert not v["passed"] and v["estimate"] > 0.05 and v["extra"]["measurement"]["floor_met"], v["reason"]
    good = pytester.runpytest(*sel, "--posbias-model", "sim:dose,repetition=0", "--posbias-json=g.json")
    assert good.ret == 0, good.stdout.str()[-3000:]
    assert all(v["passed"] for v in _gates(pytester, "g.json"))


def test_posbias_plan_counts_the_parity_gates_at_full_size():
    from pytest_posbias.cli.plan import _gate_from_nodeid
    from pytest_posbias.gate_registry import GATES

    for name, gate, probe in (("test_parity_answers", "parity", "phase"),
                              ("test_parity_coverage", "parity_coverage", "positional"),
                              ("test_parity_repetition", "parity_repetition", "stressor")):
        assert _gate_from_nodeid(f"suites/test_parity.py::{name}[sim:unbiased-x]") == gate
        assert GATES[gate].fixed and GATES[gate].probe == probe


# Just past the threshold: 1.6t = 0.08 on 300 items of the full synthetic set (360 questions); the
# rule needs 22 changed of 300 at t = 0.05 (the exact unconditional test) and the dose changes
# about 24. The dose model picks its items by a Weyl sequence, so the
# realised share sits next to the dose, not a binomial draw.
NEAR_ITEMS = 300


@pytest.mark.slow  # 300 items x 2 orderings x (1 + 2 reference passes) per run, two runs
@pytest.mark.usefixtures("heavy_modules")
def test_parity_fails_just_past_its_threshold(pytester):
    from pytest_posbias.run.context import synthetic_manifest

    data = synthetic_manifest(REPO)  # built once, reused
    _project(pytester, data, items=NEAR_ITEMS)
    t = GATES["parity"].threshold
    sel = ["-m", "parity", "-k", "test_parity_answers", "-p", "no:randomly", "--posbias-parity", "sim:unbiased"]
    bad = pytester.runpytest(*sel, "--posbias-model", f"sim:dose,parity={1.6 * t:g}", "--posbias-json=near.json")
    assert bad.ret == 1, bad.stdout.str()[-3000:]
    (v,) = _gates(pytester, "near.json")
    assert not v["passed"] and v["extra"]["measurement"]["floor_met"], v["reason"]
    assert t < v["estimate"] < 2 * t, v["reason"]  # the effect sits just past t, not far beyond
    good = pytester.runpytest(*sel, "--posbias-model", "sim:dose,parity=0", "--posbias-json=zero.json")
    assert good.ret == 0, good.stdout.str()[-3000:]


def test_the_report_lists_changed_items_with_both_answers_inert(tmp_path):
    from pytest_posbias.engine import SCHEMA_VERSION
    from pytest_posbias.report.render import render

    evil = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'
    row = {"item": "q1", "video": "v1", "question": f"What colour? {evil}", "answer_model": evil,
           "answer_reference": "red", "correct": "red", "reference_rerun_changed": True}
    from pytest_posbias.stats import paired_change_verdict

    extra = {"gate": "parity", "model": "m", "reference": "ref", "changed": 3, "n_items": 10, "changed_share": 0.3,
             "reference_rerun_floor": 0.1, "changed_items": [row], "changed_items_total": 3}
    v = paired_change_verdict([1, 1, 1, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0, 0, 0], name="changed share",
                              threshold=0.05, extra=extra)
    verdict = {"kind": "verdict", "nodeid": "suites/test_parity.py::test_parity_answers[m]", "p_bh": v.p_value,
               **v.to_dict()}
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in (
        {"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": "a", "started": "2026-01-01T00:00:00",
         "models": ["m"]}, verdict)))
    html = render([log])
    assert "Items whose answer changed against the reference deployment" in html
    assert "3 of 10 items changed (30.0%; the reference's re-run floor 10.0%)" in html
    assert "1 of 3 changed items listed." in html
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html


def test_sim_check_measures_the_parity_dose_against_unbiased(small_set, tmp_path):
    from pytest_posbias.cli.sim_check import run_check

    res = run_check("sim:dose,parity=0.5", items=24, data=str(small_set), cache=str(tmp_path / "c"), rootdir=tmp_path)
    (a,) = res.achieved
    assert a.gate == "parity" and a.target == 0.5 and a.n == 24 and a.unit == "items"
    assert a.ci_low <= 0.5 <= a.ci_high and 0.25 < a.estimate < 0.75
