"""Manifests (DESIGN.md section 6): JSONL files listing videos, summarization groups and
multiple-choice items. The schema is ``manifest.schema.json`` beside this module.

Every line is validated; a bad line is reported with its line number and skipped, and
the run goes on. Paths are relative to the manifest's directory unless absolute.

Line types::

    {"type": "video", "id": ..., "path": ..., "domain": ..., "bucket": "short"|"long",
     "duration": seconds, "references": [sentences], "reference_style": "sentences"|"news"}
    {"type": "group", "id": ..., "domain": ..., "bucket": ..., "P": 2|4, "videos": [video ids]}
    {"type": "mcq", "id": ..., "video": video id or path, "question": ..., "options": [...],
     "answer": index, "start": seconds|null, "end": seconds|null, "tags": [...]}
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ManifestError

SCHEMA_PATH = Path(__file__).with_name("manifest.schema.json")


@dataclass(frozen=True)
class VideoItem:
    id: str
    path: Path
    domain: str
    bucket: str
    duration: float | None
    references: tuple[str, ...]
    reference_style: str = "sentences"
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class GroupItem:
    id: str
    domain: str
    bucket: str
    P: int
    videos: tuple[str, ...]


@dataclass(frozen=True)
class McqItem:
    id: str
    video: str  # a video id of the manifest, or a path
    path: Path
    question: str
    options: tuple[str, ...]
    answer: int
    start: float | None = None
    end: float | None = None
    tags: tuple[str, ...] = ()
    kind: str = ""
    source: str = ""


@dataclass
class Manifest:
    path: Path
    videos: dict[str, VideoItem] = field(default_factory=dict)
    groups: list[GroupItem] = field(default_factory=list)
    mcq: list[McqItem] = field(default_factory=list)
    problems: list[ManifestError] = field(default_factory=list)

    def configurations(self, P: int | None = None) -> list[tuple[str, str, int]]:
        """(domain, bucket, P) of the groups, in first-seen order."""
        out: list[tuple[str, str, int]] = []
        for g in self.groups:
            key = (g.domain, g.bucket, g.P)
            if (P is None or g.P == P) and key not in out:
                out.append(key)
        return out

    def groups_for(self, domain: str, bucket: str, P: int) -> list[GroupItem]:
        return [g for g in self.groups if (g.domain, g.bucket, g.P) == (domain, bucket, P)]


def _need(d: Mapping[str, Any], key: str, types: type | tuple[type, ...], what: str) -> Any:
    if key not in d:
        raise ValueError(f"missing field {key!r}")
    v = d[key]
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,))):
        raise ValueError(f"field {key!r} must be {what}; got {type(v).__name__}")
    return v


def _strings(v: Any, key: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    if not isinstance(v, list) or (not v and not allow_empty) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"field {key!r} must be a {'' if allow_empty else 'non-empty '}list of strings")
    return tuple(v)


def _opt_num(d: Mapping[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"field {key!r} must be a number or null; got {type(v).__name__}")
    return float(v)


def parse_line(d: Any, base: Path) -> VideoItem | GroupItem | McqItem:
    """Validate one decoded manifest line; raise ValueError naming the field and the problem."""
    if not isinstance(d, dict):
        raise ValueError("a manifest line must be a JSON object")
    kind = d.get("type")
    if kind == "video":
        vid = _need(d, "id", str, "a string")
        path = Path(_need(d, "path", str, "a string"))
        bucket = _need(d, "bucket", str, "'short' or 'long'")
        if bucket not in ("short", "long"):
            raise ValueError(f"field 'bucket' must be 'short' or 'long'; got {bucket!r}")
        style = d.get("reference_style", "sentences")
        if style not in ("sentences", "news"):
            raise ValueError(f"field 'reference_style' must be 'sentences' or 'news'; got {style!r}")
        known = {"type", "id", "path", "domain", "bucket", "duration", "references", "reference_style"}
        return VideoItem(vid, path if path.is_absolute() else base / path, _need(d, "domain", str, "a string"), bucket,
                         _opt_num(d, "duration"), _strings(_need(d, "references", list, "a list"), "references"), style,
                         {k: v for k, v in d.items() if k not in known})
    if kind == "group":
        P = _need(d, "P", int, "an integer")
        if P not in (2, 4):
            raise ValueError(f"field 'P' must be 2 or 4; got {P!r}")
        videos = _strings(_need(d, "videos", list, "a list"), "videos")
        if len(videos) != P or len(set(videos)) != P:
            raise ValueError(f"field 'videos' must list {P} distinct video ids; got {list(videos)}")
        return GroupItem(_need(d, "id", str, "a string"), _need(d, "domain", str, "a string"),
                         _need(d, "bucket", str, "a string"), P, videos)
    if kind == "mcq":
        options = _strings(_need(d, "options", list, "a list"), "options")
        if not 2 <= len(options) <= 26:
            raise ValueError(f"field 'options' must hold 2 to 26 options; got {len(options)}")
        answer = _need(d, "answer", int, "an integer index")
        if not 0 <= answer < len(options):
            raise ValueError(f"field 'answer' must index the options (0..{len(options) - 1}); got {answer}")
        video = _need(d, "video", str, "a string")
        start, end = _opt_num(d, "start"), _opt_num(d, "end")
        if start is not None and end is not None and end <= start:
            raise ValueError(f"fields 'start'/'end' must satisfy start < end; got {start}, {end}")
        p = Path(video)
        return McqItem(_need(d, "id", str, "a string"), video, p if p.is_absolute() else base / p,
                       _need(d, "question", str, "a string"), options, answer, start, end,
                       _strings(d.get("tags", []), "tags", allow_empty=True), str(d.get("kind", "")), str(d.get("source", "")))
    raise ValueError(f"field 'type' must be 'video', 'group' or 'mcq'; got {kind!r}")


def load_manifest(path: str | Path, *, check_files: bool = True) -> Manifest:
    """Read and validate a manifest; bad lines are recorded in ``problems`` and skipped."""
    p = Path(path)
    if not p.is_file():
        raise ManifestError(p, 0, "manifest file does not exist")
    m = Manifest(p)
    base = p.parent
    pending_groups: list[tuple[int, GroupItem]] = []
    pending_mcq: list[tuple[int, McqItem]] = []
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                item = parse_line(json.loads(line), base)
            except json.JSONDecodeError as exc:
                m.problems.append(ManifestError(p, n, f"not valid JSON ({exc.msg})"))
                continue
            except ValueError as exc:
                m.problems.append(ManifestError(p, n, str(exc)))
                continue
            if isinstance(item, VideoItem):
                if item.id in m.videos:
                    m.problems.append(ManifestError(p, n, f"duplicate video id {item.id!r}"))
                elif check_files and not item.path.exists():
                    m.problems.append(ManifestError(p, n, f"video {item.id!r}: file not found: {item.path}"))
                else:
                    m.videos[item.id] = item
            elif isinstance(item, GroupItem):
                pending_groups.append((n, item))
            else:
                pending_mcq.append((n, item))
    for n, g in pending_groups:
        missing = [v for v in g.videos if v not in m.videos]
        if missing:
            m.problems.append(ManifestError(p, n, f"group {g.id!r}: unknown or unusable videos {missing}"))
        else:
            m.groups.append(g)
    for n, q in pending_mcq:
        if q.video in m.videos:
            q = McqItem(q.id, q.video, m.videos[q.video].path, q.question, q.options, q.answer, q.start, q.end, q.tags, q.kind, q.source)
        elif check_files and not q.path.exists():
            m.problems.append(ManifestError(p, n, f"mcq {q.id!r}: video not found: {q.video}"))
            continue
        m.mcq.append(q)
    return m


def write_manifest(path: str | Path, lines: Sequence[Mapping[str, Any]]) -> Path:
    """Write manifest lines atomically (sorted keys, one JSON object per line)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(dict(x), sort_keys=True) + "\n" for x in lines), encoding="utf-8")
    tmp.replace(out)
    return out
