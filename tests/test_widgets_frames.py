"""Drawing functions by name and one frame's PNG (attnlib.widgets.frames): a drawing function's
'module:qualname' round-trips and what cannot be imported is refused; render_frame checks its
arguments before it draws and leaves no figure open."""

import io

import matplotlib.pyplot as plt
import pytest
from helpers import draw_line
from PIL import Image

from attnlib import AttnInputError, widgets
from attnlib.widgets import frames


def test_draw_spec_round_trips_and_refuses_what_cannot_be_imported():
    assert frames._draw_spec(draw_line) == f"{draw_line.__module__}:draw_line"
    assert widgets.resolve_draw(f"{draw_line.__module__}:draw_line") is draw_line

    def nested(k):
        return draw_line(k)

    for bad in (None, lambda k: draw_line(k), nested):
        with pytest.raises(AttnInputError, match="draw"):
            widgets.live_figure(bad, name="x", alt="x", k=widgets.grid_slider("k", [1], 1))
    with pytest.raises(AttnInputError, match="cannot be imported"):
        widgets.resolve_draw("attnlib.plots:no_such_builder")


def test_render_frame_checks_its_arguments_before_drawing():
    point = {"k": 2}
    for kw, match in [
        ({"dpi": 0}, r"^dpi must be an integer >= 1"),
        ({"colors": 1}, r"^colors must be an integer >= 2"),
        ({"colors": 257}, r"^colors must be an integer <= 256"),
        ({"dpi": 10**5}, r"^render_frame would need .*; dpi is too large$"),
    ]:
        with pytest.raises(AttnInputError, match=match):
            widgets.render_frame(draw_line, point, **kw)
    with pytest.raises(AttnInputError, match=r"^point must be a dict of keyword arguments"):
        widgets.render_frame(draw_line, [2])
    with pytest.raises(AttnInputError, match=r"^draw must be callable"):
        widgets.render_frame(None, point)
    with pytest.raises(AttnInputError, match=r"^draw must return a matplotlib Figure, got int"):
        widgets.render_frame(lambda k: k, point)
    assert plt.get_fignums() == []  # a refused frame leaves no figure open
    png = widgets.render_frame(draw_line, point, dpi=20, colors=2)
    assert Image.open(io.BytesIO(png)).mode == "P"


def test_a_refused_point_is_drawn_on_its_neighbours_axes_with_the_reason():
    """Chapter 6's live figure at a point double precision cannot meet: the axes of an accepted
    point (x from -R to R, the ±eps lines), the band hatched, and why, in full, on the plot."""
    from attnlib import plots

    shown = plots.exp_poly_error_figure(8.0, 1e-6)
    refused = plots.exp_poly_error_figure(8.0, 1e-8)
    try:
        ax, ref = refused.axes[0], shown.axes[0]
        assert ax.get_xlim() == ref.get_xlim() == (-8.0, 8.0)
        assert ax.get_ylim()[1] == pytest.approx(1e-8, rel=0.2)  # the ±eps band fills it
        assert ax.get_title() == "R = 8, eps = 1e-08: refused"
        (why,) = [t.get_text() for t in ax.texts]
        assert why.startswith("chebyshev and taylor refused:\neps is not 10 times above")
        assert why.endswith("(floor 2e-09)")
        assert [c.get_label() for c in ax.collections] == ["refused"]
    finally:
        plt.close("all")


def test_cost_bars_are_ratios_from_1_on_one_axis_in_every_frame():
    """Chapter 9's live figure: bars start at ratio 1 and the log axis is 1 to RATIO_TOP at
    every point, so that a bar's length compares across frames; a bar past the top is cut."""
    from attnlib import plots
    from attnlib.advice import advise
    from attnlib.machines import book_machines
    from attnlib.plots.advice import RATIO_TOP

    machine = "H100 SM, float32"
    for log2_n, B in [(10, 0.3), (14, 0.05), (18, 1.0)]:
        fig = plots.method_costs_at(log2_n, 64, B, machine, 3)
        ax = fig.axes[0]
        a = advise(2**log2_n, 64, B, 1e-3, **book_machines()[machine])
        best = a.cost_of(a.method).cost
        assert ax.get_ylim() == (1.0, RATIO_TOP) and ax.get_yscale() == "log"
        for bar in ax.patches:
            cost = a.costs[round(bar.get_x() + bar.get_width() / 2)].cost
            assert bar.get_y() == 1.0
            assert bar.get_y() + bar.get_height() == pytest.approx(min(cost / best, RATIO_TOP))
        plt.close(fig)
    tall = plots.method_costs_at(8, 64, 0.7, machine, 3)  # the polynomial method: 8861x
    try:
        tops = [p.get_y() + p.get_height() for p in tall.axes[0].patches]
        assert max(tops) == RATIO_TOP
        assert "8.86e+03× (cut)" in [t.get_text() for t in tall.axes[0].texts]
    finally:
        plt.close(tall)
