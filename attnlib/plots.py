"""Figure builders the chapters share, and the book's one matplotlib style.

Every chapter calls :func:`use_book_style` (done on import) so figures look alike.
Builders return the matplotlib ``Figure`` so a cell can end with ``fig;`` or ``plt.show()``
(a bare artist as a cell's last line prints a memory address, which breaks nbval).

Chapter-specific builders are appended at the end of this file.
"""

from __future__ import annotations

import math

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "BOOK_STYLE",
    "use_book_style",
    "loglog_slope",
    "loglog_figure",
    "add_takeaway",
]

BOOK_STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "figure.constrained_layout.use": True,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
    "font.family": "DejaVu Sans",
    "axes.prop_cycle": mpl.cycler(
        color=["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]
    ),
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (idempotent)."""
    mpl.rcParams.update(BOOK_STYLE)


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x: the exponent of a power law y ∝ x^slope."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError("loglog_slope needs two equal-length sequences of at least 2 points")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("loglog_slope needs positive values")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def loglog_figure(
    series: dict,
    *,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    fit: bool = False,
    markers: bool = True,
    ax=None,
):
    """Plot ``{label: (x, y)}`` on log-log axes; with ``fit=True`` each label gains its slope.

    Returns the figure. Axis labels are required: every plot in the book says its units.
    """
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    for label, (x, y) in series.items():
        text = label
        if fit:
            text = f"{label} (slope {loglog_slope(x, y):.2f})"
        ax.loglog(x, y, marker="o" if markers else None, label=text)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    return fig


def add_takeaway(fig, text: str) -> None:
    """Write the figure's one-line takeaway under the axes."""
    fig.text(0.5, -0.02, text, ha="center", va="top", fontsize=9, style="italic", wrap=True)


def _nice_power_ticks(lo: float, hi: float) -> list[float]:
    """Powers of two between lo and hi (used by I/O sweeps over M)."""
    a, b = math.ceil(math.log2(lo)), math.floor(math.log2(hi))
    return [2.0**k for k in range(a, b + 1)]


use_book_style()
