"""The phase/order and stressor suites as a user runs them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.suite_project import write_suite_project

pytestmark = pytest.mark.usefixtures("heavy_modules")

SETTINGS = """
[tool.posbias.probes.phase]
items = 60

[tool.posbias.probes.stressor]
videos = 16
trials = 6
"""


def make_project(pytester: pytest.Pytester, manifest: Path, settings: str = SETTINGS) -> None:
    write_suite_project(pytester.path, manifest, ("test_phase_order.py", "test_stressors.py"), settings)


def calls(output: str) -> tuple[int, int]:
    m = re.search(r"model calls: (\d+) made, (\d+) (?:cache hits|served from the cache)", output)
    assert m, output[-2000:]
    return int(m.group(1)), int(m.group(2))


def test_order_fails_on_letter_bias_and_passes_on_unbiased(pytester, small_set):
    make_project(pytester, small_set)
    bad = pytester.runpytest("-m", "option_order", "--posbias-model", "sim:letter-bias", "-p", "no:randomly", "--posbias-json=lb.json")
    assert bad.ret == 1
    assert "option-order flip rate (10 orderings) = 0." in bad.stdout.str()
    v = json.loads((pytester.path / "lb.json").read_text())["verdicts"][0]
    assert v["extra"]["margin"]["auroc"] is not None and v["extra"]["margin"]["auroc"] > 0.8  # the margin predicts the flips
    assert 0 <= v["extra"]["swing"] <= 1 and "circular_unanimity" in v["extra"]
    good = pytester.runpytest("-m", "option_order", "--posbias-model", "sim:unbiased", "-p", "no:randomly")
    assert good.ret == 0


def test_phase_on_unbiased_reports_brief_event_flips_and_the_rerun_floor(pytester, small_set):
    make_project(pytester, small_set, SETTINGS.replace("items = 60", "items = 180"))
    # the fixed design draws all 180 items (the sequential one would stop at the first look here)
    res = pytester.runpytest("-m", "phase or fusion", "--posbias-model", "sim:unbiased", "-p", "no:randomly", "--posbias-fixed",
                             "--posbias-json=ph.json")
    data = json.loads((pytester.path / "ph.json").read_text())
    phase = [v for v in data["verdicts"] if v["extra"].get("gate") == "phase"]
    assert len(phase) == 4
    for v in phase:
        # the sim misses events a grid skips: every phase flip is on a brief-event item
        assert v["extra"]["other_flips"] == 0
        assert v["extra"]["rerun_floor"] == 0.0 and v["extra"]["deterministic_backend"] is True
    assert sum(v["extra"]["brief_event_flips"] for v in phase) > 0
    assert res.ret == 0  # sim:unbiased passes every phase and fusion gate (the equivalence TOST is opt-in: skipped)
    assert all(v["passed"] for v in data["verdicts"])
    fusion = next(v for v in data["verdicts"] if v["extra"].get("gate") == "fusion")
    # the sim is phase-sensitive on brief events: a single pass changes answers under the origin shift,
    # PhaseFusion (mean of the three grids' distributions) changes fewer
    e = fusion["extra"]
    assert e["single_changed"] > 0 and e["fusion_changed"] < e["single_changed"]
    assert e["n01"] > e["n10"]  # discordant items: changed by the single pass only outnumber fusion only


def test_repetition_and_stressor_fail_on_looping_and_pass_on_unbiased(pytester, small_set):
    make_project(pytester, small_set)
    bad = pytester.runpytest("-m", "(repetition or stressor) and not slow", "--posbias-model", "sim:looping", "-p", "no:randomly",
                             "--posbias-json=loop.json")
    assert bad.ret == 1
    # the clean outputs are drawn in full for the stressors, so the gate decides on all of them (fixed design)
    assert re.search(r"clean repetition rate at 16 frames = [0-9.]+ \(90% CI", bad.stdout.str())
    verdicts = {v["extra"].get("stressor", "clean"): v for v in json.loads((pytester.path / "loop.json").read_text())["verdicts"]}
    assert not verdicts["clean"]["passed"]  # documented clean loop probability 0.30 > 0.15
    # Shuffle breaks the motion in about half of the frame pairs: loop probability 0.30 -> 0.95
    assert not verdicts["shuffle"]["passed"] and verdicts["shuffle"]["estimate"] > 0.2
    # Delete and Reverse leave the motion steady, so the sim's loop probability does not move
    assert verdicts["delete1"]["passed"] and verdicts["reverse"]["passed"]
    good = pytester.runpytest("-m", "(repetition or stressor) and not slow", "--posbias-model", "sim:unbiased", "-p", "no:randomly")
    assert good.ret == 0, good.stdout.str()[-3000:]


def test_attack_reports_asr_and_aq_and_reuses_cached_generations(pytester, small_set):
    make_project(pytester, small_set)
    first = pytester.runpytest("-m", "stressor or attack", "--posbias-model", "sim:looping", "-p", "no:randomly", "--posbias-json=a.json")
    out = first.stdout.str()
    assert re.search(r"shuffle attack success rate at 16 frames = [0-9.]+ \(90% repeated CI .*; average queries AQ = [0-9.]+\.", out)
    made, hits = calls(out)
    assert made > 0
    data = json.loads((pytester.path / "a.json").read_text())
    attacks = [v for v in data["verdicts"] if v["extra"].get("gate") == "attack"]
    assert len(attacks) == 8 and all("asr" in v["extra"] and "aq" in v["extra"] for v in attacks)
    delete1 = next(v for v in data["verdicts"] if v["extra"].get("stressor") == "delete1" and v["extra"]["gate"] == "stressor")
    assert delete1["extra"]["variants_per_video"] == [16]  # Delete 1 is exhaustive over the 16 sampled frames
    again = pytester.runpytest("-m", "stressor or attack", "--posbias-model", "sim:looping", "-p", "no:randomly")
    made2, hits2 = calls(again.stdout.str())
    assert made2 == 0 and hits2 >= made + hits  # every request of the first run (duplicates included) from the cache


def test_both_suites_run_end_to_end_on_a_tiny_checkpoint(pytester, small_set, tiny_checkpoints):
    settings = """
[tool.posbias.probes.phase]
items = 6
orderings = 3
budget = 4
resolution = 56

[tool.posbias.probes.stressor]
videos = 3
trials = 2
frames = [4]
max_new_tokens = 16
resolution = 56
"""
    make_project(pytester, small_set, settings)
    model = str(tiny_checkpoints["qwen3_vl"])
    res = pytester.runpytest("-m", "not slow", f"--posbias-model={model}", "--posbias-device", "cpu", "-p", "no:randomly",
                             "--posbias-json=t.json")
    outcomes = res.parseoutcomes()
    assert outcomes.get("errors", 0) == 0, res.stdout.str()[-4000:]
    data = json.loads((pytester.path / "t.json").read_text())
    assert len(data["verdicts"]) == 12 + 1 + 8 + 8
    order = next(v for v in data["verdicts"] if v["extra"].get("gate") == "order")
    assert order["extra"]["mode_scoring"] == "logprobs"  # letters scored through real log-probs
    rep = next(v for v in data["verdicts"] if v["extra"].get("gate") == "repetition")
    # repetition on real generations: a random-weight model may write nothing, which is a lost unit
    # (empty output), never a clean non-repeating one; planned = measured + lost either way
    m = rep["extra"]["measurement"]
    assert m["planned"] == 3 and m["measured"] + sum(m["lost"].values()) == 3
    assert rep["n"] == m["measured"]
    if m["measured"] == 0:
        assert not rep["passed"] and "no measurement" in rep["reason"]
    assert "[qwen3_vl" in res.stdout.str()  # test ids name a checkpoint directory by its last component


def test_after_x_the_report_and_summary_name_the_suite_gates_that_never_ran(pytester, small_set):
    """A suite run stopped by -x at its first failing gate: exit 1 (a gate failed on measured
    evidence), and the HTML report and the Markdown summary list the selected gates it never
    reached; the same selection run to its end lists none."""
    make_project(pytester, small_set)
    args = ("-m", "option_order or fusion", "--posbias-model", "sim:letter-bias", "-p", "no:randomly",
            "--posbias-report=x.html", "--posbias-markdown=x.md", "--posbias-json=x.json")
    res = pytester.runpytest("-x", *args)
    assert res.ret == 1, res.stdout.str()[-3000:]
    dec = json.loads((pytester.path / "x.json").read_text())["decision"]
    assert dec["label"] == "DO NOT SHIP" and dec["stopped"] == "stopped by -x after 1 failure"
    assert dec["not_run"] and all("test_phasefusion" in n for n in dec["not_run"])
    html = (pytester.path / "x.html").read_text()
    assert f"{len(dec['not_run'])} SELECTED GATE TESTS NEVER RAN" in html and "stopped by -x after 1 failure" in html
    assert "test_phasefusion_under_origin_shift" in html.split('id="not-run"', 1)[1]
    md = (pytester.path / "x.md").read_text()
    assert "Not run (stopped by -x after 1 failure; they decided nothing):" in md and "test_phasefusion_under_origin_shift" in md


def test_a_selected_rate_gate_too_small_to_fail_stops_the_run_and_another_suites_run_goes_on(pytester, small_set):
    """phase items = 4 at an order threshold of 0.5: the exact binomial test shows a violation from 5
    items on, so the order gate would pass every model. Selecting it is a usage error before any
    model call, serially and under ``-n`` (the workers' selection is told by the controller); a run
    that selects only the stressor suite's gate is not stopped by the phase suite's size."""
    pytest.importorskip("xdist")
    settings = SETTINGS.replace("items = 60", "items = 4") + "\n[tool.posbias.thresholds]\norder = 0.5\n"
    make_project(pytester, small_set, settings)
    words = "pyproject.toml [tool.posbias].probes.phase.items = 4 is too small for the order gate to fail any model"
    for extra in ((), ("-n", "2")):
        res = pytester.runpytest_subprocess("-m", "option_order", "-p", "no:randomly", *extra)
        out = res.stdout.str() + res.stderr.str()
        assert res.ret == pytest.ExitCode.USAGE_ERROR, out[-2000:]
        assert words in out and "shows a violation from 5 items on" in out, out[-2000:]
        assert "INTERNALERROR" not in out and "model calls:" not in out and not (pytester.path / ".posbias").exists()
    other = pytester.runpytest_subprocess("-m", "repetition", "-k", "test_clean_repetition", "-p", "no:randomly")
    assert other.ret == 0, (other.stdout.str() + other.stderr.str())[-2000:]
    assert "model calls:" in other.stdout.str()
