"""attnlib.plots._phone_text: the text of a phone form fits its width (through phone_form)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnlib.plots import label_ticks  # noqa: E402
from attnlib.plots.forms import phone_form, phone_layout  # noqa: E402

LONG = "a title far too long to fit above one panel of a figure on a phone's narrow screen"


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _renderer(fig):
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def test_long_titles_and_notes_wrap_and_math_is_not_broken():
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([0, 1], [0, 1])
    ax.set_title(LONG)
    ax.set_xlabel(r"the length $n$ of the sequence and its width $\sqrt{d \log n}$ too")
    note = ax.text(
        0.5,
        0.5,
        "a boxed note inside the axes, much wider than a phone's panel",
        transform=ax.transAxes,
        ha="center",
        bbox={"fc": "white"},
    )
    phone_form(fig)
    renderer = _renderer(fig)
    assert "\n" in ax.get_title() and ax.get_title().replace("\n", " ") == LONG
    for line in ax.get_xlabel().split("\n"):
        assert line.count("$") % 2 == 0
    assert "\n" in note.get_text()
    assert note.get_window_extent(renderer).width <= ax.get_window_extent(renderer).width


def test_a_second_pass_with_more_room_joins_what_the_first_broke():
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.set_title("short enough for a phone")
    with phone_layout(fig):
        assert ax.get_title() == "short enough for a phone"
    assert ax.get_title() == "short enough for a phone" and not hasattr(ax.title, "_phone_original")


def test_legends_beside_or_too_wide_move_under_their_axes():
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax in axes:
        for k in range(3):
            ax.plot([0, 1], [k, k + 1], label=f"a rather long series name number {k}")
    beside = axes[0].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    inside = axes[1].legend(loc="upper left")
    small, ax = plt.subplots(figsize=(6, 4))
    ax.plot([0, 1], [0, 1], label="x")
    kept = ax.legend(loc="upper left")
    with phone_layout(fig):
        renderer = _renderer(fig)
        for legend in (beside, inside):
            box, extent = (
                legend.axes.get_window_extent(renderer),
                legend.get_window_extent(renderer),
            )
            assert extent.y1 <= box.y0  # under the axes
            assert extent.x0 >= 0 and extent.x1 <= fig.bbox.width + 1
    assert beside._loc == 6 and inside._loc == 2  # put back
    phone_form(small)
    assert kept._loc == 2 and kept.get_bbox_to_anchor().bounds == kept.axes.bbox.bounds


def test_figure_legends_move_under_the_last_panel_and_take_fewer_columns():
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax in axes:
        for k in range(6):
            ax.plot([0, 1], [k, k + 1], label=f"series {k}")
    axes[1].legend()  # the last panel's own legend stays
    side = fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper")
    wide = fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=6)
    fig.suptitle(LONG)
    with phone_layout(fig):
        renderer = _renderer(fig)
        assert not side.get_visible() and not wide.get_visible()
        moved = [a for a in axes[1].get_children() if isinstance(a, matplotlib.legend.Legend)]
        moved = [lg for lg in moved if lg is not axes[1].get_legend()]
        assert len(moved) == 2
        box = axes[1].get_window_extent(renderer)
        for legend in moved:
            extent = legend.get_window_extent(renderer)
            assert extent.y1 <= box.y0 and extent.width <= fig.bbox.width
            assert len(legend._legend_handle_box.get_children()) < 6
            assert [t.get_text() for t in legend.texts] == [f"series {k}" for k in range(6)]
    assert side.get_visible() and wide.get_visible() and side._outside_loc == "right"
    assert not [a for a in axes[1].get_children() if a in moved]


def test_colliding_number_ticks_thin_out_and_category_names_turn_upright():
    fig, (top, bottom) = plt.subplots(1, 2, figsize=(12, 3.5))
    values = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
    top.loglog(values, values)
    label_ticks(top, values)
    names = ["Q", "K", "V", "O", "dO", "lse", "P", "dS", "dQ", "dK", "dV", "scratch"]
    bottom.bar(range(len(names)), np.arange(len(names)))
    bottom.set_xticks(range(len(names)), [f"{n} tile" for n in names])
    phone_form(fig)
    _renderer(fig)
    shown = [t.get_text() for t in top.get_xticklabels() if t.get_text()]
    assert 2 <= len(shown) < len(values) and set(shown) <= {f"{v:g}" for v in values}
    assert [t.get_text() for t in bottom.get_xticklabels()] == [f"{n} tile" for n in names]
    assert {t.get_rotation() for t in bottom.get_xticklabels()} == {90.0}


def test_long_category_names_beside_a_y_axis_wrap():
    fig, ax = plt.subplots(figsize=(7.5, 3.7))
    names = ["1 × 32 heads (8 K/V), n = 2048, d = 128, causal", "one head, n = 4096, causal"]
    ax.barh(range(2), [0.5, 0.6])
    ax.set_yticks(range(2), names)
    with phone_layout(fig):
        renderer = _renderer(fig)
        labels = ax.get_yticklabels()
        assert "\n" in labels[0].get_text() and labels[0].get_text().replace("\n", " ") == names[0]
        assert all(t.get_window_extent(renderer).width <= 0.45 * fig.bbox.width for t in labels)
        assert ax.get_window_extent(renderer).width > 0.4 * fig.bbox.width
    assert [t.get_text() for t in ax.get_yticklabels()] == names
