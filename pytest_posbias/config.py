"""``[tool.posbias]`` settings: schema, defaults, validation and the effective run config.

Precedence, lowest to highest: built-in defaults < ``[tool.posbias]`` in the project's
pyproject.toml < ``[tool.posbias.models."<model>"]`` overrides for the model under test
< command-line options. Unknown keys are errors that name the key and the known ones.

Default gate thresholds and why (numbers from the papers' tables):

* ``dpb = 0.05``  — |DPB| <= 5 points. The multi-video paper calls +8.13% and +13.89%
  "strong" directional bias and −14.97% a case study; near-zero settings sit within
  ±1.1%. 5 points separates the two groups.
* ``meg = 0.02``  — |MEG| <= 2 points. The paper's highlighted middle weaknesses are
  −2.65% to −3.68%; cyclic vs full-permutation designs differ by 0.7–1.2 points
  (appendix C.6), so 2 points sits above the design's own wobble.
* ``coverage = 0.25`` — mean coverage >= 25% (a floor, not a position test).
* ``contamination = 0.10`` — at most 10% of slots more similar to another video's reference.
* ``flip = 0.15``, ``phase = 0.15``, ``order = 0.15`` — the phase paper's H0: flip <= 15%
  (table S4), which every audited model exceeds (order 40.8–66.4%, phase 15.2–20.1%,
  left vs midpoint 23.6%).
* ``fusion = 0.0`` — PhaseFusion must not change more answers under an origin shift
  than a single pass (the paper: 10.1% vs 18.2%).
* ``equivalence = 0.025`` — PhaseFusion (S = 3 × b = 8) accuracy within ±2.5 points of a
  single pass at 4b = 32 frames (the phase paper's confirmatory TOST margin); certify-type:
  passes only when equivalence is shown, in either mode.
* ``repetition = 0.15`` — RR <= 15%: VideoSTF table 1's well-behaved models sit at
  3–16% (LLaVA-Video-7B 3–10, InternVL3.5 7–11, Qwen3-VL 8–13, VideoLLaMA2 13–16),
  the looping ones at 58–91%.
* ``stressor = 0.10`` — stressors may raise RR by at most 10 points over clean
  (VideoSTF: +9 points for 2 foreign frames on LLaVA-Video-7B, relative +67–205%).
* ``attack = 0.25`` — ASR <= 25% within the query cap; every model in VideoSTF figure 5
  exceeds it (InternVL3.5-8B 28–72%, VideoLLaMA2 40–83%).
* ``search = 0.15`` — at most 15% of items broken by the property search within its query
  budget (30 = VideoSTF's attack cap): the phase paper's flip bound (an item the search breaks
  is an item some option order / phase / stressor flips, and the search tries more of them than
  the fixed grids), stricter than the attack gate's 25%.
* ``parity = 0.05``, ``parity_coverage = 0.05``, ``parity_repetition = 0.05`` (marker
  ``parity``, with ``--posbias-parity REFERENCE``) — a deployment may change the share of MCQ
  answers by at most 5 points beyond the reference's own re-run floor, lower the coverage of the
  same summaries by at most 5 points and raise the clean repetition rate by at most 5 points:
  the same drift the baseline margins of the flip/phase/order, coverage and repetition gates
  allow between two releases, since a serving stack that moves answers more than a release may
  is a release of its own (docs/design.md section 5, "Parity").
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

GATES: tuple[str, ...] = (
    "dpb", "meg", "coverage", "contamination",
    "flip", "phase", "order", "fusion", "equivalence",
    "repetition", "stressor", "attack", "search",
    "parity", "parity_coverage", "parity_repetition",
)
# The short options of the suites' folders: alias -> the plugin's own ``--posbias-*`` option. The
# plugin registers only the long names; a suites folder's conftest.py adds these
# (pytest_posbias.plugin.add_short_aliases), and ``posbias plan`` accepts both.
SHORT_ALIASES: dict[str, str] = {
    "--model": "--posbias-model", "--baseline": "--posbias-baseline", "--judge": "--posbias-judge",
    "--api-base": "--posbias-api-base",
}

MARKERS: dict[str, str] = {
    "dpb": "positional suite: Directional Positional Bias gate (|DPB| <= threshold)",
    "meg": "positional suite: Middle-Edge Gap gate, P = 4 (|MEG| <= threshold)",
    "coverage": "positional suite: mean per-video coverage floor",
    "contamination": "positional suite: slot contamination rate (TF-IDF proxy)",
    "flip": "phase/order suite: answer flips between deployed frame samplers",
    "phase": "phase/order suite: answer flips between sampling phases of one grid",
    "option_order": "phase/order suite: answer flips across option orderings (gate order)",
    "fusion": "phase/order suite: PhaseFusion vs single pass under an origin shift",
    "equivalence": "phase/order suite: PhaseFusion (S x b) accuracy equivalent to one pass at 4b frames (TOST, certify-type)",
    "repetition": "stressor suite: output repetition rate on clean videos",
    "stressor": "stressor suite: repetition amplification under temporal stressors",
    "attack": "stressor suite: black-box repetition attack success rate",
    "search": "search suite: share of items a hypothesis property search breaks within its query budget (minimal counterexamples)",
    "parity": "parity suite (--posbias-parity REFERENCE): answers, coverage and repetition of the tested deployment against a reference",
    "slow": "long end-to-end check; runs in CI, deselect with -m 'not slow'",
}

# The marker of a gate whose marker name differs from the gate name: ``order`` is pytest-order's
# marker, so the option-order gate is selected with ``-m option_order``.
GATE_MARKERS: dict[str, str] = {"order": "option_order", "parity_coverage": "parity", "parity_repetition": "parity"}


def marker_of(gate: str) -> str:
    """The pytest marker that selects ``gate`` (``-m MARKER``): the gate name, or GATE_MARKERS' entry."""
    return GATE_MARKERS.get(gate, gate)


# The cluster-bootstrap interval of each mean gate (stats.cluster_bootstrap): expanded percentile,
# except BCa for the stressor amplification, whose per-video values (a share minus a rare 0/1
# clean indicator) are skewed enough to make the percentile interval anti-conservative
# (measured by benchmarks/calibration.py).
BOOTSTRAP_METHOD: dict[str, str] = {"stressor": "bca"}

# sides: "both" |x| <= t, "upper" x <= t, "lower" x >= t
GATE_SIDES: dict[str, str] = {
    "dpb": "both", "meg": "both", "coverage": "lower", "contamination": "upper",
    "flip": "upper", "phase": "upper", "order": "upper", "fusion": "upper", "equivalence": "both",
    "repetition": "upper", "stressor": "upper", "attack": "upper", "search": "upper",
    "parity": "upper", "parity_coverage": "upper", "parity_repetition": "upper",
}
DEFAULT_THRESHOLDS: dict[str, float] = {
    "dpb": 0.05, "meg": 0.02, "coverage": 0.25, "contamination": 0.10,
    "flip": 0.15, "phase": 0.15, "order": 0.15, "fusion": 0.0, "equivalence": 0.025,
    "repetition": 0.15, "stressor": 0.10, "attack": 0.25, "search": 0.15,
    "parity": 0.05, "parity_coverage": 0.05, "parity_repetition": 0.05,
}
# Non-inferiority margins against --baseline (candidate may be worse by at most this).
DEFAULT_BASELINE_MARGINS: dict[str, float] = {
    "dpb": 0.02, "meg": 0.01, "coverage": 0.05, "contamination": 0.05,
    "flip": 0.05, "phase": 0.05, "order": 0.05, "fusion": 0.05, "equivalence": 0.025,
    "repetition": 0.05, "stressor": 0.05, "attack": 0.10, "search": 0.10,
    # the parity gates are paired comparisons already; with --baseline they keep their own thresholds
    "parity": 0.05, "parity_coverage": 0.05, "parity_repetition": 0.05,
}
JUDGES: tuple[str, ...] = ("embed", "fragment", "openai", "auto")


def _str(key: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigError(f"[tool.posbias] `{key}` must be a non-empty string; got {v!r}")
    return v


def _mode(key: str, v: Any) -> str:
    if v not in ("detect", "certify"):
        raise ConfigError(f"[tool.posbias] `{key}` must be 'detect' or 'certify'; got {v!r}")
    return str(v)


def _alpha(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < float(v) < 0.5:
        raise ConfigError(f"[tool.posbias] `{key}` must be a number in (0, 0.5); got {v!r}")
    return float(v)


def _seed(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ConfigError(f"[tool.posbias] `{key}` must be an integer >= 0; got {v!r}")
    return int(v)


def _judge(key: str, v: Any) -> str:
    if v not in JUDGES:
        raise ConfigError(f"[tool.posbias] `{key}` must be one of {', '.join(JUDGES)}; got {v!r}")
    return str(v)


def _models(key: str, v: Any) -> list[str]:
    if isinstance(v, str):
        return [_str(key, v)]
    if isinstance(v, list) and v and all(isinstance(x, str) and x for x in v):
        return list(v)
    raise ConfigError(f"[tool.posbias] `{key}` must be a model spec string or a list of them; got {v!r}")


def _pos_int(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"[tool.posbias] `{key}` must be an integer >= 1; got {v!r}")
    return int(v)


# The fewest bootstrap resamples a run accepts. The gates' intervals are percentile or BCa
# intervals at level 1 - 2*alpha (90% at alpha = 0.05): their endpoints are the alpha and 1 - alpha
# quantiles of the resampled statistic, estimated from about alpha * B resamples in each tail.
# Efron and Tibshirani (An Introduction to the Bootstrap, 1993) recommend B of about 1,000 or more
# for percentile and BCa intervals (25-200 suffice for a standard error only); B = 999 puts the
# 5% and 95% endpoints on whole order statistics ((B + 1) * alpha = 50). With fewer, the interval's
# endpoints, and so the gate's decision, move with the bootstrap seed.
MIN_RESAMPLES = 999


def _n_resamples(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < MIN_RESAMPLES:
        raise ConfigError(f"[tool.posbias] `{key}` must be an integer >= {MIN_RESAMPLES} (the percentile and BCa "
                          f"intervals read their endpoints from the tails of the resamples; fewer make the decision "
                          f"depend on the bootstrap seed); got {v!r}")
    return int(v)


def _device(key: str, v: Any) -> str:
    """``device``: auto, cpu, cuda or cuda:N (as ``--posbias-device``)."""
    if isinstance(v, str) and (v in ("auto", "cpu", "cuda") or (v.startswith("cuda:") and v[5:].isdigit())):
        return v
    raise ConfigError(f"[tool.posbias] `{key}` must be auto, cpu, cuda or cuda:N; got {v!r}")


def check_url(where: str, v: Any) -> str:
    """An endpoint base URL: http or https with a host; ConfigError naming ``where`` otherwise."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(v) if isinstance(v, str) else None
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where} must be an http:// or https:// URL with a host (e.g. http://localhost:8000/v1); "
                          f"got {v!r}")
    return str(v)


def _floor(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < float(v) <= 1:
        raise ConfigError(f"[tool.posbias] `{key}` must be a number in (0, 1] (the share of planned units a gate "
                          f"must measure); got {v!r}")
    return float(v)


PAIRED_TESTS: tuple[str, ...] = ("bootstrap", "permutation")


def _paired_test(key: str, v: Any) -> str:
    if v not in PAIRED_TESTS:
        raise ConfigError(f"[tool.posbias] `{key}` must be one of {', '.join(PAIRED_TESTS)}; got {v!r}")
    return str(v)


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
    from .models.openai_retry import LETTER_SCORINGS, VIDEO_FORMS

    allowed = {"video_form": VIDEO_FORMS, "letter_scoring": LETTER_SCORINGS}.get(key)
    if allowed is not None:
        if v not in allowed:
            raise ConfigError(f"[tool.posbias] `{key}` must be one of {', '.join(allowed)}; got {v!r}")
        return str(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"[tool.posbias] `{key}` must be a number; got {v!r}")
    from .models.openai_retry import api_settings

    try:
        api_settings({key: v}, env={})
    except ModelLoadError as exc:
        raise ConfigError(f"[tool.posbias] `{key}`: {exc}") from None
    return v


def _multiplicity(key: str, v: Any) -> str:
    """``multiplicity``: the run-level decision's adjustment (:mod:`.decision`): holm or none."""
    if v not in ("holm", "none"):
        raise ConfigError(f"[tool.posbias] `{key}` must be one of holm, none; got {v!r}")
    return str(v)


def _bool(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"[tool.posbias] `{key}` must be true or false; got {v!r}")
    return v


def _attn(key: str, v: Any) -> str:
    allowed = ("auto", "sdpa", "flash_attention_2", "eager")
    if v not in allowed:
        raise ConfigError(f"[tool.posbias] `{key}` must be one of {', '.join(allowed)}; got {v!r}")
    return str(v)


def _device_map(key: str, v: Any) -> str:
    allowed = ("fit", "auto", "balanced", "balanced_low_0", "sequential", "none")
    if v not in allowed:
        raise ConfigError(f"[tool.posbias] `{key}` must be one of {', '.join(allowed)}; got {v!r}")
    return str(v)


_SCALARS: dict[str, Any] = {
    "model": _models,
    "baseline": _str,
    "parity": _str,  # the reference deployment of the parity gates (--posbias-parity)
    "judge": _judge,
    "mode": _mode,
    "alpha": _alpha,
    "seed": _seed,
    "cache": _str,
    "keep_runs": _pos_int,
    "report": _str,
    "report_dir": _str,
    "data": _str,
    "device": _device,
    "api_base": _api_bases,
    "api_timeout": _api_setting,
    "api_retries": _api_setting,
    "video_form": _api_setting,
    "letter_scoring": _api_setting,
    "no_request_seed": _bool,
    "n_resamples": _n_resamples,
    "batch_size": _pos_int,
    "concurrency": _pos_int,
    "sequential": _bool,
    "measurement_floor": _floor,
    "confirmatory": _bool,
    "paired_test": _paired_test,
    "multiplicity": _multiplicity,
    "attn_implementation": _attn,
    "device_map": _device_map,
    "vllm_command": _str,  # vllm: models: the command that starts vLLM (models/vllm_managed.py)
    "vllm_args": _str,
    "vllm_timeout": _pos_int,
}
_TABLES = ("thresholds", "baseline_margins", "models", "probes")


# What each gate's statistic is, and the interval its values lie in: a rate or a mean coverage in
# [0, 1]; DPB and MEG (weighted means of per-slot coverages with weights in [-1, 1]) in [-1, 1];
# differences of two rates (stressor amplification, PhaseFusion's change against one pass, the
# equivalence accuracy difference) in [-1, 1].
GATE_STATISTICS: dict[str, tuple[str, float, float]] = {
    "dpb": ("DPB", -1.0, 1.0), "meg": ("MEG", -1.0, 1.0), "coverage": ("mean coverage", 0.0, 1.0),
    "contamination": ("contamination rate", 0.0, 1.0), "flip": ("flip rate", 0.0, 1.0), "phase": ("flip rate", 0.0, 1.0),
    "order": ("flip rate", 0.0, 1.0), "fusion": ("change-rate difference", -1.0, 1.0),
    "equivalence": ("accuracy difference", -1.0, 1.0), "repetition": ("repetition rate", 0.0, 1.0),
    "stressor": ("repetition-rate increase", -1.0, 1.0), "attack": ("attack success rate", 0.0, 1.0),
    "search": ("share of items broken", 0.0, 1.0),
    "parity": ("changed-answer share minus the reference's re-run floor", -1.0, 1.0),
    "parity_coverage": ("coverage drop against the reference", -1.0, 1.0),
    "parity_repetition": ("repetition-rate increase against the reference", -1.0, 1.0),
}
# The thresholds under which a gate still measures something, as (low, high, low closed, high
# closed). A two-sided gate (|x| <= t) needs 0 < t < max |x|: t >= 1 passes every model, t <= 0 none.
# An upper gate (x <= t) needs t below the largest value (at 1 a rate gate passes anything) and,
# for a rate, above 0 (a rate of 0 cannot be certified from any finite sample); the stressor
# amplification may be 0 ("no increase"), PhaseFusion's difference may be negative ("fewer changes
# than one pass", its default is 0). The coverage floor (x >= t) needs 0 < t <= 1: at 0 or below
# every model passes.
THRESHOLD_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "dpb": (0.0, 1.0, False, False), "meg": (0.0, 1.0, False, False), "coverage": (0.0, 1.0, False, True),
    "contamination": (0.0, 1.0, False, False), "flip": (0.0, 1.0, False, False), "phase": (0.0, 1.0, False, False),
    "order": (0.0, 1.0, False, False), "fusion": (-1.0, 1.0, False, False), "equivalence": (0.0, 1.0, False, False),
    "repetition": (0.0, 1.0, False, False), "stressor": (0.0, 1.0, True, False), "attack": (0.0, 1.0, False, False),
    "search": (0.0, 1.0, False, False),
    # differences of paired shares: 0 ("no more change than the floor / no drop") is a valid threshold
    "parity": (0.0, 1.0, True, False), "parity_coverage": (0.0, 1.0, True, False),
    "parity_repetition": (0.0, 1.0, True, False),
}
# A baseline margin is how much worse than the baseline the candidate may be: 0 (no worse) up to
# below 1 (at 1 or more the difference of two statistics in [0, 1] or |.| of [-1, 1] can never exceed it).
MARGIN_RANGE: tuple[float, float, bool, bool] = (0.0, 1.0, True, False)


def interval_text(r: tuple[float, float, bool, bool]) -> str:
    """``(0, 1]``-style text of a (low, high, low closed, high closed) interval."""
    lo, hi, lo_closed, hi_closed = r
    return f"{'[' if lo_closed else '('}{lo:g}, {hi:g}{']' if hi_closed else ')'}"


def in_interval(v: float, r: tuple[float, float, bool, bool]) -> bool:
    """Whether ``v`` lies in the (low, high, low closed, high closed) interval ``r``."""
    lo, hi, lo_closed, hi_closed = r
    return (lo <= v if lo_closed else lo < v) and (v <= hi if hi_closed else v < hi)


def _threshold_meaning(gate: str) -> str:
    """Why the threshold of ``gate`` must lie in its range, in words (for the error message)."""
    stat, lo, hi = GATE_STATISTICS[gate]
    rule = {"both": f"|{stat}| <= threshold", "upper": f"{stat} <= threshold", "lower": f"{stat} >= threshold"}[GATE_SIDES[gate]]
    return f"the gate passes when {rule} and {stat} lies in [{lo:g}, {hi:g}]: outside this range it passes every model or none"


def validate_thresholds(where: str, table: Any, *, margins: bool = False) -> dict[str, float]:
    """Check a thresholds table (``margins``: a baseline-margins table): known gate names, finite
    numbers, each inside the range where its gate measures something (:data:`THRESHOLD_RANGES`;
    margins in :data:`MARGIN_RANGE`); ConfigError naming the key, its value and the range."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table of gate = number; got {table!r}")
    out: dict[str, float] = {}
    for k, v in table.items():
        if k not in GATES:
            raise ConfigError(f"{where}: unknown gate {k!r}; known gates: {', '.join(GATES)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            raise ConfigError(f"{where}.{k} must be a finite number; got {v!r}")
        r = MARGIN_RANGE if margins else THRESHOLD_RANGES[k]
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
        out = dict(DEFAULT_THRESHOLDS)
        out.update(self.thresholds)
        if model is not None and model in self.model_thresholds:
            out.update(self.model_thresholds[model])
        out.update(overrides or {})
        return out

    def margins(self) -> dict[str, float]:
        out = dict(DEFAULT_BASELINE_MARGINS)
        out.update(self.baseline_margins)
        return out


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
    per_model: dict[str, dict[str, float]] = {}
    models_tbl = table.get("models", {})
    if not isinstance(models_tbl, Mapping):
        raise ConfigError(f"{source}.models must be a table of model name = {{ thresholds = {{...}} }}")
    for name, sub in models_tbl.items():
        if not isinstance(sub, Mapping):
            raise ConfigError(f"{source}.models.{name!r} must be a table")
        for sk in sub:
            if sk != "thresholds":
                raise ConfigError(f"{source}.models.{name!r}: unknown key {sk!r}; known keys: thresholds")
        per_model[name] = validate_thresholds(f"{source}.models.{name!r}.thresholds", sub.get("thresholds", {}))
    probes = table.get("probes", {})
    if not isinstance(probes, Mapping):
        raise ConfigError(f"{source}.probes must be a table of probe name = {{ settings }}")
    from .probes.settings import validate_probe_settings  # local: keeps config import light

    probe_settings = {name: validate_probe_settings(name, sub, where=f"{source}.probes.{name}") for name, sub in probes.items()}
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
    table = data.get("tool", {}).get("posbias")
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
    or fills, else a file it writes at the end); ``base`` resolves a relative path. Returns the
    resolved path; ConfigError naming ``where``, the path and the problem otherwise.

    Nothing is left behind: a missing folder is not created here. The nearest existing folder on
    the way must be writable (``os.access``) and must accept a new entry: a temporary folder is
    created in it and removed again, because ``os.access`` says yes to root everywhere, also where
    nothing can be created (``/proc``, a read-only mount seen by root)."""
    import errno
    import os
    import tempfile

    p = Path(path)
    p = p if p.is_absolute() or base is None else base / p
    what = "folder" if folder else "file"

    def fail(problem: str) -> ConfigError:
        shown = str(path) if len(str(path)) <= 200 else f"{str(path)[:80]}[... {len(str(path)) - 160} characters ...]{str(path)[-80:]}"
        return ConfigError(f"{where}: cannot write the {what} {shown}: {problem}; give a path in a writable folder")

    target = p if folder else p.parent
    existing = target  # the nearest folder on the way that exists
    try:
        if p.exists():
            if folder and not p.is_dir():
                raise fail("it is a file, not a folder")
            if not folder and p.is_dir():
                raise fail("it is a folder, not a file")
            if not folder and not os.access(p, os.W_OK):
                raise fail("the file exists and cannot be written (permission denied)")
        while not existing.exists():
            if existing.parent == existing:
                break
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
