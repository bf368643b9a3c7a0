"""``--model vllm:SPEC``: serve the model with vLLM for the run and test it through the ``openai:`` pool
(docs/vllm.md).

Placement, flags and command come from :mod:`.vllm_plan`; the servers listen on free loopback ports
and are replicas of one :class:`.openai_backend.OpenAIBackend`. Each runs under a guard process
(:data:`GUARD`), so it never outlives pytest; healthy means ``GET /health`` answers 200 and
``GET /v1/models`` lists the served name. The identity (:meth:`ManagedVllm.identity`) holds the vLLM
version, engine arguments, dtype and checkpoint revision, so ``vllm:X`` and ``hf:X`` never share
cache entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..errors import ModelLoadError
from ..run_options import RunOptions
from .hf_loading import weight_bytes
from .openai_backend import OpenAIBackend, api_settings
from .openai_encode import jpeg_b64, video_data_url
from .registry import ResolvedModel, model_label
from .vllm_plan import (
    MAX_LOGPROBS,
    SECRET_NAME,
    ServerPlan,
    arg_value,
    checkpoint_revision,
    engine_args,
    extra_args,
    plan_servers,
    server_args,
    visible_gpus,
    vllm_command,
)

DEFAULT_TIMEOUT_S = 900.0  # a cold vLLM start (weights, CUDA graphs, the vision encoder's profile run)
PROGRESS_EVERY_S = 15.0
STOP_GRACE_S = 20.0  # SIGTERM to the group, then SIGKILL after this
LOG_TAIL_LINES = 40

# The guard: ``python -c GUARD PARENT_PID GRACE_S CMD...``. It leads its own process group (the
# caller starts it with start_new_session), runs CMD in that group, and ends the group when its
# parent dies (PR_SET_PDEATHSIG delivers SIGUSR1; the parent pid is also read every 0.2 s), when
# it gets SIGTERM, or when CMD exits: SIGTERM to the group, SIGKILL after GRACE_S.
GUARD = r"""
import ctypes, os, signal, subprocess, sys, time
parent, grace, cmd = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append("SIGTERM"))
signal.signal(signal.SIGINT, signal.SIG_IGN)
# PR_SET_PDEATHSIG also fires when the parent thread that started us ends: check the parent pid
signal.signal(signal.SIGUSR1, lambda *a: stop.append("parent") if os.getppid() != parent else None)
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGUSR1), 0, 0, 0)
except (OSError, AttributeError):
    pass
child = subprocess.Popen(cmd) if os.getppid() == parent else None
while child is not None and not stop and child.poll() is None:
    if os.getppid() != parent:
        stop.append("parent")
        break
    time.sleep(0.2)
code = None if child is None else child.poll()
print(f"=== posbias guard: {'server exited with ' + str(code) if code is not None else 'stopping (' + ','.join(stop or ['parent']) + ')'}", flush=True)
os.killpg(0, signal.SIGTERM)
end = time.monotonic() + grace
while child is not None and child.poll() is None and time.monotonic() < end:
    time.sleep(0.1)
time.sleep(min(1.0, max(0.0, end - time.monotonic())))
os.killpg(0, signal.SIGKILL)
"""  # noqa: E501 (a script run by its own interpreter: kept as it is)


def masked_command(cmd: Sequence[str]) -> str:
    """``cmd`` as one shell line with the values of secret-named (``SECRET_NAME``) assignments
    (``-e HF_TOKEN=...``) and flags (``--hf-token V``, ``--hf-token=V``) as ``***`` (the line goes to
    the server's log, whose last lines a start-up error shows)."""
    out: list[str] = []
    for i, a in enumerate(cmd):
        name, eq, _value = a.partition("=")
        if eq and SECRET_NAME.search(name) and re.fullmatch(r"-{0,2}[A-Za-z_][\w-]*", name):
            a = f"{name}=***"
        elif i and cmd[i - 1].startswith("--") and "=" not in cmd[i - 1] and SECRET_NAME.search(cmd[i - 1]):
            a = "***"
        out.append(a)
    return shlex.join(out)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        if r.status != 200:
            raise OSError(f"HTTP {r.status}")
        return json.loads(r.read() or b"null")


@dataclass
class _Server:
    port: int
    gpus: str | None
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@dataclass
class ManagedVllm:
    """The vLLM servers of one ``vllm:`` model for one run: :meth:`start`, :attr:`urls`, :meth:`stop`."""

    resolved: ResolvedModel
    command: list[str]
    args: list[str]  # --posbias-vllm-args
    plan: ServerPlan
    log_dir: Path
    seed: int = 0
    served: str = ""
    servers: list[_Server] = field(default_factory=list)
    version: str = "unknown"

    @property
    def gpus(self) -> int:
        """GPUs the servers hold: servers x tensor-parallel size (1 for a server without GPUs)."""
        return len(self.plan.gpus) * self.plan.tensor_parallel

    @property
    def urls(self) -> list[str]:
        """The ``.../v1`` base URL of every server."""
        return [s.url for s in self.servers]

    def identity(self) -> dict[str, Any]:
        """What can change an answer besides the request: see the module doc."""
        one = engine_args(server_args(self.resolved.target, served=self.served, port=0, seed=self.seed,
                                      tensor_parallel=self.plan.tensor_parallel, extra=self.args))
        return {"backend": "vllm", "vllm_version": self.version, "engine_args": one,
                "dtype": arg_value(self.args, "--dtype") or "auto",
                "revision": checkpoint_revision(self.resolved, self.args)}

    def start(self, *, timeout: float = DEFAULT_TIMEOUT_S, progress: Callable[[str], None] | None = None) -> None:
        """Start every server and wait until all serve the model; on failure stop them all and raise
        ModelLoadError with the failing server's last log lines."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        base_env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                    "VLLM_HOST_IP": "127.0.0.1", "VLLM_LOOPBACK_IP": "127.0.0.1"}
        base_env.pop("VIRTUAL_ENV", None)  # another environment's interpreter finds its own packages
        base_env.pop("VLLM_API_KEY", None)  # a key for other servers: vLLM would refuse the run's health check
        try:
            for i, gpus in enumerate(self.plan.gpus):
                port = free_port()
                cmd = [*self.command, *server_args(self.resolved.target, served=self.served, port=port, seed=self.seed,
                                                   tensor_parallel=self.plan.tensor_parallel, extra=self.args)]
                srv = _Server(port, gpus, self.log_dir / f"vllm-{i}.log")
                env = {**base_env, **({"CUDA_VISIBLE_DEVICES": gpus} if gpus is not None else {})}
                srv.log = srv.log_path.open("ab")
                srv.log.write(f"=== {masked_command(cmd)}\n".encode())
                srv.log.flush()
                srv.proc = subprocess.Popen(
                    [sys.executable, "-c", GUARD, str(os.getpid()), str(STOP_GRACE_S), *cmd], stdout=srv.log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
                self.servers.append(srv)
            t0 = time.monotonic()
            self._wait_healthy(timeout=timeout, progress=progress)
            for srv in self.servers:
                self._warm_up(srv, timeout=max(60.0, timeout - (time.monotonic() - t0)))
        except BaseException:
            self.stop()
            raise
        with contextlib.suppress(OSError, ValueError, urllib.error.URLError):
            self.version = str(_get_json(self.urls[0].removesuffix("/v1") + "/version").get("version", "unknown"))

    def _wait_healthy(self, *, timeout: float, progress: Callable[[str], None] | None) -> None:
        t0 = time.monotonic()
        next_line = t0 + PROGRESS_EVERY_S
        waiting = list(self.servers)
        while waiting:
            for srv in list(waiting):
                assert srv.proc is not None
                if srv.proc.poll() is not None:
                    raise self._failed(srv, f" exited before it was healthy (log {srv.log_path})")
                if self._healthy(srv):
                    waiting.remove(srv)
            now = time.monotonic()
            if waiting and now - t0 > timeout:
                raise self._failed(waiting[0], f" was not healthy within {timeout:g} s (--posbias-vllm-timeout; "
                                               f"log {waiting[0].log_path})")
            if waiting and progress is not None and now >= next_line:
                progress(f"posbias: waiting for {len(waiting)} of {len(self.servers)} vLLM server(s) of "
                         f"{self.resolved.spec}: {now - t0:.0f} s of {timeout:g} s (log {waiting[0].log_path})")
                next_line = now + PROGRESS_EVERY_S
            if waiting:
                time.sleep(0.5)

    def _warm_up(self, srv: _Server, *, timeout: float) -> None:
        """One chat request with a 2-frame video and the top-20 logprobs, waited for: a fresh server's
        first multimodal request loads the processor and kernels, longer than the backend's start-up
        check gives an endpoint per attempt. ModelLoadError (with the log's last lines) when it fails."""
        frame = jpeg_b64(np.full((56, 56, 3), 128, dtype=np.uint8))
        body = {"model": self.served, "max_tokens": 1, "temperature": 0.0, "logprobs": True,
                "top_logprobs": MAX_LOGPROBS, "messages": [{"role": "user", "content": [
                    {"type": "video_url", "video_url": {"url": video_data_url([frame, frame])}},
                    {"type": "text", "text": "Reply with the single letter A."}]}]}
        req = urllib.request.Request(srv.url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                answer = json.loads(r.read())
            if not answer.get("choices"):
                raise ValueError(f"no choices in {answer}")
        except (OSError, ValueError, urllib.error.URLError) as exc:
            raise self._failed(srv, f"'s warm-up request (a 2-frame video, top-{MAX_LOGPROBS} logprobs) failed: "
                                    f"{exc} (log {srv.log_path})") from None

    def _healthy(self, srv: _Server) -> bool:
        try:
            with urllib.request.urlopen(srv.url.removesuffix("/v1") + "/health", timeout=5) as r:
                if r.status != 200:
                    return False
            return any(m.get("id") == self.served for m in _get_json(srv.url + "/models").get("data", []))
        except (OSError, urllib.error.URLError, ValueError, AttributeError):
            return False

    def _failed(self, srv: _Server, what: str) -> ModelLoadError:
        """The start-up error of ``srv`` (``what`` follows its port and GPUs), with its log's last lines."""
        pin = f", CUDA_VISIBLE_DEVICES={srv.gpus}" if srv.gpus is not None else ""
        tail = ""
        with contextlib.suppress(OSError):
            tail = "\n".join(srv.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:])
        return ModelLoadError(f"--posbias-model {self.resolved.spec}: the vLLM server on port {srv.port}{pin}{what}; "
                              f"its last lines:\n{tail}")

    def stop(self) -> None:
        """SIGTERM every server's process group, SIGKILL what is left after the grace period; waits
        until each group is gone."""
        for srv in self.servers:
            if srv.proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(srv.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S + 5.0
        for srv in self.servers:
            if srv.proc is None:
                continue
            with contextlib.suppress(subprocess.TimeoutExpired):
                srv.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            while _group_alive(srv.proc.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _group_alive(srv.proc.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(srv.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                srv.proc.wait(timeout=5.0)
            if srv.log is not None:
                srv.log.close()
                srv.log = None
            srv.proc = None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def served_name(resolved: ResolvedModel) -> str:
    """The served model name: the spec after ``vllm:``, a directory by its last path component."""
    return re.sub(r"[^A-Za-z0-9._/-]", "-", model_label(resolved.spec[len("vllm:"):]))


def start_managed(resolved: ResolvedModel, options: RunOptions, *, log_dir: Path,
                  progress: Callable[[str], None] | None = None) -> ManagedVllm:
    """The servers of a ``vllm:`` model from the run's options, started (``--posbias-vllm-timeout``
    seconds at most); ModelLoadError when the options are wrong or a server does not start."""
    args = extra_args(options)
    gpus, memory = visible_gpus()
    plan = plan_servers(weights=weight_bytes(resolved), gpus=gpus, gpu_memory=memory)
    m = ManagedVllm(resolved, vllm_command(options), args, plan, log_dir, seed=options.seed,
                    served=served_name(resolved))
    if progress is not None:
        progress(f"posbias: starting vLLM for {resolved.spec}: {m.plan.reason}; logs in {log_dir}")
    m.start(timeout=float(options.vllm_timeout or DEFAULT_TIMEOUT_S), progress=progress)
    return m


class ManagedVllmBackend(OpenAIBackend):
    """The ``openai:`` backend on a run's vLLM servers; its identity adds the server's (:meth:`ManagedVllm.identity`).

    ``owned``: the servers this backend started (stopped by :meth:`close`); None when another
    process (the xdist controller) started them."""

    def __init__(self, resolved: ResolvedModel, store: Any, *, urls: Sequence[str], server_identity: Mapping[str, Any],
                 owned: ManagedVllm | None, options: RunOptions,
                 notify: Callable[[str], None] | None = None) -> None:
        self.resolved = resolved
        self.server_identity = dict(server_identity)
        self.owned = owned
        self.gpus = owned.gpus if owned is not None else len(urls)  # plan --measure: per-GPU tok/s
        kw = api_settings(options)
        if kw.get("video_form", "auto") == "auto":
            kw["video_form"] = "video"  # vLLM takes a video_url frame list
        super().__init__(served_name(resolved), store, api_base=list(urls), notify=notify,
                         thinks=bool(resolved.prefill), **kw)

    @property
    def label(self) -> str:
        """``vllm:SPEC at URL``."""
        return f"{self.resolved.spec} at {self.url}"

    def identity(self) -> Mapping[str, Any]:
        """The openai backend's identity with backend ``vllm`` and the server's version, engine arguments,
        dtype and checkpoint revision."""
        path = Path(self.resolved.target)
        # as on hf: a directory by its name (its content is in the revision), so a moved checkpoint keeps its cache
        return {**super().identity(), **self.server_identity,
                "model_id": path.name if path.is_dir() else self.resolved.target}

    def close(self) -> None:
        """Close the clients; stop the servers when this backend started them."""
        try:
            super().close()
        finally:
            if self.owned is not None:
                self.owned.stop()
                self.owned = None


def make_backend(resolved: ResolvedModel, store: Any, options: RunOptions, *, log_dir: Path,
                 notify: Callable[[str], None] | None = None) -> ManagedVllmBackend:
    """The backend of a ``vllm:`` model: on the servers the xdist controller started (``options.vllm_servers``,
    from ``workerinput``), else on servers started now and stopped when the backend closes."""
    handed = options.vllm_servers.get(resolved.spec)
    if handed:
        return ManagedVllmBackend(resolved, store, urls=handed["urls"], server_identity=handed["identity"], owned=None,
                                  options=options, notify=notify)
    m = start_managed(resolved, options, log_dir=log_dir, progress=notify)
    try:
        return ManagedVllmBackend(resolved, store, urls=m.urls, server_identity=m.identity(), owned=m,
                                  options=options, notify=notify)
    except BaseException:
        m.stop()
        raise
