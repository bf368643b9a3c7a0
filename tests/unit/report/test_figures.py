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
