"""``pytest_posbias.suites.conftest``: the suites' hooks. A collected test's suite follows the
module that defines it; the suites' fixtures are parametrized from the run's models and the
``[tool.posbias.probes.*]`` settings; with ``-p no:posbias`` the suite tests are skipped with one
line; the property search without hypothesis is a usage error before any model call. The hooks
are checked through small pytester projects whose conftest re-exports them, as a scaffolded one does."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_posbias.suites import conftest as hooks

REEXPORT = """
from pytest_posbias.suites.conftest import (
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_generate_tests,
)
"""

FIXTURE_TESTS = """
def test_models(posbias_model):
    pass

def test_frames(stressor_frames):
    pass

def test_phases(phase_pair):
    pass

def test_samplers(sampler_pair):
    pass
"""


def test_suite_of_follows_the_defining_module_not_the_file_name():
    """suite_of: a scaffolded file imports a suite's function (the module decides), a user's own gate goes by its file name."""
    from pytest_posbias.gate_registry import SUITES
    from pytest_posbias.suites import test_phase_order, test_positional

    item = SimpleNamespace(function=test_positional.test_meg, path=Path("tests/robustness/test_gates_we_like.py"))
    assert hooks.suite_of(item) is SUITES["test_positional"]
    item = SimpleNamespace(function=test_phase_order.test_order_flip, path=Path("x/test_positional.py"))
    assert hooks.suite_of(item) is SUITES["test_phase_order"]

    def test_own():  # a user's own gate: by its file name
        pass

    assert hooks.suite_of(SimpleNamespace(function=test_own, path=Path("r/test_stressors.py"))) is SUITES["test_stressors"]
    assert hooks.suite_of(SimpleNamespace(function=test_own, path=Path("r/test_mine.py"))) is None


def test_the_fixtures_are_parametrized_from_the_models_and_the_probe_settings(pytester: pytest.Pytester):
    """Two models give two posbias_model ids; stressor frames [8, 16] give 8f and 16f; 3 phases give
    the C(3, 2) = 3 phase pairs then "any"; samplers left, fps, midpoint at budgets 8 and 16 give
    each of the C(3, 2) = 3 sampler pairs at each budget, in the configured order."""
    pytester.makeconftest(REEXPORT)
    pytester.makepyfile(test_mine=FIXTURE_TESTS)
    pytester.makepyprojecttoml('[tool.posbias]\n\n[tool.posbias.probes.stressor]\nframes = [8, 16]\n\n'
                               '[tool.posbias.probes.phase]\nphases = 3\nbudgets = [8, 16]\n'
                               'samplers = ["left", "fps", "midpoint"]\n')
    res = pytester.runpytest("--collect-only", "-q", "-p", "no:randomly",
                             "--posbias-model", "sim:unbiased", "--posbias-model", "sim:primacy")
    assert res.ret == 0, res.stdout.str()
    ids: dict[str, list[str]] = {}
    for line in res.stdout.lines:
        if "::" in line:
            name, _, param = line.split("::")[1].partition("[")
            ids.setdefault(name, []).append(param.rstrip("]"))
    assert ids["test_models"] == ["sim:unbiased", "sim:primacy"]
    assert ids["test_frames"] == ["8f", "16f"]
    assert ids["test_phases"] == ["phase-0-1", "phase-0-2", "phase-1-2", "phase-any"]
    assert ids["test_samplers"] == [f"{a}-vs-{b}@{budget}f" for budget in (8, 16)
                                    for a, b in (("left", "fps"), ("left", "midpoint"), ("fps", "midpoint"))]


def _groups_only_manifest(folder: Path) -> Path:
    """A manifest of 4 leisure-short videos (files present) in one group of 4, and no multiple-choice item."""
    rows = []
    for v in "abcd":
        (folder / f"{v}.mp4").write_bytes(b"\0" * 64)
        rows.append({"type": "video", "id": v, "path": str(folder / f"{v}.mp4"), "domain": "leisure",
                     "bucket": "short", "references": ["x"]})
    rows.append({"type": "group", "id": "g0", "domain": "leisure", "bucket": "short", "P": 4, "videos": list("abcd")})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest


def test_a_manifest_drives_the_configurations_and_skips_the_suites_it_has_no_data_for(pytester: pytest.Pytester):
    """With --posbias-data: the positional tests run on the manifest's configurations only (one
    leisure-short group of 4: one MEG test), and the multiple-choice suite, with no item to ask, is
    skipped with a reason naming the file and what it lacks."""
    from support.suite_project import write_suite_project

    data = pytester.mkdir("data")
    manifest = _groups_only_manifest(data)
    write_suite_project(pytester.path, manifest, ("test_phase_order.py", "test_positional.py"))
    items, _ = pytester.inline_genitems("-m", "(option_order or meg) and not slow", "-p", "no:randomly")
    meg = [i for i in items if i.originalname == "test_meg"]
    order = [i for i in items if i.originalname == "test_order_flip"]
    assert [i.callspec.id for i in meg] == ["sim:unbiased-leisure-short-P4"]
    assert all(i.get_closest_marker("skip") is None for i in meg)
    assert len(order) == 1
    reason = order[0].get_closest_marker("skip").kwargs["reason"]
    assert reason.startswith(f"{manifest} has no usable multiple-choice items"), reason


def test_with_the_plugin_disabled_the_suite_tests_are_skipped_with_one_line(pytester: pytest.Pytester):
    """-p no:posbias: a test using the plugin's fixtures is skipped with the reason, counted in one
    line; the project's other tests run."""
    pytester.makeconftest(REEXPORT)
    pytester.makepyfile(test_mine="def test_gate(posbias_run):\n    pass\n\ndef test_plain():\n    pass\n")
    res = pytester.runpytest("-p", "no:posbias", "-p", "no:randomly", "-rs")
    assert [ln for ln in res.stdout.lines if ln.startswith("posbias: ")] == [f"posbias: 1 tests skipped: {hooks.PLUGIN_OFF}"]
    res.assert_outcomes(passed=1, skipped=1)
    assert hooks.PLUGIN_OFF in res.stdout.str().split("short test summary")[1]


def test_hypothesis_installed_reads_the_import_system_without_importing(monkeypatch):
    """hypothesis_installed: True when the module can be found, False when not or when the lookup fails."""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert not hooks.hypothesis_installed()

    def broken(name):
        raise ValueError("hypothesis.__spec__ is None")

    monkeypatch.setattr(importlib.util, "find_spec", broken)
    assert not hooks.hypothesis_installed()
    monkeypatch.undo()
    assert hooks.hypothesis_installed()  # this environment has the extra (the dev extra needs it)


def _session(*, search: bool, active: bool = True, collect_only: bool = False):
    """A session whose items hold a test of the property-search suite (``search``) or of another suite."""
    from pytest_posbias.plugin.state import PLUGIN_KEY

    stash = pytest.Stash()
    if active:
        stash[PLUGIN_KEY] = object()  # type: ignore[assignment]
    config = SimpleNamespace(stash=stash, getoption=lambda name, default=None: collect_only
                             if name == "--collect-only" else default)
    module = "pytest_posbias.suites.test_search" if search else "pytest_posbias.suites.test_phase_order"
    return SimpleNamespace(config=config, items=[SimpleNamespace(function=SimpleNamespace(__module__=module))])


def test_the_search_suite_without_hypothesis_stops_before_any_call(monkeypatch):
    """pytest_collection_finish: a selected search test without hypothesis is a usage error naming
    the extra; other suites, a --collect-only, a run with the plugin off, or hypothesis present: none."""
    monkeypatch.setattr(hooks, "hypothesis_installed", lambda: False)
    with pytest.raises(pytest.UsageError, match=r"pip install 'pytest-posbias\[search\]'"):
        hooks.pytest_collection_finish(_session(search=True))  # type: ignore[arg-type]
    hooks.pytest_collection_finish(_session(search=False))  # type: ignore[arg-type]
    hooks.pytest_collection_finish(_session(search=True, collect_only=True))  # type: ignore[arg-type]
    hooks.pytest_collection_finish(_session(search=True, active=False))  # type: ignore[arg-type]
    monkeypatch.setattr(hooks, "hypothesis_installed", lambda: True)
    hooks.pytest_collection_finish(_session(search=True))  # type: ignore[arg-type]
