"""The run log: a versioned JSONL file, a header first, then one record per request (frames,
composition, generation, cache hit or miss), probe observations and verdicts. The report is
rendered from it alone (docs/design.md section 2).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import SCHEMA_VERSION
from ..errors import ConfigError
from ..safe_text import json_finite, redact_text, strict_json


def _json_default(o: Any) -> Any:
    """A JSON value for ``o`` (``to_dict()``, sets, numpy values) as strict JSON data
    (:func:`~pytest_posbias.safe_text.json_finite`), numpy keys and values included."""
    if hasattr(o, "to_dict"):
        return json_finite(o.to_dict(), _json_default)
    if isinstance(o, (set, frozenset, tuple)):
        return json_finite(list(o), _json_default)
    if isinstance(o, (np.generic, np.ndarray)):
        return json_finite(o.tolist(), _json_default)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


class RunLog:
    """Append-only JSONL run log: ``{"kind": "header", "schema_version": ...}`` first, then records,
    each line flushed as written (a crash loses at most the line in flight)."""

    def __init__(self, path: str | Path, header: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._references: set[str] = set()  # ids of the reference records this log holds
        self._fh = self.path.open("a", encoding="utf-8")
        if self.path.stat().st_size == 0:
            self.write({"kind": "header", "schema_version": SCHEMA_VERSION, **header})

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as a line of strict JSON (NaN/inf become null), credentials inside any URL
        it quotes redacted (an error message naming the request URL with its user-info)."""
        try:  # the common case has no NaN/inf: serialised directly, without a recursive cleaned copy
            line = json.dumps(record, sort_keys=True, default=_json_default, allow_nan=False)
        except (ValueError, TypeError):  # NaN/inf; a dict mixing int and str keys (sort_keys cannot order it)
            line = strict_json(dict(record), sort_keys=True, default=_json_default)
        if "://" in line:  # a URL ends at a quote, so each is redacted inside its JSON string
            line = redact_text(line)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def reference(self, texts: Sequence[str]) -> str:
        """The :func:`reference_id` of a video's reference texts, written once per log as a ``reference``
        record: observations name it by id, so the log grows with the data, not observations × data."""
        rid = reference_id(texts)
        with self._lock:
            if rid in self._references:
                return rid
            self._references.add(rid)
        self.write({"kind": "reference", "id": rid, "texts": list(texts)})
        return rid

    def close(self) -> None:
        """Flush, fsync and close the file."""
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
    """The cyclic garbage collector off while a run log's many records are built: they are acyclic
    dicts a collection cannot free, yet every generation-2 pass would walk them all."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_run_log(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Header and records of a run log; a line that is not UTF-8 or not JSON (a torn last line) is
    skipped; ConfigError when there is no header or its schema is not this one."""
    lines = RunLogLines(path)
    with Path(path).open("rb") as fh, gc_paused():
        lines.feed(fh)
    header, pairs = lines.result()
    return header, [r for r, _ in pairs]


def read_run_header(path: str | Path) -> dict[str, Any]:
    """The header of a run log (its first line), without parsing the records; a log whose first
    line is not a supported header is read whole, so it fails as :func:`read_run_log` does."""
    with Path(path).open("rb") as fh:  # bytes: a later line that is not UTF-8 is no concern of the header's
        first = next((line for line in fh if line.strip()), b"")
    with contextlib.suppress(UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        rec = json.loads(first.decode("utf-8"))
        if isinstance(rec, dict) and rec.get("kind") == "header" and rec.get("schema_version") == SCHEMA_VERSION:
            return rec
    return read_run_log(path)[0]


class RunLogLines:
    """A run log's header and records from its lines fed in order (str or bytes): an empty line, one
    that is not UTF-8 or not JSON (a torn or damaged line, or one nested too deeply to parse) is
    skipped; the first header is the header."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.header: dict[str, Any] | None = None
        self.records: list[tuple[dict[str, Any], str]] = []

    def feed(self, lines: Iterable[str | bytes]) -> None:
        """Take the next lines of the log (see the class)."""
        for raw in lines:
            try:
                line = (raw.decode("utf-8") if isinstance(raw, bytes) else raw).strip()
                rec = json.loads(line) if line else None
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # a damaged or torn line (or one
                continue  # nested too deeply for the parser)
            if not isinstance(rec, dict):
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
            raise ConfigError(f"{self.path}: run log schema version {self.header.get('schema_version')} is not "
                              f"supported (expected {SCHEMA_VERSION})")
        return self.header, self.records

