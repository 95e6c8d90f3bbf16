"""The graph FlashAttention computes and its forward schedule as moves
(attnlib.iomodel.attention_graphs).

Checked here: the deferred-normalisation graph's values are attention's output and its vertex
count is the docstring's formula; it holds one QKᵀ sum tree per score, each vertex of which
has one successor; FlashAttention's moves replay on the machine within M, with the reads of
flash_forward_count and its writes less the log-sum-exp, on a grid of sizes, trees and M from
the least FlashAttention accepts; the moves are never below the exact optimum; bad inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib.iomodel import (
    attention_deferred_graph,
    flash_forward_blocks,
    flash_forward_count,
    flash_forward_min_M,
    flash_forward_moves,
    optimal_io,
    replay_schedule,
    trivial_io_bound,
)
from attnlib.iomodel.graphs import check_schedule, evaluate_graph

SIZES = [(1, 2, 1), (2, 2, 2), (3, 5, 2), (4, 3, 3), (5, 7, 4), (7, 2, 1)]


@pytest.mark.parametrize("n,m,d", SIZES)
@pytest.mark.parametrize("tree", ["chain", "balanced"])
def test_the_graph_computes_attention(n, m, d, tree, rng):
    G = attention_deferred_graph(n, m, d, tree=tree)
    assert G.n == 4 * n * m * d + 2 * m * d + n * d + n * (m - 1)
    Q, K, V = (0.5 * rng.standard_normal((r, d)) for r in (n, m, m))
    values = evaluate_graph(G, np.concatenate([Q.ravel(), K.ravel(), V.ravel()]))
    O = values[list(G.outputs)].reshape(n, d)
    np.testing.assert_allclose(O, al.attention(Q, K, V, scale=1.0), rtol=1e-12, atol=1e-12)
    # one sum tree of d products per score, every inner vertex with a single successor
    for i in range(n):
        for j in range(m):
            root = G.index(f"S({i},{j})")
            stack, leaves = [root], 0
            while stack:
                v = stack.pop()
                if v != root:
                    assert len(G.succs[v]) == 1 and v not in G.outputs
                if G.names[v].startswith("qk("):
                    leaves += 1
                elif G.ops[v] == "add":
                    stack += G.preds[v]
            assert leaves == (d if d > 1 else 0) and G.succs[root] == (G.index(f"E({i},{j})"),)


@pytest.mark.parametrize("n,m,d", SIZES)
@pytest.mark.parametrize("tree", ["chain", "balanced"])
def test_flash_moves_replay_with_flash_forward_count(n, m, d, tree):
    lo = flash_forward_min_M(d)
    for M in sorted({lo, lo + 1, lo + 5, 3 * lo, 10 * lo, 40 * lo}):
        G, moves, blocks = flash_forward_moves(n, m, d, M, tree=tree)
        assert blocks == flash_forward_blocks(d, M)
        count, out = replay_schedule(G, moves, M)
        check_schedule(G, moves, M)
        machine = flash_forward_count(n, d, M, m=m)
        assert count.reads == machine.reads and count.writes == machine.writes - n
        assert count.reads == n * d + -(-n // blocks[0]) * 2 * m * d and count.writes == n * d
        assert count.peak_fast <= M
        values = evaluate_graph(G, np.random.default_rng(0).standard_normal(len(G.inputs)))
        np.testing.assert_allclose(out, values[list(G.outputs)], rtol=1e-12)
        # one row block: every input read once, every output written once
        assert (count.total == trivial_io_bound(G)) == (blocks[0] >= n)


def test_flash_is_never_below_the_optimum():
    for n, m, d, M in [(1, 2, 2, 11), (2, 2, 2, 11), (2, 2, 2, 24)]:
        G, moves, _ = flash_forward_moves(n, m, d, M)
        best = optimal_io(G, M)
        assert trivial_io_bound(G) <= best.io <= replay_schedule(G, moves, M)[0].total


BAD = [
    (lambda: attention_deferred_graph(0, 2, 1), "n must be"),
    (lambda: attention_deferred_graph(1, 1, 1), "m must be an integer >= 2"),
    (lambda: attention_deferred_graph(1, 2, 1.5), "d must be"),
    (lambda: attention_deferred_graph(1, 2, 1, tree="star"), "tree"),
    (lambda: flash_forward_moves(1, 2, 2, 10), "M"),
    (lambda: flash_forward_moves(1, 2, 2, "11"), "M must be"),
    (lambda: flash_forward_moves(1, 2, 2, 11, tree=None), "tree"),
]


@pytest.mark.parametrize("call,message", BAD)
def test_bad_inputs(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()
