"""A stand-in for the pytest config the plugin's functions read, for the unit tests that call
them directly instead of through a pytester run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_posbias.config import PosbiasConfig, parse_config
from pytest_posbias.plugin.state import PLUGIN_KEY, PluginState


class FakeConfig:
    """What the plugin reads of a ``pytest.Config``: ``getoption`` (the given options, else the
    default), ``stash`` holding the run's :class:`PluginState`, ``rootpath``, ``invocation_params``, ``args_source``,
    ``option`` (``dist``, ``maxfail``, ...), ``pluginmanager.get_plugin`` and the verbosity."""

    def __init__(self, root: Path, options: dict[str, Any], table: dict[str, Any] | None, run_id: str,
                 plugins: dict[str, Any], workerinput: dict[str, Any] | None, **option_attrs: Any) -> None:
        self._options = options
        self.rootpath = root
        self.inipath = None
        self.invocation_params = SimpleNamespace(args=(), dir=root)
        self.args_source = pytest.Config.ArgsSource.INVOCATION_DIR  # no test path given
        self.option = SimpleNamespace(**{"dist": "no", "maxfail": 0, **option_attrs})
        self.pluginmanager = SimpleNamespace(get_plugin=plugins.get)
        self.stash = pytest.Stash()
        if workerinput is not None:
            self.workerinput = workerinput
        pcfg = (PosbiasConfig() if table is None
                else parse_config(table, source=f"{root / 'pyproject.toml'} [tool.posbias]"))
        self.stash[PLUGIN_KEY] = PluginState(self, pcfg, run_id)  # type: ignore[arg-type]

    def getoption(self, name: str, default: Any = None) -> Any:
        return self._options.get(name, default)

    def get_verbosity(self) -> int:
        return int(self._options.get("verbose", 0))


@pytest.fixture
def fake_config(tmp_path: Path) -> Callable[..., Any]:
    """``fake_config(options, table, run_id=..., plugins=..., workerinput=..., **option_attrs)``: a
    :class:`FakeConfig` rooted at ``tmp_path``; ``table`` is the project's ``[tool.posbias]`` (None:
    a project without one)."""

    def make(options: dict[str, Any] | None = None, table: dict[str, Any] | None = None, *, run_id: str = "run-1",
             plugins: dict[str, Any] | None = None, workerinput: dict[str, Any] | None = None,
             **option_attrs: Any) -> Any:
        return FakeConfig(tmp_path, dict(options or {}), table, run_id, dict(plugins or {}), workerinput,
                          **option_attrs)

    return make
