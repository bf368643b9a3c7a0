"""How the simulated model answers a multiple-choice question (docs/design.md section 7): a
distribution over the options' texts, so the same in every option order (:func:`content_probs`),
moved by a dose (:func:`dose_shift`, :func:`dose_order`; formulas in ``sim_dose``) and mapped onto
the letters the texts sit under (:func:`letter_logprobs`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from ..video.compose import VideoPart
from ..video.synthetic import EVENT_OPTION, MOTION_PHRASE
from .sim_dose import ORIGINAL_PROB, SHIFTED_PROB, Dose, dosed_share, grid_class
from .sim_draws import seeded_rng, unit_index, unit_uniform
from .sim_vision import VideoView

LETTER_BIAS = 0.8
UNSURE_CONCENTRATION = 5.0  # Dirichlet concentration of an unsure content distribution (near-flat)
SURE_PROB = 0.85
OPTION_LINE = re.compile(r"^\s*([A-Z])[.)]\s+(.*\S)\s*$", re.M)  # an option line, ``B. text`` or ``B) text``


def parse_mcq(prompt: str) -> tuple[str, list[tuple[str, str]]]:
    """The question (the last line ending in ``?`` before the first option, else the whole text
    before it) and the (letter, text) options of a multiple-choice prompt."""
    opts = [(m.group(1), m.group(2)) for m in OPTION_LINE.finditer(prompt)]
    first = OPTION_LINE.search(prompt)
    question = prompt[: first.start()] if first else prompt
    q_lines = [line.strip() for line in question.strip().splitlines() if line.strip().endswith("?")]
    return (q_lines[-1] if q_lines else question.strip()), opts


def perceived(question: str, view: VideoView | None) -> str | None:
    """The option text the model believes is right, or None when the frames cannot tell."""
    if view is None:
        return None
    q = question.lower()
    by_shape = {o.shape: o for o in view.objects}  # one track per shape (``sim_vision.summarize``)
    if q.startswith("what colour is the"):
        m = re.search(r"what colour is the (\w+)", q)
        o = by_shape.get(m.group(1) if m else "")
        return o.first_colour if o else None
    if q.startswith("in which direction does the"):
        m = re.search(r"does the (\w+) (\w+) move", q)
        o = by_shape.get(m.group(2)) if m else None
        return MOTION_PHRASE[o.motion] if o else None
    if q.startswith("how many coloured shapes"):
        return str(len(view.objects))
    if q.startswith("what brief event"):
        return EVENT_OPTION[view.events[0] if view.events else None]
    return None


def content_probs(rng_profile: str, question: str, texts: Sequence[str], believed: str | None) -> dict[str, float]:
    """Probability of each option *text*, before any dose: Dirichlet(``UNSURE_CONCENTRATION``)
    seeded by the profile, the question and the sorted texts (the same in every ordering); when
    ``believed`` is an option, it gets ``SURE_PROB`` and the others share the rest in proportion."""
    base = seeded_rng(rng_profile, question, *sorted(texts)).dirichlet(np.full(len(texts), UNSURE_CONCENTRATION))
    by_text = dict(zip(sorted(texts), base, strict=True))
    if believed is None or believed not in by_text:
        return by_text
    others = {t: v for t, v in by_text.items() if t != believed}
    z = sum(others.values()) or 1.0
    probs = {t: (1.0 - SURE_PROB) * v / z for t, v in others.items()}
    probs[believed] = SURE_PROB
    return probs


def dose_shift(dose: Dose | None, question: str, video: VideoPart | None, probs: dict[str, float]) -> dict[str, float]:
    """A flip/phase dose: a dosed item's answer moves by the grid's sampler/phase shift in the
    sorted option texts (``sim_dose.grid_class``), a parity dose by one on every grid; the
    shifted answer gets SHIFTED_PROB, the original ORIGINAL_PROB, the rest share what is left in
    proportion (:func:`move`)."""
    if dose is None or video is None or not probs:
        return probs
    spec = video.frames
    index = unit_index(spec.primary.path, question)
    key = f"{spec.primary.key()}|{question}"
    s_phase, s_sampler = grid_class(spec.indices, spec.frame_count, spec.fps, len(spec.sources))
    shift = 0
    if s_phase and unit_uniform("phase", index, key) < dosed_share(dose, "phase"):
        shift += s_phase
    if s_sampler and unit_uniform("flip", index, key) < dosed_share(dose, "flip"):
        shift += s_sampler
    if unit_uniform("parity", index, key) < dosed_share(dose, "parity"):
        shift += 1  # every grid, every ordering: the consensus answer moves
    order = sorted(probs)
    if shift % len(order) == 0:
        return probs
    orig = max(order, key=lambda t: probs[t])
    return move(probs, orig, order[(order.index(orig) + shift) % len(order)])


def dose_order(dose: Dose | None, question: str, video: VideoPart | None, probs: dict[str, float],
               letters: Sequence[str], by_letter: dict[str, str]) -> dict[str, float]:
    """An order dose: a dosed item whose believed option sits under one of the last two
    letters picks the option under the first letter instead (:func:`move`)."""
    if dose is None or not probs or len(letters) < 3:
        return probs
    src = video.frames.primary if video is not None else None
    index = unit_index(src.path, question) if src is not None else None
    key = f"{src.key() if src is not None else ''}|{question}"
    if unit_uniform("order", index, key) >= dosed_share(dose, "order"):
        return probs
    believed = max(sorted(probs), key=lambda t: probs[t])
    pos = next((j for j, k in enumerate(letters) if by_letter.get(k) == believed), None)
    first = by_letter.get(letters[0])
    if pos is None or pos < len(letters) - 2 or first is None or first not in probs:
        return probs
    return move(probs, believed, first)


def letter_logprobs(probs: dict[str, float], letters: Sequence[str], by_letter: dict[str, str], *,
                    letter_bias: bool) -> dict[str, float]:
    """Log-probability of each letter: log p(text under the letter) (−30 for none), plus
    ``LETTER_BIAS``·(K − 1 − k) on the k-th of K letters when ``letter_bias`` and the model is
    unsure (no option at ``SURE_PROB``), normalised by log-sum-exp."""
    sure = max(probs.values(), default=0.0) >= SURE_PROB - 1e-9
    ps = [probs.get(by_letter.get(letter, ""), 0.0) for letter in letters]
    arr = np.array([math.log(p) if p > 0 else -30.0 for p in ps])
    if letter_bias and not sure:
        arr += [LETTER_BIAS * (len(letters) - 1 - k) for k in range(len(letters))]
    arr = arr - arr.max()
    lse = math.log(float(np.exp(arr).sum()))
    return {letter: float(v - lse) for letter, v in zip(letters, arr, strict=True)}


def move(probs: dict[str, float], orig: str, target: str) -> dict[str, float]:
    """The distribution with ``target`` at SHIFTED_PROB, ``orig`` at ORIGINAL_PROB and the other
    options sharing 1 − SHIFTED_PROB − ORIGINAL_PROB in proportion to their old mass."""
    rest = {t: v for t, v in probs.items() if t not in (orig, target)}
    z = sum(rest.values())
    left = 1.0 - SHIFTED_PROB - ORIGINAL_PROB
    out = {t: (left * v / z if z > 0 else left / max(1, len(rest))) for t, v in rest.items()}
    out[orig] = ORIGINAL_PROB
    out[target] = SHIFTED_PROB
    return out
