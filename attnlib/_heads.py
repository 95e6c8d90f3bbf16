"""Batched, multi-head attention run head by head, in PyTorch's ``scaled_dot_product_attention``
layout: Q (..., H, n, d), K (..., H_kv, m, d), V (..., H_kv, m, d_v); query head h uses
key/value head h // g with g = H // H_kv. The exact core and the compiled kernels share this
validation and these loops, each with its own 2-D pass for one head; the compiled kernels
also pass a function that runs every head at once (``all_heads``), used when there is no
mask.

Every allocation these loops make (outputs, dtype conversions, the causal mask, flattened
copies for ``all_heads``, and the caller's per-head working memory) is checked against the
memory limit first (:func:`attnlib._checks.check_memory_parts`).
"""

from __future__ import annotations

import numpy as np

from ._checks import (
    check_batched_mask,
    check_batched_outputs,
    check_batched_qkv,
    check_memory_parts,
    check_scale,
    conversion_parts,
    float_dtype,
)


def causal_mask_bytes(n: int, m: int) -> int:
    """Bytes :func:`causal_keep` allocates: the (n, m) mask, np.tri's two index vectors
    (arange(n) and arange(m), at most 8 bytes an entry), which outweigh the mask when n or m
    is 1, and the buffers of its outer comparison (64 KiB at most)."""
    return n * m + 8 * (n + m) + 2**16


def causal_keep(n: int, m: int) -> np.ndarray:
    """The (n, m) causal keep-mask, True where j <= i (sizes checked by the caller against
    :func:`causal_mask_bytes`)."""
    return np.tri(n, m, dtype=bool)


def _validated(Q, K, V, scale, mask, is_causal, enable_gqa):
    """Q, K, V as arrays, g, τ, the (..., H, n, m) keep-mask (a read-only view) or None, and
    is_causal as a bool. Allocates nothing beyond the conversion of array-likes."""
    Q, K, V, g = check_batched_qkv(Q, K, V, enable_gqa)
    *batch, H, n, d = Q.shape
    m = K.shape[-2]
    tau = check_scale(scale, d)
    mask, causal = check_batched_mask(mask, is_causal, (*batch, H, n, m))
    return Q, K, V, g, tau, mask, causal


def _guard(what, arrays, outputs, dtype, build_causal, flat, head_parts):
    """Refuse, before anything is allocated, a batched call over the memory limit.

    ``arrays`` are the inputs by argument name (each converted to ``dtype`` unless it has it,
    and with ``flat`` copied when it is not C-contiguous, as flattening its batch and head axes
    then copies it), ``outputs`` the output parts, ``build_causal`` whether the (n, m) causal
    mask is built, and ``head_parts`` the caller's working memory for one head."""
    Q, K = arrays["Q"], arrays["K"]
    n, m = Q.shape[-2], K.shape[-2]
    parts = [*outputs, *conversion_parts(dtype, arrays), *head_parts]
    if flat:
        parts += [
            (a.size * dtype.itemsize, f"a C-contiguous copy of {name}", name)
            for name, a in arrays.items()
            if not a.flags.c_contiguous
        ]
    if build_causal:
        parts.append((causal_mask_bytes(n, m), "the (n, m) causal mask", "Q or K"))
    check_memory_parts(what, parts)


def _causal_view(causal, causal_mask, mask, shape):
    """The keep-mask and is_causal handed on: the causal mask as a broadcast keep-mask when
    ``causal_mask`` asks for it."""
    if causal and causal_mask:
        return np.broadcast_to(causal_keep(*shape[-2:]), shape), False
    return mask, causal


def _flat(x: np.ndarray) -> np.ndarray:
    """(..., H, rows, cols) as (heads, rows, cols): the batch and head axes in one."""
    return x.reshape(-1, *x.shape[-2:])


def forward_heads(
    Q,
    K,
    V,
    *,
    scale,
    mask,
    is_causal,
    enable_gqa,
    forward,
    causal_mask=False,
    all_heads=None,
    head_parts=None,
    what="the batched forward pass",
):
    """O (..., H, n, d_v) and lse (..., H, n) from ``forward(q, k, v, tau, keep, is_causal)``,
    a 2-D forward pass returning (o, lse), run on every head in order. Arguments as in
    :func:`attnlib.attention_forward`; ``causal_mask`` hands causality to ``forward`` as its
    keep-mask instead of its flag. Without a mask, ``all_heads(q, k, v, tau, is_causal, g)``,
    if given, runs every head at once on (heads, n, d) arrays (the batch and head axes
    flattened; query head h reads key/value head h // g), or returns None to decline.
    ``head_parts(n, m, d, d_v, dtype, masked)`` gives the memory parts of one head's 2-D pass
    for the guard (refusals say ``what``). Raises AttnInputError for invalid arguments and
    for a call over the memory limit."""
    Q, K, V, g, tau, mask, causal = _validated(Q, K, V, scale, mask, is_causal, enable_gqa)
    dtype = float_dtype(Q, K, V)
    *batch, H, n, d = Q.shape
    m, dv = K.shape[-2], V.shape[-1]
    build = causal and causal_mask
    outputs = [(Q.size // d * (dv + 1) * dtype.itemsize, "the outputs O and lse", "Q or V")]
    heads = head_parts(n, m, d, dv, dtype, mask is not None or build) if head_parts else []
    flattens = all_heads is not None and mask is None
    _guard(what, {"Q": Q, "K": K, "V": V}, outputs, dtype, build, flattens, heads)
    mask, causal = _causal_view(causal, causal_mask, mask, (*batch, H, n, m))
    Q, K, V = (x.astype(dtype, copy=False) for x in (Q, K, V))
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
    head_parts=None,
    what="the batched backward pass",
):
    """dQ, dK, dV from ``backward(q, k, v, o, do, lse, tau, keep, is_causal)``, a 2-D backward
    pass returning (dq, dk, dv), run on every head; arguments as in :func:`forward_heads`,
    and ``all_heads(q, k, v, o, do, lse, tau, is_causal, g)`` as there.

    dK and dV of a key/value head shared by g query heads are the sums of their g gradients,
    added in the fixed order of the query heads (h = j·g, j·g + 1, ...), so the result depends
    on the inputs only. ``head_parts`` and ``what`` as in :func:`forward_heads`. Raises
    AttnInputError for invalid arguments and for a call over the memory limit.
    """
    Q, K, V, g, tau, mask, causal = _validated(Q, K, V, scale, mask, is_causal, enable_gqa)
    *batch, H, n, d = Q.shape
    m, d_v = K.shape[-2], V.shape[-1]
    O, dO, lse = check_batched_outputs(O, dO, lse, (*batch, H, n), d_v)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    build = causal and causal_mask
    outputs = [((Q.size + K.size + V.size) * dtype.itemsize, "the gradients", "Q, K or V")]
    heads = head_parts(n, m, d, d_v, dtype, mask is not None or build) if head_parts else []
    flattens = all_heads is not None and mask is None
    arrays = {"Q": Q, "K": K, "V": V, "O": O, "dO": dO, "lse": lse}
    _guard(what, arrays, outputs, dtype, build, flattens, heads)
    mask, causal = _causal_view(causal, causal_mask, mask, (*batch, H, n, m))
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
