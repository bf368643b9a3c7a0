"""Dose-controlled simulated models: ``sim:dose,GATE=VALUE[,GATE=VALUE…]`` (docs/design.md section 7).

A dose names, for one or more gates, the population value of the gate's metric the simulated
model is built to produce on the synthetic set; the effect arises through the real pipeline
(frames → text → judge/parse → metric). This module reads the dose (:func:`parse_dose`) and
turns its targets into the behaviour parameters ``sim.py`` acts on. Gates not named behave as
``sim:unbiased`` (the dose draws its randomness from separate streams). Measured accuracy:
docs/simulated-models.md.

Positional gates (per slot p = 1..P of a multi-video answer). The slot keeps its summary with
probability w_p, else writes a placeholder (``...``, zero coverage), so E[C_p] = μ·w_p, μ the
unbiased model's mean slot coverage on the configuration (``MU``, measured). With a ``dpb`` or
``meg`` target an answer that would drop every slot keeps one of the slots of largest w_p (an
answer with no slot covered is a lost unit); the w_p are then solved so that the kept shares
E[B_p] = w_p + ∏(1 − w_q)/|those slots| meet the formulas (:func:`kept_share`):

* ``meg`` m (P = 4): m < 0: w_2 = w_3 = 1 + m/μ; m > 0: w_1 = w_4 = 1 − m/μ; so
  E[MEG] = μ·((w_2 + w_3)/2 − (w_1 + w_4)/2) = m. For |m| <= L (``FIRST_LOSS``) a dropped slot
  loses only its first written sentence and L replaces μ (:func:`sentence_drops`);
* ``coverage`` c: every w_p = c/μ (c <= μ); an answer with every slot dropped writes a sentence
  with no fact (``Details omitted, clip …``) instead of placeholders, so it is scored (zero
  coverage), not lost, and c below μ/P is reachable;
* ``dpb`` d: a linear slope w_p ← w_p·(1 − |γ|·(1 − sign(γ)·α_p)/2), α_p = (2p − P − 1)/(P − 1),
  γ solved by bisection so that E[Σ α_p B_p / Σ B_p] = d over independent B_p ~ Bernoulli(w_p)
  (:func:`expected_dpb`); a linear slope leaves MEG at 0. At P = 2 with |d| <= D/2 (``FIRST_DPB``)
  the first slot (d > 0; the second for d < 0) loses its first sentence with probability |d|/D
  and the other slot is always kept (:func:`sentence_drops`);
* ``contamination`` x: a kept slot describes another slot's video (chosen uniformly) with
  probability q = (x − x0)/(κ − x0), x0 the unbiased contaminated-slot rate and κ the rate among
  confused slots (``CONTAMINATION``, measured).

The keep and confusion decisions draw stratified uniforms from ``sim_draws``, so the set's share
of dropped (confused) cells is the dose's to within about one cell.

Multiple-choice gates. A share of the items, chosen by a low-discrepancy sequence (so the share
on the set is the target, not a random draw), moves its answer in content space (the options'
texts sorted) by a shift; the shifted answer gets ``SHIFTED_PROB`` (0.55), the original
``ORIGINAL_PROB`` (0.40):

* ``flip`` f: shifted by k under sampler k of ``SAMPLER_SHIFT`` at any budget, so every sampler
  pair disagrees; share (f − f0)/(1 − f0);
* ``phase`` f: shifted by s under phase grid s of the ``PHASES`` grids, so every phase pair
  disagrees while PhaseFusion (mean over the grids) keeps the original answer;
* ``order`` f: when the believed option sits under one of the last two letters, the model picks
  the option under letter A, so some of ten orderings change the answer with probability
  ``ORDER_HIT`` = 1 − 0.6^10 while the plurality stays the believed option; share f/ORDER_HIT;
* ``parity`` p: shifted by one in every condition and ordering, so the consensus answer differs
  from ``sim:unbiased``'s on a share p of the items (a re-run floor of 0: both deterministic).
  Coverage and repetition parity use the ``coverage`` and ``repetition`` doses.

Description gates (``Please describe this video``), per video (a low-discrepancy sequence over
the synthetic set's videos, a hash elsewhere):

* ``repetition`` r: the video's descriptions loop on every input with share r (clean RR = r,
  amplification 0);
* ``stressor`` s and ``attack`` a: a share σ of the videos is susceptible; on temporally irregular
  frames (:func:`temporally_irregular`) a susceptible video's description loops with probability
  ρ per variant. E[amplification] = (1 − r)·σ·ρ = s and ASR within the cap K = 30 is
  σ·(1 − (1 − ρ)^K) = a (ρ by bisection). Only ``attack``: ρ = 0.15; only ``stressor``: ρ = 1,
  σ = s/(1 − r). The attack target holds for the stressors walked to the cap (Add, Replace,
  Shuffle, Delete 2); Delete 1 is walked over its T variants and Reverse has one (ASR = σ·ρ).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..errors import ConfigError
from .sim_draws import drop_patterns

# Measured on sim:unbiased on the synthetic set (default layout, seed 0) with
#   posbias sim calibrate            (40 groups per configuration, seed 0; prints these tables)
# MU: mean slot coverage per (domain, bucket, P) at the positional defaults (embed judge for the
# sentence references, fragment coverage for News; temperature 0.9, 16/24 frames, base budget).
MU: dict[tuple[str, str, int], float] = {
    ('cooking', 'short', 2): 0.8682,
    ('domestic', 'short', 2): 0.8344,
    ('domestic', 'long', 2): 0.7594,
    ('leisure', 'short', 2): 0.8734,
    ('leisure', 'long', 2): 0.8547,
    ('news', 'short', 2): 0.4741,
    ('cooking', 'short', 4): 0.8839,
    ('domestic', 'short', 4): 0.827,
    ('domestic', 'long', 4): 0.752,
    ('leisure', 'short', 4): 0.8733,
    ('leisure', 'long', 4): 0.8438,
    ('news', 'short', 4): 0.4768,
}
MU_DEFAULT = 0.78  # any other data: the mean over the synthetic configurations
# contaminated-slot rate of sim:unbiased (x0) and among confused slots (κ), per (domain, bucket, P)
CONTAMINATION: dict[tuple[str, str, int], tuple[float, float]] = {
    ('cooking', 'short', 2): (0.0187, 0.725),
    ('domestic', 'short', 2): (0.0, 0.7063),
    ('domestic', 'long', 2): (0.0125, 0.6),
    ('leisure', 'short', 2): (0.0312, 0.5687),
    ('leisure', 'long', 2): (0.05, 0.55),
    ('news', 'short', 2): (0.0938, 0.525),
    ('cooking', 'short', 4): (0.0125, 0.6969),
    ('domestic', 'short', 4): (0.0078, 0.6734),
    ('domestic', 'long', 4): (0.0234, 0.6078),
    ('leisure', 'short', 4): (0.0219, 0.5156),
    ('leisure', 'long', 4): (0.0922, 0.6016),
    ('news', 'short', 4): (0.1953, 0.6297),
}
# FIRST_LOSS: mean coverage a slot loses when its first written sentence is dropped, per (domain,
# bucket, P), P = 4 (sim:unbiased against a MEG dose that thins every middle slot; the slots
# behave alike under sim:unbiased, so the middle slots' loss is every slot's)
FIRST_LOSS: dict[tuple[str, str, int], float] = {
    ('cooking', 'short', 4): 0.2323,
    ('domestic', 'short', 4): 0.2281,
    ('domestic', 'long', 4): 0.1852,
    ('leisure', 'short', 4): 0.232,
    ('leisure', 'long', 4): 0.2031,
    ('news', 'short', 4): 0.156,
}
FIRST_LOSS_DEFAULT = 0.21  # any other data: the mean over the synthetic configurations
# FIRST_DPB: mean DPB effect (dosed − sim:unbiased, per instance) of thinning the first slot of every
# P = 2 answer by its first written sentence, per (domain, bucket, 2) (a DPB dose that thins every
# first slot; the slots behave alike under sim:unbiased, so thinning the second slot gives −FIRST_DPB)
FIRST_DPB: dict[tuple[str, str, int], float] = {
    ('cooking', 'short', 2): 0.1573,
    ('domestic', 'short', 2): 0.151,
    ('domestic', 'long', 2): 0.1365,
    ('leisure', 'short', 2): 0.155,
    ('leisure', 'long', 2): 0.1371,
    ('news', 'short', 2): 0.1828,
}
FIRST_DPB_DEFAULT = 0.15  # any other data: the mean over the synthetic configurations
# the largest share of a P = 2 configuration's instances a DPB dose thins (|d| <= share·FIRST_DPB)
DPB_THIN_SHARE = 0.5
# unbiased rates of the canonical metric of each rate gate (the calibration's: flip left vs
# midpoint at 8 frames, phase 0 vs 1, order over 10 orderings, clean RR, Shuffle ASR)
NULL_RATE: dict[str, float] = {"flip": 0.0, "phase": 0.017, "order": 0.0, "repetition": 0.0, "attack": 0.0}
ORDER_HIT = 1.0 - 0.6 ** 10  # P(an order-dosed item changes its answer in some of 10 orderings)
ATTACK_CAP = 30
ATTACK_ONLY_RHO = 0.15
SHIFTED_PROB, ORIGINAL_PROB = 0.55, 0.40  # a shifted answer's mass and the original's

SAMPLER_SHIFT = ("left", "midpoint", "endpoint", "fps")
PHASES = 3


# allowed targets (inclusive); the positional limits keep every keep-probability in [0, 1]
DOSE_RANGE: dict[str, tuple[float, float]] = {
    "dpb": (-0.6, 0.6), "meg": (-0.4, 0.4), "coverage": (0.0, 0.47), "contamination": (0.0, 0.5),
    "flip": (0.0, 1.0), "phase": (0.0, 1.0), "order": (0.0, 0.99), "repetition": (0.0, 0.95),
    "stressor": (0.0, 0.95), "attack": (0.0, 1.0), "parity": (0.0, 1.0),
}
DOSE_GATES = tuple(DOSE_RANGE)
POSITIONAL_GATES = ("dpb", "meg", "coverage", "contamination")
_SHARES = "both set the per-slot keep shares w_p"
_CONFUSED = "a confused slot covers little of its own video, so the contamination dose"
# why two positional doses cannot both land (parse_dose refuses every pair)
_CONFLICT: dict[frozenset[str], str] = {
    frozenset(("dpb", "meg")): f"{_SHARES}: the DPB slope is solved on top of the MEG shares and the MEG target "
                               "assumes the other slots keep their summaries",
    frozenset(("dpb", "coverage")): f"{_SHARES}: at low coverage most answers drop every slot, and the rescue DPB "
                                    "needs (a lost unit otherwise) moves that mass onto one slot",
    frozenset(("meg", "coverage")): f"{_SHARES}: at low coverage most answers drop every slot, and the rescue MEG "
                                    "needs (a lost unit otherwise) moves that mass onto the edge slots",
    frozenset(("contamination", "dpb")): f"{_CONFUSED} changes the slot coverages the DPB keep shares are solved for",
    frozenset(("contamination", "meg")): f"{_CONFUSED} scales the slot coverages the MEG keep shares are solved for",
    frozenset(("contamination", "coverage")): f"{_CONFUSED} lowers the coverage the coverage dose sets",
}


@dataclass(frozen=True)
class Dose:
    """Targets per gate, in ``DOSE_GATES`` order."""

    targets: tuple[tuple[str, float], ...]

    def get(self, gate: str) -> float | None:
        """The target of ``gate``, None when the dose does not name it."""
        return dict(self.targets).get(gate)

    def canonical(self) -> str:
        """``dose,GATE=VALUE,…`` in a fixed order with exact float reprs (part of the revision)."""
        return "dose," + ",".join(f"{g}={v!r}" for g, v in self.targets) if self.targets else "dose"


def is_dose(profile: str) -> bool:
    """Whether a sim profile string is a dose (``dose`` or ``dose,…``)."""
    return profile == "dose" or profile.startswith("dose,")


def parse_dose(profile: str) -> Dose:
    """Parse ``dose,GATE=VALUE[,GATE=VALUE…]`` (without the ``sim:`` prefix); ConfigError names
    the bad part, the allowed gates and their ranges.

    At most one positional gate (``dpb``, ``meg``, ``coverage``, ``contamination``): they act on
    the same slots, and each pair is refused with its reason (``_CONFLICT``). Any positional gate
    combines with the multiple-choice gates (``flip``, ``phase``, ``order``, each on items drawn by
    its own sequence) and the description gates (``repetition``, ``stressor``, ``attack``, solved
    jointly by :func:`stressor_params`, refused when no (r, σ, ρ) meets all three).
    """
    if not is_dose(profile):
        raise ConfigError(f"sim profile {profile!r} is not a dose; write sim:dose,GATE=VALUE[,GATE=VALUE...]")
    allowed = ", ".join(f"{g} in [{lo:g}, {hi:g}]" for g, (lo, hi) in DOSE_RANGE.items())
    seen: dict[str, float] = {}
    for part in (p.strip() for p in profile.split(",")[1:]):
        m = re.fullmatch(r"([a-z]+)\s*=\s*(\S+)", part)
        if not m:
            raise ConfigError(f"sim:{profile}: {part!r} is not GATE=VALUE; gates: {', '.join(DOSE_GATES)}")
        gate, raw = m.group(1), m.group(2)
        if gate not in DOSE_RANGE:
            raise ConfigError(f"sim:{profile}: unknown gate {gate!r}; allowed gates: {', '.join(DOSE_GATES)}")
        if gate in seen:
            raise ConfigError(f"sim:{profile}: gate {gate!r} is given twice")
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"sim:{profile}: {gate}={raw!r} is not a number; allowed: {allowed}") from None
        lo, hi = DOSE_RANGE[gate]
        if not math.isfinite(value) or not lo <= value <= hi:
            raise ConfigError(f"sim:{profile}: {gate}={raw} is outside [{lo:g}, {hi:g}]; allowed: {allowed}")
        seen[gate] = value + 0.0  # -0.0 -> 0.0
    pos = [g for g in POSITIONAL_GATES if g in seen]
    if len(pos) > 1:
        a, b = pos[0], pos[1]
        raise ConfigError(f"sim:{profile}: {a} and {b} cannot be dosed together: {_CONFLICT[frozenset((a, b))]}; "
                          f"dose one of {', '.join(POSITIONAL_GATES)} per model (any of them combines with the "
                          "multiple-choice and description gates)")
    dose = Dose(tuple((g, seen[g]) for g in DOSE_GATES if g in seen))
    stressor_params(dose)  # raises when infeasible
    return dose


def alphas(P: int) -> list[float]:
    """α_p = (2p − P − 1)/(P − 1), p = 1..P (DPB weights)."""
    return [(2 * p - P - 1) / (P - 1) for p in range(1, P + 1)] if P > 1 else [0.0]


def rescued(w: Sequence[float]) -> list[int]:
    """The slots one of which keeps its summary when every slot would drop it (an answer with no
    slot covered is a lost unit for DPB/MEG): those of the largest w_p, one of them uniformly."""
    best = max(w)
    return [p for p, x in enumerate(w) if x == best]


def uses_rescue(dose: Dose, P: int = 4) -> bool:
    """Whether an all-dropped answer keeps one slot: when the dose names ``dpb`` (or ``meg`` and
    P = 4), whose gates count an answer with no slot covered as a lost unit. A ``coverage`` or
    ``contamination`` dose does not rescue (its all-dropped answers are scored at zero coverage)."""
    return dose.get("dpb") is not None or (dose.get("meg") is not None and P == 4)


def kept_share(w: Sequence[float]) -> list[float]:
    """E[B_p] with the rescue: w_p + ∏_q (1 − w_q) / |rescued| for the rescued slots."""
    none = math.prod(1.0 - x for x in w)
    res = rescued(w)
    return [x + (none / len(res) if p in res else 0.0) for p, x in enumerate(w)]


def expected_dpb(w: Sequence[float]) -> float:
    """E[Σ α_p B_p / Σ B_p] over independent B_p ~ Bernoulli(w_p), an all-dropped draw replaced
    by one rescued slot (:func:`rescued`): the DPB of slots that keep their summary with
    probability w_p and equal coverage."""
    a = alphas(len(w))
    res = rescued(w)
    total = 0.0
    for dropped, prob in reversed(drop_patterns(w)):  # patterns of probability 0 add nothing
        kept = [ap for ap, b in zip(a, dropped, strict=True) if not b] or [a[p] for p in res]
        total += prob * sum(kept) / len(kept)
    return total


def _solve_rescue(target: Sequence[float]) -> list[float]:
    """w with :func:`kept_share` (w) = target (fixed-point iteration; target in [0, 1])."""
    w = [min(1.0, max(0.0, t)) for t in target]
    for _ in range(20_000):
        share = kept_share(w)
        if max(abs(t - sh) for t, sh in zip(target, share, strict=True)) < 1e-9:
            break
        w = [min(1.0, max(0.0, x + t - sh)) for x, t, sh in zip(w, target, share, strict=True)]
    return w


def _slope(P: int, gamma: float) -> list[float]:
    """w_p = 1 − |γ|·(1 − sign(γ)·α_p)/2: γ > 0 keeps the last slot, γ < 0 the first."""
    s = 1.0 if gamma >= 0 else -1.0
    return [1.0 - abs(gamma) * (1.0 - s * ap) / 2.0 for ap in alphas(P)]


def mu_for(domain: str | None, bucket: str | None, P: int) -> float:
    """The unbiased mean slot coverage μ of a configuration (``MU_DEFAULT`` when not measured)."""
    return MU.get((domain or "", bucket or "", P), MU_DEFAULT)


def slot_keep(dose: Dose, P: int, mu: float, *, thin: bool = False) -> list[float]:
    """Keep-probabilities w_1..w_P of the slots (formulas in the module docstring). ``thin`` (a
    :func:`sentence_drops` dose) with ``mu`` the thinning scale: a MEG dose uses the same formula
    with L in place of μ; a DPB dose d at P = 2 thins the first slot (d > 0; the second for d < 0)
    with probability |d|/D, D = ``mu``, the other slot always kept."""
    return list(_slot_keep(dose, P, mu, thin))


@functools.lru_cache(maxsize=256)
def _slot_keep(dose: Dose, P: int, mu: float, thin: bool) -> tuple[float, ...]:
    d = dose.get("dpb")
    if thin and d is not None and P == 2:  # never all thinned: the other slot is kept, no rescue
        x = min(1.0, abs(d) / mu) if mu > 0 else 1.0
        return (1.0 - x, 1.0) if d > 0 else (1.0, 1.0 - x)
    w = [1.0] * P
    meg, cov = dose.get("meg"), dose.get("coverage")
    if P == 4 and meg is not None:  # parse_dose refuses meg with coverage (one positional gate per dose)
        mid, edge = (1.0 + meg / mu, 1.0) if meg < 0 else (1.0, 1.0 - meg / mu)
        w = [edge, mid, mid, edge]
    elif cov is not None:
        w = [cov / mu] * P
    w = [min(1.0, max(0.0, x)) for x in w]
    if uses_rescue(dose, P):
        w = _solve_rescue(w)  # infeasible (kept share below 1/P) stays at the lowest share, w = 0
    if d is not None and P > 1 and d != 0.0:
        lo, hi = (0.0, 1.0) if d > 0 else (-1.0, 0.0)
        for _ in range(60):  # E[DPB] rises with γ
            mid_g = (lo + hi) / 2
            sloped = [b * s for b, s in zip(w, _slope(P, mid_g), strict=True)]
            lo, hi = (mid_g, hi) if expected_dpb(sloped) < d else (lo, mid_g)
        w = [b * s for b, s in zip(w, _slope(P, (lo + hi) / 2), strict=True)]
    return tuple(w)


def first_loss_for(domain: str | None, bucket: str | None, P: int) -> float:
    """The mean coverage a slot loses when its first written sentence is dropped (``FIRST_LOSS``)."""
    return FIRST_LOSS.get((domain or "", bucket or "", P), FIRST_LOSS_DEFAULT)


def thin_scale(dose: Dose, P: int, domain: str | None, bucket: str | None) -> float:
    """The effect of thinning every dosed slot by its first written sentence on this configuration:
    ``FIRST_LOSS`` for a ``meg`` dose at P = 4, ``FIRST_DPB`` for a ``dpb`` dose at P = 2, 0 for any
    other dose (which never thins: :func:`sentence_drops`)."""
    if dose.get("meg") is not None and P == 4:
        return first_loss_for(domain, bucket, P)
    if dose.get("dpb") is not None and P == 2:
        return FIRST_DPB.get((domain or "", bucket or "", 2), FIRST_DPB_DEFAULT)
    return 0.0


def sentence_drops(dose: Dose, P: int, scale: float) -> bool:
    """Whether a dose thins its dosed slots by their first written sentence instead of dropping
    whole summaries (formulas in the module docstring, why in docs/simulated-models.md): a ``meg``
    dose m at P = 4 with |m| <= L, a ``dpb`` dose d at P = 2 with |d| <= D·``DPB_THIN_SHARE``, where
    ``scale`` (:func:`thin_scale`) is L (``FIRST_LOSS``) or D (``FIRST_DPB``)."""
    m = dose.get("meg")
    if m is not None and P == 4:
        return abs(m) <= scale
    d = dose.get("dpb")
    return d is not None and P == 2 and abs(d) <= DPB_THIN_SHARE * scale


def confusion_prob(dose: Dose, domain: str | None, bucket: str | None, P: int) -> float:
    """q = (x − x0)/(κ − x0), clipped to [0, 1]: the probability that a kept slot describes
    another slot's video (a target below the configuration's unbiased rate x0 stays at x0)."""
    x = dose.get("contamination")
    if x is None or P < 2:
        return 0.0
    x0, kappa = CONTAMINATION.get((domain or "", bucket or "", P), (0.0, 1.0))
    return min(1.0, max(0.0, (x - x0) / (kappa - x0))) if kappa > x0 else 0.0


def dosed_share(dose: Dose, gate: str) -> float:
    """Share of items that carry the effect: (f − f0)/(1 − f0) for flip/phase/repetition,
    f/ORDER_HIT for order (0 when the gate is not named)."""
    f = dose.get(gate)
    if f is None:
        return 0.0
    if gate == "order":
        return min(1.0, f / ORDER_HIT)
    f0 = NULL_RATE.get(gate, 0.0)
    return min(1.0, max(0.0, (f - f0) / (1.0 - f0)))


def grid_class(indices: Sequence[int], frame_count: int, fps: float, n_sources: int) -> tuple[int, int]:
    """(phase shift, sampler shift) of a frame grid: s for phase grid s of ``PHASES`` grids,
    k for sampler k of ``SAMPLER_SHIFT`` at the grid's budget; 0 for anything else."""
    from ..video.sampling import frame_indices, polyphase_grids

    b = len(indices)
    idx = [int(i) for i in indices]
    if n_sources != 1 or frame_count < b or b < 1:
        return 0, 0
    for s, g in enumerate(polyphase_grids(frame_count, b, PHASES)):
        if g == idx:
            return s, 0
    for k, conv in enumerate(SAMPLER_SHIFT):
        try:
            if frame_indices(frame_count, b, convention=conv, fps=fps or None) == idx:
                return 0, k
        except (ConfigError, ValueError):
            continue
    return 0, 0


def temporally_irregular(indices: Sequence[int], frame_count: int, n_sources: int) -> bool:
    """True unless the frames are one clip's strictly increasing, evenly spaced frames (gaps
    differing by at most one) from the first frame to the last: what a stressor's variant
    breaks (Add/Replace repeat a frame, Delete leaves a gap or cuts an end, Reverse and
    Shuffle break the order, a foreign frame adds a source)."""
    idx = [int(i) for i in indices]
    if n_sources != 1:
        return True
    if len(idx) < 2:
        return False
    gaps = [b - a for a, b in pairwise(idx)]
    if min(gaps) <= 0 or max(gaps) - min(gaps) > 1:
        return True
    return idx[0] != 0 or idx[-1] != frame_count - 1


@dataclass(frozen=True)
class StressorParams:
    """r: clean loop share; sigma: susceptible share; rho: loop probability per stressed variant."""

    r: float
    sigma: float
    rho: float


def stressor_params(dose: Dose) -> StressorParams:
    """Solve (r, σ, ρ) from the repetition, stressor and attack targets (module docstring);
    ConfigError when the stressor/attack pair is infeasible."""
    r = dosed_share(dose, "repetition")
    s, a = dose.get("stressor"), dose.get("attack")
    K = ATTACK_CAP
    if not s and not a:
        return StressorParams(r, 0.0, 0.0)
    m = (s or 0.0) / (1.0 - r)
    if s and a is None:
        if m > 1.0:
            raise ConfigError(f"sim:dose: stressor={s:g} with repetition={r:g} needs more than every benign video to "
                              "loop")
        return StressorParams(r, m, 1.0)
    assert a is not None
    hit = 1.0 - (1.0 - ATTACK_ONLY_RHO) ** K
    if s is None:
        if a > hit:
            raise ConfigError(f"sim:dose: attack={a:g} above {hit:.3f} needs the stressor gate too (e.g. stressor=0.5)")
        return StressorParams(r, a / hit, ATTACK_ONLY_RHO)
    # σ = m/ρ and σ·(1 − (1 − ρ)^K) = a  <=>  g(ρ) = (1 − (1 − ρ)^K)/ρ = a/m, g decreasing from K to 1

    def g(rho: float) -> float:
        return (1.0 - (1.0 - rho) ** K) / rho

    # a named target of 0 beside a non-zero other (m or a is 0) cannot hold: sigma*rho > 0 makes both positive
    ratio = a / m if m > 0 else math.inf
    if not (1.0 <= ratio <= g(max(m, 1e-9))):
        raise ConfigError(f"sim:dose: stressor={s:g} and attack={a:g} cannot hold together: the attack rate must lie "
                          f"between stressor/(1 - repetition) = {m:.3f} and 1 - (1 - that)^{K} = "
                          f"{1.0 - (1.0 - m) ** K:.3f}")
    lo, hi = max(m, 1e-9), 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) > ratio else (lo, mid)
    rho = (lo + hi) / 2
    return StressorParams(r, min(1.0, m / rho), rho)


def describe(dose: Dose) -> dict[str, Any]:
    """The behaviour parameters of a dose (for the run log and ``posbias sim check``)."""
    sp = stressor_params(dose)
    out: dict[str, Any] = {"targets": dict(dose.targets)}
    for gate in ("flip", "phase", "order", "parity"):
        if dose.get(gate) is not None:
            out[f"{gate}_share"] = dosed_share(dose, gate)
    if dose.get("repetition") is not None or dose.get("stressor") is not None or dose.get("attack") is not None:
        out.update({"clean_loop_share": sp.r, "susceptible_share": sp.sigma, "rho": sp.rho})
    return out
