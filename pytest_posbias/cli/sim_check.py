"""``posbias sim check`` and ``posbias sim calibrate``: the dose-controlled simulated models measured
through the real probes.

``posbias sim check sim:dose,meg=-0.05`` runs the probes each named gate rests on, on the synthetic
set (or ``--data``), and prints per gate the target, the achieved value and its 95% interval:

* dpb / meg / coverage / contamination: the per-group mean of the per-instance metric (multi-video
  paper eq. 3–7) in every configuration (MEG P = 4 only; contamination without the News
  configurations, where it is reported, not gated), pooled over configurations; cluster bootstrap
  over the groups;
* flip: consensus flip rate left vs midpoint at the phase budget; phase: phase 0 vs 1; order: share
  of items whose answer changes over the orderings; parity: consensus answers changed against
  sim:unbiased; repetition: clean RR; attack: Shuffle ASR over the clean-benign videos; all with a
  Clopper–Pearson interval;
* stressor: mean per-video amplification pooled over the stressors walked to the cap, cluster
  bootstrap over videos.

The per-configuration check (:func:`tolerance`) and ``posbias sim calibrate``: docs/simulated-models.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from ..errors import ConfigError
from ..probes import conditions as C

STRESSORS_TO_CAP = ("add1", "add2", "delete2", "replace1", "replace2", "shuffle")
# a positional dose lands when its configuration's compared value is within 10% of the target, or within
# the gate's absolute floor where 10% of a target near 0 is below what the dose's units resolve (MEG's
# floor: the spread of a thinning dose over the systematic sample's start, docs/simulated-models.md)
TOLERANCE_REL = 0.10
TOLERANCE_ABS = {"dpb": 0.005, "meg": 0.003, "coverage": 0.01, "contamination": 0.01}
# DPB and MEG are compared as the dose's effect (dosed − sim:unbiased on the same groups): the unbiased
# model's population value is 0, so its value on a finite set is noise the dose does not make; coverage
# and contamination are absolute levels (the stored MU and x0 are part of the dose), compared as realised
PAIRED_GATES = ("dpb", "meg")
# a rate (or stressor) dose is exact on the set up to one or two units (docs/simulated-models.md): its
# tolerance is max(10% of the target, RATE_UNITS / n)
RATE_UNITS = 2
Key = tuple[str, str, int]  # a positional configuration: (domain, bucket, P)


def tolerance(gate: str, target: float) -> float:
    """The allowed |compared − target| of a positional dose: max(0.10·|target|, TOLERANCE_ABS[gate])."""
    if gate not in TOLERANCE_ABS:
        raise ConfigError(f"`gate` must be one of {', '.join(TOLERANCE_ABS)}; got {gate!r}")
    return max(TOLERANCE_REL * abs(target), TOLERANCE_ABS[gate])


@dataclass(frozen=True)
class Achieved:
    """One gate's measured value: estimate, 95% interval, units, and per-part estimates."""

    gate: str
    target: float | None
    estimate: float
    ci_low: float
    ci_high: float
    n: int
    unit: str
    parts: dict[str, float]
    unbiased: float | None = None  # sim:unbiased's value on the same units (a dosed rate gate's)

    @property
    def goal(self) -> float | None:
        """What a dose of a gate without a per-configuration rule can reach on these units: max(target,
        sim:unbiased's value), since a target below the unbiased model's own rate leaves the model unbiased
        (as the positional rule compares a dose's effect against sim:unbiased); None without a target."""
        if self.target is None or self.gate in TOLERANCE_ABS:
            return None
        return self.target if self.unbiased is None or math.isnan(self.unbiased) else max(self.target, self.unbiased)

    @property
    def lands(self) -> bool:
        """A dose without a per-configuration rule lands when its 95% interval holds :attr:`goal` or
        |achieved − goal| <= max(10% of |goal|, ``RATE_UNITS`` / n); no unit or NaN never lands."""
        goal = self.goal
        if goal is None:
            return True
        if not self.n or math.isnan(self.estimate):
            return False
        return bool(self.ci_low <= goal <= self.ci_high
                    or abs(self.estimate - goal) <= max(TOLERANCE_REL * abs(goal), RATE_UNITS / self.n))


@dataclass(frozen=True)
class ConfigCheck:
    """One positional dose on one configuration (domain-bucket-P): the realised value, sim:unbiased
    on the same groups, the compared value (the paired effect for DPB/MEG, the realised value
    otherwise) with its 95% cluster-bootstrap interval, and the tolerance it is held to."""

    gate: str
    config: str
    target: float
    realised: float
    unbiased: float
    compared: float
    ci_low: float
    ci_high: float
    groups: int
    tolerance: float

    @property
    def lands(self) -> bool:
        """|compared − target| <= tolerance (NaN never lands)."""
        return bool(abs(self.compared - self.target) <= self.tolerance)


@dataclass(frozen=True)
class CheckResult:
    """What ``posbias sim check`` measured: one row per gate (pooled) and, for positional doses, one
    per configuration; ``missed`` are the configurations outside their tolerance."""

    achieved: tuple[Achieved, ...]
    configurations: tuple[ConfigCheck, ...]

    @property
    def missed(self) -> tuple[ConfigCheck, ...]:
        """The configurations whose compared value is outside the tolerance."""
        return tuple(c for c in self.configurations if not c.lands)

    @property
    def missed_rates(self) -> tuple[Achieved, ...]:
        """The rate and stressor doses that do not land (:attr:`Achieved.lands`)."""
        return tuple(a for a in self.achieved if not a.lands)


def config_checks(gate: str, target: float, dosed: dict[str, dict[Any, float]], unbiased: dict[str, dict[Any, float]],
                  *, seed: int) -> list[ConfigCheck]:
    """Per configuration label, the :class:`ConfigCheck` of ``gate`` from per-group values of the
    dosed model and of sim:unbiased (keyed by group); DPB/MEG compare the per-group differences."""
    rows = []
    for label, per in dosed.items():
        keys = [k for k in per if k in unbiased.get(label, {})]
        d = np.array([per[k] for k in keys], dtype=float)
        u = np.array([unbiased[label][k] for k in keys], dtype=float)
        values = d - u if gate in PAIRED_GATES else d
        est, lo, hi = _mean_ci(values, seed)
        rows.append(ConfigCheck(gate, label, target, float(d.mean()) if d.size else math.nan,
                                float(u.mean()) if u.size else math.nan, est, lo, hi, int(d.size),
                                tolerance(gate, target)))
    return rows


def _context(model: str, *, seed: int, data: str | None, cache: str, probes: dict[str, dict[str, Any]],
             rootdir: Path) -> Any:
    from ..config import PosbiasConfig
    from ..run.context import RunContext
    from ..run_options import RunOptions

    options = RunOptions(models=(model,), cache=cache, seed=seed, judge="auto", sequential=False, data=data or None)
    # one process: probe results are kept in memory only (a worker name other than "main" would
    # share them through the run folder, where a later check with the same --cache reads them back)
    return RunContext.create(options, PosbiasConfig(probes=probes), rootdir=rootdir, worker="main", run_id="sim-check")


def _mean_ci(values: np.ndarray, seed: int) -> tuple[float, float, float]:
    from ..stats import cluster_bootstrap

    if values.size == 0:
        return math.nan, math.nan, math.nan
    if values.size < 2 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean()), float(values.mean())
    b = cluster_bootstrap(values, None, confidence_level=0.95, n_resamples=2999, rng=np.random.default_rng(seed))
    return float(b.estimate), float(b.ci_low), float(b.ci_high)


def _rate_ci(k: int, n: int) -> tuple[float, float, float]:
    from ..calibration import rate_ci

    return (k / n if n else math.nan, *rate_ci(k, n))


def positional_by_group(ctx: Any, model: str, gates: Sequence[str], groups: int,
                        configs: Sequence[str] | None = None) -> dict[str, dict[str, dict[Any, float]]]:
    """Per gate and configuration label, the per-group means of the per-instance metric, keyed by
    the group (its cluster id), in the probe's group order."""
    from ..metrics import dpb_per_instance, meg_per_instance
    from ..run.suite_params import positional_configs, positional_spec

    settings = ctx.probe_settings("positional")
    out: dict[str, dict[str, dict[Any, float]]] = {g: {} for g in gates}
    keys = positional_configs(ctx.options.data, settings["scales"])
    known = {f"{d}-{b}" for d, b, _ in keys} | {f"{d}-{b}-P{P}" for d, b, P in keys}
    unknown = [c for c in configs or () if c not in known]
    if unknown:  # a misspelt configuration would check nothing, and nothing checked is no pass
        raise ConfigError(f"--configs: {', '.join(unknown)}: no such positional configuration in this set; "
                          f"it has {', '.join(sorted(known)) or 'none'}")
    for domain, bucket, P in keys:
        label = f"{domain}-{bucket}-P{P}"
        if configs and f"{domain}-{bucket}" not in configs and label not in configs:
            continue
        if gates == ["meg"] and P != 4:
            continue
        spec = positional_spec(settings, domain, bucket, P, groups=groups)
        r = ctx.positional(model, spec)
        if r.coverage.size == 0:  # no scored instance: the configuration is lost, checked as missed, not left out
            for g in gates:
                if g != "meg" or P == 4:
                    out[g][label] = {}
            continue
        news = all(ctx.manifest().videos[v].reference_style == "news"
                   for g in ctx.manifest().groups_for(domain, bucket, P)
                   for v in g.videos)
        per: dict[str, np.ndarray] = {
            "dpb": dpb_per_instance(r.coverage), "coverage": r.coverage.mean(axis=1),
            "contamination": r.contamination.mean(axis=1).astype(float)}
        if P == 4:
            per["meg"] = meg_per_instance(r.coverage)
        groups_idx = list(dict.fromkeys(r.clusters.tolist()))
        for g in gates:
            if g not in per or (g == "contamination" and news):
                continue
            out[g][label] = {k: float(per[g][r.clusters == k].mean()) for k in groups_idx}
    return out


def run_check(model: str, *, gates: Sequence[str] | None = None, groups: int = 12, items: int = 60, videos: int = 32,
              seed: int = 0, data: str | None = None, cache: str | None = None, configs: Sequence[str] | None = None,
              rootdir: str | Path = ".", print_fn: Callable[[str], None] | None = None) -> CheckResult:
    """Measure the named gates' metrics of ``model`` through the real probes: one :class:`Achieved`
    per gate and, for each positional gate the dose names, one :class:`ConfigCheck` per
    configuration, held to :func:`tolerance` (sim:unbiased runs on the same groups for DPB/MEG)."""
    from ..models.registry import resolve
    from ..models.sim_dose import DOSE_GATES, is_dose, parse_dose

    resolved = resolve(model)
    targets: dict[str, float] = {}
    if resolved.backend == "sim" and is_dose(resolved.target):
        targets = dict(parse_dose(resolved.target).targets)
    gates = list(gates or targets)
    if not gates:
        raise ConfigError(f"{model}: name the gates to measure (a dose names them: sim:dose,GATE=VALUE)")
    if bad := [g for g in gates if g not in DOSE_GATES]:
        raise ConfigError(f"unknown gates {bad}; allowed: {', '.join(DOSE_GATES)}")
    for name, v in (("groups", groups), ("items", items), ("videos", videos)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 2:
            raise ConfigError(f"`{name}` must be an integer >= 2; got {v!r}")
    probes = {"positional": {"groups": groups}, "phase": {"items": items}, "stressor": {"videos": videos}}
    out: list[Achieved] = []
    rows: list[ConfigCheck] = []

    def add(gate: str, ci: tuple[float, float, float], n: int, unit: str,
            parts: dict[str, float] | None = None) -> None:
        out.append(Achieved(gate, targets.get(gate), *ci, n, unit, parts or {}))

    with contextlib.ExitStack() as stack:
        cache_dir = cache or stack.enter_context(tempfile.TemporaryDirectory(prefix="posbias-sim-check-"))
        ctx = _context(model, seed=seed, data=data, cache=cache_dir, probes=probes, rootdir=Path(rootdir))
        stack.callback(ctx.close)
        if pos := [g for g in gates if g in ("dpb", "meg", "coverage", "contamination")]:
            by_group = positional_by_group(ctx, model, pos, groups, configs)
            dosed = [g for g in pos if targets.get(g) is not None]
            base = positional_by_group(ctx, "sim:unbiased", dosed, groups, configs) if dosed else {}
            for g in dosed:
                checked = config_checks(g, targets[g], by_group[g], base[g], seed=seed)
                if not checked:  # a dose checked on no configuration has not been shown to land
                    raise ConfigError(f"{g}: no positional configuration of this set"
                                      + (f" among --configs {','.join(configs)}" if configs else "")
                                      + " to check the dose on" + (" (MEG needs P = 4)" if g == "meg" else ""))
                rows += checked
            for g in pos:
                vals = {k: np.array(list(v.values())) for k, v in by_group[g].items()}
                allv = np.concatenate(list(vals.values())) if vals else np.zeros(0)
                add(g, _mean_ci(allv, seed), int(allv.size), "groups",
                    {k: float(v.mean()) if v.size else math.nan for k, v in vals.items()})
        if phase_gates := [g for g in ("flip", "phase", "order") if g in gates]:
            from ..probes.phase import order_flips, pair_flips

            spec = ctx.phase_spec()
            for g in phase_gates:
                r = ctx.phase(model, g, spec.budget if g == "flip" else None)
                parts: dict[str, float] = {}
                if g == "order":
                    flips = order_flips(r)
                else:  # flip: left vs midpoint at the budget; phase: phase 0 vs 1; parts: every pair
                    levels = ({a: C.sampler(a) for a in spec.samplers} if g == "flip"
                              else {str(a): C.phase(a) for a in range(spec.phases)})
                    flips = pair_flips(r, *((C.sampler("left"), C.sampler("midpoint")) if g == "flip"
                                            else (C.phase(0), C.phase(1))))
                    parts = {f"{a}-{b}": float(pair_flips(r, levels[a], levels[b]).mean())
                             for a, b in itertools.combinations(levels, 2)}
                add(g, _rate_ci(int(flips.sum()), int(flips.size)), int(flips.size), "items", parts)
        if "parity" in gates:  # changed consensus answers against sim:unbiased on the same items
            r, u = ctx.phase(model, "order"), ctx.phase("sim:unbiased", "order")
            changed = (r.consensus(C.phase(0)) != u.consensus(C.phase(0))).astype(int)
            add("parity", _rate_ci(int(changed.sum()), int(changed.size)), int(changed.size), "items")
        if {"repetition", "stressor", "attack"} & set(gates):
            frames = ctx.probe_settings("stressor")["frames"][0]
            r = ctx.stressor(model, frames)
            if "repetition" in gates:
                f = r.clean.flags
                add("repetition", _rate_ci(int(f.sum()), int(f.size)), int(f.size), "videos")
            if "stressor" in gates:
                per = {s: r.amplification(s) for s in r.variants}
                pooled = np.nanmean(np.stack([per[s] for s in STRESSORS_TO_CAP if s in per]), axis=0)
                pooled = pooled[~np.isnan(pooled)]
                add("stressor", _mean_ci(pooled, seed), int(pooled.size), "videos",
                    {s: float(np.nanmean(v)) for s, v in per.items()})
            if "attack" in gates:
                a = r.attack("shuffle")
                add("attack", _rate_ci(int(a["successes"]), int(a["attacked"])), int(a["attacked"]), "benign videos",
                    {s: float(r.attack(s)["asr"]) for s in r.variants})
        rated = [g for g in gates if g not in TOLERANCE_ABS and targets.get(g) is not None]
        if rated:  # sim:unbiased on the same units: the rate a dose below it leaves
            ub = {a.gate: a.estimate for a in run_check("sim:unbiased", gates=rated, groups=groups, items=items,
                                                        videos=videos, seed=seed, data=data, cache=cache_dir,
                                                        configs=configs, rootdir=rootdir).achieved}
            out = [replace(a, unbiased=ub.get(a.gate)) for a in out]
    if print_fn is not None:
        for line in [*format_rows(model, out), *(format_configs(rows) if rows else [])]:
            print_fn(line)
        if targets:
            from ..models.sim_dose import describe

            params = describe(parse_dose(resolved.target))
            params.pop("targets", None)
            if params:
                print_fn("behaviour: " + ", ".join(f"{k} {v:.4g}" for k, v in params.items()))
    return CheckResult(tuple(out), tuple(rows))


def format_configs(rows: Sequence[ConfigCheck]) -> list[str]:
    """The per-configuration table: target, realised, sim:unbiased on the same groups, the compared
    value (effect = dosed − unbiased for DPB/MEG) with its 95% interval, tolerance, and whether it lands."""
    floors = ", ".join(f"{g} {TOLERANCE_ABS[g]:g}" for g in dict.fromkeys(c.gate for c in rows))
    lines = ["per configuration (compared: dosed - unbiased on the same groups for dpb/meg, the realised value "
             "otherwise; lands: |compared - target| <= tolerance)",
             f"tolerance: max({TOLERANCE_REL:.0%} of |target|, the gate's absolute floor: {floors})",
             f"{'gate':<14} {'configuration':<20} {'target':>8} {'realised':>9} {'unbiased':>9} {'compared':>9} "
             f"{'95% interval':>18} {'tol':>6} {'groups':>6}  lands"]
    for c in rows:
        lines.append(f"{c.gate:<14} {c.config:<20} {c.target:>8.4f} {c.realised:>9.4f} {c.unbiased:>9.4f} "
                     f"{c.compared:>9.4f} [{c.ci_low:>7.4f}, {c.ci_high:>7.4f}] {c.tolerance:>6.4f} {c.groups:>6}  "
                     + ("yes" if c.lands else "NO: outside the tolerance"))
    missed = [c for c in rows if not c.lands]
    lines.append(f"{len(rows) - len(missed)} of {len(rows)} configurations land within tolerance"
                 + (": missed " + ", ".join(f"{c.gate} {c.config}" for c in missed) if missed else ""))
    return lines


def format_rows(model: str, rows: Sequence[Achieved]) -> list[str]:
    """The check's table: gate, target, achieved, 95% interval, n, and the per-part values."""
    lines = [f"{model}: achieved values through the real probes (95% intervals)",
             f"{'gate':<14} {'target':>8} {'achieved':>9} {'95% interval':>18} {'n':>5}  unit / parts"]
    for a in rows:
        tgt = f"{a.target:.3f}" if a.target is not None else "-"
        parts = ", ".join(f"{k} {v:.3f}" for k, v in a.parts.items())
        lands = "" if a.goal is None else (f"; lands on {a.goal:.3f}" if a.lands else f"; NO: misses {a.goal:.3f}")
        lines.append(f"{a.gate:<14} {tgt:>8} {a.estimate:>9.3f} [{a.ci_low:>7.3f}, {a.ci_high:>6.3f}] {a.n:>5}  "
                     f"{a.unit}" + (f"; {parts}" if parts else "") + lands)
    lines.append("achieved: the dosed model's own value; for dpb/meg a dose lands on its effect (dosed - "
                 "sim:unbiased on the same groups), per configuration below; another dose lands on max(target, "
                 f"sim:unbiased on the same units) when its interval holds it or it is within max({TOLERANCE_REL:.0%},"
                 f" {RATE_UNITS}/n)")
    return lines


@contextlib.contextmanager
def _thin_always() -> Iterator[None]:
    """Within the block, ``meg=-1`` thins every middle slot of a P = 4 answer by its first written
    sentence (the calibration of FIRST_LOSS) and ``dpb=1`` every first slot of a P = 2 answer (the
    calibration of FIRST_DPB); the module's constants are restored afterwards."""
    from ..models import sim_dose

    with contextlib.ExitStack() as stack:
        for table in (sim_dose.FIRST_LOSS, sim_dose.FIRST_DPB):
            stack.enter_context(mock.patch.dict(table, clear=True))
        for name in ("FIRST_LOSS_DEFAULT", "FIRST_DPB_DEFAULT", "DPB_THIN_SHARE"):
            stack.enter_context(mock.patch.object(sim_dose, name, 1.0))
        stack.enter_context(mock.patch.dict(sim_dose.DOSE_RANGE, {"meg": (-1.0, 1.0), "dpb": (-1.0, 1.0)}))
        yield


def calibrate(*, groups: int = 40, seed: int = 0, data: str | None = None, rootdir: str | Path = ".",
              print_fn: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure MU (unbiased mean slot coverage), CONTAMINATION ((x0, κ): the unbiased
    contaminated-slot rate and the rate when every slot describes another slot's video), at
    P = 4 FIRST_LOSS (the middle slots' mean coverage under sim:unbiased minus theirs when every
    middle slot drops its first written sentence) and at P = 2 FIRST_DPB (the mean per-instance
    DPB when every first slot drops its first written sentence minus sim:unbiased's) per
    configuration, and print them as the Python that ``models/sim_dose.py`` stores."""
    from ..metrics import dpb_per_instance
    from ..models import sim_dose
    from ..run.suite_params import positional_configs, positional_spec

    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 2:
        raise ConfigError(f"`groups` must be an integer >= 2; got {groups!r}")
    mu: dict[Key, float] = {}
    contam: dict[Key, tuple[float, float]] = {}
    loss: dict[Key, float] = {}
    first_dpb: dict[Key, float] = {}
    # contamination=1 makes every kept slot describe another slot's video (the calibration of κ)
    with (tempfile.TemporaryDirectory(prefix="posbias-sim-calibrate-") as tmp, _thin_always(),
          mock.patch.dict(sim_dose.CONTAMINATION, clear=True),
          mock.patch.dict(sim_dose.DOSE_RANGE, {"contamination": (0.0, 1.0)})):
        ctx = _context("sim:unbiased", seed=seed, data=data, cache=tmp, probes={"positional": {"groups": groups}},
                       rootdir=Path(rootdir))
        try:
            settings = ctx.probe_settings("positional")
            for key in positional_configs(ctx.options.data, settings["scales"]):
                domain, bucket, P = key
                spec = positional_spec(settings, domain, bucket, P, groups=groups)
                u = ctx.positional("sim:unbiased", spec)
                c = ctx.positional("sim:dose,contamination=1", spec)
                if u.coverage.size == 0:
                    continue
                mu[key] = round(float(u.coverage.mean()), 4)
                contam[key] = (round(float(u.contamination.mean()), 4), round(float(c.contamination.mean()), 4))
                if P == 4:
                    t = ctx.positional("sim:dose,meg=-1", spec)
                    loss[key] = round(float(u.coverage[:, 1:3].mean() - t.coverage[:, 1:3].mean()), 4)
                elif P == 2:
                    t = ctx.positional("sim:dose,dpb=1", spec)
                    if t.coverage.shape != u.coverage.shape:
                        raise ConfigError(f"sim calibrate: {domain}-{bucket}-P2: the thinned and unbiased runs "
                                          f"scored {t.coverage.shape[0]} and {u.coverage.shape[0]} instances")
                    first_dpb[key] = round(float(np.mean(dpb_per_instance(t.coverage) - dpb_per_instance(u.coverage))),
                                           4)
        finally:
            ctx.close()
    if not mu:  # empty tables would replace the stored constants with nothing
        raise ConfigError("sim calibrate: no positional configuration of this set was measured (no group gave a "
                          "scored instance); check --data")
    print_fn(f"# posbias sim calibrate --groups {groups} --seed {seed}")
    for name, kind, table in (("MU", "float", mu), ("CONTAMINATION", "tuple[float, float]", contam),
                              ("FIRST_LOSS", "float", loss), ("FIRST_DPB", "float", first_dpb)):
        print_fn(f"{name}: dict[tuple[str, str, int], {kind}] = {{")
        for k, v in table.items():
            print_fn(f"    {k!r}: {v},")
        print_fn("}")
    return {"mu": mu, "contamination": contam, "first_loss": loss, "first_dpb": first_dpb}


def register(sub: Any, register_fn: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the ``sim`` subcommand (``check`` and ``calibrate``) to the ``posbias`` parser."""
    p = register_fn(sub, "sim", _cli,
                    "measure a dose-controlled simulated model's gate metrics through the real probes")
    p.add_argument("action", choices=["check", "calibrate"],
                   help="check: measure a dose; calibrate: the stored constants")
    p.add_argument("model", nargs="?",
                   help="with check: sim:dose,GATE=VALUE[,GATE=VALUE...] (or sim:PROFILE with --gates)")
    p.add_argument("--gates", default=None, help="comma-separated gates to measure (default: the gates the dose names)")
    p.add_argument("--groups", type=int, default=None,
                   help="positional groups per configuration (default 12; calibrate 40)")
    p.add_argument("--items", type=int, default=60, help="multiple-choice items (default 60)")
    p.add_argument("--videos", type=int, default=32, help="videos of the stressor probe (default 32)")
    p.add_argument("--configs", default=None,
                   help="positional configurations, e.g. domestic-short,leisure-long (default all)")
    p.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    p.add_argument("--data", default=None, help="manifest (default: the synthetic set)")
    p.add_argument("--cache", default=None, help="generation cache directory (default: a temporary one)")


def _cli(args: argparse.Namespace) -> int:
    if args.action == "calibrate":
        calibrate(groups=40 if args.groups is None else args.groups, seed=args.seed, data=args.data)
        return 0
    if not args.model:
        raise ConfigError("posbias sim check needs the model, e.g. posbias sim check sim:dose,meg=-0.05")
    result = run_check(args.model, gates=args.gates.split(",") if args.gates else None,
                       groups=12 if args.groups is None else args.groups,
                       items=args.items, videos=args.videos, seed=args.seed, data=args.data, cache=args.cache,
                       configs=args.configs.split(",") if args.configs else None, print_fn=print)
    return 1 if result.missed or result.missed_rates else 0  # a dose that does not land fails the check
