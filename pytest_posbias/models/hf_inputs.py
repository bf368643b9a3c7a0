"""Input building of the ``hf`` backend: the chat template with parts interleaved in the probe's
order, videos as frame arrays with their metadata, and token accounting from the processor.

The user turn is rendered by the model's chat template with a single text item, which is then
replaced by the interleaved body (text and the family's media placeholders in the probe's
order): some templates move all media before the text (LLaVA-OneVision's), which would erase
the position effects measured here. Videos go with their metadata (fps, source frame indices,
duration) and ``do_sample_frames=False``, so the model sees exactly the probe's frames.
:class:`InputBuilder` needs the processor only, so ``posbias plan`` counts tokens as a run would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import Request
from ..errors import BackendError, ModelLoadError
from ..video.compose import ImagePart, TextPart, VideoPart
from ..video.frames import FrameStore
from .registry import ResolvedModel

_SENTINEL = "\u0000POSBIAS_BODY\u0000"
_THINK = re.compile(r"<think>.*?</think>\s*", re.S)


def strip_think(text: str) -> str:
    """A reasoning model's answer without its reasoning: complete ``<think>…</think>`` blocks
    removed, all before a closing tag whose opening one the chat template wrote in the prompt, and
    an unclosed block (cut by the token limit) with all after it, since the answer never came; the
    reasoning names options it rejects, so scoring it would score a wrong answer."""
    return _THINK.sub("", text).rpartition("</think>")[2].partition("<think>")[0].strip()


@dataclass(frozen=True)
class FamilyAdapter:
    """How one family writes a video or an image into the user turn of its template."""

    video: str  # format string with {video}
    image: str  # format string with {image}
    default_video_token: str
    default_image_token: str
    separator_as_video: bool = False  # the family cannot mix images and videos in one input


_QWEN = FamilyAdapter("<|vision_start|>{video}<|vision_end|>", "<|vision_start|>{image}<|vision_end|>",
                      "<|video_pad|>", "<|image_pad|>")
ADAPTERS: dict[str, FamilyAdapter] = {
    **dict.fromkeys(("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"), _QWEN),
    "internvl": FamilyAdapter("{video}\n", "{image}\n", "<video>", "<IMG_CONTEXT>"),
    **dict.fromkeys(("llava_onevision", "llava_next_video"),
                    FamilyAdapter("{video}\n", "{image}\n", "<video>", "<image>")),
    # GLM-4.1V encodes video frames with image tokens, so an image beside a video confuses its
    # placeholder masks: its black separator goes in as a two-frame black video instead.
    "glm4v": FamilyAdapter("<|begin_of_video|>{video}<|end_of_video|>", "<|begin_of_image|>{image}<|end_of_image|>",
                           "<|video|>", "<|image|>", separator_as_video=True),
}


# how generated tokens become the answer text: in the backend identity (cache key), since the cache
# stores that text; only where it can differ from one plain decode (InputBuilder.think_tags), so the
# answers cached for a model without think tags are still served
ANSWER_TEXT = "think-tags-kept/v1"


class InputBuilder:
    """The processor side of the ``hf`` backend: prompts, processed batches, token counts."""

    def __init__(self, resolved: ResolvedModel, store: FrameStore, processor: Any, *, device: str = "cpu",
                 dtype: Any = None) -> None:
        if resolved.family not in ADAPTERS:
            raise ModelLoadError(f"--posbias-model {resolved.spec}: no input adapter for family {resolved.family!r}")
        self.resolved = resolved
        self.store = store
        self.family = resolved.family
        self.adapter = ADAPTERS[self.family]
        self.processor = processor
        self.device = device
        self.dtype = dtype
        self.tokenizer = processor.tokenizer
        self.tokenizer.padding_side = "left"
        self.video_token = getattr(processor, "video_token", None) or self.adapter.default_video_token
        self.image_token = getattr(processor, "image_token", None) or self.adapter.default_image_token

    def render(self, request: Request, *,
               prefill: str = "") -> tuple[str, list[np.ndarray], list[Any], list[np.ndarray]]:
        """Prompt text (the model's chat template, parts interleaved in order), videos, their
        metadata, and images (black separators)."""
        from transformers.video_utils import VideoMetadata

        body: list[str] = []
        videos: list[np.ndarray] = []
        metas: list[Any] = []
        images: list[np.ndarray] = []
        for p in request.parts:
            if isinstance(p, TextPart):
                body.append(p.text + "\n")
            elif isinstance(p, VideoPart):
                frames = self.store.materialize(p.frames)
                videos.append(frames)
                spec = p.frames
                fps, total = (spec.fps if spec.fps > 0 else 1.0), max(spec.frame_count, len(spec))
                metas.append(VideoMetadata(total_num_frames=total, fps=fps, frames_indices=spec.indices,
                                           duration=total / fps, width=frames.shape[2], height=frames.shape[1]))
                body.append(self.adapter.video.format(video=self.video_token))
            elif isinstance(p, ImagePart) and self.adapter.separator_as_video:
                videos.append(np.zeros((2, p.size, p.size, 3), dtype=np.uint8))
                metas.append(VideoMetadata(total_num_frames=2, fps=1.0, frames_indices=[0, 1], duration=2.0,
                                           width=p.size, height=p.size))
                body.append(self.adapter.video.format(video=self.video_token))
            elif isinstance(p, ImagePart):
                images.append(np.zeros((p.size, p.size, 3), dtype=np.uint8))
                body.append(self.adapter.image.format(image=self.image_token))
        text = "".join(body).rstrip("\n")
        return self._template().replace(_SENTINEL, text) + prefill, videos, metas, images

    def _template(self) -> str:
        """The chat template's rendering of one user message holding ``_SENTINEL``, generation prompt included."""
        messages = [{"role": "user", "content": [{"type": "text", "text": _SENTINEL}]}]
        from jinja2 import TemplateError  # a template refuses a conversation with raise_exception()

        try:
            rendered = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        except (ValueError, TypeError, KeyError, TemplateError) as exc:
            raise BackendError(f"chat template of {self.resolved.spec} failed: {exc}") from None
        if isinstance(rendered, list):
            rendered = rendered[0]
        if _SENTINEL not in rendered:
            raise BackendError(f"chat template of {self.resolved.spec} does not render user text verbatim")
        return str(rendered)

    def think_tags(self) -> tuple[dict[int, str], bool]:
        """The think tags the tokenizer has as tokens (token id -> tag) and whether the chat template opens a
        think block in the prompt: with neither, :meth:`answer_text` is one plain decode of the tokens."""
        tags = {i: t for t in ("<think>", "</think>") if isinstance(i := self.tokenizer.convert_tokens_to_ids(t), int)
                and i != self.tokenizer.unk_token_id}
        return tags, "<think>" in self._template().rpartition(_SENTINEL)[2].rpartition("</think>")[2]

    def answer_text(self, body: Sequence[int]) -> str:
        """The answer in generated tokens ``body`` (:func:`strip_think`): decoded without special tokens but
        with the think tags, which some tokenizers mark special (skipping them would leave the reasoning
        as the answer), and with the block the chat template opens in the prompt, whose reasoning the
        output continues (cut by the token limit before its closing tag, it is no answer)."""
        tags, opened = self.think_tags()
        parts = ["<think>" if opened else ""]
        seg: list[int] = []
        for t in body:
            if t in tags:
                parts += [self.tokenizer.decode(seg, skip_special_tokens=True), tags[t]]
                seg = []
            else:
                seg.append(t)
        parts.append(self.tokenizer.decode(seg, skip_special_tokens=True))
        return strip_think("".join(parts))

    def _inputs(self, batch: Sequence[Request], *, prefill: str = "") -> Any:
        texts, videos, metas, images = [], [], [], []
        for r in batch:
            t, v, m, i = self.render(r, prefill=prefill)
            texts.append(t)
            videos += v
            metas += m
            images += i
        kwargs: dict[str, Any] = {"text": texts, "padding": True, "return_tensors": "pt"}
        if videos:
            kwargs.update(videos=videos, video_metadata=metas, do_sample_frames=False)
        if images:
            kwargs["images"] = images
        try:
            inputs = self.processor(**kwargs)
        except (ValueError, TypeError, RuntimeError, IndexError) as exc:
            raise BackendError(f"processor of {self.resolved.spec} rejected the input: {exc}") from None
        inputs.pop("video_metadata", None)
        return inputs.to(self.device, dtype=self.dtype) if self.dtype is not None else inputs

    def token_counts(self, inputs: Any) -> list[tuple[int, int]]:
        """(prompt tokens, visual tokens) of each row of a processed batch: the non-padding
        tokens (attention mask) and, of those, the image/video placeholder tokens."""
        import torch

        ids = inputs["input_ids"]
        mask = inputs.get("attention_mask")
        mask = torch.ones_like(ids) if mask is None else mask
        media = torch.zeros_like(ids, dtype=torch.bool)
        for t in (self.video_token, self.image_token):  # the placeholders the processor expands per frame/patch
            m = self.tokenizer.convert_tokens_to_ids(t)
            if isinstance(m, int) and m >= 0 and m != self.tokenizer.unk_token_id:
                media |= ids == m
        prompt = mask.sum(dim=1).tolist()
        visual = (media & mask.bool()).sum(dim=1).tolist()
        return [(int(p), int(v)) for p, v in zip(prompt, visual, strict=True)]
