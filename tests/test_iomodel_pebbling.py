"""Explicit schedules of the red-blue pebble game (attnlib.iomodel.pebbling): the tiled
matmul's moves replay to exactly the machine's count and values, the loop-order schedule is
legal and never below the optimum, and explicit_schedule picks between them."""

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel import CapacityError, tiled_matmul, tiled_matmul_count
from attnlib.iomodel.graphs import (
    attention_forward_graph,
    inner_product_graph,
    least_feasible_M,
    matmul_graph,
)
from attnlib.iomodel.optimal import optimal_io, replay_schedule
from attnlib.iomodel.pebbling import loop_order_moves, tiled_matmul_moves


def test_explicit_schedule_choices_replay():
    G = io.matmul_graph(2, 2, 2)
    tiled = io.explicit_schedule(G, 14, matmul_shape=(2, 2, 2))
    assert (tiled.name, tiled.tile) == ("tiled b=2", 2)
    count, _ = io.replay_schedule(G, tiled.moves, 14)
    assert (count.reads, count.writes) == (8, 4)
    balanced = io.matmul_graph(1, 4, 1, tree="balanced")  # k = 2 would be a chain too
    loop = io.explicit_schedule(balanced, 5, matmul_shape=(1, 4, 1))
    assert (loop.name, loop.tile) == ("loop order", None)
    assert loop.moves == io.loop_order_moves(balanced, 5)
    small = io.explicit_schedule(G, 4, matmul_shape=(2, 2, 2))  # M − 2 < 3: no tile fits
    assert small.name == "loop order"
    with pytest.raises(AttnInputError, match="matmul_shape"):
        io.explicit_schedule(G, 14, matmul_shape=(2, 3, 2))


@pytest.mark.parametrize("m,k,p", [(2, 2, 2), (1, 4, 1), (3, 2, 2), (2, 3, 1), (2, 1, 2)])
@pytest.mark.parametrize("tile", [1, 2, 3])
def test_tiled_moves_count_equals_tiled_matmul(m, k, p, tile, rng):
    G, moves = tiled_matmul_moves(m, k, p, tile)
    machine = tiled_matmul_count(m, k, p, 10**6, tile=tile)
    extra = 0 if k == 1 else 2  # the game has no in-place accumulate
    count, out = replay_schedule(G, moves, machine.peak_fast + extra)
    assert (count.reads, count.writes) == (machine.reads, machine.writes)
    assert count.peak_fast == machine.peak_fast + extra
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, p))
    C, c2 = tiled_matmul(A, B, M=machine.peak_fast, tile=tile)
    assert c2.total == count.total
    values = {**{f"A({i},{l})": A[i, l] for i in range(m) for l in range(k)}}
    values.update({f"B({l},{j})": B[l, j] for l in range(k) for j in range(p)})
    _, out = replay_schedule(G, moves, machine.peak_fast + extra, values)
    assert np.allclose(out.reshape(m, p), C, rtol=1e-12, atol=1e-12)
    with pytest.raises(CapacityError):
        replay_schedule(G, moves, machine.peak_fast + extra - 1)


@pytest.mark.parametrize(
    "G", [matmul_graph(2, 2, 2), attention_forward_graph(1, 2, 1), inner_product_graph(4)]
)
def test_loop_order_schedule_is_valid_and_not_below_optimum(G):
    for M in range(least_feasible_M(G), 8):
        count, _ = replay_schedule(G, loop_order_moves(G, M), M)
        assert count.peak_fast <= M
        if G.n <= 15 or M >= 5:
            assert count.total >= optimal_io(G, M).io
