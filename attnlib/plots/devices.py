"""Figures of Chapter 11, attention across P devices: who evaluates which block of scores under
each schedule (ring, Ulysses, the 2-D grid), the words each device receives against P with the
certified lower bound, and the causal work per device of each row layout.

Every count comes from :mod:`attnlib.iomodel` (the schedules' closed forms
``ring/ulysses/grid_*_count``, :func:`attnlib.iomodel.shards.causal_work` and
:func:`attnlib.iomodel.comm_bounds.device_comm_lower_bound`); nothing here re-derives a formula.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .._checks import AttnInputError, as_entries, check_bool, check_choice, check_int
from ..iomodel import comm_bounds, grid, ring, shards, ulysses
from .style import add_takeaway, label_ticks

__all__ = [
    "schedules_figure",
    "words_per_device",
    "words_per_device_figure",
    "load_balance_figure",
]

#: The schedules, in the order the chapter introduces them: name -> (forward, backward) count.
_COUNTS = {
    "ring": (ring.ring_forward_count, ring.ring_backward_count),
    "Ulysses": (ulysses.ulysses_forward_count, ulysses.ulysses_backward_count),
    "2-D grid": (grid.grid_forward_count, grid.grid_backward_count),
}
_STYLE = {
    "ring": ("o", "-", "C0"),
    "Ulysses": ("s", "-", "C1"),
    "2-D grid": ("D", "-", "C2"),
    "lower bound": (None, "--", "black"),
}
#: Default device counts of the sweep: the powers of 2 from 1 to 1024.
_PS = tuple(2**k for k in range(11))


def _device_colors(P: int) -> tuple:
    """One colour per device: tab10's distinct colours up to 10 devices, tab20's up to 20."""
    return plt.get_cmap("tab10" if P <= 10 else "tab20").colors


def _block_matrix(ax, owner: np.ndarray, text: np.ndarray, P: int, *, xlabel: str, ylabel: str):
    """Draw an integer matrix of device numbers as coloured cells with ``text`` in each."""
    rows, cols = owner.shape
    colors = _device_colors(P)
    rgb = np.array([[colors[int(p)] for p in row] for row in owner])
    ax.imshow(rgb, aspect="equal")
    for i in range(rows):
        for j in range(cols):
            ax.text(j, i, text[i, j], ha="center", va="center", fontsize=8)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(length=0, labelsize=8)
    ax.grid(False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def schedules_figure(P: int = 4, *, H: int = 4, grid_shape=None):
    """Who evaluates which block of scores, and when, under each schedule (Chapter 11).

    Three panels, one per schedule, for ``P`` devices (each colour a device; contiguous rows:
    device p starts with row block p of Q, K, V in every head):

    * ring: the P × P matrix of (query block i, key block j); the cell's colour is the device
      that evaluates it (device i), its number the round in which K, V block j reaches it;
    * Ulysses: the P × H matrix of (row block i, query head h); before the all-to-all device i
      holds the whole row (its number in the cell), after it the device of the cell's colour,
      h // (H/P), holds the whole column;
    * 2-D grid: the P × P matrix of (query block i, key block j) on an R × C grid
      (``grid_shape``, default √P × √P); the cell's colour and number are the device
      r C + c that evaluates it, r = i // C, c = j mod C.

    ``P`` from 1 to 16 (the cells must stay legible), ``H`` a multiple of ``P`` up to 32.
    Raises AttnInputError otherwise, or when ``grid_shape`` is not two positive ints whose
    product is P (or P is not a square and ``grid_shape`` is None). Returns the Figure.
    """
    P = check_int("P", P, maximum=16)
    H = check_int("H", H, maximum=32)
    if H % P:
        raise AttnInputError(f"H must be a multiple of P = {P} (Ulysses splits the heads), got {H}")
    if grid_shape is None:
        side = int(round(P**0.5))
        if side * side != P:
            raise AttnInputError(f"P = {P} is not a square: give grid_shape=(R, C) with R C = P")
        grid_shape = (side, side)
    R, C = as_entries("grid_shape", grid_shape, of="ints (R, C)", length=2)
    R, C = check_int("grid_shape[0]", R), check_int("grid_shape[1]", C)
    if R * C != P:
        raise AttnInputError(f"grid_shape must multiply to P = {P}, got {R} x {C}")
    i, j = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.6))
    # ring: device i holds query block i; K, V block j arrives at step (i - j) mod P
    rounds = (i - j) % P
    _block_matrix(
        axes[0],
        i,
        rounds.astype(str),
        P,
        xlabel="key block j (K, V)",
        ylabel="query block i",
    )
    axes[0].set_title("ring: the round", fontsize=10)
    # Ulysses: (row block i, head h) lives on device i, and is evaluated on device h // (H / P)
    hq = H // P
    rows, heads = np.meshgrid(np.arange(P), np.arange(H), indexing="ij")
    _block_matrix(
        axes[1],
        heads // hq,
        rows.astype(str),
        P,
        xlabel="query head h",
        ylabel="row block i",
    )
    axes[1].set_title("Ulysses: from, to", fontsize=10)
    # 2-D grid: device (r, c) evaluates Q block row r against K/V block column c
    owner = (i // C) * C + j % C
    _block_matrix(
        axes[2],
        owner,
        owner.astype(str),
        P,
        xlabel="key block j",
        ylabel="query block i",
    )
    axes[2].set_title(f"2-D grid {R} x {C}: the device", fontsize=10)
    add_takeaway(
        fig,
        "Colour: the device that evaluates the block. Ring: K, V move one step per round. "
        "Ulysses: number = the device that held the block before the all-to-all. "
        "Grid: each device evaluates a block of rows against a block of columns.",
    )
    return fig


def words_per_device(
    n: int,
    d: int,
    *,
    H: int = 1,
    H_kv=None,
    direction: str = "forward",
    is_causal: bool = False,
    Ps=_PS,
) -> dict[str, np.ndarray]:
    """The words each device receives against the number of devices (Chapter 11).

    ``{"ring", "Ulysses", "2-D grid", "lower bound"} -> array of shape (len(Ps),)``: the
    schedules' ``max_received`` from their closed forms (``*_forward_count`` or
    ``*_backward_count`` of :mod:`attnlib.iomodel`, contiguous rows, the grid at its default
    √P × √P), NaN where a schedule is not defined at that P (Ulysses needs P | H; the default
    grid a square P); and :func:`~attnlib.iomodel.comm_bounds.device_comm_lower_bound` for the
    busiest device. ``Ps`` are the device counts (default 1, 2, 4, …, 1024), each dividing n.

    Raises AttnInputError for a bad ``direction`` or ``Ps``; n, d, H, H_kv and is_causal are
    checked by the closed forms.
    """
    direction = check_choice("direction", direction, ("forward", "backward"))
    is_causal = check_bool("is_causal", is_causal)
    Ps = [check_int(f"Ps[{k}]", P) for k, P in enumerate(as_entries("Ps", Ps, min_len=1))]
    which = 0 if direction == "forward" else 1
    out = {name: np.full(len(Ps), np.nan) for name in (*_COUNTS, "lower bound")}
    for k, P in enumerate(Ps):
        for name, counts in _COUNTS.items():
            try:
                count = counts[which](n, d, P=P, H=H, H_kv=H_kv, is_causal=is_causal)
            except AttnInputError:
                # a schedule that is not defined at this P is left out; a bad n, d or H is
                # refused for every schedule, and the ring is defined whenever P | n
                if name == "ring":
                    raise
                continue
            out[name][k] = count.max_received
        out["lower bound"][k] = comm_bounds.device_comm_lower_bound(
            n, d, P=P, H=H, H_kv=H_kv, is_causal=is_causal
        )
    return out


def words_per_device_figure(
    n: int,
    d: int,
    *,
    H: int = 1,
    H_kv=None,
    direction: str = "forward",
    is_causal: bool = False,
    Ps=_PS,
    title: str | None = None,
    takeaway: str | None = None,
):
    """Words received per device against P on log axes, each schedule and the lower bound
    (Chapter 11): the curves of :func:`words_per_device` (where a schedule is defined, and
    where the count or bound is positive). Raises AttnInputError as it does. Returns the
    Figure."""
    curves = words_per_device(n, d, H=H, H_kv=H_kv, direction=direction, is_causal=is_causal, Ps=Ps)
    Ps = np.array([int(P) for P in Ps])
    fig, ax = plt.subplots(figsize=(4.6, 3.6))
    for name, y in curves.items():
        keep = np.isfinite(y) & (y > 0)
        if not keep.any():
            continue
        marker, ls, color = _STYLE[name]
        ax.loglog(Ps[keep], y[keep], marker=marker, ls=ls, color=color, label=name)
    ax.set_xscale("log", base=2)
    label_ticks(ax, [P for P in Ps if P in (1, 4, 16, 64, 256, 1024)] or list(Ps))
    ax.set_xlabel("devices P")
    ax.set_ylabel(f"words received per device ({direction})")
    mask = ", causal" if is_causal else ""
    heads = f"H = {H}" + ("" if H_kv in (None, H) else f", H_kv = {H_kv}")
    ax.set_title(title or f"n = {n}, d = {d}, {heads}{mask}", fontsize=10)
    ax.legend(fontsize=8)
    if takeaway:
        add_takeaway(fig, takeaway)
    return fig


def load_balance_figure(n: int, P: int, *, H: int = 1, title: str | None = None):
    """Causal work per device for each row layout, with its imbalance (Chapter 11).

    One group of bars per layout of :data:`attnlib.iomodel.shards.LAYOUTS` (contiguous,
    striped, zig-zag): the kept score entries device p evaluates under the ring schedule,
    :func:`attnlib.iomodel.shards.causal_work` ``(n, P, layout, H=H)``, as a multiple of the
    mean; the legend gives each layout's imbalance max / mean. ``P`` at most 64 (one bar per
    device). Raises AttnInputError for a bad ``P`` (and as ``causal_work`` does: zig-zag needs
    2P | n). Returns the Figure.
    """
    P = check_int("P", P, maximum=64)
    works = {layout: shards.causal_work(n, P, layout, H=H) for layout in shards.LAYOUTS}
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    width = 0.8 / len(works)
    for k, (layout, work) in enumerate(works.items()):
        work = np.asarray(work, dtype=float)
        mean = work.mean()
        ax.bar(
            np.arange(P) + (k - (len(works) - 1) / 2) * width,
            work / mean,
            width,
            color=f"C{k}",
            label=f"{layout}: max / mean = {work.max() / mean:.3f}",
        )
    ax.axhline(1, color="0.3", lw=1)
    ax.set_xlabel("device p")
    ax.set_ylabel("causal work / mean")
    if P <= 16:
        ax.set_xticks(range(P))
    ax.set_title(title or f"causal work per device, n = {n}, P = {P}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return fig
