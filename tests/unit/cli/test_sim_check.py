"""posbias sim-check (cli.sim_check): each dose lands within its tolerance through the real probes and
judge, the command prints the target, what was achieved and its interval, compares the paired effect
for DPB and MEG, and exits 1 when a configuration misses."""

from __future__ import annotations

import math

import pytest
from support import REPO

from pytest_posbias.errors import ConfigError
from pytest_posbias.models import sim_dose as SD


@pytest.mark.slow  # through the real probes and judge, one configuration each
@pytest.mark.parametrize(("dose", "gate", "config"), [
    ("meg=-0.3", "meg", "domestic-short-P4"),  # above FIRST_LOSS: whole summaries dropped, scaled by μ
    ("meg=0.25", "meg", "leisure-short-P4"),
    ("dpb=-0.25", "dpb", "leisure-short-P4"),
    ("dpb=0.5", "dpb", "cooking-short-P2"),
    ("coverage=0.3", "coverage", "domestic-long-P2"),  # below μ/2: answers with both slots dropped
    ("coverage=0.15", "coverage", "leisure-short-P4"),
    ("contamination=0.3", "contamination", "cooking-short-P4"),
])
def test_positional_doses_land_within_tolerance_through_the_probe_and_judge(small_set, tmp_path, dose, gate, config):
    from pytest_posbias.cli.sim_check import run_check, tolerance

    kw = {"data": str(small_set), "cache": str(tmp_path / "c"), "rootdir": tmp_path, "groups": 12, "configs": [config]}
    got = run_check(f"sim:dose,{dose}", **kw)
    (row,) = got.configurations
    assert (row.gate, row.config, row.groups) == (gate, config, 12)
    assert row.tolerance == tolerance(gate, row.target)
    # the dose is calibrated on the synthetic set (MU); on this smaller set, whose unbiased mean slot
    # coverage is mu_here, a MEG or coverage dose realises target·mu_here/MU (DPB is a ratio: target)
    domain, bucket, p = config.split("-")
    mu_here = run_check("sim:unbiased", gates=["coverage"], **kw).achieved[0].estimate
    scale = mu_here / SD.mu_for(domain, bucket, int(p[1:])) if gate in ("meg", "coverage") else 1.0
    assert abs(row.compared - row.target * scale) <= row.tolerance, (row, scale)
    assert not got.missed or abs(scale - 1) > 0.05  # on the set it was calibrated for, the row itself lands
    assert abs(row.realised - row.unbiased) > 2 * row.tolerance  # the dose made the difference


@pytest.mark.slow  # through the real probes on the synthetic set: 2 configurations x 40 groups, two models
def test_dpb_005_lands_on_every_p2_configuration_it_missed(tmp_path):
    """On 40 groups a DPB dose of 0.05 that dropped whole first slots realised 0.042 (leisure-short)
    and 0.044 (leisure-long) at P = 2, outside ±10%."""
    from pytest_posbias.cli.sim_check import run_check
    from pytest_posbias.run.context import synthetic_manifest

    data = synthetic_manifest(REPO)
    got = run_check("sim:dose,dpb=0.05", data=str(data), cache=str(tmp_path / "c"), rootdir=tmp_path, groups=40,
                    configs=["leisure-short-P2", "leisure-long-P2"])
    assert [c.config for c in got.configurations] == ["leisure-short-P2", "leisure-long-P2"]
    assert not got.missed, [(c.config, c.compared) for c in got.missed]


@pytest.mark.slow  # through the real probes on the synthetic set: 3 configurations x 40 groups, two models
def test_meg_minus_002_lands_on_every_p4_configuration_it_missed(tmp_path):
    """On 40 groups a MEG dose of −0.02 that dropped whole middle summaries realised −0.018 to
    −0.023 (three P = 4 configurations outside ±10%)."""
    from pytest_posbias.cli.sim_check import run_check
    from pytest_posbias.run.context import synthetic_manifest

    data = synthetic_manifest(REPO)
    got = run_check("sim:dose,meg=-0.02", data=str(data), cache=str(tmp_path / "c"), rootdir=tmp_path, groups=40,
                    configs=["domestic-short-P4", "domestic-long-P4", "leisure-short-P4"])
    assert len(got.configurations) == 3
    assert not got.missed, [(c.config, c.compared) for c in got.missed]


@pytest.mark.slow  # through the real probes
def test_posbias_sim_check_prints_target_achieved_and_interval(small_set, tmp_path):
    import subprocess
    import sys

    run = [sys.executable, "-m", "pytest_posbias.cli", "sim", "check"]
    proc = subprocess.run([*run, "sim:dose,order=0.5", "--items", "20", "--data", str(small_set), "--cache",
                           str(tmp_path / "c")], capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("order"))
    target, achieved = (float(v) for v in line.split()[1:3])
    assert target == 0.5 and 0.2 <= achieved <= 0.8 and "20  items" in line
    bad = subprocess.run([*run, "sim:dose,bogus=1"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and "unknown gate 'bogus'" in bad.stderr
    none = subprocess.run([*run, "sim:unbiased"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert none.returncode == 2 and "name the gates to measure" in none.stderr


def test_config_checks_compare_the_paired_effect_for_dpb_meg_and_the_level_otherwise():
    from pytest_posbias.cli.sim_check import CheckResult, config_checks, format_configs, tolerance

    unb = {"a-short-P4": {k: 0.01 * (k % 3 - 1) for k in range(8)}, "b-long-P4": {k: -0.013 for k in range(8)}}
    dosed = {"a-short-P4": {k: v - 0.02 for k, v in unb["a-short-P4"].items()},
             "b-long-P4": {k: -0.013 - 0.035 for k in range(8)}}
    rows = config_checks("meg", -0.02, dosed, unb, seed=0)
    assert [r.config for r in rows] == ["a-short-P4", "b-long-P4"]
    assert rows[0].compared == pytest.approx(-0.02) and rows[0].lands
    assert rows[1].realised == pytest.approx(-0.048) and rows[1].compared == pytest.approx(-0.035)
    # MEG's absolute floor 0.003 (the spread of a thinning dose's cells at 40 groups) is above 10% of 0.02
    assert not rows[1].lands and rows[1].tolerance == tolerance("meg", -0.02) == pytest.approx(0.003)
    assert tolerance("meg", -0.04) == pytest.approx(0.004)
    lines = format_configs(rows)
    assert lines[1] == "tolerance: max(10% of |target|, the gate's absolute floor: meg 0.003)"
    assert "0.0030" in lines[3] and lines[-1].endswith("missed meg b-long-P4")
    cov = config_checks("coverage", 0.25, {"c-P2": {0: 0.26, 1: 0.23}}, {"c-P2": {0: 0.8, 1: 0.8}}, seed=0)
    assert cov[0].compared == pytest.approx(0.245) and cov[0].lands  # the level itself, tolerance 0.025
    assert tolerance("coverage", 0.0) == 0.01 and tolerance("dpb", 0.5) == pytest.approx(0.05)
    with pytest.raises(ConfigError, match="`gate` must be one of"):
        tolerance("flip", 0.1)
    nan = config_checks("meg", -0.02, {"x": {0: math.nan}}, {"x": {0: 0.0}}, seed=0)
    assert not nan[0].lands  # NaN never lands
    result = CheckResult((), (*rows, *cov))
    assert result.missed == (rows[1],)
    text = "\n".join(format_configs(result.configurations))
    assert "NO: outside the tolerance" in text and "2 of 3 configurations land" in text
    assert "missed meg b-long-P4" in text


def test_posbias_sim_check_exits_1_when_a_configuration_misses(monkeypatch):
    import argparse

    from pytest_posbias.cli import sim_check
    from pytest_posbias.cli.sim_check import CheckResult, ConfigCheck

    def fake(compared):
        row = ConfigCheck("meg", "d-short-P4", -0.02, compared, 0.0, compared, compared, compared, 40, 0.002)
        return lambda *a, **k: CheckResult((), (row,))

    args = argparse.Namespace(action="check", model="sim:dose,meg=-0.02", gates=None, groups=40, items=60, videos=32,
                              seed=0, data=None, cache=None, configs=None)
    monkeypatch.setattr(sim_check, "run_check", fake(-0.035))
    assert sim_check._cli(args) == 1
    monkeypatch.setattr(sim_check, "run_check", fake(-0.0195))
    assert sim_check._cli(args) == 0


def _group_manifest(tmp_path, P):
    import json

    m = tmp_path / "m.jsonl"
    m.write_text(json.dumps({"type": "group", "domain": "cooking", "bucket": "short", "P": P, "id": "g1",
                             "videos": [f"v{i}" for i in range(P)]}) + "\n")
    return m


@pytest.mark.parametrize(("P", "configs", "message"), [
    (4, ["cooking-shrt"], "--configs: cooking-shrt: no such positional configuration"),
    (2, ["cooking-short"], "meg: no positional configuration of this set among --configs cooking-short"),
])
def test_sim_check_that_checks_no_configuration_is_an_error_not_a_pass(tmp_path, monkeypatch, P, configs, message):
    """A misspelt --configs, or a MEG dose on a set without P = 4, checked nothing and exited 0."""
    from pytest_posbias.cli.sim_check import run_check
    from pytest_posbias.run import suite_params

    # the set's configuration as listed (its videos need not load: the check is on the configurations)
    monkeypatch.setattr(suite_params, "positional_configs", lambda data, scales: [("cooking", "short", P)])

    with pytest.raises(ConfigError, match=message.replace("-", r"\-")):
        run_check("sim:dose,meg=-0.05", data=str(_group_manifest(tmp_path, P)), cache=str(tmp_path / "c"),
                  rootdir=tmp_path, configs=configs)


@pytest.mark.parametrize(("argv", "groups"), [([], 40), (["--groups", "12"], 12), (["--groups", "24"], 24)])
def test_sim_calibrate_measures_on_the_groups_asked_for(monkeypatch, argv, groups):
    """posbias sim calibrate --groups 12 measured on 40 groups (12 was taken for the unset default)."""
    from pytest_posbias.cli import main, sim_check

    seen = {}
    monkeypatch.setattr(sim_check, "calibrate", lambda **kw: seen.update(kw))
    assert main(["sim", "calibrate", *argv]) == 0 and seen["groups"] == groups


@pytest.mark.parametrize(("groups", "message"), [(0, "`groups` must be an integer >= 2; got 0"),
                                                 (12, "no positional configuration of this set was measured")])
def test_sim_calibrate_that_measures_nothing_is_an_error(tmp_path, groups, message):
    """sim calibrate with --groups 0, or on a set whose groups give no scored instance, printed empty constant
    tables and exited 0; now a ConfigError."""
    from pytest_posbias.cli.sim_check import calibrate

    with pytest.raises(ConfigError, match=message.replace("`", ".")):
        calibrate(groups=groups, data=str(_group_manifest(tmp_path, 4)), rootdir=tmp_path, print_fn=lambda _: None)


def test_sim_check_counts_a_configuration_that_scored_nothing_as_missed(tmp_path, monkeypatch):
    """A configuration whose groups gave no scored instance was left out of the check (not a row, not missed);
    now its row has 0 groups and misses, so the check exits 1."""
    from pytest_posbias.cli.sim_check import run_check
    from pytest_posbias.run import suite_params

    # listed as a configuration, while its videos cannot be read: every instance is lost
    monkeypatch.setattr(suite_params, "positional_configs", lambda data, scales: [("cooking", "short", 4)])

    got = run_check("sim:dose,meg=-0.05", data=str(_group_manifest(tmp_path, 4)), cache=str(tmp_path / "c"),
                    rootdir=tmp_path)
    assert [(c.config, c.groups) for c in got.missed] == [("cooking-short-P4", 0)]
    assert math.isnan(got.achieved[0].estimate) and got.achieved[0].n == 0


def test_sim_check_fails_a_rate_dose_that_does_not_land(monkeypatch):
    """A flip dose of 0.3 measured at 0.0 [0, 0.06] on 60 items fails the check: it is compared to its target."""
    import argparse

    from pytest_posbias.cli import sim_check
    from pytest_posbias.cli.sim_check import Achieved, CheckResult

    row = Achieved("flip", 0.3, 0.0, 0.0, 0.06, 60, "items", {})
    monkeypatch.setattr(sim_check, "run_check", lambda *a, **k: CheckResult((row,), ()))
    args = argparse.Namespace(action="check", model="sim:dose,flip=0.3", gates=None, groups=None, items=60, videos=32,
                              seed=0, data=None, cache=None, configs=None)
    assert sim_check._cli(args) == 1


def test_a_rate_dose_lands_on_its_target_or_on_the_unbiased_models_own_rate():
    """A rate dose lands when its interval holds max(target, sim:unbiased's rate on the same units) or it is within
    max(10%, 2/n) of it: a phase dose of 0 measured at sim:unbiased's own 0.017 lands, the same value against an
    unbiased rate of 0 does not; a positional row and a row without a target have no rate rule."""
    from pytest_posbias.cli.sim_check import Achieved, CheckResult, format_rows

    zero = Achieved("phase", 0.0, 0.017, 0.008, 0.036, 360, "items", {}, unbiased=0.017)
    assert zero.goal == pytest.approx(0.017) and zero.lands
    assert not Achieved("phase", 0.0, 0.017, 0.008, 0.036, 360, "items", {}, unbiased=0.0).lands
    assert Achieved("flip", 0.3, 0.28, 0.235, 0.327, 360, "items", {}, unbiased=0.0).lands  # the interval holds it
    assert Achieved("flip", 0.3, 0.275, 0.26, 0.29, 360, "items", {}, unbiased=0.0).lands  # within 10% of it
    assert not Achieved("flip", 0.3, 0.25, 0.2, 0.29, 360, "items", {}, unbiased=0.0).lands
    assert not Achieved("flip", 0.3, math.nan, math.nan, math.nan, 0, "items", {}).lands  # no unit never lands
    assert Achieved("meg", -0.02, 0.5, 0.4, 0.6, 48, "groups", {}).lands  # held per configuration instead
    assert Achieved("flip", None, 0.5, 0.4, 0.6, 60, "items", {}).lands
    missed = Achieved("flip", 0.3, 0.0, 0.0, 0.06, 60, "items", {}, unbiased=0.0)
    assert CheckResult((zero, missed), ()).missed_rates == (missed,)
    lines = format_rows("sim:dose,phase=0", [zero, missed])
    assert lines[2].endswith("lands on 0.017") and lines[3].endswith("NO: misses 0.300")
