"""End-to-end calibration: the real gates against dose-controlled simulated models.

Where :mod:`~.calibration` simulates each gate's statistic from resampled residuals, this module runs the suites' own
code path: a :class:`~.run.context.RunContext` with the default group-sequential design, the probes on the synthetic set
(or ``--data``), the simulated model ``sim:dose,GATE=VALUE`` (docs/design.md section 7) and the gate functions of
:mod:`~.gates`. Each gate is run at three true effects: ``0`` (``sim:unbiased``, shared by every gate of a seed), ``t``
(the dose at the gate's threshold, the worst compliant model) and ``3t`` (a clear violation).

MEG is dosed negative (middle slots weak), every other gate positive; ``coverage`` is a floor f, so its ``t`` dose is f
and its violating dose f − ``COVERAGE_SHORTFALL`` (``3f`` would lie on the compliant side).

Repetition r uses the run seed s = seed + r, which changes which units the probes draw and every generation seed. The
table and its targets: :func:`format_e2e`, :func:`verdict_notes`, docs/calibration.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..config import PosbiasConfig
from ..errors import ConfigError
from ..gate_registry import GATES
from ..gates import phase_verdict, positional_verdict, stressor_verdict
from ..probes.settings import settings_for
from ..run.suite_params import positional_spec
from . import check_run, rate_ci

E2E_GATES = ("dpb", "meg", "coverage", "contamination", "flip", "phase", "order", "repetition", "stressor", "attack")
LEVELS = ("0", "t", "3t")
COVERAGE_SHORTFALL = 0.10  # the coverage floor's violating dose lies this far below the floor
SIGN = {"meg": -1.0}  # MEG dosed negative (middle slots weak); every other gate positive
POSITIONAL = ("dpb", "meg", "coverage", "contamination")
# the configuration the positional gates are calibrated on (the suites run each configuration
# as its own test; P = 4 for MEG, which is defined there only, P = 2 for the others)
DEFAULT_CONFIG = ("domestic", "short")
STRESSOR = "shuffle"  # the stressor of the stressor and attack gates (every stressor breaks the frame grid)
QUICK_PROBES: dict[str, dict[str, Any]] = {
    "positional": {"groups": 16}, "phase": {"items": 40}, "stressor": {"videos": 8, "trials": 10, "attack_cap": 10},
}
QUICK_REPS = 2  # --quick: a short run (docs/calibration.md)
DEFAULT_REPS = 20
POWER_TARGET = 0.8


def dose_value(gate: str, level: str, threshold: float | None = None) -> float | None:
    """The dose of ``gate`` at ``level`` (None at ``0``: the unbiased model): ±t or ±3t,
    coverage t and t − COVERAGE_SHORTFALL."""
    if level not in LEVELS:
        raise ConfigError(f"`level` must be one of {', '.join(LEVELS)}; got {level!r}")
    if level == "0":
        return None
    t = GATES[gate].threshold if threshold is None else threshold
    if GATES[gate].side == "lower":
        return t if level == "t" else round(t - COVERAGE_SHORTFALL, 10)
    return round(SIGN.get(gate, 1.0) * (t if level == "t" else 3 * t), 10)  # 3 * 0.15 = 0.45, not 0.44999999999999996


def dose_model(gate: str, level: str, threshold: float | None = None) -> str:
    """``sim:unbiased`` at ``0``, else ``sim:dose,GATE=VALUE``."""
    v = dose_value(gate, level, threshold)
    return "sim:unbiased" if v is None else f"sim:dose,{gate}={v!r}"


def gate_verdict(ctx: Any, gate: str, model: str, config: tuple[str, str] = DEFAULT_CONFIG) -> Any:
    """The suites' verdict of ``gate`` for ``model`` (the code path of suites/test_*.py)."""
    if gate in POSITIONAL:
        P = 4 if gate == "meg" else 2
        return positional_verdict(ctx, gate, model, positional_spec(ctx.probe_settings("positional"), *config, P))
    if gate in ("flip", "phase", "order"):
        which = {"flip": (ctx.phase_spec().budget, "left", "midpoint"), "phase": "0-1", "order": None}[gate]
        return phase_verdict(ctx, gate, model, which)
    frames = ctx.probe_settings("stressor")["frames"][0]
    if gate == "repetition":
        return stressor_verdict(ctx, "repetition", model, frames)
    if gate in ("stressor", "attack"):
        return stressor_verdict(ctx, gate, model, frames, STRESSOR)
    raise ConfigError(f"unknown gate {gate!r}; allowed: {', '.join(E2E_GATES)}")


@dataclass
class Cell:
    """One gate at one dose over the repetitions: fails, units used, verdicts below the floor."""

    model: str
    failed: list[bool] = field(default_factory=list)
    units: list[int] = field(default_factory=list)
    below_floor: int = 0

    @property
    def fails(self) -> int:
        return int(sum(self.failed))

    @property
    def runs(self) -> int:
        return len(self.failed)

    def rate(self) -> float:
        return self.fails / self.runs if self.runs else math.nan

    def ci(self) -> tuple[float, float]:
        """Clopper–Pearson 95% interval of the fail rate."""
        return rate_ci(self.fails, self.runs)

    def median_units(self) -> float:
        return float(np.median(self.units)) if self.units else math.nan

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.ci()
        return {"model": self.model, "fails": self.fails, "runs": self.runs, "fail_rate": self.rate(), "ci": [lo, hi],
                "median_units": self.median_units(), "below_floor": self.below_floor}


def run_end_to_end(*, reps: int, quick: bool = False, alpha: float = 0.05, seed: int = 0,
                   gates: Sequence[str] = E2E_GATES, data: str | None = None, cache: str = ".posbias",
                   rootdir: str | Path = ".", probes: dict[str, dict[str, Any]] | None = None,
                   config: tuple[str, str] = DEFAULT_CONFIG,
                   print_fn: Callable[[str], None] = print) -> dict[str, dict[str, Cell]]:
    """Run every gate of ``gates`` at doses 0, t and 3t over ``reps`` run seeds (seed, seed + 1, …)
    through a RunContext with the suites' defaults (``quick``: the smaller probe sizes of
    ``QUICK_PROBES``; ``probes`` overrides either); prints the table and returns the cells."""
    from ..run.context import RunContext
    from ..run_options import RunOptions

    check_run(gates, E2E_GATES, reps, 1, alpha, data)
    probe_cfg = {k: dict(v) for k, v in (QUICK_PROBES if quick else {}).items()}
    for k, v in (probes or {}).items():
        probe_cfg.setdefault(k, {}).update(v)
    pcfg = PosbiasConfig(probes=probe_cfg)
    cells = {g: {lv: Cell(dose_model(g, lv)) for lv in LEVELS} for g in gates}
    t0 = time.perf_counter()
    sizes = {key: int(settings_for(probe, pcfg.probes.get(probe))[key]) for probe, key in
             (("positional", "groups"), ("phase", "items"), ("stressor", "videos"), ("stressor", "trials"))}
    print_fn(f"end-to-end calibration: {reps} run seeds ({seed}..{seed + reps - 1}), alpha = {alpha:g}, detect mode, "
             f"group-sequential design; maximum sizes: {sizes['groups']} groups per configuration "
             f"({config[0]}-{config[1]}; P = 4 for meg, 2 otherwise), {sizes['items']} items, {sizes['videos']} videos "
             f"x {sizes['trials']} stressed trials" + (" (--quick sizes)" if quick else " (the suites' defaults)"))
    for r in range(reps):
        s = seed + r
        options = RunOptions(models=("sim:unbiased",), cache=cache, seed=s, judge="auto", alpha=alpha,
                             sequential=True, data=data or None)
        ctx = RunContext.create(options, pcfg, rootdir=Path(rootdir), worker="calibration-e2e",
                                run_id=f"calibration-e2e-{s}", quiet=True)
        try:
            for g in gates:
                tg = time.perf_counter()
                for lv in LEVELS:
                    c = cells[g][lv]
                    v = gate_verdict(ctx, g, c.model, config)
                    if not v.n:  # not a decision on data: counted as a failure it would read as power at 3t
                        raise ConfigError(f"{g}: {c.model} gave no units on {config[0]}-{config[1]} of this data; "
                                          "calibrate on a manifest that has them, or leave the gate out of --gates")
                    c.failed.append(not v.passed)
                    c.units.append(int(v.n))
                    c.below_floor += not bool(v.extra.get("measurement", {}).get("floor_met", True))
                print_fn(f"  seed {s} {g}: " + ", ".join(
                    f"{lv} {'fail' if cells[g][lv].failed[-1] else 'pass'} n={cells[g][lv].units[-1]}" for lv in LEVELS)
                    + f" ({time.perf_counter() - tg:.0f} s)")
        finally:
            ctx.close()
        print_fn(f"  seed {s} done ({time.perf_counter() - t0:.0f} s)")
    for line in format_e2e(cells, alpha=alpha):
        print_fn(line)
    print_fn(f"total {time.perf_counter() - t0:.0f} s")
    return cells


def verdict_notes(cells: dict[str, Cell], *, alpha: float) -> list[str]:
    """What a gate's row misses: a fail rate above α at 0 or t beyond Monte-Carlo error (the
    interval's lower end above α), or power at 3t below 80% (the interval's upper end below it:
    'short of 80%'; a point estimate below it within the interval: 'not shown')."""
    notes = []
    for lv in ("0", "t"):
        c = cells[lv]
        if c.runs and c.ci()[0] > alpha:
            notes.append(f"fails too often at {lv}")
    c = cells["3t"]
    if c.runs and c.rate() < POWER_TARGET:
        notes.append("does not reach 80% at 3t" if c.ci()[1] < POWER_TARGET else "80% at 3t not shown")
    if any(x.below_floor for x in cells.values()):
        notes.append("verdicts below the measurement floor: " + ", ".join(
            f"{lv} {x.below_floor}" for lv, x in cells.items() if x.below_floor))
    return notes


def format_e2e(cells: dict[str, dict[str, Cell]], *, alpha: float) -> list[str]:
    """The table: per gate the dose models, fail rates at 0 / t / 3t with Clopper–Pearson 95%
    intervals, the median units used, and what misses the targets."""
    def cell(c: Cell) -> str:
        lo, hi = c.ci()
        return f"{c.fails}/{c.runs} = {c.rate():.2f} [{lo:.2f},{hi:.2f}]"

    lines = ["", f"fail rate (verdict not passed) with Clopper-Pearson 95% interval; targets: <= {alpha:g} at 0 and t, "
                 f">= {POWER_TARGET:g} at 3t (coverage: t = the floor, 3t = floor - {COVERAGE_SHORTFALL:g})",
             f"{'gate':<14} {'at 0':>24} {'at t':>24} {'at 3t':>24} {'median units 0/t/3t':>20}  notes / doses"]
    for g, row in cells.items():
        units = "/".join(f"{row[lv].median_units():.0f}" for lv in LEVELS)
        notes = verdict_notes(row, alpha=alpha)
        doses = f"t: {row['t'].model}, 3t: {row['3t'].model}"
        lines.append(f"{g:<14} {cell(row['0']):>24} {cell(row['t']):>24} {cell(row['3t']):>24} {units:>20}  "
                     + ("; ".join(notes) + " | " if notes else "ok | ") + doses)
    return lines


def cells_to_json(cells: dict[str, dict[str, Cell]]) -> dict[str, Any]:
    """The cells as JSON-ready data (written by ``posbias calibrate --end-to-end --json FILE``)."""
    return {g: {lv: c.to_dict() for lv, c in row.items()} for g, row in cells.items()}
