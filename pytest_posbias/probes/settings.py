"""Probe settings: the defaults of each probe and the validation of ``[tool.posbias.probes.*]``.

Defaults follow the papers (multi-video paper, phase paper, VideoSTF: see each probe's module).
Sample sizes (groups, items, videos) are the group-sequential design's maximum sample sizes, from
the calibration table in docs/calibration.md; a gate usually stops at 1/4 or 1/2 of them. Each
setting is checked when pytest starts, before any model call, against the range where its gate
still measures something and the backends accept it (each check's message says why).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", str, int)


def _int_ge(lo: int, why: str = "") -> Callable[[str, object], int]:
    """An integer >= ``lo``; ``why`` says what a smaller value would do to the gate (for the message)."""
    def check(where: str, v: object) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{where} must be an integer >= {lo}{f' ({why})' if why else ''}; got {v!r}")
        return int(v)

    return check


def _float_in(lo: float, hi: float, *, lo_open: bool = False, why: str = "") -> Callable[[str, object], float]:
    """A number in [lo, hi] (``lo_open``: in (lo, hi]); ``why`` says what the range is for (for the message)."""
    def check(where: str, v: object) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) \
                or not ((lo < float(v) if lo_open else lo <= float(v)) and float(v) <= hi):
            rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
            raise ConfigError(f"{where} must be a number in {rng}{f' ({why})' if why else ''}; got {v!r}")
        return float(v)

    return check


def _choice(*allowed: T) -> Callable[[str, object], T]:
    """One of ``allowed`` (strings or integers; a bool is never an integer here)."""
    def check(where: str, v: object) -> T:
        if isinstance(v, bool) or v not in allowed:
            raise ConfigError(f"{where} must be one of {', '.join(map(repr, allowed))}; got {v!r}")
        return allowed[allowed.index(v)]

    return check


def _int_list(allowed: tuple[int, ...], why: str = "") -> Callable[[str, object], list[int]]:
    """A non-empty list of integers >= 1 among ``allowed``; ``why`` says what the range is for (for the message)."""
    def check(where: str, v: object) -> list[int]:
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                                       for x in v):
            raise ConfigError(f"{where} must be a non-empty list of integers >= 1; got {v!r}")
        if any(x not in allowed for x in v):
            raise ConfigError(f"{where} values must be among {allowed}{f' ({why})' if why else ''}; got {v!r}")
        return [int(x) for x in v]

    return check


SAMPLERS = ("left", "midpoint", "endpoint", "fps")
PRESETS = ("qwen-vl-utils", "lmms-eval", "videostf", "internvl", "vlmevalkit")


def _samplers(where: str, v: object) -> list[str]:
    """Conventions, or preset specs ``"name"`` / ``"name:knob=value,..."`` (checked by the preset);
    at least two distinct ones: the flip gate counts answers that change between samplers, and with
    one sampler nothing can change (a flip rate of 0 by construction)."""
    from ..video.samplers import is_preset_spec, sampler_key

    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"{where} must be a non-empty list of strings; got {v!r}")

    def too_few() -> ConfigError:
        return ConfigError(f"{where} must list at least 2 distinct samplers (the flip gate compares answers between "
                           f"them; with one, nothing can flip); got {v!r}")

    if len(set(v)) < 2:
        raise too_few()
    # a sampler is its preset and knob values: 'fps=2' and 'fps=2.0', or knobs in another order, are one sampler
    distinct: set[tuple[str, str]] = set()
    for x in v:
        if x in SAMPLERS:
            distinct.add((x, ""))
            continue
        if not is_preset_spec(x):
            raise ConfigError(f"{where} values must be among {', '.join(SAMPLERS + PRESETS)} "
                              f"(a preset may add ':knob=value,...'); got {x!r}")
        try:
            distinct.add(sampler_key(x))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if len(distinct) < 2:
        raise too_few()
    return list(v)


Check = Callable[[str, object], Any]

# probe -> setting -> (default, check)
_SETTINGS: dict[str, dict[str, tuple[Any, Check]]] = {
    "positional": {
        "groups": (48, _int_ge(2)),
        "scales": ([2, 4], _int_list((2, 4))),
        "frames_short": (16, _int_ge(1)),
        "frames_long": (24, _int_ge(1)),
        "resolution": (448, _int_ge(16)),
        "temperature": (0.9, _float_in(0.0, 2.0, why="0 is greedy; OpenAI-compatible servers accept at most 2")),
        "top_p": (1.0, _float_in(0.0, 1.0, lo_open=True, why="nucleus sampling keeps the smallest set of tokens whose "
                                 "probability reaches top_p: 0 keeps none, and the backends reject it")),
        "max_new_tokens": (512, _int_ge(8)),
        "boundary": ("black", _choice("black", "text")),
        "placement": ("prompt-first", _choice("prompt-first", "video-first")),
        "budget": ("base", _choice("short", "base", "long")),
        "orders": ("cyclic", _choice("cyclic", "full")),
        "label_base": (0, _choice(0, 1)),
    },
    "phase": {
        "items": (60, _int_ge(2)),
        "equivalence_items": (240, _int_ge(2)),
        "budgets": ([8], _int_list((4, 8, 16, 32))),
        "phases": (3, _int_ge(2, "the phase gate counts answers that change between sampling phases: with one phase "
                                 "nothing can change")),
        "budget": (8, _int_ge(1)),
        "orderings": (10, _int_ge(2, "the order gate counts answers that change between option orderings: with one "
                                     "ordering nothing can change, a flip rate of 0 by construction")),
        "samplers": (list(SAMPLERS), _samplers),
        "resolution": (360, _int_ge(16)),
        "max_new_tokens": (4, _int_ge(1)),
    },
    "stressor": {
        "videos": (64, _int_ge(2)),
        "frames": ([16], _int_list((4, 8, 16, 24, 32), why="Replace 2 copies 2 frames over 2 others and Delete 2 "
                                   "must leave frames to show: fewer than 4 frames stop the probe, and Reverse or "
                                   "Shuffle of 1 frame changes nothing")),
        "trials": (30, _int_ge(1)),
        "attack_cap": (30, _int_ge(1)),
        "max_new_tokens": (500, _int_ge(8)),
        "resolution": (448, _int_ge(16)),
    },
    # property search: items per property, query budgets, the stressor space
    "search": {
        "items": (24, _int_ge(1)),
        "videos": (8, _int_ge(2)),
        "groups": (4, _int_ge(1)),
        "budget": (30, _int_ge(1)),
        "shrink_budget": (60, _int_ge(0)),
        "slow_budget": (100, _int_ge(1)),
        "max_edits": (2, _int_ge(1)),
        "max_frames": (4, _int_ge(1)),
        "max_denominator": (12, _int_ge(2, "phases p/q with q <= 1 are phase 0 alone, the unperturbed reference: "
                                           "the phase search would have nothing to perturb")),
    },
}
SCHEMA: dict[str, dict[str, Check]] = {p: {k: c for k, (_d, c) in t.items()} for p, t in _SETTINGS.items()}
DEFAULTS: dict[str, dict[str, Any]] = {p: {k: d for k, (d, _c) in t.items()} for p, t in _SETTINGS.items()}


def validate_probe_settings(name: str, table: object, *, where: str) -> dict[str, Any]:
    """Validate one ``[tool.posbias.probes.<name>]`` table against the probe's schema."""
    if name not in SCHEMA:
        raise ConfigError(f"{where}: unknown probe {name!r}; known probes: {', '.join(SCHEMA)}")
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table")
    out: dict[str, Any] = {}
    for k, v in table.items():
        if k not in SCHEMA[name]:
            raise ConfigError(f"{where}: unknown key {k!r}; known keys: {', '.join(SCHEMA[name])}")
        out[k] = SCHEMA[name][k](f"{where}.{k}", v)
    return out


def spec_kwargs(probe: str, spec_type: type[DataclassInstance], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of ``probe`` (its :data:`SCHEMA` keys) that are fields of its spec dataclass
    ``spec_type``, a list as a tuple (the specs are frozen); a field the settings lack keeps its default."""
    return {f.name: tuple(v) if isinstance(v := settings[f.name], list) else v for f in fields(spec_type)
            if f.name in settings and f.name in SCHEMA[probe]}


def settings_for(name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults of probe ``name`` updated with validated overrides."""
    return {**DEFAULTS[name], **(overrides or {})}
