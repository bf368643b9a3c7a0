"""Importers: users' local copies of the papers' datasets → manifests (docs/design.md section 6).

``posbias data import FORMAT --videos DIR --annotations FILE --out manifest.jsonl``.
Every importer validates each entry, writes the items it can use, and reports what it
skipped and why (missing keys, wrong types, a missing video, a duration outside the
buckets, ...). Nothing is fatal except an unreadable annotations file.

* ``activitynet``: ActivityNet Captions (``train.json``/``val_1.json``/``val_2.json``: a dict
  ``v_<id>`` → ``duration``, ``timestamps``, ``sentences``); local files may lack ``v_``.
  With ``--classes activity_net.v1-3.min.json`` each video's activity is mapped through
  the taxonomy to the multi-video paper's domains (Cooking = eating and drinking /
  cooking, Domestic = household activities, Leisure = socializing, relaxing, sports and
  exercise); without it, one domain ``activitynet``. Buckets short (0–60 s] and long
  (60–120 s]. Groups as the paper: per domain × bucket, ``--groups`` (27) groups of four
  videos, non-overlapping within the configuration, and 27 pairs (likewise
  non-overlapping among themselves; pairs may reuse videos of the four-video groups).
* ``news``: the News Video Dataset (``vid.<id>.info.json`` files; ``description`` is the
  reference, split into sentences; ``duration`` in seconds): News-style references.
* ``mvbench``: per-task JSON lists (``video``, ``question``, ``candidates``, ``answer`` as
  text, optional ``start``/``end``); frame-folder tasks (3 fps) are supported.
* ``videomme``: parquet or JSON (``videoID``, ``question_id``, ``duration``, ``domain``,
  ``sub_category``, ``task_type``, ``question``, letter-prefixed ``options``, ``answer``).
* ``egoschema``: ``questions.json`` (``q_uid``, ``question``, ``option 0``..``option 4``)
  with ``subset_answers.json`` (q_uid → index) via ``--answers``; videos ``<q_uid>.mp4``.
* ``nextqa``: the multiple-choice CSV (``video``, ``question``, ``a0``..``a4``, ``answer``).

``--sample N --seed 42`` keeps a subset of the multiple-choice items with
``random.Random(seed).sample`` (the phase paper's subsets).
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..scoring.text import sentences
from .manifest import write_manifest

FORMATS = ("activitynet", "news", "mvbench", "videomme", "egoschema", "nextqa")
VIDEO_EXTS = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v")
BUCKETS = (("short", 0.0, 60.0), ("long", 60.0, 120.0))
IMAGE_EXTS = (".jpg", ".jpeg", ".png")


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
        out = [f"{self.format}: wrote " + ", ".join(f"{n} {k} lines" for k, n in sorted(self.written.items()))]
        out.append(f"skipped {sum(self.skipped.values())} entries; videos missing: {self.missing_videos}")
        for reason, n in self.skipped.most_common():
            out.append(f"  {n:>6} {reason} (e.g. {', '.join(self.examples[reason])})")
        return out

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
        for s in stems:
            p = self.by_stem.get(s)
            if p is not None:
                return p
        return None

    def relative(self, p: Path, out_dir: Path) -> str:
        try:
            return os.path.relpath(p, out_dir)
        except ValueError:
            return str(p)


def bucket_of(duration: float) -> str | None:
    """``short`` for (0, 60] s, ``long`` for (60, 120] s, None outside (the paper's buckets)."""
    for name, lo, hi in BUCKETS:
        if lo < duration <= hi:
            return name
    return None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _read_text(path: Path, option: str = "--annotations") -> str:
    """The text of a UTF-8 annotation file (a leading byte-order mark is dropped); ConfigError naming
    the option, the file and the problem when it is missing, unreadable or not UTF-8 (with the
    byte offset of the first byte that is not)."""
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


# --------------------------------------------------------------------------- groups


def sample_groups(ids_by_config: Mapping[tuple[str, str], Sequence[str]], *, groups: int, seed: int,
                  scales: Sequence[int] = (2, 4)) -> list[dict[str, Any]]:
    """Per (domain, bucket): up to ``groups`` groups of P videos, non-overlapping within the
    configuration for each P, drawn with ``random.Random(seed)``."""
    out = []
    for (domain, bucket), ids in sorted(ids_by_config.items()):
        for P in scales:
            rng = random.Random(f"{seed}|{domain}|{bucket}|{P}")
            pool = sorted(ids)
            rng.shuffle(pool)
            for g in range(min(groups, len(pool) // P)):
                out.append({"type": "group", "id": f"{domain}-{bucket}-P{P}-g{g:02d}", "domain": domain, "bucket": bucket,
                            "P": P, "videos": pool[g * P : (g + 1) * P]})
    return out


# --------------------------------------------------------------------------- ActivityNet


COOKING = ("eating and drinking", "food", "cook", "drink")
DOMESTIC = ("household",)
LEISURE = ("socializing", "relaxing", "leisure", "sports", "exercise", "recreation")


def activitynet_domains(classes: Path) -> dict[str, str]:
    """video id (without ``v_``) → Cooking/Domestic/Leisure from ActivityNet's database + taxonomy."""
    data = _load_json(classes, "--classes")
    if not isinstance(data, dict) or "taxonomy" not in data or "database" not in data:
        raise ConfigError(f"--classes {classes}: expected ActivityNet's activity_net.v1-3.min.json (keys 'taxonomy', 'database')")
    nodes = {n["nodeName"]: n for n in data["taxonomy"] if isinstance(n, dict) and "nodeName" in n}

    def domain(label: str) -> str | None:
        name: str | None = label
        chain = []
        seen = set()
        while name and name in nodes and name not in seen:
            seen.add(name)
            chain.append(name.lower())
            name = nodes[name].get("parentName")
        chain.append(label.lower())
        text = " | ".join(chain)
        if any(k in text for k in COOKING):
            return "cooking"
        if any(k in text for k in DOMESTIC):
            return "domestic"
        if any(k in text for k in LEISURE):
            return "leisure"
        return None

    out = {}
    for vid, entry in data["database"].items():
        labels = [a.get("label") for a in entry.get("annotations", []) if isinstance(a, dict)]
        dom = next((d for d in (domain(lbl) for lbl in labels if lbl) if d), None)
        if dom:
            out[vid.removeprefix("v_")] = dom
    return out


def import_activitynet(videos: Path, annotations: Path, out: Path, *, classes: Path | None = None, groups: int = 27,
                       seed: int = 42) -> ImportReport:
    rep = ImportReport("activitynet")
    data = _load_json(annotations)
    if not isinstance(data, dict):
        raise ConfigError(f"--annotations {annotations}: expected a dict keyed v_<youtube id> (train.json / val_1.json / val_2.json)")
    index = VideoIndex(videos)
    domains = activitynet_domains(classes) if classes else None
    lines: list[dict[str, Any]] = []
    ids_by_config: dict[tuple[str, str], list[str]] = defaultdict(list)
    for key, e in data.items():
        if not isinstance(e, dict):
            rep.skip(key, "entry is not an object")
            continue
        dur = _num(e.get("duration"))
        sents = e.get("sentences")
        if dur is None:
            rep.skip(key, "missing or non-numeric 'duration'")
            continue
        if not isinstance(sents, list) or not sents or not all(isinstance(s, str) for s in sents):
            rep.skip(key, "missing 'sentences' (a non-empty list of strings)")
            continue
        bucket = bucket_of(dur)
        if bucket is None:
            rep.skip(key, "duration outside the buckets (0-60 s, 60-120 s)")
            continue
        yid = key.removeprefix("v_")
        domain = "activitynet"
        if domains is not None:
            domain = domains.get(yid) or ""
            if not domain:
                rep.skip(key, "activity not in Cooking/Domestic/Leisure")
                continue
        path = index.find(key, yid)
        if path is None:
            rep.skip(key, "video not found under --videos")
            continue
        refs = [s.strip() for s in sents if s.strip()]
        lines.append({"type": "video", "id": key, "path": index.relative(path, out.parent), "domain": domain, "bucket": bucket,
                      "duration": dur, "references": refs, "reference_style": "sentences", "source": "activitynet"})
        ids_by_config[(domain, bucket)].append(key)
    groups_lines = sample_groups(ids_by_config, groups=groups, seed=seed)
    _finish(rep, out, lines + groups_lines)
    return rep


# --------------------------------------------------------------------------- News


def import_news(videos: Path, annotations: Path, out: Path, *, groups: int = 27, seed: int = 42) -> ImportReport:
    rep = ImportReport("news")
    if not annotations.is_dir():
        raise ConfigError(f"--annotations {annotations}: expected the directory holding the vid.<id>.info.json files")
    index = VideoIndex(videos)
    lines: list[dict[str, Any]] = []
    ids_by_config: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in sorted(annotations.glob("vid.*.info.json")):
        vid = f.name[len("vid.") : -len(".info.json")]
        try:
            e = json.loads(f.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            rep.skip(f.name, "not valid JSON")
            continue
        if not isinstance(e, dict):
            rep.skip(f.name, "entry is not an object")
            continue
        desc = e.get("description")
        dur = _num(e.get("duration"))
        if not isinstance(desc, str) or not desc.strip():
            rep.skip(f.name, "missing 'description' (the reference)")
            continue
        if dur is None:
            rep.skip(f.name, "missing or non-numeric 'duration'")
            continue
        bucket = bucket_of(dur)
        if bucket is None:
            rep.skip(f.name, "duration outside the buckets (0-60 s, 60-120 s)")
            continue
        path = index.find(f"vid.{vid}", vid, str(e.get("id", "")))
        if path is None:
            rep.skip(f.name, "video not found under --videos")
            continue
        refs = sentences(desc) or [desc.strip()]
        lines.append({"type": "video", "id": f"news-{vid}", "path": index.relative(path, out.parent), "domain": "news",
                      "bucket": bucket, "duration": dur, "references": refs, "reference_style": "news", "source": "news"})
        ids_by_config[("news", bucket)].append(f"news-{vid}")
    _finish(rep, out, lines + sample_groups(ids_by_config, groups=groups, seed=seed))
    return rep


# --------------------------------------------------------------------------- multiple choice


def _mcq(qid: str, video: str, question: str, options: Sequence[str], answer: int, *, source: str, start: float | None = None,
         end: float | None = None, kind: str = "", tags: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "mcq", "id": qid, "video": video, "question": question, "options": list(options), "answer": answer,
            "start": start, "end": end, "kind": kind, "tags": list(tags), "source": source}


def _sample(rep: ImportReport, items: list[dict[str, Any]], sample: int | None, seed: int) -> list[dict[str, Any]]:
    if sample is None or sample >= len(items):
        return items
    keep = random.Random(seed).sample(items, sample)
    rep.skipped[f"not in the --sample {sample} subset (seed {seed})"] += len(items) - sample
    return keep


def import_mvbench(videos: Path, annotations: Path, out: Path, *, sample: int | None = None, seed: int = 42) -> ImportReport:
    rep = ImportReport("mvbench")
    files = sorted(annotations.glob("*.json")) if annotations.is_dir() else [annotations]
    index = VideoIndex(videos, recursive=True)
    items = []
    for f in files:
        data = _load_json(f)
        if not isinstance(data, list):
            rep.skip(f.name, "task file is not a JSON list")
            continue
        task = f.stem
        for k, e in enumerate(data):
            qid = f"mvbench-{task}-{k}"
            if not isinstance(e, dict):
                rep.skip(qid, "entry is not an object")
                continue
            cands, ans, q, v = e.get("candidates"), e.get("answer"), e.get("question"), e.get("video")
            if not isinstance(q, str) or not isinstance(v, str):
                rep.skip(qid, "missing 'question' or 'video' string")
                continue
            if not isinstance(cands, list) or len(cands) < 2 or not all(isinstance(c, str) for c in cands):
                rep.skip(qid, "missing 'candidates' (a list of at least 2 strings)")
                continue
            if not isinstance(ans, str) or ans not in cands:
                rep.skip(qid, "'answer' is not one of the candidates")
                continue
            stem = os.path.splitext(os.path.basename(v.rstrip("/")))[0]
            path = index.find(stem, os.path.basename(v.rstrip("/")))
            if path is None:
                rep.skip(qid, "video not found under --videos")
                continue
            items.append(_mcq(qid, index.relative(path, out.parent), q, cands, cands.index(ans), source=f"mvbench/{task}",
                              start=_num(e.get("start")), end=_num(e.get("end")), kind=task))
    _finish(rep, out, _sample(rep, items, sample, seed))
    return rep


def _letter_options(opts: Sequence[str]) -> list[str] | None:
    out = []
    for k, o in enumerate(opts):
        m = re.match(r"^\s*\(?([A-Z])[.):]\s*(.*)$", o)
        if not m or m.group(1) != chr(65 + k):
            return None
        out.append(m.group(2).strip())
    return out


def import_videomme(videos: Path, annotations: Path, out: Path, *, sample: int | None = None, seed: int = 42) -> ImportReport:
    rep = ImportReport("videomme")
    if annotations.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError("Video-MME parquet needs pyarrow (pip install pyarrow), or pass the JSON export") from None
        rows = pq.read_table(annotations).to_pylist()
    else:
        data = _load_json(annotations)
        rows = data if isinstance(data, list) else []
    index = VideoIndex(videos, recursive=True)
    items = []
    for k, e in enumerate(rows):
        qid = str(e.get("question_id") or f"row{k}") if isinstance(e, dict) else f"row{k}"
        if not isinstance(e, dict):
            rep.skip(qid, "entry is not an object")
            continue
        opts: Any = e.get("options")
        if opts is not None and hasattr(opts, "tolist"):  # parquet gives numpy arrays
            opts = opts.tolist()
        if not isinstance(opts, list) or len(opts) < 2 or not all(isinstance(o, str) for o in opts):
            rep.skip(qid, "missing 'options' (a list of strings)")
            continue
        clean = _letter_options(opts)
        if clean is None:
            rep.skip(qid, "'options' are not letter-prefixed A., B., ...")
            continue
        ans = e.get("answer")
        if not isinstance(ans, str) or len(ans.strip()) != 1 or not 0 <= ord(ans.strip()) - 65 < len(clean):
            rep.skip(qid, "'answer' is not an option letter")
            continue
        vid, q = e.get("videoID"), e.get("question")
        if not isinstance(vid, str) or not isinstance(q, str):
            rep.skip(qid, "missing 'videoID' or 'question' string")
            continue
        path = index.find(vid)
        if path is None:
            rep.skip(qid, "video not found under --videos")
            continue
        tags = [str(e.get(t)) for t in ("duration", "domain", "sub_category", "task_type") if e.get(t)]
        items.append(_mcq(f"videomme-{qid}", index.relative(path, out.parent), q, clean, ord(ans.strip()) - 65,
                          source="videomme", kind=str(e.get("task_type", "")), tags=tags))
    _finish(rep, out, _sample(rep, items, sample, seed))
    return rep


def import_egoschema(videos: Path, annotations: Path, out: Path, *, answers: Path | None = None, sample: int | None = None,
                     seed: int = 42) -> ImportReport:
    rep = ImportReport("egoschema")
    data = _load_json(annotations)
    if not isinstance(data, list):
        raise ConfigError(f"--annotations {annotations}: expected EgoSchema's questions.json (a list)")
    ans_path = answers or annotations.with_name("subset_answers.json")
    truth = _load_json(ans_path, "--answers")
    if not isinstance(truth, dict):
        raise ConfigError(f"--answers {ans_path}: expected subset_answers.json (a dict q_uid -> answer index)")
    index = VideoIndex(videos)
    items = []
    for k, e in enumerate(data):
        if not isinstance(e, dict) or not isinstance(e.get("q_uid"), str):
            rep.skip(f"row{k}", "entry without a 'q_uid' string")
            continue
        uid = e["q_uid"]
        opts = [e.get(f"option {i}") for i in range(5)]
        if not isinstance(e.get("question"), str) or not all(isinstance(o, str) for o in opts):
            rep.skip(uid, "missing 'question' or 'option 0'..'option 4' strings")
            continue
        a = truth.get(uid)
        if isinstance(a, str) and a.isdigit():
            a = int(a)
        if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a < 5:
            rep.skip(uid, "no answer in subset_answers.json")
            continue
        path = index.find(uid)
        if path is None:
            rep.skip(uid, "video not found under --videos")
            continue
        items.append(_mcq(f"egoschema-{uid}", index.relative(path, out.parent), e["question"], [str(o) for o in opts], a,
                          source="egoschema"))
    _finish(rep, out, _sample(rep, items, sample, seed))
    return rep


def import_nextqa(videos: Path, annotations: Path, out: Path, *, sample: int | None = None, seed: int = 42) -> ImportReport:
    rep = ImportReport("nextqa")
    if not annotations.is_file():
        raise ConfigError(f"--annotations {annotations}: no such file")
    index = VideoIndex(videos, recursive=True)
    items = []
    with io.StringIO(_read_text(annotations), newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"video", "question", "answer", "a0", "a1", "a2", "a3", "a4"}
        if not need <= set(reader.fieldnames or []):
            raise ConfigError(f"--annotations {annotations}: NExT-QA CSV needs columns {sorted(need)}; has {reader.fieldnames}")
        for n, row in enumerate(reader, start=2):
            qid = f"nextqa-{row.get('video')}-{row.get('qid') or n}"
            try:
                a = int(row["answer"])
            except (TypeError, ValueError):
                rep.skip(qid, "'answer' is not an integer index")
                continue
            opts = [row[f"a{i}"] for i in range(5)]
            if not all(o and o.strip() for o in opts) or not (row["question"] or "").strip():
                rep.skip(qid, "empty question or option")
                continue
            if not 0 <= a < 5:
                rep.skip(qid, "'answer' outside 0..4")
                continue
            path = index.find(str(row["video"]))
            if path is None:
                rep.skip(qid, "video not found under --videos")
                continue
            items.append(_mcq(qid, index.relative(path, out.parent), row["question"].strip(), [o.strip() for o in opts], a,
                              source="nextqa", kind=str(row.get("type", ""))))
    _finish(rep, out, _sample(rep, items, sample, seed))
    return rep


def _finish(rep: ImportReport, out: Path, lines: Iterable[dict[str, Any]]) -> None:
    lines = list(lines)
    for line in lines:
        rep.written[line["type"]] += 1
    write_manifest(out, lines)
    summary = out.with_suffix(out.suffix + ".import.json")
    summary.write_text(json.dumps(rep.to_dict(), indent=2, sort_keys=True), encoding="utf-8")


def run_import(fmt: str, *, videos: str, annotations: str, out: str, classes: str | None = None, answers: str | None = None,
               groups: int = 27, sample: int | None = None, seed: int = 42) -> ImportReport:
    """Dispatch to one importer; ``fmt`` must be one of FORMATS."""
    if fmt not in FORMATS:
        raise ConfigError(f"FORMAT must be one of {', '.join(FORMATS)}; got {fmt!r}")
    v, a, o = Path(videos), Path(annotations), Path(out)
    if fmt == "activitynet":
        return import_activitynet(v, a, o, classes=Path(classes) if classes else None, groups=groups, seed=seed)
    if fmt == "news":
        return import_news(v, a, o, groups=groups, seed=seed)
    if fmt == "mvbench":
        return import_mvbench(v, a, o, sample=sample, seed=seed)
    if fmt == "videomme":
        return import_videomme(v, a, o, sample=sample, seed=seed)
    if fmt == "egoschema":
        return import_egoschema(v, a, o, answers=Path(answers) if answers else None, sample=sample, seed=seed)
    return import_nextqa(v, a, o, sample=sample, seed=seed)
