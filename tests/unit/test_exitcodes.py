"""The exit statuses (``exitcodes``): pytest's own keep pytest's numbers, the plugin's one added status
collides with none of them, every status has a name, and the README's table lists each as the code
names it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_posbias import exitcodes

README = Path(__file__).resolve().parents[2] / "README.md"


def test_pytests_statuses_keep_pytests_numbers():
    assert exitcodes.SHIP == pytest.ExitCode.OK
    assert exitcodes.DO_NOT_SHIP == pytest.ExitCode.TESTS_FAILED
    assert exitcodes.INTERRUPTED == pytest.ExitCode.INTERRUPTED
    assert exitcodes.INTERNAL_ERROR == pytest.ExitCode.INTERNAL_ERROR
    assert exitcodes.USAGE_ERROR == pytest.ExitCode.USAGE_ERROR
    assert exitcodes.NO_TESTS_COLLECTED == pytest.ExitCode.NO_TESTS_COLLECTED


def test_not_measured_is_no_status_of_pytests_but_the_max_warnings_one_the_readme_names():
    # pytest 9.2 added MAX_WARNINGS_ERROR = 6 (--max-warnings exceeded in a run that otherwise passed)
    theirs = {c.name: int(c) for c in pytest.ExitCode if c.name != "MAX_WARNINGS_ERROR"}
    assert exitcodes.NOT_MEASURED not in theirs.values()
    if hasattr(pytest.ExitCode, "MAX_WARNINGS_ERROR"):
        assert pytest.ExitCode.MAX_WARNINGS_ERROR == exitcodes.NOT_MEASURED
        assert "--max-warnings" in README.read_text(encoding="utf-8").split("## Exit codes", 1)[1].split("\n## ")[0]


def test_every_status_has_a_name_and_an_unknown_one_says_what_it_is():
    names = {s: exitcodes.label(s) for s in range(7)}
    assert names == {0: "SHIP", 1: "DO NOT SHIP", 2: "INTERRUPTED", 3: "INTERNAL ERROR", 4: "USAGE ERROR",
                     5: "NO TESTS COLLECTED", 6: "NOT MEASURED"}
    assert exitcodes.label(9) == "pytest exit 9"


def test_the_readme_lists_every_status_with_the_plugins_names():
    rows = dict(re.findall(r"^\| (\d) \| (.+) \|$", README.read_text(encoding="utf-8"), re.M))
    assert sorted(int(k) for k in rows) == list(range(7))
    for status, name in exitcodes.LABELS.items():
        assert rows[str(status)].startswith(f"**{name}**"), (status, rows[str(status)])
