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


# ---------------------------------------------------------------------------------------
# Part polynomial method (Chapters 6 and 7)
# ---------------------------------------------------------------------------------------


def exp_poly_error_figure(R: float, eps: float, *, ax=None):
    """Relative error p(x)e^{-x} - 1 on [-R, R] of exp_poly's Chebyshev and Taylor polynomials.

    Draws ±eps as dashed lines and puts each polynomial's degree in the legend. A request that
    double precision cannot meet is drawn as the refusal message instead (Chapter 6 widget).
    """
    from attnlib import AttnInputError
    from attnlib import polymethod as pm

    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    x = np.linspace(-R, R, 2001)
    for kind, style in (("chebyshev", "-"), ("taylor", ":")):
        try:
            p = pm.exp_poly(R, eps, kind=kind)
        except AttnInputError as exc:
            ax.text(
                0.02,
                0.9 if kind == "chebyshev" else 0.75,
                f"{kind}: refused",
                transform=ax.transAxes,
                fontsize=9,
                color="C3",
            )
            ax.set_title(str(exc)[:90] + "...", fontsize=8)
            continue
        ax.plot(x, p(x) * np.exp(-x) - 1.0, style, label=f"{kind}, degree {p.degree()}")
    ax.axhline(eps, color="gray", ls="--", lw=1, label=r"$\pm\varepsilon$")
    ax.axhline(-eps, color="gray", ls="--", lw=1)
    ax.set_xlabel("logit x")
    ax.set_ylabel(r"relative error $p(x)e^{-x} - 1$")
    if not ax.get_title():
        ax.set_title(f"R = {R:g}, eps = {eps:.0e}")
    ax.legend(loc="lower right")
    return fig


def least_degree_figure(Rs, epss, *, ax=None):
    """Measured least degree (Chebyshev solid, Taylor dotted) against R, one colour per eps,
    next to AA22's order formula max{2R, L/log(L/2R)} (dashed, constant 1)."""
    from attnlib import polymethod as pm

    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    Rs = np.asarray(Rs, dtype=float)
    for i, eps in enumerate(epss):
        color = f"C{i}"
        cheb = [pm.least_degree(R, eps) for R in Rs]
        tay = [pm.least_degree(R, eps, kind="taylor") for R in Rs]
        aa22 = [pm.aa22_degree(R, eps) for R in Rs]
        ax.plot(Rs, cheb, "o-", color=color, label=f"Chebyshev, eps={eps:.0e}")
        ax.plot(Rs, tay, "s:", color=color, label=f"Taylor, eps={eps:.0e}")
        ax.plot(Rs, aa22, "--", color=color, alpha=0.6, label=f"AA22 formula, eps={eps:.0e}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("logit range R (logits in [-R, R])")
    ax.set_ylabel("polynomial degree g")
    ax.legend(fontsize=7, ncol=len(epss))
    return fig


def loglog_crossover(x, y1, y2) -> float | None:
    """The x where series y1 and y2 cross, by linear interpolation of log y1 - log y2 against
    log x between the first pair of neighbouring points where the sign changes (from y1 < y2
    to y1 >= y2). None if they never cross in the measured range."""
    x, y1, y2 = (np.asarray(a, dtype=float) for a in (x, y1, y2))
    diff = np.log(y1) - np.log(y2)
    for k in range(len(x) - 1):
        if diff[k] < 0 <= diff[k + 1]:
            lx0, lx1 = math.log(x[k]), math.log(x[k + 1])
            t = -diff[k] / (diff[k + 1] - diff[k])
            return float(math.exp(lx0 + t * (lx1 - lx0)))
    return None
