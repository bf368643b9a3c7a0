"""``posbias plan``: the per-gate table, and a real run of the same selection costs what it said.

Placed with ``cli/plan.py``, its subject (the token estimate is ``models/plan.py``'s); the real run
is a subprocess."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.cli.plan import aggregate, hours, split_args
from pytest_posbias.engine import Decoding, Request
from pytest_posbias.models.plan import estimate_prompt_tokens
from pytest_posbias.video.compose import ImagePart, TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec

QUICK = """
[tool.posbias.probes.positional]
groups = 2
max_new_tokens = 24
scales = [4]
frames_short = 4
frames_long = 4
resolution = 56

[tool.posbias.probes.phase]
items = 4
orderings = 2
budget = 4
resolution = 56
"""


def _project(tmp: Path, manifest: Path) -> Path:
    write_suite_project(tmp, manifest, ("test_positional.py", "test_phase_order.py", "test_stressors.py"), QUICK, model=None)
    return tmp


def _posbias(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([str(Path(sys.executable).parent / "posbias"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def test_split_args_keeps_pytest_arguments_in_order():
    own, rest = split_args(["-m", "meg", "--prefill-tps", "5000", "--posbias-model=x", "--measure", "--decode-tps=80", "-k", "a"])
    assert own == ["--prefill-tps", "5000", "--measure", "--decode-tps=80"]
    assert rest == ["-m", "meg", "--posbias-model=x", "-k", "a"]


def test_estimate_and_hours_follow_their_formulas(synthetic_clips):
    spec = FrameSpec.from_video(synthetic_clips[0], [0, 10, 20, 30, 40], size=448)
    text = "Describe the videos."
    r = Request("sim:unbiased", (TextPart(text), VideoPart(spec), ImagePart(size=112), VideoPart(spec)), Decoding(64))
    prompt, visual = estimate_prompt_tokens(r)
    per_video = 16 * 16 * 3  # 448/28 = 16 -> 256 tokens per pair of frames, 5 frames -> 3 pairs
    assert visual == 2 * per_video + 4 * 4  # separator image 112 px -> 4 x 4
    assert prompt == visual + math.ceil((len(text) + 1) / 4) + 16
    assert hours(3_600_000, 36_000, {"prefill": 1000.0, "decode": 10.0}) == pytest.approx(1.0 + 1.0)
    assert hours(1, 1, {"prefill": None, "decode": 10.0}) is None


def _plan_verdict(nodeid, gate, form=None, **extra):
    """A plan run's verdict as its JSON holds it; ``form``: (n_max, kind, rule, lattice_step) of the
    gate's sequential form."""
    ex = {"gate": gate, **extra}
    if form:
        ex["sequential_form"] = dict(zip(("n_max", "kind", "rule", "lattice_step"), form, strict=True), certify_from=0)
    lower, upper = {"meg": (-0.02, 0.02), "attack": (-math.inf, 0.25)}.get(gate, (-math.inf, 0.1))
    return {"nodeid": nodeid, "mode": "detect", "alpha": 0.05, "lower": lower, "upper": upper, "extra": ex}


def test_aggregate_counts_rows_per_gate_and_sequential_shares():
    rows = [{"test": "t::test_meg[a]", "frames": 16, "prompt_tokens": 100, "visual_tokens": 60, "output_tokens": 24, "model": "m"},
            {"test": "t::test_meg[a]", "frames": 16, "prompt_tokens": 110, "visual_tokens": 60, "output_tokens": 20, "model": "m"},
            {"test": "t::test_stressor_amplification[a]", "frames": 8, "prompt_tokens": 50, "visual_tokens": 40,
             "output_tokens": 500, "model": "m"}]
    verdicts = [_plan_verdict("t::test_dpb[a]", "dpb", calls={"shared": 2}),
                _plan_verdict("t::test_meg[a]", "meg", (48, "mean", "skew-t", 0.03125)),
                _plan_verdict("t::test_meg[b]", "meg", (12, "mean", "skew-t", 0.03125)),
                _plan_verdict("t::test_stressor_amplification[a]", "stressor")]
    g = {x["test"]: x for x in aggregate(rows, verdicts, sequential=True)}
    assert (g["t::test_meg[a]"]["requests"], g["t::test_meg[a]"]["prompt_tokens"], g["t::test_meg[a]"]["output_tokens"]) == (2, 210, 44)
    # the default MEG design passes from its first look (12 of 48 groups); the calibration's median is half
    assert (g["t::test_meg[a]"]["sequential_expected"], g["t::test_meg[a]"]["sequential_best"]) == (0.5, 0.25)
    # the quick design of 12 groups: a mean gate needs 8 units, so no pass before the look at 9
    assert (g["t::test_meg[b]"]["sequential_expected"], g["t::test_meg[b]"]["sequential_best"]) == (0.75, 0.75)
    assert g["t::test_stressor_amplification[a]"]["sequential_expected"] == 1.0  # the fixed-design gate
    assert g["t::test_dpb[a]"]["requests"] == 0 and g["t::test_dpb[a]"]["shared"] == 2
    assert g["t::test_dpb[a]"]["sequential_expected"] == 1.0  # decided without a sequential form
    assert all(x["sequential_expected"] == 1.0 for x in aggregate(rows, verdicts, sequential=False))


def test_a_probe_result_counts_at_the_furthest_look_of_the_tests_reading_it():
    """Four MEG requests of one positional result, made by the MEG test and read by a contamination test
    that decides under the fixed design (too few groups to certify): the sequential run draws all of
    them, so they count at share 1; a request of a result only MEG reads keeps MEG's share."""
    row = {"frames": 4, "prompt_tokens": 10, "visual_tokens": 8, "output_tokens": 2, "model": "m"}
    meg, cont = "t::test_meg[a]", "t::test_contamination[a]"
    rows = [{**row, "test": meg, "family": "positional|a"}] * 4 + [{**row, "test": meg, "family": "positional|b"}] * 4
    verdicts = [_plan_verdict(meg, "meg", (48, "mean", "skew-t", 0.03125)), _plan_verdict(cont, "contamination")]
    reads = [{"test": meg, "family": "positional|a"}, {"test": cont, "family": "positional|a"},
             {"test": meg, "family": "positional|b"}]
    g = {x["test"]: x for x in aggregate(rows, verdicts, sequential=True, reads=reads)}
    assert g[meg]["sequential_expected"] == (4 * 1.0 + 4 * 0.5) / 8 and g[meg]["sequential_best"] == (4 + 4 * 0.25) / 8
    assert g[cont]["requests"] == 0 and g[cont]["sequential_expected"] == 1.0
    alone = {x["test"]: x for x in aggregate(rows, verdicts, sequential=True, reads=reads[:1] + reads[2:])}
    assert alone[meg]["sequential_expected"] == 0.5


def test_a_request_another_gate_asks_for_counts_at_its_furthest_look():
    """Phase grids the phase gate makes and the fixed-design fusion gate asks for again through the cache:
    the fusion gate needs all of them, so they count at share 1."""
    row = {"frames": 4, "prompt_tokens": 10, "visual_tokens": 8, "output_tokens": 0, "model": "m"}
    phase, fusion = "t::test_phase_flip[a]", "t::test_phasefusion_under_origin_shift[a]"
    rows = [{**row, "test": phase, "key": f"k{i}"} for i in range(4)]
    verdicts = [{**_plan_verdict(phase, "phase", (60, "rate", "t", None)), "upper": 0.15},
                _plan_verdict(fusion, "fusion")]
    reads = [{"test": phase, "keys": ["k0", "k1", "k2", "k3"]}, {"test": fusion, "keys": ["k0", "k1"]}]
    g = {x["test"]: x for x in aggregate(rows, verdicts, sequential=True, reads=reads)}
    assert g[phase]["sequential_expected"] == (2 * 1.0 + 2 * 0.5) / 4
    # each share is the largest of its kind: a reader expecting more but able to stop earlier keeps the other's best
    from pytest_posbias.cli.plan import _larger

    assert _larger((0.75, 0.25), (0.5, 0.5)) == (0.75, 0.5)


def test_aggregate_reads_each_test_s_gate_from_the_registry():
    """The stressor controls give no verdict and are no gate: they do not make the stressor probe
    fixed-sample for the attack gate; the search tests are the (fixed-sample) search gate; the repetition
    tests, decided under the fixed design in every run (no sequential form), stay at their maximum."""
    row = {"frames": 8, "prompt_tokens": 50, "visual_tokens": 40, "output_tokens": 100, "model": "m"}
    tests = ("s/test_x.py::test_attack_success_rate[a-8f]", "s/test_x.py::test_stressor_controls[a-8f]",
             "s/test_x.py::test_search_stressor_repetition[a]", "s/test_x.py::test_clean_repetition[a-8f]")
    rows = [{**row, "test": t} for t in tests]
    verdicts = [_plan_verdict(tests[0], "attack", (64, "rate", "t", None)), _plan_verdict(tests[3], "repetition")]
    g = {x["test"].split("::")[1].split("[")[0]: x for x in aggregate(rows, verdicts, sequential=True)}
    assert g["test_attack_success_rate"]["gate"] == "attack"
    assert (g["test_attack_success_rate"]["sequential_expected"], g["test_attack_success_rate"]["sequential_best"]) \
        == (0.5, 0.5)
    assert g["test_clean_repetition"]["gate"] == "repetition"
    assert g["test_clean_repetition"]["sequential_expected"] == 1.0
    assert g["test_stressor_controls"]["gate"] == ""
    assert g["test_search_stressor_repetition"]["gate"] == "search"
    assert g["test_search_stressor_repetition"]["sequential_expected"] == 1.0


@pytest.mark.slow
def test_plan_prints_the_meg_table_for_sim(tmp_path, small_set):
    proj = _project(tmp_path / "p", small_set)
    res = _posbias(proj, "plan", "-m", "meg and not slow", "--posbias-model", "sim:unbiased", "--plan-json", "plan.json",
                   "--prefill-tps", "10000", "--decode-tps", "500")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    assert "prompt tokens from: estimate" in out and "throughput (given)" in out
    plan = json.loads((proj / "plan.json").read_text())
    gates = plan["gates"]
    assert len(gates) == 6 and all(g["gate"] == "meg" for g in gates)  # one per P = 4 configuration
    for g in gates:
        assert g["test"].split("::")[-1][:50] in out
        assert g["requests"] == 2 * 4  # 2 groups x 4 cyclic orders, fixed-sample maximum
        assert g["frames"] == g["requests"] * 4 * 4  # 4 videos of 4 frames each
        assert g["output_tokens"] == g["requests"] * 24  # the cap: an upper bound
    total = sum(g["prompt_tokens"] for g in gates)
    assert f"{total:,} prompt tokens" in out
    h = (total / 10000 + sum(g["output_tokens"] for g in gates) / 500) / 3600
    assert f"{h:,.2f} GPU-hours" in out
    # 2 groups: too few for a mean gate to stop before its maximum, sequential or not
    assert all(g["sequential_expected"] == g["sequential_best"] == 1.0 for g in gates)
    # a project whose runs use the fixed design: every gate at its maximum
    pyproject = proj / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.posbias]\n", "[tool.posbias]\nsequential = false\n", 1))
    res = _posbias(proj, "plan", "-m", "meg and not slow", "--posbias-model", "sim:unbiased", "--plan-json", "f.json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert [g["sequential_expected"] for g in json.loads((proj / "f.json").read_text())["gates"]] == [1.0] * 6


@pytest.mark.slow
def test_the_plan_s_sequential_cost_matches_a_run_at_quick_sizes(tmp_path):
    """On the quick project (``posbias init --quick``), the plan's sequential figures bracket the requests
    a sequential run makes and its expected figure is within 10% of them: the quick MEG design cannot
    stop before 9 of 12 groups, the repetition tests decide under the fixed design, and the rate gates
    stop where their all-zero samples do."""
    from pytest_posbias.cli import main

    assert main(["init", str(tmp_path), "--quick", "--model", "sim:unbiased"]) == 0
    sel = "flip or option_order or repetition or attack or (meg and not slow)"
    res = _posbias(tmp_path, "plan", "-m", sel, "--plan-json", "plan.json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    gates = json.loads((tmp_path / "plan.json").read_text())["gates"]
    fixed, expected, best = (sum(g["requests"] * g[k] for g in gates) if k else sum(g["requests"] for g in gates)
                             for k in ("", "sequential_expected", "sequential_best"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", sel, "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                          "--posbias-json=run.json"], cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    made = json.loads((tmp_path / "run.json").read_text())["calls"]["made"]
    assert best <= made <= fixed, (best, made, fixed)
    assert abs(expected - made) <= 0.1 * made, (expected, made)


def test_a_plan_of_skipping_tests_says_why(tmp_path, small_set):
    """The parity gates without a reference skip: the plan says no test would call a model, with the
    skip reason, and exits 1."""
    proj = tmp_path / "p"
    write_suite_project(proj, small_set, ("test_parity.py",), QUICK, model=None)
    res = _posbias(proj, "plan", "-m", "parity and not slow", "--posbias-model", "sim:unbiased")
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    assert "no selected test would call a model: the selected tests skip" in res.stdout
    assert "opt in with --posbias-parity REFERENCE" in res.stdout


def test_a_plan_without_a_model_is_the_run_s_usage_error(tmp_path, small_set):
    """No model on the command line nor in [tool.posbias]: the run stops with the usage error "no
    model to test" (exit 4), and so does the plan, with the same message, not an empty table."""
    proj = tmp_path / "p"
    write_suite_project(proj, small_set, ("test_positional.py",), QUICK, model=None)
    plan = _posbias(proj, "plan", "-m", "meg and not slow")
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "meg and not slow", "-q", "-p", "no:randomly"], cwd=proj,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=900,
                         check=False)
    assert run.returncode == 4 and "no model to test" in run.stderr + run.stdout
    assert plan.returncode == 4, plan.stdout[-3000:] + plan.stderr[-3000:]
    assert "posbias plan: error: no model to test: give one with --posbias-model MODEL" in plan.stderr
    assert "fixed-sample design" not in plan.stdout


SEARCH = """
[tool.posbias.probes.search]
items = 3
videos = 2
budget = 4
shrink_budget = 3
max_denominator = 3
"""


def test_search_plan_bounds_a_real_run(tmp_path, small_set):
    """The search gates are planned at their budget: per item the reference and budget + shrink_budget
    distinct queries, fewer where the space holds fewer (3 phases besides 0 at max_denominator 3), so a
    real run's calls are at most the plan's for every search gate, for a model the search breaks
    (sim:letter-bias, shrinking) and one it does not (sim:unbiased, every item at its budget)."""
    proj = tmp_path / "p"
    write_suite_project(proj, small_set, ("test_search.py",), SEARCH, model=None)
    sel = ["-m", "search", "-k", "option_order or stressor_repetition or sampling_phase",
           "--posbias-model", "sim:letter-bias", "--posbias-model", "sim:unbiased"]
    res = _posbias(proj, "plan", *sel, "--plan-json", "plan.json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "search gates: every item at its budget" in res.stdout
    plan = {g["test"]: g["requests"] for g in json.loads((proj / "plan.json").read_text())["gates"]}
    real = subprocess.run([sys.executable, "-m", "pytest", *sel, "--posbias-json=real.json", "-q", "-p", "no:randomly",
                           "-p", "no:cacheprovider"], cwd=proj, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=900, check=False)
    made = {v["nodeid"]: v["extra"]["calls"]["made"] for v in json.loads((proj / "real.json").read_text())["verdicts"]}
    assert len(made) == 6 and set(plan) == set(made), real.stdout[-3000:]
    per_item = 1 + 4 + 3
    for nodeid, calls in made.items():
        assert calls <= plan[nodeid], (nodeid, calls, plan[nodeid])
        if "stressor" in nodeid:
            assert plan[nodeid] == 2 * per_item  # a space larger than the budget: every video at its maximum
        elif "option_order" in nodeid:
            assert plan[nodeid] == 3 * per_item
        else:
            assert 3 <= plan[nodeid] <= 3 * (1 + 3)  # the phases 1/3, 1/2, 2/3 at most, per item
    assert made["suites/test_search.py::test_search_option_order[sim:unbiased]"] == 3 * (1 + 4)  # held: the budget
    broken = "suites/test_search.py::test_search_option_order[sim:letter-bias]"
    assert made[broken] > 3, made  # the break was shrunk: more than the reference per item


@pytest.mark.slow
def test_tiny_checkpoint_plan_agrees_with_a_real_run(tmp_path, small_set, tiny_checkpoints):
    """Prompt tokens from the real processor are exact; output tokens: the cap bounds the run's
    from above, and --measure's warm-up predicts them within 10%."""
    proj = _project(tmp_path / "p", small_set)
    model = str(tiny_checkpoints["qwen2_vl"])
    # the fragment judge: the embedding judge makes no model call either, and would load a second model per process
    sel = ["-m", "(meg or option_order) and not slow", "-k", "domestic-short or order", f"--posbias-model={model}",
           "--posbias-device", "cpu", "--posbias-judge", "fragment"]
    plain = _posbias(proj, "plan", *sel, "--plan-json", "plain.json")
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-3000:]
    assert "prompt tokens from: processor" in plain.stdout and "test_meg[qwen2_vl-domestic-short-P4]" in plain.stdout
    measured = _posbias(proj, "plan", *sel, "--measure", "--plan-json", "measured.json")
    assert measured.returncode == 0, measured.stdout[-3000:] + measured.stderr[-3000:]
    assert "prefill" in measured.stdout and "GPU-hours" in measured.stdout
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    real = subprocess.run([sys.executable, "-m", "pytest", *sel, "--posbias-fixed", "--posbias-json=real.json", "-q",
                           "-p", "no:randomly", "-p", "no:cacheprovider"], cwd=proj, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    data = json.loads((proj / "real.json").read_text())
    run = {v["nodeid"]: v["extra"]["calls"] for v in data["verdicts"]}
    assert len(run) == 2, real.stdout[-3000:]
    for name in ("plain", "measured"):
        plan = {g["test"]: g for g in json.loads((proj / f"{name}.json").read_text())["gates"]}
        assert set(plan) == set(run)
        for nodeid, calls in run.items():
            g = plan[nodeid]
            assert g["requests"] == calls["made"]
            assert g["prompt_tokens"] == calls["prompt_tokens"] and g["visual_tokens"] == calls["visual_tokens"]
            assert calls["visual_tokens"] > 0
        plan_out = sum(g["output_tokens"] for g in plan.values())
        run_out = sum(c["output_tokens"] for c in run.values())
        assert run_out > 0
        if name == "plain":
            assert plan_out >= run_out  # the decoding cap is an upper bound
        assert abs(plan_out - run_out) <= 0.10 * run_out, (name, plan_out, run_out)
    # the run's JSON carries the tokens per gate and in total
    assert data["calls"]["prompt_tokens"] == sum(c["prompt_tokens"] for c in run.values())


def test_plan_echo_is_shell_quoted_and_short_options_become_long():
    from pytest_posbias.cli.plan import format_plan, long_options

    plan = {"args": ["-m", "meg and not slow", "--model", "sim:middle-weak"], "gates": [], "rows": []}
    assert format_plan(plan)[0] == "posbias plan: pytest -m 'meg and not slow' --model sim:middle-weak"  # copy-pastes
    assert long_options(["-m", "meg", "--model", "a", "--baseline=b", "--judge", "fragment", "--api-base=http://x/v1",
                         "--posbias-seed", "3", "-k", "--modelx"]) == [
        "-m", "meg", "--posbias-model", "a", "--posbias-baseline=b", "--posbias-judge", "fragment",
        "--posbias-api-base=http://x/v1", "--posbias-seed", "3", "-k", "--modelx"]


def test_a_baseline_from_the_table_plans_the_fixed_design(tmp_path, small_set):
    """``[tool.posbias] baseline`` makes the plan report every gate at its maximum, as --posbias-baseline does."""
    proj = _project(tmp_path / "p", small_set)
    pyproject = proj / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.posbias]\n",
                                                       '[tool.posbias]\nbaseline = "sim:middle-weak"\n', 1))
    res = _posbias(proj, "plan", "-m", "meg and not slow", "--posbias-model", "sim:unbiased", "--plan-json", "b.json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    gates = json.loads((proj / "b.json").read_text())["gates"]
    assert gates and all(g["sequential_expected"] == 1.0 for g in gates)


@pytest.mark.parametrize("option", ["prefill_tps", "decode_tps"])
def test_an_infinite_throughput_is_refused_before_the_plan_runs(monkeypatch, option):
    """``--prefill-tps inf`` / ``--decode-tps inf`` is a ConfigError naming the option, before the plan run."""
    import argparse

    from pytest_posbias.cli import plan as plan_mod
    from pytest_posbias.errors import ConfigError

    def planned(*args, **kwargs):
        raise RuntimeError("the plan ran")

    monkeypatch.setattr(plan_mod, "run_plan", planned)
    args = argparse.Namespace(prefill_tps=1000.0, decode_tps=100.0, measure=False, plan_json=None, pytest_args=[])
    setattr(args, option, float("inf"))
    with pytest.raises(ConfigError, match=option.replace("_", "-")):
        plan_mod._plan(args)


def test_a_throughput_of_zero_or_nan_is_refused_before_the_plan_runs(monkeypatch):
    """``--prefill-tps 0`` and ``--decode-tps nan`` are ConfigErrors naming the option."""
    import argparse

    from pytest_posbias.cli import plan as plan_mod
    from pytest_posbias.errors import ConfigError

    monkeypatch.setattr(plan_mod, "run_plan", lambda *a, **k: pytest.fail("the plan ran"))
    for option, value in (("prefill_tps", 0.0), ("decode_tps", float("nan")), ("decode_tps", -5.0)):
        args = argparse.Namespace(prefill_tps=1000.0, decode_tps=100.0, measure=False, plan_json=None, pytest_args=[])
        setattr(args, option, value)
        with pytest.raises(ConfigError, match=option.replace("_", "-")):
            plan_mod._plan(args)


@pytest.mark.parametrize("where", ["missing-folder", "a-folder"])
def test_a_plan_json_that_cannot_be_written_is_refused_before_the_plan_runs(monkeypatch, tmp_path, where):
    """``--plan-json`` in a missing folder, or naming a folder, failed only after the plan run (and --measure's model calls)."""
    import argparse

    from pytest_posbias.cli import plan as plan_mod
    from pytest_posbias.errors import ConfigError

    monkeypatch.setattr(plan_mod, "run_plan", lambda *a, **k: pytest.fail("the plan ran"))
    target = tmp_path / "no" / "p.json" if where == "missing-folder" else tmp_path
    args = argparse.Namespace(prefill_tps=None, decode_tps=None, measure=True, plan_json=str(target), pytest_args=[])
    with pytest.raises(ConfigError, match="--plan-json"):
        plan_mod._plan(args)


@pytest.mark.parametrize("option", ["--plan-json", "--prefill-tps"])
def test_an_own_option_without_its_value_is_argparse_s_error(monkeypatch, capsys, option):
    """``posbias plan -m meg --plan-json`` took an empty path, planned, and wrote no JSON; now exit 2 naming the option."""
    from pytest_posbias.cli import main
    from pytest_posbias.cli import plan as plan_mod

    monkeypatch.setattr(plan_mod, "run_plan", lambda *a, **k: pytest.fail("the plan ran"))
    with pytest.raises(SystemExit) as exc:
        main(["plan", "-m", "meg", option])
    assert exc.value.code == 2 and f"argument {option}: expected one argument" in capsys.readouterr().err
