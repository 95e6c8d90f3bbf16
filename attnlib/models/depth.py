"""The depth experiment: how the error of an approximate gradient grows through L layers.

:func:`gradient_errors` runs an :class:`~attnlib.models.AttentionStack` twice on
``loss = ⟨stack(X), G⟩`` for a fixed (n, D) array G, once with the exact kernel
(:func:`exact_reference`) and once with the kernel under test in both passes of every layer,
so every difference between the two gradients comes from the kernels. It reports the error
after back-propagation through k = 1..L layers; :func:`classify_growth` reads such a curve
as flat, polynomial or geometric by a stated rule. The kernels are in
:mod:`attnlib.models.kernels`, the stack in :mod:`attnlib.models.stack`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    as_real_array,
    check_memory,
    check_positive_real,
    check_shape,
)
from .kernels import STANDARD, AttentionKernel, check_kernel
from .stack import AttentionStack

__all__ = ["GradientError", "exact_reference", "gradient_errors", "Growth", "classify_growth"]


@dataclass(frozen=True)
class GradientError:
    """Relative errors ‖g̃ − g‖₂ / ‖g‖₂ of one approximate backward pass against the exact one.

    ``input``: the gradient w.r.t. the stack's input X (back-propagated through every layer);
    ``params``: all parameter gradients as one vector; ``per_layer``: the parameter
    gradients of each layer (index 0 = the bottom layer, the last one reached by backprop);
    ``through``: ``through[k - 1]`` is the error of ∂loss/∂x_{L−k}, the gradient after it has
    been back-propagated through k layers (k = 1..L; ``through[-1] == input``).
    """

    input: float
    params: float
    per_layer: tuple
    through: tuple


def _flat(grads) -> np.ndarray:
    return np.concatenate([v.ravel() for gw in grads for _, v in sorted(gw.items())])


def _rel(a, b) -> float:
    """‖a − b‖₂ / ‖b‖₂ (‖a‖₂ if b = 0). Both are first scaled by the same power of 2, which is
    exact, so that the norms of gradients with entries near the float range do not overflow."""
    top = max(float(np.abs(a).max(initial=0.0)), float(np.abs(b).max(initial=0.0)))
    e = math.frexp(top)[1] if 0 < top < math.inf else 0
    a, b = np.ldexp(a, -e), np.ldexp(b, -e)
    nb = float(np.linalg.norm(b))
    if nb > 0:
        return float(np.linalg.norm(a - b)) / nb
    return math.ldexp(float(np.linalg.norm(a)), e)


class _Reference(tuple):
    """What :func:`exact_reference` returns: the tuple (dX, grads, hidden), which also keeps
    the stack's layers and a digest of the X it was computed for, so that
    :func:`gradient_errors` can refuse a reference computed for another stack or input."""

    layers = None  # the stack's layer dicts (shared, never copied)
    x_digest = None  # _digest of the validated X


def _digest(X: np.ndarray) -> bytes:
    """A fingerprint of a validated float64 input: its shape and the bytes of its values."""
    h = hashlib.blake2b(repr(X.shape).encode(), digest_size=16)
    h.update(np.ascontiguousarray(X).tobytes())
    return h.digest()


def _check_reference(reference, stack, X, G) -> None:
    """``reference`` must be the :func:`exact_reference` result for this stack, X and G:
    (dX, grads, hidden) with dX and every hidden[l] of X's shape (n, D), one gradient dict per
    layer with the layer's keys and shapes, and hidden[L] = G. A result of
    :func:`exact_reference` is also matched against the stack's layers and X's values."""
    X = stack.check_input(X)
    G = as_float_array("G", G)
    check_shape("G", G, X.shape, "(n, D) like X")
    L = stack.n_layers
    ok = (
        isinstance(reference, tuple)
        and len(reference) == 3
        and isinstance(reference[0], np.ndarray)
        and isinstance(reference[1], list)
        and len(reference[1]) == L
        and all(isinstance(g, dict) for g in reference[1])
        and isinstance(reference[2], list)
        and len(reference[2]) == L + 1
        and all(isinstance(h, np.ndarray) for h in reference[2])
    )
    if not ok:
        raise AttnInputError(
            "reference must be the (dX, grads, hidden) tuple returned by exact_reference, got "
            f"{type(reference).__name__}"
        )
    dX, grads, hidden = reference
    shapes = {dX.shape} | {h.shape for h in hidden}
    if shapes != {X.shape}:
        raise AttnInputError(
            f"reference was computed for an input of another shape ({sorted(shapes)}), this X "
            f"is {X.shape}: pass exact_reference(stack, X, G) of this X and G"
        )
    for i, (g, w) in enumerate(zip(grads, stack.layers, strict=True)):
        if set(g) != set(w) or any(getattr(g[k], "shape", None) != w[k].shape for k in w):
            raise AttnInputError(
                f"reference was computed for another stack: its gradients of layer {i} do not "
                "match this stack's weights; pass exact_reference(stack, X, G) of this stack"
            )
    layers = getattr(reference, "layers", None)
    if layers is not None and (
        len(layers) != L or any(a is not b for a, b in zip(layers, stack.layers, strict=False))
    ):
        raise AttnInputError(
            "reference was computed for another stack (other weights); pass "
            "exact_reference(stack, X, G) of this stack"
        )
    digest = getattr(reference, "x_digest", None)
    if digest is not None and digest != _digest(X):
        raise AttnInputError(
            "reference was computed for a different X (of the same shape); pass "
            "exact_reference(stack, X, G) of this X"
        )
    if not np.array_equal(hidden[L], G):  # hidden[L] is ∂loss/∂Y = G itself
        raise AttnInputError(
            "reference was computed for a different G (of the same shape); pass "
            "exact_reference(stack, X, G) of this G"
        )


def exact_reference(stack: AttentionStack, X, G):
    """The exact pass that :func:`gradient_errors` compares against: (dX, grads, hidden).

    Compute it once and pass it as ``reference=`` to compare several kernels on the same
    (stack, X, G) without recomputing it. The tuple remembers the stack and the X it was
    computed for, and :func:`gradient_errors` refuses it for any other stack, X or G.

    Raises :class:`attnlib.AttnInputError` if ``stack`` is not an AttentionStack or X, G are
    not finite (n, D) arrays of the same shape.
    """
    if not isinstance(stack, AttentionStack):
        raise AttnInputError(f"stack must be an AttentionStack, got {type(stack).__name__}")
    X = stack.check_input(X)
    G = as_float_array("G", G)
    check_shape("G", G, X.shape, "(n, D) like X")
    out = _Reference(stack.backward(stack.forward(X, STANDARD)[1], G, STANDARD, return_hidden=True))
    out.layers = tuple(stack.layers)
    out.x_digest = _digest(X)
    return out


def gradient_errors(
    stack: AttentionStack, X, G, kernel: AttentionKernel, *, reference=None
) -> GradientError:
    """Relative error of ``kernel``'s gradients against the exact kernel's, for
    loss = ⟨stack(X), G⟩ (both passes of every layer use the kernel under test).

    ``reference`` may be a precomputed :func:`exact_reference` for the same (stack, X, G).

    Raises :class:`attnlib.AttnInputError` on a bad stack, X or G (see
    :func:`exact_reference`), a ``reference`` that is not the :func:`exact_reference` result
    of this stack, X and G, or a ``kernel`` that is not an AttentionKernel.

    Examples
    --------
    >>> import functools, attnlib.polymethod as pm
    >>> from attnlib.models.kernels import dense_polynomial_kernel
    >>> from attnlib.models.stack import random_stack
    >>> stack = random_stack(3, 8, 2, seed=0)
    >>> X, G = np.random.default_rng(0).normal(size=(2, 5, 8))
    >>> kernel = dense_polynomial_kernel(functools.partial(pm.exp_poly, eps=1e-2))
    >>> ge = gradient_errors(stack, X, G, kernel)
    >>> len(ge.through), bool(0 < ge.input < 1e-2)
    (3, True)
    """
    if reference is None:
        reference = exact_reference(stack, X, G)
    _check_reference(reference, stack, X, G)
    check_kernel(kernel)
    X = stack.check_input(X)
    G = as_float_array("G", G)
    approx = stack.backward(stack.forward(X, kernel)[1], G, kernel, return_hidden=True)
    (dX, grads, hid), (dXa, gradsa, hida) = reference, approx
    per_layer = tuple(_rel(_flat([a]), _flat([e])) for a, e in zip(gradsa, grads, strict=True))
    L = stack.n_layers
    through = tuple(_rel(hida[L - k], hid[L - k]) for k in range(1, L + 1))
    return GradientError(_rel(dXa, dX), _rel(_flat(gradsa), _flat(grads)), per_layer, through)


# -- reading an error-against-depth curve -------------------------------------------------------


@dataclass(frozen=True)
class Growth:
    """How an error curve e_1, …, e_L grows with depth k (see :func:`classify_growth`).

    ``kind`` is ``"flat"``, ``"sub-linear"``, ``"linear"``, ``"super-linear"`` or
    ``"geometric"``; ``ratio`` = e_L / e_1; ``power`` p of the fit e ≈ a·k^p;
    ``factor`` c of the fit e ≈ a·c^k (per layer); ``margin``, the smallest relative distance
    between a statistic the decision consulted and its threshold (a classification with a
    margin far above the rounding noise of the errors is the same on every machine).
    """

    kind: str
    ratio: float
    power: float
    factor: float
    margin: float = math.inf

    def __str__(self) -> str:
        return (
            f"{self.kind} (e_L/e_1 = {self.ratio:.3g}, power-law fit k^{self.power:.2f}, "
            f"geometric fit {self.factor:.3g}^k)"
        )


def classify_growth(errors, *, flat_within: float = 2.0) -> Growth:
    """Classify an error curve over depths k = 1..L as flat, polynomial or geometric.

    Rule (ours, stated so that it can be checked):

    * **flat** if max_k e_k / min_k e_k < ``flat_within`` (default 2);
    * otherwise fit log e against log k (power law a·k^p) and against k (geometric a·c^k)
      by least squares; the fit with the smaller residual wins. A geometric winner with
      c ≥ 1.1 is **geometric**; otherwise the power p decides: p < 0.5 **sub-linear**,
      0.5 ≤ p ≤ 1.5 **linear**, p > 1.5 **super-linear**.

    ``errors`` must hold at least 3 positive finite numbers. The result's ``margin`` is the
    smallest relative distance of a consulted statistic from its threshold: a caller that must
    get the same answer on every machine checks that it is far above the errors' rounding noise.

    Raises :class:`attnlib.AttnInputError` if ``errors`` holds fewer than 3 positive finite
    numbers or spans more orders of magnitude than a float can hold, or ``flat_within`` is not
    positive.

    Examples
    --------
    >>> classify_growth([1e-6, 2e-6, 3e-6, 4e-6]).kind, classify_growth([1, 10, 100]).kind
    ('linear', 'geometric')
    """
    # float64 whatever the input's dtype: the ratios of float32 errors overflow float32 sooner
    e = as_real_array("errors", errors, ndim=1)
    # e and log e, and the two least-squares fits' (L, 2) matrices and their temporaries
    check_memory("classify_growth's fits", 96 * e.size, culprits="errors")
    e = e.astype(np.float64, copy=False)
    if e.size < 3 or (e <= 0).any():
        raise AttnInputError(f"errors must hold at least 3 positive numbers, got {e.tolist()}")
    flat_within = check_positive_real("flat_within", flat_within)
    k = np.arange(1, e.size + 1, dtype=np.float64)
    le = np.log(e)
    p, a1 = np.polyfit(np.log(k), le, 1)
    b, a2 = np.polyfit(k, le, 1)
    res_pow = float(np.sum((le - (a1 + p * np.log(k))) ** 2))
    res_geo = float(np.sum((le - (a2 + b * k)) ** 2))
    with np.errstate(over="ignore"):
        ratio, factor = float(e[-1] / e[0]), float(np.exp(b))
    if not (math.isfinite(ratio) and math.isfinite(factor)):
        raise AttnInputError(
            "errors span too many orders of magnitude: e_L/e_1 or the per-layer factor "
            f"overflows a float (errors from {e.min():.3g} to {e.max():.3g})"
        )
    spread = float(e.max() / e.min())

    def gap(x: float, threshold: float) -> float:
        return abs(x - threshold) / abs(threshold)

    margins = [gap(spread, flat_within)]
    if spread < flat_within:
        kind = "flat"
    else:
        margins.append(abs(res_geo - res_pow) / max(res_geo, res_pow, 1e-300))
        if res_geo < res_pow:
            margins.append(gap(factor, 1.1))
        if res_geo < res_pow and factor >= 1.1:
            kind = "geometric"
        else:
            margins += [gap(float(p), 0.5), gap(float(p), 1.5)]
            kind = "sub-linear" if p < 0.5 else "linear" if p <= 1.5 else "super-linear"
    return Growth(kind, ratio, float(p), factor, min(margins))
