"""Subcommands of the ``posbias`` CLI (registered by :func:`register_all`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Register = Callable[[Any, str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def register_all(sub: Any, register: Register) -> None:
    """Add every subcommand to the parser."""
    p = register(sub, "gates", _gates, "list the gates, their default thresholds and compliance regions")
    del p


def _gates(args: argparse.Namespace) -> int:
    from .config import DEFAULT_BASELINE_MARGINS, DEFAULT_THRESHOLDS, GATE_SIDES, MARKERS

    print(f"{'gate':<14} {'threshold':>9}  {'region':<12} {'baseline margin':>15}  description")
    for name, t in DEFAULT_THRESHOLDS.items():
        region = {"both": "|x| <= t", "upper": "x <= t", "lower": "x >= t"}[GATE_SIDES[name]]
        print(f"{name:<14} {t:>9g}  {region:<12} {DEFAULT_BASELINE_MARGINS[name]:>15g}  {MARKERS[name]}")
    return 0
