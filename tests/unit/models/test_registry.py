"""Model resolution (``models/registry.py``): a model that cannot run fails at start, never midway.

The small CLI commands that read the registry are in ``tests/unit/cli/test_commands.py``."""

from __future__ import annotations

import json
import re

import pytest

from pytest_posbias.errors import ModelLoadError
from pytest_posbias.models.registry import REGISTRY, model_label, resolve


def test_registry_aliases_resolve_without_loading_anything():
    r = resolve("qwen3vl8b", locate=False)
    assert (r.backend, r.target, r.family) == ("hf", "Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl")
    assert resolve("mimo-vl-7b-rl", locate=False).prefill == "<think>\n\n</think>\n\n"
    assert resolve("gpt-5.4").backend == "openai"
    assert resolve("sim:looping").target == "looping"
    assert resolve("openai:my-vllm-model").target == "my-vllm-model"
    for alias in ("qwen3vl8b", "qwen3vl30b", "qwen25vl7b", "internvl35-8b", "internvl35-14b", "internvl25-8b",
                  "minicpm-o-45", "glm41v-9b-thinking", "mimo-vl-7b-rl", "llava-video-7b", "llava-next-video-7b",
                  "llava-ov-7b", "molmo2-8b", "sharegpt4video-8b", "videollama2-7b", "gpt-5.4", "gemini-3.1-pro"):
        assert alias in REGISTRY


@pytest.mark.parametrize(("spec", "label"), [
    ("/runners/ckpt/qwen3-vl-8b-sft/", "qwen3-vl-8b-sft"),
    ("./ckpt/step-1000", "step-1000"),
    ("qwen3vl8b", "qwen3vl8b"),
    ("sim:middle-weak", "sim:middle-weak"),
    ("openai:org/model", "openai:org/model"),
])
def test_model_label_shortens_checkpoint_paths_only(spec, label):
    assert model_label(spec) == label


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("minicpm-o-45", "cannot be loaded by transformers natively: needs trust_remote_code"),
        ("videollama2-7b", "cannot be loaded by transformers natively"),
        ("qwen9000", "unknown model; use a registry alias"),
        ("./no/such/dir", "no such checkpoint directory"),
        ("sim:sloppy", "unknown sim profile"),
        ("openai:", "needs the endpoint's model name"),
    ],
)
def test_unloadable_models_fail_at_start_with_what_to_do(spec, message):
    with pytest.raises(ModelLoadError, match=message):
        resolve(spec)


def test_checkpoint_dir_family_comes_from_config_json(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl", "_name_or_path": "XiaomiMiMo/MiMo-VL-7B-RL"}))
    r = resolve(str(tmp_path))
    assert r.family == "qwen2_5_vl" and r.prefill.startswith("<think>")  # a local MiMo copy keeps its prefill
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "minicpmo", "auto_map": {"AutoModel": "x"}}))
    with pytest.raises(ModelLoadError, match="needs trust_remote_code"):
        resolve(str(tmp_path))


def test_pytest_refuses_an_unsupported_model_before_running(pytester):
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    res = pytester.runpytest("--posbias-model", "minicpm-o-45")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot be loaded by transformers natively" in res.stderr.str()


@pytest.mark.parametrize("spec", ["qwen9000", "./no/such/dir", "minicpm-o-45", "openai:", "vllm:"])
def test_model_errors_name_the_option_every_project_accepts(spec):
    """A registry error names ``--posbias-model`` (the short ``--model`` exists only where a
    project's conftest.py adds it), never the bare short option."""
    with pytest.raises(ModelLoadError) as err:
        resolve(spec)
    msg = str(err.value)
    assert msg.startswith("--posbias-model "), msg
    assert not re.search(r"(?<![\w-])--model\b", msg) and not re.search(r"(?<![\w-])--api-base\b", msg), msg


def test_pytest_names_the_spelling_the_user_typed(pytester):
    """On the command line the message names the option as typed: the long one in any project, the
    short one where the project's conftest.py adds it; the baseline's error names the baseline's option."""
    from support.suite_project import write_alias_conftest

    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    res = pytester.runpytest("--posbias-model", "qwen9000")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--posbias-model qwen9000: unknown model" in res.stderr.str()
    res = pytester.runpytest("--posbias-model=sim:unbiased", "--posbias-baseline=./no/such/dir")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--posbias-baseline ./no/such/dir: no such checkpoint directory" in res.stderr.str()
    write_alias_conftest(pytester.path)
    res = pytester.runpytest("--model", "qwen9000")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--model qwen9000: unknown model" in res.stderr.str()
    res = pytester.runpytest("--model", "sim:unbiased", "--baseline=minicpm-o-45")
    assert "--baseline minicpm-o-45 (openbmb/MiniCPM-o-4_5) cannot be loaded" in res.stderr.str()
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "./gone"\n')
    pytester.makepyfile(test_x="def test_a(posbias_run):\n    pass\n")  # the run's model is loaded
    res = pytester.runpytest()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "[tool.posbias] `model` = ./gone: no such checkpoint directory" in res.stdout.str() + res.stderr.str()
