"""Calibration: the simulated error rates match exact values computed independently."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as st

from pytest_posbias.calibration import (
    GateModel,
    _rate_draw,
    calibrate_gate,
    format_table,
    n_for_power,
    run_calibration,
)
from pytest_posbias.errors import ConfigError


def _flip_gate(n: int) -> GateModel:
    return GateModel("flip", "rate", 0.15, "upper", "items", 0.0, n, _rate_draw)


def _exact_size(n: int, t: float, theta: float, alpha: float = 0.05) -> float:
    """P(the exact one-sided binomial test rejects H0: p <= t) when the true rate is theta."""
    k_star = next(k for k in range(n + 1) if st.binomtest(k, n, t, alternative="greater").pvalue < alpha)
    return float(st.binom.sf(k_star - 1, n, theta))


def test_fixed_rate_gate_failure_curve_matches_the_exact_binomial_size():
    n, reps = 60, 2000
    res = calibrate_gate(_flip_gate(n), reps=reps, alpha=0.05, seed=3, n=n, n_max_seq=n)
    curve = res["fixed"]["fail_rate_curve"]
    for theta, got in zip(res["thetas"], curve, strict=True):
        want = _exact_size(n, 0.15, theta)
        sd = max(np.sqrt(want * (1 - want) / reps), 1 / reps)
        assert abs(got - want) <= 4 * sd, (theta, got, want)
    # at the boundary the exact test's size is below alpha (discreteness), and the interval says so
    lo, hi = res["fixed"]["false_failure_boundary_ci"]
    assert lo <= _exact_size(n, 0.15, 0.15) <= hi and hi < 0.07


def test_sequential_rate_gate_keeps_alpha_and_uses_fewer_units():
    res = calibrate_gate(_flip_gate(60), reps=1000, alpha=0.05, seed=5)
    seq = res["sequential"]
    assert seq["false_failure_boundary_ci"][0] <= 0.05  # within alpha after early stopping
    assert seq["median_units"][0] < res["fixed"]["median_units"][0]  # stops early under the null
    lines = format_table([res], alpha=0.05, reps=1000)
    assert any(line.startswith("flip        sequential") for line in lines)
    assert any("sequential saves 50%" in line for line in lines)


def test_n80_is_the_first_grid_size_with_80_percent_power():
    g = _flip_gate(60)
    n80 = n_for_power(g, alpha=0.05, seed=1, reps=400, grid=(10, 20, 40, 60, 80, 120))
    exact = {n: _exact_size(n, 0.15, 0.30) for n in (10, 20, 40, 60, 80, 120)}
    first = next(n for n, p in exact.items() if p >= 0.8)
    assert n80 in (first, *[n for n in exact if abs(exact[n] - 0.8) < 0.06])


def test_n80_at_3t_uses_the_3t_effect_and_is_no_larger_than_at_2t():
    g = _flip_gate(60)
    grid = (10, 20, 30, 40, 60, 80, 120)
    n80_3t = n_for_power(g, alpha=0.05, seed=2, reps=400, grid=grid, multiple=3.0)
    exact = {n: _exact_size(n, 0.15, 0.45) for n in grid}  # power of the exact test at 3t = 0.45
    first = next(n for n, p in exact.items() if p >= 0.8)
    assert n80_3t in (first, *[n for n in exact if abs(exact[n] - 0.8) < 0.06])
    assert n80_3t <= n_for_power(g, alpha=0.05, seed=2, reps=400, grid=grid)
    with pytest.raises(ConfigError, match="`multiple` must be > 1"):
        n_for_power(g, alpha=0.05, seed=2, reps=10, grid=grid, multiple=1.0)


def test_run_calibration_rejects_unknown_gates_and_too_few_repetitions():
    with pytest.raises(ConfigError, match="`gates` holds unknown gates \\['megg'\\]"):
        run_calibration(reps=100, gates=["megg"])
    with pytest.raises(ConfigError, match="`reps` must be an integer >= 10"):
        run_calibration(reps=3, gates=["flip"])


@pytest.mark.slow
def test_posbias_calibrate_prints_the_table_for_the_chosen_gates(small_set, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "calibrate", "--reps", "40", "--gates", "flip",
                           "--data", str(small_set), "--cache", str(tmp_path / "c")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "measured sim:unbiased" in out and "null rates flip" in out
    assert "flip        fixed" in out and "flip        sequential" in out
    assert "meg " not in out  # only the gates asked for


def test_posbias_calibrate_end_to_end_checks_its_arguments_before_running(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "calibrate", "--end-to-end", "--gates", "meg,megg"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert bad.returncode != 0
    assert "--gates: unknown gates ['megg']" in bad.stderr + bad.stdout
    assert "coverage" in bad.stderr + bad.stdout  # the end-to-end gate list, not the residual one
    zero = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "calibrate", "--end-to-end", "--reps", "0"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert zero.returncode != 0 and "--reps must be an integer >= 1; got 0" in zero.stderr + zero.stdout


@pytest.mark.parametrize("gates", [["order"], ["meg"]])
def test_a_null_sim_unbiased_gave_no_units_for_is_an_error_not_zero(monkeypatch, tmp_path, gates):
    """measure_pools: a null rate measured on no units was taken as 0 (the kindest null), and an empty
    DPB/MEG residual pool crashed later in rng.choice; both are a ConfigError naming the gate."""
    from types import SimpleNamespace

    from pytest_posbias.calibration import e2e, measure_pools

    empty = tmp_path / "m.jsonl"
    empty.write_text("")
    ctx = SimpleNamespace(options=SimpleNamespace(data=str(empty)), probe_settings=lambda _: {"scales": [2, 4]})
    monkeypatch.setattr(e2e, "gate_verdict", lambda *a: SimpleNamespace(n=0, estimate=float("nan")))
    with pytest.raises(ConfigError, match=f"{gates[0]}: sim:unbiased gave no units"):
        measure_pools(ctx, gates=gates)


@pytest.mark.parametrize("where", ["a-folder", "the-data"])
def test_calibrate_json_that_is_a_folder_or_the_manifest_is_refused_before_running(monkeypatch, tmp_path, where):
    """posbias calibrate --json naming a folder failed after the measurement; naming --data wrote over the manifest."""
    import pytest_posbias.calibration as cal
    from pytest_posbias.cli import main

    data = tmp_path / "m.jsonl"
    data.write_text("")
    monkeypatch.setattr(cal, "run_calibration", lambda **kw: pytest.fail("the calibration ran"))
    target = tmp_path if where == "a-folder" else data
    assert main(["calibrate", "--gates", "flip", "--data", str(data), "--json", str(target)]) == 2
    assert data.read_text() == ""


def test_a_rate_gate_without_a_null_is_not_told_it_needs_p4_groups(monkeypatch, tmp_path):
    """measure_pools names why a rate gate's null is missing without the MEG-only reason (P = 4 groups)."""
    from types import SimpleNamespace

    from pytest_posbias.calibration import e2e, measure_pools

    empty = tmp_path / "m.jsonl"
    empty.write_text("")
    ctx = SimpleNamespace(options=SimpleNamespace(data=str(empty)), probe_settings=lambda _: {"scales": [2, 4]})
    monkeypatch.setattr(e2e, "gate_verdict", lambda *a: SimpleNamespace(n=0, estimate=float("nan")))
    with pytest.raises(ConfigError) as err:
        measure_pools(ctx, gates=["order"])
    assert "P = 4" not in str(err.value) and str(err.value).startswith("order: sim:unbiased gave no units on this data")
