"""The figures of Part I (attnlib.plots.iomodel): each builder draws labelled axes and a
legend from the numbers the library computes, and refuses bad input with AttnInputError."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnlib import AttnInputError, plots
from attnlib import iomodel as io


def _labelled(fig):
    """Every panel with data says what its axes are: an x label (or an x axis shared with a
    labelled panel) and a y label (unless its y axis has no ticks, as in a graph drawing)."""
    axes = [ax for ax in fig.axes if ax.has_data()]
    assert axes
    for ax in axes:
        shared = ax.get_shared_x_axes().get_siblings(ax)
        assert any(other.get_xlabel() for other in shared), ax
        assert ax.get_ylabel() or not len(ax.get_yticks()), ax
    assert any(ax.get_legend() for ax in fig.axes) or fig.legends
    return fig


def _schedule_log():
    return io.tiled_matmul(np.ones((4, 4)), np.ones((4, 4)), M=12, record=True)[2].log


def _ratios():
    Ms = np.array([6, 64, 4096])
    r = io.bound_ratios(io.smallcache_backward_count, io.backward_order, 64, 8, Ms)
    f = io.bound_ratios(io.flash_backward_count, io.backward_order, 64, 8, Ms)
    return Ms, {"backward": {"small-cache": r, "FlashAttention": f}}


BUILDERS = {
    "schedule_figure": lambda: plots.schedule_figure(_schedule_log(), 12),
    "matmul_io_figure": lambda: plots.matmul_io_figure(16, 16, 16, M=48, tile=4),
    "matmul_io_at": lambda: plots.matmul_io_at(6, 4),
    "recompute_crossover_figure": lambda: plots.recompute_crossover_figure(
        [10, 100], [5.0, 4.0], [9.0, 1.0], 50, n=64, d=8
    ),
    "growth_in_n_figure": lambda: plots.growth_in_n_figure(
        [64, 128, 256], [4e3, 16e3, 64e3], [1e3, 4e3, 16e3], d=8, M=2**10
    ),
    "backward_bound_figure": lambda: plots.backward_bound_figure(
        [64, 128], [30.0, 15.0], [1.0, 0.5], n=64, d=8
    ),
    "gpu_memory_figure": lambda: plots.gpu_memory_figure(
        {("A100", "bfloat16", 1): [4.0, 1.0], ("A100", "bfloat16", 2): [2.0, 0.5]}, [64, 128]
    ),
    "words_by_array_figure": lambda: plots.words_by_array_figure(
        *io.words_by_array(_schedule_log()), ["A", "B", "C"], title="tiled"
    ),
    "smallcache_crossover_figure": lambda: plots.smallcache_crossover_figure(256, 8),
    "smallcache_crossover_at": lambda: plots.smallcache_crossover_at(3, 8),
    "smallcache_crossover_grid": lambda: plots.smallcache_crossover_grid(
        [(8, 256), (8, 512), (16, 256), (16, 512)]
    ),
    "smallcache_advantage_figure": lambda: plots.smallcache_advantage_figure(
        {16: io.smallcache_advantage(256, 16, io.cache_sizes(116, 200, points=5))}, n=256
    ),
    "bound_ratio_figure": lambda: plots.bound_ratio_figure(*_ratios(), n=64, d=8),
    "sparse_sweep_figure": lambda: plots.sparse_sweep_figure(
        {400: io.block_sparse_sweep(96, 8, 400, [0.2, 1.0])}, n=96, d=8
    ),
    "partition_figure": lambda: plots.partition_figure(
        io.inner_product_graph(2),
        io.schedule_segments(
            io.inner_product_graph(2), io.optimal_io(io.inner_product_graph(2), 3).moves, 3
        ),
        3,
    ),
}


def test_every_builder_of_the_module_is_exercised():
    assert set(BUILDERS) == set(plots.iomodel.__all__)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_draws_labelled_axes_and_a_legend(name):
    fig = BUILDERS[name]()
    assert isinstance(fig, plt.Figure)
    _labelled(fig)


BAD = [
    ("schedule_figure", lambda: plots.schedule_figure([], 12), "log"),
    ("schedule_figure", lambda: plots.schedule_figure(_schedule_log(), 0), "M"),
    ("matmul_io_figure", lambda: plots.matmul_io_figure(4, 4, 4, M=2), "M"),
    ("matmul_io_figure", lambda: plots.matmul_io_figure(4, 0, 4, M=12), "k"),
    ("matmul_io_at", lambda: plots.matmul_io_at(1, 2), "M"),
    ("matmul_io_at", lambda: plots.matmul_io_at(6, 0), "tile"),
    ("smallcache_crossover_at", lambda: plots.smallcache_crossover_at(0, 8), "log2_d"),
    (
        "recompute_crossover_figure",
        lambda: plots.recompute_crossover_figure([1, 2], [1.0], [1.0, 2.0], 1, n=4, d=2),
        "standard",
    ),
    (
        "growth_in_n_figure",
        lambda: plots.growth_in_n_figure([1, 2], [1.0, -1.0], [1.0, 2.0], d=2, M=4),
        "standard",
    ),
    (
        "backward_bound_figure",
        lambda: plots.backward_bound_figure([1, 2], [1.0, np.nan], [1.0, 2.0], n=4, d=2),
        "count",
    ),
    (
        "gpu_memory_figure",
        lambda: plots.gpu_memory_figure({("A100", "bfloat16", 2): [1.0]}, [64]),
        "blocks_per_sm",
    ),
    (
        "words_by_array_figure",
        lambda: plots.words_by_array_figure({"A": -1}, {}, ["A"], title=""),
        "reads",
    ),
    ("smallcache_crossover_figure", lambda: plots.smallcache_crossover_figure(64, 1), "d"),
    ("smallcache_crossover_grid", lambda: plots.smallcache_crossover_grid([(8, 64)]), "cases"),
    (
        "smallcache_advantage_figure",
        lambda: plots.smallcache_advantage_figure({}, n=64),
        "advantages",
    ),
    (
        "bound_ratio_figure",
        lambda: plots.bound_ratio_figure([1, 2], {"f": {"a": [1.0]}}, n=4, d=2),
        "ratios",
    ),
    ("sparse_sweep_figure", lambda: plots.sparse_sweep_figure({}, n=4, d=2), "sweeps"),
    (
        "partition_figure",
        lambda: plots.partition_figure(io.inner_product_graph(2), [], 3),
        "segments",
    ),
    ("partition_figure", lambda: plots.partition_figure(None, [{}], 3), "G"),
]


@pytest.mark.parametrize("name, call, argument", BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_builder_refuses_bad_input(name, call, argument):
    with pytest.raises(AttnInputError, match=rf"(?<![\w]){argument}"):
        call()


def test_every_builder_has_a_bad_input_case():
    assert {name for name, _, _ in BAD} == set(plots.iomodel.__all__)


def test_live_figure_builders_of_chapters_2_and_4_draw_their_point():
    fig = plots.matmul_io_at(10, 12)
    assert fig.axes[1].get_title() == "at M = 1024: largest fitting b = 18"
    assert any(line.get_label() == "b = 12" for line in fig.axes[1].lines)
    fig = plots.smallcache_crossover_at(7, 13)
    assert fig.axes[0].get_title() == "backward pass, n = 8192, d = 128"
    assert fig.crossover_M == plots.smallcache_crossover_figure(8192, 128).crossover_M
