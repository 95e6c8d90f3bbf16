"""Figures of Chapter 1, attention and its gradient: what the exact gradient costs."""

from __future__ import annotations

import matplotlib.pyplot as plt

from .._checks import as_series, check_int, check_real
from .style import add_takeaway, label_ticks

__all__ = ["exact_cost_figure"]


def exact_cost_figure(sizes, seconds, mem_sizes, peak_bytes, *, d, time_slope, mem_slope):
    """Chapter 1: the time and the peak memory of the exact forward + backward pass against
    the sequence length n, side by side on log-log axes.

    Left, ``seconds`` at each n of ``sizes`` (one thread's CPU time) with the fitted
    ``time_slope`` in the legend and a line ∝ n² through the last point; right,
    ``peak_bytes`` at each n of ``mem_sizes`` (in MiB) with ``mem_slope``, next to the size
    of one n×n float64 matrix. ``d`` is the head dimension, for the title. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless sizes and seconds (and mem_sizes and
    peak_bytes) are equal-length positive sequences of at least two points, ``d`` is a
    positive integer and the slopes are finite numbers.
    """
    sizes = as_series("sizes", sizes, min_size=2, positive=True)
    seconds = as_series("seconds", seconds, size=sizes.size, like="sizes", positive=True)
    mem_sizes = as_series("mem_sizes", mem_sizes, min_size=2, positive=True)
    peak = as_series("peak_bytes", peak_bytes, size=mem_sizes.size, like="mem_sizes", positive=True)
    d = check_int("d", d)
    time_slope = check_real("time_slope", time_slope)
    mem_slope = check_real("mem_slope", mem_slope)
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax_t.loglog(sizes, seconds, "o-", label=f"exact forward+backward (slope {time_slope:.2f})")
    ax_t.loglog(sizes, seconds[-1] * (sizes / sizes[-1]) ** 2, "k--", lw=1, label="∝ n²")
    ax_t.set(xlabel="sequence length n", ylabel="CPU time, one thread (s)", title=f"time, d = {d}")
    ax_t.legend()
    label = f"peak memory (slope {mem_slope:.2f})"
    ax_m.loglog(mem_sizes, peak / 2**20, "o-", color="C1", label=label)
    ax_m.loglog(mem_sizes, 8 * mem_sizes**2 / 2**20, "k:", lw=1, label="one n×n float64 matrix")
    ax_m.set(xlabel="sequence length n", ylabel="peak memory (MiB)", title="memory (tracemalloc)")
    ax_m.legend()
    label_ticks(ax_t, sizes.tolist())
    label_ticks(ax_m, mem_sizes.tolist())
    add_takeaway(fig, "Doubling n quadruples both the time and the memory of the exact gradient.")
    return fig
