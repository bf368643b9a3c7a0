"""Calibration of every gate on the simulated models; prints a table (see pytest_posbias.calibration).

First measures sim:unbiased through the real probes on the synthetic set (positional
residuals per group, null flip/repetition/attack rates), then simulates each gate many
times. ``--quick`` uses fewer repetitions (minutes here); the README's table comes from the
full run: ``python benchmarks/calibration.py --reps 1000``.

``--end-to-end`` instead runs the real gates (the suites' code path) against the dose models
``sim:dose,GATE=VALUE`` at 0, t and 3t over R run seeds (pytest_posbias.calibration.e2e);
with ``--quick``: 2 seeds at smaller probe sizes (under 15 minutes on two cores).

Run: python benchmarks/calibration.py [--end-to-end] [--quick] [--reps N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias.calibration import GATES, run_calibration

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="200 repetitions (minutes here)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per cell (default 1000, 200 with --quick)")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the numbers as JSON")
    ap.add_argument("--gates", default=None, help="comma-separated gates (default: all)")
    ap.add_argument("--end-to-end", action="store_true", help="the real gates against sim:dose models at 0, t and 3t")
    args = ap.parse_args(argv)
    if args.end_to_end:
        from pytest_posbias.calibration.e2e import (
            DEFAULT_REPS,
            E2E_GATES,
            QUICK_REPS,
            cells_to_json,
            run_end_to_end,
        )

        cells = run_end_to_end(reps=args.reps or (QUICK_REPS if args.quick else DEFAULT_REPS), quick=args.quick,
                               alpha=args.alpha, seed=args.seed,
                               gates=args.gates.split(",") if args.gates else list(E2E_GATES),
                               cache=str(ROOT / ".posbias"), rootdir=ROOT)
        if args.json:
            Path(args.json).write_text(json.dumps(cells_to_json(cells), indent=2, default=float))
        return 0
    reps = args.reps or (200 if args.quick else 1000)
    rows = run_calibration(reps=reps, alpha=args.alpha, seed=args.seed, gates=args.gates.split(",") if args.gates else GATES,
                           cache=str(ROOT / ".posbias"), rootdir=ROOT)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
