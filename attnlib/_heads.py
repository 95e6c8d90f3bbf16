"""Batched, multi-head attention run head by head, in PyTorch's ``scaled_dot_product_attention``
layout: Q (..., H, n, d), K (..., H_kv, m, d), V (..., H_kv, m, d_v); query head h uses
key/value head h // g with g = H // H_kv. The exact core and the compiled kernels share this
validation and these loops, each with its own 2-D pass for one head; the compiled kernels
also pass a function that runs every head at once (``all_heads``), used when there is no
mask.
"""

from __future__ import annotations

import numpy as np

from ._checks import (
    check_batched_mask,
    check_batched_outputs,
    check_batched_qkv,
    check_scale,
    float_dtype,
)


def _validated(Q, K, V, scale, mask, is_causal, enable_gqa, causal_mask):
    """Q, K, V as arrays, g, τ, the (..., H, n, m) keep-mask or None, and is_causal as a bool;
    with ``causal_mask`` the causal mask is returned as the keep-mask and is_causal as False."""
    Q, K, V, g = check_batched_qkv(Q, K, V, enable_gqa)
    *batch, H, n, d = Q.shape
    m = K.shape[-2]
    tau = check_scale(scale, d)
    mask, causal = check_batched_mask(mask, is_causal, (*batch, H, n, m))
    if causal and causal_mask:
        mask, causal = np.broadcast_to(np.tri(n, m, dtype=bool), (*batch, H, n, m)), False
    return Q, K, V, g, tau, mask, causal


def _flat(x: np.ndarray) -> np.ndarray:
    """(..., H, rows, cols) as (heads, rows, cols): the batch and head axes in one."""
    return x.reshape(-1, *x.shape[-2:])


def forward_heads(
    Q, K, V, *, scale, mask, is_causal, enable_gqa, forward, causal_mask=False, all_heads=None
):
    """O (..., H, n, d_v) and lse (..., H, n) from ``forward(q, k, v, tau, keep, is_causal)``,
    a 2-D forward pass returning (o, lse), run on every head in order. Arguments as in
    :func:`attnlib.attention_forward`; ``causal_mask`` hands causality to ``forward`` as its
    keep-mask instead of its flag. Without a mask, ``all_heads(q, k, v, tau, is_causal, g)``,
    if given, runs every head at once on (heads, n, d) arrays (the batch and head axes
    flattened; query head h reads key/value head h // g), or returns None to decline. Raises
    AttnInputError for invalid arguments."""
    Q, K, V, g, tau, mask, causal = _validated(
        Q, K, V, scale, mask, is_causal, enable_gqa, causal_mask
    )
    dtype = float_dtype(Q, K, V)
    Q, K, V = (x.astype(dtype, copy=False) for x in (Q, K, V))
    *batch, H, n, _ = Q.shape
    if all_heads is not None and mask is None:
        done = all_heads(_flat(Q), _flat(K), _flat(V), tau, causal, g)
        if done is not None:
            return done[0].reshape(*batch, H, n, -1), done[1].reshape(*batch, H, n)
    O = np.empty((*batch, H, n, V.shape[-1]), dtype=dtype)
    lse = np.empty((*batch, H, n), dtype=dtype)
    for b in np.ndindex(*batch):
        for h in range(H):
            i, kv = (*b, h), (*b, h // g)
            keep = None if mask is None else mask[i]
            O[i], lse[i] = forward(Q[i], K[kv], V[kv], tau, keep, causal)
    return O, lse


def backward_heads(
    Q,
    K,
    V,
    O,
    dO,
    lse,
    *,
    scale,
    mask,
    is_causal,
    enable_gqa,
    backward,
    causal_mask=False,
    all_heads=None,
):
    """dQ, dK, dV from ``backward(q, k, v, o, do, lse, tau, keep, is_causal)``, a 2-D backward
    pass returning (dq, dk, dv), run on every head; arguments as in :func:`forward_heads`,
    and ``all_heads(q, k, v, o, do, lse, tau, is_causal, g)`` as there.

    dK and dV of a key/value head shared by g query heads are the sums of their g gradients,
    added in the fixed order of the query heads (h = j·g, j·g + 1, ...), so the result depends
    on the inputs only. Raises AttnInputError for invalid arguments.
    """
    Q, K, V, g, tau, mask, causal = _validated(
        Q, K, V, scale, mask, is_causal, enable_gqa, causal_mask
    )
    *batch, H, n, _ = Q.shape
    O, dO, lse = check_batched_outputs(O, dO, lse, (*batch, H, n), V.shape[-1])
    dtype = float_dtype(Q, K, V, O, dO, lse)
    Q, K, V, O, dO, lse = (x.astype(dtype, copy=False) for x in (Q, K, V, O, dO, lse))
    if all_heads is not None and mask is None:
        flat = (_flat(x) for x in (Q, K, V, O, dO))
        done = all_heads(*flat, lse.reshape(-1, n), tau, causal, g)
        if done is not None:
            return tuple(grad.reshape(x.shape) for grad, x in zip(done, (Q, K, V), strict=True))
    dQ = np.empty(Q.shape, dtype=dtype)
    dK = np.zeros(K.shape, dtype=dtype)
    dV = np.zeros(V.shape, dtype=dtype)
    for b in np.ndindex(*batch):
        for h in range(H):
            i, kv = (*b, h), (*b, h // g)
            keep = None if mask is None else mask[i]
            dq, dk, dv = backward(Q[i], K[kv], V[kv], O[i], dO[i], lse[i], tau, keep, causal)
            dQ[i] = dq
            dK[kv] += dk
            dV[kv] += dv
    return dQ, dK, dV
