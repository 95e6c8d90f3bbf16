"""Attention from gradient calls: AS24 Theorem E.5's embedding, with our quadrature.

f(λ) = ‖softmax(λτQKᵀ)V‖²_F (:func:`attention_norm_squared`) is twice AS24's loss at X = λI,
so f'(λ) = 2·tr(dL/dX) costs one gradient call and f(1) = f(0) + ∫₀¹ f'.
:func:`attention_from_gradient` integrates with Gauss–Legendre (ours),
:func:`riemann_from_gradient` with AS24 Lemma E.4's left Riemann sum; :func:`noisy_gradient`
stands in for an approximate gradient algorithm.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import (
    AttnInputError,
    check_int,
    check_memory,
    check_qkv,
    check_real,
    check_scale,
    max_abs,
)
from ..exact import attention
from ..logits import logit_range

__all__ = [
    "attention_norm_squared",
    "norm_derivative_from_gradient",
    "attention_from_gradient",
    "riemann_from_gradient",
    "noisy_gradient",
]


def _norm_at_zero(V: np.ndarray, n: int) -> float:
    """f(0): at λ = 0 the softmax is uniform, so every output row is the mean of V's rows."""
    return float(n * np.sum(V.mean(axis=0) ** 2))


def attention_norm_squared(Q, K, V, *, lam=1.0, scale=None) -> float:
    """f(λ) = ‖softmax(λτQKᵀ)V‖²_F, computed directly: the number the gradient calls of
    :func:`attention_from_gradient` recover at λ = 1.

    At λ = 0 the weights are uniform and f(0) = n·‖mean of V's rows‖²; for λ > 0 this is
    ``attnlib.attention(Q, K, V, scale=λτ)`` squared and summed.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v)
    lam : λ ≥ 0
    scale : τ, default 1/√d

    Raises
    ------
    AttnInputError
        if an array is not a finite 2-D real array, the shapes disagree, ``lam`` is not a
        finite number ≥ 0, ``scale`` is not positive, or λτ or the logits λτQKᵀ overflow.

    Examples
    --------
    >>> Q, K, V = np.eye(2), np.eye(2), np.array([[1.0], [0.0]])
    >>> attention_norm_squared(Q, K, V, lam=0.0)
    0.5
    >>> round(attention_norm_squared(Q, K, V, scale=1e3), 12)
    1.0
    """
    Q, K, V = check_qkv(Q, K, V)
    lam = check_real("lam", lam, minimum=0.0)
    tau = check_scale(scale, Q.shape[1])
    if lam * tau == 0.0:  # λ = 0, or λτ below the smallest float: uniform weights
        return _norm_at_zero(V.astype(np.float64), Q.shape[0])
    # the logits λτQKᵀ are bounded by λ·R, R their Cauchy–Schwarz range at λ = 1
    if not (math.isfinite(lam * tau) and math.isfinite(lam * logit_range(Q, K, scale=tau))):
        raise AttnInputError(
            f"lam={lam!r} is too large: lam * scale or the logits lam * scale * Q @ K.T "
            "overflow a float"
        )
    return float(np.sum(attention(Q, K, V, scale=lam * tau).astype(np.float64) ** 2))


def _check_grad_fn(grad_fn):
    """``grad_fn`` itself, if it is callable (the oracle of :func:`attention_from_gradient` and
    the wrappers of a gradient algorithm)."""
    if not callable(grad_fn):
        raise AttnInputError(
            f"grad_fn must be callable like attnlib.attention_loss_grad, got {grad_fn!r}"
        )
    return grad_fn


def _returned_gradient(G, what: str, fits) -> np.ndarray:
    """``grad_fn``'s answer as an array, if it is real, finite and ``fits`` (a shape test);
    otherwise AttnInputError saying it must be a ``what`` real array."""
    G = np.asarray(G)
    if G.dtype.kind not in "fiu" or not fits(G) or not np.isfinite(G).all():
        raise AttnInputError(
            f"grad_fn must return a {what} real array like attnlib.attention_loss_grad, "
            f"got shape {G.shape} dtype {G.dtype}"
        )
    return G


def _gradient_oracle(Q, K, V, grad_fn, scale, lam=None):
    """AS24 Thm E.5's embedding of an attention instance into the loss L(X).

    Returns (f0, fprime) where f(λ) = ‖softmax(λτQKᵀ)V‖²_F, f0 = f(0) computed directly, and
    fprime(λ) = 2·tr(dL/dX at X = λI) from one call of grad_fn.

    The loss is L(X) = ½‖softmax(A₁XA₂ᵀ/D)A₃Y - E‖²_F with scale 1/D. With A₁ = τD·Q,
    A₂ = K, A₃ = V, Y = I and E = 0 (zero columns pad Q, K or V to a common width D), the
    logits at X = λI are λτQKᵀ, so L(λI) = f(λ)/2 and, by the chain rule,
    f'(λ) = 2·⟨dL/dX, dX/dλ⟩ = 2·⟨dL/dX, I⟩ = 2·tr(dL/dX), with no extra factor. In AS24's
    own convention τ = 1/d (and d_v ≤ d, so D = d), A₁ = Q exactly. Parametrising X = λdI
    instead, with A₁ = Q, would give f'(λ) = 2d·tr(dL/dX). The oracle is asked at ``lam``
    (None: at λ ∈ [0, 1], for the quadratures), where λA₁ and the logits must be finite.
    """
    Q, K, V = (a.astype(np.float64) for a in _checked_qkv(Q, K, V))
    _check_grad_fn(grad_fn)
    (n, d), dv = Q.shape, V.shape[1]
    tau = check_scale(scale, d)
    D = max(d, dv)
    _check_embedding(Q, K, tau, D, lam)
    A1 = np.zeros((n, D))
    A1[:, :d] = (tau * D) * Q
    A2 = np.zeros((K.shape[0], D))
    A2[:, :d] = K
    A3 = np.zeros((V.shape[0], D))
    A3[:, :dv] = V
    Y, E = np.eye(D), np.zeros((n, D))
    f0 = _norm_at_zero(V, n)

    def fprime(lam: float) -> float:
        try:
            G = grad_fn(lam * np.eye(D), A1, A2, A3, Y, E)
        except AttnInputError as exc:  # its arguments are ours (A1, ...): say whose they are
            raise AttnInputError(
                f"grad_fn refused the loss's embedding of Q, K, V at λ = {lam:g}: {exc}"
            ) from None
        G = _returned_gradient(G, f"finite ({D}, {D})", lambda G: G.shape == (D, D))
        return 2.0 * float(np.trace(G))

    return f0, fprime


def _checked_qkv(Q, K, V):
    """Q (n, d), K (m, d), V (m, d_v) validated, refused before their float64 copies and the
    loss's (rows, D) embedding arrays would exceed the allocation limit."""
    Q, K, V = check_qkv(Q, K, V)
    (n, d), m, dv = Q.shape, K.shape[0], V.shape[1]
    D = max(d, dv)
    # the float64 copies of Q, K and V, then A₁, E (n, D), A₂, A₃ (m, D) and Y (D, D)
    need = 8 * (n * d + m * d + m * dv + 2 * (n + m) * D + D * D)
    check_memory("the gradient oracle's embedding", need, culprits="Q, K or V")
    return Q, K, V


def _check_embedding(Q, K, tau: float, D: int, lam) -> None:
    """The loss computes X·A₁ = λτD·Q, then (XA₁)A₂ᵀ, then divides by D: both must be finite
    at ``lam`` (None: every λ ∈ [0, 1]), or the loss would refuse its own arguments (X, A1,
    ...) instead of the caller's. The logits are bounded by their Cauchy–Schwarz range
    R = τ·max‖Qᵢ‖·max‖Kⱼ‖, in O((n + m)d)."""
    R = logit_range(Q, K, scale=tau)  # refuses a range beyond the float range
    top = 1.0 if lam is None else abs(lam)
    if not (math.isfinite(top * tau * D * max_abs(Q)) and math.isfinite(top * D * R)):
        culprits = "Q, K or scale" if lam is None else "lam, Q, K or scale"
        raise AttnInputError(
            f"the loss's embedding λ·scale·D·Q (D = {D}) and its logits overflow float64 at "
            f"λ = {top:g}: {culprits} is too large"
        )


def norm_derivative_from_gradient(Q, K, V, lam, grad_fn, *, scale=None) -> float:
    """f'(λ) for f(λ) = ‖softmax(λτQKᵀ)V‖²_F, from one call of ``grad_fn``: 2·tr(dL/dX at λI).

    See :func:`attention_from_gradient` for the embedding (AS24 Theorem E.5's proof).

    Raises :class:`AttnInputError` as :func:`attention_from_gradient` does, if ``lam`` is not
    a finite number, or if the embedded logits overflow at that λ.

    Examples
    --------
    >>> import attnlib
    >>> Q, K, V = np.eye(2), np.eye(2), np.array([[1.0], [0.0]])
    >>> round(norm_derivative_from_gradient(Q, K, V, 0.0, attnlib.attention_loss_grad), 12)
    0.0
    """
    lam = check_real("lam", lam)
    _, fprime = _gradient_oracle(Q, K, V, grad_fn, scale, lam=lam)
    return fprime(lam)


def attention_from_gradient(Q, K, V, grad_fn, *, nodes=32, scale=None) -> float:
    """‖Att(Q, K, V)‖²_F from gradient calls alone, by Gauss–Legendre quadrature.

    AS24 Theorem E.5 (proof) embeds attention into the loss: A₁ = Q, A₂ = K, A₃ = V, Y = I,
    E = 0 (the theorem's "B = 0" is an erratum for E = 0) and X = λI. Then
    f(λ) = ‖softmax(λτQKᵀ)V‖²_F = 2 L(λI), f(0) is computed directly (uniform weights), and
    f'(λ) = 2·tr(dL/dX at λI) (derived in ``_gradient_oracle``; checked against finite
    differences in tests/test_hardness_gradient.py). So

        f(1) = f(0) + ∫₀¹ f'(λ) dλ ≈ f(0) + Σ_k w_k f'(λ_k)

    with the ``nodes``-point Gauss–Legendre rule mapped to [0, 1] (ours). AS24 Lemma E.4
    uses a left Riemann sum instead (:func:`riemann_from_gradient`), whose error is only
    O(max|f''|/nodes).

    attnlib.attention_loss has scale 1/d built in, so λ enters the logits as λ·A₁A₂ᵀ/d. To
    recover attention at scale τ (default 1/√d, that of attnlib.attention), A₁ is τd·Q; for
    AS24's τ = 1/d this is A₁ = Q.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v)
    grad_fn : callable with the signature of attnlib.attention_loss_grad
        (X, A1, A2, A3, Y, E) -> (D, D) array; called ``nodes`` times
    nodes : number of quadrature nodes, 1..4096
    scale : τ, default 1/√d

    Returns
    -------
    float, the estimate of ‖attention(Q, K, V, scale=τ)‖²_F

    Raises
    ------
    AttnInputError
        if an array is not a finite 2-D real array, the shapes disagree, ``nodes`` is not an
        integer from 1 to 4096, ``scale`` is not positive, or ``grad_fn`` is not callable or
        does not return a finite (D, D) real array.

    Examples
    --------
    >>> import attnlib
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), np.ones((5, 2))
    >>> est = attention_from_gradient(Q, K, V, attnlib.attention_loss_grad, nodes=16)
    >>> abs(est - attention_norm_squared(Q, K, V)) < 1e-12
    True
    """
    nodes = check_int("nodes", nodes, maximum=4096)
    f0, fprime = _gradient_oracle(Q, K, V, grad_fn, scale)
    x, w = np.polynomial.legendre.leggauss(nodes)
    lams, weights = (x + 1) / 2, w / 2
    return f0 + float(sum(wk * fprime(float(lk)) for lk, wk in zip(lams, weights, strict=True)))


def riemann_from_gradient(Q, K, V, grad_fn, *, nodes=256, scale=None) -> float:
    """AS24 Lemma E.4's recipe: f(1) ≈ f(0) + (1/N)·Σ_{i<N} f'(i/N), a left Riemann sum.

    Same embedding as :func:`attention_from_gradient`, to compare against it. Its error
    is bounded by max|f''|/N, which is large when the logits are Θ(log n) wide.

    Raises :class:`AttnInputError` as :func:`attention_from_gradient` does (``nodes`` from 1
    to 65536).
    """
    nodes = check_int("nodes", nodes, maximum=1 << 16)
    f0, fprime = _gradient_oracle(Q, K, V, grad_fn, scale)
    return f0 + float(sum(fprime(i / nodes) for i in range(nodes))) / nodes


def noisy_gradient(grad_fn, rel, rng):
    """``grad_fn`` with relative noise: each call returns G + rel·max|G|·ξ, where G is
    ``grad_fn``'s answer and ξ is a standard normal matrix drawn from ``rng``.

    It stands in for an approximate gradient algorithm in :func:`attention_from_gradient`.
    ``rng`` is a ``numpy.random.Generator`` (shared, so successive calls draw fresh noise) or
    an integer seed.

    Raises :class:`AttnInputError` if ``grad_fn`` is not callable, ``rel`` is not a finite
    number ≥ 0, or ``rng`` is neither a Generator nor an integer ≥ 0; the returned function
    raises it if ``grad_fn`` returns no finite real array or the noise overflows.

    Examples
    --------
    >>> exact = noisy_gradient(lambda *args: np.ones((2, 2)), 0.0, 0)
    >>> exact().tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    _check_grad_fn(grad_fn)
    rel = check_real("rel", rel, minimum=0.0)
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(check_int("rng", rng, minimum=0))

    def noisy(*args):
        G = _returned_gradient(grad_fn(*args), "non-empty finite", lambda G: G.size > 0)
        with np.errstate(over="ignore", invalid="ignore"):
            out = G + rel * np.abs(G).max() * rng.standard_normal(G.shape)
        if not np.isfinite(out).all():
            raise AttnInputError(
                f"rel={rel!r} is too large: the noise rel·max|G|·ξ overflows a float"
            )
        return out

    return noisy
