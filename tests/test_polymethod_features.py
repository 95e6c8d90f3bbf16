"""poly_features, the rank formulas, multi_indices and the row-wise Kronecker product."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from helpers import rel_err

from attnlib import AttnInputError
from attnlib import polymethod as pm


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("g", [0, 1, 2, 4, 8])
def test_poly_features_reproduce_the_polynomial(rng, d, g):
    n, m = 13, 11
    Q = rng.uniform(-1.5, 1.5, (n, d))
    K = rng.uniform(-1.5, 1.5, (m, d))
    coef = rng.standard_normal(g + 1)
    poly = np.polynomial.Polynomial(coef)
    scale = 1.0 / d
    U, V = pm.poly_features(Q, K, poly, scale=scale)
    r = math.comb(g + d, d)
    assert U.shape == (n, r) and V.shape == (m, r)
    assert rel_err(U @ V.T, poly(scale * (Q @ K.T))) < 1e-10


@pytest.mark.parametrize("d", [2, 8])
def test_poly_features_with_exp_poly_and_other_bases(rng, d):
    Q = rng.uniform(-1, 1, (9, d))
    K = rng.uniform(-1, 1, (7, d))
    p = pm.exp_poly(1.0, 1e-6)  # degree 7
    U, V = pm.poly_features(Q, K, p, scale=1 / math.sqrt(d))
    S = Q @ K.T / math.sqrt(d)
    assert rel_err(U @ V.T, p(S)) < 1e-10
    # a Chebyshev-basis polynomial on another domain is converted to monomials of x
    c = np.polynomial.Chebyshev([0.3, -1.0, 0.5, 0.25], domain=[-2, 2])
    U, V = pm.poly_features(Q, K, c, scale=0.5)
    assert rel_err(U @ V.T, c(0.5 * (Q @ K.T))) < 1e-10
    # a plain coefficient list works too, and the dtype follows float32 inputs
    U, V = pm.poly_features(Q.astype(np.float32), K.astype(np.float32), [1, 2, 3], scale=1.0)
    assert U.dtype == np.float32
    assert rel_err(U @ V.T, 1 + 2 * (Q @ K.T) + 3 * (Q @ K.T) ** 2) < 1e-5


def test_feature_columns_are_the_multinomial_terms(rng):
    d, g = 3, 4
    alphas = pm.multi_indices(d, g)
    assert alphas.shape == (pm.feature_rank(d, g), d)
    assert len({tuple(a) for a in alphas}) == alphas.shape[0]  # all distinct
    assert alphas.sum(axis=1).max() == g and alphas.min() == 0
    assert list(alphas.sum(axis=1)) == sorted(alphas.sum(axis=1))  # graded order
    Q = rng.uniform(-1, 1, (5, d))
    K = rng.uniform(-1, 1, (4, d))
    coef = np.arange(1.0, g + 2)
    tau = 0.7
    U, V = pm.poly_features(Q, K, coef, scale=tau)
    for col, a in enumerate(alphas):
        k = int(a.sum())
        multinomial = math.factorial(k) / math.prod(math.factorial(int(x)) for x in a)
        assert np.allclose(V[:, col], np.prod(K**a, axis=1), rtol=1e-14)
        expect_u = coef[k] * multinomial * tau**k * np.prod(Q**a, axis=1)
        assert np.allclose(U[:, col], expect_u, rtol=1e-13)


def test_multi_indices_count_every_composition():
    for d in range(1, 6):
        for g in range(0, 6):
            alphas = pm.multi_indices(d, g)
            counts = Counter(alphas.sum(axis=1).tolist())
            for k in range(g + 1):
                assert counts[k] == math.comb(k + d - 1, d - 1)


def test_rank_formulas():
    assert pm.feature_rank(8, 4) == math.comb(12, 8) == 495
    assert pm.as23_rank_bound(8, 4) == math.comb(24, 8)
    for d in range(1, 10):
        for g in range(0, 10):
            assert pm.as23_rank_bound(d, g) >= pm.feature_rank(d, g)
    assert pm.feature_rank(64, 2) == 2145 and pm.feature_rank(64, 4) == 814385


def test_rowwise_kron_identity(rng):
    n, m = 6, 5
    A, B = rng.standard_normal((n, 3)), rng.standard_normal((n, 4))
    C, D = rng.standard_normal((m, 3)), rng.standard_normal((m, 4))
    AB = pm.rowwise_kron(A, B)
    assert AB.shape == (n, 12)
    assert np.allclose(AB[2], np.kron(A[2], B[2]), rtol=0, atol=1e-15)
    assert rel_err(AB @ pm.rowwise_kron(C, D).T, (A @ C.T) * (B @ D.T)) < 1e-13


def test_no_loop_over_rows_scales_to_many_rows(rng):
    # 2e5 rows at d=4, g=3 (rank 35): a Python loop over rows would take seconds, this is one
    # gather per degree. The value check is what can fail here.
    Q = rng.uniform(-1, 1, (200_000, 4))
    K = Q[:3]
    U, V = pm.poly_features(Q, K, [1.0, 1.0, 0.5, 1 / 6], scale=0.25)
    S = 0.25 * (Q @ K.T)
    assert rel_err(U @ V.T, 1 + S + S**2 / 2 + S**3 / 6) < 1e-12


BAD_INPUTS = [
    (
        lambda Q, K: pm.poly_features(Q.astype(int), K, [1.0, 1.0], scale=1.0),
        "Q must have a float32 or float64 dtype",
    ),
    (
        lambda Q, K: pm.poly_features(Q, K[:, :2], [1.0, 1.0], scale=1.0),
        "K must have d=3 columns like Q, got 2",
    ),
    (
        lambda Q, K: pm.poly_features(Q, K, [1.0, 1.0], scale=0.0),
        "scale must be a positive finite real number",
    ),
    (
        lambda Q, K: pm.poly_features(Q, K, [1.0, np.nan], scale=1.0),
        "poly coefficients must be finite",
    ),
    (
        lambda Q, K: pm.poly_features(np.full((2, 3), np.inf), K, [1.0], scale=1.0),
        "Q must be finite",
    ),
    (lambda Q, K: pm.rowwise_kron(np.ones((6, 2)), np.ones((5, 2))), "B must have n=6 rows like A"),
    (lambda Q, K: pm.feature_rank(0, 3), "d must be an integer >= 1"),
    (lambda Q, K: pm.as23_rank_bound(3, -1), "g must be an integer >= 0"),
    (lambda Q, K: pm.multi_indices(3, 2.5), "g must be an integer >= 0"),
]


@pytest.mark.parametrize("call,message", BAD_INPUTS)
def test_bad_inputs(rng, call, message):
    Q = rng.standard_normal((4, 3))
    K = rng.standard_normal((5, 3))
    with pytest.raises(AttnInputError, match=message):
        call(Q, K)


@pytest.mark.parametrize(
    "q, k, scale",
    [
        (1e200, 1e-200, 0.5),
        (1e-150, 1e-150, 1e300),
        (1e150, 1e150, 1e-300),
        (1e-100, 1e-100, 1e308),
    ],
)
def test_poly_features_balances_factors_beyond_the_exponent_range(rng, q, k, scale):
    """τ^k, max|Q|^k or max|K|^k beyond 2^(±512): the map is built for 2^-a·τQ and 2^a·K, whose
    product is the same logits, instead of overflowing (or raising OverflowError for τ^k)."""
    Q, K = q * rng.uniform(-1, 1, (5, 3)), k * rng.uniform(-1, 1, (4, 3))
    coef = [1.0, 1.0, 0.5, 1 / 6, 1 / 24]
    U, V = pm.poly_features(Q, K, coef, scale=scale)
    assert np.isfinite(U).all() and np.isfinite(V).all()
    S = scale * (Q @ K.T)
    if np.abs(S).max() < 1e60:  # then the polynomial of the logits is finite too
        assert rel_err(U @ V.T, np.polynomial.polynomial.polyval(S, coef)) < 1e-13


def test_poly_features_refuses_entries_beyond_the_float_range(rng):
    Q, K = 1e200 * rng.uniform(-1, 1, (5, 3)), 1e200 * rng.uniform(-1, 1, (4, 3))
    with pytest.raises(AttnInputError, match="overflows float64: the monomials of Q, K"):
        pm.poly_features(Q, K, [1.0, 1.0, 0.5], scale=1.0)
    with pytest.raises(AttnInputError, match="rowwise_kron's products overflow float64"):
        pm.rowwise_kron(np.full((2, 3), 1e200), np.full((2, 2), 1e200))
    with pytest.raises(AttnInputError, match="overflow float32"):
        pm.rowwise_kron(np.full((2, 3), 1e20, np.float32), np.full((2, 2), 1e20, np.float32))
