"""The 2-D grid schedule on the device machine (attnlib.iomodel.grid).

Two things are checked on every case, forward and backward: the machine's count equals the
closed form in every field (words sent and received, messages, work, words received by kind),
and the outputs equal the float64 reference of tests/naive.py within its rounding bounds
(tests/helpers.py: first-order bounds for any tiled computation with an online softmax and
sums in any order, times 2). The cases are structured: every P from 1 to 8 with every layout,
causal or not, on square and non-square grids ((1, P), (P, 1), (2, 3), (3, 2), (2, 4), ...);
P = n; grouped heads down to one key/value head; d_v != d; 2-D input; float32; logits of
±1e4. The closed form is also held to what it must be independently of the schedule: the
total work is every kept score once, and every word sent is received.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_within_reference
from helpers import device_count_kw as _count_kw
from helpers import device_inputs as _inputs
from helpers import device_kw as _kw
from helpers import device_total_kept as _total_kept
from naive import reference_parts

import attnlib as al
from attnlib import AttnInputError
from attnlib.iomodel import LAYOUTS, DeviceCount
from attnlib.iomodel import grid as gr

GRIDS = {
    1: [None],
    2: [(1, 2), (2, 1)],
    3: [(1, 3), (3, 1)],
    4: [None, (1, 4), (4, 1)],
    5: [(1, 5), (5, 1)],
    6: [(2, 3), (3, 2)],
    7: [(7, 1), (1, 7)],
    8: [(2, 4), (4, 2)],
}


def _cases():
    """(n, d, d_v, P, H, H_kv, is_causal, layout, dtype, grid): every P in 1..8 × layout ×
    causal, the grids of P, head counts, widths and dtype cycling through the structured
    choices, then the corner cases."""
    heads = [(1, 1), (4, 2), (3, 1), (2, 2), (4, 1)]
    widths = [(4, 4), (5, 3), (2, 6)]
    cases, k = [], 0
    for P in range(1, 9):
        for layout in LAYOUTS:
            for causal in (False, True):
                H, H_kv = heads[k % len(heads)]
                d, d_v = widths[k % len(widths)]
                dtype = np.float32 if k % 4 == 3 else np.float64
                grid = GRIDS[P][k % len(GRIDS[P])]
                cases.append((4 * P, d, d_v, P, H, H_kv, causal, layout, dtype, grid))
                k += 1
    cases += [
        (4, 3, 3, 4, 2, 1, True, "contiguous", np.float64, None),  # P = n
        (4, 3, 3, 4, 2, 2, True, "striped", np.float64, (1, 4)),
        (6, 3, 3, 6, 2, 2, True, "striped", np.float64, (2, 3)),
        (24, 3, 2, 6, 2, 2, True, "zigzag", np.float64, (2, 3)),
        (48, 4, 4, 4, 2, 1, True, "zigzag", np.float32, (4, 1)),
        (36, 4, 4, 9, 3, 3, True, "contiguous", np.float64, None),  # 3 x 3
    ]
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_count_and_outputs(case):
    n, d, d_v, P, H, H_kv, causal, layout, dtype, grid = case
    Q, K, V, dO = _inputs(case, seed=len(CASES) + n + P)
    O, lse, count = gr.grid_forward(Q, K, V, **_kw(case))
    twin = gr.grid_forward_count(n, d, **_count_kw(case))
    assert isinstance(count, DeviceCount) and count == twin
    # what the closed form must be whatever the schedule: all kept scores once, sent = received
    assert int(twin.work.sum()) == _total_kept(case)
    assert (
        twin.sent.sum()
        == twin.received.sum()
        == sum(v.sum() for v in twin.received_by_kind.values())
    )
    R, C = (int(np.sqrt(P)),) * 2 if grid is None else grid
    b = n // P
    want = b * ((C - 1) * H * d + (R - 1) * H_kv * (d + d_v) + (C - 1) * H * (d_v + 1))
    assert twin.max_sent == want and twin.messages.tolist() == [2 * (C - 1) + R - 1] * P
    parts = reference_parts(Q, K, V, dO, is_causal=causal, enable_gqa=H != H_kv)
    assert_within_reference((O, lse), parts, ("O", "lse"), dtype)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_backward_count_and_outputs(case):
    n, d, d_v, P, H, H_kv, causal, layout, dtype, grid = case
    Q, K, V, dO = _inputs(case, seed=n + P)
    kw = dict(is_causal=causal, enable_gqa=H != H_kv)
    O, lse = al.attention_forward(Q, K, V, **kw)
    dQ, dK, dV, count = gr.grid_backward(Q, K, V, O, dO, lse, **_kw(case))
    twin = gr.grid_backward_count(n, d, **_count_kw(case))
    assert count == twin
    assert int(twin.work.sum()) == _total_kept(case)
    R, C = (int(np.sqrt(P)),) * 2 if grid is None else grid
    b = n // P
    want = b * ((C - 1) * H * (2 * d + d_v + 2) + 2 * (R - 1) * H_kv * (d + d_v))
    assert twin.max_sent == want and twin.messages.tolist() == [2 * (C - 1) + 2 * (R - 1)] * P
    parts = reference_parts(Q, K, V, dO, is_causal=causal, enable_gqa=H != H_kv)
    assert_within_reference((dQ, dK, dV), parts, ("dQ", "dK", "dV"), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_logits_of_1e4(dtype, layout):
    # each block's maximum differs by ~1e4 from the others: a merge that exponentiated lse or
    # a block without its own maximum would overflow to inf or nan
    case = (16, 2, 2, 4, 2, 1, True, layout, dtype, (1, 4))
    Q, K, V, dO = _inputs(case, seed=3, size=70.0)
    O, lse, count = gr.grid_forward(Q, K, V, **_kw(case), scale=1.0)
    assert count == gr.grid_forward_count(16, 2, **_count_kw(case))
    parts = reference_parts(Q, K, V, dO, scale=1.0, is_causal=True, enable_gqa=True)
    assert np.abs(parts.S).max() > 5e3  # the case is what it says
    assert_within_reference((O, lse), parts, ("O", "lse"), dtype)
    grads = gr.grid_backward(Q, K, V, O, dO, lse, **_kw(case), scale=1.0)
    assert_within_reference(grads[:3], parts, ("dQ", "dK", "dV"), dtype)


def test_received_by_kind():
    c = gr.grid_backward_count(24, 3, P=6, H=4, H_kv=2, d_v=5, grid=(2, 3))
    b, R, C = 4, 2, 3
    row, col = (C - 1) * b, (R - 1) * b
    assert {k: int(v[0]) for k, v in c.received_by_kind.items()} == {
        "Q": row * 4 * 3, "dO": row * 4 * 5, "lse": row * 4, "D": row * 4, "dQ": row * 4 * 3,
        "K": col * 2 * 3, "V": col * 2 * 5, "dK": col * 2 * 3, "dV": col * 2 * 5,
    }  # fmt: skip
    assert gr.grid_forward_count(16, 3, P=1).received_by_kind == {}


def test_causal_work_is_the_kept_pairs_of_the_blocks():
    # the closed form counts pairs from index sets; here the same pairs from the full mask
    n, P = 24, 6
    for layout in LAYOUTS:
        for grid in [(2, 3), (3, 2), (1, 6), (6, 1)]:
            R, C = grid
            c = gr.grid_forward_count(n, 2, P=P, H=2, is_causal=True, layout=layout, grid=grid)
            rows = al.iomodel.shard_rows(n, P, layout)
            mask = np.tri(n, n, dtype=bool)
            for p in range(P):
                r, col = divmod(p, C)
                q = np.concatenate([rows[r * C + k] for k in range(C)])
                kv = np.concatenate([rows[k * C + col] for k in range(R)])
                assert c.work[p] == 2 * mask[np.ix_(q, kv)].sum()


def test_inputs_are_not_modified():
    case = (8, 2, 2, 2, 2, 1, True, "zigzag", np.float64, (1, 2))
    Q, K, V, dO = _inputs(case, seed=0)
    O, lse, _ = gr.grid_forward(Q, K, V, **_kw(case))
    arrays = (Q, K, V, O, dO, lse)
    copies = [a.copy() for a in arrays]
    gr.grid_backward(Q, K, V, O, dO, lse, **_kw(case))
    assert all(np.array_equal(a, c) for a, c in zip(arrays, copies, strict=True))


def test_refusals():
    Q = np.ones((2, 12, 2))
    with pytest.raises(AttnInputError, match="P = 6 devices is not a square: pass grid"):
        gr.grid_forward(Q, Q, Q, P=6)
    with pytest.raises(
        AttnInputError, match=r"grid = \(2, 2\) must have R \* C = P = 6 devices, got R \* C = 4"
    ):
        gr.grid_forward(Q, Q, Q, P=6, grid=(2, 2))
    with pytest.raises(AttnInputError, match="grid must be a pair"):
        gr.grid_forward_count(12, 2, P=6, grid=(2, 3, 1))
    with pytest.raises(AttnInputError, match="Q"):
        gr.grid_backward(Q[None], Q[None], Q[None], Q[None], Q[None], Q[None, :, :, 0], P=2)


def test_one_head_as_2d_input():
    # PyTorch's (n, d) for one head: outputs without a head axis, equal to the (1, n, d) run
    rng = np.random.default_rng(5)
    Q, K, V, dO = (rng.standard_normal((8, 3)) for _ in range(4))
    kw = dict(P=2, is_causal=True, layout="striped", grid=(1, 2))
    O, lse, count = gr.grid_forward(Q, K, V, **kw)
    O3, lse3, count3 = gr.grid_forward(Q[None], K[None], V[None], **kw)
    assert O.shape == (8, 3) and lse.shape == (8,) and count == count3
    assert np.array_equal(O, O3[0]) and np.array_equal(lse, lse3[0])
    grads = gr.grid_backward(Q, K, V, O, dO, lse, **kw)
    grads3 = gr.grid_backward(Q[None], K[None], V[None], O3, dO[None], lse3, **kw)
    assert all(g.shape == (8, 3) for g in grads[:3]) and grads[3] == grads3[3]
    assert all(np.array_equal(a, b[0]) for a, b in zip(grads[:3], grads3[:3], strict=True))


def test_grid_shape():
    assert gr.grid_shape(None, 9) == (3, 3) and gr.grid_shape([1, 5], 5) == (1, 5)
    with pytest.raises(AttnInputError, match=r"\bP\b"):
        gr.grid_shape(None, 8)
    with pytest.raises(AttnInputError, match=r"\bgrid\b"):
        gr.grid_shape((2, 2), 8)
