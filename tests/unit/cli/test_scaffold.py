"""``cli.scaffold`` (``posbias init``): what it writes and what it refuses. The ``[tool.posbias]``
table (valid for the plugin, quick sizes only with ``--quick``), TOML strings that round-trip, the
root conftest's short options (leaving out those the project defines), the pyproject merge that
keeps everything else as it was, refuses what it cannot replace and is idempotent under
``--force``, and the scaffold validated before anything is written. The CLI flow end to end is
``e2e/test_posbias_init.py``."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import PACKAGE
from support.guest_project import EXISTING_PYPROJECT as EXISTING

from pytest_posbias.cli import scaffold
from pytest_posbias.config import SHORT_ALIASES, parse_config
from pytest_posbias.errors import ConfigError


@given(st.text(st.characters(exclude_categories=("Cs",))))
def test_toml_string_round_trips_any_text(value):
    """toml_string(v) parses back to v for any text: quotes, backslashes, control characters, DEL."""
    assert tomllib.loads(f"k = {scaffold.toml_string(value)}")["k"] == value


@pytest.mark.parametrize("quick", [False, True])
def test_the_table_is_one_the_plugin_accepts(quick):
    """posbias_table: parse_config accepts it; the probe sizes are the quick ones with --quick and
    none (the package defaults) without; --quick points data at the quick set's manifest."""
    table = tomllib.loads(scaffold.posbias_table(model="sim:unbiased", quick=quick))["tool"]["posbias"]
    cfg = parse_config(table)
    assert table["model"] == "sim:unbiased" and cfg.get("model") == ["sim:unbiased"] and cfg.get("mode") == "detect"
    assert table["probes"] == (scaffold.QUICK_PROBES if quick else {key: {} for key in scaffold.QUICK_PROBES})
    assert table.get("data") == (f"{scaffold.QUICK_SET}/manifest.jsonl" if quick else None)
    assert "model" not in tomllib.loads(scaffold.posbias_table())["tool"]["posbias"]


def test_scaffolded_probe_tables_validate_and_name_the_search_budget():
    """Every `[tool.posbias.probes.*]` table `posbias init --quick` writes passes the probes' own
    validation, and the search suite's sizes and query budget are there for a user to find."""
    from pytest_posbias.probes.settings import validate_probe_settings

    probes = tomllib.loads(scaffold.posbias_table(quick=True))["tool"]["posbias"]["probes"]
    for name, table in probes.items():
        assert validate_probe_settings(name, table, where=f"probes.{name}") == table
    assert probes["search"]["budget"] == 30
    assert "# budget = 30" in scaffold.posbias_table(quick=False)


def test_a_new_root_conftest_registers_every_short_option():
    """alias_conftest(None): a conftest that compiles and calls add_short_aliases with nothing left out."""
    text, skip = scaffold.alias_conftest(None)
    assert text is not None and skip == ()
    compile(text, "conftest.py", "exec")
    assert "add_short_aliases(parser)" in text and "skip=" not in text


def test_a_projects_own_options_are_left_out_and_its_conftest_kept():
    """The project's conftest names --model and '--baseline': they are skipped (in the aliases'
    order), its text is kept as the start of the new one, and the result still compiles."""
    own = "import pytest\n\ndef pytest_addoption(parser):\n    parser.addoption('--baseline')\n" \
          '    parser.addoption("--model")'  # no final newline
    text, skip = scaffold.alias_conftest(own)
    assert skip == tuple(a for a in SHORT_ALIASES if a in ("--model", "--baseline"))
    assert text is not None and text.startswith(own + "\n") and f"skip={skip!r}" in text
    compile(text, "conftest.py", "exec")


def test_a_conftest_that_already_registers_the_aliases_is_left_alone():
    """alias_conftest: (None, ()) when the conftest already calls add_short_aliases (a second init)."""
    first, _ = scaffold.alias_conftest(None)
    assert scaffold.alias_conftest(first) == (None, ())


def test_merging_into_a_project_keeps_its_text_and_adds_the_table():
    """merge_pyproject: the existing file's bytes unchanged at the start, then the table; created for no file."""
    table = scaffold.posbias_table()
    new, action = scaffold.merge_pyproject(EXISTING, table, force=False)
    assert action == "merged" and new is not None and new.startswith(EXISTING) and new.endswith(table)
    assert scaffold.merge_pyproject(None, table, force=False) == (table, "created")


def test_an_existing_table_is_kept_without_force():
    """merge_pyproject: a file that has [tool.posbias] is not rewritten unless forced."""
    mine = EXISTING + '\n[tool.posbias]\nmode = "certify"\n'
    assert scaffold.merge_pyproject(mine, scaffold.posbias_table(), force=False) == (None, "kept")


def test_force_replaces_only_the_posbias_tables():
    """--force: the [tool.posbias] tables replaced, every other table as it was; a form the text merge cannot remove is refused."""
    text = EXISTING + '\n[tool.posbias]\nmode = "certify"\n\n[tool.posbias.thresholds]\nmeg = 0.5\n\n[tool.black]\nline-length = 88\n'
    new, action = scaffold.merge_pyproject(text, scaffold.posbias_table(quick=True), force=True)
    assert action == "replaced" and new is not None
    cfg = tomllib.loads(new)
    assert cfg["tool"]["black"] == {"line-length": 88} and cfg["tool"]["ruff"] == {"line-length": 120}
    assert cfg["tool"]["posbias"]["mode"] == "detect" and "meg" not in cfg["tool"]["posbias"].get("thresholds", {})
    assert cfg["tool"]["posbias"]["probes"]["positional"] == scaffold.QUICK_PROBES["positional"]
    # a table the text merge cannot remove is refused, naming the problem
    with pytest.raises(ConfigError, match="dotted keys or an inline table"):
        scaffold.merge_pyproject('[tool]\nposbias = { mode = "certify" }\n', scaffold.posbias_table(), force=True)


def test_replacing_twice_gives_the_same_bytes():
    """--force is idempotent: replacing the table in its own output changes nothing."""
    once, _ = scaffold.merge_pyproject(EXISTING + '\n[tool.posbias]\nseed = 3\n', scaffold.posbias_table(), force=True)
    twice, action = scaffold.merge_pyproject(once, scaffold.posbias_table(), force=True)
    assert action == "replaced" and twice == once


@pytest.mark.parametrize(("existing", "table", "problem"), [
    ("[project\nname = 1\n", scaffold.posbias_table(), "pyproject.toml is not valid TOML"),
    ('[tool]\nposbias.mode = "certify"\n', scaffold.posbias_table(), "dotted keys or an inline table"),
    (EXISTING, '[tool.posbias]\nmodel = "C:\\m"\n', "the [tool.posbias] table posbias init would write is not valid TOML"),
], ids=["invalid-file", "dotted-keys", "invalid-table"])
def test_what_the_merge_cannot_do_is_an_error_naming_it(existing, table, problem):
    """merge_pyproject refuses, naming the file or the table at fault, rather than write a broken or changed pyproject."""
    with pytest.raises(ConfigError) as err:
        scaffold.merge_pyproject(existing, table, force=True)
    assert problem in str(err.value)


def test_replaced_values_lists_what_force_changed_or_removed():
    """replaced_values: mode certify -> detect and thresholds.meg removed are listed; an unchanged seed is not."""
    old = '[tool.posbias]\nmode = "certify"\nseed = 0\n\n[tool.posbias.thresholds]\nmeg = 0.5\n'
    new = '[tool.posbias]\nmode = "detect"\nseed = 0\n'
    assert scaffold.replaced_values(old, new) == ["mode: 'certify' -> 'detect'", "thresholds.meg: 0.5 -> (removed)"]


def test_the_scaffold_writes_one_module_per_shipped_suite(tmp_path):
    """scaffold: conftest, README and a test module importing each suite of the package, a new
    pyproject and the root conftest, each reported created; a second run keeps them all."""
    suites = sorted(p.stem for p in (PACKAGE / "suites").glob("test_*.py"))
    written = scaffold.scaffold(tmp_path, tests_dir="rb")
    folder = tmp_path / "rb"
    assert {p.name for p in folder.iterdir()} == {"conftest.py", "README.md", *(f"{s}.py" for s in suites)}
    for s in suites:
        assert f"from pytest_posbias.suites.{s} import *" in (folder / f"{s}.py").read_text()
    assert {w.action for w in written} == {"created"}
    assert {w.path for w in written} >= {tmp_path / "pyproject.toml", tmp_path / "conftest.py"}
    again = scaffold.scaffold(tmp_path, tests_dir="rb")
    assert {w.action for w in again} == {"kept"}


def test_force_overwrites_the_files_it_wrote(tmp_path):
    """--force: the scaffold's own files are overwritten (an edited conftest restored), the table replaced."""
    scaffold.scaffold(tmp_path, tests_dir="rb")
    (tmp_path / "rb" / "conftest.py").write_text("# edited\n")
    actions = {w.path: w.action for w in scaffold.scaffold(tmp_path, tests_dir="rb", force=True)}
    assert actions[tmp_path / "rb" / "conftest.py"] == "overwritten"
    assert actions[tmp_path / "pyproject.toml"] == "replaced"
    assert "from pytest_posbias.suites.conftest import" in (tmp_path / "rb" / "conftest.py").read_text()


@pytest.mark.parametrize(("tests_dir", "problem"), [
    ("/abs/robustness", "--tests-dir must be a relative path inside the project; got '/abs/robustness'"),
    ("../elsewhere", "--tests-dir must be a relative path inside the project; got '../elsewhere'"),
    ("", "--tests-dir must be a relative path inside the project; got ''"),
])
def test_a_tests_dir_outside_the_project_is_refused_and_nothing_written(tmp_path, tests_dir, problem):
    """scaffold: an absolute, escaping or empty --tests-dir is a ConfigError naming it, with the folder untouched."""
    with pytest.raises(ConfigError) as err:
        scaffold.scaffold(tmp_path, tests_dir=tests_dir)
    assert str(err.value) == problem and list(tmp_path.iterdir()) == []


def test_a_root_that_is_a_file_or_an_invalid_pyproject_writes_nothing(tmp_path):
    """scaffold validates before writing: a file as DIR, or a pyproject.toml that is not TOML, leaves everything as it was."""
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        scaffold.scaffold(f)
    (tmp_path / "pyproject.toml").write_text("[project\n")
    with pytest.raises(ConfigError, match="pyproject.toml is not valid TOML"):
        scaffold.scaffold(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "pyproject.toml"]
    assert (tmp_path / "pyproject.toml").read_text() == "[project\n"


@pytest.mark.parametrize("name", ["conftest.py", "pyproject.toml"])
def test_a_project_file_that_is_not_utf8_is_an_error_naming_it_and_nothing_written(tmp_path, name):
    """scaffold: a root conftest.py or pyproject.toml that is not UTF-8 raised UnicodeDecodeError (the
    conftest's after the folder and pyproject.toml were written); now a ConfigError naming it, nothing written."""
    (tmp_path / name).write_bytes(b'x = "\xe9"\n')
    with pytest.raises(ConfigError, match=f"{name}: not UTF-8 text"):
        scaffold.scaffold(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert (tmp_path / name).read_bytes() == b'x = "\xe9"\n'


@pytest.mark.parametrize(("pyproject", "hint"), [
    (None, False),
    ("[project]\nname = 'x'\n", False),
    ('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n', False),
    ('[tool.pytest.ini_options]\ntestpaths = ["tests/robustness"]\n', False),
    ('[tool.pytest.ini_options]\ntestpaths = ["unit", "tests/robust"]\n', True),
    ("[tool.pytest.ini_options\n", False),
], ids=["no-file", "no-testpaths", "parent", "same", "elsewhere", "invalid"])
def test_testpaths_hint_only_when_pytest_would_not_collect_the_folder(tmp_path, pyproject, hint):
    """testpaths_hint: a note naming the folder only when testpaths holds neither it nor a parent of it."""
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    got = scaffold.testpaths_hint(tmp_path, "tests/robustness")
    assert (got is not None) == hint
    if hint:
        assert "does not include tests/robustness" in got and "pytest tests/robustness" in got


def test_the_scaffolded_readme_names_the_data_the_table_reads(tmp_path):
    """The README says which synthetic set a run reads: the quick set where ``--quick`` wrote its table."""
    plain = scaffold.scaffold(tmp_path / "a") and (tmp_path / "a" / scaffold.DEFAULT_TESTS_DIR / "README.md").read_text()
    assert "built once under\n`fixtures/synthetic/`" in plain and "synthetic-quick" not in plain
    kept = tmp_path / "b" / scaffold.QUICK_SET / "manifest.jsonl"  # already rendered: kept, nothing rendered here
    kept.parent.mkdir(parents=True)
    kept.write_text("")
    scaffold.scaffold(tmp_path / "b", quick=True)
    quick = (tmp_path / "b" / scaffold.DEFAULT_TESTS_DIR / "README.md").read_text()
    assert f"`{scaffold.QUICK_SET}/`" in quick and "`fixtures/synthetic/`" not in quick
    assert "--model=/path/to/checkpoint" in quick
