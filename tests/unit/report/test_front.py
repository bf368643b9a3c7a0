"""The report's first screen: which configuration a verdict's row names."""

from __future__ import annotations

import re

from pytest_posbias.report.front import configuration


def test_a_row_names_the_positional_spec_the_searched_property_or_the_frame_count():
    assert configuration({"extra": {"spec": "cooking-short-P4", "gate": "meg"}}) == "cooking-short-P4"
    # the search gates: one row each, by the property searched and its budget (the heavy variant
    # searches the same property with a larger budget), not "search" for every row
    rows = [configuration({"name": f"{p} search success rate (budget {b} queries)",
                           "extra": {"gate": "search", "property": p, "budget": b}})
            for p, b in (("order", 32), ("phase", 32), ("order", 256))]
    assert rows == ["order, budget 32", "phase, budget 32", "order, budget 256"]
    assert configuration({"name": "flip rate at 16 frames", "extra": {"gate": "phase"}}) == "16 frames"
    assert configuration({"name": "attack success rate", "extra": {"gate": "attack"}}) == "attack"
    # the stressor gates: one row per stressor, not "16 frames" for each of them
    assert configuration({"name": "add2 repetition amplification at 16 frames",
                          "extra": {"gate": "stressor", "stressor": "add2"}}) == "add2, 16 frames"


def test_the_stressor_cards_figure_names_each_stressor_and_the_gate_kind(monkeypatch):
    """The stressor suite's card: its forest plot has a row per stressor and a title naming the gate's kind,
    not the worst stressor's name above rows all labelled with the frame count."""
    from pytest_posbias.report import figures, front

    drawn = {}
    monkeypatch.setattr(figures, "forest", lambda rows, **kw: drawn.update(rows=rows, **kw) or "<svg/>")
    verdicts = [{**_record(f"tests/robustness/test_stressors.py::test_stressor_amplification[{s}]", passed=True,
                           model="sim:looping"),
                 "name": f"{s} repetition amplification at 16 frames", "estimate": e, "ci_high": e + 0.3,
                 "ci_low": e - 0.3, "upper": 0.1, "extra": {"gate": "stressor", "stressor": s, "model": "sim:looping"}}
                for s, e in (("add2", 0.05), ("shuffle", 0.02), ("reverse", -0.1))]
    (card,) = front.suite_cards(verdicts)
    assert card["n"] == 3 and card["worst"]["name"] == "add2 repetition amplification at 16 frames"
    assert drawn["title"] == "repetition amplification: worst configurations"
    assert [r["label"] for r in drawn["rows"]] == ["add2, 16 frames", "shuffle, 16 frames", "reverse, 16 frames"]
    for v in verdicts:  # a run against a baseline names its comparisons "... vs baseline"
        v["name"] += " vs baseline"
    front.suite_cards(verdicts)
    assert drawn["title"] == "repetition amplification vs baseline: worst configurations"


def _record(nodeid: str, *, passed: bool, model: str, adjusted: bool | None = None) -> dict:
    """A verdict record of a rate gate as the run log holds it (with its run-level part when ``adjusted`` is given)."""
    rec = {"kind": "verdict", "nodeid": nodeid, "name": "flip rate", "estimate": 0.3 if not passed else 0.05,
           "ci_low": 0.2 if not passed else 0.01, "ci_high": 0.4 if not passed else 0.12, "threshold": 0.15, "n": 60,
           "p_value": 0.01 if not passed else 0.9, "passed": passed, "mode": "detect", "reason": "r", "alpha": 0.05,
           "lower": "-inf", "upper": 0.15, "unit": "items", "extra": {"model": model, "gate": "flip"}}
    if adjusted is not None:
        rec.update(adjusted_passed=adjusted, run_status="pass" if adjusted else "fail", p_run=0.01,
                   p_adj=0.06 if adjusted else 0.01, family="holm", power=None, not_measured=None)
    return rec


def _banner(html: str) -> tuple[str, str, str]:
    """(class, word, reason) of the report's decision banner."""
    m = re.search(r'<div class="decision (\w+)" id="decision">\s*<span class="verdict-word">([^<]+)</span>\s*'
                  r'<span class="why">([^<]*)</span>', html)
    assert m is not None
    return m.group(1), m.group(2), m.group(3)


def test_a_run_stopped_by_maxfail_under_xdist_shows_its_own_decision(write_run_log):
    """A -n -x run (pytest's status 2, decision NOT MEASURED) shows the decision's label and reason, as without -n."""
    from pytest_posbias.exitcodes import LABELS, NOT_MEASURED
    from pytest_posbias.report.render import render

    why = "1 selected gate test never ran (-x stopped the run after the first failure): not measured"
    rd = {"exit_code": NOT_MEASURED, "label": LABELS[NOT_MEASURED], "why": why, "method": "Holm", "alpha": 0.05,
          "not_run": ["suites/test_positional.py::test_meg[x]"], "stopped": "-x stopped the run after the first failure"}
    rec = _record("suites/test_phase_order.py::test_sampler_flip[x]", passed=True, model="sim:a")
    serial = write_run_log("serial", header={"models": ["sim:a"], "exitstatus": 1, "run_decision": rd}, records=[rec])
    xdist = write_run_log("xdist", header={"models": ["sim:a"], "exitstatus": 2, "run_decision": rd}, records=[rec])
    stamp = "2026-01-01T00:00:00+00:00"
    assert _banner(render([serial], rendered_at=stamp))[1].lower() == LABELS[NOT_MEASURED].lower()
    cls, word, reason = _banner(render([xdist], rendered_at=stamp))
    assert cls == "noship" and word.lower() == LABELS[NOT_MEASURED].lower() and why in reason


def test_a_comparison_report_shows_the_candidates_run_level_decision(write_run_log):
    """Candidate vs baseline: the banner follows the candidate's recorded run-level decision (here SHIP)."""
    from pytest_posbias.exitcodes import LABELS, SHIP
    from pytest_posbias.report.render import render

    nid = "suites/test_phase_order.py::test_sampler_flip[x]"
    rd = {"exit_code": SHIP, "label": LABELS[SHIP], "method": "Holm", "alpha": 0.05,
          "why": "all 1 gates passed the run-level decision (1 failed on their own at α = 0.05 but not after the "
                 "Holm adjustment over 3 gates)"}
    cand = write_run_log("cand", header={"models": ["sim:cand"], "exitstatus": SHIP, "run_decision": rd},
                         records=[_record(nid, passed=False, adjusted=True, model="sim:cand")])
    base = write_run_log("base", header={"models": ["sim:base"], "exitstatus": SHIP, "run_decision": rd},
                         records=[_record(nid, passed=True, adjusted=True, model="sim:base")])
    cls, _, reason = _banner(render([cand, base], rendered_at="2026-01-01T00:00:00+00:00"))
    assert cls == "ship" and "failed" not in reason.split(":", 1)[-1].split("(")[0]


def test_the_banner_follows_the_recorded_decision_of_a_finished_run():
    """With the run-level record, a gate that failed on its own but passed Holm ships, and an errored test does not."""
    from pytest_posbias.report.front import decision

    rows = [{"passed": False, "adjusted_passed": True}, {"passed": True, "adjusted_passed": True}]
    run = {"exit_code": 0, "label": "SHIP", "why": "all 2 gates passed the run-level decision"}
    d = decision(rows, unfinished=[], errored=[], run=run)
    assert d["ship"] and d["n_fail"] == 0 and d["label"] == "SHIP"
    d = decision(rows, unfinished=[], errored=[{"nodeid": "t"}], run=run)
    assert not d["ship"] and "1 tests ended without a verdict" in d["why"]
    assert not decision([], unfinished=[], errored=[])["ship"]


def test_a_run_with_a_test_that_errored_is_not_shipped(write_run_log):
    """Gates that passed beside a gate test that errored: the recorded status (pytest's 1) and the banner say no ship."""
    from pytest_posbias.exitcodes import DO_NOT_SHIP, LABELS
    from pytest_posbias.report.render import render

    rd = {"exit_code": DO_NOT_SHIP, "label": LABELS[DO_NOT_SHIP], "method": "Holm", "alpha": 0.05,
          "why": "1 test failed or errored without a verdict (pytest's status stands); the gates alone: all 1 gates "
                 "passed the run-level decision"}
    errored = [{"nodeid": "suites/test_positional.py::test_meg[x]", "when": "call", "message": ["boom"]}]
    log = write_run_log("err", header={"models": ["sim:a"], "exitstatus": 1, "run_decision": rd,
                                       "errored_tests": errored},
                        records=[_record("suites/test_phase_order.py::test_sampler_flip[x]", passed=True,
                                         model="sim:a")])
    cls, word, reason = _banner(render([log], rendered_at="2026-01-01T00:00:00+00:00"))
    assert cls == "noship" and word.strip().lower() == LABELS[DO_NOT_SHIP].lower()
    assert "1 tests ended without a verdict" in reason


def test_without_a_recorded_decision_gates_that_all_could_not_decide_do_not_ship():
    """Without the run-level record (a log written without it, or three logs side by side), every gate
    inconclusive is no decision: not shipped, and the reason says so instead of 'all N gates passed'."""
    from pytest_posbias.report.front import decision

    rows = [{"passed": True, "inconclusive": True}, {"passed": True, "inconclusive": True}]
    d = decision(rows, unfinished=[], errored=[])
    assert not d["ship"] and "inconclusive" in d["why"] and "passed" not in d["why"]
    d = decision([*rows, {"passed": True}], unfinished=[], errored=[])
    assert d["ship"] and "2 inconclusive" in d["why"]


def test_a_run_that_did_not_finish_is_named_so_not_do_not_ship():
    """An interrupted run's banner carries its own label (the terminal's INTERRUPTED), a run that ended
    without a decision "not finished": DO NOT SHIP is a failure on measured evidence."""
    from pytest_posbias.report.front import decision

    rows = [{"passed": True, "nodeid": "t"}]
    d = decision(rows, unfinished=[2], errored=[], run={"label": "INTERRUPTED", "exit_code": 2, "not_run": ["u"]})
    assert not d["ship"] and d["label"] == "INTERRUPTED"
    d = decision(rows, unfinished=[3], errored=[])
    assert not d["ship"] and d["label"] == "not finished"
    # a comparison: the candidate's run finished (SHIP), the other log was interrupted
    d = decision(rows, unfinished=[2], errored=[], run={"label": "SHIP", "exit_code": 0})
    assert not d["ship"] and d["label"] == "not finished"
    assert decision([{"passed": False, "nodeid": "t"}], unfinished=[], errored=[])["label"] == ""


def test_the_card_names_the_passing_gate_nearest_to_failing_in_its_mode(monkeypatch):
    """Detect mode fails a gate when its CI lies wholly past a bound: of two passing MEG verdicts, the one
    whose interval nearly clears -0.02 is closest to failing, not the one with the widest interval (ranking by
    the far end would reward imprecision). Certify mode fails a gate whose CI reaches past a bound: the widest then."""
    from pytest_posbias.report import figures, front

    monkeypatch.setattr(figures, "forest", lambda rows, **kw: "<svg/>")

    def meg(conf, est, lo, hi, mode):
        return {**_record(f"tests/robustness/test_positional.py::test_meg[sim:unbiased-{conf}]", passed=True,
                          model="sim:unbiased"), "name": f"MEG {conf}", "estimate": est, "ci_low": lo, "ci_high": hi,
                "lower": -0.02, "upper": 0.02, "mode": mode, "extra": {"gate": "meg", "spec": conf}}

    for mode, worst in (("detect", "MEG domestic-short-P4"), ("certify", "MEG domestic-long-P4")):
        (card,) = front.suite_cards([meg("domestic-long-P4", -0.0069, -0.052, 0.049, mode),
                                     meg("domestic-short-P4", -0.026, -0.051, -0.003, mode)])
        assert card["worst"]["name"] == worst, mode
