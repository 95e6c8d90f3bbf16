"""The block arithmetic of the sharded schedules (attnlib.blockwise).

A schedule is right only if attention computed block by block and merged equals attention
computed at once, and if the key blocks' shares of the gradient add up to the gradient. Both are
checked against the float64 reference of tests/naive.py within its rounding bounds, for every
way of cutting the keys (contiguous pieces and scattered ones, as a striped shard is), grouped
heads, causal blocks with rows that keep nothing, and logits of ±1e4.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import reference_outputs, reference_tolerances
from naive import reference_parts

from attnlib import AttnInputError
from attnlib import blockwise as pt


def _inputs(rng, H, H_kv, n, d, d_v, dtype, size=1.0):
    Q = (size * rng.standard_normal((H, n, d))).astype(dtype)
    K = (size * rng.standard_normal((H_kv, n, d))).astype(dtype)
    V = rng.standard_normal((H_kv, n, d_v)).astype(dtype)
    dO = rng.standard_normal((H, n, d_v)).astype(dtype)
    return Q, K, V, dO


def _cuts(n, how):
    """Key blocks that cover range(n): contiguous pieces, a striped deal, or every key alone."""
    keys = np.arange(n)
    if how == "halves":
        return np.array_split(keys, 2)
    if how == "thirds":
        return np.array_split(keys, 3)
    if how == "striped":
        return [keys[k::3] for k in range(3)]
    if how == "singles":
        return [keys[j : j + 1] for j in range(n)]
    raise AssertionError(how)


def _blockwise(Q, K, V, dO, scale, keep, cuts):
    """Forward by blocks merged in the given order, then the backward's shares summed."""
    rows = np.arange(Q.shape[1])
    O = lse = None
    for cols in cuts:
        k = None if keep is None else keep[np.ix_(rows, cols)]
        o, l_ = pt.block_forward(Q, K[:, cols], V[:, cols], scale=scale, keep=k)
        O, lse = (o, l_) if O is None else pt.merge(O, lse, o, l_)
    D = pt.row_deltas(O, dO)
    dQ, dK, dV = np.zeros(Q.shape, Q.dtype), np.zeros(K.shape, Q.dtype), np.zeros(V.shape, Q.dtype)
    for cols in cuts:
        k = None if keep is None else keep[np.ix_(rows, cols)]
        a, b, c = pt.block_backward(Q, K[:, cols], V[:, cols], dO, lse, D, scale=scale, keep=k)
        dQ += a
        dK[:, cols] += b
        dV[:, cols] += c
    return O, lse, dQ, dK, dV


KEEPS = ("all", "causal", "empty_rows")


def _keep(kind, n):
    if kind == "all":
        return None
    keep = np.tri(n, n, dtype=bool)
    if kind == "empty_rows":  # rows 0 and 3 keep nothing: lse = -inf, O = 0, no gradient
        keep[[0, 3]] = False
    return keep


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("H", "H_kv"), [(1, 1), (4, 2), (3, 1)])
@pytest.mark.parametrize("keep_kind", KEEPS)
@pytest.mark.parametrize("cut", ["halves", "thirds", "striped", "singles"])
def test_blocks_merged_equal_the_reference(dtype, H, H_kv, keep_kind, cut):
    rng = np.random.default_rng(hash((H, H_kv, keep_kind, cut)) % 2**32)
    n, d, d_v = 7, 5, 3
    Q, K, V, dO = _inputs(rng, H, H_kv, n, d, d_v, dtype)
    keep = _keep(keep_kind, n)
    scale = 1 / np.sqrt(d)
    got = _blockwise(Q, K, V, dO, scale, keep, _cuts(n, cut))
    parts = reference_parts(Q, K, V, dO, mask=keep, enable_gqa=True)
    want = reference_outputs(parts)
    for name, a, w, tol in zip(
        ("O", "lse", "dQ", "dK", "dV"), got, want, reference_tolerances(parts, dtype), strict=True
    ):
        assert a.dtype == dtype, name
        assert np.array_equal(np.isneginf(a), np.isneginf(w)), name
        fin = np.isfinite(w)
        assert np.all(np.abs(a[fin] - w[fin]) <= tol[fin]), (name, np.abs(a - w).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logits_of_1e4_stay_finite_and_right(dtype):
    # scores of ±1e4 overflow exp unless each block subtracts its own maximum and the merge
    # reweights by exp(lse_a - lse): a merge that exponentiated lse itself would give inf/inf
    rng = np.random.default_rng(7)
    n, d = 6, 2
    Q = np.zeros((1, n, d), dtype)
    Q[0, :, 0] = 100.0
    K = np.zeros((1, n, d), dtype)
    K[0, :, 0] = 100.0 * np.array([1, -1, 1, -1, 0.99, -0.99])
    V = rng.standard_normal((1, n, 2)).astype(dtype)
    dO = rng.standard_normal((1, n, 2)).astype(dtype)
    got = _blockwise(Q, K, V, dO, 1.0, None, _cuts(n, "thirds"))
    parts = reference_parts(Q, K, V, dO, scale=1.0)
    for a, w, tol in zip(
        got, reference_outputs(parts), reference_tolerances(parts, dtype), strict=True
    ):
        assert np.all(np.isfinite(a))
        assert np.all(np.abs(a - w) <= tol)


def test_merge_is_exact_for_empty_parts_and_symmetric():
    rng = np.random.default_rng(3)
    O = rng.standard_normal((2, 3, 4))
    lse = rng.standard_normal((2, 3))
    empty_O, empty_lse = np.zeros_like(O), np.full_like(lse, -np.inf)
    for a, b in (((O, lse), (empty_O, empty_lse)), ((empty_O, empty_lse), (O, lse))):
        m_O, m_lse = pt.merge(a[0], a[1], b[0], b[1])
        assert np.array_equal(m_O, O) and np.array_equal(m_lse, lse)
    both_O, both_lse = pt.merge(empty_O, empty_lse, empty_O, empty_lse)
    assert np.array_equal(both_O, empty_O) and np.all(np.isneginf(both_lse))
    O2, lse2 = rng.standard_normal(O.shape), rng.standard_normal(lse.shape)
    x, y = pt.merge(O, lse, O2, lse2), pt.merge(O2, lse2, O, lse)
    assert np.allclose(x[0], y[0], rtol=0, atol=4e-16 * 8) and np.array_equal(x[1], y[1])


def test_merge_order_does_not_matter_beyond_rounding():
    # the ring merges the blocks in a different order on every device
    rng = np.random.default_rng(11)
    Q, K, V, _ = _inputs(rng, 2, 2, 5, 3, 2, np.float64)
    blocks = [pt.block_forward(Q, K[:, c], V[:, c], scale=0.5) for c in _cuts(5, "singles")]
    results = []
    for order in itertools.permutations(range(5)):
        O, lse = blocks[order[0]]
        for k in order[1:]:
            O, lse = pt.merge(O, lse, *blocks[k])
        results.append((O, lse))
    O0, lse0 = results[0]
    for O, lse in results[1:]:
        assert np.abs(O - O0).max() <= 1e-14 and np.abs(lse - lse0).max() <= 1e-14


def test_inputs_are_not_modified():
    rng = np.random.default_rng(5)
    Q, K, V, dO = _inputs(rng, 2, 1, 4, 3, 2, np.float64)
    keep = np.tri(4, 4, dtype=bool)
    copies = [a.copy() for a in (Q, K, V, dO, keep)]
    O, lse = pt.block_forward(Q, K, V, scale=0.3, keep=keep)
    D = pt.row_deltas(O, dO)
    saved = [a.copy() for a in (O, lse, D)]
    pt.block_backward(Q, K, V, dO, lse, D, scale=0.3, keep=keep)
    pt.merge(O, lse, O, lse)
    for a, b in zip((Q, K, V, dO, keep, O, lse, D), copies + saved, strict=True):
        assert np.array_equal(a, b)


def test_causal_keep_uses_global_indices():
    rows, cols = np.array([1, 5, 9]), np.array([0, 5, 6, 10])
    want = [[c <= r for c in cols] for r in rows]
    assert pt.causal_keep(rows, cols).tolist() == want
    assert pt.causal_keep(np.array([], int), cols).shape == (0, 4)


def test_refusals_name_the_argument():
    one = np.ones((1, 2, 2))
    K3, V3 = np.ones((1, 3, 2)), np.ones((1, 3, 1))
    cases = [
        (lambda: pt.block_forward(np.ones((3, 2, 2)), np.ones((2, 2, 2)), V3[:, :2], scale=1), "H"),
        (lambda: pt.block_forward(one, K3, V3, scale=1, keep=np.ones((3, 2), bool)), "keep"),
        (lambda: pt.block_forward(one, K3, V3, scale=0), "scale"),
        (lambda: pt.merge(one, np.zeros((1, 2)), np.ones((1, 2, 3)), np.zeros((1, 2))), "O_b"),
        (lambda: pt.causal_keep(np.array([0.5]), np.array([0])), "rows"),
    ]
    for call, name in cases:
        with pytest.raises(AttnInputError, match=name):
            call()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_overflowing_logits_are_refused_not_returned_as_nan_or_as_empty_rows(dtype):
    # finite inputs whose logit overflows: an unguarded block turns the row's max into +inf
    # and returns nan, and a guard that tested isfinite(max) would pass it off as a row that
    # keeps nothing (O = 0, lse = -inf): a wrong answer with nothing on stderr
    big = np.sqrt(np.finfo(dtype).max)
    Q = np.full((1, 2, 2), big, dtype)
    K = np.full((1, 3, 2), big, dtype)
    V = np.ones((1, 3, 1), dtype)
    with pytest.raises(AttnInputError, match=r"\bO\b.*overflows"):
        pt.block_forward(Q, K, V, scale=1.0)
    O, lse = pt._block_forward(Q, K, V, 1.0, None)  # unchecked: nan, never an empty row
    assert np.all(np.isnan(lse)) and np.all(np.isnan(O))
    Q1 = np.ones((1, 2, 2), dtype)
    O1, lse1 = pt.block_forward(Q1, np.ones((1, 3, 2), dtype), V, scale=1.0)
    with pytest.raises(AttnInputError, match="overflows"):
        pt.block_backward(Q, K, V, np.ones_like(O1), lse1, np.zeros_like(lse1), scale=1.0)
