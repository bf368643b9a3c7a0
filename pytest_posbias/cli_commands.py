"""Subcommands of the ``posbias`` CLI (registered by :func:`register_all`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Register = Callable[[Any, str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def register_all(sub: Any, register: Register) -> None:
    """Add every subcommand to the parser."""
    register(sub, "gates", _gates, "list the gates, their default thresholds and compliance regions")

    p = register(sub, "fixtures", _fixtures, "build the synthetic video set (clips, scene specs, manifest)")
    p.add_argument("action", choices=["build"], help="what to do")
    p.add_argument("--out", default="fixtures/synthetic", help="output directory (default fixtures/synthetic)")
    p.add_argument("--count", type=int, default=8, help="clips per domain x bucket configuration (default 8)")
    p.add_argument("--groups", type=int, default=12, help="groups per configuration and scale (default 12)")
    p.add_argument("--scales", type=int, nargs="+", default=[2, 4], choices=[2, 4], help="group sizes P (default 2 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the whole set (default 0)")
    p.add_argument("--overwrite", action="store_true", help="re-render clips even when unchanged")


def _gates(args: argparse.Namespace) -> int:
    from .config import DEFAULT_BASELINE_MARGINS, DEFAULT_THRESHOLDS, GATE_SIDES, MARKERS

    print(f"{'gate':<14} {'threshold':>9}  {'region':<12} {'baseline margin':>15}  description")
    for name, t in DEFAULT_THRESHOLDS.items():
        region = {"both": "|x| <= t", "upper": "x <= t", "lower": "x >= t"}[GATE_SIDES[name]]
        print(f"{name:<14} {t:>9g}  {region:<12} {DEFAULT_BASELINE_MARGINS[name]:>15g}  {MARKERS[name]}")
    return 0


def _fixtures(args: argparse.Namespace) -> int:
    import time

    from .video.synthetic import build_set

    t0 = time.perf_counter()
    manifest = build_set(args.out, videos_per_config=args.count, groups_per_config=args.groups, seed=args.seed, scales=tuple(args.scales),
                         overwrite=args.overwrite, progress=lambda m: print(m, flush=True))
    n = sum(1 for _ in manifest.open())
    print(f"wrote {manifest} ({n} manifest lines) in {time.perf_counter() - t0:.1f} s")
    return 0
