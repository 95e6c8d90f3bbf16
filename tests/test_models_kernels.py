"""The pluggable attention kernels of the stack (attnlib.models.kernels): the dense polynomial
kernel is the factored polynomial method, kernels follow the algorithm vocabulary and check
their inputs and their functions' outputs, the fallback counts its refusals, the observed-range
kernel uses the largest logit, and bad input is named."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import attnlib.polymethod as pm
from attnlib import AttnInputError
from attnlib.models import depth as dp
from attnlib.models import kernels as kn
from attnlib.models import stack as st


@pytest.mark.parametrize("eps", [1e-2, 1e-6])
def test_dense_polynomial_kernel_equals_the_factored_method(rng, eps):
    Q, K = rng.normal(size=(30, 4)) * 0.7, rng.normal(size=(40, 4)) * 0.7
    V, dO = rng.normal(size=(40, 3)), rng.normal(size=(30, 3))
    dense = kn.dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=eps))
    factored = kn._kernel_from_functions(
        "AS24", pm.approx_attention, pm.approx_attention_backward, eps=eps
    )
    tau = 0.5
    assert np.max(np.abs(dense.forward(Q, K, V, tau) - factored.forward(Q, K, V, tau))) < 1e-12
    pairs = zip(dense.backward(Q, K, V, dO, tau), factored.backward(Q, K, V, dO, tau), strict=True)
    for a, b in pairs:
        assert np.max(np.abs(a - b)) < 1e-12
    # and it is an approximation of exact attention within the forward bound 2ε/(1−ε)·‖V‖max
    exact = kn.STANDARD.forward(Q, K, V, tau)
    err = np.max(np.abs(dense.forward(Q, K, V, tau) - exact))
    assert 0 < err <= pm.forward_error_bound(eps, np.abs(V).max())


def test_kernel_names_follow_the_algorithm_vocabulary():
    """The materialising algorithm is "standard" here as in attnlib.forward_backward."""
    assert kn.STANDARD.name == "standard"
    poly = kn.dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=1e-3))
    assert kn.with_fallback(poly).name == "polynomial (dense), else standard"


def test_kernels_check_their_inputs_and_their_functions_outputs(rng):
    Q, K, V, dO = (rng.normal(size=s) for s in ((4, 3), (5, 3), (5, 2), (4, 2)))
    poly = functools.partial(pm.exp_poly, eps=1e-3)
    for kern in (kn.dense_polynomial_kernel(poly), kn.observed_range_kernel(poly)):
        with pytest.raises(AttnInputError, match="V must have m=5 rows like K"):
            kern.forward(Q, K, V[:3], 0.5)
        with pytest.raises(AttnInputError, match="dO must have shape"):
            kern.backward(Q, K, V, dO[:2], 0.5)
        with pytest.raises(AttnInputError, match="Q, K or scale is too large"):
            kern.forward(Q * 1e200, K * 1e200, V, 0.5)
    with pytest.raises(AttnInputError, match="poly_for_range must return a callable"):
        kn.dense_polynomial_kernel(lambda R: 3).forward(Q, K, V, 0.5)
    with pytest.raises(AttnInputError, match="forward must be callable"):
        kn.AttentionKernel("k", 1, len)
    with pytest.raises(AttnInputError, match="name must be a non-empty string"):
        kn.dense_polynomial_kernel(poly, name="")
    bad = kn._kernel_from_functions("k", lambda Q, K, V, scale: Q, lambda *a, scale: (1, 2))
    with pytest.raises(AttnInputError, match="forward_fn must return shape"):
        bad.forward(Q, K, V, 0.5)
    with pytest.raises(AttnInputError, match="backward_fn must return a tuple"):
        bad.backward(Q, K, V, dO, 0.5)


def test_with_fallback_counts_refusals(rng):
    def refuse(Q, K, V, *, scale):
        raise AttnInputError("logit range out of reach")

    def refuse_b(Q, K, V, dO, *, scale):
        raise AttnInputError("logit range out of reach")

    kern = kn.with_fallback(kn._kernel_from_functions("never", refuse, refuse_b))
    stack = st.random_stack(2, 8, 2, seed=0)
    X, G = rng.normal(size=(4, 8)), rng.normal(size=(4, 8))
    ge = dp.gradient_errors(stack, X, G, kern)
    assert ge.params == 0.0
    assert kern.stats == {
        "forward calls": 4,
        "forward fallbacks": 4,
        "backward calls": 4,
        "backward fallbacks": 4,
    }
    kern.reset()
    assert kern.stats == {}


def test_observed_range_kernel_uses_the_largest_logit(rng):
    # rows of Q and K all parallel: Cauchy–Schwarz is attained, so both rules give the same R
    q = rng.normal(size=4)
    Q, K = np.outer(np.arange(1.0, 6.0), q) * 0.3, np.outer(np.arange(1.0, 8.0), q) * 0.2
    V, dO = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    poly = functools.partial(pm.exp_poly, eps=1e-3)
    tight = kn.observed_range_kernel(poly, per_octave=0)
    wide = kn.dense_polynomial_kernel(poly, per_octave=0)
    assert np.allclose(tight.forward(Q, K, V, 0.5), wide.forward(Q, K, V, 0.5), atol=1e-13)
    for a, b in zip(tight.backward(Q, K, V, dO, 0.5), wide.backward(Q, K, V, dO, 0.5), strict=True):
        assert np.allclose(a, b, atol=1e-13)
    # random rows: the observed range is smaller than the Cauchy–Schwarz one
    Q, K = rng.normal(size=(6, 4)), rng.normal(size=(7, 4))
    tight.forward(Q, K, V, 0.5)
    R = max(tight.ranges)
    assert R == pytest.approx(0.5 * np.abs(Q @ K.T).max())
    cs = 0.5 * np.linalg.norm(Q, axis=1).max() * np.linalg.norm(K, axis=1).max()
    assert R < cs


def test_observed_range_kernel_rejects_bad_input():
    with pytest.raises(AttnInputError, match="poly_for_range"):
        kn.observed_range_kernel(3.0)
    with pytest.raises(AttnInputError, match="per_octave"):
        kn.observed_range_kernel(pm.exp_poly, per_octave=-1)


BAD_INPUT = [
    (
        lambda: kn._kernel_from_functions("x", None, None),
        "forward_fn and backward_fn must be callable",
    ),
    (lambda: kn.dense_polynomial_kernel(3.0), "poly_for_range must be a callable"),
    (lambda: kn.with_fallback(len), "primary must be an AttentionKernel"),
]


@pytest.mark.parametrize("call,message", BAD_INPUT)
def test_bad_input(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()
