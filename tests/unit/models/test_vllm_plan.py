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


def test_a_hub_id_revision_is_the_cached_snapshot_commit_so_a_moved_main_is_a_new_cache_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hub id's revision is the commit of the snapshot its branch names in the local cache, not the name ``main``."""
    from pytest_posbias.models.registry import resolve

    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = "Qwen/Qwen3-VL-8B-Instruct"
    folder = cache / "models--Qwen--Qwen3-VL-8B-Instruct"
    COMMIT_A, COMMIT_B = "a" * 40, "b" * 40

    def snapshot(commit: str) -> None:  # the Hub cache's layout: snapshots/<commit>/, refs/main naming it
        (folder / "snapshots" / commit).mkdir(parents=True)
        (folder / "snapshots" / commit / "config.json").write_text('{"model_type": "qwen3_vl"}')
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_text(commit)

    r = resolve(f"vllm:{repo}")
    assert vp.checkpoint_revision(r, []) == "main"  # not in this machine's cache: the name vLLM was given
    snapshot(COMMIT_A)
    assert vp.checkpoint_revision(r, []) == COMMIT_A
    snapshot(COMMIT_B)  # main moved
    assert vp.checkpoint_revision(r, []) == COMMIT_B
    assert vp.checkpoint_revision(r, ["--revision", COMMIT_A]) == COMMIT_A
    assert vp.checkpoint_revision(r, ["--revision=v9"]) == "v9"


@pytest.mark.parametrize("given", ["--api-key sk-SECRET-9", "--api-key=sk-SECRET-9", "--hf-token hf_SECRET-9"])
def test_an_api_key_in_the_vllm_args_is_refused_without_quoting_it(given: str) -> None:
    """--api-key in --posbias-vllm-args would reach the server log, the identity and the run log: refused at start."""
    with pytest.raises(ModelLoadError, match=given.split()[0].split("=")[0]) as info:
        vp.extra_args(RunOptions(vllm_args=given))
    assert "SECRET" not in str(info.value)
