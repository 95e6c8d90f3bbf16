"""DeepSpeed-Ulysses on the device machine (attnlib.iomodel.ulysses).

Two things are checked on every case, forward and backward: the machine's count equals the
closed form in every field (words sent and received, messages, work, words received by kind),
and the outputs equal the float64 reference of tests/naive.py within its rounding bounds
(tests/helpers.py: first-order bounds for any tiled computation with an online softmax and
sums in any order, times 2). The cases are structured: every P from 1 to 8 with every layout,
causal or not, P | H; key/value heads split (P | H_kv), one per device, and replicated
(H_kv < P, down to H_kv = 1); P = n; d_v != d; 2-D input; float32; logits of ±1e4. The closed
form is also held to what it must be independently of the schedule: the total work is every
kept score once, and every word sent is received.
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
from attnlib.iomodel import ulysses as ul


def _cases():
    """(n, d, d_v, P, H, H_kv, is_causal, layout, dtype): every P in 1..8 × layout × causal,
    H = P or 2P query heads and the key/value heads cycling through H (no grouping), P
    (one per device), 1 and the divisors of P (replicated), then the corner cases."""
    widths = [(4, 4), (5, 3), (2, 6)]
    cases, k = [], 0
    for P in range(1, 9):
        for layout in LAYOUTS:
            for causal in (False, True):
                H = P * (1 + k % 2)
                kv = [H, P, 1] + [x for x in range(2, P) if P % x == 0]
                H_kv = kv[k % len(kv)]
                d, d_v = widths[k % len(widths)]
                dtype = np.float32 if k % 4 == 3 else np.float64
                cases.append((4 * P, d, d_v, P, H, H_kv, causal, layout, dtype))
                k += 1
    cases += [
        (8, 3, 3, 8, 8, 2, True, "contiguous", np.float64),  # P = n, H_kv < P
        (8, 3, 3, 8, 16, 16, True, "striped", np.float64),  # P = n, two heads per device
        (16, 3, 2, 4, 8, 2, True, "zigzag", np.float64),  # replicated: 2 devices per kv head
        (48, 4, 4, 6, 6, 3, True, "zigzag", np.float32),
        (24, 4, 4, 2, 6, 6, False, "striped", np.float64),  # 3 heads per device
    ]
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_count_and_outputs(case):
    n, d, d_v, P, H, H_kv, causal, layout, dtype = case
    Q, K, V, dO = _inputs(case, seed=len(CASES) + n + P)
    O, lse, count = ul.ulysses_forward(Q, K, V, **_kw(case))
    twin = ul.ulysses_forward_count(n, d, **_count_kw(case))
    assert isinstance(count, DeviceCount) and count == twin
    # what the closed form must be whatever the schedule: all kept scores once, sent = received
    assert int(twin.work.sum()) == _total_kept(case)
    assert (
        twin.sent.sum()
        == twin.received.sum()
        == sum(v.sum() for v in twin.received_by_kind.values())
    )
    b, hq = n // P, H // P
    hk = H_kv // P if H_kv % P == 0 else 1
    want = (P - 1) * b * (hq * d + hk * (d + d_v) + hq * (d_v + 1))  # the formula, written out
    assert twin.max_sent == want and twin.messages.tolist() == [2 * (P - 1)] * P
    parts = reference_parts(Q, K, V, dO, is_causal=causal, enable_gqa=H != H_kv)
    assert_within_reference((O, lse), parts, ("O", "lse"), dtype)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_backward_count_and_outputs(case):
    n, d, d_v, P, H, H_kv, causal, layout, dtype = case
    Q, K, V, dO = _inputs(case, seed=n + P)
    kw = dict(is_causal=causal, enable_gqa=H != H_kv)
    O, lse = al.attention_forward(Q, K, V, **kw)
    dQ, dK, dV, count = ul.ulysses_backward(Q, K, V, O, dO, lse, **_kw(case))
    twin = ul.ulysses_backward_count(n, d, **_count_kw(case))
    assert count == twin
    assert int(twin.work.sum()) == _total_kept(case)
    b, hq = n // P, H // P
    hk = H_kv // P if H_kv % P == 0 else 1
    want = (P - 1) * b * (hq * (2 * d + d_v + 2) + 2 * hk * (d + d_v))
    assert twin.max_sent == want and twin.messages.tolist() == [2 * (P - 1)] * P
    parts = reference_parts(Q, K, V, dO, is_causal=causal, enable_gqa=H != H_kv)
    assert_within_reference((dQ, dK, dV), parts, ("dQ", "dK", "dV"), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_logits_of_1e4(dtype, layout):
    # each block's maximum differs by ~1e4 from the others: a merge that exponentiated lse or
    # a block without its own maximum would overflow to inf or nan
    case = (16, 2, 2, 4, 4, 2, True, layout, dtype)
    Q, K, V, dO = _inputs(case, seed=3, size=70.0)
    O, lse, count = ul.ulysses_forward(Q, K, V, **_kw(case), scale=1.0)
    assert count == ul.ulysses_forward_count(16, 2, **_count_kw(case))
    parts = reference_parts(Q, K, V, dO, scale=1.0, is_causal=True, enable_gqa=True)
    assert np.abs(parts.S).max() > 5e3  # the case is what it says
    assert_within_reference((O, lse), parts, ("O", "lse"), dtype)
    grads = ul.ulysses_backward(Q, K, V, O, dO, lse, **_kw(case), scale=1.0)
    assert_within_reference(grads[:3], parts, ("dQ", "dK", "dV"), dtype)


def test_received_by_kind():
    c = ul.ulysses_backward_count(16, 3, P=4, H=8, H_kv=2, d_v=5)
    b, hq, hk = 4, 2, 1  # H_kv = 2 < P = 4: one replicated key/value head per device
    w = 3 * b
    assert {k: int(v[0]) for k, v in c.received_by_kind.items()} == {
        "Q": w * hq * 3, "dO": w * hq * 5, "lse": w * hq, "D": w * hq, "K": w * hk * 3,
        "V": w * hk * 5, "dQ": w * hq * 3, "dK": w * hk * 3, "dV": w * hk * 5,
    }  # fmt: skip
    assert ul.ulysses_forward_count(16, 3, P=1).received_by_kind == {}


def test_work_is_whole_sequences_whatever_the_layout():
    for layout in LAYOUTS:
        c = ul.ulysses_forward_count(16, 2, P=4, H=8, is_causal=True, layout=layout)
        assert c.work.tolist() == [2 * 16 * 17 // 2] * 4 and c.imbalance == 1.0


def test_inputs_are_not_modified():
    case = (8, 2, 2, 2, 2, 1, True, "zigzag", np.float64)
    Q, K, V, dO = _inputs(case, seed=0)
    O, lse, _ = ul.ulysses_forward(Q, K, V, **_kw(case))
    arrays = (Q, K, V, O, dO, lse)
    copies = [a.copy() for a in arrays]
    ul.ulysses_backward(Q, K, V, O, dO, lse, **_kw(case))
    assert all(np.array_equal(a, c) for a, c in zip(arrays, copies, strict=True))


def test_refusals():
    Q, K = np.ones((6, 8, 2)), np.ones((3, 8, 2))
    with pytest.raises(AttnInputError, match="P = 4 devices; P must divide H; use ring"):
        ul.ulysses_forward(Q, Q, Q, P=4)
    with pytest.raises(AttnInputError, match="P must divide H_kv or H_kv must divide P"):
        ul.ulysses_forward(Q, K, K, P=2, enable_gqa=True)  # 2 ∤ 3 and 3 ∤ 2
    with pytest.raises(AttnInputError, match="P = 64"):
        ul.ulysses_forward_count(2**16, 128, P=64, H=32)
    with pytest.raises(AttnInputError, match="Q"):
        ul.ulysses_forward(Q[None], Q[None], Q[None], P=2)
    with pytest.raises(AttnInputError, match="P = 3"):
        ul.ulysses_backward_count(8, 2, P=3, H=3)


def test_one_head_as_2d_input():
    # PyTorch's (n, d) for one head: outputs without a head axis, equal to the (1, n, d) run;
    # one head splits among one device only (P | H)
    rng = np.random.default_rng(5)
    Q, K, V, dO = (rng.standard_normal((8, 3)) for _ in range(4))
    kw = dict(P=1, is_causal=True, layout="striped")
    O, lse, count = ul.ulysses_forward(Q, K, V, **kw)
    O3, lse3, count3 = ul.ulysses_forward(Q[None], K[None], V[None], **kw)
    assert O.shape == (8, 3) and lse.shape == (8,) and count == count3
    assert np.array_equal(O, O3[0]) and np.array_equal(lse, lse3[0])
    grads = ul.ulysses_backward(Q, K, V, O, dO, lse, **kw)
    grads3 = ul.ulysses_backward(Q[None], K[None], V[None], O3, dO[None], lse3, **kw)
    assert all(g.shape == (8, 3) for g in grads[:3]) and grads[3] == grads3[3]
    assert all(np.array_equal(a, b[0]) for a, b in zip(grads[:3], grads3[:3], strict=True))


@pytest.mark.parametrize(
    ("H", "H_kv", "P", "want"),
    [(8, 8, 4, (2, 2)), (8, 2, 4, (2, 1)), (8, 1, 8, (1, 1)), (4, 4, 1, (4, 4)), (6, 3, 3, (2, 1))],
)
def test_ulysses_heads(H, H_kv, P, want):
    """P | H_kv: whole key/value heads; H_kv | P: one replicated key/value head per device."""
    assert ul.ulysses_heads(H, H_kv, P) == want


@pytest.mark.parametrize(("H", "H_kv", "P"), [(6, 6, 4), (12, 4, 6)])
def test_ulysses_heads_refuses_what_does_not_split(H, H_kv, P):
    """P not dividing H; P = 6 with H_kv = 4 (neither divides the other)."""
    with pytest.raises(AttnInputError, match=r"\bP\b"):
        ul.ulysses_heads(H, H_kv, P)
