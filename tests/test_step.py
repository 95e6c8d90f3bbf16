"""One training step (attnlib.forward_backward): each algorithm is its own forward pass then
its own backward pass, bit for bit; the algorithms agree (the polynomial one within its
bound); and every argument an algorithm has no use for is refused, by name."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import batched_qkv_dO, random_qkv, rel_err

import attnlib as al
from attnlib import AttnInputError
from attnlib import polymethod as pm
from attnlib.step import KERNELS, forward_backward


def _passes(kernels, Q, K, V, dO, **kw):
    """(O, dQ, dK, dV) by the algorithm's own forward and backward functions."""
    forward, backward = {
        "standard": (al.attention_forward, al.attention_backward),
        "flash": (al.flash_forward, al.flash_backward),
    }[kernels]
    O, lse = forward(Q, K, V, **kw)
    return (O, *backward(Q, K, V, O, dO, lse, **kw))


def _assert_identical(got, want):
    assert len(got) == len(want) == 4
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b)


def test_the_public_name_is_the_step():
    assert al.forward_backward is forward_backward
    assert KERNELS == ("standard", "flash", "polynomial")


@pytest.mark.parametrize("kernels", ["standard", "flash"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("variant", ["plain", "mask", "causal"])
def test_each_step_is_its_forward_then_its_backward(rng, kernels, dtype, variant):
    Q, K, V = random_qkv(rng, 90, 70, 8, 5, dtype=dtype)
    dO = rng.standard_normal((90, 5)).astype(dtype)
    kw = {"scale": 0.3}
    if variant == "mask":
        kw["mask"] = rng.random((90, 70)) < 0.7
    if variant == "causal":
        kw["is_causal"] = True
    _assert_identical(
        forward_backward(Q, K, V, dO, kernels=kernels, **kw), _passes(kernels, Q, K, V, dO, **kw)
    )


def test_flash_is_the_default_and_agrees_with_standard(rng):
    Q, K, V = random_qkv(rng, 300, 270, 16, 8)
    dO = rng.standard_normal((300, 8))
    mask = rng.random((300, 270)) < 0.7
    mask[5] = False  # a fully masked row: O = 0, no gradient through it
    flash = forward_backward(Q, K, V, dO, mask=mask)
    _assert_identical(flash, _passes("flash", Q, K, V, dO, mask=mask))
    standard = forward_backward(Q, K, V, dO, mask=mask, kernels="standard")
    for a, b in zip(flash, standard, strict=True):
        assert rel_err(a, b) <= 1e-10
    assert np.all(flash[0][5] == 0) and np.all(flash[1][5] == 0)


@pytest.mark.parametrize("kernels", ["standard", "flash"])
def test_batched_grouped_query_heads(rng, kernels):
    """PyTorch's layout, 4 query heads over 2 key/value heads: the step is the passes'."""
    Q = rng.standard_normal((2, 4, 40, 8))
    K, V = rng.standard_normal((2, 2, 50, 8)), rng.standard_normal((2, 2, 50, 6))
    dO = rng.standard_normal((2, 4, 40, 6))
    kw = dict(is_causal=True, enable_gqa=True)
    got = forward_backward(Q, K, V, dO, kernels=kernels, **kw)
    _assert_identical(got, _passes(kernels, Q, K, V, dO, **kw))
    assert [x.shape for x in got] == [dO.shape, Q.shape, K.shape, V.shape]


@pytest.mark.parametrize("scale", [None, 0.25])
def test_polynomial_is_the_approximate_passes_within_the_forward_bound(rng, scale):
    eps = 1e-3
    Q, K, V = (rng.uniform(-0.5, 0.5, shape) for shape in ((64, 4), (50, 4), (50, 3)))
    dO = rng.uniform(-1, 1, (64, 3))
    got = forward_backward(Q, K, V, dO, kernels="polynomial", eps=eps, scale=scale)
    want = (
        pm.approx_attention(Q, K, V, eps=eps, scale=scale),
        *pm.approx_attention_backward(Q, K, V, dO, eps=eps, scale=scale),
    )
    _assert_identical(got, want)
    O = al.attention(Q, K, V, scale=scale)
    assert np.abs(got[0] - O).max() <= pm.forward_error_bound(eps, np.abs(V).max())
    standard = forward_backward(Q, K, V, dO, kernels="standard", scale=scale)
    for a, b in zip(got[1:], standard[1:], strict=True):
        # near the exact gradients: a few times η = 2ε/(1−ε) relative (the step's exact
        # relation to the approximate passes is the bitwise check above)
        assert rel_err(a, b) <= 5 * 2 * eps / (1 - eps)


@pytest.mark.parametrize("kernels", KERNELS)
def test_inputs_are_never_modified(rng, kernels):
    Q, K, V = (rng.uniform(-0.5, 0.5, (40, 4)) for _ in range(3))
    dO = rng.standard_normal((40, 4))
    copies = [x.copy() for x in (Q, K, V, dO)]
    eps = 1e-3 if kernels == "polynomial" else None
    forward_backward(Q, K, V, dO, kernels=kernels, eps=eps)
    for x, c in zip((Q, K, V, dO), copies, strict=True):
        assert np.array_equal(x, c)


def _bad_calls():
    """(label, keywords of forward_backward, pattern of its message): each names the
    argument, and the message says what was expected."""
    kinds = r"kernels must be one of \('standard', 'flash', 'polynomial'\)"
    poly = {"kernels": "polynomial", "eps": 1e-3}
    return [
        ("kernels=exact", {"kernels": "exact"}, kinds + ", got 'exact'"),
        ("kernels=None", {"kernels": None}, kinds),
        ("eps with flash", {"eps": 1e-3}, r"^eps must be None with kernels='flash'"),
        ("eps with standard", {"kernels": "standard", "eps": 0.5}, r"^eps must be None with"),
        ("no eps", {"kernels": "polynomial"}, r"^eps must be a real number in \(0, 1\)"),
        ("eps=1", {**poly, "eps": 1.0}, r"^eps must be a real number in \(0, 1\)"),
        ("mask", {**poly, "mask": np.ones((6, 7), bool)}, r"^mask must be None with kernels="),
        ("is_causal", {**poly, "is_causal": True}, r"^is_causal must be False with kernels="),
        ("is_causal=1", {**poly, "is_causal": 1}, r"^is_causal must be a bool"),
        ("enable_gqa", {**poly, "enable_gqa": True}, r"^enable_gqa must be False with kernels="),
        ("enable_gqa=str", {**poly, "enable_gqa": "no"}, r"^enable_gqa must be a bool"),
    ]


@pytest.mark.parametrize("label,kw,pattern", _bad_calls(), ids=[c[0] for c in _bad_calls()])
def test_what_an_algorithm_has_no_use_for_is_refused_by_name(rng, label, kw, pattern):
    Q, K, V = (rng.uniform(-0.5, 0.5, (n, 4)) for n in (6, 7, 7))
    dO = rng.standard_normal((6, 4))
    with pytest.raises(AttnInputError, match=pattern):
        forward_backward(Q, K, V, dO, **kw)


def test_polynomial_refuses_batched_heads_and_each_pass_its_own_errors(rng):
    Q = rng.uniform(-0.5, 0.5, (2, 6, 4))
    with pytest.raises(AttnInputError, match=r"^Q must be 2-dimensional"):
        forward_backward(Q, Q, Q, Q, kernels="polynomial", eps=1e-3)
    Q, K, V = (rng.uniform(-0.5, 0.5, (6, 4)) for _ in range(3))
    for kernels, eps in (("standard", None), ("flash", None), ("polynomial", 1e-3)):
        with pytest.raises(AttnInputError, match=r"^dO must have shape"):
            forward_backward(Q, K, V, Q[:2], kernels=kernels, eps=eps)
        with pytest.raises(AttnInputError, match=r"^V must have m=6 rows like K"):
            forward_backward(Q, K, V[:2], Q, kernels=kernels, eps=eps)


def test_forward_backward_takes_batched_input():
    Q, K, V, dO = batched_qkv_dO((2,), 4, 2, 20, 30, 8, 8)
    kw = dict(is_causal=True, enable_gqa=True)
    flash = al.forward_backward(Q, K, V, dO, **kw)
    exact = al.forward_backward(Q, K, V, dO, kernels="standard", **kw)
    for a, b in zip(flash, exact, strict=True):
        assert a.shape == b.shape and rel_err(a, b) <= 1e-10
