"""How far a thinning MEG dose's realised effect can sit from its target on the synthetic set,
over the start of the systematic sample that picks the thinned cells.

A MEG dose m with |m| <= FIRST_LOSS thins a share x = |m|/L of the middle cells of every P = 4
configuration by their first written sentence (``sim_dose.sentence_drops``); the cells are one
systematic sample over the configuration's middle cells listed clip by clip
(``sim_draws.set_strata`` with ``by_clip``), started at ½. For each P = 4 configuration this
measures, through the real probe and judge, every middle cell's own loss (sim:unbiased against a
dose that thins every middle cell, as ``posbias sim calibrate`` does for FIRST_LOSS), then takes
the systematic sample from each of ``--starts`` evenly spaced starts in [0, 1) and prints the
realised MEG effect −Σ(loss of the taken cells)/(2·instances): at start ½ (what ``posbias sim
check`` measures), its mean, SD and range over the starts, and the share of starts within ±10% of
the target (at least ``sim_check.TOLERANCE_ABS["meg"]``) and within ±0.002.

Run: python benchmarks/sim_thin_spread.py [--target -0.02] [--groups 40] [--starts 200]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from pytest_posbias.cli.sim_check import _context, _thin_always, tolerance
from pytest_posbias.models import sim_dose as SD
from pytest_posbias.run.suite_params import positional_configs, positional_spec


def spread(loss_by_cell: list[tuple[tuple[str, int, tuple[int, ...], int], float]], x: float, instances: int,
           starts: int) -> np.ndarray:
    """The realised MEG effect for each start k/starts of a systematic sample of share x over the cells
    sorted by (clip, group, order, slot), the order ``sim_draws._clip_cell`` lists them in (a group's
    cyclic orders sort by their first slot, the rotation j)."""
    cells = sorted(loss_by_cell)
    loss = np.array([v for _, v in cells], dtype=float)
    idx = np.arange(loss.size)
    out = []
    for k in range(starts):
        o = k / starts
        taken = np.floor((idx + 1) * x + o) > np.floor(idx * x + o)
        out.append(-loss[taken].sum() / (2 * instances))
    return np.array(out)


def main(argv: list[str] | None = None) -> int:
    """Print one line per P = 4 configuration (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=float, default=-0.02, help="MEG dose (|m| <= FIRST_LOSS; default -0.02)")
    ap.add_argument("--groups", type=int, default=40, help="groups per configuration (default 40)")
    ap.add_argument("--starts", type=int, default=200, help="evenly spaced starts in [0, 1) (default 200)")
    ap.add_argument("--data", default=None, help="manifest (default: the synthetic set)")
    args = ap.parse_args(argv)
    tol = tolerance("meg", args.target)
    with tempfile.TemporaryDirectory(prefix="posbias-thin-spread-") as tmp:
        ctx = _context("sim:unbiased", seed=0, data=args.data, cache=tmp, probes={"positional": {"groups": args.groups}},
                       rootdir=Path(tmp))
        try:
            settings = ctx.probe_settings("positional")
            for domain, bucket, P in positional_configs(ctx.options.data, settings["scales"]):
                if P != 4:
                    continue
                L = SD.first_loss_for(domain, bucket, P)
                if abs(args.target) > L:
                    print(f"{domain}-{bucket}-P4: |target| above FIRST_LOSS {L}: whole summaries, not thinned")
                    continue
                spec = positional_spec(settings, domain, bucket, P, groups=args.groups)
                u = ctx.positional("sim:unbiased", spec)
                with _thin_always():
                    t = ctx.positional("sim:dose,meg=-1", spec)
                if u.coverage.shape != t.coverage.shape or u.coverage.size == 0:
                    print(f"{domain}-{bucket}-P4: the unbiased and thinned runs scored {u.coverage.shape[0]} and "
                          f"{t.coverage.shape[0]} instances: skipped")
                    continue
                cells = [((inst["videos"][s], int(inst["group_index"]), tuple(inst["order"]), s),
                          float(u.coverage[i, s] - t.coverage[i, s]))
                         for i, inst in enumerate(u.instances) for s in (1, 2)]
                eff = spread(cells, abs(args.target) / L, u.coverage.shape[0], args.starts)
                half = eff[args.starts // 2] if args.starts % 2 == 0 else float("nan")
                print(f"{domain}-{bucket}-P4 start 0.5: {half:.4f}; over {args.starts} starts: mean {eff.mean():.4f} "
                      f"sd {eff.std():.4f} range [{eff.min():.4f}, {eff.max():.4f}]; within {tol:g}: "
                      f"{np.mean(np.abs(eff - args.target) <= tol + 1e-12):.2f}, within 0.002: "
                      f"{np.mean(np.abs(eff - args.target) <= 0.002 + 1e-12):.2f}", flush=True)
        finally:
            ctx.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
