"""Attention → gradient (AS24 Thm E.5): ‖Att‖²_F from gradient calls, Gauss–Legendre vs Riemann."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import GRAD, f_direct, gap_instance, ov_instance, random_instance

import attnlib as al
from attnlib import AttnInputError
from attnlib import hardness as hd


# ---------------------------------------------------------------- the identity
@pytest.mark.parametrize(
    "shape", [(7, 9, 4, 3), (5, 5, 3, 3), (4, 6, 2, 5), (6, 3, 5, 1)]
)  # (n, m, d, d_v): d_v < d, = d and > d all work (zero padding)
@pytest.mark.parametrize("scale", [None, "1/d", 0.7])
def test_derivative_is_twice_the_trace_of_the_gradient(shape, scale):
    n, m, d, dv = shape
    Q, K, V, _ = random_instance(sum(shape), n, m, d, dv)
    sc = 1 / d if scale == "1/d" else scale
    tau = sc if sc is not None else 1 / math.sqrt(d)
    h = 1e-5
    for lam in (0.05, 0.4, 1.0, 1.7):
        fd = (f_direct(Q, K, V, lam + h, tau) - f_direct(Q, K, V, lam - h, tau)) / (2 * h)
        got = hd.norm_derivative_from_gradient(Q, K, V, lam, GRAD, scale=sc)
        assert got == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_as24_convention_uses_A1_equal_Q():
    """With τ = 1/d the gradient is evaluated at A₁ = Q itself (AS24 Thm E.5's proof)."""
    Q, K, V, _ = random_instance(3, d=3, dv=3)
    seen = {}

    def spy(X, A1, A2, A3, Y, E):
        seen.update(A1=A1, A2=A2, A3=A3, Y=Y, E=E, X=X)
        return GRAD(X, A1, A2, A3, Y, E)

    hd.norm_derivative_from_gradient(Q, K, V, 0.3, spy, scale=1 / 3)
    assert np.array_equal(seen["A1"], Q) and np.array_equal(seen["A2"], K)
    assert np.array_equal(seen["A3"], V) and np.array_equal(seen["Y"], np.eye(3))
    assert not seen["E"].any() and np.array_equal(seen["X"], 0.3 * np.eye(3))


def test_f0_is_exact_and_needs_no_gradient():
    Q, K, V, tau = random_instance(4)
    zero = lambda X, *rest: np.zeros_like(X)  # noqa: E731  f' = 0: the estimate is f(0)
    f0 = hd.attention_from_gradient(Q, K, V, zero, nodes=3)
    assert f0 == pytest.approx(f_direct(Q, K, V, 1e-14, tau), rel=1e-12)


# ---------------------------------------------------------------- Gauss–Legendre
CASES = (
    [("random", s) for s in range(3)]
    + [("ov", (n, o)) for n in (16, 64) for o in (True, False)]
    + [("gap", (n, p)) for n in (16, 32) for p in (True, False)]
)


def build(kind, arg):
    if kind == "random":
        return random_instance(arg)
    if kind == "ov":
        return ov_instance(*arg, seed=1)
    return gap_instance(*arg, seed=1)


@pytest.mark.parametrize("kind, arg", CASES)
def test_gauss_legendre_recovers_f1_and_riemann_is_measurably_worse(kind, arg):
    Q, K, V, tau = build(kind, arg)
    truth = f_direct(Q, K, V, 1.0, tau)
    tol = 1e-6 * max(1.0, abs(truth))
    errs = {
        N: abs(hd.attention_from_gradient(Q, K, V, GRAD, nodes=N, scale=tau) - truth)
        for N in (8, 64)
    }
    assert errs[64] <= tol, errs
    riemann = abs(hd.riemann_from_gradient(Q, K, V, GRAD, nodes=256, scale=tau) - truth)
    # 256 Riemann nodes lose to 64 Gauss–Legendre nodes by orders of magnitude
    assert riemann > 1e-3 and riemann > 1e4 * max(errs[64], 1e-15), (riemann, errs)


def test_default_nodes_and_scale_recover_attention():
    Q, K, V, tau = random_instance(11)
    got = hd.attention_from_gradient(Q, K, V, GRAD)  # 32 nodes, τ = 1/√d
    assert got == pytest.approx(f_direct(Q, K, V, 1.0, tau), rel=1e-9)


def test_riemann_matches_its_own_definition():
    Q, K, V, tau = random_instance(5)
    N = 10
    by_hand = (
        f_direct(Q, K, V, 1e-14, tau)
        + sum(hd.norm_derivative_from_gradient(Q, K, V, i / N, GRAD) for i in range(N)) / N
    )
    assert hd.riemann_from_gradient(Q, K, V, GRAD, nodes=N) == pytest.approx(by_hand, rel=1e-12)


# ---------------------------------------------------------------- noisy gradients
@pytest.mark.parametrize("n", [8, 16, 32])
def test_gap_ann_decided_from_noisy_gradients(n):
    """Exact gradient + 1e-3 relative noise: f(1) ≥ 1/4 still separates YES from NO."""
    for seed in range(3):
        for planted in (True, False):
            Q, K, V, tau = gap_instance(n, planted, seed)
            est = hd.attention_from_gradient(
                Q, K, V, hd.noisy_gradient(GRAD, 1e-3, 100 + seed), nodes=32, scale=tau
            )
            # YES: some row's mass > 0.93, so f(1) > 0.86; NO: f(1) < n·(e^-2/n²)² ≈ 0
            if planted:
                assert est > 0.8
            else:
                assert abs(est) < 0.1
            assert (est >= 0.25) == planted


# ---------------------------------------------------------------- bad input
BAD_GRAD_FN = [
    (lambda Q, K, V: hd.attention_from_gradient(Q, K, V, "grad"), "grad_fn must be callable"),
    (
        lambda Q, K, V: hd.attention_from_gradient(Q, K, V, lambda *a: np.zeros((3, 3))),
        r"grad_fn must return a finite \(4, 4\)",
    ),
    (
        lambda Q, K, V: hd.riemann_from_gradient(
            Q, K, V, lambda *a: np.full((4, 4), np.nan), nodes=2
        ),
        r"grad_fn must return a finite \(4, 4\)",
    ),
    (
        lambda Q, K, V: hd.norm_derivative_from_gradient(Q, K, V, 0.5, lambda *a: "x"),
        "grad_fn must return",
    ),
]


@pytest.mark.parametrize("call,message", BAD_GRAD_FN)
def test_bad_grad_fn(call, message):
    Q, K, V, _ = random_instance(0)
    with pytest.raises(AttnInputError, match=message):
        call(Q, K, V)


# Bad Q, K and V: test_qkv_inputs.py.
BAD_QUADRATURE = [
    (dict(nodes=0), "nodes must be an integer >= 1"),
    (dict(nodes=2.5), "nodes must be an integer"),
    (dict(scale=0.0), "scale must be a positive finite real"),
]


@pytest.mark.parametrize("fn", [hd.attention_from_gradient, hd.riemann_from_gradient])
@pytest.mark.parametrize("kwargs,message", BAD_QUADRATURE)
def test_bad_quadrature_arguments(fn, kwargs, message):
    Q, K, V, _ = random_instance(0)
    with pytest.raises(AttnInputError, match=message):
        fn(Q, K, V, GRAD, **kwargs)


def test_gauss_legendre_node_cap():
    Q, K, V, _ = random_instance(0)
    with pytest.raises(AttnInputError, match="nodes must be an integer <= 4096"):
        hd.attention_from_gradient(Q, K, V, GRAD, nodes=5000)


@pytest.mark.parametrize("lam", [float("nan"), "0.5", None, True])
def test_bad_lambda(lam):
    Q, K, V, _ = random_instance(0)
    with pytest.raises(AttnInputError, match="lam must be a finite real number"):
        hd.norm_derivative_from_gradient(Q, K, V, lam, GRAD)


# ---------------------------------------------------------------- f(λ) directly
@pytest.mark.parametrize("lam", [0.25, 1.0, 3.0])
@pytest.mark.parametrize("scale", [None, 0.5])
def test_attention_norm_squared_is_the_forward_pass(lam, scale):
    Q, K, V, tau = random_instance(3)
    tau = tau if scale is None else scale
    assert hd.attention_norm_squared(Q, K, V, lam=lam, scale=scale) == f_direct(Q, K, V, lam, tau)


def test_attention_norm_squared_at_zero_is_the_limit():
    Q, K, V, tau = random_instance(4)
    f0 = hd.attention_norm_squared(Q, K, V, lam=0.0)
    assert f0 == pytest.approx(f_direct(Q, K, V, 1e-9, tau), rel=1e-7)
    # the quadrature starts from the same f(0)
    assert hd.attention_from_gradient(Q, K, V, lambda *a: np.zeros((4, 4)), nodes=2) == f0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda Q, K, V: hd.attention_norm_squared(Q, K, V, lam=-1.0), "lam"),
        (lambda Q, K, V: hd.attention_norm_squared(Q, K, V, lam=math.inf), "lam"),
        (lambda Q, K, V: hd.attention_norm_squared(Q, K, V[:-1], lam=0.0), "V"),
        (lambda Q, K, V: hd.attention_norm_squared(Q, K, V, scale=0.0), "scale"),
        (lambda Q, K, V: hd.attention_norm_squared(Q, K[:, :2], V), "K"),
    ],
)
def test_attention_norm_squared_rejects_bad_input(call, match):
    Q, K, V, _ = random_instance(0)
    with pytest.raises(AttnInputError, match=match):
        call(Q, K, V)


# ---------------------------------------------------------------- noise
def test_noisy_gradient_adds_relative_gaussian_noise():
    Q, K, V, tau = random_instance(5)
    args = (np.eye(4), Q, K, V[:, :3] @ np.ones((3, 4)), np.eye(4), np.zeros((7, 4)))
    G = GRAD(*args)
    noisy = hd.noisy_gradient(GRAD, 1e-3, np.random.default_rng(1))
    xi = np.random.default_rng(1).standard_normal(G.shape)
    np.testing.assert_array_equal(noisy(*args), G + 1e-3 * np.abs(G).max() * xi)
    # a shared generator draws fresh noise on every call; a seed is the same as its generator
    assert not np.array_equal(noisy(*args), noisy(*args))
    np.testing.assert_array_equal(
        hd.noisy_gradient(GRAD, 0.5, 7)(*args),
        hd.noisy_gradient(GRAD, 0.5, np.random.default_rng(7))(*args),
    )
    np.testing.assert_array_equal(hd.noisy_gradient(GRAD, 0.0, 0)(*args), G)


@pytest.mark.parametrize(
    "args, match",
    [((None, 1e-3, 0), "grad_fn"), ((GRAD, -1.0, 0), "rel"), ((GRAD, 1e-3, "0"), "rng")],
)
def test_noisy_gradient_rejects_bad_input(args, match):
    with pytest.raises(AttnInputError, match=match):
        hd.noisy_gradient(*args)


def test_lambda_and_the_embedding_are_named_when_they_overflow():
    rng = np.random.default_rng(4)
    Q, K, V = (rng.standard_normal(s) for s in ((6, 4), (5, 4), (5, 3)))
    with pytest.raises(AttnInputError, match="lam=1e\\+300 is too large"):
        hd.attention_norm_squared(Q, K, V, lam=1e300, scale=1e10)
    with pytest.raises(AttnInputError, match="lam=10000000000.0 is too large"):
        hd.attention_norm_squared(Q * 1e150, K * 1e150, V, lam=1e10)
    # λτ below the smallest float: the weights are uniform, f(λ) = f(0)
    f0 = hd.attention_norm_squared(Q, K, V, lam=0.0)
    assert hd.attention_norm_squared(Q, K, V, lam=1e-300, scale=1e-100) == f0
    with pytest.raises(AttnInputError, match="Q, K or scale is too large"):
        hd.attention_from_gradient(Q, K, V, al.attention_loss_grad, nodes=2, scale=1e308)
    with pytest.raises(AttnInputError, match="lam, Q, K or scale is too large"):
        hd.norm_derivative_from_gradient(Q, K, V, 1e308, al.attention_loss_grad)

    def refuses(*args):
        raise AttnInputError("A1 is not to my liking")

    with pytest.raises(AttnInputError, match="grad_fn refused the loss's embedding"):
        hd.attention_from_gradient(Q, K, V, refuses, nodes=2)


def test_noisy_gradient_checks_what_grad_fn_returns():
    assert np.array_equal(hd.noisy_gradient(lambda *a: [[1.0, 2.0]], 0.0, 0)(), [[1.0, 2.0]])
    with pytest.raises(AttnInputError, match="grad_fn must return a non-empty finite real"):
        hd.noisy_gradient(lambda *a: "G", 0.1, 0)()
    with pytest.raises(AttnInputError, match="rel=10000000000.0 is too large"):
        hd.noisy_gradient(lambda *a: np.full((2, 2), 1e300), 1e10, 0)()
