"""A reproduction's picture: panels of ours beside the paper's, described as data and drawn once.

A :class:`Panel` holds our series (bars over named categories, or lines and points over numbers),
the paper's values or ranges (:class:`PaperMark`, drawn as black diamonds with the range as an error
bar) and guide lines ``y = slope * x`` (a paper's theory). :func:`draw` renders the panels side by
side with matplotlib (Agg).
"""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class Series:
    """One of our series: ``ys`` at ``xs`` (numbers, or category names in a bar panel)."""

    label: str
    xs: tuple
    ys: tuple[float | None, ...]
    points_only: bool = False


@dataclasses.dataclass(frozen=True)
class PaperMark:
    """The paper's value (``low == high``) or range at ``x``."""

    x: float | str
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class Panel:
    """One plot of a reproduction's picture.

    Attributes:
        title, xlabel, ylabel: its labels.
        series: ours.
        paper: the paper's values or ranges.
        guides: lines ``y = slope * x`` (label, slope, cap: y is at most cap; None: no cap).
        levels: horizontal lines (label, y): a paper's value that ours is swept towards.
        bars: categories on x, our series as grouped bars (else numbers on x, lines).
        log_x: a logarithmic x axis.
        log_y: a logarithmic y axis.
    """

    title: str
    xlabel: str
    ylabel: str
    series: tuple[Series, ...]
    paper: tuple[PaperMark, ...] = ()
    guides: tuple[tuple[str, float, float | None], ...] = ()
    levels: tuple[tuple[str, float], ...] = ()
    bars: bool = False
    log_x: bool = False
    log_y: bool = False


def _y(v: float | None) -> float:
    return math.nan if v is None else v


def draw(path: str, title: str, panels: tuple[Panel, ...]) -> str:
    """Draw ``panels`` side by side under ``title`` into ``path`` (PNG); the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel.bars:
            _bars(ax, panel)
        else:
            _lines(ax, panel)
        ax.set_title(panel.title, fontsize=9)
        ax.set_xlabel(panel.xlabel, fontsize=9)
        ax.set_ylabel(panel.ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        for label, y in panel.levels:
            ax.axhline(y, color="black", linestyle="--", linewidth=1, label=label)
        if panel.series or panel.paper or panel.guides or panel.levels:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _bars(ax, panel: Panel) -> None:
    categories = list(dict.fromkeys(x for s in panel.series for x in s.xs))
    width = 0.8 / max(1, len(panel.series))
    for i, s in enumerate(panel.series):
        at = {x: y for x, y in zip(s.xs, s.ys, strict=True)}
        xs = [categories.index(x) + (i - (len(panel.series) - 1) / 2) * width for x in categories]
        ax.bar(xs, [_y(at.get(x)) for x in categories], width=width * 0.9, label=s.label)
    marks = [m for m in panel.paper if m.x in categories]
    if marks:
        xs = [categories.index(m.x) for m in marks]
        mid = [(m.low + m.high) / 2 for m in marks]
        err = [[(m.high - m.low) / 2 for m in marks]] * 2
        ax.errorbar(xs, mid, yerr=err, fmt="D", color="black", markersize=5, capsize=4, label="paper")
    ax.set_xticks(range(len(categories)), categories)


def _lines(ax, panel: Panel) -> None:
    for s in panel.series:
        style = {"linestyle": "none", "marker": "o", "markersize": 3} if s.points_only else {"marker": "o",
                                                                                               "markersize": 4}
        ax.plot(list(s.xs), [_y(y) for y in s.ys], label=s.label, **style)
    xs = [x for s in panel.series for x in s.xs] + [m.x for m in panel.paper]
    if panel.guides and xs:
        lo, hi = min(xs), max(xs)
        grid = [lo + (hi - lo) * k / 100 for k in range(101)]
        for label, slope, cap in panel.guides:
            ax.plot(grid, [slope * x if cap is None else min(cap, slope * x) for x in grid], color="grey",
                    linestyle=":", linewidth=1, label=label)
    if panel.paper:
        mid = [(m.low + m.high) / 2 for m in panel.paper]
        err = [[(m.high - m.low) / 2 for m in panel.paper]] * 2
        ax.errorbar([m.x for m in panel.paper], mid, yerr=err, fmt="D", color="black", markersize=5, capsize=4,
                    label="paper")
    if panel.log_x:
        ax.set_xscale("log")
    if panel.log_y:
        ax.set_yscale("log")
