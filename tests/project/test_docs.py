"""The README and the docs site are checked like code.

Every ``pytest …`` / ``python -m pytest …`` / ``bash scripts/main …`` command shown in a shell
block or an inline code span of ``README.md``, ``CONTRIBUTING.md``, ``benchmarks/README.md`` or
``docs/`` uses only options that ``pytest --help`` lists in a folder made by ``posbias init``
(where the short aliases ``--model`` & co. exist) and only markers ``pytest --markers`` lists
there; every ``posbias …`` command parses with the CLI's argparse parser. The reference pages'
generators run, and name every option and key the code defines.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
from support import REPO

from pytest_posbias.cli import build_parser
from pytest_posbias.cli.plan import split_args
from pytest_posbias.gate_registry import GATE_SPECS

PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md",
                *(REPO / "docs").rglob("*.md")])
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`((?:python -m pytest|pytest|posbias|bash scripts/main) [^`]+)`")
# Options of pytest and its usual plugins that a page may show but the help of a bare folder lacks.
PYTEST_SHORT = {"-m", "-k", "-n", "-p", "-q", "-x", "-v", "-s", "-o", "-c", "-h"}


def _hook():
    sys.path.insert(0, str(REPO / "docs" / "hooks"))
    try:
        import reference
    finally:
        sys.path.pop(0)
    return reference


def _shell_lines(text: str) -> list[str]:
    """The commands of shell code blocks (continuation lines joined) and of inline code spans."""
    out: list[str] = []
    for lang, body in FENCE.findall(text):
        if lang not in ("bash", "sh", "shell", "console", ""):
            continue
        out.extend(line.strip() for line in body.replace("\\\n", " ").splitlines())
    for m in INLINE.finditer(text):
        words = m.group(1).split()
        # `posbias SUBCOMMAND` in prose names a subcommand: it must exist (its --help parses)
        out.append(m.group(1) + (" --help" if len(words) == 2 and words[0] == "posbias" else ""))
    return out


def _commands(text: str) -> list[list[str]]:
    """Each pytest / posbias / scripts/main command as an argv (comments and && chains split)."""
    cmds: list[list[str]] = []
    for line in _shell_lines(text):
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        part: list[str] = []
        for w in [*words, "&&"]:
            if w in ("&&", "||", ";", "|", "&"):
                if part:
                    cmds.append(part)
                part = []
            else:
                part.append(w)
    out = []
    for argv in cmds:
        while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):  # VAR=value prefixes
            argv = argv[1:]
        if argv[:3] == ["python", "-m", "pytest"]:
            out.append(["pytest", *argv[3:]])
        elif argv[:2] == ["bash", "scripts/main"]:
            out.append(["pytest", *argv[2:]])
        elif argv[:1] in (["pytest"], ["posbias"]):
            out.append(argv)
    return out


def _all_commands() -> list[tuple[str, list[str]]]:
    return [(p.relative_to(REPO).as_posix(), argv) for p in PAGES for argv in _commands(p.read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[set[str], set[str]]:
    """(long options of ``pytest --help``, markers of ``pytest --markers``) in a ``posbias init`` folder."""
    folder = tmp_path_factory.mktemp("project")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    from pytest_posbias.cli import main

    assert main(["init", str(folder)]) == 0
    help_out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:randomly"], capture_output=True,
                              text=True, cwd=folder, env=env, timeout=300).stdout
    opts = set(re.findall(r"(--[a-z][a-z0-9-]+)", help_out))
    markers_out = subprocess.run([sys.executable, "-m", "pytest", "--markers", "-p", "no:randomly", "tests/robustness"], capture_output=True,
                                 text=True, cwd=folder, env=env, timeout=300).stdout
    markers = set(re.findall(r"^@pytest\.mark\.(\w+)", markers_out, re.M))
    # the listings are what we think they are: the plugin's options, the short aliases, the suites' markers
    assert {"--posbias-model", "--model", "--junit-xml"} <= opts, sorted(opts)[:20]
    assert {"meg", "slow"} <= markers, markers
    return opts, markers


def _check_pytest(argv: list[str], opts: set[str], markers: set[str]) -> list[str]:
    problems = []
    for i, a in enumerate(argv[1:], 1):
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name not in opts:
                problems.append(f"unknown option {name}")
        elif re.fullmatch(r"-[a-zA-Z]", a) and a not in PYTEST_SHORT:
            problems.append(f"unknown short option {a}")
        if a == "-m" and i + 1 < len(argv):
            words = set(re.findall(r"[A-Za-z_]\w*", argv[i + 1])) - {"and", "or", "not"}
            problems += [f"unknown marker {w}" for w in sorted(words - markers)]
    return problems


def _check_posbias(argv: list[str], opts: set[str], markers: set[str]) -> list[str]:
    args = argv[1:]
    if args[:1] == ["plan"]:  # posbias plan passes pytest's options through
        own, rest = split_args(args[1:])
        args = ["plan", *own]
        problems = _check_pytest(["pytest", *rest], opts, markers)
    else:
        problems = []
    try:
        build_parser().parse_args(args)
    except SystemExit as exc:  # --help / --version exit 0; a wrong command or option exits 2
        if exc.code != 0:
            problems.append("does not parse with the posbias CLI")
    return problems


def test_pages_show_commands():
    cmds = _all_commands()
    pages = {page for page, _ in cmds}
    assert "README.md" in pages and "docs/getting-started.md" in pages, pages
    assert ["pytest", "-m", "meg", "--model", "qwen3vl8b"] in [argv for _, argv in cmds]  # the headline command


def test_every_command_shown_parses(project, capsys):
    opts, markers = project
    bad = []
    for page, argv in _all_commands():
        check = _check_pytest if argv[0] == "pytest" else _check_posbias
        for problem in check(argv, opts, markers):
            bad.append(f"{page}: {shlex.join(argv)}: {problem}")
    capsys.readouterr()
    assert not bad, "\n".join(bad)


def test_checker_catches_a_wrong_option_and_marker(project):
    opts, markers = project
    assert _check_pytest(["pytest", "-m", "meg and order", "--posbias-modle", "x"], opts, markers) == [
        "unknown marker order", "unknown option --posbias-modle"]
    assert _check_posbias(["posbias", "init", "--no-such-flag"], opts, markers)
    assert not _check_posbias(["posbias", "plan", "-m", "meg", "--model", "sim:unbiased"], opts, markers)


def test_readme_keeps_the_two_setup_commands_and_is_short():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/main\nbash scripts/test\n" in text
    assert len(text.splitlines()) <= 200


def test_reference_pages_are_generated_from_the_code():
    from pytest_posbias import config

    ref = _hook()
    options = ref.options_markdown()
    for names, _kw in ref.plugin_options():
        assert f"`{names[0]}`" in options
    for short in config.SHORT_ALIASES:
        assert f"`{short}`" in options
    cfg = ref.config_markdown()
    for key in config._SCALARS:
        assert f"| `{key}` |" in cfg, key
    for gate in GATE_SPECS:
        assert f"| `{gate.name}` | `{gate.marker}` |" in cfg, gate.name
    cli = ref.cli_markdown()
    for name in ("init", "plan", "gates", "cache"):
        assert f"## `posbias {name}`" in cli
    page = (REPO / "docs" / "reference" / "options.md").read_text(encoding="utf-8")
    assert "`--posbias-model`" in ref.on_page_markdown(page) and "<!-- generated" not in ref.on_page_markdown(page)


def test_generated_cells_keep_angle_brackets_visible():
    ref = _hook()
    options = ref.options_markdown()
    assert "reports/&lt;model&gt;-&lt;UTC timestamp&gt;.html" in options  # not swallowed as an HTML tag
    assert ref._cell("a | b\n c") == "a \\| b c"


def test_links_outside_the_site_resolve():
    """README.md, CONTRIBUTING.md and benchmarks/README.md link files of the repository that exist
    (the site's own links are checked by mkdocs build --strict)."""
    for page in (REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "benchmarks" / "README.md"):
        links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
        local = [link for link in links if not re.match(r"[a-z]+://", link)]
        assert local or page.name != "README.md" or page.parent != REPO
        missing = [link for link in local if not (page.parent / link).exists()]
        assert not missing, f"{page.relative_to(REPO)}: {missing}"


def test_the_test_command_builds_the_site_strictly():
    assert "mkdocs build --strict" in (REPO / "scripts" / "test").read_text(encoding="utf-8")
    assert "bash scripts/test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
