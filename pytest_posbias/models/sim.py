"""Simulated video LLMs with known, injected biases (docs/design.md section 7).

The simulated model really looks at the frames it is given (``sim_vision``): it detects
the synthetic scene's objects, colours, motions and brief events from pixels and writes
summaries and answers from what it saw, so sampling, phase, stressors and composition
change its output for real. Profiles inject known effects on top (``t`` = temperature):

* ``unbiased``: keeps every perceived fact; at t > 0 drops each with probability 0.08·t in every
  slot alike; never loops;
* ``primacy``: keeps a fact in slot p with probability 1 − 0.7·(p − 1)/(P − 1): DPB < 0;
  ``recency`` the mirror image: DPB > 0;
* ``middle-weak``: keeps a fact in slots 2 and 3 of a four-video input with probability 0.35
  (MEG ≈ −0.4 to −0.55 on the ActivityNet-style domains, −0.1 on News); P = 2 unaffected;
* ``looping``: a description loops with probability min(0.95, 0.30 + 4·d), d the share of
  adjacent frame pairs with a jump the motion does not explain (0 on clean clips and under
  Delete and Reverse, ~0.08 under Add, ~0.10 Replace, ~0.55 Shuffle); 40% of loops run to the cap;
* ``letter-bias``: when unsure of a multiple-choice answer, adds 0.8·(K − 1 − k) to the logit of
  the k-th letter;
* ``dose,…``: ``sim:dose,GATE=VALUE[,…]`` produces a chosen population value of any gate's
  metric through the same pipeline (``sim_dose``); everything else is exactly ``unbiased``.

Any profile takes ``,latency=SECONDS`` (``sim:unbiased,latency=0.2``): a stand-in for a
GPU-bound model. A batch of ``B`` requests then takes ``B × SECONDS`` of wall time, slept for
what the simulation's own work has not used (a compute-bound GPU decodes a batch in about the
time of its items one after another). Outputs and cache keys are the profile's without it.

Every profile answers multiple-choice questions as ``sim_mcq`` says. Randomness comes from a hash
of the request (and its seed when sampling), never from a global generator, so a request always
gets the same output.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ..engine import Generation, Request
from ..errors import ConfigError
from ..video.compose import TextPart, VideoPart
from ..video.frames import FrameStore
from ..video.synthetic import DOMAINS, MOTION_PHRASE
from . import sim_dose, sim_draws, sim_mcq, sim_vision
from .sim_dose import Dose, is_dose, parse_dose, rescued, stressor_params, temporally_irregular, uses_rescue
from .sim_draws import rotation_strata, seeded_rng, set_strata, unit_index, unit_uniform
from .sim_mcq import OPTION_LINE, content_probs, dose_order, dose_shift, letter_logprobs, parse_mcq, perceived
from .sim_vision import FrameView, VideoView, facts, summarize, view_frame

PROFILES: dict[str, str] = {
    "unbiased": "describes every slot and answers from what it saw",
    "primacy": "drops detail in later slots",
    "recency": "drops detail in earlier slots",
    "middle-weak": "drops detail in middle slots",
    "looping": "enters n-gram loops, more often under temporal discontinuity",
    "letter-bias": "prefers early option letters when unsure",
    "dose,GATE=VALUE[,...]": "produces a chosen population value of the named gates' metrics (e.g. sim:dose,meg=-0.05)",
}
SIM_VERSION = 2
K = TypeVar("K")
V = TypeVar("V")


def split_latency(profile: str) -> tuple[str, float]:
    """``profile`` without its ``,latency=SECONDS`` part, and the seconds per request (0 without
    one). ConfigError names a latency that is not a finite number >= 0, or one given twice."""
    parts = profile.split(",")
    lat = [p for p in parts if p.startswith("latency=")]
    if not lat:
        return profile, 0.0
    if len(lat) > 1:
        raise ConfigError(f"sim:{profile}: `latency` given {len(lat)} times; give it once")
    raw = lat[0].removeprefix("latency=")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"sim:{profile}: `latency` must be a number of seconds >= 0; got {raw!r}")
    return ",".join(p for p in parts if not p.startswith("latency=")), seconds


def check_profile(profile: str) -> None:
    """Raise ConfigError unless ``profile`` (after ``sim:``) is a profile of ``PROFILES`` or a valid
    dose ``dose,GATE=VALUE[,...]`` (``sim_dose.parse_dose`` names the bad gate or value), either with
    an optional ``,latency=SECONDS`` (:func:`split_latency`)."""
    profile, _ = split_latency(profile)
    if is_dose(profile):
        parse_dose(profile)
    elif profile not in PROFILES:
        raise ConfigError(f"unknown sim profile {profile!r}; allowed: {', '.join('sim:' + p for p in PROFILES)}")


@functools.cache
def _code_digest() -> str:
    """Digest of the simulator's source modules: part of the revision, so the generation cache
    never serves outputs of an older simulator."""
    h = hashlib.sha256()
    for mod in (__file__, sim_vision.__file__, sim_dose.__file__, sim_draws.__file__, sim_mcq.__file__):
        h.update(Path(mod).read_bytes())
    return h.hexdigest()[:12]


# documented effect sizes
UNBIASED_DROP_PER_TEMPERATURE = 0.08
PRIMACY_SLOPE = 0.7
MIDDLE_KEEP = 0.35
LOOP_BASE = 0.30
LOOP_PER_DISCONTINUITY = 4.0
LOOP_SEVERE_SHARE = 0.4


class _BoundedCache(OrderedDict[K, V]):
    """A dict that forgets its oldest entries past ``limit`` (insertion order)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        while len(self) > self.limit:
            self.popitem(last=False)


# what the simulator saw, shared by every SimBackend of the process (a view is a pure function of
# the pixels a spec names, and a spec names them by content hash): a calibration run asks seven
# models about the same stressed frames, so each spec is read once, not once per model
_VIDEO_VIEWS: _BoundedCache[str, VideoView] = _BoundedCache(200_000)
_FRAME_VIEWS: _BoundedCache[tuple[str, int, int | None, str], FrameView] = _BoundedCache(500_000)


def _videos(r: Request) -> list[VideoPart]:
    return [p for p in r.parts if isinstance(p, VideoPart)]


_SENTENCES = re.compile(r"in (\d+) sentences?")
_LABEL = re.compile(r"^Video (\d+):")
_TARGET = re.compile(r"labelled Video (\d+)")


class SimBackend:
    """Backend protocol implementation for ``sim:PROFILE`` (reads frames via a FrameStore)."""

    name = "sim"
    max_batch_size = 64
    supports_letter_logprobs = True

    def __init__(self, profile: str, store: FrameStore) -> None:
        check_profile(profile)
        profile, self.latency = split_latency(profile)
        self.dose: Dose | None = parse_dose(profile) if is_dose(profile) else None
        self.profile = profile
        # a dose draws the unbiased model's randomness (same texts where no dose acts) plus its own streams
        self._rng_profile = "unbiased" if self.dose is not None else profile
        self._stress = stressor_params(self.dose) if self.dose is not None else None
        self.store = store

    def identity(self) -> Mapping[str, Any]:
        """Backend ``sim``, the profile as model id, and a revision naming the simulator's source
        digest and the dose (so the generation cache never mixes simulator versions or doses)."""
        rev = f"sim-v{SIM_VERSION}-{_code_digest()}" + (f"-{self.dose.canonical()}" if self.dose is not None else "")
        return {"backend": "sim", "model_id": f"sim:{self.profile}", "revision": rev}

    def close(self) -> None:
        """Nothing to release: the view caches are process-wide and bounded (``_BoundedCache``)."""

    def _view(self, part: VideoPart) -> VideoView:
        """The video's view; each frame is read once per process (variants reuse frames)."""
        spec = part.frames
        key = hashlib.sha256(json.dumps(spec.key(), sort_keys=True).encode()).hexdigest()  # the pixels' content
        hit = _VIDEO_VIEWS.get(key)
        if hit is not None:
            return hit
        touched = {p for op in spec.ops for p in op.positions}
        fkeys: list[tuple[str, int, int | None, str] | None] = [
            None if j in touched else (spec.sources[s].key(), i, spec.size, spec.aspect)
            for j, (s, i) in enumerate(spec.frames)]
        views: list[FrameView | None] = [_FRAME_VIEWS.get(k) if k is not None else None for k in fkeys]
        missing = [j for j, v in enumerate(views) if v is None]
        if (missing and spec.size is not None and spec.aspect == "stretch"
                and all(fkeys[j] is not None for j in missing)):
            # only untouched frames are new: decode just those (each once), not the whole spec; with a
            # fixed square size every frame is size x size, so no frame depends on another's shape
            todo: dict[Any, tuple[int, int]] = {}  # frame key -> (source, index); no key is None here
            for j in missing:
                todo.setdefault(fkeys[j], spec.frames[j])
            sub = replace(spec, frames=tuple(todo.values()), ops=(), records=())
            got = {fk: view_frame(frame) for fk, frame in zip(todo, self.store.materialize(sub), strict=True)}
            _FRAME_VIEWS.update(got)
            for j in missing:
                views[j] = got[fkeys[j]]
        elif missing:
            frames = self.store.materialize(spec)
            for j in missing:
                views[j] = view_frame(frames[j])
                fk = fkeys[j]
                if fk is not None:
                    _FRAME_VIEWS[fk] = views[j]  # type: ignore[assignment]
        view = summarize([v for v in views if v is not None])
        _VIDEO_VIEWS[key] = view
        return view

    def _hold(self, n: int, t_batch: float) -> None:
        """Sleep until ``n × latency`` seconds have passed since ``t_batch`` (no CPU used)."""
        rest = self.latency * n - (time.perf_counter() - t_batch)
        if rest > 0:
            time.sleep(rest)

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """One generation per request (text cut at ``max_new_tokens``, then finish ``length``),
        with letter log-probabilities when the request wants both; held to ``B × latency``."""
        t_batch = time.perf_counter()
        out = []
        for r in requests:
            t0 = time.perf_counter()
            text, finish = self._text(r)
            lp = self._letters(r) if r.want == "both" else None
            tokens = text.split()
            if len(tokens) > r.decoding.max_new_tokens:
                text = " ".join(tokens[: r.decoding.max_new_tokens])
                finish = "length"
            out.append(Generation(text, min(len(tokens), r.decoding.max_new_tokens), finish, lp,
                                  time.perf_counter() - t0 + self.latency))
        self._hold(len(requests), t_batch)
        return out

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        """Log-probability of each option letter per request; held to ``B × latency``."""
        t_batch = time.perf_counter()
        out = [self._letters(r) for r in requests]
        self._hold(len(requests), t_batch)
        return out

    def _request_rng(self, r: Request, *extra: Any) -> np.random.Generator:
        frames = json.dumps([p.frames.key() for p in _videos(r)], sort_keys=True)
        seed = r.seed if not r.decoding.greedy else "greedy"
        return seeded_rng(self._rng_profile, frames, r.prompt_text, seed, r.decoding.temperature, *extra)

    def _text(self, r: Request) -> tuple[str, str]:
        videos = _videos(r)
        prompt = r.prompt_text
        if OPTION_LINE.search(prompt) and re.search(r"option", prompt, re.I):
            letters = r.letters or tuple(m.group(1) for m in OPTION_LINE.finditer(prompt))
            lp = self._letters(r)
            return max(letters, key=lambda k: lp.get(k, -math.inf)), "stop"
        if len(videos) <= 1 and ("[video" not in prompt):
            return self._describe(r, videos[0] if videos else None)
        return self._summaries(r, videos), "stop"

    def _slot_keep(self, slot: int, P: int, temperature: float) -> float:
        base = 1.0 - UNBIASED_DROP_PER_TEMPERATURE * temperature
        if self.profile in ("primacy", "recency") and P > 1:
            return base * (1.0 - PRIMACY_SLOPE * (slot if self.profile == "primacy" else P - 1 - slot) / (P - 1))
        if self.profile == "middle-weak" and P == 4 and slot in (1, 2):
            return base * MIDDLE_KEEP
        return base

    def _summaries(self, r: Request, videos: list[VideoPart]) -> str:
        prompt = r.prompt_text
        m = _SENTENCES.search(prompt)
        n_sent = int(m.group(1)) if m else 3
        news = "news video" in prompt
        labels = [int(lm.group(1)) for p in r.parts if isinstance(p, TextPart) and (lm := _LABEL.match(p.text))]
        if len(labels) != len(videos):
            labels = list(range(len(videos)))
        target = _TARGET.search(prompt)
        rng = self._request_rng(r)
        P = len(videos)
        keep_slot, confuse, thin = self._dose_slots(videos)
        drng = self._request_rng(r, "dose-slots")
        strata = (set_strata([p.frames.primary.path for p in videos], keep_slot, confuse, by_clip=thin)
                  if self.dose is not None else None) or rotation_strata(videos, joint_keep=len(set(keep_slot)) == 1)
        draws = [(drng.random(), drng.random(), int(drng.integers(max(1, P - 1)))) for _ in range(P)]
        if strata is not None:
            draws = [(strata(k, "keep"), strata(k, "confuse"), d[2]) for k, d in enumerate(draws)]
        dropped = [d[0] >= keep_slot[k] for k, d in enumerate(draws)]
        if P and all(dropped) and self.dose is not None and uses_rescue(self.dose, P):  # else a lost DPB/MEG unit
            dropped[max(rescued(keep_slot), key=lambda k: draws[k][0])] = False
        chunks = []
        for slot, (label, part) in enumerate(zip(labels, videos, strict=True)):
            if target and int(target.group(1)) != label:
                continue
            _u_keep, u_conf, pick = draws[slot]  # u_conf < q: the slot describes another slot's video
            fs = facts(self._view(videos[[k for k in range(P) if k != slot][pick]] if u_conf < confuse else part))
            keep = self._slot_keep(slot, P, r.decoding.temperature)
            kept = [f for f in fs if rng.random() < keep]
            sents = [(f.news_text if news else f.text) for f in kept][:n_sent] or [_GENERIC]
            if dropped[slot] and thin:  # a thinning dose drops the slot's first written sentence only
                sents = sents[1:] if len(sents) > 1 and sents[0] != _GENERIC else ["..."]
            elif dropped[slot]:  # the slot's detail is dropped entirely: a placeholder (no coverage)
                # when every slot is dropped, a coverage dose writes a fact-free sentence instead, so the
                # answer is scored (zero coverage) rather than lost (sim_dose); named by a digest of the
                # video so answers differ, in words absent from the synthetic references
                sents = ([f"Details omitted, clip {part.frames.primary.key()[:6]}."]
                         if all(dropped) and self.dose is not None and self.dose.get("coverage") is not None
                         else ["..."])
            chunks.append(f"[video{label}] " + " ".join(sents))
        return " ".join(chunks)

    def _dose_slots(self, videos: list[VideoPart]) -> tuple[list[float], float, bool]:
        """Per-slot keep-probabilities w_p, the confusion probability q of a dose and whether a
        "dropped" slot loses only its first written sentence (``sim_dose.slot_keep`` /
        ``confusion_prob`` / ``sentence_drops``; all 1, 0 and False without a dose), on the input's
        domain and bucket (its first video's background and length)."""
        P = len(videos)
        if self.dose is None or not videos:
            return [1.0] * P, 0.0, False
        background = self._view(videos[0]).background
        domain = next((d for d, v in DOMAINS.items() if v["bg_name"] == background), None)
        spec = videos[0].frames
        bucket = "long" if spec.fps > 0 and spec.frame_count / spec.fps > 60.0 else "short"
        scale = sim_dose.thin_scale(self.dose, P, domain, bucket)
        thin = sim_dose.sentence_drops(self.dose, P, scale)
        keep = sim_dose.slot_keep(self.dose, P, scale if thin else sim_dose.mu_for(domain, bucket, P), thin=thin)
        return keep, sim_dose.confusion_prob(self.dose, domain, bucket, P), thin

    def _describe(self, r: Request, video: VideoPart | None) -> tuple[str, str]:
        if video is None:
            return "I cannot see a video, so I cannot describe it.", "stop"
        view = self._view(video)
        fs = facts(view)
        sents = [f.text for f in fs] or ["The video shows an empty scene."]
        rng = self._request_rng(r, "loop")
        looping = self.profile == "looping"
        p_loop = min(0.95, LOOP_BASE + LOOP_PER_DISCONTINUITY * view.discontinuity) if looping else 0.0
        if not self._dose_loops(r, video) and (rng.random() >= p_loop or not view.objects):
            return " ".join(sents), "stop"
        if view.objects:
            o = view.objects[int(rng.integers(len(view.objects)))]
            verb = ("stays still in the same place"
                    if o.motion == "static" else f"keeps moving {MOTION_PHRASE[o.motion]}")
            loop = f"The {o.first_colour} {o.shape} {verb} and the scene continues to show it."
        else:
            loop = "The picture stays the same and the scene continues to show it."
        reps = 10_000 if rng.random() < LOOP_SEVERE_SHARE else int(rng.integers(2, 4))  # 10_000: to the token cap
        body = " ".join(sents[:2] + [loop] * min(reps, 2000))
        return body, ("length" if reps >= 10_000 else "stop")

    def _dose_loops(self, r: Request, video: VideoPart) -> bool:
        """Whether a dose makes this description loop: the video's clean-loop share r, or a
        susceptible video (share σ) on temporally irregular frames with probability ρ."""
        if self._stress is None:
            return False
        spec = video.frames
        src = spec.primary
        if src.kind != "video":
            return False
        index = unit_index(src.path)
        if unit_uniform("repetition", index, src.key()) < self._stress.r:
            return True
        return (unit_uniform("susceptible", index, src.key()) < self._stress.sigma
                and temporally_irregular(spec.indices, spec.frame_count, len(spec.sources))
                and bool(self._request_rng(r, "dose-stress").random() < self._stress.rho))

    def _letters(self, r: Request) -> dict[str, float]:
        """Log-probability per letter (``sim_mcq.letter_logprobs``) from the probability of each
        option *text* (``sim_mcq.content_probs``, independent of the letters the texts sit under)
        after a flip/phase/parity dose (``dose_shift``) and an order dose (``dose_order``)."""
        question, opts = parse_mcq(r.prompt_text)
        videos = _videos(r)
        video = videos[0] if videos else None
        texts = [t for _, t in opts]
        probs: dict[str, float] = {}
        if texts:
            believed = perceived(question, self._view(video) if video is not None else None)
            probs = dose_shift(self.dose, question, video, content_probs(self._rng_profile, question, texts, believed))
        letters = list(r.letters) or [k for k, _ in opts]
        by_letter = dict(opts)
        probs = dose_order(self.dose, question, video, probs, letters, by_letter)
        return letter_logprobs(probs, letters, by_letter, letter_bias=self.profile == "letter-bias")


_GENERIC = "The video shows a simple scene."  # a slot summary with no fact in it
