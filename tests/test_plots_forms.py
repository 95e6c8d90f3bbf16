"""attnlib.plots.forms: a figure's phone form and the size of its smallest text."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from attnlib.plots import add_takeaway  # noqa: E402
from attnlib.plots.forms import (  # noqa: E402
    PHONE_COLUMN_PX,
    PHONE_MIN_PT,
    PHONE_WIDTH_IN,
    READABLE_PX,
    min_text_px,
    needs_phone_form,
    phone_form,
    phone_layout,
)

LONG = "a title far too long to fit above one panel of a figure on a phone's narrow screen"


def _lines(ax, k=3):
    for j in range(k):
        ax.plot(np.arange(10), np.arange(10) * (j + 1), label=f"series {j}")


def one_panel():
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    _lines(ax)
    ax.legend()
    ax.set(xlabel="sequence length n", ylabel="time (s)", title=LONG)
    return fig


def row_of_two():
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax in axes:
        _lines(ax)
        ax.set_xlabel("n")
    axes[0].set_ylabel("words moved")
    fig.suptitle(LONG)
    return fig


def grid_of_four():
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for k, ax in enumerate(axes.flat):
        _lines(ax, 1)
        ax.set_title(f"panel {k}")
    return fig


def with_colorbar():
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    im = ax.imshow(np.arange(64).reshape(8, 8))
    fig.colorbar(im, ax=ax, label="inner product")
    return fig


def with_twin():
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax in axes:
        _lines(ax, 1)
    twin = axes[1].twinx()
    twin.plot(np.arange(10), -np.arange(10), color="red")
    twin.set_ylabel("the other scale")
    return fig


def with_figure_legend():
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.5))
    for ax in axes:
        _lines(ax)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper")
    return fig


def with_takeaway():
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax in axes:
        _lines(ax)
    add_takeaway(fig, "Doubling n quadruples both the time and the memory of the exact gradient.")
    return fig


def with_small_text():
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax in axes:
        _lines(ax)
        ax.legend(fontsize=6)
    return fig


BUILDERS = [
    one_panel,
    row_of_two,
    grid_of_four,
    with_colorbar,
    with_twin,
    with_figure_legend,
    with_takeaway,
    with_small_text,
]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _saved_size(fig, dpi=100):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return Image.open(io.BytesIO(buffer.getvalue())).size


@pytest.mark.parametrize("build", BUILDERS, ids=lambda b: b.__name__)
def test_a_phone_form_is_one_column_keeps_every_axes_and_fits_the_phone(build):
    fig = build()
    axes_before = list(fig.axes)
    smallest = min_text_px(fig, 100)
    assert phone_form(fig) is fig
    fig.canvas.draw()
    assert fig.axes == axes_before  # every axes kept, none added
    assert fig.get_size_inches()[0] == pytest.approx(PHONE_WIDTH_IN)
    placed = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    assert {ax.get_subplotspec().get_gridspec().ncols for ax in placed} == {1}
    rows = [ax.get_subplotspec().rowspan.start for ax in placed]
    width, height = fig.bbox.width, fig.bbox.height
    for ax in fig.axes:  # every axes box lies on the canvas, one under the other
        box = ax.get_window_extent()
        assert box.x0 >= -1 and box.x1 <= width + 1 and box.y0 >= -1 and box.y1 <= height + 1
    twins = [
        ax
        for ax in placed
        if any(
            fig.axes.index(o) < fig.axes.index(ax)
            for o in (ax._twinned_axes.get_siblings(ax))
            if o is not ax
        )
    ]
    assert sorted(set(rows)) == list(range(len(placed) - len(twins)))  # a row each; twins share
    drawn = fig.get_tightbbox(fig.canvas.get_renderer())  # inches; only what is drawn
    assert drawn.x0 >= -0.01 and drawn.x1 <= PHONE_WIDTH_IN + 0.01  # nothing leaves sideways
    # the saved image (below the canvas: the takeaway) is as wide as the canvas
    assert _saved_size(fig)[0] <= PHONE_WIDTH_IN * 100 + 2 * 10 + 2
    assert _saved_size(fig)[0] <= PHONE_COLUMN_PX + 4
    # text not smaller, and at least PHONE_MIN_PT
    after = min_text_px(fig, 100)
    assert after >= smallest - 1e-9 and after >= PHONE_MIN_PT * 100 / 72 - 1e-9


def test_panels_are_stacked_in_reading_order_and_twins_and_colorbars_follow():
    fig = grid_of_four()
    titles = [ax.get_title() for ax in fig.axes]
    phone_form(fig)
    order = sorted(fig.axes, key=lambda ax: ax.get_subplotspec().rowspan.start)
    assert [ax.get_title() for ax in order] == titles
    tops = [ax.get_window_extent().y1 for ax in order]
    assert tops == sorted(tops, reverse=True)

    fig = with_twin()
    host, twin = fig.axes[1], fig.axes[2]
    phone_form(fig)
    fig.canvas.draw()
    assert twin.get_subplotspec() == host.get_subplotspec()
    assert np.allclose(twin.get_position().bounds, host.get_position().bounds)

    fig = with_colorbar()
    phone_form(fig)
    fig.canvas.draw()
    ax, bar = fig.axes
    assert bar.get_window_extent().x0 >= ax.get_window_extent().x1  # still beside its image


def test_shared_tick_labels_come_back_and_side_legends_move_under_the_panels():
    fig = row_of_two()
    right = fig.axes[1]
    fig.canvas.draw()
    assert not any(t.get_visible() and t.get_text() for t in right.get_yticklabels())
    phone_form(fig)
    fig.canvas.draw()
    assert any(t.get_visible() and t.get_text() for t in right.get_yticklabels())

    fig = with_figure_legend()
    phone_form(fig)
    fig.canvas.draw()
    assert [lg.get_visible() for lg in fig.legends] == [False]
    last = max(fig.axes, key=lambda ax: ax.get_subplotspec().rowspan.start)
    legend = last.get_legend()
    assert [t.get_text() for t in legend.texts] == ["series 0", "series 1", "series 2"]
    assert legend.get_window_extent().y1 <= last.get_window_extent().y0  # under the last panel
    assert legend.get_window_extent().y0 >= 0  # on the canvas, the layout made room for it


def test_phone_layout_puts_the_figure_back():
    fig = with_figure_legend()
    add_takeaway(fig, LONG + " " + LONG)
    fig.axes[0].set_title(LONG)
    before = _saved_size(fig)
    specs = [ax.get_subplotspec() for ax in fig.axes]
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    with phone_layout(fig) as phone:
        assert phone is fig and fig.get_size_inches()[0] == pytest.approx(PHONE_WIDTH_IN)
        assert _saved_size(fig)[0] < before[0]
    assert [ax.get_subplotspec() for ax in fig.axes] == specs
    assert [t.get_text() for t in fig.findobj(matplotlib.text.Text)] == texts
    assert [lg.get_visible() for lg in fig.legends] == [True]
    assert _saved_size(fig) == before


def test_a_figure_off_the_grid_keeps_its_layout_at_phone_width():
    fig = plt.figure(figsize=(8, 4))
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    _lines(ax)
    phone_form(fig)
    assert fig.get_size_inches() == pytest.approx((PHONE_WIDTH_IN, 4 * PHONE_WIDTH_IN / 8))
    assert fig.axes == [ax] and ax.get_position().bounds == pytest.approx((0.1, 0.1, 0.8, 0.8))


def test_min_text_px_counts_only_drawn_text_at_the_given_dpi():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    ax.tick_params(labelsize=10)
    ax.xaxis.label.set_fontsize(12)
    ax.set_xlabel("x")
    assert min_text_px(fig, 100) == pytest.approx(10 * 100 / 72)
    assert min_text_px(fig, 200) == pytest.approx(10 * 200 / 72)
    ax.text(0.5, 0.5, "small", fontsize=5)
    assert min_text_px(fig, 100) == pytest.approx(5 * 100 / 72)
    ax.texts[0].set_visible(False)  # hidden, empty and out-of-view text is not drawn
    ax.text(0.5, 0.5, "   ", fontsize=3)
    ax.text(50.0, 50.0, "far", fontsize=4, clip_on=True)
    assert min_text_px(fig, 100) == pytest.approx(10 * 100 / 72)
    empty = plt.figure()
    assert min_text_px(empty, 100) == float("inf")


def test_needs_phone_form_for_side_by_side_panels_and_text_too_small_on_a_phone():
    small, ax = plt.subplots(figsize=(3.2, 2.6))
    _lines(ax)
    assert not needs_phone_form(small)
    wide, ax = plt.subplots(figsize=(9, 3.5))
    _lines(ax)
    shown = min_text_px(wide, 100) * PHONE_COLUMN_PX / (9 * 100)
    assert shown < READABLE_PX and needs_phone_form(wide)
    assert needs_phone_form(row_of_two())
    stacked, axes = plt.subplots(2, 1, figsize=(3.2, 5))
    assert not needs_phone_form(stacked)
