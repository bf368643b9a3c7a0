"""Regenerate tests/data/upstream/videostf_temporal.json.gz by RUNNING VideoSTF's stressors.

VideoSTF (yuxincao22/VideoSTF_benchmark) is not on PyPI. This script executes the upstream
``stressors/temporal.py`` from a checkout (nothing is copied into pytest-posbias), applies
each temporal transformation many times to the "video" ``np.arange(T)`` (so an output frame
is the index of the frame it shows), and writes how often each output order occurred, with
the repository, commit and this command.

    python scripts/upstream_stressor_data.py --videostf PATH/TO/VideoSTF_benchmark \
        [--draws 20000] [--out tests/data/upstream]

PATH is a work tree of the repository; pass --videostf-commit when it is not a git work tree.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import runpy
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

# upstream class name -> this project's stressor name
CLASSES = {
    "AddOneFrame": "add1",
    "AddTwoFrames": "add2",
    "DeleteOneFrame": "delete1",
    "DeleteTwoFrames": "delete2",
    "ReplaceOneFrame": "replace1",
    "ReplaceTwoFrames": "replace2",
    "ReverseVideo": "reverse",
    "RandomShuffle": "shuffle",
}
TS = (5, 6)
SEED = 20240601


def commit_of(root: Path, given: str | None) -> str:
    """The checkout's commit (``--videostf-commit`` when it is not a git work tree)."""
    if given:
        return given
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def run(root: Path, draws: int) -> dict[str, dict[str, dict[str, int]]]:
    """{stressor: {T: {"i,j,...": count}}} from the upstream classes, seeded."""
    module = runpy.run_path(str(root / "stressors" / "temporal.py"))
    out: dict[str, dict[str, dict[str, int]]] = {}
    for cls, name in CLASSES.items():
        out[name] = {}
        for T in TS:
            random.seed(SEED + T)
            obj = module[cls]() if cls in ("DeleteOneFrame", "ReverseVideo") else module[cls](times=draws)
            counts: Counter[str] = Counter()
            for video, _setting in obj.apply(np.arange(T)):
                counts[",".join(str(int(v)) for v in video)] += 1
            out[name][str(T)] = dict(sorted(counts.items()))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the upstream stressors and write the counts with their provenance."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videostf", type=Path, required=True, help="a checkout of yuxincao22/VideoSTF_benchmark")
    ap.add_argument("--videostf-commit", default=None)
    ap.add_argument("--draws", type=int, default=20000)
    ap.add_argument("--out", type=Path, default=Path("tests/data/upstream"))
    args = ap.parse_args(argv)
    meta: dict[str, Any] = {
        "repository": "yuxincao22/VideoSTF_benchmark",
        "file": "stressors/temporal.py",
        "commit": commit_of(args.videostf, args.videostf_commit),
        "command": "python scripts/upstream_stressor_data.py --videostf PATH" + (
            f" --draws {args.draws}" if args.draws != 20000 else ""),
        "video": "np.arange(T): an output value is the index of the frame shown",
        "draws": args.draws, "seed": SEED, "T": list(TS),
    }
    data = {"meta": meta, "counts": run(args.videostf, args.draws)}
    args.out.mkdir(parents=True, exist_ok=True)
    dest = args.out / "videostf_temporal.json.gz"
    with gzip.open(dest, "wt") as f:
        json.dump(data, f, sort_keys=True)
    print(f"wrote {dest} (commit {meta['commit']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
