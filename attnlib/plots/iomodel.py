"""Figures of Part I, the two-level machine (Chapters 2 to 5): schedules drawn from the
machine's log, I/O against the cache size, the crossovers and advantages of Chapter 4, and
the constants and partitions of Chapter 5. Each builder draws numbers computed by
:mod:`attnlib.iomodel` and returns the Figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from .._checks import AttnInputError, as_curves, as_dict, as_entries, as_series, check_int
from .style import label_ticks, loglog_figure

__all__ = [
    "schedule_figure",
    "matmul_io_figure",
    "matmul_io_at",
    "recompute_crossover_figure",
    "growth_in_n_figure",
    "backward_bound_figure",
    "gpu_memory_figure",
    "words_by_array_figure",
    "smallcache_crossover_figure",
    "smallcache_crossover_at",
    "smallcache_advantage_figure",
    "smallcache_crossover_grid",
    "bound_ratio_figure",
    "sparse_sweep_figure",
    "partition_figure",
]


_TRANSFER_MARKS = {"load": ("^", "#1f77b4"), "store": ("v", "#d62728")}


def schedule_figure(log, M: int, *, title: str | None = None, names=None):
    """Draw a :class:`attnlib.iomodel.TwoLevelMemory` run from its operation log (Chapters 2
    and 3).

    Top: the live fast words after each event, stacked by the slow array each block came
    from ("scratch" for ``alloc``), with the capacity M dashed. Bottom: one lane per slow
    array, ▲ for a load and ▼ for a store, marker area ∝ words moved. ``names`` fixes the
    lane order (default: order of first appearance). Raises AttnInputError for an empty log
    or M below 1.
    """
    M = check_int("M", M)
    events = as_entries("log", log, of="logged events")
    if not events:
        raise AttnInputError("log must be non-empty (run the machine with record=True)")
    origins = [ev.name if ev.name is not None else "scratch" for ev in events]
    live: dict = {}
    stack = []
    for ev, key in zip(events, origins, strict=True):
        if ev.op in ("load", "alloc", "free"):
            live[key] = live.get(key, 0) + (-ev.words if ev.op == "free" else ev.words)
        stack.append(dict(live))
    keys = [k for k in dict.fromkeys(origins) if any(s.get(k, 0) for s in stack)]
    transfers = [ev for ev in events if ev.op in ("load", "store")]
    if names is None:
        lanes = list(dict.fromkeys(ev.name for ev in transfers))
    else:
        lanes = list(as_entries("names", names, of="slow array names"))
    t = np.arange(len(events) + 1)
    fig, (ax_m, ax_l) = plt.subplots(
        2, 1, figsize=(7.5, 4.6), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    ys = [np.array([0] + [s.get(k, 0) for s in stack]) for k in keys]
    ax_m.stackplot(t, *ys, labels=keys, step="post", alpha=0.8)
    ax_m.axhline(M, color="k", ls="--", lw=1, label=f"M = {M}")
    for op, (marker, color) in _TRANSFER_MARKS.items():
        ax_m.scatter([], [], marker=marker, color=color, label=op)
    ax_m.set(ylabel="live fast words", ylim=(0, M * 1.3), xlim=(0, len(events)))
    ax_m.legend(loc="upper left", ncol=min(len(keys) + 3, 8), fontsize=8)
    if title:
        ax_m.set_title(title)
    for op, (marker, color) in _TRANSFER_MARKS.items():
        hits = [(i, e) for i, e in enumerate(events) if e.op == op and e.name in lanes]
        if hits:
            x, y = [i + 0.5 for i, _ in hits], [lanes.index(e.name) for _, e in hits]
            size = [8 + 6 * e.words for _, e in hits]
            ax_l.scatter(x, y, marker=marker, s=size, color=color, alpha=0.8, linewidths=0)
    ax_l.set_yticks(range(len(lanes)), lanes)
    ax_l.set_ylim(len(lanes) - 0.4, -0.6)  # the first lane on top
    ax_l.set(xlabel="event (load, store, alloc or free), in program order", ylabel="slow array")
    ax_l.grid(False)
    return fig


def _mark_tile(ax, x, count, M: int, label: str) -> None:
    """A diamond at a given tile's count, hollow when its three tiles do not fit in M."""
    fill = "C3" if count.peak_fast <= M else "none"
    ax.plot([x], [count.total], "D", ms=9, mfc=fill, mec="C3", label=label)


def matmul_io_figure(m: int, k: int, p: int, *, M: int, tile: int | None = None, Ms=None):
    """Naive and square-tiled matmul I/O (closed forms) for an m×k by k×p product, for the
    static figure and the widget of Chapter 2.

    Left: words moved against the cache size M (naive, tiled with b = ⌊√(M/3)⌋, and the
    Θ-expression mkp/√M of Hong and Kung's bound, constant 1,
    :func:`~attnlib.iomodel.matmul_order`), with the chosen M marked and, if ``tile`` is
    given, the count of that tile (hollow if its three tiles do not fit in M). Right: at that
    M, words moved against the tile side b; tiles that do not fit are drawn grey. Raises
    AttnInputError for sizes below 1 or M below 3.
    """
    from ..iomodel import matmul_order, matmul_tile_size
    from ..iomodel import naive_matmul_count as naive
    from ..iomodel import tiled_matmul_count as tiled

    m, k, p = check_int("m", m), check_int("k", k), check_int("p", p)
    M = check_int("M", M, minimum=3)
    if Ms is None:
        Ms = [2**e for e in range(2, int(math.log2(3 * max(m, k, p) ** 2)) + 2)]
    Ms = np.array([check_int(f"Ms[{i}]", x, minimum=3) for i, x in enumerate(Ms)])
    fig, (ax, ax_b) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    ax.loglog(Ms, [tiled(m, k, p, int(x)).total for x in Ms], "o-", label="tiled, b = ⌊√(M/3)⌋")
    naive_M = [int(x) for x in Ms if x >= k + 2 * p]
    if naive_M:
        ax.loglog(naive_M, [naive(m, k, p, x).total for x in naive_M], "s-", label="naive, by rows")
    order = [matmul_order(m, k, p, int(x)) for x in Ms]
    ax.loglog(Ms, order, "k--", lw=1, label="Hong–Kung order mkp/√M (constant 1)")
    ax.axvline(M, color="0.5", lw=0.8)
    b_best = matmul_tile_size(M)
    bs = np.unique(np.geomspace(1, max(4, 3 * b_best), 40).astype(int))
    counts = [tiled(m, k, p, M, tile=int(b)) for b in bs]
    fit = np.array([c.peak_fast <= M for c in counts])
    tot = np.array([c.total for c in counts], dtype=float)
    ax_b.loglog(bs[fit], tot[fit], "o-", color="C0", label="tile fits in M")
    if (~fit).any():
        ax_b.loglog(bs[~fit], tot[~fit], "o:", color="0.6", label="3 tiles > M: not allowed")
    ax_b.axvline(b_best, color="C0", lw=0.8, ls="--")
    ax_b.axhline(matmul_order(m, k, p, M), color="k", ls="--", lw=1, label="order mkp/√M")
    if tile is not None:
        c = tiled(m, k, p, M, tile=check_int("tile", tile))
        _mark_tile(
            ax, M, c, M, f"tile b = {tile}" + ("" if c.peak_fast <= M else " (does not fit)")
        )
        _mark_tile(ax_b, tile, c, M, f"b = {tile}")
    ax.set(xlabel="fast memory M (words)", ylabel="words moved (reads + writes)")
    ax.set_title(f"C = AB, {m}×{k} by {k}×{p}")
    ax_b.set(xlabel="tile side b", ylabel="words moved")
    ax_b.set_title(f"at M = {M}: largest fitting b = {b_best}")
    for a in (ax, ax_b):
        a.legend(fontsize=8)
    return fig


def matmul_io_at(log2_M: int, tile: int):
    """Chapter 2's live figure: :func:`matmul_io_figure` for 256×256 by 256×256 at cache
    M = 2**log2_M words and tile side ``tile``."""
    log2_M = check_int("log2_M", log2_M, maximum=62)
    return matmul_io_figure(256, 256, 256, M=2**log2_M, tile=tile)


def recompute_crossover_figure(Ms, standard, flash, crossover: int, *, n: int, d: int):
    """Chapter 3: the standard backward count (stores P, dP, dS) and FlashAttention's
    (recomputes P) against M, with the M from which recomputing always wins marked.

    ``Ms``, ``standard`` and ``flash`` are equal-length positive series (words). Raises
    AttnInputError otherwise, or for sizes below 1.
    """
    Ms = as_series("Ms", Ms, positive=True)
    standard = as_series("standard", standard, size=Ms.size, like="Ms", positive=True)
    flash = as_series("flash", flash, size=Ms.size, like="Ms", positive=True)
    crossover, n, d = check_int("crossover", crossover), check_int("n", n), check_int("d", d)
    fig, ax = plt.subplots()
    ax.loglog(Ms, standard, "s-", ms=3, color="C1", label="standard backward (stores P, dP, dS)")
    ax.loglog(Ms, flash, "o-", ms=3, color="C0", label="FlashAttention backward (recomputes P)")
    ax.axvline(crossover, color="0.4", ls=":", lw=1)
    note = f"crossover\nM ≈ {crossover / d**2:.2f} d²"
    ax.text(crossover * 1.1, flash.max() / 3, note, fontsize=8)
    ax.set(xlabel="fast memory M (words)", ylabel="words moved, backward pass")
    ax.set_title(f"Backward I/O, n = {n}, d = {d}")
    ax.legend()
    return fig


def growth_in_n_figure(ns, standard, flash, *, d: int, M: int):
    """Chapter 3: forward + backward words of the standard schedules and FlashAttention's
    against n at a fixed M, with their fitted slopes and n² dotted.

    ``ns``, ``standard`` and ``flash`` are equal-length positive series. Raises
    AttnInputError otherwise, or for d or M below 1.
    """
    ns = as_series("ns", ns, positive=True)
    standard = as_series("standard", standard, size=ns.size, like="ns", positive=True)
    flash = as_series("flash", flash, size=ns.size, like="ns", positive=True)
    series = {
        "standard (forward + backward)": (ns, standard),
        "FlashAttention (forward + backward)": (ns, flash),
    }
    d, M = check_int("d", d), check_int("M", M)
    power = f"$2^{{{M.bit_length() - 1}}}$" if M & (M - 1) == 0 else str(M)
    fig = loglog_figure(
        series,
        xlabel="sequence length n",
        ylabel="words moved (reads + writes)",
        fit=True,
        title=f"Forward + backward I/O, d = {d}, M = {power} words",
    )
    ax = fig.axes[0]
    ax.loglog(ns, ns**2, "k:", lw=1, label="n²")
    ax.legend()
    label_ticks(ax, ns[::2])
    return fig


def backward_bound_figure(Ms, count, order, *, n: int, d: int):
    """Chapter 3: FlashAttention's backward count against M, with the Θ-expression n²d²/M
    (constant 1, :func:`~attnlib.iomodel.backward_order`; an order, not a bound) and 24
    times it.

    ``Ms``, ``count`` and ``order`` are equal-length positive series. Raises AttnInputError
    otherwise, or for sizes below 1.
    """
    Ms = as_series("Ms", Ms, positive=True)
    count = as_series("count", count, size=Ms.size, like="Ms", positive=True)
    order = as_series("order", order, size=Ms.size, like="Ms", positive=True)
    n, d = check_int("n", n), check_int("d", d)
    fig, ax = plt.subplots()
    (line,) = ax.loglog(Ms, count, "o-", ms=3, label=f"FlashAttention backward, n = {n}, d = {d}")
    ax.loglog(Ms, order, "--", color=line.get_color(), lw=1, label="order n²d²/M (constant 1)")
    ax.loglog(Ms, 24 * order, ":", color=line.get_color(), lw=1, label="24 n²d²/M")
    ax.set(xlabel="fast memory M (words), from d² to nd/4", ylabel="words moved, backward pass")
    ax.set_title("FlashAttention backward I/O against the cache size")
    ax.legend()
    return fig


def gpu_memory_figure(ratios: dict, heads):
    """Chapter 4: fast memory per SM in units of d², one bar per (GPU, word type) with one
    thread block per SM and a tick for two, against the line M = d².

    ``ratios`` maps ``(gpu, dtype, blocks_per_sm)`` to M/d² at each head dimension of
    ``heads`` (from the presets of :mod:`attnlib.machines`); each (gpu, dtype) needs
    blocks_per_sm = 1. Raises AttnInputError otherwise.
    """
    heads = [check_int(f"heads[{i}]", h) for i, h in enumerate(as_entries("heads", heads))]
    of = "(gpu, dtype, blocks_per_sm) -> M/d² series"
    rows = as_curves("ratios", ratios, size=len(heads), over="heads", of=of, positive=True)
    pairs = list(dict.fromkeys(key[:2] for key in rows))
    if any((*pair, 1) not in rows for pair in pairs):
        raise AttnInputError("ratios must hold blocks_per_sm = 1 for every (gpu, dtype)")
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    width = 0.8 / len(pairs)
    for k, pair in enumerate(pairs):
        x = np.arange(len(heads)) + (k - (len(pairs) - 1) / 2) * width
        ax.bar(x, rows[(*pair, 1)], width, label=f"{pair[0]}, {pair[1]}, 1 block/SM")
        if (*pair, 2) in rows:
            ax.plot(x, rows[(*pair, 2)], "k_", ms=12, mew=2)
    ax.plot([], [], "k_", ms=12, mew=2, label="same, 2 blocks/SM")
    ax.axhline(1.0, color="k", lw=1.2, ls="--", label=r"$M = d^2$")
    ax.set_yscale("log")
    ax.set_xticks(range(len(heads)), [f"d = {d}" for d in heads])
    ax.set(xlabel="head dimension", ylabel=r"$M / d^2$, M = shared memory + registers")
    ax.set_title("Fast memory per SM in units of d² (NVIDIA whitepapers)")
    ax.legend(fontsize=7, ncol=2)
    return fig


def words_by_array_figure(reads: dict, writes: dict, names, *, title: str):
    """Chapter 4: words read and written per slow array (from
    :func:`attnlib.iomodel.words_by_array`), side by side, in the order of ``names``.

    Raises AttnInputError for a count that is not an integer >= 0.
    """
    names = as_entries("names", names, of="slow array names")
    r = [check_int(f"reads[{k!r}]", reads.get(k, 0), minimum=0) for k in names]
    w = [check_int(f"writes[{k!r}]", writes.get(k, 0), minimum=0) for k in names]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    x = np.arange(len(names))
    ax.bar(x - 0.2, r, 0.4, label="reads")
    ax.bar(x + 0.2, w, 0.4, label="writes")
    ax.set_xticks(x, names)
    ax.set(xlabel="slow array", ylabel="words", title=title)
    ax.legend()
    return fig


def smallcache_crossover_figure(n: int, d: int, *, ax=None, M_max: int | None = None):
    """Chapter 4: counted backward I/O against M, FlashAttention's and the small-cache
    algorithm's, from :func:`attnlib.iomodel.smallcache_crossover`.

    The two branches of the Θ-expression n²d²/M and n²d/√M (constant 1) are dashed, M = d²
    dotted and the crossover (the first M at which FlashAttention's count is no larger)
    starred. The
    crossover M is also stored on the Figure as ``fig.crossover_M``. Raises AttnInputError
    for n < 1, d < 2 or M_max below 1.
    """
    from ..iomodel import smallcache_backward_count, smallcache_crossover

    sweep = smallcache_crossover(n, d, M_max=M_max)
    Ms, cross = sweep.Ms, sweep.M
    fig, ax = plt.subplots() if ax is None else (ax.figure, ax)
    ax.loglog(Ms, sweep.flash, color="C0", label="FlashAttention backward (counted)")
    ax.loglog(Ms, sweep.small, color="C1", label="small-cache backward (counted)")
    ax.loglog(Ms, n * n * d * d / Ms, "--", color="C0", lw=1, alpha=0.7, label=r"$n^2d^2/M$")
    branch = r"$n^2d/\sqrt{M}$"
    ax.loglog(Ms, n * n * d / np.sqrt(Ms), "--", color="C1", lw=1, alpha=0.7, label=branch)
    ax.axvline(d * d, color="gray", ls=":", lw=1.2, label=r"$M = d^2$")
    if cross is not None:
        y = smallcache_backward_count(n, d, cross).total
        ax.plot([cross], [y], "k*", ms=11, label=f"crossover M = {cross} = {cross / d / d:.2f}·d²")
    ax.set(xlabel="fast memory M (words)", ylabel="words moved (reads + writes)")
    ax.set_title(f"backward pass, n = {n}, d = {d}")
    ax.legend(fontsize=8)
    fig.crossover_M = cross
    return fig


def smallcache_crossover_at(log2_d: int, log2_n: int):
    """Chapter 4's live figure: :func:`smallcache_crossover_figure` at head dimension
    d = 2**log2_d and sequence length n = 2**log2_n."""
    log2_d = check_int("log2_d", log2_d, maximum=62)
    log2_n = check_int("log2_n", log2_n, maximum=62)
    return smallcache_crossover_figure(2**log2_n, 2**log2_d)


def smallcache_crossover_grid(cases):
    """Chapter 4: :func:`smallcache_crossover_figure` for each (d, n) of ``cases`` (four of
    them), on a 2 × 2 grid. Raises AttnInputError unless there are four cases."""
    cases = as_entries("cases", cases, of="(d, n) pairs", length=4)
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, (d, n) in zip(axes.flat, cases, strict=True):
        smallcache_crossover_figure(n, d, ax=ax)
        ax.legend(fontsize=6)
    return fig


def smallcache_advantage_figure(advantages: dict, *, n: int):
    """Chapter 4: the measured advantage of the small-cache backward pass (FlashAttention's
    count over its count) against the predicted d/√M, one colour per d, crosses where
    FlashAttention's key blocks are one row; the line ratio = d/√M and a factor-2 band.

    ``advantages`` maps d to :func:`attnlib.iomodel.smallcache_advantage`'s result. Raises
    AttnInputError for an empty mapping or n below 1.
    """
    n = check_int("n", n)
    advantages = as_dict("advantages", advantages, of="d -> sweeps")
    fig, ax = plt.subplots()
    for k, (d, adv) in enumerate(advantages.items()):
        marks = (
            (~adv.one_row, ".", 3, "B_c >= 2"),
            (adv.one_row, "x", 4, "B_c = 1 (one-row key blocks)"),
        )
        for rows, marker, size, what in marks:
            x, y = adv.predicted[rows], adv.ratio[rows]
            ax.loglog(x, y, marker, ms=size, color=f"C{k}", label=f"d = {d}, {what}")
    x = np.geomspace(1.8, 7, 50)
    ax.loglog(x, x, "k-", lw=1, label=r"ratio $= d/\sqrt{M}$")
    ax.fill_between(x, x / 2, 2 * x, color="gray", alpha=0.15, label="factor 2 either side")
    label_ticks(ax, [2, 3, 4, 5, 6, 7], "x")
    label_ticks(ax, [1, 2, 5, 10, 20], "y")
    ax.set(
        xlabel=r"predicted advantage $d/\sqrt{M}$", ylabel="FlashAttention I/O / small-cache I/O"
    )
    ax.set_title(f"advantage below d²/4, n = {n}")
    ax.legend(fontsize=7)
    return fig


def bound_ratio_figure(Ms, ratios: dict, *, n: int, d: int):
    """Chapter 5: counted I/O over a bound or an order against M, one panel per pass, one
    line per algorithm and the best of them dotted (over a certified ``*_lower_bound`` every
    ratio is at least 1; over a ``*_order`` it is the schedule's constant).

    ``ratios`` maps a pass name to ``{algorithm: series}`` (from
    :func:`attnlib.iomodel.bound_ratios`; NaN below an algorithm's smallest cache). Raises
    AttnInputError for series of the wrong length or sizes below 1.
    """
    Ms = as_series("Ms", Ms, positive=True)
    n, d = check_int("n", n), check_int("d", d)
    grid = {"size": Ms.size, "over": "Ms", "positive": True, "missing": True}
    ratios = as_dict(
        "ratios",
        ratios,
        of="pass -> {algorithm: series}",
        check_value=lambda label, algs: as_curves(label, algs, of="algorithm -> series", **grid),
    )
    fig, axes = plt.subplots(1, len(ratios), figsize=(11, 4), sharey=True, squeeze=False)
    for ax, (name, algs) in zip(axes[0], ratios.items(), strict=True):
        for label, r in algs.items():
            ax.loglog(Ms, r, label=label)
        best = np.nanmin(np.vstack(list(algs.values())), axis=0)
        ax.loglog(Ms, best, "k:", lw=2.5, label="best of the three")
        ax.axvline(d * d, color="gray", ls="--", lw=1, label=r"$M = d^2$")
        ax.axhline(1.0, color="gray", lw=1.5, label="constant 1")
        ax.set(xlabel="fast memory M (words)", title=f"{name} pass, n = {n}, d = {d}")
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("counted I/O / bound or order")
    return fig


def sparse_sweep_figure(sweeps: dict, *, n: int, d: int):
    """Chapter 5: block-sparse FlashAttention's backward count against the fraction of kept
    blocks, the certified bound of the kept mask solid and thin, Pagh and Stöckel's
    worst-case order (constant 1, never a bound) dashed and the dense count × fraction
    dotted, one colour per M.

    ``sweeps`` maps M to :func:`attnlib.iomodel.block_sparse_sweep`'s result. Raises
    AttnInputError for an empty mapping or sizes below 1.
    """
    n, d = check_int("n", n), check_int("d", d)
    sweeps = as_dict("sweeps", sweeps, of="M -> sweeps")
    fig, ax = plt.subplots()
    for k, (M, s) in enumerate(sweeps.items()):
        c = f"C{k}"
        label = f"block-sparse FlashAttention, M = {M} = {M / d**2:.2f} d²"
        ax.loglog(s.fractions, s.counts, "o-", color=c, label=label)
        ax.loglog(s.fractions, s.bounds, "-", color=c, lw=0.8, label=f"certified bound, M = {M}")
        ax.loglog(
            s.fractions, s.orders, "--", color=c, label=f"worst-case order (constant 1), M = {M}"
        )
        dense = s.dense * s.fractions
        ax.loglog(s.fractions, dense, ":", color=c, lw=1, alpha=0.7, label="dense count × fraction")
    ax.set(xlabel="fraction of kept blocks", ylabel="words moved (backward pass)")
    ax.set_title(f"sparse attention, n = {n}, d = {d}")
    ax.legend(fontsize=7)
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


# How partition_figure marks a segment's vertex sets: key, label, and scatter style.
_PARTITION_MARKS = (
    ("computed", "computed in the segment", {"s": 70, "color": "#1f77b4", "zorder": 3}),
    ("dominator", "dominator set", {"s": 190, "facecolors": "none", "edgecolors": "#d62728"}),
    ("minimum", "minimum set", {"s": 34, "marker": "s", "color": "#2ca02c", "zorder": 5}),
)


def partition_figure(G, segments, M: int, *, title: str | None = None):
    """Chapter 5: Hong and Kung's partition of a schedule, one panel per segment of M I/Os.

    ``segments`` is :func:`attnlib.iomodel.schedule_segments`'s list. In each panel the graph
    is drawn by depth (inputs on the left); the vertices computed in the segment (after
    pruning, if the segments were pruned) are filled, the **dominator** (red at the start or
    read during the segment) is ringed in red, and the **minimum set** of the segment's part
    (the vertices first computed in it with no successor in the same part) is marked with a
    green square. Raises AttnInputError for no segments or M < 1.
    """
    from ..iomodel.graphs import check_graph
    from ..iomodel.tiling import ceil_div

    G, M = check_graph(G), check_int("M", M)
    segments = as_entries("segments", segments, of="segments", min_len=1)
    pos = _graph_layout(G)
    cols = min(len(segments), 3)
    rows = ceil_div(len(segments), cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False)
    xs = np.array([pos[v][0] for v in range(G.n)])
    ys = np.array([pos[v][1] for v in range(G.n)])
    for ax in axes.flat[len(segments) :]:
        ax.axis("off")
    for i, (ax, seg) in enumerate(zip(axes.flat, segments, strict=False)):
        for v, p in enumerate(G.preds):
            for u in p:
                ax.plot([xs[u], xs[v]], [ys[u], ys[v]], color="#bbbbbb", lw=0.8, zorder=1)
        others = [v for v in range(G.n) if v not in set(seg["computed"])]
        ax.scatter(xs[others], ys[others], s=70, color="white", edgecolors="#999999", zorder=2)
        for key, label, style in _PARTITION_MARKS:
            vs = list(seg[key])
            ax.scatter(xs[vs], ys[vs], label=label, **({"lw": 1.6, "zorder": 4} | style))
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
            f"segment {i + 1}: {seg['io']} I/Os, |dominator| = {len(seg['dominator'])}, "
            f"|minimum| = {len(seg['minimum'])}",
            fontsize=8,
        )
        ax.set_xlabel("depth (longest path from an input)", fontsize=8)
        ax.set(yticks=[], xticks=range(int(xs.max()) + 1), ylim=(ys.min() - 0.8, ys.max() + 1.0))
        ax.grid(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncol=3, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
