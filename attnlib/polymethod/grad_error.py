"""Error bounds for AS24's approximate gradient dL/dX (Chapter 7).

Two bounds on the entrywise error ‖G̃ − G‖_max of :func:`approx_attention_loss_grad`:

* :func:`loss_grad_error_bound` (ours): from the ratio bound of the approximate softmax,
  (1−ε)/(1+ε) ≤ f̃ᵢⱼ/fᵢⱼ ≤ (1+ε)/(1−ε) (Chapter 6), so |f̃ − f| ≤ η f entrywise with
  η = 2ε/(1−ε). With δ = rowsum(c ∘ (c + E)) (AS24's r), H = ‖A₃Y‖_max and
  C = H + ‖E‖_max (a bound on |c| and |c̃|, because the rows of f and f̃ are probability
  vectors)::

      |c̃ − c| ≤ ηH,    |q̃ − q| ≤ dηH²,    |q̃| ≤ dCH,    |δ̃ − δ| ≤ dηH(H + C),    |δ| ≤ dCH,
      |p̃ − p|ᵢⱼ ≤ |f̃ − f|ᵢⱼ |q̃ᵢⱼ| + fᵢⱼ |q̃ − q|ᵢⱼ + |δ̃ − δ|ᵢ f̃ᵢⱼ + |δᵢ| |f̃ − f|ᵢⱼ
                ≤ ηdH fᵢⱼ [(2 + η)(C + H) + C],

  and since every row of f sums to 1, Σᵢⱼ |p̃ − p|ᵢⱼ ≤ n ηdH[(2 + η)(C + H) + C], so

      ‖G̃ − G‖_max ≤ (1/d) ‖A₁‖_max ‖A₂‖_max Σᵢⱼ |p̃ − p|ᵢⱼ
                  ≤ n η ‖A₁‖_max ‖A₂‖_max H [(2 + η)(C + H) + C].

  Linear in n: the rows of f̃ − f are small in ℓ₁, not just entrywise. The same estimates give
  |pᵢⱼ| ≤ 2dCH fᵢⱼ, so every entry of G is at most Ĝ = 2n‖A₁‖_max‖A₂‖_max CH
  (:func:`loss_grad_magnitude_bound`), and since H ≤ C the error relative to Ĝ is at most
  (5/2 + η)η.
* :func:`entrywise_product_bound`: the route of AS24's Theorem D.6, which bounds each entry of
  (1/d) A₁ᵀ(p̃ − p)A₂ by its n·m terms: (1/d) n m ‖A₁‖_max ‖A₂‖_max ‖p̃ − p‖_max, the
  factor n² of the paper when m = n.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    check_cols,
    check_loss_inputs,
    check_open_unit,
    check_real,
    max_abs,
)

__all__ = ["entrywise_product_bound", "loss_grad_error_bound", "loss_grad_magnitude_bound"]


def _scales(X, A1, A2, A3, Y, E):
    """n, H = ‖A₃Y‖_max, C = H + ‖E‖_max, ‖A₁‖_max and ‖A₂‖_max, after validating the inputs."""
    X, A1, A2, A3, Y, E = check_loss_inputs(
        X, A1, A2, A3, Y, E, what="the error bound", working=_product_parts
    )
    with np.errstate(over="ignore", invalid="ignore"):
        H = max_abs(A3.astype(np.float64, copy=False) @ Y.astype(np.float64, copy=False))
    return A1.shape[0], H, H + max_abs(E), max_abs(A1), max_abs(A2)


def _product_parts(n, m, d, dtype):
    """The working memory of :func:`_scales` (in :func:`attnlib._checks.check_memory_parts`'
    form): A₃ and Y in float64 and their product, (m, d) each."""
    return [(8 * (3 * m * d + d * d), "A3 @ Y in float64", "A3")]


def _finite_bound(bound: float, culprits: str) -> float:
    """The bound itself if it is a finite float (Python float arithmetic gives inf on
    overflow); otherwise refuse, naming the arguments that set its size."""
    if not math.isfinite(bound):
        raise AttnInputError(f"the bound overflows a float: {culprits} is too large")
    return bound


def loss_grad_error_bound(X, A1, A2, A3, Y, E, *, eps) -> float:
    """Our bound on ‖G̃ − G‖_max for AS24's loss gradient, when p ≈ exp has relative error at
    most ``eps`` on the logit range (derivation in the module docstring).

    Shapes as in :func:`attnlib.attention_loss_grad`: A₁ (n, d), A₂ and A₃ (m, d), E (n, d),
    X and Y (d, d). Time O((n + m)d²). Returns
    n·η·‖A₁‖_max·‖A₂‖_max·H·[(2 + η)(C + H) + C] with η = 2ε/(1 − ε), H = ‖A₃Y‖_max and
    C = H + ‖E‖_max.

    Raises :class:`attnlib.AttnInputError` on malformed arrays, ``eps`` outside (0, 1), or a
    bound beyond the float range.
    """
    n, H, C, a1, a2 = _scales(X, A1, A2, A3, Y, E)
    eps = check_open_unit("eps", eps)
    eta = 2.0 * eps / (1.0 - eps)
    bound = n * eta * a1 * a2 * H * ((2.0 + eta) * (C + H) + C)
    return _finite_bound(bound, "A1, A2, A3, Y or E (or eps near 1)")


def loss_grad_magnitude_bound(X, A1, A2, A3, Y, E) -> float:
    """Ĝ = 2n·‖A₁‖_max·‖A₂‖_max·C·H ≥ ‖dL/dX‖_max, with H = ‖A₃Y‖_max and C = H + ‖E‖_max:
    the scale against which :func:`loss_grad_error_bound` is a relative error.

    Shapes as in :func:`attnlib.attention_loss_grad`. Time O((n + m)d²).

    Raises :class:`attnlib.AttnInputError` on malformed arrays or a bound beyond the float
    range.
    """
    n, H, C, a1, a2 = _scales(X, A1, A2, A3, Y, E)
    return _finite_bound(2.0 * n * a1 * a2 * C * H, "A1, A2, A3, Y or E")


def entrywise_product_bound(A1, A2, p_error_max) -> float:
    """(1/d)·n·m·‖A₁‖_max·‖A₂‖_max·``p_error_max``: the bound on ‖(1/d)A₁ᵀΔA₂‖_max for any
    (n, m) matrix Δ with ‖Δ‖_max ≤ ``p_error_max``, summed term by term as in the proof of
    AS24's Theorem D.6 (n² terms when m = n).

    Shapes: A₁ (n, d), A₂ (m, d).

    Raises :class:`attnlib.AttnInputError` on malformed arrays, a ``p_error_max`` that is not
    a finite number >= 0, or a bound beyond the float range.
    """
    A1 = as_float_array("A1", A1)
    A2 = as_float_array("A2", A2)
    check_cols("A2", A2, A1.shape[1], "A1")
    p_error_max = check_real(
        "p_error_max", p_error_max, minimum=0.0, expected="a finite number >= 0"
    )
    (n, d), m = A1.shape, A2.shape[0]
    bound = n * m * max_abs(A1) * max_abs(A2) * p_error_max / d
    return _finite_bound(bound, "A1, A2 or p_error_max")
