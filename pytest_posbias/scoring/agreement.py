"""Judge agreement with human coverage labels (multi-video paper appendix A.3, table 7).

Input: a CSV with a ``reference`` column (reference sentences, one per line inside the cell), a ``summary`` column and
one or more human columns named ``human*`` holding each annotator's coverage score in [0, 1]. Output: Pearson and
Spearman correlations of each pair of annotators, and of the judge with the mean human score (scipy.stats).
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as st

from ..errors import ConfigError
from .judges import Judge


@dataclass(frozen=True)
class AgreementRow:
    pair: str
    n: int
    pearson: float
    spearman: float


def read_labels(path: str | Path) -> tuple[list[list[str]], list[str], dict[str, list[float]]]:
    """(reference sentences, summary, human scores by column) of each row of a labels CSV; ConfigError
    naming the file (and line) otherwise."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such labels file")
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames or []
            humans = [f for f in fields if f.lower().startswith("human")]
            if [c for c in ("reference", "summary") if c not in fields] or not humans:
                raise ConfigError(f"{p}: needs columns reference, summary and at least one human* column; has {fields}")
            refs: list[list[str]] = []
            sums: list[str] = []
            scores: dict[str, list[float]] = {h: [] for h in humans}
            for n, row in enumerate(reader, start=2):
                try:
                    vals = {h: float(row[h]) for h in humans}
                except (TypeError, ValueError):
                    raise ConfigError(f"{p}:{n}: human scores must be numbers in [0, 1]") from None
                if any(not 0 <= v <= 1 for v in vals.values()):
                    raise ConfigError(f"{p}:{n}: human scores must lie in [0, 1]")
                refs.append([s.strip() for s in (row["reference"] or "").splitlines() if s.strip()])
                sums.append(row["summary"] or "")
                for h, v in vals.items():
                    scores[h].append(v)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start}); "
                          "save the labels file as UTF-8 CSV") from None
    except csv.Error as exc:
        raise ConfigError(f"{p}: not a readable CSV file ({exc})") from None
    return refs, sums, scores


def agreement(path: str | Path, judge: Judge) -> list[AgreementRow]:
    """Pairwise human agreement and judge vs mean human (Pearson, Spearman)."""
    refs, sums, scores = read_labels(path)
    judged = judge.score(list(zip(refs, sums, strict=True)))
    j = np.array([np.nan if c.value is None else c.value for c in judged])

    def row(pair: str, x: np.ndarray, y: np.ndarray) -> AgreementRow:
        return AgreementRow(pair, len(x), float(st.pearsonr(x, y).statistic), float(st.spearmanr(x, y).statistic))

    rows = [row(f"{a} vs {b}", np.array(scores[a]), np.array(scores[b])) for a, b in itertools.combinations(scores, 2)]
    mean_h = np.mean([scores[h] for h in scores], axis=0)
    ok = ~np.isnan(j)
    return [*rows, row(f"{judge.name} judge vs mean human", j[ok], mean_h[ok])]
