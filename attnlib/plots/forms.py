"""A figure's phone form: its panels stacked in one column at a phone's width.

A desktop figure is drawn for a column about 7 in wide; a phone shows it in about 3.6 in, so
a 1×3 row of panels shrinks its 9 pt text to a third. :func:`phone_form` redraws the same
figure for that width instead: every panel of its grid gets a row of its own (the axes keep
their data, colorbars follow their parents, twin axes their host), long titles, labels and
takeaways wrap, and a figure legend beside the panels moves above them. :func:`phone_layout`
does the same for one block and then puts the figure back as it was. :func:`min_text_px` is
the size of the smallest text a figure draws, in pixels of an image saved at ``dpi``: the
readable-size check of the online book compares it, scaled to the size the image is shown at,
to a floor.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import matplotlib as mpl
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from .._checks import check_figure, check_positive_real
from ._phone_text import (
    figure_texts,
    fit_legends,
    legends_to_move,
    legends_under_panels,
    place_under_axes,
    thin_ticks,
    wrap_legend,
    wrap_texts,
)

__all__ = [
    "phone_form",
    "phone_layout",
    "needs_phone_form",
    "min_text_px",
    "PHONE_WIDTH_IN",
    "PHONE_COLUMN_PX",
    "READABLE_PX",
]

#: Width of a figure in the book's text column on a 390 px phone, in CSS px.
PHONE_COLUMN_PX = 342
#: Width of a phone form, in inches: at the book's 100 dpi, with the saved image's padding, it
#: fits ``PHONE_COLUMN_PX`` without being scaled down.
PHONE_WIDTH_IN = 3.3
#: The smallest text a reader is asked to read, in CSS px: a 7 pt label in print (7 / 72 in at
#: 96 CSS px per inch is 9.3 px), below which a phone's reader must zoom to read a tick label.
READABLE_PX = 9.0
#: Text of a phone form is at least this size in points (7 pt is 9.7 px at 100 dpi, at or above
#: ``READABLE_PX`` as the phone shows a form about 1:1).
PHONE_MIN_PT = 7.0
# Height of a panel's axes box in a phone form, in inches: about the box width times 0.7.
_BOX_MIN_IN, _BOX_MAX_IN = 1.7, 2.4
# Height of a box with a fixed aspect (an image, a square plot) is its width times its aspect,
# up to this.
_BOX_ASPECT_MAX_IN = 4.0


def phone_form(fig: Figure) -> Figure:
    """Redraw ``fig`` for a phone: its panels in one column, ``PHONE_WIDTH_IN`` wide.

    Modifies ``fig`` and returns it. Every visible axes of the figure's grid keeps its data and
    gets a row (in reading order: row by row, left to right); colorbars and twin axes follow
    their host; tick labels hidden because a shared axis had them on a neighbour come back;
    titles, labels, the suptitle and a takeaway (:func:`~attnlib.plots.add_takeaway`) wrap to
    the new width; a figure legend at the side moves above the panels. A figure whose axes are
    not on one grid (placed by hand, or in subfigures) keeps its layout at the phone's width.
    Text keeps its size, or grows to ``PHONE_MIN_PT``.

    Raises :class:`attnlib.AttnInputError` if ``fig`` is not a matplotlib Figure.
    """
    _phone_form(check_figure("fig", fig), [])
    return fig


@contextlib.contextmanager
def phone_layout(fig: Figure):
    """``with phone_layout(fig):`` the block sees :func:`phone_form` of ``fig``; afterwards
    ``fig`` is drawn as before (size, grid, labels, legends and texts restored).
    Raises :class:`attnlib.AttnInputError` if ``fig`` is not a matplotlib Figure."""
    check_figure("fig", fig)
    undo: list = []
    try:
        _phone_form(fig, undo)
        yield fig
    finally:
        for step in reversed(undo):
            step()


def needs_phone_form(fig: Figure) -> bool:
    """Whether ``fig`` needs a phone form: it has panels side by side, or, shown at the width of
    a phone's column, its smallest text would be below ``READABLE_PX``.
    Raises :class:`attnlib.AttnInputError` if ``fig`` is not a matplotlib Figure."""
    panels = _panels(check_figure("fig", fig))
    if _on_one_grid(panels):
        columns = {ax.get_subplotspec().get_topmost_subplotspec().colspan.start for ax in panels}
        if len(columns) > 1:
            return True
    pad = mpl.rcParams["savefig.pad_inches"]
    width = (fig.get_tightbbox().width + 2 * pad) * fig.dpi
    return min_text_px(fig, fig.dpi) * min(1.0, PHONE_COLUMN_PX / width) < READABLE_PX


def min_text_px(fig: Figure, dpi: float) -> float:
    """The font size, in pixels of an image of ``fig`` saved at ``dpi``, of its smallest drawn
    text (``inf`` when it draws none).

    Only text that is drawn counts: visible, non-empty, tick labels of ticks in view. Its size
    is the font's em (a 9 pt label at 100 dpi is 12.5 px), as a browser's ``font-size`` is.

    Raises :class:`attnlib.AttnInputError` if ``fig`` is not a matplotlib Figure or ``dpi``
    is not a positive finite number.
    """
    check_figure("fig", fig)
    dpi = check_positive_real("dpi", dpi)
    recorder = _TextRecorder(fig)
    fig.draw(recorder)
    return min(recorder.sizes, default=math.inf) * dpi / 72


class _TextRecorder(RendererAgg):
    """A renderer that notes the size in points of every text it is asked to draw."""

    def __init__(self, fig):
        width, height = fig.bbox.size
        super().__init__(max(int(width), 1), max(int(height), 1), fig.dpi)
        self.sizes: list[float] = []

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        clip = gc.get_clip_rectangle()
        # Text clipped away (a label placed outside its axes) is not seen.
        if str(s).strip() and (clip is None or clip.contains(x, y)):
            self.sizes.append(prop.get_size_in_points())

    def draw_tex(self, gc, x, y, s, prop, angle, *, mtext=None):
        self.draw_text(gc, x, y, s, prop, angle, mtext=mtext)


def _phone_form(fig, undo: list) -> None:
    # The fitting below draws the figure at trial sizes; at one that is too small, constrained
    # layout warns that it collapsed and skips that draw, and the next size is tried. The final
    # form is drawn again by whoever saves it, where a warning would still show.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "constrained_layout not applied", UserWarning)
        _phone_form_fitted(fig, undo)


def _phone_form_fitted(fig, undo: list) -> None:
    renderer = fig._get_renderer()
    _raise_small_text(fig, undo)
    for ax in fig.axes:  # the unused cells of a grid (``ax.axis("off")``, nothing drawn)
        if ax.get_visible() and not ax.axison and not ax.has_data() and not ax.texts:
            ax.set_visible(False)
            undo.append(lambda a=ax: a.set_visible(True))
    fig.draw_without_rendering()
    width0, height0 = fig.get_size_inches()
    panels = _panels(fig)
    boxes = [_box_height(fig, ax, renderer) for ax in panels]
    slots = [
        box + _decoration_height(fig, ax, renderer) for box, ax in zip(boxes, panels, strict=True)
    ]
    if _on_one_grid(panels):
        grid = GridSpec(len(panels), 1, figure=fig, height_ratios=slots)
        for row, ax in enumerate(panels):
            for member in _twins(fig, ax):
                old = member.get_subplotspec()
                member.set_subplotspec(grid[row])
                undo.append(lambda m=member, s=old: m.set_subplotspec(s))
            _show_shared_ticklabels(ax, undo)
    else:
        panels, boxes, slots = [], [], [height0 * min(1.0, PHONE_WIDTH_IN / width0)]
    _resize(fig, PHONE_WIDTH_IN, sum(slots), undo)
    figure_legends = legends_under_panels(fig, panels[-1] if panels else None, renderer, undo)
    moved = legends_to_move(fig, renderer)
    for legend in moved:
        place_under_axes(legend, renderer, undo)
        wrap_legend(legend, renderer, undo)
    fit_legends(fig, renderer, undo)
    # Wrapping depends on the widths the layout gives, and the layout on the wrapped heights.
    for _ in range(2):
        fig.draw_without_rendering()
        wrap_texts(fig, renderer, undo)
        for legend in moved + figure_legends:
            place_under_axes(legend, renderer, undo)
    thin_ticks(fig, renderer, undo)
    height = sum(slots) + _figure_text_height(fig, renderer)
    _resize(fig, PHONE_WIDTH_IN, height, undo)
    # Taller now if wrapped text or legends left a panel's box below its height.
    for _ in range(3):
        fig.draw_without_rendering()
        short = sum(
            max(0.0, box - ax.get_window_extent(renderer).height / fig.dpi)
            for box, ax in zip(boxes, panels, strict=True)
            if _free_aspect(ax)
        )
        if short < 0.05:
            break
        height += short
        fig.set_size_inches(PHONE_WIDTH_IN, height)


def _raise_small_text(fig, undo) -> None:
    for text in fig.findobj(Text):
        size = text.get_fontsize()
        if size < PHONE_MIN_PT:
            text.set_fontsize(PHONE_MIN_PT)
            undo.append(lambda t=text, s=size: t.set_fontsize(s))


def _resize(fig, width, height, undo) -> None:
    old = tuple(fig.get_size_inches())
    fig.set_size_inches(width, height)
    undo.append(lambda: fig.set_size_inches(*old))


def _panels(fig) -> list:
    """The visible axes placed on a grid (not colorbars, not twins), in reading order."""
    seen, panels = set(), []
    for ax in fig.axes:
        if id(ax) in seen or not ax.get_visible() or ax.get_subplotspec() is None:
            continue
        if hasattr(ax, "_colorbar"):
            continue
        seen.update(id(a) for a in _twins(fig, ax))
        panels.append(ax)

    def place(ax):
        spec = ax.get_subplotspec().get_topmost_subplotspec()
        return spec.rowspan.start, spec.colspan.start

    return sorted(panels, key=place) if _on_one_grid(panels) else panels


def _on_one_grid(panels) -> bool:
    grids = {id(ax.get_subplotspec().get_topmost_subplotspec().get_gridspec()) for ax in panels}
    return len(grids) == 1 and all(
        ax.get_subplotspec().get_gridspec()
        is ax.get_subplotspec().get_topmost_subplotspec().get_gridspec()
        for ax in panels
    )


def _twins(fig, ax) -> list:
    """``ax`` and the axes that share its box (``twinx``, ``twiny``), in figure order."""
    siblings = ax._twinned_axes.get_siblings(ax)
    return [a for a in fig.axes if any(a is s for s in siblings)]


def _free_aspect(ax) -> bool:
    return ax.get_aspect() == "auto" and ax.get_box_aspect() is None


def _decoration_height(fig, ax, renderer) -> float:
    """Inches a panel draws above and below its box (title, tick labels, axis label)."""
    box = ax.get_window_extent(renderer)
    tight = Bbox.union([a.get_tightbbox(renderer, for_layout_only=True) for a in _twins(fig, ax)])
    return (tight.height - box.height) / fig.dpi + 0.15


def _box_height(fig, ax, renderer) -> float:
    """The height in inches of a panel's box in the phone form: the box as drawn now, within
    bounds, or, for a box of fixed aspect, its height at the phone's width."""
    box = ax.get_window_extent(renderer)
    if _free_aspect(ax):
        return min(max(box.height / fig.dpi, _BOX_MIN_IN), _BOX_MAX_IN)
    tight = Bbox.union([a.get_tightbbox(renderer, for_layout_only=True) for a in _twins(fig, ax)])
    box_w = max(PHONE_WIDTH_IN - (tight.width - box.width) / fig.dpi - 0.2, 1.0)
    return min(box_w * box.height / max(box.width, 1.0), _BOX_ASPECT_MAX_IN)


def _show_shared_ticklabels(ax, undo) -> None:
    """Tick labels a shared axis hid (``sharey`` of a row): in a column each panel needs its."""
    for axis, side, shared in (
        (ax.yaxis, "labelleft", ax.get_shared_y_axes()),
        (ax.xaxis, "labelbottom", ax.get_shared_x_axes()),
    ):
        if not ax.axison or len(shared.get_siblings(ax)) < 2:
            continue
        if axis._major_tick_kw.get("label1On", True) is False:
            axis.set_tick_params(which="both", **{side: True})
            undo.append(lambda a=axis, s=side: a.set_tick_params(which="both", **{s: False}))


def _figure_text_height(fig, renderer) -> float:
    """Inches the suptitle and figure legends take above and below the panels."""
    total = 0.0
    texts = [t for t in figure_texts(fig) if t is getattr(fig, "_suptitle", None)]
    boxes = [t.get_window_extent(renderer) for t in texts]
    boxes += [lg.get_window_extent(renderer) for lg in fig.legends if lg.get_visible()]
    for box in boxes:
        total += box.height / fig.dpi + 0.1
    return total
