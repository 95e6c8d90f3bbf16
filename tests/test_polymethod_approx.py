"""approx_attention, approx_attention_backward and approx_attention_loss_grad against exact."""

from __future__ import annotations

import math
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import rel_err

import attnlib as al
from attnlib import AttnInputError
from attnlib import polymethod as pm
from attnlib.config import RANGE_STEPS_PER_OCTAVE

EPS_LADDER = [1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]


def _loss_inputs(rng, n, d, B, m=None):
    return pm.bounded_loss_inputs(n, d, B, rng, m=m)


@pytest.mark.parametrize("eps", [1e-1, 1e-3, 1e-6])
@pytest.mark.parametrize("B", [0.5, 1.0, 1.5])
def test_forward_error_within_the_derived_bound(rng, eps, B):
    n, m, d, dv = 70, 50, 4, 3
    Q = rng.uniform(-B, B, (n, d))
    K = rng.uniform(-B, B, (m, d))
    V = rng.standard_normal((m, dv))
    O, plan = pm.approx_attention(Q, K, V, eps=eps, scale=1 / d, return_plan=True)
    exact = al.attention(Q, K, V, scale=1 / d)
    bound = pm.forward_error_bound(eps, np.abs(V).max())
    err = float(np.abs(O - exact).max())
    assert err <= bound + 1e-12
    assert err > 0  # an approximation, not the exact softmax in disguise
    # the plan: degree from the actual logit range, rank C(g+d, d)
    S = np.abs(Q @ K.T / d).max()
    assert (
        S
        <= pm.logit_range(Q, K, scale=1 / d)
        <= plan.R
        <= B * B * 2 ** (1 / RANGE_STEPS_PER_OCTAVE)
    )
    assert plan.degree == pm.least_degree(plan.R, eps)
    assert plan.rank == math.comb(plan.degree + d, d)


def test_forward_default_scale_dtype_and_rectangular(rng):
    Q = rng.uniform(-1, 1, (20, 6)).astype(np.float32)
    K = rng.uniform(-1, 1, (33, 6)).astype(np.float32)
    V = rng.standard_normal((33, 2)).astype(np.float32)
    O = pm.approx_attention(Q, K, V, eps=1e-4)
    assert O.dtype == np.float32 and O.shape == (20, 2)
    exact = al.attention(Q.astype(float), K.astype(float), V.astype(float))
    assert np.abs(O - exact).max() <= pm.forward_error_bound(1e-4, np.abs(V).max()) + 1e-6


def test_backward_matches_exact_and_improves_with_eps(rng):
    n, m, d, dv = 60, 45, 4, 3
    Q, K = rng.uniform(-1.2, 1.2, (n, d)), rng.uniform(-1.2, 1.2, (m, d))
    V, dO = rng.standard_normal((m, dv)), rng.standard_normal((n, dv))
    O, lse = al.attention_forward(Q, K, V)
    exact = al.attention_backward(Q, K, V, O, dO, lse)
    errs = []
    for eps in [1e-2, 1e-4, 1e-6, 1e-8]:
        approx = pm.approx_attention_backward(Q, K, V, dO, eps=eps)
        assert [a.shape for a in approx] == [(n, d), (m, d), (m, dv)]
        errs.append(max(rel_err(a, b) for a, b in zip(approx, exact, strict=True)))
    assert errs[-1] < 1e-6
    assert np.all(np.diff(errs) < 0), errs


def test_backward_plan_and_the_loss_gradient_through_it(rng):
    n, d = 40, 4
    X, A1, A2, A3, Y, E = _loss_inputs(rng, n, d, 1.0)
    eps = 1e-4
    G, plan = pm.approx_attention_loss_grad(X, A1, A2, A3, Y, E, eps=eps, return_plan=True)
    # AS24's gradient is A1ᵀ dQ of the QKV backward with Q = A1X, K = A2, V = A3Y, dO = c̃
    Q, K, V = A1 @ X, A2, A3 @ Y
    c = pm.approx_attention(Q, K, V, eps=eps, scale=1 / d) - E
    dQ, dK, dV, plan_b = pm.approx_attention_backward(
        Q, K, V, c, eps=eps, scale=1 / d, return_plan=True
    )
    assert plan_b == plan == pm.loss_plan(X, A1, A2, eps=eps)
    assert rel_err(A1.T @ dQ, G) < 1e-12


def test_loss_grad_error_falls_monotonically_with_eps(rng):
    X, A1, A2, A3, Y, E = _loss_inputs(rng, 64, 4, 1.6)
    exact = al.attention_loss_grad(X, A1, A2, A3, Y, E)
    errs, degrees = [], []
    for eps in EPS_LADDER:
        G, plan = pm.approx_attention_loss_grad(X, A1, A2, A3, Y, E, eps=eps, return_plan=True)
        errs.append(rel_err(G, exact))
        degrees.append(plan.degree)
    assert len(set(degrees)) == len(degrees), degrees  # each eps asks for a new degree
    assert np.all(np.diff(errs) < 0), errs
    assert errs[0] > 1e-3 and errs[-1] < 1e-7


def test_rank_over_budget_is_refused_before_allocating(rng):
    n, d = 30_000, 8
    Q = rng.uniform(-3, 3, (n, d))  # logit range up to 9 at τ = 1/d: degree ~27
    K = rng.uniform(-3, 3, (n, d))
    V = rng.standard_normal((n, d))
    tracemalloc.start()
    try:
        with pytest.raises(AttnInputError, match=r"rank r = C\(g\+d, d\).*over the memory budget"):
            pm.approx_attention(Q, K, V, eps=1e-3, scale=1 / d)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * n * d * 4  # a few input-sized temporaries at most, never the factors
    # an explicit small budget refuses a modest problem; a large one accepts it
    Qs, Ks, Vs = Q[:200] / 3, K[:200] / 3, V[:200]
    with pytest.raises(AttnInputError, match="memory budget of 0.1 MiB"):
        pm.approx_attention(Qs, Ks, Vs, eps=1e-3, memory_budget=0.1 * 2**20)
    pm.approx_attention(Qs, Ks, Vs, eps=1e-3, memory_budget=2**30)
    with pytest.raises(AttnInputError, match="over the memory budget"):
        pm.approx_attention_loss_grad(np.eye(d), Q, K, V, np.eye(d), np.zeros((n, d)), eps=1e-3)


def test_logit_range_beyond_double_precision_is_refused(rng):
    Q = rng.uniform(-10, 10, (10, 4))
    with pytest.raises(AttnInputError, match="logit range R = .* too large"):
        pm.approx_attention(Q, Q, Q, eps=1e-6, scale=1.0)


EPS_TAKERS = [
    lambda Q, loss, eps: pm.approx_attention(Q, Q, Q, eps=eps),
    lambda Q, loss, eps: pm.approx_attention_backward(Q, Q, Q, Q, eps=eps),
    lambda Q, loss, eps: pm.approx_attention_loss_grad(*loss, eps=eps),
    lambda Q, loss, eps: pm.approx_plan(Q, Q, eps=eps),
]


@pytest.mark.parametrize("call", EPS_TAKERS)
@pytest.mark.parametrize("eps", [0, 1, -1e-3, 2.0, math.nan, math.inf, None, "1e-3", True])
def test_bad_eps_everywhere(rng, call, eps):
    Q = rng.standard_normal((5, 3))
    X, A1, A2, A3, Y, E = _loss_inputs(rng, 5, 3, 1.0)
    msg = r"eps must be a real number in \(0, 1\)"
    with pytest.raises(AttnInputError, match=msg):
        call(Q, (X, A1, A2, A3, Y, E), eps)


# Bad Q, K and V: test_qkv_inputs.py.
BAD_SHAPES_AND_VALUES = [
    (
        lambda a: pm.approx_attention_backward(a.Q, a.K, a.V, np.ones((5, 3)), eps=0.1),
        r"dO must have shape \(n, d_v\) = \(5, 2\)",
    ),
    (
        lambda a: pm.approx_attention(a.Q, a.K, a.V, eps=0.1, scale=-1.0),
        "scale must be a positive finite real number",
    ),
    (lambda a: pm.approx_attention(a.Q, a.K, a.V, eps=0.1, kind="pade"), "kind must be one of"),
    (
        lambda a: pm.approx_attention(a.Q, a.K, a.V, eps=0.1, memory_budget=0),
        "memory_budget must be a positive finite real",
    ),
    (
        lambda a: pm.approx_attention_loss_grad(np.eye(2), a.A1, a.A2, a.A3, a.Y, a.E, eps=0.1),
        r"X must have shape \(d, d\) = \(3, 3\)",
    ),
    (
        lambda a: pm.approx_attention_loss_grad(a.X, a.A1, a.A2, a.A3, a.Y, a.E[:4], eps=0.1),
        r"E must have shape \(n, d\) like A1",
    ),
    (
        lambda a: pm.approx_attention_loss_grad(a.X, a.A1, a.A2, a.A3[:4], a.Y, a.E, eps=0.1),
        "A3 must have m=5 rows like A2",
    ),
    (lambda a: pm.forward_error_bound(0.1, -1.0), "V_max must be a finite number >= 0"),
    (lambda a: pm.forward_error_bound(0.1, "1"), "V_max must be a finite number >= 0"),
    # entries of 1e200 in Q alone give a finite (if hopeless) range, computed without overflow
    (
        lambda a: pm.approx_attention(np.full((2, 3), 1e200), a.K[:2], a.V[:2], eps=0.1),
        r"logit range R = 2\.575e\+200 .* too large",
    ),
    (
        lambda a: pm.approx_attention(
            np.full((2, 3), 1e200), np.full((2, 3), 1e200), a.V[:2], eps=0.1
        ),
        "logit range .* overflows a float: Q, K or scale",
    ),
]


@pytest.mark.parametrize("call,message", BAD_SHAPES_AND_VALUES)
def test_bad_shapes_and_values(rng, call, message):
    Q = rng.standard_normal((5, 3))
    K = rng.standard_normal((6, 3))
    V = rng.standard_normal((6, 2))
    X, A1, A2, A3, Y, E = _loss_inputs(rng, 5, 3, 1.0)
    a = SimpleNamespace(Q=Q, K=K, V=V, X=X, A1=A1, A2=A2, A3=A3, Y=Y, E=E)
    with pytest.raises(AttnInputError, match=message):
        call(a)


def test_zero_inputs_are_handled(rng):
    Q = np.zeros((4, 3))
    K = rng.standard_normal((5, 3))
    V = rng.standard_normal((5, 2))
    O, plan = pm.approx_attention(Q, K, V, eps=1e-3, return_plan=True)
    assert plan.degree == 0 and plan.rank == 1
    assert np.allclose(O, V.mean(axis=0), atol=1e-14)  # uniform softmax, exactly


def test_values_near_the_float_range_are_scaled_exactly(rng):
    """V and dO are scaled by powers of 2 before the factor products: the same bits for
    ordinary inputs (Õ is linear in V, dQ and dK bilinear in (V, dO)), and finite answers for
    V of 1e308, whose products with the factors used to overflow to inf and NaN."""
    Q, K = rng.uniform(-1, 1, (7, 4)), rng.uniform(-1, 1, (6, 4))
    V, dO = rng.standard_normal((6, 3)), rng.standard_normal((7, 3))
    O = pm.approx_attention(Q, K, V, eps=1e-4)
    grads = pm.approx_attention_backward(Q, K, V, dO, eps=1e-4)
    for a, b in ((200, -200), (-300, 250)):
        assert np.array_equal(pm.approx_attention(Q, K, np.ldexp(V, a), eps=1e-4), np.ldexp(O, a))
        scaled = pm.approx_attention_backward(Q, K, np.ldexp(V, a), np.ldexp(dO, b), eps=1e-4)
        for got, want, e in zip(scaled, grads, (a + b, a + b, b), strict=True):
            assert np.array_equal(got, np.ldexp(want, e))
    big = np.full((6, 3), 1e308)
    assert np.allclose(pm.approx_attention(Q, K, big, eps=1e-4), 1e308, rtol=1e-12)
    with pytest.raises(AttnInputError, match="dQ overflows float64: V, dO"):
        pm.approx_attention_backward(Q, K, big, np.full((7, 3), 1e300), eps=1e-4)


def test_unbalanced_q_and_k_give_the_same_attention(rng):
    """Q of 1e200 against K of 1e-200: the logits are ordinary, the monomials are not."""
    Q, K = rng.uniform(-1, 1, (7, 4)), rng.uniform(-1, 1, (6, 4))
    V = rng.standard_normal((6, 3))
    O = pm.approx_attention(Q, K, V, eps=1e-4)
    assert np.allclose(pm.approx_attention(Q * 1e200, K * 1e-200, V, eps=1e-4), O, atol=1e-12)


def test_loss_gradient_refuses_intermediates_beyond_the_float_range(rng):
    X, A1, A2, A3, Y, E = pm.bounded_loss_inputs(8, 3, 1.0, rng)
    for args in [(X, A1, A2, A3 * 1e300, Y, E), (X, A1, A2, A3, Y * 1e300, E)]:
        for f in (pm.approx_attention_loss_grad, pm.kronecker_loss_grad):
            with pytest.raises(AttnInputError, match="A3 @ Y or E is too large"):
                f(*args, eps=1e-3)
    # E of 1e300 alone: c̃ ≈ −E, but r̃ = rowsum(c̃ ∘ f̃h) stays finite, and so does G
    G = pm.approx_attention_loss_grad(X, A1, A2, A3, Y, E * 1e300, eps=1e-3)
    assert np.isfinite(G).all()
