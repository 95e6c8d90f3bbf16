"""Ring attention on the device machine (attnlib.iomodel.ring).

Two things are checked on every case, forward and backward: the machine's count equals the
closed form in every field (words sent and received, messages, work, words received by kind),
and the outputs equal the float64 reference of tests/naive.py within its rounding bounds
(tests/helpers.py: first-order bounds for any tiled computation with an online softmax and
sums in any order, times 2). The cases are structured: every P from 1 to 8 with every layout,
causal or not; P = n; grouped heads down to one key/value head; d_v != d; 2-D input; float32;
logits of ±1e4. The closed form is also held to what it must be independently of the
schedule: the total work is every kept score once, and every word sent is received.
"""

from __future__ import annotations

from fractions import Fraction

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
from attnlib.iomodel import ring as rg


def _cases():
    """(n, d, d_v, P, H, H_kv, is_causal, layout, dtype): every P in 1..8 × layout × causal,
    with the head counts, widths and dtype cycling through the structured choices, then the
    corner cases."""
    heads = [(1, 1), (4, 2), (3, 1), (2, 2), (4, 1)]
    widths = [(4, 4), (5, 3), (2, 6)]
    cases, k = [], 0
    for P in range(1, 9):
        for layout in LAYOUTS:
            for causal in (False, True):
                H, H_kv = heads[k % len(heads)]
                d, d_v = widths[k % len(widths)]
                dtype = np.float32 if k % 4 == 3 else np.float64
                cases.append((4 * P, d, d_v, P, H, H_kv, causal, layout, dtype))
                k += 1
    cases += [
        (8, 3, 3, 8, 2, 1, True, "contiguous", np.float64),  # P = n: one row per device
        (8, 3, 3, 8, 2, 2, True, "striped", np.float64),
        (8, 3, 2, 4, 2, 2, True, "zigzag", np.float64),  # P = n / 2: one row per chunk
        (48, 4, 4, 6, 2, 1, True, "zigzag", np.float32),
        (48, 4, 4, 3, 6, 3, False, "striped", np.float64),
    ]
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_count_and_outputs(case):
    n, d, d_v, P, H, H_kv, causal, layout, dtype = case
    Q, K, V, dO = _inputs(case, seed=len(CASES) + n + P)
    O, lse, count = rg.ring_forward(Q, K, V, **_kw(case))
    twin = rg.ring_forward_count(n, d, **_count_kw(case))
    assert isinstance(count, DeviceCount) and count == twin
    # what the closed form must be whatever the schedule: all kept scores once, sent = received
    assert int(twin.work.sum()) == _total_kept(case)
    assert (
        twin.sent.sum()
        == twin.received.sum()
        == sum(v.sum() for v in twin.received_by_kind.values())
    )
    b = n // P
    assert twin.max_sent == (P - 1) * b * H_kv * (d + d_v)  # the spec's formula, written out
    parts = reference_parts(Q, K, V, dO, is_causal=causal, enable_gqa=H != H_kv)
    assert_within_reference((O, lse), parts, ("O", "lse"), dtype)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_backward_count_and_outputs(case):
    n, d, d_v, P, H, H_kv, causal, layout, dtype = case
    Q, K, V, dO = _inputs(case, seed=n + P)
    kw = dict(is_causal=causal, enable_gqa=H != H_kv)
    O, lse = al.attention_forward(Q, K, V, **kw)
    dQ, dK, dV, count = rg.ring_backward(Q, K, V, O, dO, lse, **_kw(case))
    twin = rg.ring_backward_count(n, d, **_count_kw(case))
    assert count == twin
    assert int(twin.work.sum()) == _total_kept(case)
    b = n // P
    want_words = (2 * P - 1) * b * H_kv * (d + d_v) if P > 1 else 0
    assert twin.max_sent == want_words and twin.messages.tolist() == [P if P > 1 else 0] * P
    parts = reference_parts(Q, K, V, dO, is_causal=causal, enable_gqa=H != H_kv)
    assert_within_reference((dQ, dK, dV), parts, ("dQ", "dK", "dV"), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_logits_of_1e4(dtype, layout):
    # each block's maximum differs by ~1e4 from the others: a merge that exponentiated lse or
    # a block without its own maximum would overflow to inf or nan
    case = (16, 2, 2, 4, 2, 1, True, layout, dtype)
    Q, K, V, dO = _inputs(case, seed=3, size=70.0)
    O, lse, count = rg.ring_forward(Q, K, V, **_kw(case), scale=1.0)
    assert count == rg.ring_forward_count(16, 2, **_count_kw(case))
    parts = reference_parts(Q, K, V, dO, scale=1.0, is_causal=True, enable_gqa=True)
    assert np.abs(parts.S).max() > 5e3  # the case is what it says
    assert_within_reference((O, lse), parts, ("O", "lse"), dtype)
    grads = rg.ring_backward(Q, K, V, O, dO, lse, **_kw(case), scale=1.0)
    assert_within_reference(grads[:3], parts, ("dQ", "dK", "dV"), dtype)


def test_received_by_kind():
    c = rg.ring_backward_count(16, 3, P=4, H=4, H_kv=2, d_v=5)
    b = 4
    assert {k: int(v[0]) for k, v in c.received_by_kind.items()} == {
        "K": 3 * b * 2 * 3, "V": 3 * b * 2 * 5, "dK": 4 * b * 2 * 3, "dV": 4 * b * 2 * 5,
    }  # fmt: skip
    assert rg.ring_forward_count(16, 3, P=1).received_by_kind == {}


def test_contiguous_causal_imbalance():
    # contiguous: the last device has (2P-1)b² + b)/2 kept scores against a mean of b(n+1)/2,
    # an imbalance ((2P-1)b + 1)/(Pb + 1) -> (2P-1)/P; zigzag: exactly 1
    for P in range(1, 9):
        for b in (2, 4, 6):
            c = rg.ring_forward_count(P * b, 2, P=P, is_causal=True)
            want = Fraction((2 * P - 1) * b + 1, P * b + 1)
            assert Fraction(int(c.work.max()) * P, int(c.work.sum())) == want
            z = rg.ring_forward_count(P * b, 2, P=P, is_causal=True, layout="zigzag")
            assert z.imbalance == 1.0


def test_inputs_are_not_modified():
    case = (8, 2, 2, 2, 2, 1, True, "zigzag", np.float64)
    Q, K, V, dO = _inputs(case, seed=0)
    O, lse, _ = rg.ring_forward(Q, K, V, **_kw(case))
    arrays = (Q, K, V, O, dO, lse)
    copies = [a.copy() for a in arrays]
    rg.ring_backward(Q, K, V, O, dO, lse, **_kw(case))
    assert all(np.array_equal(a, c) for a, c in zip(arrays, copies, strict=True))


def test_refusals():
    Q = np.ones((2, 8, 2))
    with pytest.raises(AttnInputError, match="P = 3"):
        rg.ring_forward(Q, Q, Q, P=3)
    with pytest.raises(AttnInputError, match="zigzag"):
        rg.ring_forward(Q, Q, Q, P=8, layout="zigzag")
    with pytest.raises(AttnInputError, match="Q"):
        rg.ring_forward(Q[None], Q[None], Q[None], P=2)
    with pytest.raises(AttnInputError, match="K must have the n = 8 rows"):
        rg.ring_forward(Q, Q[:, :4], Q[:, :4], P=2)
    with pytest.raises(AttnInputError, match="H_kv"):
        rg.ring_backward_count(8, 2, P=2, H=3, H_kv=2)


def test_one_head_as_2d_input():
    # PyTorch's (n, d) for one head: outputs without a head axis, equal to the (1, n, d) run
    rng = np.random.default_rng(5)
    Q, K, V, dO = (rng.standard_normal((8, 3)) for _ in range(4))
    kw = dict(P=2, is_causal=True, layout="striped")
    O, lse, count = rg.ring_forward(Q, K, V, **kw)
    O3, lse3, count3 = rg.ring_forward(Q[None], K[None], V[None], **kw)
    assert O.shape == (8, 3) and lse.shape == (8,) and count == count3
    assert np.array_equal(O, O3[0]) and np.array_equal(lse, lse3[0])
    grads = rg.ring_backward(Q, K, V, O, dO, lse, **kw)
    grads3 = rg.ring_backward(Q[None], K[None], V[None], O3, dO[None], lse3, **kw)
    assert all(g.shape == (8, 3) for g in grads[:3]) and grads[3] == grads3[3]
    assert all(np.array_equal(a, b[0]) for a, b in zip(grads[:3], grads3[:3], strict=True))


def test_mixed_dtypes_run_in_the_common_one():
    # float32 Q with float64 K, V: the pass runs in float64, as the exact core does
    case = (16, 3, 3, 4, 2, 2, True, "striped", np.float64)
    Q, K, V, dO = _inputs(case, seed=8)
    O, lse, count = rg.ring_forward(Q.astype(np.float32), K, V, **_kw(case))
    assert O.dtype == lse.dtype == np.float64
    assert count == rg.ring_forward_count(16, 3, **_count_kw(case))
    parts = reference_parts(Q.astype(np.float32), K, V, dO, is_causal=True)
    assert_within_reference((O, lse), parts, ("O", "lse"), np.float64)
