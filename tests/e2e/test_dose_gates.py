"""Every gate, end to end: a dose model at 3x the threshold fails it and sim:unbiased passes it.

The verdicts come from the suites' code path (RunContext with the default group-sequential
design, the real probes on a small synthetic set, gates.positional_verdict / phase_verdict /
stressor_verdict via calibration.e2e.gate_verdict), never from the statistics directly. A
failing dose must fail for the right reason: the measurement floor is met and the estimate lies
on the violating side of the threshold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import REPO
from support.suite_project import write_suite_project

from pytest_posbias.calibration.e2e import (
    COVERAGE_SHORTFALL,
    E2E_GATES,
    Cell,
    dose_model,
    dose_value,
    format_e2e,
    gate_verdict,
    run_end_to_end,
    verdict_notes,
)
from pytest_posbias.errors import ConfigError
from pytest_posbias.gate_registry import GATES
from pytest_posbias.run_options import RunOptions

# small sizes per probe family, each the smallest at which the gate's 3t dose is shown on the small set
# (fewer orderings: an order-dosed item still changes its answer in one of 3 orderings with
# probability 1 - 0.6^3 = 0.78, so the order rate at 3t is 0.35, far above 0.15)
BASE = {"positional": {"groups": 12}, "phase": {"items": 24, "orderings": 3}}
# the stressor gate's per-video amplification is 0 or 1 at a stressor dose (rho = 1); 2 trials suffice
# (a susceptible video loops on every variant). With no clean repeat among 24 videos the clean rate
# is known only up to its exact bound 1 - 0.04^(1/24) = 0.13, so the gate's rule (t bound of the
# share + Clopper-Pearson bound of the clean flag) shows 3t = 0.3 only from about 64 videos, more
# than the small set holds (36): at 24 videos the e2e check uses 6t = 0.6 (lower bound about 0.22)
STRESSOR = {**BASE, "stressor": {"videos": 24, "trials": 2, "attack_cap": 2}}
STRESSOR_DOSE = "sim:dose,stressor=0.6"
# DPB runs at P = 2, where the 3t dose 0.15 is about 4 dropped first slots among the small set's
# 12 groups (a group mean of 0.5 in a third of the groups, 0 elsewhere): it lands at 0.15, and a
# 12-group interval cannot separate that from 0.05; the e2e check uses 6t = 0.3 (7 dropped slots)
DPB_DOSE = "sim:dose,dpb=0.3"
# the attack walk needs length: ASR at the 3t dose with cap 20 is 0.75/0.992 * (1 - 0.85^20) = 0.73
ATTACK = {**BASE, "stressor": {"videos": 16, "trials": 20, "attack_cap": 20}}
PROBES = {"repetition": STRESSOR, "stressor": STRESSOR, "attack": ATTACK}
PROBES_SMALL = {**BASE, "stressor": {"videos": 8, "trials": 4, "attack_cap": 4}}


@pytest.fixture(scope="module")
def contexts(small_set, tmp_path_factory):
    """A RunContext per probe-size set (shared generation cache), created on first use."""
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext

    root = tmp_path_factory.mktemp("dose-gates")
    made: dict[str, RunContext] = {}

    def get(gate: str) -> RunContext:
        key = "attack" if gate == "attack" else "stressor" if gate in PROBES else "base"
        if key not in made:
            made[key] = RunContext.create(
                RunOptions(models=("sim:unbiased",), cache=str(root / "cache"), seed=0, judge="auto",
                           data=str(small_set)),
                PosbiasConfig(probes=PROBES.get(gate, BASE)), rootdir=root, worker="test",
                run_id=f"dose-gates-{key}", quiet=True)
            assert made[key].sequential  # the suites' default design
        return made[key]

    yield get
    for c in made.values():
        c.close()


def test_dose_values_are_zero_t_and_3t_on_the_violating_side():
    assert dose_model("meg", "0") == "sim:unbiased"
    assert dose_model("meg", "t") == "sim:dose,meg=-0.02"
    assert dose_model("meg", "3t") == "sim:dose,meg=-0.06"
    assert dose_model("dpb", "3t") == "sim:dose,dpb=0.15"  # rounded: not 0.15000000000000002
    assert dose_value("flip", "3t") == pytest.approx(0.45)
    assert dose_value("coverage", "t") == 0.25 and dose_value("coverage", "3t") == pytest.approx(0.15)
    assert COVERAGE_SHORTFALL == 0.10
    with pytest.raises(ConfigError, match="`level` must be one of 0, t, 3t"):
        dose_value("flip", "2t")


# the stressor probe makes about (1 + 8 stressors x trials + 9 controls) long descriptions per video
SLOW_GATES = ("repetition", "stressor", "attack")


@pytest.mark.parametrize("gate", [pytest.param(g, marks=pytest.mark.slow) if g in SLOW_GATES else g for g in E2E_GATES])
def test_dose_at_3t_fails_and_unbiased_passes(contexts, gate):
    ctx = contexts(gate)
    t = GATES[gate].threshold
    bad = gate_verdict(ctx, gate, {"stressor": STRESSOR_DOSE, "dpb": DPB_DOSE}.get(gate) or dose_model(gate, "3t"))
    assert not bad.passed, bad.reason
    assert bad.extra["measurement"]["floor_met"], bad.reason  # failed on the data, not on lost units
    side = GATES[gate].side
    if side == "upper":
        assert bad.estimate > t, bad.reason
    elif side == "lower":
        assert bad.estimate < t, bad.reason
    else:
        assert abs(bad.estimate) > t, bad.reason
    good = gate_verdict(ctx, gate, "sim:unbiased")
    assert good.passed, good.reason
    assert good.extra["measurement"]["floor_met"]


def test_verdict_notes_flag_a_size_problem_and_missing_power():
    ok = {"0": Cell("a", [False] * 20), "t": Cell("b", [False] * 19 + [True]), "3t": Cell("c", [True] * 20)}
    assert verdict_notes(ok, alpha=0.05) == []
    # 5/20 at t: Clopper-Pearson lower end 0.0866 > 0.05; 3/20 at 3t: upper end 0.379 < 0.8
    bad = {"0": Cell("a", [False] * 20), "t": Cell("b", [True] * 5 + [False] * 15), "3t": Cell("c", [True] * 3 + [False] * 17)}
    assert verdict_notes(bad, alpha=0.05) == ["fails too often at t", "does not reach 80% at 3t"]
    # 3/4 at 3t: below 80%, but the interval [0.194, 0.994] does not show it
    few = {"0": Cell("a", [False] * 4), "t": Cell("b", [False] * 4), "3t": Cell("c", [True] * 3 + [False])}
    assert verdict_notes(few, alpha=0.05) == ["80% at 3t not shown"]
    lines = format_e2e({"flip": bad}, alpha=0.05)
    assert "5/20 = 0.25 [0.09,0.49]" in lines[-1] and "3/20 = 0.15 [0.03,0.38]" in lines[-1]


def test_run_end_to_end_rejects_bad_arguments():
    with pytest.raises(ConfigError, match=r"`gates` holds unknown gates \['megg'\]"):
        run_end_to_end(reps=2, gates=["megg"])
    with pytest.raises(ConfigError, match="`reps` must be an integer >= 1"):
        run_end_to_end(reps=0, gates=["flip"])


@pytest.mark.slow
def test_run_end_to_end_counts_each_seed_once(small_set, tmp_path):
    lines: list[str] = []
    cells = run_end_to_end(reps=2, gates=["order"], data=str(small_set), cache=str(tmp_path / "c"), rootdir=tmp_path,
                           probes=PROBES_SMALL, print_fn=lines.append)
    row = cells["order"]
    assert [row[lv].runs for lv in ("0", "t", "3t")] == [2, 2, 2]
    assert row["3t"].fails == 2 and row["0"].fails == 0
    assert any(line.startswith("order ") and "2/2 = 1.00" in line for line in lines)


# --------------------------------------------------------------------------- --baseline via the suite



def _project(pytester: pytest.Pytester, manifest: Path) -> None:
    write_suite_project(pytester.path, manifest, ("test_positional.py",), "\n[tool.posbias.probes.positional]\ngroups = 12")


@pytest.mark.slow  # six configurations, two models, two runs
@pytest.mark.usefixtures("heavy_modules")
def test_meg_baseline_fails_a_worse_candidate_and_passes_a_better_one(pytester, small_set):
    _project(pytester, small_set)
    # every P = 4 configuration of the small set (12 groups each): the paired |MEG| difference of
    # about 0.08 is shown in at least one of them; the reverse comparison passes them all
    sel = ["-m", "meg and not slow", "-p", "no:randomly"]
    worse = pytester.runpytest(*sel, "--posbias-model", "sim:dose,meg=-0.08", "--posbias-baseline", "sim:unbiased")
    assert worse.ret == 1, worse.stdout.str()[-3000:]
    assert worse.parseoutcomes().get("failed", 0) >= 1
    # the run's report compares the two models on the paired differences (the baseline has no gates of its own)
    html = (pytester.path / "reports" / "latest.html").read_text()
    assert "nothing can be compared" not in html
    worse_list = html[html.index('<span class="worse-list">'):html.index('<span class="better-list">')]
    assert "MEG" in worse_list, worse_list
    better = pytester.runpytest(*sel, "--posbias-model", "sim:unbiased", "--posbias-baseline", "sim:dose,meg=-0.08")
    assert better.ret == 0, better.stdout.str()[-3000:]
    better.assert_outcomes(passed=6)


# Just past the threshold: a dose of 1.5t on the MCQ rate gates, with enough items that the
# group-sequential exact-binomial gate has about 94% power there (2,000 simulated Bernoulli
# samples at n = 300, rate 0.225, t = 0.15: 0.941 fail rate; `calibration.sequential_decision`).
# The dose models pick the dosed items by a Weyl sequence, so the realised rate sits next to the
# dose (not a binomial draw). DPB/MEG are not in this test: their per-group sd (~0.18 on
# sim:unbiased) needs thousands of groups to separate 1.5t from t.
NEAR_ITEMS = 300


@pytest.mark.slow
@pytest.mark.parametrize("gate", ["order", "flip", "phase"])
def test_dose_just_past_the_threshold_fails_and_zero_passes(gate, tmp_path):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext, synthetic_manifest

    data = synthetic_manifest(REPO)  # the full synthetic set (360 questions): built once, reused
    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), cache=str(tmp_path / "cache"), seed=0, judge="auto",
                                       data=str(data)),
                            PosbiasConfig(probes={"phase": {"items": NEAR_ITEMS}}),
                            rootdir=tmp_path, worker="test", run_id=f"near-{gate}", quiet=True)
    try:
        t = GATES[gate].threshold
        near = f"sim:dose,{gate}={1.5 * t:g}"
        bad = gate_verdict(ctx, gate, near)
        assert not bad.passed, bad.reason
        assert bad.extra["measurement"]["floor_met"], bad.reason
        assert t < bad.estimate < 2 * t, bad.reason  # the effect really sits just past t, not far beyond
        good = gate_verdict(ctx, gate, "sim:unbiased")
        assert good.passed and good.extra["measurement"]["floor_met"], good.reason
    finally:
        ctx.close()
