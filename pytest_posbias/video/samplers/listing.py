"""``posbias samplers``: the harness presets, their knobs and the upstream code each follows."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from . import PRESETS

CONVENTIONS = {
    "left": "floor((i + phase)·T/b) (phase 0 unless set by the phase probe)",
    "midpoint": "floor((i + 1/2)·T/b)",
    "endpoint": "np.linspace(0, T-1, b) rounded half to even",
    "fps": "one frame per whole second floor(k·fps), then endpoint over those",
}


def describe() -> dict[str, Any]:
    """Presets (knobs with type, default and meaning; upstream source) and conventions."""
    return {
        "conventions": dict(CONVENTIONS),
        "presets": {
            name: {"upstream": p.upstream,
                   "knobs": {k.name: {"type": k.kind, "default": k.default, "help": k.help,
                                      **({"choices": list(k.choices)} if k.choices else {})}
                             for k in p.knobs.values()}}
            for name, p in PRESETS.items()
        },
        "spec": "NAME or NAME:knob=value,knob=value (e.g. qwen-vl-utils:fps=1,max_frames=64); "
                "without knobs the budget is upstream's frame count",
    }


def _run(args: argparse.Namespace) -> int:
    d = describe()
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    print("Frame sampler presets (use in [tool.posbias.probes.phase] samplers as " + d["spec"] + ")\n")
    for name, p in d["presets"].items():
        print(f"{name}\n  upstream: {p['upstream']}")
        if not p["knobs"]:
            print("  knobs: none (the budget is upstream's frame count)")
        for k, v in p["knobs"].items():
            dflt = "unset" if v["default"] is None else v["default"]
            choices = f" [{', '.join(v['choices'])}]" if "choices" in v else ""
            print(f"  {k} ({v['type']}{choices}, default {dflt}): {v['help']}")
        print()
    print("Conventions (no upstream; docs/design.md section 4):")
    for name, text in d["conventions"].items():
        print(f"  {name}: {text}")
    return 0


def register(sub: Any, register: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``posbias samplers`` to the CLI."""
    p = register(sub, "samplers", _run,
                 "list the frame sampler presets, their knobs and the upstream code each follows")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")
