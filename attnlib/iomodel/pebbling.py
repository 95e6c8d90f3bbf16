"""Explicit pebble-game schedules of our own, to hold against the exact optimum.

They use the move language of :func:`~attnlib.iomodel.optimal_io` (``("read", v)``,
``("write", v)``, ``("compute", v)``, ``("delete", v)``), so that ours and the optimum replay
on the same machine (:func:`~attnlib.iomodel.replay_schedule`) and compare word for word:
square tiling of a product (:func:`tiled_matmul_moves`), the builders' loop order with
Belady's eviction (:func:`loop_order_moves`), and the choice between them
(:func:`explicit_schedule`).
"""

from __future__ import annotations

from typing import NamedTuple

from .._checks import AttnInputError, check_int
from .graphs import (
    ComputationGraph,
    check_graph,
    inner_product_graph,
    least_feasible_M,
    matmul_graph,
)
from .matmul import matmul_tile_size
from .tiling import block_ranges

__all__ = [
    "tiled_matmul_moves",
    "three_pebble_chain_moves",
    "loop_order_moves",
    "ExplicitSchedule",
    "explicit_schedule",
]


def tiled_matmul_moves(m: int, k: int, p: int, tile: int):
    """The square-tiled schedule of C = AB as pebble-game moves on ``matmul_graph(m, k, p,
    tree="chain")``.

    For each tile C[I, J] and each range L (all of at most ``tile`` indices, in the order
    of :func:`~attnlib.iomodel.matmul.tiled_matmul`): read A[I, L] and B[L, J], compute
    every product of the tile and add it to its chain partial sum, delete the tile of A and
    of B; after the last L write C[I, J]. Reads T_p·mk + T_m·kp and writes mp, exactly the
    count of ``tiled_matmul_count(m, k, p, M, tile=tile)``; the peak is
    b_m·b_p + b_m·b_k + b_k·b_p + 2 red pebbles (+0 if k = 1, where a product is its output).

    Returns
    -------
    (G, moves): the graph and the move list.

    Raises AttnInputError on sizes < 1.
    """
    m, k, p, b = check_int("m", m), check_int("k", k), check_int("p", p), check_int("tile", tile)
    G = matmul_graph(m, k, p, tree="chain")
    idx = G.index
    moves: list[tuple[str, int]] = []
    for I in block_ranges(m, b):
        for J in block_ranges(p, b):
            partial: dict[tuple[int, int], int] = {}
            for L in block_ranges(k, b):
                tiles = [idx(f"A({i},{l})") for i in range(*I) for l in range(*L)]
                tiles += [idx(f"B({l},{j})") for l in range(*L) for j in range(*J)]
                moves += [("read", v) for v in tiles]
                for i in range(*I):
                    for j in range(*J):
                        for l in range(*L):
                            if k == 1:
                                moves.append(("compute", idx(f"C({i},{j})")))
                                partial[i, j] = idx(f"C({i},{j})")
                                continue
                            prod = idx(f"p({i},{l},{j})")
                            moves.append(("compute", prod))
                            if l == 0:
                                partial[i, j] = prod
                                continue
                            name = f"C({i},{j})" if l == k - 1 else f"C({i},{j})[0:{l + 1}]"
                            new = idx(name)
                            moves += [("compute", new), ("delete", partial[i, j])]
                            moves.append(("delete", prod))
                            partial[i, j] = new
                moves += [("delete", v) for v in tiles]
            for i in range(*I):
                for j in range(*J):
                    moves += [("write", partial[i, j]), ("delete", partial[i, j])]
    return G, moves


def three_pebble_chain_moves(k: int):
    """The schedule of ⟨a, b⟩ summed as a chain with 3 red pebbles that spills every partial
    sum, as moves on ``inner_product_graph(k)``: read a_0, b_0, compute p_0, write it; then for
    l = 1, …, k − 1 read a_l, b_l, compute p_l, delete the inputs, read the partial sum back,
    add, and write the new partial sum (the last one is the output s). Reads 2k + (k − 1),
    writes k: 4k − 1 I/Os, the optimum of the proposition of Chapter 5 that Q = 4k − 1 at
    M = 3; the peak is 3 red pebbles.

    Returns (G, moves). Raises AttnInputError for k < 1.

    Examples
    --------
    >>> from attnlib.iomodel import replay_schedule
    >>> G, moves = three_pebble_chain_moves(5)
    >>> replay_schedule(G, moves, 3)[0]
    IOCount(reads=14, writes=5, total=19, peak_fast=3)
    """
    G = inner_product_graph(check_int("k", k))
    idx = G.index
    moves = [("read", idx("a0")), ("read", idx("b0"))]
    first = idx("s" if k == 1 else "p0")
    moves += [("compute", first), ("delete", idx("a0")), ("delete", idx("b0"))]
    moves += [("write", first), ("delete", first)]
    partial = first
    for l in range(1, k):
        a, b, p = idx(f"a{l}"), idx(f"b{l}"), idx(f"p{l}")
        new = idx("s" if l == k - 1 else f"s[0:{l + 1}]")
        moves += [("read", a), ("read", b), ("compute", p), ("delete", a), ("delete", b)]
        moves += [("read", partial), ("compute", new), ("delete", partial), ("delete", p)]
        moves += [("write", new), ("delete", new)]
        partial = new
    return G, moves


def loop_order_moves(G: ComputationGraph, M: int) -> list[tuple[str, int]]:
    """A schedule of G with M red pebbles: compute the needed vertices in vertex order
    (the builders' loop order), reading each missing predecessor, evicting by Belady's rule
    (the red vertex whose next use is furthest away), writing an evicted vertex only if it
    is used later and has no blue pebble, and writing each output once it is computed.

    Raises AttnInputError if G is not a graph or M < least_feasible_M(G).
    """
    G = check_graph(G)
    M = check_int("M", M, minimum=least_feasible_M(G))
    needed = set(G.outputs)
    for v in range(G.n - 1, -1, -1):
        if v in needed:
            needed.update(G.preds[v])
    order = [v for v in range(G.n) if v in needed and G.ops[v] != "input"]
    uses: dict[int, list[int]] = {v: [] for v in range(G.n)}
    for t, v in enumerate(order):
        for u in G.preds[v]:
            uses[u].append(t)
    blue = set(G.inputs)
    red: set[int] = set()
    outputs = set(G.outputs)
    moves: list[tuple[str, int]] = []

    def next_use(u: int, t: int) -> float:
        later = [s for s in uses[u] if s >= t]
        return later[0] if later else float("inf")

    def make_room(t: int, keep: set[int]) -> None:
        if len(red) < M:
            return
        victim = max(sorted(red - keep), key=lambda u: next_use(u, t))
        if next_use(victim, t) != float("inf") and victim not in blue:
            moves.append(("write", victim))
            blue.add(victim)
        moves.append(("delete", victim))
        red.discard(victim)

    for t, v in enumerate(order):
        keep = set(G.preds[v])
        for u in G.preds[v]:
            if u not in red:
                if u not in blue:  # cannot happen: every evicted value still used is written
                    raise AttnInputError(f"loop_order_moves lost vertex {G.names[u]!r}")
                make_room(t, keep)
                moves.append(("read", u))
                red.add(u)
        make_room(t, keep)
        moves.append(("compute", v))
        red.add(v)
        if v in outputs:
            moves.append(("write", v))
            blue.add(v)
        for u in sorted(red):  # drop what no later step uses
            if next_use(u, t + 1) == float("inf") and (u not in outputs or u in blue):
                moves.append(("delete", u))
                red.discard(u)
    return moves


class ExplicitSchedule(NamedTuple):
    """One of our schedules of a graph: its ``name`` (``"tiled b=…"`` or ``"loop order"``),
    its ``moves`` and, for the tiled one, the ``tile`` side b (None otherwise)."""

    name: str
    moves: list
    tile: int | None


def explicit_schedule(G: ComputationGraph, M: int, *, matmul_shape=None) -> ExplicitSchedule:
    """Our schedule of G with M red pebbles: square tiling (:func:`tiled_matmul_moves`, with
    the machine's tile for M − 2 words, :func:`~attnlib.iomodel.matmul_tile_size`) when G is
    the chain-summed product ``matmul_graph(*matmul_shape)`` and M − 2 >= 3, otherwise the
    loop-order schedule (:func:`loop_order_moves`).

    ``matmul_shape`` is (m, k, p) when G is a product (summed as a chain or a balanced tree).

    Raises AttnInputError if G is not a graph, M is below the least feasible value, or G is
    not the product of the shape given.

    Examples
    --------
    >>> schedule = explicit_schedule(matmul_graph(2, 2, 2), 14, matmul_shape=(2, 2, 2))
    >>> schedule.name, schedule.tile, len(schedule.moves)
    ('tiled b=2', 2, 44)
    """
    G = check_graph(G)
    M = check_int("M", M, minimum=least_feasible_M(G))
    if matmul_shape is not None:
        if not isinstance(matmul_shape, tuple | list) or len(matmul_shape) != 3:
            raise AttnInputError(f"matmul_shape must be (m, k, p), got {matmul_shape!r}")
        shape = tuple(check_int(f"matmul_shape[{k}]", x) for k, x in enumerate(matmul_shape))
        chain = matmul_graph(*shape, tree="chain")
        if G != chain and G != matmul_graph(*shape, tree="balanced"):
            raise AttnInputError(f"G must be matmul_graph{shape} when matmul_shape = {shape}")
        if G == chain and M - 2 >= 3:
            b = matmul_tile_size(M - 2)
            return ExplicitSchedule(f"tiled b={b}", tiled_matmul_moves(*shape, b)[1], b)
    return ExplicitSchedule("loop order", loop_order_moves(G, M), None)
