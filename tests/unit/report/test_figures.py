"""The report's figures (report.figures): the severity legend does not cover the bars."""

from __future__ import annotations


def test_severity_legend_does_not_cover_the_bars():
    from pytest_posbias.report.figures import stacked_figure

    fig = stacked_figure(["clean", "Delete", "Insert", "Replace", "Reverse", "Shuffle"],
                         {"benign": [0.5, 0.2, 0.1, 0.0, 0.3, 0.9], "ordinary": [0.3, 0.3, 0.1, 0.2, 0.3, 0.1],
                          "severe": [0.2, 0.5, 0.8, 0.8, 0.4, 0.0]}, title="severity shares")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    assert len(bars) == 18
    assert not any(legend.overlaps(b) for b in bars)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # right of the axes
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_estimates_and_intervals_near_the_float_limit_draw_without_crashing():
    """A CI spanning ±1e308 (or such estimates on one axis) renders the forest and trend figures:
    matplotlib's axis span overflowed and the report was lost; such values stay in the tables."""
    from pytest_posbias.report.figures import forest, trend

    for rows in ([{"label": "a", "estimate": 1e308, "low": -1e308, "high": 1e308, "passed": False}],
                 [{"label": "a", "estimate": 8e307, "low": None, "high": None, "passed": False},
                  {"label": "b", "estimate": -8e307, "low": None, "high": None, "passed": True}]):
        assert forest(rows, title="t", xlabel="x", upper=0.15).startswith("<svg")
        assert trend([{**r, "release": r["label"]} for r in rows], title="t", ylabel="x", upper=0.15).startswith("<svg")
