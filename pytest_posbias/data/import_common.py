"""What every importer shares: the import report, the video index, the paper's duration buckets,
reading annotation files (errors name the option and the file) and writing the manifest.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .manifest import McqItem, parse_line, write_manifest

VIDEO_EXTS = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v")
BUCKETS = (("short", 0.0, 60.0), ("long", 60.0, 120.0))


@dataclass
class ImportReport:
    """What an import wrote and what it skipped, with reasons."""

    format: str
    written: Counter[str] = field(default_factory=Counter)  # line type -> count
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> count
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # reason -> first ids
    missing_videos: int = 0

    def skip(self, item: str, reason: str) -> None:
        self.skipped[reason] += 1
        if len(self.examples[reason]) < 5:
            self.examples[reason].append(item)
        if reason.startswith("video not found"):
            self.missing_videos += 1

    def lines(self) -> list[str]:
        return [f"{self.format}: wrote " + ", ".join(f"{n} {k} lines" for k, n in sorted(self.written.items())),
                f"skipped {sum(self.skipped.values())} entries; videos missing: {self.missing_videos}",
                *(f"  {n:>6} {reason} (e.g. {', '.join(self.examples[reason])})"
                  for reason, n in self.skipped.most_common())]

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "written": dict(self.written), "skipped": dict(self.skipped),
                "examples": {k: list(v) for k, v in self.examples.items()}, "missing_videos": self.missing_videos}


class VideoIndex:
    """File names under a videos directory, indexed once (fast lookups for 100k entries)."""

    def __init__(self, root: Path, *, recursive: bool = False) -> None:
        if not root.is_dir():
            raise ConfigError(f"--videos {root}: no such directory")
        self.root = root
        self.by_stem: dict[str, Path] = {}
        walker = os.walk(root) if recursive else [(str(root), [d.name for d in os.scandir(root) if d.is_dir()],
                                                    [f.name for f in os.scandir(root) if f.is_file()])]
        for dirpath, dirnames, filenames in walker:
            for name in filenames:
                stem, ext = os.path.splitext(name)
                if ext.lower() in VIDEO_EXTS:
                    self.by_stem.setdefault(stem, Path(dirpath) / name)
            for d in dirnames:  # frame folders (MVBench tasks stored as JPEG frames)
                self.by_stem.setdefault(d, Path(dirpath) / d)

    def find(self, *stems: str) -> Path | None:
        """The file or frame folder of the first of ``stems`` the index holds."""
        return next((self.by_stem[s] for s in stems if s in self.by_stem), None)

    def relative(self, p: Path, out_dir: Path) -> str:
        try:
            return os.path.relpath(p, out_dir)
        except ValueError:
            return str(p)


def bucket_of(duration: float) -> str | None:
    """``short`` for (0, 60] s, ``long`` for (60, 120] s, None outside (the paper's buckets)."""
    return next((name for name, lo, hi in BUCKETS if lo < duration <= hi), None)


def _num(v: Any) -> float | None:
    """A JSON number as a float (an integer too large for one: infinity, which no check passes); None otherwise."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        return float(v)
    except OverflowError:
        return math.inf


def _read_text(path: Path, option: str = "--annotations") -> str:
    """The text of a UTF-8 annotation file (a byte-order mark dropped); ConfigError naming the option,
    the file and the problem when it is missing, unreadable or not UTF-8."""
    try:
        if not path.is_file():
            raise ConfigError(f"{option} {path}: no such file")
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{option} {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte offset {exc.start}); "
                          "save it as UTF-8") from None


def _load_json(path: Path, option: str = "--annotations") -> Any:
    """A JSON annotation file; ConfigError naming the option, the file and the problem (see :func:`_read_text`)."""
    text = _read_text(path, option)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{option} {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ConfigError(f"{option} {path}: not valid JSON (nested too deeply)") from None


def _finish(rep: ImportReport, out: Path, lines: Iterable[dict[str, Any]], *, annotations: Path,
            sample: int | None = None, seed: int = 42) -> ImportReport:
    """Keep ``random.Random(seed).sample`` of ``sample`` lines (all when ``sample`` is None or not smaller), then
    write the manifest and its ``.import.json`` summary and return ``rep``; an import with no usable entry is an
    error that names the annotations and the first reasons entries were skipped, and writes nothing (a run on an
    empty manifest would only stop later, further from the cause)."""
    lines = _loadable(rep, lines, out.parent)
    if sample is not None and sample < len(lines):
        rep.skipped[f"not in the --sample {sample} subset (seed {seed})"] += len(lines) - sample
        lines = random.Random(seed).sample(lines, sample)
    if not lines:
        skipped = sum(rep.skipped.values())
        reasons = "; ".join(f"{n} {reason}" + (f" (e.g. {', '.join(rep.examples[reason][:3])})"
                                                 if rep.examples.get(reason) else "")
                            for reason, n in rep.skipped.most_common(3))
        why = f"all {skipped} entries skipped: {reasons}" if skipped else "no entries found"
        raise ConfigError(f"--annotations {annotations}: no usable {rep.format} entry ({why}); {out} not written")
    rep.written.update(line["type"] for line in lines)
    write_manifest(out, lines)
    summary = out.with_suffix(out.suffix + ".import.json")
    summary.write_text(json.dumps(rep.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
    return rep


def _loadable(rep: ImportReport, lines: Iterable[dict[str, Any]], base: Path) -> list[dict[str, Any]]:
    """The lines the manifest loader accepts (:func:`~.manifest.parse_line`); every other line is skipped with
    the field the loader rejects, and a group is skipped with a member video that was, so every written line
    loads and no group names a video the manifest lacks. A multiple-choice item repeating an earlier one
    under another id (the same clip, window, question, options and answer: the loader's duplicate rule) is
    skipped too, so the loader finds no problem in an imported manifest."""
    kept: list[dict[str, Any]] = []
    dropped: set[Any] = set()
    seen: set[tuple[Any, ...]] = set()
    for line in lines:
        if line.get("type") == "group" and dropped.intersection(line.get("videos", ())):
            rep.skip(str(line.get("id")), "a member video is not a valid manifest line")
            continue
        try:
            item = parse_line(line, base)
        except ValueError as exc:
            field_name = re.match(r"fields? ('[^']+'(?:/'[^']+')?)", str(exc))
            rep.skip(str(line.get("id")), "rejected by the manifest loader ("
                     + (f"field {field_name.group(1)}" if field_name else str(exc)) + ")")
            if line.get("type") == "video":
                dropped.add(line.get("id"))
            continue
        if isinstance(item, McqItem):
            key = (item.path, item.start, item.end, item.question, item.options, item.answer)
            if key in seen:
                rep.skip(item.id, "repeats an earlier item under another id")
                continue
            seen.add(key)
        kept.append(line)
    return kept
