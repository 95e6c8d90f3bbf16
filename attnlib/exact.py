"""Reference attention math: the forward pass, its gradient, and AS24's loss L(X).

The exact, numerically stable baseline every other algorithm in attnlib is checked against;
it materialises the n×m scores (:mod:`attnlib.fast` has the tiled kernels). Notation:
Q (n, d), K (m, d), V (m, d_v), S = τQKᵀ, P = row-softmax(S), O = PV, lse_i = log Σ_j e^{S_ij};
batched multi-head input follows PyTorch's ``scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import AttnInputError, check_loss_inputs
from ._heads import Problem, causal_keep, causal_mask_bytes, normalise
from .logits import _lse_slack, _probabilities_from_lse

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
    # In place, so that the n × m scores exist once (the memory guards count them once).
    with np.errstate(over="ignore", invalid="ignore"):
        S = Q @ K.T
        S *= Q.dtype.type(scale)
    # min and max propagate NaN and need no n × m temporary: the usual, all-finite case
    if not (np.isfinite(S.max()) and np.isfinite(S.min())):
        bad = ~np.isfinite(S)
        if mask is not None:
            bad &= mask
        if bad.any():
            a, b, c = names
            raise AttnInputError(
                f"the logits {_logit_formula(names)} overflow {Q.dtype}: {a}, {b} or {c} is "
                "too large"
            )
        del bad
    if mask is not None:
        np.copyto(S, -np.inf, where=~mask)
    return S


def _logit_formula(names) -> str:
    if tuple(names) == ("Q", "K", "scale"):
        return "scale * Q @ K.T"
    return "(A1 @ X) @ A2.T / d"


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
        ``scaled_dot_product_attention``); refused together with ``mask``, as PyTorch
        refuses both: pass the combined keep-mask ``mask & np.tri(n, m, dtype=bool)``
    enable_gqa : batched input: allow H_kv < H (H a multiple of H_kv); query head h
        attends with key/value head h // (H / H_kv), PyTorch's grouped-query convention.
        A bool on 2-D input too, where it has no effect (one head has nothing to group)

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
        for invalid arguments, when finite inputs make a kept logit of τ QKᵀ overflow, and,
        before anything is allocated, when the working memory (the n × m scores of a head,
        the outputs, dtype conversions) would exceed
        :data:`attnlib.config.MAX_ALLOCATION_BYTES`.

    Examples
    --------
    >>> Q, K, V = np.zeros((1, 2)), np.eye(2), np.array([[1.0], [3.0]])
    >>> O, lse = attention_forward(Q, K, V)  # equal scores: the mean of V's rows
    >>> O.tolist(), round(float(lse[0]), 6)  # lse = log 2
    ([[2.0]], 0.693147)
    >>> attention_forward(Q, K, V, is_causal=True)[0].tolist()  # query 0 sees key 0 only
    [[1.0]]
    """
    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    p = normalise(Q, K, V, **kw, what="the exact forward pass", working=_forward_working)
    O = np.empty((p.heads, p.n, p.d_v), p.dtype)
    lse = np.empty((p.heads, p.n), p.dtype)
    for h, keep in enumerate(_keeps(p)):
        _forward_values(p.Q[h], p.K[h // p.g], p.V[h // p.g], p.scale, keep, O[h], lse[h])
    return p.unflatten(O), p.unflatten(lse)


def _keeps(p: Problem):
    """The (n, m) keep-mask of each query head of ``p`` in turn, or None: with is_causal, the
    causal mask, built once."""
    if p.is_causal:
        tri = causal_keep(p.n, p.m)
        return (tri for _ in range(p.heads))
    return (p.keep(h) for h in range(p.heads))


#: Row vectors of the exact passes (row maxima, shifts, sums, lse, D), in bytes per row, and
#: a fixed allowance for numpy's reduction buffers (8192 entries each) and the blocks of the
#: bounded checks, so that the guards bound what tracemalloc sees.
_ROW_BYTES = 64
_BUFFER_BYTES = 1 << 18


def _forward_parts(n, m, d_v, dtype, masked, names=("Q", "K", "V")):
    """The working memory of one 2-D exact forward pass, as :func:`check_memory_parts` parts:
    the n × m scores (exponentiated in place), with a byte per score for the complement of a
    mask and another for the overflow check or the causal mask, and the outputs with the
    row statistics."""
    q, k, v = names
    scores = n * m * (dtype.itemsize + (2 if masked else 0))
    outputs = n * d_v * dtype.itemsize + _ROW_BYTES * n + _BUFFER_BYTES
    return [
        (scores, f"the n × m = {n} × {m} scores", f"{q} or {k}"),
        (outputs, "O, lse and the row statistics", f"{q} or {v}"),
    ]


def _forward_working(p: Problem) -> list:
    """The exact forward pass's working memory for problem ``p`` beyond its conversions: one
    head's pass (:func:`_forward_parts`), the outputs of every head of batched input, and
    the causal mask."""
    parts = _forward_parts(p.n, p.m, p.d_v, p.dtype, p.mask is not None or p.is_causal)
    if p.lead:
        outputs = p.heads * p.n * (p.d_v + 1) * p.dtype.itemsize
        parts.append((outputs, "the outputs O and lse", "Q or V"))
    return parts + _causal_part(p)


def _causal_part(p: Problem) -> list:
    if not p.is_causal:
        return []
    return [(causal_mask_bytes(p.n, p.m), "the (n, m) causal mask", "Q or K")]


def _forward_values(Q, K, V, tau, keep, O, lse, names=("Q", "K", "scale")):
    """O (n, d_v) and lse (n,) of one head, written into ``O`` and ``lse``: Q (n, d),
    K (m, d), V (m, d_v) validated and of one dtype, ``keep`` the (n, m) keep-mask or None,
    ``names`` the arguments an overflow blames."""
    S = _scores(Q, K, tau, keep, names)
    row_max = S.max(axis=1)
    dead = np.isneginf(row_max)  # fully masked rows
    shift = np.where(dead, 0, row_max)
    # exp(S - shift) in place: the scores exist once
    S -= shift[:, None]
    with np.errstate(under="ignore"):
        E = np.exp(S, out=S)
    row_sum = E.sum(axis=1)
    with np.errstate(divide="ignore"):
        np.add(np.log(row_sum), shift, out=lse)
    lse[dead] = -np.inf
    # Normalise before multiplying by V: each row of P is a convex combination, so O stays
    # representable whenever V is (V entries near the float maximum included).
    # A fully masked row has E = exp(-inf) = 0 and row sum 0: divide it by 1 and it stays 0.
    E /= np.where(dead, 1, row_sum)[:, None]
    np.matmul(E, V, out=O)


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
        for invalid arguments (the message names the argument), when finite inputs make a
        kept logit of τ QKᵀ overflow, and, before anything is allocated, when the working
        memory (P and dP, each n × m, the gradients, dtype conversions) would exceed
        :data:`attnlib.config.MAX_ALLOCATION_BYTES`; when lse is not the forward pass's (a
        logit of its row exceeds it by more than rounding allows, so P = exp(S − lse) > 1);
        and when a gradient does not fit the dtype.

    Examples
    --------
    >>> Q, K, V = np.zeros((1, 2)), np.eye(2), np.array([[1.0], [3.0]])
    >>> O, lse = attention_forward(Q, K, V, scale=1.0)
    >>> dQ, dK, dV = attention_backward(Q, K, V, O, np.ones((1, 1)), lse, scale=1.0)
    >>> dQ.tolist(), dK.tolist(), dV.tolist()
    ([[-0.5, 0.5]], [[0.0, 0.0], [0.0, 0.0]], [[0.5], [0.5]])
    """
    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    what, outputs = "the exact backward pass", (O, dO, lse)
    p = normalise(Q, K, V, **kw, outputs=outputs, what=what, working=_backward_working)
    if p.heads == 1:  # the head's own gradients are the result
        dQ, dK, dV = _backward_head(p, 0, next(_keeps(p)))
        return p.unflatten(dQ[None]), p.unflatten(dK[None], kv=True), p.unflatten(dV[None], kv=True)
    dQ = np.empty(p.Q.shape, p.dtype)
    dK, dV = np.zeros(p.K.shape, p.dtype), np.zeros(p.V.shape, p.dtype)
    for h, keep in enumerate(_keeps(p)):
        # a key/value head's gradients add those of its query heads in their order
        dQ[h], dK_h, dV_h = _backward_head(p, h, keep)
        dK[h // p.g] += dK_h
        dV[h // p.g] += dV_h
    return p.unflatten(dQ), p.unflatten(dK, kv=True), p.unflatten(dV, kv=True)


def _backward_head(p: Problem, h: int, keep):
    """dQ, dK, dV of query head h of ``p`` (for its key/value head h // g), with the (n, m)
    keep-mask ``keep`` or None, made finite where they are by :func:`_finite_in_dO`."""
    j = h // p.g
    args = (p.Q[h], p.K[j], p.V[j], p.O[h])
    return _finite_in_dO(lambda dO: _backward_values(*args, dO, p.lse[h], p.scale, keep), p.dO[h])


def _backward_parts(n, m, d, d_v, dtype, masked):
    """The working memory of one 2-D exact backward pass, as :func:`check_memory_parts` parts:
    P (the scores, exponentiated in place) and dP = dO Vᵀ (turned into dS in place), each
    n × m, the bytes per score of :func:`_forward_parts`, and the gradients."""
    scores = n * m * (2 * dtype.itemsize + (2 if masked else 0))
    grads = (n * d + m * d + m * d_v) * dtype.itemsize + _ROW_BYTES * (n + m) + _BUFFER_BYTES
    return [
        (scores, f"P and dP, each n × m = {n} × {m}", "Q or K"),
        (grads, "the gradients dQ, dK and dV", "Q, K or V"),
    ]


def _backward_working(p: Problem) -> list:
    """The exact backward pass's working memory for problem ``p`` beyond its conversions: one
    head's pass (:func:`_backward_parts`), the gradients of every head of batched input, and
    the causal mask."""
    parts = _backward_parts(p.n, p.m, p.d, p.d_v, p.dtype, p.mask is not None or p.is_causal)
    if p.lead:
        grads = (p.Q.size + p.K.size + p.V.size) * p.dtype.itemsize
        parts.append((grads, "the gradients", "Q, K or V"))
    return parts + _causal_part(p)


def _finite_in_dO(backward, dO):
    """``backward(dO)`` → (dQ, dK, dV), a backward pass, which is linear in dO, made finite
    where the true gradients are: if a gradient overflows for finite inputs (dO or V near the
    float range make dP = dO Vᵀ overflow), the pass runs again on dO·2⁻ᵉ, with e the exponent
    of max|dO| (exact: a power of two), and its gradients are scaled back by 2ᵉ.

    Raises
    ------
    AttnInputError
        if a gradient is still not finite: it does not fit the dtype, or an intermediate
        does not (dO, V, Q or K is too large).
    """
    # overflow is checked here, on the results: numpy's warnings would only be noise
    with np.errstate(over="ignore", invalid="ignore"):
        grads = backward(dO)
        if all(np.isfinite(g).all() for g in grads):
            return grads
        e = math.frexp(float(np.abs(dO).max()))[1]  # max|dO| < 2^e
        grads = backward(np.ldexp(dO, -e).astype(dO.dtype, copy=False))
        grads = tuple(np.ldexp(g, e).astype(g.dtype, copy=False) for g in grads)
    if not all(np.isfinite(g).all() for g in grads):
        raise AttnInputError(
            f"the gradients dQ, dK, dV overflow {dO.dtype}: dO, V, Q or K is too large"
        )
    return grads


def _backward_values(Q, K, V, O, dO, lse, tau, mask):
    """dQ, dK, dV of one 2-D head, arrays validated and of one dtype, ``mask`` the keep-mask
    or None."""
    dtype = Q.dtype
    with np.errstate(over="ignore"):  # a row norm beyond the float range: infinite slack
        slack = _lse_slack(Q, K, lse, tau)
    P = _probabilities_from_lse(_scores(Q, K, tau, mask), lse, slack)
    D = np.einsum("ij,ij->i", dO, O)
    dV = P.T @ dO
    # dS = P ∘ (dO Vᵀ − D) in place of dP: two n × m arrays at most (the guard's count)
    dS = dO @ V.T
    dS -= D[:, None]
    dS *= P
    del P
    t = dtype.type(tau)
    dQ = dS @ K
    dQ *= t
    dK = dS.T @ Q
    dK *= t
    return dQ, dK, dV


# ---------------------------------------------------------------------------------------
# AS24's formulation: L(X) = ½‖D(X)⁻¹ exp(A₁XA₂ᵀ/d) A₃Y − E‖²_F
# ---------------------------------------------------------------------------------------


def attention_loss(X, A1, A2, A3, Y, E):
    """AS24 Definition 1.2: L(X) = ½‖D(X)⁻¹ exp(A₁XA₂ᵀ/d) A₃Y − E‖²_F.

    Shapes: A₁ (n, d), A₂ and A₃ (m, d) (the paper has m = n), E (n, d), X and Y (d, d).
    X stands for W_Q W_Kᵀ and Y for W_V. The scale is 1/d, as in the AS papers.
    Computed stably: the softmax is that of :func:`attention_forward` with τ = 1/d.

    Raises :class:`AttnInputError` for invalid arguments, when finite inputs overflow (the
    logits A₁XA₂ᵀ/d, the values A₃Y, or the loss itself), and, before anything is allocated,
    when the n × m logits and the products would exceed
    :data:`attnlib.config.MAX_ALLOCATION_BYTES`.
    """
    X, A1, A2, A3, Y, E = check_loss_inputs(
        X, A1, A2, A3, Y, E, what="attention_loss", working=_loss_parts
    )
    d = A1.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        Q, h = A1 @ X, A3 @ Y
    _check_loss_logits(Q)
    _check_values(h)
    # the memory of this forward pass is part of check_loss_inputs's guard (_loss_parts)
    O, lse = np.empty((Q.shape[0], d), Q.dtype), np.empty(Q.shape[0], Q.dtype)
    _forward_values(Q, A2, h, 1.0 / d, None, O, lse, _LOSS_NAMES)
    with np.errstate(over="ignore", invalid="ignore"):
        c = O - E
        c *= c
        loss = float(0.5 * np.sum(c, dtype=np.float64))
    if not np.isfinite(loss):
        raise AttnInputError("the loss overflows float64: A3, Y or E is too large")
    return loss


_LOSS_NAMES = ("A1", "X", "A2")
#: The arguments whose sizes stand behind Q, K and V in the loss: n, m and the values.
_LOSS_SIZES = ("A1", "A2", "A3")


def _loss_parts(n, m, d, dtype):
    """attention_loss's working memory beyond the conversions: A₁X, A₃Y, the forward pass on
    them and the residual."""
    products = ((2 * n + m) * d * dtype.itemsize, "A1 @ X, A3 @ Y and O - E", "A1 or A3")
    return [products, *_forward_parts(n, m, d, dtype, False, _LOSS_SIZES)]


def _loss_grad_parts(n, m, d, dtype):
    """attention_loss_grad's working memory beyond the conversions: f (the logits, in place)
    and q = c hᵀ (turned into p in place), each n × m, and the (·, d) products."""
    isz = dtype.itemsize
    small = (3 * n + 2 * m + 2 * d) * d * isz + _ROW_BYTES * n + _BUFFER_BYTES
    small = (small, "the (·, d) products", "A1")
    return [(2 * n * m * isz, f"f and q, each n × m = {n} × {m}", "A1 or A2"), small]


def _all_finite(a) -> bool:
    """Whether every entry of a float array is finite, with no temporary of its size."""
    return bool(np.isfinite(a.max()) and np.isfinite(a.min()))


def _check_loss_logits(S) -> None:
    """A₁X or the logits (A₁X)A₂ᵀ/d must be finite (the contract of :func:`_scores`)."""
    if not _all_finite(S):
        raise AttnInputError(
            f"the logits {_logit_formula(_LOSS_NAMES)} overflow {S.dtype}: A1, X or A2 is too large"
        )


def _check_values(h) -> None:
    if not _all_finite(h):
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

    Raises :class:`AttnInputError` for invalid arguments, when finite inputs overflow (the
    logits A₁XA₂ᵀ/d, the values A₃Y, or the gradient itself), and, before anything is
    allocated, when its two n × m arrays and the products would exceed
    :data:`attnlib.config.MAX_ALLOCATION_BYTES`.

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
    X, A1, A2, A3, Y, E = check_loss_inputs(
        X, A1, A2, A3, Y, E, what="attention_loss_grad", working=_loss_grad_parts
    )
    d = A1.shape[1]
    # Every n × m step in place: f and q are the only two n × m arrays (the guard's count).
    with np.errstate(over="ignore", invalid="ignore"):
        S = A1 @ X @ A2.T
        S /= A1.dtype.type(d)
    _check_loss_logits(S)
    S -= S.max(axis=1, keepdims=True)  # the softmax is shift-invariant; this keeps exp finite
    f = np.exp(S, out=S)
    f /= f.sum(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        h = A3 @ Y
    _check_values(h)
    with np.errstate(over="ignore", invalid="ignore"):
        c = f @ h
        c -= E
        p = c @ h.T  # q, then p₁ = f ∘ q, then p = p₁ − diag(r) f
        p *= f
        r = np.einsum("ij,ij->i", c, c + E)
        f *= r[:, None]
        p -= f
        G = (A1.T @ p @ A2) / A1.dtype.type(d)
    if not np.isfinite(G).all():
        raise AttnInputError(
            f"the gradient overflows {G.dtype}: the entries of A1, A2, A3, Y or E are too large"
        )
    return G
