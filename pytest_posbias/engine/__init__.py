"""The engine layer: every model call goes through here (docs/design.md section 2).

* :mod:`.calls` — what a call is: :class:`Request` (its key names everything that can change
  the output), :class:`Generation`, :class:`Decoding` and the :class:`Backend` protocol;
* :mod:`.cache` — :class:`GenerationCache`, key -> generation in SQLite shared by xdist workers;
* :mod:`.run_log` — :class:`RunLog`, the versioned JSONL run log, and its readers;
* :mod:`.execution` — :class:`Engine`, which deduplicates against the cache, batches by
  backend, calls, caches and logs, and :class:`CallStats`, its counters.

The names below are the layer's API; probes, backends and the report import them from here.
"""

from .. import SCHEMA_VERSION
from .cache import GenerationCache
from .calls import WANTS, Accept, Backend, Decoding, Generation, Request
from .execution import UNUSABLE_RUNS, CallStats, Engine
from .run_log import (
    RunLog,
    RunLogLines,
    gc_paused,
    read_run_header,
    read_run_log,
    read_run_log_lines,
    reference_id,
    run_log_references,
)

__all__ = [
    "SCHEMA_VERSION",
    "UNUSABLE_RUNS",
    "WANTS",
    "Accept",
    "Backend",
    "CallStats",
    "Decoding",
    "Engine",
    "Generation",
    "GenerationCache",
    "Request",
    "RunLog",
    "RunLogLines",
    "gc_paused",
    "read_run_header",
    "read_run_log",
    "read_run_log_lines",
    "reference_id",
    "run_log_references",
]
