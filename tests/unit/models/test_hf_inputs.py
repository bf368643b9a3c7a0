"""models.hf_inputs: the hf backend's input side with a tiny checkpoint's processor alone (no weights): the
prompt with parts in the probe's order whatever the chat template does, the videos and their metadata, the
black separator per family, token counts, and the errors that name the model."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from transformers import AutoProcessor

from pytest_posbias.engine import Decoding, Request
from pytest_posbias.errors import BackendError, ModelLoadError
from pytest_posbias.models.hf_inputs import ADAPTERS, InputBuilder
from pytest_posbias.models.registry import ResolvedModel, resolve
from pytest_posbias.models.tiny import FAMILIES
from pytest_posbias.video.compose import ImagePart, TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec


def _builder(tiny_checkpoints, store, family: str) -> InputBuilder:
    path = tiny_checkpoints[family]
    return InputBuilder(resolve(str(path)), store, AutoProcessor.from_pretrained(path))


def _request(*parts) -> Request:
    return Request("tiny", tuple(parts), Decoding(max_new_tokens=4))


def _black(n: int, size: int = 56) -> VideoPart:
    return VideoPart(FrameSpec.synthetic("black", n, size=size), video_id="v")


def test_every_tiny_family_has_an_input_adapter():
    """Each family the tiny checkpoints cover (the supported ones) knows how to write its media placeholders."""
    assert set(FAMILIES) <= set(ADAPTERS)


def test_a_family_without_an_adapter_is_refused_naming_the_model(store):
    """An unknown family: ModelLoadError naming the --posbias-model spec and the family, before any input is built."""
    resolved = ResolvedModel(spec="/ckpt/odd", backend="hf", target="/ckpt/odd", family="mamba_vl")
    with pytest.raises(ModelLoadError, match=r"--posbias-model /ckpt/odd: no input adapter for family 'mamba_vl'"):
        InputBuilder(resolved, store, processor=None)


@pytest.mark.parametrize("family", ["qwen2_vl", "llava_onevision", "internvl"])
def test_parts_keep_the_probes_order_even_where_the_template_puts_media_first(tiny_checkpoints, store, family):
    """Label, video, separator, label, video, prompt: the rendered prompt keeps that order for every family,
    LLaVA-OneVision's media-first template included, and the prefill comes last."""
    b = _builder(tiny_checkpoints, store, family)
    a = ADAPTERS[family]
    req = _request(TextPart("Video 0:"), _black(2), ImagePart(size=28), TextPart("Video 1:"), _black(2),
                   TextPart("Summarise."))
    text, videos, metas, images = b.render(req, prefill="Answer:")
    video, image = a.video.format(video=b.video_token), a.image.format(image=b.image_token)
    body = f"Video 0:\n{video}{image}Video 1:\n{video}Summarise."
    assert body in text and text.endswith("Answer:")
    assert text.count(b.video_token) == 2 and text.count(b.image_token) == (1 if b.image_token != b.video_token else 3)
    assert len(videos) == 2 and len(metas) == 2 and len(images) == 1 and images[0].shape == (28, 28, 3)


def test_glm4v_gets_its_separator_as_a_two_frame_black_video(tiny_checkpoints, store):
    """GLM-4.1V cannot mix an image with videos: the separator is a black two-frame video in the middle slot."""
    b = _builder(tiny_checkpoints, store, "glm4v")
    text, videos, metas, images = b.render(_request(_black(2), ImagePart(size=28), _black(2)))
    assert images == [] and len(videos) == 3
    assert videos[1].shape == (2, 28, 28, 3) and videos[1].max() == 0
    assert (metas[1].total_num_frames, metas[1].fps, metas[1].frames_indices) == (2, 1.0, [0, 1])
    assert text.count("<|begin_of_video|>") == 3 and "<|begin_of_image|>" not in text


def test_video_metadata_says_which_frames_of_how_long_a_clip(tiny_checkpoints, store):
    """The metadata of a video part: its source indices, fps, frame count and duration = frames / fps."""
    b = _builder(tiny_checkpoints, store, "qwen2_vl")
    base = FrameSpec.synthetic("black", 4, size=56)
    spec = FrameSpec(base.sources, ((0, 3), (0, 9), (0, 15), (0, 21)), 56, "stretch", (), 6.0, 24)
    _, videos, [meta], _ = b.render(_request(VideoPart(spec)))
    assert meta.frames_indices == [3, 9, 15, 21] and meta.fps == 6.0
    assert meta.total_num_frames == 24 and meta.duration == pytest.approx(4.0)
    assert (meta.width, meta.height) == (56, 56) and videos[0].shape == (4, 56, 56, 3)


def test_a_template_that_drops_the_user_text_is_an_error_naming_the_model(tiny_checkpoints, store):
    """A chat template that does not write the user's text verbatim could not carry the body: BackendError."""
    b = _builder(tiny_checkpoints, store, "qwen2_vl")
    b.processor.chat_template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n[redacted]<|im_end|>{% endfor %}"
    with pytest.raises(BackendError, match=r"chat template of .*qwen2_vl does not render user text verbatim"):
        b.render(_request(TextPart("hello")))


def test_a_template_that_raises_is_an_error_naming_the_model(tiny_checkpoints, store):
    """A template that raises (jinja's raise_exception): BackendError naming the model and the template's words."""
    b = _builder(tiny_checkpoints, store, "qwen2_vl")
    b.processor.chat_template = "{{ raise_exception('only one user turn is supported') }}"
    with pytest.raises(BackendError, match=r"chat template of .*qwen2_vl failed: .*only one user turn is supported"):
        b.render(_request(TextPart("hello")))


def test_token_counts_match_the_patch_arithmetic_and_ignore_padding(tiny_checkpoints, store):
    """qwen2_vl (14-px patches merged 2x2, two frames per temporal patch): 4 frames at 56 px are 2·2² = 8 video
    tokens; 2 frames 4; the shorter row's left padding is not counted, the prompt is its attention mask's sum."""
    b = _builder(tiny_checkpoints, store, "qwen2_vl")
    long = _request(TextPart("Please describe this video in detail."), _black(4))
    short = _request(TextPart("Describe."), _black(2))
    inputs = b._inputs([long, short])
    counts = b.token_counts(inputs)
    assert [v for _, v in counts] == [8, 4]
    assert [p for p, _ in counts] == inputs["attention_mask"].sum(dim=1).tolist()
    assert counts[0][0] > counts[1][0] and inputs["attention_mask"][1, 0] == 0  # padded on the left
    alone = b.token_counts(b._inputs([short]))
    assert alone == [counts[1]]


def test_a_processor_that_rejects_the_input_is_an_error_naming_the_model(tiny_checkpoints, store):
    """A video placeholder with no video (the processor refuses the mismatch): BackendError, not a crash."""
    b = _builder(tiny_checkpoints, store, "qwen2_vl")
    req = _request(TextPart(f"{b.video_token} sneaked in"), _black(2))
    with pytest.raises(BackendError, match=r"processor of .*qwen2_vl rejected the input"):
        b._inputs([req])


def test_strip_think_removes_reasoning_and_an_unclosed_block_leaves_no_answer():
    """Complete think blocks go; a block cut by the token limit is reasoning without an answer: nothing is left."""
    from pytest_posbias.models.hf_inputs import strip_think

    assert strip_think("<think>A is wrong</think>\n\nB") == "B"
    assert strip_think("<think>\n\n</think>\n\nThe video shows a red circle.") == "The video shows a red circle."
    assert strip_think("<think>Option A looks") == ""
    assert strip_think("  C ") == "C"


def test_strip_think_drops_reasoning_whose_opening_tag_the_chat_template_wrote():
    """A template that opens the think block in the prompt leaves only its closing tag in the answer: what precedes it goes."""
    from pytest_posbias.models.hf_inputs import strip_think

    assert strip_think("Option A looks wrong, C maybe.\n</think>\n\nB") == "B"
