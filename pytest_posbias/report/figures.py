"""Report figures: matplotlib (Agg) rendered to inline SVG, deterministic and accessible.

Text is drawn as paths (``svg.fonttype = 'path'``), so no string from a model or a
manifest reaches the SVG as markup; ``svg.hashsalt`` is fixed and the date metadata is
dropped, so the same data always give the same bytes. Colours are the Okabe–Ito
colour-blind-safe palette; lines also differ by marker.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from ..safe_text import inert

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
F = TypeVar("F", bound=Callable[..., str])

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
# values beyond this magnitude are not drawn (the tables give them): an axis over two of them, with
# matplotlib's margins, spans more than a float holds and its transforms fail
MAX_DRAWN = 1e300


def _drawn(v: Any) -> bool:
    """Whether a figure draws the value ``v``: a finite number within :data:`MAX_DRAWN`."""
    return v is not None and bool(np.isfinite(v)) and abs(float(v)) <= MAX_DRAWN


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({
        "svg.fonttype": "path", "svg.hashsalt": "pytest-posbias", "font.size": 9, "axes.spines.top": False,
        "axes.spines.right": False, "figure.dpi": 72, "savefig.bbox": "tight",
    })
    return plt


def _inert(value: Any) -> Any:
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, Mapping):
        return {k: _inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert(v) for v in value]
    if type(value) is tuple:
        return tuple(_inert(v) for v in value)
    return value


def figure(fn: F) -> F:
    """A figure function drawn under matplotlib's settings as loaded (``rc_file_defaults``), not as
    the process may have changed them (a user's conftest setting ``rcParams``), with those restored
    after, so the same data give the same SVG bytes in any run. Every string of its arguments is
    escaped first (:func:`~pytest_posbias.safe_text.inert`): a label from data draws ``\u202e``
    instead of turning its line around, and the SVG, which keeps each label's text in a comment,
    holds no control or bidi character."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        import matplotlib

        with matplotlib.rc_context():
            matplotlib.rc_file_defaults()
            return str(fn(*_inert(args), **{k: _inert(v) for k, v in kwargs.items()}))

    return call  # type: ignore[return-value]


def _svg(fig: Any) -> str:
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: the SVG is inlined in HTML


@figure
def coverage_curves(panels: Sequence[Mapping[str, Any]]) -> str:
    """One panel per domain/duration/scale: mean coverage per slot, one line per model with a CI band.

    ``panels``: {"title", "series": [{"model", "mean": [P], "low": [P], "high": [P]}]}.
    """
    plt = _plt()
    n = len(panels)
    cols = min(4, max(1, n))
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.1 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, panel in zip(axes.flat, panels, strict=False):
        for k, s in enumerate(panel["series"]):
            x = np.arange(1, len(s["mean"]) + 1)
            c = OKABE_ITO[k % len(OKABE_ITO)]
            ax.fill_between(x, s["low"], s["high"], color=c, alpha=0.18, linewidth=0)
            ax.plot(x, s["mean"], marker=MARKERS[k % len(MARKERS)], color=c, label=s["model"], linewidth=1.6,
                    markersize=4)
        ax.set_title(panel["title"], fontsize=9)
        ax.set_xticks(x)
        ax.set_xlabel("slot position")
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("coverage")
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), frameon=False,
                   bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return _svg(fig)


@figure
def heatmap(matrix: Sequence[Sequence[float | None]], rows: Sequence[str], cols: Sequence[str], *, title: str,
            fmt: str = "{:.0%}", vmax: float | None = None, cmap: str = "cividis") -> str:
    """A labelled heat map with the value printed in every cell (None = not measured)."""
    plt = _plt()
    m = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    fig, ax = plt.subplots(figsize=(1.0 + 0.9 * len(cols), 0.8 + 0.42 * len(rows)))
    top = vmax if vmax is not None else (np.nanmax(m) if np.isfinite(m).any() else 1.0) or 1.0
    im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=0, vmax=top, aspect="auto")
    ax.set_xticks(range(len(cols)), labels=list(cols), rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), labels=list(rows))
    for (i, j), v in np.ndenumerate(m):
        txt = "–" if np.isnan(v) else fmt.format(v)
        shade = 0 if np.isnan(v) else v / top
        ax.text(j, i, txt, ha="center", va="center", fontsize=8, color="white" if shade < 0.55 else "black")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return _svg(fig)


@figure
def bars(groups: Sequence[str], series: Mapping[str, Sequence[float | None]], *, title: str, ylabel: str,
         ref: Mapping[str, float] | None = None, errors: Mapping[str, Sequence[tuple[float, float]]] | None = None,
         percent: bool = True) -> str:
    """Grouped bars (one colour per series), optional horizontal reference lines (e.g. re-run floor)."""
    plt = _plt()
    names = list(series)
    x = np.arange(len(groups))
    w = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(max(3.2, 0.9 + 0.75 * len(groups) * max(1, len(names)) ** 0.5), 2.6))
    for k, name in enumerate(names):
        vals = np.array([np.nan if v is None else v for v in series[name]], dtype=float)
        yerr = None
        if errors and name in errors:
            lo_hi = np.array(errors[name], dtype=float)
            yerr = np.abs(np.vstack([vals - lo_hi[:, 0], lo_hi[:, 1] - vals]))
        ax.bar(x + (k - (len(names) - 1) / 2) * w, vals, w, color=OKABE_ITO[k % len(OKABE_ITO)], label=name,
               yerr=yerr, capsize=2, hatch=["", "//", "..", "xx", "\\\\"][k % 5], edgecolor="white")
    for i, (label, value) in enumerate((ref or {}).items()):
        ax.axhline(value, color="black", linestyle=["--", ":", "-."][i % 3], linewidth=1, label=label)
    ax.set_xticks(x, labels=list(groups), rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    finite = [float(v) for vals in series.values() for v in vals if v is not None and np.isfinite(v)]
    top = max([*finite, *(ref or {}).values(), 0.0])
    ax.set_ylim(0, max(0.05, 1.15 * top))
    if percent:
        from matplotlib.ticker import PercentFormatter

        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig)


@figure
def lines(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], *, title: str, xlabel: str,
          ylabel: str) -> str:
    """Simple line plot (e.g. risk–coverage: accuracy on the answered subset vs coverage)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(3.4, 2.5))
    for k, (name, (xs, ys)) in enumerate(curves.items()):
        ax.plot(xs, ys, marker=MARKERS[k % len(MARKERS)], color=OKABE_ITO[k % len(OKABE_ITO)], label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=7)
    return _svg(fig)


@figure
def distributions(data: Mapping[str, Sequence[float]], *, title: str, ylabel: str) -> str:
    """Box plots of per-output values (RI or IE) per condition."""
    plt = _plt()
    names = [k for k, v in data.items() if len(v)]
    fig, ax = plt.subplots(figsize=(max(3.2, 0.55 * len(names) + 1.2), 2.5))
    if names:
        bp = ax.boxplot([list(data[k]) for k in names], patch_artist=True, widths=0.6)
        for k, box in enumerate(bp["boxes"]):
            box.set_facecolor(OKABE_ITO[k % len(OKABE_ITO)])
            box.set_alpha(0.6)
        ax.set_xticks(range(1, len(names) + 1), labels=names, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.0)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig)


@figure
def stacked(groups: Sequence[str], parts: Mapping[str, Sequence[float]], *, title: str) -> str:
    """100% stacked bars (severity shares: benign, ordinary, severe)."""
    return _svg(stacked_figure(groups, parts, title=title))


def stacked_figure(groups: Sequence[str], parts: Mapping[str, Sequence[float]], *, title: str) -> Any:
    """The matplotlib figure of :func:`stacked` (its legend lies outside the axes)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(3.2, 0.5 * len(groups) + 1.5), 2.5))
    bottom = np.zeros(len(groups))
    for k, (name, vals) in enumerate(parts.items()):
        v = np.array(vals, dtype=float)
        ax.bar(groups, v, bottom=bottom, color=OKABE_ITO[k % len(OKABE_ITO)], label=name, edgecolor="white",
               hatch=["", "//", "xx"][k % 3])
        bottom += v
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", rotation=30)
    # the legend sits right of the axes: inside it covered the top of the bars (all shares reach 1)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def _bound_lines(ax: Any, lower: float | None, upper: float | None, *, vertical: bool) -> None:
    """Dashed lines at the finite bounds of the compliant region (the first labelled 'allowed bound')."""
    finite = [b for b in (lower, upper) if _drawn(b)]
    for i, b in enumerate(finite):
        line = ax.axvline if vertical else ax.axhline
        line(b, color="black", linestyle="--", linewidth=1, label=None if i else "allowed bound")


def _estimate(ax: Any, pos: Any, p: Mapping[str, Any], est: Any, *, vertical: bool) -> None:
    """One estimate at ``pos`` with its CI (``p``'s low/high, where both are finite): failing
    (``passed`` False) in vermillion with a filled diamond, else in blue with an open circle."""
    def at(values: list[Any]) -> tuple[list[Any], list[Any]]:  # (x, y): values along the estimate's axis
        return ([pos] * len(values), values) if vertical else (values, [pos] * len(values))

    bad = p.get("passed") is False
    c = OKABE_ITO[3] if bad else OKABE_ITO[0]
    lo, hi = p.get("low"), p.get("high")
    if _drawn(lo) and _drawn(hi):
        ax.plot(*at([lo, hi]), color=c, linewidth=2, **({} if vertical else {"solid_capstyle": "butt"}))
    ax.plot(*at([est]), marker="D" if bad else "o", color=c, markersize=5, markerfacecolor=c if bad else "white")


@figure
def forest(rows: Sequence[Mapping[str, Any]], *, title: str, xlabel: str, lower: float | None = None,
           upper: float | None = None, ref: float | None = None, width: float = 5.6) -> str:
    """Estimates with their CIs as horizontal bars, one row per gate (or configuration), the
    compliant bounds as dashed lines (``ref``: a solid reference line, e.g. 0 for a difference).

    ``rows``: {"label", "estimate", "low", "high", "passed" (True/False/None)}; failing rows are
    drawn in vermillion with a filled marker, passing ones in blue with an open marker."""
    plt = _plt()
    n = max(1, len(rows))
    fig, ax = plt.subplots(figsize=(width, 0.55 + 0.24 * n))
    ys = np.arange(len(rows))[::-1]
    for y, r in zip(ys, rows, strict=True):
        est = r.get("estimate")
        if _drawn(est):
            _estimate(ax, y, r, est, vertical=False)
    _bound_lines(ax, lower, upper, vertical=True)
    if ref is not None:
        ax.axvline(ref, color="#555555", linewidth=0.8)
    ax.set_yticks(ys, labels=[str(r["label"]) for r in rows], fontsize=7)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=7)
    return _svg(fig)


@figure
def trend(points: Sequence[Mapping[str, Any]], *, title: str, ylabel: str, lower: float | None = None,
          upper: float | None = None) -> str:
    """One gate across releases: the estimate with its CI per release (x, in release order) and
    the compliant bounds as dashed lines. ``points``: {"release" (a short tick label), "estimate",
    "low", "high", "passed"}; failing releases in vermillion with a filled marker."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(2.9, 1.6 + 0.35 * len(points)), 1.9))
    xs = np.arange(len(points))
    est = np.array([p["estimate"] if _drawn(p.get("estimate")) else np.nan for p in points], dtype=float)
    ax.plot(xs, est, color=OKABE_ITO[0], linewidth=1, alpha=0.6)
    for x, p, e in zip(xs, points, est, strict=True):
        if np.isfinite(e):
            _estimate(ax, x, p, e, vertical=True)
    _bound_lines(ax, lower, upper, vertical=False)
    ax.set_xticks(xs, labels=[str(p["release"]) for p in points], fontsize=7)
    ax.set_xlim(-0.5, len(points) - 0.5)
    ax.set_xlabel("release", fontsize=7)
    ax.set_ylabel(ylabel, fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(title, fontsize=7.5)
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig)
