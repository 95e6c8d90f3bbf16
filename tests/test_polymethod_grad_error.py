"""The error bounds of attnlib.polymethod.grad_error hold against the exact gradient."""

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib import polymethod as pm
from attnlib.polymethod.grad_error import (
    entrywise_product_bound,
    loss_grad_error_bound,
    loss_grad_magnitude_bound,
)


def _inputs(n, m, d, B, seed):
    rng = np.random.default_rng(seed)
    A1, E = rng.uniform(-B, B, (n, d)), rng.uniform(-1, 1, (n, d))
    A2, A3 = rng.uniform(-B, B, (m, d)), rng.uniform(-1, 1, (m, d))
    X = np.eye(d) + 0.1 * rng.uniform(-1, 1, (d, d))
    return X, A1, A2, A3, rng.uniform(-1, 1, (d, d)), E


@pytest.mark.parametrize("n, m, d, B", [(64, 64, 3, 1.0), (50, 70, 4, 1.5), (128, 40, 2, 2.0)])
@pytest.mark.parametrize("eps", [1e-2, 1e-4, 1e-7])
def test_loss_grad_error_bound_holds(n, m, d, B, eps):
    args = _inputs(n, m, d, B, seed=n + m + d)
    G, plan = pm.approx_attention_loss_grad(*args, eps=eps, return_plan=True)
    err = np.abs(G - al.attention_loss_grad(*args)).max()
    achieved = pm.max_relative_error(plan.polynomial(), plan.R)
    bound = loss_grad_error_bound(*args, eps=achieved)
    assert err <= bound
    scale = loss_grad_magnitude_bound(*args)
    eta = 2 * achieved / (1 - achieved)
    assert np.abs(al.attention_loss_grad(*args)).max() <= scale
    assert bound <= (2.5 + eta) * eta * scale * (1 + 1e-12)
    # the bound is linear in n: doubling the rows of A1 and E (same values) doubles it
    X, A1, A2, A3, Y, E = args
    doubled = loss_grad_error_bound(X, np.vstack([A1, A1]), A2, A3, Y, np.vstack([E, E]), eps=eps)
    assert doubled == pytest.approx(2 * loss_grad_error_bound(*args, eps=eps), rel=1e-12)


def test_entrywise_product_bound_holds_and_counts_n_times_m():
    rng = np.random.default_rng(0)
    A1, A2 = rng.uniform(-2, 2, (30, 5)), rng.uniform(-2, 2, (40, 5))
    delta = rng.uniform(-1e-3, 1e-3, (30, 40))
    bound = entrywise_product_bound(A1, A2, np.abs(delta).max())
    assert np.abs(A1.T @ delta @ A2 / 5).max() <= bound
    assert bound == pytest.approx(
        30 * 40 * np.abs(A1).max() * np.abs(A2).max() * np.abs(delta).max() / 5
    )


def test_inputs_are_not_modified():
    args = _inputs(20, 20, 3, 1.0, seed=1)
    copies = [a.copy() for a in args]
    loss_grad_error_bound(*args, eps=1e-3)
    loss_grad_magnitude_bound(*args)
    entrywise_product_bound(args[1], args[2], 1e-3)
    for a, c in zip(args, copies, strict=True):
        assert np.array_equal(a, c)


@pytest.mark.parametrize("eps", [0, 1, -0.5, 1.5, float("nan"), True, "0.1", None])
def test_bad_eps_raises(eps):
    with pytest.raises(AttnInputError, match="eps"):
        loss_grad_error_bound(*_inputs(5, 5, 2, 1.0, seed=2), eps=eps)


BAD_ARRAYS = [
    (lambda X, A1, A2, A3, Y, E: loss_grad_error_bound(X, A1, A2[:, :1], A3, Y, E, eps=1e-3), "A2"),
    (lambda X, A1, A2, A3, Y, E: loss_grad_error_bound(X, A1, A2, A3, Y, E[:3], eps=1e-3), "E"),
    (lambda X, A1, A2, A3, Y, E: loss_grad_magnitude_bound(X, A1, A2, A3, Y[:1], E), "Y"),
    (lambda X, A1, A2, A3, Y, E: entrywise_product_bound(A1, A2[:, :1], 1e-3), "A2"),
    (lambda X, A1, A2, A3, Y, E: entrywise_product_bound(np.ones(3), A2, 1e-3), "A1"),
]


@pytest.mark.parametrize("call,message", BAD_ARRAYS)
def test_bad_arrays_raise(call, message):
    X, A1, A2, A3, Y, E = _inputs(5, 6, 2, 1.0, seed=3)
    with pytest.raises(AttnInputError, match=message):
        call(X, A1, A2, A3, Y, E)
    for bad in (-1.0, float("inf"), True, "x"):
        with pytest.raises(AttnInputError, match="p_error_max"):
            entrywise_product_bound(A1, A2, bad)


def test_bounds_beyond_the_float_range_are_refused():
    X, A1, A2, A3, Y, E = _inputs(8, 6, 3, 1.0, 0)
    with pytest.raises(AttnInputError, match="the bound overflows a float: A1, A2, A3, Y or E"):
        loss_grad_error_bound(X, A1, A2, A3 * 1e300, Y, E, eps=1e-3)
    with pytest.raises(AttnInputError, match="the bound overflows a float: A1, A2, A3, Y or E"):
        loss_grad_magnitude_bound(X, A1, A2, A3, Y * 1e300, E)
    with pytest.raises(AttnInputError, match="A1, A2 or p_error_max is too large"):
        entrywise_product_bound(A1 * 1e200, A2 * 1e200, 1.0)
    # a zero-stride view of 10^9 rows: its maxima are read without a copy of that size
    view = np.broadcast_to(np.full((1, 16), 0.5), (10**9, 16))
    assert entrywise_product_bound(view, view, 0.1) == 10**18 * 0.25 * 0.1 / 16
