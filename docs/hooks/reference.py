"""mkdocs hook: the reference pages are generated from the code that defines them.

A page holding the line ``<!-- generated: NAME -->`` gets that line replaced by the Markdown of
``NAME`` (``cli``, ``options``, ``config``), rendered at build time from:

* ``cli``: the ``posbias`` argparse parser (:func:`pytest_posbias.cli.build_parser`), each
  subcommand's ``--help`` text;
* ``options``: the plugin's ``pytest_addoption`` run against a recording parser stub, plus the
  short aliases of a suites folder (:data:`pytest_posbias.config.SHORT_ALIASES`);
* ``config``: the ``[tool.posbias]`` key table (``pytest_posbias.config._SCALARS``), the gate
  registry (``pytest_posbias.gate_registry.GATE_SPECS``) and the probe settings
  (``pytest_posbias.probes.settings.DEFAULTS``).

So the pages cannot drift from the options the code accepts. ``tests/project/test_docs.py`` imports
these functions too.
"""

from __future__ import annotations

import argparse
import html
import os
import re
from typing import Any

MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.M)

# [tool.posbias] keys whose command-line option is not --posbias-<key with - for _>.
_KEY_OPTIONS = {"measurement_floor": "--posbias-floor", "sequential": "--posbias-fixed"}
# The keys with no command-line option, which therefore have no option help to show.
_FILE_ONLY = {
    "keep_runs": "keep the newest N run folders under the cache folder; older ones are removed at the end of "
                 "each run (the run just finished is always kept), as `posbias cache prune --keep-runs N`",
    "report_dir": "folder of the HTML reports (default reports/)",
}


def _cell(text: Any) -> str:
    """A Markdown table cell: HTML-escaped (help texts hold ``<model>``), pipes escaped, newlines folded."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


class _RecordingParser:
    """Stands in for pytest's Parser and OptionGroup: records every ``addoption`` call."""

    def __init__(self) -> None:
        self.options: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.inis: list[tuple[str, str]] = []

    def getgroup(self, *args: Any, **kwargs: Any) -> _RecordingParser:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.append((names, kwargs))

    def addini(self, name: str, help: str = "", *args: Any, **kwargs: Any) -> None:
        self.inis.append((name, help))


def plugin_options() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every option the plugin registers: (names, keyword arguments) of its ``addoption`` calls."""
    from pytest_posbias import plugin

    rec = _RecordingParser()
    plugin.pytest_addoption(rec)  # type: ignore[arg-type]
    return [(n, k) for n, k in rec.options if k.get("help") != argparse.SUPPRESS]


def _values(kwargs: dict[str, Any]) -> str:
    if kwargs.get("choices"):
        return " \\| ".join(f"`{c}`" for c in kwargs["choices"])
    if kwargs.get("action") in ("store_true", "store_false"):
        return "flag"
    return f"`{kwargs['metavar']}`" if kwargs.get("metavar") else ""


def options_markdown() -> str:
    """The pytest options page body: one row per plugin option, then the short aliases."""
    from pytest_posbias.config import SHORT_ALIASES

    rows = ["| option | value | repeatable | help |", "| --- | --- | --- | --- |"]
    for names, kw in plugin_options():
        rows.append(f"| {' '.join(f'`{n}`' for n in names)} | {_values(kw)} | "
                    f"{'yes' if kw.get('action') == 'append' else ''} | {_cell(kw.get('help', ''))} |")
    alias = ["", "Short aliases, registered by the `conftest.py` of a suites folder (this repository's root,",
             "and every folder `posbias init` writes):", "", "| short | same as |", "| --- | --- |"]
    alias += [f"| `{s}` | `{long}` |" for s, long in SHORT_ALIASES.items()]
    return "\n".join(rows + alias) + "\n"


def _help_text(parser: argparse.ArgumentParser) -> str:
    os.environ["COLUMNS"] = "100"
    return parser.format_help()


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    out.append((name, sub))
    return out


def cli_markdown() -> str:
    """The CLI page body: ``posbias --help`` and every (nested) subcommand's ``--help``."""
    from pytest_posbias.cli import build_parser

    root = build_parser()
    parts = ["```text", _help_text(root).rstrip(), "```", ""]

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for name, sub in _subparsers(parser):
            parts.extend([f"## `{prefix} {name}`", "", "```text", _help_text(sub).rstrip(), "```", ""])
            walk(f"{prefix} {name}", sub)

    walk("posbias", root)
    return "\n".join(parts)


def config_markdown() -> str:
    """The ``[tool.posbias]`` page body: scalar keys, gate tables and probe settings."""
    from pytest_posbias import config
    from pytest_posbias.gate_registry import GATE_SPECS
    from pytest_posbias.probes.settings import DEFAULTS

    opts = {names[0]: kw for names, kw in plugin_options()}
    rows = ["| key | command-line option | help (of the option) |", "| --- | --- | --- |"]
    for key, validator in config._SCALARS.items():
        opt = _KEY_OPTIONS.get(key, "--posbias-" + key.replace("_", "-"))
        if opt in opts:
            rows.append(f"| `{key}` | `{opt}` | {_cell(opts[opt].get('help', ''))} |")
        else:
            doc = _FILE_ONLY.get(key) or (validator.__doc__ or "").strip()
            rows.append(f"| `{key}` | (file only) | {_cell(doc)} |")
    rows += ["", "## Gate tables", "",
             "`[tool.posbias.thresholds]`, `[tool.posbias.models.\"<model>\".thresholds]` and",
             "`[tool.posbias.baseline_margins]` take `gate = number`. The gates, their markers and defaults:", "",
             "| gate | marker | threshold | baseline margin | allowed threshold range |",
             "| --- | --- | --- | --- | --- |"]
    for g in GATE_SPECS:
        rows.append(f"| `{g.name}` | `{g.marker}` | {g.threshold:g} | {g.margin:g} | "
                    f"{config.interval_text(g.threshold_range)} |")
    rows += ["", "## Probe settings", "", "`[tool.posbias.probes.<probe>]` tables, with the package's defaults:", ""]
    for probe, defaults in DEFAULTS.items():
        rows += [f"### `{probe}`", "", "| key | default |", "| --- | --- |"]
        rows += [f"| `{k}` | `{_cell(v)}` |" for k, v in defaults.items()]
        rows.append("")
    return "\n".join(rows) + "\n"


GENERATORS = {"cli": cli_markdown, "options": options_markdown, "config": config_markdown}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """mkdocs event: replace each ``<!-- generated: NAME -->`` line by its generated Markdown."""
    return MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)
