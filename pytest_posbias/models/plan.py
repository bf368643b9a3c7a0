"""``posbias plan``, the recording side: a backend that answers no request but counts it.

With ``--posbias-plan DIR`` the run context gives every model a :class:`PlanBackend`: the probes
send their requests through the engine as usual, and the plan backend records each one (gate
test, frames, prompt and visual tokens, expected output tokens) and answers with an empty
Generation carrying those counts. Nothing is scored, so a plan run uses the fixed-sample design
and a throw-away cache.

Prompt tokens come from the model's own processor where it loads without weights (the same
:class:`.hf_inputs.InputBuilder` a run uses), else from :func:`estimate_prompt_tokens`. Output
tokens: ``max_new_tokens`` for text (an upper bound), none for letter scoring, unless
``--measure`` gave the model's measured mean output length.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ..engine import Generation, Request
from ..video.compose import ImagePart, TextPart, VideoPart
from ..video.frames import FrameStore
from .registry import ResolvedModel

CURRENT_TEST: ContextVar[str] = ContextVar("posbias_plan_test", default="")
"""The suite test whose requests come next: set around each call of a test that uses ``posbias_run``
(:func:`current_test`); plan mode records requests under it."""
CURRENT_FAMILY: ContextVar[str] = ContextVar("posbias_plan_family", default="")
"""The probe result (a probe at one setting, its looks together) whose requests come next: set while
the run context computes one; plan mode records it with each request."""
ESTIMATE_CHARS_PER_TOKEN = 4.0  # English text in a BPE vocabulary (OpenAI's rule of thumb)
ESTIMATE_TEMPLATE_TOKENS = 16  # chat-template tokens around one user turn
ESTIMATE_PATCH = 28  # Qwen2-VL family: 14-px patches merged 2x2 -> one token per 28x28 pixels ...
ESTIMATE_TEMPORAL = 2  # ... and two frames per temporal patch
ESTIMATE_NATIVE_SIZE = 448  # frames kept at native size: counted as 448 px


DESIGN_FILE = "design.json"  # in the plan's folder: the design the project configures


def write_configured_design(plan_dir: str | Path, *, sequential: bool) -> None:
    """Record in the plan's folder whether the project's runs use the sequential design: the plan run
    itself uses the fixed design (every gate at its maximum), and ``posbias plan`` reports the expected
    share of the configured one (``[tool.posbias] sequential``, and fixed under a baseline from the
    command line or ``[tool.posbias] baseline``)."""
    Path(plan_dir).mkdir(parents=True, exist_ok=True)
    (Path(plan_dir) / DESIGN_FILE).write_text(json.dumps({"sequential": sequential}))


def configured_sequential(plan_dir: str | Path) -> bool:
    """Whether the planned project's runs use the sequential design (:func:`write_configured_design`;
    True where the plan run did not record it)."""
    path = Path(plan_dir) / DESIGN_FILE
    return bool(json.loads(path.read_text()).get("sequential", True)) if path.is_file() else True


READS_FILE = "reads-{worker}.jsonl"  # in the plan's folder: which test read which probe result


def record_read(plan_dir: str | Path, *, worker: str, test: str, family: str = "",
                keys: Sequence[str] = ()) -> None:
    """Record that the suite test ``test`` read (or computed) a probe result of ``family``, or asked for the
    requests of cache ``keys``: ``posbias plan`` sizes a request by the furthest look of the tests that
    read it (:func:`pytest_posbias.cli.plan.aggregate`)."""
    with (Path(plan_dir) / READS_FILE.format(worker=worker)).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"test": test, "family": family, "keys": list(keys)}) + "\n")


@contextlib.contextmanager
def current_test(nodeid: str) -> Iterator[None]:
    """The requests made inside the block belong to the suite test ``nodeid`` (the plugin wraps each
    call of a test that uses ``posbias_run``)."""
    token = CURRENT_TEST.set(nodeid)
    try:
        yield
    finally:
        CURRENT_TEST.reset(token)


def estimate_prompt_tokens(request: Request) -> tuple[int, int]:
    """(prompt, visual) tokens estimated without a processor: text = chars / 4 + 16 template
    tokens; a video frame of side s (448 when native) = ceil(s/28)^2 / 2 tokens (Qwen2-VL-style
    14-px patches merged 2x2, two frames per temporal patch); a separator image ceil(s/28)^2."""
    chars = sum(len(p.text) + 1 for p in request.parts if isinstance(p, TextPart))
    visual = 0
    for p in request.parts:
        if isinstance(p, VideoPart):
            side = p.frames.size or ESTIMATE_NATIVE_SIZE
            visual += math.ceil(side / ESTIMATE_PATCH) ** 2 * math.ceil(len(p.frames) / ESTIMATE_TEMPORAL)
        elif isinstance(p, ImagePart):
            visual += math.ceil(p.size / ESTIMATE_PATCH) ** 2
    text = math.ceil(chars / ESTIMATE_CHARS_PER_TOKEN) + ESTIMATE_TEMPLATE_TOKENS
    return text + visual, visual


class TokenCounter:
    """Prompt and visual tokens of a request: the model's processor where loadable, else the
    estimate; ``source`` says which (``processor`` or ``estimate``), ``why`` why not the processor."""

    def __init__(self, resolved: ResolvedModel, store: FrameStore) -> None:
        self.builder: Any = None
        self.source = "estimate"
        self.why = f"{resolved.backend} backend: no local processor"
        self._memo: dict[Any, tuple[int, int]] = {}
        self._lock = threading.Lock()
        if resolved.backend == "hf":
            try:
                from transformers import AutoProcessor

                from .hf_inputs import InputBuilder

                processor = AutoProcessor.from_pretrained(resolved.target)
                self.builder = InputBuilder(resolved, store, processor)
                self.source, self.why = "processor", ""
            except Exception as exc:
                self.why = f"processor of {resolved.target} not loadable offline ({type(exc).__name__})"

    @staticmethod
    def _key(request: Request) -> Any:
        """What the count depends on: the texts and each visual part's shape (not pixel values)."""
        parts: list[Any] = []
        for p in request.parts:
            if isinstance(p, TextPart):
                parts.append(("t", p.text))
            elif isinstance(p, VideoPart):
                fs = p.frames
                src = "" if fs.aspect == "stretch" and fs.size else tuple(getattr(s, "path", "") for s in fs.sources)
                parts.append(("v", len(fs), fs.size, fs.aspect, src, tuple(fs.frames) if fs.fps else len(fs)))
            else:
                parts.append(("i", getattr(p, "size", 0)))
        return tuple(parts)

    def count(self, request: Request, *, prefill: str = "") -> tuple[int, int]:
        """(prompt, visual) tokens of ``request`` (memoised per :meth:`_key`)."""
        if self.builder is None:
            return estimate_prompt_tokens(request)
        key = (self._key(request), prefill)
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        inputs = self.builder._inputs([request], prefill=prefill)
        out = self.builder.token_counts(inputs)[0]
        with self._lock:
            self._memo[key] = out
        return out


def output_key(request: Request) -> str:
    """The group a measured output length applies to: probe, wanted output, cap and decoding."""
    d = request.decoding
    return f"{request.meta.get('probe', '?')}|{request.want}|{d.max_new_tokens}|T{d.temperature:g}"


class PlanBackend:
    """Records requests instead of calling a model (see the module docstring)."""

    plans_only = True  # its answers are no model's: a probe steered by answers plans its longest run instead

    def __init__(self, resolved: ResolvedModel, store: FrameStore, out_dir: str | Path, *, worker: str = "main",
                 output_lengths: Mapping[str, float] | None = None) -> None:
        self.resolved = resolved
        self.counter = TokenCounter(resolved, store)
        self.name = _real_attr(resolved, "name", resolved.backend)
        self.supports_letter_logprobs = bool(_real_attr(resolved, "supports_letter_logprobs", False))
        self.max_batch_size = 64
        self.output_lengths = dict(output_lengths or {})
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self._fh = (out / f"requests-{worker}.jsonl").open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._identity = {"backend": "plan", "model": resolved.spec, "tokens": self.counter.source}

    def identity(self) -> Mapping[str, Any]:
        """Backend ``plan``, the model spec and the token source."""
        return self._identity

    def _record(self, r: Request, prompt: int, visual: int, output: int) -> None:
        frames = sum(len(p.frames) for p in r.parts if isinstance(p, VideoPart))  # separator images not counted
        row = {"test": CURRENT_TEST.get(), "family": CURRENT_FAMILY.get(), "key": r.key(self._identity),
               "model": self.resolved.spec,
               "probe": r.meta.get("probe", ""),
               "want": r.want, "frames": frames, "prompt_tokens": prompt, "visual_tokens": visual,
               "output_tokens": output, "max_new_tokens": r.decoding.max_new_tokens, "group": output_key(r),
               "token_source": self.counter.source, "request": r.to_log()}
        with self._lock:
            self._fh.write(json.dumps(row, sort_keys=True, default=str) + "\n")
            self._fh.flush()

    def _answer(self, r: Request, *, scoring: bool) -> Generation:
        """Record ``r``; an empty answer with its planned token counts (uniform letter log-probs where asked)."""
        p, v = self.counter.count(r, prefill=self.resolved.prefill if scoring else "")
        planned = self.output_lengths.get(output_key(r), r.decoding.max_new_tokens)
        n = 0 if scoring or r.want == "letters" else round(planned)
        self._record(r, p, v, n)
        lp = {letter: -math.log(len(r.letters)) for letter in r.letters} if scoring or r.want == "both" else None
        return Generation("", n, "stop" if scoring else "length", lp, 0.0, prompt_tokens=p, visual_tokens=v)

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """Records each request; an empty answer with the planned token counts."""
        return [self._answer(r, scoring=False) for r in requests]

    def score_generations(self, requests: Sequence[Request]) -> list[Generation]:
        """Records each letter-scoring request; uniform letter log-probs with its token counts."""
        return [self._answer(r, scoring=True) for r in requests]

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        """:meth:`score_generations`' letter log-probs."""
        return [dict(g.letter_logprobs or {}) for g in self.score_generations(requests)]

    def close(self) -> None:
        """Close the request file."""
        with self._lock:
            self._fh.close()


def _real_attr(resolved: ResolvedModel, attr: str, default: Any) -> Any:
    """A class attribute of the backend the run would use (name, letter-score support), without loading it."""
    try:
        if resolved.backend == "hf":
            from .hf import HFBackend as cls
        elif resolved.backend == "sim":
            from .sim import SimBackend as cls  # type: ignore[assignment]
        else:
            from .openai_backend import OpenAIBackend as cls  # type: ignore[assignment]
    except ImportError:
        return default
    return getattr(cls, attr, default)
