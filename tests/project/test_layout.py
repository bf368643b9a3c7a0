"""The package layout follows the data flow: no import cycle, no layer importing a higher one.

The layers, lowest first, are those of docs/design.md section 1. No import that runs when a module
is imported reaches a higher layer; an import inside a function does only where
:data:`DEFERRED_UPWARD` lists it with its reason, and one under ``if TYPE_CHECKING:`` (a type hint)
never runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest_posbias

PKG = Path(pytest_posbias.__file__).parent
LAYERS = [  # lowest first; a module may import its own layer or a lower one when it is imported
    {"", "errors", "exitcodes", "safe_text", "run_options"},
    {"gate_context", "gate_registry", "metrics", "config"},
    {"video", "data", "scoring", "engine", "stats", "strategies"},
    {"models", "probes"},
    {"gates"},
    {"report"},
    {"run", "calibration"},
    {"plugin"},
    {"cli", "suites"},
]
TOP_LEVEL = {"__init__", "config", "errors", "exitcodes", "gate_context", "gate_registry", "metrics", "run_options",
             "safe_text", "strategies"}


def _module(path: Path) -> str:
    parts = ["pytest_posbias", *path.relative_to(PKG).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    found = [i for i, layer in enumerate(LAYERS) if top in layer]
    assert found, f"{module}: no layer for {top!r} (add it to LAYERS and docs/design.md section 1)"
    return found[0]


def _import_time_targets(path: Path, modules: set[str]) -> set[str]:
    """Modules of the package that importing ``path`` imports (each with its parent packages)."""
    module, is_pkg = _module(path), path.name == "__init__.py"
    found: set[str] = set()

    def add(target: str) -> None:
        parts = target.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_pkg else module.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, None) or [])
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {t for t in found if t in modules and t != module and not module.startswith(t + ".")}


def _graph() -> dict[str, set[str]]:
    paths = sorted(PKG.rglob("*.py"))
    modules = {_module(p) for p in paths}
    return {_module(p): _import_time_targets(p, modules) for p in paths}


def test_top_level_holds_only_cross_cutting_modules():
    assert {p.stem for p in PKG.glob("*.py")} == TOP_LEVEL


def test_no_module_imports_a_higher_layer_when_imported():
    upward = [f"{m} -> {t}" for m, targets in _graph().items() for t in targets if _layer(t) > _layer(m)]
    assert not upward, "\n".join(upward)


# Deferred imports (inside a function) that reach a higher layer, each with its reason; any other
# is an error. ``[tool.posbias]`` is validated when it is read, by the rules of the parts that use
# its settings: the probes' settings and the openai backend's numbers and choices.
DEFERRED_UPWARD = {
    ("pytest_posbias.config", "pytest_posbias.probes.settings"),
    ("pytest_posbias.config", "pytest_posbias.models.openai_retry"),
}


def _deferred_upward() -> set[tuple[str, str]]:
    """(module, target) for every import outside ``if TYPE_CHECKING:`` that reaches a higher layer."""
    out = set()
    for path in sorted(PKG.rglob("*.py")):
        module, is_pkg = _module(path), path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for b in node.body for n in ast.walk(b)}
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, ast.ImportFrom | ast.Import):
                continue
            if isinstance(node, ast.ImportFrom) and node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                targets = [".".join([*base[: len(base) - node.level + 1], *([node.module] if node.module else [])])]
            else:
                targets = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            out.update((module, t) for t in targets
                       if t.startswith("pytest_posbias.") and _layer(t) > _layer(module))
    return out


def test_no_deferred_import_reaches_a_higher_layer_but_the_listed_ones():
    assert _deferred_upward() == DEFERRED_UPWARD


def test_no_import_cycle():
    graph = _graph()
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> None:
        if node in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(node):], node]))
        if node in done:
            return
        for target in sorted(graph[node]):
            walk(target, [*path, node])
        done.add(node)

    for module in sorted(graph):
        walk(module, [])


def test_the_checks_see_an_upward_import(tmp_path, monkeypatch):
    """The layer check flags a low module that imports a high one (it is not vacuous)."""
    (tmp_path / "errors.py").write_text("from .cli import main\n", encoding="utf-8")
    (tmp_path / "cli.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path)
    graph = _graph()
    assert graph["pytest_posbias.errors"] == {"pytest_posbias.cli"}
    assert _layer("pytest_posbias.cli") > _layer("pytest_posbias.errors")


def test_python_m_cli_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("pytest-posbias "), out.stderr
