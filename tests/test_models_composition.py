"""The composition bound of attnlib.models.composition: the Lipschitz constants against the
norm of the explicit Jacobian, the bound above the measured error for accurate and for coarse
kernels, zero for the exact kernel, and inputs never modified."""

from __future__ import annotations

import functools

import numpy as np

import attnlib.polymethod as pm
from attnlib.models import composition as cm
from attnlib.models import kernels as kn
from attnlib.models import stack as st


def _explicit_jacobian_norms(stack, X):
    """‖J_ℓ‖₂ of every layer from the explicit Jacobian, built column by column from the
    exact backward pass (one vector–Jacobian product per output entry)."""
    _, caches = stack.forward(X, kn.STANDARD)
    norms = []
    for w, c in zip(stack.layers, caches, strict=True):
        rows = []
        for j in range(X.size):
            e = np.zeros(X.size)
            e[j] = 1.0
            rows.append(stack._layer_backward(e.reshape(X.shape), w, c, kn.STANDARD)[0].ravel())
        norms.append(np.linalg.norm(np.array(rows), 2))
    return norms


def test_lipschitz_constants_match_the_explicit_jacobian(rng):
    for ffn in (False, True):
        stack = st.random_stack(3, 8, 2, seed=4, ffn=ffn, weight_scale=0.8)
        X = rng.normal(size=(4, 8))
        got = cm.layer_lipschitz(stack, X, iterations=200)
        want = _explicit_jacobian_norms(stack, X)
        assert np.allclose(got, want, rtol=1e-6), (got, want)


def test_few_iterations_approach_the_norm_from_below(rng):
    stack = st.random_stack(2, 8, 2, seed=5, weight_scale=0.8)
    X = rng.normal(size=(4, 8))
    want = _explicit_jacobian_norms(stack, X)
    got = cm.layer_lipschitz(stack, X, iterations=1)
    assert all(g <= w * (1 + 1e-8) for g, w in zip(got, want, strict=True))


def test_bound_is_above_the_measured_error_and_zero_for_the_exact_kernel(rng):
    stack = st.random_stack(6, 16, 2, seed=2, weight_scale=0.7)
    X, G = rng.normal(size=(12, 16)), rng.normal(size=(12, 16))
    X0, G0 = X.copy(), G.copy()
    lam = cm.layer_lipschitz(stack, X)
    exact = cm.depth_error_bound(stack, X, G, kn._standard_kernel(), lipschitz=lam)
    assert exact.bound == exact.measured == (0.0,) * 6 and exact.local == (0.0,) * 6
    kernels = {
        "eps=1e-2": kn.dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=1e-2)),
        "eps=1e-6": kn.dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=1e-6)),
        "degree 2": kn.observed_range_kernel(functools.partial(pm.exp_poly_of_degree, g=2)),
    }
    tops = {}
    for name, kern in kernels.items():
        b = cm.depth_error_bound(stack, X, G, kern, lipschitz=lam)
        assert all(0 < m <= u for m, u in zip(b.measured, b.bound, strict=True)), name
        # one layer: the bound is the local error times ‖g_L‖/‖g_{L-1}‖, attained when the
        # top gradient is exact, so it equals the measured error up to rounding
        assert np.isclose(b.bound[0], b.measured[0], rtol=1e-9), name
        assert list(b.lipschitz) == list(lam[::-1])
        tops[name] = b.bound[-1]
    assert tops["eps=1e-6"] < tops["eps=1e-2"] < tops["degree 2"]
    assert np.array_equal(X, X0) and np.array_equal(G, G0)


def test_the_recursion_by_hand():
    """The bound is E_k = (λ + η) E_{k−1} + η ‖g_{L−k+1}‖ over ‖g_{L−k}‖: recomputed here from
    the returned λ and η and the exact gradients."""
    stack = st.random_stack(4, 8, 2, seed=1, weight_scale=0.7)
    rng = np.random.default_rng(3)
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    kern = kn.observed_range_kernel(functools.partial(pm.exp_poly_of_degree, g=3))
    b = cm.depth_error_bound(stack, X, G, kern)
    hidden = stack.backward(stack.forward(X)[1], G, return_hidden=True)[2]
    E = 0.0
    for k in range(1, 5):
        lam, eta = b.lipschitz[k - 1], b.local[k - 1]
        E = (lam + eta) * E + eta * np.linalg.norm(hidden[5 - k])
        assert np.isclose(b.bound[k - 1], E / np.linalg.norm(hidden[4 - k]), rtol=1e-12)
