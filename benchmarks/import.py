"""Import benchmark: 100,000 ActivityNet-style entries; prints a table.

The videos directory holds one (empty) file per entry, as a user's local copy would;
the importer indexes it once and never stats per entry.

Run: python benchmarks/import.py [--entries N]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from pytest_posbias.data.importers import run_import


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        videos = tmp / "videos"
        videos.mkdir()
        ann = {}
        for k in range(args.entries):
            yid = f"id{k:07d}"
            ann[f"v_{yid}"] = {"duration": 10.0 + (k % 110), "timestamps": [[0.0, 5.0], [5.0, 9.0]],
                               "sentences": [f"A person starts activity {k}.", "They keep going for a while.", "Then they stop."]}
            os.close(os.open(videos / (f"{yid}.mp4" if k % 2 else f"v_{yid}.mp4"), os.O_CREAT | os.O_WRONLY))
        (tmp / "train.json").write_text(json.dumps(ann))
        t0 = time.perf_counter()
        rep = run_import("activitynet", videos=str(videos), annotations=str(tmp / "train.json"), out=str(tmp / "m.jsonl"))
        dt = time.perf_counter() - t0
        print(f"{'measure':<40} {'value':>12}")
        print(f"{'entries':<40} {args.entries:>12d}")
        print(f"{'video lines written':<40} {rep.written['video']:>12d}")
        print(f"{'group lines written':<40} {rep.written['group']:>12d}")
        print(f"{'skipped (duration outside the buckets)':<40} {sum(rep.skipped.values()):>12d}")
        print(f"{'import time':<40} {dt:>10.2f} s")
        print(f"{'import time / 30 s limit':<40} {dt / 30:>12.3f}")


if __name__ == "__main__":
    main()
