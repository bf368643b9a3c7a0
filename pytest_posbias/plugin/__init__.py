"""The pytest plugin (entry point ``posbias = pytest_posbias.plugin``): options, the suites'
fixtures, verdict transport, progress on the terminal, the run-level decision and summary.

This package is the only code outside the suites that imports pytest; :mod:`.core` holds the plugin
object, whose hooks hand each job to its module. Everything else is delegated to core modules that
also run from the CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ..config import load_pyproject
from ..errors import ConfigError
from .core import PosbiasPlugin, make_plugin
from .fixtures import posbias_gate, posbias_run, record_verdict
from .options import add_options, add_short_aliases
from .options import options as suite_options  # not `options`: the name of the submodule
from .state import CALLS_KEY, PLUGIN_KEY, VERDICT_KEY, collected_verdicts, plugin_active, plugin_of, posbias_config
from .terminal import progress_writer

pytest_addoption = add_options  # the hook: every ``--posbias-*`` option


def pytest_configure(config: pytest.Config) -> None:
    """Read ``[tool.posbias]``, register the run's plugin object (:class:`.core.PosbiasPlugin`) and
    run its start-of-run checks (a usage error stops the run before collection)."""
    try:
        pcfg = load_pyproject(Path(str(config.rootpath)) / "pyproject.toml")
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    plugin = make_plugin(config, pcfg)
    config.stash[PLUGIN_KEY] = plugin
    config.pluginmanager.register(plugin, "posbias-run")
    plugin.start()


__all__ = ["CALLS_KEY", "VERDICT_KEY", "PosbiasPlugin", "add_short_aliases", "collected_verdicts",
           "plugin_active", "plugin_of", "posbias_config", "posbias_gate", "posbias_run", "progress_writer",
           "pytest_addoption", "pytest_configure", "record_verdict", "suite_options"]
