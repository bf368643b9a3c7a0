"""Shared pieces of the harness sampler presets: the indices type that carries its
provenance record, knob parsing for ``"name:knob=value,..."`` specs, and the MVBench-style
seconds window used where an upstream harness has no window of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError, FrameRangeError


class SampledIndices(list[int]):
    """Frame indices (a plain ``list`` of ints) plus ``record``: the preset name, its knobs,
    the upstream version/commit it follows and which arithmetic produced the indices
    (``"torch"`` or ``"emulation"`` for qwen-vl-utils). :class:`FrameSpec` copies the record
    into the run log so a report reader can reproduce the indices."""

    record: dict[str, Any]

    def __init__(self, values: Iterable[int], record: Mapping[str, Any]) -> None:
        super().__init__(int(v) for v in values)
        self.record = dict(record)


@dataclass(frozen=True)
class Knob:
    """One upstream option of a preset: its type, default and what it means upstream."""

    name: str
    kind: str  # "float" (> 0), "int" (>= 1), "bool", or "choice"
    default: Any
    help: str
    choices: tuple[str, ...] = field(default=())

    def parse(self, preset: str, raw: str) -> Any:
        """The knob's value from its spec text; a :class:`ConfigError` names preset, knob and allowed values."""
        where = f"sampler {preset!r} knob `{self.name}`"
        if self.kind == "bool":
            low = raw.strip().lower()
            if low in ("true", "1", "yes"):
                return True
            if low in ("false", "0", "no"):
                return False
            raise ConfigError(f"{where} must be true or false; got {raw!r}")
        if self.kind == "choice":
            if raw not in self.choices:
                raise ConfigError(f"{where} must be one of {', '.join(self.choices)}; got {raw!r}")
            return raw
        try:
            v: float = int(raw) if self.kind == "int" else float(raw)
        except ValueError:
            raise ConfigError(f"{where} must be {'an integer' if self.kind == 'int' else 'a number'}; "
                              f"got {raw!r}") from None
        if self.kind == "int" and v < 1:
            raise ConfigError(f"{where} must be an integer >= 1; got {raw!r}")
        if self.kind == "float" and (not math.isfinite(v) or v <= 0):
            raise ConfigError(f"{where} must be a positive finite number; got {raw!r}")
        return v


def parse_knobs(preset: str, text: str, knobs: Mapping[str, Knob]) -> dict[str, Any]:
    """``"k=v,k=v"`` → {k: value} for the given knobs (unknown or repeated knobs raise)."""
    out: dict[str, Any] = {}
    if not text.strip():
        raise ConfigError(f"sampler {preset!r}: empty knob list after ':' (write {preset!r} for its defaults)")
    for part in text.split(","):
        k, eq, v = part.partition("=")
        k = k.strip()
        if not eq or not k or not v.strip():
            raise ConfigError(f"sampler {preset!r}: knob {part!r} must read knob=value")
        if k not in knobs:
            raise ConfigError(f"sampler {preset!r}: unknown knob {k!r}; allowed knobs: {', '.join(knobs) or 'none'}")
        if k in out:
            raise ConfigError(f"sampler {preset!r}: knob {k!r} given twice")
        out[k] = knobs[k].parse(preset, v.strip())
    return out


def window(T: int, fps: float | None, start: float | None, end: float | None) -> tuple[int, int]:
    """First and last frame index of the [start, end] seconds window (MVBench bounds).

    start_idx = max(0, round(start·fps)), end_idx = min(round(end·fps), T − 1).
    """
    if start is None and end is None:
        return 0, T - 1
    if fps is None or fps <= 0:
        raise ConfigError("`fps` is required (> 0) when `start`/`end` seconds are given")
    s = 0 if start is None else max(0, round(start * fps))
    e = T - 1 if end is None else min(round(end * fps), T - 1)
    if s > T - 1:
        raise FrameRangeError("<clip>", f"window start {start} s lies after the clip's end ({T / fps:.2f} s)")
    if e < s:
        raise FrameRangeError("<clip>", f"window [{start}, {end}] s is empty or reversed for a clip of {T / fps:.2f} s")
    return s, e


Sampler = Callable[..., SampledIndices]
