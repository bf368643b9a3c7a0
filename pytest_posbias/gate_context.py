"""What the gates and the probes read from the run: the :class:`GateContext`, :class:`ProbeContext`
and :class:`SearchContext` protocols.

:class:`~.run.context.RunContext` implements them; tests pass small stand-ins with the members a
gate or probe uses. Probe results are memoized, so gates that share a probe share its model calls;
the verdict builders apply a gate's threshold and side from :mod:`.gate_registry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # annotations only: importing this module imports no probe, numpy or scipy
    import numpy as np
    from numpy.typing import ArrayLike

    from .config import PosbiasConfig
    from .data.manifest import Manifest
    from .engine import Engine, RunLog
    from .probes.phase import PhaseResult, PhaseSpec
    from .probes.positional import PositionalResult, PositionalSpec
    from .probes.stressor import StressorResult, StressorSpec
    from .scoring.judges import JudgeSet
    from .stats import Verdict
    from .video.frames import FrameStore

T = TypeVar("T")


class ProbeContext(Protocol):
    """The run as the probes see it (module docstring)."""

    engine: Engine
    store: FrameStore
    runlog: RunLog

    def rng(self, *keys: object) -> np.random.Generator:
        """A generator seeded by the run seed and ``keys``."""

    def observe(self, probe: str, data: Mapping[str, Any]) -> None:
        """Append a probe's observation to the run log."""

    def manifest(self) -> Manifest:
        """The run's data."""


class SearchContext(ProbeContext, Protocol):
    """The run as the property search sees it (module docstring)."""

    seed: int
    run_id: str
    cache_dir: Path

    def probe_settings(self, name: str) -> dict[str, Any]:
        """The probe's settings: its defaults with ``[tool.posbias.probes.<name>]`` applied."""

    def phase_spec(self) -> PhaseSpec:
        """The phase probe's spec from the run's settings."""

    def stressor_spec(self, frames: int) -> StressorSpec:
        """The stressor probe's spec at ``frames`` frames from the run's settings."""

    def threshold(self, gate: str, model: str) -> float:
        """The gate's effective threshold for ``model``."""

    def judges(self) -> JudgeSet:
        """The run's judges (the coverage property scores each slot with them)."""

    def note(self, message: str) -> None:
        """Print a progress line."""

    def memo(self, key: str, fn: Callable[[], T]) -> T:
        """``fn()`` computed once per run under ``key``."""


class GateContext(Protocol):
    """The run as the gates see it (module docstring)."""

    mode: str  # detect or certify
    alpha: float  # the per-gate level (intervals are 1 - 2 alpha two-sided)
    baseline: str | None  # the --posbias-baseline model: gates become paired comparisons
    sequential: bool  # the group-sequential design (else the fixed sample)
    n_resamples: int
    floor: float  # the measurement floor (share of planned units a gate must measure)
    paired_test: str  # bootstrap or permutation
    seed: int
    pcfg: PosbiasConfig
    parity: str | None  # the --posbias-parity reference deployment: the parity gates compare against it

    def threshold(self, gate: str, model: str) -> float:
        """The gate's effective threshold for ``model``."""

    def rng(self, *keys: object) -> np.random.Generator:
        """A generator seeded by the run seed and ``keys``."""

    def manifest(self) -> Manifest:
        """The run's data."""

    def positional(self, model: str, spec: PositionalSpec, n: int | None = None) -> PositionalResult:
        """The positional probe on ``model`` at ``spec`` (its first ``n`` groups)."""

    def phase_spec(self) -> PhaseSpec:
        """The phase probe's spec from the run's settings."""

    def phase(self, model: str, gate: str, budget: int | None = None, n: int | None = None) -> PhaseResult:
        """The phase probe with the conditions ``gate`` needs (its first ``n`` items)."""

    def stressor_spec(self, frames: int) -> StressorSpec:
        """The stressor probe's spec at ``frames`` frames from the run's settings."""

    def stressor(self, model: str, frames: int, n: int | None = None, part: str | None = None) -> StressorResult:
        """The stressor probe on ``model`` at ``frames`` frames (its first ``n`` videos): one part of it
        (the clean outputs, the controls, a stressor's variants) or, with ``part`` None, every part."""

    def stressor_clean(self, model: str, frames: int) -> StressorResult:
        """The stressor probe's clean outputs alone on ``model`` at ``frames`` frames."""

    def mean_gate(self, gate: str, model: str, values: ArrayLike, clusters: ArrayLike, *, name: str, unit: str,
                  method: str | None = None, extra: Mapping[str, Any] | None = None,
                  lattice_step: float | None = None) -> Verdict:
        """A mean gate: cluster bootstrap (or the ``method`` given) against the gate's threshold and side."""

    def rate_gate(self, gate: str, model: str, k: int, n: int, *, name: str, unit: str,
                  extra: Mapping[str, Any] | None = None) -> Verdict:
        """A rate gate: exact binomial against the gate's threshold."""

    def baseline_gate(self, gate: str, model: str, cand: ArrayLike, base: ArrayLike, clusters: ArrayLike, *, name: str,
                      unit: str, worse: str, extra: Mapping[str, Any] | None = None) -> Verdict:
        """A paired non-inferiority comparison against the baseline within the gate's margin."""


class SearchGateContext(GateContext, SearchContext, Protocol):
    """The run as the search gate sees it: it runs the property search and gates its outcome."""


__all__ = ["GateContext", "ProbeContext", "SearchContext", "SearchGateContext"]
