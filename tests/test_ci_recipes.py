"""The CI recipes in examples/ci: valid YAML, and every command they run exists in this package.

``posbias ...`` lines are parsed by the real CLI parser; ``pytest ...`` lines have every option
checked against ``pytest --help`` with this plugin loaded and every marker against the plugin's
markers; the pinned install names this package's version and existing extras.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import pytest_posbias
from pytest_posbias.cli import build_parser
from pytest_posbias.config import MARKERS

yaml = pytest.importorskip("yaml")
REPO = Path(__file__).resolve().parent.parent
CI = REPO / "examples" / "ci"
RECIPES = ("github-actions.yml", "gitlab-ci.yml")


@pytest.fixture(scope="module")
def pytest_options(tmp_path_factory) -> set[str]:
    """Every long option ``pytest --help`` lists with this plugin loaded."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:randomly"], capture_output=True, text=True,
                         cwd=tmp_path_factory.mktemp("help"), env=env, timeout=300).stdout
    opts = set(re.findall(r"(--[a-z][a-z0-9-]+)", out))
    assert "--posbias-markdown" in opts and "--junit-xml" in opts  # the listing is what we think it is
    return opts


def _load(name: str) -> dict:
    return yaml.safe_load((CI / name).read_text())


def _variables(name: str, doc: dict) -> dict[str, str]:
    if name.startswith("github"):
        env = {k: str(v) for k, v in doc["env"].items()}
        # ${{ inputs.x || 'default' }} -> the default a push/PR run gets
        return {k: (m.group(1) if (m := re.search(r"\|\|\s*'([^']*)'", v)) else v) for k, v in env.items()}
    return {k: str(v) for k, v in doc["posbias"]["variables"].items()}


def _scripts(name: str, doc: dict) -> list[str]:
    if name.startswith("github"):
        return [s["run"] for s in doc["jobs"]["posbias"]["steps"] if "run" in s]
    job = doc["posbias"]
    return [*job["before_script"], *job["script"], *job["after_script"]]


def _commands(name: str) -> list[list[str]]:
    """Every simple command of the recipe's shell steps, variables expanded, split like a shell would."""
    doc = _load(name)
    env = _variables(name, doc)
    out = []
    for script in _scripts(name, doc):
        for part in re.split(r"\|\||&&|;|\n(?!\s)", script):
            text = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), part)
            text = text.split(">>")[0].split(" > ")[0].strip()
            if text:
                out.append(shlex.split(text))
    return out


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_is_valid_yaml_with_the_required_steps(name):
    doc = _load(name)
    text = (CI / name).read_text()
    assert isinstance(doc, dict)
    if name.startswith("github"):
        job = doc["jobs"]["posbias"]
        assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
        uses = [s.get("uses", "") for s in job["steps"]]
        assert any(u.startswith("actions/cache/restore@") for u in uses) and any(u.startswith("actions/cache/save@") for u in uses)
        caches = [s["with"] for s in job["steps"] if s.get("uses", "").startswith("actions/cache/")]
        assert all(c["path"].strip() == ".posbias/" and "env.MODEL" in c["key"] and "env.POSBIAS_VERSION" in c["key"]
                   for c in caches)
        [upload] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
        assert upload["if"] == "always()" and {"reports/", "junit-posbias.xml"} <= set(upload["with"]["path"].split())
        assert 'cat reports/summary.md >> "$GITHUB_STEP_SUMMARY"' in text
    else:
        job = doc["posbias"]
        assert "gpu" in job["tags"]
        assert job["cache"]["paths"] == [".posbias/"] and "${MODEL}" in job["cache"]["key"]
        assert "${POSBIAS_VERSION}" in job["cache"]["key"]
        assert {"reports/", "junit-posbias.xml"} <= set(job["artifacts"]["paths"])
        assert job["artifacts"]["reports"]["junit"] == "junit-posbias.xml" and job["artifacts"]["when"] == "always"


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_commands_exist_in_the_cli(name, pytest_options):
    cmds = _commands(name)
    seen = {c[0] for c in cmds}
    assert {"pytest", "posbias"} <= seen, cmds
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for argv in cmds:
        if argv[0] == "posbias":
            try:
                build_parser().parse_args(argv[1:])
            except SystemExit as exc:  # --version / --help exit 0; a wrong command or option exits 2
                assert exc.code == 0, argv
        elif argv[0] == "pytest":
            longs = {a.split("=", 1)[0] for a in argv[1:] if a.startswith("--")}
            assert longs <= pytest_options, longs - pytest_options
            expr = argv[argv.index("-m") + 1]
            words = set(re.findall(r"[A-Za-z_][\w-]*", expr)) - {"and", "or", "not"}
            assert words and words <= set(MARKERS), words - set(MARKERS)
            outputs = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("--") and "=" in a}
            assert outputs["--junit-xml"] == "junit-posbias.xml" and outputs["--posbias-markdown"] == "reports/summary.md"
        elif argv[:4] == ["python", "-m", "pip", "install"] and any(a.startswith("pytest-posbias") for a in argv):
            [spec] = [a for a in argv if a.startswith("pytest-posbias")]
            m = re.fullmatch(r"pytest-posbias\[([\w,]+)\]==(.+)", spec)
            assert m, spec
            assert set(m.group(1).split(",")) <= set(extras)
            assert m.group(2) == pytest_posbias.__version__  # bump the recipes with the version
