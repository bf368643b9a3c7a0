"""The report's sections (report.sections): repeated 5-grams highlighted in a stressed output, and
nothing else."""

from __future__ import annotations

from pytest_posbias.report.sections import highlight_repeats


def test_highlight_repeats_marks_only_repeated_5grams():
    marks = highlight_repeats("a b c d e x a b c d e y")
    assert [t for t, m in marks if m] == ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"]
    assert dict(marks)["x"] is False


def test_the_sampler_heatmap_leaves_out_items_lost_in_either_sampler(monkeypatch):
    """An item whose answers under a sampler were lost (failed, no letter, cut off: codes below 0) is no
    agreement and no disagreement: the heatmap's shares count only items answered under both samplers."""
    from types import SimpleNamespace

    from pytest_posbias.report import sections

    drawn = []
    monkeypatch.setattr(sections.figures, "heatmap", lambda m, *a, **k: drawn.append(m) or "")
    items = {"i1": ([2, 2], [1, 1]), "i2": ([-1, -1], [-3, -3]), "i3": ([0, 0], [-1, -1]), "i4": ([3, 3], [3, 3])}
    obs = [{"type": "item", "model": "m", "item": k, "answers": {"sampler:left": a, "sampler:midpoint": b}}
           for k, (a, b) in items.items()]
    run = SimpleNamespace(obs={"phase": obs}, verdicts=[])
    sections._phase([run])
    [matrix] = drawn
    assert matrix[0][1] == matrix[1][0] == 0.5  # i1 disagrees, i4 agrees; i2 and i3 are lost, left out
