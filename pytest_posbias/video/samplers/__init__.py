"""Harness sampler presets: the frame indices deployed evaluation code requests.

A preset spec is ``"name"`` (the budget goes to upstream's frame-count argument, the rest
at upstream's defaults) or ``"name:knob=value,knob=value"`` with upstream's own knobs, e.g.
``"qwen-vl-utils:fps=1,max_frames=64"``. Each preset states the upstream version/commit it
follows (``posbias samplers`` lists them); returned indices carry a provenance record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError
from . import internvl, lmms, qwen, vlmevalkit
from .base import Knob, SampledIndices, Sampler, parse_knobs, window


def _videostf(T: int, b: int, *, fps: float | None, start: float | None, end: float | None,
              knobs: dict[str, Any]) -> SampledIndices:
    """VideoSTF uniform sampling: ``np.linspace(0, T−1, b, dtype=int)`` (truncation) on the
    (window-cut) clip."""
    lo, hi = window(T, fps, start, end)
    rel = np.linspace(0, hi - lo, b, dtype=int)
    return SampledIndices([lo + int(r) for r in rel], {"sampler": "videostf", "knobs": {},
                                                       "upstream": VIDEOSTF_UPSTREAM})


VIDEOSTF_UPSTREAM = ("VideoSTF paper's uniform sampling, np.linspace(0, T-1, n, dtype=int) (not checked against "
                     "released code)")


@dataclass(frozen=True)
class Preset:
    """A harness preset: name, sampler function, knobs and the upstream source it follows."""

    name: str
    sample: Sampler
    knobs: dict[str, Knob]
    upstream: str


PRESETS: dict[str, Preset] = {
    qwen.NAME: Preset(qwen.NAME, qwen.qwen_indices, qwen.KNOBS, qwen.UPSTREAM),
    lmms.NAME: Preset(lmms.NAME, lmms.lmms_indices, lmms.KNOBS, lmms.UPSTREAM),
    "videostf": Preset("videostf", _videostf, {}, VIDEOSTF_UPSTREAM),
    internvl.NAME: Preset(internvl.NAME, internvl.internvl_indices, internvl.KNOBS, internvl.UPSTREAM),
    vlmevalkit.NAME: Preset(vlmevalkit.NAME, vlmevalkit.vlmevalkit_indices, vlmevalkit.KNOBS, vlmevalkit.UPSTREAM),
}


def parse_spec(spec: str) -> tuple[Preset, dict[str, Any]]:
    """``"name"`` or ``"name:k=v,..."`` → (preset, knob values); errors name the preset and knob."""
    if not isinstance(spec, str):
        raise ConfigError(f"a sampler preset spec must be a string; got {spec!r}")
    name, colon, rest = spec.partition(":")
    if name not in PRESETS:
        raise ConfigError(f"unknown sampler preset {name!r}; presets: {', '.join(PRESETS)}")
    preset = PRESETS[name]
    return preset, (parse_knobs(name, rest, preset.knobs) if colon else {})


def sampler_key(spec: str) -> tuple[str, str]:
    """One key per sampler however it is spelled: a convention's name, or a preset with its knob
    values (``fps=2`` and ``fps=2.0``, knobs in any order, are one sampler)."""
    if not is_preset_spec(spec):
        return spec, ""
    preset, knobs = parse_spec(spec)
    return preset.name, repr(sorted(knobs.items()))


def is_preset_spec(spec: str) -> bool:
    """Whether ``spec`` names a preset (its knobs are not checked here)."""
    return isinstance(spec, str) and spec.partition(":")[0] in PRESETS


def preset_indices(spec: str, T: int, b: int, *, fps: float | None = None, start: float | None = None,
                   end: float | None = None) -> SampledIndices:
    """Indices of preset ``spec`` for a ``T``-frame clip at budget ``b`` (see each preset)."""
    preset, knobs = parse_spec(spec)
    return preset.sample(T, b, fps=fps, start=start, end=end, knobs=knobs)
