"""The figures of Chapter 8 (attnlib.plots.hardness): each builder draws a labelled Figure with
a takeaway and refuses bad input."""

import pytest
from helpers import assert_labelled_with_takeaway

from attnlib import AttnInputError, plots
from attnlib import hardness as hd

FORMULA = hd.random_ksat(6, 16, 3, seed=0)
TABLES = hd.sat_to_ov(FORMULA, 6)
ERRORS = {"a": ([1e-3, 0.0], [0.1, 0.05]), "b": ([1e-2, 1e-9], [0.2, 0.1])}
ESTIMATES = {("OV", True): [0.9, 1.0], ("OV", False): [0.0, 0.1]}

GOOD = {
    "split_list_figure": lambda: plots.split_list_figure(*TABLES),
    "satisfiable_fraction_figure": lambda: plots.satisfiable_fraction_figure([4, 5], [1.0, 0.5]),
    "ov_margins_figure": lambda: plots.ov_margins_figure([4, 8], [0.2, 0.1], [1e-4, 1e-5]),
    "entry_sizes_figure": lambda: plots.entry_sizes_figure(
        [2.0, 3.0], [4.0, 6.0], [3.0, 4.0], [5.0, 6.0], [4.0, 5.0]
    ),
    "derivative_figure": lambda: plots.derivative_figure([0, 0.5, 1], {"x": [3, 2, 1]}),
    "quadrature_errors_figure": lambda: plots.quadrature_errors_figure([2, 4], [4, 16], ERRORS),
    "noisy_estimates_figure": lambda: plots.noisy_estimates_figure(ESTIMATES, {"OV": 0.5}),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_builder_draws_a_labelled_figure_with_a_takeaway(name):
    # the heat map has a colour bar and the panels of f' their titles instead of a legend
    legend = name not in ("split_list_figure", "derivative_figure")
    assert_labelled_with_takeaway(GOOD[name](), legend=legend)


def test_split_list_figure_outlines_the_satisfying_assignments():
    fig = plots.split_list_figure(*TABLES)
    ax = fig.axes[0]
    assert len(ax.patches) == hd.count_models(FORMULA, 6) == 2
    assert "two satisfying assignments" in fig.texts[0].get_text()
    assert ax.get_xlabel().startswith("half-assignment of x4 x5 x6")


BAD = [
    (lambda: plots.split_list_figure(TABLES[0], TABLES[1][:, :3]), "B"),
    (lambda: plots.split_list_figure(TABLES[0][:3], TABLES[1]), "A"),
    (lambda: plots.satisfiable_fraction_figure([4, 5], [1.0, 1.5]), "fractions"),
    (lambda: plots.satisfiable_fraction_figure([4, 5], [1.0]), "fractions"),
    (lambda: plots.ov_margins_figure([4, 8], [0.2, 0.0], [1e-4, 1e-5]), "yes_min"),
    (lambda: plots.entry_sizes_figure([2.0], [4.0], [3.0], [5.0], [4.0]), "log_n"),
    (lambda: plots.entry_sizes_figure([2.0, 3.0], [4.0], [3.0, 4.0], [5, 6], [4, 5]), "ov_built"),
    (lambda: plots.derivative_figure([0, 1], {"x": [3, 2, 1]}), "derivatives"),
    (lambda: plots.derivative_figure([0, 1], {}), "derivatives"),
    (lambda: plots.quadrature_errors_figure([2, 4], [4, 16], {"a": ([1e-3], [0.1, 0.05])}), "gl"),
    (lambda: plots.quadrature_errors_figure([0, 4], [4, 16], ERRORS), "gl_nodes"),
    (lambda: plots.quadrature_errors_figure([2, 4], [4, 16], {"a": [1, 2]}), "errors"),
    (lambda: plots.noisy_estimates_figure(ESTIMATES, {"Gap": 0.5}), "estimates"),
    (lambda: plots.noisy_estimates_figure(ESTIMATES, {"OV": 0.5}, rel=0.0), "rel"),
    (lambda: plots.noisy_estimates_figure(ESTIMATES, []), "thresholds"),
    (lambda: plots.noisy_estimates_figure(ESTIMATES, {"OV": "x"}), r"thresholds\['OV'\]"),
    (lambda: plots.quadrature_errors_figure(2, [4, 16], ERRORS), "gl_nodes"),
    (lambda: plots.quadrature_errors_figure([2, 4], [4, 16], {"a": ([1, 2], [0.1, 0])}), "rm"),
    (lambda: plots.derivative_figure([0, 1], {str(k): [1, 2] for k in range(8)}), "derivatives"),
]


@pytest.mark.parametrize("call, match", BAD)
def test_builders_refuse_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call()
