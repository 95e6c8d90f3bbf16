"""Figures of Part IV, the evidence (Chapter 9)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "DECISION_COLORS",
    "decision_map_figure",
]


#: One colour per method of attnlib.advice.METHODS (exact, flash, smallcache, polynomial).
DECISION_COLORS = ("#7f7f7f", "#1f77b4", "#d62728", "#2ca02c")


def decision_map_figure(ns, Bs, maps, *, methods, eps, M, threshold=True):
    """The (n, B) plane coloured by the method :func:`attnlib.advise` recommends.

    ``maps`` is ``{d: grid}`` with each grid from :func:`attnlib.advice.decision_map`
    (rows = ``Bs``, columns = ``ns``, entries = indices into ``methods``); one panel per d,
    side by side. With ``threshold=True`` the curve B = √(ln n) is drawn dashed. Returns the
    Figure.
    """
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    ns = np.asarray(ns, dtype=float)
    Bs = np.asarray(Bs, dtype=float)
    cmap = ListedColormap(DECISION_COLORS[: len(methods)])
    norm = BoundaryNorm(np.arange(len(methods) + 1) - 0.5, cmap.N)
    fig, axes = plt.subplots(1, len(maps), figsize=(3.4 * len(maps) + 0.6, 3.9), sharey=True)
    axes = np.atleast_1d(axes)

    def edges(v):
        lv = np.log(v)
        mid = (lv[1:] + lv[:-1]) / 2
        return np.exp(np.concatenate([[2 * lv[0] - mid[0]], mid, [2 * lv[-1] - mid[-1]]]))

    for ax, (d, grid) in zip(axes, maps.items(), strict=True):
        ax.pcolormesh(edges(ns), edges(Bs), grid, cmap=cmap, norm=norm, shading="flat")
        if threshold:
            nn = np.geomspace(ns[0], ns[-1], 200)
            ax.plot(nn, np.sqrt(np.log(nn)), "k--", lw=1.4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.set_title(f"d = {d}  (M = {M} words = {M / (d * d):g}·d²)", fontsize=10)
        ax.grid(False)
    axes[0].set_ylabel("entry bound B (AS24 convention)")
    handles = [Patch(color=DECISION_COLORS[i], label=m) for i, m in enumerate(methods)]
    if threshold:
        handles.append(plt.Line2D([], [], color="k", ls="--", label=r"$B=\sqrt{\ln n}$"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=9)
    fig.suptitle(f"Fastest method by the cost model of attnlib.advice (ε = {eps:g})", fontsize=11)
    return fig
