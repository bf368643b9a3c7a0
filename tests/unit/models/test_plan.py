"""models.plan: the recording backend of ``posbias plan`` (what it writes per request and answers), the
token estimate without a processor, the test a request belongs to, and the configured design."""

from __future__ import annotations

import json
import math
import threading

import pytest

from pytest_posbias.engine import Decoding, Request
from pytest_posbias.models.plan import (
    PlanBackend,
    TokenCounter,
    configured_sequential,
    current_test,
    estimate_prompt_tokens,
    output_key,
    write_configured_design,
)
from pytest_posbias.models.registry import resolve
from pytest_posbias.video.compose import ImagePart, TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore


def _video(n: int, size: int | None) -> VideoPart:
    spec = FrameSpec.synthetic("black", n, size=size or 448)
    if size is None:
        spec = FrameSpec(spec.sources, spec.frames, None, spec.aspect)
    return VideoPart(spec, video_id="v")


def _request(*parts, want="text", letters=(), max_new_tokens=64, probe="phase") -> Request:
    return Request("sim:unbiased", tuple(parts), Decoding(max_new_tokens=max_new_tokens), want=want,
                   letters=tuple(letters), meta={"probe": probe})


def test_estimate_of_a_hand_worked_request():
    """'Hello' + 8 frames at 224 px + a 28 px separator: text ⌈6/4⌉+16 = 18, video 8²·⌈8/2⌉ = 256, image 1."""
    req = _request(TextPart("Hello"), _video(8, 224), ImagePart(size=28))
    assert estimate_prompt_tokens(req) == (18 + 256 + 1, 257)


def test_estimate_rounds_odd_frames_and_sides_up_and_counts_native_frames_at_448():
    """3 frames at 30 px: ⌈30/28⌉² · ⌈3/2⌉ = 4·2 = 8; native size counts as 448 px: 16² · 1 = 256 for 2 frames."""
    assert estimate_prompt_tokens(_request(_video(3, 30)))[1] == 8
    assert estimate_prompt_tokens(_request(_video(2, None)))[1] == 256


def test_estimate_counts_one_newline_per_text_part():
    """Two text parts of 3 characters: (3+1)+(3+1) = 8 characters, 2 tokens, plus 16 template tokens."""
    assert estimate_prompt_tokens(_request(TextPart("abc"), TextPart("def"))) == (18, 0)


def test_configured_design_round_trips_and_defaults_to_sequential(tmp_path):
    """What write_configured_design records, configured_sequential reads back; nothing recorded reads as sequential."""
    assert configured_sequential(tmp_path / "none") is True
    write_configured_design(tmp_path / "plan", sequential=False)
    assert configured_sequential(tmp_path / "plan") is False
    write_configured_design(tmp_path / "plan", sequential=True)
    assert configured_sequential(tmp_path / "plan") is True


def test_output_key_separates_probe_output_cap_and_temperature():
    """The measured-length group names the probe, the wanted output, the token cap and the temperature."""
    r = Request("sim:x", (TextPart("q"),), Decoding(max_new_tokens=32, temperature=0.7), want="text",
                meta={"probe": "stressor"})
    assert output_key(r) == "stressor|text|32|T0.7"
    assert output_key(Request("sim:x", (TextPart("q"),))).startswith("?|text|")


@pytest.fixture
def backend(tmp_path):
    b = PlanBackend(resolve("sim:unbiased"), FrameStore(), tmp_path / "plan", worker="w1",
                    output_lengths={"phase|text|64|T0": 12.6})
    yield b
    b.close()


def _rows(tmp_path, worker="w1"):
    return [json.loads(x) for x in (tmp_path / "plan" / f"requests-{worker}.jsonl").read_text().splitlines()]


def test_a_sim_model_is_planned_from_the_estimate_and_says_why(backend):
    """A sim model has no processor: the counter estimates and says so, and the identity names the token source."""
    assert backend.counter.source == "estimate" and "sim backend" in backend.counter.why
    assert backend.identity() == {"backend": "plan", "model": "sim:unbiased", "tokens": "estimate"}


def test_generate_records_each_request_under_its_test_and_answers_with_its_counts(backend, tmp_path):
    """Each generate request: one row under the current test with the estimate, frames and output tokens; an empty
    answer with those counts (measured output length where one is known, else max_new_tokens)."""
    measured = _request(TextPart("Hello"), _video(8, 224), ImagePart(size=28))
    unmeasured = _request(TextPart("Hello"), _video(4, 56), probe="stressor", max_new_tokens=40)
    with current_test("suite/test_x.py::test_a"):
        gens = backend.generate([measured, unmeasured])
    rows = _rows(tmp_path)
    assert [r["test"] for r in rows] == ["suite/test_x.py::test_a"] * 2
    assert [(r["frames"], r["prompt_tokens"], r["visual_tokens"], r["output_tokens"]) for r in rows] == [
        (8, 275, 257, 13), (4, 4 * 2 + 18, 8, 40)]  # 56 px: 2² per pair, 2 pairs
    assert [(g.text, g.n_tokens, g.finish_reason, g.prompt_tokens, g.visual_tokens) for g in gens] == [
        ("", 13, "length", 275, 257), ("", 40, "length", 26, 8)]
    assert all(g.letter_logprobs is None for g in gens)


def test_letter_requests_plan_no_output_and_uniform_letter_logprobs(backend, tmp_path):
    """Letter scoring: no output tokens, log-probs −log K for each of K letters (no model chose any)."""
    r = _request(TextPart("Q?"), _video(2, 28), want="letters", letters="ABCD")
    [g] = backend.score_generations([r])
    assert g.n_tokens == 0 and g.letter_logprobs == {k: -math.log(4) for k in "ABCD"}
    assert backend.score_options([r], list("ABCD")) == [{k: -math.log(4) for k in "ABCD"}]
    assert [row["output_tokens"] for row in _rows(tmp_path)] == [0, 0]
    assert _rows(tmp_path)[0]["test"] == ""  # outside any test: recorded, under no test


def test_a_want_both_request_answers_uniform_letters_beside_its_text_tokens(backend):
    """want='both': the text's planned tokens and uniform letter log-probs over the request's letters."""
    [g] = backend.generate([_request(TextPart("Q?"), want="both", letters="AB", max_new_tokens=8)])
    assert g.n_tokens == 8 and g.letter_logprobs == {"A": -math.log(2), "B": -math.log(2)}


def test_current_test_is_restored_after_the_block_and_per_thread(backend, tmp_path):
    """Nested blocks restore the outer test; another thread does not see this thread's test."""
    r = _request(TextPart("q"))
    seen = []
    with current_test("t::outer"):
        with current_test("t::inner"):
            backend.generate([r])
        backend.generate([r])
        t = threading.Thread(target=lambda: seen.append(backend.generate([r])))
        t.start()
        t.join()
    backend.generate([r])
    assert [row["test"] for row in _rows(tmp_path)] == ["t::inner", "t::outer", "", ""]


def test_two_workers_write_their_own_files_and_a_file_is_appended_to(tmp_path):
    """Each worker writes requests-<worker>.jsonl; a second backend of the same worker appends, never truncates."""
    r = _request(TextPart("q"))
    for worker in ("gw0", "gw1", "gw0"):
        b = PlanBackend(resolve("sim:unbiased"), FrameStore(), tmp_path / "plan", worker=worker)
        b.generate([r])
        b.close()
    assert len(_rows(tmp_path, "gw0")) == 2 and len(_rows(tmp_path, "gw1")) == 1


def test_token_counter_of_an_unloadable_checkpoint_falls_back_to_the_estimate(ckpt):
    """An hf checkpoint whose processor cannot load offline: the estimate, and why names the folder."""
    counter = TokenCounter(resolve(str(ckpt)), FrameStore())
    assert counter.source == "estimate" and str(ckpt) in counter.why
    r = _request(TextPart("Hello"), _video(8, 224))
    assert counter.count(r) == estimate_prompt_tokens(r)


def test_token_counter_with_a_loadable_processor_counts_as_a_run_would(tiny_checkpoints):
    """A tiny checkpoint's processor: counts equal the input builder's own, and pixel values do not change them."""
    from transformers import AutoProcessor

    from pytest_posbias.models.hf_inputs import InputBuilder

    store = FrameStore()
    resolved = resolve(str(tiny_checkpoints["qwen2_vl"]))
    counter = TokenCounter(resolved, store)
    assert (counter.source, counter.why) == ("processor", "")
    black = _request(TextPart("Describe."), _video(4, 56))
    noise = _request(TextPart("Describe."), VideoPart(FrameSpec.synthetic("noise", 4, size=56, seed=3)))
    builder = InputBuilder(resolved, store, AutoProcessor.from_pretrained(tiny_checkpoints["qwen2_vl"]))
    want = builder.token_counts(builder._inputs([black]))[0]
    assert counter.count(black) == want and want[1] == 8  # 4 frames of 56 px: 2 temporal patches of 2x2 tokens
    assert counter.count(noise) == want and counter.count(black, prefill="A") == (want[0] + 1, want[1])
