"""Loading a checkpoint for the hf backend (models.hf_loading): the attention implementation and device
placement chosen on a CPU."""

from __future__ import annotations

import pytest

from pytest_posbias.models.registry import resolve


def test_attention_and_placement_choices_on_cpu(tiny_checkpoints):
    from pytest_posbias.errors import ModelLoadError
    from pytest_posbias.models.hf_loading import (
        pick_attn_implementation,
        plan_placement,
        weight_bytes,
    )

    assert pick_attn_implementation("auto", "cpu") == "sdpa"
    assert pick_attn_implementation("eager", "cpu") == "eager"
    with pytest.raises(ModelLoadError, match="flash_attention_2"):
        pick_attn_implementation("flash_attention_2", "cpu")
    with pytest.raises(ModelLoadError, match="must be one of"):
        pick_attn_implementation("xformers", "cpu")
    r = resolve(str(tiny_checkpoints["qwen2_vl"]))
    # a local directory's weights are its safetensors bytes
    assert weight_bytes(r) == sum(f.stat().st_size for f in tiny_checkpoints["qwen2_vl"].glob("*.safetensors"))
    assert plan_placement(r, device="cpu", option="fit", worker="main").device_map is None
    with pytest.raises(ModelLoadError, match="sharding needs CUDA"):
        plan_placement(r, device="cpu", option="auto", worker="main")
    # the 72B registry entry: 2 bytes per parameter, more than one 141 GB GPU holds with headroom
    big = resolve("qwen25vl72b", locate=False)
    assert weight_bytes(big) == int(73.4e9 * 2) and weight_bytes(big) * 1.3 > 141e9
