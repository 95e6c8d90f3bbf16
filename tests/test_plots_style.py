"""The book's figure style and the pieces every builder shares (attnlib.plots.style): the
style is applied on import and restored by use_book_style, loglog_figure draws labelled log-log
axes (with fitted slopes on request), add_takeaway writes the one-line takeaway under the axes,
and label_ticks puts plain-number major ticks exactly at the values given."""

import io

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnlib import AttnInputError, plots
from attnlib.plots import style


def test_the_style_is_applied_and_restored():
    for key, value in style._BOOK_STYLE.items():
        # rcParams stores each value validated (a tuple as a list, a font as a list of one)
        assert mpl.rcParams[key] == mpl.RcParams({key: value})[key], key
    with mpl.rc_context({"axes.grid": False, "lines.linewidth": 9.0}):
        style.use_book_style()
        assert mpl.rcParams["axes.grid"] is True
        assert mpl.rcParams["lines.linewidth"] == style._BOOK_STYLE["lines.linewidth"]


def test_loglog_figure_draws_every_series_with_its_fitted_slope():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    fig = style.loglog_figure(
        {"squares": (x, x**2), "roots": (x, np.sqrt(x))},
        xlabel="n",
        ylabel="seconds",
        title="growth",
        fit=True,
    )
    (ax,) = fig.axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("n", "seconds", "growth")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["squares (slope 2.00)", "roots (slope 0.50)"]
    assert [line.get_marker() for line in ax.lines] == ["o", "o"]
    assert np.array_equal(ax.lines[0].get_ydata(), x**2)


def test_loglog_figure_draws_on_a_given_axis_without_markers_or_fits():
    fig, (left, right) = plt.subplots(1, 2)
    got = style.loglog_figure(
        {"a": ([1, 10], [3, 30])}, xlabel="x", ylabel="y", markers=False, ax=right
    )
    assert got is fig and not left.lines and len(right.lines) == 1
    assert right.lines[0].get_marker() in (None, "None", "")
    assert [t.get_text() for t in right.get_legend().get_texts()] == ["a"]
    assert right.get_title() == ""


def test_the_takeaway_is_centred_under_the_axes():
    fig, _ = plt.subplots()
    style.add_takeaway(fig, "flash moves fewer words")
    (text,) = fig.texts
    assert text.get_text() == "flash moves fewer words"
    x, y = text.get_position()
    assert x == 0.5 and y < 0 and text.get_ha() == "center"


@pytest.mark.parametrize("axis", ["x", "y"])
def test_label_ticks_puts_plain_labels_at_the_values_and_hides_minor_ones(axis):
    fig, ax = plt.subplots()
    ax.loglog([64, 4096], [64, 4096])
    style.label_ticks(ax, [64, 256, 1024, 4096], axis=axis)
    target = ax.xaxis if axis == "x" else ax.yaxis
    assert list(target.get_majorticklocs()) == [64, 256, 1024, 4096]
    formatter = target.get_major_formatter()
    assert [formatter(v, 0) for v in (64, 256, 1024, 4096)] == ["64", "256", "1024", "4096"]
    assert list(target.get_minorticklocs()) == []
    other = ax.yaxis if axis == "x" else ax.xaxis
    assert list(other.get_majorticklocs()) != [64, 256, 1024, 4096]


@pytest.mark.parametrize(
    "series, match",
    [
        ({}, r"^series must be a non-empty dict"),
        ({"a": [[1.0, 2.0]]}, r"^series\['a'\] must have 2 sequences \(x, y\), got 1$"),
        ({"a": [1.0, 2.0]}, r"^series\['a'\]\[0\] must be 1-dimensional"),
        ({"a": ([1, 2], [1.0])}, r"^series\['a'\]\[1\] must have 2 entries like series"),
        ({"a": ([1, 2], [1.0, -1.0])}, r"^series\['a'\]\[1\] must be positive"),
    ],
)
def test_the_shared_log_log_builder_refuses_what_it_cannot_draw(series, match):
    with pytest.raises(AttnInputError, match=match):
        plots.loglog_figure(series, xlabel="n", ylabel="words")


def test_notebook_figures_are_palette_pngs_that_look_the_same():
    from PIL import Image

    from attnlib.plots.style import _palette_png

    fig, ax = plt.subplots()
    for k in range(5):  # antialiased lines of five colours, a legend and text
        ax.plot(np.linspace(0, 1, 200), np.sin(np.linspace(0, 6, 200) + k), label=f"line {k}")
    ax.legend()
    full = io.BytesIO()
    fig.savefig(full, format="png", dpi=fig.dpi, bbox_inches="tight")
    small = _palette_png(fig, fig.dpi)
    a = np.asarray(Image.open(io.BytesIO(full.getvalue())).convert("RGB"), dtype=float)
    b = Image.open(io.BytesIO(small))
    assert b.format == "PNG" and b.mode == "P" and len(b.getcolors(256) or ()) <= 256
    b = np.asarray(b.convert("RGB"), dtype=float)
    assert a.shape == b.shape  # cropped as the notebook crops it
    # no visible change: the palette misses only a few blended edge pixels, by a few levels
    error = np.abs(a - b).max(axis=2)
    assert error.mean() < 1.0 and (error > 16).mean() < 1e-3
    assert len(small) < 0.6 * len(full.getvalue())  # and much lighter


def test_a_transparent_figure_is_shown_on_white():
    from PIL import Image

    from attnlib.plots.style import _palette_png

    fig = plt.figure(facecolor="none")
    image = np.asarray(Image.open(io.BytesIO(_palette_png(fig, 100))).convert("RGB"))
    assert (image == 255).all()


def _png_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    return Image.open(io.BytesIO(data)).size


def test_notebook_figures_are_twice_as_sharp_and_say_their_size_and_smallest_text():
    import base64

    from attnlib.plots.forms import PHONE_WIDTH_IN, min_text_px
    from attnlib.plots.style import PIXEL_RATIO, _notebook_png

    fig, ax = plt.subplots(figsize=(3.2, 2.5))  # fits a phone's column: no phone form
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.set_title("seven-point title", fontsize=7)
    png, meta = _notebook_png(fig)
    width, height = _png_size(png)
    assert PIXEL_RATIO == 2 and set(meta) == {"width", "height", "text_px"}
    assert (meta["width"], meta["height"]) == (round(width / 2), round(height / 2))
    assert abs(width - 2 * fig.dpi * 3.2) < 0.1 * width  # drawn at twice the figure's dpi
    assert meta["text_px"] == pytest.approx(7 * 2 * fig.dpi / 72, abs=0.01)

    wide, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for a in axes:
        a.plot([1, 2, 3], [3, 1, 2])
    size = tuple(wide.get_size_inches())
    png, meta = _notebook_png(wide)
    assert tuple(wide.get_size_inches()) == size  # the figure is left as it was
    assert meta["text_px"] == pytest.approx(min_text_px(wide, 2 * wide.dpi), abs=0.01)
    phone = meta["phone"]
    phone_png = base64.b64decode(phone["png"])
    p_width, p_height = _png_size(phone_png)
    assert (phone["width"], phone["height"]) == (round(p_width / 2), round(p_height / 2))
    assert phone["width"] <= PHONE_WIDTH_IN * wide.dpi + 20 < meta["width"]
    assert p_height > p_width  # three panels stacked
    assert phone["text_px"] >= meta["text_px"]
