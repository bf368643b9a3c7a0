"""``plugin.options``: a bad option value is a usage error naming the option as typed, the short
aliases write the long options' destinations, and :func:`options` merges the command line over
``[tool.posbias]`` over the defaults. The option parsing is checked through small pytester runs."""

from __future__ import annotations

import pytest
from support.guest_project import GUEST_CONFTEST

from pytest_posbias.plugin.options import add_short_aliases, options, run_directory, run_identity
from pytest_posbias.run_options import RunOptions


def test_short_aliases_helper(pytester: pytest.Pytester):
    """add_short_aliases: dest aliases of the long options; one this project already defines is left out."""
    pytester.makeconftest(GUEST_CONFTEST + """
from pytest_posbias.plugin import add_short_aliases


@pytest.hookimpl(specname="pytest_addoption", trylast=True)
def pytest_addoption_posbias(parser):
    print("ALIASES", add_short_aliases(parser))
""")
    pytester.makepyfile(test_v="""
def test_v(request):
    o = request.config.option
    assert (o.posbias_judge, o.posbias_api_base) == ("fragment", ["http://a/v1", "http://b/v1"])
    assert request.config.getoption("--model") == "given"
""")
    res = pytester.runpytest("-s", "--model", "given", "--judge", "fragment", "--api-base", "http://a/v1",
                             "--posbias-api-base", "http://b/v1", "-p", "no:randomly")
    assert res.ret == 0, res.stdout.str()
    assert "ALIASES ['--judge', '--api-base']" in res.stdout.str()  # --model, --baseline: the project's own
    bad = pytester.runpytest("--judge", "bert")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--judge: expects one of embed, fragment" in bad.stderr.str()  # the spelling the user typed


def test_a_skip_that_is_not_a_short_alias_is_refused_naming_it():
    """add_short_aliases(skip=...) names an unknown alias instead of silently registering them all."""
    with pytest.raises(ValueError, match=r"skip: '--modle' is not a short alias; expected some of --model"):
        add_short_aliases(parser=None, skip=("--modle",))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--posbias-alpha", "2"], "--posbias-alpha: expects a number in (0, 0.5); got '2'"),
        (["--posbias-alpha", "x"], "--posbias-alpha: expects a number in (0, 0.5); got 'x'"),
        (["--posbias-seed", "-3"], "--posbias-seed: expects an integer >= 0; got '-3'"),
        (["--posbias-seed", "x"], "--posbias-seed: expects an integer >= 0; got 'x'"),
        (["--posbias-batch-size", "0"], "--posbias-batch-size: expects an integer >= 1; got '0'"),
        (["--posbias-floor", "x"], "--posbias-floor: expected a number in (0, 1], got 'x'"),
        (["--posbias-api-retries", "11"], "--posbias-api-retries must be an integer from 0 to 10; got '11'"),
        (["--posbias-mode", "strict"], "--posbias-mode: expects 'detect' or 'certify'; got 'strict'"),
        (["--posbias-model", "sim:nonsense"], "--posbias-model: unknown sim profile 'nonsense'; allowed: sim:unbiased"),
        (["--posbias-model", ""], "--posbias-model: expects a registry alias"),
        (["--posbias-judge", "bert"], "--posbias-judge: expects one of embed, fragment, openai, auto or openai:MODEL; got 'bert'"),
        (["--posbias-threshold", "mg=0.1"], "unknown gate 'mg'; known gates: dpb, meg"),
        (["--posbias-threshold", "meg"], "--posbias-threshold expects GATE=VALUE"),
        (["--posbias-data", "/no/such/manifest.jsonl"], "--posbias-data: no such file: '/no/such/manifest.jsonl'"),
        (["--posbias-device", "tpu"], "--posbias-device: expects auto, cpu, cuda or cuda:N; got 'tpu'"),
    ],
)
def test_bad_option_values_are_usage_errors_naming_the_option(pytester: pytest.Pytester, args, expected):
    """Every typed option rejects a bad value with a usage error (exit 4) naming the option and the value."""
    res = pytester.runpytest(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert expected in res.stderr.str()


@pytest.mark.parametrize("value", ["0", "1", "0.5", "-0.1", "nan"])
def test_the_floor_accepts_exactly_the_interval_0_exclusive_to_1_inclusive(pytester: pytest.Pytester, value):
    """--posbias-floor is a share in (0, 1]: 0, a negative and nan are refused, 1 and 0.5 kept as numbers."""
    good = 0 < float(value) <= 1
    if good:
        assert pytester.parseconfig("--posbias-floor", value).getoption("--posbias-floor") == float(value)
    else:
        with pytest.raises(pytest.UsageError, match=r"--posbias-floor: expected a number in \(0, 1\]"):
            pytester.parseconfig("--posbias-floor", value)


def test_the_command_line_wins_over_the_table_and_the_table_over_the_defaults(fake_config):
    """options(): a field given on the command line is the option's value, else the table's, else RunOptions' default."""
    config = fake_config({"--posbias-mode": "certify", "--posbias-threshold": [("meg", 0.1)]},
                         {"mode": "detect", "alpha": 0.01, "model": "sim:unbiased"})
    o = options(config)
    assert o.mode == "certify"  # the command line over the table's detect
    assert o.alpha == 0.01  # the table over the default
    assert o.concurrency == RunOptions().concurrency  # neither: the default
    assert o.models == ("sim:unbiased",) and o.threshold_overrides == {"meg": 0.1}


def test_an_explicit_zero_seed_on_the_command_line_wins_over_the_tables_seed(fake_config):
    """--posbias-seed 0 is a value, not a missing option: the table's seed 7 does not replace it."""
    assert options(fake_config({"--posbias-seed": 0}, {"seed": 7})).seed == 0
    assert options(fake_config({}, {"seed": 7})).seed == 7


def test_the_models_on_the_command_line_replace_the_tables_model(fake_config):
    """Repeated --posbias-model values are the run's models, in order; the table's model is then unused."""
    config = fake_config({"--posbias-model": ["sim:primacy", "sim:unbiased"]}, {"model": "sim:recency"})
    assert options(config).models == ("sim:primacy", "sim:unbiased")


def test_a_relative_data_path_is_the_roots_from_the_table_and_as_typed_from_the_command_line(fake_config, tmp_path):
    """The table's relative ``data`` resolves against the project root; --posbias-data's stays as the user typed it."""
    assert options(fake_config({}, {"data": "d/m.jsonl"})).data == str(tmp_path / "d" / "m.jsonl")
    assert options(fake_config({"--posbias-data": "d/m.jsonl"}, {"data": "other.jsonl"})).data == "d/m.jsonl"


def test_fixed_turns_the_sequential_design_off_over_the_table(fake_config):
    """--posbias-fixed gives the fixed design even where the table leaves sequential on; the table alone can turn it off."""
    assert options(fake_config({}, {})).sequential is True
    assert options(fake_config({"--posbias-fixed": True}, {"sequential": True})).sequential is False
    assert options(fake_config({}, {"sequential": False})).sequential is False


def test_the_run_directory_is_under_the_cache_by_run_id(fake_config, tmp_path):
    """run_directory: <cache>/runs/<run id>, a relative cache folder being the project root's."""
    assert run_directory(fake_config({}, {"cache": ".pb"}, run_id="r42")) == tmp_path / ".pb" / "runs" / "r42"
    elsewhere = tmp_path / "abs-cache"
    assert run_directory(fake_config({"--posbias-cache": str(elsewhere)}, run_id="r7")) == elsewhere / "runs" / "r7"


def test_the_run_identity_names_what_the_run_decides_on_and_no_endpoint(fake_config):
    """run_identity: models, baseline, mode/alpha/multiplicity, design, seed, data, cache and run id;
    an API base URL (it may carry a token) is not in it."""
    config = fake_config({"--posbias-model": ["sim:unbiased"], "--posbias-baseline": "sim:primacy",
                          "--posbias-api-base": ["http://user:s3cret@host/v1"], "--posbias-fixed": True},
                         {"alpha": 0.01, "seed": 3}, run_id="r-9")
    line = run_identity(config, "r-9")
    assert line == ("posbias: models sim:unbiased; baseline sim:primacy; mode detect, alpha 0.01, multiplicity holm; "
                    "fixed design; seed 3; data the synthetic set; cache .posbias (read-write); run r-9")
    assert "s3cret" not in line


def test_a_data_path_the_file_system_cannot_look_up_is_named_not_raised(pytester: pytest.Pytester):
    """--posbias-data with a name too long for the file system: a usage error naming the option and
    the OS's reason, instead of an OSError traceback."""
    with pytest.raises(pytest.UsageError, match=r"^--posbias-data: cannot open '.*': File name too long"):
        pytester.parseconfig("--posbias-data", "m" * 5000 + ".jsonl")


def test_the_same_model_given_twice_is_a_usage_error(pytester: pytest.Pytester):
    """``--posbias-model sim:unbiased --posbias-model sim:unbiased`` stops pytest at start with exit 4."""
    pytester.makepyfile(test_x="def test_a():\n    raise AssertionError('a test ran')\n")
    res = pytester.runpytest("--posbias-model", "sim:unbiased", "--posbias-model", "sim:unbiased")
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()[-2000:]
    assert "sim:unbiased" in res.stderr.str()
