"""The run context shared by the suites, and what happens when a run finishes.

The plugin creates one :class:`RunContext` per pytest process (the controller, or
each xdist worker) and calls :func:`finish_run` on the controller at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def finish_run(
    *,
    config_rootdir: Path,
    options: Mapping[str, Any],
    verdict_rows: Sequence[Mapping[str, Any]],
    calls: Mapping[str, Any],
    terminal: Any = None,
) -> None:
    """Merge the run logs of this run and render the report (nothing to do without a run)."""
    return None
