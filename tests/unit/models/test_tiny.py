"""models.tiny: the tiny random-weight checkpoints load as real ones do: the family resolves from the folder,
the tokenizer keeps each special token whole, the chat templates write media as documented, and the weights
follow the seed."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("transformers")

from transformers import AutoConfig, AutoProcessor

from pytest_posbias.models.hf_inputs import ADAPTERS
from pytest_posbias.models.registry import resolve
from pytest_posbias.models.tiny import FAMILIES, build_tiny_checkpoint


def _weights_digest(folder) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(folder.glob("*.safetensors")))).hexdigest()


def test_an_unknown_family_is_refused_listing_the_families(tmp_path):
    """build_tiny_checkpoint of an unsupported family: ValueError naming every family and the one asked for."""
    with pytest.raises(ValueError, match=r"`family` must be one of qwen2_vl, .*glm4v; got 'gpt2'"):
        build_tiny_checkpoint("gpt2", tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("family", FAMILIES)
def test_each_checkpoint_resolves_to_its_family_through_the_model_path(tiny_checkpoints, family):
    """A tiny checkpoint folder is an hf --posbias-model of its own family, with a config, weights and a processor."""
    path = tiny_checkpoints[family]
    resolved = resolve(str(path))
    assert (resolved.backend, resolved.family) == ("hf", family)
    assert AutoConfig.from_pretrained(path).model_type == family
    assert list(path.glob("*.safetensors"))


@pytest.mark.parametrize("family", FAMILIES)
def test_media_placeholders_and_padding_are_single_known_tokens(tiny_checkpoints, family):
    """The family's video and image placeholders each encode to one known token; padding has its own token."""
    proc = AutoProcessor.from_pretrained(tiny_checkpoints[family])
    tok = proc.tokenizer
    adapter = ADAPTERS[family]
    for placeholder in (getattr(proc, "video_token", None) or adapter.default_video_token,
                        getattr(proc, "image_token", None) or adapter.default_image_token):
        ids = tok.encode(placeholder, add_special_tokens=False)
        assert len(ids) == 1 and ids[0] != tok.unk_token_id, placeholder
    assert tok.pad_token == "<|endoftext|>" and tok.pad_token_id != tok.unk_token_id


def _render(proc, content) -> str:
    return proc.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                    tokenize=False)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_qwen_template_writes_parts_in_order_and_the_assistant_turn(tiny_checkpoints, family):
    """The Qwen-style template keeps text, video and image in message order and opens the assistant's turn."""
    proc = AutoProcessor.from_pretrained(tiny_checkpoints[family])
    out = _render(proc, [{"type": "text", "text": "A"}, {"type": "video"}, {"type": "image"},
                         {"type": "text", "text": "B"}])
    assert out == ("<|im_start|>user\nA<|vision_start|><|video_pad|><|vision_end|>"
                   "<|vision_start|><|image_pad|><|vision_end|>B<|im_end|>\n<|im_start|>assistant\n")


def test_llava_onevision_template_puts_media_before_the_text_as_the_real_one_does(tiny_checkpoints):
    """The LLaVA-OneVision template renders images, then videos, then text, whatever the message order."""
    proc = AutoProcessor.from_pretrained(tiny_checkpoints["llava_onevision"])
    out = _render(proc, [{"type": "text", "text": "first"}, {"type": "video"}, {"type": "image"}])
    assert out.index("<image>") < out.index("<video>") < out.index("first")


def test_the_seed_decides_the_weights(tmp_path):
    """The same family and seed write the same weights; another seed writes others."""
    a = build_tiny_checkpoint("glm4v", tmp_path / "a", seed=3)
    b = build_tiny_checkpoint("glm4v", tmp_path / "b", seed=3)
    c = build_tiny_checkpoint("glm4v", tmp_path / "c", seed=4)
    assert _weights_digest(a) == _weights_digest(b) != _weights_digest(c)


def test_a_tiny_checkpoint_is_tiny(tiny_checkpoints):
    """Every family's weights stay under 4 MB, so building all of them for a test session costs seconds."""
    for family, path in tiny_checkpoints.items():
        size = sum(p.stat().st_size for p in path.glob("*.safetensors"))
        assert size < 4_000_000, (family, size)
