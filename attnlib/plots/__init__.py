"""The book's figures: one matplotlib style here, then one module of builders per part.

Importing the package applies :data:`BOOK_STYLE`, so every chapter's figures look alike.
Builders return the matplotlib ``Figure`` so a cell can end with ``plt.show()`` (a bare artist
as a cell's last line prints a memory address, which breaks nbval). The modules follow the
book: :mod:`.preface`, :mod:`.exact` (Chapter 1), :mod:`.iomodel` (Part I),
:mod:`.polymethod` (Part II), :mod:`.hardness` (Part III), :mod:`.models` (Part IV),
:mod:`.roofline` and :mod:`.performance` (Chapter 10). Every builder is also importable from
this package.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt

from ..nbtools import loglog_slope

__all__ = [
    "BOOK_STYLE",
    "use_book_style",
    "loglog_figure",
    "add_takeaway",
    "label_ticks",
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
    The shared log-log builder: Chapters 8 and 9 call it directly, and Part I's builders
    through it.
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


use_book_style()


def label_ticks(ax, values, axis: str = "x") -> None:
    """Put major ticks exactly at ``values`` with plain-number labels and hide minor labels.

    Log axes otherwise label minor ticks as ``3×10²`` and the labels collide.
    """
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(list(values)))
    target.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())


# The builders, in book order (imported after the style helpers they use).
from . import exact, hardness, iomodel, models, performance, polymethod, preface, roofline  # noqa: E402, I001
from .exact import *  # noqa: E402, F403
from .hardness import *  # noqa: E402, F403
from .iomodel import *  # noqa: E402, F403
from .models import *  # noqa: E402, F403
from .performance import *  # noqa: E402, F403
from .polymethod import *  # noqa: E402, F403
from .preface import *  # noqa: E402, F403
from .roofline import *  # noqa: E402, F403

__all__ += preface.__all__ + exact.__all__ + iomodel.__all__ + polymethod.__all__
__all__ += hardness.__all__ + models.__all__ + roofline.__all__ + performance.__all__
