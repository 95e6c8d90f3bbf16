"""The error of an approximate gradient through the stack (attnlib.models.depth): zero for the
standard kernel and small for the polynomial one, a reference of another stack, X or G
refused, and the growth of the error with depth classified (flat, sub-linear, linear,
super-linear, geometric)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import attnlib.polymethod as pm
from attnlib import AttnInputError
from attnlib.models import depth as dp
from attnlib.models import kernels as kn
from attnlib.models import stack as st


def test_gradient_errors_standard_is_zero_and_polynomial_small(rng):
    stack = st.random_stack(3, 16, 2, seed=2, weight_scale=0.7)
    X, G = rng.normal(size=(12, 16)), rng.normal(size=(12, 16))
    ge = dp.gradient_errors(stack, X, G, kn._standard_kernel())
    assert ge.input == 0 and ge.params == 0 and ge.through == (0.0, 0.0, 0.0)
    errs = []
    reference = dp.exact_reference(stack, X, G)
    for eps in (1e-2, 1e-5):
        kern = kn.dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=eps))
        ge = dp.gradient_errors(stack, X, G, kern)
        assert len(ge.per_layer) == 3 and len(ge.through) == 3 and ge.through[-1] == ge.input
        assert dp.gradient_errors(stack, X, G, kern, reference=reference) == ge
        errs.append(ge.params)
    assert 0 < errs[1] < errs[0] < 1e-2


def test_gradient_errors_refuses_a_reference_of_another_stack_x_or_g(rng):
    """A reference is the exact pass of one (stack, X, G): any other is refused, naming it,
    before the approximate pass runs (an X of another n used to escape as numpy's
    broadcast error, and one of the same shape gave wrong errors)."""
    stack = st.random_stack(2, 8, 2, seed=0)
    X, G = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
    ref = dp.exact_reference(stack, X, G)
    assert isinstance(ref, tuple) and len(ref) == 3  # still the (dX, grads, hidden) tuple
    calls = {
        "an input of another shape": lambda: dp.gradient_errors(
            stack, X[:3], G[:3], kn.STANDARD, reference=ref
        ),
        "a different X": lambda: dp.gradient_errors(stack, X * 2, G, kn.STANDARD, reference=ref),
        "a different G": lambda: dp.gradient_errors(stack, X, G * 2, kn.STANDARD, reference=ref),
        "another stack": lambda: dp.gradient_errors(
            st.random_stack(2, 8, 2, seed=1), X, G, kn.STANDARD, reference=ref
        ),
    }
    for what, call in calls.items():
        with pytest.raises(AttnInputError, match=f"reference was computed for {what}"):
            call()
    # the same weights reached through another stack object (truncated shares the layers)
    same = st.random_stack(3, 8, 2, seed=0).truncated(2)
    assert dp.gradient_errors(stack, X, G, kn._standard_kernel(), reference=ref).input == 0.0
    ref2 = dp.exact_reference(same, X, G)
    assert dp.gradient_errors(same, X, G, kn._standard_kernel(), reference=ref2).params == 0.0


def test_classify_growth_of_float32_errors():
    errors = np.array([1e-30, 1.0, 1e30], np.float32)  # ratios beyond float32, not float64
    growth = dp.classify_growth(errors)
    assert growth.kind == "geometric" and abs(growth.factor / 1e30 - 1) < 1e-6


def test_classify_growth():
    k = np.arange(1, 13, dtype=float)
    assert dp.classify_growth(np.full(12, 3e-7)).kind == "flat"
    assert dp.classify_growth(1e-6 * k).kind == "linear"
    assert dp.classify_growth(1e-6 * 1.5**k).kind == "geometric"
    assert dp.classify_growth(1e-6 * k**2).kind == "super-linear"
    assert dp.classify_growth(1e-6 * k**0.3 * 3).kind == "sub-linear"
    assert abs(dp.classify_growth(1e-6 * k).power - 1.0) < 1e-12


BAD_INPUT = [
    (
        lambda stack, rng: dp.gradient_errors(None, None, None, kn.STANDARD),
        "stack must be an AttentionStack",
    ),
    (
        lambda stack, rng: dp.exact_reference(
            stack, rng.normal(size=(4, 8)), rng.normal(size=(4, 7))
        ),
        "G must have shape",
    ),
    (
        lambda stack, rng: dp.classify_growth([1e-3, 0.0, 1e-2]),
        "errors must hold at least 3 positive",
    ),
]


@pytest.mark.parametrize("call,message", BAD_INPUT)
def test_bad_input(small_stack, rng, call, message):
    with pytest.raises(AttnInputError, match=message):
        call(small_stack, rng)
