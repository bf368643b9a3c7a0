"""A backend that answers each request as a test says and records what it was asked (the probe
and gate tests' stand-in for a model: failed calls, fixed letters, looping descriptions)."""

from __future__ import annotations

from collections.abc import Callable

from pytest_posbias.engine import Generation, Request


class ScriptedBackend:
    """A backend whose answer to a request is ``answer(request)``; ``asked`` holds every request sent.
    ``letters``: whether it reports option-letter log-probabilities (the logprobs mode of the
    multiple-choice probes) or only text."""

    max_batch_size = 64

    def __init__(self, answer: Callable[[Request], Generation], *, letters: bool = False, tag: str = "scripted") -> None:
        self.answer, self.supports_letter_logprobs, self.tag = answer, letters, tag
        self.name = "scripted"
        self.asked: list[Request] = []

    def identity(self) -> dict[str, str]:
        return {"model": self.tag}

    def generate(self, reqs: list[Request]) -> list[Generation]:
        self.asked.extend(reqs)
        return [self.answer(r) for r in reqs]

    score_generations = generate

    def close(self) -> None:
        pass
