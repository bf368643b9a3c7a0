"""The run's options object (``pytest_posbias/run_options.py``): frozen and keyword-only, its
defaults those of a run given no option (the plugin's merge over an empty ``[tool.posbias]``, and
the defaults the options' help states), and its run-log form keeps the keys a run writes."""

from __future__ import annotations

import dataclasses
import json
import re
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.gates.measurement import DEFAULT_FLOOR
from pytest_posbias.plugin.options import add_options, options
from pytest_posbias.plugin.state import PLUGIN_KEY
from pytest_posbias.run_options import RunOptions, options_record

# the run log header's `config` keys, in order (docs/report.md: the run log); the threshold
# overrides are not among them, and `plan`, `plan_output_lengths` follow `vllm_servers` in plan mode only
RECORD_KEYS = ["models", "baseline", "parity", "judge", "mode", "alpha", "seed", "cache", "cache_mode", "cache_repair",
               "keep_runs", "report", "report_dir", "json", "data", "device", "api_base", "batch_size", "concurrency",
               "api_timeout", "api_retries", "video_form", "letter_scoring", "no_request_seed", "sequential",
               "attn_implementation", "device_map", "vllm_command", "vllm_args", "vllm_timeout", "vllm_servers",
               "n_resamples", "measurement_floor", "confirmatory", "paired_test", "multiplicity"]


class _Recorder:
    """A parser stub that keeps every ``addoption`` call (the plugin's registration run on it)."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def getgroup(self, *args: Any, **kwargs: Any) -> _Recorder:
        return self

    def addoption(self, name: str, **kwargs: Any) -> None:
        self.options[name] = kwargs


def _registered() -> dict[str, dict[str, Any]]:
    rec = _Recorder()
    add_options(rec)  # type: ignore[arg-type]
    return rec.options


class _Config:
    """A pytest config with every ``--posbias-*`` option at its registered default and ``pcfg`` as ``[tool.posbias]``."""

    def __init__(self, pcfg: PosbiasConfig, **given: Any) -> None:
        self.values = {name: kw.get("default") for name, kw in _registered().items()} | given
        self.stash = {PLUGIN_KEY: SimpleNamespace(pcfg=pcfg)}

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)


def test_assignment_and_container_changes_raise():
    o = RunOptions(models=["a", "b"], threshold_overrides={"meg": 0.1},  # type: ignore[arg-type]
                   vllm_servers={"vllm:m": {"urls": ["http://h:1/v1"], "identity": {"v": 1}}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.alpha = 0.1  # type: ignore[misc]
    assert o.models == ("a", "b")
    with pytest.raises(TypeError):
        o.threshold_overrides["meg"] = 0.5  # type: ignore[index]
    with pytest.raises(TypeError):
        o.vllm_servers["vllm:m"]["urls"] = []  # type: ignore[index]
    assert o.vllm_servers["vllm:m"]["urls"] == ("http://h:1/v1",)
    with pytest.raises(TypeError):
        RunOptions("sim:unbiased")  # type: ignore[misc]  # keyword-only


def test_replace_makes_a_changed_copy():
    o = RunOptions(threshold_overrides={"meg": 0.1})
    stricter = dataclasses.replace(o, threshold_overrides={**o.threshold_overrides, "dpb": 0.01})
    assert dict(stricter.threshold_overrides) == {"meg": 0.1, "dpb": 0.01}
    assert dict(o.threshold_overrides) == {"meg": 0.1}


def test_defaults_are_a_run_given_no_option():
    assert options(_Config(PosbiasConfig())) == RunOptions()  # type: ignore[arg-type]
    given = options(_Config(PosbiasConfig(values={"model": "sim:unbiased", "keep_runs": 3}),  # type: ignore[arg-type]
                            **{"--posbias-seed": 0, "--posbias-fixed": True, "--posbias-threshold": [("meg", 0.1)]}))
    assert given == RunOptions(models=("sim:unbiased",), keep_runs=3, sequential=False,
                               threshold_overrides={"meg": 0.1})


def test_defaults_are_the_documented_ones():
    helps = {name: kw["help"] for name, kw in _registered().items()}
    stated = {name: m.group(1) for name, h in helps.items() if (m := re.search(r"\(default ([^,;)]+)", h))}
    fields = {"--posbias-alpha": "alpha", "--posbias-seed": "seed", "--posbias-concurrency": "concurrency",
              "--posbias-floor": "measurement_floor", "--posbias-cache": "cache"}
    assert set(fields) <= set(stated)
    defaults = RunOptions()
    for option, field in fields.items():
        assert str(getattr(defaults, field)) == stated[option].rstrip("/"), option
    assert defaults.measurement_floor == DEFAULT_FLOOR


def test_the_run_log_record_keeps_the_keys_and_round_trips():
    o = RunOptions(models=("sim:a",), api_base=("http://a/v1", "http://b/v1"), threshold_overrides={"meg": 0.1},
                   vllm_servers={"vllm:m": {"urls": ["http://h:1/v1"], "identity": {"v": 1}}})
    record = options_record(o)
    assert list(record) == RECORD_KEYS
    assert record["models"] == ["sim:a"] and record["api_base"] == ["http://a/v1", "http://b/v1"]
    assert record["vllm_servers"] == {"vllm:m": {"urls": ["http://h:1/v1"], "identity": {"v": 1}}}
    assert RunOptions(**json.loads(json.dumps(record)), threshold_overrides={"meg": 0.1}) == o
    plan = options_record(RunOptions(plan="/tmp/p", plan_output_lengths={"m": 12.0}))
    i = RECORD_KEYS.index("vllm_servers") + 1
    assert list(plan) == [*RECORD_KEYS[:i], "plan", "plan_output_lengths", *RECORD_KEYS[i:]]
    assert options_record(RunOptions(api_base="http://a/v1"))["api_base"] == "http://a/v1"  # one URL stays a string


def test_specs_name_each_model_once():
    o = RunOptions(models=("sim:a", "sim:b"), baseline="sim:a", parity="sim:c")
    assert o.specs == ("sim:a", "sim:b", "sim:c")
    assert RunOptions().specs == ()
