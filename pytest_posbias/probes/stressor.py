"""The temporal-stressor probe: output repetition under clean and stressed frames (VideoSTF).

Protocol (VideoSTF §4): the prompt "Please describe this video in detail.", greedy decoding,
500 new tokens, frames sampled with ``np.linspace(0, T−1, n, dtype=int)`` (the ``videostf``
preset); repetition is counted on the text (:mod:`~..metrics`: RR with n = 5, τ = 1; RI and IE
with n = 1; severity; information density). Per video: the clean output; the eight stressors'
variants (:data:`~..video.stressors.STRESSORS`: Delete 1 exhaustive, Reverse once, the others
``trials`` seeded trials), from which amplification and the black-box attack replay are read
(:class:`~.stressor_results.StressorResult`; every variant is generated once and shared by both);
the controls (count-matched re-sample, blur / noise / JPEG q10 / cutout / another video's frames
on 2 frames, 2× speed) and visual-input controls (text only, black, noise, one repeated frame,
1–32 genuine frames). Apart: the decoding sweep and the re-query remedy (cascade Shuffle →
Reverse → 2× speed → Delete 2 on flagged outputs).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import numpy as np

from ..data.manifest import Manifest, VideoItem
from ..engine import Decoding, Generation, Request
from ..errors import PosbiasError
from ..scoring import usable
from ..video import stressors as ST
from ..video.compose import TextPart, VideoPart
from ..video.frames import FrameSpec
from ..video.sampling import frame_indices
from .stressor_results import StressorResult, StressorSpec, TextStats, ie_of, merge_parts, repeats, ri_of
from .thumbnails import video_thumbnails

__all__ = [  # the probe's entry points, and the result types callers reach through this module
    "CLEAN_PART", "CONTROLS_PART", "DECODING_SWEEP", "PARTS", "StressorResult", "StressorSpec", "TextStats",
    "accept_description", "decoding_sweep", "measured_output", "merge_parts", "remedy", "repeats", "run_stressor",
    "select_videos",
]

if TYPE_CHECKING:
    from ..gate_context import ProbeContext

PROMPT = "Please describe this video in detail."
CONTROL_NAMES = ("resample+2", "resample-2", "blur", "noise", "jpeg", "cutout", "foreign", "speed2")
INPUT_CONTROLS = ("text-only", "black", "noise-frames", "static", "genuine-1", "genuine-2", "genuine-4", "genuine-8",
                  "genuine-16", "genuine-24", "genuine-32")
REMEDY_CASCADE = ("shuffle", "reverse", "speed2", "delete2")
UNCHANGED, NO_FOREIGN = "stressed_input_unchanged", "no_other_video"  # a stress that is none: a lost unit
_NO_STRESS = {UNCHANGED: "the stressed frames are the clean frames (same video, frame indices and pixels)",
              NO_FOREIGN: "no other video to take foreign frames from (every item of the set shows this clip)"}


class DecodingChange(TypedDict, total=False):
    """The decoding parameters a setting of the sweep changes (the others stay at the probe's)."""

    temperature: float
    top_p: float
    top_k: int
    repetition_penalty: float


DECODING_SWEEP: dict[str, DecodingChange] = {
    "greedy": {},
    "T0.7-p0.9": {"temperature": 0.7, "top_p": 0.9},
    "T0.7-k50": {"temperature": 0.7, "top_k": 50},
    "r1.1": {"repetition_penalty": 1.1},
    "r1.2": {"repetition_penalty": 1.2},
    "r1.3": {"repetition_penalty": 1.3},
}


def _fs(r: ST.StressResult) -> FrameSpec:
    """The stressed frames as a spec (the probe always stresses specs, never pixel arrays)."""
    if not isinstance(r.frames, FrameSpec):
        raise TypeError("stressor probe expects FrameSpec results")
    return r.frames


def _clean_spec(ctx: ProbeContext, item: VideoItem, count: int, spec: StressorSpec) -> FrameSpec:
    info = ctx.store.info(item.path)
    return ctx.store.clip(item.path, frame_indices(info.frame_count, count, convention="videostf"),
                          size=spec.resolution)


def _request(model: str, frames: FrameSpec | None, spec: StressorSpec, meta: dict[str, Any],
             **decoding: Unpack[DecodingChange]) -> Request:
    parts: tuple[Any, ...] = (TextPart(PROMPT),) if frames is None else (VideoPart(frames), TextPart(PROMPT))
    return Request(model, parts, Decoding(max_new_tokens=spec.max_new_tokens, **decoding),
                   seed=int(meta.get("seed", 0)), meta={"probe": "stressor", **meta})


def _no_stress(name: str, clean: FrameSpec, stressed: FrameSpec | None, foreign: FrameSpec) -> str | None:
    """Why a stressor variant or temporal control is no stress (None when it is one): its frames (source
    video, frame index, pixel operations) are the clean input's, or it shows "another video" that is the
    clean one (every item of the set shows the clip). The model would answer the clean input
    again and the unit would read as robust, so it is a lost unit and never sent."""
    if name == "foreign" and foreign.primary.key() == clean.primary.key():
        return NO_FOREIGN
    def seen(f: FrameSpec) -> tuple[Any, ...]:
        return tuple((f.sources[s].key(), i) for s, i in f.frames), f.ops
    return UNCHANGED if stressed is not None and seen(stressed) == seen(clean) else None


def select_videos(ctx: ProbeContext, manifest: Manifest, n: int) -> list[VideoItem]:
    """The first n videos of a seeded random order of the manifest's videos (a prefix, so a
    sequential gate that draws more videos extends the sample it already has)."""
    pool = sorted(manifest.videos)
    return [manifest.videos[pool[int(i)]] for i in ctx.rng("stressor-videos").permutation(len(pool))[:n]]


def measured_output(g: Generation, prompt: str = PROMPT) -> bool:
    """A description is measured when the call succeeded and the text is a usable description of
    ``prompt``'s request (:func:`~..scoring.usable.description_reason`: at least 3 words, at least
    half of the tokens words, not an echo of the prompt): an empty, punctuation-only or echoed answer
    is a lost unit (docs/design.md section 8), never a clean, non-repeating output."""
    return bool(g.ok) and usable.description_reason(g.text, prompt) is None


def accept_description(req: Request, gen: Generation) -> str | None:
    """The engine's ``accept`` rule for a description request: None when usable, else the reason
    (an echo of the request's own prompt included)."""
    return usable.generation_text_reason(gen, req.prompt_text)


def _stats(answers: Sequence[tuple[Generation, str | None]]) -> TextStats:
    """One condition's outputs from (generation, why it is unusable or None) pairs."""
    return TextStats([g.text if g.ok else "" for g, _w in answers], [g.finish_reason for g, _w in answers],
                     [bool(g.ok) and w is None for g, w in answers], [w for _g, w in answers])


def _reasons(ctx: ProbeContext, reqs: Sequence[Request], gens: Sequence[Generation], inputs: Sequence[Hashable | None],
             *, context: Sequence[tuple[str, Hashable]] = ()) -> list[str | None]:
    """Per request: why its description is unusable (None when it is usable). ``inputs[j]`` is the
    video request j shows (None: left out of the constant-answer rule, e.g. a control whose frames
    are the same for every video); answers flagged by :func:`~..scoring.usable.constant_text` are
    lost as ``constant_answer`` and withdrawn from the cache (:meth:`~..engine.Engine.reject`).
    ``context``: (text, video) of measured answers the rule weighs but never flags here (the clean
    outputs behind a stressor's variants, decided by the clean part)."""
    why = [accept_description(r, g) for r, g in zip(reqs, gens, strict=True)]
    pick = [j for j, i in enumerate(inputs) if i is not None]
    flags = usable.constant_text([gens[j].text if gens[j].ok and why[j] is None else None for j in pick]
                                 + [t for t, _v in context], [inputs[j] for j in pick] + [v for _t, v in context])
    for j, f in zip(pick, flags[: len(pick)], strict=True):
        if f:
            why[j] = usable.CONSTANT
    ctx.engine.reject(list(reqs), [w if w == usable.CONSTANT else None for w in why], probe="stressor")
    return why


CLEAN_PART = "clean"
CONTROLS_PART = "controls"
PARTS = (CLEAN_PART, CONTROLS_PART, *ST.STRESSORS)  # the probe's parts: each is computed once, by one test group


def run_stressor(ctx: ProbeContext, model: str, spec: StressorSpec, manifest: Manifest, *,
                 stressors: Sequence[str] = ST.STRESSORS, controls: bool = True, n_videos: int | None = None,
                 clean: StressorResult | None = None, part: str | None = None) -> StressorResult:
    """Clean outputs, the given stressors' variants (and the controls) for the selected videos.

    With ``clean`` (the clean part: the clean outputs of every video, :data:`CLEAN_PART`) the
    clean outputs are read from it instead of asked for, so the parts of the probe (the clean
    outputs, the controls, each stressor's variants) can be computed apart and on different
    workers with the clean outputs made once; a video the clean part could not use is not used
    here either. ``part`` names the part in the logged summary."""
    before = ctx.engine.stats.snapshot()
    videos = select_videos(ctx, manifest, min(spec.videos, n_videos or spec.videos))
    res = StressorResult(model, spec, [], TextStats([], []), planned=len(videos))
    cleans: list[FrameSpec] = []
    at = {v: i for i, v in enumerate(clean.videos)} if clean is not None else {}
    for item in videos:
        if clean is not None and item.id not in at:  # the clean part could not use it
            res.problems.append(next((p for p in clean.problems if p.startswith(f"video {item.id}:")),
                                     f"video {item.id}: no clean output"))
            continue
        try:
            cleans.append(_clean_spec(ctx, item, spec.frames, spec))
            res.videos.append(item.id)
        except PosbiasError as exc:
            res.problems.append(f"video {item.id}: {exc}")
    kept = [manifest.videos[v] for v in res.videos]
    if clean is not None:
        res.clean = clean.clean.take([at[v] for v in res.videos])
        res.errors = sum(1 for f in res.clean.finish if f == "error")
    # plan every request, run them in one engine call
    plan: list[tuple[str, int]] = []
    reqs: list[Request] = []
    vacuous: dict[int, str] = {}  # request index -> why its input is no stress (:func:`_no_stress`)
    for v, (item, clean_frames) in enumerate(zip(kept, cleans, strict=True)):
        if clean is None:
            plan.append(("clean", v))
            reqs.append(_request(model, clean_frames, spec,
                                 {"video": item.id, "condition": "clean", "frames": spec.frames}))
        # the next item in the set showing another clip (an item of the same clip would be no foreign frames)
        foreign = next((f for f in cleans[v + 1:] + cleans[:v] if f.primary.key() != clean_frames.primary.key()),
                       clean_frames)
        for name in stressors:
            variants = ST.variants(clean_frames, name, rng=ctx.rng("variants", item.id, name, spec.frames),
                                   count=spec.trials, foreign=foreign)
            for k, var in enumerate(variants):
                if w := _no_stress(name, clean_frames, _fs(var), foreign):
                    vacuous[len(reqs)] = w
                plan.append((name, v))
                reqs.append(_request(model, _fs(var), spec, {"video": item.id, "condition": name, "variant": k,
                                                               "record": var.record}))
        if controls:
            for name, frames in _controls(ctx, item, clean_frames, foreign, spec):
                if name in CONTROL_NAMES and (w := _no_stress(name, clean_frames, frames, foreign)):
                    vacuous[len(reqs)] = w
                plan.append((name, v))
                reqs.append(_request(model, frames, spec, {"video": item.id, "condition": name}))
    sent = iter(ctx.engine.run([r for j, r in enumerate(reqs) if j not in vacuous], probe="stressor",
                               accept=accept_description))
    gens = [Generation(attempts=0) if j in vacuous else next(sent) for j in range(len(reqs))]
    # the clean and stressed frames of one video are one input of the constant-answer rule
    context = [(t, v) for v, (t, ok) in enumerate(zip(res.clean.texts, res.clean.ok, strict=True)) if ok]
    why = _reasons(ctx, reqs, gens, [v if name == "clean" or name in stressors else None for name, v in plan],
                   context=context)
    for j, w in vacuous.items():
        why[j] = w
        name, v = plan[j]
        res.problems.append(f"video {kept[v].id}: {name}: {_NO_STRESS[w]}, a lost unit")
    res.problems = list(dict.fromkeys(res.problems))  # one line per video, condition and reason
    per: dict[str, list[list[tuple[Generation, str | None]]]] = {}  # condition -> per video: (answer, why unusable)
    for (name, v), g, w in zip(plan, gens, why, strict=True):
        res.errors += int(not g.ok)
        per.setdefault(name, [[] for _ in kept])[v].append((g, w))
    if clean is None:
        res.clean = _stats([answers[0] for answers in per.get("clean", [])])
    for name in stressors:
        res.variants[name] = [_stats(answers) for answers in per.get(name, [[] for _ in kept])]
    res.controls.update({name: _stats([a for answers in per[name] for a in answers])
                         for name in [*CONTROL_NAMES, *INPUT_CONTROLS] if name in per})
    res.calls = ctx.engine.stats.since(before)
    if reqs:  # a slice of the clean part asks nothing and logs nothing
        _log(ctx, res, part, examples=clean is None)
    return res


def _controls(ctx: ProbeContext, item: VideoItem, clean: FrameSpec, foreign: FrameSpec,
              spec: StressorSpec) -> list[tuple[str, FrameSpec | None]]:
    T = len(clean)
    rng = ctx.rng("controls", item.id, spec.frames)
    positions = sorted(int(x) for x in rng.choice(T, size=min(2, T), replace=False))
    out: list[tuple[str, FrameSpec | None]] = [
        ("resample+2", _fs(ST.resample(clean, T + 2, convention="videostf"))),
        ("resample-2", _fs(ST.resample(clean, max(1, T - 2), convention="videostf")) if T > 2 else clean),
        ("blur", _fs(ST.blur(clean, positions))),
        ("noise", _fs(ST.noise(clean, positions, rng=rng))),
        ("jpeg", _fs(ST.jpeg(clean, positions, quality=10))),
        ("cutout", _fs(ST.cutout(clean, positions, rng=rng))),
        ("foreign", _fs(ST.replace_foreign(clean, foreign, len(positions), rng=rng, positions=positions))),
        ("speed2", _fs(ST.speed(clean, 2, convention="videostf"))),
        ("text-only", None),
        ("black", FrameSpec.synthetic("black", T, size=spec.resolution)),
        ("noise-frames", FrameSpec.synthetic("noise", T, size=spec.resolution, seed=int(rng.integers(1 << 30)))),
        ("static", clean.with_frames([clean.frames[T // 2]] * T, record={"stressor": "static", "frame": T // 2})),
    ]
    info = ctx.store.info(item.path)
    for c in (c for c in (1, 2, 4, 8, 16, 24, 32) if c <= info.frame_count):  # never padded with repeats
        idx = frame_indices(info.frame_count, c, convention="videostf")
        out.append((f"genuine-{c}", FrameSpec.from_video(item.path, idx, size=spec.resolution, info=info)))
    return out


def remedy(ctx: ProbeContext, model: str, res: StressorResult, manifest: Manifest) -> dict[str, Any]:
    """Re-query flagged clean outputs with alternative temporal views, in cascade order."""
    flagged = [v for v, f in enumerate(res.clean.flags) if f]
    queries: list[int] = []
    by_view = dict.fromkeys(REMEDY_CASCADE, 0)
    for v in flagged:
        item = manifest.videos[res.videos[v]]
        clean = _clean_spec(ctx, item, res.spec.frames, res.spec)
        rng = ctx.rng("remedy", item.id)
        views = {"shuffle": _fs(ST.shuffle(clean, rng=rng)), "reverse": _fs(ST.reverse(clean)),
                 "speed2": _fs(ST.speed(clean, 2, convention="videostf")), "delete2": _fs(ST.delete(clean, 2, rng=rng))}
        for q, name in enumerate(REMEDY_CASCADE, start=1):
            g = ctx.engine.run([_request(model, views[name], res.spec,
                                         {"video": item.id, "condition": f"remedy:{name}"})],
                               probe="stressor", accept=accept_description)[0]
            if measured_output(g) and not repeats(g.text):
                queries.append(q)
                by_view[name] += 1
                break
        else:
            queries.append(len(REMEDY_CASCADE))
    recovered = sum(by_view.values())
    out = {"flagged": len(flagged), "recovered": recovered,
           "recovery_rate": recovered / len(flagged) if flagged else float("nan"),
           "mean_queries": float(np.mean(queries)) if queries else float("nan"), "recovered_by_view": by_view}
    ctx.observe("stressor", {"type": "remedy", "model": model, **out})
    return out


def decoding_sweep(ctx: ProbeContext, model: str, spec: StressorSpec, manifest: Manifest, setting: str) -> TextStats:
    """Clean outputs under one decoding setting of the VideoSTF sweep (seeded when sampling); a video
    that cannot be used is a failed output naming it (planned and lost), and one description given
    to distinct videos is lost as ``constant_answer``, as in the probe's clean part."""
    kw = DECODING_SWEEP[setting]
    reqs = []
    lost: list[tuple[Generation, str | None]] = []
    for item in select_videos(ctx, manifest, spec.videos):
        try:
            clean = _clean_spec(ctx, item, spec.frames, spec)
        except PosbiasError as exc:
            lost.append((Generation(finish_reason="error", error=f"video {item.id}: {exc}", attempts=0), None))
            continue
        seed = int(ctx.rng("decoding", item.id, setting).integers(1 << 30))
        reqs.append(_request(model, clean, spec, {"video": item.id, "condition": f"decoding:{setting}", "seed": seed},
                             **kw))
    gens = ctx.engine.run(reqs, probe="stressor", accept=accept_description)
    why = _reasons(ctx, reqs, gens, [r.meta["video"] for r in reqs])  # the probe's rules, a constant answer included
    stats = _stats([*zip(gens, why, strict=True), *lost])
    ctx.observe("stressor", {"type": "decoding", "model": model, "setting": setting, **stats.summary()})
    return stats


def _log(ctx: ProbeContext, res: StressorResult, part: str | None = None, *, examples: bool = True) -> None:
    """The probe's summary record (one per part when computed in parts: ``part`` names it, and the
    report joins the parts) and, with ``examples``, the worst clean outputs."""
    measured = {n: [s.measured() for s in sts] for n, sts in res.variants.items()}
    pooled = {n: TextStats([t for m in ms for t in m.texts], [f for m in ms for f in m.finish])
              for n, ms in measured.items()}
    clean = res.clean.summary()

    def per_video_mean(metric: Callable[[str], float], ms: Sequence[TextStats]) -> float | None:
        """The mean over videos (with a measured output) of the video's mean ``metric``."""
        means = [float(np.mean([metric(t) for t in m.texts])) for m in ms if m.texts]
        return float(np.mean(means)) if means else None

    def stressor_summary(n: str, sts: Sequence[TextStats]) -> dict[str, Any]:
        rates = [s.flags[s.valid].mean() for s in sts if s.valid.any()]
        amp = res.amplification(n)
        return {"rr": float(np.mean(rates)) if rates else None, "failed": int(sum(s.failed for s in sts)),
                "amplification": np.nanmean(amp).item() if amp.size and not np.isnan(amp).all() else None,
                "ri": per_video_mean(ri_of, measured[n]), "ie": per_video_mean(ie_of, measured[n]),
                "attack": {k: v for k, v in res.attack(n).items() if k != "queries"}}

    texts = {"clean": res.clean.measured().texts, **{n: p.texts for n, p in pooled.items()}}
    ctx.observe("stressor", {"type": "summary", "model": res.model, "settings": asdict(res.spec), "videos": res.videos,
                             **({"part": part} if part else {}),
                             "clean": clean, "clean_flags": res.clean.flags.tolist(),
                             "clean_valid": res.clean.valid.tolist(),  # a lost output's flag reads 0: not clean
                             "stressors": {n: stressor_summary(n, sts) for n, sts in res.variants.items()},
                             "controls": {n: s.summary() for n, s in res.controls.items()},
                             "ri_values": {n: [ri_of(t) for t in ts] for n, ts in texts.items()},
                             "ie_values": {n: [ie_of(t) for t in ts] for n, ts in texts.items()},
                             "severity": {"clean": clean.get("severity", {}),
                                          **{n: p.summary().get("severity", {}) for n, p in pooled.items()}},
                             "errors": res.errors, "problems": res.problems, "calls": res.calls})
    if not examples:
        return
    worst = [v for v, f in enumerate(res.clean.flags) if f][:2]
    for v in worst:
        ctx.observe("stressor", {"type": "example", "model": res.model, "video": res.videos[v], "condition": "clean",
                                 "text": res.clean.texts[v], "finish": res.clean.finish[v],
                                 "thumbnails": video_thumbnails(ctx, res.videos[v], (0.125, 0.375, 0.625, 0.875))})
