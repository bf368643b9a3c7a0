"""Exact metric definitions of docs/design.md section 4.

Every function here is the single implementation the probes, the CLI and the
report use. Inputs are validated first; errors name the parameter and what it
must be (scipy style). Definitions and the paper section each one implements are
in the docstrings.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import ConfigError

__all__ = [
    "STOPWORDS", "FragmentMatch", "consensus", "cyclic_orders", "dpb", "dpb_per_instance", "flip_rate",
    "fragment_coverage", "fragment_density", "fragment_tokenizer", "fragment_tokens", "fragments", "full_orders",
    "information_density", "information_entropy", "length_matched_repetition_rate", "max_ngram_count", "meg",
    "meg_per_instance", "position_weights", "repetition_intensity", "repetition_rate", "severity", "spr_margin",
]

# --------------------------------------------------------------------------- helpers


def _coverage_matrix(coverage: ArrayLike, *, name: str = "coverage") -> NDArray[np.float64]:
    try:
        arr = np.asarray(coverage, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"`{name}` must be a numeric (N, P) array; got {type(coverage).__name__}") from exc
    if arr.ndim != 2:
        raise ConfigError(f"`{name}` must be a 2-D (N, P) array (rows = instances, columns = slots); got shape "
                          f"{arr.shape}")
    if arr.shape[0] == 0:
        raise ConfigError(f"`{name}` must have at least one row (instance); got shape {arr.shape}")
    if arr.shape[1] < 2:
        raise ConfigError(f"`{name}` must have at least 2 columns (slots P >= 2); got P = {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"`{name}` must contain only finite values; found NaN or inf")
    if np.any(arr < 0):
        raise ConfigError(f"`{name}` must be non-negative (coverage is a share of reference content)")
    return arr


def _check_n(n: int, *, name: str = "n", lo: int = 1) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < lo:
        raise ConfigError(f"`{name}` must be an integer >= {lo}; got {n!r}")


def _check_text(text: object, *, name: str = "text") -> str:
    if not isinstance(text, str):
        raise ConfigError(f"`{name}` must be a str; got {type(text).__name__}")
    return text


def _ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    """The n-grams of ``text.split()``, after checking ``text`` and ``n``."""
    tokens = _check_text(text).split()
    _check_n(n)
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


# --------------------------------------------------------------------------- positional (multi-video paper, eq. 3-7)


def position_weights(P: int) -> NDArray[np.float64]:
    """Linear slot weights α_p = (2p − P − 1)/(P − 1), p = 1..P (multi-video paper eq. 3)."""
    _check_n(P, name="P")
    if P < 2:
        raise ConfigError(f"`P` must be >= 2 for directional weights; got {P}")
    p = np.arange(1, P + 1, dtype=float)
    return (2 * p - P - 1) / (P - 1)


def dpb_per_instance(coverage: ArrayLike, *, eps: float = 1e-8) -> NDArray[np.float64]:
    """Per-instance Directional Positional Bias (multi-video paper eq. 4).

    DPB_i = Σ_p α_p C_{i,p} / (Σ_p C_{i,p} + ε), α_p = (2p − P − 1)/(P − 1).
    Negative = earlier slots covered better (primacy), positive = recency. With ε = 0 an
    all-zero row is 0, the paper's value for every ε > 0 (and its limit as ε → 0), not 0/0.
    """
    cov = _coverage_matrix(coverage)
    if not (isinstance(eps, (int, float)) and eps >= 0 and math.isfinite(eps)):
        raise ConfigError(f"`eps` must be a finite float >= 0; got {eps!r}")
    alpha = position_weights(cov.shape[1])
    num, den = cov @ alpha, cov.sum(axis=1) + eps
    out: NDArray[np.float64] = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return out


def dpb(coverage: ArrayLike, *, eps: float = 1e-8) -> float:
    """Directional Positional Bias: mean over rows of DPB_i (multi-video paper eq. 5)."""
    return float(np.mean(dpb_per_instance(coverage, eps=eps)))


def meg_per_instance(coverage: ArrayLike) -> NDArray[np.float64]:
    """Per-instance Middle-Edge Gap, P = 4 only (multi-video paper eq. 6).

    MEG_i = (C_{i,2} + C_{i,3})/2 − (C_{i,1} + C_{i,4})/2. Negative = middle slots weaker.
    A difference of shares, so coverage must lie in [0, 1] (DPB, a ratio, is scale-free).
    """
    cov = _coverage_matrix(coverage)
    if cov.shape[1] != 4:
        raise ConfigError("`coverage` must have P = 4 columns for MEG (defined for four-video inputs only); got P = "
                          f"{cov.shape[1]}")
    if np.any(cov > 1):
        raise ConfigError(f"`coverage` must lie in [0, 1] for MEG (a share of reference content); found "
                          f"{float(cov.max())!r}")
    out: NDArray[np.float64] = (cov[:, 1] + cov[:, 2]) / 2 - (cov[:, 0] + cov[:, 3]) / 2
    return out


def meg(coverage: ArrayLike) -> float:
    """Middle-Edge Gap: mean over rows of MEG_i (multi-video paper eq. 7)."""
    return float(np.mean(meg_per_instance(coverage)))


def cyclic_orders(P: int) -> list[tuple[int, ...]]:
    """The P rotations of (0, …, P−1): each video sits at each slot exactly once (paper §3.2)."""
    _check_n(P, name="P")
    base = tuple(range(P))
    return [base[k:] + base[:k] for k in range(P)]


def full_orders(P: int) -> list[tuple[int, ...]]:
    """All P! permutations of (0, …, P−1) in lexicographic order (paper appendix C.6)."""
    _check_n(P, name="P")
    if P > 8:
        raise ConfigError(f"`P` must be <= 8 for full permutations ({P}! orders is too many); got {P}")
    return list(itertools.permutations(range(P)))


# --------------------------------------------------------------------------- News fragment coverage (NEWSROOM)

_FRAGMENT_TOKEN = re.compile(r"\w+|[^\w\s]")
FRAGMENT_TOKENIZERS = ("auto", "spacy", "regex")
_SPACY_EN: Any = None


class FragmentMatch(NamedTuple):
    """One greedy extractive fragment: start in the reference, start in the summary, length."""

    reference_start: int
    summary_start: int
    length: int


def fragment_tokenizer(tokenizer: str = "auto") -> str:
    """The tokenizer fragments use: ``"spacy"`` (NEWSROOM's, via ``spacy.blank("en")``) when
    the ``spacy`` extra is installed, else ``"regex"``; an explicit choice is checked."""
    if tokenizer not in FRAGMENT_TOKENIZERS:
        raise ConfigError(f"`tokenizer` must be one of {', '.join(FRAGMENT_TOKENIZERS)}; got {tokenizer!r}")
    if tokenizer == "regex":
        return "regex"
    try:
        import spacy  # noqa: F401
    except ImportError:
        if tokenizer == "spacy":
            raise ConfigError("`tokenizer` 'spacy' needs the spacy extra: "
                              "pip install 'pytest-posbias[spacy]'") from None
        return "regex"
    return "spacy"


def fragment_tokens(text: str, *, tokenizer: str = "auto") -> list[str]:
    r"""Lower-cased tokens for fragments.

    * ``spacy`` (default when installed): the tokens of spaCy's English tokenizer
      (``spacy.blank("en")``, rule-based, no model download), ``str(token).lower()``, as
      lil-lab/newsroom ``Fragments._tokenize``/``_normalize`` do (its ``en_core_web_sm``
      pipeline tokenizes with the same English rules; whitespace tokens are kept, as there).
      "U.S.", "3.14", "5,000", "10:30", "COVID-19" and URLs stay whole; "don't" → "do", "n't".
    * ``regex`` (fallback without spaCy, docs/design.md section 4):
      ``re.findall(r"\w+|[^\w\s]", text.lower())``; it splits those, so coverage can differ
      from NEWSROOM's on punctuation-heavy text.
    """
    global _SPACY_EN
    text = _check_text(text)
    if fragment_tokenizer(tokenizer) == "regex":
        return _FRAGMENT_TOKEN.findall(text.lower())
    if _SPACY_EN is None:
        import spacy

        _SPACY_EN = spacy.blank("en")
    return [str(t).lower() for t in _SPACY_EN.tokenizer(text)]


def fragments(reference: str, summary: str, *, tokenizer: str = "auto") -> list[FragmentMatch]:
    """NEWSROOM greedy fragments (lil-lab/newsroom ``analyze/fragments.py`` ``_match``).

    The reference plays NEWSROOM's "summary" argument and the generated summary its
    "article". For each reference position the longest match in the summary is kept,
    but after any match the summary scan jumps past it (``b_start = b_end``), exactly
    as the original, so a later, longer overlapping match can be missed.
    """
    a = fragment_tokens(_check_text(reference, name="reference"), tokenizer=tokenizer)
    b = fragment_tokens(_check_text(summary, name="summary"), tokenizer=tokenizer)
    matches: list[FragmentMatch] = []
    a_start = 0
    while a_start < len(a):
        best = FragmentMatch(a_start, 0, 0)
        b_start = 0
        while b_start < len(b):
            if a[a_start] == b[b_start]:
                a_end, b_end = a_start, b_start
                while a_end < len(a) and b_end < len(b) and b[b_end] == a[a_end]:
                    a_end += 1
                    b_end += 1
                if a_end - a_start > best.length:
                    best = FragmentMatch(a_start, b_start, a_end - a_start)
                b_start = b_end
            else:
                b_start += 1
        if best.length:
            matches.append(best)
        a_start += max(best.length, 1)
    return matches


def _fragment_sum(reference: str, summary: str, tokenizer: str, *, power: int) -> float:
    """Σ|f|^power / |reference tokens| over the greedy fragments f; 0 for an empty reference."""
    n_ref = len(fragment_tokens(_check_text(reference, name="reference"), tokenizer=tokenizer))
    return sum(m.length ** power for m in fragments(reference, summary, tokenizer=tokenizer)) / n_ref if n_ref else 0.0


def fragment_coverage(reference: str, summary: str, *, tokenizer: str = "auto") -> float:
    """Reference-fragment coverage (multi-video paper eq. 2; NEWSROOM ``Fragments.coverage``):
    Σ|f| / |reference tokens| over the greedy fragments f. 0 for an empty reference."""
    return _fragment_sum(reference, summary, tokenizer, power=1)


def fragment_density(reference: str, summary: str, *, tokenizer: str = "auto") -> float:
    """Fragment density (NEWSROOM ``Fragments.density``, Grusky et al. 2018 §4.1):
    Σ|f|² / |reference tokens| over the greedy fragments f. 0 for an empty reference."""
    return _fragment_sum(reference, summary, tokenizer, power=2)


# ------------------------------------------------------------- repetition (VideoSTF §3.1, official conventions)


def max_ngram_count(text: str, n: int = 5) -> int:
    """Largest count of any n-gram of ``text.split()``; 0 when there are fewer than n tokens (VideoSTF §3.1, R(Y))."""
    return max(Counter(_ngrams(text, n)).values(), default=0)


def repetition_rate(texts: Iterable[str], *, n: int = 5, tau: int = 1) -> float:
    """RR = (1/K) Σ_k 1[R(Y_k) > τ], R = max n-gram count (VideoSTF §3.1; defaults n = 5, τ = 1)."""
    _check_n(n)
    _check_n(tau, name="tau", lo=0)
    if isinstance(texts, str):
        raise ConfigError("`texts` must be a sequence of strings, not a single str")
    items = list(texts)
    if not items:
        raise ConfigError("`texts` must contain at least one text; got an empty sequence")
    flags = [max_ngram_count(_check_text(t, name="texts[i]"), n) > tau for t in items]
    return float(np.mean(flags))


def repetition_intensity(text: str, *, n: int = 1) -> float:
    """RI = Rep-n = 1 − |unique n-grams| / (M − n + 1); 0 when M < n (VideoSTF §3.1, default n = 1)."""
    grams = _ngrams(text, n)
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def information_entropy(text: str, *, n: int = 1) -> float:
    """IE = H(p) / log2(M − n + 1), H in bits over the n-gram frequency distribution (VideoSTF §3.1).

    0 when there are no n-grams or only one. Lies in [0, 1]; 1 = every n-gram distinct.
    """
    grams = _ngrams(text, n)
    total = len(grams)
    if total <= 1:
        return 0.0
    counts = np.fromiter(Counter(grams).values(), dtype=float)
    p = counts / total
    h = float(-(p * np.log2(p)).sum())
    return min(1.0, max(0.0, h / math.log2(total)))


def severity(text: str, finish_reason: str | None = None) -> str:
    """Severity class of one output (VideoSTF appendix C.1, max 5-gram count R):

    ``benign`` (R <= 1), ``ordinary`` (2 <= R <= 4), ``severe`` (R > 4 or finish reason ``length``).
    """
    _check_text(text)
    if finish_reason is not None and finish_reason not in ("stop", "length"):
        raise ConfigError(f"`finish_reason` must be None, 'stop' or 'length'; got {finish_reason!r}")
    r = max_ngram_count(text, 5)
    return "severe" if finish_reason == "length" or r > 4 else "ordinary" if r >= 2 else "benign"


# A fixed English stop-word list (the NLTK list), so information density is reproducible.
STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom this
    that these those am is are was were be been being have has had having do does did doing a an
    the and but if or because as until while of at by for with about against between into through
    during before after above below to from up down in out on off over under again further then
    once here there when where why how all any both each few more most other some such no nor not
    only own same so than too very s t can will just don should now d ll m o re ve y ain aren
    couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
    also one two onto""".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def information_density(text: str) -> float:
    """Distinct content words per 100 words (VideoSTF appendix C.2).

    Words = ``[a-z0-9]+('[a-z]+)?`` on the lower-cased text; content words = words not in
    the NLTK English stop-word list. 0 for a text without words.
    """
    words = _WORD.findall(_check_text(text).lower())
    if not words:
        return 0.0
    content = {w for w in words if w not in STOPWORDS}
    return 100.0 * len(content) / len(words)


def length_matched_repetition_rate(texts: Iterable[str], *, words: int, n: int = 5, tau: int = 1) -> tuple[float, int]:
    """Length-matched RR (VideoSTF appendix C.5, table 12): keep texts with at least ``words``
    whitespace tokens, truncate each to its first ``words`` tokens, return (RR, number kept).

    RR is NaN when no text reaches the length.
    """
    _check_n(words, name="words")
    _check_n(n)
    _check_n(tau, name="tau", lo=0)
    if isinstance(texts, str):
        raise ConfigError("`texts` must be a sequence of strings, not a single str")
    kept = [" ".join(t.split()[:words]) for t in texts if len(_check_text(t, name="texts[i]").split()) >= words]
    if not kept:
        return float("nan"), 0
    return repetition_rate(kept, n=n, tau=tau), len(kept)


# --------------------------------------------------------------------------- answer stability (phase paper)


def _answers_matrix(answers: ArrayLike) -> NDArray[np.int64]:
    try:
        arr = np.asarray(answers)
    except (TypeError, ValueError) as exc:
        raise ConfigError("`answers` must be an (N, K) integer array") from exc
    if arr.ndim != 2:
        raise ConfigError("`answers` must be a 2-D (N, K) array (rows = items, columns = conditions); got shape "
                          f"{arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] < 2:
        raise ConfigError("`answers` must have at least one row and at least 2 columns (conditions); got shape "
                          f"{arr.shape}")
    integral = np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))
    if not (np.issubdtype(arr.dtype, np.integer) or integral):
        raise ConfigError(f"`answers` must hold integer content indices; got dtype {arr.dtype}")
    if np.any(arr < 0):  # a lost answer is a lost unit, counted apart: a row of them would read as stable
        raise ConfigError("`answers` must hold content indices >= 0; a negative code (no parseable answer) is a lost "
                          "unit, not an answer")
    return arr.astype(np.int64)


def flip_rate(answers: ArrayLike) -> float:
    """Share of items (rows) whose answer is not constant across conditions (columns) (phase paper §3)."""
    arr = _answers_matrix(answers)
    return float(np.mean(np.any(arr != arr[:, :1], axis=1)))


def consensus(answers_row: ArrayLike) -> int:
    """Plurality content index over an item's option orderings; ties go to the lowest index.

    Negative values code "no parseable answer" and win only when the row has nothing else.
    """
    arr = np.asarray(answers_row)
    if arr.ndim != 1 or arr.size == 0:
        raise ConfigError(f"`answers_row` must be a non-empty 1-D sequence of content indices; got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ConfigError(f"`answers_row` must hold integer content indices; got dtype {arr.dtype}")
    valid = arr[arr >= 0]
    if valid.size == 0:
        return int(arr.min())
    values, counts = np.unique(valid, return_counts=True)  # values sorted ascending
    return int(values[int(np.argmax(counts))])  # argmax returns the first (lowest) of ties


def spr_margin(letter_logprobs: Mapping[str, float]) -> float:
    """Single-pass margin: top-1 minus top-2 probability of the letter distribution
    renormalised over the live letters (phase paper §4.3). 1.0 with one live letter.
    """
    if not isinstance(letter_logprobs, Mapping) or not letter_logprobs:
        raise ConfigError("`letter_logprobs` must be a non-empty mapping letter -> log-probability")
    lp = np.empty(len(letter_logprobs))
    for j, (k, v) in enumerate(letter_logprobs.items()):
        try:
            lp[j] = float(v)
        except (TypeError, ValueError):
            raise ConfigError(f"`letter_logprobs` values must be numbers (log-probabilities); got {k!r}: "
                              f"{v!r}") from None
    if np.any(np.isnan(lp)) or np.any(lp == np.inf):
        raise ConfigError("`letter_logprobs` values must be log-probabilities (finite or -inf); found NaN or +inf")
    if np.all(lp == -np.inf):
        raise ConfigError("`letter_logprobs` must give at least one letter a finite log-probability")
    p = np.exp(lp - lp.max())
    p /= p.sum()
    top = np.sort(p)[::-1]
    return 1.0 if p.size == 1 else float(top[0] - top[1])
