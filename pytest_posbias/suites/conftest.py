"""Parametrization of the ready-made suites from the run's options and data.

The one copy of the suites' hooks: pytest loads it as a conftest when it collects this package
(``pytest --pyargs pytest_posbias.suites``); a folder made by ``posbias init`` (and this repository's
``suites/``) re-exports the four hooks from its own ``conftest.py``. The suites' markers are
registered here, where the suites are collected, so a project without the suites keeps its own
marker set under ``--strict-markers``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from pytest_posbias.gate_registry import SuiteSpec, markers, suite_of_module
from pytest_posbias.plugin import plugin_active, posbias_config, suite_options
from pytest_posbias.probes.settings import settings_for
from pytest_posbias.run.suite_params import (
    POSITIONAL_VARIANTS,
    model_id,
    phase_pairs,
    positional_configs,
    sampler_pairs,
)

_MANIFESTS: dict[tuple[str, int, int], Any] = {}


def _manifest(config: pytest.Config) -> Any:
    """The validated ``--posbias-data`` manifest (loaded once per file version), or None for the synthetic set."""
    from pytest_posbias.data.manifest import load_manifest
    from pytest_posbias.errors import PosbiasError

    data = suite_options(config).data
    if not data:
        return None
    p = Path(str(data))
    try:
        st = p.stat()
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        if key not in _MANIFESTS:
            _MANIFESTS[key] = load_manifest(p)
        return _MANIFESTS[key]
    except (OSError, PosbiasError):
        return None  # the plugin has already stopped the run with a usage error naming the file


def _parametrize_or_skip(metafunc: pytest.Metafunc, name: str, values: list[Any], ids: list[str], reason: str) -> None:
    """Parametrize ``name`` with ``values``; with none, one skipped parameter saying ``reason``."""
    if values:
        metafunc.parametrize(name, values, ids=ids)
    else:
        metafunc.parametrize(name, [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-groups")])


def _positional_configs(metafunc: pytest.Metafunc, scales: list[int]) -> list[tuple[str, str, int]]:
    m = _manifest(metafunc.config)
    if m is None:
        return positional_configs(suite_options(metafunc.config).data, scales)
    return [c for c in m.configurations() if c[2] in scales]


def suite_of(item: pytest.Item) -> SuiteSpec | None:
    """The ready-made suite a collected test belongs to: by the module that defines its function (a
    scaffolded ``test_*.py`` imports the suites' functions), else by its file name; None outside them."""
    fn = getattr(item, "function", None)
    module = str(getattr(fn, "__module__", "") or "")
    if module.startswith("pytest_posbias.suites."):
        return suite_of_module(module.rsplit(".", 1)[-1])
    return suite_of_module(Path(str(item.path)).stem)


def pytest_configure(config: pytest.Config) -> None:
    """Register the suites' markers (:func:`~pytest_posbias.gate_registry.markers`) where the suites are collected."""
    for name, doc in markers().items():
        config.addinivalue_line("markers", f"{name}: {doc}")


_POSBIAS_FIXTURES = frozenset({"posbias_run", "posbias_model", "posbias_gate"})
PLUGIN_OFF = "the robustness suites need the pytest-posbias plugin, which this run disabled (-p no:posbias)"


def _skip_without_plugin(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``-p no:posbias``: skip every suite test (and every test using the plugin's fixtures) and
    say so on one line; the rest of the run is untouched."""
    mine = [item for item in items
            if suite_of(item) or _POSBIAS_FIXTURES.intersection(getattr(item, "fixturenames", ()))]
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=PLUGIN_OFF))
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if mine and tr is not None:
        tr.write_line(f"posbias: {len(mine)} tests skipped: {PLUGIN_OFF}", yellow=True)


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: the count on the terminal is of selected tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, with the reason, every selected suite test whose kind of data the manifest does not
    hold (every suite test when the plugin is disabled)."""
    if not plugin_active(config):
        _skip_without_plugin(config, items)
        return
    m = _manifest(config)
    if m is None:
        return
    for item in items:
        suite = suite_of(item)
        kind = suite.data_for(str(getattr(getattr(item, "function", None), "__name__", ""))) if suite else None
        reason = m.missing(kind) if kind else None
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


SEARCH_NEEDS = ("the property search (-m search) needs hypothesis, an optional extra: "
                "pip install 'pytest-posbias[search]', or deselect it with -m 'not search'")


def hypothesis_installed() -> bool:
    """Whether hypothesis (the ``search`` extra) can be imported; it is not imported here."""
    try:
        return importlib.util.find_spec("hypothesis") is not None
    except (ImportError, ValueError):
        return False


def pytest_collection_finish(session: pytest.Session) -> None:
    """A selected property-search test without hypothesis installed: a usage error before any model
    call (the search cannot measure anything without it)."""
    if not plugin_active(session.config) or session.config.getoption("--collect-only", False):
        return
    if any(getattr(getattr(item, "function", None), "__module__", "") == "pytest_posbias.suites.test_search"
           for item in session.items) and not hypothesis_installed():
        raise pytest.UsageError(SEARCH_NEEDS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize the suites' fixtures (models, configurations, sampler and phase pairs, stressors)
    from the run's options and probe settings; nothing with the plugin disabled."""
    if not plugin_active(metafunc.config):
        return  # the suite tests are skipped (pytest_collection_modifyitems)
    opts = suite_options(metafunc.config)
    names = metafunc.fixturenames
    if "posbias_model" in names:
        metafunc.parametrize("posbias_model", list(opts.models), scope="session", ids=list(map(model_id, opts.models)))
    probes = posbias_config(metafunc.config).probes
    scales = settings_for("positional", probes.get("positional"))["scales"]
    data = opts.data
    if "positional_config" in names:
        configs = _positional_configs(metafunc, scales)
        _parametrize_or_skip(metafunc, "positional_config", configs, [f"{d}-{b}-P{P}" for d, b, P in configs],
                             f"{data}: no usable summarization group of size {' or '.join(map(str, scales))}")
    if "positional_config_p4" in names:
        configs = [c for c in _positional_configs(metafunc, scales) if c[2] == 4]
        _parametrize_or_skip(metafunc, "positional_config_p4", configs, [f"{d}-{b}-P{P}" for d, b, P in configs],
                             f"{data}: no usable group of 4 videos (MEG needs P = 4)")
    if "positional_variant_config" in names:
        grid = [(c, v) for c in _positional_configs(metafunc, scales) if c[2] == 4 and c[1] == "short"
                for v in POSITIONAL_VARIANTS]
        _parametrize_or_skip(metafunc, "positional_variant_config", grid,
                             [f"{d}-{b}-P{P}-{v}" for (d, b, P), v in grid],
                             f"{data}: no usable short group of 4 videos for the layout variants")
    ph = settings_for("phase", probes.get("phase"))
    if "sampler_pair" in names:
        pairs = sampler_pairs(ph["samplers"], ph["budgets"])
        metafunc.parametrize("sampler_pair", pairs, ids=[f"{a}-vs-{b}@{bud}f" for bud, a, b in pairs])
    if "phase_pair" in names:
        pp = phase_pairs(ph["phases"])
        metafunc.parametrize("phase_pair", pp, ids=[f"phase-{p}" for p in pp])
    stz = settings_for("stressor", probes.get("stressor"))
    if "stressor_frames" in names:
        metafunc.parametrize("stressor_frames", stz["frames"], ids=[f"{f}f" for f in stz["frames"]])
    if "stressor_name" in names:
        from pytest_posbias.video.stressors import STRESSORS

        metafunc.parametrize("stressor_name", list(STRESSORS))
    if "decoding_setting" in names:
        from pytest_posbias.probes.stressor import DECODING_SWEEP

        metafunc.parametrize("decoding_setting", list(DECODING_SWEEP))
