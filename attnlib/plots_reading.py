"""The preface's reading-path figure: the chapters, and two paths through them.

The *theory* path follows the time complexity of the gradient (the polynomial method and the
SETH hardness); the *systems* path follows data movement (the two-level machine, I/O bounds,
compiled kernels). Both start from Chapter 1 and meet in Chapter 9.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ._checks import AttnInputError
from .plots import add_takeaway, use_book_style

__all__ = ["CHAPTERS", "READING_PATHS", "reading_path_figure"]

CHAPTERS = {
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
}

READING_PATHS = {
    "theory path": (1, 6, 7, 8, 9),
    "systems path": (1, 2, 3, 4, 5, 10, 9),
}

# Where each chapter sits: the systems chapters on the top row, the theory chapters below.
_POSITION = {
    1: (0.0, 0.5),
    2: (1.2, 1.0),
    3: (2.4, 1.0),
    4: (3.6, 1.0),
    5: (4.8, 1.0),
    10: (6.0, 1.0),
    6: (1.8, 0.0),
    7: (3.0, 0.0),
    8: (4.2, 0.0),
    9: (7.2, 0.5),
}
_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")


def _check_paths(paths) -> dict[str, tuple[int, ...]]:
    if not isinstance(paths, dict) or not paths:
        raise AttnInputError(f"paths must be a non-empty dict of name -> chapters, got {paths!r}")
    if len(paths) > len(_COLORS):
        raise AttnInputError(f"paths must hold at most {len(_COLORS)} paths, got {len(paths)}")
    checked = {}
    for name, chapters in paths.items():
        if not isinstance(name, str) or not name:
            raise AttnInputError(f"paths: every name must be a non-empty string, got {name!r}")
        try:
            steps = tuple(chapters)
        except TypeError:
            raise AttnInputError(f"paths[{name!r}] must be a sequence of chapters") from None
        if len(steps) < 2 or any(
            isinstance(c, bool) or not isinstance(c, int) or c not in CHAPTERS for c in steps
        ):
            raise AttnInputError(
                f"paths[{name!r}] must list at least two chapter numbers from 1 to "
                f"{max(CHAPTERS)}, got {chapters!r}"
            )
        checked[name] = steps
    return checked


def reading_path_figure(paths=None):
    """Draw the chapters as boxes and each reading path as a chain of arrows through them.

    ``paths`` maps a path's name to its chapters in reading order (default
    :data:`READING_PATHS`). Returns the matplotlib ``Figure``.

    Raises :class:`attnlib.AttnInputError` if ``paths`` is not a non-empty dict of at most four
    names, each with at least two chapter numbers from :data:`CHAPTERS`.
    """
    paths = _check_paths(READING_PATHS if paths is None else paths)
    use_book_style()
    # a fixed layout: the boxes sit at data positions, the legend and takeaway below the axes
    fig = plt.figure(figsize=(11, 3.6), layout="none")
    ax = fig.add_axes((0.0, 0.2, 1.0, 0.7))
    used = {c for steps in paths.values() for c in steps}
    boxes = {}
    for chapter in sorted(used):
        x, y = _POSITION[chapter]
        boxes[chapter] = ax.text(
            x,
            y,
            f"{chapter}. {CHAPTERS[chapter]}",
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
            (xa, ya), (xb, yb) = _POSITION[a], _POSITION[b]
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
    ax.set_xlim(-0.7, 7.9)
    ax.set_ylim(-0.45, 1.45)
    ax.axis("off")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=len(paths), fontsize=8)
    ax.set_title("Two ways through the book (chapter numbers)")
    add_takeaway(
        fig,
        "Theory readers can go from Chapter 1 straight to Chapter 6; systems readers read "
        "Chapters 2 to 5 and 10. Both paths meet in Chapter 9.",
    )
    return fig
