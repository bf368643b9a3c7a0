"""What counts as a usable answer, per probe: an answer that falls short is a *lost unit* with its
reason, never scored (docs/design.md section 5). A *word* is a whitespace token holding a letter.
Each rule is a function whose docstring gives its formula:

* description / summary: :func:`text_reason` (``empty_answer``, ``too_few_words``,
  ``mostly_not_words``) and :func:`echo_reason` (``prompt_echo``);
* any generated answer: :func:`cut_off_reason` (``answer_cut_off``: no answer text within the token
  limit, as when a reasoning model's thinking uses it up);
* multiple-choice answer: :func:`letter_reason` (``no_option_letter``);
* multi-slot summary: :func:`slots_reason` (``one_slot_addressed``);
* the same answer to distinct inputs, a model that does not look at its input: :func:`constant_text`
  and :func:`constant_letters` (``constant_answer``; under permuted option orders a model that reads
  the options spreads its letters as the correct letters are spread).

Every bound is above 0.05 = 1 − the default measurement floor, so a model whose answers trip a
constant rule loses more than 5% of its units and cannot pass a gate in either mode.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

MIN_WORDS = 3
MIN_WORD_SHARE = 0.5
TEXT_CONSTANT_BOUND = 0.5
LETTER_CONSTANT_BOUND = 0.9
MIN_LETTER_REQUESTS = 8

EMPTY, FEW_WORDS, NOT_WORDS, NO_LETTER, ONE_SLOT, CONSTANT = (
    "empty_answer", "too_few_words", "mostly_not_words", "no_option_letter", "one_slot_addressed", "constant_answer")
PROMPT_ECHO, CUT_OFF = "prompt_echo", "answer_cut_off"

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+")  # a run of letters and digits


def text_reason(text: str, *, min_words: int = MIN_WORDS, min_share: float = MIN_WORD_SHARE) -> str | None:
    """Why a description or summary is not usable, or None when it is.

    With T = ``text.split()`` and W the tokens holding a letter: ``empty_answer`` when |T| = 0,
    ``too_few_words`` when |W| < ``min_words``, ``mostly_not_words`` when |W| / |T| < ``min_share``."""
    if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 1:
        raise ValueError(f"`min_words` must be an integer >= 1; got {min_words!r}")
    if not 0.0 <= min_share <= 1.0:
        raise ValueError(f"`min_share` must lie in [0, 1]; got {min_share!r}")
    if not (tokens := text.split()):
        return EMPTY
    n_words = sum(1 for t in tokens if any(ch.isalpha() for ch in t))
    if n_words < min_words:
        return FEW_WORDS
    if n_words / len(tokens) < min_share:
        return NOT_WORDS
    return None


def echo_words(text: str) -> list[str]:
    """The normalised word sequence compared by :func:`echo_reason`: the lower-cased (case-folded)
    runs of letters and digits, in order (punctuation, markup and spacing dropped)."""
    return _WORD.findall(text.casefold())


def echo_reason(text: str, prompt: str) -> str | None:
    """``prompt_echo`` when an answer only repeats its prompt, else None.

    With A = :func:`echo_words` of ``text`` and Q that of ``prompt`` (the request's text parts): ``prompt_echo`` when A
    is non-empty and occurs contiguously in Q (A = Q[i : i + |A|] for some i), the whole instruction or a run of it. An
    answer that shares words with the prompt but says anything the prompt does not ("The video shows a man ...") stays
    usable; an answer with no word is :func:`text_reason`'s case."""
    a, q = echo_words(text), echo_words(prompt)
    if not a or len(a) > len(q):
        return None
    n = len(a)
    return PROMPT_ECHO if any(q[i : i + n] == a for i in range(len(q) - n + 1)) else None


def description_reason(text: str, prompt: str) -> str | None:
    """Why a description or summary asked by ``prompt`` is not usable, or None when it is:
    :func:`text_reason`, then :func:`echo_reason`."""
    return text_reason(text) or echo_reason(text, prompt)


def cut_off_reason(gen: Any) -> str | None:
    """``answer_cut_off`` when a succeeded generation stopped at its token limit (``finish_reason``
    ``length``) with no answer text: a reasoning model whose thinking used the whole ``max_new_tokens``
    (its unclosed think block is never the answer), which a larger limit may cure; else None."""
    return CUT_OFF if gen.ok and gen.finish_reason == "length" and not gen.text.strip() else None


def generation_text_reason(gen: Any, prompt: str = "") -> str | None:
    """:func:`cut_off_reason`, then :func:`description_reason` of a generation's text under ``prompt``
    (the request's text parts; with none given only :func:`text_reason` applies); None for a failed
    call (a failed call is counted as a generation error, not as an unusable answer)."""
    return (cut_off_reason(gen) or description_reason(gen.text, prompt)) if gen.ok else None


def letter_reason(gen: Any, letters: Sequence[str], parse: Any) -> str | None:
    """Why a multiple-choice answer is not usable (``no_option_letter``), or None when it is.

    With letter log-probabilities: usable when some letter of ``letters`` has a finite one; else
    ``parse(text, letters)`` (the probe's parser) must find a letter, an empty text at the token limit
    being :func:`cut_off_reason`'s ``answer_cut_off``. None for a failed call."""
    if not gen.ok:
        return None
    lp: Mapping[str, float] | None = gen.letter_logprobs
    if lp:
        live = [v for k, v in lp.items() if k in letters and v is not None and v > -math.inf]
        return None if live else NO_LETTER
    return None if parse(gen.text, "".join(letters)) is not None else cut_off_reason(gen) or NO_LETTER


def slots_reason(addressed: int, P: int) -> str | None:
    """``one_slot_addressed`` when a summary asked for ``P`` >= 2 slots addresses at most one."""
    return ONE_SLOT if P >= 2 and addressed <= 1 else None


def normalise(text: str) -> str:
    """The form compared by the constant rules: case-folded, whitespace runs collapsed, stripped."""
    return _SPACE.sub(" ", text.casefold()).strip()


def constant_text(answers: Sequence[str | None], inputs: Sequence[Hashable], *,
                  bound: float = TEXT_CONSTANT_BOUND) -> list[bool]:
    """Per request: True when its answer is the modal answer of a constant-answer model.

    ``answers[j]`` is request j's text (None: not measured, ignored); ``inputs[j]`` the distinct
    input it asks about. Over the m measured requests and their n inputs, a* = the modal normalised
    answer: flagged when n >= 2, count(a*) / m > ``bound`` and |inputs(a*)| / n > ``bound``."""
    if len(answers) != len(inputs):
        raise ValueError(f"`answers` and `inputs` must have the same length; got {len(answers)} and {len(inputs)}")
    measured = [(normalise(a), i) for a, i in zip(answers, inputs, strict=True) if a is not None]
    seen = {i for _, i in measured}
    if len(seen) < 2:
        return [False] * len(answers)
    modal, k = max(Counter(a for a, _ in measured).items(), key=lambda kv: (kv[1], kv[0]))
    if k / len(measured) <= bound or len({i for a, i in measured if a == modal}) / len(seen) <= bound:
        return [False] * len(answers)
    return [a is not None and normalise(a) == modal for a in answers]


def constant_letters(letters: Sequence[int | None], correct: Sequence[int], inputs: Sequence[Hashable], *,
                     bound: float = LETTER_CONSTANT_BOUND, min_requests: int = MIN_LETTER_REQUESTS) -> list[bool]:
    """Per request: True when its option letter (a position index, None when not measured) is the
    modal letter of a model that answers one letter whatever the question.

    With m measured requests over at least 2 distinct ``inputs`` and the modal letter given in a
    share s of them: flagged when m >= ``min_requests``, s > ``bound`` and the modal letter is the
    correct one (``correct[j]``, its position in request j) in at most a share ``bound`` of them."""
    if not len(letters) == len(correct) == len(inputs):
        raise ValueError(f"`letters`, `correct` and `inputs` must have the same length; got {len(letters)}, "
                         f"{len(correct)} and {len(inputs)}")
    measured = [j for j, x in enumerate(letters) if x is not None and x >= 0]
    if len(measured) < min_requests or len({inputs[j] for j in measured}) < 2:
        return [False] * len(letters)
    counts = Counter(letters[j] for j in measured)
    modal, k = max(counts.items(), key=lambda kv: (kv[1], -int(kv[0] or 0)))
    if k / len(measured) <= bound or sum(1 for j in measured if correct[j] == modal) / len(measured) > bound:
        return [False] * len(letters)
    return [x is not None and x == modal for x in letters]


__all__ = ["CONSTANT", "CUT_OFF", "EMPTY", "FEW_WORDS", "LETTER_CONSTANT_BOUND", "MIN_LETTER_REQUESTS", "MIN_WORDS",
           "MIN_WORD_SHARE", "NOT_WORDS", "NO_LETTER", "ONE_SLOT", "PROMPT_ECHO", "TEXT_CONSTANT_BOUND",
           "constant_letters", "constant_text", "cut_off_reason", "description_reason", "echo_reason", "echo_words",
           "generation_text_reason", "letter_reason", "normalise", "slots_reason", "text_reason"]
