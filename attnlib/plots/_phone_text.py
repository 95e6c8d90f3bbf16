"""Text of a phone form that fits its narrower width (:mod:`attnlib.plots.forms`).

Lines of titles, labels and notes break between words (never inside ``$...$`` math); figure
legends at the side move above the panels; axes legends beside their axes, or too wide for the
narrower box, move under it; legends take fewer columns; fixed tick labels that collide thin
out, or turn upright when they name categories. Every change is undone by the steps appended to
``undo``.
"""

from __future__ import annotations

import math

from matplotlib.legend import Legend
from matplotlib.offsetbox import VPacker
from matplotlib.ticker import FixedLocator
from matplotlib.transforms import offset_copy

__all__ = [
    "figure_texts",
    "fit_legends",
    "legends_under_panels",
    "legends_to_move",
    "place_under_axes",
    "thin_ticks",
    "wrap_legend",
    "wrap_texts",
]

# An axes legend wider than this share of its box in the phone form moves under the axes.
_LEGEND_SHARE = 0.7
# Category names beside a y axis take at most this share of the phone form's width.
_NAME_SHARE = 0.4


def legends_under_panels(fig, host, renderer, undo) -> list:
    """Move figure legends at the side, above or below the panels under the last panel
    (``host``), in as many columns as fit the width; return the new legends, which
    :func:`place_under_axes` keeps under ``host``. Not left at the figure's edge: a saved image
    cropped to its contents (``bbox_inches="tight"``) anchors a figure legend to the crop, and
    the crop's top is a suptitle's, its bottom a takeaway's."""
    moved = []
    for legend in list(fig.legends) if host is not None else []:
        where = legend._outside_loc
        if not legend.get_visible() or where not in ("left", "right", "lower", "upper"):
            continue
        texts = [t.get_text() for t in legend.texts]
        options = {
            "fontsize": legend.texts[0].get_fontsize() if legend.texts else None,
            "title": legend.get_title().get_text() or None,
            "frameon": legend.get_frame_on(),
        }
        legend.set_visible(False)
        legend._outside_loc = None
        undo.append(
            lambda lg=legend, w=where: (lg.set_visible(True), setattr(lg, "_outside_loc", w))
        )
        columns = len(texts) if where in ("left", "right") else legend._ncols
        new = Legend(host, legend.legend_handles, texts, ncols=columns, **options)
        if host.get_legend() is None:  # the axes' own legend is part of its layout
            host.legend_ = new
            new._remove_method = lambda lg, ax=host: setattr(ax, "legend_", None)
            new.set_figure(fig)
        else:
            host.add_artist(new)
        undo.append(new.remove)
        _fit_legend(new, fig.bbox.width * 0.96, renderer, undo)
        moved.append(new)
    return moved


def legends_to_move(fig, renderer) -> list:
    """Axes legends to put under their axes: those beside the axes (``bbox_to_anchor``
    outside), and those too wide to sit inside the phone form's narrower box without hiding
    most of it. Measured with the legends out of the layout, which they would widen."""
    legends = [ax.get_legend() for ax in fig.axes]
    legends = [lg for lg in legends if lg is not None and lg.get_visible() and lg.get_in_layout()]
    for legend in legends:
        legend.set_in_layout(False)
    fig.draw_without_rendering()
    found = []
    for legend in legends:
        legend.set_in_layout(True)
        box, extent = legend.axes.get_window_extent(renderer), legend.get_window_extent(renderer)
        outside = extent.x1 > box.x1 + 0.5 * extent.width or extent.x0 < box.x0 - 0.5 * extent.width
        if outside or extent.width > _LEGEND_SHARE * box.width:
            found.append(legend)
    return found


def wrap_legend(legend, renderer, undo) -> None:
    """Break the labels of a legend under its axes to fit the figure's width."""
    fig = legend.get_figure(root=True)
    widest = max((t.get_window_extent(renderer).width for t in legend.texts), default=0.0)
    room = fig.bbox.width * 0.94 - (legend.get_window_extent(renderer).width - widest)
    for text in legend.texts:
        _wrap(text, max(room, fig.bbox.width * 0.5), renderer, undo)


def thin_ticks(fig, renderer, undo) -> None:
    """Fixed tick positions whose labels collide at the phone's width keep every other one; the
    names of categories (fixed labels) turn upright instead, as each one is needed. The figure
    is laid out as drawn last; it is drawn again only after a change."""
    laid_out = True
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis in (ax.xaxis, ax.yaxis):
            locator = axis.get_major_locator()
            if not isinstance(locator, FixedLocator) or len(locator.locs) == 0:
                continue
            if not laid_out:
                fig.draw_without_rendering()
                laid_out = True
            if _names_categories(axis):
                if axis.axis_name == "x" and _labels_collide(axis, renderer):
                    for label in axis.get_ticklabels():
                        angle = label.get_rotation()
                        label.set_rotation(90)
                        undo.append(lambda t=label, a=angle: t.set_rotation(a))
                    laid_out = False
                elif axis.axis_name == "y":
                    laid_out = not _wrap_names(axis, fig.bbox.width * _NAME_SHARE, renderer, undo)
                continue
            for _ in range(3 if len(locator.locs) > 2 else 0):
                if not laid_out:
                    fig.draw_without_rendering()
                if not _labels_collide(axis, renderer):
                    laid_out = True
                    break
                old = axis.get_major_locator()
                axis.set_major_locator(FixedLocator(old.locs[::2]))
                undo.append(lambda a=axis, o=old: a.set_major_locator(o))
                laid_out = False


def _wrap_names(axis, room: float, renderer, undo) -> bool:
    """Break category names beside a y axis that would take more than ``room`` px; return
    whether any was broken."""
    labels = axis.get_ticklabels()
    if max((t.get_window_extent(renderer).width for t in labels), default=0.0) <= room:
        return False
    wrapped = ["\n".join(_break(t, t.get_text(), room, renderer)) for t in labels]
    formatter = axis.get_major_formatter()
    axis.set_ticklabels(wrapped)
    undo.append(lambda: axis.set_major_formatter(formatter))
    return True


def _names_categories(axis) -> bool:
    """Whether the tick labels are names (``set_xticks(ticks, names)``), not numbers."""
    for label in axis.get_ticklabels():
        try:
            float(label.get_text().replace("\N{MINUS SIGN}", "-").replace(",", ""))
        except ValueError:
            if label.get_text().strip():
                return True
    return False


def _labels_collide(axis, renderer) -> bool:
    boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels() if t.get_text()]
    along = [(b.x0, b.x1) if axis.axis_name == "x" else (b.y0, b.y1) for b in boxes]
    along.sort()
    return any(a[1] + 2 > b[0] for a, b in zip(along, along[1:], strict=False))


def place_under_axes(legend, renderer, undo) -> None:
    """Anchor ``legend`` under its axes' tick labels and axis label, centred."""
    ax = legend.axes
    first = not hasattr(legend, "_phone_under")
    if first:
        old = (legend._loc, legend._bbox_to_anchor)
        legend._phone_under = True

        def restore(lg=legend, old=old):
            lg._loc, lg._bbox_to_anchor = old
            del lg._phone_under

        undo.append(restore)
        legend.set_loc("upper center")
    legend.set_in_layout(False)
    box, tight = ax.get_window_extent(renderer), ax.get_tightbbox(renderer, for_layout_only=True)
    legend.set_in_layout(True)
    drop = (box.y0 - tight.y0) * 72 / ax.figure.dpi + 4  # points below the box
    where = offset_copy(ax.transAxes, fig=ax.figure, y=-drop, units="points")
    legend.set_bbox_to_anchor((0.5, 0.0), transform=where)


def fit_legends(fig, renderer, undo) -> None:
    """Axes legends wider than their axes take fewer columns (measured with the legends out of
    the layout, which they would otherwise widen)."""
    legends = [ax.get_legend() for ax in fig.axes]
    legends = [lg for lg in legends if lg is not None and lg.get_visible() and lg.get_in_layout()]
    for legend in legends:
        legend.set_in_layout(False)
    fig.draw_without_rendering()
    for legend in legends:
        legend.set_in_layout(True)
        _fit_legend(legend, legend.axes.get_window_extent(renderer).width, renderer, undo)


def _fit_legend(legend, room: float, renderer, undo) -> None:
    """Re-pack ``legend``'s entries into as many columns (at most its own) as fit ``room`` px."""
    box = legend._legend_handle_box
    old = box._children
    if len(old) < 2 or legend.get_window_extent(renderer).width <= room:
        return
    items = [item for column in old for item in column.get_children()]
    undo.append(lambda: setattr(box, "_children", old))
    for k in range(len(old) - 1, 0, -1):
        size, extra = divmod(len(items), k)
        columns, start = [], 0
        for j in range(k):  # as numpy's array_split: the first columns one longer
            stop = start + size + (j < extra)
            column = VPacker(pad=0, sep=old[0].sep, align=old[0].align, children=items[start:stop])
            column.set_figure(legend.get_figure(root=False))
            column.axes = legend.axes
            columns.append(column)
            start = stop
        box._children = columns
        if legend.get_window_extent(renderer).width <= room:
            return


def figure_texts(fig) -> list:
    return [t for t in fig.texts if t.get_visible() and t.get_text()] + [
        t
        for t in (getattr(fig, name, None) for name in ("_suptitle", "_supxlabel", "_supylabel"))
        if t is not None and t.get_visible() and t.get_text()
    ]


def wrap_texts(fig, renderer, undo) -> None:
    """Break lines of figure texts, axes titles and axis labels that are wider than their room."""
    width = fig.bbox.width * 0.96
    for text in figure_texts(fig):
        room = fig.bbox.height * 0.9 if _vertical(text) else width
        _wrap(text, room, renderer, undo)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        box = ax.get_window_extent(renderer)
        for text in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label):
            _wrap(text, max(box.width * 1.1, width * 0.5), renderer, undo)
        _wrap(ax.yaxis.label, max(box.height * 1.1, 60.0), renderer, undo)
        for text in ax.texts:  # notes and boxed messages inside the axes
            if not _vertical(text) and text.get_window_extent(renderer).width > box.width:
                _wrap(text, box.width * 0.9, renderer, undo)


def _vertical(text) -> bool:
    return abs(math.sin(math.radians(text.get_rotation()))) > 0.5


def _line_width(text, line: str, renderer) -> float:
    s, ismath = text._preprocess_math(line)
    return renderer.get_text_width_height_descent(s, text.get_fontproperties(), ismath=ismath)[0]


def _wrap(text, room: float, renderer, undo) -> None:
    """Break ``text`` into lines no wider than ``room`` px, from its text before any breaking
    (a later pass, with more room, joins lines an earlier one broke)."""
    shown = text.get_text()
    if not shown or not text.get_visible():
        return
    original = getattr(text, "_phone_original", shown)
    lines = []
    for line in original.split("\n"):
        lines.extend(_break(text, line, room, renderer))
    new = "\n".join(lines)
    if new == shown:
        return
    text.set_text(new)
    if not hasattr(text, "_phone_original"):
        text._phone_original = original

        def restore(t=text, s=original):
            t.set_text(s)
            del t._phone_original

        undo.append(restore)


def _break(text, line: str, room: float, renderer) -> list[str]:
    """``line`` as lines no wider than ``room`` pixels, broken between words, never inside
    ``$...$`` math."""
    if _line_width(text, line, renderer) <= room:
        return [line]
    words, current = [], ""
    for word in line.split(" "):
        current = f"{current} {word}" if current else word
        if current.count("$") % 2 == 0:
            words.append(current)
            current = ""
    if current:
        words.append(current)
    lines, current = [], ""
    for word in words:
        trial = f"{current} {word}" if current else word
        if current and _line_width(text, trial, renderer) > room:
            lines.append(current)
            current = word
        else:
            current = trial
    return [*lines, current]
