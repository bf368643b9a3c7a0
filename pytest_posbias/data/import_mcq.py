"""Importers of the multiple-choice datasets: MVBench, Video-MME, EgoSchema and NExT-QA (see
:mod:`~pytest_posbias.data.importers`).
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .import_common import ImportReport, VideoIndex, _finish, _load_json, _num, _read_text


def _mcq(qid: str, video: str, question: str, options: Sequence[str], answer: int, *, source: str,
         start: float | None = None, end: float | None = None, kind: str = "",
         tags: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "mcq", "id": qid, "video": video, "question": question, "options": list(options), "answer": answer,
            "start": start, "end": end, "kind": kind, "tags": list(tags), "source": source}


def import_mvbench(videos: Path, annotations: Path, out: Path, *, sample: int | None = None,
                   seed: int = 42) -> ImportReport:
    """MVBench: per-task JSON lists (``video``, ``question``, ``candidates``, ``answer`` as text, optional
    ``start``/``end``); frame-folder tasks are supported."""
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
            window = {k: _num(e[k]) for k in ("start", "end") if e.get(k) is not None}
            if bad := [k for k, x in window.items() if x is None or not math.isfinite(x)]:
                # the item's window would be dropped and the whole clip asked about
                rep.skip(qid, f"'{bad[0]}' is not a finite number of seconds")
                continue
            stem = os.path.splitext(os.path.basename(v.rstrip("/")))[0]
            if (path := index.find(stem, os.path.basename(v.rstrip("/")))) is None:
                rep.skip(qid, "video not found under --videos")
                continue
            items.append(_mcq(qid, index.relative(path, out.parent), q, cands, cands.index(ans),
                              source=f"mvbench/{task}", start=window.get("start"), end=window.get("end"), kind=task))
    return _finish(rep, out, items, annotations=annotations, sample=sample, seed=seed)


def _letter_options(opts: Sequence[str]) -> list[str] | None:
    out = []
    for k, o in enumerate(opts):
        m = re.match(r"^\s*\(?([A-Z])[.):]\s*(.*)$", o)
        if not m or m.group(1) != chr(65 + k):
            return None
        out.append(m.group(2).strip())
    return out


def import_videomme(videos: Path, annotations: Path, out: Path, *, sample: int | None = None,
                    seed: int = 42) -> ImportReport:
    """Video-MME: parquet or JSON (``videoID``, ``question_id``, ``duration``, ``domain``, ``sub_category``,
    ``task_type``, ``question``, letter-prefixed ``options``, ``answer``)."""
    rep = ImportReport("videomme")
    if annotations.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError("Video-MME parquet needs pyarrow (pip install pyarrow), or pass the JSON "
                              "export") from None
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
        if (clean := _letter_options(opts)) is None:
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
        if (path := index.find(vid)) is None:
            rep.skip(qid, "video not found under --videos")
            continue
        tags = [str(e.get(t)) for t in ("duration", "domain", "sub_category", "task_type") if e.get(t)]
        items.append(_mcq(f"videomme-{qid}", index.relative(path, out.parent), q, clean, ord(ans.strip()) - 65,
                          source="videomme", kind=str(e.get("task_type", "")), tags=tags))
    return _finish(rep, out, items, annotations=annotations, sample=sample, seed=seed)


def import_egoschema(videos: Path, annotations: Path, out: Path, *, answers: Path | None = None,
                     sample: int | None = None, seed: int = 42) -> ImportReport:
    """EgoSchema: ``questions.json`` (``q_uid``, ``question``, ``option 0``..``option 4``) with
    ``subset_answers.json`` (q_uid → index, ``answers``); videos ``<q_uid>.mp4``."""
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
        if (path := index.find(uid)) is None:
            rep.skip(uid, "video not found under --videos")
            continue
        items.append(_mcq(f"egoschema-{uid}", index.relative(path, out.parent), e["question"], [str(o) for o in opts],
                          a, source="egoschema"))
    return _finish(rep, out, items, annotations=annotations, sample=sample, seed=seed)


def import_nextqa(videos: Path, annotations: Path, out: Path, *, sample: int | None = None,
                  seed: int = 42) -> ImportReport:
    """NExT-QA: the multiple-choice CSV (``video``, ``question``, ``a0``..``a4``, ``answer``)."""
    rep = ImportReport("nextqa")
    if not annotations.is_file():
        raise ConfigError(f"--annotations {annotations}: no such file")
    index = VideoIndex(videos, recursive=True)
    items = []
    with io.StringIO(_read_text(annotations), newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"video", "question", "answer", "a0", "a1", "a2", "a3", "a4"}
        if not need <= set(reader.fieldnames or []):
            raise ConfigError(f"--annotations {annotations}: NExT-QA CSV needs columns {sorted(need)}; has "
                              f"{reader.fieldnames}")
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
            if (path := index.find(str(row["video"]))) is None:
                rep.skip(qid, "video not found under --videos")
                continue
            items.append(_mcq(qid, index.relative(path, out.parent), row["question"].strip(), [o.strip() for o in opts],
                              a, source="nextqa", kind=str(row.get("type", ""))))
    return _finish(rep, out, items, annotations=annotations, sample=sample, seed=seed)

