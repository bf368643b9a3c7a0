"""The plan of a run's own vLLM servers (models.vllm_plan): how many servers the GPUs fit, the visible
GPUs, and each server's command and arguments."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_posbias.errors import ModelLoadError
from pytest_posbias.models import vllm_plan as vp
from pytest_posbias.run_options import RunOptions


def test_plan_servers_follows_the_fit_rule() -> None:
    gib = 2**30
    fits = vp.plan_servers(weights=16 * gib, gpus=["0", "1", "2", "3"], gpu_memory=80 * gib)
    assert fits.gpus == ("0", "1", "2", "3") and fits.tensor_parallel == 1
    # 147 GB of weights x 1.3 do not fit an 80 GiB GPU: one server over the four
    big = vp.plan_servers(weights=147 * 10**9, gpus=["0", "1", "2", "3"], gpu_memory=80 * gib)
    assert big.gpus == ("0,1,2,3",) and big.tensor_parallel == 4 and "tensor-parallel" in big.reason
    # just at the boundary: need * 1.3 == memory fits, one byte more does not
    assert vp.plan_servers(weights=100, gpus=["0", "1"], gpu_memory=130).tensor_parallel == 1
    assert vp.plan_servers(weights=101, gpus=["0", "1"], gpu_memory=130).tensor_parallel == 2
    cpu = vp.plan_servers(weights=None, gpus=[], gpu_memory=None)
    assert cpu.gpus == (None,) and cpu.tensor_parallel == 1


def test_visible_gpus_reads_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)  # no nvidia-smi
    assert vp.visible_gpus({"CUDA_VISIBLE_DEVICES": "2, 5"}) == (["2", "5"], None)
    assert vp.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ([], None)
    assert vp.visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == ([], None)
    assert vp.visible_gpus({}) == ([], None)
    assert vp.visible_gpus({"CUDA_VISIBLE_DEVICES": "0", "POSBIAS_VLLM_GPU_MEMORY_GIB": "80"}) == (["0"], 80 * 2**30)
    with pytest.raises(ModelLoadError, match="POSBIAS_VLLM_GPU_MEMORY_GIB"):
        vp.visible_gpus({"POSBIAS_VLLM_GPU_MEMORY_GIB": "lots"})


def test_command_and_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert vp.vllm_command(RunOptions(vllm_command="docker run --gpus all img vllm serve")) == \
        ["docker", "run", "--gpus", "all", "img", "vllm", "serve"]
    py = tmp_path / "python"
    py.write_text("#!/bin/sh\n")
    py.chmod(0o755)
    assert vp.vllm_command(RunOptions(), {"POSBIAS_VLLM_PYTHON": str(py)}) == [str(py), "-m", "vllm.entrypoints.openai.api_server"]
    with pytest.raises(ModelLoadError, match="POSBIAS_VLLM_PYTHON=/nowhere"):
        vp.vllm_command(RunOptions(), {"POSBIAS_VLLM_PYTHON": "/nowhere"})
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ModelLoadError, match="no `vllm` command"):
        vp.vllm_command(RunOptions(), {})
    assert vp.extra_args(RunOptions(vllm_args="--dtype bfloat16 --max-model-len '32768'")) == \
        ["--dtype", "bfloat16", "--max-model-len", "32768"]
    with pytest.raises(ModelLoadError, match="--port is set by the run"):
        vp.extra_args(RunOptions(vllm_args="--port=9"))
    with pytest.raises(ModelLoadError, match="--posbias-vllm-args"):
        vp.extra_args(RunOptions(vllm_args="--chat-template 'unclosed"))
    args = vp.server_args("M", served="m", port=1234, seed=7, tensor_parallel=4, extra=["--dtype", "half"])
    assert args[args.index("--max-logprobs") + 1] == "20" and args[args.index("--seed") + 1] == "7"
    assert json.loads(args[args.index("--limit-mm-per-prompt") + 1]) == {"image": 64, "video": 8}
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and args[-2:] == ["--dtype", "half"]
    assert "1234" not in vp.engine_args(args) and "--host" not in vp.engine_args(args)
