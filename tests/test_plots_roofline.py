"""The figures of Chapter 10's roofline section (attnlib.plots.roofline): the intensity against
M with the machines' balance points, the roofline with bfloat16 solid and float32 dashed, the L2
absorption; each draws labelled axes, and bad input is refused."""

import numpy as np
import pytest

from attnlib import AttnInputError


def test_figure_builders_draw_and_refuse_bad_input():

    from attnlib.plots import roofline as rp

    Ms = np.array([1e3, 1e4, 1e5])
    balances = {"H100 bfloat16": 590.0}
    fig = rp.intensity_figure(Ms, {"forward, d = 64": Ms / 10}, balances, takeaway="t")
    assert fig.axes[0].get_xlabel() and fig.axes[0].get_legend() is not None
    roofs = [("H100", "bfloat16", 989.4e12, 3.35e12), ("H100", "float32", 66.9e12, 3.35e12)]
    fig = rp.roofline_figure(roofs, [("H100", "forward", 500.0, 989.4e12)])
    assert "FLOP/s" in fig.axes[0].get_ylabel()
    styles = [line.get_linestyle() for line in fig.axes[0].get_lines()[:2]]
    assert styles == ["-", "--"]  # bfloat16 solid, float32 dashed
    ceiling = [("H100", "exponentials, d = 128", 1979e12)]
    fig = rp.roofline_figure(roofs, [("H100", "forward", 500.0, 989.4e12)], ceilings=ceiling)
    flat = fig.axes[0].get_lines()[2]
    assert flat.get_linestyle() == "-." and set(flat.get_ydata()) == {1979e12}
    assert fig.get_size_inches()[0] <= 6.4  # the book's width: it fits a phone's screen
    fig = rp.l2_absorption_figure([4096, 16384], {"H100": [1.0, 0.5]}, {"H100": [1.0, 0.2]})
    assert len(fig.axes[0].get_lines()) == 2
    bad = [
        lambda: rp.intensity_figure(Ms, {}, {"x": 1.0}),
        lambda: rp.intensity_figure(Ms, {"a": Ms[:2]}, {"x": 1.0}),
        lambda: rp.intensity_figure(-Ms, {"a": Ms}, {"x": 1.0}),
        lambda: rp.intensity_figure(Ms, {3: Ms}, {"x": 1.0}),  # "forward" in 3: a TypeError
        lambda: rp.intensity_figure(Ms, {"a": Ms}, {"x": 0.0}),
        lambda: rp.roofline_figure(roofs, []),
        lambda: rp.roofline_figure(roofs, [("H100", "f", 1.0)]),
        lambda: rp.roofline_figure([], [("H100", "f", 1.0, 1.0)]),
        lambda: rp.roofline_figure(roofs, [("A100", "f", 1.0, 1.0)]),
        lambda: rp.roofline_figure(roofs, [("H100", "f", -1.0, 1.0)]),
        lambda: rp.roofline_figure(roofs, [("H100", "f", 1.0, 1.0)], ceilings=[("A100", "e", 1.0)]),
        lambda: rp.roofline_figure(roofs, [("H100", "f", 1.0, 1.0)], ceilings=[("H100", "e", 0)]),
        lambda: rp.roofline_figure(roofs, [("H100", "f", 1.0, 1.0)], ceilings=[("H100", 1.0)]),
        lambda: rp.l2_absorption_figure([4096], {"H100": [1.5]}, {"H100": [1.0]}),
        lambda: rp.l2_absorption_figure([4096], {"H100": [1.0]}, {"A100": [1.0]}),
    ]
    for call in bad:
        with pytest.raises(AttnInputError):
            call()
