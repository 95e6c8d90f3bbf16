"""Figures of Part I, the two-level machine (Chapters 2 to 5): schedules drawn from the
machine's log, matmul and attention I/O against M, and optimal schedules cut into segments."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "smallcache_crossover_figure",
    "schedule_figure",
    "matmul_io_figure",
    "partition_figure",
]


def smallcache_crossover_figure(n: int, d: int, *, ax=None, M_max: int | None = None):
    """Counted backward I/O against M, FlashAttention's and the small-cache algorithm's.

    Closed forms (:func:`attnlib.iomodel.flash.flash_backward_count`,
    :func:`attnlib.iomodel.smallcache.smallcache_backward_count`) on a geometric grid of M
    from FlashAttention's smallest cache to ``M_max`` (default 64·d², at most n·d·8), with the
    two branches of the lower bound n²d²/M and n²d/√M dashed, M = d² dotted and the measured
    crossover (the first M at which FlashAttention's count is no larger) marked.
    Returns the Figure; the crossover M is stored on it as ``fig.crossover_M``.
    """
    from attnlib._checks import check_int
    from attnlib.iomodel.flash import flash_backward_count, flash_backward_min_M
    from attnlib.iomodel.smallcache import smallcache_backward_count

    n, d = check_int("n", n), check_int("d", d, minimum=2)
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    lo = flash_backward_min_M(d)
    hi = M_max if M_max is not None else min(64 * d * d, 8 * n * d)
    Ms = np.unique(np.geomspace(lo, max(hi, 2 * lo), 160).astype(int))
    flash = np.array([flash_backward_count(n, d, int(M)).total for M in Ms], dtype=float)
    small = np.array([smallcache_backward_count(n, d, int(M)).total for M in Ms], dtype=float)
    ax.loglog(Ms, flash, color="C0", label="FlashAttention backward (counted)")
    ax.loglog(Ms, small, color="C1", label="small-cache backward (counted)")
    ax.loglog(Ms, n * n * d * d / Ms, "--", color="C0", lw=1, alpha=0.7, label=r"$n^2d^2/M$")
    branch = r"$n^2d/\sqrt{M}$"
    ax.loglog(Ms, n * n * d / np.sqrt(Ms), "--", color="C1", lw=1, alpha=0.7, label=branch)
    ax.axvline(d * d, color="gray", ls=":", lw=1.2, label=r"$M = d^2$")
    # the exact crossover: bisection on the integers between the bracketing grid points
    cross = None
    wins = np.nonzero(flash <= small)[0]
    if wins.size and wins[0] > 0:
        a, b = int(Ms[wins[0] - 1]), int(Ms[wins[0]])
        while b - a > 1:
            mid = (a + b) // 2
            if flash_backward_count(n, d, mid).total <= smallcache_backward_count(n, d, mid).total:
                b = mid
            else:
                a = mid
        cross = b
        y = smallcache_backward_count(n, d, cross).total
        ax.plot([cross], [y], "k*", ms=11, label=f"crossover M = {cross} = {cross / d / d:.2f}·d²")
    ax.set_xlabel("fast memory M (words)")
    ax.set_ylabel("words moved (reads + writes)")
    ax.set_title(f"backward pass, n = {n}, d = {d}")
    ax.legend(fontsize=8)
    fig.crossover_M = cross
    return fig


def schedule_figure(log, M: int, *, title: str | None = None, names=None):
    """Draw a :class:`attnlib.iomodel.TwoLevelMemory` run from its operation log.

    Top: the live fast words after each event, stacked by the slow array each block came
    from ("scratch" for ``alloc``), with the capacity M dashed. Bottom: one lane per slow
    array, ▲ for a load and ▼ for a store, marker area ∝ words moved. ``names`` fixes the
    lane order (default: order of first appearance). Returns the figure.
    """
    events = list(log)
    if not events:
        raise ValueError("schedule_figure needs a non-empty log (run the machine with record=True)")
    origin_of = []
    live: dict = {}
    stack = []
    for ev in events:
        key = ev.name if ev.name is not None else "scratch"
        if ev.op in ("load", "alloc"):
            live[key] = live.get(key, 0) + ev.words
        elif ev.op == "free":
            live[key] = live.get(key, 0) - ev.words
        origin_of.append(key)
        stack.append(dict(live))
    keys = [k for k in dict.fromkeys(origin_of) if any(s.get(k, 0) for s in stack)]
    lanes = (
        list(names)
        if names is not None
        else list(dict.fromkeys(ev.name for ev in events if ev.op in ("load", "store")))
    )
    t = np.arange(len(events) + 1)
    fig, (ax_m, ax_l) = plt.subplots(
        2, 1, figsize=(7.5, 4.6), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    ys = [np.array([0] + [s.get(k, 0) for s in stack]) for k in keys]
    ax_m.stackplot(t, *ys, labels=keys, step="post", alpha=0.8)
    ax_m.axhline(M, color="k", ls="--", lw=1, label=f"M = {M}")
    ax_m.scatter([], [], marker="^", color="#1f77b4", label="load")
    ax_m.scatter([], [], marker="v", color="#d62728", label="store")
    ax_m.set_ylabel("live fast words")
    ax_m.set_ylim(0, M * 1.3)
    ax_m.set_xlim(0, len(events))
    ax_m.legend(loc="upper left", ncol=min(len(keys) + 3, 8), fontsize=8)
    if title:
        ax_m.set_title(title)
    for ev_i, ev in enumerate(events):
        if ev.op not in ("load", "store") or ev.name not in lanes:
            continue
        y = lanes.index(ev.name)
        ax_l.scatter(
            ev_i + 0.5,
            y,
            marker="^" if ev.op == "load" else "v",
            s=8 + 6 * ev.words,
            color="#1f77b4" if ev.op == "load" else "#d62728",
            alpha=0.8,
            linewidths=0,
        )
    ax_l.set_yticks(range(len(lanes)), lanes)
    ax_l.set_ylim(-0.6, len(lanes) - 0.4)
    ax_l.invert_yaxis()
    ax_l.set_xlabel("event (load, store, alloc or free), in program order")
    ax_l.set_ylabel("slow array")
    ax_l.grid(False)
    return fig


def matmul_io_figure(m: int, k: int, p: int, *, M: int, tile: int | None = None, Ms=None):
    """Naive and square-tiled matmul I/O (closed forms) for an m×k by k×p product.

    Left: words moved against the cache size M (naive, tiled with b = ⌊√(M/3)⌋, and Hong and
    Kung's mkp/√M), with the chosen M marked and, if ``tile`` is given, the count of that tile
    (hollow if its three tiles do not fit in M). Right: at that M, words moved against the
    tile side b; tiles that do not fit are drawn grey. Used for the static figure and the
    widget of Chapter 2. Returns the figure.
    """
    from ..iomodel import (
        matmul_lower_bound,
        matmul_tile_size,
        naive_matmul_count,
        tiled_matmul_count,
    )

    if Ms is None:
        Ms = [2**e for e in range(2, int(math.log2(3 * max(m, k, p) ** 2)) + 2)]
    Ms = np.asarray(Ms)
    fig, (ax, ax_b) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    nmin = k + 2 * p
    naive_M = [x for x in Ms if x >= nmin]
    ax.loglog(
        Ms,
        [tiled_matmul_count(m, k, p, int(x)).total for x in Ms],
        "o-",
        label="tiled, b = ⌊√(M/3)⌋",
    )
    if naive_M:
        ax.loglog(
            naive_M,
            [naive_matmul_count(m, k, p, int(x)).total for x in naive_M],
            "s-",
            label="naive, by rows",
        )
    ax.loglog(
        Ms, [matmul_lower_bound(m, k, p, int(x)) for x in Ms], "k--", lw=1, label="Hong–Kung mkp/√M"
    )
    ax.axvline(M, color="0.5", lw=0.8)
    if tile is not None:
        c = tiled_matmul_count(m, k, p, M, tile=tile)
        fits = c.peak_fast <= M
        ax.plot(
            [M],
            [c.total],
            "D",
            ms=9,
            mfc="C3" if fits else "none",
            mec="C3",
            label=f"tile b = {tile}" + ("" if fits else " (does not fit)"),
        )
    ax.set(
        xlabel="fast memory M (words)",
        ylabel="words moved (reads + writes)",
        title=f"C = AB, {m}×{k} by {k}×{p}",
    )
    ax.legend(fontsize=8)
    b_best = matmul_tile_size(M)
    bs = np.unique(np.geomspace(1, max(4, 3 * b_best), 40).astype(int))
    counts = [tiled_matmul_count(m, k, p, M, tile=int(b)) for b in bs]
    fit = np.array([c.peak_fast <= M for c in counts])
    tot = np.array([c.total for c in counts], dtype=float)
    ax_b.loglog(bs[fit], tot[fit], "o-", color="C0", label="tile fits in M")
    if (~fit).any():
        ax_b.loglog(bs[~fit], tot[~fit], "o:", color="0.6", label="3 tiles > M: not allowed")
    ax_b.axvline(b_best, color="C0", lw=0.8, ls="--")
    ax_b.axhline(matmul_lower_bound(m, k, p, M), color="k", ls="--", lw=1, label="mkp/√M")
    if tile is not None:
        c = tiled_matmul_count(m, k, p, M, tile=tile)
        ax_b.plot(
            [tile],
            [c.total],
            "D",
            ms=9,
            mfc="C3" if c.peak_fast <= M else "none",
            mec="C3",
            label=f"b = {tile}",
        )
    ax_b.set(
        xlabel="tile side b",
        ylabel="words moved",
        title=f"at M = {M}: largest fitting b = {b_best}",
    )
    ax_b.legend(fontsize=8)
    return fig


def _graph_layout(G):
    """Vertex positions: x = depth (longest path from an input), y = rank within its depth."""
    depth = [0] * G.n
    for v, p in enumerate(G.preds):
        depth[v] = 1 + max((depth[u] for u in p), default=-1)
    pos, seen = {}, {}
    for v in range(G.n):
        pos[v] = (depth[v], seen.get(depth[v], 0))
        seen[depth[v]] = seen.get(depth[v], 0) + 1
    return {v: (x, (seen[x] - 1) / 2 - y) for v, (x, y) in pos.items()}


def partition_figure(G, segments, M: int, *, title: str | None = None):
    """Hong and Kung's partition of a schedule, one panel per segment of M I/Os.

    ``segments`` is :func:`attnlib.iomodel.optimal.schedule_segments`'s list. In each panel
    the graph is drawn by depth (inputs on the left); the vertices first computed in the
    segment are filled, the **dominator** (red at the start or read during the segment) is
    ringed in red, and the **minimum set** (computed vertices with no successor computed in
    the same segment) is marked with a green square. Returns the figure.
    """
    if not segments:
        raise ValueError("partition_figure needs at least one segment")
    pos = _graph_layout(G)
    cols = min(len(segments), 3)
    rows = -(-len(segments) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False)
    xs = np.array([pos[v][0] for v in range(G.n)])
    ys = np.array([pos[v][1] for v in range(G.n)])
    for i, ax in enumerate(axes.flat):
        if i >= len(segments):
            ax.axis("off")
            continue
        seg = segments[i]
        for v, p in enumerate(G.preds):
            for u in p:
                ax.plot([xs[u], xs[v]], [ys[u], ys[v]], color="#bbbbbb", lw=0.8, zorder=1)
        computed = list(seg["computed"])
        others = [v for v in range(G.n) if v not in set(computed)]
        ax.scatter(xs[others], ys[others], s=70, color="white", edgecolors="#999999", zorder=2)
        ax.scatter(xs[computed], ys[computed], s=70, color="#1f77b4", zorder=3, label="computed")
        dom = list(seg["dominator"])
        ax.scatter(
            xs[dom],
            ys[dom],
            s=190,
            facecolors="none",
            edgecolors="#d62728",
            lw=1.6,
            zorder=4,
            label="dominator",
        )
        mins = list(seg["minimum"])
        ax.scatter(
            xs[mins],
            ys[mins],
            s=34,
            marker="s",
            color="#2ca02c",
            zorder=5,
            label="minimum set",
        )
        for v in range(G.n):
            ax.annotate(
                G.names[v],
                (xs[v], ys[v]),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                fontsize=6,
                color="#444444",
            )
        ax.set_title(
            f"segment {i + 1}: {seg['io']} I/Os, |dominator| = {len(dom)}, |minimum| = {len(mins)}",
            fontsize=8,
        )
        ax.set_xlabel("depth (longest path from an input)", fontsize=8)
        ax.set_yticks([])
        ax.set_xticks(range(int(xs.max()) + 1))
        ax.grid(False)
        ax.set_ylim(ys.min() - 0.8, ys.max() + 1.0)
    handles, _ = axes.flat[0].get_legend_handles_labels()
    names = ["computed in the segment", "dominator set", "minimum set"]
    fig.legend(handles, names, loc="outside upper center", ncol=3, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
