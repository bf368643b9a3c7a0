"""A backend for the engine tests that counts its calls and can hold each one for a while, and the
request those tests send (a sim summary of one clip's frames)."""

from __future__ import annotations

import time

from pytest_posbias.engine import Decoding, Request
from pytest_posbias.models.sim import SimBackend
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec


def request_of(spec: FrameSpec, prompt: str, **kw) -> Request:
    """A sim:unbiased request: ``prompt`` then the frames ``spec`` names, at most 64 new tokens."""
    return Request("sim:unbiased", (TextPart(prompt), VideoPart(spec)), Decoding(max_new_tokens=64, **kw))


class CountingBackend:
    """Wraps the sim backend, counts calls, optionally slows each one down."""

    name = "counting"
    supports_letter_logprobs = True

    def __init__(self, inner: SimBackend, delay: float = 0.0, batch: int = 4) -> None:
        self.inner = inner
        self.delay = delay
        self.max_batch_size = batch
        self.calls = 0

    def identity(self):
        return self.inner.identity()

    def generate(self, requests):
        self.calls += len(requests)
        time.sleep(self.delay * len(requests))
        return self.inner.generate(requests)

    def score_options(self, requests, letters):
        self.calls += len(requests)
        return self.inner.score_options(requests, letters)

    def close(self):
        pass
