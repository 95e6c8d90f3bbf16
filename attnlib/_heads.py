"""One attention problem, described once for both cores: :func:`normalise` validates the
arguments of a forward or backward pass and returns a :class:`Problem`, which the exact core
(:mod:`attnlib.exact`) and the compiled kernels (:mod:`attnlib.fast`) both run.

The layout is PyTorch's ``scaled_dot_product_attention``: Q (..., H, n, d), K (..., H_kv, m, d),
V (..., H_kv, m, d_v), query head h reading key/value head h // g with g = H // H_kv; 2-D input
(n, d), (m, d), (m, d_v) is one head. A :class:`Problem` holds the arrays heads first (the batch
and head axes flattened into one) in their common float dtype, with what the caller needs to
give its outputs back in the layout it passed.

Before it converts or copies anything, :func:`normalise` refuses a call whose working memory
would exceed the limit (:func:`attnlib._checks.check_memory_parts`): its own conversions and
copies, and the caller's working memory for the problem.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._checks import (
    check_backward_inputs,
    check_batched_mask,
    check_batched_outputs,
    check_batched_qkv,
    check_bool,
    check_causal,
    check_mask,
    check_memory_parts,
    check_qkv,
    check_scale,
    conversion_parts,
    float_dtype,
    is_batched,
)

__all__ = ["Problem", "normalise", "causal_keep", "causal_mask_bytes"]


def causal_mask_bytes(n: int, m: int) -> int:
    """Bytes :func:`causal_keep` allocates: the (n, m) mask, np.tri's two index vectors
    (arange(n) and arange(m), at most 8 bytes an entry), which outweigh the mask when n or m
    is 1, and the buffers of its outer comparison (64 KiB at most)."""
    return n * m + 8 * (n + m) + 2**16


def causal_keep(n: int, m: int) -> np.ndarray:
    """The (n, m) causal keep-mask, True where j <= i (sizes checked by the caller against
    :func:`causal_mask_bytes`)."""
    return np.tri(n, m, dtype=bool)


@dataclass(frozen=True)
class Problem:
    """One attention problem, heads first.

    Attributes
    ----------
    Q, K, V : (heads, n, d), (heads // g, m, d), (heads // g, m, d_v)
    g : the query heads that share one key/value head (query head h reads head h // g)
    scale : τ
    mask : the boolean keep-mask, read only, broadcast to (*lead, n, m), or None
    is_causal : keep key j of query i only if j <= i (never together with ``mask``)
    lead : the caller's leading axes of Q: () for 2-D input, else (*batch, H)
    dtype : the arrays' common float dtype
    O, dO, lse : (heads, n, d_v), (heads, n, d_v), (heads, n) for a backward pass, else None
    """

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    g: int
    scale: float
    mask: np.ndarray | None
    is_causal: bool
    lead: tuple[int, ...]
    dtype: np.dtype
    O: np.ndarray | None = None
    dO: np.ndarray | None = None
    lse: np.ndarray | None = None

    @property
    def heads(self) -> int:
        return math.prod(self.lead)

    # the sizes, read off the arrays so that they cannot disagree with them
    n = property(lambda self: self.Q.shape[-2], doc="query rows")
    m = property(lambda self: self.K.shape[-2], doc="key rows")
    d = property(lambda self: self.Q.shape[-1], doc="the query and key width")
    d_v = property(lambda self: self.V.shape[-1], doc="the value width")

    def keep(self, h: int) -> np.ndarray | None:
        """The (n, m) keep-mask of query head h, a read-only view, or None."""
        if self.mask is None or not self.lead:
            return self.mask
        return self.mask[np.unravel_index(h, self.lead)]

    def runs(self) -> list[tuple[slice, slice, int]]:
        """The query heads as runs of consecutive heads with one keep-mask, each as (its query
        heads, the key/value heads they read, the group size between them): one run without
        a mask or with the same mask for every head, else one per index of the leading axes
        the mask varies along (a key-padding mask (B, 1, 1, m): B runs of H heads). A run is
        a multiple of H heads, or one query head, which reads its key/value head with g = 1.
        """
        size = self.heads
        if self.mask is not None:
            size = 1
            strides = self.mask.strides[: len(self.lead)]
            for length, stride in zip(reversed(self.lead), reversed(strides), strict=True):
                if length != 1 and stride != 0:
                    break
                size *= length
        g = self.g if size % self.g == 0 else 1
        return [
            (slice(h, h + size), slice(h // self.g, h // self.g + size // g), g)
            for h in range(0, self.heads, size)
        ]

    def unflatten(self, x: np.ndarray, *, kv: bool = False) -> np.ndarray:
        """x (heads, ...), or with ``kv`` (heads // g, ...), in the caller's layout: its
        leading axes (*lead, ...) back, no head axis for 2-D input."""
        lead = self.lead
        if kv and lead:
            lead = (*lead[:-1], lead[-1] // self.g)
        return x.reshape(*lead, *x.shape[1:])


def normalise(
    Q,
    K,
    V,
    *,
    scale,
    mask,
    is_causal,
    enable_gqa,
    outputs=None,
    what: str,
    working: Callable[[Problem], list],
    contiguous: bool = False,
) -> Problem:
    """Validate a forward pass's arguments, or a backward pass's with ``outputs``, and
    return them as one :class:`Problem`.

    Parameters
    ----------
    Q, K, V, scale, mask, is_causal, enable_gqa : as in :func:`attnlib.attention_forward`
    outputs : (O, dO, lse) of a backward pass, as in :func:`attnlib.attention_backward`, or
        None for a forward pass
    what : the pass a memory refusal names
    working : ``working(problem)`` → the caller's working memory as
        :func:`attnlib._checks.check_memory_parts` parts; its problem has every field final
        but the arrays, which may still be as passed (their sizes and dtype are final)
    contiguous : make every array C-contiguous (the compiled kernels' layout), copying those
        that are not

    Raises
    ------
    AttnInputError
        for invalid arguments (the message names the argument), ``mask`` together with
        ``is_causal=True`` included, and, before anything is converted or copied, when the
        conversions, copies and ``working`` memory would exceed
        :data:`attnlib.config.MAX_ALLOCATION_BYTES`.
    """
    is_causal = check_causal(mask, is_causal)
    enable_gqa = check_bool("enable_gqa", enable_gqa)
    if is_batched(Q):
        Q, K, V, g = check_batched_qkv(Q, K, V, enable_gqa)
        lead = Q.shape[:-2]
        if outputs is not None:
            outputs = check_batched_outputs(*outputs, (*lead, Q.shape[-2]), V.shape[-1])
    else:
        g, lead = 1, ()
        if outputs is None:
            Q, K, V = check_qkv(Q, K, V)
        else:
            Q, K, V, *outputs = check_backward_inputs(Q, K, V, *outputs)
    n, d, m = *Q.shape[-2:], K.shape[-2]
    tau = check_scale(scale, d)
    if lead:
        mask, _ = check_batched_mask(mask, is_causal, (*lead, n, m))
    else:
        mask = check_mask(mask, n, m)
    outputs = () if outputs is None else tuple(outputs)
    names = ("Q", "K", "V", "O", "dO", "lse")[: 3 + len(outputs)]
    arrays = dict(zip(names, (Q, K, V, *outputs), strict=True))
    dtype, k = float_dtype(*arrays.values()), len(lead)
    parts = _copy_parts(arrays, dtype, k, contiguous)
    if not parts:  # nothing to convert or copy: heads first as views, allocating nothing
        arrays = {name: a.reshape(-1, *a.shape[k:]) for name, a in arrays.items()}
    Q, K, V, *outputs = arrays.values()
    p = Problem(Q, K, V, g, tau, mask, is_causal, lead, dtype, *outputs)
    check_memory_parts(what, parts + working(p))
    if not parts:
        return p
    Q, K, V, *outputs = (_heads_first(a, dtype, k, contiguous) for a in arrays.values())
    return Problem(Q, K, V, g, tau, mask, is_causal, lead, dtype, *outputs)


def _copy_parts(arrays: dict, dtype: np.dtype, k: int, contiguous: bool) -> list:
    """The :func:`check_memory_parts` parts of :func:`_heads_first` on each of ``arrays``
    ({argument name: array}): a copy of each array it converts, makes contiguous or has to
    copy to merge its first k axes, as large as the array looks (a broadcast view becomes a
    full array)."""
    parts = conversion_parts(dtype, arrays)
    for name, a in arrays.items():
        if a.dtype != dtype:
            continue
        if contiguous and not a.flags.c_contiguous:
            parts.append((a.size * dtype.itemsize, f"a contiguous copy of {name}", name))
        elif not contiguous and k > 1 and not _merges(a, k):  # C order merges, and k <= 1
            parts.append((a.size * dtype.itemsize, f"{name} with its heads in one axis", name))
    return parts


def _heads_first(a: np.ndarray, dtype: np.dtype, k: int, contiguous: bool) -> np.ndarray:
    """``a`` in ``dtype`` with its first k axes merged into one (a new axis of length 1 when
    k = 0), C-contiguous if ``contiguous``: a view when that needs no copy."""
    if a.dtype != dtype or (contiguous and not a.flags.c_contiguous):
        a = np.ascontiguousarray(a, dtype=dtype)
    # reshape, not a[None]: a new axis of stride 0 would cost the kernels a strided view
    return a.reshape(-1, *a.shape[k:])


def _merges(a: np.ndarray, k: int) -> bool:
    """Whether the first k axes of ``a`` merge into one without a copy: each one's stride is
    the next one's times its length (axes of length 1 aside)."""
    axes = [(n, stride) for n, stride in zip(a.shape[:k], a.strides[:k], strict=True) if n != 1]
    return all(s0 == s1 * n1 for (_, s0), (n1, s1) in zip(axes, axes[1:], strict=False))
