"""Judge agreement with human labels (``scoring.agreement``): the labels file is read or refused with
the file and line named, and the correlations are those of the rows the judge scored, computed here
independently (Pearson from ``numpy.corrcoef``, Spearman as Pearson of the average ranks)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pytest_posbias.errors import ConfigError
from pytest_posbias.scoring.agreement import agreement, read_labels
from pytest_posbias.scoring.judges import Coverage

ROWS = [
    ("A red circle moves.\nThe background is cream.", "summary 1", 1.0, 0.9),
    ("A blue square stays still.", "summary 2", 0.5, 0.6),
    ("A green triangle sinks.\n\nThe screen goes black.", "summary 3", 0.0, 0.1),
    ("A purple circle rises.", "summary 4", 0.5, 0.0),
    ("A white flash.", "summary 5", 0.25, 0.5),
]


class ListJudge:
    """A judge that answers the given values in order (None: a failed judgement)."""

    name = "listed"

    def __init__(self, values: Sequence[float | None]) -> None:
        self.values = list(values)
        self.items: list[tuple[Sequence[str], str]] = []

    def score(self, items: Sequence[tuple[Sequence[str], str]]) -> list[Coverage]:
        self.items = list(items)
        return [Coverage(v, self.name) for v in self.values]


def _write(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their positions), 1-based."""
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        r[x == v] = r[x == v].mean()
    return r


def test_labels_are_read_per_row_with_blank_reference_lines_dropped(tmp_path):
    path = _write(tmp_path / "labels.csv", ["reference", "summary", "human_a", "Human_b"], ROWS)
    refs, sums, scores = read_labels(path)
    assert refs[2] == ["A green triangle sinks.", "The screen goes black."]
    assert sums == [r[1] for r in ROWS]
    assert scores == {"human_a": [r[2] for r in ROWS], "Human_b": [r[3] for r in ROWS]}


@pytest.mark.parametrize(("header", "row", "message"), [
    (["reference", "summary"], ["r", "s"], "needs columns reference, summary and at least one human* column"),
    (["reference", "human_1"], ["r", "1"], "needs columns reference, summary"),
    (["reference", "summary", "human_1"], ["r", "s", "high"], ":2: human scores must be numbers in [0, 1]"),
    (["reference", "summary", "human_1"], ["r", "s", "1.5"], ":2: human scores must lie in [0, 1]"),
    (["reference", "summary", "human_1"], ["r", "s", ""], ":2: human scores must be numbers"),
])
def test_a_bad_labels_file_is_refused_naming_it_and_the_line(tmp_path, header, row, message):
    path = _write(tmp_path / "labels.csv", header, [["r", "s", "0.5"][: len(header)], row])
    with pytest.raises(ConfigError) as err:
        read_labels(path)
    assert str(err.value).startswith(str(path))
    assert message.replace(":2:", ":3:") in str(err.value)


def test_a_missing_labels_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no such labels file"):
        read_labels(tmp_path / "absent.csv")


def test_correlations_are_those_of_the_scored_rows_against_the_mean_human(tmp_path):
    path = _write(tmp_path / "labels.csv", ["reference", "summary", "human_a", "human_b"], ROWS)
    judged = [0.8, None, 0.2, 0.3, 0.4]  # the second row's judgement failed: left out, not scored 0
    judge = ListJudge(judged)
    pair, vs_judge = agreement(path, judge)
    assert [s for _, s in judge.items] == [r[1] for r in ROWS]
    a, b = (np.array([r[k] for r in ROWS]) for k in (2, 3))
    assert pair.pair == "human_a vs human_b" and pair.n == 5
    assert pair.pearson == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-12)
    assert pair.spearman == pytest.approx(np.corrcoef(_ranks(a), _ranks(b))[0, 1], abs=1e-12)
    keep = np.array([v is not None for v in judged])
    j = np.array([v for v in judged if v is not None])
    mean = ((a + b) / 2)[keep]
    assert vs_judge.pair == "listed judge vs mean human" and vs_judge.n == 4
    assert vs_judge.pearson == pytest.approx(np.corrcoef(j, mean)[0, 1], abs=1e-12)
    assert vs_judge.spearman == pytest.approx(np.corrcoef(_ranks(j), _ranks(mean))[0, 1], abs=1e-12)
