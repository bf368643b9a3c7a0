"""Tiny random-weight checkpoints of every supported transformers family, built offline.

Each builder writes a real checkpoint directory (config, weights, a byte-level BPE tokenizer
trained locally with the family's special tokens, a chat template like the family's own, and
the family's processor shrunk so a frame costs a handful of tokens) that loads through the same
``--model <dir>`` path as a real checkpoint. The LLaVA-OneVision template, like the real one,
renders all media before the text. ``posbias models tiny FAMILY DIR`` builds one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "internvl", "llava_onevision", "glm4v")

_CORPUS = [
    "A red circle moves from left to right.", "A blue square stays still in the middle.",
    "The green triangle turns yellow.", "A white flash fills the screen.", "The screen goes black for a moment.",
    "Video 0: 8 uniformly sampled frames", "Video 1: 4 uniformly sampled frames",
    "Summarize each video in 4 sentences.", "Answer with the option letter only.",
    "A. B. C. D. E. What colour is the circle? In which direction does it move?",
    "--- Text separator: end of Video 0; next is Video 1. ---", "[video0] summary [video1] summary",
    "Please describe this video in detail.", "<0.5 seconds> <1.2 seconds> Frame1: Frame2:",
]


def _template(video: str, image: str, *, head: str = "<|im_start|>{{ m['role'] }}\n", end: str = "<|im_end|>\n",
              reply: str = "<|im_start|>assistant\n", prefix: str = "") -> str:
    """A chat template writing each message's parts in order, a video as ``video``, an image as ``image``."""
    return (prefix + "{% for m in messages %}" + head + "{% if m['content'] is string %}{{ m['content'] }}"
            "{% else %}{% for c in m['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}"
            "{% elif c['type'] == 'video' %}" + video + "{% elif c['type'] == 'image' %}" + image
            + "{% endif %}{% endfor %}{% endif %}" + end + "{% endfor %}{% if add_generation_prompt %}" + reply
            + "{% endif %}")


_CHATML_QWEN = _template("<|vision_start|><|video_pad|><|vision_end|>", "<|vision_start|><|image_pad|><|vision_end|>")
_CHATML_INTERNVL = _template("<video>\n", "<IMG_CONTEXT>\n")
# Like llava-hf's template: images first, then videos, then the text of the message.
_LLAVA_OV_MEDIA_FIRST = (
    "{% for m in messages %}<|im_start|>{{ m['role'] + ' ' }}{% if m['content'] is string %}{{ m['content'] }}{% else "
    "%}{% for c in m['content'] | selectattr('type', 'equalto', 'image') %}<image>\n{% endfor %}"
    "{% for c in m['content'] | selectattr('type', 'equalto', 'video') %}<video>\n{% endfor %}"
    "{% for c in m['content'] | selectattr('type', 'equalto', 'text') %}{{ c['text'] }}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_GLM4V = _template("<|begin_of_video|><|video|><|end_of_video|>", "<|begin_of_image|><|image|><|end_of_image|>",
                   head="<|{{ m['role'] }}|>\n", end="", reply="<|assistant|>\n", prefix="[gMASK]<sop>")


def _tokenizer(specials: list[str], extra_named: dict[str, str] | None = None, *,
               eos: str = "<|im_end|>") -> tuple[Any, dict[str, int]]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    letters = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    trainer = trainers.BpeTrainer(vocab_size=480, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_CORPUS * 10 + letters, trainer)
    named = {"extra_special_tokens": extra_named} if extra_named else {}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token="<|endoftext|>", **named)
    fast.padding_side = "left"
    return fast, {n: int(fast.convert_tokens_to_ids(n)) for n in specials}


_QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>", "<think>", "</think>"]


def _text_cfg(tok: Any, ids: dict[str, int], **extra: Any) -> dict[str, Any]:
    return dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                vocab_size=len(tok), max_position_embeddings=4096, eos_token_id=ids[tok.eos_token],
                pad_token_id=ids[tok.pad_token], bos_token_id=None) | extra


def _build_qwen(family: str) -> tuple[Any, Any]:
    import transformers as tf

    tok, ids = _tokenizer(list(_QWEN_SPECIALS))
    common: dict[str, Any] = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                                  vision_start_token_id=ids["<|vision_start|>"],
                                  vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=True)
    vision: dict[str, Any]
    if family in ("qwen2_vl", "qwen2_5_vl"):
        px: dict[str, Any] = dict(patch_size=14, merge_size=2, temporal_patch_size=2, min_pixels=28 * 28,
                                  max_pixels=56 * 56)
        ip, vp = tf.Qwen2VLImageProcessor(**px), tf.Qwen2VLVideoProcessor(**px)
        text = _text_cfg(tok, ids, rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1],
                                                    "rope_theta": 10000.0})
        if family == "qwen2_vl":
            vision = dict(depth=2, embed_dim=32, hidden_size=32, num_heads=4, patch_size=14, spatial_merge_size=2,
                          temporal_patch_size=2, mlp_ratio=2)
            config_cls, proc_cls = tf.Qwen2VLConfig, tf.Qwen2VLProcessor
        else:
            vision = dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=32, patch_size=14,
                          spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1])
            config_cls, proc_cls = tf.Qwen2_5_VLConfig, tf.Qwen2_5_VLProcessor
    else:
        ip = tf.Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2, min_pixels=32 * 32,
                                      max_pixels=64 * 64)
        vp = tf.Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2,
                                      size={"shortest_edge": 32 * 32, "longest_edge": 64 * 64 * 4})
        rope = {"rope_type": "default", "mrope_section": [2, 1, 1], "mrope_interleaved": True, "rope_theta": 10000.0}
        vision = dict(depth=2, hidden_size=32, intermediate_size=32, num_heads=4, out_hidden_size=32, patch_size=16,
                      spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                      deepstack_visual_indexes=[0, 1])
        moe = dict(moe_intermediate_size=16, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1)
        text = _text_cfg(tok, ids, head_dim=8, rope_parameters=rope, **(moe if family == "qwen3_vl_moe" else {}))
        config_cls = tf.Qwen3VLConfig if family == "qwen3_vl" else tf.Qwen3VLMoeConfig
        proc_cls = tf.Qwen3VLProcessor
    config = config_cls(text_config=text, vision_config=vision, **common)
    return config, proc_cls(image_processor=ip, tokenizer=tok, video_processor=vp, chat_template=_CHATML_QWEN)


def _build_internvl() -> tuple[Any, Any]:
    import transformers as tf

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"]
    named = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
             "video_token": "<video>"}
    tok, ids = _tokenizer(specials, named)
    ip = tf.GotOcr2ImageProcessor(size={"height": 28, "width": 28}, crop_to_patches=False)
    vp = tf.InternVLVideoProcessor(size={"height": 28, "width": 28})
    vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48, image_size=[28, 28],
                  patch_size=[14, 14])
    text = _text_cfg(tok, ids, model_type="qwen2", rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    config = tf.InternVLConfig(vision_config=vision, text_config=text, image_token_id=ids["<IMG_CONTEXT>"],
                               image_seq_length=1, downsample_ratio=0.5, tie_word_embeddings=True)
    return config, tf.InternVLProcessor(image_processor=ip, tokenizer=tok, video_processor=vp, image_seq_length=1,
                                        chat_template=_CHATML_INTERNVL)


def _build_llava_onevision() -> tuple[Any, Any]:
    import transformers as tf

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>"]
    tok, ids = _tokenizer(specials, {"image_token": "<image>", "video_token": "<video>"})
    ip = tf.LlavaOnevisionImageProcessor(size={"height": 28, "width": 28}, image_grid_pinpoints=[[28, 28]], do_pad=True)
    vp = tf.LlavaOnevisionVideoProcessor(size={"height": 28, "width": 28})
    vision = dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4, image_size=28, patch_size=14)
    text = _text_cfg(tok, ids, model_type="qwen2", rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    config = tf.LlavaOnevisionConfig(vision_config=vision, text_config=text, image_token_index=ids["<image>"],
                                     video_token_index=ids["<video>"], image_grid_pinpoints=[[28, 28]],
                                     vision_feature_layer=-1, tie_word_embeddings=True)
    return config, tf.LlavaOnevisionProcessor(image_processor=ip, tokenizer=tok, video_processor=vp,
                                              num_image_tokens=(28 // 14) ** 2, vision_feature_select_strategy="full",
                                              chat_template=_LLAVA_OV_MEDIA_FIRST)


def _build_glm4v() -> tuple[Any, Any]:
    import transformers as tf

    specials = ["<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<|system|>", "<|begin_of_image|>",
                "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|image|>", "<|video|>", "<think>",
                "</think>"]
    tok, ids = _tokenizer(specials, eos="<|endoftext|>")
    ip = tf.Glm4vImageProcessor(patch_size=14, merge_size=2, temporal_patch_size=2,
                                size={"shortest_edge": 28 * 28, "longest_edge": 56 * 56})
    vp = tf.Glm4vVideoProcessor(patch_size=14, merge_size=2, temporal_patch_size=2,
                                size={"shortest_edge": 28 * 28, "longest_edge": 56 * 56 * 4})
    vision = dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=64, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2, image_size=28)
    text = _text_cfg(tok, ids, hidden_size=64, intermediate_size=64,
                     rope_parameters={"rope_type": "default", "mrope_section": [2, 1, 1], "rope_theta": 10000.0,
                                      "partial_rotary_factor": 0.5})
    config = tf.Glm4vConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image|>"],
                            video_token_id=ids["<|video|>"],
                            image_start_token_id=ids["<|begin_of_image|>"], image_end_token_id=ids["<|end_of_image|>"],
                            video_start_token_id=ids["<|begin_of_video|>"], video_end_token_id=ids["<|end_of_video|>"],
                            tie_word_embeddings=True)
    return config, tf.Glm4vProcessor(image_processor=ip, tokenizer=tok, video_processor=vp, chat_template=_GLM4V)


_BUILDERS: dict[str, Callable[[], tuple[Any, Any]]] = {
    **{f: functools.partial(_build_qwen, f) for f in ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")},
    "internvl": _build_internvl,
    "llava_onevision": _build_llava_onevision,
    "glm4v": _build_glm4v,
}


def build_tiny_checkpoint(family: str, out_dir: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny random-weight checkpoint of ``family`` to ``out_dir`` (offline)."""
    import torch
    from transformers import AutoModelForImageTextToText

    if family not in _BUILDERS:
        raise ValueError(f"`family` must be one of {', '.join(FAMILIES)}; got {family!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config, proc = _BUILDERS[family]()
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(config)
    model.generation_config.pad_token_id = config.get_text_config().pad_token_id
    model.save_pretrained(out)
    proc.save_pretrained(out)
    return out
