"""Causal attention on the two-level machine: FlashAttention with the tiles above the diagonal
skipped, exact counts, the causal lower bound and the constant saved.

The mask is PyTorch's ``is_causal`` (top-left aligned): query i keeps key j iff j <= i. The
schedules are :func:`~attnlib.iomodel.flash_forward` and :func:`~attnlib.iomodel.flash_backward`
with that mask, skipping a tile whose first key comes after its last query, as FlashAttention-2
does (FA2 §3.1); the closed forms sum over the kept prefix of tiles.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import (
    check_backward_inputs,
    check_choice,
    check_int,
    check_memory,
    check_qkv,
)
from .._heads import causal_keep, causal_mask_bytes
from .blocks import W_b, W_f, d_pass_rows, flash_backward_blocks, flash_forward_blocks
from .bounds import _sparse
from .flash import flash_backward, flash_backward_count, flash_forward, flash_forward_count
from .machine import IOCount
from .tiling import ceil_div, count_args, floor_sum

__all__ = [
    "causal_mask",
    "causal_score_count",
    "flash_forward_causal",
    "flash_backward_causal",
    "flash_forward_causal_count",
    "flash_backward_causal_count",
    "causal_lower_bound",
    "CausalSaving",
    "causal_saving",
]


def causal_mask(n: int, m: int | None = None) -> np.ndarray:
    """The (n, m) boolean causal mask, True = keep: entry (i, j) is kept iff j <= i
    (PyTorch's ``is_causal``, top-left aligned; m defaults to n). Raises AttnInputError for
    sizes below 1 or a mask too large for memory."""
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


def flash_forward_causal(Q, K, V, *, M: int, scale=None, blocks=None, record=False):
    """Causal FlashAttention-2 forward (FA2 Alg. 1, upper tiles skipped) on M words.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v) float arrays
    M : fast memory in words, at least :func:`flash_forward_min_M`
    scale : τ > 0, default 1/√d
    blocks : (B_r, B_c); default :func:`flash_forward_blocks`
    record : keep the operation log; if True the machine is returned last

    Returns
    -------
    (O, lse, IOCount) [, machine], equal to :func:`attnlib.attention_forward` with
    ``mask=causal_mask(n, m)``; the count equals :func:`flash_forward_causal_count`.

    Raises
    ------
    AttnInputError for invalid arrays, M or blocks (see :func:`flash_forward`).
    """
    Q, K, V = check_qkv(Q, K, V)
    mask = causal_mask(Q.shape[0], K.shape[0])
    return flash_forward(Q, K, V, M=M, scale=scale, blocks=blocks, mask=mask, record=record)


def flash_backward_causal(Q, K, V, O, dO, lse, *, M: int, scale=None, blocks=None, record=False):
    """Causal FlashAttention-2 backward (FA2 Alg. 2, upper tiles skipped) on M words.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v); O, dO : (n, d_v); lse : (n,) from the causal
    forward pass. M, scale, blocks, record as in :func:`flash_backward`.

    Returns
    -------
    (dQ, dK, dV, IOCount) [, machine], equal to :func:`attnlib.attention_backward` with
    ``mask=causal_mask(n, m)``; the count equals :func:`flash_backward_causal_count`.

    Raises
    ------
    AttnInputError for invalid arrays, M or blocks (see :func:`flash_backward`).
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    mask = causal_mask(Q.shape[0], K.shape[0])
    return flash_backward(
        Q, K, V, O, dO, lse, M=M, scale=scale, blocks=blocks, mask=mask, record=record
    )


def _forward_kv_rows(n: int, m: int, B_r: int, B_c: int) -> int:
    """Σ_i min(m, B_c·⌈e_i/B_c⌉): the key rows the causal forward pass loads, summed over its
    query blocks, the i-th ending at e_i = min((i+1)·B_r, n) (it keeps the key blocks that
    start at or before its last query e_i − 1, the first ⌈e_i/B_c⌉ of the T_c = ⌈m/B_c⌉).

    Closed form: the T_r − 1 full query blocks end at e = j·B_r, j = 1 … T_r − 1. Block j
    keeps fewer than T_c key blocks, hence B_c·⌈j·B_r/B_c⌉ < m rows, exactly when
    j·B_r <= (T_c − 1)·B_c, i.e. for j <= J = min(T_r − 1, ⌊(T_c − 1)·B_c/B_r⌋); the others
    load all m rows. With ⌈j·B_r/B_c⌉ = ⌊(B_r·(j − 1) + B_r + B_c − 1)/B_c⌋::

        Σ = B_c·floor_sum(J, B_c, B_r, B_r + B_c − 1) + (T_r − 1 − J)·m + min(m, B_c⌈n/B_c⌉)

    the last term being the last query block's.
    """
    T_r, T_c = ceil_div(n, B_r), ceil_div(m, B_c)
    J = min(T_r - 1, (T_c - 1) * B_c // B_r)
    partial = B_c * floor_sum(J, B_c, B_r, B_r + B_c - 1)
    return partial + (T_r - 1 - J) * m + min(m, B_c * ceil_div(n, B_c))


def _backward_rows(n: int, m: int, B_r: int, B_c: int) -> tuple[int, int]:
    """(N, Σρ) of the causal backward pass: N = ⌈min(n, m)/B_c⌉ key blocks hold a kept score,
    and key block j (starting at key j·B_c) is visited by the query rows
    ρ_j = n − ⌊j·B_c/B_r⌋·B_r, so Σ_{j<N} ρ_j = N·n − B_r·floor_sum(N, B_r, B_c, 0)."""
    N = ceil_div(min(n, m), B_c)
    return N, N * n - B_r * floor_sum(N, B_r, B_c, 0)


def _forward_interior_rows(n: int, B_r: int, B_c: int) -> int:
    """Key rows of the causal forward pass's interior tiles (last key <= first query), summed
    over the query blocks, self-attention (m = n). Query block i, starting at s_i = i·B_r,
    has as interior tiles the key blocks ending at or before s_i + 1, ⌊(s_i + 1)/B_c⌋ full
    ones, except that a last query block of one row (s_i = n − 1) has every kept tile
    interior, its partial key block (n mod B_c rows) too. So the sum is
    B_c·floor_sum(T_r, B_c, B_r, 1), plus n mod B_c in that case."""
    T_r = ceil_div(n, B_r)
    rows = B_c * floor_sum(T_r, B_c, B_r, 1)
    return rows + (n % B_c if n - (T_r - 1) * B_r == 1 else 0)


def _backward_interior_rows(n: int, B_r: int, B_c: int) -> int:
    """Query rows of the causal backward pass's interior tiles (last key <= first query),
    summed over the key blocks, self-attention (m = n). Key block j, whose last key is
    L_j = min((j+1)·B_c, n) − 1, has as interior tiles the query blocks starting at or after
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


def flash_forward_causal_count(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None, blocks=None
) -> IOCount:
    """Exact I/O of :func:`flash_forward_causal` (closed form, no arrays).

    With (B_r, B_c) the blocks, D = d + d_v, and for query block i (rows up to e_i =
    min((i+1)B_r, n)) the kept key blocks the prefix k_i = min(T_c, ⌈e_i/B_c⌉)::

        reads  = n·d + D·Σ_i min(m, k_i·B_c)     (Q once; the kept K, V rows per query block)
        writes = n·(d_v + 1)                     (O and lse)
        peak   = W_f(min(B_r, n), min(B_c, m))   (tile (0, 0) is always kept)

    The sum is evaluated in closed form (a floor sum, O(log B_c) integer steps, so any n
    costs the same): with T_r = ⌈n/B_r⌉, T_c = ⌈m/B_c⌉ and
    J = min(T_r − 1, ⌊(T_c − 1)·B_c/B_r⌋) the full query blocks that keep fewer than all
    key blocks, Σ_i min(m, k_i·B_c) = B_c·Σ_{j=1}^{J} ⌈j·B_r/B_c⌉ + (T_r − 1 − J)·m +
    min(m, B_c⌈n/B_c⌉). With B_r = B_c = B dividing n = m (T = n/B):
    reads = n·d + D·B·T(T + 1)/2, against n·d + D·B·T² dense; the excess over one half,
    D·B·T/2, is the diagonal tiles. Raises AttnInputError for sizes or M below 1, or bad
    blocks.

    Examples
    --------
    >>> flash_forward_causal_count(1024, 64, 16384)
    IOCount(reads=1461248, writes=66560, total=1527808, peak_fast=16120)
    """
    n, d, M, m, d_v, B_r, B_c = count_args(n, d, M, m, d_v, blocks, flash_forward_blocks)
    D = d + d_v
    kv_rows = _forward_kv_rows(n, m, B_r, B_c)
    peak = W_f(min(B_r, n), min(B_c, m), d, d_v)
    return IOCount(n * d + D * kv_rows, n * (d_v + 1), peak)


def flash_backward_causal_count(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None, blocks=None
) -> IOCount:
    """Exact I/O of :func:`flash_backward_causal` (closed form, no arrays).

    With (B_r, B_c) the blocks, D = d + d_v: key block j (starting at key jB_c) is visited
    by the query blocks from the one holding query jB_c to the last, i.e. by the rows
    ρ_j = n − ⌊jB_c/B_r⌋·B_r, when jB_c < n; a key block with jB_c >= n (only when m > n)
    is empty and stores zero gradients. Every query block keeps tile (i, 0). With
    Σρ = Σ_{j: jB_c < n} ρ_j and C = min(m, ⌈n/B_c⌉·B_c) the rows of non-empty key blocks::

        reads  = n·(2d_v − d) + C·D + Σρ·(2d + d_v + 2)
        writes = n + m·D + Σρ·d
        peak   = max(W_b(min(B_r, n), min(B_c, m)), 2·min(r_D, n)·d_v, empty key block c·D)

    the block-sparse form of :func:`flash_backward_count` with the causal pattern. The sum is
    in closed form: with N = ⌈min(n, m)/B_c⌉ key blocks holding a kept score,
    Σρ = N·n − B_r·Σ_{j<N} ⌊j·B_c/B_r⌋, a floor sum (O(log B_r) integer steps, so any n
    costs the same). Raises AttnInputError for sizes or M below 1, or bad blocks.
    """
    n, d, M, m, d_v, B_r, B_c = count_args(n, d, M, m, d_v, blocks, flash_backward_blocks)
    D = d + d_v
    N, rho = _backward_rows(n, m, B_r, B_c)  # N key blocks with at least one kept score
    C = min(m, N * B_c)
    reads = n * (2 * d_v - d) + C * D + rho * (2 * d + d_v + 2)
    writes = n + m * D + rho * d
    r_D = d_pass_rows(B_r, M, d_v)
    peak = max(W_b(min(B_r, n), min(B_c, m), d, d_v), 2 * min(r_D, n) * d_v)
    if m > C:  # empty key blocks: dK_j, dV_j allocated and stored as zeros
        peak = max(peak, min(B_c, m - C) * D)
    return IOCount(reads, writes, peak)


def causal_lower_bound(n: int, d: int, M: int) -> float:
    """Causal attention's I/O lower bound: :func:`sparse_lower_bound` with Z_in = n·d and
    Z_QK = n(n + 1)/2, i.e. min(n²d²/M, n·d·√(n(n+1)/2)/√M).

    The sparse formula is our reading (see :func:`sparse_lower_bound`); Z_in = n·d is the
    choice under which it recovers :func:`forward_lower_bound` for the dense mask. Its
    large-M branch n²d²/M does not shrink with the mask, so the bound does not see the
    factor one half the schedules save. Raises AttnInputError for arguments below 1, or a
    bound beyond the float range.
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    return _sparse(n * d, causal_score_count(n), M, "n and d are")


class CausalSaving(NamedTuple):
    """Words moved by the dense and the causal schedule for one pass (n = m), and where the
    causal schedule's words go: ``other_words`` (traffic charged to no tile: Q, O, lse in the
    forward; the D pass, K, V, dK, dV in the backward),
    ``interior_words`` (tiles wholly below the diagonal) and ``diagonal_words`` (tiles the
    diagonal crosses, loaded whole though partly masked). ``fraction`` = causal / dense;
    ``fraction_without_diagonal`` = (causal − diagonal_words / 2) / dense removes half of the
    diagonal tiles' words, about their masked part (exactly half when B_r = B_c divides n):
    the excess of ``fraction`` over it is the price of loading diagonal tiles whole."""

    dense: int
    causal: int
    fraction: float
    other_words: int
    interior_words: int
    diagonal_words: int
    fraction_without_diagonal: float


def causal_saving(n: int, d: int, M: int, *, which: str = "forward") -> CausalSaving:
    """The fraction of the dense count that the causal schedule moves (about one half), split
    by tile kind, for self-attention (m = n, d_v = d) with our blocks.

    ``which`` is ``"forward"`` (:func:`flash_forward_causal_count` over
    :func:`flash_forward_count`) or ``"backward"`` (the backward pair). Tile words are the
    traffic charged to a tile: K_j, V_j reads in the forward (c_j·D per tile); in the
    backward, the query-side reads and dQ writes r_i·(3d + d_v + 2) per tile. Totals are
    reads + writes. A tile is interior when its last key is at most its first query.

    Every split is a closed form (floor sums; any n costs the same). Forward, query block i
    starting at s_i = i·B_r: its interior tiles are the full key blocks ending at or before
    s_i + 1, ⌊(s_i + 1)/B_c⌋·B_c key rows, except that a last query block of one row
    (s_i = n − 1) has every kept tile interior, n rows. Backward, key block j with last key
    L_j = min((j+1)·B_c, n) − 1: its interior tiles are the query blocks starting at or
    after L_j, n − B_r·⌈L_j/B_r⌉ query rows when that is positive (L_j <= (T_r − 1)·B_r),
    else none. The diagonal words are the tile words less the interior ones. ``fraction``
    and ``fraction_without_diagonal`` are exact quotients of integers, rounded once.

    Raises AttnInputError for arguments below 1 or an unknown ``which``.
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    which = check_choice("which", which, ("forward", "backward"))
    if which == "forward":
        dense = flash_forward_count(n, d, M).total
        causal = flash_forward_causal_count(n, d, M).total
        B_r, B_c = flash_forward_blocks(d, M)
        per_row = 2 * d  # K_j and V_j, D = d + d_v words per key row
        tile_rows = _forward_kv_rows(n, n, B_r, B_c)
        interior_rows = _forward_interior_rows(n, B_r, B_c)
    else:
        dense = flash_backward_count(n, d, M).total
        causal = flash_backward_causal_count(n, d, M).total
        B_r, B_c = flash_backward_blocks(d, M)
        per_row = 2 * d + d + 2 + d  # Q, dO, lse, D, dQ read; dQ written
        _, tile_rows = _backward_rows(n, n, B_r, B_c)
        interior_rows = _backward_interior_rows(n, B_r, B_c)
    interior = interior_rows * per_row
    diag = tile_rows * per_row - interior
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
