"""The engine layer: every model call goes through here (docs/design.md section 2): what a call is
(:mod:`.calls`), the generation cache (:mod:`.cache`), the run log (:mod:`.run_log`) and the
:class:`Engine` (:mod:`.execution`). The names below are the layer's API.
"""

from .. import SCHEMA_VERSION
from .cache import GenerationCache
from .calls import Backend, Decoding, Generation, Request
from .execution import CallStats, Engine
from .run_log import RunLog, RunLogLines, gc_paused, read_run_header, read_run_log, reference_id, run_log_references

__all__ = [
    "SCHEMA_VERSION", "Backend", "CallStats", "Decoding", "Engine", "Generation", "GenerationCache", "Request",
    "RunLog", "RunLogLines", "gc_paused", "read_run_header", "read_run_log", "reference_id", "run_log_references",
]
