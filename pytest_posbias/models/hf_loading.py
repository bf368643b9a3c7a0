"""Where and how the ``hf`` backend loads a checkpoint: the device (:func:`pick_device`), one device or
a shard over the node's GPUs (:func:`plan_placement`) and the attention kernel
(:func:`pick_attn_implementation`). docs/gpus.md explains the options.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError
from .registry import ResolvedModel

ATTN_CHOICES = ("auto", "sdpa", "flash_attention_2", "eager")
DEVICE_MAP_CHOICES = ("fit", "auto", "balanced", "balanced_low_0", "sequential", "none")
FIT_HEADROOM = 1.3  # weights x 1.3 must fit one device's memory, else shard


def pick_device(option: str, worker: str) -> str:
    """``auto``: cuda:(N mod device count) for xdist worker gwN, cuda:0 serially, cpu without CUDA."""
    import torch

    if option == "cpu":
        return "cpu"
    if option.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ModelLoadError(f"--posbias-device {option}: CUDA is not available on this machine")
        return "cuda:0" if option == "cuda" else option
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        idx = int(worker[2:]) % n if worker.startswith("gw") and worker[2:].isdigit() else 0
        return f"cuda:{idx}"
    return "cpu"


def pick_attn_implementation(option: str, device: str) -> str:
    """The attention kernel: ``auto`` → flash_attention_2 on CUDA with ``flash_attn`` installed, else sdpa."""
    if option not in ATTN_CHOICES:
        raise ModelLoadError(f"--posbias-attn-implementation must be one of {', '.join(ATTN_CHOICES)}; got {option!r}")
    has_fa2 = importlib.util.find_spec("flash_attn") is not None
    if option == "auto":
        return "flash_attention_2" if device.startswith("cuda") and has_fa2 else "sdpa"
    if option == "flash_attention_2" and not (device.startswith("cuda") and has_fa2):
        why = "the flash_attn package is not installed" if not has_fa2 else f"the device is {device}, not CUDA"
        raise ModelLoadError(f"--posbias-attn-implementation flash_attention_2: {why} (use sdpa or eager)")
    return option


def weight_bytes(resolved: ResolvedModel) -> int | None:
    """Bytes of the bf16 weights: the safetensors files of a local directory, else the registry's
    parameter count x 2; None when neither is known."""
    path = Path(resolved.target)
    if path.is_dir():
        files = list(path.glob("*.safetensors"))
        return sum(f.stat().st_size for f in files) if files else None
    if resolved.entry is not None and resolved.entry.params_b > 0:
        return int(resolved.entry.params_b * 1e9 * 2)
    return None


@dataclass(frozen=True)
class Placement:
    """Where the weights go: ``device_map`` for ``from_pretrained`` and the device inputs go to."""

    device: str
    device_map: Any  # None (load, then .to(device)), {"": device}, or a transformers strategy name
    sharded: bool
    reason: str


def plan_placement(resolved: ResolvedModel, *, device: str, option: str, worker: str) -> Placement:
    """One device or a shard over the node's GPUs (``--posbias-device-map``): ``fit`` loads on one device
    when the bf16 weights (:func:`weight_bytes`) × FIT_HEADROOM fit its memory (or are unknown), else
    shards with transformers' ``device_map="auto"``, as it does for a registry entry marked ``shard``;
    ``auto``/``balanced``/``balanced_low_0``/``sequential`` always shard with that strategy; ``none``
    never shards. ModelLoadError for an unknown option, sharding without CUDA, or a sharded model in
    an xdist worker."""
    if option not in DEVICE_MAP_CHOICES:
        raise ModelLoadError(f"--posbias-device-map must be one of {', '.join(DEVICE_MAP_CHOICES)}; got {option!r}")
    if option == "fit" and resolved.entry is not None and resolved.entry.shard:
        option, reason = "auto", f"the registry marks {resolved.entry.alias} for sharding"
    else:
        reason = f"--posbias-device-map {option}"
    if not device.startswith("cuda"):
        if option not in ("fit", "none"):
            raise ModelLoadError(f"--posbias-device-map {option}: sharding needs CUDA GPUs; the device is {device}")
        return Placement(device, None, False, "cpu")
    import torch

    if option == "fit":
        need = weight_bytes(resolved)
        total = int(torch.cuda.get_device_properties(int(device.split(":")[1])).total_memory)
        if need is None or need * FIT_HEADROOM <= total:
            return Placement(device, {"": device}, False,
                             f"fits one device ({_gib(need)} weights, {_gib(total)} on {device})")
        option = "auto"
        reason = f"{_gib(need)} of weights x {FIT_HEADROOM} do not fit {_gib(total)} on {device}"
    if option == "none":
        return Placement(device, {"": device}, False, reason)
    if worker.startswith("gw"):
        raise ModelLoadError(f"--posbias-model {resolved.spec}: sharded over every GPU ({reason}), so it cannot run in "
                             f"xdist worker {worker}; run without -n (one process drives the whole node)")
    return Placement("cuda:0", option, True, reason)


def _gib(n: int | None) -> str:
    return "unknown size" if n is None else f"{n / 2**30:.1f} GiB"


def load_model(resolved: ResolvedModel, placement: Placement, *, dtype: Any, attn: str) -> Any:
    """``AutoModelForImageTextToText.from_pretrained`` with the placement and attention kernel."""
    from transformers import AutoModelForImageTextToText

    kw: dict[str, Any] = {"dtype": dtype, "attn_implementation": attn}
    if placement.device_map is not None:
        kw["device_map"] = placement.device_map
    model = AutoModelForImageTextToText.from_pretrained(resolved.target, **kw)
    if placement.device_map is None:
        model = model.to(placement.device)
    return model.eval()
