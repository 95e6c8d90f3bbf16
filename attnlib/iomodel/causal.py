"""Causal attention's share of the work: its mask and kept scores, and the
constant the causal schedules save over the dense ones.

The mask is PyTorch's ``is_causal`` (top-left aligned): query i keeps key j iff j <= i. The
schedules are the ``is_causal=True`` form of :func:`~attnlib.iomodel.flash_forward` and
:func:`~attnlib.iomodel.flash_backward`, which skip a block whose first key comes after its
last query, as FlashAttention-2 does (FA2 §3.1); their closed forms sum over the kept prefix of
blocks (:func:`~attnlib.iomodel.blocks.causal_key_rows`,
:func:`~attnlib.iomodel.blocks.causal_query_rows`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import check_choice, check_int, check_memory
from .._heads import causal_keep, causal_mask_bytes
from .blocks import causal_key_rows, causal_query_rows, flash_backward_blocks, flash_forward_blocks
from .flash import flash_backward_count, flash_forward_count
from .tiling import ceil_div, floor_sum

__all__ = ["causal_mask", "causal_score_count", "CausalSaving", "causal_saving"]


def causal_mask(n: int, m: int | None = None) -> np.ndarray:
    """The (n, m) boolean causal mask, True = keep: entry (i, j) is kept iff j <= i
    (PyTorch's ``is_causal``, top-left aligned; m defaults to n), for exact attention with
    the same keep pattern as a causal pass. Raises AttnInputError for sizes below 1 or a mask
    too large for memory."""
    n = check_int("n", n)
    m = n if m is None else check_int("m", m)
    # the mask and np.tri's index vectors, which dominate when n or m is 1
    check_memory("the (n, m) causal mask", causal_mask_bytes(n, m), culprits="n or m")
    return causal_keep(n, m)


def causal_score_count(n: int, m: int | None = None) -> int:
    """Z_QK, the number of kept scores of the causal mask: Σ_i min(i + 1, m), which is
    n(n + 1)/2 when m = n. Raises AttnInputError for sizes below 1.

    Examples
    --------
    >>> causal_score_count(4), causal_score_count(4, 2)
    (10, 7)
    """
    n = check_int("n", n)
    m = n if m is None else check_int("m", m)
    k = min(n, m)  # rows 0..k-1 keep i + 1 keys, the rest keep all m
    return k * (k + 1) // 2 + (n - k) * m


def _forward_interior_rows(n: int, B_r: int, B_c: int) -> int:
    """Key rows of the causal forward pass's interior blocks (last key <= first query), summed
    over the query blocks, self-attention (m = n). Query block i, starting at s_i = i·B_r,
    has as interior blocks the key blocks ending at or before s_i + 1, ⌊(s_i + 1)/B_c⌋ full
    ones, except that a last query block of one row (s_i = n − 1) has every kept block
    interior, its partial key block (n mod B_c rows) too. So the sum is
    B_c·floor_sum(T_r, B_c, B_r, 1), plus n mod B_c in that case."""
    T_r = ceil_div(n, B_r)
    rows = B_c * floor_sum(T_r, B_c, B_r, 1)
    return rows + (n % B_c if n - (T_r - 1) * B_r == 1 else 0)


def _backward_interior_rows(n: int, B_r: int, B_c: int) -> int:
    """Query rows of the causal backward pass's interior blocks (last key <= first query),
    summed over the key blocks, self-attention (m = n). Key block j, whose last key is
    L_j = min((j+1)·B_c, n) − 1, has as interior blocks the query blocks starting at or after
    L_j: n − B_r·⌈L_j/B_r⌉ rows when L_j <= (T_r − 1)·B_r, else none. The L_j grow with j, so
    of the N − 1 full key blocks (L_j = (j+1)·B_c − 1) the first
    J = min(N − 1, ⌊((T_r − 1)·B_r + 1)/B_c⌋) have some, and with the ceiling written
    ⌊(B_c·j + B_c + B_r − 2)/B_r⌋ their sum is J·n − B_r·floor_sum(J, B_r, B_c, B_c + B_r − 2);
    the last key block (L = n − 1) adds n − B_r·⌈(n − 1)/B_r⌉ if positive."""
    T_r, N = ceil_div(n, B_r), ceil_div(n, B_c)
    J = min(N - 1, ((T_r - 1) * B_r + 1) // B_c)
    rows = J * n - B_r * floor_sum(J, B_r, B_c, B_c + B_r - 2)
    if n - 1 <= (T_r - 1) * B_r:
        rows += n - B_r * ceil_div(n - 1, B_r)
    return rows


class CausalSaving(NamedTuple):
    """Words moved by the dense and the causal schedule for one pass (n = m), and where the
    causal schedule's words go: ``other_words`` (traffic charged to no block: Q, O, lse in the
    forward; the D pass, K, V, dK, dV in the backward),
    ``interior_words`` (blocks wholly below the diagonal) and ``diagonal_words`` (blocks the
    diagonal crosses, loaded whole though partly masked). ``fraction`` = causal / dense;
    ``fraction_without_diagonal`` = (causal − diagonal_words / 2) / dense removes half of the
    diagonal blocks' words, about their masked part (exactly half when B_r = B_c divides n):
    the excess of ``fraction`` over it is the price of loading diagonal blocks whole."""

    dense: int
    causal: int
    fraction: float
    other_words: int
    interior_words: int
    diagonal_words: int
    fraction_without_diagonal: float


def causal_saving(n: int, d: int, M: int, *, which: str = "forward") -> CausalSaving:
    """The fraction of the dense count that the causal schedule moves (about one half), split
    by block kind, for self-attention (m = n, d_v = d) with our blocks.

    ``which`` is ``"forward"`` (:func:`~attnlib.iomodel.flash_forward_count` with
    ``is_causal=True`` over the dense count) or ``"backward"`` (the backward pair). Block
    words are the traffic charged to a block: K_j, V_j reads in the forward (c_j·D per
    block); in the backward, the query-side reads and dQ writes r_i·(3d + d_v + 2) per block.
    Totals are reads + writes. A block is interior when its last key is at most its first
    query.

    Every split is a closed form (floor sums; any n costs the same). Forward, query block i
    starting at s_i = i·B_r: its interior blocks are the full key blocks ending at or before
    s_i + 1, ⌊(s_i + 1)/B_c⌋·B_c key rows, except that a last query block of one row
    (s_i = n − 1) has every kept block interior, n rows. Backward, key block j with last key
    L_j = min((j+1)·B_c, n) − 1: its interior blocks are the query blocks starting at or
    after L_j, n − B_r·⌈L_j/B_r⌉ query rows when that is positive (L_j <= (T_r − 1)·B_r),
    else none. The diagonal words are the block words less the interior ones. ``fraction``
    and ``fraction_without_diagonal`` are exact quotients of integers, rounded once.

    Raises AttnInputError for arguments below 1 or an unknown ``which``.

    Examples
    --------
    >>> s = causal_saving(4096, 64, 16384)
    >>> round(s.fraction, 3), round(s.fraction_without_diagonal, 3)
    (0.514, 0.508)
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    which = check_choice("which", which, ("forward", "backward"))
    if which == "forward":
        dense = flash_forward_count(n, d, M).total
        causal = flash_forward_count(n, d, M, is_causal=True).total
        B_r, B_c = flash_forward_blocks(d, M)
        per_row = 2 * d  # K_j and V_j, D = d + d_v words per key row
        block_rows = causal_key_rows(n, n, B_r, B_c)
        interior_rows = _forward_interior_rows(n, B_r, B_c)
    else:
        dense = flash_backward_count(n, d, M).total
        causal = flash_backward_count(n, d, M, is_causal=True).total
        B_r, B_c = flash_backward_blocks(d, M)
        per_row = 2 * d + d + 2 + d  # Q, dO, lse, D, dQ read; dQ written
        _, block_rows = causal_query_rows(n, n, B_r, B_c)
        interior_rows = _backward_interior_rows(n, B_r, B_c)
    interior = interior_rows * per_row
    diag = block_rows * per_row - interior
    other = causal - diag - interior
    return CausalSaving(
        dense,
        causal,
        causal / dense,
        other,
        interior,
        diag,
        # (causal − diag/2)/dense in exact integers: diag/2 as a float overflows for huge n
        (2 * causal - diag) / (2 * dense),
    )
