"""Engine benchmark: prints a table.

* requests per second through the engine with the sim backend, and the harness overhead
  per request (wall time minus the backend's own time, in ms);
* a re-run of the same requests (all cache hits) against the first run;
* the tiny random-weight transformers model's generate time per request, so the
  harness overhead can be compared with model time.

Run: python benchmarks/engine.py [--requests N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias.engine import Decoding, Engine, GenerationCache, Request
from pytest_posbias.models.sim import SimBackend
from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore
from pytest_posbias.video.sampling import frame_indices


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        clips = [SY.render_clip(SY.make_scene(f"b{k}", "leisure", "short", seed=k), tmp / f"b{k}.mp4") for k in range(4)]
        store = FrameStore()
        specs = []
        for c in clips:
            info = store.info(c)
            for phase in range(args.requests // len(clips)):
                idx = frame_indices(info.frame_count, 16, convention="left", phase=(phase % 97) / 97)
                specs.append(FrameSpec.from_video(c, idx, info=info))
        reqs = [Request("sim:unbiased", (TextPart("Please describe this video in detail."), VideoPart(s)), Decoding(500))
                for s in specs]
        for s in specs:  # decode once up front: measure the engine, not the decoder
            store.materialize(s)
        sim = SimBackend("unbiased", store)
        eng = Engine(GenerationCache(tmp / "c.sqlite"), backend_for=lambda m: sim)
        t0 = time.perf_counter()
        gens = eng.run(reqs)
        first = time.perf_counter() - t0
        backend_s = eng.stats.model_seconds  # made calls only (duplicates are sent once)
        del gens
        eng2 = Engine(GenerationCache(tmp / "c.sqlite"), backend_for=lambda m: sim)
        t0 = time.perf_counter()
        eng2.run(reqs)
        rerun = time.perf_counter() - t0

        print(f"{len(reqs)} requests ({eng.stats.made} distinct), sim backend (frames pre-decoded)")
        print(f"{'measure':<44} {'value':>12}")
        print(f"{'first run, wall':<44} {first:>10.2f} s")
        print(f"{'first run, requests per second':<44} {len(reqs) / first:>12.1f}")
        print(f"{'backend (sim) time per request':<44} {1000 * backend_s / eng.stats.made:>10.2f} ms")
        overhead = (first - backend_s) / eng.stats.made
        print(f"{'harness overhead per request':<44} {1000 * overhead:>10.2f} ms")
        print(f"{'re-run (all cache hits), wall':<44} {rerun:>10.2f} s")
        print(f"{'re-run / first run':<44} {rerun / first:>12.3f}")
        print(f"{'re-run backend calls':<44} {eng2.stats.made:>12d}")

        try:
            from pytest_posbias.models.hf import HFBackend
            from pytest_posbias.models.registry import resolve
            from pytest_posbias.models.tiny import build_tiny_checkpoint
        except ImportError:
            print("(transformers not installed: tiny-model timing skipped)")
            return
        ck = build_tiny_checkpoint("qwen2_vl", tmp / "tiny")
        hf = HFBackend(resolve(str(ck)), store, device="cpu", batch_size=4)
        small = [Request(str(ck), (TextPart("Please describe this video in detail."),
                                   VideoPart(FrameSpec.from_video(clips[0], [0, 30, 60, 90], size=56))), Decoding(32))]
        hf.generate(small)  # warm-up
        n = 8
        t0 = time.perf_counter()
        for _ in range(n):
            hf.generate(small)
        per = (time.perf_counter() - t0) / n
        print(f"{'tiny qwen2_vl generate (32 tokens, CPU)':<44} {1000 * per:>10.1f} ms")
        print(f"{'harness overhead / tiny-model time':<44} {overhead / per:>12.3f}")


if __name__ == "__main__":
    main()
