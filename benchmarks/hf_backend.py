"""``hf`` backend throughput: batched against one-at-a-time, greedy and sampled. Prints a table.

For each tiny random-weight checkpoint (every family by default; on a GPU runner pass real
checkpoint directories with --model), N requests of one video (4 frames) and prompts of
different lengths, decoded up to --new-tokens tokens (the tokens actually produced are
counted), run:

* one at a time (batch size 1) and in batches of --batch (8 by default);
* greedy (temperature 0) and sampled (T = 0.9, top-p 0.95: the positional probe's setting,
  Gumbel-max seeded per request and step).

Columns: output tokens per second (all requests' output tokens over the wall time), the
speed-up of batched over one-at-a-time, whether every sampled request gave the same tokens
batched and alone, and on CUDA the peak GPU memory.

Run: python benchmarks/hf_backend.py [--requests 16] [--batch 8] [--new-tokens 32] [--family qwen2_vl ...]
     python benchmarks/hf_backend.py --model=/ckpt/Qwen3-VL-8B-Instruct --device cuda:0 --requests 64 --new-tokens 256
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias.engine import Decoding, Request
from pytest_posbias.models.registry import resolve
from pytest_posbias.models.tiny import FAMILIES, build_tiny_checkpoint
from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore

PROMPTS = ["Describe.", "Please describe this video in detail.", "Summarize the video in 4 sentences.",
           "What happens in this video? Describe every object, its colour and where it moves."]


def _run(backend, reqs, batch: int) -> tuple[float, int, list]:
    backend.max_batch_size = batch
    t0 = time.perf_counter()
    gens = []
    for i in range(0, len(reqs), batch):
        gens += backend.generate(reqs[i : i + batch])
    dt = time.perf_counter() - t0
    return dt, sum(g.n_tokens for g in gens), gens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--family", nargs="*", default=list(FAMILIES))
    ap.add_argument("--model", action="append", default=None, help="checkpoint directories instead of tiny ones")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--size", type=int, default=56, help="frame side in pixels")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from pytest_posbias.models.hf import HFBackend

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        clip = SY.render_clip(SY.make_scene("bench", "leisure", "short", seed=3), tmp / "bench.mp4")
        store = FrameStore()
        spec = FrameSpec.from_video(clip, [0, 20, 40, 60], size=args.size)
        models = args.model or [str(build_tiny_checkpoint(f, tmp / f)) for f in args.family]
        print(f"{args.requests} requests x {args.new_tokens} new tokens max, 1 video of 4 frames at {args.size} px, "
              f"batch {args.batch} vs 1; torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
        head = (f"{'model':<18} {'decoding':<8} {'tok/s one':>10} {'tok/s batch':>12} {'speed-up':>9} "
                f"{'tokens':>7} {'same tokens':>11} {'peak GPU MiB':>13}")
        print(head)
        print("-" * len(head))
        for path in models:
            b = HFBackend(resolve(path), store, device=args.device, batch_size=args.batch)
            name = Path(path).name
            for label, dec in (("greedy", Decoding(args.new_tokens)),
                               ("sampled", Decoding(args.new_tokens, temperature=0.9, top_p=0.95))):
                reqs = [Request(path, (VideoPart(spec), TextPart(PROMPTS[k % len(PROMPTS)] + f" ({k})")), dec, seed=100 + k)
                        for k in range(args.requests)]
                _run(b, reqs[: args.batch], args.batch)  # warm-up
                if b.device.startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats()
                t1, n1, g1 = _run(b, reqs, 1)
                tb, nb, gb = _run(b, reqs, args.batch)
                peak = f"{torch.cuda.max_memory_allocated() / 2**20:,.0f}" if b.device.startswith("cuda") else "-"
                same = all(x.text == y.text and x.n_tokens == y.n_tokens for x, y in zip(g1, gb, strict=True))
                print(f"{name:<18} {label:<8} {n1 / t1:>10.1f} {nb / tb:>12.1f} {(nb / tb) / (n1 / t1):>8.2f}x "
                      f"{nb:>7} {'yes' if same else 'NO':>11} {peak:>13}")
            b.close()


if __name__ == "__main__":
    main()
