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
    """The run's options; every field defaults to the value a run without the option uses
    (docs/reference/options.md, docs/reference/config.md). Fields are in the order the run log's
    ``config`` lists them."""

    # What is tested: --posbias-model (repeatable; [tool.posbias] model), --posbias-baseline, --posbias-parity
    # (the parity gates' reference), --posbias-judge (embed, fragment, openai[:MODEL], auto).
    models: tuple[str, ...] = ()
    baseline: str | None = None
    parity: str | None = None
    judge: str = "auto"
    # The decision: --posbias-mode (detect | certify), --posbias-alpha, --posbias-seed.
    mode: str = "detect"
    alpha: float = 0.05
    seed: int = 0
    # Files: --posbias-cache (generation cache and run logs), --posbias-cache-mode, --posbias-cache-repair,
    # [tool.posbias] keep_runs (run folders kept), --posbias-report and [tool.posbias] report_dir (HTML
    # report), --posbias-json (JSON summary), --posbias-data (manifest; None: the synthetic set).
    cache: str = ".posbias"
    cache_mode: str = "read-write"
    cache_repair: str = "stop"
    keep_runs: int | None = None
    report: str | None = None
    report_dir: str = "reports"
    json: str | None = None
    data: str | None = None
    # Backends: --posbias-device (hf), --posbias-api-base (one URL or replicas), --posbias-batch-size,
    # --posbias-concurrency, --posbias-api-timeout and --posbias-api-retries (None: the environment's or
    # the backend's default), --posbias-video-form, --posbias-letter-scoring, --posbias-no-request-seed.
    device: str = "auto"
    api_base: str | tuple[str, ...] | None = None
    batch_size: int | None = None
    concurrency: int = 4
    api_timeout: float | None = None
    api_retries: int | None = None
    video_form: str = "auto"
    letter_scoring: str = "auto"
    no_request_seed: bool = False
    # The design: --posbias-fixed (sequential False).
    sequential: bool = True
    # hf models: --posbias-attn-implementation, --posbias-device-map.
    attn_implementation: str = "auto"
    device_map: str = "fit"
    # vllm: models: --posbias-vllm-command, --posbias-vllm-args, --posbias-vllm-timeout, and the servers the
    # xdist controller started (model spec -> {"urls": [...], "identity": {...}}, from workerinput).
    vllm_command: str | None = None
    vllm_args: str | None = None
    vllm_timeout: int | None = None
    vllm_servers: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    # `posbias plan` (internal --posbias-plan DIR): the folder the requests are recorded in, and the
    # measured output lengths from DIR/output_lengths.json (None when not measured).
    plan: str | None = None
    plan_output_lengths: Mapping[str, Any] | None = None
    # The gates: --posbias-threshold GATE=VALUE overrides, [tool.posbias] n_resamples (bootstrap
    # resamples), --posbias-floor (measurement floor), --posbias-confirmatory, --posbias-paired-test,
    # --posbias-multiplicity (the run-level decision).
    threshold_overrides: Mapping[str, float] = dataclasses.field(default_factory=dict)
    n_resamples: int = 9999
    measurement_floor: float = 0.95
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
