"""Where a dose's random decisions come from (docs/design.md section 7).

A dose (``sim_dose``) sets probabilities; this module supplies the uniforms its decisions are
drawn with, so that on the synthetic set the realised share of a decision is the dose's share
up to about one unit rather than a binomial draw around it:

* multi-video slots on the synthetic set (:func:`set_strata`): in manifest order (the probe
  takes a prefix of a configuration's groups) the set's cells are dropped by systematic
  sampling, so any prefix of M cells holds round(M·x) dropped cells (x = 1 − w_p), not a
  binomial number. A dose at the threshold is about eight dropped middle slots on 40 groups,
  where a binomial draw is typically off its target by a third;
* multi-video slots elsewhere (:func:`rotation_strata`): stratified over the cyclic orders of
  one group;
* items and videos (:func:`unit_uniform`): Weyl sequences over the synthetic set's unit index
  (:func:`unit_index`), a hash of the unit anywhere else.

Nothing here reads a dose: the functions take the probabilities they stratify.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Sequence
from itertools import product
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..video.compose import VideoPart

@functools.lru_cache(maxsize=8)
def _manifest_groups(manifest: str, mtime_ns: int) -> dict[tuple[str, ...], tuple[int, tuple[str, ...]]]:
    """Per group of a manifest (key: its sorted video ids and P): its ordinal among the groups of
    its configuration (domain, bucket, P) in manifest order, and its listed video order."""
    import json
    from pathlib import Path

    out: dict[tuple[str, ...], tuple[int, tuple[str, ...]]] = {}
    count: dict[tuple[str, str, int], int] = {}
    for line in Path(manifest).read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("type") != "group":
            continue
        cfg = (str(row.get("domain")), str(row.get("bucket")), int(row.get("P", 0)))
        vids = tuple(str(v) for v in row.get("videos", ()))
        out.setdefault(tuple(sorted(vids)), (count.get(cfg, 0), vids))
        count[cfg] = count.get(cfg, 0) + 1
    return out


def set_position(video_paths: Sequence[str]) -> tuple[int, int] | None:
    """(n, i) of a multi-video input: n the group's ordinal among its configuration's groups in the
    synthetic set's manifest (``manifest.jsonl`` beside the ``videos`` folder, manifest order: the
    probe takes a prefix of it), i = n·P + j the instance index, j the cyclic order (slot p holds
    listed video (j + p) mod P). None when there is no such manifest, the group is not in it, or
    the slots are not a cyclic order of its listed videos."""
    from pathlib import PurePath

    if len(video_paths) < 2:
        return None
    parent = PurePath(video_paths[0]).parent
    manifest = parent.parent / "manifest.jsonl"
    ids = [PurePath(v).stem for v in video_paths]
    if parent.name != "videos" or any(PurePath(v).parent != parent for v in video_paths):
        return None
    try:
        import os

        found = _manifest_groups(str(manifest), os.stat(manifest).st_mtime_ns).get(tuple(sorted(ids)))
    except (OSError, ValueError, TypeError):
        return None
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
    out = []
    for bits in product((False, True), repeat=len(keep)):
        pr = math.prod((1.0 - w) if b else w for w, b in zip(keep, bits, strict=True))
        if pr > 0.0:
            out.append((bits, pr))
    return out


def pattern_at(keep: Sequence[float], i: int) -> tuple[bool, ...]:
    """The drop pattern of instance i under a DPB slope, by the quota method over the patterns'
    probabilities π_k (:func:`drop_patterns`): instance t takes the pattern of largest deficit
    (t + 1)·π_k − c_k(t) (c_k: times taken before t; ties to the first), so over any prefix of M
    instances every pattern is taken within one of M·π_k times. The joint law of the slots' drops
    is then the independent one that the DPB formula (``sim_dose.expected_dpb``) averages over;
    per-slot systematic samples would never drop two slots of one instance together, which
    moves the realised DPB off the target (0.047 for 0.05 on every P = 4 configuration)."""
    key = tuple(float(w) for w in keep)
    seq, counts = _PATTERN_SEQ.setdefault(key, ([], []))
    pats = drop_patterns(key)
    if not counts:
        counts.extend([0] * len(pats))
    while len(seq) <= i:
        t = len(seq)
        k = max(range(len(pats)), key=lambda j: ((t + 1) * pats[j][1] - counts[j], -j))
        counts[k] += 1
        seq.append(pats[k][0])
    return seq[i]


@functools.lru_cache(maxsize=8)
def _config_groups(manifest: str, mtime_ns: int) -> dict[tuple[str, str, int], tuple[tuple[str, ...], ...]]:
    """Per configuration (domain, bucket, P) of a manifest, its groups' listed video orders in
    manifest order (the order :func:`set_position` counts)."""
    import json
    from pathlib import Path

    out: dict[tuple[str, str, int], list[tuple[str, ...]]] = {}
    seen: set[tuple[str, ...]] = set()
    for line in Path(manifest).read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("type") != "group":
            continue
        cfg = (str(row.get("domain")), str(row.get("bucket")), int(row.get("P", 0)))
        vids = tuple(str(v) for v in row.get("videos", ()))
        if tuple(sorted(vids)) in seen:  # a repeated group keeps its first ordinal (as _manifest_groups)
            continue
        seen.add(tuple(sorted(vids)))
        out.setdefault(cfg, []).append(vids)
    return {k: tuple(v) for k, v in out.items()}


def _clip_cell(video_paths: Sequence[str], n: int, i: int, slots: Sequence[int], slot: int) -> int | None:
    """The index of the cell at ``slot`` of instance i (group n) in the configuration's cells listed
    clip by clip: the cells are the ``slots`` of every instance of the configuration's groups, each
    filled by the clip (j + p) mod P of its group's listed order; the clips in name order, a clip's
    cells in manifest order. So the index is the cells of the clips before this one plus the
    cell's occurrence index among its clip's cells (a prefix of the groups keeps every clip's first
    cells at the same indices)."""
    import os
    from pathlib import PurePath

    manifest = PurePath(video_paths[0]).parent.parent / "manifest.jsonl"
    try:
        by_cfg = _config_groups(str(manifest), os.stat(manifest).st_mtime_ns)
    except (OSError, ValueError, TypeError):
        return None
    ids = tuple(sorted(PurePath(v).stem for v in video_paths))
    groups = next((g for g in by_cfg.values() if n < len(g) and tuple(sorted(g[n])) == ids), None)
    if groups is None:
        return None
    P = len(groups[n])
    clips = sorted({v for g in groups for v in g})
    j = i - n * P
    target = groups[n][(j + slot) % P]
    count = 0
    for gn in range(n + 1):
        for jj in range(P):
            if gn == n and jj == j:
                break
            count += sum(groups[gn][(jj + p) % P] == target for p in slots)
    count += sum(groups[n][(j + p) % P] == target for p in slots if p < slot)
    before = set(clips[: clips.index(target)])
    start = sum(groups[gn][(jj + p) % P] in before for gn in range(len(groups)) for jj in range(P) for p in slots)
    return start + count


def set_strata(video_paths: Sequence[str], keep: Sequence[float], confuse: float, *, by_clip: bool = False) -> Any:
    """Uniforms u(slot, what) for a dose's slot decisions, stratified over the synthetic set's
    instances (:func:`set_position`), or None (then :func:`rotation_strata`).

    A slot drops its summary when u(slot, "keep") >= w_slot and describes another slot's video when
    u(slot, "confuse") < q. The slots of equal w (the middle or the edge pair of a MEG dose, every
    slot of a coverage dose) form one sequence over the set, cell m = i·|S| + (slot's rank in S),
    and so do all slots' confusion decisions (m = i·P + slot); cell m is dropped (confused) when an
    integer lies in (m·x + ½, (m + 1)·x + ½], x = 1 − w (q): the count over any prefix of M cells
    is round(M·x) (systematic sampling), so the set's share is the dose to within half a cell, not
    a binomial draw.
    MEG, coverage and contamination are linear in these indicators, so their joint law across
    slots does not matter. A DPB slope (the slots' w all differ) needs the joint law of independent
    slots (``sim_dose.expected_dpb``; DPB is not linear in the drops): each instance takes a whole drop
    pattern from a low-discrepancy sequence over the patterns' probabilities (:func:`pattern_at`),
    so every pattern, two slots dropped together included, occurs in its share of the instances.

    ``by_clip`` (a ``sim_dose.sentence_drops`` dose): the systematic sample runs over the
    configuration's dosed cells listed clip by clip instead (a clip's cells are its appearances in
    a dosed slot in manifest order; :func:`_clip_cell`): every clip is thinned in its share of its
    appearances (within one cell), so the realised loss is the share of every clip's own loss, not
    of the few clips a single sequence in manifest order happens to hit (a configuration has 10
    clips; the loss of a first sentence is mostly the clip's), and over the configuration's whole
    manifest the thinned cells number round(M·x); one sample per clip, each rounded on its own, is
    off by up to one cell per clip (−0.0172 for meg=-0.02 on leisure-long P = 4, 40 groups). A thinning DPB dose (P = 2,
    one slot dosed) takes this path too: only one slot of an instance is ever thinned, so the
    instances' DPBs are linear in the thinning indicators and no joint drop pattern is needed."""
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
            cell = _clip_cell(video_paths, n, i, same, slot) if by_clip else None
            if cell is not None:  # one systematic sample over the cells listed clip by clip
                dropped = systematic(cell, 1.0 - w)
            else:
                dropped = systematic(i * len(same) + same.index(slot), 1.0 - w)
        return w + 0.5 * (1.0 - w) if dropped else 0.5 * w  # >= w exactly when the cell is dropped

    return u


# Weyl sequences frac(n·θ + β) with badly approximable θ (continued fractions of small terms), so any
# share of the first N units below a dose is the dose up to about 2/N; the two video streams and the
# three item streams use different θ so their selections are not nested
_WEYL = {"flip": (math.sqrt(2) - 1, 0.11), "phase": (math.sqrt(3) - 1, 0.37), "order": ((math.sqrt(5) - 1) / 2, 0.73),
         "parity": (math.sqrt(7) - 2, 0.61),
         "repetition": ((math.sqrt(5) - 1) / 2, 0.19), "susceptible": (math.sqrt(3) - 1, 0.53)}
# steps of the group streams (jointly stratified keep / confusion decisions of a group)
_GROUP_STEPS = {"keep": math.sqrt(2) - 1, "confuse": (math.sqrt(5) - 1) / 2}
_SYN = re.compile(r"syn-([a-z]+)-(short|long)-(\d+)$")
_QUESTION_KINDS = ("what colour", "in which direction", "how many", "what brief event", "why does", "what will")


def unit_index(video_path: str, question: str | None = None) -> int | None:
    """An integer index of a synthetic-set video, n = clip number · configurations + configuration
    (consecutive over the set for any clips per configuration), or of one of its questions,
    n·6 + question kind; None outside the synthetic set's naming and question kinds."""
    from pathlib import PurePath

    from ..video.synthetic import configurations

    m = _SYN.fullmatch(PurePath(video_path).stem)
    if not m:
        return None
    cfgs = configurations()
    if (m.group(1), m.group(2)) not in cfgs:
        return None
    n = int(m.group(3)) * len(cfgs) + cfgs.index((m.group(1), m.group(2)))
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
    from pathlib import PurePath

    from ..video.synthetic import configurations

    cfgs = configurations()
    clips: list[int] = []
    cfg: tuple[str, str] | None = None
    for path in video_paths:
        m = _SYN.fullmatch(PurePath(path).stem)
        if not m or (m.group(1), m.group(2)) not in cfgs or (cfg is not None and cfg != (m.group(1), m.group(2))):
            return None
        cfg = (m.group(1), m.group(2))
        clips.append(int(m.group(3)))
    if cfg is None or len(set(clips)) != len(clips):
        return None
    rank = sum(math.comb(c, i + 1) for i, c in enumerate(sorted(clips)))
    return rank * len(cfgs) + cfgs.index(cfg)


def group_uniform(what: str, rank: int | None, fallback: str) -> float:
    """V(group) = frac(rank·θ + β) for the ``keep`` or ``confuse`` decisions of a group (θ from
    ``_GROUP_STEPS``, β = 0.5 / 0.25): over consecutive ranks the values are equidistributed; a
    SHA-256 hash of ``fallback`` when the group has no rank (not synthetic clips)."""
    step = _GROUP_STEPS.get(what)
    if rank is not None and step is not None:
        return (rank * step + (0.5 if what == "keep" else 0.25)) % 1.0
    h = hashlib.sha256(fallback.encode()).digest()
    return int.from_bytes(h[:8], "little") / 2.0**64


def unit_uniform(stream: str, index: int | None, fallback: str) -> float:
    """A uniform in [0, 1) per unit: the Weyl sequence frac(n·θ + β) of the stream over the
    synthetic set's unit index n (equidistributed, so the share below a dose on the set is the
    dose up to O(log N / N)); a SHA-256 hash of ``fallback`` for any other unit."""
    if index is not None:
        theta, beta = _WEYL[stream]
        return (index * theta + beta) % 1.0
    h = hashlib.sha256(f"{stream}|{fallback}".encode()).digest()
    return int.from_bytes(h[:8], "little") / 2.0**64



def rotation_strata(videos: Sequence[VideoPart], *, joint_keep: bool = False) -> Any:
    """Stratified uniforms for a dose's slot decisions over the cyclic orders of one group.

    The group is the set of its videos (content hashes) and the order's rotation index j is
    the slot of the video with the smallest hash. Slot p of rotation j gets

        u(p, j) = frac(V_p(group) + j/P)

    so over the P rotations a slot's uniforms are one per stratum [k/P, (k+1)/P): the number
    of dropped slots at p in a group is P·(1 − w_p) rounded up or down (expectation exact), not
    a binomial draw, and V_p is uniform from a hash per (group, slot), independent across slots
    (the DPB/MEG dose formulas average over independent B_p).

    Where only the marginals matter (the confusion draw, and the keep draw when every slot has
    the same w: a coverage or contamination dose), the group's P² (slot, rotation) cells are
    stratified jointly, u(p, j) = frac(V(group) + j/P + p/P²), one per stratum [k/P², (k+1)/P²),
    so the group's kept cells are P²·w rounded up or down; V(group) is then a Weyl value of the
    group's rank among the P-subsets of its configuration's clips (:func:`group_uniform`),
    so a set's groups spread it evenly (the set's share is the dose up to about one cell).
    None (plain per-request draws) when the videos are not P distinct clips."""
    keys = [p.frames.primary.key() for p in videos]
    P = len(keys)
    if P < 2 or len(set(keys)) != P:
        return None
    j = keys.index(min(keys))
    group = "|".join(sorted(keys))
    rank = group_rank([p.frames.primary.path for p in videos])

    def u(slot: int, what: str) -> float:
        if what == "confuse" or joint_keep:
            v = group_uniform(what, rank, f"dose-strata|{what}|{group}")
            return (v + j / P + slot / P**2) % 1.0
        h = hashlib.sha256(f"dose-strata|{what}|{group}|{slot}".encode()).digest()
        return (int.from_bytes(h[:8], "little") / 2.0**64 + j / P) % 1.0

    return u


def seeded_rng(*parts: Any) -> np.random.Generator:
    """A generator seeded by the first 8 bytes of SHA-256 of ``"|".join(map(str, parts))``: the
    same parts always give the same stream, and no global generator is touched."""
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))
