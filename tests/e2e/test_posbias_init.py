"""``posbias init``: the scaffolded folder, the [tool.posbias] merge, --force, and this repository's suites/."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from support import REPO
from support.guest_project import EXISTING_PYPROJECT as EXISTING

from pytest_posbias.cli import main, scaffold
from pytest_posbias.errors import ConfigError


def _suites() -> list[str]:
    return sorted(p.stem for p in (REPO / "pytest_posbias" / "suites").glob("test_*.py"))


def test_init_in_an_empty_folder_writes_the_folder_and_a_new_pyproject(tmp_path, capsys):
    assert main(["init", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "tests" / "robustness"
    expected = {"conftest.py", "README.md", *(f"{s}.py" for s in _suites())}
    assert {p.name for p in folder.iterdir()} == expected
    for name in expected:  # says what it wrote, one line per path
        assert f"created     {folder / name}" in out
    assert f"created     {tmp_path / 'pyproject.toml'}" in out
    cfg = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert set(cfg) == {"tool"} and set(cfg["tool"]) == {"posbias"}
    assert cfg["tool"]["posbias"]["mode"] == "detect" and "model" not in cfg["tool"]["posbias"]
    # the suites' own sizes stay the package defaults unless --quick
    assert all(t == {} for t in cfg["tool"]["posbias"]["probes"].values())
    from pytest_posbias.config import parse_config

    parse_config(cfg["tool"]["posbias"])  # the plugin accepts the table
    text = (folder / "test_positional.py").read_text()
    assert "from pytest_posbias.suites.test_positional import *" in text


def test_init_merges_into_an_existing_pyproject_keeping_the_rest_byte_for_byte(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(EXISTING)
    assert main(["init", str(tmp_path), "--tests-dir", "tests/robustness", "--model", "qwen3vl8b"]) == 0
    out = capsys.readouterr().out
    assert f"merged      {tmp_path / 'pyproject.toml'}" in out
    new = (tmp_path / "pyproject.toml").read_text()
    assert new.startswith(EXISTING)  # the user's text, comments included, is untouched
    cfg = tomllib.loads(new)
    before = tomllib.loads(EXISTING)
    assert cfg["project"] == before["project"] and cfg["tool"]["ruff"] == before["tool"]["ruff"]
    assert cfg["tool"]["pytest"] == before["tool"]["pytest"]
    assert cfg["tool"]["posbias"]["model"] == "qwen3vl8b"
    assert "note:" not in out  # testpaths ["tests"] already collects tests/robustness


def test_init_never_overwrites_without_force(tmp_path, capsys):
    assert main(["init", str(tmp_path)]) == 0
    conftest = tmp_path / "tests" / "robustness" / "conftest.py"
    conftest.write_text("# mine\n")
    py = tmp_path / "pyproject.toml"
    py.write_text(py.read_text().replace('mode = "detect"', 'mode = "certify"'))
    mine = py.read_text()
    capsys.readouterr()
    assert main(["init", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert conftest.read_text() == "# mine\n" and py.read_text() == mine
    assert f"kept        {conftest} (exists; --force to overwrite)" in out
    assert "already has [tool.posbias]; --force to replace that table" in out
    assert main(["init", str(tmp_path), "--force"]) == 0
    out = capsys.readouterr().out
    assert f"overwritten {conftest}" in out and f"replaced    {py}" in out
    assert conftest.read_text() == scaffold._CONFTEST
    assert tomllib.loads(py.read_text())["tool"]["posbias"]["mode"] == "detect"


def test_init_errors_name_the_problem(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[project\nname = 1\n")
    assert main(["init", str(tmp_path)]) == 2
    assert "pyproject.toml is not valid TOML" in capsys.readouterr().err
    assert main(["init", str(tmp_path), "--tests-dir", "../elsewhere"]) == 2
    assert "--tests-dir must be a relative path inside the project" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("")
    assert main(["init", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_init_warns_when_testpaths_miss_the_folder(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["unit"]\n')
    assert main(["init", str(tmp_path)]) == 0
    assert "does not include tests/robustness" in capsys.readouterr().out


def test_this_repositorys_suites_folder_is_what_init_writes(tmp_path):
    """One copy of the suites: the repo's suites/ holds exactly the scaffold's thin files."""
    scaffold.scaffold(tmp_path, tests_dir="s")
    made = {p.name: p.read_text() for p in (tmp_path / "s").glob("*.py")}
    ours = {p.name: p.read_text() for p in (REPO / "suites").glob("*.py")}
    assert ours == made
    assert {f"{s}.py" for s in _suites()} <= set(ours)
    assert (REPO / "conftest.py").read_text() == (tmp_path / "conftest.py").read_text()  # the short options


@pytest.mark.usefixtures("heavy_modules")
def test_scaffolded_folder_collects_the_suites(pytester):
    scaffold.scaffold(pytester.path)
    # a subprocess: in-process, the scaffold's test_search.py would clash with this project's tests/unit/probes/test_search.py
    res = pytester.runpytest_subprocess("-m", "meg and not slow", "--model", "sim:middle-weak", "--collect-only", "-q",
                                        "-p", "no:randomly")
    assert res.ret == 0, res.stdout.str()[-2000:]
    from pytest_posbias.video.synthetic import configurations

    p4 = [f"{d}-{b}-P4" for d, b in configurations()]
    ids = [ln for ln in res.stdout.lines if "::test_meg[" in ln]
    assert sorted(ids) == sorted(f"tests/robustness/test_positional.py::test_meg[sim:middle-weak-{c}]" for c in p4)
    # and through the shipped package alone (the suites' own conftest parametrizes them)
    res = pytester.runpytest("--pyargs", "pytest_posbias.suites", "-m", "option_order and not slow", "--collect-only", "-q",
                             "--model", "sim:letter-bias", "-p", "no:randomly")
    assert res.ret == 0, res.stdout.str()[-2000:]
    collected = [ln for ln in res.stdout.lines if "::test_" in ln]
    assert len(collected) == 1 and collected[0].endswith("test_phase_order.py::test_order_flip[sim:letter-bias]"), collected


OWN_CONFTEST = """import pytest


def pytest_addoption(parser):
    parser.addoption("--model", default="mine")
    parser.addoption('--baseline', default="base")


@pytest.fixture
def own(request):
    return request.config.getoption("--model")
"""


@pytest.mark.usefixtures("heavy_modules")
def test_init_next_to_a_project_that_defines_model_keeps_its_options(pytester, capsys):
    """The project's root conftest defines --model and --baseline: init appends the other short
    options to it, says which it left out, and both the project's tests and the suites run."""
    (pytester.path / "conftest.py").write_text(OWN_CONFTEST)
    pytester.makepyfile(test_own="def test_own(own):\n    assert own == 'given'\n")
    assert main(["init", str(pytester.path), "--tests-dir", "robustness"]) == 0
    out = capsys.readouterr().out
    assert f"merged      {pytester.path / 'conftest.py'}" in out
    assert "--model left out: this project's conftest.py defines it (use --posbias-model)" in out
    assert "--baseline left out: this project's conftest.py defines it (use --posbias-baseline)" in out
    text = (pytester.path / "conftest.py").read_text()
    assert text.startswith(OWN_CONFTEST) and "skip=('--model', '--baseline')" in text
    res = pytester.runpytest_subprocess("--model", "given", "--posbias-model", "sim:middle-weak", "--judge", "fragment",
                                        "-m", "meg and not slow or not meg", "--collect-only", "-q", "-p", "no:randomly")
    assert res.ret == 0, res.stdout.str()[-2000:]
    assert "test_own.py::test_own" in res.stdout.str()
    assert any("robustness/test_positional.py::test_meg[sim:middle-weak-" in ln for ln in res.stdout.lines)
    own = pytester.runpytest_subprocess("test_own.py", "--model", "given", "-p", "no:randomly")
    own.assert_outcomes(passed=1)
    # a second init finds the short options registered and leaves the conftest alone
    assert main(["init", str(pytester.path), "--tests-dir", "robustness"]) == 0
    assert f"kept        {pytester.path / 'conftest.py'} (already registers the short options)" in capsys.readouterr().out
    assert (pytester.path / "conftest.py").read_text() == text


@pytest.mark.usefixtures("heavy_modules")
def test_init_in_a_repository_whose_tests_define_model_leaves_its_own_run_as_it_was(pytester, capsys):
    """A model repository: ``tests/conftest.py`` defines --model and its testpaths hold the suites' folder.
    init leaves --model out of the root conftest, naming the file (pytest loads the root conftest first, and a
    second registration of the option would stop every run of the project); the project's plain ``pytest``
    runs its own tests and leaves the gate tests out, saying so, serially and under ``-n 2``; a command line
    that asks for gate tests stays a usage error."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "conftest.py").write_text(OWN_CONFTEST)
    (pytester.path / "tests" / "test_own.py").write_text("def test_own(own):\n    assert own == 'mine'\n")
    assert main(["init", str(pytester.path)]) == 0
    assert "--model left out: tests/conftest.py defines it (use --posbias-model)" in capsys.readouterr().out
    for extra in ((), ("-n", "2")):
        res = pytester.runpytest_subprocess("-p", "no:randomly", *extra)
        assert res.ret == 0, res.stdout.str()[-2000:]
        res.assert_outcomes(passed=1)
        assert "robustness gate tests left out: no model named" in res.stdout.str()
    # a command line that asks for gate tests (their paths, a marker selection, a posbias option) stays a
    # usage error, even where the project's own tests are selected too
    for asks in (("tests/robustness",), ("tests",), ("-m", "meg or not meg"), ("--posbias-mode", "certify")):
        res = pytester.runpytest_subprocess(*asks, "-p", "no:randomly")
        assert res.ret == 4 and "no model to test" in res.stderr.str() + res.stdout.str(), asks


def test_init_leaves_out_a_short_option_a_pytest_plugins_module_defines(pytester, capsys):
    """--model registered by a module the project's conftest loads through ``pytest_plugins`` (no conftest names
    it): init asks pytest which options it knows and leaves --model out (registered twice, it would stop the
    project's runs with pytest's duplicate-option error)."""
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "__init__.py").write_text("")
    (pytester.path / "tests" / "conftest.py").write_text('pytest_plugins = ["tests.plugin_opts"]\n')
    (pytester.path / "tests" / "plugin_opts.py").write_text(
        'def pytest_addoption(parser):\n    parser.addoption("--model", default="mine")\n')
    (pytester.path / "tests" / "test_own.py").write_text("def test_own():\n    pass\n")
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    assert main(["init", str(pytester.path)]) == 0
    assert "--model left out: an installed pytest plugin or the project's pytest settings defines it" \
        in capsys.readouterr().out
    res = pytester.runpytest_subprocess("-p", "no:randomly")
    assert res.ret == 0, res.stdout.str()[-2000:] + res.stderr.str()[-2000:]
    res.assert_outcomes(passed=1)


def test_plugin_disabled_in_a_scaffolded_folder_skips_the_suites_with_one_line(pytester):
    scaffold.scaffold(pytester.path)
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    res = pytester.runpytest_subprocess("-p", "no:posbias", "-m", "meg and not slow or not meg", "--model", "sim:unbiased",
                                        "-p", "no:randomly", "-rs")
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.OK, out[-2000:]
    assert "INTERNALERROR" not in out
    lines = [ln for ln in res.stdout.lines if ln.startswith("posbias: ") and "need the pytest-posbias plugin" in ln]
    assert len(lines) == 1, out[-2000:]
    outcomes = res.parseoutcomes()
    assert outcomes["passed"] == 1 and outcomes["skipped"] >= 1
    assert lines[0].startswith(f"posbias: {outcomes['skipped']} tests skipped"), (lines, outcomes)  # selected ones only


@pytest.mark.parametrize("model", ["C:\\models\\qwen", 'say "hi"', "tab\there", "del\x7f", "Qwen/Qwen3-VL-8B-Instruct"])
def test_model_values_are_written_as_escaped_toml_strings(tmp_path, model):
    new_dir, merge_dir = tmp_path / "new", tmp_path / "merge"
    merge_dir.mkdir()
    (merge_dir / "pyproject.toml").write_text(EXISTING)
    for root in (new_dir, merge_dir):
        assert main(["init", str(root), "--model", model]) == 0
        assert tomllib.loads((root / "pyproject.toml").read_text())["tool"]["posbias"]["model"] == model
    # the new-file case is validated with tomllib too, and the error names the table, not the user's file
    with pytest.raises(ConfigError, match="table posbias init would write is not valid TOML"):
        scaffold.merge_pyproject(None, '[tool.posbias]\nmodel = "C:\\m"\n', force=False)
    with pytest.raises(ConfigError, match="table posbias init would write is not valid TOML"):
        scaffold.merge_pyproject(EXISTING, '[tool.posbias]\nmodel = "C:\\m"\n', force=True)


def test_crlf_pyproject_keeps_its_line_endings(tmp_path):
    py = tmp_path / "pyproject.toml"
    crlf = EXISTING.replace("\n", "\r\n").encode()
    py.write_bytes(crlf)
    assert main(["init", str(tmp_path)]) == 0
    merged = py.read_bytes()
    assert merged.startswith(crlf) and merged.count(b"\n") == merged.count(b"\r\n") > crlf.count(b"\n")
    assert main(["init", str(tmp_path), "--force", "--model", "m"]) == 0
    replaced = py.read_bytes()
    assert replaced.count(b"\n") == replaced.count(b"\r\n") and replaced.startswith(crlf)
    assert tomllib.loads(replaced.decode())["tool"]["posbias"]["model"] == "m"


def test_force_keeps_the_next_tables_comment_and_is_idempotent(tmp_path, capsys):
    py = tmp_path / "pyproject.toml"
    mine = ('[project]\nname = "x"\n\n[tool.posbias]\nmode = "certify"\nmodel = "old"\n\n'
            '[tool.posbias.thresholds]\nmeg = 0.5\n\n# ruff config below\n[tool.ruff]\nline-length = 120\n')
    py.write_text(mine)
    assert main(["init", str(tmp_path), "--force"]) == 0
    out = capsys.readouterr().out
    first = py.read_text()
    assert "\n\n# ruff config below\n[tool.ruff]\nline-length = 120\n" in first
    assert first.startswith('[project]\nname = "x"\n\n[tool.posbias]\n') and "\n\n\n" not in first
    cfg = tomllib.loads(first)
    assert cfg["tool"]["ruff"] == {"line-length": 120} and cfg["tool"]["posbias"]["mode"] == "detect"
    # it says which values it replaced
    assert "was mode: 'certify' -> 'detect'" in out and "was model: 'old' -> (removed)" in out
    assert "was thresholds.meg: 0.5 -> (removed)" in out
    for _ in range(2):  # --force again: the same bytes, no blank line added
        assert main(["init", str(tmp_path), "--force"]) == 0
        assert py.read_text() == first
    assert "was " not in capsys.readouterr().out  # nothing changed the second time


def test_invalid_pyproject_writes_nothing(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[project\nname = 1\n")
    assert main(["init", str(tmp_path), "--quick"]) == 2
    assert "pyproject.toml is not valid TOML" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]
    assert (tmp_path / "pyproject.toml").read_text() == "[project\nname = 1\n"


def test_quick_announces_the_rendering_and_hints_the_sim_command(tmp_path, capsys, monkeypatch):
    from pytest_posbias.video import synthetic

    calls = []

    def fake_build_set(dest, *, videos_per_config, groups_per_config):
        calls.append((videos_per_config, groups_per_config))
        Path(dest).mkdir(parents=True)
        (Path(dest) / "manifest.jsonl").write_text("")

    monkeypatch.setattr(synthetic, "build_set", fake_build_set)
    assert main(["init", str(tmp_path), "--quick"]) == 0
    out = capsys.readouterr().out
    assert calls == [(scaffold.QUICK_VIDEOS, scaffold.QUICK_GROUPS)]
    announce = out.index("rendering the quick synthetic set")
    assert "(about a minute)" in out and announce < out.index(f"created     {tmp_path / scaffold.QUICK_SET}")
    assert 'next: pytest -m "meg and not slow" --model sim:middle-weak' in out
    assert main(["init", str(tmp_path)]) == 0  # without --quick: the registry-model hint
    out = capsys.readouterr().out
    assert "next: pytest -m meg --model qwen3vl8b" in out and "rendering" not in out


def test_quick_on_a_project_with_a_posbias_table_says_the_table_was_left_as_it_is(tmp_path, capsys, monkeypatch):
    """--quick beside an existing [tool.posbias] table leaves the table as it is and says so, with how to use the
    quick set and sizes; it never announces a smoke run on the quick set that the table does not point at."""
    from pytest_posbias.video import synthetic

    def fake_build_set(dest, *, videos_per_config, groups_per_config):
        Path(dest).mkdir(parents=True)
        (Path(dest) / "manifest.jsonl").write_text("")

    monkeypatch.setattr(synthetic, "build_set", fake_build_set)
    own = '[tool.posbias]\nmodel = "qwen3vl8b"\n'
    (tmp_path / "pyproject.toml").write_text(own)
    assert main(["init", str(tmp_path), "--quick"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "pyproject.toml").read_text() == own
    assert "a smoke run on the quick set" not in out
    assert "left your [tool.posbias] table as it is" in out
    assert f'data = "{scaffold.QUICK_SET}/manifest.jsonl"' in out and "--quick --force" in out


def test_quick_again_on_the_table_quick_wrote_hints_the_smoke_run(tmp_path, capsys, monkeypatch):
    """A second --quick keeps the table the first wrote, which reads the quick set at quick sizes: the smoke-run hint."""
    from pytest_posbias.video import synthetic

    def fake_build_set(dest, *, videos_per_config, groups_per_config):
        Path(dest).mkdir(parents=True, exist_ok=True)
        (Path(dest) / "manifest.jsonl").write_text("")

    monkeypatch.setattr(synthetic, "build_set", fake_build_set)
    assert main(["init", str(tmp_path), "--quick"]) == 0
    capsys.readouterr()
    assert main(["init", str(tmp_path), "--quick"]) == 0
    out = capsys.readouterr().out
    assert "left your [tool.posbias] table as it is" not in out
    assert 'next: pytest -m "meg and not slow" --model sim:middle-weak' in out
