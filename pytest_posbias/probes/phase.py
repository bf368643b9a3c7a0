"""The phase and option-order probe on multiple-choice items (the phase paper).

Protocol (``phase-paper-protocol-notes.md``): frames, question and options (letters A–E,
possibly permuted) go through the model's chat template; the instruction asks for the letter
only; greedy decoding, at most 4 new tokens. The answer is read from the option-letter
log-probs at the answer position when the backend gives them, else parsed from the text.
Orderings: the identity plus nine permutations seeded by (question id, ordering index); letters
map back to content through the inverse permutation, and an item's consensus answer is the
plurality content over its orderings (:func:`~..metrics.consensus`).

The gates read from one :class:`PhaseResult`: consensus flips between the deployed samplers and
between the S phase grids of b frames (with the re-run floor: phase 0 asked again); order flips,
accuracy swing and CircularEval unanimity over the orderings; PhaseFusion (the argmax of the mean
of the S content-space distributions) vs a single pass and the union pass under an origin shift
of 1/(2S) grid step; the single-pass margin (SPR) as an order-flip predictor.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.manifest import Manifest, McqItem
from ..data.problems import DataProblem
from ..engine import Decoding, Generation, Request
from ..errors import PosbiasError
from ..metrics import consensus, spr_margin
from ..scoring import usable
from ..video.compose import TextPart, VideoPart
from ..video.files import TooShortError
from ..video.frames import FrameSpec
from ..video.sampling import frame_indices, polyphase_grids
from . import conditions as C
from .settings import DEFAULTS, spec_kwargs

if TYPE_CHECKING:
    from ..gate_context import ProbeContext

INSTRUCTION = "Answer with the option's letter from the given choices directly."
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
CONSTANT = -2  # an answer index: lost as a constant answer (``scoring/usable.py``); -1: failed or no letter
CUT_OFF = -3  # an answer index: lost with no answer text at the token limit (``usable.cut_off_reason``)
_LETTER_RE = re.compile(r"\b([A-Z])\b")


_DEFAULTS = DEFAULTS["phase"]  # the one source of the probe's defaults (probes/settings.py)


@dataclass(frozen=True)
class PhaseSpec:
    """The phase/order probe's parameters; the defaults are the probe settings'
    (:data:`~.settings.DEFAULTS`): the phase paper's S = 3 phases × b = 8 frames, ten orderings."""

    items: int = _DEFAULTS["items"]
    budget: int = _DEFAULTS["budget"]
    phases: int = _DEFAULTS["phases"]
    orderings: int = _DEFAULTS["orderings"]
    samplers: tuple[str, ...] = tuple(_DEFAULTS["samplers"])
    resolution: int = _DEFAULTS["resolution"]
    max_new_tokens: int = _DEFAULTS["max_new_tokens"]

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> PhaseSpec:
        """The spec of validated ``[tool.posbias.probes.phase]`` settings (:func:`~.settings.settings_for`);
        a key they lack keeps its default."""
        return cls(**spec_kwargs("phase", cls, settings))

    def key(self) -> str:
        return repr(asdict(self))


def orderings(item: McqItem, k: int) -> list[tuple[int, ...]]:
    """Identity plus k − 1 permutations, each from a generator seeded by (question id, index)."""
    n = len(item.options)
    out = [tuple(range(n))]
    for j in range(1, k):
        seed = int.from_bytes(hashlib.sha256(f"{item.id}|{j}".encode()).digest()[:8], "little")
        out.append(tuple(int(x) for x in np.random.default_rng(seed).permutation(n)))
    return out


def mcq_prompt(item: McqItem, perm: Sequence[int]) -> str:
    """Question, options in the permuted order (position j shows content perm[j]), instruction."""
    return "\n".join([item.question, *[f"{LETTERS[j]}. {item.options[c]}" for j, c in enumerate(perm)], INSTRUCTION])


def parse_letter(text: str, letters: str) -> int | None:
    """Index of the first standalone option letter in a generated answer, or None."""
    t = text.strip().lstrip("(").strip()
    if t and t[0] in letters and not t[1:2].isalpha():  # "" is in every string: an empty answer has no letter
        return letters.index(t[0])
    for m in _LETTER_RE.finditer(text):
        if m.group(1) in letters:
            return letters.index(m.group(1))
    return None


@dataclass
class Answer:
    content: int  # chosen content index, -1 when unparseable
    probs: np.ndarray | None  # content-space distribution (renormalised over live letters), None in text mode
    margin: float | None


@dataclass
class PhaseResult:
    model: str
    spec: PhaseSpec
    items: list[McqItem]
    mode: str  # "logprobs" | "text"
    condition_answers: dict[str, np.ndarray] = field(default_factory=dict)  # condition -> (N, K) content indices
    # condition -> one (K, n_opt) array per item (identity conditions: K = 1; n_opt differs between items when the
    # manifest mixes 3- and 5-option questions; NaN rows: lost answers; logprobs mode only); "margin:<condition>" ->
    # one (K,) array of single-pass margins per item
    condition_probs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    unparseable: int = 0
    cut_off: int = 0  # answers lost with no text at the token limit (counted apart from ``unparseable``)
    errors: int = 0
    constant: int = 0  # answers lost as the same letter to distinct questions (``usable.constant_letters``)
    deterministic_backend: bool = False
    problems: list[str] = field(default_factory=list)
    calls: dict[str, Any] = field(default_factory=dict)
    planned: int = 0  # items drawn for this run (kept + those whose video could not be used)
    # condition -> per item, the frame indices its identity-ordering request showed: the flip gate loses an item for
    # a pair of samplers that show it the same frames (the probe asks every sampler at once, so it cannot drop it)
    condition_frames: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)

    def consensus(self, condition: str) -> np.ndarray:
        return np.array([consensus(row) for row in self.condition_answers[condition]], dtype=int)

    def correct(self) -> np.ndarray:
        return np.array([it.answer for it in self.items], dtype=int)


def _grid(ctx: ProbeContext, item: McqItem, condition: str, spec: PhaseSpec) -> list[int]:
    """Frame indices of a condition (:mod:`.conditions`); TooShortError (reported to the store) when
    the item's window holds fewer frames than the condition shows (S x budget for the union passes)."""
    info = ctx.store.info(item.path)
    T, fps = info.frame_count, info.fps
    c = C.Condition.parse(condition)
    windowed = item.start is not None or item.end is not None
    lo = max(0, round((item.start or 0) * fps)) if windowed else 0
    hi = min(T - 1, round(item.end * fps)) if item.end is not None else T - 1
    n = hi - lo + 1
    S, b = spec.phases, spec.budget
    needed = c.frames if c.frames is not None else S * b if c.kind in ("union", "union-shift") else b
    if n < needed:
        where = (f"item {item.id}'s window {item.start}-{item.end} s holds {max(n, 0)} of the clip's {T} frames"
                 if windowed else f"the clip has {T}")
        exc = TooShortError(item.path, f"too short for {needed} frames: {where}")
        ctx.store.report(exc)
        raise exc
    if c.kind in ("sampler", "budget"):
        return frame_indices(T, c.frames or b, convention=c.arg, fps=fps, start=item.start, end=item.end)
    grids = polyphase_grids(n, b, S, origin=Fraction(1, 2 * S) if c.kind in ("shift", "union-shift") else Fraction(0))
    if c.kind in ("phase", "shift"):
        return [lo + i for i in grids[c.phase]]
    if c.kind in ("union", "union-shift"):
        return [lo + grids[k % S][k // S] for k in range(S * b)]
    raise ValueError(f"unknown condition {condition!r}")


def _requests(ctx: ProbeContext, model: str, item: McqItem, condition: str, perms: Sequence[Sequence[int]],
              spec: PhaseSpec, want: str, replicate: int = 0) -> list[Request]:
    frames = ctx.store.clip(item.path, _grid(ctx, item, condition, spec), size=spec.resolution, aspect="max-side")
    meta = {"probe": "phase", "item": item.id, "condition": condition}
    return [mcq_request(model, item, frames, perm, spec, want, {**meta, "ordering": oi, "perm": list(perm)}, replicate)
            for oi, perm in enumerate(perms)]


def mcq_request(model: str, item: McqItem, frames: FrameSpec, perm: Sequence[int], spec: PhaseSpec, want: str,
                meta: dict[str, Any], replicate: int = 0) -> Request:
    """The request for ``item`` on ``frames`` with its options in order ``perm`` (the phase probe's and
    the multiple-choice search's, so the search's reference query is the probe's cached request)."""
    letters = tuple(LETTERS[: len(item.options)]) if want != "text" else ()
    parts = (VideoPart(frames, video_id=item.video), TextPart(mcq_prompt(item, perm)))
    return Request(model, parts, Decoding(max_new_tokens=spec.max_new_tokens), want=want, letters=letters,
                   replicate=replicate, meta=meta)


def _distinct_frames(ctx: ProbeContext, item: McqItem, item_reqs: Sequence[tuple[str, int, Any, Request]]) -> None:
    """TooShortError (reported to the store) when two phase grids (phase, shift, union) show ``item`` the
    same frames: a window shorter than the S x b design (phase 0 and 1 of 8 frames in 16) cannot
    change an answer, a flip of 0 by construction, so the item is lost, not measured as stable."""
    seen: dict[Any, str] = {}
    for name, oi, _perm, r in item_reqs:
        # the re-run asks the same frames on purpose; samplers are compared in pairs the probe does not know
        if oi == 0 and not r.replicate and C.Condition.parse(name).kind in ("phase", "shift", "union", "union-shift"):
            frames = r.parts[0].frames.frames  # type: ignore[union-attr]
            if frames in seen:
                exc = TooShortError(item.path, f"too short for distinct grids: {seen[frames]} and {name} show item "
                                               f"{item.id} the same frames")
                ctx.store.report(exc)
                raise exc
            seen[frames] = name


def _answer(gen: Generation, perm: Sequence[int]) -> Answer:
    n = len(perm)
    letters = LETTERS[:n]
    if not gen.ok:
        return Answer(-1, None, None)
    if gen.letter_logprobs:
        lp = {k: v for k, v in gen.letter_logprobs.items() if k in letters}
        arr = np.array([lp.get(letters[j], -math.inf) for j in range(n)], dtype=float)
        if np.all(np.isneginf(arr)):
            return Answer(-1, None, None)
        p = np.exp(arr - arr.max())
        p /= p.sum()
        content = np.zeros(n)
        content[list(perm)] = p
        return Answer(int(perm[int(np.argmax(p))]), content, spr_margin(lp))
    parsed = parse_letter(gen.text, letters)
    return Answer(-1 if parsed is None else int(perm[parsed]), None, None)


def accept_letter(req: Request, gen: Generation) -> str | None:
    """The engine's ``accept`` rule for a multiple-choice request: ``no_option_letter`` when neither
    the letter log-probabilities nor the text give one of the request's option letters (``answer_cut_off``
    when the text is empty at the token limit: :func:`~..scoring.usable.letter_reason`)."""
    n = len(req.meta.get("perm", ())) or len(req.letters)
    return usable.letter_reason(gen, LETTERS[:n], parse_letter)


def item_order(ctx: ProbeContext, manifest: Manifest) -> list[McqItem | DataProblem]:
    """The multiple-choice pool in a seeded random order; a sample of n is its first n items, so a
    sequential gate that draws more items extends the sample it already has. The pool holds the rejected
    multiple-choice lines too (:attr:`Manifest.bad_mcq`): one drawn is a planned item, lost as unusable data."""
    pool: list[McqItem | DataProblem] = [*manifest.mcq, *manifest.bad_mcq]
    return [pool[int(i)] for i in ctx.rng("phase-items").permutation(len(pool))]


def run_phase(ctx: ProbeContext, model: str, spec: PhaseSpec, manifest: Manifest, *, conditions: Sequence[str] = (),
              identity: Sequence[str] = (), rerun: bool = False, n_items: int | None = None) -> PhaseResult:
    """Run ``conditions`` in all orderings, ``identity`` conditions in the identity ordering only,
    and (``rerun``) phase 0 again as separate calls. Requests shared between gates are cached,
    so each gate asks only for what it needs."""
    before = ctx.engine.stats.snapshot()
    backend = ctx.engine.backend(model)
    mode = "logprobs" if getattr(backend, "supports_letter_logprobs", False) else "text"
    want = "letters" if mode == "logprobs" else "text"
    items = item_order(ctx, manifest)[: min(spec.items, n_items or spec.items)]
    ordered = list(conditions)
    identity_only = [c for c in identity if c not in ordered]
    res = PhaseResult(model, spec, [], mode, deterministic_backend=getattr(backend, "name", "") == "sim",
                      planned=len(items))
    plan: list[tuple[int, str, int, tuple[int, ...]]] = []
    reqs: list[Request] = []
    kept: list[McqItem] = []
    shown: list[dict[str, tuple[int, ...]]] = []  # per kept item: condition -> frame indices
    for item in items:
        if isinstance(item, DataProblem):
            res.problems.append(f"{item.item}: {item.message}")
            continue
        try:
            perms = orderings(item, spec.orderings)
            # (condition asked, its orderings, replicate, name its answers are kept under)
            asks = [(c, perms, 0, c) for c in ordered] + ([(C.phase(0), perms, 1, C.rerun(0))] if rerun else [])
            asks += [(c, perms[:1], 0, c) for c in identity_only]
            item_reqs = [(name, oi, tuple(ps[oi]), r) for cond, ps, replicate, name in asks
                         for oi, r in enumerate(_requests(ctx, model, item, cond, ps, spec, want, replicate))]
            _distinct_frames(ctx, item, item_reqs)
        except PosbiasError as exc:
            res.problems.append(f"item {item.id}: {exc}")
            continue
        plan += [(len(kept), cond, oi, perm) for cond, oi, perm, _r in item_reqs]
        reqs += [r for _c, _oi, _perm, r in item_reqs]
        kept.append(item)
        shown.append({name: tuple(i for _src, i in r.parts[0].frames.frames)  # type: ignore[union-attr]
                      for name, oi, _perm, r in item_reqs if oi == 0 and not r.replicate})
    res.items = kept
    res.condition_frames = {c: [f[c] for f in shown] for c in (shown[0] if shown else {})}
    gens = ctx.engine.run(reqs, probe="phase", accept=accept_letter)
    N = len(kept)
    # the same option letter (position) to distinct questions: lost, and withdrawn from the cache
    positions = [perm.index(c) if (c := _answer(g, perm).content) >= 0 else None
                 for (_ii, _c, _oi, perm), g in zip(plan, gens, strict=True)]
    correct = [perm.index(kept[ii].answer) if kept[ii].answer in perm else -1 for ii, _c, _oi, perm in plan]
    flags = usable.constant_letters(positions, correct, [ii for ii, _c, _oi, _p in plan])
    ctx.engine.reject(reqs, [usable.CONSTANT if f else None for f in flags], probe="phase")
    answers: dict[str, np.ndarray] = {}
    probs: dict[str, list[list[np.ndarray | None]]] = {}
    margins: dict[str, np.ndarray] = {}
    for (ii, cond, oi, perm), g, constant in zip(plan, gens, flags, strict=True):
        n_orders = spec.orderings if cond in ordered or cond == C.rerun(0) else 1
        if cond not in answers:
            answers[cond] = np.full((N, n_orders), -1, dtype=int)
            probs[cond] = [[None] * n_orders for _ in range(N)]
            margins[cond] = np.full((N, n_orders), np.nan)
        a = _answer(g, perm)
        if mode == "logprobs" and a.probs is None and a.content >= 0:  # a text letter where log-probs were asked
            a = Answer(-1, None, None)
        if a.content < 0 and usable.cut_off_reason(g):
            a = Answer(CUT_OFF, None, None)
            res.cut_off += 1
        res.errors += int(not g.ok)
        res.unparseable += int(g.ok and a.content == -1)
        if constant:
            a = Answer(CONSTANT, None, None)
            res.constant += 1
        answers[cond][ii, oi] = a.content
        probs[cond][ii][oi] = a.probs
        if a.margin is not None:
            margins[cond][ii, oi] = a.margin
    res.condition_answers = answers
    for cond, rows in probs.items():
        if any(p is not None for row in rows for p in row):  # logprobs mode: a lost answer's distribution is NaN
            res.condition_probs[cond] = [np.array([np.full(len(kept[i].options), np.nan) if p is None else p
                                                   for p in row], dtype=float) for i, row in enumerate(rows)]
    res.condition_probs.update({f"margin:{c}": list(m) for c, m in margins.items()})
    res.calls = ctx.engine.stats.since(before)
    _log(ctx, res)
    return res


def pair_flips(res: PhaseResult, a: str, b: str) -> np.ndarray:
    """Per item: 1 when the consensus answers of conditions a and b differ."""
    return np.asarray(res.consensus(a) != res.consensus(b), dtype=int)


def any_flips(res: PhaseResult, conditions: Sequence[str]) -> np.ndarray:
    cons = np.stack([res.consensus(c) for c in conditions], axis=1)
    return np.asarray(np.any(cons != cons[:, :1], axis=1), dtype=int)


def order_flips(res: PhaseResult, condition: str = C.phase(0)) -> np.ndarray:
    ans = res.condition_answers[condition]
    return np.asarray(np.any(ans != ans[:, :1], axis=1), dtype=int)


def order_accuracy(res: PhaseResult, condition: str = C.phase(0)) -> dict[str, float]:
    ans = res.condition_answers[condition]
    correct = ans == res.correct()[:, None]
    per_order = correct.mean(axis=0)
    return {"accuracy_identity": float(per_order[0]), "swing": float(per_order.max() - per_order.min()),
            "circular_unanimity": float(np.all(correct, axis=1).mean()), "consensus_accuracy":
            float((res.consensus(condition) == res.correct()).mean())}


def fused(res: PhaseResult, conditions: Sequence[str]) -> np.ndarray | None:
    """PhaseFusion answers: argmax of the mean content-space distribution over the S grids (identity
    ordering); -1 for an item with a lost answer among them (its distribution is NaN)."""
    if not all(c in res.condition_probs for c in conditions):
        return None
    means = [np.mean([res.condition_probs[c][i][0] for c in conditions], axis=0) for i in range(len(res.items))]
    return np.array([int(np.argmax(m)) if np.isfinite(m).all() else -1 for m in means], dtype=int)


def identity_answer(res: PhaseResult, condition: str) -> np.ndarray:
    """Answers at the identity ordering (ordering 0)."""
    return np.asarray(res.condition_answers[condition][:, 0], dtype=int)


def fusion_changes(res: PhaseResult) -> dict[str, Any]:
    """Changed-answer indicators under the origin shift: single pass, union pass, fusion."""
    S = res.spec.phases
    single = (identity_answer(res, C.phase(0)) != identity_answer(res, C.shift(0))).astype(int)
    union = (identity_answer(res, C.UNION) != identity_answer(res, C.UNION_SHIFT)).astype(int)
    f0 = fused(res, C.phases(S))
    f1 = fused(res, C.shifts(S))
    fusion = None if f0 is None or f1 is None else (f0 != f1).astype(int)
    return {"single": single, "union": union, "fusion": fusion}


def margin_auroc(res: PhaseResult, condition: str = C.phase(0)) -> dict[str, Any]:
    """AUROC of the single-pass margin (identity ordering) for predicting an order flip
    (low margin = flip predicted), via the Mann–Whitney U statistic; risk–coverage points."""
    key = f"margin:{condition}"
    if key not in res.condition_probs:
        return {"auroc": None}
    m = np.array([row[0] for row in res.condition_probs[key]], dtype=float)
    flips = order_flips(res, condition).astype(bool)
    ok = ~np.isnan(m)
    m, flips = m[ok], flips[ok]
    out: dict[str, Any] = {"n": int(ok.sum()), "auroc": None}
    if 0 < flips.sum() < flips.size:
        # imported on use: importing the probes (the xdist controller does) stays cheap
        from scipy import stats as st

        u = st.mannwhitneyu(-m[flips], -m[~flips], alternative="two-sided").statistic
        out["auroc"] = float(u / (flips.sum() * (~flips).sum()))
    correct = (identity_answer(res, condition)[ok] == res.correct()[ok])
    order = np.argsort(-m, kind="stable")
    out["risk_coverage"] = [{"coverage": cov, "accuracy": float(correct[order[:max(1, round(cov * m.size))]].mean())
                             if m.size else None} for cov in (0.2, 0.4, 0.6, 0.8, 1.0)]
    return out


def _log(ctx: ProbeContext, res: PhaseResult) -> None:
    for i, item in enumerate(res.items):
        ctx.observe("phase", {"type": "item", "model": res.model, "item": item.id, "video": item.video,
                              "kind": item.kind, "tags": list(item.tags), "answer": item.answer,
                              "answers": {c: a[i].tolist() for c, a in res.condition_answers.items()}})
    ctx.observe("phase", {"type": "summary", "model": res.model, "settings": asdict(res.spec), "mode": res.mode,
                          "n_items": len(res.items), "unparseable": res.unparseable, "cut_off": res.cut_off,
                          "errors": res.errors,
                          "deterministic_backend": res.deterministic_backend, "problems": res.problems,
                          "calls": res.calls})
