"""The L-layer attention stack (attnlib.models.stack): the hand-written backward pass against
finite differences (with and without the FFN, with a key mask), hidden gradients and
truncation, exact scale equivariance, layer norm of rows beyond the squares' range, GELU's erf
form, caches from another stack refused, and bad input named."""

from __future__ import annotations

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib.models import stack as st
from attnlib.nbtools import central_difference


def _fd_directional(f, arrays, rng, h=1e-5):
    """For each array a (changed in place, then restored): ((f(a + hv) − f(a − hv)) / 2h, v)
    with a random direction v."""
    out = []
    for a in arrays:
        v = rng.normal(size=a.shape)
        old = a.copy()
        a += h * v
        fp = f()
        a[...] = old - h * v
        fm = f()
        a[...] = old
        out.append(((fp - fm) / (2 * h), v))
    return out


@pytest.mark.parametrize("ffn", [False, True])
def test_backward_matches_finite_differences(rng, ffn):
    stack = st.random_stack(3, 8, 2, seed=7, ffn=ffn, weight_scale=1.5)
    X = rng.normal(size=(6, 8))
    G = rng.normal(size=(6, 8))
    _, dX, grads = stack.loss_and_grads(X, G)

    def loss():
        return stack.loss_and_grads(X, G)[0]

    # every entry of dX
    num = central_difference(lambda x: stack.loss_and_grads(x, G)[0], X, 1e-6)
    assert np.max(np.abs(num - dX)) < 1e-7 * max(1.0, np.max(np.abs(dX)))
    # every parameter array, along a random direction
    for i, layer in enumerate(stack.layers):
        keys = sorted(layer)
        checks = _fd_directional(loss, [layer[k] for k in keys], rng)
        for k, (fd, v) in zip(keys, checks, strict=True):
            an = float(np.sum(grads[i][k] * v))
            assert abs(fd - an) < 1e-6 * max(1.0, abs(an)), (i, k, fd, an)


@pytest.mark.parametrize("ffn", [False, True])
def test_key_mask_is_masked_attention_and_its_backward_matches_finite_differences(rng, ffn):
    stack = st.random_stack(2, 8, 2, seed=5, ffn=ffn, weight_scale=1.5)
    X, G = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    keep = np.array([True, True, False, True, False, True])
    Y, caches = stack.forward(X, key_mask=keep)
    # every head attends to the kept keys only, as BERT's padding mask does
    for c in caches:
        heads = [
            al.attention_forward(c["Q"][h], c["K"][h], c["V"][h], mask=np.tile(keep, (6, 1)))[0]
            for h in range(2)
        ]
        assert np.allclose(c["ctx"], np.concatenate(heads, axis=1), atol=1e-13)
    # so an excluded token changes no other token's output
    X2 = X.copy()
    X2[2] += 1.0
    Y2 = stack.forward(X2, key_mask=keep)[0]
    assert np.allclose(np.delete(Y2, 2, axis=0), np.delete(Y, 2, axis=0), atol=1e-12)
    # the hand-written backward with the mask, against finite differences along a direction
    dX, grads = stack.backward(caches, G)
    v = rng.normal(size=X.shape)
    h = 1e-6
    loss_p = float(np.sum(stack.forward(X + h * v, key_mask=keep)[0] * G))
    loss_m = float(np.sum(stack.forward(X - h * v, key_mask=keep)[0] * G))
    fd = (loss_p - loss_m) / (2 * h)
    assert abs(fd - float(np.sum(dX * v))) < 1e-7 * max(1.0, abs(fd))
    # keeping every key is no mask at all
    assert np.array_equal(stack.forward(X, key_mask=np.ones(6, bool))[0], stack.forward(X)[0])


def test_hidden_gradients_and_truncation(rng):
    stack = st.random_stack(4, 8, 2, seed=1)
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    Y, caches = stack.forward(X)
    dX, grads, hidden = stack.backward(caches, G, return_hidden=True)
    assert len(hidden) == 5 and np.array_equal(hidden[0], dX) and np.array_equal(hidden[4], G)
    # hidden[2] is the input gradient of the top two layers run on x_2
    top = st.AttentionStack(stack.layers[2:], 2)
    x2 = stack.truncated(2).forward(X)[0]
    assert np.allclose(top.loss_and_grads(x2, G)[1], hidden[2], atol=1e-12)
    assert stack.truncated(2).n_layers == 2 and stack.n_layers == 4


def test_backward_is_exactly_scale_equivariant(rng):
    """The backward pass runs on dY scaled to entries below 1 and scales back by a power of
    2: the same bits as before for ordinary dY, and finite answers near the float range."""
    stack = st.random_stack(2, 8, 2, seed=4, ffn=True)
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    caches = stack.forward(X)[1]
    dX, grads = stack.backward(caches, G)
    for k in (300, -300):
        dXk, gradsk = stack.backward(caches, np.ldexp(G, k))
        assert np.array_equal(dXk, np.ldexp(dX, k))
        assert all(
            np.array_equal(gk[name], np.ldexp(g[name], k))
            for g, gk in zip(grads, gradsk, strict=True)
            for name in g
        )
    with pytest.raises(AttnInputError, match="overflow float64: dY is too large"):
        stack.backward(caches, np.full_like(G, 1e308))
    with pytest.raises(AttnInputError, match="G is too large"):
        stack.loss_and_grads(X, np.full_like(G, 1e308))


def test_layer_norm_of_rows_beyond_the_squares_range(rng):
    """x̂ = (u − mean)/√(var + ε) does not depend on u's scale; rows whose squares overflow are
    normalised after an exact scaling (they used to come out as 0, the bias alone)."""
    from attnlib.models.stack import layer_norm

    u = rng.normal(size=(3, 16))
    g, b = rng.normal(size=16), rng.normal(size=16)
    y, (xhat, inv) = layer_norm(u, g, b, 1e-300)
    big = np.vstack([u[:1], np.ldexp(u[1:], 800)])  # rows 1, 2 beyond 2^500
    y_big, (xhat_big, inv_big) = layer_norm(big, g, b, 1e-300)
    assert np.array_equal(xhat_big[0], xhat[0]) and np.allclose(xhat_big, xhat, rtol=1e-14)
    assert np.allclose(y_big, y, rtol=1e-13) and np.allclose(np.ldexp(inv_big[1:], 800), inv[1:])


def test_caches_must_come_from_this_stack(rng):
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    stack = st.random_stack(2, 8, 2, seed=0)
    with pytest.raises(AttnInputError, match=r"caches\[0\] does not fit this stack"):
        stack.backward(st.random_stack(2, 8, 4, seed=0).forward(X)[1], G)
    with pytest.raises(AttnInputError, match=r"caches\[0\] comes from a stack with an FFN"):
        stack.backward(st.random_stack(2, 8, 2, seed=0, ffn=True).forward(X)[1], G)
    with pytest.raises(AttnInputError, match=r"layer 0 of the stack \(kernel 'standard'\)"):
        stack.forward(X * 1e160)


def test_gelu_is_the_erf_form():
    x = np.array([-3.0, -1.0, 0.0, 0.5, 2.0])
    from math import erf, sqrt

    ref = [0.5 * v * (1 + erf(v / sqrt(2))) for v in x]
    assert np.allclose(st.gelu(x), ref, atol=1e-15)
    h = 1e-6
    num = (st.gelu(x + h) - st.gelu(x - h)) / (2 * h)
    assert np.allclose(st.gelu_derivative(x), num, atol=1e-8)
    with pytest.raises(AttnInputError, match="x must be finite"):
        st.gelu([0.0, float("nan")])
    with pytest.raises(AttnInputError, match="x must have a float32 or float64 dtype"):
        st.gelu_derivative(["a"])


BAD_INPUT = [
    (lambda stack, good, rng: st.AttentionStack([], 2), "layers must be a non-empty list"),
    (
        lambda stack, good, rng: st.AttentionStack([good], 3),
        "n_heads must divide the model width D=8",
    ),
    (
        lambda stack, good, rng: st.AttentionStack([dict(good, Wq=np.zeros((8, 7)))], 2),
        r"layers\[0\]\['Wq'\] must have shape",
    ),
    (
        lambda stack, good, rng: st.AttentionStack([good, {"Wq": good["Wq"]}], 2),
        r"layers\[1\] must be a dict with keys",
    ),
    (lambda stack, good, rng: stack.forward(rng.normal(size=(4, 6))), "X must have D=8 columns"),
    (
        lambda stack, good, rng: stack.loss_and_grads(
            rng.normal(size=(4, 8)), rng.normal(size=(5, 8))
        ),
        "G must have shape",
    ),
    (
        lambda stack, good, rng: stack.forward(rng.normal(size=(4, 8)), kernel="exact"),
        "kernel must be an AttentionKernel",
    ),
    (lambda stack, good, rng: stack.truncated(3), "L must be an integer <= 2"),
    (
        lambda stack, good, rng: st.random_stack(2, 8, 2, seed=0, weight_scale=0),
        "weight_scale must be a positive",
    ),
    (
        lambda stack, good, rng: stack.forward(rng.normal(size=(4, 8)), key_mask=np.ones(4)),
        r"key_mask must be a boolean array of shape \(n,\)",
    ),
    (
        lambda stack, good, rng: stack.forward(rng.normal(size=(4, 8)), key_mask=np.zeros(4, bool)),
        "key_mask must keep at least one key",
    ),
]


@pytest.mark.parametrize("call,message", BAD_INPUT)
def test_bad_input(small_stack, rng, call, message):
    with pytest.raises(AttnInputError, match=message):
        call(small_stack, small_stack.layers[0], rng)
