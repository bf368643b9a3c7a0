"""The MEG of ``sim:unbiased`` over seeds: is the simulator slot-symmetric, and how often does its
MEG gate fail a sample?

For one P = 4 configuration and one positional variant (``main`` or any of
``run.suite_params.POSITIONAL_VARIANTS``, e.g. ``equal-attention``), each seed runs the positional
probe on ``sim:unbiased`` exactly as the suite does (same request seeds as ``--posbias-seed
SEED``, same alignment and judge), then:

* the group MEGs (mean over the group's cyclic orders of MEG_i = (C2 + C3)/2 − (C1 + C4)/2,
  multi-video paper eq. 6–7) pooled over seeds: their mean with a 95% t interval over seeds (the
  population MEG, 0 for a slot-symmetric model), and how many sit at each point ±k·δ of the
  lattice (δ = 1/(2 · orders · references), 1/32 on the synthetic set): a slot-symmetric model
  puts as many groups at +k·δ as at −k·δ;
* the mean coverage per slot (equal for a slot-symmetric model);
* the MEG gate's verdict on each seed's groups, group-sequential (a plain pytest run) and
  fixed-sample (``--posbias-fixed``), with the share of seeds it fails and its Clopper–Pearson
  95% interval (a compliant model fails a single gate at most α of the time).

Run: python benchmarks/sim_meg_null.py --seeds 200 --variant equal-attention
     [--config leisure-short] [--groups 12] [--data MANIFEST] [--first-seed 0]
Without ``--data`` the quick synthetic set of ``posbias init --quick`` (6 clips per configuration,
12 groups) is rendered once under ``--workdir``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps


def _context(data: str, seed: int, groups: int, tmp: Path) -> Any:
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.run_options import RunOptions

    options = RunOptions(models=("sim:unbiased",), cache=str(tmp / "cache"), seed=seed, judge="auto", sequential=True,
                         data=data)
    return RunContext.create(options, PosbiasConfig(probes={"positional": {"groups": groups}}), rootdir=tmp,
                             worker="main", run_id="sim-meg-null")


def measure(data: str, domain: str, bucket: str, variant: str, seeds: range, groups: int) -> dict[str, Any]:
    """Per seed: the group MEGs, the slot coverage sums and the MEG gate's verdicts (sequential, fixed)."""
    from pytest_posbias.gates.design import sequential_verdict
    from pytest_posbias.gates.positional import meg_lattice_step
    from pytest_posbias.metrics import meg_per_instance
    from pytest_posbias.run.suite_params import POSITIONAL_VARIANTS, positional_spec

    kw = {} if variant == "main" else POSITIONAL_VARIANTS[variant]
    group_megs: list[np.ndarray] = []
    slot_sum = np.zeros(4)
    rows = 0
    fails = {"sequential": 0, "fixed": 0}
    failed_seeds: list[str] = []
    step = None
    for seed in seeds:
        with tempfile.TemporaryDirectory() as d:
            ctx = _context(data, seed, groups, Path(d))
            spec = positional_spec(ctx.probe_settings("positional"), domain, bucket, 4, groups=groups, **kw)
            step = meg_lattice_step(ctx, spec)
            r = ctx.positional("sim:unbiased", spec)
            keep = r.coverage.sum(axis=1) > 0  # the gate's informative instances
            m, cl = meg_per_instance(r.coverage[keep]), r.clusters[keep]
            g = np.array([m[cl == c].mean() for c in dict.fromkeys(cl.tolist())])
            group_megs.append(g)
            slot_sum += r.coverage.sum(axis=0)
            rows += r.coverage.shape[0]
            seq = sequential_verdict(ctx, "meg", "sim:unbiased", values_at=lambda n, g=g: g[:n], n_max=len(g), kind="mean",
                                     name="MEG", unit="groups", extra={}, rule="skew-t", lattice_step=step)
            fix = ctx.mean_gate("meg", "sim:unbiased", g, np.arange(len(g)), name="MEG", unit="groups", method="skew-t",
                                lattice_step=step)
            ctx.close()
            fails["sequential"] += seq.outcome == "fail"
            fails["fixed"] += fix.outcome == "fail"
            if seq.outcome == "fail" or fix.outcome == "fail":
                failed_seeds.append(f"seed {seed}: MEG {seq.estimate:+.4f}, sequential {seq.outcome} (p = {seq.p_value:.3f}, "
                                    f"n = {seq.n}), fixed {fix.outcome} (p = {fix.p_value:.3f})")
    return {"group_megs": group_megs, "slot_mean": slot_sum / max(rows, 1), "fails": fails, "failed": failed_seeds,
            "step": step}


def report(res: dict[str, Any], label: str) -> None:
    """Print the table of one measurement."""
    seed_means = np.array([g.mean() for g in res["group_megs"]])
    pooled = np.concatenate(res["group_megs"])
    n = seed_means.size
    half = sps.t.ppf(0.975, n - 1) * seed_means.std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")
    step = res["step"] or 1 / 32
    counts = collections.Counter(round(float(v) / step) for v in pooled)
    print(f"## sim:unbiased, {label}: {n} seeds, {pooled.size} groups, lattice step {step:g}")
    print(f"population MEG (mean group MEG): {pooled.mean():+.5f}  95% CI over seeds [{pooled.mean() - half:+.5f}, "
          f"{pooled.mean() + half:+.5f}]; SD of a group's MEG {pooled.std(ddof=1):.4f}, of a seed's mean {seed_means.std(ddof=1):.4f}")
    print("mean coverage per slot: " + ", ".join(f"{c:.4f}" for c in res["slot_mean"]))
    print("| k | groups at +k·δ | groups at −k·δ |")
    print("| --- | --- | --- |")
    print(f"| 0 | {counts[0]} | |")
    for k in range(1, max((abs(c) for c in counts), default=0) + 1):
        print(f"| {k} | {counts[k]} | {counts[-k]} |")
    print("| MEG gate (threshold 0.02, detect, α = 0.05) | seeds failed | share [95% CI] |")
    print("| --- | --- | --- |")
    for design, k in res["fails"].items():
        ci = sps.binomtest(k, n).proportion_ci(0.95, method="exact")
        print(f"| {design} | {k} / {n} | {k / n:.4f} [{ci.low:.4f}, {ci.high:.4f}] |")
    for line in res["failed"]:
        print("  " + line)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--config", default="leisure-short", help="DOMAIN-BUCKET of a P = 4 configuration")
    ap.add_argument("--variant", default="equal-attention", help="main, or a key of run.suite_params.POSITIONAL_VARIANTS")
    ap.add_argument("--groups", type=int, default=12)
    ap.add_argument("--data", default=None, help="a manifest (default: the quick synthetic set, rendered once)")
    ap.add_argument("--workdir", default="/tmp/posbias-sim-meg-null")
    a = ap.parse_args(argv)
    data = a.data
    if data is None:
        from pytest_posbias.cli.scaffold import QUICK_GROUPS, QUICK_VIDEOS
        from pytest_posbias.video.synthetic import build_set

        data = str(build_set(Path(a.workdir) / "synthetic-quick", videos_per_config=QUICK_VIDEOS,
                             groups_per_config=QUICK_GROUPS))
    domain, bucket = a.config.rsplit("-", 1)
    res = measure(data, domain, bucket, a.variant, range(a.first_seed, a.first_seed + a.seeds), a.groups)
    report(res, f"{a.config}-P4 [{a.variant}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
