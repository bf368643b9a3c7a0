"""The request pool of the OpenAI-compatible backend: replicas (:class:`ReplicaRouter`, with
:func:`send` making one attempt through it) and a streaming pool (:func:`stream`).
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

P = TypeVar("P")
G = TypeVar("G")


@dataclass(eq=False)
class Replica:
    """One endpoint of the served model: its base URL (sanitized for messages), client and counters."""

    url: str
    client: Any
    outstanding: int = 0
    failures: int = 0  # consecutive failures (connection refused, 5xx); reset by a success
    alive: bool = True
    down_since: float = 0.0
    sent: int = 0


@dataclass
class ReplicaRouter:
    """Least-outstanding-requests routing over replicas, with dead replicas taken out.

    A replica is taken out when a connection to it is refused or reset, or after ``fail_after``
    consecutive server errors, unless it is the last live one (then the backend's retries and
    circuit breaker apply); after ``revive_s`` it gets one trial request."""

    replicas: Sequence[Replica]
    fail_after: int = 3
    revive_s: float = 30.0
    notify: Callable[[str], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.replicas:
            raise ValueError("a router needs at least one replica")

    def acquire(self, exclude: Sequence[Replica] = ()) -> Replica:
        """The replica for the next attempt (outstanding count taken)."""
        with self._lock:
            now = time.monotonic()
            for r in self.replicas:
                if not r.alive and now - r.down_since >= self.revive_s:
                    r.alive, r.failures = True, max(0, self.fail_after - 1)  # on trial: one failure takes it out again
            pool = [r for r in self.replicas if r.alive and r not in exclude] or \
                   [r for r in self.replicas if r.alive] or list(self.replicas)
            best = min(pool, key=lambda r: (r.outstanding, r.sent, self.replicas.index(r)))
            best.outstanding += 1
            best.sent += 1
            return best

    def release(self, rep: Replica, *, ok: bool | None = None, down: bool = False, error: str = "") -> bool:
        """End an attempt on ``rep``: ``ok`` True (success), False (a server error), None (neither:
        a timeout or a refused request, which says nothing about the replica's health);
        ``down`` a refused or reset connection. Returns whether ``rep`` is out of service now."""
        message = ""
        with self._lock:
            rep.outstanding = max(0, rep.outstanding - 1)
            if ok:
                rep.failures = 0
                return False
            if ok is None and not down:
                return not rep.alive
            rep.failures += 1
            others = [r for r in self.replicas if r is not rep and r.alive]
            if rep.alive and others and (down or rep.failures >= self.fail_after):
                rep.alive = False
                rep.down_since = time.monotonic()
                why = "its connection failed" if down else f"{rep.failures} consecutive server errors"
                message = (f"replica {rep.url} taken out after {why} ({error}); its requests go to "
                           f"{', '.join(r.url for r in others)}")
            out = not rep.alive
        if message and self.notify is not None:
            self.notify(message)
        return out

    def has_alive(self, exclude: Sequence[Replica] = ()) -> bool:
        with self._lock:
            return any(r.alive and r not in exclude for r in self.replicas)


def stream(n: int, prepare: Callable[[int], P], send: Callable[[int, P], G], fail: Callable[[int, BaseException], G], *,
           concurrency: int, lookahead: int | None = None, prepare_workers: int = 2) -> Iterator[tuple[int, G]]:
    """``(i, send(i, prepare(i)))`` for i in 0..n-1, in completion order.

    ``prepare`` (frame encoding) runs on ``prepare_workers`` threads in index order, at most
    ``lookahead`` (default 2 x concurrency) requests ahead; ``send`` runs on ``concurrency``
    threads, each taking the next prepared request as soon as its call returns, so the slowest
    call holds up no other and the caller consumes answers as they arrive. An exception becomes
    ``fail(i, exc)`` (on the caller's thread): every index is yielded exactly once. Closing the
    iterator early cancels what has not started; answers of calls in flight are dropped."""
    conc = max(1, min(int(concurrency), n))
    ahead = max(conc, int(lookahead if lookahead is not None else 2 * conc))
    prep_pool = ThreadPoolExecutor(max_workers=max(1, prepare_workers), thread_name_prefix="posbias-encode")
    net_pool = ThreadPoolExecutor(max_workers=conc, thread_name_prefix="posbias-request")
    answers: queue.SimpleQueue[tuple[int, bool, Any]] = queue.SimpleQueue()
    lock = threading.Lock()
    pending: deque[tuple[int, Future[P]]] = deque()  # submitted for preparing, not taken by a worker yet
    submitted = 0
    stopped = False

    def top_up() -> None:
        """Submit preparations until ``ahead`` wait (call with ``lock`` held)."""
        nonlocal submitted
        while submitted < n and len(pending) < ahead:
            pending.append((submitted, prep_pool.submit(prepare, submitted)))
            submitted += 1

    def take() -> tuple[int, Future[P]] | None:
        """The next request in index order (None: all taken, or the stream was closed); tops up the preparations."""
        with lock:
            if stopped or not pending:
                return None
            item = pending.popleft()
            top_up()
            return item

    def worker() -> None:
        while (item := take()) is not None:
            i, fut = item
            try:
                payload = fut.result()
            except BaseException as exc:  # an unreadable video, or cancelled by close
                answers.put((i, False, exc))
                continue
            try:
                answers.put((i, True, send(i, payload)))
            except BaseException as exc:
                answers.put((i, False, exc))

    try:
        with lock:
            top_up()
        for _ in range(conc if n else 0):
            net_pool.submit(worker)
        for _ in range(n):
            i, ok, value = answers.get()
            yield i, (value if ok else fail(i, value))
    finally:
        with lock:
            stopped = True
        prep_pool.shutdown(wait=False, cancel_futures=True)
        net_pool.shutdown(wait=False, cancel_futures=True)


PROCESSING_MS_HEADER = "openai-processing-ms"  # server-side time of a call (OpenAI's API sends it; vLLM does not)


def send(router: ReplicaRouter, kwargs: Mapping[str, Any], *,
         validate: Callable[[Any], None]) -> tuple[Any, float | None]:
    """One attempt: the validated response and the server's time (seconds, from OpenAI's
    ``openai-processing-ms`` header; None when absent, as on vLLM, or not a finite number at least
    0), from the replica with the fewest requests in flight; a refused connection or a replica
    taken out sends the request at once to another live replica (not counted as a retry)."""
    import openai

    tried: list[Replica] = []
    while True:
        rep = router.acquire(exclude=tried)
        try:
            raw = rep.client.chat.completions.with_raw_response.create(**kwargs)
            resp = raw.parse()
            validate(resp)
        except openai.APITimeoutError:
            router.release(rep, ok=None)
            raise
        except openai.APIConnectionError as exc:
            out = router.release(rep, ok=False, down=_refused(exc), error=_short(exc))
            tried.append(rep)
            if out and router.has_alive(exclude=tried):
                continue
            raise
        except openai.APIStatusError as exc:
            server_error = exc.status_code >= 500
            out = router.release(rep, ok=False if server_error else None, error=f"HTTP {exc.status_code}")
            tried.append(rep)
            if server_error and out and router.has_alive(exclude=tried):
                continue
            raise
        except BaseException:
            router.release(rep, ok=None)
            raise
        router.release(rep, ok=True)
        with contextlib.suppress(TypeError, ValueError):  # no header (None), or not a number: no server time
            server = float(raw.headers.get(PROCESSING_MS_HEADER)) / 1000.0
            if math.isfinite(server) and server >= 0.0:  # nan, inf, negative: no server time
                return resp, server
        return resp, None


def _refused(exc: BaseException) -> bool:
    """Whether a connection error is a refused/unreachable connection (the replica is down), not a
    dropped or truncated answer."""
    cause: BaseException | None = exc
    for _ in range(6):
        if cause is None:
            return False
        if isinstance(cause, ConnectionRefusedError) or type(cause).__name__ == "ConnectError":
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _short(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(exc).__name__}" + (f": {type(cause).__name__}: {cause}" if cause is not None else "")
