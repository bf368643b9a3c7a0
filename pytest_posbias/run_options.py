"""The run's options (:class:`RunOptions`): the ``--posbias-*`` command line merged over
``[tool.posbias]`` (:func:`.plugin.options.options` builds them), one typed field per option.

The object is frozen and its containers are tuples and read-only mappings, so a callee cannot
change what another part of the run reads. :func:`options_record` is its form on disk (the run
log's ``config``), with the keys a run has always written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def _frozen(value: Any, *, plain: bool = False) -> Any:
    """``value`` with every list made a tuple and every mapping a read-only copy (recursively);
    ``plain``: the inverse, for JSON (mappings become dicts, tuples lists)."""
    if isinstance(value, Mapping):
        d = {k: _frozen(v, plain=plain) for k, v in value.items()}
        return d if plain else MappingProxyType(d)
    if isinstance(value, (list, tuple)):
        return (list if plain else tuple)(_frozen(v, plain=plain) for v in value)
    return value


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """The run's options; every field defaults to the value a run without the option uses and is
    set by ``--posbias-<field>`` (docs/reference/options.md) or, where the table has one, the
    ``[tool.posbias]`` key of its name (docs/reference/config.md), unless a comment says otherwise.
    Fields are in the order the run log's ``config`` lists them."""

    # models: --posbias-model (repeatable; [tool.posbias] model)
    models: tuple[str, ...] = ()
    baseline: str | None = None
    parity: str | None = None
    judge: str = "auto"
    mode: str = "detect"
    alpha: float = 0.05
    seed: int = 0
    cache: str = ".posbias"
    cache_mode: str = "read-write"
    cache_repair: str = "stop"
    keep_runs: int | None = None  # [tool.posbias] only: run folders kept
    report: str | None = None
    report_dir: str = "reports"  # [tool.posbias] only
    json: str | None = None
    data: str | None = None  # None: the synthetic set
    device: str = "auto"
    api_base: str | tuple[str, ...] | None = None
    batch_size: int | None = None
    concurrency: int = 4
    api_timeout: float | None = None  # None (and api_retries): the environment's or the backend's default
    api_retries: int | None = None
    video_form: str = "auto"
    letter_scoring: str = "auto"
    no_request_seed: bool = False
    sequential: bool = True  # False: --posbias-fixed
    attn_implementation: str = "auto"
    device_map: str = "fit"
    vllm_command: str | None = None
    vllm_args: str | None = None
    vllm_timeout: int | None = None
    # the servers the xdist controller started (model spec -> {"urls": [...], "identity": {...}}, from workerinput)
    vllm_servers: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    # `posbias plan` (internal --posbias-plan DIR): the folder the requests are recorded in, and the
    # measured output lengths from DIR/output_lengths.json (None when not measured).
    plan: str | None = None
    plan_output_lengths: Mapping[str, Any] | None = None
    threshold_overrides: Mapping[str, float] = dataclasses.field(default_factory=dict)  # --posbias-threshold
    n_resamples: int = 9999  # [tool.posbias] only: bootstrap resamples
    measurement_floor: float = 0.95  # --posbias-floor
    confirmatory: bool = False
    paired_test: str = "bootstrap"
    multiplicity: str = "holm"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (list, tuple, Mapping)):
                object.__setattr__(self, f.name, _frozen(value))

    @property
    def specs(self) -> tuple[str, ...]:
        """Every model spec the run loads: the models, then the baseline and the parity reference, each once."""
        return tuple(dict.fromkeys([*self.models, *(s for s in (self.baseline, self.parity) if s)]))


def options_record(options: RunOptions) -> dict[str, Any]:
    """``options`` as the run log's ``config`` (JSON types): every option but the threshold
    overrides (the header's ``thresholds`` holds their effect), the plan keys only in plan mode."""
    out = {f.name: _frozen(getattr(options, f.name), plain=True) for f in dataclasses.fields(options)}
    del out["threshold_overrides"]
    if options.plan is None:
        del out["plan"], out["plan_output_lengths"]
    return out
