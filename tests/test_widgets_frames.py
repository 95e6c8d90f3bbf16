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
