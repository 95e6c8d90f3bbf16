"""The exact core on batched, multi-head input (..., H, n, d) with grouped K/V heads and
causal masking: equal to the 2-D computation head by head, validated, and equal to PyTorch's
scaled_dot_product_attention (enable_gqa, is_causal) when PyTorch is installed. Its values
against a float64 reference written from the definitions, on structured families, are checked
in test_batched_reference.py."""

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError

CASES = [
    # (batch, H, H_kv, n, m, d, d_v, is_causal)
    ((), 1, 1, 4, 4, 3, 3, False),
    ((2,), 4, 2, 5, 7, 3, 2, False),
    ((2, 3), 4, 1, 6, 6, 4, 4, True),
    ((1,), 6, 3, 7, 5, 2, 3, True),
    ((3,), 2, 2, 1, 9, 8, 8, False),
]


def _inputs(batch, H, H_kv, n, m, d, d_v, seed=0):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((*batch, H, n, d))
    K = rng.standard_normal((*batch, H_kv, m, d))
    V = rng.standard_normal((*batch, H_kv, m, d_v))
    dO = rng.standard_normal((*batch, H, n, d_v))
    return Q, K, V, dO


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", CASES)
def test_batched_equals_two_dimensional_head_by_head(batch, H, H_kv, n, m, d, d_v, causal):
    Q, K, V, dO = _inputs(batch, H, H_kv, n, m, d, d_v)
    g = H // H_kv
    kw = dict(is_causal=causal, enable_gqa=g > 1)
    O, lse = al.attention_forward(Q, K, V, **kw)
    dQ, dK, dV = al.attention_backward(Q, K, V, O, dO, lse, **kw)
    assert O.shape == (*batch, H, n, d_v) and lse.shape == (*batch, H, n)
    assert dQ.shape == Q.shape and dK.shape == K.shape and dV.shape == V.shape
    assert np.array_equal(al.attention(Q, K, V, **kw), O)
    mask = np.tri(n, m, dtype=bool) if causal else None
    dK_ref, dV_ref = np.zeros_like(K), np.zeros_like(V)
    for b in np.ndindex(*batch):
        for h in range(H):
            i, kv = (*b, h), (*b, h // g)
            o, ls = al.attention_forward(Q[i], K[kv], V[kv], mask=mask)
            assert np.array_equal(O[i], o) and np.array_equal(lse[i], ls)
            dq, dk, dv = al.attention_backward(Q[i], K[kv], V[kv], o, dO[i], ls, mask=mask)
            assert np.array_equal(dQ[i], dq)
            dK_ref[kv] += dk
            dV_ref[kv] += dv
    assert np.abs(dK - dK_ref).max() <= 1e-13 and np.abs(dV - dV_ref).max() <= 1e-13


def test_is_causal_in_two_dimensions_equals_the_causal_mask():
    Q, K, V, dO = _inputs((), 1, 1, 6, 8, 3, 2)
    Q, K, V, dO = Q[0], K[0], V[0], dO[0]
    mask = np.tri(6, 8, dtype=bool)
    O, lse = al.attention_forward(Q, K, V, is_causal=True)
    O_ref, lse_ref = al.attention_forward(Q, K, V, mask=mask)
    assert np.array_equal(O, O_ref) and np.array_equal(lse, lse_ref)
    got = al.attention_backward(Q, K, V, O, dO, lse, is_causal=True)
    want = al.attention_backward(Q, K, V, O, dO, lse, mask=mask)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_batched_mask_broadcasts():
    Q, K, V, _ = _inputs((2,), 2, 2, 4, 5, 3, 3)
    keep = np.random.default_rng(1).random((4, 5)) > 0.3
    O, _ = al.attention_forward(Q, K, V, mask=keep)
    for b in range(2):
        for h in range(2):
            assert np.array_equal(O[b, h], al.attention(Q[b, h], K[b, h], V[b, h], mask=keep))


BAD = [
    (lambda Q, K, V: (Q, K[..., 0, :, :], V), {}, r"K must have 4 dimensions"),
    (lambda Q, K, V: (Q, K[:1], V[:1]), {}, r"K must have Q's batch dimensions"),
    (lambda Q, K, V: (Q, K[..., :2], V), {}, r"K must have d=3 columns like Q"),
    (lambda Q, K, V: (Q, K, V[..., :4, :]), {}, r"V must have \(H_kv, m\)"),
    (lambda Q, K, V: (Q, K[:, :1], V[:, :1]), {}, r"enable_gqa=True"),
    (lambda Q, K, V: (Q[:, :3], K[:, :2], V[:, :2]), dict(enable_gqa=True), r"multiple"),
    (lambda Q, K, V: (Q, K, V), dict(enable_gqa="yes"), r"enable_gqa must be a bool"),
    (lambda Q, K, V: (Q, K, V), dict(is_causal=1, enable_gqa=True), r"is_causal must be a bool"),
    (
        lambda Q, K, V: (Q, K, V),
        dict(is_causal=True, mask=np.ones((4, 5), bool), enable_gqa=True),
        r"mask and is_causal",
    ),
    (
        lambda Q, K, V: (Q, K, V),
        dict(mask=np.ones((3, 5), bool), enable_gqa=True),
        r"mask must be broadcastable",
    ),
    (
        lambda Q, K, V: (Q, K, V),
        dict(mask=np.ones((4, 5)), enable_gqa=True),
        r"mask must have a boolean dtype",
    ),
    (lambda Q, K, V: (Q * np.nan, K, V), {}, r"Q must be finite"),
]


@pytest.mark.parametrize("make,kw,message", BAD)
@pytest.mark.parametrize("func", ["forward", "backward"])
def test_batched_input_errors(make, kw, message, func):
    Q, K, V, dO = _inputs((2,), 4, 2, 4, 5, 3, 3)
    Q, K, V = make(Q, K, V)
    with pytest.raises(AttnInputError, match=message):
        if func == "forward":
            al.attention_forward(Q, K, V, **kw)
        else:
            al.attention_backward(Q, K, V, dO, dO, dO[..., 0], **kw)


def test_batched_backward_shape_errors():
    Q, K, V, dO = _inputs((2,), 4, 2, 4, 5, 3, 3)
    O, lse = al.attention_forward(Q, K, V, enable_gqa=True)
    with pytest.raises(AttnInputError, match=r"dO must have shape \(\.\.\., H, n, d_v\)"):
        al.attention_backward(Q, K, V, O, dO[..., :2], lse, enable_gqa=True)
    with pytest.raises(AttnInputError, match=r"lse must have shape \(\.\.\., H, n\)"):
        al.attention_backward(Q, K, V, O, dO, lse[..., :2], enable_gqa=True)


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", CASES)
def test_matches_pytorch_sdpa(batch, H, H_kv, n, m, d, d_v, causal):
    torch = pytest.importorskip("torch")
    Q, K, V, dO = _inputs(batch, H, H_kv, n, m, d, d_v)
    kw = dict(is_causal=causal, enable_gqa=H != H_kv)
    O, lse = al.attention_forward(Q, K, V, **kw)
    dQ, dK, dV = al.attention_backward(Q, K, V, O, dO, lse, **kw)
    q, k, v = (torch.tensor(x, requires_grad=True) for x in (Q, K, V))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    o.backward(torch.tensor(dO))
    # float64 on both sides: agreement to round-off (FA2's rule compares against a
    # reference at the same precision)
    for ours, theirs in [(O, o), (dQ, q.grad), (dK, k.grad), (dV, v.grad)]:
        theirs = theirs.detach().numpy()
        assert np.abs(ours - theirs).max() <= 1e-12 * max(1.0, np.abs(theirs).max())
