"""The report's sections (report.sections): repeated 5-grams highlighted in a stressed output, and
nothing else."""

from __future__ import annotations

from pytest_posbias.report.sections import highlight_repeats


def test_highlight_repeats_marks_only_repeated_5grams():
    marks = highlight_repeats("a b c d e x a b c d e y")
    assert [t for t, m in marks if m] == ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"]
    assert dict(marks)["x"] is False
