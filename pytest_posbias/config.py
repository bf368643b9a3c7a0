"""``[tool.posbias]`` settings: schema, defaults, validation and the effective run config.

Precedence, lowest to highest: built-in defaults < ``[tool.posbias]`` in the project's
pyproject.toml < ``[tool.posbias.models."<model>"]`` overrides for the model under test
< command-line options. Unknown keys are errors that name the key and the known ones.

The gates themselves (names, markers, sides, default thresholds and margins, threshold ranges,
and why those defaults) are records of :mod:`.gate_registry`; this module validates tables
against them.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .gate_registry import GATES, Interval

# The short options of the suites' folders: alias -> the plugin's own ``--posbias-*`` option. The
# plugin registers only the long names; a suites folder's conftest.py adds these
# (pytest_posbias.plugin.add_short_aliases), and ``posbias plan`` accepts both.
SHORT_ALIASES: dict[str, str] = {
    "--model": "--posbias-model", "--baseline": "--posbias-baseline", "--judge": "--posbias-judge",
    "--api-base": "--posbias-api-base",
}

JUDGES: tuple[str, ...] = ("embed", "fragment", "openai", "auto")


Validator = Callable[[str, Any], Any]


def _rule(ok: Callable[[Any], bool], what: str, cast: Callable[[Any], Any] = lambda v: v) -> Validator:
    """A validator: ``cast(v)`` where ``ok(v)``, else a ConfigError saying the key must be ``what``."""
    def check(key: str, v: Any) -> Any:
        if not ok(v):
            raise ConfigError(f"[tool.posbias] `{key}` must be {what}; got {v!r}")
        return cast(v)

    return check


def _one_of(*allowed: str) -> Validator:
    """A validator of a key that takes one of ``allowed``."""
    return _rule(lambda v: v in allowed, f"one of {', '.join(allowed)}", str)


def _int_at_least(low: int, why: str = "") -> Validator:
    """A validator of an integer key >= ``low`` (``why``: the reason, shown in the error)."""
    return _rule(lambda v: not isinstance(v, bool) and isinstance(v, int) and v >= low, f"an integer >= {low}{why}",
                 int)


_str = _rule(lambda v: isinstance(v, str) and bool(v), "a non-empty string")
_bool = _rule(lambda v: isinstance(v, bool), "true or false")


# The per-gate level α: a gate's interval is the two-sided 1 − 2α interval, so α below 0.5 keeps
# it a proper interval (at 0.5 it shrinks to the point estimate) and α above 0 keeps it finite.
ALPHA_RANGE: Interval = (0.0, 0.5, False, False)


def check_alpha(v: Any, where: str) -> float:
    """The one check of α (:data:`ALPHA_RANGE`) for every entry point (``[tool.posbias] alpha``,
    ``--posbias-alpha``, ``posbias calibrate --alpha``, the statistics' ``alpha`` arguments);
    ConfigError naming ``where`` and the value otherwise."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not in_interval(float(v), ALPHA_RANGE):
        shown = f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v)
        raise ConfigError(f"{where} must be a number in {interval_text(ALPHA_RANGE)}; got {shown}")
    return float(v)


def _models(key: str, v: Any) -> list[str]:
    if isinstance(v, str):
        return [_str(key, v)]
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        # a model listed twice runs every gate twice and doubles the run-level Holm family, which
        # weakens the adjustment of every gate in the run
        if repeated := next((x for i, x in enumerate(v) if x.strip() in (y.strip() for y in v[:i])), None):
            raise ConfigError(f"[tool.posbias] `{key}` lists the model {repeated!r} twice; list each model once")
        return list(v)
    raise ConfigError(f"[tool.posbias] `{key}` must be a model spec string or a list of them; got {v!r}")


# The fewest bootstrap resamples a run accepts: the gates' percentile and BCa intervals at level
# 1 - 2*alpha read their endpoints from about alpha * B resamples in each tail. Efron and Tibshirani
# (An Introduction to the Bootstrap, 1993) recommend B of about 1,000 or more for these intervals;
# B = 999 puts the 5% and 95% endpoints on whole order statistics ((B + 1) * alpha = 50). With
# fewer, the endpoints, and so the gate's decision, move with the bootstrap seed.
MIN_RESAMPLES = 999
# The most: the bootstrap holds resamples x groups indices and sums at once (about 24 bytes each:
# 1.2 GB at 48 groups), so a count past this fails with MemoryError after the model calls. At this
# count the percentile p-value floor 1/(B + 1) lies below Holm's first level of any realistic run.
MAX_RESAMPLES = 1_000_000


def _resamples(key: str, v: Any) -> int:
    """Bootstrap resamples of the gates' intervals: an integer in [MIN_RESAMPLES, MAX_RESAMPLES]."""
    n = _int_at_least(MIN_RESAMPLES, " (the percentile and BCa intervals read their endpoints from the tails of the "
                                     "resamples; fewer make the decision depend on the bootstrap seed)")(key, v)
    if n > MAX_RESAMPLES:
        raise ConfigError(f"[tool.posbias] `{key}` must be an integer <= {MAX_RESAMPLES} (the bootstrap holds "
                          f"resamples x groups values in memory at once); got {v!r}")
    return n


def check_url(where: str, v: Any) -> str:
    """An endpoint base URL: http or https with a host; ConfigError naming ``where`` otherwise."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(v) if isinstance(v, str) else None
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where} must be an http:// or https:// URL with a host (e.g. http://localhost:8000/v1); "
                          f"got {_redacted(v)}")
    return str(v)


def _redacted(v: Any) -> str:
    """``repr`` of a rejected URL setting without its credentials: user-info and key-like query
    values (:func:`.safe_text.redact_url`), also where the text does not parse as a URL."""
    from .safe_text import REDACTED, redact_url, redact_value

    if not isinstance(v, str):
        return repr(redact_value(v))
    shown = re.sub(r"^((?:[A-Za-z][A-Za-z0-9+.\-]*:)?/*)[^/?#]*@", rf"\1{REDACTED}@", redact_url(v))
    return repr(shown)


def _api_bases(key: str, v: Any) -> str | list[str]:
    """``api_base``: one URL, or a list of data-parallel replicas of one served model."""
    if isinstance(v, str) and v:
        return check_url(f"[tool.posbias] `{key}`", v)
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        return [check_url(f"[tool.posbias] `{key}`", x) for x in v]
    raise ConfigError(f"[tool.posbias] `{key}` must be a URL or a non-empty list of URLs; got {v!r}")


def _api_setting(key: str, v: Any) -> Any:
    """``api_timeout`` (seconds in (0, 3600]), ``api_retries`` (0..10), ``video_form``, ``letter_scoring``."""
    from .errors import ModelLoadError
    from .models.openai_retry import LETTER_SCORINGS, VIDEO_FORMS, api_number

    allowed = {"video_form": VIDEO_FORMS, "letter_scoring": LETTER_SCORINGS}.get(key)
    if allowed is not None:
        return _one_of(*allowed)(key, v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"[tool.posbias] `{key}` must be a number; got {v!r}")
    try:
        api_number(key, v)
    except ModelLoadError as exc:
        raise ConfigError(f"[tool.posbias] `{key}`: {exc}") from None
    return v


_SCALARS: dict[str, Validator] = {
    "model": _models,
    "baseline": _str,
    "parity": _str,  # the reference deployment of the parity gates (--posbias-parity)
    "judge": _one_of(*JUDGES),
    "mode": _rule(lambda v: v in ("detect", "certify"), "'detect' or 'certify'", str),
    "alpha": lambda key, v: check_alpha(v, f"[tool.posbias] `{key}`"),
    "seed": _int_at_least(0),
    "cache": _str,
    "keep_runs": _int_at_least(1),
    "report": _str,
    "report_dir": _str,
    "data": _str,
    "device": _rule(lambda v: isinstance(v, str) and (v in ("auto", "cpu", "cuda")
                                                   or (v.startswith("cuda:") and v[5:].isdigit())),
                    "auto, cpu, cuda or cuda:N"),
    "api_base": _api_bases,
    "api_timeout": _api_setting,
    "api_retries": _api_setting,
    "video_form": _api_setting,
    "letter_scoring": _api_setting,
    "no_request_seed": _bool,
    "n_resamples": _resamples,
    "batch_size": _int_at_least(1),
    "concurrency": _int_at_least(1),
    "sequential": _bool,
    "measurement_floor": _rule(lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and 0 < float(v) <= 1,
                               "a number in (0, 1] (the share of planned units a gate must measure)", float),
    "confirmatory": _bool,
    "paired_test": _one_of("bootstrap", "permutation"),
    "multiplicity": _one_of("holm", "none"),  # the run-level decision's adjustment (gates/decision.py)
    "attn_implementation": _one_of("auto", "sdpa", "flash_attention_2", "eager"),
    "device_map": _one_of("fit", "auto", "balanced", "balanced_low_0", "sequential", "none"),
    "vllm_command": _str,  # vllm: models: the command that starts vLLM (models/vllm_managed.py)
    "vllm_args": _str,
    "vllm_timeout": _int_at_least(1),
}
_TABLES = ("thresholds", "baseline_margins", "models", "probes")


# A baseline margin is how much worse than the baseline the candidate may be: 0 (no worse) up to
# below 1 (at 1 or more the difference of two statistics in [0, 1] or |.| of [-1, 1] can never exceed it).
MARGIN_RANGE: Interval = (0.0, 1.0, True, False)


def interval_text(r: Interval) -> str:
    """``(0, 1]``-style text of a (low, high, low closed, high closed) interval."""
    lo, hi, lo_closed, hi_closed = r
    return f"{'[' if lo_closed else '('}{lo:g}, {hi:g}{']' if hi_closed else ')'}"


def in_interval(v: float, r: Interval) -> bool:
    """Whether ``v`` lies in the (low, high, low closed, high closed) interval ``r``."""
    lo, hi, lo_closed, hi_closed = r
    return (lo <= v if lo_closed else lo < v) and (v <= hi if hi_closed else v < hi)


def _threshold_meaning(gate: str) -> str:
    """Why the threshold of ``gate`` must lie in its range, in words (for the error message)."""
    g = GATES[gate]
    stat, (lo, hi) = g.statistic, g.value_range
    rule = {"both": f"|{stat}| <= threshold", "upper": f"{stat} <= threshold", "lower": f"{stat} >= threshold"}[g.side]
    return (f"the gate passes when {rule} and {stat} lies in [{lo:g}, {hi:g}]: outside this range it passes every "
            "model or none")


def validate_thresholds(where: str, table: Any, *, margins: bool = False) -> dict[str, float]:
    """Check a thresholds table (``margins``: a baseline-margins table): known gate names, finite
    numbers, each inside the range where its gate measures something (:attr:`.gate_registry.GateSpec.threshold_range`;
    margins in :data:`MARGIN_RANGE`); ConfigError naming the key, its value and the range."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table of gate = number; got {table!r}")
    out: dict[str, float] = {}
    for k, v in table.items():
        if k not in GATES:
            raise ConfigError(f"{where}: unknown gate {k!r}; known gates: {', '.join(GATES)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise ConfigError(f"{where}.{k} must be a finite number; got {v!r}")
        r = MARGIN_RANGE if margins else GATES[k].threshold_range
        if not in_interval(float(v), r):
            why = ("how much worse than the baseline the candidate may be: 0 (no worse) up to below 1"
                   if margins else _threshold_meaning(k))
            raise ConfigError(f"{where}.{k} must lie in {interval_text(r)} ({why}); got {v!r}")
        out[k] = float(v)
    return out


@dataclass(frozen=True)
class PosbiasConfig:
    """The validated ``[tool.posbias]`` table (before command-line overrides)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    thresholds: Mapping[str, float] = field(default_factory=dict)
    baseline_margins: Mapping[str, float] = field(default_factory=dict)
    model_thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    probes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str = "<defaults>"

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def thresholds_for(self, model: str | None, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
        """Effective thresholds: defaults < [tool.posbias.thresholds] < per-model < command line."""
        per_model = self.model_thresholds.get(model, {}) if model is not None else {}
        return {**{g.name: g.threshold for g in GATES.values()}, **self.thresholds, **per_model, **(overrides or {})}

    def margins(self) -> dict[str, float]:
        return {**{g.name: g.margin for g in GATES.values()}, **self.baseline_margins}


def parse_config(table: Mapping[str, Any], *, source: str = "[tool.posbias]") -> PosbiasConfig:
    """Validate a ``[tool.posbias]`` table; raise ConfigError naming the bad key."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source} must be a table")
    values: dict[str, Any] = {}
    for k, v in table.items():
        if k in _TABLES:
            continue
        if k not in _SCALARS:
            known = ", ".join(sorted([*_SCALARS, *_TABLES]))
            raise ConfigError(f"{source}: unknown key {k!r}; known keys: {known}")
        values[k] = _SCALARS[k](k, v)
    thresholds = validate_thresholds(f"{source}.thresholds", table.get("thresholds", {}))
    margins = validate_thresholds(f"{source}.baseline_margins", table.get("baseline_margins", {}), margins=True)
    if unpaired := next((g for g in margins if GATES[g].worse is None), None):
        raise ConfigError(f"{source}.baseline_margins.{unpaired}: the {unpaired} gate has no paired comparison "
                          "against a baseline (under a baseline it keeps its absolute threshold), so a margin would "
                          "go unused; remove it")
    per_model: dict[str, dict[str, float]] = {}
    models_tbl = table.get("models", {})
    if not isinstance(models_tbl, Mapping):
        raise ConfigError(f"{source}.models must be a table of model name = {{ thresholds = {{...}} }}")
    for name, sub in models_tbl.items():
        if not isinstance(sub, Mapping):
            raise ConfigError(f"{source}.models.{name!r} must be a table")
        if extra := [sk for sk in sub if sk != "thresholds"]:
            raise ConfigError(f"{source}.models.{name!r}: unknown key {extra[0]!r}; known keys: thresholds")
        per_model[name] = validate_thresholds(f"{source}.models.{name!r}.thresholds", sub.get("thresholds", {}))
    probes = table.get("probes", {})
    if not isinstance(probes, Mapping):
        raise ConfigError(f"{source}.probes must be a table of probe name = {{ settings }}")
    from .probes.settings import validate_probe_settings  # local: keeps config import light

    probe_settings = {name: validate_probe_settings(name, sub, where=f"{source}.probes.{name}")
                      for name, sub in probes.items()}
    return PosbiasConfig(values, thresholds, margins, per_model, probe_settings, source)


def load_pyproject(path: Path) -> PosbiasConfig:
    """Read ``[tool.posbias]`` from a pyproject.toml; defaults when the file or table is absent."""
    if not path.is_file():
        return PosbiasConfig()
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except UnicodeDecodeError as exc:  # TOML is UTF-8; tomllib decodes the whole file first
        raise ConfigError(f"{path}: not valid TOML (not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start})") from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table ([tool.posbias] is read from it); got {tool!r}")
    table = tool.get("posbias")
    if table is None:
        return PosbiasConfig(source=str(path))
    return parse_config(table, source=f"{path} [tool.posbias]")


def parse_threshold_override(text: str) -> tuple[str, float]:
    """Parse ``NAME=VALUE`` from ``--posbias-threshold``."""
    if "=" not in text:
        raise ConfigError(f"--posbias-threshold expects GATE=VALUE (gates: {', '.join(GATES)}); got {text!r}")
    name, _, value = text.partition("=")
    name = name.strip()
    if name not in GATES:
        raise ConfigError(f"--posbias-threshold: unknown gate {name!r}; known gates: {', '.join(GATES)}")
    try:
        v = float(value)
    except ValueError as exc:
        raise ConfigError(f"--posbias-threshold {name}: value must be a number; got {value!r}") from exc
    validate_thresholds("--posbias-threshold", {name: v})
    return name, v


def check_output_path(where: str, path: str | Path, *, folder: bool, base: Path | None = None) -> Path:
    """Check, before any model call, that a run can write ``path`` (``folder``: a folder it creates
    or fills, else a file); ``base`` resolves a relative path. Returns the resolved path;
    ConfigError naming ``where``, the path and the problem otherwise. A missing folder is not
    created: the nearest existing one must accept a new entry, tried with a temporary folder,
    because ``os.access`` says yes to root also where nothing can be created (``/proc``)."""
    import errno
    import os
    import tempfile

    p = Path(path)
    p = p if p.is_absolute() or base is None else base / p
    what = "folder" if folder else "file"

    def fail(problem: str) -> ConfigError:
        text = str(path).replace("\x00", "\\x00")
        shown = text if len(text) <= 200 else f"{text[:80]}[... {len(text) - 160} characters ...]{text[-80:]}"
        return ConfigError(f"{where}: cannot write the {what} {shown}: {problem}; give a path in a writable folder")

    if "\x00" in str(p):  # Path.exists() answers False for it; writing it raises ValueError after the model calls
        raise fail("the path holds a NUL byte, which no file system accepts")
    target = p if folder else p.parent
    existing = target  # the nearest folder on the way that exists
    try:
        if p.exists():
            if folder != p.is_dir():
                raise fail("it is a file, not a folder" if folder else "it is a folder, not a file")
            if not folder and not os.access(p, os.W_OK):
                raise fail("the file exists and cannot be written (permission denied)")
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        if not existing.is_dir():
            raise fail(f"{existing} is a file, so the folder {target} cannot be created")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise fail(f"the folder {existing} is not writable (permission denied)")
        os.rmdir(tempfile.mkdtemp(prefix=".posbias-write-check-", dir=existing))
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise fail(f"the path is too long for the file system ({len(str(p))} characters)") from None
        raise fail(f"the folder {existing} does not accept new entries ({exc.strerror or exc})") from None
    return p
