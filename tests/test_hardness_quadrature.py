"""The analyticity bound on Gauss-Legendre quadrature of f(lambda) = ||softmax(lambda tau Q K^T)
V||_F^2 (attnlib.hardness.quadrature): it bounds the error of the estimate from gradients and
falls geometrically in the nodes, it is zero for constant rows, the node count it certifies is
the first that meets the tolerance, and wide logits and bad input are named."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import GRAD, f_direct, gap_instance, ov_instance, random_instance

from attnlib import AttnInputError
from attnlib import hardness as hd


# ---------------------------------------------------------------- the analyticity bound
@pytest.mark.parametrize(
    "instance",
    [
        lambda: random_instance(0),
        lambda: random_instance(1, n=12, m=10, size=3.0),
        lambda: gap_instance(16, True, 0),
        lambda: ov_instance(16, True, 1),
    ],
)
def test_gauss_legendre_bound_holds_and_falls_geometrically(instance):
    Q, K, V, tau = instance()
    truth = f_direct(Q, K, V, 1.0, tau)
    bounds = []
    for N in (2, 4, 8, 16, 32):
        est = hd.attention_from_gradient(Q, K, V, GRAD, nodes=N, scale=tau)
        bound = hd.gauss_legendre_error_bound(Q, K, V, N, scale=tau)
        # the proposition is exact arithmetic: allow the rounding of the N-term sum on top
        assert abs(est - truth) <= bound + 1e-12 * max(1.0, abs(truth))
        bounds.append(bound)
    assert all(b2 < b1 for b1, b2 in zip(bounds, bounds[1:], strict=False))


def test_gauss_legendre_bound_is_zero_for_constant_rows():
    Q = np.zeros((3, 2))
    assert hd.gauss_legendre_error_bound(Q, np.ones((4, 2)), np.ones((4, 1)), 4) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"nodes": 0},
        {"nodes": 1},
        {"nodes": 2.5},
        {"nodes": 8, "scale": -1.0},
        {"nodes": 8, "grid": 0},
    ],
)
def test_gauss_legendre_bound_rejects_bad_input(kwargs):
    Q, K, V, _ = random_instance(0)
    nodes = kwargs.pop("nodes")
    with pytest.raises(AttnInputError, match=next(iter(kwargs), "nodes")):
        hd.gauss_legendre_error_bound(Q, K, V, nodes, **kwargs)


def test_gauss_legendre_bound_uses_n_minus_one_in_the_exponent():
    # Trefethen's Thm 19.3 is stated for n + 1 points: N nodes give ρ^(-2(N-1)). On this
    # instance the 2-node rule errs by about 4e-11 (far above rounding), more than the
    # bound with ρ^(-2N) (about 1e-12) allows, and less than the bound with ρ^(-2(N-1)).
    Q, K, V = (
        np.array([[0.42, 0.5]]),
        np.array([[-0.69, 1.0], [0.47, -0.19]]),
        np.array([[-0.82], [-0.97]]),
    )
    err = abs(
        hd.attention_from_gradient(Q, K, V, GRAD, nodes=2)
        - f_direct(Q, K, V, 1.0, 1 / math.sqrt(2))
    )
    bound = hd.gauss_legendre_error_bound(Q, K, V, 2)
    S = Q @ K.T / math.sqrt(2)
    w = S.max(axis=1) - S.min(axis=1)
    theta = (np.arange(256) + 0.5) / 256
    y, c = theta * math.pi / w.max(), np.cos(theta * math.pi / 2)
    rho = 2 * y + np.sqrt(1 + 4 * y**2)
    phi = V.shape[1] * np.abs(V).max() ** 2 * w.sum() * (1 + 1 / c) / c**2
    old = float((32 / 15 * phi * rho ** (-2.0 * 2) / (rho**2 - 1)).min())
    assert 1e-11 < err <= bound and old < err / 10


# ---------------------------------------------------------------- guaranteed node counts
@pytest.mark.parametrize("instance", [random_instance(0), ov_instance(16, True, 0)])
def test_gauss_legendre_nodes_needed_is_the_first_certified_count(instance):
    Q, K, V, tau = instance
    for tol in (1e-3, 1e-6, 1e-9):
        N = hd.gauss_legendre_nodes_needed(Q, K, V, tol, scale=tau)
        assert hd.gauss_legendre_error_bound(Q, K, V, N, scale=tau) <= tol
        if N > 2:
            assert hd.gauss_legendre_error_bound(Q, K, V, N - 1, scale=tau) > tol


def test_gauss_legendre_nodes_needed_refuses_an_unreachable_tolerance():
    Q, K, V, tau = ov_instance(16, True, 0)
    with pytest.raises(AttnInputError, match="max_nodes"):
        hd.gauss_legendre_nodes_needed(Q, K, V, 1e-9, scale=tau, max_nodes=2)
    with pytest.raises(AttnInputError, match="tol"):
        hd.gauss_legendre_nodes_needed(Q, K, V, 0.0, scale=tau)


def test_gauss_legendre_bound_names_wide_logits_and_stays_a_bound():
    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal(s) for s in ((6, 4), (5, 4), (5, 3)))
    # logits 1e300 wide: the bound overflows because of them, not of V
    with pytest.raises(AttnInputError, match="logits' rows too wide"):
        hd.gauss_legendre_error_bound(Q * 1e150, K * 1e150, V, 8)
    # a width below 1e-300: the strip is huge and the bound the smallest float, not NaN
    assert hd.gauss_legendre_error_bound(Q, K, V, 8, scale=5e-324) == math.ulp(0.0)
    # the bound as written, (32/15)·Φ(y)·ρ^(-2(N-1))/(ρ² − 1), against its stable evaluation
    S = Q @ K.T / 2
    w = S.max(axis=1) - S.min(axis=1)
    theta = (np.arange(256) + 0.5) / 256
    y, c = theta * math.pi / w.max(), np.cos(theta * math.pi / 2)
    rho = 2 * y + np.sqrt(1 + 4 * y**2)
    phi = V.shape[1] * np.abs(V).max() ** 2 * w.sum() * (1 + 1 / c) / c**2
    for N in (2, 8, 32):
        direct = float((32 / 15 * phi * rho ** (-2.0 * (N - 1)) / (rho**2 - 1)).min())
        assert math.isclose(hd.gauss_legendre_error_bound(Q, K, V, N), direct, rel_tol=1e-12)
