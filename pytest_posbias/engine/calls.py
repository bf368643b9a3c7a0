"""What a model call is: the :class:`Request` the engine sends (its key names everything that can
change the output), the :class:`Generation` a backend returns and the :class:`Backend` protocol.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeGuard

from .. import SCHEMA_VERSION
from ..errors import ConfigError
from ..video.compose import Part, part_from_dict, parts_key

WANTS = ("text", "letters", "both")
Accept = Callable[["Request", "Generation"], "str | None"]


@dataclass(frozen=True)
class Decoding:
    """Decoding parameters; ``temperature == 0`` means greedy."""

    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        for name, ok, what in (("max_new_tokens", lambda v: isinstance(v, int) and v >= 1, "be an integer >= 1"),
                               ("temperature", lambda v: 0.0 <= v <= 5.0, "lie in [0, 5]"),
                               ("top_p", lambda v: 0.0 < v <= 1.0, "lie in (0, 1]"),
                               ("top_k", lambda v: isinstance(v, int) and v >= 0, "be an integer >= 0"),
                               ("repetition_penalty", lambda v: 0.5 <= v <= 3.0, "lie in [0.5, 3]")):
            if not ok(getattr(self, name)):
                raise ConfigError(f"`{name}` must {what}; got {getattr(self, name)!r}")

    @property
    def greedy(self) -> bool:
        """True when decoding is greedy (``temperature == 0``): the seed then leaves the key."""
        return self.temperature == 0.0

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a JSON-ready dict (in the key and the run log)."""
        return asdict(self)


@dataclass(frozen=True)
class Request:
    """One model call. ``meta`` (probe name, item ids, slot order, ...) goes to the run log
    but not into the key: it cannot change the output."""

    model: str
    parts: tuple[Part, ...]
    decoding: Decoding = field(default_factory=Decoding)
    seed: int = 0
    want: str = "text"
    letters: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    replicate: int = 0  # > 0: decode the same input again as a separate call (the re-run floor)

    def __post_init__(self) -> None:
        if self.want not in WANTS:
            raise ConfigError(f"`want` must be one of {WANTS}; got {self.want!r}")
        if self.want != "text" and not self.letters:
            raise ConfigError("`letters` must be given when `want` asks for letter log-probabilities")

    @property
    def prompt_text(self) -> str:
        """The request's text parts, one per line."""
        return "\n".join(p.text for p in self.parts if p.kind == "text")  # type: ignore[union-attr]

    def key(self, identity: Mapping[str, Any]) -> str:
        """SHA-256 of what the request asks: the model identity, the parts, the decoding, the seed when
        sampling, the wanted output and letters, and a re-run's replicate number. Not the batch it runs
        in: in bf16 a batch of another shape can flip a near-tied greedy token (docs/gpus.md), and
        either answer is the model's, so a cached one is served whatever the batch size."""
        blob = json.dumps({
            "v": SCHEMA_VERSION,
            "model": dict(identity),
            "parts": parts_key(self.parts),
            "decoding": self.decoding.to_dict(),
            "seed": None if self.decoding.greedy else int(self.seed),
            "want": self.want,
            "letters": list(self.letters),
            **({"replicate": int(self.replicate)} if self.replicate else {}),
        }, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_log(self) -> dict[str, Any]:
        """The request as a run-log record's ``request`` field (:meth:`from_log` reads it back)."""
        return {
            "model": self.model,
            "parts": [p.to_dict() for p in self.parts],
            "decoding": self.decoding.to_dict(),
            "seed": self.seed,
            "want": self.want,
            "letters": list(self.letters),
            "meta": dict(self.meta),
            "replicate": self.replicate,
        }

    @classmethod
    def from_log(cls, d: Mapping[str, Any]) -> Request:
        """The request a run-log record holds (inverse of :meth:`to_log`)."""
        return cls(d["model"], tuple(part_from_dict(p) for p in d["parts"]), Decoding(**d["decoding"]), int(d["seed"]),
                   d["want"], tuple(d.get("letters", ())), dict(d.get("meta", {})), int(d.get("replicate", 0)))


@dataclass(frozen=True)
class Generation:
    """A backend's answer. ``finish_reason`` is ``stop``, ``length`` or ``error``; a failed call (``ok``
    false) has ``error`` saying what failed and never carries text to be scored. ``attempts`` counts
    sends (retries included; 0: never sent). ``n_tokens`` is the output tokens, ``prompt_tokens`` the
    whole prompt, of which ``visual_tokens`` are image/video tokens (None: unknown); ``input_form``
    is how frames were sent (``video`` or ``images``); ``server_seconds`` is the endpoint's own time."""

    text: str = ""
    n_tokens: int = 0
    finish_reason: str = "stop"
    letter_logprobs: Mapping[str, float] | None = None
    seconds: float = 0.0
    error: str | None = None
    attempts: int = 1
    prompt_tokens: int | None = None
    visual_tokens: int | None = None
    input_form: str | None = None
    server_seconds: float | None = None

    @property
    def ok(self) -> bool:
        """False for a failed call (``finish_reason == "error"``)."""
        return self.finish_reason != "error"

    def to_dict(self) -> dict[str, Any]:
        """The answer as strict JSON (a log-prob of -inf becomes None): cache rows and run-log records."""
        lp = None if self.letter_logprobs is None else {k: (None if v == -math.inf else v)
                                                        for k, v in self.letter_logprobs.items()}
        return {**vars(self), "letter_logprobs": lp}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Generation:
        """The answer a cache row or run-log record holds (inverse of :meth:`to_dict`). Raises ValueError
        naming the field when ``d`` is not the shape :meth:`to_dict` writes (:func:`generation_problem`),
        so a damaged row is never scored."""
        if (problem := generation_problem(d)) is not None:
            raise ValueError(f"not a stored answer: {problem}")
        lp = d.get("letter_logprobs")
        lp2 = None if lp is None else {k: (-math.inf if v is None else float(v)) for k, v in lp.items()}
        pt, vt, ss = (d.get(k) for k in ("prompt_tokens", "visual_tokens", "server_seconds"))
        return cls(d.get("text", ""), int(d.get("n_tokens", 0)), d.get("finish_reason", "stop"), lp2,
                   float(d.get("seconds", 0.0)), d.get("error"), int(d.get("attempts", 1)),
                   None if pt is None else int(pt), None if vt is None else int(vt), d.get("input_form"),
                   None if ss is None else float(ss))


FINISH_REASONS = ("stop", "length", "error")
INPUT_FORMS = ("video", "images")
_REQUIRED = ("text", "n_tokens", "finish_reason")  # what every stored answer has; the rest default when absent


def _count(v: object) -> bool:
    """An integer >= 0 (JSON ``true`` is a bool, not a count)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _finite(v: object) -> TypeGuard[int | float]:
    """A finite number (Python's JSON reader takes ``NaN`` and ``Infinity``)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _duration(v: object) -> bool:
    """A finite number of seconds >= 0."""
    return _finite(v) and v >= 0


def generation_problem(d: object) -> str | None:
    """What makes ``d`` not a stored :class:`Generation` (the dict :meth:`Generation.to_dict` writes), or
    None when it is one. A cache row is read back from a file anything may have written, so every field
    is checked for its type and range (the table below; ``letter_logprobs`` None or letters to finite
    numbers or None) before the answer reaches a probe, and a failed call must carry no text or
    log-probs (fail closed). Unknown keys are left alone; only :data:`_REQUIRED` must be present."""
    if not isinstance(d, Mapping):
        return f"a JSON {type(d).__name__}, not an object"
    if missing := [k for k in _REQUIRED if k not in d]:
        return f"missing {', '.join(missing)}"
    checks: dict[str, tuple[Callable[[object], bool], str]] = {
        "text": (lambda v: isinstance(v, str), "a string"),
        "n_tokens": (_count, "an integer >= 0"),
        "finish_reason": (lambda v: v in FINISH_REASONS, f"one of {', '.join(FINISH_REASONS)}"),
        "seconds": (_duration, "a finite number >= 0"),
        "error": (lambda v: v is None or isinstance(v, str), "null or a string"),
        "attempts": (_count, "an integer >= 0"),
        "prompt_tokens": (lambda v: v is None or _count(v), "null or an integer >= 0"),
        "visual_tokens": (lambda v: v is None or _count(v), "null or an integer >= 0"),
        "input_form": (lambda v: v is None or v in INPUT_FORMS, f"null or one of {', '.join(INPUT_FORMS)}"),
        "server_seconds": (lambda v: v is None or _duration(v), "null or a finite number >= 0"),
    }
    for name, (ok, what) in checks.items():
        if name in d and not ok(d[name]):
            return f"{name} is {d[name]!r}, not {what}"
    lp = d.get("letter_logprobs")
    if lp is not None:
        if not isinstance(lp, Mapping):
            return f"letter_logprobs is {lp!r}, not null or an object"
        for k, v in lp.items():
            if not isinstance(k, str) or not (v is None or _finite(v)):
                return f"letter_logprobs[{k!r}] is {v!r}, not null or a finite number"
    if d["finish_reason"] == "error" and (d["text"] or lp is not None):
        return "a failed call (finish_reason error) that carries text or log-probs"
    return None


class Backend(Protocol):
    """What the engine needs from a model backend (one per file under ``models/``)."""

    name: str
    max_batch_size: int
    supports_letter_logprobs: bool

    def identity(self) -> Mapping[str, Any]:
        """Model id, revision and settings: everything of the backend that can change an output."""

    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        """Text (and, for ``want='both'``, letter log-probs) for each request, in order."""

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        """Log-probabilities of each option letter at the answer position, one forward pass each."""

    def close(self) -> None:
        """Release the model."""

    # Optional: ``generate_stream(requests) -> Iterator[tuple[int, Generation]]`` yields each
    # request's index and answer as it completes (any order, each index once); the engine then
    # sends all of a model's requests in one stream instead of batches of ``max_batch_size``.
