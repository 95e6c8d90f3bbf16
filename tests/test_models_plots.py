"""The evidence chapter's figures: each builder draws its data and refuses bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnlib import AttnInputError, plots  # noqa: E402
from attnlib.advice import METHODS, advise, decision_map  # noqa: E402

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
NS, BS = [64, 2**20], [0.05, 2.0]


def _map():
    return {32: decision_map(NS, BS, d=32, eps=1e-3, M=2**16)}


VALID = {
    "logit_distribution": lambda: plots.logit_distribution_figure(QUANTILES, EXTREMES, n=512),
    "entry_bound": lambda: plots.entry_bound_figure(B_HEADS, R_OBS),
    "int8_rounding": lambda: plots.int8_rounding_figure(CLIPS, CLIP_ERR),
    "threshold_sweep": lambda: plots.threshold_sweep_figure(
        [0.5, 1, 2], [33, 561, np.nan], [1e-6, 1e-3, 0.5], n=256, degree=4, eps=1e-3, B_range=(3, 6)
    ),
    "polynomial_accuracy": lambda: plots.polynomial_accuracy_figure(ACC_R, ACC_F, ACC_G),
    "depth_error": lambda: plots.depth_error_figure(DEPTH),
    "decision_map": lambda: plots.decision_map_figure(
        NS, BS, _map(), methods=METHODS, eps=1e-3, M=2**16, title="t", band=(1.0, 3.0)
    ),
    "method_costs": lambda: plots.method_costs_figure(advise(2**14, 64, 0.3, 1e-3, 2**16)),
    "method_costs_at": lambda: plots.method_costs_at(14, 64, 0.3, "H100 SM, bf16", 3),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_every_builder_draws_labelled_axes_and_a_takeaway(name):
    fig = VALID[name]()
    assert isinstance(fig, plt.Figure)
    for ax in fig.axes:
        assert ax.get_ylabel() or ax is not fig.axes[0]
        assert ax.get_xlabel() or ax.get_xticklabels()
    assert any(t.get_text() and t.get_style() == "italic" for t in fig.texts)  # the takeaway
    plt.close(fig)


def test_depth_figure_names_each_curves_growth():
    fig = plots.depth_error_figure(DEPTH)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert any("geometric" in label for label in labels) and len(fig.axes) == 2
    plt.close(fig)


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
        (
            lambda: plots.decision_map_figure(NS, BS[:1], _map(), methods=METHODS, eps=1e-3, M=8),
            r"maps\[32\]",
        ),
        (
            lambda: plots.decision_map_figure(NS, [-1.0, 2.0], _map(), methods=METHODS, eps=1, M=8),
            "Bs",
        ),
        (lambda: plots.method_costs_figure("flash"), "advice"),
        (
            lambda: plots.method_costs_figure(advise(64, 8, 1.0, 1e-3, 1024), machine=3),
            "machine",
        ),
    ],
)
def test_builders_refuse_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call()
    plt.close("all")


def test_method_costs_at_keeps_each_method_inside_the_axes_over_chapter_9s_range():
    """Chapter 9's live figure, on a grid wider than its own (n = 2^8 ... 2^22, B = 0.05 ...
    3, both machines): each method keeps its tick, a feasible method has its bar (the
    polynomial one included), and an infeasible one is labelled inside the axes."""
    from attnlib.machines import BOOK_MACHINES

    seen_infeasible = set()
    for machine in BOOK_MACHINES:
        for log2_n in range(8, 23, 2):
            for B in (0.05, 0.1, 0.3, 1.0, 3.0):
                fig = plots.method_costs_at(log2_n, 64, B, machine, 3)
                ax = fig.axes[0]
                a = advise(2**log2_n, 64, B, 1e-3, **BOOK_MACHINES[machine])
                assert [t.get_text() for t in ax.get_xticklabels()] == list(METHODS)
                bars = {round(p.get_x() + p.get_width() / 2) for p in ax.patches}
                feasible = {i for i, c in enumerate(a.costs) if c.feasible}
                assert bars == feasible, (machine, log2_n, B)
                fig.canvas.draw()
                box = ax.get_window_extent()
                labels = [t for t in ax.texts if t.get_text() == "infeasible"]
                assert len(labels) == len(METHODS) - len(feasible)
                for t in labels:
                    r = t.get_window_extent()
                    assert box.x0 <= r.x0 and r.x1 <= box.x1 and box.y0 <= r.y0 and r.y1 <= box.y1
                seen_infeasible |= set(range(len(METHODS))) - feasible
                plt.close(fig)
    assert seen_infeasible  # the grid reaches lengths where some method does not fit
