"""openai backend benchmark: the project's request path against the bare openai client.

The same prebuilt requests (N multiple-choice questions over a video of F frames) go

* through the project: ``Engine.run`` with a fresh cache and a fresh ``OpenAIBackend``
  (frame encoding, the streaming pool, retries, cache writes and run-log lines included);
* through the bare client: ``client.chat.completions.create`` on a thread pool, with the
  chat messages built before the clock starts;

at concurrency 1, 8 and 32, and prints requests/s, tokens/s (prompt + output, from the
server's ``usage``) and the ratio bare/project of the elapsed times.

Run: ``python benchmarks/openai_backend.py --api-base URL --model NAME`` against any
OpenAI-compatible server (a vLLM server: ``vllm serve ...``), or with no arguments against
tests/fault_server.py started as a subprocess on 127.0.0.1 (``--delay`` seconds per answer
emulate a model's latency).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias.engine import Decoding, Engine, GenerationCache, Request, RunLog
from pytest_posbias.models.openai_backend import OpenAIBackend, api_key
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore

ROOT = Path(__file__).resolve().parent.parent


def build_requests(n: int, frames: int, size: int, model: str) -> list[Request]:
    """``n`` questions over 4 noise videos of ``frames`` frames at ``size`` px (one-token answers)."""
    videos = [VideoPart(FrameSpec.synthetic("noise", frames, size=size, seed=k), video_id=f"v{k}") for k in range(4)]
    return [Request(f"openai:{model}", (videos[i % 4], TextPart(f"Question {i}: which colour is the disc?\n"
                                                                  "A. red\nB. blue\nC. green\nD. cyan\nAnswer with the letter.")),
                    Decoding(1)) for i in range(n)]


def project(reqs: list[Request], url: str, model: str, concurrency: int, form: str) -> tuple[float, int]:
    """Elapsed seconds and tokens of ``reqs`` through Engine.run (fresh cache, fresh backend)."""
    b = OpenAIBackend(model, FrameStore(), api_base=url, concurrency=concurrency, video_form=form, retries=2, timeout=120)
    with tempfile.TemporaryDirectory() as d:
        cache = GenerationCache(Path(d) / "c.sqlite")
        log = RunLog(Path(d) / "run.jsonl", {"benchmark": "openai_backend"})
        eng = Engine(cache, backend_for=lambda m: b, runlog=log)
        t0 = time.perf_counter()
        gens = eng.run(reqs)
        dt = time.perf_counter() - t0
        log.close()
        cache.close()
    b.close()
    failed = sum(not g.ok for g in gens)
    if failed:
        raise SystemExit(f"project: {failed} requests failed: {next(g.error for g in gens if not g.ok)}")
    return dt, sum((g.prompt_tokens or 0) + g.n_tokens for g in gens)


def bare(reqs: list[Request], url: str, model: str, concurrency: int, form: str) -> tuple[float, int]:
    """Elapsed seconds and tokens of the same requests through the bare client, messages prebuilt."""
    import openai

    enc = OpenAIBackend(model, FrameStore(), api_base=url, video_form=form)
    kwargs = [enc._kwargs(r, max_tokens=r.decoding.max_new_tokens, logprobs=False) for r in reqs]
    enc.close()
    client = openai.OpenAI(api_key=api_key(), base_url=url, timeout=120, max_retries=2)

    def call(kw: dict[str, Any]) -> int:
        resp = client.chat.completions.create(**kw)
        u = resp.usage
        return (u.prompt_tokens + u.completion_tokens) if u is not None else 0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        tokens = sum(pool.map(call, kwargs))
    dt = time.perf_counter() - t0
    client.close()
    return dt, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--api-base", default=None, help="OpenAI-compatible base URL (default: start tests/fault_server.py)")
    ap.add_argument("--model", default="x")
    ap.add_argument("--requests", type=int, default=192)
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--form", choices=("video", "images"), default="video")
    ap.add_argument("--delay", type=float, default=0.05, help="fake server only: seconds per answer")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = ap.parse_args()
    proc = None
    url = args.api_base
    if url is None:
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fault_server.py"), "--delay", str(args.delay),
                                 "--model", args.model], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
    try:
        reqs = build_requests(args.requests, args.frames, args.size, args.model)
        print(f"{args.requests} requests, {args.frames} frames at {args.size} px as {args.form}, server {url}"
              + (f" (fake, {args.delay * 1000:.0f} ms per answer)" if proc else ""))
        print(f"{'conc':>5} {'project req/s':>14} {'bare req/s':>11} {'project tok/s':>14} {'bare tok/s':>11} "
              f"{'project/bare time':>18}")
        bare(reqs[:4], url, args.model, 4, args.form)  # warm-up (connections, server caches)
        for c in args.concurrency:
            tb, kb = bare(reqs, url, args.model, c, args.form)
            tp, kp = project(reqs, url, args.model, c, args.form)
            n = len(reqs)
            print(f"{c:>5} {n / tp:>14.1f} {n / tb:>11.1f} {kp / tp:>14.0f} {kb / tb:>11.0f} {tp / tb:>17.2f}x")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
