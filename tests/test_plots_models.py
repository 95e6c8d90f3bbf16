"""The evidence chapter's figures of real models (attnlib.plots.models): each builder draws
labelled axes with a takeaway from its data and refuses bad input."""

import numpy as np
import pytest
from helpers import assert_axes_labelled_with_italic_takeaway

from attnlib import AttnInputError, plots

RNG = np.random.default_rng(9)
QUANTILES = np.sort(RNG.normal(size=(2, 3, 5)), axis=-1)
EXTREMES = np.stack([QUANTILES[..., 0] - 1, QUANTILES[..., -1] + 1], axis=-1)
B_HEADS = {128: RNG.uniform(3, 6, (2, 3)), 256: RNG.uniform(3, 6, (2, 3))}
R_OBS = {n: b**2 / 4 for n, b in B_HEADS.items()}
CLIPS = {1.0: [1.0, 1.0], 0.99: [0.5, 0.6]}
CLIP_ERR = {1.0: [1e-4, 2e-4], 0.99: [1e-2, 3e-2]}
ACC_R = {1e-2: [3.0, 4.0], 1e-3: [2.0]}
ACC_F = {1e-2: [1e-5, 2e-5], 1e-3: [1e-7]}
ACC_G = {1e-2: [1e-4, 2e-4], 1e-3: [1e-6]}
DEPTH = {("a", 1e-2): [1e-5, 2e-5, 3e-5], ("a", 1e-4): [1e-7, 1e-7, 2e-7], ("b", 1e-2): [1, 2, 4]}


VALID = {
    "logit_distribution": lambda: plots.logit_distribution_figure(QUANTILES, EXTREMES, n=512),
    "entry_bound": lambda: plots.entry_bound_figure(B_HEADS, R_OBS),
    "int8_rounding": lambda: plots.int8_rounding_figure(CLIPS, CLIP_ERR),
    "threshold_sweep": lambda: plots.threshold_sweep_figure(
        [0.5, 1, 2], [33, 561, np.nan], [1e-6, 1e-3, 0.5], n=256, degree=4, eps=1e-3, B_range=(3, 6)
    ),
    "polynomial_accuracy": lambda: plots.polynomial_accuracy_figure(ACC_R, ACC_F, ACC_G),
    "depth_error": lambda: plots.depth_error_figure(DEPTH),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_every_builder_draws_labelled_axes_and_a_takeaway(name):
    assert_axes_labelled_with_italic_takeaway(VALID[name]())


def test_depth_figure_names_each_curves_growth():
    fig = plots.depth_error_figure(DEPTH)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert any("geometric" in label for label in labels) and len(fig.axes) == 2


def test_depth_figure_draws_the_extra_curves_with_their_labels():
    extra = {("a", "bound (cor-09-depth)"): [1e-4, 1e-3, 1e-2], ("b", "stress test"): [1, 3, 9]}
    fig = plots.depth_error_figure(DEPTH, extra=extra)
    labels = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes[:2]]
    assert "bound (cor-09-depth)" in labels[0] and "stress test" in labels[1]
    assert "stress test" not in labels[0]
    bounded = plots.depth_error_figure(DEPTH, bounds={("a", 1e-2): [2e-5, 4e-5, 8e-5]})
    lines = bounded.axes[0].get_lines()
    assert any(list(line.get_ydata()) == [2e-5, 4e-5, 8e-5] for line in lines)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: plots.logit_distribution_figure(QUANTILES[..., :4], EXTREMES, n=512), "quantiles"),
        (lambda: plots.logit_distribution_figure(QUANTILES, EXTREMES, n=0), r"\bn\b"),
        (lambda: plots.entry_bound_figure({}, R_OBS), "B_heads"),
        (lambda: plots.entry_bound_figure(B_HEADS, {128: R_OBS[128]}), "R_observed"),
        (lambda: plots.entry_bound_figure({1.5: B_HEADS[128]}, R_OBS), "B_heads key"),
        (lambda: plots.int8_rounding_figure(CLIPS, {1.0: [1e-4]}), "errors"),
        (lambda: plots.int8_rounding_figure(CLIPS, {1.0: [1, 1], 0.99: [0, 1]}), "errors"),
        (
            lambda: plots.threshold_sweep_figure(
                [1, 2], [1], [1e-3, 1e-2], n=256, degree=4, eps=1e-3, B_range=(3, 6)
            ),
            "B_grid, ranks and errors",
        ),
        (
            lambda: plots.threshold_sweep_figure(
                [1, 2], [1, 2], [1e-3, 1e-2], n=256, degree=4, eps=1e-3, B_range=(3,)
            ),
            "B_range",
        ),
        (lambda: plots.polynomial_accuracy_figure(ACC_R, ACC_F, {1e-2: [1.0]}), "gradient"),
        (lambda: plots.polynomial_accuracy_figure(ACC_R, ACC_F, "x"), "gradient"),
        (lambda: plots.depth_error_figure({"a": [1, 2, 3]}), "errors"),
        (lambda: plots.depth_error_figure({("a", 1e-2): ["x", 1, 2]}), "errors"),
        (lambda: plots.depth_error_figure(DEPTH, extra={("c", "bound"): [1, 2, 3]}), "extra"),
        (lambda: plots.depth_error_figure(DEPTH, extra={("a", 1e-2): [1, 2, 3]}), "extra"),
        (lambda: plots.depth_error_figure(DEPTH, extra={("a", "bound"): [1, 0, 3]}), "extra"),
        (lambda: plots.depth_error_figure(DEPTH, bounds={("c", 1e-2): [1, 2, 3]}), "bounds"),
        (lambda: plots.depth_error_figure(DEPTH, bounds={("a", 1e-2): [1, 2]}), "bounds"),
    ],
)
def test_builders_refuse_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call()
