"""The positional probe: P = 2 or 4 videos in one prompt, cyclic orders, per-slot coverage.

Follows the multi-video paper (§3.1–3.3, appendix A.1): each group of P videos is shown in every
cyclic order (full permutations as an option), task prompt first, ``Video k: N uniformly sampled
frames`` labels, black-frame (or text-label) boundaries, 16 frames per short video and 24 per long
one at 448×448, temperature 0.9, top-p 1.0, seeded per instance. Each answer is aligned to
per-slot summaries ([videoK] markers, fallback assignment), each slot scored against its video's
references by the judge; an instance's row of the coverage matrix is the coverage at slots 1..P,
clustered by group for the bootstrap.

Failure modes are counted per slot and never crash the run: marker failures, placeholder or empty
slots are scored 0 (appendix C.1) when the rest of the answer aligns. Lost instances
(:data:`LOST_CAUSES`) are never scored; ``planned`` and ``lost`` state them for the gates'
measurement floor (:mod:`~pytest_posbias.gates.measurement`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.manifest import GroupItem, Manifest
from ..engine import Decoding, Generation, Request
from ..errors import PosbiasError
from ..metrics import cyclic_orders, full_orders
from ..scoring import usable
from ..scoring.alignment import SLOT_FALLBACK, SLOT_MISSING, Alignment, align, find_markers, is_placeholder
from ..scoring.judges import JudgeSet
from ..scoring.slots import allocation, leakage_candidates, slot_similarity, target_check
from ..video.compose import VideoPart, compose, single_target_prompt, summary_prompt
from ..video.sampling import frame_indices
from .settings import DEFAULTS, spec_kwargs
from .thumbnails import video_thumbnails

if TYPE_CHECKING:
    from ..gate_context import ProbeContext

# requested sentences per video: (News style, ActivityNet style) — paper §4.3
BUDGET_SENTENCES = {"short": (1, 2), "base": (2, 4), "long": (3, 6)}
# answers that are not usable summaries (``scoring/usable.py``)
UNUSABLE = (usable.CUT_OFF, usable.EMPTY, usable.FEW_WORDS, usable.NOT_WORDS, usable.PROMPT_ECHO, usable.ONE_SLOT,
            usable.CONSTANT)
FAILURE_MODES = ("marker_failure", "fallback", "placeholder", "empty", "generation_error", "judge_failure",
                 "unalignable", *UNUSABLE)
# causes that make an instance a lost unit: a failed call or judge, an answer with nothing to align,
# a group whose videos cannot be read, an unusable summary
LOST_CAUSES = ("generation_error", "judge_failure", "unalignable", "unusable_data", *UNUSABLE)


_DEFAULTS = DEFAULTS["positional"]  # the one source of the probe's defaults (probes/settings.py)


@dataclass(frozen=True)
class PositionalSpec:
    """One positional configuration (a test's parameters); the defaults are the probe settings'
    (:data:`~.settings.DEFAULTS`), the multi-video paper's main setting."""

    domain: str
    bucket: str
    P: int
    boundary: str = _DEFAULTS["boundary"]
    placement: str = _DEFAULTS["placement"]
    budget: str = _DEFAULTS["budget"]
    equal_attention: bool = False
    single_target: bool = False
    label_base: int = _DEFAULTS["label_base"]
    frames: int | None = None  # default: the settings' frames_short or frames_long, by bucket
    resolution: int = _DEFAULTS["resolution"]
    orders: str = _DEFAULTS["orders"]
    groups: int = _DEFAULTS["groups"]
    temperature: float = _DEFAULTS["temperature"]
    top_p: float = _DEFAULTS["top_p"]
    max_new_tokens: int = _DEFAULTS["max_new_tokens"]
    sampler: str = "endpoint"

    @property
    def n_frames(self) -> int:
        return self.frames or int(_DEFAULTS["frames_long"] if self.bucket == "long" else _DEFAULTS["frames_short"])

    def variant(self) -> str:
        """Short name of what differs from the paper's main setting."""
        d = _DEFAULTS
        parts = [("text-boundary", self.boundary != d["boundary"]), ("video-first", self.placement != d["placement"]),
                 (f"budget-{self.budget}", self.budget != d["budget"]), ("equal-attention", self.equal_attention),
                 (f"single-target-{'one' if self.label_base else 'zero'}-indexed", self.single_target),
                 ("one-indexed", bool(self.label_base) and not self.single_target),
                 (f"{self.frames}f", self.frames is not None),
                 (f"{self.resolution}px", self.resolution != d["resolution"]),
                 ("full-permutations", self.orders != d["orders"])]
        return "+".join(name for name, differs in parts if differs) or "main"

    def label(self) -> str:
        v = self.variant()
        return f"{self.domain}-{self.bucket}-P{self.P}" + ("" if v == "main" else f"[{v}]")

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass
class PositionalResult:
    spec: PositionalSpec
    model: str
    coverage: np.ndarray  # (N, P), rows = instances, columns = slots 1..P
    clusters: np.ndarray  # (N,) group index of each row
    instances: list[dict[str, Any]]
    failures: dict[str, list[int]]  # failure mode -> count per slot
    excluded: int
    contamination: np.ndarray  # (N, P) bool
    allocation: dict[str, list[float]]
    leakage: list[dict[str, Any]]
    target: dict[str, list[float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    calls: dict[str, Any] = field(default_factory=dict)
    planned: int = 0  # instances planned: groups drawn × orders
    lost: dict[str, int] = field(default_factory=dict)  # lost instances by cause (LOST_CAUSES)
    groups_planned: int = 0

    @property
    def n_groups(self) -> int:
        return int(np.unique(self.clusters).size) if self.clusters.size else 0


def summary_text(text: str) -> str:
    """The answer without its ``[videoK]`` slot markers (a marker is not a word of the summary)."""
    bounds = [0, *(i for _label, start, end in find_markers(text) for i in (start, end)), len(text)]
    return " ".join(text[a:b] for a, b in zip(bounds[::2], bounds[1::2], strict=True))


def placeholder_only(text: str) -> bool:
    """Whether an answer keeps the slot format but fills every slot with template filler (``[video0]
    ... [video1] ...``): a placeholder output, scored zero coverage in every slot (docs/design.md section
    8; appendix C.1), so neither the word rule nor the constant rule makes it a lost unit (it cannot
    pass a gate: DPB and MEG lose a row with no slot covered, coverage counts it as 0)."""
    marks = find_markers(text)
    if not marks or text[: marks[0][1]].strip():
        return False
    ends = [m[1] for m in marks[1:]] + [len(text)]
    return all(is_placeholder(text[m[2]:stop]) for m, stop in zip(marks, ends, strict=True))


def accept_summary(req: Request, gen: Generation) -> str | None:
    """The engine's ``accept`` rule for a summary request: ``answer_cut_off`` for no answer within the token
    limit (:func:`~..scoring.usable.cut_off_reason`), else :func:`~..scoring.usable.description_reason`
    of the answer without its slot markers under the request's prompt (its text parts, the format's
    markers dropped alike), so an answer that only repeats the instruction is ``prompt_echo`` (None
    when usable, or a placeholder output: :func:`placeholder_only`; a failed call is not judged here)."""
    if not gen.ok or placeholder_only(gen.text):
        return None
    text = summary_text(gen.text)
    return (usable.cut_off_reason(gen) or usable.text_reason(text)
            or usable.echo_reason(text, summary_text(req.prompt_text)))


def addressed_slots(al: Alignment) -> int:
    """Slots an answer addresses: with markers, the slots it has a marker for (a placeholder after its
    marker counts: it answered that slot); without markers, the slots the fallback gave a sentence."""
    if al.mode == "markers":
        return sum(1 for st in al.status if st != SLOT_MISSING)
    return sum(1 for st in al.status if st == SLOT_FALLBACK)


def _alignment(text: str, target: int | None, refs: list[list[str]], why: str | None, spec: PositionalSpec,
               embed_sim: Callable[[Sequence[str], Sequence[str]], np.ndarray] | None
               ) -> tuple[Alignment | None, str | None]:
    """A succeeded answer's slot alignment, or None and the cause that makes its instance lost
    (``why``, the answer's unusable reason, when given)."""
    if why is not None:
        return None, why
    try:
        al = align(text, spec.P, label_base=spec.label_base, references=refs, similarity=embed_sim)
    except PosbiasError:
        al = align(text, spec.P, label_base=spec.label_base, references=refs)
    if al.mode == "empty" or all(st == "marker_failure" for st in al.status):
        return None, "unalignable"  # nothing to score: an empty answer, or no marker and no sentence to assign
    if target is None:
        one_slot = usable.slots_reason(addressed_slots(al), spec.P)
        return (None, one_slot) if one_slot is not None else (al, None)
    if al.mode == "fallback":  # single-target: an unmarked answer is the target's summary as a whole
        al = Alignment(tuple(text.strip() if k == target else "" for k in range(spec.P)),
                       tuple(SLOT_FALLBACK if k == target else "marker_failure" for k in range(spec.P)), "fallback")
    return al, None


def _orders(spec: PositionalSpec) -> list[tuple[int, ...]]:
    return cyclic_orders(spec.P) if spec.orders == "cyclic" else full_orders(spec.P)


def video_parts(ctx: ProbeContext, spec: PositionalSpec, manifest: Manifest, videos: Sequence[str]
                ) -> dict[str, VideoPart]:
    """Each video's sampled frames as a prompt part: ``spec.n_frames`` by ``spec.sampler``."""
    parts = {}
    for vid in videos:
        item = manifest.videos[vid]
        info = ctx.store.info(item.path)
        idx = frame_indices(info.frame_count, spec.n_frames, convention=spec.sampler, fps=info.fps)
        parts[vid] = VideoPart(ctx.store.clip(item.path, idx, size=spec.resolution), video_id=vid)
    return parts


def build_requests(ctx: ProbeContext, model: str, spec: PositionalSpec, groups: Sequence[GroupItem], manifest: Manifest
                   ) -> tuple[list[Request], list[dict[str, Any]], list[str]]:
    """One request per (group, order[, target]); the meta says which video sits where. A group whose
    videos cannot be read is skipped and named in the returned problems (its instances are lost)."""
    news_n, anet_n = BUDGET_SENTENCES[spec.budget]
    reqs: list[Request] = []
    plan: list[dict[str, Any]] = []
    problems: list[str] = []
    for gi, g in enumerate(groups):
        try:
            parts_by_video = video_parts(ctx, spec, manifest, g.videos)
        except PosbiasError as exc:
            problems.append(f"group {g.id}: {exc}")
            continue
        news = all(manifest.videos[v].reference_style == "news" for v in g.videos)
        sentences = news_n if news else anet_n
        for oi, order in enumerate(_orders(spec)):
            videos = [parts_by_video[g.videos[k]] for k in order]
            for t in range(spec.P) if spec.single_target else [None]:
                if t is None:
                    prompt = summary_prompt(spec.P, sentences=sentences, boundary=spec.boundary, news=news,
                                            label_base=spec.label_base, equal_attention=spec.equal_attention)
                else:
                    prompt = single_target_prompt(spec.P, t, sentences=sentences, boundary=spec.boundary, news=news,
                                                  label_base=spec.label_base)
                parts = compose(videos, prompt=prompt, boundary=spec.boundary, placement=spec.placement,
                                label_base=spec.label_base)
                seed = int(ctx.rng("positional-seed", g.id, oi, t).integers(0, 2**31 - 1))
                meta = {"probe": "positional", "spec": spec.label(), "group": g.id, "order": list(order), "target": t,
                        "videos": [g.videos[k] for k in order]}
                reqs.append(Request(model, tuple(parts), Decoding(spec.max_new_tokens, spec.temperature, spec.top_p),
                                    seed=seed, meta=meta))
                plan.append({"group_index": gi, "group": g.id, "order": list(order), "target": t,
                             "videos": [g.videos[k] for k in order], "sentences": sentences, "news": news})
    return reqs, plan, problems


def run_positional(ctx: ProbeContext, model: str, spec: PositionalSpec, manifest: Manifest, judges: JudgeSet,
                   n_groups: int | None = None) -> PositionalResult:
    """Run the probe for one model and configuration and score it (the first ``n_groups`` of the
    configuration's groups, at most ``spec.groups``: a sequential gate grows this prefix)."""
    before = ctx.engine.stats.snapshot()
    groups = manifest.groups_for(spec.domain, spec.bucket, spec.P)[: min(spec.groups, n_groups or spec.groups)]
    reqs, plan, problems = build_requests(ctx, model, spec, groups, manifest)
    problems = [str(p) for p in manifest.problems] + problems
    gens = ctx.engine.run(reqs, probe="positional", accept=accept_summary)
    P = spec.P
    embed_sim = judges.embedder.similarity if judges.spec in ("embed", "auto") else None
    why: list[str | None] = [accept_summary(r, g) for r, g in zip(reqs, gens, strict=True)]
    # the same summary to distinct groups: a model that does not look at the videos
    flags = usable.constant_text([g.text if g.ok and w is None and not placeholder_only(g.text) else None
                                  for g, w in zip(gens, why, strict=True)], [pl["group"] for pl in plan])
    why = [usable.CONSTANT if f else w for f, w in zip(flags, why, strict=True)]

    # align every answer, collect the slot texts to judge
    slot_rows: list[dict[str, Any]] = []
    for j, (pl, gen) in enumerate(zip(plan, gens, strict=True)):
        refs = [list(manifest.videos[v].references) for v in pl["videos"]]
        al, cause = (None, None) if not gen.ok else _alignment(gen.text, pl["target"], refs, why[j], spec, embed_sim)
        why[j] = cause or why[j]
        slots = [pl["target"]] if pl["target"] is not None else list(range(P))  # the slots this answer fills
        slot_rows.append({"plan": pl, "gen": gen, "alignment": al, "refs": refs, "slots": slots,
                          **({"cause": cause} if cause else {})})

    # answers found unusable only now (one slot addressed, a constant answer) leave the cache
    ctx.engine.reject(reqs, [w if w in (usable.ONE_SLOT, usable.CONSTANT) else None for w in why], probe="positional")

    # judge all scoreable slots, one batch per reference style
    to_judge: dict[str, list[tuple[tuple[int, int], tuple[list[str], str]]]] = {}
    for ri, row in enumerate(slot_rows):
        for k in row["slots"] if row["alignment"] is not None else ():
            if row["alignment"].scoreable(k):
                style = manifest.videos[row["plan"]["videos"][k]].reference_style
                to_judge.setdefault(style, []).append(((ri, k), (row["refs"][k], row["alignment"].summaries[k])))
    scores: dict[tuple[int, int], Any] = {}
    for style, batch in to_judge.items():
        scores.update(zip([at for at, _ in batch], judges.for_style(style).score([it for _, it in batch]), strict=True))

    failures = {m: [0] * P for m in FAILURE_MODES}
    # assemble instance rows: joint generation -> one row per answer; single-target -> one row per (group, order)
    rows: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = {}
    for ri, row in enumerate(slot_rows):
        pl, gen, al = row["plan"], row["gen"], row["alignment"]
        key = (pl["group"], tuple(pl["order"]))
        inst = rows.setdefault(key, {"group": pl["group"], "group_index": pl["group_index"], "order": pl["order"],
                                     "videos": pl["videos"], "slots": [None] * P, "valid": True, "text": []})
        inst["text"].append(gen.text if gen.ok else f"<error: {gen.error}>")
        for k in row["slots"]:
            slot: dict[str, Any] = {"video": pl["videos"][k], "references": row["refs"][k],
                                    "requested": pl["sentences"]}
            if al is None:
                cause = row.get("cause", "generation_error")
                failures[cause][k] += 1
                slot.update(status=cause, summary="", coverage=None)
                inst["valid"] = False
                inst["lost"] = cause
            else:
                status = al.status[k]
                slot.update(status=status, summary=al.summaries[k])
                if status in ("marker_failure", "fallback", "placeholder", "empty"):
                    failures[status][k] += 1
                judged = scores.get((ri, k))
                if judged is None:
                    slot.update(coverage=0.0, judge=None)  # marker failure / placeholder / empty: zero coverage
                elif judged.value is None:
                    failures["judge_failure"][k] += 1
                    slot.update(coverage=None, judge=judged.judge, judge_error=judged.error)
                    inst["valid"] = False
                    inst.setdefault("lost", "judge_failure")
                else:
                    slot.update(coverage=judged.value, judge=judged.judge, covered=judged.covered,
                                reasons=judged.reasons)
                summary = al.summaries[k]
                a = allocation(summary, pl["sentences"])
                slot.update(words=a.words, sentences=a.sentences, over=a.over, exact=a.exact)
                group_refs = [" ".join(r) for r in row["refs"]]
                slot["contaminated"] = bool(summary) and bool(slot_similarity(summary, group_refs, k).contaminated)
                slot["leaks"] = [asdict(c) for c in leakage_candidates(summary, group_refs, k)] if summary else []
                if pl["target"] is not None:  # an aligned answer is a succeeded call
                    tc = target_check(gen.text, group_refs, k)
                    slot.update(target_hit=bool(tc.hit), margin_confusion=bool(tc.margin_confusion))
            inst["slots"][k] = slot

    instances = [inst for inst in rows.values() if all(s is not None for s in inst["slots"])]
    valid = [inst for inst in instances if inst["valid"]]
    excluded = len(instances) - len(valid)
    cov = np.array([[s["coverage"] for s in inst["slots"]] for inst in valid], dtype=float).reshape(-1, P)
    clusters = np.array([inst["group_index"] for inst in valid], dtype=int)
    contam = np.array([[bool(s.get("contaminated")) for s in inst["slots"]] for inst in valid],
                      dtype=bool).reshape(-1, P)

    def slot_means(key: str) -> list[float]:
        """Per slot: the mean of ``key`` (missing: 0) over the valid instances; NaN without any."""
        return [float(np.mean([inst["slots"][k].get(key) or 0 for inst in valid])) if valid else float("nan")
                for k in range(P)]

    alloc = {"words": slot_means("words"), "sentences": slot_means("sentences"), "over_rate": slot_means("over"),
             "exact_rate": slot_means("exact")}
    leaks = [dict(c, group=inst["group"], order=inst["order"]) for inst in valid for s in inst["slots"]
             for c in s.get("leaks", [])]
    target: dict[str, list[float]] = {}
    if spec.single_target and valid:
        target = {"hit_rate": slot_means("target_hit"), "margin_confusion_rate": slot_means("margin_confusion")}
    n_orders = len(_orders(spec))
    built = {pl["group"] for pl in plan}
    lost = dict.fromkeys(LOST_CAUSES, 0)
    lost["unusable_data"] = sum(n_orders for g in groups if g.id not in built)
    for inst in instances:
        if not inst["valid"]:
            lost[inst.get("lost", "generation_error")] += 1
    result = PositionalResult(spec, model, cov, clusters, instances, failures, excluded, contam, alloc, leaks, target,
                              problems, ctx.engine.stats.since(before), planned=len(groups) * n_orders, lost=lost,
                              groups_planned=len(groups))
    _log(ctx, result)
    return result


def _log(ctx: ProbeContext, r: PositionalResult) -> None:
    """Observations for the report: one per instance plus a summary; thumbnails for the worst."""
    def mean_coverage(i: int) -> float:
        vals = [s["coverage"] for s in r.instances[i]["slots"] if s["coverage"] is not None]
        return float(np.mean(vals)) if vals else math.inf  # lost instances are not "worst" examples

    worst = sorted(range(len(r.instances)), key=mean_coverage)[:2]
    config = {"model": r.model, "spec": r.spec.label(), "domain": r.spec.domain, "bucket": r.spec.bucket,
              "P": r.spec.P, "variant": r.spec.variant()}
    for i, inst in enumerate(r.instances):
        # a slot names its video's reference texts by id (one reference record per log), not a copy
        slots = [{**{k: v for k, v in s.items() if k != "references"},
                  "references_id": ctx.runlog.reference(s["references"])}
                 for s in inst["slots"]]
        rec = {"type": "instance", **config, **inst, "slots": slots}
        if i in worst:
            rec["thumbnails"] = [video_thumbnails(ctx, vid)[0] for vid in inst["videos"]]
        ctx.observe("positional", rec)
    ctx.observe("positional", {
        "type": "summary", **config, "settings": asdict(r.spec), "coverage": r.coverage.tolist(),
        "clusters": r.clusters.tolist(), "failures": r.failures, "excluded": r.excluded,
        "contamination": r.contamination.tolist(), "allocation": r.allocation, "target": r.target,
        "n_leak_candidates": len(r.leakage), "problems": r.problems, "calls": r.calls,
    })


def with_overrides(spec: PositionalSpec, settings: Mapping[str, Any]) -> PositionalSpec:
    """Apply ``[tool.posbias.probes.positional]`` settings to a spec."""
    kw = spec_kwargs("positional", PositionalSpec, settings)
    frames = f"frames_{spec.bucket}"  # the bucket's frame count; its default leaves ``frames`` unset
    if frames in settings and spec.frames is None:
        kw["frames"] = settings[frames] if settings[frames] != _DEFAULTS[frames] else None
    return replace(spec, **kw)


def positional_spec(settings: dict[str, Any], domain: str, bucket: str, P: int, **variant: object) -> PositionalSpec:
    """The spec of a configuration with ``[tool.posbias.probes.positional]`` settings applied, and
    any layout variant's fields (``video_first=True``, ...)."""
    fields: dict[str, Any] = dict(variant)  # the layout variant: PositionalSpec field name -> value
    return replace(with_overrides(PositionalSpec(domain, bucket, P), settings), **fields)
