"""The run-level release decision (pytest_posbias.gates.decision), its exit statuses and where they show.

Placed with ``gates/decision.py``, its subject; the exit statuses and where they show are checked
through pytester runs."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from pytest_posbias import exitcodes
from pytest_posbias.errors import ConfigError
from pytest_posbias.gates.decision import (
    gate_p_value,
    holm_adjust,
    power_note,
    quick_notice,
    run_decision,
    sequential_p_value,
    simulated_notice,
)
from pytest_posbias.stats import Verdict, inconclusive_verdict


def _v(p: float, *, passed: bool | None = None, mode: str = "detect", est: float = 0.0, half: float = 0.01,
       n: int = 48, extra: dict | None = None) -> Verdict:
    """A |MEG| <= 0.02 verdict with p-value ``p`` (failing when p <= 0.05 unless ``passed`` says)."""
    return Verdict(name="MEG", estimate=est, ci_low=est - half, ci_high=est + half, threshold=0.02, n=n, p_value=p,
                   passed=(p > 0.05) if passed is None else passed, mode=mode, reason="r", alpha=0.05, lower=-0.02,
                   upper=0.02, unit="groups", extra=extra or {})


def test_holm_matches_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = np.random.default_rng(3).uniform(size=40) ** 4
    assert np.allclose(holm_adjust(p), multipletests(p, method="holm")[1])
    assert holm_adjust([float("nan"), 0.01]).tolist() == [1.0, 0.02]


def test_sequential_p_value_is_uniform_under_the_null_at_every_level():
    """2,000 seeded null paths of the 4-look OBF design: P(p <= u) within the Clopper–Pearson
    interval of u at levels below α (where Holm uses it) and at α."""
    from pytest_posbias.stats.sequential import gsd_boundaries, gsd_sizes

    n_max, alpha, reps = 48, 0.05, 10000
    sizes = gsd_sizes(n_max, 4)
    cs = gsd_boundaries([s / n_max for s in sizes], alpha)
    rng = np.random.default_rng(20261202)
    z = np.cumsum(rng.standard_normal((reps, len(sizes))) * np.sqrt(np.diff([0, *sizes])), axis=1) / np.sqrt(sizes)
    cross = z >= np.array(cs)
    crossed = cross.any(axis=1)
    stop = np.where(crossed, cross.argmax(axis=1), len(sizes) - 1)

    def p_of(i: int) -> float:
        return sequential_p_value(nominal_p=float(norm.sf(z[i, stop[i]])), look=int(stop[i]), n_max=n_max, alpha=alpha)

    # only a crossing (a failing gate) gets a p-value below 1
    ps = np.array([p_of(i) for i in np.flatnonzero(crossed)])
    for u in (0.005, 0.01, 0.025, 0.05):
        k = int((ps <= u).sum())
        ci = binomtest(k, reps).proportion_ci(confidence_level=0.99, method="exact")
        assert ci.low <= u <= ci.high, (u, k / reps)


def test_sequential_gate_uses_the_stagewise_p_not_the_rescaled_one():
    from pytest_posbias.stats.sequential import gsd_boundaries, gsd_sizes

    sizes = gsd_sizes(48, 4)
    a0 = float(norm.sf(gsd_boundaries([s / 48 for s in sizes], 0.05)[0]))
    nominal = a0 / 2  # crossed at the first look
    rescaled = nominal * 0.05 / a0
    v = _v(rescaled, passed=False, extra={"design": "group-sequential (OBF)", "looks": sizes[:1], "n_max": 48})
    assert nominal <= gate_p_value(v) <= 4 * nominal < rescaled  # a strong first-look failure keeps a small p
    early_pass = _v(0.4, passed=True, extra={"design": "group-sequential (OBF)", "looks": sizes[:2], "n_max": 48})
    assert gate_p_value(early_pass) == 1.0


def test_one_marginal_gate_among_164_does_not_fail_the_run_but_does_without_adjustment():
    """The landed failure: one equal-attention MEG gate at p = 0.046 among 164 gates."""
    verdicts = [("g000", _v(0.046))] + [(f"g{i:03d}", _v(0.3 + i / 1000)) for i in range(1, 164)]
    d = run_decision(verdicts)
    assert d.exit_code == exitcodes.SHIP and d.gate("g000").own_passed is False and d.gate("g000").adjusted_passed
    assert d.gate("g000").p_adjusted == pytest.approx(1.0)
    assert "1 failed on their own" in d.why
    none = run_decision(verdicts, multiplicity="none")
    assert none.exit_code == exitcodes.DO_NOT_SHIP and none.gate("g000").status == "fail"


def test_one_gate_just_past_its_threshold_with_strong_evidence_still_fails_the_run():
    """A dose just past the threshold measured on a large sample (p = 1e-5) fails the run among 164."""
    verdicts = [("dose", _v(1e-5, est=0.035))] + [(f"g{i:03d}", _v(0.5)) for i in range(163)]
    d = run_decision(verdicts)
    assert d.exit_code == exitcodes.DO_NOT_SHIP and d.gate("dose").status == "fail"
    assert d.gate("dose").p_adjusted == pytest.approx(164e-5)


def test_holm_run_false_failure_rate_is_at_most_alpha_for_164_compliant_gates():
    """2,000 seeded runs of 164 gates at their boundary (uniform p, half of them equicorrelated
    at 0.5): the run's false-failure rate, unadjusted near 1, is <= α with Holm."""
    rng = np.random.default_rng(7)
    reps, m = 2000, 164
    common = rng.standard_normal((reps, 1))
    z = np.concatenate([rng.standard_normal((reps, m // 2)),
                        math.sqrt(0.5) * common + math.sqrt(0.5) * rng.standard_normal((reps, m // 2))], axis=1)
    p = norm.sf(z)
    fails = sum(run_decision([(str(j), _v(float(q))) for j, q in enumerate(row)]).exit_code == 1 for row in p[:40])
    holm_any = np.array([(holm_adjust(row) <= 0.05).any() for row in p])
    ci = binomtest(int(holm_any.sum()), reps).proportion_ci(confidence_level=0.95, method="exact")
    assert ci.low <= 0.05 and holm_any.mean() <= 0.05 + 0.01
    assert fails <= int(holm_any[:40].sum())  # the decision fails a gate only when Holm rejects it
    assert (p <= 0.05).any(axis=1).mean() > 0.9  # without adjustment nearly every run fails


def test_gates_a_stopped_run_never_reached_stay_in_holms_family_with_p_1():
    """-x stops at the first gate that fails on its own: adjusted within the gates that ran, that
    gate would fail the run of a compliant model 2-3x more often than α (benchmarks/stopped_runs.py)."""
    ids = [f"t{i}" for i in range(6)]
    stopped = run_decision([(ids[0], _v(0.02))], not_run=ids[1:], stopped="stopped by -x after 1 failure")
    assert stopped.exit_code == exitcodes.NOT_MEASURED  # 0.02 · 6 > α: not a failure, and five gates never ran
    assert stopped.gates[0].p_adjusted == pytest.approx(0.12)
    strong = run_decision([(ids[0], _v(0.001))], not_run=ids[1:], stopped="stopped by -x after 1 failure")
    assert strong.exit_code == exitcodes.DO_NOT_SHIP  # 0.001 · 6 < α: the run fails on what it measured


def test_not_measured_and_no_decision_exit_6():
    m = {"measurement": {"floor_met": False}}
    d = run_decision([("a", _v(0.5)), ("b", _v(0.5, passed=False, extra=m))])
    assert d.exit_code == exitcodes.NOT_MEASURED and "below its measurement floor" in d.why
    cert = inconclusive_verdict(name="MEG", threshold=0.02, sides="both", n=3, mode="certify", alpha=0.05,
                                unit="groups", why="too few")
    assert run_decision([("c", cert)]).exit_code == exitcodes.NOT_MEASURED
    none = run_decision([], skipped=[("t", "manifest.jsonl: no usable multiple-choice item")])
    assert none.exit_code == exitcodes.NOT_MEASURED and "no gate reached a verdict" in none.why
    opt = run_decision([], skipped=[("t", "confirmatory TOST: opt in with --posbias-confirmatory")])
    assert opt.exit_code == exitcodes.NOT_MEASURED and opt.skipped == {"opt-in not selected": 1}
    # an opt-in skip beside gates that decided is reported, not a failure
    both = run_decision([("a", _v(0.5))], skipped=[("t", "opt in with --posbias-confirmatory")])
    assert both.exit_code == exitcodes.SHIP and both.skipped == {"opt-in not selected": 1}
    # a measured failure outranks a gate that was not measured
    assert run_decision([("a", _v(1e-6)), ("b", _v(0.5, passed=False, extra=m))]).exit_code == exitcodes.DO_NOT_SHIP
    with pytest.raises(ConfigError, match="multiplicity"):
        run_decision([], multiplicity="bonferroni")


def test_inconclusive_detect_gates_are_named_and_a_run_of_only_them_decided_nothing():
    """A detect-mode gate whose data could not decide passes on its own but shows nothing: its run
    status is "inconclusive", the decision names it, and a run where every gate was inconclusive is
    NOT MEASURED (exit 6), never a SHIP."""
    inc = inconclusive_verdict(name="contamination", threshold=0.1, sides="upper", n=2, mode="detect", alpha=0.05,
                               unit="videos", why="fewer than 5 clusters", estimate=0.198)
    alone = run_decision([("a", inc), ("b", inc)])
    assert alone.exit_code == exitcodes.NOT_MEASURED and "no gate decided" in alone.why
    assert alone.inconclusive == ("a", "b") and alone.to_dict()["n_inconclusive"] == 2
    mixed = run_decision([("a", inc), ("b", _v(0.5))])
    assert mixed.exit_code == exitcodes.SHIP and mixed.inconclusive == ("a",)
    assert mixed.gate("a").status == "inconclusive" and mixed.gate("b").status == "pass"
    assert "1 were inconclusive" in mixed.why
    from pytest_posbias.report.summary import decision_lines

    text = "\n".join(line for line, _ in decision_lines(mixed, exit_code=mixed.exit_code))
    assert "INCONCLUSIVE: 1 gates could not decide" in text and "    a" in text
    # a plain test that failed sets the status (pytest's 1): the first line says so and names it
    lines = decision_lines(mixed, exit_code=1, failed_tests=["tests/test_mine.py::test_x"])
    assert lines[0][0].startswith("RUN DECISION: DO NOT SHIP (exit 1): 1 test failed or errored without a verdict")
    assert "the gates alone: " + mixed.why in lines[0][0]
    assert ("    tests/test_mine.py::test_x", False) in lines
    assert decision_lines(mixed, exit_code=mixed.exit_code, failed_tests=[])[0][0].endswith(mixed.why)
    failing = run_decision([("b", _v(1e-6))])  # the gates fail too: the same status, the test still named
    both = decision_lines(failing, exit_code=failing.exit_code, failed_tests=["tests/test_mine.py::test_x"])
    assert both[0][0].endswith(failing.why)
    assert ("  also 1 test failed or errored without a verdict:", False) in both
    assert ("    tests/test_mine.py::test_x", False) in both


def test_certify_failures_say_compliance_was_not_shown_and_keep_their_own_p():
    """A certify-mode gate that did not show compliance is not a failure on measured evidence, and
    its run-level p is its own (a sequential gate's too), not the detect side's z-ordering p."""
    seq = {"n_max": 48, "looks": [12, 24, 36, 48], "design": "group-sequential (OBF)", "kind": "mean"}
    v = _v(0.4, passed=False, mode="certify", extra=seq)
    d = run_decision([("a", v), ("b", _v(0.01, passed=True, mode="certify", extra=seq))])
    assert d.exit_code == exitcodes.DO_NOT_SHIP
    assert "1 of 2 gates did not show compliance (certify mode)" in d.why and "measured evidence" not in d.why
    assert gate_p_value(v) == pytest.approx(0.4) and d.gate("b").p_adjusted == pytest.approx(0.01)


def test_certify_gates_are_an_intersection_union_test_without_adjustment():
    d = run_decision([("a", _v(0.04, passed=True, mode="certify")), ("b", _v(0.06, passed=False, mode="certify"))])
    assert d.exit_code == exitcodes.DO_NOT_SHIP and d.gate("a").family == "iut" and d.gate("a").p_adjusted == 0.04


def test_power_note_flags_a_gate_that_cannot_detect_twice_its_threshold():
    z = norm.isf(0.05)
    wide = power_note(_v(0.5, half=0.05))  # the quick run's MEG: interval 2.5x the band
    assert wide.underpowered and wide.target == pytest.approx(0.04)
    se = 0.05 / z
    assert wide.detectable == pytest.approx(0.02 + (z + norm.ppf(0.8)) * se)
    assert wide.n_needed == math.ceil(48 * ((z + norm.ppf(0.8)) * se / 0.02) ** 2)
    assert not power_note(_v(0.5, half=0.005)).underpowered
    d = run_decision([("wide", _v(0.5, half=0.05)), ("ok", _v(0.5, half=0.005))])
    assert d.exit_code == exitcodes.SHIP and d.underpowered == ("wide",)
    # a threshold the settings accept near 0 (1e-300): no units would do, and the note says so (the
    # squared ratio overflowed and ended the run without a decision)
    tiny = dataclasses.replace(_v(0.5, half=0.05), threshold=1e-300, lower=-1e-300, upper=1e-300)
    note = power_note(tiny)
    assert note.underpowered and note.n_needed is None


def test_notices_for_simulated_models_and_quick_sizes():
    assert simulated_notice(["qwen3vl8b"]) is None
    assert "SIMULATED MODEL — not a release decision" in simulated_notice(["sim:unbiased"])
    assert quick_notice({}) is None
    assert "positional.groups = 12 (default 48)" in quick_notice({"positional": {"groups": 12}})


# --------------------------------------------------------------------------- through pytest

_GATES = '''
import pytest
from pytest_posbias.stats import Verdict

P = {ps!r}

@pytest.mark.meg
@pytest.mark.parametrize("i", range(len(P)))
def test_gate(posbias_gate, i):
    p = P[i]
    posbias_gate(Verdict(name="MEG", estimate=0.0, ci_low=-0.01, ci_high=0.01, threshold=0.02, n=48, p_value=p,
                         passed=p > 0.05, mode="detect", reason=f"p = {{p}}", alpha=0.05, lower=-0.02, upper=0.02))
'''


def _project(pytester, ps, *, model=True):
    pytester.makepyprojecttoml("[tool.posbias]\n" + ('model = "sim:unbiased"\n' if model else "") + 'cache = ".pb"\n')
    pytester.makepyfile(test_gates=_GATES.format(ps=list(ps)))


def test_a_marginal_own_failure_is_a_red_test_but_exit_0_with_holm(pytester):
    _project(pytester, [0.046] + [0.5] * 19)
    out = pytester.path / "out.json"
    res = pytester.runpytest("-p", "no:randomly", f"--posbias-json={out}", f"--posbias-markdown={pytester.path / 's.md'}")
    assert res.ret == exitcodes.SHIP, res.stdout.str()[-3000:]
    res.assert_outcomes(failed=1, passed=19)  # the gate's own verdict stays visible as a failed test
    text = res.stdout.str()
    assert "RUN DECISION: SHIP (exit 0)" in text and "SIMULATED MODEL — not a release decision" in text
    data = json.loads(out.read_text())
    assert data["exitstatus"] == 0 and data["pytest_exitstatus"] == 1 and data["decision"]["label"] == "SHIP"
    row = next(v for v in data["verdicts"] if v["p_value"] == 0.046)
    assert row["passed"] is False and row["adjusted_passed"] is True and row["p_adj"] == pytest.approx(0.92)
    md = (pytester.path / "s.md").read_text()
    assert "SHIP (exit 0)" in md and "SIMULATED MODEL" in md and "| p adj |" in md
    res = pytester.runpytest("-p", "no:randomly", "--posbias-multiplicity=none")
    assert res.ret == exitcodes.DO_NOT_SHIP
    assert pytester.runpytest("-p", "no:randomly", "-n", "2").ret == exitcodes.SHIP  # the xdist controller decides too


def test_a_strong_failure_fails_the_run(pytester):
    _project(pytester, [1e-6] + [0.5] * 19)
    res = pytester.runpytest("-p", "no:randomly", "--junitxml=j.xml")
    assert res.ret == exitcodes.DO_NOT_SHIP and "RUN DECISION: DO NOT SHIP (exit 1)" in res.stdout.str()
    xml = (pytester.path / "j.xml").read_text()
    assert 'name="posbias.exit_code" value="1"' in xml and "posbias.adjusted" in xml


def test_every_gate_skipped_for_lack_of_data_exits_6_and_says_why(pytester):
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\ncache = ".pb"\n')
    pytester.makepyfile(test_gates='''
import pytest

@pytest.mark.option_order
def test_order(posbias_gate):
    pytest.skip("m.jsonl: no usable multiple-choice item")
''')
    out = pytester.path / "out.json"
    res = pytester.runpytest("-p", "no:randomly", f"--posbias-json={out}")
    assert res.ret == exitcodes.NOT_MEASURED, res.stdout.str()[-2000:]
    assert "no gate reached a verdict" in res.stdout.str()
    data = json.loads(out.read_text())
    assert data["exitstatus"] == 6 and data["verdicts"] == [] and data["decision"]["label"] == "NOT MEASURED"


def test_a_run_without_gate_tests_keeps_pytests_status(pytester):
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\n')
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n\ndef test_skip():\n    import pytest; pytest.skip('x')\n")
    assert pytester.runpytest("-p", "no:randomly").ret == 0


def test_no_model_is_a_usage_error_naming_both_ways(pytester):
    pytester.makepyprojecttoml('[tool.posbias]\ncache = ".pb"\n')
    pytester.makeconftest("from pytest_posbias.suites.conftest import pytest_generate_tests\n")
    pytester.makepyfile(test_gates="def test_gate(posbias_model):\n    pass\n")
    res = pytester.runpytest("-p", "no:randomly")
    assert res.ret == exitcodes.USAGE_ERROR
    err = res.stderr.str()
    assert "--posbias-model" in err and "[tool.posbias]" in err
    assert pytester.runpytest("-p", "no:randomly", "--posbias-model", "sim:unbiased").ret == 0


def test_a_scaffolded_folder_with_no_model_exits_4_with_the_message(pytester):
    """A run of the suites with no model is a usage error; listing them (``--collect-only``, an
    editor's test discovery) calls no model and needs none."""
    from pytest_posbias.cli import scaffold

    scaffold.scaffold(pytester.path)  # the model line of the written table is commented out
    res = pytester.runpytest_subprocess("-m", "meg and not slow", "-q", "-p", "no:randomly")
    assert res.ret == exitcodes.USAGE_ERROR, res.stdout.str()[-2000:]
    err = res.stderr.str()
    assert "no model to test" in err and "--posbias-model" in err and "[tool.posbias]" in err
    assert not (pytester.path / ".posbias").exists()
    listed = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:randomly")
    assert listed.ret == 0, listed.stdout.str()[-2000:] + listed.stderr.str()
    assert "test_meg" in listed.stdout.str() and "no model to test" not in listed.stderr.str()


def test_minus_n_in_a_scaffolded_project_with_no_model(pytester):
    """Under ``-n`` the project's unrelated tests run with no model to test (they need none); a
    selection of gate tests ends with the usage error and its message, not xdist's internal error,
    and runs nothing."""
    pytest.importorskip("xdist")
    from pytest_posbias.cli import scaffold

    scaffold.scaffold(pytester.path)
    pytester.mkpydir("tests/unit")
    (pytester.path / "tests" / "unit" / "test_plain.py").write_text("def test_ok():\n    assert True\n")
    plain = pytester.runpytest_subprocess("-n", "2", "-q", "-p", "no:randomly", "tests/unit")
    assert plain.ret == 0, plain.stdout.str()[-2000:]
    plain.assert_outcomes(passed=1)
    gates = pytester.runpytest_subprocess("-n", "2", "-q", "-p", "no:randomly", "-m", "meg and not slow")
    out = gates.stdout.str() + gates.stderr.str()
    assert gates.ret == exitcodes.USAGE_ERROR, out[-2000:]
    assert "no model to test" in out and "INTERNALERROR" not in out and "did not run" not in out
    assert "passed" not in out and not (pytester.path / ".posbias").exists()


def test_no_decision_renders_a_report_that_says_so(pytester):
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\ncache = ".pb"\n')
    pytester.makepyfile(test_gates='''
import pytest

@pytest.mark.option_order
def test_order(posbias_gate):
    pytest.skip("m.jsonl: no usable multiple-choice item")
''')
    res = pytester.runpytest("-p", "no:randomly", "--posbias-report=r.html")
    assert res.ret == exitcodes.NOT_MEASURED
    html = (pytester.path / "r.html").read_text()
    assert "Not measured" in html and "no gate reached a verdict" in html and "SIMULATED MODEL" in html


_NAN_GATES = """
import math
import re
from dataclasses import replace

from pytest_posbias.stats import rate_verdict

def _v(k, name):
    return rate_verdict(k, 40, name=name, threshold=0.15, mode="detect", alpha=0.05, unit="items")

def test_no_successes(posbias_gate):
    v = _v(0, "no attack succeeded")
    posbias_gate(replace(v, extra={"aq": math.nan, "ratio": math.inf, "by": {1: -math.inf}}), calls={"made": 3})

def test_failing(posbias_gate):
    posbias_gate(replace(_v(30, "often"), extra={"aq": math.nan}))
"""


def _strict(text: str):
    """``text`` parsed as strict JSON: ``NaN``, ``Infinity`` and ``-Infinity`` are errors, as in ``JSON.parse``."""
    def reject(constant: str):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=reject)


def test_json_summary_and_junit_properties_are_strict_json(pytester):
    """Non-finite numbers in a verdict (an attack gate's average queries with no success) are written as null: a
    dashboard's ``JSON.parse`` or GitHub's ``fromJSON`` reads the JSON summary and the junit properties."""
    import xml.etree.ElementTree as ET

    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\ncache = ".pb"\n')
    pytester.makepyfile(test_gates=_NAN_GATES)
    res = pytester.runpytest("-p", "no:randomly", "--posbias-json=s.json", "--junitxml=j.xml")
    assert res.ret == exitcodes.DO_NOT_SHIP, res.stdout.str()[-3000:]
    data = _strict((pytester.path / "s.json").read_text())
    row = next(v for v in data["verdicts"] if v["nodeid"].endswith("test_no_successes"))
    assert row["extra"]["aq"] is None and row["extra"]["ratio"] is None and row["extra"]["by"] == {"1": None}
    props = {(p.get("name"), p.get("value")) for p in ET.parse(pytester.path / "j.xml").iter("property")}
    json_props = [v for k, v in props if k in ("posbias_verdict", "posbias_calls", "posbias.adjusted")]
    assert len(json_props) >= 4, props
    for value in json_props:
        _strict(value)
    assert {k for k, _ in props} >= {"posbias_verdict", "posbias_calls", "posbias.adjusted"}


def test_a_bootstrap_gate_that_cannot_fail_the_run_alone_is_named_in_a_notice():
    """An expanded-percentile p-value cannot go below the share 1/(B + 1) through the small-sample
    expansion; with B = 999 and 100 gates in Holm's family (first level 0.0005) a blatant violation
    is never the first rejection, and the decision says so, with the B that lets it fail alone."""
    from pytest_posbias.gates.decision import percentile_p_floor
    from pytest_posbias.stats import mean_verdict

    def blatant(b: int, groups: int = 40, method: str = "percentile") -> Verdict:
        return mean_verdict(np.linspace(0.15, 0.25, groups), None, name="coverage drop", threshold=0.05,
                            sides="upper", n_resamples=b, method=method, rng=np.random.default_rng(0))

    assert blatant(999).p_value == pytest.approx(percentile_p_floor(999, 40)) and percentile_p_floor(999, 40) > 1e-3
    clean = [(f"t::g{i}", _v(0.5)) for i in range(99)]
    low = run_decision([("t::cov", blatant(999)), *clean])
    (notice,) = [n for n in low.notices if "bootstrap" in n]
    assert "1 bootstrap gate cannot fail the run on its own" in notice and "100 gates" in notice
    need = int(re.search(r"n_resamples >= (\d+)", notice).group(1))
    assert percentile_p_floor(need, 40) <= 0.05 / 100 < percentile_p_floor(need - 1, 40)
    assert low.exit_code == 0  # the violation does not fail the run: the reason the notice exists
    high = run_decision([("t::cov", blatant(need)), *clean])
    assert not [n for n in high.notices if "bootstrap" in n] and high.exit_code == 1
    # 12 groups at the default B = 9999 in a 30-gate run: the expansion puts the floor at 0.002
    few = run_decision([("t::cov", blatant(9999, 12)), *clean[:29]])
    assert any("bootstrap gate cannot fail" in n for n in few.notices) and few.exit_code == 0
    # 5 groups: no B lets it; BCa p-values have no such floor and are not named
    assert any("too few groups for any n_resamples" in n for n in
               run_decision([("t::cov", blatant(999, 5)), *clean]).notices)
    assert not [n for n in run_decision([("t::cov", blatant(999, method="bca")), *clean]).notices if "bootstrap" in n]
    assert not [n for n in run_decision([("t::cov", blatant(999))], multiplicity="none").notices if "bootstrap" in n]


def test_a_failed_gate_without_a_valid_p_value_never_ships():
    """A detect gate whose own verdict failed but whose p-value is NaN does not ship the run."""
    d = run_decision([("t::meg", _v(math.nan, passed=False, est=0.08, half=0.02))])
    assert d.exit_code != exitcodes.SHIP
    assert d.gates[0].status != "pass"


def test_a_single_failed_gate_with_a_valid_p_value_fails_the_run():
    """Holm over one gate is the gate's own test: p <= α and a failed verdict give exit 1."""
    d = run_decision([("t::meg", _v(0.01, est=0.08, half=0.02))])
    assert d.exit_code == exitcodes.DO_NOT_SHIP and d.gates[0].status == "fail" and d.gates[0].p_adjusted == 0.01


def test_run_decision_checks_alpha_as_every_other_entry_point():
    """``run_decision(alpha=0.75)`` is a ConfigError, as ``[tool.posbias] alpha = 0.75`` is."""
    with pytest.raises(ConfigError, match="alpha"):
        run_decision([("t::meg", _v(0.5))], alpha=0.75)


@pytest.mark.parametrize("p", [1.5, math.inf, -math.inf, -0.2])
def test_a_p_value_outside_0_1_is_no_valid_p_value(p):
    """p = 1.5 or inf on a failed gate was clipped to 1 and shipped; p = -0.2 on a passing gate was clipped to 0."""
    d = run_decision([("t::meg", _v(p, passed=False, est=0.08, half=0.02))])
    assert d.exit_code == exitcodes.DO_NOT_SHIP and d.gates[0].status == "fail" and math.isnan(d.gates[0].p_adjusted)
    # on a passing gate it counts as 1 (no evidence), as NaN does: it lowers no other gate's adjusted p-value
    assert holm_adjust([p, 0.03]).tolist() == [1.0, 0.06]
    d = run_decision([("t::a", _v(p, passed=True)), ("t::b", _v(0.03))])
    assert d.exit_code == exitcodes.SHIP and d.gate("t::b").p_adjusted == pytest.approx(0.06)


def test_a_gate_skipped_for_missing_data_beside_passing_gates_does_not_ship():
    """A 'no data' skip (not asked for with -m/-k or an opt-in) beside passing gates gave SHIP."""
    d = run_decision([("a", _v(0.5))], skipped=[("t", "manifest.jsonl has no usable multiple-choice items (60 data "
                                                      "problems)")])
    assert d.exit_code == exitcodes.NOT_MEASURED


def test_the_only_gate_failing_on_its_own_fails_the_run_whatever_its_p_value():
    """One detect gate whose CI lies wholly past the bound but whose p-value is 0.053 gave SHIP."""
    d = run_decision([("t::stressor", _v(0.053, passed=False, est=0.08, half=0.02))])
    assert d.exit_code == exitcodes.DO_NOT_SHIP


def test_a_gate_with_no_unit_measured_is_not_measured_even_without_a_floor():
    """A custom gate's rate_verdict(0, 0) (no apply_floor) beside a passing gate gave SHIP."""
    from pytest_posbias.stats import rate_verdict

    empty = rate_verdict(0, 0, name="my rate", threshold=0.15, mode="detect", alpha=0.05, unit="items")
    ok = rate_verdict(0, 60, name="flip rate", threshold=0.15, mode="detect", alpha=0.05, unit="items")
    d = run_decision([("t::mine", empty), ("t::flip", ok)])
    assert d.exit_code == exitcodes.NOT_MEASURED and d.gate("t::mine").status == "not measured"
    assert "no unit measured" in d.why and d.gate("t::flip").status == "pass"


def test_a_gate_failing_on_its_own_with_p_above_alpha_enters_holm_at_alpha():
    """Its own rule rejected at α, so it counts at α: it fails as the last gate left in the step-down,
    and is adjusted like any p = α beside a gate that does not reject."""
    own = _v(0.053, passed=False, est=0.08, half=0.02)
    d = run_decision([("t::own", own), ("t::strong", _v(0.001))])
    assert d.exit_code == exitcodes.DO_NOT_SHIP and d.gate("t::own").p_adjusted == pytest.approx(0.05)
    assert d.gate("t::own").p_value == pytest.approx(0.053)  # the reported p-value is shown as it is
    d = run_decision([("t::own", own), ("t::clean", _v(0.5))])
    assert d.exit_code == exitcodes.SHIP and d.gate("t::own").p_adjusted == pytest.approx(0.1)


def test_an_opt_in_skip_is_not_a_missing_measurement_but_a_no_data_skip_is():
    """Skips the user asked for leave SHIP; a skip for missing data is NOT MEASURED unless a gate fails."""
    opt_in = [("t::tost", "confirmatory TOST (certify-type, ~240 items): opt in with --posbias-confirmatory")]
    no_data = [("t::flip", "data.jsonl: no usable multiple-choice item")]
    assert run_decision([("a", _v(0.5))], skipped=opt_in).exit_code == exitcodes.SHIP
    d = run_decision([("a", _v(0.5))], skipped=[*opt_in, *no_data])
    assert d.exit_code == exitcodes.NOT_MEASURED
    assert "1 selected gate test skipped for missing data (e.g. data.jsonl: no usable" in d.why and "1 pass" in d.why
    assert run_decision([("a", _v(0.001))], skipped=no_data).exit_code == exitcodes.DO_NOT_SHIP


def test_a_gate_failing_on_its_own_at_a_looser_alpha_enters_holm_at_its_own_alpha():
    """A custom gate failing at its own α = 0.10 with p = 0.08 is no evidence at the run's α = 0.05."""
    from dataclasses import replace

    loose = replace(_v(0.08, passed=False, est=0.08, half=0.02), alpha=0.10)
    d = run_decision([("t::loose", loose)], alpha=0.05)
    assert d.exit_code == exitcodes.SHIP and d.gate("t::loose").p_adjusted == pytest.approx(0.08)
    d = run_decision([("t::loose", loose), ("t::clean", _v(0.5))], alpha=0.05)
    assert d.exit_code == exitcodes.SHIP and d.gate("t::loose").p_adjusted == pytest.approx(0.16)


def test_the_skipped_gates_line_says_a_skip_for_missing_data_is_not_measured():
    """The terminal's skip line said only a run with no decision exits 6, beside a no-data skip's exit 6."""
    from pytest_posbias.report.summary import decision_lines

    d = run_decision([("a", _v(0.5))], skipped=[("t::flip", "data.jsonl: no usable multiple-choice item")])
    assert d.exit_code == exitcodes.NOT_MEASURED
    line = next(text for text, _ in decision_lines(d, exit_code=d.exit_code) if "skipped gate tests" in text)
    assert "missing data" in line and "exit 6" in line


def test_a_users_own_skip_mark_beside_passing_gates_ships():
    """A skip the user wrote on a gate test is asked for, not missing data: SHIP beside passing gates."""
    d = run_decision([("a", _v(0.5))], skipped=[("t::mine", "flaky on the CI runner")])
    assert d.exit_code == exitcodes.SHIP


def test_skips_are_told_apart_by_what_asked_for_them():
    """The suites' no-data skips, opt-ins not taken and the user's own skips are counted apart."""
    from pytest_posbias.gates.decision import skip_kind

    assert skip_kind("m.jsonl has no usable multiple-choice items (0 items; 3 data problems)") == "no data"
    assert skip_kind("d: no usable group of 4 videos (MEG needs P = 4)") == "no data"
    assert skip_kind("confirmatory TOST (certify-type, ~240 items): opt in with --posbias-confirmatory") == \
        "opt-in not selected"
    assert skip_kind("flaky on the CI runner") == "skipped by the test"
    d = run_decision([("a", _v(0.5))], skipped=[("t::mine", "flaky"), ("t::m", "m: no usable videos")])
    assert d.exit_code == exitcodes.NOT_MEASURED and dict(d.skipped) == {"skipped by the test": 1, "no data": 1}


def test_a_detectable_value_outside_the_metrics_range_is_no_power():
    """A gate whose smallest detectable violation lies outside the values its metric can take (an amplification
    past 1 over a few videos) detects no violation at all: its note says so, infinite and underpowered, instead
    of a figure no model could reach; one inside the range keeps its figure."""
    extra = {"gate": "stressor"}
    wide = _v(0.5, half=0.9, extra=extra)
    note = power_note(wide)
    assert math.isinf(note.detectable) and note.underpowered
    assert note.why_none == "no violation inside the metric's range [-1, 1] is detected with 80% power"
    assert note.to_dict()["why_none"] == note.why_none
    assert math.isfinite(power_note(_v(0.5, half=0.05, extra=extra)).detectable)
    assert "why_none" not in power_note(_v(0.5, half=0.05, extra=extra)).to_dict()
