"""The figures of Chapter 11 (attnlib.plots.devices): the schedules drawn cell by cell, the
words per device taken from the closed forms (never re-derived), and the causal work per
device of each layout."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from attnlib.iomodel import comm_bounds, grid, ring, shards, ulysses
from attnlib.plots import devices as dv


def _cell_texts(ax) -> dict:
    """{(row, col): text} of the numbers a block matrix writes in its cells."""
    return {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts
    }


def _cell_colors(ax) -> np.ndarray:
    return np.asarray(ax.get_images()[0].get_array())


@pytest.mark.parametrize(
    "P, H, shape", [(4, 4, None), (4, 8, None), (8, 8, (2, 4)), (6, 6, (3, 2))]
)
def test_schedules_figure_draws_each_schedule_cell_by_cell(P, H, shape):
    fig = dv.schedules_figure(P, H=H, grid_shape=shape)
    ring_ax, uly_ax, grid_ax = fig.axes
    R, C = shape or (2, 2)
    texts = _cell_texts(ring_ax)
    # ring: row i holds query block i; key block j arrives in round (i - j) mod P, so every
    # round appears once in each row and each column (a slip in the sign would break it)
    assert texts == {(i, j): str((i - j) % P) for i in range(P) for j in range(P)}
    assert texts[(1, 0)] == "1" and texts[(0, 1)] == str(P - 1)
    colors = _cell_colors(ring_ax)
    for i in range(P):  # one colour per row: the device that holds query block i
        assert np.all(colors[i] == colors[i, 0]) and (i == 0 or np.any(colors[i] != colors[0]))
    # Ulysses: the number is where the block was (its row block), the colour where it goes
    texts = _cell_texts(uly_ax)
    assert texts == {(i, h): str(i) for i in range(P) for h in range(H)}
    colors = _cell_colors(uly_ax)
    hq = H // P
    for h in range(H):
        assert np.all(colors[:, h] == colors[0, hq * (h // hq)])
    # the grid: device r C + c evaluates query block row r = i // C against column c = j mod C,
    # so every device evaluates exactly P blocks (balanced), P / C = R of them in each row
    texts = _cell_texts(grid_ax)
    owners = np.array([[int(texts[(i, j)]) for j in range(P)] for i in range(P)])
    assert np.array_equal(np.bincount(owners.ravel(), minlength=P), np.full(P, P))
    assert all(owners[i, j] == (i // C) * C + j % C for i in range(P) for j in range(P))
    assert R * C == P
    plt.close(fig)


def test_words_per_device_are_the_closed_forms_and_above_the_bound():
    n, d, H, H_kv = 1024, 16, 8, 2
    Ps = [1, 2, 4, 8, 16, 32]
    for direction, k in (("forward", 0), ("backward", 1)):
        out = dv.words_per_device(n, d, H=H, H_kv=H_kv, direction=direction, Ps=Ps)
        assert set(out) == {"ring", "Ulysses", "2-D grid", "lower bound"}
        for idx, P in enumerate(Ps):
            kw = {"P": P, "H": H, "H_kv": H_kv}
            ring_count = (ring.ring_forward_count, ring.ring_backward_count)[k](n, d, **kw)
            assert out["ring"][idx] == ring_count.max_received
            bound = comm_bounds.device_comm_lower_bound(n, d, P=P, H=H, H_kv=H_kv)
            assert out["lower bound"][idx] == bound
            # Ulysses where P | H (H_kv = 2: P | H_kv or H_kv | P holds for every power of 2)
            if H % P == 0:
                count = (ulysses.ulysses_forward_count, ulysses.ulysses_backward_count)[k]
                assert out["Ulysses"][idx] == count(n, d, **kw).max_received
            else:
                assert np.isnan(out["Ulysses"][idx])
            # the default grid where P is a square (1, 4, 16), left out elsewhere
            if P in (1, 4, 16):
                count = (grid.grid_forward_count, grid.grid_backward_count)[k](n, d, **kw)
                assert out["2-D grid"][idx] == count.max_received
            else:
                assert np.isnan(out["2-D grid"][idx])
            # a certified bound is below every schedule it bounds
            for name in ("ring", "Ulysses", "2-D grid"):
                y = out[name][idx]
                assert np.isnan(y) or out["lower bound"][idx] <= y
        assert out["ring"][0] == 0  # one device receives nothing
    causal = dv.words_per_device(n, d, H=H, is_causal=True, Ps=[4])
    dense = dv.words_per_device(n, d, H=H, Ps=[4])
    assert causal["lower bound"][0] <= dense["lower bound"][0]


def test_words_per_device_figure_draws_the_defined_points_on_log_axes():
    fig = dv.words_per_device_figure(2**12, 64, H=4, direction="backward")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"ring", "Ulysses", "2-D grid", "lower bound"}
    # Ulysses only at P | H = 4 and P > 1 (P = 1 receives nothing: off a log axis)
    assert list(lines["Ulysses"].get_xdata()) == [2, 4]
    assert list(lines["2-D grid"].get_xdata()) == [4, 16, 64, 256, 1024]
    assert list(lines["ring"].get_xdata()) == [2**k for k in range(1, 11)]
    assert "backward" in ax.get_ylabel()
    assert fig.get_size_inches()[0] <= 6.4
    plt.close(fig)


@pytest.mark.parametrize("n, P", [(64, 4), (48, 3), (256, 8), (16, 8)])
def test_load_balance_figure_draws_causal_work_over_its_mean(n, P):
    fig = dv.load_balance_figure(n, P, H=2)
    ax = fig.axes[0]
    bars = ax.patches
    assert len(bars) == len(shards.LAYOUTS) * P
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for k, layout in enumerate(shards.LAYOUTS):
        work = np.asarray(shards.causal_work(n, P, layout, H=2), dtype=float)
        heights = np.array([b.get_height() for b in bars[k * P : (k + 1) * P]])
        assert np.allclose(heights, work / work.mean())
        assert f"{work.max() / work.mean():.3f}" in legend[k]
    zigzag = np.array([b.get_height() for b in bars[2 * P :]])
    assert np.allclose(zigzag, 1.0)  # zig-zag balances exactly
    contiguous = np.array([b.get_height() for b in bars[:P]])
    assert np.all(np.diff(contiguous) > 0)  # later rows keep more keys
    plt.close(fig)
