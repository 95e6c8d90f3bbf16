"""The exact optimum of the red-blue pebble game (attnlib.iomodel.optimal) and the replay of a
schedule on the machine.

Checked here: the solver against a plain breadth-first search over every configuration
(tests/naive.py) on graphs of up to 8 vertices, for every M from the least feasible one
upward, with and without recomputation; every optimal schedule replayed on TwoLevelMemory
with exactly the optimum's count, within M, and with the right output values; known optima
in closed form; the exact search behind optimal_io; the refusals and every bad input. Our
own schedules as game moves are in test_iomodel_pebbling.py, a schedule's partition into
segments in test_iomodel_partition.py.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from naive import naive_pebble_optimum

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel import CapacityError
from attnlib.iomodel.attention_graphs import attention_deferred_graph
from attnlib.iomodel.graphs import (
    ComputationGraph,
    attention_forward_graph,
    evaluate_graph,
    inner_product_graph,
    least_feasible_M,
    matmul_graph,
    trivial_io_bound,
)
from attnlib.iomodel.optimal import MAX_VERTICES, optimal_io, replay_schedule


def random_dag(
    seed: int, n: int = 8, n_inputs: int = 3, *, sinks_out: bool = True
) -> ComputationGraph:
    """A seeded random DAG: each computed vertex has 1 to 3 earlier predecessors; every sink
    is an output, and so is any other computed vertex with probability 0.2. With
    ``sinks_out=False`` the outputs are a random non-empty set of computed vertices, so a
    sink (and all it alone needs) may be a vertex that no output depends on."""
    rnd = random.Random(seed)
    ops, preds = [], []
    for v in range(n):
        if v < n_inputs:
            ops.append("input")
            preds.append(())
            continue
        k = min(rnd.choice([1, 2, 2, 3]), v)
        preds.append(tuple(sorted(rnd.sample(range(v), k))))
        ops.append("exp" if k == 1 else "add")
    has_succ = {u for p in preds for u in p}
    outputs = [v for v in range(n_inputs, n) if v not in has_succ or rnd.random() < 0.2]
    if not sinks_out:
        outputs = sorted(rnd.sample(range(n_inputs, n), rnd.randint(1, 2)))
    return ComputationGraph(tuple(f"x{v}" for v in range(n)), tuple(ops), tuple(preds), outputs)


TREES = ("chain", "balanced")
SMALL = [random_dag(seed) for seed in (0, 3, 21, 37, 78, 94)] + [
    inner_product_graph(2),
    inner_product_graph(2, tree="balanced"),
    matmul_graph(2, 1, 2),
    attention_forward_graph(1, 2, 1),  # 15 vertices: the solver only, checked below
]


def _check(G, M, recompute):
    res = optimal_io(G, M, recompute=recompute)
    count, out = replay_schedule(G, res.moves, M)
    assert count.total == res.io == res.reads + res.writes
    assert count.reads == res.reads and count.writes == res.writes
    assert count.peak_fast <= M
    values = evaluate_graph(G, np.random.default_rng(0).standard_normal(len(G.inputs)))
    assert np.allclose(out, values[list(G.outputs)], rtol=1e-12, atol=1e-12)
    assert res.io >= trivial_io_bound(G)
    return res


@pytest.mark.parametrize("G", [g for g in SMALL if g.n <= 8], ids=lambda g: repr(g))
def test_optimum_equals_brute_force_for_every_M(G):
    for M in range(least_feasible_M(G), G.n + 1):
        for recompute in (True, False):
            res = _check(G, M, recompute)
            brute = naive_pebble_optimum(G.preds, set(G.inputs), G.outputs, M, recompute=recompute)
            assert res.io == brute, (M, recompute)


def test_least_feasible_M_counts_only_what_the_outputs_need():
    # t = a + b + c needs 4 pebbles, but only s = a + b is an output: 3 suffice (read a and
    # b, compute s, write it), so least_feasible_M is 3 and the solver plays at M = 3
    G = ComputationGraph(
        ("a", "b", "c", "s", "t"),
        ("input",) * 3 + ("add", "add"),
        ((), (), (), (0, 1), (0, 1, 2)),
        (3,),
    )
    assert least_feasible_M(G) == 3
    assert _check(G, 3, recompute=True).io == 3
    # graphs whose sinks are not all outputs: the least M the brute force can play, and the
    # optimum there, agree with least_feasible_M and the solver
    for seed in range(40):
        G = random_dag(seed, n=7, sinks_out=False)
        M = least_feasible_M(G)
        preds, inputs = G.preds, set(G.inputs)
        assert naive_pebble_optimum(preds, inputs, G.outputs, M - 1) is None, seed
        assert _check(G, M, True).io == naive_pebble_optimum(preds, inputs, G.outputs, M), seed


def test_recomputation_can_pay():
    # s = a + b is needed by t, u and y; with 4 pebbles, recomputing s beats spilling it
    G = ComputationGraph(
        ("a", "b", "s", "t", "u", "y", "z"),
        ("input", "input", "add", "add", "add", "add", "add"),
        ((), (), (0, 1), (0, 2), (1, 2), (0, 2, 3), (1, 4)),
        (5, 6),
    )
    with_rc, without = _check(G, 4, True), _check(G, 4, False)
    assert with_rc.io == 4 == trivial_io_bound(G) and without.io == 5
    assert sum(op == "compute" and v == 2 for op, v in with_rc.moves) >= 2
    assert naive_pebble_optimum(G.preds, {0, 1}, G.outputs, 4, recompute=False) == 5
    # with room for everything, recomputing buys nothing
    assert _check(G, 5, True).io == _check(G, 5, False).io == 4


@pytest.mark.parametrize("G", [g for g in SMALL if g.n <= 8], ids=lambda g: repr(g))
def test_single_moves_equal_brute_force_for_every_M(G):
    # the search without reduction 4 (reads one at a time) is exact on its own
    for M in range(least_feasible_M(G), G.n + 1):
        for recompute in (True, False):
            res = optimal_io(G, M, recompute=recompute, grouped_reads=False)
            assert replay_schedule(G, res.moves, M)[0].total == res.io
            brute = naive_pebble_optimum(G.preds, set(G.inputs), G.outputs, M, recompute=recompute)
            assert res.io == brute, (M, recompute)


GROUPED_CASES = (
    [(g, M) for g in SMALL for M in range(least_feasible_M(g), min(g.n, 9) + 1)]
    + [(inner_product_graph(k, tree=t), M) for k in (3, 4) for t in TREES for M in (3, 4, 5)]
    + [(matmul_graph(2, 2, 2), M) for M in (6, 7, 8)]
    + [(attention_deferred_graph(1, 2, 2), M) for M in (6, 8)]
)


def test_grouped_reads_keep_the_optimum_and_expand_less():
    """Reduction 4 against the search with single reads, on every graph both finish: the
    same optimum with and without recomputation, each schedule replayed; in total, and in
    most solves, fewer configurations expanded."""
    fewer, totals = 0, [0, 0]
    for G, M in GROUPED_CASES:
        for recompute in (True, False):
            grouped = _check(G, M, recompute)
            single = optimal_io(G, M, recompute=recompute, grouped_reads=False, max_states=10**6)
            assert replay_schedule(G, single.moves, M)[0].total == single.io
            assert grouped.io == single.io, (G, M, recompute)
            fewer += grouped.states < single.states
            totals[0] += grouped.states
            totals[1] += single.states
    assert fewer > len(GROUPED_CASES) and 10 * totals[0] < totals[1], (fewer, totals)


@pytest.mark.parametrize("k", range(1, 8))
def test_chain_inner_product_at_three_pebbles_costs_4k_minus_1(k):
    # prop-05-chain-three: Q(inner_product_graph(k), 3) = 4k - 1, with or without
    # recomputation; the schedule of its proof attains it
    G = inner_product_graph(k)
    assert _check(G, 3, True).io == _check(G, 3, False).io == 4 * k - 1
    H, moves = io.three_pebble_chain_moves(k)
    assert H == G and replay_schedule(G, moves, 3)[0].total == 4 * k - 1


def test_the_proofs_schedule_beyond_the_solver():
    # the upper half of prop-05-chain-three where the solver does not reach
    for k in range(8, 40):
        G, moves = io.three_pebble_chain_moves(k)
        count, _ = replay_schedule(G, moves, 3)
        assert count.total == 4 * k - 1 and count.peak_fast == 3
        assert count.total - trivial_io_bound(G) == 2 * (k - 1)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_inner_product_closed_forms(k):
    # chain sums: every input read once and the result written once from 4 pebbles on
    G = inner_product_graph(k)
    for M in (4, 5, 2 * k + 1):
        assert _check(G, M, True).io == 2 * k + 1
    # with 3 pebbles a chain must spill: strictly more
    assert _check(G, 3, True).io > 2 * k + 1


def test_tree_shape_changes_the_optimum():
    # a balanced tree over 4 products holds one half's sum while computing the other's
    chain, balanced = inner_product_graph(4), inner_product_graph(4, tree="balanced")
    assert _check(chain, 4, True).io == 9 < _check(balanced, 4, True).io == 11
    assert _check(balanced, 5, True).io == 9


def test_larger_graphs_replay_and_respect_bounds():
    G = matmul_graph(2, 2, 2)
    ios = [_check(G, M, True).io for M in (5, 6, 7, 8)]
    assert ios == sorted(ios, reverse=True) and ios[-1] == trivial_io_bound(G) == 12
    G = attention_forward_graph(1, 2, 1)
    for M in (3, 4, 6):
        assert _check(G, M, True).io == _check(G, M, False).io >= trivial_io_bound(G)


LIMITS = [
    (lambda: optimal_io(matmul_graph(2, 2, 2), 4, max_states=50), "max_states = 50"),
    (lambda: optimal_io(matmul_graph(2, 2, 2), 4, max_seconds=1e-6), "max_seconds"),
    (lambda: optimal_io(matmul_graph(4, 4, 4), 20), f"MAX_VERTICES = {MAX_VERTICES}"),
]


@pytest.mark.parametrize("call,message", LIMITS)
def test_refusals_name_the_limit(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()


def test_the_default_budget_is_a_count_not_a_clock(monkeypatch):
    """By default the search has no deadline: on a machine whose clock races (a slow, loaded
    one, as the search sees it) it returns the same optimum and the same number of expanded
    configurations, and its only refusal is max_states, at the same count."""
    import attnlib.iomodel.optimal as optimal_module

    G = matmul_graph(2, 2, 2)
    calm = optimal_io(G, 5)
    clock = iter(range(0, 10**9, 3600))  # every reading an hour after the last
    monkeypatch.setattr(optimal_module.time, "perf_counter", lambda: float(next(clock)))
    busy = optimal_io(G, 5)
    assert (busy.io, busy.moves, busy.states) == (calm.io, calm.moves, calm.states)
    with pytest.raises(AttnInputError, match=f"max_states = {calm.states - 1}"):
        optimal_io(G, 5, max_states=calm.states - 1)
    optimal_io(G, 5, max_states=calm.states)  # exactly enough
    with pytest.raises(AttnInputError, match="max_seconds = 60"):  # a deadline, if asked for
        optimal_io(G, 5, max_seconds=60)


BAD_INPUTS = [
    (lambda G, good: optimal_io("graph", 4), "G must be", AttnInputError),
    (lambda G, good: optimal_io(G, 2), "M must be an integer >= 3", AttnInputError),
    (lambda G, good: optimal_io(G, 4, recompute=1), "recompute", AttnInputError),
    (lambda G, good: optimal_io(G, 4, grouped_reads=None), "grouped_reads", AttnInputError),
    (lambda G, good: optimal_io(G, 4, max_states=0), "max_states", AttnInputError),
    (lambda G, good: optimal_io(G, 4, max_seconds=-1.0), "max_seconds", AttnInputError),
    (lambda G, good: replay_schedule(G, [("load", 0)], 4), "moves\\[0\\]", AttnInputError),
    (lambda G, good: replay_schedule(G, [("read", 99)], 4), "vertex must be", AttnInputError),
    (lambda G, good: replay_schedule(G, [("read", "p0")], 4), "blue pebble", AttnInputError),
    (lambda G, good: replay_schedule(G, [("compute", "p0")], 4), "cannot compute", AttnInputError),
    (lambda G, good: replay_schedule(G, [("compute", "a0")], 4), "cannot compute", AttnInputError),
    (lambda G, good: replay_schedule(G, [("write", "s")], 4), "no red pebble", AttnInputError),
    (
        lambda G, good: replay_schedule(G, [("read", "a0"), ("read", "a0")], 4),
        "already has a red",
        AttnInputError,
    ),
    (
        lambda G, good: replay_schedule(G, [m for m in good if m[0] != "write"], 4),
        "without a blue pebble",
        AttnInputError,
    ),
    (lambda G, good: replay_schedule(G, good, 3), None, CapacityError),
    (lambda G, good: replay_schedule(G, 5, 4), "moves must be", AttnInputError),
]


@pytest.mark.parametrize("call,message,error", BAD_INPUTS)
def test_bad_inputs(call, message, error):
    G = inner_product_graph(2)
    good = optimal_io(G, 4).moves
    with pytest.raises(error, match=message):
        call(G, good)
    moves = list(good)
    replay_schedule(G, moves, 4)
    assert moves == list(good)  # the move list is not modified


def test_pebble_search_is_optimal_io():
    G = io.inner_product_graph(3)
    for M in (3, 4):
        for recompute in (True, False):
            ours = io.PebbleSearch(G, M, recompute=recompute).run()
            ref = io.optimal_io(G, M, recompute=recompute)
            assert (ours.io, ours.reads, ours.writes) == (ref.io, ref.reads, ref.writes)
            assert ours.moves == ref.moves and ours.M == M
    # with nothing pebbled, the heuristic is the trivial bound: every input read, s written
    assert io.PebbleSearch(G, 4).h(0, 0, 0) == io.trivial_io_bound(G) == 7


def test_the_replay_refuses_values_that_leave_the_float_range():
    from attnlib.iomodel import optimal_io, replay_schedule

    G = inner_product_graph(2)
    moves = list(optimal_io(G, 4).moves)
    with pytest.raises(AttnInputError, match=r"inputs make 'p[01]' \(mul\) inf"):
        replay_schedule(G, moves, 4, [1e200, 1e200, 1e200, 1e200])
