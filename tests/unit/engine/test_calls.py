"""Requests and their keys (engine.calls): the cache key covers everything that changes the output, and
bad decoding parameters are named."""

from __future__ import annotations

import pytest
from support.counting_backend import request_of

from pytest_posbias.engine import Decoding, Request
from pytest_posbias.video.frames import FrameSpec


def test_request_key_covers_what_changes_the_output(synthetic_clips):
    spec = FrameSpec.from_video(synthetic_clips[0], [0, 10, 20])
    ident = {"backend": "sim", "model_id": "sim:unbiased", "revision": "x"}
    base = request_of(spec, "Describe.")
    k = base.key(ident)
    assert k == request_of(spec, "Describe.").key(ident)
    assert k != request_of(spec, "Describe!").key(ident)  # prompt
    assert k != request_of(FrameSpec.from_video(synthetic_clips[0], [0, 10, 21]), "Describe.").key(ident)  # frames
    assert k != request_of(FrameSpec.from_video(synthetic_clips[0], [0, 10, 20], size=224), "Describe.").key(ident)  # resolution
    assert k != base.key({**ident, "revision": "y"})  # model revision
    assert k != Request(base.model, base.parts, Decoding(max_new_tokens=65)).key(ident)  # decoding
    assert k != Request(base.model, base.parts, Decoding(64, repetition_penalty=1.2)).key(ident)
    greedy_other_seed = Request(base.model, base.parts, base.decoding, seed=7)
    assert greedy_other_seed.key(ident) == k  # greedy output does not depend on the seed
    sampled = Request(base.model, base.parts, Decoding(64, temperature=0.9), seed=1)
    assert sampled.key(ident) != Request(base.model, base.parts, Decoding(64, temperature=0.9), seed=2).key(ident)
    # metadata does not change the key
    assert Request(base.model, base.parts, base.decoding, meta={"probe": "x"}).key(ident) == k


def test_bad_decoding_parameters_are_named():
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="`max_new_tokens` must be an integer >= 1"):
        Decoding(max_new_tokens=0)
    with pytest.raises(ConfigError, match="`top_p` must lie in"):
        Decoding(top_p=0)
    with pytest.raises(ConfigError, match="`letters` must be given"):
        Request("sim:unbiased", (), want="letters")
