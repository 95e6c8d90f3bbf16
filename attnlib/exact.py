"""Reference attention math: the forward pass, its gradient, and AS24's loss L(X).

Everything here materialises the n×m score matrix. It is the exact, numerically stable
baseline every other algorithm in attnlib is checked against, not a fast path
(see :mod:`attnlib.fast` for the tiled kernels).

Notation (FlashAttention's): Q is n×d, K is m×d, V is m×d_v,
S = τ QKᵀ, P = row-softmax(S), O = PV, lse_i = log Σ_j exp(S_ij).
"""

from __future__ import annotations

import numpy as np

from ._checks import (
    AttnInputError,
    check_backward_inputs,
    check_loss_inputs,
    check_mask,
    check_qkv,
    check_scale,
    float_dtype,
)

__all__ = [
    "attention_forward",
    "attention",
    "attention_backward",
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


def attention_forward(Q, K, V, *, scale=None, mask=None):
    """Softmax attention O = softmax(τ QKᵀ) V and the row log-sum-exp.

    Parameters
    ----------
    Q : (n, d) float32 or float64
    K : (m, d)
    V : (m, d_v)
    scale : τ > 0, default 1/√d
    mask : optional boolean (n, m); True keeps a score, False sets it to -inf

    Returns
    -------
    O : (n, d_v), in the inputs' common dtype
    lse : (n,), lse_i = log Σ_j exp(S_ij); -inf for a fully masked row, whose O row is 0

    The max-subtracted softmax keeps logits of ±1e4 finite (FA1 Alg. 1, lines 10–12), and
    P is normalised before it multiplies V, so O is representable whenever V is.

    Raises
    ------
    AttnInputError
        for invalid arguments, and when finite inputs make a kept logit of τ QKᵀ overflow.
    """
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


def attention(Q, K, V, *, scale=None, mask=None):
    """O = softmax(τ QKᵀ) V, shape (n, d_v). See :func:`attention_forward`."""
    return attention_forward(Q, K, V, scale=scale, mask=mask)[0]


def attention_backward(Q, K, V, O, dO, lse, *, scale=None, mask=None):
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
    Q, K, V : (n, d), (m, d), (m, d_v)
    O, lse : the outputs of :func:`attention_forward` on the same inputs
    dO : (n, d_v)
    scale, mask : as in :func:`attention_forward`

    Returns
    -------
    dQ, dK, dV : (n, d), (m, d), (m, d_v). Fully masked rows contribute nothing.
    """
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
