"""Importers of the captioning datasets, grouped into the multi-video paper's groups and pairs:
ActivityNet Captions and the News Video Dataset (see :mod:`~pytest_posbias.data.importers`).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..scoring.text import sentences
from .import_common import ImportReport, VideoIndex, _finish, _load_json, _num, bucket_of


def sample_groups(videos: Iterable[Mapping[str, Any]], *, groups: int, seed: int) -> list[dict[str, Any]]:
    """Per (domain, bucket) of the ``videos`` manifest lines: up to ``groups`` groups of P = 2 and 4 videos,
    non-overlapping within the configuration for each P (pairs may reuse the four-video groups' videos), drawn
    with ``random.Random``."""
    ids_by_config: dict[tuple[str, str], list[str]] = defaultdict(list)
    for v in videos:
        ids_by_config[(v["domain"], v["bucket"])].append(v["id"])
    out = []
    for (domain, bucket), ids in sorted(ids_by_config.items()):
        for P in (2, 4):
            rng = random.Random(f"{seed}|{domain}|{bucket}|{P}")
            pool = sorted(ids)
            rng.shuffle(pool)
            for g in range(min(groups, len(pool) // P)):
                out.append({"type": "group", "id": f"{domain}-{bucket}-P{P}-g{g:02d}", "domain": domain,
                            "bucket": bucket, "P": P, "videos": pool[g * P : (g + 1) * P]})
    return out


OUTSIDE_BUCKETS = "duration outside the buckets (0-60 s, 60-120 s)"
DOMAIN_WORDS = {"cooking": ("eating and drinking", "food", "cook", "drink"), "domestic": ("household",),
                "leisure": ("socializing", "relaxing", "leisure", "sports", "exercise", "recreation")}


def activitynet_domains(classes: Path) -> dict[str, str]:
    """video id (without ``v_``) → Cooking/Domestic/Leisure from ActivityNet's database + taxonomy (Cooking = eating and
    drinking, cooking; Domestic = household; Leisure = socializing, relaxing, sports and exercise)."""
    data = _load_json(classes, "--classes")
    if not isinstance(data, dict) or not isinstance(data.get("taxonomy"), list) \
            or not isinstance(data.get("database"), dict):
        raise ConfigError(f"--classes {classes}: expected ActivityNet's activity_net.v1-3.min.json (keys 'taxonomy', "
                          "'database')")
    nodes = {n["nodeName"]: n for n in data["taxonomy"] if isinstance(n, dict) and "nodeName" in n}

    def domain(label: str) -> str | None:
        name: str | None = label
        chain: list[str] = []  # the label's node and its ancestors, up to the root or a cycle
        while name and name in nodes and name not in chain:
            chain.append(name)
            name = nodes[name].get("parentName")
        text = " | ".join(n.lower() for n in [*chain, label])
        return next((d for d, words in DOMAIN_WORDS.items() if any(k in text for k in words)), None)

    out = {}
    for vid, entry in data["database"].items():
        found = entry.get("annotations") if isinstance(entry, dict) else None
        labels = [a.get("label") for a in (found if isinstance(found, list) else [])
                  if isinstance(a, dict) and isinstance(a.get("label"), str)]
        if dom := next((d for d in (domain(lbl) for lbl in labels if lbl) if d), None):
            out[vid.removeprefix("v_")] = dom
    return out


def import_activitynet(videos: Path, annotations: Path, out: Path, *, classes: Path | None = None, groups: int = 27,
                       seed: int = 42) -> ImportReport:
    """ActivityNet Captions (``train.json``/``val_1.json``/``val_2.json``: ``v_<id>`` → ``duration``,
    ``sentences``; local files may lack ``v_``). ``classes`` (``activity_net.v1-3.min.json``) maps each
    activity through the taxonomy to the paper's domains (:func:`activitynet_domains`), else one domain
    ``activitynet``; ``groups`` groups per domain × bucket and scale (:func:`sample_groups`)."""
    rep = ImportReport("activitynet")
    data = _load_json(annotations)
    if not isinstance(data, dict):
        raise ConfigError(f"--annotations {annotations}: expected a dict keyed v_<youtube id> (train.json / val_1.json "
                          "/ val_2.json)")
    index = VideoIndex(videos)
    domains = activitynet_domains(classes) if classes else None
    lines: list[dict[str, Any]] = []
    for key, e in data.items():
        if not isinstance(e, dict):
            rep.skip(key, "entry is not an object")
            continue
        dur = _num(e.get("duration"))
        sents = e.get("sentences")
        if dur is None:
            rep.skip(key, "missing or non-numeric 'duration'")
            continue
        if not isinstance(sents, list) or not all(isinstance(s, str) for s in sents) \
                or not any(s.strip() for s in sents):  # blank sentences are no references
            rep.skip(key, "missing 'sentences' (a non-empty list of strings)")
            continue
        if (bucket := bucket_of(dur)) is None:
            rep.skip(key, OUTSIDE_BUCKETS)
            continue
        yid = key.removeprefix("v_")
        domain = "activitynet" if domains is None else domains.get(yid)
        if not domain:
            rep.skip(key, "activity not in Cooking/Domestic/Leisure")
            continue
        if (path := index.find(key, yid)) is None:
            rep.skip(key, "video not found under --videos")
            continue
        refs = [s.strip() for s in sents if s.strip()]
        lines.append({"type": "video", "id": key, "path": index.relative(path, out.parent), "domain": domain,
                      "bucket": bucket, "duration": dur, "references": refs, "reference_style": "sentences",
                      "source": "activitynet"})
    return _finish(rep, out, lines + sample_groups(lines, groups=groups, seed=seed), annotations=annotations)


def import_news(videos: Path, annotations: Path, out: Path, *, groups: int = 27, seed: int = 42) -> ImportReport:
    """The News Video Dataset (a folder of ``vid.<id>.info.json``: ``description`` is the reference,
    split into sentences, ``duration`` in seconds): News-style references, groups as ActivityNet's."""
    rep = ImportReport("news")
    if not annotations.is_dir():
        raise ConfigError(f"--annotations {annotations}: expected the directory holding the vid.<id>.info.json files")
    index = VideoIndex(videos)
    lines: list[dict[str, Any]] = []
    for f in sorted(annotations.glob("vid.*.info.json")):
        vid = f.name[len("vid.") : -len(".info.json")]
        try:
            e = json.loads(f.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
            rep.skip(f.name, "not valid JSON")
            continue
        if not isinstance(e, dict):
            rep.skip(f.name, "entry is not an object")
            continue
        desc = e.get("description")
        if not isinstance(desc, str) or not desc.strip():
            rep.skip(f.name, "missing 'description' (the reference)")
            continue
        if (dur := _num(e.get("duration"))) is None:
            rep.skip(f.name, "missing or non-numeric 'duration'")
            continue
        if (bucket := bucket_of(dur)) is None:
            rep.skip(f.name, OUTSIDE_BUCKETS)
            continue
        if (path := index.find(f"vid.{vid}", vid, str(e.get("id", "")))) is None:
            rep.skip(f.name, "video not found under --videos")
            continue
        refs = sentences(desc) or [desc.strip()]
        lines.append({"type": "video", "id": f"news-{vid}", "path": index.relative(path, out.parent), "domain": "news",
                      "bucket": bucket, "duration": dur, "references": refs, "reference_style": "news",
                      "source": "news"})
    return _finish(rep, out, lines + sample_groups(lines, groups=groups, seed=seed), annotations=annotations)
