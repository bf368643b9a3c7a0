"""The engine: every model call goes through :class:`Engine` (docs/design.md section 2).

It looks each request up in the generation cache by key, sends only what is missing to the
backend (in batches of the backend's size, or as one stream where the backend streams),
commits every usable answer as soon as it arrives, logs every request to the run log, and
counts calls, cache hits, failures, time and tokens in :class:`CallStats`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..errors import ConfigError, PosbiasError
from ..safe_text import redact_text
from .cache import GenerationCache
from .calls import Accept, Backend, Generation, Request, generation_problem
from .run_log import RunLog

# runs that ask again for a key whose answer was unusable; from then on its last unusable answer is
# served as a lost unit without a call (a model that always answers empty is not asked forever)
UNUSABLE_RUNS = 3


@dataclass
class CallStats:
    """Counters of one engine (each xdist worker counts its own).

    ``made``, ``cache_hits`` and ``rereads`` count distinct cache keys per engine call, so
    ``cache_hits`` never exceeds the cache's rows for the run. ``model_seconds`` sums per-call client
    time (overlapping calls can exceed ``wall_seconds``, the time spent waiting on the backend);
    token counters add up the calls made, not cache hits."""

    made: int = 0
    cache_hits: int = 0  # distinct keys first found in the cache in this run (made by an earlier run or another worker)
    rereads: int = 0  # distinct keys asked again within this run (a later sequential look): this run's answers
    failed: int = 0
    model_seconds: float = 0.0
    shared: int = 0  # requests behind a probe result another gate of this run computed (served from memory)
    retries: int = 0
    wall_seconds: float = 0.0
    server_seconds: float = 0.0
    prompt_tokens: int = 0
    visual_tokens: int = 0
    output_tokens: int = 0
    unstored: int = 0  # answers made that the cache could not store (read-only, a refused write): made again next run
    unusable: int = 0  # answers the probe's ``accept`` rejected (made, or served as lost after the cap)

    def snapshot(self) -> dict[str, Any]:
        """The counters as a dict (seconds rounded to microseconds)."""
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def add_calls(self, gens: Sequence[Generation], *, wall: float) -> None:
        """Count a finished batch of calls (caller holds the engine lock)."""
        self.made += len(gens)
        self.failed += sum(1 for g in gens if not g.ok)
        self.retries += sum(max(0, g.attempts - 1) for g in gens)
        self.model_seconds += sum(g.seconds for g in gens)
        self.wall_seconds += wall
        self.server_seconds += sum(g.server_seconds or 0.0 for g in gens)
        self.prompt_tokens += sum(g.prompt_tokens or 0 for g in gens)
        self.visual_tokens += sum(g.visual_tokens or 0 for g in gens)
        self.output_tokens += sum(g.n_tokens for g in gens)

    def since(self, before: Mapping[str, Any]) -> dict[str, Any]:
        """The counters added since ``before`` (an earlier :meth:`snapshot`)."""
        now = self.snapshot()
        return {k: now[k] - before.get(k, 0) for k in now}


class Engine:
    """Deduplicates against the cache, batches by backend, calls, caches, logs. ``backend_for`` resolves
    a model spec to a loaded backend; ``progress(done, total, hits, elapsed)`` follows each batch;
    ``on_keys(keys)`` sees the cache keys of every :meth:`run`, answered from the cache or not
    (``posbias plan`` records which test asked for which request)."""

    def __init__(self, cache: GenerationCache, *, backend_for: Callable[[str], Backend],
                 runlog: RunLog | None = None, batch_size: int | None = None,
                 progress: Callable[[int, int, int, float], None] | None = None,
                 unusable_runs: int = UNUSABLE_RUNS, on_keys: Callable[[list[str]], None] | None = None) -> None:
        if isinstance(unusable_runs, bool) or not isinstance(unusable_runs, int) or unusable_runs < 1:
            raise ConfigError(f"`unusable_runs` must be an integer >= 1 (runs that ask again for an unusable answer); "
                              f"got {unusable_runs!r}")
        self.cache = cache
        self.unusable_runs = unusable_runs
        self._backend_for = backend_for
        self.runlog = runlog
        self.batch_size = batch_size
        self.progress = progress
        self.on_keys = on_keys
        self.stats = CallStats()
        self._lock = threading.Lock()
        self._answered: set[str] = set()  # keys this engine already answered in this run (made or read)
        self._unusable: dict[str, tuple[Generation, str]] = {}  # keys answered unusably in this run: not asked again

    def backend(self, model: str) -> Backend:
        """The loaded backend for a model spec."""
        return self._backend_for(model)

    def keys(self, requests: Sequence[Request]) -> list[str]:
        """Each request's cache key under its backend's identity."""
        return [r.key(self.backend(r.model).identity()) for r in requests]

    def run(self, requests: Sequence[Request], *, probe: str = "", accept: Accept | None = None) -> list[Generation]:
        """Generations for ``requests`` in order; cached ones are not sent again.

        ``accept(request, generation)`` (``scoring/usable.py``) returns None for a usable answer, else
        why not. Only usable answers are cached; an unusable one is returned, logged with its reason
        and asked again by later runs up to ``unusable_runs``, then served without a call (never twice
        in one run, by any xdist worker). A cached answer the rule rejects is asked again."""
        if not requests:
            return []
        keys = self.keys(requests)
        if self.on_keys is not None:
            self.on_keys(keys)
        cached = self.cache.get_many(keys)
        with self._lock:
            served = {k: self._unusable[k] for k in keys if k in self._unusable}
        for k in served:  # rejected in this run: a row a read-only cache could not drop is no answer
            cached.pop(k, None)
        if accept is not None:
            for k, r in zip(keys, requests, strict=True):
                if k in cached and accept(r, cached[k]) is not None:  # stored before this rule held: asked again
                    del cached[k]
            missing = [k for k in dict.fromkeys(keys) if k not in cached and k not in served]
            request_of = dict(zip(keys, requests, strict=True))
            for k, (runs, g, why, this_run) in self.cache.unusable(missing).items():
                if runs >= self.unusable_runs or this_run:  # capped, or another worker of this run got it
                    # named by the rule as it is now (a reason stored under an older rule is kept only where
                    # the answer passes it: a batch rule such as a constant answer rejected it)
                    served[k] = (g, accept(request_of[k], g) or why)
        results = {**cached, **{k: g for k, (g, _why) in served.items()}}
        found = [k for k in dict.fromkeys(keys) if k in cached]  # distinct: a key asked twice is one request
        hits = len(found)
        with self._lock:
            repeat = sum(1 for k in found if k in self._answered)
            self.stats.rereads += repeat
            self.stats.cache_hits += hits - repeat
            self._answered.update(found)
            fresh = [k for k in dict.fromkeys(keys) if k in served and k not in self._unusable]
            self.stats.unusable += len(fresh)
            self._unusable.update((k, served[k]) for k in fresh)
        todo: dict[str, Request] = {}  # each key still to ask, with its first request
        for k, r in zip(keys, requests, strict=True):
            if k in results:  # a cached answer, or an unusable one served as lost
                self._log(probe, k, r, results[k], cache_hit=True, unusable=served[k][1] if k in served else None)
            else:
                todo.setdefault(k, r)
        total = len(todo)
        done = 0
        t_start = time.perf_counter()
        by_model: dict[tuple[str, str, tuple[str, ...]], list[tuple[str, Request]]] = {}
        for k, r in todo.items():
            by_model.setdefault((r.model, r.want, r.letters), []).append((k, r))
        streamed: dict[str, list[tuple[str, Request]]] = {}
        for (model, _want, _letters), items in by_model.items():
            backend = self.backend(model)
            if getattr(backend, "generate_stream", None) is not None:
                streamed.setdefault(model, []).extend(items)  # one stream per model, whatever each request wants
                continue
            size = max(1, self.batch_size or backend.max_batch_size)
            for chunk in (items[i : i + size] for i in range(0, len(items), size)):
                t_call = time.perf_counter()
                gens = self._call(backend, [r for _, r in chunk])
                self._settle(model, chunk, gens, results, probe=probe, accept=accept, put=self.cache.put_many,
                             wall=time.perf_counter() - t_call)
                done += len(chunk)
                if self.progress:
                    self.progress(done, total, hits, time.perf_counter() - t_start)
        for model, items in streamed.items():
            done = self._stream(self.backend(model), model, items, results, probe=probe, done=done, total=total,
                                hits=hits, t_start=t_start, accept=accept)
        return [results[k] for k in keys]

    def reject(self, requests: Sequence[Request], reasons: Sequence[str | None], *, probe: str = "") -> int:
        """Mark cached answers unusable after the fact (a rule over the whole batch, e.g. a constant
        answer): each request with a reason is treated as an unusable answer of :meth:`run` and named
        by a ``rejected`` run-log record. Returns the number of answers newly rejected."""
        if len(requests) != len(reasons):
            raise ConfigError(f"`requests` and `reasons` must have the same length; got {len(requests)} and "
                              f"{len(reasons)}")
        todo: dict[str, tuple[Request, str]] = {}
        for k, r, why in zip(self.keys(requests), requests, reasons, strict=True):
            if why is not None and k not in todo:
                todo[k] = (r, why)
        if not todo:
            return 0
        answers = self.cache.get_many(todo)
        with self._lock:
            new = {k: v for k, v in todo.items() if k not in self._unusable and k in answers}
            self.stats.unusable += len(new)
            self._unusable.update((k, (answers[k], why)) for k, (_r, why) in new.items())
        self.cache.record_unusable((k, r.model, answers[k], why) for k, (r, why) in new.items())
        if self.runlog is not None:
            for k, (_r, why) in new.items():
                self.runlog.write({"kind": "rejected", "probe": probe, "key": k, "reason": why})
        return len(new)

    def _settle(self, model: str, items: Sequence[tuple[str, Request]], gens: Sequence[Generation],
                results: dict[str, Generation], *, probe: str, accept: Accept | None,
                put: Callable[[list[tuple[str, str, Generation]]], None], wall: float) -> None:
        """Commit the usable answers through ``put`` at once (a kill after this loses nothing), record
        the unusable ones in the cache's table, count and log all."""
        reasons = [accept(r, g) if accept is not None and g.ok else None
                   for (_k, r), g in zip(items, gens, strict=True)]
        good = [(k, model, g) for (k, _), g, w in zip(items, gens, reasons, strict=True) if g.ok and w is None]
        if good:
            put(good)
        bad = [(k, model, g, w) for (k, _), g, w in zip(items, gens, reasons, strict=True) if w is not None]
        self.cache.record_unusable(bad)
        with self._lock:
            self.stats.add_calls(gens, wall=wall)
            self._answered.update(k for k, _m, _g in good)
            self.stats.unusable += len(bad)
            self._unusable.update((k, (g, w)) for k, _m, g, w in bad)
        for (k, r), g, w in zip(items, gens, reasons, strict=True):
            results[k] = g
            self._log(probe, k, r, g, cache_hit=False, unusable=w)

    def _stream(self, backend: Backend, model: str, items: list[tuple[str, Request]], results: dict[str, Generation], *,
                probe: str, done: int, total: int, hits: int, t_start: float, accept: Accept | None = None) -> int:
        """Send ``items`` through ``backend.generate_stream`` and settle each answer the moment it
        completes (cache writes are group commits on a writer thread), so a kill loses only the calls
        in flight; the wall time added is the whole stream's. Returns ``done``."""
        reqs = [r for _, r in items]
        seen: set[int] = set()
        writer = _GroupCommit(self.cache)
        t_call = time.perf_counter()
        try:
            for i, g in backend.generate_stream(reqs):  # type: ignore[attr-defined]
                if i in seen or not 0 <= i < len(items):
                    raise PosbiasError(f"backend stream returned request {i} twice or out of range")
                seen.add(i)
                self._settle(model, [items[i]], self._checked([reqs[i]], [g]), results, probe=probe, accept=accept,
                             put=writer.put, wall=0.0)
                done += 1
                if self.progress:
                    self.progress(done, total, hits, time.perf_counter() - t_start)
        except PosbiasError as exc:  # a broken stream: every request it did not answer is a failed call
            why = redact_text(f"{type(exc).__name__}: {exc}")
        else:
            why = "the backend's stream ended without answering this request"
        finally:
            writer.close()  # every answer received is committed before this returns (or raises)
            with self._lock:
                self.stats.add_calls([], wall=time.perf_counter() - t_call)
        unseen = [items[i] for i in range(len(items)) if i not in seen]
        self._settle(model, unseen, [Generation(finish_reason="error", error=why, attempts=0) for _ in unseen], results,
                     probe=probe, accept=None, put=self.cache.put_many, wall=0.0)
        return done + len(unseen)

    def _call(self, backend: Backend, batch: list[Request]) -> list[Generation]:
        """The backend's Generations for ``batch``, a backend error recorded per request; letter scoring
        uses ``score_generations`` (per-request outcomes) where the backend has it, else ``score_options``."""
        try:
            if all(r.want == "letters" for r in batch):
                if (per_request := getattr(backend, "score_generations", None)) is not None:
                    return self._checked(batch, per_request(batch))
                t0 = time.perf_counter()
                scores = backend.score_options(batch, batch[0].letters)
                dt = (time.perf_counter() - t0) / max(1, len(batch))
                return self._checked(batch, [Generation("", 0, "stop", dict(s), dt) for s in scores])
            return self._checked(batch, backend.generate(batch))
        except PosbiasError as exc:  # endpoint errors, unreadable videos: recorded per request, the run goes on
            if len(batch) > 1:  # isolate the failing request: retry one by one
                return [self._call(backend, [r])[0] for r in batch]
            return [Generation(finish_reason="error", error=redact_text(f"{type(exc).__name__}: {exc}"))]

    @staticmethod
    def _checked(batch: Sequence[Request], gens: Sequence[Generation]) -> list[Generation]:
        """The backend's answers, made fail-closed: one per request, a failed one carries no text, and an
        answer its cache row could not hold (:func:`~.calls.generation_problem`: a NaN or +inf log-prob,
        a negative time) is a failed call, never scored."""
        if len(gens) != len(batch):
            raise PosbiasError(f"backend returned {len(gens)} generations for {len(batch)} requests")
        out = []
        for g in gens:
            problem = generation_problem(g.to_dict()) if g.ok else None
            if problem is not None:
                g = replace(g, text="", letter_logprobs=None, finish_reason="error",
                            error=f"the backend's answer is malformed: {problem}")
            elif not g.ok and (g.text or g.letter_logprobs):
                g = replace(g, text="", letter_logprobs=None, error=g.error or "failed call")
            elif not g.ok and not g.error:
                g = replace(g, error="failed call (the backend gave no reason)")
            out.append(g)
        return out

    def _log(self, probe: str, key: str, req: Request, gen: Generation, *, cache_hit: bool,
             unusable: str | None = None) -> None:
        if self.runlog is None:
            return
        rec = {"kind": "request", "probe": probe, "key": key, "cache_hit": cache_hit,
               "request": req.to_log(), "generation": gen.to_dict()}
        if unusable is not None:  # an attempt whose answer the probe's rule rejected (not cached)
            rec["unusable"] = unusable
        self.runlog.write(rec)


class _GroupCommit:
    """Cache writes of a stream on their own thread, each transaction taking every answer queued since
    the previous one; :meth:`close` commits what is queued (also on KeyboardInterrupt) and re-raises
    a write error."""

    def __init__(self, cache: GenerationCache) -> None:
        self.cache = cache
        self._items: list[tuple[str, str, Generation]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="posbias-cache-writer", daemon=True)
        self._thread.start()

    def put(self, items: list[tuple[str, str, Generation]]) -> None:
        with self._cond:
            if self._error is not None:
                raise self._error
            self._items.extend(items)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items and not self._closed:
                    self._cond.wait()
                batch, self._items = self._items, []
                if not batch and self._closed:
                    return
            try:
                self.cache.put_many(batch)
            except BaseException as exc:  # reported to the caller by put/close
                with self._cond:
                    self._error = exc
                return

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()
        if self._error is not None:
            raise self._error
