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


# --------------------------------------------------------------------- the map of results
# (the preface's figure)


def map_of_results(*, d: int = 64):
    """The book's map of results as one figure: problem × regime × bound × chapter.

    Left, data movement of exact attention (forward and backward) against fast memory M,
    from :func:`attnlib.iomodel.backward_lower_bound` divided by n²: the large-cache branch
    d²/M (FlashAttention is optimal; SY24 Thm 3.1, LLS+24) and the small-cache branch d/√M
    (square tiling, SY24 Alg. 1, and the small-cache backward, LLS+24), crossing at M = d².
    Right, the time of the gradient against the entry bound B (AS24, with d = O(log n) and
    ε = 1/poly(n)): below B ≈ √log n it takes n^{1+o(1)} time (Thm 1.6); for
    B = ω(√log n) no n^{2−Ω(1)} algorithm exists under SETH (Thm 1.5). The right panel is
    schematic: the theorems are asymptotic, so the boundary is drawn at B = √(ln n) with a
    band of a constant factor 2 either side.

    Deterministic, no arguments needed; returns the Figure.
    """
    from attnlib._checks import check_int
    from attnlib.iomodel.bounds import backward_lower_bound

    d = check_int("d", d, minimum=2)
    fig, (ax_io, ax_b) = plt.subplots(2, 1, figsize=(7.2, 9.0))

    # Left: I/O per score entry against M, both branches and the bound.
    d2 = d * d
    Ms = np.unique(np.geomspace(max(4, d2 // 256), d2 * 256, 97).astype(int))
    n = 1024
    bound = np.array([backward_lower_bound(n, d, int(M)) for M in Ms]) / n**2
    large, small = d2 / Ms, d / np.sqrt(Ms)
    ax_io.axvspan(Ms[0], d2, color="#d62728", alpha=0.06)
    ax_io.axvspan(d2, Ms[-1], color="#1f77b4", alpha=0.06)
    # Each branch drawn dashed a little past the crossover, where it stops being the bound.
    near = (Ms >= d2 / 16) & (Ms <= d2 * 16)
    show_large, show_small = (Ms >= d2) | near, (Ms <= d2) | near
    ax_io.loglog(
        Ms[show_large],
        large[show_large],
        ls="--",
        color="#1f77b4",
        lw=1.2,
        label=r"$n^2d^2/M$ (large-cache branch)",
    )
    ax_io.loglog(
        Ms[show_small],
        small[show_small],
        ls="--",
        color="#d62728",
        lw=1.2,
        label=r"$n^2d/\sqrt{M}$ (small-cache branch)",
    )
    ax_io.loglog(Ms, bound, color="black", lw=2.2, label="lower bound = their minimum")
    ax_io.axvline(d2, color="gray", lw=1, ls=":")
    ax_io.plot([d2], [1.0], "o", color="black")
    ax_io.annotate(
        rf"crossover $M=d^2$ ({d2:,} words):" "\n" r"both equal $n^2$",
        xy=(d2, 1.0),
        xytext=(d2 * 2.5, 2.5),
        fontsize=8.5,
        arrowprops={"arrowstyle": "->", "color": "gray"},
    )
    ax_io.text(
        0.03,
        0.96,
        "small cache, $M = o(d^2)$\n$\\Theta(n^2 d/\\sqrt{M})$: square tiling\n"
        "(SY24), small-cache backward\n(LLS+24) · Ch. 4",
        transform=ax_io.transAxes,
        fontsize=8,
        va="top",
        color="#8b1a1a",
    )
    ax_io.text(
        0.97,
        0.96,
        "large cache, $M = \\Omega(d^2)$\n$\\Theta(n^2 d^2/M)$: FlashAttention\n"
        "fwd + bwd optimal · Ch. 3\nlower bounds · Ch. 5",
        transform=ax_io.transAxes,
        fontsize=8,
        va="top",
        ha="right",
        color="#17456e",
    )
    ax_io.set_ylim(bound.min() / 2, bound.max() * 60)  # headroom for the labels
    ax_io.set_xlabel(f"fast memory M (words), head dimension d = {d}")
    ax_io.set_ylabel(r"I/O lower bound $/\,n^2$ (words per score)")
    ax_io.set_title("Exact attention: data movement (I/O model)")
    ax_io.legend(loc="lower left", fontsize=8)

    # Right: the B-versus-n phase diagram of AS24.
    log2n = np.linspace(4, 40, 200)
    thr = np.sqrt(log2n * math.log(2))
    b_top = 2.6 * thr[-1]
    ax_b.fill_between(log2n, 0, thr / 2, color="#2ca02c", alpha=0.15, lw=0)
    ax_b.fill_between(log2n, thr / 2, 2 * thr, color="gray", alpha=0.12, lw=0)
    ax_b.fill_between(log2n, 2 * thr, b_top, color="#d62728", alpha=0.12, lw=0)
    ax_b.plot(log2n, thr, color="black", lw=2, label=r"$B = \sqrt{\ln n}$")
    ax_b.plot(log2n, thr / 2, color="gray", lw=0.8, ls="--")
    ax_b.plot(log2n, 2 * thr, color="gray", lw=0.8, ls="--", label="constant factor 2")
    ax_b.text(
        39,
        0.25,
        r"$B = o(\sqrt{\log n})$: gradient in $n^{1+o(1)}$ time (AS24 Thm 1.6)"
        "\npolynomial method · Ch. 6–7",
        fontsize=8,
        ha="right",
        va="bottom",
        color="#1b5e20",
    )
    ax_b.text(
        39,
        thr[-1] * 1.08,
        r"threshold $B = \Theta(\sqrt{\log n})$",
        fontsize=8,
        ha="right",
        va="bottom",
        color="black",
    )
    ax_b.text(
        39,
        2.12 * thr[-1],
        r"$B = \omega(\sqrt{\log n})$: no $n^{2-\Omega(1)}$ algorithm"
        "\nunder SETH (AS24 Thm 1.5) · hardness, Ch. 8",
        fontsize=8,
        ha="right",
        color="#8b1a1a",
    )
    ax_b.set_xlim(log2n[0], log2n[-1])
    ax_b.set_ylim(0, b_top)
    ticks = [4, 10, 20, 30, 40]
    ax_b.set_xticks(ticks, [f"$2^{{{t}}}$" for t in ticks])
    ax_b.set_xlabel(
        r"sequence length n  (with $d = O(\log n)$, $\varepsilon = 1/\mathrm{poly}(n)$)"
    )
    ax_b.set_ylabel(r"entry bound B  ($|Q_{ij}|, |K_{ij}| \leq B$)")
    ax_b.set_title("Training gradient: time against entry size (schematic)")
    ax_b.legend(loc="upper left", fontsize=8)

    add_takeaway(
        fig,
        "Exact attention moves Θ(n²d²/M) words once the cache holds d² words, Θ(n²d/√M) below;\n"
        "beating n² time needs small entries, B = o(√log n): above that it is SETH-hard.",
    )
    return fig


# ---------------------------------------------------------------------------------------
# Part I/O, small caches (Chapters 4 and 5)
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# Part I/O, first half (Chapters 2 and 3): schedules from the machine's log, matmul I/O
# ---------------------------------------------------------------------------------------


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
    from .iomodel import (
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


# ---------------------------------------------------------------------------------------
# Part I/O, lower bounds (Chapter 5): an optimal schedule cut into Hong–Kung segments
# ---------------------------------------------------------------------------------------


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


# ------------------------------------------------------------------ the decision map (ch. 9)
# (Chapter 9)

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


# ---------------------------------------------------------------------------------------
# Chapter 10: benchmarks of the compiled kernels (benchmarks/attention.py)
# ---------------------------------------------------------------------------------------

BENCH_IMPLS = ("flash", "torch-flash", "torch-math", "numpy")
BENCH_COLORS = {
    "flash": "#1f77b4",
    "torch-flash": "#d62728",
    "torch-math": "#ff7f0e",
    "numpy": "#2ca02c",
}
BENCH_LABELS = {
    "flash": "attnlib.flash_* (numba)",
    "torch-flash": "torch SDPA, flash backend",
    "torch-math": "torch SDPA, math backend",
    "numpy": "attnlib exact (numpy)",
}


def read_benchmark_csv(path) -> list[dict]:
    """Rows of a ``benchmarks/results`` CSV, with integer and float columns parsed."""
    import csv
    from pathlib import Path

    ints = {"n", "d", "threads", "repeats"}
    rows = []
    with Path(path).open(newline="") as f:
        for row in csv.DictReader(f):
            for k, v in row.items():
                if v in ("", None):
                    continue
                if k in ints:
                    row[k] = int(v)
                elif k.endswith(("_s", "_bytes", "_qkvodo")) or k == "load1":
                    row[k] = float(v)
            rows.append(row)
    return rows


def benchmark_times(rows, *, dtype="float32", d=64, pass_name="fwd+bwd") -> dict:
    """{(impl, threads): (ns, median seconds)} from the rows of attention_time.csv."""
    out: dict = {}
    for r in rows:
        if r.get("status") != "ok" or r["dtype"] != dtype or r["d"] != d:
            continue
        if r["pass"] != pass_name:
            continue
        out.setdefault((r["impl"], r["threads"]), []).append((r["n"], r["median_s"]))
    return {k: tuple(np.array(v).T) for k, v in ((k, sorted(v)) for k, v in out.items())}


def benchmark_figure(time_rows, memory_rows, *, dtype="float32", d=64):
    """Three panels from the benchmark CSVs: time of forward+backward against n, the ratio of
    attnlib.flash_* to each peer, and the extra memory of one forward+backward.

    Solid lines use every core, dashed lines one thread.
    """
    fig, axes = plt.subplots(1, 3, figsize=(14.5, 4.3))
    times = benchmark_times(time_rows, dtype=dtype, d=d)
    threads = sorted({t for _, t in times})
    style = {t: ("-" if t == max(threads) else "--") for t in threads}
    ax = axes[0]
    order = {impl: k for k, impl in enumerate(BENCH_IMPLS)}
    for (impl, t), (ns, secs) in sorted(
        times.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])
    ):
        if impl not in BENCH_LABELS:  # e.g. the matmul-limit gemm, timed at one n only
            continue
        label = f"{BENCH_LABELS[impl]}, {t} thr."
        ax.loglog(ns, secs, style[t], marker="o", color=BENCH_COLORS.get(impl), label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("forward + backward time (s, median)")
    ax.set_title(f"Time, {dtype}, d = {d}")
    ax.legend(fontsize=7)

    ax = axes[1]
    for t in threads:
        if ("flash", t) not in times:
            continue
        fns, fsecs = times[("flash", t)]
        for peer in ("torch-flash", "torch-math", "numpy"):
            if (peer, t) not in times:
                continue
            pns, psecs = times[(peer, t)]
            common = [n for n in fns if n in set(pns)]
            if not common:
                continue
            ratio = [fsecs[list(fns).index(n)] / psecs[list(pns).index(n)] for n in common]
            ax.plot(
                common,
                ratio,
                style[t],
                marker="o",
                color=BENCH_COLORS[peer],
                label=f"÷ {BENCH_LABELS[peer]}, {t} thr.",
            )
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("time of flash_* ÷ time of peer")
    ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_title("Ratio (< 1: attnlib is faster)")
    ax.legend(fontsize=7)

    ax = axes[2]
    mem: dict = {}
    for r in memory_rows:
        if r.get("status") == "ok" and r["dtype"] == dtype:
            mem.setdefault(r["impl"], []).append((r["n"], r["rss_extra_bytes"], r["qkvodo_bytes"]))
    budget = {}
    for impl in BENCH_IMPLS:
        if impl not in mem:
            continue
        pts = sorted(mem[impl])
        ns = [p[0] for p in pts]
        ax.loglog(
            ns,
            [max(p[1], 1.0) / 2**20 for p in pts],
            marker="o",
            color=BENCH_COLORS[impl],
            label=BENCH_LABELS[impl],
        )
        budget.update({p[0]: 2 * p[2] / 2**20 for p in pts})
    if budget:
        bn = sorted(budget)
        ax.loglog(bn, [budget[n] for n in bn], "k:", label="2 × |Q, K, V, O, dO|")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("extra peak memory (MiB, RSS)")
    ax.set_title(f"Memory of forward + backward, {dtype}, d = {d}")
    ax.legend(fontsize=7)
    return fig


def benchmark_ratio_figure(time_rows):
    """One panel per head dimension d: forward+backward time of attnlib.flash_* divided by
    that of the faster PyTorch backend (flash or math) on the same shape, in the same run,
    against n; one line per dtype and thread count. Below 1, attnlib is faster."""
    med = {
        (r["impl"], r["dtype"], r["n"], r["d"], r["threads"]): r["median_s"]
        for r in time_rows
        if r.get("status") == "ok" and r["pass"] == "fwd+bwd"
    }
    ds = sorted({k[3] for k in med if k[0] == "flash"})
    fig, axes = plt.subplots(1, len(ds), figsize=(4.6 * len(ds), 4.0), sharey=True, squeeze=False)
    colors = {"float32": "#1f77b4", "float64": "#9467bd"}
    threads_all = max((k[4] for k in med), default=1)
    for ax, d in zip(axes[0], ds, strict=True):
        for dtype in ("float32", "float64"):
            for t in sorted({k[4] for k in med}):
                pts = []
                for (impl, dt, n, dd, tt), secs in sorted(med.items()):
                    if (impl, dt, dd, tt) != ("flash", dtype, d, t):
                        continue
                    peers = [med.get((p, dt, n, dd, tt)) for p in ("torch-flash", "torch-math")]
                    peers = [p for p in peers if p]
                    if peers:
                        pts.append((n, secs / min(peers)))
                if pts:
                    ns, ratio = zip(*pts, strict=True)
                    ax.plot(
                        ns,
                        ratio,
                        "-" if t == threads_all else "--",
                        marker="o",
                        color=colors[dtype],
                        label=f"{dtype}, {t} thr.",
                    )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())
        ax.set_xlabel("sequence length n")
        ax.set_title(f"d = {d}")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("time of flash_* ÷ faster PyTorch backend")
    fig.suptitle("Forward + backward against PyTorch's faster CPU backend (< 1: attnlib faster)")
    return fig
