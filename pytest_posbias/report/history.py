"""Trends across releases: ``posbias report --history DIR``.

Every run log under DIR (searched recursively) is one release, ordered by start time. A gate is
identified across releases by (suite file, gate name), so a renamed model still lines up; per gate
the page draws the estimate with its CI by release against the allowed bounds.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ConfigError
from . import figures
from .front import anchor, num
from .summary import suite_of, suite_order, suite_title


def find_run_logs(directory: str | Path, skipped: list[str] | None = None) -> list[Path]:
    """Run logs under ``directory`` (recursively): ``*.jsonl`` files whose first line is a posbias
    run-log header of this schema version. Worker logs (``log-*.jsonl``) beside a merged ``run.jsonl``
    are skipped silently; any other ``*.jsonl`` that is not a run log this version reads (unreadable,
    nested too deeply to parse, no header, another schema version) is appended to ``skipped`` with why."""
    import json

    from ..engine import SCHEMA_VERSION

    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"--history: {directory}: not a directory")
    skipped = [] if skipped is None else skipped
    out = []
    for p in sorted(root.rglob("*.jsonl")):
        if p.name.startswith("log-") and (p.parent / "run.jsonl").is_file():
            continue
        try:
            with p.open("rb") as fh:  # bytes: a later line that is not UTF-8 is no concern of the header's
                first = json.loads(fh.readline().decode("utf-8") or "{}")
        except (OSError, ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            skipped.append(f"{p}: unreadable ({type(exc).__name__})")
            continue
        if isinstance(first, dict) and first.get("kind") == "header" and first.get("schema_version") == SCHEMA_VERSION:
            out.append(p)
        elif isinstance(first, dict) and first.get("kind") == "header" and "schema_version" in first:
            skipped.append(f"{p}: run log schema version {first['schema_version']!r} is not supported "
                           f"(expected {SCHEMA_VERSION})")
        else:
            skipped.append(f"{p}: not a posbias run log (no run-log header on its first line)")
    return out


def _number(v: Any) -> float:
    """A verdict's numeric field as :func:`~.front.num` reads it; NaN (no point drawn) for a value
    that is no number (text, a list: a damaged or foreign log)."""
    try:
        return num(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _passed(v: dict[str, Any], *, run_level: bool) -> bool:
    """Whether a verdict passed: ``adjusted_passed`` (the run-level decision, ``run_level``; where the
    log has it) else ``passed``. Only JSON ``true`` is a pass: a missing or non-boolean value (the
    string ``"false"``) or a verdict without its node id is a damaged record, a failure (no decision
    is no pass)."""
    decision = v["adjusted_passed"] if run_level and "adjusted_passed" in v else v.get("passed")
    return decision is True and isinstance(v.get("nodeid"), str)


def _missing(run: Any) -> int:
    """Verdicts the run's recorded decision counted that its log does not hold (the verdict lines come
    last: a log cut short loses them first); 0 for a whole log or one without the record."""
    n = (run.header.get("run_decision") or {}).get("n_gates")
    return max(0, n - len(run.verdicts)) if type(n) is int else 0


def _release_label(header: dict[str, Any], path: Path) -> str:
    models = "+".join(header.get("models") or ["?"])
    started = str(header.get("started") or "")[:16].replace("T", " ")
    return f"{models} {started}".strip() or path.parent.name


def history(runs: Sequence[Any]) -> dict[str, Any]:
    """Releases (in start order) and per gate the points and the trend figure. A release's failures
    and a gate failing in the latest release are the run-level decision's (``adjusted_passed``; a
    gate's own verdict in a log without it); the points show each gate's own verdict.

    A run log whose run id an earlier file already had (a copied artifact) is left out and
    listed in ``duplicates``; a run with no verdict is a release marked "no gate decided", one whose log
    lost verdicts its decision counted says how many (``missing``)."""
    runs = sorted(runs, key=lambda r: (str(r.header.get("started") or ""), str(r.path)))
    seen: dict[str, str] = {}
    kept, duplicates = [], []
    for r in runs:
        rid = r.header.get("run_id")
        if rid is not None and rid in seen:
            duplicates.append({"path": str(r.path), "run_id": rid, "same_as": seen[rid]})
        else:
            seen[rid] = str(r.path)  # a run id of None is never looked up
            kept.append(r)
    runs = kept
    releases = [{"label": _release_label(r.header, r.path), "path": str(r.path), "run_id": r.header.get("run_id"),
                 "n_fail": sum(not _passed(v, run_level=True) for v in r.verdicts), "n": len(r.verdicts),
                 "undecided": not r.verdicts, "missing": _missing(r)} for r in runs]
    gates: dict[tuple[str, str], list[dict[str, Any] | None]] = {}
    for i, r in enumerate(runs):
        for v in r.verdicts:
            gates.setdefault((suite_of(str(v.get("nodeid") or "")), str(v.get("name"))), [None] * len(runs))[i] = v
    out = []
    for key in sorted(gates, key=lambda k: (suite_order(k[0]), k[1])):
        pts = [{"release": f"#{i + 1}", "label": releases[i]["label"], "estimate": _number(v.get("estimate")),
                "low": _number(v.get("ci_low")), "high": _number(v.get("ci_high")),
                "passed": _passed(v, run_level=False)}
               for i, v in enumerate(gates[key]) if v is not None]
        last = next(v for v in reversed(gates[key]) if v is not None)
        fig = figures.trend(pts, title=key[1] if len(key[1]) <= 56 else key[1][:55] + "…", ylabel="estimate (CI)",
                            lower=_number(last.get("lower")), upper=_number(last.get("upper")))
        title = suite_title(key[0], [str(v.get("nodeid") or "") for v in gates[key] if v])
        latest = gates[key][-1]  # failing in the latest release: by the run-level decision where the log has it
        out.append({"suite": key[0], "suite_title": title, "gate": key[1], "figure": fig,
                    "anchor": anchor(f"{key[0]}::{key[1]}"), "points": pts,
                    "failing_last": latest is not None and not _passed(latest, run_level=True)})
    return {"releases": releases, "gates": out, "duplicates": duplicates}


def render_history(directory: str | Path, *, rendered_at: str | None = None) -> str:
    """The history page for every run log under ``directory``."""
    from .render import Run, template_environment

    skipped: list[str] = []
    paths = find_run_logs(directory, skipped)
    if not paths:
        raise ConfigError(f"--history: no posbias run log (*.jsonl with a run-log header) under {directory}")
    data = history([Run(p) for p in paths])
    return template_environment().get_template("history.html.j2").render(
        title=f"pytest-posbias trends: {len(data['releases'])} releases", version=__version__,
        directory=str(directory), rendered_at=rendered_at or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        skipped=skipped, **data)


__all__ = ["find_run_logs", "history", "render_history"]
