"""The engine: every model call goes through here (docs/design.md section 2).

* :class:`Request` names everything that can change a model's output; its key is the
  SHA-256 of exactly that (model identity and revision, backend settings, the frames by
  content hash + indices + stressor/composition spec + resolution, the prompt text,
  decoding parameters, and the seed when sampling).
* :class:`GenerationCache` maps key → :class:`Generation` in SQLite (WAL mode, busy
  timeout) so concurrent pytest-xdist workers share it; a finished request is never sent
  again, and a run killed midway keeps every batch it finished (each batch is committed
  as soon as the backend returns it; a backend with ``generate_stream`` streams its
  answers, and each one is committed as it arrives).
* :class:`RunLog` is the versioned JSONL run log: a header first, then one record per
  request (frames, composition, generation, cache hit or miss), probe observations and
  verdicts. The report is rendered from it alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from . import SCHEMA_VERSION
from .errors import ConfigError, PosbiasError
from .video.compose import Part, VideoPart, part_from_dict, parts_key

WANTS = ("text", "letters", "both")
# runs that ask again for a key whose answer was unusable; from then on its last unusable answer is
# served as a lost unit without a call (a model that always answers empty is not asked forever)
UNUSABLE_RUNS = 3
Accept = Callable[["Request", "Generation"], "str | None"]


@dataclass(frozen=True)
class Decoding:
    """Decoding parameters; ``temperature == 0`` means greedy."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ConfigError(f"`max_new_tokens` must be an integer >= 1; got {self.max_new_tokens!r}")
        if not (0.0 <= self.temperature <= 5.0):
            raise ConfigError(f"`temperature` must lie in [0, 5]; got {self.temperature!r}")
        if not (0.0 < self.top_p <= 1.0):
            raise ConfigError(f"`top_p` must lie in (0, 1]; got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ConfigError(f"`top_k` must be an integer >= 0; got {self.top_k!r}")
        if not (0.5 <= self.repetition_penalty <= 3.0):
            raise ConfigError(f"`repetition_penalty` must lie in [0.5, 3]; got {self.repetition_penalty!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Request:
    """One model call. ``meta`` (probe name, item ids, slot order, ...) goes to the run log
    but not into the key: it cannot change the output."""

    model: str
    parts: tuple[Part, ...]
    decoding: Decoding = field(default_factory=Decoding)
    seed: int = 0
    want: str = "text"
    letters: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    replicate: int = 0  # > 0: decode the same input again as a separate call (the re-run floor)

    def __post_init__(self) -> None:
        if self.want not in WANTS:
            raise ConfigError(f"`want` must be one of {WANTS}; got {self.want!r}")
        if self.want != "text" and not self.letters:
            raise ConfigError("`letters` must be given when `want` asks for letter log-probabilities")

    @property
    def prompt_text(self) -> str:
        return "\n".join(p.text for p in self.parts if p.kind == "text")  # type: ignore[union-attr]

    def key_dict(self, identity: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "v": SCHEMA_VERSION,
            "model": dict(identity),
            "parts": parts_key(self.parts),
            "decoding": self.decoding.to_dict(),
            "seed": None if self.decoding.greedy else int(self.seed),
            "want": self.want,
            "letters": list(self.letters),
            **({"replicate": int(self.replicate)} if self.replicate else {}),
        }

    def key(self, identity: Mapping[str, Any]) -> str:
        """SHA-256 of everything that can change the output (seed only when sampling)."""
        blob = json.dumps(self.key_dict(identity), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_log(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "parts": [p.to_dict() for p in self.parts],
            "decoding": self.decoding.to_dict(),
            "seed": self.seed,
            "want": self.want,
            "letters": list(self.letters),
            "meta": dict(self.meta),
            "replicate": self.replicate,
        }

    @classmethod
    def from_log(cls, d: Mapping[str, Any]) -> Request:
        return cls(d["model"], tuple(part_from_dict(p) for p in d["parts"]), Decoding(**d["decoding"]), int(d["seed"]),
                   d["want"], tuple(d.get("letters", ())), dict(d.get("meta", {})), int(d.get("replicate", 0)))


@dataclass(frozen=True)
class Generation:
    """A backend's answer. ``finish_reason`` is ``stop``, ``length`` or ``error``.

    A failed call (``ok`` false) has ``error`` saying what failed and never carries text
    to be scored. ``attempts`` is how many times the backend sent it (retries of transient
    endpoint errors included; 0 when it was never sent).

    Token accounting: ``n_tokens`` is the output tokens; ``prompt_tokens`` the whole prompt
    (from the processor on ``hf``, from the server's ``usage`` on ``openai``), of which
    ``visual_tokens`` are image/video tokens where the backend can tell them apart (``None``
    when unknown). ``input_form`` records how the frames were sent (``video``: one video
    input; ``images``: one image per frame; ``None`` for backends with no choice).
    ``server_seconds`` is the server-side time where the endpoint reports it."""

    text: str = ""
    n_tokens: int = 0
    finish_reason: str = "stop"
    letter_logprobs: Mapping[str, float] | None = None
    seconds: float = 0.0
    error: str | None = None
    attempts: int = 1
    prompt_tokens: int | None = None
    visual_tokens: int | None = None
    input_form: str | None = None
    server_seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.finish_reason != "error"

    def to_dict(self) -> dict[str, Any]:
        lp = None if self.letter_logprobs is None else {k: (None if v == -math.inf else v) for k, v in self.letter_logprobs.items()}
        return {"text": self.text, "n_tokens": self.n_tokens, "finish_reason": self.finish_reason,
                "letter_logprobs": lp, "seconds": self.seconds, "error": self.error, "attempts": self.attempts,
                "prompt_tokens": self.prompt_tokens, "visual_tokens": self.visual_tokens,
                "input_form": self.input_form, "server_seconds": self.server_seconds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Generation:
        lp = d.get("letter_logprobs")
        lp2 = None if lp is None else {k: (-math.inf if v is None else float(v)) for k, v in lp.items()}

        def opt_int(v: Any) -> int | None:
            return None if v is None else int(v)

        ss = d.get("server_seconds")
        return cls(d.get("text", ""), int(d.get("n_tokens", 0)), d.get("finish_reason", "stop"), lp2,
                   float(d.get("seconds", 0.0)), d.get("error"), int(d.get("attempts", 1)),
                   opt_int(d.get("prompt_tokens")), opt_int(d.get("visual_tokens")), d.get("input_form"),
                   None if ss is None else float(ss))


class Backend(Protocol):
    """What the engine needs from a model backend (one per file under ``models/``)."""

    name: str
    max_batch_size: int
    supports_letter_logprobs: bool

    def identity(self) -> Mapping[str, Any]:
        """Model id, revision and settings: everything of the backend that can change an output."""

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """Text (and, for ``want='both'``, letter log-probs) for each request, in order."""

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        """Log-probabilities of each option letter at the answer position, one forward pass each."""

    def close(self) -> None:
        """Release the model."""

    # Optional: ``generate_stream(requests) -> Iterator[tuple[int, Generation]]`` yields each
    # request's index and answer as it completes (any order, each index once); the engine then
    # sends all of a model's requests in one stream instead of batches of ``max_batch_size``.


# --------------------------------------------------------------------------- cache


class GenerationCache:
    """SQLite (WAL) key → Generation; safe for several processes (pytest-xdist workers).

    ``read_only=True`` opens an existing database read-only (``--posbias-cache-mode
    read-only``): answers are read, nothing is written. An answer that cannot be stored (read
    only, or a write the database refuses: a read-only file, a full disk) is not an error of
    the run: it is counted in ``unstored`` (with the first reason in ``unstored_reason``) and
    reported through ``on_unstored(n, reason)``, and the next run makes it again. A cached
    row whose payload is not a valid Generation is a miss (made again, its row replaced),
    counted in ``unreadable``. :func:`.cache_check.check_cache` checks the file before a run."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = bool(read_only)
        self.unstored = 0
        self.unstored_reason = ""
        self.unreadable = 0
        self.on_unstored: Callable[[int, str], None] | None = None
        self._lock = threading.Lock()
        if self.read_only:
            self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0,
                                         check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout=60000")
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        # Switching a new database to WAL takes an exclusive lock that SQLite does not wait for
        # (no busy handler): two xdist workers opening a fresh cache at once got "database is
        # locked". The switch and the schema are made under an exclusive flock on a sidecar file.
        with open(self.path.with_name(self.path.name + ".open-lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._conn.execute("PRAGMA busy_timeout=60000")
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute(
                    "CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                    "created REAL NOT NULL, payload TEXT NOT NULL)"
                )
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def get_many(self, keys: Iterable[str]) -> dict[str, Generation]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, Generation] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                q = f"SELECT key, payload FROM generations WHERE key IN ({','.join('?' * len(chunk))})"
                for k, payload in self._conn.execute(q, chunk):
                    try:
                        out[k] = Generation.from_dict(json.loads(payload))
                    except (ValueError, TypeError, KeyError, AttributeError):  # a damaged row: a miss
                        self.unreadable += 1
        return out

    def put_many(self, items: Iterable[tuple[str, str, Generation]]) -> None:
        """Store answers in one transaction; what cannot be stored is counted (see the class)."""
        rows = [(k, m, time.time(), json.dumps(g.to_dict(), sort_keys=True)) for k, m, g in items]
        if not rows:
            return
        if self.read_only:
            self._not_stored(len(rows), f"the cache {self.path} is open read-only (--posbias-cache-mode read-only)")
            return
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    self._conn.executemany("INSERT OR REPLACE INTO generations VALUES (?, ?, ?, ?)", rows)
                    self._conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:  # read-only file, full disk, I/O error: the answers stand, unstored
                reason = f"the cache {self.path} refused the write ({type(exc).__name__}: {exc})"
            else:
                return
        self._not_stored(len(rows), reason)

    def _not_stored(self, n: int, reason: str) -> None:
        with self._lock:
            self.unstored += n
            self.unstored_reason = self.unstored_reason or reason
        if self.on_unstored is not None:
            self.on_unstored(n, reason)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM generations").fetchone()[0])

    # Unusable answers (an empty description, no option letter, a constant answer: see
    # ``scoring/usable.py``) are never rows of ``generations``. Each run that got one for a key adds 1
    # to that key's ``runs`` in the ``unusable`` table, with the last answer and its reason, so the next
    # run asks again, and a key that reached the cap is served from here as a lost unit without a call.

    def _unusable_table(self) -> None:
        self._conn.execute("CREATE TABLE IF NOT EXISTS unusable (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                           "runs INTEGER NOT NULL, updated REAL NOT NULL, reason TEXT NOT NULL, payload TEXT NOT NULL)")

    def record_unusable(self, items: Iterable[tuple[str, str, Generation, str]]) -> None:
        """Count one more run with an unusable answer for each (key, model, generation, reason), keep
        the answer and the reason, and remove the key from ``generations`` (an answer found unusable
        only after it was stored, or stored by a version that cached it)."""
        rows = [(k, m, time.time(), why, json.dumps(g.to_dict(), sort_keys=True)) for k, m, g, why in items]
        if not rows:
            return
        with self._lock:
            self._unusable_table()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT INTO unusable VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET runs = runs + 1, "
                    "model = excluded.model, updated = excluded.updated, reason = excluded.reason, "
                    "payload = excluded.payload", rows)
                self._conn.executemany("DELETE FROM generations WHERE key = ?", [(r[0],) for r in rows])
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def unusable(self, keys: Iterable[str]) -> dict[str, tuple[int, Generation, str]]:
        """key -> (runs that got an unusable answer, the last one, its reason), for the keys that have any."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, tuple[int, Generation, str]] = {}
        with self._lock:
            self._unusable_table()
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                q = f"SELECT key, runs, payload, reason FROM unusable WHERE key IN ({','.join('?' * len(chunk))})"
                for k, runs, payload, why in self._conn.execute(q, chunk):
                    out[k] = (int(runs), Generation.from_dict(json.loads(payload)), str(why))
        return out

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# --------------------------------------------------------------------------- run log


def _json_default(o: Any) -> Any:
    """A JSON value for ``o``; NaN/inf inside what it converts to (a numpy float32 NaN, an array
    holding NaN, a ``to_dict()`` with NaN) become None too (strict JSON, as :func:`_clean`)."""
    if hasattr(o, "to_dict"):
        return _clean(o.to_dict())
    if isinstance(o, (set, frozenset, tuple)):
        return _clean(list(o))
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return _clean(o.item())
        if isinstance(o, np.ndarray):
            return _clean(o.tolist())
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, float) and not math.isfinite(o):
        return None
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def _clean(o: Any) -> Any:
    """Replace NaN/inf floats by None (strict JSON) recursively, and turn a dict's non-string keys
    into the strings JSON writes for them (``1`` -> ``"1"``, ``True`` -> ``"true"``, a numpy
    ``int64(1)`` -> ``"1"``): ``sort_keys`` cannot order a dict whose keys mix ints and strings, and
    ``json`` takes no numpy scalar as a key."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {(k if isinstance(k, str) else json.dumps(k, default=_json_default)): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


class RunLog:
    """Append-only JSONL run log: ``{"kind": "header", "schema_version": ...}`` first, then records.

    Every line is flushed and fsynced in batches, so a crash loses at most the line in flight.
    """

    def __init__(self, path: str | Path, header: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._references: set[str] = set()  # ids of the reference records this log holds
        self._fh = self.path.open("a", encoding="utf-8")
        if self.path.stat().st_size == 0:
            self.write({"kind": "header", "schema_version": SCHEMA_VERSION, **header})

    def write(self, record: Mapping[str, Any]) -> None:
        try:  # the common case has no NaN/inf: no recursive copy (it was a third of a warm run's logging)
            line = json.dumps(record, sort_keys=True, default=_json_default, allow_nan=False)
        except (ValueError, TypeError):  # NaN/inf; a dict mixing int and str keys (sort_keys cannot order it)
            line = json.dumps(_clean(dict(record)), sort_keys=True, default=_json_default, allow_nan=False)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def reference(self, texts: Sequence[str]) -> str:
        """The id of a reference text (a video's reference sentences), written once per log as
        ``{"kind": "reference", "id": ID, "texts": [...]}``: observations name it by id instead
        of copying it, so the log grows with the data, not with observations × data. The id is
        :func:`reference_id` of the texts, the same in every worker's log (the merge keeps one)."""
        rid = reference_id(texts)
        with self._lock:
            if rid in self._references:
                return rid
            self._references.add(rid)
        self.write({"kind": "reference", "id": rid, "texts": list(texts)})
        return rid

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()


def reference_id(texts: Sequence[str]) -> str:
    """The id of a reference record: the first 24 hex digits of SHA-256 over the texts' JSON."""
    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def run_log_references(records: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The reference texts a run log holds, by id (its ``reference`` records)."""
    return {str(r["id"]): list(r.get("texts") or []) for r in records if r.get("kind") == "reference" and "id" in r}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a run log's tens of thousands of records (acyclic
    dicts) are built: its generation-2 passes over them took three quarters of the parse time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_run_log(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Header and records of a run log; a line that is not JSON (a torn last line) is skipped."""
    header, pairs = read_run_log_lines(path)
    return header, [r for r, _ in pairs]


def read_run_header(path: str | Path) -> dict[str, Any]:
    """The header of a run log (its first line), without parsing the records; a log whose first
    line is not a supported header is read whole, so it fails as :func:`read_run_log` does."""
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    break
                if isinstance(rec, dict) and rec.get("kind") == "header" and rec.get("schema_version") == SCHEMA_VERSION:
                    return rec
                break
    return read_run_log(path)[0]


class RunLogLines:
    """A run log's header and records, from its lines fed in order (whole lines, as written, as
    str or as the file's bytes): an empty line, one that is not UTF-8 or not JSON (a torn last
    line, a damaged block) is skipped; the first header line is the header.
    :func:`read_run_log_lines` feeds a whole file, as the merge of a run's worker logs
    (:func:`~pytest_posbias.run_merge.merge_run_log_lines`) feeds each worker's log."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.header: dict[str, Any] | None = None
        self.records: list[tuple[dict[str, Any], str]] = []

    def feed(self, lines: Iterable[str | bytes]) -> None:
        for raw in lines:
            if isinstance(raw, bytes):
                try:
                    raw = raw.decode("utf-8")
                except UnicodeDecodeError:  # a damaged line: skipped as one that is not JSON is
                    continue
            line = raw.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(rec, dict):  # JSON, but not a record
                continue
            if rec.get("kind") == "header" and self.header is None:
                self.header = rec
            else:
                self.records.append((rec, line))

    def result(self) -> tuple[dict[str, Any], list[tuple[dict[str, Any], str]]]:
        """The header and the records; ConfigError when there is no header or its schema is not this one."""
        if self.header is None:
            raise ConfigError(f"{self.path}: not a posbias run log (no header line)")
        if self.header.get("schema_version") != SCHEMA_VERSION:
            raise ConfigError(f"{self.path}: run log schema version {self.header.get('schema_version')} is not supported "
                              f"(expected {SCHEMA_VERSION})")
        return self.header, self.records


def read_run_log_lines(path: str | Path) -> tuple[dict[str, Any], list[tuple[dict[str, Any], str]]]:
    """:func:`read_run_log` with each record's line as written (the merge copies unchanged lines
    instead of serialising the records again)."""
    lines = RunLogLines(path)
    with Path(path).open("rb") as fh, gc_paused():  # bytes: a line that is not UTF-8 is skipped, not fatal
        lines.feed(fh)
    return lines.result()


# --------------------------------------------------------------------------- engine


@dataclass
class CallStats:
    """Counters of one engine: requests sent (``made``), served from the cache, failed (no
    usable answer after the backend's retries), extra attempts the backend made for transient
    errors (``retries``), model time, and requests shared between gates.

    ``model_seconds`` sums per-call client time (concurrent calls overlap, so it can exceed
    the wall time); ``wall_seconds`` is the elapsed time spent waiting on the backend;
    ``server_seconds`` sums server-side time where the endpoint reports it. Token counters
    add up the calls made (not cache hits): prompt, visual (where known) and output tokens.

    ``made``, ``cache_hits`` and ``rereads`` count distinct cache keys per engine call: a key
    asked for twice in one call is one request, made once or served once from the cache, so
    ``cache_hits`` never exceeds the rows the cache holds for the run's requests. Each process
    counts its own: under pytest-xdist a key that two workers both read from an earlier run's
    cache is a hit in each."""

    made: int = 0
    cache_hits: int = 0  # distinct keys first found in the cache in this run (made by an earlier run or another worker)
    rereads: int = 0  # distinct keys asked again within this run (a later sequential look), answered from this run's own answers
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
        return {"made": self.made, "cache_hits": self.cache_hits, "rereads": self.rereads, "failed": self.failed,
                "model_seconds": round(self.model_seconds, 6), "shared": self.shared, "retries": self.retries,
                "wall_seconds": round(self.wall_seconds, 6), "server_seconds": round(self.server_seconds, 6),
                "prompt_tokens": self.prompt_tokens, "visual_tokens": self.visual_tokens,
                "output_tokens": self.output_tokens, "unstored": self.unstored, "unusable": self.unusable}

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
        now = self.snapshot()
        return {k: now[k] - before.get(k, 0) for k in now}


class Engine:
    """Deduplicates against the cache, batches by backend, calls, caches, logs.

    ``backends`` resolves a model spec to a loaded backend (done once per spec).
    ``progress(done, total, hits)`` is called after each batch when given.
    """

    def __init__(self, cache: GenerationCache, *, backend_for: Callable[[str], Backend],
                 runlog: RunLog | None = None, batch_size: int | None = None,
                 progress: Callable[[int, int, int, float], None] | None = None,
                 unusable_runs: int = UNUSABLE_RUNS) -> None:
        if isinstance(unusable_runs, bool) or not isinstance(unusable_runs, int) or unusable_runs < 1:
            raise ConfigError(f"`unusable_runs` must be an integer >= 1 (runs that ask again for an unusable answer); "
                              f"got {unusable_runs!r}")
        self.cache = cache
        self.unusable_runs = unusable_runs
        self._backend_for = backend_for
        self.runlog = runlog
        self.batch_size = batch_size
        self.progress = progress
        self.stats = CallStats()
        self._lock = threading.Lock()
        self._answered: set[str] = set()  # keys this engine already answered in this run (made or read)
        self._unusable: dict[str, tuple[Generation, str]] = {}  # keys answered unusably in this run: not asked again

    def backend(self, model: str) -> Backend:
        return self._backend_for(model)

    def keys(self, requests: Sequence[Request]) -> list[str]:
        return [r.key(self.backend(r.model).identity()) for r in requests]

    def run(self, requests: Sequence[Request], *, probe: str = "", accept: Accept | None = None) -> list[Generation]:
        """Generations for ``requests`` in order; cached ones are not sent again.

        ``accept(request, generation)`` (the probe's usable-answer rule, ``scoring/usable.py``) returns
        None for a usable answer, else the reason it is not. Only usable answers are cached; an unusable
        one is returned (the probe counts it lost), logged with its reason, counted in the cache's
        ``unusable`` table and asked again by the next run, up to :data:`UNUSABLE_RUNS` runs (the
        engine's ``unusable_runs``), after which its last answer is served without a call. Within a
        run it is not asked again. A cached answer the rule rejects is removed and asked again."""
        if not requests:
            return []
        keys = self.keys(requests)
        cached = self.cache.get_many(keys)
        served: dict[str, tuple[Generation, str]] = {}
        with self._lock:
            served.update((k, self._unusable[k]) for k in keys if k in self._unusable)
        if accept is not None:
            stale: dict[str, tuple[Request, str]] = {}
            for k, r in zip(keys, requests, strict=True):
                if k in cached and k not in stale and (why := accept(r, cached[k])) is not None:
                    stale[k] = (r, why)
            for k in stale:  # stored before this rule held: asked again (a usable answer replaces the row)
                del cached[k]
            missing = [k for k in dict.fromkeys(keys) if k not in cached and k not in served]
            for k, (runs, g, why) in self.cache.unusable(missing).items():
                if runs >= self.unusable_runs:
                    served[k] = (g, why)
        results: dict[str, Generation] = dict(cached)
        results.update((k, g) for k, (g, _why) in served.items())
        todo: dict[str, Request] = {}
        for k, r in zip(keys, requests, strict=True):
            if k not in results and k not in todo:
                todo[k] = r
        found = [k for k in dict.fromkeys(keys) if k in cached]  # distinct keys: a key asked twice in one call is one request
        hits = len(found)
        with self._lock:
            repeat = sum(1 for k in found if k in self._answered)
            self.stats.rereads += repeat
            self.stats.cache_hits += hits - repeat
            self._answered.update(found)
            fresh = [k for k in dict.fromkeys(keys) if k in served and k not in self._unusable]
            self.stats.unusable += len(fresh)
            self._unusable.update((k, served[k]) for k in fresh)
        for k, r in zip(keys, requests, strict=True):
            if k in cached:
                self._log(probe, k, r, cached[k], cache_hit=True)
            elif k in served:
                self._log(probe, k, r, served[k][0], cache_hit=True, unusable=served[k][1])
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
                self._make(backend, model, chunk, results, probe=probe, accept=accept)
                done += len(chunk)
                if self.progress:
                    self.progress(done, total, hits, time.perf_counter() - t_start)
        for model, items in streamed.items():
            done = self._stream(self.backend(model), model, items, results, probe=probe, done=done, total=total,
                                hits=hits, t_start=t_start, accept=accept)
        return [results[k] for k in keys]

    def reject(self, requests: Sequence[Request], reasons: Sequence[str | None], *, probe: str = "") -> int:
        """Mark answers unusable after the fact (a rule over the whole batch, e.g. a constant answer
        across distinct inputs): for each request whose reason is not None, its cached answer is
        removed and counted in the cache's ``unusable`` table (the next run asks again, up to the
        cap), it is served from this run's memory for the rest of the run, and a ``rejected`` record
        names it in the run log. Returns the number of answers newly rejected."""
        if len(requests) != len(reasons):
            raise ConfigError(f"`requests` and `reasons` must have the same length; got {len(requests)} and {len(reasons)}")
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

    def _make(self, backend: Backend, model: str, chunk: Sequence[tuple[str, Request]], results: dict[str, Generation], *,
              probe: str, accept: Accept | None = None) -> int:
        """Make one batch: call the backend, commit the good answers at once (a kill after this loses
        nothing), count, log. Returns the requests sent. ``accept``: see :meth:`run` (an unusable
        answer is not cached)."""
        t_call = time.perf_counter()
        gens = self._call(backend, [r for _, r in chunk])
        wall = time.perf_counter() - t_call
        reasons = [accept(r, g) if accept is not None and g.ok else None for (_k, r), g in zip(chunk, gens, strict=True)]
        good = [(k, model, g) for (k, _), g, w in zip(chunk, gens, reasons, strict=True) if g.ok and w is None]
        self.cache.put_many(good)  # committed now: a kill after this loses nothing
        bad = [(k, model, g, w) for (k, _), g, w in zip(chunk, gens, reasons, strict=True) if w is not None]
        self.cache.record_unusable(bad)
        with self._lock:
            self.stats.add_calls(gens, wall=wall)
            self._answered.update(k for k, _m, _g in good)
            self.stats.unusable += len(bad)
            self._unusable.update((k, (g, w)) for k, _m, g, w in bad)
        for (k, r), g, w in zip(chunk, gens, reasons, strict=True):
            results[k] = g
            self._log(probe, k, r, g, cache_hit=False, unusable=w)
        return len(chunk)

    def _stream(self, backend: Backend, model: str, items: list[tuple[str, Request]], results: dict[str, Generation], *,
                probe: str, done: int, total: int, hits: int, t_start: float, accept: Accept | None = None) -> int:
        """Send ``items`` through ``backend.generate_stream`` (requests issued as slots free up) and
        cache, count and log each generation the moment it completes (cache writes are group
        commits on a writer thread), so a kill loses only the calls in flight. The wall time added is the elapsed time of the whole stream (concurrent
        calls overlap; their summed client time goes to ``model_seconds``). Returns ``done``."""
        reqs = [r for _, r in items]
        seen: set[int] = set()
        writer = _GroupCommit(self.cache)
        t_call = time.perf_counter()
        try:
            for i, g in backend.generate_stream(reqs):  # type: ignore[attr-defined]
                if i in seen or not 0 <= i < len(items):
                    raise PosbiasError(f"backend stream returned request {i} twice or out of range")
                seen.add(i)
                [g] = self._checked([reqs[i]], [g])
                k = items[i][0]
                why = accept(reqs[i], g) if accept is not None and g.ok else None
                if g.ok and why is None:
                    writer.put((k, model, g))  # committed at once (with whatever else arrived meanwhile)
                elif why is not None:
                    self.cache.record_unusable([(k, model, g, why)])
                with self._lock:
                    self.stats.add_calls([g], wall=0.0)
                    if g.ok and why is None:
                        self._answered.add(k)
                    if why is not None:
                        self.stats.unusable += 1
                        self._unusable[k] = (g, why)
                results[k] = g
                self._log(probe, k, reqs[i], g, cache_hit=False, unusable=why)
                done += 1
                if self.progress:
                    self.progress(done, total, hits, time.perf_counter() - t_start)
        except PosbiasError as exc:  # a broken stream: every request it did not answer is a failed call
            why = f"{type(exc).__name__}: {exc}"
        else:
            why = "the backend's stream ended without answering this request"
        finally:
            writer.close()  # every answer received is committed before this returns (or raises)
            with self._lock:
                self.stats.add_calls([], wall=time.perf_counter() - t_call)
        unseen = [items[i] for i in range(len(items)) if i not in seen]
        lost = [Generation(finish_reason="error", error=why, attempts=0) for _ in unseen]
        with self._lock:
            self.stats.add_calls(lost, wall=0.0)
        for (k, r), g in zip(unseen, lost, strict=True):
            results[k] = g
            self._log(probe, k, r, g, cache_hit=False)
        return done + len(lost)

    def _call(self, backend: Backend, batch: list[Request]) -> list[Generation]:
        """The backend's Generations for ``batch``; a backend error is recorded per request.

        Letter scoring goes through ``backend.score_generations(batch)`` where the backend has
        it (per-request outcomes, so one failed request fails alone); else ``score_options``."""
        try:
            want_letters = [r for r in batch if r.want == "letters"]
            if len(want_letters) == len(batch):
                per_request = getattr(backend, "score_generations", None)
                if per_request is not None:
                    return self._checked(batch, per_request(batch))
                t0 = time.perf_counter()
                scores = backend.score_options(batch, batch[0].letters)
                dt = (time.perf_counter() - t0) / max(1, len(batch))
                return [Generation("", 0, "stop", dict(s), dt) for s in scores]
            return self._checked(batch, backend.generate(batch))
        except PosbiasError as exc:  # endpoint errors, unreadable videos: recorded per request, the run goes on
            if len(batch) > 1:  # isolate the failing request: retry one by one
                return [self._call(backend, [r])[0] for r in batch]
            return [Generation(finish_reason="error", error=f"{type(exc).__name__}: {exc}")]

    @staticmethod
    def _checked(batch: Sequence[Request], gens: Sequence[Generation]) -> list[Generation]:
        """The backend's answers, made fail-closed: one per request, and a failed one carries no text."""
        if len(gens) != len(batch):
            raise PosbiasError(f"backend returned {len(gens)} generations for {len(batch)} requests")
        out = []
        for g in gens:
            if not g.ok and (g.text or g.letter_logprobs):
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
    """Cache writes of a stream on their own thread, in group commits: each transaction takes
    every answer queued since the previous one, so a commit never waits for the next answer
    and the caller's thread never waits for the disk. :meth:`close` commits what is queued
    (also on KeyboardInterrupt) and re-raises a write error."""

    def __init__(self, cache: GenerationCache) -> None:
        self.cache = cache
        self._items: list[tuple[str, str, Generation]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="posbias-cache-writer", daemon=True)
        self._thread.start()

    def put(self, item: tuple[str, str, Generation]) -> None:
        with self._cond:
            if self._error is not None:
                raise self._error
            self._items.append(item)
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
        if self._items and self._error is None:  # the writer stopped early: commit here
            self.cache.put_many(self._items)
            self._items = []
        if self._error is not None:
            raise self._error


def video_parts(req: Request) -> list[VideoPart]:
    return [p for p in req.parts if isinstance(p, VideoPart)]
