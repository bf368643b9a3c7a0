"""Parametrization of the ready-made suites from the run's options and data."""

from __future__ import annotations

import re

import pytest

from pytest_posbias.models.registry import model_label
from pytest_posbias.plugin import posbias_config, suite_options
from pytest_posbias.probes.settings import settings_for
from pytest_posbias.suite_support import (
    POSITIONAL_VARIANTS,
    phase_pairs,
    positional_configs,
    sampler_pairs,
)


def _id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:-]+", "-", text)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    opts = suite_options(metafunc.config)
    names = metafunc.fixturenames
    if "posbias_model" in names:
        metafunc.parametrize("posbias_model", opts["models"], ids=[_id(model_label(m)) for m in opts["models"]], scope="session")
    pos_settings = settings_for("positional", posbias_config(metafunc.config).probes.get("positional"))
    scales = pos_settings["scales"]
    if "positional_config" in names:
        configs = positional_configs(opts["data"], scales)
        metafunc.parametrize("positional_config", configs, ids=[f"{d}-{b}-P{P}" for d, b, P in configs])
    if "positional_config_p4" in names:
        configs = [c for c in positional_configs(opts["data"], scales) if c[2] == 4]
        metafunc.parametrize("positional_config_p4", configs, ids=[f"{d}-{b}-P{P}" for d, b, P in configs])
    if "positional_variant_config" in names:
        configs = [c for c in positional_configs(opts["data"], scales) if c[2] == 4 and c[1] == "short"]
        grid = [(c, v) for c in configs for v in POSITIONAL_VARIANTS]
        metafunc.parametrize("positional_variant_config", grid, ids=[f"{d}-{b}-P{P}-{v}" for (d, b, P), v in grid])
    ph = settings_for("phase", posbias_config(metafunc.config).probes.get("phase"))
    if "sampler_pair" in names:
        pairs = sampler_pairs(ph["samplers"], ph["budgets"])
        metafunc.parametrize("sampler_pair", pairs, ids=[f"{a}-vs-{b}@{bud}f" for bud, a, b in pairs])
    if "phase_pair" in names:
        pp = phase_pairs(ph["phases"])
        metafunc.parametrize("phase_pair", pp, ids=[f"phase-{p}" for p in pp])
    stz = settings_for("stressor", posbias_config(metafunc.config).probes.get("stressor"))
    if "stressor_frames" in names:
        metafunc.parametrize("stressor_frames", stz["frames"], ids=[f"{f}f" for f in stz["frames"]])
    if "stressor_name" in names:
        from pytest_posbias.video.stressors import STRESSORS

        metafunc.parametrize("stressor_name", list(STRESSORS))
    if "decoding_setting" in names:
        from pytest_posbias.probes.stressor import DECODING_SWEEP

        metafunc.parametrize("decoding_setting", list(DECODING_SWEEP))
