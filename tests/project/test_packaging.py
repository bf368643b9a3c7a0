"""Release packaging, as a new user gets it: build, check, install the wheel in a new venv, run it.

One slow test (CI runs it through scripts/test): ``python -m build`` (sdist, then the wheel from
the sdist) from a copy of the working tree, ``twine check``, the wheel's contents, then a new
virtual environment in an empty temporary folder with the wheel installed (``--no-deps``; the
project venv's site-packages are appended by a .pth so torch & co. are not installed again), and
there, exactly as docs/getting-started.md, "In your own repository", says:

    posbias init --quick
    pytest -m "meg and not slow" --model sim:middle-weak          -> exit 1
    pytest -m "meg and not slow" --model sim:unbiased             -> exit 0
    pytest --pyargs pytest_posbias.suites -m "option_order and not slow" --model sim:letter-bias  -> exit 1

and, as a guest in a project of its own (a root conftest.py that defines --model and --baseline,
tests marked slow and order, which it does not register): the project's tests behave exactly as
with -p no:posbias (also under --strict-markers); posbias init appends the other short options
to that conftest and says which it left out; the suites run there with --posbias-model (exit 1
on sim:middle-weak), and -p no:posbias skips them with one line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import REPO
from support.guest_project import GUEST_CONFTEST

import pytest_posbias
from pytest_posbias.cli.scaffold import QUICK_SET

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _copy_tree(dest: Path) -> None:
    """The files git tracks or would track (no venvs, caches, build outputs, rendered fixtures);
    without git, the tree less those folders."""
    try:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                               check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        skip = shutil.ignore_patterns(".git", ".venv*", ".posbias", "synthetic*", "reports", "build", "dist",
                                      "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
        shutil.copytree(REPO, dest, ignore=skip, dirs_exist_ok=True)
        return
    for f in filter(None, files):
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    _copy_tree(src)
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ}
    # --no-isolation: build with this venv's setuptools (no download); sdist first, wheel from the sdist
    res = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)], src, env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def test_wheel_installs_and_runs_the_suites_in_an_empty_folder(dist, tmp_path):
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    version = pytest_posbias.__version__
    assert wheel.name == f"pytest_posbias-{version}-py3-none-any.whl" and sdist.name == f"pytest_posbias-{version}.tar.gz"
    res = _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)], tmp_path, {**os.environ})
    assert res.returncode == 0 and res.stdout.count("PASSED") == 2, res.stdout + res.stderr

    names = zipfile.ZipFile(wheel).namelist()
    suites = sorted(p.name for p in (REPO / "pytest_posbias" / "suites").glob("*.py"))
    assert sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("pytest_posbias/suites/")) == suites
    for needed in ("pytest_posbias/report/templates/report.html.j2", "pytest_posbias/data/manifest.schema.json",
                   "pytest_posbias/py.typed", f"pytest_posbias-{version}.dist-info/licenses/LICENSE"):
        assert needed in names
    assert not [n for n in names if n.split("/")[0] in ("tests", "fixtures", "suites", "examples", "benchmarks")]
    assert not [n for n in names if n.endswith((".mp4", ".jsonl"))]
    meta = zipfile.ZipFile(wheel).read(f"pytest_posbias-{version}.dist-info/METADATA").decode()
    assert f"Version: {version}\n" in meta and "License-Expression: MIT" in meta
    with tarfile.open(sdist) as tf:
        assert f"pytest_posbias-{version}/LICENSE" in tf.getnames()

    # a new venv in an empty folder; the project's installed packages are appended after its own
    # site-packages (.pth), so the wheel's pytest_posbias is the one imported
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    res = _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp_path, env)
    assert res.returncode == 0, res.stderr[-3000:]
    project = tmp_path / "project"
    project.mkdir()
    where = _run([str(py), "-c", "import pytest_posbias.suites as s; print(s.__file__)"], project, env).stdout.strip()
    assert where.startswith(str(site)), where  # the installed wheel, not this checkout

    posbias = str(venv / "bin" / "posbias")
    res = _run([posbias, "init", "--quick"], project, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "created     pyproject.toml" in res.stdout and "tests/robustness/conftest.py" in res.stdout

    pytest_cmd = [str(py), "-m", "pytest", "-p", "no:cacheprovider"]
    bad = _run([*pytest_cmd, "-m", "meg and not slow", "--model", "sim:middle-weak"], project, env)
    assert bad.returncode == 1, bad.stdout[-4000:] + bad.stderr[-2000:]
    last = bad.stdout.strip().splitlines()[-1]
    assert re.search(r"\b[1-9]\d* failed", last) and "test_meg[sim:middle-weak-" in bad.stdout, last
    good = _run([*pytest_cmd, "-m", "meg and not slow", "--model", "sim:unbiased"], project, env)
    assert good.returncode == 0, good.stdout[-4000:] + good.stderr[-2000:]
    last = good.stdout.strip().splitlines()[-1]
    assert re.search(r"\b[1-9]\d* passed", last) and "failed" not in last, last

    order = _run([*pytest_cmd, "--pyargs", "pytest_posbias.suites", "-m", "option_order and not slow", "--model",
                  "sim:letter-bias"], project, env)
    assert order.returncode == 1, order.stdout[-4000:] + order.stderr[-2000:]
    last = order.stdout.strip().splitlines()[-1]
    assert "1 failed" in last and "test_order_flip[sim:letter-bias]" in order.stdout, last
    assert (project / "reports" / "latest.html").is_file()  # the report template came with the wheel


GUEST_TESTS = """import pytest


def test_own_options(own):
    assert own == ("given", "base")


@pytest.mark.slow
def test_slow():
    pass


@pytest.mark.order(1)
def test_ordered():
    pass
"""


def _tail(res: subprocess.CompletedProcess[str]) -> str:
    return res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr


def _outcome(res: subprocess.CompletedProcess[str]) -> str:
    """The last line of a run without its duration and the ``=`` padding that depends on it."""
    return re.sub(r" in [\d.]+s", "", _tail(res)).strip("= ")


def test_wheel_is_a_guest_in_a_project_with_its_own_model_option(dist, small_set, tmp_path):
    [wheel] = dist.glob("*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    res = _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp_path, env)
    assert res.returncode == 0, res.stderr[-3000:]
    project = tmp_path / "guest"
    # the quick set the session rendered (the same 6 clips per configuration and 12 groups), which init keeps:
    # the test above renders it from the installed wheel
    (project / QUICK_SET).parent.mkdir(parents=True)
    (project / QUICK_SET).symlink_to(small_set.parent.resolve())
    (project / "conftest.py").write_text(GUEST_CONFTEST)
    (project / "test_own.py").write_text(GUEST_TESTS)
    pytest_cmd = [str(py), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"]
    for strict in ((), ("--strict-markers",)):
        on = _run([*pytest_cmd, "--model", "given", *strict], project, env)
        off = _run([*pytest_cmd, "--model", "given", *strict, "-p", "no:posbias"], project, env)
        assert on.returncode == off.returncode == (2 if strict else 0), on.stdout[-3000:] + on.stderr[-2000:]
        assert _outcome(on) == _outcome(off), (_tail(on), _tail(off))
        assert "posbias-0.1" in on.stdout and "posbias" not in off.stdout.split("plugins:", 1)[-1].splitlines()[0]
    assert "'slow' not found in `markers` configuration option" in on.stdout

    res = _run([str(venv / "bin" / "posbias"), "init", "--quick"], project, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "merged      conftest.py" in res.stdout and f"kept        {QUICK_SET}/manifest.jsonl" in res.stdout, res.stdout
    assert "--model left out: this project's conftest.py defines it (use --posbias-model)" in res.stdout
    assert (project / "conftest.py").read_text().startswith(GUEST_CONFTEST)
    own = _run([*pytest_cmd, "test_own.py", "--model", "given"], project, env)
    assert own.returncode == 0 and "3 passed" in _tail(own), own.stdout[-3000:]
    bad = _run([*pytest_cmd, "-m", "meg and not slow", "--posbias-model", "sim:middle-weak", "--judge", "fragment"],
               project, env)
    assert bad.returncode == 1, bad.stdout[-4000:] + bad.stderr[-2000:]
    assert re.search(r"\b[1-9]\d* failed", _tail(bad)) and "test_meg[sim:middle-weak-" in bad.stdout, _tail(bad)
    off = _run([*pytest_cmd, "-m", "meg and not slow", "-p", "no:posbias", "--model", "given"], project, env)
    assert off.returncode == 0 and "INTERNALERROR" not in off.stdout + off.stderr, off.stdout[-3000:] + off.stderr[-2000:]
    assert [ln for ln in off.stdout.splitlines() if "need the pytest-posbias plugin" in ln][:2] == [
        ln for ln in off.stdout.splitlines() if ln.startswith("posbias: ")], off.stdout[-3000:]
    assert "skipped" in _tail(off) and "failed" not in _tail(off), _tail(off)
