"""The start-up check of the OpenAI-compatible backend: one one-token request per replica before
the first test, stopping the run with the URL, the model and the server's own words when the
endpoint cannot serve it.
"""

from __future__ import annotations

import contextlib
import random
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ModelLoadError
from .openai_encode import jpeg_b64, jpeg_data_url, video_data_url
from .openai_pool import Replica
from .openai_retry import TOP_LOGPROBS, EndpointError, validate, with_retries

if TYPE_CHECKING:
    from .openai_backend import OpenAIBackend


def check(backend: OpenAIBackend, *, timeout: float = 8.0, budget_s: float = 25.0) -> dict[str, Any]:
    """Probe the endpoint before the first test; raise ModelLoadError naming URL, model and cause.

    One one-token chat completion per replica showing frames in the input form (with
    ``top_logprobs`` when letters are scored from logprobs, so a server rejecting them is caught
    here), each attempt within ``timeout`` and all within ``budget_s``; transient failures are
    retried twice, permanent ones stop at once. ``video_form='auto'`` tries the video form, then
    images when refused. No logprobs in the answer: text scoring (``letter_scoring='auto'``) or a
    failed check (``'logprobs'``). Replicas whose answers name different models stop the run. Returns what was
    found, for the run log.
    """
    t0 = time.monotonic()
    result: dict[str, Any] = {"url": backend.url, "model": backend.model_name, "attempts": 0}
    forms = ["video", "images"] if backend.video_form == "auto" else [backend.video_form]
    resp: Any = None
    answers_as: dict[str, str] = {}  # replica URL -> the model its answer names
    for rep in backend.router.replicas:
        for k, form in enumerate(forms):
            try:
                resp, n = _check_one(backend, rep, form, timeout=timeout, deadline=t0 + budget_s)
                result["attempts"] += n
                break
            except EndpointError as exc:
                result["attempts"] += exc.attempts
                if k + 1 < len(forms) and not exc.transient and exc.status in (400, 415, 422) \
                        and "logprob" not in exc.server_message.lower():  # the video refused: try images
                    result["video_refused"] = exc.server_message[:300]
                    continue
                raise ModelLoadError(_check_message(backend, exc, rep, form)) from None
        forms = [form]  # every replica must take the form the first one took
        if getattr(resp, "model", None):
            answers_as[rep.url] = str(resp.model)
        if len(set(answers_as.values())) > 1:  # replicas share the cache key: they must serve one model
            raise ModelLoadError(f"--posbias-model openai:{backend.model_name}: the replicas serve different models ("
                                 + ", ".join(f"{u} answers as {m!r}" for u, m in answers_as.items())
                                 + "); every --posbias-api-base must serve the same model")
        tokens = getattr(getattr(resp.choices[0], "logprobs", None), "content", None)
        if backend.supports_letter_logprobs and not (tokens and getattr(tokens[0], "top_logprobs", None)):
            # every replica must return logprobs: a request routed to one that does not has no letter scores
            gap = f"the endpoint {rep.url} returned no logprobs for a request asking for top_logprobs={TOP_LOGPROBS}"
            if backend.letter_scoring == "logprobs":
                raise ModelLoadError(f"--posbias-model openai:{backend.model_name}: {gap}, and "
                                     "--posbias-letter-scoring logprobs was asked for; use --posbias-letter-scoring "
                                     "text (or auto) to score answers from text")
            backend.supports_letter_logprobs = False
            backend.scoring = "text"
            result["fallback"] = f"{gap}: answers are scored from text"
    backend.input_form = forms[0]
    result.update(input_form=backend.input_form, scoring=backend.scoring, request_seed=backend.request_seed)
    if len(backend.router.replicas) > 1:
        result["replicas"] = [r.url for r in backend.router.replicas]
    result["seconds"] = round(time.monotonic() - t0, 3)
    return result


def _check_one(backend: OpenAIBackend, rep: Replica, form: str, *, timeout: float, deadline: float) -> tuple[Any, int]:
    client = rep.client.with_options(timeout=min(timeout, backend.timeout), max_retries=0)
    frame = np.zeros((32, 32, 3), np.uint8)
    # frames sent as the probes send them: an endpoint that rejects image input (a text-only model) stops here
    media = ({"type": "video_url", "video_url": {"url": video_data_url([jpeg_b64(frame)] * 2)}} if form == "video"
             else {"type": "image_url", "image_url": {"url": jpeg_data_url(frame[:16, :16])}})
    kwargs: dict[str, Any] = {"model": backend.model_name, "max_tokens": 1, "temperature": 0.0,
                              "messages": [{"role": "user", "content": [
                                  media, {"type": "text", "text": "Reply with the single letter A."}]}]}
    if backend.supports_letter_logprobs:
        kwargs.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
    attempts = {"n": 0}

    def call() -> Any:
        attempts["n"] += 1
        resp = client.chat.completions.create(**kwargs)
        validate(resp)
        return resp

    resp = with_retries(call, retries=2, base_delay=0.5, max_delay=2.0, deadline=deadline,
                        rng=random.Random(1), secret=backend._key)
    return resp, attempts["n"]


def _check_message(backend: OpenAIBackend, exc: EndpointError, rep: Replica, form: str) -> str:
    head = f"--posbias-model openai:{backend.model_name}: the endpoint {rep.url} "
    if exc.status is None or exc.transient:
        return head + f"cannot be reached or does not answer ({exc}); is the server running at this URL?"
    msg = head + f"refused the start-up request (HTTP {exc.status}): {exc.server_message}"
    if exc.status == 404:
        with contextlib.suppress(Exception):  # the names the endpoint lists (GET /models), when it says
            served = sorted(str(m.id) for m in rep.client.models.list())[:20]
            msg += f"; models served there: {', '.join(served) or '(none)'}"
    elif exc.status in (401, 403):
        msg += "; set POSBIAS_API_KEY (or OPENAI_API_KEY) to a key this endpoint accepts"
    elif exc.status in (400, 422) and backend.supports_letter_logprobs and "logprob" in exc.server_message.lower():
        msg += (f"; letter scoring asks for logprobs with top_logprobs={TOP_LOGPROBS} (vLLM: serve with "
                "--max-logprobs 20), or use --posbias-letter-scoring text to score answers from text")
    elif form == "video" and backend.video_form == "video":
        msg += ("; the frames were sent as one video_url (--posbias-video-form video): use images for image-only "
                "endpoints")
    return msg
