"""OpenAI-compatible endpoints (vLLM server, OpenAI, Gemini's compatible API) via the official client.

Frames go as base64 JPEG ``image_url`` parts interleaved with the text parts in the
probe's order, in one user message. Letter scores use ``logprobs``/``top_logprobs`` of
the first generated token where the endpoint returns them.

Fail closed (issue 15):

* Start-up check (:meth:`OpenAIBackend.check`, run when the run context loads its models,
  before the first test): one one-token request with the logprobs settings letter scoring
  uses. An unreachable server, or one that answers 400/401/403/404/422 (a misspelled served
  model name, a server rejecting ``top_logprobs=20``), stops the run with a usage error naming
  the URL, the model and the server's message, within 30 s. A server that answers without
  logprobs gets text-mode scoring, recorded in the run log's model record
  (``POSBIAS_API_LOGPROBS=0`` asks for text mode outright).
* Transient failures (408/409/429 honouring Retry-After, 5xx, timeouts, connection errors,
  malformed or truncated bodies, empty ``choices``) are retried with bounded exponential
  backoff and jitter; the client's own retries are off so the policy is ours and tested.
  Permanent ones are not retried. Every request ends in a ``Generation``: a failed one has
  ``ok=False``, the error and its attempt count (the engine counts retries and failures).
* A circuit breaker bounds a run against an endpoint that died midway (see the class).

Settings from the environment (there is no command-line option for them):
``POSBIAS_API_TIMEOUT`` (seconds per attempt, default 120), ``POSBIAS_API_RETRIES``
(default 5), ``POSBIAS_API_BACKOFF`` (first retry delay, default 0.5 s), ``POSBIAS_API_LOGPROBS``
(0: text-mode scoring). The API key comes from
``POSBIAS_API_KEY``, else ``OPENAI_API_KEY``, and is never written to the cache, the run
log or the report: it is not part of the identity and never appears in a message.
"""

from __future__ import annotations

import base64
import contextlib
import io
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..engine import Generation, Request
from ..errors import BackendError, ModelLoadError, PosbiasError
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


class EndpointError(BackendError):
    """An endpoint call failed for good: ``status`` is the HTTP status (None: no HTTP answer),
    ``transient`` says whether it was a retryable kind (429, 5xx, timeout, connection, bad body)
    whose retries ran out, ``attempts`` how many calls were made."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False, attempts: int = 1,
                 server_message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.attempts = attempts
        self.server_message = server_message


MAX_RETRY_AFTER_S = 60.0  # a server's Retry-After is honoured up to this many seconds
TOP_LOGPROBS = 20  # top_logprobs asked for letter scoring (and by the start-up check)


def retry_after(exc: BaseException) -> float | None:
    """Seconds a 429/503 answer asks the client to wait (``retry-after-ms`` or ``Retry-After``:
    seconds or an HTTP date), or None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _server_message(exc: Any) -> str:
    """The server's own error text from an API status error (``error.message`` of the body, else its text)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
    return str(getattr(exc, "message", "") or exc)


def with_retries(fn: Callable[[], T], *, retries: int = 5, base_delay: float = 0.5, max_delay: float = 20.0,
                 rng: random.Random | None = None, sleep: Callable[[float], None] = time.sleep,
                 secret: str = "", deadline: float | None = None, context: str = "",
                 on_retry: Callable[[int, BaseException, float], None] | None = None) -> T:
    """Call ``fn``; retry transient endpoint failures up to ``retries`` times.

    Delay before retry k (0-based) = min(max_delay, base_delay·2^k) × U(0.5, 1.5), or the
    server's Retry-After when that is longer (capped at MAX_RETRY_AFTER_S). Retried: 408,
    409, 429, 5xx, timeouts, connection errors, malformed bodies (``ValueError`` from ``fn``).
    Other API errors (400, 401, 403, 404, 422) fail at once. No retry starts after
    ``deadline`` (a ``time.monotonic()`` value). ``on_retry(attempt, error, delay)`` is called
    before each wait. The final error is an :class:`EndpointError` (``context`` prefixes it).
    """
    import openai

    r = rng or random.Random()
    prefix = f"{context}: " if context else ""
    last: BaseException | None = None
    attempts = 0
    for attempt in range(retries + 1):
        attempts = attempt + 1
        wait_at_least = 0.0
        try:
            return fn()
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
                last = exc
                wait_at_least = retry_after(exc) or 0.0
            else:
                msg = _server_message(exc)
                raise EndpointError(_redact(f"{prefix}endpoint refused the request (HTTP {exc.status_code}): {msg}", secret),
                                    status=exc.status_code, server_message=_redact(msg, secret), attempts=attempts) from None
        except (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError, ValueError) as exc:
            last = exc
        if attempt >= retries:
            break
        delay = min(max_delay, base_delay * 2**attempt) * r.uniform(0.5, 1.5)
        delay = max(delay, min(wait_at_least, MAX_RETRY_AFTER_S))
        if deadline is not None and time.monotonic() + delay >= deadline:
            break
        if on_retry is not None:
            on_retry(attempt, last, delay)
        sleep(delay)
    status = getattr(last, "status_code", None)
    detail = _describe(last)
    raise EndpointError(_redact(f"{prefix}endpoint failed after {attempts} attempts: {detail}", secret),
                        status=status, transient=True, attempts=attempts, server_message=_redact(detail, secret))


def _describe(exc: BaseException | None) -> str:
    """``Type: message`` of an error, with the root cause of a connection error (refused, reset, DNS)."""
    if exc is None:
        return "no attempt made"
    text = f"{type(exc).__name__}: {_server_message(exc) if hasattr(exc, 'status_code') else exc}"
    cause = exc.__cause__ or exc.__context__
    seen = 0
    while cause is not None and seen < 5:
        inner = cause.__cause__ or cause.__context__
        if inner is None:
            break
        cause, seen = inner, seen + 1
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text


def settings_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Backend keyword arguments from ``POSBIAS_API_TIMEOUT`` (seconds > 0), ``POSBIAS_API_RETRIES``
    (integer 0..10), ``POSBIAS_API_BACKOFF`` (first retry delay, seconds) and ``POSBIAS_API_LOGPROBS``
    (0/1); a bad value is a ModelLoadError naming it."""
    env = os.environ if env is None else env
    out: dict[str, Any] = {}
    raw = env.get("POSBIAS_API_TIMEOUT")
    if raw:
        try:
            out["timeout"] = float(raw)
        except ValueError:
            out["timeout"] = -1.0
        if not (0 < out["timeout"] <= 3600):
            raise ModelLoadError(f"POSBIAS_API_TIMEOUT must be a number of seconds in (0, 3600]; got {raw!r}")
    raw = env.get("POSBIAS_API_RETRIES")
    if raw:
        if not raw.strip().isdigit() or int(raw) > 10:
            raise ModelLoadError(f"POSBIAS_API_RETRIES must be an integer from 0 to 10; got {raw!r}")
        out["retries"] = int(raw)
    raw = env.get("POSBIAS_API_BACKOFF")
    if raw:
        try:
            out["base_delay"] = float(raw)
        except ValueError:
            out["base_delay"] = -1.0
        if not (0 <= out["base_delay"] <= 60):
            raise ModelLoadError(f"POSBIAS_API_BACKOFF must be the first retry's delay in seconds, in [0, 60]; got {raw!r}")
    raw = env.get("POSBIAS_API_LOGPROBS")
    if raw:
        if raw.strip().lower() not in ("0", "1", "true", "false"):
            raise ModelLoadError(f"POSBIAS_API_LOGPROBS must be 0 or 1; got {raw!r}")
        out["logprobs"] = raw.strip().lower() in ("1", "true")
    return out


def judge_spec(judge: str | None) -> str | None:
    """The model spec of an LLM judge (``--judge openai[:MODEL]``), or None for the offline judges."""
    judge = str(judge or "")
    if judge == "openai":
        from ..scoring.judges import JUDGE_MODEL_DEFAULT

        return f"openai:{JUDGE_MODEL_DEFAULT}"
    return judge if judge.startswith("openai:") else None


def check_endpoints(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run the start-up check of every ``openai:`` model, baseline and LLM judge that ``options``
    (the run's merged options) name, without loading anything else; raises ModelLoadError on the
    first that fails. For the controller of a pytest-xdist run, which loads no models itself."""
    from ..models.registry import resolve

    specs = [*(options.get("models") or []), *([options["baseline"]] if options.get("baseline") else [])]
    judge = judge_spec(options.get("judge"))
    specs += [judge] if judge else []
    out = []
    for spec in dict.fromkeys(specs):
        r = resolve(spec)
        if r.backend != "openai":
            continue
        base = options.get("api_base") or (r.entry.api_base if r.entry else None)
        b = OpenAIBackend(r.target, FrameStore(), api_base=base, **settings_from_env())
        try:
            out.append(b.check())
        finally:
            b.close()
    return out


def jpeg_data_url(frame: np.ndarray, quality: int = 90) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


class OpenAIBackend:
    """Backend protocol implementation for ``openai:NAME`` (``--api-base URL``).

    ``check()`` probes the endpoint once at start (see its docstring). Every request ends in a
    :class:`Generation`: a failed call is ``ok=False`` with the error and the number of
    attempts, never text. A circuit breaker bounds a run against a dead endpoint: after
    ``breaker_after`` consecutive requests have failed with their retries exhausted, further
    requests fail at once (recorded as failed, not cached, so a resume sends them again) except
    one trial request every ``breaker_probe_s`` seconds; one success closes the breaker.
    """

    name = "openai"
    max_batch_size = 16

    def __init__(self, model_name: str, store: FrameStore, *, api_base: str | None, concurrency: int = 4,
                 retries: int = 5, timeout: float = 120.0, logprobs: bool = True, base_delay: float = 0.5,
                 max_delay: float = 20.0, breaker_after: int = 8, breaker_probe_s: float = 30.0) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ModelLoadError(f"--model openai:{model_name}: the `api` extra is not installed (pip install 'pytest-posbias[api]'): {exc}") from None
        self.model_name = model_name
        self.store = store
        self.api_base = api_base or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.url = sanitize_url(self.api_base)
        self._key = api_key()
        self.client = openai.OpenAI(api_key=self._key, base_url=self.api_base, timeout=timeout, max_retries=0)
        self.timeout = float(timeout)
        self.concurrency = max(1, int(concurrency))
        self.retries = retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.supports_letter_logprobs = logprobs
        self.scoring = "logprobs" if logprobs else "text"
        self.breaker_after = max(1, int(breaker_after))
        self.breaker_probe_s = float(breaker_probe_s)
        self.counters = {"requests": 0, "attempts": 0, "retries": 0, "failed": 0, "breaker_rejected": 0}
        self._consecutive_failures = 0
        self._breaker_open_since: float | None = None
        self._breaker_last_trial = 0.0
        self._last_failure = ""
        self._rng = random.Random(0)
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        """``openai:NAME at URL``: how messages name this endpoint (never with credentials)."""
        return f"openai:{self.model_name} at {self.url}"

    def identity(self) -> Mapping[str, Any]:
        return {"backend": "openai", "model_id": self.model_name, "api_base": self.url}

    def close(self) -> None:
        self.client.close()

    # -- start-up check
    def check(self, *, timeout: float = 8.0, budget_s: float = 25.0) -> dict[str, Any]:
        """Probe the endpoint before the first test; raise ModelLoadError naming URL, model and cause.

        One chat completion of one token, with ``logprobs``/``top_logprobs=TOP_LOGPROBS`` when
        letters are to be scored from logprobs (so a server that rejects them is caught here),
        each attempt limited to ``timeout`` seconds (or the backend's own timeout when shorter) and
        all of them to ``budget_s``. Transient
        failures (429, 5xx, timeouts, refused connections) are retried twice with backoff; a
        permanent one (400, 401, 403, 404, 422) stops at once. When the endpoint answers but
        returns no logprobs, letter scoring falls back to text mode (recorded in the result,
        which the run log keeps). Returns what was found: ``{"url", "model", "scoring",
        "attempts", "seconds"}``.
        """
        t0 = time.monotonic()
        deadline = t0 + budget_s
        client = self.client.with_options(timeout=min(timeout, self.timeout), max_retries=0)
        kwargs: dict[str, Any] = {"model": self.model_name, "max_tokens": 1, "temperature": 0.0,
                                  "messages": [{"role": "user", "content": [
                                      # one tiny frame, sent as the probes send frames: an endpoint that rejects
                                      # image input (a text-only model) stops the run here, not after every call
                                      {"type": "image_url", "image_url": {"url": jpeg_data_url(np.zeros((16, 16, 3), np.uint8))}},
                                      {"type": "text", "text": "Reply with the single letter A."}]}]}
        if self.supports_letter_logprobs:
            kwargs.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        attempts = {"n": 0}

        def call() -> Any:
            attempts["n"] += 1
            resp = client.chat.completions.create(**kwargs)
            _validate(resp)
            return resp

        try:
            resp = with_retries(call, retries=2, base_delay=0.5, max_delay=2.0, deadline=deadline,
                                rng=random.Random(1), secret=self._key)
        except EndpointError as exc:
            raise ModelLoadError(self._check_message(exc, client)) from None
        result: dict[str, Any] = {"url": self.url, "model": self.model_name, "attempts": attempts["n"]}
        if self.supports_letter_logprobs:
            lp = getattr(resp.choices[0], "logprobs", None)
            if not getattr(lp, "content", None):
                self.supports_letter_logprobs = False
                self.scoring = "text"
                result["fallback"] = ("the endpoint returned no logprobs for a request asking for "
                                      f"top_logprobs={TOP_LOGPROBS}: answers are scored from text")
        result["scoring"] = self.scoring
        result["seconds"] = round(time.monotonic() - t0, 3)
        return result

    def _check_message(self, exc: EndpointError, client: Any) -> str:
        head = f"--model openai:{self.model_name}: the endpoint {self.url} "
        if exc.status is None or exc.transient:
            return head + f"cannot be reached or does not answer ({exc}); is the server running at this URL?"
        msg = head + f"refused the start-up request (HTTP {exc.status}): {exc.server_message}"
        if exc.status == 404:
            served = self._served_models(client)
            if served is not None:
                msg += f"; models served there: {', '.join(served) or '(none)'}"
        elif exc.status in (401, 403):
            msg += "; set POSBIAS_API_KEY (or OPENAI_API_KEY) to a key this endpoint accepts"
        elif exc.status in (400, 422) and self.supports_letter_logprobs and "logprob" in exc.server_message.lower():
            msg += (f"; letter scoring asks for logprobs with top_logprobs={TOP_LOGPROBS} (vLLM: serve with "
                    "--max-logprobs 20), or set POSBIAS_API_LOGPROBS=0 to score answers from text")
        return msg

    def _served_models(self, client: Any) -> list[str] | None:
        """The model names the endpoint lists (GET /models), or None when it does not say."""
        with contextlib.suppress(Exception):
            return sorted(str(m.id) for m in client.models.list())[:20]
        return None

    # -- requests
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

    def _kwargs(self, request: Request, *, max_tokens: int, logprobs: bool) -> dict[str, Any]:
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
            kwargs.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        return kwargs

    def _breaker_admits(self) -> bool:
        """False while the breaker is open, except for one trial request per ``breaker_probe_s``."""
        with self._lock:
            if self._breaker_open_since is None:
                return True
            now = time.monotonic()
            if now - self._breaker_last_trial >= self.breaker_probe_s:
                self._breaker_last_trial = now
                return True
            self.counters["breaker_rejected"] += 1
            return False

    def _record(self, *, ok: bool, attempts: int, transient_failure: bool, error: str = "") -> None:
        with self._lock:
            self.counters["requests"] += 1
            self.counters["attempts"] += attempts
            self.counters["retries"] += max(0, attempts - 1)
            if ok:
                self._consecutive_failures = 0
                self._breaker_open_since = None
                return
            self.counters["failed"] += 1
            if transient_failure:
                self._consecutive_failures += 1
                self._last_failure = error
                if self._consecutive_failures >= self.breaker_after and self._breaker_open_since is None:
                    self._breaker_open_since = self._breaker_last_trial = time.monotonic()

    def _complete(self, request: Request, *, max_tokens: int, logprobs: bool) -> tuple[Any, int]:
        """The validated response and the number of attempts it took (raises EndpointError)."""
        kwargs = self._kwargs(request, max_tokens=max_tokens, logprobs=logprobs)
        with self._lock:
            rng = random.Random(self._rng.random())
        attempts = {"n": 0}

        def call() -> Any:
            attempts["n"] += 1
            resp = self.client.chat.completions.create(**kwargs)
            _validate(resp)
            return resp

        resp = with_retries(call, retries=self.retries, base_delay=self.base_delay, max_delay=self.max_delay, rng=rng,
                            secret=self._key, context=self.label)
        return resp, attempts["n"]

    def _one(self, request: Request) -> Generation:
        """One request, as a Generation; every failure is ``ok=False`` with the error and attempts."""
        t0 = time.perf_counter()
        if not self._breaker_admits():
            self._record(ok=False, attempts=0, transient_failure=False)
            return Generation(finish_reason="error", attempts=0, seconds=0.0,
                              error=f"{self.label}: not sent: {self.breaker_after} consecutive requests failed after "
                                    f"their retries (last: {self._last_failure}); the endpoint is tried again every "
                                    f"{self.breaker_probe_s:.0f} s")
        attempts = 0
        try:
            letters_only = request.want == "letters"
            want_lp = request.want in ("letters", "both")
            if want_lp and not self.supports_letter_logprobs:
                raise BackendError(f"{self.label}: letter log-probabilities asked for, but this endpoint is scored from "
                                   "text (it returns no logprobs)")
            max_tokens = 1 if letters_only else request.decoding.max_new_tokens
            try:
                resp, attempts = self._complete(request, max_tokens=max_tokens, logprobs=want_lp)
            except EndpointError as exc:
                attempts = exc.attempts
                raise
            choice = resp.choices[0]
            lp = self._letters_from(choice, request.letters) if want_lp else None
            self._record(ok=True, attempts=attempts, transient_failure=False)
            if letters_only:
                return Generation("", 0, "stop", lp, time.perf_counter() - t0, attempts=attempts)
            text = (choice.message.content or "").strip()
            finish = "length" if choice.finish_reason == "length" else "stop"
            usage = getattr(resp, "usage", None)
            n = getattr(usage, "completion_tokens", None)
            n = int(n) if isinstance(n, int) else len(text.split())
            return Generation(text, n, finish, lp, time.perf_counter() - t0, attempts=attempts)
        except PosbiasError as exc:
            transient = isinstance(exc, EndpointError) and exc.transient
            self._record(ok=False, attempts=attempts, transient_failure=transient, error=str(exc))
            return Generation(finish_reason="error", error=str(exc), seconds=time.perf_counter() - t0, attempts=attempts)

    def _letters_from(self, choice: Any, letters: Sequence[str]) -> dict[str, float]:
        lp = getattr(choice, "logprobs", None)
        content = getattr(lp, "content", None) if lp is not None else None
        if not content:
            raise BackendError(f"{self.label}: the endpoint returned no logprobs; letter scoring needs logprobs "
                               "(vLLM: --max-logprobs; or score answers from text with a text-mode probe)")
        out = {letter: -math.inf for letter in letters}
        for top in content[0].top_logprobs or []:
            tok = top.token.strip().rstrip(".)").strip()
            if tok in out and top.logprob > out[tok]:
                out[tok] = float(top.logprob)
        return out

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """One Generation per request (``want='letters'`` ones carry only letter log-probs)."""
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(self._one, requests))

    def score_generations(self, requests: Sequence[Request]) -> list[Generation]:
        """Letter scores as Generations, so one failed request fails alone (the engine prefers this)."""
        return self.generate(requests)

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        """Letter log-probs per request; raises BackendError when any request failed."""
        if not self.supports_letter_logprobs:
            raise BackendError(f"openai:{self.model_name} is configured without logprobs; letter scoring is unavailable")
        gens = self.generate([replace(r, want="letters", letters=tuple(letters)) for r in requests])
        for g in gens:
            if not g.ok:
                raise BackendError(g.error or f"{self.label}: request failed")
        return [dict(g.letter_logprobs or {}) for g in gens]


def _validate(resp: Any) -> None:
    """Raise ValueError (a malformed answer: retried) unless ``resp`` has a usable first choice."""
    choices = getattr(resp, "choices", None)
    if not choices:
        raise ValueError("the response has no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise ValueError("the response's first choice has no message")
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise ValueError(f"the response's message content is {type(content).__name__}, not text")
