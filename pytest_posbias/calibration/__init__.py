"""Calibration of the gates: error rates, power, sample sizes, and the cost of sequential decisions.

Each gate is run many times on seeded simulated data and the outcomes are counted:

* positional gates (DPB, MEG): per-group values resampled from the residuals ``sim:unbiased``
  produced on the synthetic set (measured once through the real probe), shifted by the true effect θ;
* rate gates (flip, phase, order, repetition, attack): Bernoulli units with rate θ, the null rate
  being what ``sim:unbiased`` measured;
* stressor amplification: per video, the share of ``trials`` stressed outputs that repeat (rate
  p0 + θ) minus the clean indicator (rate p0 = 0.10, a well-behaved model in VideoSTF table 1).

Per gate and design (fixed, sequential) :func:`calibrate_gate` counts the error rates, power and units
used, :func:`n_for_power` the sample for 80% power; docs/calibration.md reads the table.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import PosbiasConfig, check_alpha
from ..errors import ConfigError
from ..gate_registry import GATES as GATE_SPECS
from ..gates.positional import T_RULES, t_rule
from ..metrics import dpb_per_instance, meg_per_instance
from ..probes.settings import DEFAULTS
from ..run.suite_params import positional_configs, positional_spec
from ..stats import _bounds, exact_interval, mean_verdict, rate_verdict, share_difference_verdict
from ..stats.sequential import gsd_decide

STRESSOR_P0 = 0.10
STRESSOR_TRIALS = 30


@dataclass(frozen=True)
class GateModel:
    """A calibrated gate: its threshold and region, unit, null value, default size and unit draw."""

    name: str
    kind: str  # "mean" | "rate"
    threshold: float
    sides: str
    unit: str
    null_theta: float
    n_default: int
    draw: Callable[[np.random.Generator, int, float], np.ndarray]


def _mean_draw(pool: np.ndarray, lo: float, hi: float) -> Callable[[np.random.Generator, int, float], np.ndarray]:
    def draw(rng: np.random.Generator, n: int, theta: float) -> np.ndarray:
        return np.clip(rng.choice(pool, size=n, replace=True) + theta, lo, hi)

    return draw


def _rate_draw(rng: np.random.Generator, n: int, theta: float) -> np.ndarray:
    return (rng.random(n) < min(1.0, max(0.0, theta))).astype(float)


def _stressor_draw(rng: np.random.Generator, n: int, theta: float) -> np.ndarray:
    clean = (rng.random(n) < STRESSOR_P0).astype(float)
    stressed = rng.binomial(STRESSOR_TRIALS, min(1.0, STRESSOR_P0 + theta), size=n) / STRESSOR_TRIALS
    return np.asarray(stressed - clean, dtype=float)


def gate_models(pools: dict[str, np.ndarray], null_rates: dict[str, float],
                defaults: dict[str, int]) -> list[GateModel]:
    """The calibrated gates' unit models; threshold, side and value range are the gates' registry records."""

    def model(name: str, kind: str, unit: str, size: str,
              draw: Callable[[np.random.Generator, int, float], np.ndarray] = _rate_draw) -> GateModel:
        g = GATE_SPECS[name]
        null = null_rates.get(name, 0.0) if kind == "rate" else 0.0
        return GateModel(name, kind, g.threshold, g.side, unit, null, defaults[size], draw)

    return [*(model(g, "mean", "groups", "groups", _mean_draw(pools[g], *GATE_SPECS[g].value_range))
              for g in ("dpb", "meg")),
            *(model(g, "rate", "items", "items") for g in ("flip", "phase", "order")),
            model("repetition", "rate", "videos", "videos"),
            model("stressor", "mean", "videos", "videos", _stressor_draw),
            model("attack", "rate", "benign videos", "videos")]


def fixed_decision(g: GateModel, x: np.ndarray, mode: str, alpha: float, rng: np.random.Generator,
                   n_resamples: int) -> bool:
    """The suites' fixed-sample gate on units ``x``: returns passed."""
    if g.kind == "rate":
        return rate_verdict(int(x.sum()), int(x.size), name=g.name, threshold=g.threshold, mode=mode,
                            alpha=alpha).passed
    if g.name == "stressor":
        # the gate's rule takes the share and the clean flag apart; in :func:`_stressor_draw` the flag is
        # 1 exactly where d < 0 (d = 0 with a flag needs all 30 stressed outputs to repeat as well)
        flag = (x < 0).astype(float)
        return share_difference_verdict(np.clip(x + flag, 0.0, 1.0), flag, name=g.name, threshold=g.threshold,
                                        sides=g.sides, mode=mode, alpha=alpha, n_resamples=n_resamples, rng=rng).passed
    t_based = g.name in T_RULES or t_rule(g.name, mode) == "both-t"  # the positional gates' t rules (gates.positional)
    return mean_verdict(x, None, name=g.name, threshold=g.threshold, sides=g.sides, mode=mode, alpha=alpha,
                        n_resamples=n_resamples, rng=rng, method=t_rule(g.name, mode) if t_based else
                        GATE_SPECS[g.name].bootstrap, value_range=GATE_SPECS[g.name].value_range,
                        lattice_step=MEG_STEP if g.name == "meg" else None).passed


SEQUENTIAL_LOOKS = 4
# gates.positional.meg_lattice_step on the synthetic set (four-sentence references, P = 4, cyclic orders)
MEG_STEP = 1.0 / 32.0


def sequential_decision(g: GateModel, x: np.ndarray, mode: str, alpha: float) -> tuple[bool, int]:
    """The suites' sequential gate on units ``x`` (n_max = len(x)), the four-look group-sequential
    design with O'Brien–Fleming spending: passed, units used."""
    lower, upper = _bounds(g.threshold, g.sides)
    d = gsd_decide(x, n_max=x.size, looks=SEQUENTIAL_LOOKS, lower=lower, upper=upper, mode=mode, alpha=alpha,
                   kind="rate" if g.kind == "rate" else "mean", rule=t_rule(g.name, mode),
                   lattice_step=MEG_STEP if g.name == "meg" else None,
                   value_range=GATE_SPECS[g.name].value_range if GATE_SPECS[g.name].probe == "positional" else None)
    return d.passed, d.stopped_at


def rate_ci(k: int, n: int) -> tuple[float, float]:
    """Clopper–Pearson 95% interval of k/n (NaN without runs)."""
    return exact_interval(k, n, confidence_level=0.95) if n else (math.nan, math.nan)


POWER_MULTIPLES = (0.5, 1.0, 1.5, 2.0, 3.0)  # true effects as multiples of the threshold t (plus the null)
ERROR_RATES = ("false_failure_null", "false_failure_boundary", "false_pass_boundary")  # each with its "_ci"


def calibrate_gate(g: GateModel, *, reps: int, alpha: float, seed: int, n: int | None = None,
                   n_max_seq: int | None = None, n_resamples: int = 999) -> dict[str, Any]:
    """Error rates, power curve and cost of one gate at sample size n (fixed) and n_max_seq (sequential).

    For each design and each true effect θ of the curve (the null of ``sim:unbiased``, then ``POWER_MULTIPLES`` × t) the
    detect-mode failure rate over ``reps`` seeded repetitions (a false-failure rate for θ <= t, power beyond it) and the
    median units a decision used; plus the certify-mode false-pass rate at the boundary θ = t.
    """
    n = n or g.n_default
    n_seq = n_max_seq or n
    rng = np.random.default_rng(seed)
    t = g.threshold
    thetas = [g.null_theta, *(m * t for m in POWER_MULTIPLES)]
    out: dict[str, Any] = {"gate": g.name, "n": n, "n_seq": n_seq, "threshold": t, "unit": g.unit, "reps": reps,
                           "thetas": thetas}

    def run(theta: float, mode: str, design: str, size: int) -> tuple[float, float]:
        fails = 0
        used: list[int] = []
        for _ in range(reps):
            x = g.draw(rng, size, theta)
            passed, k = ((fixed_decision(g, x, mode, alpha, rng, n_resamples), size) if design == "fixed" else
                         sequential_decision(g, x, mode, alpha))
            fails += (not passed) if mode == "detect" else passed
            used.append(k)
        return fails / reps, float(np.median(used))

    for design, size in (("fixed", n), ("sequential", n_seq)):
        curve = [run(theta, "detect", design, size) for theta in thetas]
        fpr_b, _ = run(t, "certify", design, size)
        fail = [c[0] for c in curve]
        rates: dict[str, Any] = {}
        for name, r in zip(ERROR_RATES, (fail[0], fail[2], fpr_b), strict=True):
            rates.update({name: r, f"{name}_ci": rate_ci(round(r * reps), reps)})
        out[design] = {**rates, "power_2t": fail[thetas.index(2 * t)], "fail_rate_curve": fail,
                       "median_units": [c[1] for c in curve]}
    return out


def n_for_power(g: GateModel, *, target: float = 0.8, alpha: float, seed: int, reps: int, grid: Sequence[int],
                design: str = "fixed", multiple: float = 2.0) -> int | None:
    """Smallest n of ``grid`` whose power at θ = ``multiple`` × t (2t by default) reaches ``target``."""
    if not multiple > 1.0:
        raise ConfigError(f"`multiple` must be > 1 (an effect beyond the threshold); got {multiple!r}")
    rng = np.random.default_rng(seed)
    for n in grid:
        hits = 0
        for _ in range(reps):
            x = g.draw(rng, n, multiple * g.threshold)
            hits += not (fixed_decision(g, x, "detect", alpha, rng, 499) if design == "fixed" else
                         sequential_decision(g, x, "detect", alpha)[0])
        if hits / reps >= target:
            return int(n)
    return None


GATES = ("dpb", "meg", "flip", "phase", "order", "repetition", "stressor", "attack")


def measure_pools(ctx: Any, model: str = "sim:unbiased", gates: Sequence[str] = GATES
                  ) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Per-group DPB/MEG residuals and null rates of ``sim:unbiased`` through the real probes
    (run the context with the fixed design, so a null rate uses every unit)."""
    from .e2e import gate_verdict

    pools: dict[str, list[float]] = {"dpb": [], "meg": []}
    settings = ctx.probe_settings("positional")
    if {"dpb", "meg"} & set(gates):
        for domain, bucket, P in positional_configs(ctx.options.data, settings["scales"]):
            r = ctx.positional(model, positional_spec(settings, domain, bucket, P))
            if r.coverage.size == 0:
                continue
            for name, fn in (("dpb", dpb_per_instance), ("meg", meg_per_instance))[: 2 if P == 4 else 1]:
                vals = fn(r.coverage)
                groups = np.unique(r.clusters)
                means = np.array([vals[r.clusters == gidx].mean() for gidx in groups])
                pools[name].extend((means - means.mean()).tolist())
    # a null measured on no units is unknown, not 0 (the kindest null: the false-failure rates would be understated)
    lost = [g for g in ("dpb", "meg") if g in gates and not pools[g]]
    null: dict[str, float] = {}
    for gate in (g for g in ("order", "phase", "flip", "repetition", "attack") if g in gates and not lost):
        v = gate_verdict(ctx, gate, model)  # the suites' verdicts
        if not (v.n and math.isfinite(v.estimate)):
            lost.append(gate)
            break
        null[gate] = float(v.estimate)
    if lost:
        why = {"dpb": " (DPB needs groups)", "meg": " (MEG needs P = 4 groups)"}.get(lost[0], "")
        raise ConfigError(f"{lost[0]}: {model} gave no units on this data{why}, so the gate's null cannot be "
                          "measured; pick a manifest with its items, or leave the gate out of --gates")
    return {k: np.array(v) for k, v in pools.items()}, null


N80_MULTIPLES = (2.0, 3.0)  # n80 is reported at 2t (the table's column) and at 3t
MEAN_GRID = (12, 16, 24, 32, 40, 48, 64, 96, 128)  # the bootstrap needs about a dozen clusters
RATE_GRID = (10, 20, 30, 40, 60, 80, 120, 160, 240, 320)


def check_run(gates: Sequence[str], allowed: Sequence[str], reps: int, min_reps: int, alpha: float,
              data: str | None) -> None:
    """Validate a calibration run's arguments (``allowed``: its gates; ``min_reps``: its fewest repetitions)."""
    if unknown := sorted(set(gates) - set(allowed)):
        raise ConfigError(f"`gates` holds unknown gates {unknown}; allowed: {', '.join(allowed)}")
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < min_reps:
        raise ConfigError(f"`reps` must be an integer >= {min_reps}; got {reps!r}")
    check_alpha(alpha, "`alpha`")
    if data and not Path(data).is_file():
        raise ConfigError(f"`data`: no such manifest file: {data}")


def run_calibration(*, reps: int, alpha: float = 0.05, seed: int = 0, gates: Sequence[str] = GATES,
                    data: str | None = None, cache: str = ".posbias", rootdir: str | Path = ".",
                    print_fn: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Measure ``sim:unbiased`` on the synthetic set (or ``data``), then calibrate each gate of
    ``gates`` at the suites' default sample sizes; prints the table and returns its rows."""
    from ..run.context import RunContext
    from ..run_options import RunOptions

    check_run(gates, GATES, reps, 10, alpha, data)  # before the measurement, not after
    t0 = time.perf_counter()
    options = RunOptions(models=("sim:unbiased",), cache=cache, seed=seed, judge="auto", sequential=False,
                         data=data or None)
    ctx = RunContext.create(options, PosbiasConfig(), rootdir=Path(rootdir), worker="calibration", run_id="calibration")
    try:
        pools, null = measure_pools(ctx, gates=gates)
    finally:
        ctx.close()
    print_fn(f"measured sim:unbiased in {time.perf_counter() - t0:.0f} s: {len(pools['meg'])} MEG and "
             f"{len(pools['dpb'])} DPB group residuals; null rates "
             + ", ".join(f"{k} {v:.3f}" for k, v in null.items()))
    defaults = {"groups": DEFAULTS["positional"]["groups"], "items": DEFAULTS["phase"]["items"],
                "videos": DEFAULTS["stressor"]["videos"]}
    rows = []
    for g in gate_models(pools, null, defaults):
        if g.name not in gates:
            continue
        grid = MEAN_GRID if g.kind == "mean" else RATE_GRID
        res = calibrate_gate(g, reps=reps, alpha=alpha, seed=seed + 3, n=g.n_default, n_max_seq=g.n_default)
        res["kind"] = g.kind
        for design, off in (("fixed", 1), ("sequential", 2)):
            for m in N80_MULTIPLES:
                key = f"n80_{design}" + ("" if m == 2.0 else f"_{m:g}t")
                res[key] = n_for_power(g, alpha=alpha, seed=seed + off, reps=max(100, reps // 4), grid=grid,
                                       design=design, multiple=m)
        rows.append(res)
    for line in format_table(rows, alpha=alpha, reps=reps):
        print_fn(line)
    print_fn(f"total {time.perf_counter() - t0:.0f} s")
    return rows


def format_table(rows: Sequence[dict[str, Any]], *, alpha: float, reps: int) -> list[str]:
    """The calibration table: per gate and design, the error rates with Clopper–Pearson 95%
    intervals, the power curve, n80, and the median units a decision used."""
    def cell(v: float, ci: Sequence[float]) -> str:
        return f"{v:.3f} [{ci[0]:.3f},{ci[1]:.3f}]"

    mult = " ".join(f"{m:g}t" for m in POWER_MULTIPLES)
    lines = [f"alpha = {alpha:g}, {reps} repetitions per cell, at the suites' default sample size n (sequential: n is "
             "the maximum); error rates with Clopper-Pearson 95% intervals; n80: smallest n with 80% power at 2t / at "
             "3t", "",
             f"{'gate':<11} {'design':<10} {'n':>4} {'FFR null':>20} {'FFR boundary t':>20} {'false pass at t':>20} "
             f"{'n80 2t/3t':>9} | fail rate at theta = null {mult} | median units at the same thetas"]
    for r in rows:
        for design in ("fixed", "sequential"):
            d = r[design]
            first = (MEAN_GRID if r.get("kind") == "mean" else RATE_GRID)[0]
            n80 = "/".join((f"<={v}" if v == first else str(v)) if v else ">max"
                           for v in (r.get(f"n80_{design}"), r.get(f"n80_{design}_3t")))
            curve = " ".join(f"{x:.2f}" for x in d["fail_rate_curve"])
            units = " ".join(f"{u:.0f}" for u in d["median_units"])
            size = r["n"] if design == "fixed" else r["n_seq"]
            rates = " ".join(f"{cell(d[k], d[f'{k}_ci']):>20}" for k in ERROR_RATES)
            lines.append(f"{r['gate']:<11} {design:<10} {size:>4} {rates} {n80:>9} | {curve} | {units}")
        saved = [1 - s / f for s, f in zip(r["sequential"]["median_units"], r["fixed"]["median_units"], strict=True)]
        note = "  (the suites keep the fixed design for this gate)" if r["gate"] in ("stressor", "repetition") else ""
        lines.append(f"{'':<11} sequential saves {', '.join(f'{100 * x:.0f}%' for x in saved)} of the units{note}")
    return lines
