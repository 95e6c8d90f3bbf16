"""The compiled kernels on batched, multi-head input (..., H, n, d) with grouped K/V heads and
causal masking: the 2-D kernels head by head (bitwise), the exact core's batched result, the
exact core's batched input errors, and PyTorch's scaled_dot_product_attention (enable_gqa,
is_causal) when PyTorch is installed. Their values against a float64 reference written from
the definitions, on structured families, are checked in test_batched_reference.py."""

import numpy as np
import pytest
from test_exact_batched import BAD, _inputs
from test_exact_batched import CASES as EXACT_CASES

import attnlib as al
from attnlib import AttnInputError

CASES = [
    *EXACT_CASES,
    # batch 2 × 4 query heads over 2 K/V heads
    ((2,), 4, 2, 70, 90, 8, 8, True),
    ((2,), 4, 2, 70, 90, 8, 8, False),
    # several query and key blocks per head (256 x 256 tiles), grouped and not
    ((), 4, 2, 600, 530, 8, 8, True),
    ((), 4, 1, 520, 700, 8, 4, False),
    ((2,), 2, 2, 300, 520, 4, 4, False),
]


def rel_err(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def _flash(Q, K, V, dO, causal, g):
    kw = dict(is_causal=causal, enable_gqa=g > 1)
    O, lse = al.flash_forward(Q, K, V, **kw)
    return (O, lse, *al.flash_backward(Q, K, V, O, dO, lse, **kw))


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", CASES)
def test_batched_equals_the_2d_kernels_head_by_head(batch, H, H_kv, n, m, d, d_v, causal):
    Q, K, V, dO = _inputs(batch, H, H_kv, n, m, d, d_v)
    g = H // H_kv
    O, lse, dQ, dK, dV = _flash(Q, K, V, dO, causal, g)
    assert O.shape == (*batch, H, n, d_v) and lse.shape == (*batch, H, n)
    assert dQ.shape == Q.shape and dK.shape == K.shape and dV.shape == V.shape
    dK_ref, dV_ref = np.zeros_like(K), np.zeros_like(V)
    for b in np.ndindex(*batch):
        for h in range(H):  # the fixed order: query heads h = j·g, j·g + 1, ... of K/V head j
            i, kv = (*b, h), (*b, h // g)
            o, ls = al.flash_forward(Q[i], K[kv], V[kv], is_causal=causal)
            assert np.array_equal(O[i], o) and np.array_equal(lse[i], ls)
            dq, dk, dv = al.flash_backward(Q[i], K[kv], V[kv], o, dO[i], ls, is_causal=causal)
            assert np.array_equal(dQ[i], dq)
            dK_ref[kv] += dk
            dV_ref[kv] += dv
    assert np.array_equal(dK, dK_ref) and np.array_equal(dV, dV_ref)


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", CASES)
def test_batched_equals_the_exact_core(batch, H, H_kv, n, m, d, d_v, causal):
    Q, K, V, dO = _inputs(batch, H, H_kv, n, m, d, d_v)
    g = H // H_kv
    ours = _flash(Q, K, V, dO, causal, g)
    kw = dict(is_causal=causal, enable_gqa=g > 1)
    O, lse = al.attention_forward(Q, K, V, **kw)
    exact = (O, lse, *al.attention_backward(Q, K, V, O, dO, lse, **kw))
    for a, b in zip(ours, exact, strict=True):
        assert a.dtype == b.dtype and rel_err(a, b) <= 1e-10


def test_batched_mask_broadcasts_and_matches_the_exact_core():
    Q, K, V, dO = _inputs((2,), 4, 2, 40, 50, 8, 8, seed=3)
    keep = np.random.default_rng(1).random((40, 50)) > 0.3
    keep[7] = False  # a fully masked row in every head
    O, lse = al.flash_forward(Q, K, V, mask=keep, enable_gqa=True)
    assert np.all(O[..., 7, :] == 0) and np.all(np.isneginf(lse[..., 7]))
    grads = al.flash_backward(Q, K, V, O, dO, lse, mask=keep, enable_gqa=True)
    O_ref, lse_ref = al.attention_forward(Q, K, V, mask=keep, enable_gqa=True)
    refs = al.attention_backward(Q, K, V, O_ref, dO, lse_ref, mask=keep, enable_gqa=True)
    live = ~np.isneginf(lse_ref)
    assert np.array_equal(np.isneginf(lse), ~live)
    assert rel_err(O, O_ref) <= 1e-10 and rel_err(lse[live], lse_ref[live]) <= 1e-10
    for a, b in zip(grads, refs, strict=True):
        assert rel_err(a, b) <= 1e-10


def test_batched_float32_obeys_the_differential_rule():
    """FlashAttention's rule, as in tests/test_fast.py: the float32 error is at most 2× that of
    a naive float32 computation (the exact core in float32), plus a rounding term; the
    reference is float64 on the same float32-rounded inputs."""
    Q, K, V, dO = (x.astype(np.float32) for x in _inputs((2,), 4, 2, 130, 150, 16, 16, seed=5))
    Q *= 2.0
    kw = dict(is_causal=True, enable_gqa=True)
    ours = _flash(Q, K, V, dO, True, 2)
    O, lse = al.attention_forward(Q, K, V, **kw)
    naive = (O, lse, *al.attention_backward(Q, K, V, O, dO, lse, **kw))
    up = [x.astype(np.float64) for x in (Q, K, V, dO)]
    O64, lse64 = al.attention_forward(*up[:3], **kw)
    ref = (O64, lse64, *al.attention_backward(*up[:3], O64, up[3], lse64, **kw))
    for got, nv, r in zip(ours, naive, ref, strict=True):
        assert got.dtype == np.float32
        rounding = 4 * np.finfo(np.float32).eps * np.abs(r).max()
        assert np.abs(got - r).max() <= 2 * np.abs(nv - r).max() + rounding


def _raised(fn):
    try:
        fn()
    except AttnInputError as e:
        return str(e)
    return None


@pytest.mark.parametrize("make,kw,message", BAD)
@pytest.mark.parametrize("func", ["forward", "backward"])
def test_batched_input_errors_are_the_exact_cores(make, kw, message, func):
    Q, K, V, dO = _inputs((2,), 4, 2, 4, 5, 3, 3)
    Q, K, V = make(Q, K, V)
    if func == "forward":
        calls = [lambda f=f: f(Q, K, V, **kw) for f in (al.flash_forward, al.attention_forward)]
    else:
        calls = [
            lambda f=f: f(Q, K, V, dO, dO, dO[..., 0], **kw)
            for f in (al.flash_backward, al.attention_backward)
        ]
    with pytest.raises(AttnInputError, match=message):
        calls[0]()
    assert _raised(calls[0]) == _raised(calls[1])


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda O, dO, lse: (O, dO[..., :2], lse), r"dO must have shape \(\.\.\., H, n, d_v\)"),
        (lambda O, dO, lse: (O, dO, lse[..., :2]), r"lse must have shape \(\.\.\., H, n\)"),
        (lambda O, dO, lse: (O[0], dO, lse), r"O must have shape"),
    ],
)
def test_batched_backward_shape_errors(change, message):
    Q, K, V, dO = _inputs((2,), 4, 2, 4, 5, 3, 3)
    O, lse = al.flash_forward(Q, K, V, enable_gqa=True)
    O, dO, lse = change(O, dO, lse)
    for f in (al.flash_backward, al.attention_backward):
        with pytest.raises(AttnInputError, match=message):
            f(Q, K, V, O, dO, lse, enable_gqa=True)


def test_forward_backward_takes_batched_input():
    Q, K, V, dO = _inputs((2,), 4, 2, 20, 30, 8, 8)
    kw = dict(is_causal=True, enable_gqa=True)
    flash = al.fast.forward_backward(Q, K, V, dO, **kw)
    exact = al.fast.forward_backward(Q, K, V, dO, kernels="exact", **kw)
    for a, b in zip(flash, exact, strict=True):
        assert a.shape == b.shape and rel_err(a, b) <= 1e-10


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", CASES)
def test_matches_pytorch_sdpa(batch, H, H_kv, n, m, d, d_v, causal):
    torch = pytest.importorskip("torch")
    Q, K, V, dO = _inputs(batch, H, H_kv, n, m, d, d_v)
    O, _, dQ, dK, dV = _flash(Q, K, V, dO, causal, H // H_kv)
    q, k, v = (torch.tensor(x, requires_grad=True) for x in (Q, K, V))
    kw = dict(is_causal=causal, enable_gqa=H != H_kv)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    o.backward(torch.tensor(dO))
    # float64 on both sides: agreement to round-off
    for ours, theirs in [(O, o), (dQ, q.grad), (dK, k.grad), (dV, v.grad)]:
        assert rel_err(ours, theirs.detach().numpy()) <= 1e-10
