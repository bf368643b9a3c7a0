"""Importers: users' local copies of the papers' datasets → manifests (docs/design.md section 6).

``posbias data import FORMAT --videos DIR --annotations FILE --out manifest.jsonl``: every importer validates each
entry, writes the items it can use and reports what it skipped and why; nothing is fatal except an unreadable
annotations file. ``--sample N --seed 42`` keeps ``random.Random(seed).sample`` of the multiple-choice items (the phase
paper's subsets). The importers are in :mod:`.import_captions` (ActivityNet, News) and :mod:`.import_mcq` (MVBench,
Video-MME, EgoSchema, NExT-QA); each one's docstring names the files it reads.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .import_captions import import_activitynet, import_news
from .import_common import ImportReport
from .import_mcq import import_egoschema, import_mvbench, import_nextqa, import_videomme

FORMATS = ("activitynet", "news", "mvbench", "videomme", "egoschema", "nextqa")


def run_import(fmt: str, *, videos: str, annotations: str, out: str, classes: str | None = None,
               answers: str | None = None, groups: int = 27, sample: int | None = None, seed: int = 42) -> ImportReport:
    """Dispatch to one importer; ``fmt`` must be one of FORMATS."""
    if fmt not in FORMATS:
        raise ConfigError(f"FORMAT must be one of {', '.join(FORMATS)}; got {fmt!r}")
    v, a, o = Path(videos), Path(annotations), Path(out)
    if fmt == "activitynet":
        return import_activitynet(v, a, o, classes=Path(classes) if classes else None, groups=groups, seed=seed)
    if fmt == "news":
        return import_news(v, a, o, groups=groups, seed=seed)
    if fmt == "egoschema":
        return import_egoschema(v, a, o, answers=Path(answers) if answers else None, sample=sample, seed=seed)
    mcq = {"mvbench": import_mvbench, "videomme": import_videomme, "nextqa": import_nextqa}[fmt]
    return mcq(v, a, o, sample=sample, seed=seed)
