"""The run context and the end of a run under the module name the pytest plugin imports them
from: :class:`~.run_context.RunContext` (:mod:`.run_context`) and
:func:`~.run_finish.finish_run` (:mod:`.run_finish`). New code imports those modules."""

from .run_context import RunContext, environment, synthetic_manifest
from .run_finish import finish_run
from .run_id import new_run_id
from .run_merge import merge_run_log_lines, merge_run_logs

__all__ = ["RunContext", "environment", "finish_run", "merge_run_log_lines", "merge_run_logs", "new_run_id",
           "synthetic_manifest"]
