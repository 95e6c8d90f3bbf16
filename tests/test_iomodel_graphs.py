"""Computation graphs (attnlib.iomodel.graphs): the builders' shapes, their values against
numpy, the least feasible M, the trivial bound, and every bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.iomodel.graphs import (
    ComputationGraph,
    attention_dv_graph,
    attention_forward_graph,
    check_schedule,
    evaluate_graph,
    inner_product_graph,
    least_feasible_M,
    matmul_graph,
    trivial_io_bound,
)


def _values(G, arrays):
    """Input values by name from named numpy arrays: name(i,j) -> arrays[name][i, j]."""
    out = {}
    for v in G.inputs:
        name = G.names[v]
        base, _, idx = name.partition("(")
        if idx:
            out[name] = float(arrays[base][tuple(int(x) for x in idx[:-1].split(","))])
        else:  # a0, b3: vectors of the inner product
            out[name] = float(arrays[name[0]][int(name[1:])])
    return out


def _counts(G):
    return {op: G.ops.count(op) for op in set(G.ops)}


@pytest.mark.parametrize("tree", ["chain", "balanced"])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_inner_product_shape_and_value(k, tree, rng):
    G = inner_product_graph(k, tree=tree)
    assert G.n == (4 * k - 1 if k > 1 else 3)  # 2k inputs, k products, k - 1 additions
    assert len(G.inputs) == 2 * k and len(G.outputs) == 1
    assert _counts(G).get("add", 0) == k - 1
    a, b = rng.standard_normal(k), rng.standard_normal(k)
    val = evaluate_graph(G, _values(G, {"a": a, "b": b}))[G.outputs[0]]
    assert math.isclose(val, float(a @ b), rel_tol=1e-12, abs_tol=1e-12)
    assert trivial_io_bound(G) == 2 * k + 1
    assert least_feasible_M(G) == 3  # two operands and the result


def test_tree_shapes_differ_in_depth():
    def depth(G):
        dep = [0] * G.n
        for v, p in enumerate(G.preds):
            dep[v] = 1 + max((dep[u] for u in p), default=-1)
        return max(dep)

    assert depth(inner_product_graph(8, tree="chain")) == 8  # product, then 7 additions
    assert depth(inner_product_graph(8, tree="balanced")) == 4  # product, then log2(8) = 3


@pytest.mark.parametrize("tree", ["chain", "balanced"])
@pytest.mark.parametrize("m,k,p", [(1, 1, 1), (2, 2, 2), (2, 3, 1), (3, 1, 2)])
def test_matmul_graph(m, k, p, tree, rng):
    G = matmul_graph(m, k, p, tree=tree)
    assert len(G.inputs) == m * k + k * p and len(G.outputs) == m * p
    assert _counts(G)["mul"] == m * k * p and _counts(G).get("add", 0) == m * p * (k - 1)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, p))
    vals = evaluate_graph(G, _values(G, {"A": A, "B": B}))
    C = np.array([vals[o] for o in G.outputs]).reshape(m, p)
    assert np.allclose(C, A @ B, rtol=1e-12, atol=1e-12)
    assert trivial_io_bound(G) == m * k + k * p + m * p


@pytest.mark.parametrize("n,m,d", [(1, 2, 1), (2, 2, 1), (2, 3, 2)])
def test_attention_forward_graph(n, m, d, rng):
    G = attention_forward_graph(n, m, d)
    Q, K, V = rng.standard_normal((n, d)), rng.standard_normal((m, d)), rng.standard_normal((m, d))
    vals = evaluate_graph(G, _values(G, {"Q": Q, "K": K, "V": V}))
    O = np.array([vals[o] for o in G.outputs]).reshape(n, d)
    S = Q @ K.T
    P = np.exp(S) / np.exp(S).sum(axis=1, keepdims=True)
    assert np.allclose(O, P @ V, rtol=1e-12, atol=1e-12)
    assert _counts(G)["exp"] == n * m and _counts(G)["div"] == n * m


@pytest.mark.parametrize("n,m,d", [(2, 2, 1), (1, 3, 2)])
def test_attention_dv_graph(n, m, d, rng):
    G = attention_dv_graph(n, m, d)
    Q, K, dO = rng.standard_normal((n, d)), rng.standard_normal((m, d)), rng.standard_normal((n, d))
    S = Q @ K.T
    lse = np.log(np.exp(S).sum(axis=1))
    vals = evaluate_graph(G, _values(G, {"Q": Q, "K": K, "lse": lse, "dO": dO}))
    dV = np.array([vals[o] for o in G.outputs]).reshape(m, d)
    assert np.allclose(dV, np.exp(S - lse[:, None]).T @ dO, rtol=1e-12, atol=1e-12)


def test_least_feasible_M_is_one_plus_indegree():
    G = ComputationGraph(
        ("a", "b", "c", "s"), ("input",) * 3 + ("add",), ((), (), (), (0, 1, 2)), (3,)
    )
    assert least_feasible_M(G) == 4
    assert least_feasible_M(attention_forward_graph(1, 2, 1)) == 3


def test_trivial_bound_ignores_unused_inputs():
    G = ComputationGraph(("a", "b", "e"), ("input", "input", "exp"), ((), (), (0,)), (2,))
    assert trivial_io_bound(G) == 2  # read a, write e; b is never needed


def test_graph_is_not_modified_and_is_hashable():
    G = matmul_graph(2, 2, 2)
    H = matmul_graph(2, 2, 2)
    assert G == H and hash(G) == hash(H)
    with pytest.raises(AttributeError):
        G.names = ()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(names=(), ops=(), preds=(), outputs=(0,)), "non-empty"),
        (dict(names=("a", "a"), ops=("input", "exp"), preds=((), (0,)), outputs=(1,)), "distinct"),
        (dict(names=("a", "b"), ops=("input", "sqrt"), preds=((), (0,)), outputs=(1,)), "ops"),
        (dict(names=("a", "b"), ops=("input", "add"), preds=((), (0,)), outputs=(1,)), "needs"),
        (dict(names=("a", "b"), ops=("input", "exp"), preds=((), (1,)), outputs=(1,)), "earlier"),
        (dict(names=("a", "b"), ops=("input", "exp"), preds=((), (0,)), outputs=(0,)), "non-input"),
        (dict(names=("a", "b"), ops=("input", "exp"), preds=((), (0,)), outputs=()), "outputs"),
        (
            dict(names=("a", "b"), ops=("input", "exp"), preds=((), (0,)), outputs=(1, 1)),
            "distinct",
        ),
    ],
)
def test_bad_graphs(kwargs, match):
    with pytest.raises(AttnInputError, match=match):
        ComputationGraph(**kwargs)


BAD_BUILDER_INPUTS = [
    (lambda: inner_product_graph(0), "k must be"),
    (lambda: inner_product_graph(3, tree="random"), "tree"),
    (lambda: matmul_graph(2, 2, 0), "p must be"),
    (lambda: attention_forward_graph(2, 1, 1), "m must be"),  # one key: softmax is constant
    (lambda: attention_dv_graph(2, 2, True), "d must be"),
    (lambda: least_feasible_M("not a graph"), "G must be"),
    (lambda: matmul_graph(1, 1, 1).index("Z(0,0)"), "no vertex"),
]


@pytest.mark.parametrize("call,message", BAD_BUILDER_INPUTS)
def test_bad_builder_inputs(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()


BAD_VALUES = [
    (lambda G: evaluate_graph(G, {"a0": 1.0}), "missing"),
    (lambda G: evaluate_graph(G, np.zeros(3)), "shape"),
    (lambda G: evaluate_graph(G, np.array([1.0, np.nan, 0.0, 0.0])), "finite"),
    (lambda G: evaluate_graph(G, {"a0": "x", "a1": 1.0, "b0": 1.0, "b1": 1.0}), "real number"),
]


@pytest.mark.parametrize("call,message", BAD_VALUES)
def test_bad_values(call, message):
    G = inner_product_graph(2)
    with pytest.raises(AttnInputError, match=message):
        call(G)


# ---- vertex indices, values and schedules are checked, never coerced ----------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(preds=((), (), (0.7, 1.2)), outputs=(2,)), r"preds\[2\]\[0\] must be an integer"),
        (dict(preds=((), (), (0, 1)), outputs=(2.9,)), r"outputs\[0\] must be an integer"),
        (dict(preds=((), (), (0, 1)), outputs=(True,)), r"outputs\[0\] must be an integer"),
        (dict(preds=((), (), (0, 10**400)), outputs=(2,)), r"earlier vertices.*~10\^400"),
        (dict(preds=((), (), (0, 1)), outputs=2), "outputs must be a sequence"),
        (dict(names="abc", preds=((), (), (0, 1)), outputs=(2,)), "names must be a sequence"),
        (dict(names=("a", 2, "c"), preds=((), (), (0, 1)), outputs=(2,)), r"names\[1\]"),
        (dict(ops=("input", ["input"], "add"), preds=((), (), (0, 1)), outputs=(2,)), r"ops\[1\]"),
    ],
)
def test_graph_indices_are_integers_not_truncated(kwargs, match):
    base = dict(names=("a", "b", "c"), ops=("input", "input", "add"))
    with pytest.raises(AttnInputError, match=match):
        ComputationGraph(**{**base, **kwargs})


def test_numpy_integer_indices_are_accepted():
    G = ComputationGraph(
        ("a", "b", "c"), ("input", "input", "add"), ((), (), np.array([0, 1])), (np.int64(2),)
    )
    assert G.preds == ((), (), (0, 1)) and G.outputs == (2,)


@pytest.mark.parametrize(
    "inputs,match",
    [
        ([1e200, 1e200, 1e200, 1e200], r"vertex 'p0' \(mul\) inf"),
        ([10**400, 1, 1, 1], "inputs must have a float32 or float64 dtype"),
        ({"a0": 10**400, "a1": 1, "b0": 1, "b1": 1}, r"inputs\['a0'\] must be a finite"),
        ([True, False, True, True], "inputs must have a float32 or float64 dtype"),
    ],
)
def test_evaluation_refuses_values_beyond_the_float_range(inputs, match):
    with pytest.raises(AttnInputError, match=match):
        evaluate_graph(inner_product_graph(2), inputs)


def test_evaluation_of_the_softmax_graph_refuses_exp_overflow_and_a_zero_row_sum():
    G = attention_forward_graph(1, 2, 1)  # inputs Q(0,0), K(0,0), K(1,0), V(0,0), V(1,0)
    with pytest.raises(AttnInputError, match=r"'E\(0,0\)' \(exp\) inf"):
        evaluate_graph(G, [1e3, 1.0, 1.0, 1.0, 1.0])
    with pytest.raises(AttnInputError, match=r"'P\(0,0\)' \(div\) divide by zero"):
        evaluate_graph(G, [-1e3, 1.0, 1.0, 1.0, 1.0])  # exp(−1000) = 0 in both keys


# ---- the game's rules, one checker for the replay and for the partition ------------------


def _moves_of(G, M):
    from attnlib.iomodel import optimal_io

    return list(optimal_io(G, M).moves)


ILLEGAL = [
    (lambda G, good: [("compute", G.index("s"))] + good, r"moves\[0\].*cannot compute"),
    (lambda G, good: [("read", G.index("p0"))] + good, r"moves\[0\].*without a blue pebble"),
    (lambda G, good: [("compute", G.index("a0"))], r"moves\[0\].*an input cannot be computed"),
    (lambda G, good: [("write", G.index("a0"))], r"moves\[0\].*no red pebble"),
    (lambda G, good: [("delete", G.index("a0"))], r"moves\[0\].*no red pebble"),
    (lambda G, good: [("read", 0), ("read", 0)], r"moves\[1\].*already has a red pebble"),
    (lambda G, good: good[:3], r"moves leave outputs without a blue pebble at the end"),
    (lambda G, good: [("read", 0.0)], r"moves\[0\] vertex must be an integer"),
    (lambda G, good: [("read", 10**400)], r"moves\[0\] vertex must be an integer <="),
]


@pytest.mark.parametrize("make,match", ILLEGAL)
def test_schedule_segments_and_the_replay_refuse_illegal_schedules(make, match):
    """schedule_segments used to accept any move list (a compute of a vertex whose
    predecessors were never read, say) and report dominators of a play that cannot
    happen."""
    from attnlib.iomodel import replay_schedule, schedule_segments

    G = inner_product_graph(2)
    moves = make(G, _moves_of(G, 4))
    for check in (
        lambda: check_schedule(G, moves),
        lambda: schedule_segments(G, moves, 4),
        lambda: replay_schedule(G, moves, 4),
    ):
        with pytest.raises(AttnInputError, match=match):
            check()


def test_schedule_segments_refuses_more_red_pebbles_than_M():
    from attnlib.iomodel import schedule_segments

    G = inner_product_graph(2)
    moves = _moves_of(G, 4)  # legal with 4 red pebbles, not with 3
    assert schedule_segments(G, moves, 4)
    with pytest.raises(AttnInputError, match=r"moves\[\d+\].*red pebble number 4, with M = 3"):
        schedule_segments(G, moves, 3)
    with pytest.raises(AttnInputError, match="with M = 3"):
        check_schedule(G, moves, 3)
    assert check_schedule(G, moves, 4) == moves  # normalised and returned, not modified
