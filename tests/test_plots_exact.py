"""The figure of Chapter 1 (attnlib.plots.exact): the exact core's time and memory against n,
labelled, with its fitted slopes and a takeaway; bad numbers are refused by name."""

import pytest
from helpers import assert_labelled_with_takeaway

from attnlib import AttnInputError, plots

NS = [256, 512]


def test_exact_cost_figure_draws_a_labelled_figure_with_a_takeaway():
    fig = plots.exact_cost_figure(
        NS, [0.01, 0.04], NS, [2e6, 8e6], d=64, time_slope=2.0, mem_slope=2.0
    )
    assert_labelled_with_takeaway(fig)


@pytest.mark.parametrize("seconds, d, match", [([0.01, -1], 64, "seconds"), ([0.01, 1], 0, "d")])
def test_exact_cost_figure_refuses_bad_input(seconds, d, match):
    with pytest.raises(AttnInputError, match=match):
        plots.exact_cost_figure(NS, seconds, NS, [2e6, 8e6], d=d, time_slope=2, mem_slope=2)
