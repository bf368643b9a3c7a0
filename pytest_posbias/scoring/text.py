"""Text helpers shared by the scorers: sentences, content words, TF-IDF cosine."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from ..metrics import _WORD, STOPWORDS

_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9*])")


def sentences(text: str) -> list[str]:
    """Sentences of a text: split after . ! ? followed by space and a capital/digit/quote."""
    return [s.strip() for s in _SPLIT.split(text.strip()) if s.strip()]


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Words that are not English stop words."""
    return [w for w in words(text) if w not in STOPWORDS]


def tfidf_cosine(query: str, documents: Sequence[str]) -> list[float]:
    """Cosine similarity of ``query`` to each document on TF-IDF of content words.

    IDF is fitted on the documents (smooth: log((1 + N)/(1 + df)) + 1), as scikit-learn's
    TfidfVectorizer(smooth_idf=True) does; term frequency is the raw count.
    """
    docs = [Counter(content_words(d)) for d in documents]
    q = Counter(content_words(query))
    n = len(docs)
    df = Counter(t for d in docs for t in d)
    idf = {t: math.log((1 + n) / (1 + df.get(t, 0))) + 1 for t in set(df) | set(q)}

    def vec(c: Counter[str]) -> dict[str, float]:
        return {t: k * idf[t] for t, k in c.items()}

    qv = vec(q)
    qn = math.sqrt(sum(v * v for v in qv.values()))
    out = []
    for d in docs:
        dv = vec(d)
        dn = math.sqrt(sum(v * v for v in dv.values()))
        dot = sum(qv[t] * dv.get(t, 0.0) for t in qv)
        out.append(dot / (qn * dn) if qn > 0 and dn > 0 else 0.0)
    return out
