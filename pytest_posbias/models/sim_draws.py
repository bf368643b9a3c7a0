"""Where a dose's random decisions come from (docs/design.md section 7): uniforms stratified so
that on the synthetic set the realised share of a decision is the dose's share up to about one
unit rather than a binomial draw around it (multi-video slots: :func:`set_strata`, elsewhere
:func:`rotation_strata`; items and videos: :func:`unit_uniform`). Nothing here reads a dose: the
functions take the probabilities they stratify.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Sequence
from itertools import product
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import numpy as np

from ..video.synthetic import configurations

if TYPE_CHECKING:
    from ..video.compose import VideoPart

_Groups = dict[tuple[str, ...], tuple[int, tuple[str, ...]]]
_Configs = dict[tuple[str, str, int], tuple[tuple[str, ...], ...]]


@functools.lru_cache(maxsize=8)
def _manifest(manifest: str, mtime_ns: int) -> tuple[_Groups, _Configs]:
    """The groups of a manifest, read once per version (``mtime_ns``): per group (key: its sorted
    video ids) its ordinal among its configuration's (domain, bucket, P) groups in manifest order
    and its listed video order; per configuration its groups' listed orders (a repeated group
    keeps its first place)."""
    groups: _Groups = {}
    count: dict[tuple[str, str, int], int] = {}
    configs: dict[tuple[str, str, int], list[tuple[str, ...]]] = {}
    for line in Path(manifest).read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("type") != "group":
            continue
        cfg = (str(row.get("domain")), str(row.get("bucket")), int(row.get("P", 0)))
        vids = tuple(str(v) for v in row.get("videos", ()))
        if tuple(sorted(vids)) not in groups:
            configs.setdefault(cfg, []).append(vids)
        groups.setdefault(tuple(sorted(vids)), (count.get(cfg, 0), vids))
        count[cfg] = count.get(cfg, 0) + 1
    return groups, {k: tuple(v) for k, v in configs.items()}


def _read_manifest(video_paths: Sequence[str]) -> tuple[_Groups, _Configs] | None:
    """:func:`_manifest` of the ``manifest.jsonl`` beside the videos' folder; None when unreadable."""
    manifest = PurePath(video_paths[0]).parent.parent / "manifest.jsonl"
    try:
        return _manifest(str(manifest), os.stat(manifest).st_mtime_ns)
    except (OSError, ValueError, TypeError):
        return None


def _hash_uniform(text: str) -> float:
    """A uniform in [0, 1) from the first 8 bytes of SHA-256 of ``text``."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") / 2.0**64


def set_position(video_paths: Sequence[str]) -> tuple[int, int] | None:
    """(n, i) of a multi-video input: n the group's ordinal among its configuration's groups in the
    synthetic set's manifest (``manifest.jsonl`` beside the ``videos`` folder, manifest order: the
    probe takes a prefix of it), i = n·P + j the instance index, j the cyclic order (slot p holds
    listed video (j + p) mod P). None when there is no such manifest, the group is not in it, or
    the slots are not a cyclic order of its listed videos."""
    if len(video_paths) < 2:
        return None
    parent = PurePath(video_paths[0]).parent
    ids = [PurePath(v).stem for v in video_paths]
    if parent.name != "videos" or any(PurePath(v).parent != parent for v in video_paths):
        return None
    read = _read_manifest(video_paths)
    found = read[0].get(tuple(sorted(ids))) if read is not None else None
    if found is None:
        return None
    n, listed = found
    P = len(listed)
    j = listed.index(ids[0])
    if any(ids[p] != listed[(j + p) % P] for p in range(P)):
        return None
    return n, n * P + j


# most slots a dose stratifies over the synthetic set (a DPB slope enumerates the 2^P drop patterns)
_MAX_STRATA_SLOTS = 8
# drop-pattern sequences of DPB slopes already built, per keep vector (extended on demand)
_PATTERN_SEQ: dict[tuple[float, ...], tuple[list[tuple[bool, ...]], list[int]]] = {}


def drop_patterns(keep: Sequence[float]) -> list[tuple[tuple[bool, ...], float]]:
    """Every drop pattern of the slots (True = dropped) with its probability under independent
    slots, ∏ (1 − w_p if dropped else w_p), in a fixed order; patterns of probability 0 left out."""
    probs = ((bits, math.prod((1.0 - w) if b else w for w, b in zip(keep, bits, strict=True)))
             for bits in product((False, True), repeat=len(keep)))
    return [(bits, pr) for bits, pr in probs if pr > 0.0]


def pattern_at(keep: Sequence[float], i: int) -> tuple[bool, ...]:
    """The drop pattern of instance i under a DPB slope, by the quota method over the patterns'
    probabilities π_k (:func:`drop_patterns`): instance t takes the pattern of largest deficit
    (t + 1)·π_k − c_k(t) (c_k: times taken before t; ties to the first), so over any prefix of M
    instances every pattern is taken within one of M·π_k times. The slots' drops then follow the
    independent joint law ``sim_dose.expected_dpb`` averages over (per-slot systematic samples
    would never drop two slots of one instance together)."""
    key = tuple(float(w) for w in keep)
    pats = drop_patterns(key)
    seq, counts = _PATTERN_SEQ.setdefault(key, ([], [0] * len(pats)))
    while len(seq) <= i:
        t = len(seq)
        k = max(range(len(pats)), key=lambda j: ((t + 1) * pats[j][1] - counts[j], -j))
        counts[k] += 1
        seq.append(pats[k][0])
    return seq[i]


def _clip_cell(video_paths: Sequence[str], n: int, i: int, slots: Sequence[int], slot: int) -> int | None:
    """The index of the cell at ``slot`` of instance i (group n) among its configuration's cells
    (:func:`_clip_order`); None outside the synthetic set's manifest."""
    read = _read_manifest(video_paths)
    if read is None:
        return None
    ids = tuple(sorted(PurePath(v).stem for v in video_paths))
    groups = next((g for g in read[1].values() if n < len(g) and tuple(sorted(g[n])) == ids), None)
    if groups is None:
        return None
    return _clip_order(groups, tuple(slots))[(n, i - n * len(groups[n]), slot)]


@functools.lru_cache(maxsize=64)
def _clip_order(groups: tuple[tuple[str, ...], ...], slots: tuple[int, ...]) -> dict[tuple[int, int, int], int]:
    """The index of each cell (group n, cyclic order j, slot p) of a configuration's ``slots`` listed
    clip by clip: the clip filling it is (j + p) mod P of the group's listed order; clips in name
    order, a clip's cells in manifest order, so a prefix of the groups keeps every clip's first
    cells at the same indices."""
    P = len(groups[0])
    cells = [(groups[gn][(j + p) % P], gn, j, p) for gn in range(len(groups)) for j in range(P) for p in slots]
    return {cell[1:]: k for k, cell in enumerate(sorted(cells, key=lambda cell: cell[0]))}


def set_strata(video_paths: Sequence[str], keep: Sequence[float], confuse: float, *, by_clip: bool = False) -> Any:
    """Uniforms u(slot, what) for a dose's slot decisions, stratified over the synthetic set's
    instances (:func:`set_position`), or None (then :func:`rotation_strata`).

    A slot drops its summary when u(slot, "keep") >= w_slot and describes another slot's video when
    u(slot, "confuse") < q. The slots of equal w form one sequence over the set, cell
    m = i·|S| + (slot's rank in S), and so do all slots' confusion decisions (m = i·P + slot); cell
    m is taken when an integer lies in (m·x + ½, (m + 1)·x + ½], x = 1 − w (q): any prefix of M
    cells holds round(M·x) (systematic sampling). MEG, coverage and contamination are linear in
    these indicators; a DPB slope (every w different) is not, so each instance takes a whole drop
    pattern (:func:`pattern_at`). ``by_clip`` (a ``sim_dose.sentence_drops`` dose): one
    systematic sample over the configuration's dosed cells listed clip by clip
    (:func:`_clip_cell`), so every clip is thinned in its share of its appearances
    (docs/simulated-models.md)."""
    if len(keep) > _MAX_STRATA_SLOTS:
        return None
    pos = set_position(video_paths)
    if pos is None:
        return None
    n, i = pos
    P = len(keep)
    # a thinning dose's slots are linear in their drops: per-clip samples, not joint drop patterns
    distinct = not by_clip and len(set(keep)) == P and any(w < 1.0 for w in keep)

    def systematic(m: int, x: float, offset: float = 0.5) -> bool:
        # cell m is taken when an integer lies in (m·x + offset, (m + 1)·x + offset]: the count over
        # cells 0..M−1 telescopes to floor(M·x + offset) − floor(offset), float rounding included
        return math.floor((m + 1) * x + offset) > math.floor(m * x + offset)

    def u(slot: int, what: str) -> float:
        if what == "confuse":
            return 0.5 * confuse if systematic(i * P + slot, confuse) else confuse + 0.5 * (1.0 - confuse)
        w = keep[slot]
        if distinct:
            dropped = pattern_at(keep, i)[slot]
        else:
            same = [p for p in range(P) if keep[p] == w]
            cell = _clip_cell(video_paths, n, i, same, slot) if by_clip else None  # the cells listed clip by clip
            dropped = systematic(i * len(same) + same.index(slot) if cell is None else cell, 1.0 - w)
        return w + 0.5 * (1.0 - w) if dropped else 0.5 * w  # >= w exactly when the cell is dropped

    return u


# Weyl sequences frac(n·θ + β) with badly approximable θ (continued fractions of small terms), so any
# share of the first N units below a dose is the dose up to about 2/N; the two video streams and the
# three item streams use different θ so their selections are not nested
_WEYL = {"flip": (math.sqrt(2) - 1, 0.11), "phase": (math.sqrt(3) - 1, 0.37), "order": ((math.sqrt(5) - 1) / 2, 0.73),
         "parity": (math.sqrt(7) - 2, 0.61),
         "repetition": ((math.sqrt(5) - 1) / 2, 0.19), "susceptible": (math.sqrt(3) - 1, 0.53)}
# step θ and offset β of the group streams (jointly stratified keep / confusion decisions of a group)
_GROUP_STEPS = {"keep": (math.sqrt(2) - 1, 0.5), "confuse": ((math.sqrt(5) - 1) / 2, 0.25)}
_SYN = re.compile(r"syn-([a-z]+)-(short|long)-(\d+)$")
_QUESTION_KINDS = ("what colour", "in which direction", "how many", "what brief event", "why does", "what will")


def _synthetic_clip(video_path: str, cfgs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], int] | None:
    """(configuration, clip number) of a synthetic-set video named ``syn-DOMAIN-BUCKET-N``; None otherwise."""
    m = _SYN.fullmatch(PurePath(video_path).stem)
    return ((m[1], m[2]), int(m[3])) if m and (m[1], m[2]) in cfgs else None


def unit_index(video_path: str, question: str | None = None) -> int | None:
    """An integer index of a synthetic-set video, n = clip number · configurations + configuration
    (consecutive over the set for any clips per configuration), or of one of its questions,
    n·6 + question kind; None outside the synthetic set's naming and question kinds."""
    cfgs = configurations()
    clip = _synthetic_clip(video_path, cfgs)
    if clip is None:
        return None
    n = clip[1] * len(cfgs) + cfgs.index(clip[0])
    if question is None:
        return n
    q = question.lower()
    kind = next((k for k, prefix in enumerate(_QUESTION_KINDS) if q.startswith(prefix)), None)
    return None if kind is None else n * len(_QUESTION_KINDS) + kind


def group_rank(video_paths: Sequence[str]) -> int | None:
    """The rank of a group of synthetic clips among all P-subsets of clip numbers of its
    configuration, by the combinatorial number system: Σ_i C(c_i, i + 1) over the sorted clip
    numbers c_0 < c_1 < …, so ranks are consecutive over every possible group; times the number
    of configurations plus the configuration, so configurations do not share a rank. None when a
    video is not a synthetic clip or the clips come from different configurations."""
    cfgs = configurations()
    found = [_synthetic_clip(path, cfgs) for path in video_paths]
    cells = [c for c in found if c is not None]
    clips = [c[1] for c in cells]
    if not cells or len(cells) < len(found) or len({c[0] for c in cells}) > 1 or len(set(clips)) != len(clips):
        return None
    rank = sum(math.comb(c, i + 1) for i, c in enumerate(sorted(clips)))
    return rank * len(cfgs) + cfgs.index(cells[0][0])


def unit_uniform(stream: str, index: int | None, fallback: str) -> float:
    """A uniform in [0, 1) per unit: the Weyl sequence frac(n·θ + β) of the stream over the
    synthetic set's unit index n (equidistributed, so the share below a dose on the set is the
    dose up to O(log N / N)); a SHA-256 hash of ``fallback`` for any other unit."""
    if index is not None:
        theta, beta = _WEYL[stream]
        return (index * theta + beta) % 1.0
    return _hash_uniform(f"{stream}|{fallback}")


def rotation_strata(videos: Sequence[VideoPart], *, joint_keep: bool = False) -> Any:
    """Stratified uniforms for a dose's slot decisions over the cyclic orders of one group.

    The rotation index j is the slot of the video with the smallest content hash. Slot p of
    rotation j gets u(p, j) = frac(V_p(group) + j/P), one per stratum [k/P, (k+1)/P) over the P
    rotations, V_p a hash per (group, slot), independent across slots (as the DPB/MEG formulas
    assume). Where only the marginals matter (the confusion draw; the keep draw when every slot
    has the same w, ``joint_keep``) the P² cells are stratified jointly,
    u(p, j) = frac(V(group) + j/P + p/P²), V(group) = frac(rank·θ + β) over the group's rank
    (:func:`group_rank`; θ, β per decision from ``_GROUP_STEPS``), equidistributed over consecutive
    ranks; a SHA-256 hash of the group when it has no rank. None when the videos are not P distinct
    clips."""
    keys = [p.frames.primary.key() for p in videos]
    P = len(keys)
    if P < 2 or len(set(keys)) != P:
        return None
    j = keys.index(min(keys))
    group = "|".join(sorted(keys))
    rank = group_rank([p.frames.primary.path for p in videos])

    def u(slot: int, what: str) -> float:
        if what == "confuse" or joint_keep:
            step, offset = _GROUP_STEPS[what]
            v = (rank * step + offset) % 1.0 if rank is not None else _hash_uniform(f"dose-strata|{what}|{group}")
            return (v + j / P + slot / P**2) % 1.0
        return (_hash_uniform(f"dose-strata|{what}|{group}|{slot}") + j / P) % 1.0

    return u


def seeded_rng(*parts: Any) -> np.random.Generator:
    """A generator seeded by the first 8 bytes of SHA-256 of ``"|".join(map(str, parts))``: the
    same parts always give the same stream, and no global generator is touched."""
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))
