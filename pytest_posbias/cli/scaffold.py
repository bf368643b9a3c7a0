"""``posbias init [DIR]``: scaffold a robustness test folder, the suites' short options and the
``[tool.posbias]`` table in the project rooted at ``DIR``, never over an existing file without ``--force``
(what it writes, and why: docs/getting-started.md).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError

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
    "search": {"items": 8, "videos": 3, "budget": 30},  # budget: queries per item (VideoSTF's 30)
}

ALIAS_IMPORTS = """import pytest{noqa}

from pytest_posbias.plugin import add_short_aliases{noqa}
"""
ALIAS_HOOK = """

@pytest.hookimpl(specname="pytest_addoption", trylast=True)
def pytest_addoption_posbias(parser):
    add_short_aliases(parser{skip_arg})
"""
_ALIAS_COMMENT = """
# pytest-posbias: the short options of the robustness suites (--model, --baseline, --judge,
# --api-base) as aliases of the plugin's --posbias-* options{skip_note}.
"""
_ALIAS_CONFTEST_HEAD = '"""Project-wide pytest configuration (root conftest.py)."""\n'

_CONFTEST = '''"""Robustness gates (pytest-posbias), scaffolded by `posbias init`.

The ready-made suites' code is in the installed package, ``pytest_posbias/suites/``; this
folder brings it in: the hooks below parametrize the suites from ``[tool.posbias]`` and the
command line, and each ``test_<suite>.py`` here imports that suite's tests. Put your own gates
in further ``test_*.py`` files beside them (fixtures ``posbias_run``, ``posbias_model``,
``posbias_gate``; see "Writing your own gate" in the docs, docs/custom-gates.md).
"""

from pytest_posbias.suites.conftest import (
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_generate_tests,
)

__all__ = ["pytest_collection_finish", "pytest_collection_modifyitems", "pytest_configure", "pytest_generate_tests"]
'''

_OPTION_NAME = re.compile(r"""["'](--[A-Za-z0-9][-A-Za-z0-9_]*)["']""")


def alias_conftest(existing: str | None, taken_elsewhere: Iterable[str] = ()) -> tuple[str | None, tuple[str, ...]]:
    """The root ``conftest.py`` text that registers the short options, and the short options left
    out because ``existing`` (the project's own root conftest, None when there is none) already
    names them as options (a quoted ``"--model"``, ...) or they are in ``taken_elsewhere`` (named by
    the project's other conftest files: pytest loads the root one first, and a later registration of
    the same option would stop every run of the project). Returns ``(None, ...)`` when ``existing``
    already calls ``add_short_aliases``. The hook is appended under its own name
    (``specname="pytest_addoption"``), so an existing ``pytest_addoption`` is kept as it is and
    runs first."""
    from ..config import SHORT_ALIASES

    if existing is not None and "add_short_aliases" in existing:
        return None, ()
    taken = set(_OPTION_NAME.findall(existing or "")) | set(taken_elsewhere)
    skip = tuple(a for a in SHORT_ALIASES if a in taken)
    note = f"; {', '.join(skip)} left out: this project defines them" if skip else ""
    comment = _ALIAS_COMMENT.format(skip_note=note)
    hook = ALIAS_HOOK.format(skip_arg=f", skip={skip!r}" if skip else "")
    if existing is None:
        return _ALIAS_CONFTEST_HEAD + "\n" + comment.lstrip("\n") + ALIAS_IMPORTS.format(noqa="") + hook, skip
    base = existing if existing.endswith("\n") or not existing else existing + "\n"
    return base + "\n" + comment + ALIAS_IMPORTS.format(noqa="  # noqa: E402") + hook, skip


_NOT_PROJECT = frozenset({".git", ".hg", ".venv", "venv", "env", "node_modules", "site-packages", "__pycache__",
                          ".tox", ".nox", "build", "dist"})


def options_of_conftests(root: Path, *, skip: Iterable[Path] = ()) -> dict[str, str]:
    """The options the project's conftest.py files below ``root`` name (a quoted ``"--model"``, ...), each
    with the first file naming it (relative to ``root``); virtual environments, build folders and ``skip`` left
    out."""
    skipped = {p.resolve() for p in skip}
    out: dict[str, str] = {}
    for path in sorted(root.rglob("conftest.py")):
        rel = path.relative_to(root)
        if path.resolve() in skipped or _NOT_PROJECT & set(rel.parts[:-1]):
            continue
        for name in _OPTION_NAME.findall(path.read_text(encoding="utf-8", errors="replace")):
            out.setdefault(name, rel.as_posix())
    return out


def options_pytest_knows(root: Path) -> set[str]:
    """The options ``pytest --help`` lists in the project at ``root`` (installed plugins, ``-p`` and
    ``pytest_plugins`` modules, the conftest files pytest loads first); empty where it does not run."""
    try:
        res = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=root,
                             capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.SubprocessError):
        return set()
    listed = re.findall(r"(?m)^\s+(?:-\w,\s+)?(--[A-Za-z0-9][-A-Za-z0-9_]*)", res.stdout)
    return set(listed) if res.returncode == 0 else set()


_TEST_MODULE = '''"""The ready-made suite ``pytest_posbias.suites.{name}`` (its code lives in the package)."""

from pytest_posbias.suites.{name} import *  # noqa: F403
'''

_README = """# Robustness gates (pytest-posbias)

Scaffolded by `posbias init`. The test modules here import the ready-made suites shipped in
the `pytest-posbias` package (`pytest_posbias/suites/`); settings live in the `[tool.posbias]`
table of `pyproject.toml`.

Run from the project root (`.`):

```bash
pytest -m meg --model qwen3vl8b             # Middle-Edge Gap gate on a registry model
pytest -m "dpb or meg" --model=/path/to/checkpoint
pytest -m "option_order or flip" --model openai:my-model --api-base http://localhost:8000/v1
pytest -m "not slow" --model qwen3vl8b --posbias-markdown reports/summary.md
```

The short options (`--model`, `--baseline`, `--judge`, `--api-base`) come from the root
`conftest.py`; the plugin's own names (`--posbias-model`, ...) work in every project.
Markers: {markers}. `posbias gates` lists every gate and its threshold; `posbias models`
the registry. Reports go to `reports/` (HTML), the generation cache to `.posbias/`.
{data}
"""


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string (TOML 1.0 "Basic strings").

    JSON's escapes (``\\"``, ``\\\\``, ``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t``, ``\\uXXXX``) are all
    valid TOML escapes; TOML also forbids a raw DEL (U+007F), which JSON leaves as is.
    """
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007F")


def posbias_table(*, model: str | None = None, quick: bool = False) -> str:
    """The ``[tool.posbias]`` TOML text ``posbias init`` writes (config.py documents every key)."""
    lines = [
        "[tool.posbias]",
        "# pytest-posbias settings (written by `posbias init`; every key: docs/reference/config.md).",
        "# Command-line options override them: --model, --posbias-mode, --posbias-threshold GATE=VALUE, ...",
        f"model = {toml_string(model)}" if model else '# model = "qwen3vl8b"            # default for --model',
        'mode = "detect"                   # detect: fail when a violation is shown; certify: pass only when '
        'compliance is shown', "alpha = 0.05",
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


def _replace_posbias_tables(text: str, table: str) -> str | None:
    """``text`` with its ``[tool.posbias]`` / ``[tool.posbias.*]`` sections replaced by ``table``.

    A section runs from its header to the next header. Its lines are removed, except a block of
    comment lines after the section's last blank line that directly precedes a non-posbias header:
    that comment belongs to the next table and stays with it. ``table`` goes where the first
    posbias header was, followed by one blank line when more text follows, so replacing twice
    gives the same bytes. None when ``text`` has no posbias header (dotted keys, inline table).
    """
    nl = _newline(text)
    sections: list[list[str]] = [[]]  # the lines before the first header, then one section per header
    for line in text.splitlines(keepends=True):
        if _HEADER.match(line):
            sections.append([])
        sections[-1].append(line)

    def posbias(section: list[str]) -> bool:
        m = _HEADER.match(section[0]) if section else None
        names = [p.strip().strip('"').strip("'") for p in m.group(1).split(".")] if m else []
        return names[:2] == ["tool", "posbias"]

    out: list[str] = []
    insert_at: int | None = None
    for i, section in enumerate(sections):
        if not posbias(section):
            out += section
            continue
        insert_at = len(out) if insert_at is None else insert_at
        blanks = [j for j, ln in enumerate(section) if not ln.strip()]
        tail = section[blanks[-1] + 1:] if blanks else []
        if i + 1 < len(sections) and not posbias(sections[i + 1]) and all(ln.strip().startswith("#") for ln in tail):
            out += tail  # a comment block of the next table stays with it
    if insert_at is None:
        return None
    before, after = out[:insert_at], out[insert_at:]
    while after and not after[0].strip():
        after.pop(0)
    rest = "".join(after)
    return "".join(before) + table + (nl + rest if rest.strip() else "")


def _newline(text: str) -> str:
    """The file's own line ending: that of its first line (``\\r\\n`` or ``\\n``)."""
    m = re.search(r"\r?\n", text)
    return m.group(0) if m else "\n"


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        out.update(_flatten(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


def replaced_values(old: str, new: str) -> list[str]:
    """``key: old -> new`` for every ``[tool.posbias]`` value ``--force`` changed or removed (both texts valid TOML)."""
    was = _flatten(tomllib.loads(old).get("tool", {}).get("posbias", {}))
    now = _flatten(tomllib.loads(new).get("tool", {}).get("posbias", {}))
    return [f"{key}: {was[key]!r} -> {repr(now[key]) if key in now else '(removed)'}"
            for key in was if now.get(key, object()) != was[key]]


def _without_posbias(doc: dict[str, Any]) -> dict[str, Any]:
    """A parsed pyproject.toml without ``tool.posbias`` (and without ``tool`` when nothing else is in it)."""
    tool = {k: v for k, v in doc.get("tool", {}).items() if k != "posbias"}
    return {**{k: v for k, v in doc.items() if k != "tool"}, **({"tool": tool} if tool else {})}


def merge_pyproject(existing: str | None, table: str, *, force: bool) -> tuple[str | None, str]:
    """The new pyproject.toml text and what was done ("created", "merged", "replaced", "kept").

    The merge is textual (comments and layout of the rest survive) and then checked with tomllib:
    everything outside ``tool.posbias`` must parse to exactly what it was. Returns ``(None, "kept")``
    when the file already has a ``[tool.posbias]`` table and ``force`` is false.
    """
    try:
        tomllib.loads(table)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the [tool.posbias] table posbias init would write is not valid TOML ({exc}); "
                          "check the --model value") from None
    if existing is None:
        return table, "created"
    try:
        before = tomllib.loads(existing)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"pyproject.toml is not valid TOML ({exc}); fix it, then run posbias init again") from None
    nl = _newline(existing)
    table = table.replace("\n", nl)
    had = "posbias" in before.get("tool", {})
    if had and not force:
        return None, "kept"
    new = _replace_posbias_tables(existing, table) if had else None
    if new is None:  # appended, on a line of its own, after a blank line when the file has text
        base = existing if not existing or existing.endswith("\n") else existing + nl
        new = base + (nl if base.strip() else "") + table
    cannot = ConfigError("pyproject.toml defines tool.posbias in a form posbias init cannot replace "
                         "(dotted keys or an inline table); remove it by hand, then run posbias init again")
    try:
        after = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        raise cannot from None
    if _without_posbias(before) != _without_posbias(after) or "posbias" not in after.get("tool", {}):
        raise cannot
    return new, ("replaced" if had else "merged")


@dataclass(frozen=True)
class Written:
    """One path ``posbias init`` considered and what it did with it."""

    path: Path
    action: str  # created | overwritten | merged | replaced | kept
    details: tuple[str, ...] = ()  # "replaced": the [tool.posbias] values changed; root conftest: aliases left out


def scaffold(root: str | Path, *, tests_dir: str = DEFAULT_TESTS_DIR, model: str | None = None,
             quick: bool = False, force: bool = False,
             progress: Callable[[str], None] | None = None) -> list[Written]:
    """Write, under the project root ``root``, never over an existing file without ``force``:
    ``<tests_dir>/`` (a ``conftest.py`` re-exporting the suites' hooks, one ``test_<suite>.py`` per
    shipped suite importing it, a README); the short options in the root ``conftest.py``, appended to
    the project's own, leaving out an alias it defines; the ``[tool.posbias]`` table in
    ``pyproject.toml``, appended (the rest kept byte for byte) or in a new file, an existing table kept
    or with ``force`` replaced; with ``quick``, small probe sizes and a small synthetic set under
    ``fixtures/synthetic-quick/``. Returns what was done with each path.

    Everything is validated before anything is written: an invalid pyproject.toml (or a table
    the merge cannot place) raises ConfigError with the folder untouched. ``progress`` gets a
    line before the slow step (rendering the quick synthetic set).
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root}: not a directory (posbias init DIR expects the project's root folder)")
    rel = Path(tests_dir)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ConfigError(f"--tests-dir must be a relative path inside the project; got {tests_dir!r}")
    folder = root / rel
    pyproject = root / "pyproject.toml"
    files: dict[Path, str] = {folder / "conftest.py": _CONFTEST}
    suites = resources.files("pytest_posbias.suites").iterdir()
    for name in sorted(p.name[:-3] for p in suites if p.name.startswith("test_") and p.name.endswith(".py")):
        files[folder / f"{name}.py"] = _TEST_MODULE.format(name=name)
    from ..config import SHORT_ALIASES
    from ..gate_registry import GATE_SPECS

    markers = ", ".join(dict.fromkeys(f"`{g.marker}`" for g in GATE_SPECS))
    data = (f"The `data` key reads the small synthetic set under `{QUICK_SET}/` (quick probe sizes: a smoke\n"
            "run, not a release decision)." if quick else "Without `--posbias-data` the suites run on the synthetic "
            "video set, built once under\n`fixtures/synthetic/`.")
    files[folder / "README.md"] = _README.format(markers=markers, data=data)
    # the project's own files first (validation): read as bytes so their line endings survive
    existing = _project_text(pyproject)
    new, py_action = merge_pyproject(existing, posbias_table(model=model, quick=quick), force=force)
    own_conftest = _project_text(root / "conftest.py")
    out: list[Written] = []
    folder.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        if path.exists() and not force:
            out.append(Written(path, "kept"))
            continue
        action = "overwritten" if path.exists() else "created"
        path.write_text(text, encoding="utf-8")
        out.append(Written(path, action))
    details: tuple[str, ...] = ()
    if new is not None:
        if existing is not None and py_action == "replaced":
            details = tuple(replaced_values(existing, new))
        pyproject.write_bytes(new.encode("utf-8"))
    out.append(Written(pyproject, py_action, details))
    # the root conftest.py: created with the short options, or they are appended (less those the project defines)
    known = "an installed pytest plugin or the project's pytest settings"
    elsewhere = {**{a: known for a in options_pytest_knows(root)},
                 **options_of_conftests(root, skip=(root / "conftest.py", folder / "conftest.py"))}
    aliases, skip = alias_conftest(own_conftest, elsewhere)
    if aliases is None:
        out.append(Written(root / "conftest.py", "kept"))
    else:
        (root / "conftest.py").write_bytes(aliases.encode("utf-8"))
        own = set(_OPTION_NAME.findall(own_conftest or ""))
        where = {a: "this project's conftest.py" if a in own else elsewhere[a] for a in skip}
        out.append(Written(root / "conftest.py", "created" if own_conftest is None else "merged",
                           tuple(f"{a} left out: {where[a]} defines it (use {SHORT_ALIASES[a]})" for a in skip)))
    if quick:
        manifest = root / QUICK_SET / "manifest.jsonl"
        if manifest.is_file() and not force:
            out.append(Written(manifest, "kept"))
        else:
            from ..video.synthetic import build_set

            action = "overwritten" if manifest.exists() else "created"
            if progress is not None:
                progress(f"rendering the quick synthetic set under {root / QUICK_SET} (about a minute) ...")
            build_set(root / QUICK_SET, videos_per_config=QUICK_VIDEOS, groups_per_config=QUICK_GROUPS)
            out.append(Written(manifest, action))
    return out


def _project_text(path: Path) -> str | None:
    """The exact text of a project file ``posbias init`` merges into (None when absent); ConfigError
    naming it when it is not a regular UTF-8 file, raised before anything is written."""
    if not path.exists():
        return None
    if not path.is_file():
        raise ConfigError(f"{path}: not a regular file; posbias init merges into it")
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte offset {exc.start}); "
                          "posbias init merges into it: save it as UTF-8, then run posbias init again") from None


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
    p = register_command(sub, "init", _init,
                         "scaffold a robustness test folder and a [tool.posbias] table in a repository")
    p.add_argument("dir", nargs="?", default=".", help="the project's root folder (default: the current folder)")
    p.add_argument("--tests-dir", default=DEFAULT_TESTS_DIR,
                   help=f"folder for the suites' test modules, relative to DIR (default {DEFAULT_TESTS_DIR})")
    p.add_argument("--model", default=None, help="write this model as [tool.posbias] model (the default for --model)")
    p.add_argument("--quick", action="store_true",
                   help=f"write small probe sizes and render a small synthetic set under {QUICK_SET}/ for a smoke "
                        "run (minutes on a CPU with a sim: model)")
    p.add_argument("--force", action="store_true",
                   help="overwrite existing scaffold files and replace an existing [tool.posbias] table")


def _reads_quick(pyproject: Path) -> bool:
    """Whether a kept ``[tool.posbias]`` table reads the quick set at the quick probe sizes (as the table an
    earlier ``--quick`` wrote does)."""
    table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("posbias", {})
    probes = table.get("probes", {})
    return table.get("data") == f"{QUICK_SET}/manifest.jsonl" and all(
        isinstance(probes.get(probe), dict) and probes[probe].get(key) == value
        for probe, sizes in QUICK_PROBES.items() for key, value in sizes.items())


def _init(args: argparse.Namespace) -> int:
    written = scaffold(args.dir, tests_dir=args.tests_dir, model=args.model, quick=args.quick, force=args.force,
                       progress=lambda line: print(line, flush=True))
    for w in written:
        note = ""
        if w.action == "kept":
            note = (" (already has [tool.posbias]; --force to replace that table)" if w.path.name == "pyproject.toml"
                    else " (already registers the short options)" if w.path == Path(args.dir) / "conftest.py"
                    else " (exists; --force to overwrite)")
        print(f"{w.action:<11} {w.path}{note}")
        for detail in w.details:
            print(f"            {detail}" if w.path.name == "conftest.py" else f"            was {detail}")
    if hint := testpaths_hint(Path(args.dir), args.tests_dir):
        print(hint)
    kept = next((w.path for w in written if w.action == "kept" and w.path.name == "pyproject.toml"), None)
    if args.quick and kept and not _reads_quick(kept):  # the quick set was rendered, but the table does not use it
        print(f"note: --quick left your [tool.posbias] table as it is: it does not read the quick set or use the "
              f'quick probe sizes. To use them, set data = "{QUICK_SET}/manifest.jsonl" and the sizes under '
              f"[tool.posbias.probes.*] yourself, or run `posbias init --quick --force` to replace the table")
    elif args.quick:
        print('next: pytest -m "meg and not slow" --model sim:middle-weak   (from the project root; a smoke run '
              "on the quick set; `posbias gates` lists the gates)")
    else:
        print("next: pytest -m meg --model qwen3vl8b   (from the project root; `posbias gates` lists the gates)")
    return 0
