"""Reference attention math: the forward pass, its gradient, and AS24's loss L(X).

The exact, numerically stable baseline every other algorithm in attnlib is checked against;
it materialises the n×m scores (:mod:`attnlib.fast` has the tiled kernels). Notation:
Q (n, d), K (m, d), V (m, d_v), S = τQKᵀ, P = row-softmax(S), O = PV, lse_i = log Σ_j e^{S_ij};
batched multi-head input follows PyTorch's ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import numpy as np

from ._checks import (
    AttnInputError,
    as_float_array,
    check_backward_inputs,
    check_bool,
    check_loss_inputs,
    check_mask,
    check_qkv,
    check_scale,
    float_dtype,
)
from ._checks import is_batched as _is_batched
from ._heads import backward_heads, forward_heads

__all__ = [
    "attention_forward",
    "attention",
    "attention_backward",
    "attention_forward_backward",
    "attention_loss",
    "attention_loss_grad",
]


def _scores(Q, K, scale, mask, names=("Q", "K", "scale")):
    """S = τ QKᵀ with masked entries set to -inf.

    Raises :class:`AttnInputError` if a kept logit is not finite: finite inputs whose
    logits overflow the dtype have no meaningful softmax (the compiled kernels raise the
    same error). ``names`` are the arguments the message blames.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        S = (Q @ K.T) * Q.dtype.type(scale)
    bad = ~np.isfinite(S)
    if mask is not None:
        bad &= mask
    if bad.any():
        a, b, c = names
        raise AttnInputError(
            f"the logits {_logit_formula(names)} overflow {Q.dtype}: {a}, {b} or {c} is too large"
        )
    if mask is not None:
        S = np.where(mask, S, -np.inf).astype(Q.dtype, copy=False)
    return S


def _logit_formula(names) -> str:
    if tuple(names) == ("Q", "K", "scale"):
        return "scale * Q @ K.T"
    return "(A1 @ X) @ A2.T / d"


def _probabilities(S, lse):
    """P = exp(S - lse), with every entry of a fully masked row (lse = -inf) set to 0."""
    dead = np.isneginf(lse)
    shift = np.where(dead, 0, lse)[:, None]
    with np.errstate(under="ignore"):
        P = np.exp(S - shift)
    if dead.any():
        P[dead] = 0
    return P


def attention_forward(Q, K, V, *, scale=None, mask=None, is_causal=False, enable_gqa=False):
    """Softmax attention O = softmax(τ QKᵀ) V and the row log-sum-exp.

    Batched, multi-head input has PyTorch's ``scaled_dot_product_attention`` layout; each
    head is the 2-D computation.

    Parameters
    ----------
    Q : (n, d) float32 or float64, or batched multi-head (..., H, n, d)
    K : (m, d), or (..., H_kv, m, d) with the batch dimensions of Q
    V : (m, d_v), or (..., H_kv, m, d_v)
    scale : τ > 0, default 1/√d
    mask : optional boolean (n, m) (batched: any shape broadcastable to (..., H, n, m));
        True keeps a score, False sets it to -inf
    is_causal : keep score (i, j) only if j <= i (top-left aligned, as PyTorch's
        ``scaled_dot_product_attention``); not together with ``mask``
    enable_gqa : batched input only: allow H_kv < H (H a multiple of H_kv); query head h
        attends with key/value head h // (H / H_kv), PyTorch's grouped-query convention

    Returns
    -------
    O : (n, d_v) (batched: (..., H, n, d_v)), in the inputs' common dtype
    lse : (n,) (batched: (..., H, n)), lse_i = log Σ_j exp(S_ij); -inf for a fully masked
        row, whose O row is 0

    The max-subtracted softmax keeps logits of ±1e4 finite (FA1 Alg. 1, lines 10–12), and
    P is normalised before it multiplies V, so O is representable whenever V is.

    Raises
    ------
    AttnInputError
        for invalid arguments, and when finite inputs make a kept logit of τ QKᵀ overflow.

    Examples
    --------
    >>> Q, K, V = np.zeros((1, 2)), np.eye(2), np.array([[1.0], [3.0]])
    >>> O, lse = attention_forward(Q, K, V)  # equal scores: the mean of V's rows
    >>> O.tolist(), round(float(lse[0]), 6)  # lse = log 2
    ([[2.0]], 0.693147)
    >>> attention_forward(Q, K, V, is_causal=True)[0].tolist()  # query 0 sees key 0 only
    [[1.0]]
    """
    if _is_batched(Q):
        return _batched_forward(Q, K, V, scale, mask, is_causal, enable_gqa)
    mask = _causal_or_mask(Q, K, mask, is_causal)
    return _attention_forward(Q, K, V, scale=scale, mask=mask)


def _attention_forward(Q, K, V, *, scale=None, mask=None, names=("Q", "K", "scale")):
    """:func:`attention_forward`; ``names`` are the arguments an overflow blames."""
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m = K.shape[0]
    tau = check_scale(scale, d)
    mask = check_mask(mask, n, m)
    dtype = float_dtype(Q, K, V)
    Q, K, V = (x.astype(dtype, copy=False) for x in (Q, K, V))

    S = _scores(Q, K, tau, mask, names)
    row_max = S.max(axis=1)
    dead = np.isneginf(row_max)  # fully masked rows
    shift = np.where(dead, 0, row_max)
    with np.errstate(under="ignore"):
        E = np.exp(S - shift[:, None])
    row_sum = E.sum(axis=1)
    with np.errstate(divide="ignore"):
        lse = (np.log(row_sum) + shift).astype(dtype, copy=False)
    lse[dead] = -np.inf
    # Normalise before multiplying by V: each row of P is a convex combination, so O stays
    # representable whenever V is (V entries near the float maximum included).
    # A fully masked row has E = exp(-inf) = 0 and row sum 0: divide it by 1 and it stays 0.
    E /= np.where(dead, 1, row_sum)[:, None]
    O = E @ V
    return O, lse


def attention(Q, K, V, *, scale=None, mask=None, is_causal=False, enable_gqa=False):
    """O = softmax(τ QKᵀ) V, shape (n, d_v) or batched (..., H, n, d_v).

    Arguments as in :func:`attention_forward` (Q (n, d) or (..., H, n, d), K and V (m, ·)
    or (..., H_kv, m, ·)). Raises :class:`AttnInputError` as :func:`attention_forward` does.
    """
    return attention_forward(
        Q, K, V, scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa
    )[0]


def attention_backward(
    Q, K, V, O, dO, lse, *, scale=None, mask=None, is_causal=False, enable_gqa=False
):
    """Gradients of a scalar loss through O = softmax(τ QKᵀ) V, given dO = ∂loss/∂O.

    Implements FlashAttention-2's backward equations (FA2 Alg. 2; FA1 App. B.2), with P
    recomputed from the stored row log-sum-exp instead of being kept from the forward pass::

        P  = exp(τ QKᵀ - lse)           (n, m)
        D  = rowsum(dO ∘ O)             (n,)
        dV = Pᵀ dO                      (m, d_v)
        dP = dO Vᵀ                      (n, m)
        dS = P ∘ (dP - D)               (n, m)
        dQ = τ dS K                     (n, d)
        dK = τ dSᵀ Q                    (m, d)

    Parameters
    ----------
    Q, K, V : (n, d), (m, d), (m, d_v), or batched (..., H, n, d), (..., H_kv, m, d),
        (..., H_kv, m, d_v)
    O, lse : the outputs of :func:`attention_forward` on the same inputs
    dO : (n, d_v) (batched: (..., H, n, d_v))
    scale, mask, is_causal, enable_gqa : as in :func:`attention_forward`

    Returns
    -------
    dQ, dK, dV : shaped like Q, K, V. Fully masked rows contribute nothing; with grouped
    heads, dK and dV of a key/value head sum the contributions of its H / H_kv query heads.

    Raises
    ------
    AttnInputError
        for invalid arguments (the message names the argument), and when finite inputs make a
        kept logit of τ QKᵀ overflow.

    Examples
    --------
    >>> Q, K, V = np.zeros((1, 2)), np.eye(2), np.array([[1.0], [3.0]])
    >>> O, lse = attention_forward(Q, K, V, scale=1.0)
    >>> dQ, dK, dV = attention_backward(Q, K, V, O, np.ones((1, 1)), lse, scale=1.0)
    >>> dQ.tolist(), dK.tolist(), dV.tolist()
    ([[-0.5, 0.5]], [[0.0, 0.0], [0.0, 0.0]], [[0.5], [0.5]])
    """
    if _is_batched(Q):
        return _batched_backward(Q, K, V, O, dO, lse, scale, mask, is_causal, enable_gqa)
    mask = _causal_or_mask(Q, K, mask, is_causal)
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    n, d = Q.shape
    m = K.shape[0]
    tau = check_scale(scale, d)
    mask = check_mask(mask, n, m)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    Q, K, V, O, dO, lse = (x.astype(dtype, copy=False) for x in (Q, K, V, O, dO, lse))

    P = _probabilities(_scores(Q, K, tau, mask), lse)
    D = np.einsum("ij,ij->i", dO, O)
    dV = P.T @ dO
    dS = P * (dO @ V.T - D[:, None])
    t = dtype.type(tau)
    dQ = (dS @ K) * t
    dK = (dS.T @ Q) * t
    return dQ, dK, dV


def attention_forward_backward(
    Q, K, V, dO, *, scale=None, mask=None, is_causal=False, enable_gqa=False
):
    """One training step's exact attention work: :func:`attention_forward`, then
    :func:`attention_backward` for the upstream gradient ``dO`` = ∂loss/∂O.

    Arguments as in :func:`attention_forward`, and ``dO`` shaped like O: (n, d_v), or
    (..., H, n, d_v). Returns ``(O, dQ, dK, dV)``; its time is Θ(n m d) and its memory
    Θ(n m), since both passes hold the n×m scores.

    Raises
    ------
    AttnInputError
        as :func:`attention_forward` and :func:`attention_backward` do.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V, dO = (rng.standard_normal((4, 3)) for _ in range(4))
    >>> O, dQ, dK, dV = attention_forward_backward(Q, K, V, dO)
    >>> O2, lse = attention_forward(Q, K, V)
    >>> grads = attention_backward(Q, K, V, O2, dO, lse)
    >>> all(np.array_equal(a, b) for a, b in zip((dQ, dK, dV), grads))
    True
    """
    options = {"scale": scale, "mask": mask, "is_causal": is_causal, "enable_gqa": enable_gqa}
    O, lse = attention_forward(Q, K, V, **options)
    return (O, *attention_backward(Q, K, V, O, dO, lse, **options))


# ---------------------------------------------------------------------------------------
# Batched, multi-head input (PyTorch's scaled_dot_product_attention conventions)
# ---------------------------------------------------------------------------------------


def _causal_or_mask(Q, K, mask, is_causal):
    """The 2-D element mask: ``mask``, or the causal mask when ``is_causal``."""
    if not check_bool("is_causal", is_causal):
        return mask
    if mask is not None:
        raise AttnInputError("mask and is_causal=True cannot be given together")
    n, m = np.shape(as_float_array("Q", Q))[0], np.shape(as_float_array("K", K))[0]
    return np.tri(n, m, dtype=bool)


def _batched_forward(Q, K, V, scale, mask, is_causal, enable_gqa):
    def forward(q, k, v, tau, keep, _):
        return _attention_forward(q, k, v, scale=tau, mask=keep)

    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    return forward_heads(Q, K, V, **kw, forward=forward, causal_mask=True)


def _batched_backward(Q, K, V, O, dO, lse, scale, mask, is_causal, enable_gqa):
    def backward(q, k, v, o, do, ls, tau, keep, _):
        return attention_backward(q, k, v, o, do, ls, scale=tau, mask=keep)

    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    return backward_heads(Q, K, V, O, dO, lse, **kw, backward=backward, causal_mask=True)


# ---------------------------------------------------------------------------------------
# AS24's formulation: L(X) = ½‖D(X)⁻¹ exp(A₁XA₂ᵀ/d) A₃Y − E‖²_F
# ---------------------------------------------------------------------------------------


def attention_loss(X, A1, A2, A3, Y, E):
    """AS24 Definition 1.2: L(X) = ½‖D(X)⁻¹ exp(A₁XA₂ᵀ/d) A₃Y − E‖²_F.

    Shapes: A₁ (n, d), A₂ and A₃ (m, d) (the paper has m = n), E (n, d), X and Y (d, d).
    X stands for W_Q W_Kᵀ and Y for W_V. The scale is 1/d, as in the AS papers.
    Computed stably: the softmax is that of :func:`attention_forward` with τ = 1/d.

    Raises :class:`AttnInputError` for invalid arguments, and when finite inputs overflow
    (the logits A₁XA₂ᵀ/d, the values A₃Y, or the loss itself).
    """
    X, A1, A2, A3, Y, E = check_loss_inputs(X, A1, A2, A3, Y, E)
    d = A1.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        Q, h = A1 @ X, A3 @ Y
    _check_loss_logits(Q)
    _check_values(h)
    O, _ = _attention_forward(Q, A2, h, scale=1.0 / d, names=_LOSS_NAMES)
    with np.errstate(over="ignore", invalid="ignore"):
        c = O - E
        loss = float(0.5 * np.sum(c * c, dtype=np.float64))
    if not np.isfinite(loss):
        raise AttnInputError("the loss overflows float64: A3, Y or E is too large")
    return loss


_LOSS_NAMES = ("A1", "X", "A2")


def _check_loss_logits(S) -> None:
    """A₁X or the logits (A₁X)A₂ᵀ/d must be finite (the contract of :func:`_scores`)."""
    if not np.isfinite(S).all():
        raise AttnInputError(
            f"the logits {_logit_formula(_LOSS_NAMES)} overflow {S.dtype}: A1, X or A2 is too large"
        )


def _check_values(h) -> None:
    if not np.isfinite(h).all():
        raise AttnInputError(f"the values A3 @ Y overflow {h.dtype}: A3 or Y is too large")


def attention_loss_grad(X, A1, A2, A3, Y, E):
    """dL/dX for AS24's loss, by the closed form of AS24 Lemma C.7, with the factor 1/d.

    With S = A₁XA₂ᵀ/d::

        f  = D⁻¹ exp(S)          row-softmax                     (n, m)
        h  = A₃ Y                                                (m, d)
        c  = f h − E                                             (n, d)
        q  = c hᵀ                                                (n, m)
        p₁ = f ∘ q
        r  = rowsum(p₁) = rowsum(c ∘ (c + E))                    (n,)
        p  = p₁ − diag(r) f
        dL/dX = (1/d) · A₁ᵀ p A₂                                 (d, d)

    The factor 1/d comes from the 1/d inside exp. AS24's Appendices B–C leave it out on
    purpose, as a rescaling; its Theorem D.6, whose f has the 1/d, keeps their formula
    without it (our reading; finite differences confirm the 1/d).

    Raises :class:`AttnInputError` for invalid arguments, and when finite inputs overflow
    (the logits A₁XA₂ᵀ/d, the values A₃Y, or the gradient itself).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((2, 3, 3))
    >>> A1, A2, A3, E = rng.standard_normal((4, 5, 3))
    >>> O, lse = attention_forward(A1 @ X, A2, A3 @ Y, scale=1 / 3)
    >>> dQ, _, _ = attention_backward(A1 @ X, A2, A3 @ Y, O, O - E, lse, scale=1 / 3)
    >>> G = attention_loss_grad(X, A1, A2, A3, Y, E)  # the backward pass at Q = A₁X, τ = 1/d
    >>> np.allclose(G, A1.T @ dQ, rtol=1e-12, atol=0)
    True
    """
    X, A1, A2, A3, Y, E = check_loss_inputs(X, A1, A2, A3, Y, E)
    d = A1.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        S = (A1 @ X @ A2.T) / A1.dtype.type(d)
    _check_loss_logits(S)
    S -= S.max(axis=1, keepdims=True)  # the softmax is shift-invariant; this keeps exp finite
    f = np.exp(S)
    f /= f.sum(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        h = A3 @ Y
    _check_values(h)
    with np.errstate(over="ignore", invalid="ignore"):
        c = f @ h - E
        q = c @ h.T
        p1 = f * q
        r = np.einsum("ij,ij->i", c, c + E)
        p = p1 - r[:, None] * f
        G = (A1.T @ p @ A2) / A1.dtype.type(d)
    if not np.isfinite(G).all():
        raise AttnInputError(
            f"the gradient overflows {G.dtype}: the entries of A1, A2, A3, Y or E are too large"
        )
    return G
