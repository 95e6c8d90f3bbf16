"""Argument bundles shared by every attention implementation: Q, K, V and the backward pass's
O, dO, lse in the 2-D layout and in PyTorch's batched, multi-head layout (grouped-query
attention included), and AS24's loss arguments."""

from __future__ import annotations

import numpy as np

from .arrays import _as_array, as_float_array, check_cols, check_rows, check_shape, float_dtype
from .error import AttnInputError
from .memory import check_memory_parts, conversion_parts
from .scalars import check_bool, check_int

__all__ = [
    "check_qkv",
    "check_backward_inputs",
    "check_loss_inputs",
    "is_batched",
    "check_batched_qkv",
    "check_batched_outputs",
    "check_batched_mask",
    "check_causal",
    "check_head_counts",
    "check_head_qkv",
    "check_head_backward",
    "check_block",
    "check_partials",
]


def check_qkv(Q, K, V):
    """Validate attention inputs Q (n, d), K (m, d), V (m, d_v); return them as arrays."""
    Q = as_float_array("Q", Q)
    K = as_float_array("K", K)
    V = as_float_array("V", V)
    check_cols("K", K, Q.shape[1], "Q")
    check_rows("V", V, K.shape[0], "K")
    return Q, K, V


def check_backward_inputs(Q, K, V, O, dO, lse, *, allow_masked_rows: bool = True):
    """Validate the arguments of a backward pass: Q, K, V as in :func:`check_qkv`, then
    O and dO (n, d_v) and lse (n,). ``lse`` may hold -inf (a fully masked row) only when
    ``allow_masked_rows``; it never holds NaN or +inf."""
    Q, K, V = check_qkv(Q, K, V)
    n, dv = Q.shape[0], V.shape[1]
    O = as_float_array("O", O)
    check_shape("O", O, (n, dv), "(n, d_v)")
    dO = as_float_array("dO", dO)
    check_shape("dO", dO, (n, dv), "(n, d_v) like O")
    lse = as_float_array("lse", lse, ndim=1, allow_neg_inf=allow_masked_rows)
    check_shape("lse", lse, (n,), "(n,)")
    return Q, K, V, O, dO, lse


def check_loss_inputs(X, A1, A2, A3, Y, E, *, what="the loss", working=None):
    """Validate AS24's loss arguments: A₁ (n, d), A₂ and A₃ (m, d), X and Y (d, d),
    E (n, d). Returns them converted to their common float dtype.

    Before converting, refuses (:func:`check_memory_parts`, as ``what``) a call whose
    conversions and working memory exceed the limit: ``working(n, m, d, dtype)`` returns the
    caller's own parts."""
    A1 = as_float_array("A1", A1)
    n, d = A1.shape
    A2 = as_float_array("A2", A2)
    check_cols("A2", A2, d, "A1")
    A3 = as_float_array("A3", A3)
    check_cols("A3", A3, d, "A1")
    check_rows("A3", A3, A2.shape[0], "A2")
    X = as_float_array("X", X)
    check_shape("X", X, (d, d), "(d, d)")
    Y = as_float_array("Y", Y)
    check_shape("Y", Y, (d, d), "(d, d)")
    E = as_float_array("E", E)
    check_shape("E", E, (n, d), "(n, d) like A1")
    dtype = float_dtype(X, A1, A2, A3, Y, E)
    arrays = {"X": X, "A1": A1, "A2": A2, "A3": A3, "Y": Y, "E": E}
    parts = conversion_parts(dtype, arrays)
    if working is not None:
        parts += working(n, A2.shape[0], d, dtype)
    check_memory_parts(what, parts)
    return tuple(a.astype(dtype, copy=False) for a in arrays.values())


# ---- batched, multi-head input (PyTorch's scaled_dot_product_attention layout) -----------


def is_batched(Q) -> bool:
    """Q has three or more dimensions (checked fully later; ragged input is not batched)."""
    try:
        return np.ndim(Q) >= 3
    except Exception:  # ragged lists and the like: the 2-D path reports them
        return False


def check_batched_qkv(Q, K, V, enable_gqa):
    """Q (..., H, n, d), K (..., H_kv, m, d), V (..., H_kv, m, d_v), same batch dimensions,
    H == H_kv unless ``enable_gqa`` (then H a multiple of H_kv). Returns the arrays and the
    group size g = H // H_kv: query head h uses key/value head h // g."""
    Q = as_float_array("Q", Q, ndim=None)
    K = as_float_array("K", K, ndim=None)
    V = as_float_array("V", V, ndim=None)
    for name, a, like in (("K", K, "(..., H_kv, m, d)"), ("V", V, "(..., H_kv, m, d_v)")):
        if a.ndim != Q.ndim:
            raise AttnInputError(
                f"{name} must have {Q.ndim} dimensions {like} like Q, got shape {a.shape}"
            )
        if a.shape[:-3] != Q.shape[:-3]:
            raise AttnInputError(
                f"{name} must have Q's batch dimensions {Q.shape[:-3]}, got shape {a.shape}"
            )
    H, _, d = Q.shape[-3:]
    H_kv, m, _ = K.shape[-3:]
    if K.shape[-1] != d:
        raise AttnInputError(f"K must have d={d} columns like Q, got {K.shape[-1]}")
    if V.shape[-3:-1] != (H_kv, m):
        raise AttnInputError(
            f"V must have (H_kv, m) = {(H_kv, m)} like K in (..., H_kv, m, d_v), got {V.shape}"
        )
    *_, g = check_head_counts(H, H_kv, enable_gqa, heads=("Q's head count H", "K's H_kv"))
    return Q, K, V, g


def check_batched_outputs(O, dO, lse, rows: tuple[int, ...], d_v: int):
    """Validate a batched backward pass's O and dO (..., H, n, d_v) and lse (..., H, n), where
    ``rows`` is (..., H, n); lse may hold -inf (a fully masked row). Returns the arrays."""
    O = as_float_array("O", O, ndim=None)
    check_shape("O", O, (*rows, d_v), "(..., H, n, d_v)")
    dO = as_float_array("dO", dO, ndim=None)
    check_shape("dO", dO, (*rows, d_v), "(..., H, n, d_v) like O")
    lse = as_float_array("lse", lse, ndim=None, allow_neg_inf=True)
    check_shape("lse", lse, rows, "(..., H, n)")
    return O, dO, lse


def check_causal(mask, is_causal) -> bool:
    """``is_causal`` as a bool, refused together with a mask, as PyTorch's
    ``scaled_dot_product_attention`` refuses ``attn_mask`` with ``is_causal=True``: one
    keep-mask says what both would, ``mask & np.tri(n, m, dtype=bool)``."""
    causal = check_bool("is_causal", is_causal)
    if causal and mask is not None:
        raise AttnInputError(
            "mask and is_causal=True cannot be given together (as in PyTorch's "
            "scaled_dot_product_attention): pass the combined keep-mask "
            "mask & np.tri(n, m, dtype=bool) instead"
        )
    return causal


def check_batched_mask(mask, is_causal, shape: tuple[int, ...]):
    """Validate a batched keep-mask and ``is_causal`` for scores of shape (..., H, n, m).

    Returns ``(mask, causal)``: the mask as a read-only broadcast view of that shape (or
    None) and ``is_causal`` as a bool; the two cannot be given together (:func:`check_causal`).
    """
    causal = check_causal(mask, is_causal)
    if mask is None:
        return None, causal
    arr = _as_array("mask", mask)
    if arr.dtype != np.bool_:
        raise AttnInputError(f"mask must have a boolean dtype (True = keep), got dtype {arr.dtype}")
    try:
        return np.broadcast_to(arr, shape), causal
    except ValueError:
        raise AttnInputError(
            f"mask must be broadcastable to (..., H, n, m) = {shape}, got {arr.shape}"
        ) from None


# ---- one sequence's heads (the two-level machine's multi-head layout) ----------------------


def check_head_counts(H, H_kv, enable_gqa, *, heads=("H", "H_kv")) -> tuple[int, int, int]:
    """H query heads over H_kv key/value heads, as PyTorch's ``enable_gqa`` takes them: equal
    unless ``enable_gqa``, and then H a multiple of H_kv. Returns ``(H, H_kv, g)`` with
    g = H // H_kv: query head h uses key/value head h // g. ``heads`` names the two counts in
    the messages (the arguments H and H_kv, or the arrays they are read from)."""
    gqa = check_bool("enable_gqa", enable_gqa)
    query, kv = heads
    H, H_kv = check_int(query, H), check_int(kv, H_kv)
    if H != H_kv and not gqa:
        raise AttnInputError(
            f"{query}={H} differs from {kv}={H_kv}: pass enable_gqa=True for grouped-query "
            "attention"
        )
    if H % H_kv:
        raise AttnInputError(f"{query}={H} must be a multiple of {kv}={H_kv}")
    return H, H_kv, H // H_kv


def check_head_qkv(Q, K, V, enable_gqa):
    """One sequence's attention inputs: one head, Q (n, d), K (m, d), V (m, d_v) as in
    :func:`check_qkv`, or several, Q (H, n, d), K (H_kv, m, d), V (H_kv, m, d_v) as in
    :func:`check_batched_qkv` with no batch dimension. Returns ``(Q, K, V, g)``, the arrays
    3-D (2-D input as one head) and g = H // H_kv."""
    if not is_batched(Q):
        check_bool("enable_gqa", enable_gqa)
        return (*(a[None] for a in check_qkv(Q, K, V)), 1)
    Q, K, V, g = check_batched_qkv(Q, K, V, enable_gqa)
    if Q.ndim != 3:
        raise AttnInputError(
            f"Q must be (n, d) or (H, n, d), one sequence without batch dimensions, got shape "
            f"{Q.shape}"
        )
    return Q, K, V, g


def check_head_backward(Q, K, V, O, dO, lse, enable_gqa):
    """A backward pass's arguments for :func:`check_head_qkv`'s layouts: O and dO (n, d_v) and
    lse (n,) for one head, (H, n, d_v) and (H, n) for several; lse may hold -inf (a fully
    masked row). Returns ``(Q, K, V, O, dO, lse, g)``, every array with a head axis first."""
    if not is_batched(Q):
        check_bool("enable_gqa", enable_gqa)
        return (*(a[None] for a in check_backward_inputs(Q, K, V, O, dO, lse)), 1)
    Q, K, V, g = check_head_qkv(Q, K, V, enable_gqa)
    return (Q, K, V, *check_batched_outputs(O, dO, lse, Q.shape[:2], V.shape[2]), g)


# ---- one block of a sharded pass (attnlib.blockwise) ---------------------------


def check_block(Q, K, V, keep, *, backward=None):
    """One block of a sharded pass: Q (H, r, d), K (H_kv, c, d), V (H_kv, c, d_v) with H a
    multiple of H_kv (grouped heads always allowed: a block is a piece of a pass whose
    ``enable_gqa`` was checked), ``keep`` None or a boolean (r, c), one dtype; for the
    backward, dO (H, r, d_v), lse (H, r) (may hold -inf: a row that keeps nothing) and
    D (H, r), given as ``backward=(dO, lse, D)``. Returns ``(Q, K, V, keep, dO, lse, D, g)``
    (the backward's three None for a forward block)."""
    Q = as_float_array("Q", Q, ndim=3)
    K = as_float_array("K", K, ndim=3)
    V = as_float_array("V", V, ndim=3)
    H, r, d = Q.shape
    H_kv, c, _ = K.shape
    if K.shape[2] != d:
        raise AttnInputError(f"K must have d={d} columns like Q, got {K.shape[2]}")
    check_shape("V", V, (H_kv, c, V.shape[2]), "(H_kv, c, d_v) like K")
    *_, g = check_head_counts(H, H_kv, True, heads=("Q's head count H", "K's H_kv"))
    if keep is not None:
        keep = _as_array("keep", keep)
        if keep.dtype != np.bool_:
            raise AttnInputError(f"keep must have a boolean dtype (True = keep), got {keep.dtype}")
        check_shape("keep", keep, (r, c), "(r, c), Q's rows by K's rows")
    dO = lse = D = None
    if backward is not None:
        dO, lse, D = backward
        dO = as_float_array("dO", dO, ndim=3)
        check_shape("dO", dO, (H, r, V.shape[2]), "(H, r, d_v)")
        lse = as_float_array("lse", lse, ndim=2, allow_neg_inf=True)
        check_shape("lse", lse, (H, r), "(H, r)")
        D = as_float_array("D", D, ndim=2)
        check_shape("D", D, (H, r), "(H, r) like lse")
    named = zip(("Q", "K", "V", "dO", "lse", "D"), (Q, K, V, dO, lse, D), strict=True)
    for name, a in named:
        if a is not None and a.dtype != Q.dtype:
            raise AttnInputError(
                f"{name} has dtype {a.dtype} but Q has {Q.dtype}: a block's arrays must share "
                "one dtype"
            )
    return Q, K, V, keep, dO, lse, D, g


def check_partials(O_a, lse_a, O_b, lse_b):
    """Two partial results of the same rows: O (H, r, d_v) and lse (H, r) each (lse may hold
    -inf: the part kept nothing), one shape and one dtype. Returns the four arrays."""
    O_a = as_float_array("O_a", O_a, ndim=3)
    lse_a = as_float_array("lse_a", lse_a, ndim=2, allow_neg_inf=True)
    check_shape("lse_a", lse_a, O_a.shape[:2], "(H, r) like O_a")
    O_b = as_float_array("O_b", O_b, ndim=3)
    check_shape("O_b", O_b, O_a.shape, "(H, r, d_v) like O_a")
    lse_b = as_float_array("lse_b", lse_b, ndim=2, allow_neg_inf=True)
    check_shape("lse_b", lse_b, O_a.shape[:2], "(H, r) like O_a")
    if len({a.dtype for a in (O_a, lse_a, O_b, lse_b)}) > 1:
        raise AttnInputError("O_a, lse_a, O_b and lse_b must share one dtype")
    return O_a, lse_a, O_b, lse_b
