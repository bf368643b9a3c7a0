"""A project folder holding the ready-made suites, as the tests that run them through pytester need."""

from __future__ import annotations

from pathlib import Path

from support import SUITES


def write_alias_conftest(root: Path) -> None:
    """The root ``conftest.py`` that ``posbias init`` writes: the short options (``--model``, ...)."""
    from pytest_posbias.cli.scaffold import alias_conftest

    text, _ = alias_conftest(None)
    assert text is not None
    (root / "conftest.py").write_text(text)


def write_pyproject(root: Path, manifest: Path | None = None, settings: str = "", *, cache: str = ".posbias",
                    model: str | None = "sim:unbiased") -> None:
    """The project's ``pyproject.toml``: pytest collects ``suites/``, and the ``[tool.posbias]`` table
    names ``manifest`` (no ``data`` key when None: the synthetic set), ``cache`` and ``model`` (None:
    no ``model`` key, as a project that gives ``--posbias-model`` on every run; also none when
    ``settings`` sets it), followed by ``settings`` (more TOML: the probe sizes, thresholds, ...).
    Writing it again replaces the file, for a test that reruns the project with other settings."""
    data = f'data = "{manifest}"\n' if manifest else ""
    if model is not None and not any(line.strip().startswith(("model =", "model="))
                                     for line in settings.split("[", 1)[0].splitlines()):
        data = f'model = "{model}"\n' + data
    (root / "pyproject.toml").write_text(f'[tool.pytest.ini_options]\ntestpaths = ["suites"]\n\n[tool.posbias]\n{data}'
                                         f'cache = "{cache}"\n{settings}\n')


def write_suite_project(root: Path, manifest: Path | None, suites: tuple[str, ...], settings: str = "", *,
                        cache: str = ".posbias", rename: dict[str, str] | None = None,
                        model: str | None = "sim:unbiased") -> None:
    """A project folder as a user's repository holds the ready-made suites: ``suites/`` with the
    thin conftest and the named suite files (``rename`` gives a file another basename, e.g. when
    pytest imports a test module of the same name), the root ``conftest.py`` with the short
    options, and the ``pyproject.toml`` of :func:`write_pyproject` (``manifest``, ``settings``,
    ``cache`` and ``model`` as there; a run with no model in the table nor on the command line is
    a usage error)."""
    import shutil

    dest = root / "suites"
    dest.mkdir(parents=True)
    for f in ("conftest.py", *suites):
        shutil.copy(SUITES / f, dest / (rename or {}).get(f, f))
    write_alias_conftest(root)
    write_pyproject(root, manifest, settings, cache=cache, model=model)
