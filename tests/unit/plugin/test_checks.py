"""``plugin.checks``: the start-of-run checks, each a usage error naming the option or the
``[tool.posbias]`` key as the user gave it: a model compared with itself, no model for the gate
tests, an output path that cannot be written, a damaged cache; and the unusable videos warned
about without stopping the run. A real config comes from ``pytester.parseconfigure`` where the
check runs in ``pytest_configure``, else the stand-in of ``conftest.FakeConfig``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from support.terminal_lines import Lines

from pytest_posbias.plugin.checks import (
    NO_MODEL,
    as_typed,
    check_cache_before_calls,
    check_output_paths,
    model_missing,
    posbias_asked,
    warn_unusable_videos,
)
from pytest_posbias.plugin.state import plugin_of


def test_a_baseline_that_is_the_tested_model_is_refused(pytester: pytest.Pytester):
    """--posbias-baseline equal to the tested model: every paired difference would be 0, so the run stops naming both."""
    with pytest.raises(pytest.UsageError, match=r"^--posbias-baseline sim:unbiased: the baseline is the tested model "
                                                 r"sim:unbiased itself; name the release it is compared with$"):
        pytester.parseconfigure("--posbias-model", "sim:unbiased", "--posbias-baseline", "sim:unbiased")
    pytester.parseconfigure("--posbias-model", "sim:unbiased", "--posbias-baseline", "sim:primacy")  # a release: runs


def test_a_gate_given_two_thresholds_is_refused(pytester: pytest.Pytester):
    """Two different --posbias-threshold values for one gate: the later one won silently; the same value twice
    runs."""
    with pytest.raises(pytest.UsageError, match=r"^--posbias-threshold gives order more than once with different "
                                                 r"values \(order=0.2, order=0.3\); give each gate once$"):
        pytester.parseconfigure("--posbias-model", "sim:unbiased", "--posbias-threshold", "order=0.2",
                                "--posbias-threshold", "order=0.3")
    pytester.parseconfigure("--posbias-model", "sim:unbiased", "--posbias-threshold", "order=0.2",
                            "--posbias-threshold", "order=0.2", "--posbias-threshold", "flip=0.1")


def test_a_parity_reference_from_the_table_is_named_by_its_key(pytester: pytest.Pytester):
    """The parity reference set in [tool.posbias] and equal to the model: the error names the table's key, not an option."""
    pytester.makepyprojecttoml('[tool.posbias]\nparity = "sim:unbiased"\n')
    with pytest.raises(pytest.UsageError) as err:
        pytester.parseconfigure("--posbias-model", "sim:unbiased")
    assert "[tool.posbias] `parity` = sim:unbiased: the parity reference is the tested model sim:unbiased itself" \
        in str(err.value)


@pytest.mark.parametrize(("table", "args"), [
    ('model = "sim:unbiased"\nparity = "sim:unbiased"\n', ()),
    ('model = "sim:unbiased"\n', ("--posbias-baseline", "sim:unbiased")),
    ('model = "sim:unbiased"\nbaseline = "sim:unbiased"\n', ()),
], ids=["table-model-table-parity", "table-model-cli-baseline", "table-model-table-baseline"])
def test_a_model_from_the_table_compared_with_itself_is_refused(pytester: pytest.Pytester, table, args):
    """The tested model from [tool.posbias] `model` as its own parity reference or baseline: refused as from the command line."""
    pytester.makepyprojecttoml(f"[tool.posbias]\n{table}")
    with pytest.raises(pytest.UsageError, match="is the tested model sim:unbiased itself"):
        pytester.parseconfigure(*args)


def test_a_table_model_compared_with_another_release_starts(pytester: pytest.Pytester):
    """The table's model against a different baseline (table or command line) and a different parity reference: no refusal;
    a command-line model replaces the table's, so the table's model as the baseline is then a release, not itself."""
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\nbaseline = "sim:primacy"\nparity = "sim:recency"\n')
    pytester.parseconfigure()
    pytester.parseconfigure("--posbias-baseline", "sim:recency")
    pytester.parseconfigure("--posbias-model", "sim:primacy", "--posbias-baseline", "sim:unbiased")


def test_a_table_baseline_that_cannot_be_resolved_stops_at_start_naming_its_key(pytester: pytest.Pytester):
    """A baseline set only in [tool.posbias] is resolved at start like one on the command line: the error names the key."""
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\nbaseline = "sim:no-such-profile"\n')
    with pytest.raises(pytest.UsageError, match=r"\[tool\.posbias\] `baseline` = sim:no-such-profile"):
        pytester.parseconfigure()


def test_a_table_baseline_whose_weights_are_not_here_does_not_stop_the_projects_other_runs(pytester: pytest.Pytester):
    """A Hub id set as the table's baseline is not looked up in the local cache at start (as the table's model is not):
    the project's unrelated tests still run on a machine without those weights; on the command line it is looked up."""
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "sim:unbiased"\nbaseline = "acme-nonexistent/vlm-7b"\n')
    pytester.parseconfigure()
    with pytest.raises(pytest.UsageError, match="acme-nonexistent/vlm-7b"):
        pytester.parseconfigure("--posbias-baseline", "acme-nonexistent/vlm-7b")


def test_model_missing_only_for_gate_tests_without_any_model(fake_config):
    """Gate tests (posbias_run or posbias_model) with no model anywhere: missing; a model on the
    command line or in the table, --collect-only, or a collection of other tests: not."""
    gate, other = SimpleNamespace(fixturenames=("posbias_run",)), SimpleNamespace(fixturenames=("tmp_path",))
    assert model_missing(fake_config(), [other, gate])
    assert model_missing(fake_config(), [SimpleNamespace(fixturenames=("posbias_model",))])
    assert not model_missing(fake_config(), [other])
    assert not model_missing(fake_config({"--posbias-model": ["sim:unbiased"]}), [gate])
    assert not model_missing(fake_config({}, {"model": "sim:unbiased"}), [gate])
    assert not model_missing(fake_config({"--collect-only": True}), [gate])


def test_gate_tests_without_a_model_stop_the_run_with_the_no_model_message(pytester: pytest.Pytester):
    """A serial run collecting a test that uses posbias_run with no model is a usage error (exit 4), before any test runs."""
    pytester.makepyfile(test_g="def test_g(posbias_run):\n    raise AssertionError('GATE BODY RAN')\n")
    res = pytester.runpytest("-p", "no:randomly")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert NO_MODEL in res.stderr.str() and "GATE BODY RAN" not in res.stdout.str()


def test_a_posbias_run_is_one_with_a_table_or_a_model_option(fake_config):
    """posbias_asked: [tool.posbias] present, or a model, baseline or parity on the command line; else a guest run."""
    assert not posbias_asked(fake_config())
    assert posbias_asked(fake_config({}, {}))
    for option in ("--posbias-model", "--posbias-baseline", "--posbias-parity"):
        assert posbias_asked(fake_config({option: "sim:unbiased"}))


def test_an_unwritable_output_path_names_its_option_or_key(fake_config, tmp_path):
    """check_output_paths: a path under a regular file cannot be written; the error names how it was given."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    json_config = fake_config({"--posbias-json": str(blocker / "s.json")})
    with pytest.raises(pytest.UsageError, match=r"^--posbias-json: cannot write"):
        check_output_paths(json_config, plugin_of(json_config).pcfg)
    config = fake_config({}, {"cache": "file"})
    with pytest.raises(pytest.UsageError, match=r"\[tool\.posbias\] `cache`: cannot write.*it is a file, not a folder"):
        check_output_paths(config, plugin_of(config).pcfg)


def test_an_option_overrides_the_tables_key_so_only_the_option_is_checked(fake_config, tmp_path):
    """A table `cache` that cannot be written is not checked when --posbias-cache replaces it; a worker checks nothing."""
    (tmp_path / "file").write_text("")
    config = fake_config({"--posbias-cache": str(tmp_path / "ok")}, {"cache": "file"})
    check_output_paths(config, plugin_of(config).pcfg)
    worker = fake_config({"--posbias-json": str(tmp_path / "file" / "s.json")}, workerinput={"workerid": "gw0"})
    check_output_paths(worker, plugin_of(worker).pcfg)


def test_a_damaged_cache_stops_the_run_before_any_call(fake_config, tmp_path):
    """check_cache_before_calls: garbage in generations.sqlite is a usage error naming the file; a
    guest run with no cache folder is not checked and gets none made."""
    guest = fake_config()
    check_cache_before_calls(guest)
    assert not (tmp_path / ".posbias").exists()
    (tmp_path / ".posbias").mkdir()
    (tmp_path / ".posbias" / "generations.sqlite").write_bytes(b"not a database at all" * 10)
    with pytest.raises(pytest.UsageError, match=r"^posbias: .*generations\.sqlite"):
        check_cache_before_calls(fake_config({}, {}))


def test_unusable_videos_are_warned_one_line_each_and_the_run_goes_on(fake_config):
    """warn_unusable_videos: a count line and one line per problem on the controller; nothing on a worker."""
    tr = Lines()
    config = fake_config(plugins={"terminalreporter": tr})
    plugin_of(config).file_problems = ["a.mp4: missing", "b.mp4: 0 bytes"]
    warn_unusable_videos(config)
    assert tr.lines == ["[posbias] warning: 2 video files of the manifest cannot be used (the run goes on):",
                        "[posbias]   a.mp4: missing", "[posbias]   b.mp4: 0 bytes"]
    worker = fake_config(plugins={"terminalreporter": tr}, workerinput={"workerid": "gw0"})
    plugin_of(worker).file_problems = ["c.mp4: missing"]
    warn_unusable_videos(worker)
    assert len(tr.lines) == 3


def test_a_model_error_names_the_option_as_typed_or_the_tables_key(fake_config):
    """as_typed: "--posbias-model SPEC" in a model error becomes the short option the user typed,
    or the [tool.posbias] key that set the model; a longer spec is replaced before one it contains."""
    config = fake_config({"--posbias-model": ["ckpt/a", "ckpt/a-b"]})
    config.invocation_params.args = ("--model", "ckpt/a-b", "--posbias-model=ckpt/a")
    msg = "--posbias-model ckpt/a-b: no such checkpoint; --posbias-model ckpt/a: no such checkpoint"
    assert as_typed(config, msg) == "--model ckpt/a-b: no such checkpoint; --posbias-model ckpt/a: no such checkpoint"
    table = fake_config({}, {"model": "ckpt/a"})
    assert as_typed(table, "--posbias-model ckpt/a: no such checkpoint") == \
        f"{plugin_of(table).pcfg.source} `model` = ckpt/a: no such checkpoint"


@pytest.mark.parametrize("pytest_table", ['[tool.pytest.ini_options]\nmarkers = ["x: y"]\n\n', ""],
                         ids=["with-pytest-table", "as-posbias-init-writes"])
def test_a_path_value_given_with_a_space_that_reroots_the_run_is_refused(pytester: pytest.Pytester, tmp_path_factory,
                                                                         pytest_table):
    """pytest fixes its rootdir before the plugin's options exist, so ``--posbias-json FILE`` (a space)
    outside the project makes it take FILE for a test path and miss the project's configuration: a
    usage error naming the option and the '=' spelling; with '=' the run uses the project's file. A
    pyproject.toml without a pytest table (as ``posbias init`` writes it) is the project's file too."""
    pytester.makepyprojecttoml(pytest_table + '[tool.posbias]\nseed = 3\n')
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "summary.json"
    elsewhere.write_text("{}")
    with pytest.raises(pytest.UsageError) as err:
        pytester.parseconfigure("--posbias-json", str(elsewhere))
    assert str(err.value) == (f"pytest took {elsewhere} (the value of --posbias-json) for a test path, so it did not "
                              f"use {(pytester.path / 'pyproject.toml').resolve()}; write --posbias-json={elsewhere} "
                              "(with '=')")
    config = pytester.parseconfigure(f"--posbias-json={elsewhere}")
    assert config.inipath == pytester.path / "pyproject.toml"


def test_a_per_model_table_under_another_spelling_of_the_tested_model_is_refused(pytester: pytest.Pytester):
    """A per-model thresholds table keyed by the alias while the run names its Hub id (or the reverse) stops the run."""
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "Qwen/Qwen3-VL-8B-Instruct"\n'
                               '[tool.posbias.models."qwen3vl8b".thresholds]\ndpb = 0.01\n')
    with pytest.raises(pytest.UsageError, match=r"\.models\.'qwen3vl8b': the tested model Qwen/Qwen3-VL-8B-Instruct "
                                                 r"under another name"):
        pytester.parseconfigure()
    pytester.makepyprojecttoml('[tool.posbias]\nmodel = "Qwen/Qwen3-VL-8B-Instruct"\n'
                               '[tool.posbias.models."Qwen/Qwen3-VL-8B-Instruct".thresholds]\ndpb = 0.01\n'
                               '[tool.posbias.models."qwen3vl8b".thresholds]\ndpb = 0.02\n'
                               '[tool.posbias.models."sim:primacy".thresholds]\ndpb = 0.02\n')
    pytester.parseconfigure()  # the tested spelling has its own table; another model's table is left alone


def test_another_projects_own_short_option_with_a_path_is_left_to_it(pytester: pytest.Pytester, tmp_path_factory):
    """A project without [tool.posbias] whose own plugin defines --model: its run with `--model PATH` is not stopped."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nmarkers = ["x: y"]\n')
    pytester.makepyfile(own_plugin="def pytest_addoption(parser):\n    parser.addoption('--model')\n")
    pytester.syspathinsert()
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "weights.bin"
    elsewhere.write_text("")
    config = pytester.parseconfigure("-p", "own_plugin", "--model", str(elsewhere))
    assert config.getoption("--model") == str(elsewhere)


def test_the_path_guard_follows_pytests_own_search(pytester: pytest.Pytester, tmp_path_factory, monkeypatch):
    """No usage error where pytest used the file it would have used anyway: a `-c` file; an explicit test path
    whose folder holds the configuration, run from outside it; a pyproject.toml whose only table named like
    pytest's is another tool's (`[tool.pytest_env]`), beside the folder's tox.ini."""
    outside = tmp_path_factory.mktemp("outside") / "summary.json"
    outside.write_text("{}")
    pytester.makeini("[pytest]\nmarkers =\n    x: y\n")
    (pytester.path / "ci.ini").write_text("[pytest]\nmarkers =\n    x: y\n")
    pytester.parseconfigure("-c", "ci.ini", "--posbias-json", str(pytester.path / "ci.ini"))
    monkeypatch.chdir(outside.parent)
    tests = pytester.mkdir("tests")
    config = pytester.parseconfigure(str(tests), "--posbias-json", str(pytester.path / "ci.ini"))
    assert config.inipath == pytester.path / "tox.ini"
    sub = pytester.mkdir("sub")
    (sub / "pyproject.toml").write_text("[tool.pytest_env]\nA = '1'\n")
    monkeypatch.chdir(sub)
    config = pytester.parseconfigure("--posbias-json", str(pytester.path / "ci.ini"))
    assert config.inipath == pytester.path / "tox.ini"


def test_a_projects_table_below_the_runs_rootdir_is_refused_not_dropped(pytester: pytest.Pytester, monkeypatch):
    """A posbias project inside a repository whose pytest settings sit higher up: pytest roots the run at the
    repository and reads its settings, so the project's [tool.posbias] table (data, sizes, thresholds) would be
    dropped. A posbias run started there is a usage error naming the table and the -c that reads it; with -c it
    runs on the project's table."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nmarkers = ["x: y"]\n')
    evals = pytester.mkdir("evals")
    (evals / "pyproject.toml").write_text("[tool.posbias]\nseed = 3\n")
    monkeypatch.chdir(evals)
    with pytest.raises(pytest.UsageError) as err:
        pytester.parseconfigure("--posbias-model=sim:unbiased")
    assert str(err.value) == (f"{evals / 'pyproject.toml'} holds a [tool.posbias] table, but pytest rooted the run "
                              f"at {pytester.path} (the nearest pytest configuration), whose settings the run reads "
                              f"instead; run pytest with -c {evals / 'pyproject.toml'} to use the project's table")
    config = pytester.parseconfigure("-c", str(evals / "pyproject.toml"), "--posbias-model=sim:unbiased")
    assert config.rootpath == evals
    pytester.parseconfigure()  # not a posbias run (no model named): another test suite of the folder runs
