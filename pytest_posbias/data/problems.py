"""Data problems (docs/design.md section 6): every problem with the data, found while loading a
manifest or later in the run, is a :class:`DataProblem`; :func:`summarize_problems` groups them by
kind for the terminal summary, ``--posbias-json`` and the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..video.files import short_path

# Kinds of data problem, in the order the summaries list them.
PROBLEM_KINDS = {
    "encoding": "manifest line not UTF-8",
    "bad-line": "malformed manifest line",
    "duplicate-id": "duplicate id, or an item repeated under another id",
    "unknown-video": "reference to an unknown video id",
    "missing-video": "video file not found",
    "inaccessible-video": "video path cannot be opened (permission, link loop, name too long)",
    "empty-video": "empty video file (0 bytes)",
    "unreadable-video": "not a readable video",
    "truncated-video": "truncated or damaged video",
    "changed-video": "video changed after it was probed",
    "too-short": "video too short for the frames asked for",
    "other": "other data problem",
}


@dataclass(frozen=True)
class DataProblem:
    """One problem with the data: its kind, the manifest item (``video 'v3'``) or video file it is
    about, what is wrong, and where (``file``; ``line``, 1-based, None when not about one line)."""

    kind: str
    item: str
    message: str
    file: str = ""
    line: int | None = None

    def __str__(self) -> str:
        item, file = short_path(self.item), short_path(self.file)
        if self.file and self.line is not None:
            return f"{file}:{self.line}: {self.message}"
        if self.file and self.file != self.item:
            return f"{item} ({file}): {self.message}"
        return f"{item}: {self.message}"

    def key(self) -> tuple[str, str, str, int | None]:
        """What makes two records the same problem (one run logs a problem once per worker or look)."""
        return (self.kind, self.item, self.file, self.line)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (run log, ``--posbias-json``)."""
        return {"kind": self.kind, "item": self.item, "message": self.message, "file": self.file, "line": self.line}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DataProblem:
        """Inverse of :meth:`to_dict`; unknown kinds are kept as they are."""
        line = d.get("line")
        return cls(str(d.get("kind") or "other"), str(d.get("item", "")), str(d.get("message", "")),
                   str(d.get("file") or ""),
                   int(line) if isinstance(line, int) and not isinstance(line, bool) else None)

    @classmethod
    def coerce(cls, value: Any) -> DataProblem:
        """A problem from a run-log entry: a dict (:meth:`to_dict`) or a plain message (older logs, probe strings)."""
        if isinstance(value, DataProblem):
            return value
        if isinstance(value, Mapping):
            return cls.from_dict(value)
        text = str(value)
        return cls("other", text.split(": ", 1)[0], text.split(": ", 1)[-1])


def unique_problems(problems: Iterable[Any]) -> list[DataProblem]:
    """Problems (records or plain messages) without repeats, in first-seen order."""
    out: dict[tuple[str, str, str, int | None], DataProblem] = {}
    for p in problems:
        dp = DataProblem.coerce(p)
        out.setdefault(dp.key(), dp)
    return list(out.values())


def summarize_problems(problems: Iterable[Any]) -> list[dict[str, Any]]:
    """Per kind: ``kind``, ``label`` (plain words), ``count`` (distinct problems) and ``example`` (the first one, as
    text), kinds in :data:`PROBLEM_KINDS` order, unknown kinds last."""
    by_kind: dict[str, list[DataProblem]] = {}
    for p in unique_problems(problems):
        by_kind.setdefault(p.kind, []).append(p)
    order = list(PROBLEM_KINDS)
    kinds = sorted(by_kind, key=lambda k: (order.index(k) if k in order else len(order), k))
    return [{"kind": k, "label": PROBLEM_KINDS.get(k, k), "count": len(by_kind[k]), "example": str(by_kind[k][0])}
            for k in kinds]


def problems_in_records(records: Iterable[Mapping[str, Any]]) -> list[DataProblem]:
    """Every data problem a run log holds: the manifest's (``data`` observations) and those found
    later in the run (``data`` observations of type ``problem``), without repeats."""
    found: list[Any] = []
    for r in records:
        if r.get("kind") == "observation" and r.get("probe") == "data":
            found.extend([r.get("problem") or {}] if r.get("type") == "problem" else r.get("problems") or [])
    return unique_problems(found)
