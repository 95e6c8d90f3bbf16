"""The figure builders of Part II (attnlib.plots.polymethod): each draws labelled axes, a legend
and a takeaway from the chapter's numbers, and refuses malformed numbers with an AttnInputError."""

import numpy as np
import pytest

from attnlib import AttnInputError, plots
from attnlib import polymethod as pm

NS = np.array([64, 128, 256])
CURVE = np.array([1.0, 2.0, 4.0])
TABLE = {kind: np.ones((2, 3)) for kind in ("taylor", "chebyshev")}

BUILDERS = {
    "exp_poly_error_figure": lambda: plots.exp_poly_error_figure(1.0, 1e-3),
    "least_degree_figure": lambda: plots.least_degree_figure([0.5, 1.0], [1e-3]),
    "degree_error_figure": lambda: plots.degree_error_figure([1.0, 4.0], NS, TABLE, TABLE),
    "rounding_floor_figure": lambda: plots.rounding_floor_figure(NS, {4.0: CURVE}),
    "threshold_collapse_figure": lambda: plots.threshold_collapse_figure(
        pm.threshold_sweep([8, 10], [0.3, 1.0, 2.0]), pm.threshold_sweep([8, 10], [0.3, 1.0], d=4)
    ),
    "least_degree_grid_figure": lambda: plots.least_degree_grid_figure(
        [1.0, 2.0], [1e-1, 1e-2], [[1.0, 2.0], [3.0, np.nan]]
    ),
    "gradient_error_figure": lambda: plots.gradient_error_figure(
        [1e-1, 1e-2, 1e-3], {1.0: CURVE / 100}, n=64, d=4
    ),
    "error_and_rank_figure": lambda: plots.error_and_rank_figure(
        [0.5, 1.0, 1.5], {1e-3: CURVE / 1e4}, {1e-3: [5, 15, 35]}
    ),
    "gradient_time_figure": lambda: plots.gradient_time_figure(
        (NS, NS, NS),
        {4: (CURVE, CURVE / 2, CURVE / 3)},
        ranks={4: 35},
        slopes={4: (2.0, 1.0)},
        crossovers={4: 100.0},
        eps=1e-3,
        R=0.5625,
    ),
    "gradient_memory_figure": lambda: plots.gradient_memory_figure(
        (NS, NS), {4: (CURVE, CURVE / 2)}, slopes={4: (2.0, 1.0)}, fit_from=128, eps=1e-3
    ),
    "threshold_figure": lambda: plots.threshold_figure(
        [0.5, 1.0, 1.5],
        {4: ([2, 5, np.nan], [15, 126, np.nan])},
        {4: ([2, 5, 9], [15, 126, 715])},
        n=64,
    ),
}


def test_every_builder_of_the_part_is_tested():
    assert set(BUILDERS) == set(plots.polymethod.__all__)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_draws_labelled_axes_and_a_legend(name):
    fig = BUILDERS[name]()
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert all(ax.get_xlabel() for ax in axes) and axes[0].get_ylabel()
    assert any(ax.get_legend() for ax in fig.axes) or name == "least_degree_grid_figure"
    if name not in ("exp_poly_error_figure", "least_degree_figure"):  # panels, no takeaway
        assert any(t.get_text() for t in fig.texts)


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: plots.exp_poly_error_figure(-1.0, 1e-3), "R"),
        (lambda: plots.exp_poly_error_figure(1.0, 2.0), "eps"),
        (lambda: plots.least_degree_figure([1.0], [1e-3] * 8), "epss"),
        (lambda: plots.degree_error_figure([1.0], NS, TABLE, TABLE), "shape"),
        (
            lambda: plots.degree_error_figure([1.0, 4.0], NS, {"taylor": np.ones((2, 3))}, TABLE),
            "chebyshev",
        ),
        (lambda: plots.rounding_floor_figure(NS, {4.0: CURVE[:2]}), "entries"),
        (lambda: plots.rounding_floor_figure(NS, {}), "errors"),
        (lambda: plots.threshold_collapse_figure(None, None), "sweep"),
        (lambda: plots.least_degree_grid_figure([1.0], [0.1], [[1.0, 2.0]]), "degrees"),
        (lambda: plots.gradient_error_figure(CURVE, {1.0: ["a", "b", "c"]}, n=4, d=2), "errors"),
        (lambda: plots.gradient_error_figure(CURVE, {1.0: CURVE}, n=0, d=2), "n"),
        (lambda: plots.error_and_rank_figure(CURVE, {1e-3: CURVE}, {1e-6: CURVE}), "ranks"),
        (
            lambda: plots.gradient_time_figure(
                (NS, NS), {}, ranks={}, slopes={}, crossovers={}, eps=0.1, R=1.0
            ),
            "ns",
        ),
        (
            lambda: plots.gradient_time_figure(
                (NS, NS, NS),
                {4: (CURVE,)},
                ranks={4: 1},
                slopes={4: (1, 1)},
                crossovers={4: None},
                eps=0.1,
                R=1.0,
            ),
            "times",
        ),
        (
            lambda: plots.gradient_memory_figure(
                (NS, NS), {4: (CURVE, CURVE)}, slopes={}, fit_from=1, eps=0.1
            ),
            "slopes",
        ),
        (
            lambda: plots.gradient_memory_figure(
                (NS, NS), {4: (CURVE, CURVE)}, slopes={4: (1.0,)}, fit_from=1, eps=0.1
            ),
            r"slopes\[4\]",
        ),
        (
            lambda: plots.gradient_time_figure(
                (NS, NS, NS),
                {4: (CURVE, CURVE, CURVE)},
                ranks={4: 1},
                slopes={4: (1, 1)},
                crossovers={4: -1.0},
                eps=0.1,
                R=1.0,
            ),
            r"crossovers\[4\]",
        ),
        (lambda: plots.least_degree_figure([1.0], [1e-3, 2.0]), r"epss\[1\]"),
        (
            lambda: plots.threshold_figure(CURVE, {4: (CURVE, CURVE)}, {8: (CURVE, CURVE)}, n=64),
            "model",
        ),
        (
            lambda: plots.threshold_figure(
                CURVE, {4: (CURVE, [1.0, np.inf])}, {4: (CURVE, CURVE)}, n=64
            ),
            "entries",
        ),
    ],
)
def test_bad_numbers_raise(call, word):
    with pytest.raises(AttnInputError, match=word):
        call()
