"""``posbias init [DIR]``: scaffold a robustness test folder in the user's repository.

What it writes (never over an existing file without ``--force``; it prints every path and
whether it was written, merged or left alone):

* ``<DIR>/<tests-dir>/conftest.py`` — re-exports the ready-made suites' parametrization hooks
  from ``pytest_posbias.suites.conftest``;
* ``<DIR>/<tests-dir>/test_<suite>.py`` — one per module of ``pytest_posbias/suites/``, each
  one line, ``from pytest_posbias.suites.test_<suite> import *``, so pytest collects the shipped
  suites' tests under the user's folder (the suites' code stays in the installed package);
* ``<DIR>/<tests-dir>/README.md`` — the commands;
* with ``--quick``, small probe sizes in the table and a small synthetic set (6 clips per
  configuration) rendered now under ``<DIR>/fixtures/synthetic-quick/``, for a smoke run in
  minutes on a CPU with a ``sim:`` model;
* ``<DIR>/pyproject.toml`` — a ``[tool.posbias]`` table appended to the existing file (the rest
  of the file is kept byte for byte), or a new file holding only that table. A file that already
  has a ``[tool.posbias]`` table is left alone unless ``--force``, which replaces that table
  (and its ``[tool.posbias.*]`` sub-tables) and nothing else.

The plugin reads ``[tool.posbias]`` from the pyproject.toml of pytest's rootdir, so ``DIR`` is
the project's root, where ``pytest`` is run.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import ConfigError

DEFAULT_TESTS_DIR = "tests/robustness"

# Probe sizes for a smoke run (`posbias init --quick`): minutes on a CPU with a simulated model,
# enough for sim:middle-weak to fail the MEG gate and sim:unbiased to pass it. Release gating
# uses the package defaults (probes/settings.py DEFAULTS), chosen for power.
QUICK_SET = "fixtures/synthetic-quick"  # 6 clips per configuration, 12 groups per configuration and scale
QUICK_VIDEOS, QUICK_GROUPS = 6, 12
QUICK_PROBES: dict[str, dict[str, int]] = {
    "positional": {"groups": 12},
    "phase": {"items": 24, "orderings": 4},
    "stressor": {"videos": 8, "trials": 4},
}

_CONFTEST = '''"""Robustness gates (pytest-posbias), scaffolded by `posbias init`.

The ready-made suites' code is in the installed package, ``pytest_posbias/suites/``; this
folder brings it in: the hooks below parametrize the suites from ``[tool.posbias]`` and the
command line, and each ``test_<suite>.py`` here imports that suite's tests. Put your own gates
in further ``test_*.py`` files beside them (fixtures ``posbias_run``, ``posbias_model``,
``posbias_gate``; see the README's "Writing your own gate").
"""

from pytest_posbias.suites.conftest import pytest_collection_modifyitems, pytest_generate_tests

__all__ = ["pytest_collection_modifyitems", "pytest_generate_tests"]
'''

_TEST_MODULE = '''"""The ready-made suite ``pytest_posbias.suites.{name}`` (its code lives in the package)."""

from pytest_posbias.suites.{name} import *  # noqa: F403
'''

_README = """# Robustness gates (pytest-posbias)

Scaffolded by `posbias init`. The test modules here import the ready-made suites shipped in
the `pytest-posbias` package (`pytest_posbias/suites/`); settings live in the `[tool.posbias]`
table of `{pyproject}`.

Run from the project root (`{root}`):

```bash
pytest -m meg --model qwen3vl8b             # Middle-Edge Gap gate on a registry model
pytest -m "dpb or meg" --model /path/to/checkpoint
pytest -m "order or flip" --model openai:my-model --api-base http://localhost:8000/v1
pytest -m "not slow" --model qwen3vl8b --posbias-markdown reports/summary.md
```

Markers: {markers}. `posbias gates` lists every gate and its threshold; `posbias models`
the registry. Reports go to `reports/` (HTML), the generation cache to `.posbias/`.
Without `--posbias-data` the suites run on the synthetic video set, built once under
`fixtures/synthetic/`.
"""


def _suite_modules() -> list[str]:
    """Module names of the shipped suites (``test_*.py`` in ``pytest_posbias/suites``), sorted."""
    root = resources.files("pytest_posbias.suites")
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.startswith("test_") and p.name.endswith(".py"))


def posbias_table(*, model: str | None = None, quick: bool = False) -> str:
    """The ``[tool.posbias]`` TOML text ``posbias init`` writes (config.py documents every key)."""
    lines = [
        "[tool.posbias]",
        "# pytest-posbias settings (written by `posbias init`; every key: README \"Configuration\").",
        "# Command-line options override them: --model, --posbias-mode, --posbias-threshold GATE=VALUE, ...",
        f'model = "{model}"' if model else '# model = "qwen3vl8b"            # default for --model',
        'mode = "detect"                   # detect: fail when a violation is shown; certify: pass only when compliance is shown',
        "alpha = 0.05",
        "seed = 0",
        'cache = ".posbias"                # generation cache and run logs',
        'report_dir = "reports"            # HTML reports',
        (f'data = "{QUICK_SET}/manifest.jsonl"  # the small synthetic set of --quick; your own: posbias data import ...'
         if quick else
         '# data = "data/manifest.jsonl"     # your own videos (posbias data import ...); default: the synthetic set'),
        "",
        "[tool.posbias.thresholds]",
        "# meg = 0.02                       # defaults: `posbias gates`",
    ]
    for probe, sizes in QUICK_PROBES.items():
        lines += ["", f"[tool.posbias.probes.{probe}]"]
        if quick:
            lines.append("# quick sizes for a smoke run (posbias init --quick); remove them to gate a release")
        for key, value in sizes.items():
            lines.append(f"{key} = {value}" if quick else f"# {key} = {value}")
    return "\n".join(lines) + "\n"


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _is_posbias(name: str) -> bool:
    parts = [p.strip().strip('"').strip("'") for p in name.split(".")]
    return parts[:2] == ["tool", "posbias"]


def _without_posbias_tables(text: str) -> str:
    """``text`` with every ``[tool.posbias]`` / ``[tool.posbias.*]`` section removed (header to next header)."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        m = _HEADER.match(line)
        if m:
            skipping = _is_posbias(m.group(1))
        if not skipping:
            out.append(line)
    return "".join(out)


def merge_pyproject(existing: str | None, table: str, *, force: bool) -> tuple[str | None, str]:
    """The new pyproject.toml text and what was done ("created", "merged", "replaced", "kept").

    The merge is textual (comments and layout of the rest survive) and then checked with tomllib:
    everything outside ``tool.posbias`` must parse to exactly what it was. Returns ``(None, "kept")``
    when the file already has a ``[tool.posbias]`` table and ``force`` is false.
    """
    if existing is None:
        return table, "created"
    try:
        before = tomllib.loads(existing)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"pyproject.toml is not valid TOML ({exc}); fix it, then run posbias init again") from None
    had = "posbias" in before.get("tool", {})
    if had and not force:
        return None, "kept"
    base = _without_posbias_tables(existing) if had else existing
    if base and not base.endswith("\n"):
        base += "\n"
    new = base + ("\n" if base.strip() else "") + table
    cannot = ConfigError("pyproject.toml defines tool.posbias in a form posbias init cannot replace "
                         "(dotted keys or an inline table); remove it by hand, then run posbias init again")
    try:
        after = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        raise cannot from None
    rest_before = {k: v for k, v in before.items()}
    rest_before["tool"] = {k: v for k, v in before.get("tool", {}).items() if k != "posbias"}
    rest_after = {k: v for k, v in after.items()}
    rest_after["tool"] = {k: v for k, v in after.get("tool", {}).items() if k != "posbias"}
    if not rest_before["tool"]:
        rest_before.pop("tool")
    if not rest_after["tool"]:
        rest_after.pop("tool")
    if rest_before != rest_after or "posbias" not in after.get("tool", {}):
        raise cannot
    return new, ("replaced" if had else "merged")


@dataclass(frozen=True)
class Written:
    """One path ``posbias init`` considered and what it did with it."""

    path: Path
    action: str  # created | overwritten | merged | replaced | kept


def scaffold(root: str | Path, *, tests_dir: str = DEFAULT_TESTS_DIR, model: str | None = None,
             quick: bool = False, force: bool = False) -> list[Written]:
    """Write the robustness folder and the ``[tool.posbias]`` table under ``root`` (see module doc)."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root}: not a directory (posbias init DIR expects the project's root folder)")
    rel = Path(tests_dir)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ConfigError(f"--tests-dir must be a relative path inside the project; got {tests_dir!r}")
    folder = root / rel
    pyproject = root / "pyproject.toml"
    files: dict[Path, str] = {folder / "conftest.py": _CONFTEST}
    for name in _suite_modules():
        files[folder / f"{name}.py"] = _TEST_MODULE.format(name=name)
    from .config import MARKERS

    markers = ", ".join(f"`{m}`" for m in MARKERS if m != "slow")
    files[folder / "README.md"] = _README.format(pyproject="pyproject.toml", root=".", markers=markers)
    out: list[Written] = []
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        if path.exists() and not force:
            out.append(Written(path, "kept"))
            continue
        action = "overwritten" if path.exists() else "created"
        path.write_text(text, encoding="utf-8")
        out.append(Written(path, action))
    existing = pyproject.read_text(encoding="utf-8") if pyproject.exists() else None
    new, action = merge_pyproject(existing, posbias_table(model=model, quick=quick), force=force)
    if new is not None:
        pyproject.write_text(new, encoding="utf-8")
    out.append(Written(pyproject, action))
    if quick:
        manifest = root / QUICK_SET / "manifest.jsonl"
        if manifest.is_file() and not force:
            out.append(Written(manifest, "kept"))
        else:
            from .video.synthetic import build_set

            action = "overwritten" if manifest.exists() else "created"
            build_set(root / QUICK_SET, videos_per_config=QUICK_VIDEOS, groups_per_config=QUICK_GROUPS)
            out.append(Written(manifest, action))
    return out


def testpaths_hint(root: Path, tests_dir: str) -> str | None:
    """A warning when the project's pytest ``testpaths`` would not collect the scaffolded folder."""
    try:
        data: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    paths = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("testpaths")
    if not paths:
        return None
    target = Path(tests_dir)
    if any(target == Path(p) or Path(p) in target.parents for p in paths):
        return None
    return (f"note: [tool.pytest.ini_options] testpaths = {paths} does not include {tests_dir}; "
            f"add it there, or run `pytest {tests_dir} -m meg ...`")


def register(sub: Any, register_command: Any) -> None:
    """Add ``posbias init`` to the CLI parser."""
    p = register_command(sub, "init", _init, "scaffold a robustness test folder and a [tool.posbias] table in a repository")
    p.add_argument("dir", nargs="?", default=".", help="the project's root folder (default: the current folder)")
    p.add_argument("--tests-dir", default=DEFAULT_TESTS_DIR,
                   help=f"folder for the suites' test modules, relative to DIR (default {DEFAULT_TESTS_DIR})")
    p.add_argument("--model", default=None, help="write this model as [tool.posbias] model (the default for --model)")
    p.add_argument("--quick", action="store_true",
                   help=f"write small probe sizes and render a small synthetic set under {QUICK_SET}/ for a smoke "
                        "run (minutes on a CPU with a sim: model)")
    p.add_argument("--force", action="store_true",
                   help="overwrite existing scaffold files and replace an existing [tool.posbias] table")


def _init(args: argparse.Namespace) -> int:
    written = scaffold(args.dir, tests_dir=args.tests_dir, model=args.model, quick=args.quick, force=args.force)
    for w in written:
        note = " (exists; --force to overwrite)" if w.action == "kept" and w.path.name != "pyproject.toml" else ""
        if w.action == "kept" and w.path.name == "pyproject.toml":
            note = " (already has [tool.posbias]; --force to replace that table)"
        print(f"{w.action:<11} {w.path}{note}")
    hint = testpaths_hint(Path(args.dir), args.tests_dir)
    if hint:
        print(hint)
    print("next: pytest -m meg --model qwen3vl8b   (from the project root; `posbias gates` lists the gates)")
    return 0
