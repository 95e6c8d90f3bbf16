"""How per-layer errors compose through a stack: the bound of Chapter 9's corollary
``cor-09-depth``, evaluated on a real run.

Layer ℓ of an :class:`~attnlib.models.AttentionStack` maps its input x_ℓ to x_{ℓ+1}; its exact
backward pass is the vector–Jacobian product g ↦ J_ℓᵀ g at the exact x_ℓ. An approximate
kernel changes both passes, so the approximate gradient obeys

    g̃_ℓ = J_ℓᵀ g̃_{ℓ+1} + r_ℓ,     ‖r_ℓ‖ = η_ℓ ‖g̃_{ℓ+1}‖,

which defines the layer's local error η_ℓ (it contains the kernel's error in the forward
cache and in the backward pass). With λ_ℓ = ‖J_ℓ‖₂ (residual connection, LayerNorm and
feed-forward block included) and E_k the absolute error after k layers (E_0 = 0, the top
gradient G is exact), the triangle inequality gives

    E_k ≤ (λ_ℓ + η_ℓ) E_{k−1} + η_ℓ ‖g_{ℓ+1}‖,     ℓ = L − k,

and :func:`depth_error_bound` returns E_k / ‖g_{L−k}‖, the bound on the relative error that
:func:`attnlib.models.gradient_errors` measures as ``through[k − 1]``. λ_ℓ is estimated by
power iteration on J_ℓᵀJ_ℓ (:func:`layer_lipschitz`), which approaches ‖J_ℓ‖₂ from below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._checks import AttnInputError, as_float_array, check_int, check_shape
from .depth import _rel
from .kernels import STANDARD, AttentionKernel, check_kernel
from .stack import AttentionStack

__all__ = ["DepthBound", "layer_lipschitz", "depth_error_bound"]


@dataclass(frozen=True)
class DepthBound:
    """The composition bound of one run, every tuple indexed as ``GradientError.through``.

    ``lipschitz[k − 1]``: λ of the layer reached after k layers of back-propagation (the
    top layer first); ``local[k − 1]``: its local error η; ``bound[k − 1]``: the bound on
    the relative error after k layers; ``measured[k − 1]``: that error, measured.
    """

    lipschitz: tuple
    local: tuple
    bound: tuple
    measured: tuple


def _check_stack_input(stack, X) -> np.ndarray:
    if not isinstance(stack, AttentionStack):
        raise AttnInputError(f"stack must be an AttentionStack, got {type(stack).__name__}")
    return stack.check_input(X)


def layer_lipschitz(stack: AttentionStack, X, *, iterations: int = 40) -> tuple:
    """λ_ℓ ≈ ‖J_ℓ‖₂ for every layer ℓ of ``stack`` at the exact hidden states of input X
    (n, D), bottom layer first.

    Power iteration on J_ℓᵀJ_ℓ: J_ℓᵀ by the stack's exact backward pass, J_ℓ v by a central
    difference of the layer's forward pass (its error is O(h²), far below the iteration's).
    ``iterations`` (1 to 1000) steps from a seeded start; each estimate is at most ‖J_ℓ‖₂ up
    to the difference's error, and converges to it as (σ₂/σ₁)^(2·iterations).

    Raises :class:`attnlib.AttnInputError` if ``stack`` is not an AttentionStack, X is not a
    finite (n, D) array, or ``iterations`` is not an integer from 1 to 1000.

    Examples
    --------
    >>> from attnlib.models.stack import random_stack
    >>> stack = random_stack(2, 8, 2, seed=0)
    >>> lam = layer_lipschitz(stack, np.random.default_rng(0).normal(size=(5, 8)))
    >>> len(lam), all(x > 0 for x in lam)
    (2, True)
    """
    X = _check_stack_input(stack, X)
    iterations = check_int("iterations", iterations, maximum=1000)
    _, caches = stack.forward(X, STANDARD)
    rng = np.random.default_rng(0)
    out = []
    for w, c in zip(stack.layers, caches, strict=True):
        x = c["x"]
        # a step that is small against the input's entries, so the difference is accurate
        h = 1e-5 * max(1.0, float(np.sqrt(np.mean(x * x))))
        v = rng.normal(size=x.shape)
        v /= np.linalg.norm(v)
        sigma = 0.0
        for _ in range(iterations):
            plus = stack._layer_forward(x + h * v, w, STANDARD, None)[0]
            minus = stack._layer_forward(x - h * v, w, STANDARD, None)[0]
            u = stack._layer_backward((plus - minus) / (2 * h), w, c, STANDARD)[0]
            norm = float(np.linalg.norm(u))
            if norm == 0.0:
                break  # J_ℓ v = 0: the layer is constant along v
            sigma, v = math.sqrt(norm), u / norm
        out.append(sigma)
    return tuple(out)


def depth_error_bound(
    stack: AttentionStack, X, G, kernel: AttentionKernel, *, lipschitz=None
) -> DepthBound:
    """The bound of ``cor-09-depth`` on the relative gradient error after k = 1..L layers,
    for loss = ⟨stack(X), G⟩ with ``kernel`` in both passes of every layer, next to the
    measured error (the quantity of :func:`attnlib.models.gradient_errors`).

    ``lipschitz``: the λ_ℓ of :func:`layer_lipschitz` for this stack and X (bottom layer
    first), computed if omitted; pass them to bound several kernels on one stack.

    Raises :class:`attnlib.AttnInputError` on a bad stack, X or G (finite (n, D) arrays of one
    shape), a ``kernel`` that is not an AttentionKernel, or ``lipschitz`` that is not L
    non-negative finite numbers.

    Examples
    --------
    A coarse kernel (degree 2 on the observed range) on a 4-layer stack: the bound holds after
    every layer, and after one layer it is the measured error itself.

    >>> from functools import partial
    >>> from attnlib.polymethod import exp_poly_of_degree
    >>> from attnlib.models.kernels import observed_range_kernel
    >>> from attnlib.models.stack import random_stack
    >>> rng = np.random.default_rng(1)
    >>> b = depth_error_bound(
    ...     random_stack(4, 6, 2, seed=1), rng.normal(size=(7, 6)), rng.normal(size=(7, 6)),
    ...     observed_range_kernel(partial(exp_poly_of_degree, g=2)),
    ... )
    >>> holds = all(m <= u for m, u in zip(b.measured, b.bound))
    >>> holds, bool(np.isclose(b.bound[0], b.measured[0]))
    (True, True)
    """
    X = _check_stack_input(stack, X)
    G = as_float_array("G", G)
    check_shape("G", G, X.shape, "(n, D) like X")
    check_kernel(kernel)
    L = stack.n_layers
    if lipschitz is None:
        lipschitz = layer_lipschitz(stack, X)
    lam = as_float_array("lipschitz", lipschitz, ndim=1)
    if lam.shape != (L,) or (lam < 0).any():
        raise AttnInputError(
            f"lipschitz must hold the {L} non-negative constants of layer_lipschitz(stack, X), "
            f"one per layer, got {lam.size} values"
        )
    exact_caches = stack.forward(X, STANDARD)[1]
    exact = stack.backward(exact_caches, G, STANDARD, return_hidden=True)[2]
    approx = stack.backward(stack.forward(X, kernel)[1], G, kernel, return_hidden=True)[2]
    E, lam_k, local, bound, measured = 0.0, [], [], [], []
    for k in range(1, L + 1):
        i = L - k
        upstream = approx[i + 1]
        exact_step = stack._layer_backward(upstream, stack.layers[i], exact_caches[i], STANDARD)
        up = float(np.linalg.norm(upstream))
        eta = float(np.linalg.norm(approx[i] - exact_step[0])) / up if up > 0 else 0.0
        E = (float(lam[i]) + eta) * E + eta * float(np.linalg.norm(exact[i + 1]))
        below = float(np.linalg.norm(exact[i]))
        lam_k.append(float(lam[i]))
        local.append(eta)
        bound.append(E / below if below > 0 else (0.0 if E == 0 else math.inf))
        measured.append(_rel(approx[i], exact[i]))
    return DepthBound(tuple(lam_k), tuple(local), tuple(bound), tuple(measured))
