"""``--posbias-markdown PATH``: the Markdown verdict table for CI job summaries and PR comments.

Placed with ``report/markdown.py``, its subject; the option's end-to-end checks run pytest through
pytester."""

from __future__ import annotations

import json
import math
import os
import time

import pytest

from pytest_posbias.report.markdown import find_report, markdown_summary, write_markdown
from pytest_posbias.run_options import RunOptions
from pytest_posbias.stats import Verdict


def _v(name: str, est: float, lo: float, hi: float, *, passed: bool, threshold: float = 0.02, sides: str = "both",
       n: int = 12, p: float = 0.01, inconclusive: bool = False) -> Verdict:
    lower, upper = {"both": (-threshold, threshold), "upper": (-math.inf, threshold), "lower": (threshold, math.inf)}[sides]
    return Verdict(name=name, estimate=est, ci_low=lo, ci_high=hi, threshold=threshold, n=n, p_value=p, passed=passed,
                   mode="detect", reason="r", lower=lower, upper=upper, unit="groups", inconclusive=inconclusive)


def _table(text: str) -> list[list[str]]:
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in rows[1:]]  # without the header


def test_failures_first_with_estimate_ci_region_threshold_n_and_p():
    """The p column is the gate's own p-value (the Benjamini–Hochberg p decides nothing and is not shown);
    an inconclusive gate reads INCONCLUSIVE, not PASS."""
    rows = [
        {"nodeid": "s/test_positional.py::test_meg[a-P4]", "verdict": _v("MEG a", 0.001, -0.01, 0.012, passed=True, p=0.5),
         "p_bh": 0.9},
        {"nodeid": "s/test_positional.py::test_meg[b-P4]", "verdict": _v("MEG b", -0.31, -0.4, -0.22, passed=False, p=0.002),
         "p_bh": 0.9},
        {"nodeid": "s/test_phase_order.py::test_order_flip[m]",
         "verdict": _v("order", 0.36, 0.215, 0.516, passed=False, threshold=0.15, sides="upper", n=45, p=0.00123),
         "p_bh": 0.9},
        {"nodeid": "s/test_positional.py::test_meg[c-P4]",
         "verdict": _v("MEG c", 0.0, math.nan, math.nan, passed=True, p=1.0, inconclusive=True), "p_bh": 0.9},
    ]
    text = markdown_summary(rows, models=["sim:middle-weak"], mode="detect", alpha=0.05, exitstatus=1,
                            report_link="../reports/run 1.html")
    assert text.splitlines()[0] == "## ❌ pytest-posbias: 2 of 4 gates failed, 1 of 4 inconclusive"
    assert "model `sim:middle-weak` · mode detect · α = 0.05 (CI 90% two-sided) · exit status 1" in text
    body = _table(text)
    assert [r[0] for r in body] == ["❌ FAIL", "❌ FAIL", "✅ PASS", "➖ INCONCLUSIVE"]
    assert [r[1] for r in body] == ["`test_order_flip[m]`", "`test_meg[b-P4]`", "`test_meg[a-P4]`",
                                    "`test_meg[c-P4]`"]  # then node id order
    assert body[0][2:] == ["0.36", "[0.215, 0.516]", "≤ 0.15 (threshold 0.15)", "45 groups", "0.00123"]
    assert body[1][2:] == ["-0.31", "[-0.400, -0.220]", "[-0.02, 0.02] (threshold 0.02)", "12 groups", "0.002"]
    assert "[HTML report](../reports/run%201.html)" in text


def test_all_passed_nothing_decided_and_errored_tests():
    ok = [{"nodeid": "t.py::test_x", "verdict": _v("x", 0.0, -0.01, 0.01, passed=True), "p_bh": 1.0}]
    assert markdown_summary(ok).splitlines()[0] == "## ✅ pytest-posbias: all 1 gates passed"
    nothing = markdown_summary([])
    assert nothing.splitlines()[0] == "## ❌ pytest-posbias: no gate decided" and "| result |" not in nothing
    err = markdown_summary(ok, errored=[{"nodeid": "t.py::test_y|z", "when": "setup", "message": ["KeyError: 'a|b'"]}])
    assert err.splitlines()[0] == "## ❌ pytest-posbias: all 1 gates passed, 1 tests ended without a verdict"
    assert "- `t.py::test_y\\|z` (setup): KeyError: 'a\\|b'" in err  # pipes cannot break the table


def test_find_report_takes_this_runs_report_only(tmp_path):
    log = tmp_path / ".posbias" / "runs" / "r1" / "run.jsonl"
    log.parent.mkdir(parents=True)
    reports = tmp_path / "reports"
    reports.mkdir()
    old = reports / "m-20200101T000000Z.html"
    old.write_text("old")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    log.write_text("{}\n")
    opts = RunOptions()  # the default report folder, no explicit report
    assert find_report(rootdir=tmp_path, options=opts, run_log=log) is None  # an older run's report is not linked
    new = reports / "m-20260101T000000Z.html"
    new.write_text("new")
    (reports / "latest.html").write_text("new")
    assert find_report(rootdir=tmp_path, options=opts, run_log=log) == new
    assert find_report(rootdir=tmp_path, options=opts, run_log=None) is None
    md = write_markdown(tmp_path / "out" / "summary.md", [], rootdir=tmp_path, options=opts, run_log=log)
    assert "[HTML report](../reports/m-20260101T000000Z.html)" in md.read_text()


GATE_MODULE = """
from pytest_posbias.stats import rate_verdict

def test_low(posbias_gate):
    posbias_gate(rate_verdict(1, 40, name="low rate", threshold=0.15, mode="detect", alpha=0.05, unit="items"))

def test_high(posbias_gate):
    posbias_gate(rate_verdict(30, 40, name="high rate", threshold=0.15, mode="detect", alpha=0.05, unit="items"))

def test_broken(posbias_gate):
    raise RuntimeError("no verdict")
"""


def test_plugin_writes_the_table_matching_the_json(pytester):
    pytester.makepyfile(test_gates=GATE_MODULE)
    res = pytester.runpytest("-p", "no:randomly", "--posbias-markdown=ci/summary.md", "--posbias-json=v.json")
    assert res.ret == 1
    text = (pytester.path / "ci" / "summary.md").read_text()
    verdicts = {v["nodeid"].split("::")[1]: v for v in json.loads((pytester.path / "v.json").read_text())["verdicts"]}
    body = _table(text)
    assert [r[1] for r in body] == ["`test_high`", "`test_low`"]
    assert text.splitlines()[0] == ("## ❌ pytest-posbias: DO NOT SHIP (exit 1): 1 of 2 gates failed, "
                                    "1 tests ended without a verdict")
    for row in body:
        v = verdicts[row[1].strip("`")]
        assert row[0] == ("✅ PASS" if v["passed"] else "❌ FAIL")
        assert float(row[2]) == pytest.approx(v["estimate"], rel=1e-3)
        assert row[3] == f"[{v['ci_low']:.3f}, {v['ci_high']:.3f}]"
        assert row[5] == f"{v['n']} items" and float(row[6]) == pytest.approx(v["p_value"], rel=1e-2)
    assert float(body[0][2]) == pytest.approx(30 / 40) and float(body[1][2]) == pytest.approx(1 / 40, rel=1e-3)
    [broken] = [ln for ln in text.splitlines() if ln.startswith("- ")]
    assert broken.startswith("- `test_gates.py::test_broken` (call): ") and "RuntimeError" in broken


def test_markdown_path_must_not_be_empty(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    res = pytester.runpytest("--posbias-markdown=")
    assert res.ret != 0
    assert "--posbias-markdown: expects a path" in res.stderr.str()


@pytest.mark.parametrize(("alpha", "level"), [(0.05, "90"), (0.025, "95"), (0.0125, "97.5"), (0.001, "99.8")])
def test_the_interval_level_is_stated_with_its_digits_never_rounded_to_100(alpha, level):
    """α = 0.001 gives a 99.8% interval: the summary says so, not "100%" (no finite interval reaches 100%)."""
    text = markdown_summary([], models=["sim:unbiased"], mode="detect", alpha=alpha, exitstatus=0)
    assert f"α = {alpha:g} (CI {level}% two-sided)" in text


def test_the_summary_of_a_run_links_the_report_that_run_wrote(pytester):
    """A run writing its report links it from --posbias-markdown: the Markdown was written before the report
    rendered, so it linked no report (or another run's, written just before)."""
    pytester.makepyfile(test_gates="""
from pytest_posbias.stats import rate_verdict

def test_low(posbias_run, posbias_gate):
    posbias_gate(rate_verdict(1, 40, name="low rate", threshold=0.15, unit="items"))
""")
    # in a subprocess: an in-process run drops the modules it first imported (pytester restores sys.modules),
    # and a later test patching pytest_posbias.run.context would patch a module the plugin no longer uses
    res = pytester.runpytest_subprocess("-p", "no:randomly", "--posbias-model=sim:unbiased",
                                        "--posbias-markdown=ci/summary.md")
    assert res.ret == 0, res.stdout.str()[-2000:]
    [report] = [p for p in (pytester.path / "reports").glob("*.html") if p.name != "latest.html"]
    assert f"[HTML report](../reports/{report.name})" in (pytester.path / "ci" / "summary.md").read_text()


def test_inconclusive_gates_are_never_titled_passed():
    """Gates that could not decide are counted as inconclusive in the title, never 'all N gates passed', and
    without the run's decision the icon is not ✅ when every gate was inconclusive."""
    inc = [{"nodeid": f"t.py::test_{k}", "verdict": _v(k, 0.0, math.nan, math.nan, passed=True, p=1.0,
                                                        inconclusive=True), "p_bh": 1.0} for k in "ab"]
    ok = {"nodeid": "t.py::test_c", "verdict": _v("c", 0.0, -0.01, 0.01, passed=True), "p_bh": 1.0}
    assert markdown_summary(inc).splitlines()[0] == "## ⚠️ pytest-posbias: no gate failed, 2 of 2 inconclusive"
    six = {"exit_code": 6, "label": "NOT MEASURED", "why": "no gate decided"}
    assert markdown_summary(inc, decision=six).splitlines()[0] == (
        "## ⚠️ pytest-posbias: NOT MEASURED (exit 6): no gate failed, 2 of 2 inconclusive")
    assert markdown_summary([*inc, ok]).splitlines()[0] == "## ✅ pytest-posbias: no gate failed, 2 of 3 inconclusive"


def test_a_gate_below_its_measurement_floor_is_not_measured_not_failed():
    """A gate the run-level decision counts as not measured is named so in the title and its row, not as failed."""
    from pytest_posbias.gates.decision import GateDecision

    rows = [{"nodeid": "t.py::test_x", "verdict": _v("x", 0.0, -0.01, 0.01, passed=False), "p_bh": 1.0,
             "gate": GateDecision("t.py::test_x", False, 1.0, 1.0, False, "not measured", "-", "12 of 48 measured")},
            {"nodeid": "t.py::test_y", "verdict": _v("y", 0.0, -0.01, 0.01, passed=True), "p_bh": 1.0,
             "gate": GateDecision("t.py::test_y", True, 0.9, 0.9, True, "pass", "holm")}]
    text = markdown_summary(rows, decision={"label": "NOT MEASURED", "exit_code": 6, "why": "w"})
    assert text.splitlines()[0] == "## ⚠️ pytest-posbias: NOT MEASURED (exit 6): 1 of 2 gates not measured"
    assert [r[0] for r in _table(text)] == ["⚠️ NOT MEASURED", "✅ PASS"]
    assert markdown_summary(rows).splitlines()[0] == "## ⚠️ pytest-posbias: 1 of 2 gates not measured"
    # a not-measured gate whose own verdict passed (n = 0) leaves a real failure counted, and the inconclusive one
    rows[0]["verdict"] = _v("x", 0.0, math.nan, math.nan, passed=True, p=1.0)
    rows += [{"nodeid": "t.py::test_z", "verdict": _v("z", 0.3, 0.2, 0.4, passed=False, p=0.001), "p_bh": 1.0,
              "gate": GateDecision("t.py::test_z", False, 0.001, 0.002, False, "fail", "holm")},
             {"nodeid": "t.py::test_w", "verdict": _v("w", 0.0, math.nan, math.nan, passed=True, p=1.0,
                                                       inconclusive=True), "p_bh": 1.0,
              "gate": GateDecision("t.py::test_w", True, 1.0, 1.0, True, "inconclusive", "holm")}]
    assert markdown_summary(rows).splitlines()[0] == ("## ❌ pytest-posbias: 1 of 4 gates failed, 1 of 4 gates not "
                                                      "measured, 1 of 4 inconclusive")
