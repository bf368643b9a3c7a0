"""OpenAI-compatible endpoints (vLLM server, OpenAI, Gemini's compatible API) via the official client.

Frames go as base64 JPEG ``image_url`` parts interleaved with the text parts in the
probe's order, in one user message. Letter scores use ``logprobs``/``top_logprobs`` of
the first generated token where the endpoint returns them (a clear error where it does
not). Transient failures (429, 5xx, timeouts, connection errors, malformed bodies) are
retried with bounded exponential backoff and jitter; the client's own retries are off so
the policy is ours and tested. The API key comes from the environment
(``POSBIAS_API_KEY``, else ``OPENAI_API_KEY``) and is never written to the cache, the run
log or the report: it is not part of the identity and never appears in a message.
"""

from __future__ import annotations

import base64
import io
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..engine import Generation, Request
from ..errors import BackendError, ModelLoadError
from ..video.compose import ImagePart, TextPart, VideoPart
from ..video.frames import FrameStore

T = TypeVar("T")


def api_key() -> str:
    """The key from the environment (``POSBIAS_API_KEY`` or ``OPENAI_API_KEY``); 'EMPTY' for open servers."""
    return os.environ.get("POSBIAS_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY"


def sanitize_url(url: str) -> str:
    """The base URL without credentials, query or fragment (safe to log)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "<redacted>") if secret and secret != "EMPTY" else text


def with_retries(fn: Callable[[], T], *, retries: int = 5, base_delay: float = 0.5, max_delay: float = 20.0,
                 rng: random.Random | None = None, sleep: Callable[[float], None] = time.sleep,
                 secret: str = "") -> T:
    """Call ``fn``; retry transient endpoint failures up to ``retries`` times.

    Delay before retry k (0-based) = min(max_delay, base_delay·2^k) × U(0.5, 1.5).
    Retried: 429, 5xx, timeouts, connection errors, malformed bodies. Other API errors
    (400, 401, 403, 404, 422) fail at once. The final error is a BackendError.
    """
    import openai

    r = rng or random.Random()
    last: Exception | None = None
    for attempt in range(retries + 1):
        try:
            return fn()
        except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError, openai.APIConnectionError,
                openai.APIResponseValidationError, ValueError) as exc:
            last = exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code == 429:
                last = exc
            else:
                raise BackendError(_redact(f"endpoint refused the request (HTTP {exc.status_code}): {exc.message}", secret)) from None
        if attempt < retries:
            sleep(min(max_delay, base_delay * 2**attempt) * r.uniform(0.5, 1.5))
    raise BackendError(_redact(f"endpoint failed after {retries + 1} attempts: {type(last).__name__}: {last}", secret))


def jpeg_data_url(frame: np.ndarray, quality: int = 90) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


class OpenAIBackend:
    """Backend protocol implementation for ``openai:NAME`` (``--api-base URL``)."""

    name = "openai"
    max_batch_size = 16

    def __init__(self, model_name: str, store: FrameStore, *, api_base: str | None, concurrency: int = 4,
                 retries: int = 5, timeout: float = 120.0, logprobs: bool = True, base_delay: float = 0.5) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ModelLoadError(f"--model openai:{model_name}: the `api` extra is not installed (pip install 'pytest-posbias[api]'): {exc}") from None
        self.model_name = model_name
        self.store = store
        self.api_base = api_base or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self._key = api_key()
        self.client = openai.OpenAI(api_key=self._key, base_url=self.api_base, timeout=timeout, max_retries=0)
        self.concurrency = max(1, int(concurrency))
        self.retries = retries
        self.base_delay = base_delay
        self.supports_letter_logprobs = logprobs
        self._rng = random.Random(0)
        self._lock = threading.Lock()

    def identity(self) -> Mapping[str, Any]:
        return {"backend": "openai", "model_id": self.model_name, "api_base": sanitize_url(self.api_base)}

    def close(self) -> None:
        self.client.close()

    def messages(self, request: Request) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        for p in request.parts:
            if isinstance(p, TextPart):
                content.append({"type": "text", "text": p.text})
            elif isinstance(p, VideoPart):
                for frame in self.store.materialize(p.frames):
                    content.append({"type": "image_url", "image_url": {"url": jpeg_data_url(frame)}})
            elif isinstance(p, ImagePart):
                content.append({"type": "image_url", "image_url": {"url": jpeg_data_url(np.zeros((p.size, p.size, 3), np.uint8))}})
        return [{"role": "user", "content": content}]

    def _complete(self, request: Request, *, max_tokens: int, logprobs: bool) -> Any:
        dec = request.decoding
        kwargs: dict[str, Any] = {"model": self.model_name, "messages": self.messages(request), "max_tokens": max_tokens,
                                  "temperature": dec.temperature, "top_p": dec.top_p}
        if not dec.greedy:
            kwargs["seed"] = int(request.seed)
        if dec.repetition_penalty != 1.0:
            kwargs["extra_body"] = {"repetition_penalty": dec.repetition_penalty, **({"top_k": dec.top_k} if dec.top_k else {})}
        elif dec.top_k:
            kwargs["extra_body"] = {"top_k": dec.top_k}
        if logprobs:
            kwargs.update(logprobs=True, top_logprobs=20)
        with self._lock:
            rng = random.Random(self._rng.random())

        def call() -> Any:
            resp = self.client.chat.completions.create(**kwargs)
            if not getattr(resp, "choices", None):
                raise ValueError("response has no choices")
            return resp

        return with_retries(call, retries=self.retries, base_delay=self.base_delay, rng=rng, secret=self._key)

    def _one(self, request: Request) -> Generation:
        t0 = time.perf_counter()
        try:
            want_lp = request.want == "both"
            resp = self._complete(request, max_tokens=request.decoding.max_new_tokens, logprobs=want_lp)
            choice = resp.choices[0]
            text = (choice.message.content or "").strip()
            finish = "length" if choice.finish_reason == "length" else "stop"
            n = resp.usage.completion_tokens if getattr(resp, "usage", None) else len(text.split())
            lp = self._letters_from(choice, request.letters) if want_lp else None
            return Generation(text, int(n), finish, lp, time.perf_counter() - t0)
        except BackendError as exc:
            return Generation(finish_reason="error", error=str(exc), seconds=time.perf_counter() - t0)

    def _letters_from(self, choice: Any, letters: Sequence[str]) -> dict[str, float]:
        lp = getattr(choice, "logprobs", None)
        content = getattr(lp, "content", None) if lp is not None else None
        if not content:
            raise BackendError(f"endpoint returned no logprobs for {self.model_name}; letter scoring needs logprobs "
                               "(vLLM: --max-logprobs; or score answers from text with a text-mode probe)")
        out = {letter: -math.inf for letter in letters}
        for top in content[0].top_logprobs or []:
            tok = top.token.strip().rstrip(".)").strip()
            if tok in out and top.logprob > out[tok]:
                out[tok] = float(top.logprob)
        return out

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(self._one, requests))

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        if not self.supports_letter_logprobs:
            raise BackendError(f"openai:{self.model_name} is configured without logprobs; letter scoring is unavailable")

        def one(r: Request) -> dict[str, float]:
            resp = self._complete(r, max_tokens=1, logprobs=True)
            return self._letters_from(resp.choices[0], letters)

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(one, requests))
