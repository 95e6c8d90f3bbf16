"""Figures of the decision map (Chapter 9): the (n, B) plane coloured by the method
:func:`attnlib.advise` recommends, and the four methods' costs at one point."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from .._checks import (
    AttnInputError,
    as_dict,
    as_entries,
    as_series,
    check_choice,
    check_int,
    check_open_unit,
)
from .style import add_takeaway

__all__ = ["decision_map_figure", "method_costs_figure", "method_costs_at"]

#: One colour per method of attnlib.advice.METHODS (standard, flash, smallcache, polynomial).
_DECISION_COLORS = ("#7f7f7f", "#1f77b4", "#d62728", "#2ca02c")

#: The top of the cost-ratio axis of :func:`method_costs_figure`, the same at every point.
RATIO_TOP = 1000.0

#: The largest sequence length a map takes: held in int64, and its square a float.
_MAX_N = 2**62


def _colors() -> list:
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def decision_map_figure(ns, Bs, maps, *, methods, eps, M, threshold=True, title=None, band=None):
    """The (n, B) plane coloured by the method :func:`attnlib.advise` recommends (Chapter 9).

    ``maps`` is ``{d: grid}`` with each grid from :func:`attnlib.advice_maps.decision_map`
    (rows = ``Bs``, columns = ``ns``, entries = indices into ``methods``); one panel per d,
    side by side. With ``threshold=True`` the curve B = √(ln n) is drawn dashed. ``title``
    replaces the default title; ``band`` = (lo, hi) hatches a range of B (the B of MiniLM's
    heads). The takeaway gives the largest B at which the polynomial method is recommended.
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if ``ns`` or ``Bs`` is not a sequence of positive
    numbers, a key d of ``maps`` is not a positive integer, a grid's shape is not
    (len(Bs), len(ns)) or its entries are not indices into ``methods``, ``eps`` is not in
    (0, 1), M is not an integer from 1 to 2⁶², or ``band`` is not (lo, hi). A single n or B
    is drawn as one cell a factor 2 wide.
    """
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    ns, Bs = as_series("ns", ns, positive=True), as_series("Bs", Bs, positive=True)
    maps = as_dict("maps", maps, of="d -> grids")
    methods = as_entries(
        "methods", methods, of="method names", min_len=1, max_len=len(_DECISION_COLORS)
    )
    if band is not None:
        lo, hi = as_series("band", band, size=2, positive=True)
        if lo > hi:
            raise AttnInputError(f"band must be (lo, hi) with lo <= hi, got {band!r:.60}")
    for d, grid in maps.items():
        grid = np.asarray(grid)
        if (
            grid.shape != (Bs.size, ns.size)
            or grid.dtype.kind not in "iu"
            or not ((grid >= 0) & (grid < len(methods))).all()
        ):
            raise AttnInputError(f"maps[{d}] must be a (len(Bs), len(ns)) grid of method indices")
    eps, M = check_open_unit("eps", eps), check_int("M", M, maximum=_MAX_N)
    for d in maps:
        check_int("maps' key d", d)
    cmap = ListedColormap(_DECISION_COLORS[: len(methods)])
    norm = BoundaryNorm(np.arange(len(methods) + 1) - 0.5, cmap.N)
    fig, axes = plt.subplots(1, len(maps), figsize=(3.4 * len(maps) + 0.6, 3.9), sharey=True)
    axes = np.atleast_1d(axes)

    def edges(v):
        if v.size == 1:  # one cell: a factor 2 either side
            return np.array([v[0] / 2, v[0] * 2])
        lv = np.log(v)
        mid = (lv[1:] + lv[:-1]) / 2
        return np.exp(np.concatenate([[2 * lv[0] - mid[0]], mid, [2 * lv[-1] - mid[-1]]]))

    for ax, (d, grid) in zip(axes, maps.items(), strict=True):
        ax.pcolormesh(edges(ns), edges(Bs), grid, cmap=cmap, norm=norm, shading="flat")
        if threshold:
            nn = np.geomspace(ns[0], ns[-1], 200)
            ax.plot(nn, np.sqrt(np.log(nn)), "k--", lw=1.4)
        if band is not None:
            ax.axhspan(lo, hi, facecolor="none", edgecolor="white", hatch="//", lw=0)
            ax.text(ns[0] * 1.3, lo * 1.05, "MiniLM's heads", color="white", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n (tokens)")
        ax.set_title(f"d = {d}  (M = {M} words = {M / (d * d):g}·d²)", fontsize=10)
        ax.grid(False)
    axes[0].set_ylabel("entry bound B (AS24 convention)")
    handles = [Patch(color=_DECISION_COLORS[i], label=m) for i, m in enumerate(methods)]
    if threshold:
        handles.append(plt.Line2D([], [], color="k", ls="--", label=r"$B=\sqrt{\ln n}$"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=9)
    default = f"Fastest method by the cost model of attnlib.advice (ε = {eps:g})"
    fig.suptitle(default if title is None else title, fontsize=11)
    if "polynomial" in methods:
        poly = methods.index("polynomial")
        rows = [
            i
            for grid in maps.values()
            for i in range(Bs.size)
            if (np.asarray(grid)[i] == poly).any()
        ]
        text = (
            f"The polynomial method wins only at B ≤ {Bs[max(rows)]:.2g}."
            if rows
            else "The polynomial method wins nowhere on this map."
        )
        add_takeaway(fig, text)
    return fig


def method_costs_figure(advice, *, machine: str = ""):
    """The four methods' costs at one point, as ratios to the recommended method's cost: bars
    up from 1 on a log axis that is the same at every point, 1 to :data:`RATIO_TOP`, so that
    the frames of Chapter 9's live figure compare (a bar past the top is cut and labelled).

    ``advice`` is the :class:`attnlib.advice.Advice` of one call of :func:`attnlib.advise`;
    the recommended method (ratio 1) is drawn as a line on the baseline, every bar carries its
    ratio, and an infeasible method is a hatched column marked "infeasible". ``machine``
    names the machine in the title. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if ``advice`` is not an Advice or ``machine`` is
    not a string.
    """
    from matplotlib.patches import Patch

    from ..advice import METHODS, Advice

    if not isinstance(advice, Advice):
        raise AttnInputError(
            f"advice must be an attnlib.advice.Advice, got {type(advice).__name__}"
        )
    if not isinstance(machine, str):
        raise AttnInputError(f"machine must be a string, got {machine!r:.60}")
    colors = _colors()
    a = advice
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    # Numeric positions, so that every method keeps its place and its tick label even when it
    # has no bar; an infeasible method is labelled inside the axes, from the bottom.
    x = np.arange(len(METHODS))
    feasible = np.array([c.feasible for c in a.costs])
    best = a.cost_of(a.method).cost
    ratios = np.array([c.cost / best for c in a.costs], dtype=float)
    shown = np.minimum(ratios, RATIO_TOP)
    bar_colors = [colors[1] if m == a.method else colors[0] for m in METHODS]
    f = x[feasible]
    # Bars start at ratio 1, not at the axis' bottom: their lengths then compare across frames.
    ax.bar(f, shown[f] - 1.0, bottom=1.0, color=[bar_colors[i] for i in f])
    ax.hlines(1.0, x[METHODS.index(a.method)] - 0.4, x[METHODS.index(a.method)] + 0.4,
              color=colors[1], lw=4)  # fmt: skip
    for i in f:
        cut = ratios[i] > RATIO_TOP
        ax.text(i, shown[i], f"{ratios[i]:.3g}×" + (" (cut)" if cut else ""), ha="center",
                va="top" if cut else "bottom", fontsize=8)  # fmt: skip
    for i in x[~feasible]:
        # A hatched column, not an empty slot: the method cannot run at this point at all.
        ax.fill_between([i - 0.4, i + 0.4], 1.0, RATIO_TOP, facecolor="none", hatch="//",
                        edgecolor=colors[0], alpha=0.6, lw=0)  # fmt: skip
        ax.text(
            i,
            0.03,
            "infeasible",
            ha="center",
            va="bottom",
            rotation=90,
            fontsize=8,
            color="0.35",
            transform=ax.get_xaxis_transform(),
        )
    ax.set_xticks(x, METHODS)
    ax.set_xlim(-0.5, len(METHODS) - 0.5)
    ax.set_yscale("log")
    ax.set_ylim(1.0, RATIO_TOP)
    ax.set_ylabel("cost ÷ recommended's")
    ax.set_xlabel("method")
    ax.legend(
        handles=[
            Patch(color=colors[1], label="recommended"),
            Patch(color=colors[0], label="other methods"),
        ],
        fontsize=8,
    )
    n_text = f"2^{int(math.log2(a.n))}" if a.n & (a.n - 1) == 0 else f"{a.n:,}"
    ax.set_title(
        f"{machine + ': ' if machine else ''}n = {n_text}, d = {a.d}, B = {a.B:g}, "
        f"eps = {a.eps:g} in {a.dtype}: use {a.method}",
        fontsize=9,
    )
    add_takeaway(fig, f"Recommended: {a.method} ({a.reason}).")
    return fig


def method_costs_at(log2_n: int, d: int, B: float, machine: str, eps_exp: int):
    """Chapter 9's live figure: :func:`method_costs_figure` of :func:`attnlib.advise` at
    n = 2**log2_n, head dimension d, entry bound B and eps = 10**-eps_exp on ``machine``, a
    name of :func:`attnlib.machines.book_machines`.

    Raises :class:`attnlib.AttnInputError` if ``machine`` is not such a name, ``log2_n`` not
    an integer from 1 to 62, ``eps_exp`` not one from 1 to 300, or :func:`attnlib.advise`
    refuses d or B (or eps in the machine's precision)."""
    from ..advice import advise
    from ..machines import book_machines

    machines = book_machines()
    check_choice("machine", machine, tuple(machines))
    log2_n = check_int("log2_n", log2_n, maximum=62)
    eps_exp = check_int("eps_exp", eps_exp, maximum=300)  # eps = 10^-eps_exp, a positive float
    return method_costs_figure(
        advise(2**log2_n, d, B, 10.0**-eps_exp, **machines[machine]), machine=machine
    )
