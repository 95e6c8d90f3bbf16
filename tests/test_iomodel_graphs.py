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
