"""The transformers backend on tiny random-weight checkpoints of every supported family.

Each checkpoint is built offline, saved with save_pretrained, and loaded back through the
same ``--model <dir>`` path a real checkpoint takes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("torch")


pytest.importorskip("transformers")

from pytest_posbias.engine import Decoding, Engine, GenerationCache, Request
from pytest_posbias.models.hf import HFBackend
from pytest_posbias.models.registry import resolve
from pytest_posbias.models.tiny import FAMILIES
from pytest_posbias.run_options import RunOptions
from pytest_posbias.scoring import usable
from pytest_posbias.video.compose import TextPart, VideoPart, compose
from pytest_posbias.video.frames import FrameSpec


@pytest.fixture(scope="module")
def clip_specs(synthetic_clips) -> list[FrameSpec]:
    return [FrameSpec.from_video(p, [0, 20, 40, 60], size=56) for p in synthetic_clips[:2]]


@pytest.fixture(scope="module", params=FAMILIES)
def backend(request, tiny_checkpoints, store) -> HFBackend:
    path = tiny_checkpoints[request.param]
    resolved = resolve(str(path))
    assert resolved.backend == "hf" and resolved.family == request.param
    b = HFBackend(resolved, store, device="cpu", batch_size=4)
    yield b
    b.close()


def _two_video_request(backend, specs, prompt="Summarize each video.", want="text", letters=()):
    parts = compose([VideoPart(specs[0], video_id="a"), VideoPart(specs[1], video_id="b")], prompt=prompt)
    return Request(backend.resolved.spec, tuple(parts), Decoding(max_new_tokens=6), want=want, letters=letters)


def test_loads_by_path_and_generates_for_two_interleaved_videos(backend, clip_specs):
    req = _two_video_request(backend, clip_specs)
    [gen] = backend.generate([req])
    assert gen.finish_reason in ("stop", "length") and gen.error is None
    assert 0 <= gen.n_tokens <= 6
    ident = backend.identity()
    assert ident["backend"] == "hf" and ident["dtype"] == "float32" and len(ident["revision"]) == 16


def test_order_of_parts_survives_into_the_token_sequence(backend, clip_specs):
    """Label 0 < video 0's tokens < separator < label 1 < video 1's tokens, whatever the template does."""
    req = _two_video_request(backend, clip_specs, prompt="Describe them.")
    text, videos, _, images = backend.render(req)
    assert text.index("Video 0:") < text.index("Video 1:")
    if backend.adapter.separator_as_video:
        assert len(videos) == 3 and len(images) == 0 and videos[1].max() == 0  # the black separator as a video
    else:
        assert len(videos) == 2 and len(images) == 1
    inputs = backend._inputs([req])
    ids = inputs["input_ids"][0].tolist()
    decoded = backend.tokenizer.decode(ids, skip_special_tokens=False)
    vid = backend.tokenizer.convert_tokens_to_ids(backend.video_token)
    img = backend.tokenizer.convert_tokens_to_ids(backend.image_token)
    p_prompt = decoded.index("Describe them.")
    p_l0 = decoded.index("Video 0:")
    p_l1 = decoded.index("Video 1:")
    assert p_prompt < p_l0 < p_l1
    # the media tokens of the first video sit between the two labels, the second's after label 1
    between = decoded[p_l0:p_l1]
    after = decoded[p_l1:]
    vtok = backend.tokenizer.convert_ids_to_tokens(vid)
    itok = backend.tokenizer.convert_ids_to_tokens(img)
    media_first = between.count(vtok) + between.count(itok)
    assert media_first > 0, f"no media tokens between the labels: {between[:200]!r}"
    assert after.count(vtok) + after.count(itok) > 0
    # nothing visual before the first label: a media-first template (LLaVA-OneVision's) did not win
    before = decoded[:p_l0]
    assert before.count(vtok) == 0 and before.count(itok) == 0
    # and the token ids agree with the string: positions of media ids split around the label tokens
    media_pos = [i for i, t in enumerate(ids) if t in (vid, img)]
    assert media_pos and media_pos == sorted(media_pos)


def test_scores_option_letters_and_batched_equals_unbatched(backend, clip_specs):
    letters = ("A", "B", "C", "D", "E")
    prompt = "What colour is the circle?\nA. red\nB. green\nC. blue\nD. yellow\nE. purple\nAnswer with the option letter only."
    reqs = [
        _two_video_request(backend, clip_specs, prompt=prompt, want="letters", letters=letters),
        _two_video_request(backend, clip_specs[::-1], prompt=prompt, want="letters", letters=letters),
        _two_video_request(backend, clip_specs, prompt="Summarize.", want="letters", letters=letters),
    ]
    batched = backend.score_options(reqs, letters)
    single = [backend.score_options([r], letters)[0] for r in reqs]
    for b, s in zip(batched, single, strict=True):
        assert set(b) == set(letters)
        assert all(v <= 0 and math.isfinite(v) for v in b.values())
        for letter in letters:
            assert b[letter] == pytest.approx(s[letter], abs=1e-4)
    # greedy generation: batched equals unbatched
    gens = [_two_video_request(backend, clip_specs, prompt=p) for p in ("Summarize.", "Describe the videos.", "Tell me.")]
    together = backend.generate(gens)
    alone = [backend.generate([g])[0] for g in gens]
    assert [g.text for g in together] == [g.text for g in alone]
    assert [g.n_tokens for g in together] == [g.n_tokens for g in alone]


def test_generate_with_letters_in_one_pass(backend, clip_specs):
    req = _two_video_request(backend, clip_specs, prompt="Pick.\nA. x\nB. y", want="both", letters=("A", "B"))
    [gen] = backend.generate([req])
    assert gen.letter_logprobs is not None and set(gen.letter_logprobs) == {"A", "B"}


def test_engine_caches_hf_generations(tmp_path, backend, clip_specs):
    cache = GenerationCache(tmp_path / "g.sqlite")
    engine = Engine(cache, backend_for=lambda spec: backend)
    reqs = [_two_video_request(backend, clip_specs, prompt=p) for p in ("one", "two")]
    first = engine.run(reqs)
    assert engine.stats.made == 2
    again = engine.run(reqs)
    assert engine.stats.made == 2 and engine.stats.rereads == 2 and engine.stats.cache_hits == 0  # asked again in this run
    assert [g.text for g in first] == [g.text for g in again]


def test_video_metadata_carries_the_source_indices(tiny_checkpoints, store, synthetic_clips):
    b = HFBackend(resolve(str(tiny_checkpoints["qwen3_vl"])), store, device="cpu")
    spec = FrameSpec.from_video(synthetic_clips[0], [12, 24, 36, 48], size=56)
    req = Request(b.resolved.spec, (TextPart("x"), VideoPart(spec)), Decoding(max_new_tokens=2))
    _, _, metas, _ = b.render(req)
    assert metas[0].frames_indices == [12, 24, 36, 48]
    assert metas[0].fps == pytest.approx(spec.fps)
    text = b.tokenizer.decode(b._inputs([req])["input_ids"][0])
    # Qwen3-VL prints timestamps: mean of each temporal pair at 6 fps -> 3.0 s and 7.0 s
    assert "<3.0 seconds>" in text and "<7.0 seconds>" in text
    b.close()


def test_sampling_is_seeded(tiny_checkpoints, store, synthetic_clips):
    b = HFBackend(resolve(str(tiny_checkpoints["qwen2_vl"])), store, device="cpu")
    spec = FrameSpec.from_video(synthetic_clips[0], [0, 30], size=56)
    mk = lambda seed: Request(b.resolved.spec, (TextPart("Describe."), VideoPart(spec)), Decoding(8, temperature=1.5), seed=seed)  # noqa: E731
    a, a2, c = b.generate([mk(1)])[0], b.generate([mk(1)])[0], b.generate([mk(2)])[0]
    assert a.text == a2.text
    assert (a.text, a.n_tokens) != (c.text, c.n_tokens) or a.text == ""  # different seeds usually differ
    assert np.isfinite(a.seconds)
    b.close()


def test_identity_records_attention_and_sampler_and_runlog_records_placement(tiny_checkpoints, store, tmp_path):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.engine import read_run_log
    from pytest_posbias.run.context import RunContext

    spec = str(tiny_checkpoints["qwen2_vl"])
    ctx = RunContext.create(RunOptions(models=(spec,), cache=str(tmp_path / "c"), device="cpu",
                                       attn_implementation="eager"),
                            PosbiasConfig(), rootdir=tmp_path, worker="main", run_id="r")
    try:
        ident = ctx.backend(spec).identity()
        assert ident["attn_implementation"] == "eager" and ident["sampler"].startswith("gumbel-max")
        assert ident["answer_text"] == "think-tags-kept/v1"  # answers stored by another decoding are not served
        assert ctx.backend(spec).model.config._attn_implementation == "eager"
    finally:
        ctx.close()
    _, records = read_run_log(tmp_path / "c" / "runs" / "r" / "log-main.jsonl")
    model = next(r for r in records if r.get("kind") == "model")
    assert model["identity"]["attn_implementation"] == "eager"
    assert model["placement"]["sharded"] is False and model["placement"]["devices"] == ["cpu"]


def test_letter_scores_carry_prompt_and_visual_tokens(backend, clip_specs):
    letters = ("A", "B")
    reqs = [_two_video_request(backend, clip_specs, prompt=p, want="letters", letters=letters) for p in ("Pick.\nA. x\nB. y", "Q?")]
    gens = backend.score_generations(reqs)
    vid = backend.tokenizer.convert_tokens_to_ids(backend.video_token)
    img = backend.tokenizer.convert_tokens_to_ids(backend.image_token)
    for r, g in zip(reqs, gens, strict=True):
        ids = backend._inputs([r], prefill=backend.resolved.prefill)["input_ids"][0].tolist()
        assert g.prompt_tokens == len(ids)
        assert g.visual_tokens == sum(1 for t in ids if t in (vid, img)) > 0
        assert set(g.letter_logprobs) == set(letters)


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_weights_rewritten_in_place_change_the_directory_revision(tmp_path, weights):
    """New weights saved over a checkpoint directory (same config, header and size) are a new revision."""
    import json
    import os

    from pytest_posbias.models.hf import _dir_revision

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    f = tmp_path / weights
    f.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    before = _dir_revision(tmp_path)
    f.write_bytes(len(header).to_bytes(8, "little") + header + b"\1" * 16)  # a fine-tune saved to the same place
    os.utime(f, ns=(2_000_000_000, 2_000_000_000))
    assert _dir_revision(tmp_path) != before


@pytest.mark.parametrize("name", ["preprocessor_config.json", "video_preprocessor_config.json", "generation_config.json",
                                  "vocab.json", "merges.txt"])
def test_an_edited_processor_tokenizer_or_generation_file_changes_the_directory_revision(tmp_path, name):
    """The frames' resolution, the vocabulary and the stop tokens are part of a checkpoint directory's revision."""
    from pytest_posbias.models.hf import _dir_revision

    (tmp_path / "config.json").write_text('{"model_type": "qwen2_vl"}')
    (tmp_path / name).write_text('{"max_pixels": 200704}')
    before = _dir_revision(tmp_path)
    (tmp_path / name).write_text('{"max_pixels": 50176}')
    assert _dir_revision(tmp_path) != before


def test_non_finite_letter_logits_are_a_failed_call_not_an_answer(tiny_checkpoints, store, clip_specs):
    """A forward pass whose logits are NaN (bf16 overflow) fails the request; it never reads as letter scores."""
    import torch

    b = HFBackend(resolve(str(tiny_checkpoints["qwen2_vl"])), store, device="cpu", batch_size=4)
    real = b.model

    class Broken:
        def __call__(self, **inputs):
            out = real(**inputs)
            out.logits = torch.full_like(out.logits, float("nan"))
            return out

    b.model = Broken()
    r = Request("hf:x", (VideoPart(clip_specs[0], video_id="v"), TextPart("Which? A. x B. y")), Decoding(1),
                want="letters", letters=("A", "B"))
    [gen] = b.score_generations([r])
    b.model = real
    b.close()
    assert not gen.ok and gen.letter_logprobs is None and "not finite" in gen.error


def test_a_byte_identical_copy_of_a_checkpoint_directory_keeps_its_revision(tmp_path):
    """A checkpoint directory copied byte for byte without its times (a per-job download) keeps its revision."""
    import json
    import os
    import shutil

    from pytest_posbias.models.hf import _dir_revision

    src = tmp_path / "a" / "ckpt"
    src.mkdir(parents=True)
    (src / "config.json").write_text(json.dumps({"model_type": "qwen2_vl"}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    (src / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\1" * 16)
    os.utime(src / "model.safetensors", ns=(1_000_000_000, 1_000_000_000))
    dst = tmp_path / "b" / "ckpt"
    dst.mkdir(parents=True)
    for f in src.iterdir():
        shutil.copyfile(f, dst / f.name)  # the bytes, not the times: what a fresh download writes
    assert _dir_revision(dst) == _dir_revision(src)


def test_a_large_weight_file_is_revised_by_sampled_bytes_whatever_its_times(tmp_path):
    """A 1 MiB tensor rewritten in the middle of a 20 MiB shard is a new revision; the same bytes with
    other file times are not."""
    import os

    from pytest_posbias.models.hf import _dir_revision

    f = tmp_path / "model-00001-of-00002.bin"
    data = bytearray(20 << 20)
    f.write_bytes(bytes(data))
    before = _dir_revision(tmp_path)
    os.utime(f, ns=(3_000_000_000, 3_000_000_000))
    assert _dir_revision(tmp_path) == before
    data[10 << 20: 11 << 20] = b"\x07" * (1 << 20)
    f.write_bytes(bytes(data))
    assert _dir_revision(tmp_path) != before


def test_one_byte_of_a_small_tensor_in_a_large_weight_file_is_a_new_revision(tmp_path):
    """Every byte of every weight file is in the revision: one byte of a small tensor (a norm, a bias)
    changed in the middle of a shard larger than 16 MiB, between any sampled chunks, is a new revision."""
    from pytest_posbias.models.hf import _dir_revision

    f = tmp_path / "model.safetensors"
    header = b'{"w": {"dtype": "U8", "shape": [20971520], "data_offsets": [0, 20971520]}}'
    data = bytearray(len(header).to_bytes(8, "little") + header + bytes(20 << 20))
    f.write_bytes(bytes(data))
    before = _dir_revision(tmp_path)
    step = (len(data) - (1 << 16)) // 255  # 256 evenly spaced 64 KiB chunks: the gaps a sample never reads
    data[128 * step + (1 << 16) + (step - (1 << 16)) // 2] = 1  # mid-file, in the gap after the 129th chunk
    f.write_bytes(bytes(data))
    assert _dir_revision(tmp_path) != before


@pytest.mark.parametrize(("opened", "said", "expected"), [
    (False, "<think>Option A looks wrong, the answer is B", ""),  # the model opened the block, cut by the limit
    (True, "Option A looks wrong, the answer is B", ""),  # the chat template opened it, cut by the limit
    (True, "Option A looks wrong.</think>\n\nB", "B"),
    (False, "<think>Option A looks wrong.</think>\n\nB", "B"),
])
def test_an_answer_cut_off_inside_the_reasoning_is_no_answer(tiny_checkpoints, store, clip_specs, opened, said,
                                                             expected):
    """A reasoning model's output cut off by the token limit inside its think block, opened by the model (a
    special token of its tokenizer) or by the chat template, leaves an empty answer (a lost unit), never the
    reasoning's words or letters scored as the answer; a closed block leaves the answer after it."""
    import torch

    b = HFBackend(resolve(str(tiny_checkpoints["qwen2_vl"])), store, device="cpu", batch_size=4)
    if opened:
        b.processor.chat_template += "{% if add_generation_prompt %}<think>\n{% endif %}"
    body = b.tokenizer.encode(said, add_special_tokens=False)

    class Scripted:
        def generate(self, input_ids, **_kw):
            out = torch.tensor([body], dtype=input_ids.dtype).expand(input_ids.shape[0], -1)
            return type("Out", (), {"sequences": torch.cat([input_ids, out], dim=1), "logits": None})()

    real, b.model = b.model, Scripted()
    r = Request("hf:x", (VideoPart(clip_specs[0], video_id="v"), TextPart("Which? A. x B. y")),
                Decoding(max_new_tokens=len(body) if expected == "" else len(body) + 1))
    [gen] = b.generate([r])
    b.model = real
    b.close()
    assert gen.ok and gen.text == expected
    # lost as answer_cut_off (a larger max_new_tokens may cure it), not as an empty answer
    assert usable.generation_text_reason(gen) == (usable.CUT_OFF if expected == "" else usable.FEW_WORDS)


@pytest.mark.parametrize("family", ["llava_onevision", "internvl"])
def test_a_model_without_think_tags_keeps_its_cache_key(tiny_checkpoints, store, family):
    """Without think tags in the tokenizer or the chat template the answer is one plain decode: no answer_text in
    the backend identity (cache key), so the answers cached for the model are still served."""
    b = HFBackend(resolve(str(tiny_checkpoints[family])), store, device="cpu", batch_size=4)
    try:
        assert "answer_text" not in b.identity()
        assert b.think_tags() == ({}, False)
        body = b.tokenizer.encode("Option A looks wrong, the answer is B", add_special_tokens=False)
        assert b.answer_text(body) == b.tokenizer.decode(body, skip_special_tokens=True).strip()
    finally:
        b.close()
