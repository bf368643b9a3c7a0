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

The importers live in :mod:`~pytest_posbias.data.import_captions` (ActivityNet, News),
:mod:`~pytest_posbias.data.import_mcq` (MVBench, Video-MME, EgoSchema, NExT-QA) and
:mod:`~pytest_posbias.data.import_common` (the report, the video index, file reading); this
module dispatches to them (:func:`run_import`) and re-exports their names.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .import_captions import activitynet_domains as activitynet_domains
from .import_captions import import_activitynet as import_activitynet
from .import_captions import import_news as import_news
from .import_captions import sample_groups as sample_groups
from .import_common import BUCKETS as BUCKETS
from .import_common import IMAGE_EXTS as IMAGE_EXTS
from .import_common import VIDEO_EXTS as VIDEO_EXTS
from .import_common import ImportReport as ImportReport
from .import_common import VideoIndex as VideoIndex
from .import_common import bucket_of as bucket_of
from .import_mcq import import_egoschema as import_egoschema
from .import_mcq import import_mvbench as import_mvbench
from .import_mcq import import_nextqa as import_nextqa
from .import_mcq import import_videomme as import_videomme

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
    if fmt == "mvbench":
        return import_mvbench(v, a, o, sample=sample, seed=seed)
    if fmt == "videomme":
        return import_videomme(v, a, o, sample=sample, seed=seed)
    if fmt == "egoschema":
        return import_egoschema(v, a, o, answers=Path(answers) if answers else None, sample=sample, seed=seed)
    return import_nextqa(v, a, o, sample=sample, seed=seed)
