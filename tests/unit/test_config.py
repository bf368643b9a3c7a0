"""Settings are checked when pytest starts, before any model call: a value that would make a gate
vacuous (it passes any model) or crash every test after the model calls were paid for is a usage
error (exit 4) naming the key or option, its value and the allowed range.

Placed with ``config.py``, its main subject (the probe settings' checks are
``probes/settings.py``'s); the exit-4 checks run pytest through pytester."""

from __future__ import annotations

import re

import pytest

from pytest_posbias.config import (
    MIN_RESAMPLES,
    check_output_path,
    check_url,
    in_interval,
    parse_config,
    parse_threshold_override,
    validate_thresholds,
)
from pytest_posbias.errors import ConfigError
from pytest_posbias.gate_registry import GATE_SPECS
from pytest_posbias.probes.settings import DEFAULTS, validate_probe_settings

# --------------------------------------------------------------------------- one test per key family


def test_every_gate_has_a_threshold_range_holding_its_default():
    thresholds = {g.name: g.threshold for g in GATE_SPECS}
    margins = {g.name: g.margin for g in GATE_SPECS}
    assert validate_thresholds("t", thresholds) == thresholds
    assert validate_thresholds("m", margins, margins=True) == margins


@pytest.mark.parametrize(("gate", "value", "allowed"), [
    ("meg", 50, "(0, 1)"), ("meg", 1.0, "(0, 1)"), ("meg", 0.0, "(0, 1)"), ("dpb", -0.05, "(0, 1)"),
    ("coverage", -3, "(0, 1]"), ("coverage", 0.0, "(0, 1]"), ("coverage", 1.5, "(0, 1]"),
    ("order", 7, "(0, 1)"), ("order", 1.0, "(0, 1)"), ("flip", 0.0, "(0, 1)"), ("repetition", 1, "(0, 1)"),
    ("stressor", -0.1, "[0, 1)"), ("fusion", 1.0, "(-1, 1)"), ("fusion", -1.0, "(-1, 1)"), ("equivalence", 0, "(0, 1)"),
])
def test_thresholds_outside_the_range_where_the_gate_measures_are_rejected(gate, value, allowed):
    with pytest.raises(ConfigError) as info:
        parse_config({"thresholds": {gate: value}})
    msg = str(info.value)
    assert f"[tool.posbias].thresholds.{gate} must lie in {allowed}" in msg and f"got {value!r}" in msg
    assert "passes every model or none" in msg


@pytest.mark.parametrize(("gate", "value"), [("fusion", 0.0), ("fusion", -0.05), ("stressor", 0.0), ("coverage", 1.0),
                                             ("meg", 0.5), ("order", 0.99)])
def test_thresholds_on_the_meaningful_side_are_accepted(gate, value):
    assert parse_config({"thresholds": {gate: value}}).thresholds == {gate: value}


def test_per_model_thresholds_margins_and_the_command_line_use_the_same_ranges():
    with pytest.raises(ConfigError, match=r"models\.'m'\.thresholds\.meg must lie in \(0, 1\)"):
        parse_config({"models": {"m": {"thresholds": {"meg": 50}}}})
    with pytest.raises(ConfigError, match=r"baseline_margins\.order must lie in \[0, 1\)"):
        parse_config({"baseline_margins": {"order": 1.0}})
    assert parse_config({"baseline_margins": {"order": 0}}).baseline_margins == {"order": 0.0}
    with pytest.raises(ConfigError, match=r"--posbias-threshold\.coverage must lie in \(0, 1\]"):
        parse_threshold_override("coverage=-3")


@pytest.mark.parametrize(("probe", "key", "value", "words"), [
    ("phase", "orderings", 1, "orderings must be an integer >= 2 (the order gate counts answers that change"),
    ("phase", "phases", 1, "phases must be an integer >= 2 (the phase gate"),
    ("phase", "samplers", ["left"], "samplers must list at least 2 distinct samplers"),
    ("phase", "samplers", ["left", "left"], "samplers must list at least 2 distinct samplers"),
    ("positional", "top_p", 0.0, "top_p must be a number in (0, 1]"),
    ("positional", "top_p", 1.5, "top_p must be a number in (0, 1]"),
    ("positional", "temperature", 2.5, "temperature must be a number in [0, 2]"),
    ("positional", "temperature", -0.1, "temperature must be a number in [0, 2]"),
    ("stressor", "frames", [2], "frames values must be among (4, 8, 16, 24, 32) (Replace 2 copies 2 frames"),
    ("phase", "max_new_tokens", 0, "max_new_tokens must be an integer >= 1"),
])
def test_probe_settings_that_make_a_gate_vacuous_or_a_backend_fail_are_rejected(probe, key, value, words):
    with pytest.raises(ConfigError) as info:
        parse_config({"probes": {probe: {key: value}}})
    assert f"[tool.posbias].probes.{probe}.{words}" in str(info.value) and f"got {value!r}" in str(info.value)


def test_the_default_probe_settings_pass_their_own_checks():
    for name, table in DEFAULTS.items():
        assert validate_probe_settings(name, table, where=name) == table


def test_n_resamples_below_the_documented_minimum_is_rejected():
    for bad in (1, 99, MIN_RESAMPLES - 1, 1.5e4, True):
        with pytest.raises(ConfigError, match=rf"`n_resamples` must be an integer >= {MIN_RESAMPLES} \(the percentile"):
            parse_config({"n_resamples": bad})
    assert parse_config({"n_resamples": MIN_RESAMPLES}).get("n_resamples") == MIN_RESAMPLES


def test_device_and_endpoint_urls_are_checked_like_their_options():
    with pytest.raises(ConfigError, match=r"`device` must be auto, cpu, cuda or cuda:N; got 'tpu'"):
        parse_config({"device": "tpu"})
    assert parse_config({"device": "cuda:1"}).get("device") == "cuda:1"
    for bad in ("localhost:8000/v1", "ftp://h/v1", "http:///v1", ["http://a/v1", "a/v1"]):
        with pytest.raises(ConfigError, match="must be an http:// or https:// URL with a host"):
            parse_config({"api_base": bad})
    assert check_url("x", "https://user:pw@h:8000/v1?k=1") == "https://user:pw@h:8000/v1?k=1"


def test_output_paths_that_cannot_be_written_are_named(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(ConfigError, match=r"--posbias-cache: cannot write the folder /proc/x: the folder /proc does not "
                                          r"accept new entries"):
        check_output_path("--posbias-cache", "/proc/x", folder=True)
    with pytest.raises(ConfigError, match=r"--posbias-json: cannot write the file /proc/x/out\.json"):
        check_output_path("--posbias-json", "/proc/x/out.json", folder=False)
    with pytest.raises(ConfigError, match="it is a folder, not a file"):
        check_output_path("--posbias-markdown", tmp_path, folder=False)
    with pytest.raises(ConfigError, match="is a file, so the folder .* cannot be created"):
        check_output_path("--posbias-report", f / "sub" / "r.html", folder=False)
    with pytest.raises(ConfigError, match=r"the path is too long for the file system"):
        check_output_path("--posbias-cache", tmp_path / ("c" * 5000), folder=True)
    deep = tmp_path / "new" / "deeper" / "out.json"
    assert check_output_path("--posbias-json", "new/deeper/out.json", folder=False, base=tmp_path) == deep
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing created, nothing left behind


def test_interval_membership_respects_open_and_closed_ends():
    assert in_interval(1.0, (0.0, 1.0, False, True)) and not in_interval(0.0, (0.0, 1.0, False, True))
    assert in_interval(0.0, (0.0, 1.0, True, False)) and not in_interval(1.0, (0.0, 1.0, True, False))


# --------------------------------------------------------------------------- through pytest: exit 4 at start

BAD_SETTINGS = [
    # (pyproject [tool.posbias] text, command-line options, what the error must say)
    ("[tool.posbias.probes.phase]\norderings = 1\n", [], "probes.phase.orderings must be an integer >= 2"),
    ("[tool.posbias.thresholds]\nmeg = 50\n", [], "thresholds.meg must lie in (0, 1)"),
    ("[tool.posbias.thresholds]\ncoverage = -3\n", [], "thresholds.coverage must lie in (0, 1]"),
    ("[tool.posbias.thresholds]\norder = 7\n", [], "thresholds.order must lie in (0, 1)"),
    ("[tool.posbias.probes.positional]\ntop_p = 0.0\n", [], "probes.positional.top_p must be a number in (0, 1]"),
    ("[tool.posbias]\nn_resamples = 1\n", [], f"`n_resamples` must be an integer >= {MIN_RESAMPLES}"),
    ("[tool.posbias]\ndevice = \"tpu\"\n", [], "`device` must be auto, cpu, cuda or cuda:N"),
    ("[tool.posbias]\ncache = \"/proc/x\"\n", [], "`cache`: cannot write the folder /proc/x"),
    ("[tool.posbias]\nreport_dir = \"/proc/x\"\n", [], "`report_dir`: cannot write the folder /proc/x"),
    ("[tool.posbias]\nreport = \"/proc/x/r.html\"\n", [], "`report`: cannot write the file /proc/x/r.html"),
    ("", ["--posbias-cache=/proc/x"], "--posbias-cache: cannot write the folder /proc/x"),
    ("", ["--posbias-json=/proc/x/out.json"], "--posbias-json: cannot write the file /proc/x/out.json"),
    ("", ["--posbias-markdown=/proc/x/s.md"], "--posbias-markdown: cannot write the file /proc/x/s.md"),
    ("", ["--posbias-report=/proc/x/r.html"], "--posbias-report: cannot write the file /proc/x/r.html"),
    ("", ["--posbias-threshold", "meg=50"], "--posbias-threshold.meg must lie in (0, 1)"),
    ("", ["--posbias-api-base", "localhost:8000/v1"], "--posbias-api-base must be an http:// or https:// URL with a host"),
    ("", [f"--posbias-data=/tmp/{'d' * 5000}.jsonl"], "--posbias-data: cannot open '/tmp/ddd"),
    ("", ["--posbias-json", f"/tmp/{'j' * 5000}.json"], "the path is too long for the file system (5010 characters)"),
    (f'[tool.posbias]\ndata = "/tmp/{"m" * 5000}.jsonl"\n', [], "cannot open the manifest (File name too long)"),
]


@pytest.mark.parametrize(("toml", "args", "expected"), BAD_SETTINGS, ids=[e[2][:40] for e in BAD_SETTINGS])
def test_bad_settings_stop_pytest_at_start_with_exit_4(pytester, toml, args, expected):
    pytester.makepyprojecttoml(toml)
    pytester.makepyfile(test_x="def test_a():\n    raise AssertionError('a test ran')\n")
    res = pytester.runpytest(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str()[-2000:]
    assert expected in res.stderr.str()
    assert "a test ran" not in res.stdout.str() and "Traceback" not in res.stdout.str() + res.stderr.str()
    assert max(len(line) for line in res.stderr.str().splitlines()) < 600  # a 5,000-character path is shortened


def test_a_command_line_path_overrides_an_unwritable_pyproject_path(pytester, tmp_path):
    pytester.makepyprojecttoml('[tool.posbias]\ncache = "/proc/x"\n')
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    res = pytester.runpytest(f"--posbias-cache={tmp_path / 'cache'}")
    assert res.ret == 0, res.stderr.str()


@pytest.mark.parametrize("where", ["[tool.posbias] `alpha`", "--alpha", "`alpha`"])
def test_alpha_is_checked_in_one_place_for_every_entry_point(where):
    from pytest_posbias.config import ALPHA_RANGE, check_alpha
    from pytest_posbias.stats import rate_verdict, share_difference_bounds

    assert check_alpha(0.05, where) == 0.05 and check_alpha(0.4999, where) == 0.4999
    for bad, shown in ((0.5, "0.5"), (0, "0"), (2.0, "2"), (-0.1, "-0.1"), (True, "True"), ("0.05", "'0.05'")):
        with pytest.raises(ConfigError, match=rf"^{re.escape(where)} must be a number in \(0, 0.5\); got {re.escape(shown)}$"):
            check_alpha(bad, where)
    assert ALPHA_RANGE == (0.0, 0.5, False, False)
    # the statistics and the config table go through it: the same range and wording
    with pytest.raises(ConfigError, match=r"`alpha` must be a number in \(0, 0.5\); got 0.5"):
        rate_verdict(1, 10, name="x", threshold=0.1, mode="detect", alpha=0.5)
    with pytest.raises(ConfigError, match=r"`alpha` must be a number in \(0, 0.5\); got 0.5"):
        share_difference_bounds([0.1, 0.2], [0, 1], alpha=0.5)
    with pytest.raises(ConfigError, match=r"\[tool.posbias\] `alpha` must be a number in \(0, 0.5\); got 0.5"):
        parse_config({"alpha": 0.5})


# --------------------------------------------------------------------------- load_pyproject: a damaged file


def test_a_pyproject_that_is_not_utf8_is_a_config_error_naming_the_file(tmp_path):
    """A pyproject.toml holding bytes that are not UTF-8 is a ConfigError naming the file."""
    from pytest_posbias.config import load_pyproject

    path = tmp_path / "pyproject.toml"
    path.write_bytes(b'[tool.posbias]\nmodel = "\xff\xfe"\n')
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_pyproject(path)


def test_a_tool_key_that_is_not_a_table_is_a_config_error(tmp_path):
    """``tool = 1`` in pyproject.toml is a ConfigError naming the file, not an AttributeError."""
    from pytest_posbias.config import load_pyproject

    path = tmp_path / "pyproject.toml"
    path.write_text("tool = 1\n")
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_pyproject(path)


def test_a_posbias_key_that_is_not_a_table_is_a_config_error(tmp_path):
    """``[tool] posbias = 1`` is a ConfigError naming the file and that the table must be a table."""
    from pytest_posbias.config import load_pyproject

    path = tmp_path / "pyproject.toml"
    path.write_text("[tool]\nposbias = 1\n")
    with pytest.raises(ConfigError, match=r"\[tool\.posbias\] must be a table"):
        load_pyproject(path)


def test_a_sample_size_too_small_for_a_gate_the_run_does_not_select_leaves_the_run_alone(pytester):
    """A probe size below the smallest sample at which a gate can fail stops only a run that selects
    that gate (tests/e2e/test_suite_phase_stressor.py runs both): a project's other tests run."""
    pytester.makepyprojecttoml("[tool.posbias.thresholds]\norder = 0.5\n\n[tool.posbias.probes.phase]\nitems = 4\n")
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    res = pytester.runpytest("--posbias-model", "sim:unbiased")
    assert res.ret == pytest.ExitCode.OK, res.stdout.str()[-2000:] + res.stderr.str()
    res.assert_outcomes(passed=1)


SECRET_URLS = ["htps://user:sk-SECRET@host/v1", "http://user:sk-SECRET@/v1", "localhost:8000/v1?api_key=sk-SECRET",
               "ftp://host/v1?access_token=sk-SECRET"]


@pytest.mark.parametrize("url", SECRET_URLS)
def test_a_rejected_endpoint_url_is_named_without_its_secret(url):
    """The error naming a malformed endpoint URL leaves out its password and key-like query values."""
    with pytest.raises(ConfigError, match="must be an http:// or https:// URL") as info:
        check_url("--posbias-api-base", url)
    assert "sk-SECRET" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        parse_config({"api_base": ["http://ok:8000/v1", url]})
    assert "sk-SECRET" not in str(info.value)


def test_a_rejected_endpoint_url_on_the_command_line_keeps_its_secret_off_the_terminal(pytester):
    """Exit 4 for a malformed --posbias-api-base, with no password on the terminal."""
    pytester.makepyfile(test_x="def test_a():\n    raise AssertionError('a test ran')\n")
    res = pytester.runpytest("--posbias-api-base", SECRET_URLS[0])
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "sk-SECRET" not in res.stdout.str() + res.stderr.str()


def test_a_resample_count_no_machine_can_hold_is_a_config_error():
    """``n_resamples`` so large that the bootstrap cannot allocate it is a ConfigError at start."""
    with pytest.raises(ConfigError, match="n_resamples"):
        parse_config({"n_resamples": 10**11})


@pytest.mark.parametrize("folder", [False, True])
def test_an_output_path_with_a_nul_byte_is_refused_at_start(tmp_path, folder):
    """A report, JSON or cache path holding a NUL byte is a ConfigError naming the setting."""
    with pytest.raises(ConfigError, match="report"):
        check_output_path("[tool.posbias] `report`", "r\x00.html", folder=folder, base=tmp_path)


@pytest.mark.parametrize("gate", ["attack", "equivalence"])
def test_a_baseline_margin_for_a_gate_without_a_baseline_form_is_refused(gate):
    """``[tool.posbias.baseline_margins]`` for a gate with no paired comparison is a ConfigError naming the gate."""
    from pytest_posbias.gate_registry import GATES

    assert GATES[gate].worse is None
    with pytest.raises(ConfigError, match=gate):
        parse_config({"baseline_margins": {gate: 0.05}})


def test_a_baseline_margin_outside_zero_to_one_is_refused():
    """A margin of 1 or more (every candidate passes) or below 0 is a ConfigError naming the gate and the range."""
    for bad in (1.0, 1.5, -0.01, float("nan")):
        with pytest.raises(ConfigError, match=r"baseline_margins\.dpb"):
            parse_config({"baseline_margins": {"dpb": bad}})
    assert parse_config({"baseline_margins": {"dpb": 0.0}}).margins()["dpb"] == 0.0


def test_a_model_listed_twice_is_a_config_error():
    """``model = ["sim:a", "sim:a"]`` is a ConfigError naming the repeated model."""
    with pytest.raises(ConfigError, match="sim:a"):
        parse_config({"model": ["sim:a", "sim:a"]})


def test_a_repeated_gate_family_weakens_holm():
    """Why a repeated model matters: the same three verdicts twice turn exit 1 into exit 0 under Holm."""
    from pytest_posbias.gates.decision import run_decision
    from pytest_posbias.stats import Verdict

    def verdict(p: float) -> Verdict:
        return Verdict(name="MEG", estimate=0.05, ci_low=0.03, ci_high=0.07, threshold=0.02, n=48, p_value=p,
                       passed=p > 0.05, mode="detect", reason="r", alpha=0.05, lower=-0.02, upper=0.02, unit="groups")

    once = [(f"t::{g}[sim_a]", verdict(p)) for g, p in (("meg", 0.015), ("dpb", 0.5), ("flip", 0.5))]
    twice = once + [(nid.replace("sim_a", "sim_a1"), v) for nid, v in once]
    assert run_decision(once).exit_code == 1 and run_decision(twice).exit_code == 0
