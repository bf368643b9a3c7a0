"""report.render: the HTML a run log renders to: each verdict in its row with its result and reason, examples
and figures in their sections, untrusted text escaped and made inert, credentials redacted, deterministic bytes,
and where the report files go."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

from pytest_posbias.report.render import render, write_reports
from pytest_posbias.stats import paired_change_verdict

CAND, BASE = "sim:candidate", "sim:baseline"
SPEC = "cooking-short-P2"
EVIL = "<script>alert('x')</script>"
STAMP = "2026-01-01T00:00:00+00:00"


def _verdict(nodeid, *, fails, model=CAND, name=None, reason=None, spec=SPEC):
    """A real verdict's record: 20 of 30 units changed under the candidate alone fails, a balanced change passes."""
    a = np.array([1] * 20 + [0] * 10) if fails else np.array([1, 0] * 15)
    b = np.zeros(30, int) if fails else np.array([0, 1] * 15)
    d = paired_change_verdict(a, b, name=name or nodeid.split("::")[-1], threshold=0.0, unit="videos").to_dict()
    d.update(kind="verdict", nodeid=nodeid, extra={**d.get("extra", {}), "model": model, "spec": spec})
    if reason is not None:
        d["reason"] = reason
    return d


def _instance(model, group, cov, *, summary="", refs=(), reasons=()):
    slots = [{"video": f"vid-{group}-{k}", "coverage": c, "summary": summary, "status": "ok",
              "references": list(refs), "covered": [True] * len(refs), "reasons": list(reasons)}
             for k, c in enumerate(cov)]
    return {"kind": "observation", "probe": "positional", "type": "instance", "model": model, "spec": SPEC, "P": 2,
            "group": group, "order": [0, 1], "slots": slots, "thumbnails": ["", ""]}


class Rows(HTMLParser):
    """The text of each verdict row (``<tr id=...>``), and the section (last ``<h2 id>``) each row sits in."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self.section: dict[str, str] = {}
        self._h2 = ""
        self._row: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2" and a.get("id"):
            self._h2 = a["id"]
        if tag == "tr" and a.get("id"):
            self._row = a["id"]
            self.rows[self._row] = ""
            self.section[self._row] = self._h2

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._row is not None:
            self.rows[self._row] += data


def _section(html: str, h2_id: str) -> str:
    """The HTML from ``<h2 id=h2_id>`` to the next ``<h2``."""
    start = html.index(f'<h2 id="{h2_id}"')
    end = html.find("<h2", start + 1)
    return html[start:end if end > 0 else len(html)]


@pytest.fixture
def one_run(write_run_log):
    recs = [_verdict("suites/test_positional.py::test_dpb[cooking-short-P2]", fails=True, name="DPB cooking-short-P2",
                     reason=f"estimate above the bound {EVIL}"),
            _verdict("suites/test_phase.py::test_flip[sim]", fails=False, name="flip rate")]
    recs.append(_instance(CAND, "g1", [0.9, 0.1], summary="A cat \u202eevil\u202c <img src=x onerror=alert(1)>",
                          refs=[f"The chef {EVIL} chops onions."], reasons=["</li><b>judge said so</b>"]))
    header = {"models": [CAND], "command": ["pytest", "--posbias-api-base=https://user:hunter2@example.org/v1"],
              "mode": "detect"}
    return write_run_log("one", header=header, records=recs)


def test_each_verdict_lands_in_its_own_row_with_result_name_and_reason(one_run):
    """The failing gate's row says FAIL with its name and reason, the passing one PASS; both in the verdict table."""
    p = Rows()
    p.feed(render([one_run], rendered_at=STAMP))
    fail = next(r for r in p.rows.values() if "DPB cooking-short-P2" in r)
    ok = next(r for r in p.rows.values() if "flip rate" in r)
    assert "FAIL" in fail and "PASS" not in fail and "estimate above the bound" in fail and CAND in fail
    assert "PASS" in ok and "FAIL" not in ok
    assert {p.section[k] for k, r in p.rows.items() if "DPB cooking" in r or "flip rate" in r} == {"summary"}


def test_the_decision_and_the_counts_say_a_failure_is_not_shipped(one_run):
    """One failing gate: the front page says 'Do not ship' and the verdict section counts 1 FAILED of 2 gates."""
    html = render([one_run], rendered_at=STAMP)
    decision = re.search(r'<div class="decision (\w+)" id="decision">\s*<span class="verdict-word">([^<]+)<', html)
    assert decision.groups() == ("noship", "Do not ship")
    assert re.search(r'<span class="badge fail">1 FAILED</span>.*· 2 gates', _section(html, "summary"))


def test_untrusted_text_is_escaped_and_control_characters_made_visible(one_run):
    """Reasons, summaries, references and judge reasons from the log are text, never markup; a bidi override is
    shown as \\u202e, never applied."""
    html = render([one_run], rendered_at=STAMP)
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>judge said so</b>" not in html
    assert "&lt;script&gt;alert(" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "\u202e" not in html and "\\u202e" in html


def test_a_failing_gates_example_lands_in_the_examples_section(one_run):
    """The failing configuration's instance is shown under Examples: its slots' videos, summary and reference."""
    examples = _section(render([one_run], rendered_at=STAMP), "examples")
    assert "vid-g1-0" in examples and "vid-g1-1" in examples
    assert "A cat" in examples and "The chef &lt;script&gt;" in examples


def test_credentials_in_the_command_are_redacted(one_run):
    """A password inside a URL of the logged command never reaches the page."""
    html = render([one_run], rendered_at=STAMP)
    assert "hunter2" not in html and "example.org/v1" in html


def test_the_same_log_renders_to_the_same_bytes(one_run):
    """Rendering is deterministic given the render time."""
    assert render([one_run], rendered_at=STAMP) == render([one_run], rendered_at=STAMP)


def test_a_candidate_with_a_baseline_gets_the_comparison_figure_in_its_section(write_run_log):
    """A run with --baseline: the paired-differences figure and table sit under the comparison heading, and the
    decision is the candidate's."""
    rng = np.random.default_rng(0)
    recs = []
    for model, tilt in ((CAND, 0.3), (BASE, 0.0)):
        for g in range(12):
            for order in ((0, 1), (1, 0)):
                cov = [0.6 + tilt + rng.uniform(-0.05, 0.05), 0.6 - tilt + rng.uniform(-0.05, 0.05)]
                recs.append({**_instance(model, f"g{g:02d}", cov), "order": list(order), "thumbnails": []})
    recs.append(_verdict("suites/test_phase.py::test_flip[cand]", fails=False, name="flip rate", model=CAND))
    recs.append(_verdict("suites/test_phase.py::test_flip[base]", fails=True, name="flip rate", model=BASE))
    log = write_run_log("cmp", header={"models": [CAND], "baseline": BASE}, records=recs)
    html = render([log], rendered_at=STAMP)
    comparison = _section(html, "comparison")
    assert "<svg" in comparison and "<figure" in comparison
    assert re.search(r'<tr class="worse"><td>cooking-short-P2</td><td>DPB</td>', comparison)
    assert "now passes" in comparison
    assert re.search(r'id="decision">\s*<span class="verdict-word">Ship<', html)  # the baseline's failure is not ours


def test_two_runs_of_one_model_are_told_apart(write_run_log):
    """Two logs of the same model: the title and rows name them (A) and (B)."""
    a = write_run_log("a", header={"models": [CAND]},
                      records=[_verdict("suites/test_phase.py::test_flip[x]", fails=False, name="flip rate")])
    b = write_run_log("b", header={"models": [CAND]},
                      records=[_verdict("suites/test_phase.py::test_flip[x]", fails=True, name="flip rate")])
    html = render([a, b], rendered_at=STAMP)
    assert f"<title>pytest-posbias robustness report: {CAND} (A), {CAND} (B)</title>" in html
    p = Rows()
    p.feed(html)
    rows = [r for r in p.rows.values() if "flip rate" in r]
    assert len(rows) == 2 and any(f"{CAND} (A)" in r and "PASS" in r for r in rows)
    assert any(f"{CAND} (B)" in r and "FAIL" in r for r in rows)


def test_reports_go_to_the_named_file_or_to_a_stamped_file_and_latest(one_run, tmp_path):
    """An explicit path gets the page alone; otherwise reports/<model>-<start>.html and latest.html, the same page."""
    [named] = write_reports([one_run], rootdir=tmp_path, explicit="out/r.html")
    assert named == tmp_path / "out" / "r.html" and "<html" in named.read_text()
    stamped, latest = write_reports([one_run], rootdir=tmp_path)
    assert stamped == tmp_path / "reports" / "sim-candidate-20260101T000000Z.html"
    assert latest == tmp_path / "reports" / "latest.html"
    strip = lambda s: re.sub(r"rendered [^<]*", "", s)  # noqa: E731
    assert strip(stamped.read_text()) == strip(latest.read_text())


def _decision(html: str) -> tuple[str, str]:
    m = re.search(r'<div class="decision (\w+)" id="decision">\s*<span class="verdict-word">([^<]+)</span>\s*'
                  r'<span class="why">([^<]*)</span>', html)
    return m.group(1), m.group(3)


def test_a_run_that_did_not_finish_is_not_shipped_however_its_gates_did(write_run_log):
    """Every gate passed but pytest exited 2: no ship, the exit status said on the front page and in the badge."""
    log = write_run_log("cut", header={"models": [CAND], "exitstatus": 2},
                        records=[_verdict("suites/test_phase.py::test_flip[x]", fails=False, name="flip rate")])
    html = render([log], rendered_at=STAMP)
    cls, why = _decision(html)
    assert cls == "noship" and "the run did not finish (pytest exit 2)" in why
    assert "RUN DID NOT FINISH (pytest exit 2)" in html and "ALL PASSED" not in html


def test_tests_that_ended_without_a_verdict_are_counted_and_listed_escaped(write_run_log):
    """An errored gate test is a lost gate: no ship, counted, listed with its node id and message (escaped)."""
    errored = [{"nodeid": "suites/test_positional.py::test_meg[x]", "when": "call", "message": [f"boom {EVIL}"]}]
    log = write_run_log("err", header={"models": [CAND], "errored_tests": errored},
                        records=[_verdict("suites/test_phase.py::test_flip[x]", fails=False, name="flip rate")])
    html = render([log], rendered_at=STAMP)
    cls, why = _decision(html)
    assert cls == "noship" and "1 tests ended without a verdict" in why
    assert "1 TESTS ENDED WITHOUT A VERDICT" in html
    assert "<li>suites/test_positional.py::test_meg[x] (call): boom &lt;script&gt;" in html


def test_a_run_with_no_verdict_is_not_a_pass(write_run_log):
    """No gate decided: no ship and 'NO GATE DECIDED', never 'ALL PASSED'."""
    html = render([write_run_log("empty", header={"models": [CAND]})], rendered_at=STAMP)
    cls, why = _decision(html)
    assert cls == "noship" and "no gate decided" in why
    assert "NO GATE DECIDED" in html and "ALL PASSED" not in html


def test_a_configuration_name_from_the_log_cannot_close_a_figures_comment(write_run_log):
    """A spec that tries to end matplotlib's XML comment and open a script stays text, in the figure and the table."""
    evil_spec = "x --><script>alert(1)</script><!-- "
    rng = np.random.default_rng(0)
    recs = []
    for model, tilt in ((CAND, 0.3), (BASE, 0.0)):
        for g in range(12):
            cov = [0.6 + tilt + rng.uniform(-0.05, 0.05), 0.6 - tilt + rng.uniform(-0.05, 0.05)]
            recs.append({**_instance(model, f"g{g:02d}", cov), "spec": evil_spec, "thumbnails": []})
    html = render([write_run_log("evil", header={"models": [CAND], "baseline": BASE}, records=recs)],
                  rendered_at=STAMP)
    comparison = _section(html, "comparison")
    assert "<svg" in comparison and "alert(1)" in comparison  # the label is drawn, as text
    assert "<script>" not in html and "--><script" not in html


def test_a_run_log_missing_verdicts_its_decision_counted_is_not_shipped(write_run_log):
    """A run log cut after its records (the verdict lines come last) keeps a SHIP decision over 2 gates in its
    header but holds 1 verdict: no ship, and the report says how many verdicts are missing, never ALL PASSED."""
    run = {"exit_code": 0, "label": "SHIP", "why": "all 2 gates passed the run-level decision", "n_gates": 2}
    for kept in (1, 0):
        recs = [_verdict("suites/test_phase.py::test_flip[x]", fails=False, name="flip rate")][:kept]
        html = render([write_run_log(f"cut{kept}", header={"models": [CAND], "run_decision": run}, records=recs)],
                      rendered_at=STAMP)
        cls, why = _decision(html)
        assert cls == "noship" and f"holds {kept} of the 2 verdicts" in why
        assert "ALL PASSED" not in html and ">Ship<" not in html


@pytest.mark.parametrize("value", ["false", "no", 1, None])
def test_a_verdict_whose_passed_is_not_a_boolean_is_never_a_pass_in_the_report(write_run_log, value):
    """A verdict record whose ``passed`` is not JSON true (a damaged or foreign log) is a failure in the banner,
    the counts and its row, as in the history page: no decision is no pass."""
    rec = {**_verdict("suites/test_phase.py::test_flip[x]", fails=False, name="flip rate"), "passed": value}
    html = render([write_run_log("odd", header={"models": [CAND]}, records=[rec])], rendered_at=STAMP)
    cls, _ = _decision(html)
    assert cls == "noship" and "ALL PASSED" not in html and "1 FAILED" in html


def test_a_verdict_without_its_passed_field_is_a_failure_not_a_crash(write_run_log):
    """A verdict record lacking ``passed`` renders as a failure instead of raising KeyError."""
    rec = _verdict("suites/test_phase.py::test_flip[x]", fails=False, name="flip rate")
    del rec["passed"]
    html = render([write_run_log("nopass", header={"models": [CAND]}, records=[rec])], rendered_at=STAMP)
    assert _decision(html)[0] == "noship" and "1 FAILED" in html


def test_without_a_recorded_decision_inconclusive_gates_never_read_all_passed(write_run_log):
    """A log without the run-level record whose gates were all inconclusive renders no ship and never ALL PASSED."""
    rec = {**_verdict("suites/test_phase.py::test_flip[x]", fails=False, name="flip rate"), "inconclusive": True}
    html = render([write_run_log("inc", header={"models": [CAND]}, records=[rec])], rendered_at=STAMP)
    assert _decision(html)[0] == "noship" and "ALL PASSED" not in html and "INCONCLUSIVE" in html


def test_a_run_not_measured_for_a_gate_skipped_for_missing_data_never_reads_all_passed(write_run_log):
    """A NOT MEASURED decision over a selected gate skipped for missing data read ALL PASSED beside it."""
    run = {"exit_code": 6, "label": "NOT MEASURED", "n_gates": 1, "skipped": {"no data": 1},
           "why": "1 selected gate test skipped for missing data (e.g. data.jsonl: no usable multiple-choice item): "
                  "not measured; the 1 that ran: 1 pass"}
    recs = [_verdict("suites/test_positional.py::test_meg[x]", fails=False, name="MEG")]
    html = render([write_run_log("nodata", header={"models": [CAND], "run_decision": run}, records=recs)],
                  rendered_at=STAMP)
    cls, why = _decision(html)
    assert cls == "noship" and "skipped for missing data" in why
    assert "ALL PASSED" not in html
