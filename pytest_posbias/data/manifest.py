"""Manifests (docs/design.md section 6, docs/datasets.md): JSONL files listing videos, summarization
groups and multiple-choice items, validated line by line against ``manifest.schema.json``::

    {"type": "video", "id": ..., "path": ..., "domain": ..., "bucket": "short"|"long",
     "duration": seconds, "references": [sentences], "reference_style": "sentences"|"news"}
    {"type": "group", "id": ..., "domain": ..., "bucket": ..., "P": 2|4, "videos": [video ids]}
    {"type": "mcq", "id": ..., "video": video id or path, "question": ..., "options": [...],
     "answer": index, "start": seconds|null, "end": seconds|null, "tags": [...]}

The loader enforces the schema's constraints by hand (``jsonschema`` is a development dependency; a test checks that the
two agree) plus what a schema cannot say: ``answer`` indexes the options, a group lists ``P`` distinct known videos of
distinct files, ``start < end``, an mcq window starts before its manifest video's declared ``duration``, ids are unique
per line type, and no group or mcq item repeats another's content under a new id (the same instances twice would inflate
n); see :class:`Manifest` for what happens to bad lines and unusable files. Paths are relative to the manifest's folder.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ManifestError, VideoError
from ..video.decode import probe
from ..video.files import check_video_path, problem_kind, short_path
from ..video.frames import atomic_write_bytes
from .problems import DataProblem

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
    """A loaded manifest: its items and what is wrong with it.

    ``problems`` are the skipped lines. ``file_problems`` are items whose video file cannot be used
    (:func:`~pytest_posbias.video.files.check_video_path`): they stay in the plan and their units are
    lost with that reason (docs/design.md section 5). ``bad_mcq`` are the problems of the lines meant as
    multiple-choice items (``"type": "mcq"``, read from the text of a line that is no JSON object or not
    UTF-8) that were rejected, once per id and not for a valid item's id: the phase probes draw them with
    the items, and one drawn is a planned item lost as unusable data.
    """

    path: Path
    videos: dict[str, VideoItem] = field(default_factory=dict)
    groups: list[GroupItem] = field(default_factory=list)
    mcq: list[McqItem] = field(default_factory=list)
    problems: list[DataProblem] = field(default_factory=list)
    file_problems: list[DataProblem] = field(default_factory=list)
    bad_mcq: list[DataProblem] = field(default_factory=list)

    def configurations(self, P: int | None = None) -> list[tuple[str, str, int]]:
        """(domain, bucket, P) of the groups, in first-seen order."""
        return list(dict.fromkeys((g.domain, g.bucket, g.P) for g in self.groups if P is None or g.P == P))

    def groups_for(self, domain: str, bucket: str, P: int) -> list[GroupItem]:
        """The groups of one configuration, in manifest order."""
        return [g for g in self.groups if (g.domain, g.bucket, g.P) == (domain, bucket, P)]

    def counts(self) -> str:
        """What the manifest holds, in words (for messages)."""
        return f"{len(self.videos)} videos, {len(self.groups)} groups, {len(self.mcq)} multiple-choice items"

    def missing(self, suite: str) -> str | None:
        """Why ``suite`` (``positional``, ``phase`` or ``stressor``) has no data here, or None when it has some."""
        need = {"positional": (self.groups, "summarization groups"), "phase": (self.mcq, "multiple-choice items"),
                "stressor": (self.videos, "videos")}
        if suite not in need:
            raise ValueError(f"`suite` must be positional, phase or stressor; got {suite!r}")
        items, what = need[suite]
        return None if items else (f"{self.path} has no usable {what} ({self.counts()}; "
                                   f"{len(self.problems)} data problems)")


def require_usable(path: str | Path) -> Manifest:
    """Load a manifest and raise :class:`~pytest_posbias.errors.ConfigError` naming the file when
    it holds no usable item at all: no video, group or multiple-choice item survived validation,
    or every item's video file is unusable (``file_problems``: a run could measure nothing)."""
    m = load_manifest(path)
    bad = {p.file for p in m.file_problems}
    if any(str(v.path) not in bad for v in m.videos.values()) or any(str(q.path) not in bad for q in m.mcq):
        return m
    problems = [*m.problems, *m.file_problems]
    first = "; ".join(str(x) for x in problems[:3])
    more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    what = " and ".join(x for x in (f"{len(m.problems)} bad lines" if m.problems else "",
                                    f"{len(m.file_problems)} unusable video files" if m.file_problems else "") if x)
    why = f"{what}: {first}{more}" if problems else "the file holds no item lines"
    raise ConfigError(f"{m.path}: no usable item in the manifest ({why}); check it with `posbias data validate --out "
                      f"{m.path}`")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique: ``{"answer": 0, "answer": 2}`` is ambiguous (JSON
    parsers keep either one), so the line is rejected naming the key."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"field {k!r} appears twice in one object; keep one")
        out[k] = v
    return out


def _need(d: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    if key not in d:
        raise ValueError(f"missing field {key!r}")
    v = d[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        raise ValueError(f"field {key!r} must be {what}; got {type(v).__name__}")
    return v


def _text(d: Mapping[str, Any], key: str, *, required: bool = True, nonempty: bool = False, file: bool = False) -> str:
    """A string field (schema ``"type": "string"``, with ``"minLength": 1`` when ``nonempty``); a ``file``
    name holds no NUL character (schema too): no file name can, and ``os.stat`` raises ValueError on one."""
    if key not in d and not required:
        return ""
    v = _need(d, key, str, "a non-empty string" if nonempty else "a string")
    if nonempty and not v.strip():
        raise ValueError(f"field {key!r} must be a non-empty string; got {v!r}")
    if key == "id" and v != v.strip():
        raise ValueError(f"field 'id' must not begin or end with whitespace; got {v!r}")
    if file and "\0" in v:
        raise ValueError(f"field {key!r} holds a NUL character (\\0), which no file name can hold; got {v!r}")
    return str(v)


def _strings(v: Any, key: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    if not isinstance(v, list) or (not v and not allow_empty) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"field {key!r} must be a {'' if allow_empty else 'non-empty '}list of strings")
    return tuple(v)


def _opt_num(d: Mapping[str, Any], key: str, *, minimum: float | None = None) -> float | None:
    if (v := d.get(key)) is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"field {key!r} must be a number or null; got {v!r}")
    try:
        finite = math.isfinite(v)
    except OverflowError:  # a JSON integer too large for a float
        raise ValueError(f"field {key!r} must be a number or null; got an integer too large for a float") from None
    if not finite:
        raise ValueError(f"field {key!r} must be a number or null; got {v!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"field {key!r} must be >= {minimum:g}; got {v!r}")
    return float(v)


def parse_line(d: Any, base: Path) -> VideoItem | GroupItem | McqItem:
    """Validate one decoded manifest line against the schema (and the constraints a schema cannot
    express); raise ValueError naming the field and the problem."""
    if not isinstance(d, dict):
        raise ValueError("a manifest line must be a JSON object")
    kind = d.get("type")
    if kind == "video":
        vid = _text(d, "id", nonempty=True)
        path = base / _text(d, "path", nonempty=True, file=True)  # an absolute path stays as it is
        domain = _text(d, "domain", nonempty=True)
        bucket = _need(d, "bucket", str, "'short' or 'long'")
        if bucket not in ("short", "long"):
            raise ValueError(f"field 'bucket' must be 'short' or 'long'; got {bucket!r}")
        style = d.get("reference_style", "sentences")
        if style not in ("sentences", "news"):
            raise ValueError(f"field 'reference_style' must be 'sentences' or 'news'; got {style!r}")
        duration = _opt_num(d, "duration", minimum=0)
        references = _strings(_need(d, "references", list, "a list"), "references")
        if not any(r.strip() for r in references):
            raise ValueError("field 'references' must hold a non-blank sentence; every one is empty or whitespace "
                             "(the judge would score every slot of the video 0)")
        _text(d, "source", required=False)
        known = {"type", "id", "path", "domain", "bucket", "duration", "references", "reference_style"}
        return VideoItem(vid, path, domain, bucket, duration, references, style,
                         {k: v for k, v in d.items() if k not in known})
    if kind == "group":
        gid = _text(d, "id", nonempty=True)
        P = _need(d, "P", int, "an integer")
        if P not in (2, 4):
            raise ValueError(f"field 'P' must be 2 or 4; got {P!r}")
        videos = _strings(_need(d, "videos", list, "a list"), "videos")
        if len(videos) != P or len(set(videos)) != P:
            raise ValueError(f"field 'videos' must list {P} distinct video ids; got {list(videos)}")
        return GroupItem(gid, _text(d, "domain"), _text(d, "bucket"), P, videos)
    if kind == "mcq":
        qid = _text(d, "id", nonempty=True)
        options = _strings(_need(d, "options", list, "a list"), "options")
        if not 2 <= len(options) <= 26:
            raise ValueError(f"field 'options' must hold 2 to 26 options; got {len(options)}")
        if blank := [i for i, o in enumerate(options) if not o.strip()]:
            raise ValueError(f"field 'options': option {blank[0]} is empty (an unanswerable choice)")
        seen: dict[str, int] = {}
        for i, o in enumerate(options):
            j = seen.setdefault(o.strip().casefold(), i)
            if j != i:
                raise ValueError(f"field 'options': options {j} and {i} are the same text ({o!r}); "
                                 "a reordering could not be told apart")
        answer = _need(d, "answer", int, "an integer index")
        if not 0 <= answer < len(options):
            raise ValueError(f"field 'answer' must index the options (0..{len(options) - 1}); got {answer}")
        video = _text(d, "video", nonempty=True, file=True)
        question = _text(d, "question")
        start, end = _opt_num(d, "start"), _opt_num(d, "end", minimum=0)  # end < 0: no frame of any clip
        if start is not None and end is not None and end <= start:
            raise ValueError(f"fields 'start'/'end' must satisfy start < end; got {start}, {end}")
        tags = _strings(d.get("tags", []), "tags", allow_empty=True)
        item_kind, source = _text(d, "kind", required=False), _text(d, "source", required=False)
        return McqItem(qid, video, base / video, question, options, answer, start, end, tags, item_kind, source)
    raise ValueError(f"field 'type' must be 'video', 'group' or 'mcq'; got {kind!r}")


BOM = b"\xef\xbb\xbf"


# a line meant as a multiple-choice item, read from its text where it is no JSON object (or not UTF-8)
_MCQ_TYPE = re.compile(r'"type"\s*:\s*"mcq"')
_ID = re.compile(r'"id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _decoded_lines(p: Path, problems: list[DataProblem], *,
                   on_undecodable: Callable[[str, DataProblem], None]) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file read as bytes; a leading BOM is dropped, and a line with
    bytes that are not UTF-8 is reported (with the file's byte offset of the first bad byte) and skipped,
    its text (bad bytes replaced) and problem passed to ``on_undecodable``."""
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ManifestError(p, 0, f"cannot read the manifest ({exc.strerror or exc})") from None
    offset = 0
    if data.startswith(BOM):
        data, offset = data[len(BOM):], len(BOM)
    for n, raw in enumerate(data.split(b"\n"), start=1):
        try:
            yield n, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(DataProblem("encoding", f"line {n}", f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at byte "
                                        f"offset {offset + exc.start} cannot be decoded (save the manifest as UTF-8)",
                                        str(p), n))
            on_undecodable(raw.decode("utf-8", errors="replace"), problems[-1])
        offset += len(raw) + 1


def _file_key(path: Path) -> str:
    """The file ``path`` names, whatever its spelling (``sub/../a.mp4``, a link): its resolved path where it
    exists, else the path as written (``missing/../a.mp4`` opens no file on POSIX, a link loop: the file checks
    name the problem)."""
    try:
        return str(path.resolve(strict=True))
    except (OSError, RuntimeError):
        return str(path)


def _text_key(text: str) -> str:
    """``text`` up to Unicode normal form (NFKC), letter case and whitespace: what a duplicate check compares
    (``lower``, not ``casefold``: "Maße" and "Masse" are different words)."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).lower()


def load_manifest(path: str | Path, *, check_files: bool = True, open_videos: bool = False) -> Manifest:
    """Read and validate a manifest; bad lines are recorded in ``problems`` and skipped. With
    ``check_files``, each video file's problem goes to ``file_problems`` once (see :class:`Manifest`):
    from the file system alone, or with ``open_videos`` as a run opens it
    (:func:`~pytest_posbias.video.decode.probe`: not a video, truncated, no frames)."""
    p = Path(path)
    try:
        found = p.is_file()
    except OSError as exc:  # a path too long for the file system, a symbolic link loop, ...
        raise ManifestError(short_path(p), 0, f"cannot open the manifest ({exc.strerror or exc})") from None
    if not found:
        raise ManifestError(p, 0, "manifest file does not exist")
    m = Manifest(p)
    base = p.parent
    pending_groups: list[tuple[int, GroupItem]] = []
    pending_mcq: list[tuple[int, McqItem]] = []
    # (kind, id) or (kind, content) -> the first line's id and number: the same instances planned twice would
    # inflate n, so a repeated id is skipped, and so is a group of the same files in one configuration (in any
    # order) or an mcq item of the same clip, window, question, options and answer under another id
    first_seen: dict[tuple[Any, ...], tuple[str, int]] = {}

    def problem(kind: str, item: str, n: int, message: str) -> None:
        m.problems.append(DataProblem(kind, item, message, str(p), n))

    checked: set[str] = set()

    def check(item: str, video: Path, n: int, *, note: str = "") -> None:
        if (key := _file_key(video)) in checked:  # one file under two spellings is checked and reported once
            return
        checked.add(key)
        try:
            check_video_path(video)
            if open_videos:
                probe(video)
        except VideoError as exc:
            m.file_problems.append(DataProblem(problem_kind(exc), item, f"{exc.problem}{note} (manifest line {n}); its "
                                               "units are planned and count as lost", str(video)))

    def duplicate(what: str, item_id: str, n: int, key: tuple[Any, ...] = (), content: str = "") -> bool:
        """Whether an earlier line has this id or, with ``key``, this content (``content`` in words)."""
        first_id, first = first_seen.setdefault((what, key or item_id), (item_id, n))
        if first != n:
            problem("duplicate-id", f"{what} {item_id!r}", n, f"{what} {item_id!r} repeats {what} {first_id!r} (line "
                    f"{first}) under another id: {content}; line {n} skipped" if key else
                    f"duplicate {what} id {item_id!r} (first on line {first}, again on line {n}); line {n} skipped")
            return True
        return False

    bad_mcq: dict[tuple[str, str], DataProblem] = {}  # (id, or the line's text) -> its first problem

    def rejected_mcq(obj: Any, line: str, problem: DataProblem) -> None:
        """Keep a rejected line meant as a multiple-choice item (its ``type``, or its text where it is no
        JSON object), once per id."""
        if isinstance(obj, dict):
            if obj.get("type") != "mcq":
                return
            item_id = obj.get("id")
        elif _MCQ_TYPE.search(line):
            item_id = named.group(1) if (named := _ID.search(line)) else None
        else:
            return
        bad_mcq.setdefault(("id", item_id) if isinstance(item_id, str) else ("line", line.strip()), problem)

    for n, line in _decoded_lines(p, m.problems, on_undecodable=lambda text, pr: rejected_mcq(None, text, pr)):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        obj = None
        try:
            obj = json.loads(line, object_pairs_hook=_no_duplicate_keys)
            json.dumps(obj, ensure_ascii=False).encode("utf-8")  # a lone surrogate (\ud800) is not text
            item = parse_line(obj, base)
        except (ValueError, RecursionError) as exc:
            problem("bad-line", f"line {n}", n, f"not valid JSON ({exc.msg})" if isinstance(exc, json.JSONDecodeError)
                    else "not valid JSON (nested too deeply)" if isinstance(exc, RecursionError)
                    else f"a string holds {exc.object[exc.start:exc.end]!r}, which is not valid Unicode text (a lone "
                    "surrogate escape)" if isinstance(exc, UnicodeEncodeError) else str(exc))
            rejected_mcq(obj, line, m.problems[-1])
            continue
        if isinstance(item, VideoItem):
            if duplicate("video", item.id, n):
                continue
            m.videos[item.id] = item
            if check_files:
                check(f"video {item.id!r}", item.path, n)
        elif isinstance(item, GroupItem):
            if not duplicate("group", item.id, n):
                pending_groups.append((n, item))
        elif not duplicate("mcq", item.id, n):
            pending_mcq.append((n, item))
    for n, g in pending_groups:
        if missing := [v for v in g.videos if v not in m.videos]:
            problem("unknown-video", f"group {g.id!r}", n, f"group {g.id!r}: unknown videos {missing} (no valid video "
                    "line has these ids)")
            continue
        paths = [m.videos[v].path for v in g.videos]
        files = [_file_key(f) for f in paths]
        # the first video whose file an earlier one has: the clip would hold two positions of every ordering
        if (j := next((j for j, f in enumerate(files) if f in files[:j]), None)) is not None:
            problem("bad-line", f"group {g.id!r}", n, f"group {g.id!r}: videos {g.videos[files.index(files[j])]!r} and "
                    f"{g.videos[j]!r} are the same file ({short_path(paths[j])}); a group needs {g.P} distinct videos")
        elif not duplicate("group", g.id, n, (g.domain, g.bucket, g.P, frozenset(files)),
                           f"the same videos in configuration {g.domain}/{g.bucket}/P={g.P}"):
            m.groups.append(g)
    for n, q in pending_mcq:
        video = m.videos.get(q.video)
        if video is not None:
            q = replace(q, path=video.path)
            if video.duration is not None and q.start is not None and q.start >= video.duration:
                problem("bad-line", f"mcq {q.id!r}", n, f"mcq {q.id!r}: field 'start' ({q.start:g} s) is not before "
                        f"the end of video {q.video!r} (declared duration {video.duration:g} s); its window holds "
                        "no frame")
                bad_mcq.setdefault(("id", q.id), m.problems[-1])
                continue
        # the same file under any spelling, the same question and options up to case, spacing and the options'
        # order (the option-order gate permutes them itself), the same answer
        if duplicate("mcq", q.id, n, (_file_key(q.path), q.start, q.end, _text_key(q.question),
                                      frozenset(map(_text_key, q.options)), _text_key(q.options[q.answer])),
                     "the same clip, window, question, options and answer"):
            continue
        if video is None and check_files:
            check(f"mcq {q.id!r}", q.path, n, note=f" (video {q.video!r} is not a video id of the manifest either)")
        m.mcq.append(q)
    valid = {q.id for q in m.mcq}  # a broken repeat of a valid item's id is a duplicate, not another item
    m.bad_mcq = [pr for (kind, key), pr in bad_mcq.items() if not (kind == "id" and key in valid)]
    return m


def _json_line(n: int, line: Mapping[str, Any]) -> str:
    """One manifest line as JSON; ValueError naming the line and the field for a NaN or infinity, which
    JSON cannot hold (``json.dumps`` would write a bare ``NaN`` token the loader rejects)."""
    try:
        return json.dumps(dict(line), sort_keys=True, allow_nan=False)
    except ValueError:
        bad = next((k for k, v in line.items() if isinstance(v, float) and not math.isfinite(v)), None)
        what = f"field {bad!r} is {line[bad]!r}" if bad is not None else "a nested field holds NaN or infinity"
        raise ValueError(f"manifest line {n} ({line.get('type')} {line.get('id')!r}): {what}, which JSON "
                         "cannot hold; give a finite number or null") from None


def write_manifest(path: str | Path, lines: Sequence[Mapping[str, Any]]) -> Path:
    """Write manifest lines atomically (sorted keys, one JSON object per line); ValueError, writing
    nothing, when a line holds a NaN or infinity."""
    out = Path(path)
    atomic_write_bytes(out, "".join(_json_line(n, x) + "\n" for n, x in enumerate(lines, start=1)).encode("utf-8"))
    return out
