"""The probe and gate layers stay typed: no parameter there is annotated plain ``Any`` (the run is a
:class:`~pytest_posbias.gate_context.ProbeContext`, :class:`~pytest_posbias.gate_context.SearchContext`
or :class:`~pytest_posbias.gate_context.GateContext`, results are their own types, untrusted TOML
input is ``object``), mypy checks both packages strictly, and condition names are built only by
:mod:`pytest_posbias.probes.conditions`."""

from __future__ import annotations

import ast
import re
import tomllib
from fractions import Fraction

import pytest
from support import PACKAGE

PKG = PACKAGE
LAYERS = ("probes", "gates")


def _is_plain_any(ann: ast.expr | None) -> bool:
    """True for ``Any``, ``typing.Any`` / ``t.Any`` and the string ``"Any"``."""
    if ann is None:
        return False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        return ann.value.strip() in ("Any", "typing.Any")
    if isinstance(ann, ast.Name):
        return ann.id == "Any"
    return isinstance(ann, ast.Attribute) and ann.attr == "Any"


def any_parameters(source: str, filename: str = "<source>") -> list[str]:
    """``file:line function(parameter)`` for every parameter of ``source`` annotated plain ``Any``
    (positional, keyword-only, ``*args`` and ``**kwargs``; lambdas have no annotations)."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *([a.vararg] if a.vararg else []), *a.kwonlyargs,
                  *([a.kwarg] if a.kwarg else [])]
        out += [f"{filename}:{p.lineno} {node.name}({p.arg})" for p in params if _is_plain_any(p.annotation)]
    return out


def test_the_audit_sees_every_kind_of_parameter():
    src = ("from typing import Any\nimport typing\n"
           "def f(a: Any, /, b: int, *args: Any, c: typing.Any, **kw: Any) -> None: ...\n"
           "class K:\n    def m(self, d: 'Any', e: dict[str, Any], f: list[Any] | None = None) -> Any: ...\n")
    found = any_parameters(src)
    assert [x.split(" ", 1)[1] for x in found] == ["f(a)", "f(args)", "f(c)", "f(kw)", "m(d)"]


@pytest.mark.parametrize("layer", LAYERS)
def test_no_parameter_in_the_probe_and_gate_layers_is_annotated_any(layer):
    files = sorted((PKG / layer).rglob("*.py"))
    assert files, f"no modules under {PKG / layer}"
    found = [x for f in files for x in any_parameters(f.read_text(encoding="utf-8"), str(f.relative_to(PKG.parent)))]
    assert not found, "parameters annotated Any (give them a real type):\n" + "\n".join(found)


def test_mypy_checks_the_probe_and_gate_layers_strictly():
    cfg = tomllib.loads((PKG.parent / "pyproject.toml").read_text(encoding="utf-8"))
    overrides = cfg["tool"]["mypy"].get("overrides", [])
    strict = [o for o in overrides if {"pytest_posbias.probes.*", "pytest_posbias.gates.*"} <= set(o.get("module", []))]
    assert len(strict) == 1, "one [[tool.mypy.overrides]] table covers pytest_posbias.probes.* and .gates.*"
    for flag in ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls", "disallow_any_generics",
                 "warn_return_any"):
        assert strict[0].get(flag) is True, flag


CONDITION_NAME = re.compile(r"^(sampler|budget|phase|shift|rerun):.")


def hand_built_conditions(source: str) -> list[str]:
    """Condition names written out in ``source``: a literal such as ``"phase:0"`` or an f-string that
    starts ``f"phase:{s}"`` (a bare prefix such as ``"sampler:"`` in a ``startswith`` test is reading,
    not building, and is not reported)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) \
                    and re.match(r"^(sampler|budget|phase|shift|rerun):", first.value):
                out.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and CONDITION_NAME.match(node.value):
            out.append(f"{node.lineno}: {node.value!r}")
    return out


def test_the_condition_audit_sees_literals_and_f_strings():
    src = 'a = "phase:0"\nb = f"sampler:{x}"\nc = s.startswith("sampler:")\nd = "phase 0"\n'
    assert hand_built_conditions(src) == ["1: 'phase:0'", "2: f'sampler:{x}'"]


def test_condition_names_are_built_only_by_the_conditions_module():
    found = []
    for f in sorted(PKG.rglob("*.py")):
        if f == PKG / "probes" / "conditions.py":
            continue
        found += [f"{f.relative_to(PKG.parent)}:{x}" for x in hand_built_conditions(f.read_text(encoding="utf-8"))]
    assert not found, "condition names built by hand (use pytest_posbias.probes.conditions):\n" + "\n".join(found)


def test_the_flip_gate_refuses_a_which_that_is_not_a_sampler_pair():
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.gates import phase_gate_conditions
    from pytest_posbias.probes.phase import PhaseSpec

    spec = PhaseSpec(phases=3, budget=8)
    with pytest.raises(ConfigError, match=r"flip gate's `which` must be \(budget, sampler, sampler\); got '0-1'"):
        phase_gate_conditions("flip", "0-1", spec, lambda s: s)
    assert phase_gate_conditions("flip", (8, "left", "fps"), spec, lambda s: s) == ["left", "fps"]


@pytest.mark.parametrize(("kind", "value"), [("order", Fraction(1, 3)), ("phase", (1, 0, 2))])
def test_a_multiple_choice_property_refuses_the_other_propertys_perturbation(kind, value):
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.probes.search_mcq import McqProperty

    prop = McqProperty.__new__(McqProperty)  # the value checks need no model, store or item
    prop.property, prop.k, prop.item_id = kind, 3, "q7"
    for method in (prop.size, prop.encode):
        with pytest.raises(ConfigError, match=f"item q7: .* is not a perturbation of the '{kind}' property"):
            method(value)
    ok = (0, 2, 1) if kind == "order" else Fraction(1, 2)
    assert prop.size(ok) == (1.0 if kind == "order" else 0.5)
