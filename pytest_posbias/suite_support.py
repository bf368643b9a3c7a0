"""What the ready-made suites are parametrized over (no pytest here: the suites' conftest calls it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .probes.positional import PositionalSpec
from .xdist_support import XDIST_GROUP_PREFIX  # the plugin strips "@posbias:..." from node ids

# Robustness variants of the multi-video paper (§4.2–5.3, appendix C.6), run on the P = 4
# short configurations and marked slow.
POSITIONAL_VARIANTS: dict[str, dict[str, Any]] = {
    "text-boundary": {"boundary": "text"},
    "video-first": {"placement": "video-first"},
    "budget-short": {"budget": "short"},
    "budget-long": {"budget": "long"},
    "equal-attention": {"equal_attention": True},
    "single-target-zero": {"single_target": True, "label_base": 0},
    "single-target-one": {"single_target": True, "label_base": 1},
    "8-frames": {"frames": 8},
    "24-frames": {"frames": 24},
    "full-permutations": {"orders": "full"},
}


def positional_configs(data: str | None, scales: list[int]) -> list[tuple[str, str, int]]:
    """(domain, bucket, P) to test: the synthetic set's, or the groups of ``--posbias-data``."""
    if data:
        out: list[tuple[str, str, int]] = []
        try:
            lines = Path(data).read_text(encoding="utf-8").splitlines()
        except OSError:
            return out
        for line in lines:
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(d, dict) and d.get("type") == "group" and d.get("P") in scales:
                key = (str(d.get("domain")), str(d.get("bucket")), int(d["P"]))
                if key not in out:
                    out.append(key)
        return out
    from .video.synthetic import configurations

    return [(d, b, P) for P in scales for d, b in configurations()]


def positional_spec(settings: dict[str, Any], domain: str, bucket: str, P: int, **variant: Any) -> PositionalSpec:
    """The spec of a configuration with ``[tool.posbias.probes.positional]`` settings applied."""
    from .probes.positional import with_overrides

    spec = with_overrides(PositionalSpec(domain, bucket, P), settings)
    if variant:
        from dataclasses import replace

        spec = replace(spec, **variant)
    return spec


def sampler_pairs(samplers: list[str], budgets: list[int]) -> list[tuple[int, str, str]]:
    """(budget, sampler a, sampler b) for every pair of the configured samplers."""
    import itertools

    return [(b, x, y) for b in budgets for x, y in itertools.combinations(samplers, 2)]


def phase_pairs(S: int) -> list[str]:
    """"s-t" for every pair of the S phases, then "any" (the consensus changes under some phase)."""
    import itertools

    return [f"{a}-{b}" for a, b in itertools.combinations(range(S), 2)] + ["any"]


def with_thresholds(run: Any, **thresholds: float) -> Any:
    """The run context ``run`` (the ``posbias_run`` fixture) with some gates' thresholds replaced,
    for a custom gate that is stricter (or looser) than the suites: e.g.
    ``positional_verdict(with_thresholds(posbias_run, meg=0.01), "meg", model, spec)``.

    The copy shares everything else with ``run`` (engine, generation cache, probe results
    memoized in this process), so the probe behind the stricter gate is not run again. The given
    thresholds take precedence over ``[tool.posbias.thresholds]``, the per-model tables and
    ``--posbias-threshold`` (config.PosbiasConfig.thresholds_for). Unknown gates or values out of
    range are a ConfigError naming them.
    """
    import copy

    from .config import validate_thresholds

    checked = validate_thresholds("with_thresholds()", thresholds)
    out = copy.copy(run)
    out.options = {**run.options, "threshold_overrides": {**(run.options.get("threshold_overrides") or {}), **checked}}
    return out


# --------------------------------------------------------------------------- xdist groups



def probe_group(module: str, function: str, params: dict[str, Any], *, search_frames: int | None = None) -> str | None:
    """The xdist group of a suite test: the tests that share a probe (or its videos) run on one worker.

    Under ``pytest -n N`` the plugin schedules with xdist's ``loadgroup``: a group is one unit of
    work, so a probe shared by several gates (DPB, MEG, coverage and contamination of one
    configuration; the stressor probe behind repetition, amplification and attack at a frame
    count; the phase probe's conditions shared by the order, phase and flip gates) is computed
    by one worker, once, and the worker's in-process caches (decoded frames, the simulated
    model's frame analyses, sentence embeddings) serve every gate of the group. Groups:

    * positional: ``(model, domain, bucket)`` -- P = 2 and P = 4 of a configuration show the same
      videos; a layout variant is a group of its own (its probe shares nothing with the others);
    * phase / order / flip / fusion: ``(model, "phase")``;
    * stressor suite: ``(model, frames)``;
    * property search: the option-order and sampling-phase searches query the phase probe's items
      (phase group), the stressor search the stressor probe's videos at its first frame count
      ``search_frames`` (that stressor group: the clean outputs and decoded frames are reused);
    * anything else (the slot-coverage search, users' own tests): no group (xdist balances it test
      by test).

    ``module`` is the defining module's name (``pytest_posbias.suites.test_positional`` or a
    scaffolded ``test_positional``), ``params`` the test's parameters (``item.callspec.params``).
    Returns None for a test that shares no probe with another.
    """
    suite = module.rsplit(".", 1)[-1]
    model = str(params.get("posbias_model", ""))
    if suite == "test_positional":
        if "positional_variant_config" in params:
            (d, b, _P), variant = params["positional_variant_config"]
            return f"{XDIST_GROUP_PREFIX}positional|{model}|{d}-{b}|{variant}"
        cfg = params.get("positional_config") or params.get("positional_config_p4")
        if not cfg:
            return None
        d, b, _P = cfg
        return f"{XDIST_GROUP_PREFIX}positional|{model}|{d}-{b}"
    if suite == "test_phase_order":
        return f"{XDIST_GROUP_PREFIX}phase|{model}"
    if suite == "test_stressors":
        if "decoding_setting" in params:  # a decoding sweep setting is a probe of its own
            return None
        frames = params.get("stressor_frames")
        return f"{XDIST_GROUP_PREFIX}stressor|{model}|{frames if frames is not None else 'first'}"
    if suite == "test_search":
        prop = params.get("prop") or {"test_search_option_order": "order", "test_search_sampling_phase": "phase",
                                      "test_search_stressor_repetition": "stressor"}.get(function)
        if prop in ("order", "phase"):
            return f"{XDIST_GROUP_PREFIX}phase|{model}"
        if prop == "stressor":
            return f"{XDIST_GROUP_PREFIX}stressor|{model}|{search_frames if search_frames is not None else 'first'}"
    return None
