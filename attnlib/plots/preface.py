"""The preface's figures (book/intro.ipynb): the map of results and the reading paths."""

from __future__ import annotations

import functools
import math

import matplotlib.pyplot as plt
import numpy as np

from .._checks import AttnInputError, as_dict, as_entries, check_bool, check_int
from ..iomodel.bounds import backward_order
from .style import add_takeaway, use_book_style

__all__ = ["map_of_results", "reading_path_figure"]


def map_of_results(*, d: int = 64, phone: bool = False):
    """The preface's map of results as one figure of two panels, one above the other.

    Top, the data movement of exact attention (forward and backward) against the fast memory
    M, on log-log axes: the Θ-expression :func:`attnlib.iomodel.backward_order` (constant 1,
    an order, not a bound) at n = 1024 and head dimension ``d``, divided by n² (words per
    score), with its two branches dashed, the
    large-cache branch d²/M (FlashAttention attains it up to a constant factor: SY24 Thm 3.1
    for standard matrix multiplication; Chapter 5's certified bounds, the backward pass as a
    corollary) and the small-cache branch d/√M (square tiling, SY24 Alg. 1, and the
    small-cache backward pass of Chapter 4). They cross at M = d², where both equal 1 (the
    expression is n² words).

    Bottom, the time of the gradient against the entry bound B (AS24, with d = O(log n) and
    ε = 1/poly(n)) for n from 2⁴ to 2⁴⁰: for B = o(√log n) it takes n^{1+o(1)} time
    (Thm 1.6); for B = ω(√log n) no n^{2−Ω(1)} algorithm exists under SETH (Thm 1.5). This
    panel is schematic: the theorems are asymptotic, so the boundary is drawn at B = √(ln n)
    with a grey band of a constant factor 2 either side.

    With ``phone=True``, the same panels for a phone's column: narrower, with shorter
    labels. The desktop figure carries that builder as ``attnlib_phone_builder``, which the
    notebook's figure formatter draws as the phone form instead of re-gridding the figure
    (its labels sit at data positions that a narrower figure would overlap).

    Deterministic; returns the Figure. Raises :class:`attnlib.AttnInputError` if ``d`` is not
    an integer ≥ 2 or ``phone`` is not a bool.
    """
    d = check_int("d", d, minimum=2)
    phone = check_bool("phone", phone)
    use_book_style()
    fig, (ax_io, ax_b) = plt.subplots(2, 1, figsize=(3.4, 8.4) if phone else (7.2, 9.0))
    text = _PHONE_TEXT if phone else _DESKTOP_TEXT
    size = 7 if phone else 8

    # Top: I/O per score entry against M, both branches and the expression.
    d2 = d * d
    Ms = np.unique(np.geomspace(max(4, d2 // 256), d2 * 256, 97).astype(int))
    n = 1024
    order = np.array([backward_order(n, d, int(M)) for M in Ms]) / n**2
    large, small = d2 / Ms, d / np.sqrt(Ms)
    ax_io.axvspan(Ms[0], d2, color="#d62728", alpha=0.06)
    ax_io.axvspan(d2, Ms[-1], color="#1f77b4", alpha=0.06)
    # Each branch drawn dashed a little past the crossover, where it stops being the minimum.
    near = (Ms >= d2 / 16) & (Ms <= d2 * 16)
    branches = (
        (large, (Ms >= d2) | near, "#1f77b4", r"$n^2d^2/M$ (large-cache branch)"),
        (small, (Ms <= d2) | near, "#d62728", r"$n^2d/\sqrt{M}$ (small-cache branch)"),
    )
    for values, shown, color, label in branches:
        ax_io.loglog(Ms[shown], values[shown], ls="--", color=color, lw=1.2, label=label)
    ax_io.loglog(Ms, order, color="black", lw=2.2, label="Θ-expression = their minimum")
    ax_io.axvline(d2, color="gray", lw=1, ls=":")
    ax_io.plot([d2], [1.0], "o", color="black")
    ax_io.annotate(
        text["crossover"].format(d2=f"{d2:,}"),
        xy=(d2, 1.0),
        xytext=(d2 * 2.5, 2.5),
        fontsize=size + 0.5,
        arrowprops={"arrowstyle": "->", "color": "gray"},
    )
    ax_io.text(
        0.03,
        0.96,
        text["small"],
        transform=ax_io.transAxes,
        fontsize=size,
        va="top",
        color="#8b1a1a",
    )
    ax_io.text(
        0.97,
        0.96,
        text["large"],
        transform=ax_io.transAxes,
        fontsize=size,
        va="top",
        ha="right",
        color="#17456e",
    )
    ax_io.set_ylim(order.min() / 2, order.max() * 60)  # headroom for the labels
    ax_io.set_xlabel(text["io_x"].format(d=d))
    ax_io.set_ylabel(text["io_y"])
    ax_io.set_title(text["io_title"])
    ax_io.legend(loc="lower left", fontsize=size)

    # Bottom: the B-versus-n phase diagram of AS24.
    log2n = np.linspace(4, 40, 200)
    thr = np.sqrt(log2n * math.log(2))
    b_top = 2.6 * thr[-1]
    ax_b.fill_between(log2n, 0, thr / 2, color="#2ca02c", alpha=0.15, lw=0)
    ax_b.fill_between(log2n, thr / 2, 2 * thr, color="gray", alpha=0.12, lw=0)
    ax_b.fill_between(log2n, 2 * thr, b_top, color="#d62728", alpha=0.12, lw=0)
    ax_b.plot(log2n, thr, color="black", lw=2, label=r"$B = \sqrt{\ln n}$")
    ax_b.plot(log2n, thr / 2, color="gray", lw=0.8, ls="--")
    ax_b.plot(log2n, 2 * thr, color="gray", lw=0.8, ls="--", label="constant factor 2")
    ax_b.text(39, 0.25, text["easy"], fontsize=size, ha="right", va="bottom", color="#1b5e20")
    ax_b.text(
        39, thr[-1] * 1.08, text["threshold"], fontsize=size, ha="right", va="bottom", color="k"
    )
    ax_b.text(39, 2.12 * thr[-1], text["hard"], fontsize=size, ha="right", color="#8b1a1a")
    ax_b.set_xlim(log2n[0], log2n[-1])
    ax_b.set_ylim(0, b_top)
    ticks = [4, 10, 20, 30, 40]
    ax_b.set_xticks(ticks, [f"$2^{{{t}}}$" for t in ticks])
    ax_b.set_xlabel(text["b_x"])
    ax_b.set_ylabel(text["b_y"])
    ax_b.set_title(text["b_title"])
    ax_b.legend(loc="upper left", fontsize=size)
    add_takeaway(fig, text["takeaway"])
    if not phone:
        fig.attnlib_phone_builder = functools.partial(map_of_results, d=d, phone=True)
    return fig


#: The map of results' labels, for a desktop's column and for a phone's.
_DESKTOP_TEXT = {
    "crossover": r"crossover $M=d^2$ ({d2} words):" "\n" r"both equal $n^2$",
    "small": "small cache, $M = o(d^2)$\n$\\Theta(n^2 d/\\sqrt{M})$: square tiling\n"
    "(SY24), small-cache backward\n· Ch. 4",
    "large": "large cache, $M = \\Omega(d^2)$\n$\\Theta(n^2 d^2/M)$: FlashAttention\n"
    "fwd + bwd, up to a constant · Ch. 3\ncertified bounds · Ch. 5",
    "io_x": "fast memory M (words), head dimension d = {d}",
    "io_y": r"I/O, $\Theta$-expression $/\,n^2$ (words per score)",
    "io_title": "Exact attention: data movement (I/O model)",
    "easy": r"$B = o(\sqrt{\log n})$: gradient in $n^{1+o(1)}$ time (AS24 Thm 1.6)"
    "\npolynomial method · Ch. 6–7",
    "threshold": r"threshold $B = \Theta(\sqrt{\log n})$",
    "hard": r"$B = \omega(\sqrt{\log n})$: no $n^{2-\Omega(1)}$ algorithm"
    "\nunder SETH (AS24 Thm 1.5) · hardness, Ch. 8",
    "b_x": r"sequence length n  (with $d = O(\log n)$, $\varepsilon = 1/\mathrm{poly}(n)$)",
    "b_y": r"entry bound B  ($|Q_{ij}|, |K_{ij}| \leq B$)",
    "b_title": "Training gradient: time against entry size (schematic)",
    "takeaway": "Exact attention moves Θ(n²d²/M) words once the cache holds d² words, Θ(n²d/√M) "
    "below;\nbeating n² time needs small entries, B = o(√log n): above that it is SETH-hard.",
}
_PHONE_TEXT = {
    "crossover": r"$M=d^2$",
    "small": "small cache\n$M = o(d^2)$\nCh. 4",
    "large": "large cache\n$M = \\Omega(d^2)$\nCh. 3, 5",
    "io_x": "fast memory M (words), d = {d}",
    "io_y": r"I/O $/\,n^2$ (words per score)",
    "io_title": "Exact attention:\ndata movement (I/O model)",
    "easy": r"$B = o(\sqrt{\log n})$: $n^{1+o(1)}$" "\n(AS24 Thm 1.6) · Ch. 6–7",
    "threshold": r"$B = \Theta(\sqrt{\log n})$",
    "hard": r"$B = \omega(\sqrt{\log n})$: SETH-hard" "\n(AS24 Thm 1.5) · Ch. 8",
    "b_x": r"sequence length n ($d = O(\log n)$)",
    "b_y": r"entry bound B",
    "b_title": "Training gradient: time\nagainst entry size (schematic)",
    "takeaway": "Exact attention moves Θ(n²d²/M) words once the cache holds d² words, "
    "Θ(n²d/√M) below; beating n² time needs small entries, B = o(√log n): above that it is "
    "SETH-hard.",
}


#: The chapters, as their boxes name them.
_CHAPTERS = {
    1: "Attention and\nits gradient",
    2: "The two-level\nmemory",
    3: "FlashAttention's\nI/O",
    4: "Small caches",
    5: "Lower bounds",
    6: "Polynomial\nsoftmax",
    7: "The almost-linear\ngradient",
    8: "Hardness",
    9: "Evidence",
    10: "Performance",
    11: "Across devices",
}

#: The two ways through the book that the preface draws by default.
_READING_PATHS = {
    "theory path": (1, 6, 7, 8, 9),
    "systems path": (1, 2, 3, 4, 5, 10, 11, 9),
}

# Where each chapter sits: the systems chapters on the top row, the theory chapters below.
_POSITION = {
    1: (0.0, 0.5),
    2: (1.2, 1.0),
    3: (2.4, 1.0),
    4: (3.6, 1.0),
    5: (4.8, 1.0),
    10: (6.0, 1.0),
    11: (7.2, 1.0),
    6: (1.8, 0.0),
    7: (3.0, 0.0),
    8: (4.2, 0.0),
    9: (8.4, 0.5),
}
# The same top to bottom, for a phone: systems chapters on the left, theory on the right.
_PHONE_POSITION = {
    1: (0.5, 0.0),
    2: (0.0, -1.0),
    3: (0.0, -2.0),
    4: (0.0, -3.0),
    5: (0.0, -4.0),
    10: (0.0, -5.0),
    11: (0.0, -6.0),
    6: (1.0, -1.5),
    7: (1.0, -2.75),
    8: (1.0, -4.0),
    9: (0.5, -7.0),
}
_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")


def reading_path_figure(paths=None, *, phone: bool = False):
    """Draw the chapters as boxes and each reading path as a chain of arrows through them.

    ``paths`` maps a path's name to its chapters in reading order (default: the theory path
    1, 6, 7, 8, 9 and the systems path 1, 2, 3, 4, 5, 10, 11, 9). With ``phone=True`` the
    chapters are laid out top to bottom for a phone's column: the systems chapters on the
    left, the theory chapters on the right. The desktop figure carries that builder as
    ``attnlib_phone_builder`` (the notebook's figure formatter draws it as the phone form).
    Returns the matplotlib ``Figure``.

    Raises :class:`attnlib.AttnInputError` if ``paths`` is not a non-empty dict of at most four
    names, each with at least two chapter numbers from 1 to 11, or ``phone`` is not a bool.
    """
    phone = check_bool("phone", phone)
    paths = as_dict(
        "paths",
        _READING_PATHS if paths is None else paths,
        of="reading paths (name -> chapters)",
        max_len=len(_COLORS),
        check_value=lambda label, steps: as_entries(label, steps, of="chapters", min_len=2),
    )
    for name, steps in paths.items():
        if not isinstance(name, str) or not name:
            raise AttnInputError(f"paths: every name must be a non-empty string, got {name!r}")
        for k, c in enumerate(steps):
            check_int(f"paths[{name!r}][{k}]", c, maximum=max(_CHAPTERS))
    use_book_style()
    # a fixed layout: the boxes sit at data positions, the legend and takeaway below the axes
    fig = plt.figure(figsize=(3.4, 6.4) if phone else (12, 3.6), layout="none")
    ax = fig.add_axes((0.0, 0.16, 1.0, 0.76) if phone else (0.0, 0.2, 1.0, 0.7))
    position = _PHONE_POSITION if phone else _POSITION
    used = {c for steps in paths.values() for c in steps}
    boxes = {}
    for chapter in sorted(used):
        x, y = position[chapter]
        boxes[chapter] = ax.text(
            x,
            y,
            f"{chapter}. {_CHAPTERS[chapter]}",
            ha="center",
            va="center",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.4", "fc": "white", "ec": "0.3"},
            zorder=3,
        )
    fig.canvas.draw()  # the boxes need a size before arrows can be clipped to them
    for k, (name, steps) in enumerate(paths.items()):
        color = _COLORS[k]
        offset = 0.06 * (k - (len(paths) - 1) / 2)  # shared edges drawn side by side
        for a, b in zip(steps[:-1], steps[1:], strict=True):
            (xa, ya), (xb, yb) = position[a], position[b]
            ax.annotate(
                "",
                xy=(xb, yb + offset),
                xytext=(xa, ya + offset),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": color,
                    "lw": 2,
                    "patchA": boxes[a].get_bbox_patch(),
                    "patchB": boxes[b].get_bbox_patch(),
                    "shrinkA": 1,
                    "shrinkB": 1,
                },
                zorder=4,
            )
        ax.plot([], [], color=color, lw=2, label=f"{name}: " + " → ".join(map(str, steps)))
    if phone:
        ax.set_xlim(-0.75, 1.75)
        ax.set_ylim(-7.6, 0.5)
    else:
        ax.set_xlim(-0.7, 9.1)
        ax.set_ylim(-0.45, 1.45)
    ax.axis("off")
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.02),
        ncol=1 if phone else len(paths),
        fontsize=7 if phone else 8,
    )
    ax.set_title("Two ways through the book" + ("" if phone else " (chapter numbers)"))
    add_takeaway(
        fig,
        "Theory readers can go from Chapter 1 straight to Chapter 6; systems readers read "
        "Chapters 2 to 5, 10 and 11. Both paths meet in Chapter 9.",
    )
    if not phone:
        fig.attnlib_phone_builder = functools.partial(reading_path_figure, paths, phone=True)
    return fig
