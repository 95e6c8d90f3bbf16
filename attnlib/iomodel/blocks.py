"""FlashAttention's block sizes: the working sets, the rule that makes a pass fit in M words,
and the blocks a pass visits (block-sparse and causal).

A pass with query blocks of B_r rows and key blocks of B_c rows holds W_f(B_r, B_c) words
(forward) or W_b(B_r, B_c) words (backward) in its inner step. :func:`W_f` and :func:`W_b`
are the formulas (plain arithmetic, numpy arrays accepted); the public functions validate
their arguments and apply them. A block mask is a boolean (T_r, T_c) grid over a pass's query
blocks × key blocks, T_r = ⌈n/B_r⌉ and T_c = ⌈m/B_c⌉. A causal pass visits a prefix of key
blocks in every query block; :func:`causal_blocks` is that grid and :func:`causal_key_rows`
and :func:`causal_query_rows` its sums, in closed form.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import AttnInputError, check_int, check_memory
from .tiling import block_sizes, ceil_div, check_blocks, floor_sum

__all__ = [
    "W_f",
    "W_b",
    "d_pass_rows",
    "flash_forward_working_set",
    "flash_backward_working_set",
    "flash_forward_min_M",
    "flash_backward_min_M",
    "flash_forward_blocks",
    "flash_backward_blocks",
    "fa1_blocks",
    "flash_block_mask",
    "check_block_mask",
    "expand_block_mask",
    "grid_block_sizes",
    "visited_blocks",
    "causal_blocks",
    "causal_key_rows",
    "causal_query_rows",
]

#: The largest value int64 arithmetic holds; past it the counts compute with Python ints.
_INT64_MAX = np.iinfo(np.int64).max


# ---- the formulas ----------------------------------------------------------------------------


def W_f(B_r, B_c, d, d_v):
    """Fast words of the forward pass's inner step: Q_i and the output accumulator, the
    running max and sum, K_j and V_j, the score block: B_r(D + 2) + B_c·D + B_r·B_c with
    D = d + d_v. Plain arithmetic: any argument may be a numpy array."""
    D = d + d_v
    return B_r * (D + 2) + B_c * D + B_r * B_c


def W_b(B_r, B_c, d, d_v):
    """Fast words of the backward pass's inner step: K_j, V_j, dK_j, dV_j; Q_i, dO_i, dQ_i,
    lse_i, D_i; the P and dS blocks: 2·B_c·D + B_r(D + d + 2) + 2·B_r·B_c with D = d + d_v.
    Plain arithmetic: any argument may be a numpy array."""
    D = d + d_v
    return 2 * B_c * D + B_r * (D + d + 2) + 2 * B_r * B_c


def d_pass_rows(B_r: int, M: int, d_v: int) -> int:
    """Row block of the pass D = rowsum(dO∘O): B_r rows, fewer if 2·B_r·d_v would exceed M."""
    return max(1, min(B_r, M // (2 * d_v)))


def _sizes(B_r, B_c, d, d_v):
    B_r, B_c, d = check_int("B_r", B_r), check_int("B_c", B_c), check_int("d", d)
    return B_r, B_c, d, d if d_v is None else check_int("d_v", d_v)


# ---- working sets and the least M ------------------------------------------------------------


def flash_forward_working_set(B_r: int, B_c: int, d: int, d_v: int | None = None) -> int:
    """Fast words live in :func:`~attnlib.iomodel.flash_forward`'s inner step with blocks
    (B_r, B_c): W_f = B_r·(d + d_v + 2) + B_c·(d + d_v) + B_r·B_c (d_v defaults to d).

    Raises AttnInputError for an argument that is not an integer >= 1.
    """
    return W_f(*_sizes(B_r, B_c, d, d_v))


def flash_backward_working_set(B_r: int, B_c: int, d: int, d_v: int | None = None) -> int:
    """Fast words live in :func:`~attnlib.iomodel.flash_backward`'s inner step with blocks
    (B_r, B_c): W_b = 2·B_c·(d + d_v) + B_r·(2d + d_v + 2) + 2·B_r·B_c (d_v defaults to d).

    Raises AttnInputError for an argument that is not an integer >= 1.
    """
    return W_b(*_sizes(B_r, B_c, d, d_v))


def flash_forward_min_M(d: int, *, d_v: int | None = None) -> int:
    """The least M in which :func:`~attnlib.iomodel.flash_forward` runs:
    W_f(1, 1) = 2(d + d_v) + 3. Raises AttnInputError for d or d_v below 1."""
    return W_f(*_sizes(1, 1, d, d_v))


def flash_backward_min_M(d: int, *, d_v: int | None = None) -> int:
    """The least M in which :func:`~attnlib.iomodel.flash_backward` runs:
    W_b(1, 1) = 3(d + d_v) + d + 4. Raises AttnInputError for d or d_v below 1."""
    return W_b(*_sizes(1, 1, d, d_v))


def _rule_args(d, M, d_v, W, who: str, formula: str):
    """d, M, d_v validated, and M checked against the working set of 1×1 blocks."""
    _, _, d, d_v = _sizes(1, 1, d, d_v)
    M = check_int("M", M)
    need = W(1, 1, d, d_v)
    if M < need:
        raise AttnInputError(
            f"M must be at least {need} words for {who} with d={d}, d_v={d_v} "
            f"(the working set of 1×1 blocks, {formula}), got M={M}"
        )
    return d, M, d_v


# ---- the block rule --------------------------------------------------------------------------


def flash_forward_blocks(d: int, M: int, *, d_v: int | None = None) -> tuple[int, int]:
    """Our block sizes (B_r, B_c) for the forward pass: B_c = min(B_r, d) and B_r is the
    **largest** integer with W_f(B_r, B_c) <= M, so the schedule provably fits in M words.

    In closed form, with D = d + d_v: if M >= W_f(d, d), then
    B_r = ⌊(M − dD) / (D + d + 2)⌋ (>= d); otherwise B_c = B_r < d and
    B_r = isqrt(M + (D+1)²) − (D+1), the largest r with r² + 2r(D+1) <= M. The forward's I/O
    depends on B_r only, so the outer block is made large and the inner one kept at most d.

    Raises AttnInputError if M < :func:`flash_forward_min_M`, or for d, M or d_v below 1.

    Examples
    --------
    >>> flash_forward_blocks(64, 65536)
    (295, 64)
    """
    d, M, d_v = _rule_args(d, M, d_v, W_f, "flash_forward", "2(d + d_v) + 3")
    D = d + d_v
    if M >= W_f(d, d, d, d_v):
        r = (M - d * D) // (D + d + 2)
    else:
        r = math.isqrt(M + (D + 1) ** 2) - (D + 1)
    return r, min(r, d)


def flash_backward_blocks(d: int, M: int, *, d_v: int | None = None) -> tuple[int, int]:
    """Our block sizes (B_r, B_c) for the backward pass: B_r = min(B_c, d) and B_c is the
    **largest** integer with W_b(B_r, B_c) <= M, so the schedule provably fits in M words.

    In closed form, with D = d + d_v: if M >= W_b(d, d), then
    B_c = ⌊(M − d(D + d + 2)) / (2D + 2d)⌋ (>= d); otherwise B_r = B_c < d and, with
    a = 3D + d + 2, B_c = ⌊(isqrt(8M + a²) − a) / 4⌋, the largest c with 2c² + ac <= M. The
    backward's I/O depends on B_c only, so the outer (key) block is made large.

    Raises AttnInputError if M < :func:`flash_backward_min_M`, or for d, M or d_v below 1.

    Examples
    --------
    >>> flash_backward_blocks(64, 65536), flash_backward_blocks(64, 4096)
    ((64, 138), (8, 8))
    """
    d, M, d_v = _rule_args(d, M, d_v, W_b, "flash_backward", "3(d + d_v) + d + 4")
    D = d + d_v
    if M >= W_b(d, d, d, d_v):
        c = (M - d * (D + d + 2)) // (2 * D + 2 * d)
    else:
        a = 3 * D + d + 2
        c = (math.isqrt(8 * M + a * a) - a) // 4
    return min(c, d), c


def fa1_blocks(d: int, M: int) -> tuple[int, int]:
    """FlashAttention-1's block sizes (FA1 Alg. 1 line 1): B_c = ⌈M/4d⌉, B_r = min(B_c, d),
    returned as (B_r, B_c).

    They are Θ-correct but do not fit a cache of exactly M words on a strict machine: in the
    backward pass K_j, V_j, dK_j and dV_j alone take 4·B_c·d >= M words. Raises
    AttnInputError for d or M below 1.
    """
    d, M = check_int("d", d), check_int("M", M)
    c = ceil_div(M, 4 * d)
    return min(c, d), c


# ---- block masks -----------------------------------------------------------------------------


def _as_bool_array(name: str, value) -> np.ndarray:
    try:
        return np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(f"{name} must be a boolean array ({exc})") from exc


def flash_block_mask(mask, blocks) -> np.ndarray:
    """The (T_r, T_c) block pattern of an element mask: block (i, j) is True iff it keeps at
    least one entry. ``mask`` is boolean (n, m); ``blocks`` is (B_r, B_c) of the pass (from
    :func:`flash_forward_blocks` or :func:`flash_backward_blocks`).

    Raises AttnInputError for a mask that is not a non-empty 2-D boolean array, or bad blocks.
    """
    arr = _as_bool_array("mask", mask)
    if arr.dtype != np.bool_ or arr.ndim != 2 or arr.size == 0:
        raise AttnInputError(
            f"mask must be a non-empty 2-dimensional boolean array, got {arr.dtype} {arr.shape}"
        )
    B_r, B_c = check_blocks(blocks)
    n, m = arr.shape
    # a block longer than the mask is one block of it (and need not fit an int64 index)
    rows = np.add.reduceat(arr, np.arange(0, n, min(B_r, n)), axis=0)
    return np.add.reduceat(rows, np.arange(0, m, min(B_c, m)), axis=1) > 0


def check_block_mask(block_mask, n: int, m: int, B_r: int, B_c: int) -> np.ndarray | None:
    """Validate a (T_r, T_c) boolean block mask for blocks (B_r, B_c) of an n × m score
    matrix; None passes through. Raises AttnInputError for a wrong dtype or shape."""
    if block_mask is None:
        return None
    arr = _as_bool_array("block_mask", block_mask)
    shape = (ceil_div(n, B_r), ceil_div(m, B_c))
    if arr.dtype != np.bool_:
        raise AttnInputError(f"block_mask must have a boolean dtype, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise AttnInputError(
            f"block_mask must have shape (T_r, T_c) = {shape} (⌈n/B_r⌉, ⌈m/B_c⌉ with blocks "
            f"(B_r, B_c) = ({B_r}, {B_c})), got {arr.shape}"
        )
    return arr


def expand_block_mask(block_mask, n: int, m: int, blocks) -> np.ndarray:
    """The (n, m) element mask of a (T_r, T_c) block mask: every entry of block (i, j) takes
    the block's value. Use it to compare a block-sparse run with exact attention.

    Raises AttnInputError for sizes below 1, bad blocks, a block mask of the wrong dtype or
    shape, or a mask too large for memory.
    """
    n, m = check_int("n", n), check_int("m", m)
    B_r, B_c = check_blocks(blocks)
    if block_mask is None:
        raise AttnInputError("block_mask must be a boolean (T_r, T_c) array, got None")
    bm = check_block_mask(block_mask, n, m, B_r, B_c)
    # the result is n×m booleans, plus the n×T_c array repeated along the rows first
    check_memory("expand_block_mask's (n, m) mask", n * m + n * bm.shape[1], culprits="n or m")
    return np.repeat(np.repeat(bm, block_sizes(n, B_r), axis=0), block_sizes(m, B_c), axis=1)


def grid_block_sizes(shape, n: int, m: int, B_r: int, B_c: int, D: int):
    """(r, c): the sizes of the T_r query blocks and T_c key blocks of a block-sparse count
    over a grid of ``shape`` = (T_r, T_c), as arrays whose arithmetic in the count is exact.

    The counts form, block by block, working sets of at most 2·m·D + n·(2D + 2) + 2·n·m
    words (D = d + d_v) and sums of at most T_r·m + T_c·n rows. When these fit int64 the
    sizes are int64; otherwise they are Python ints (object arrays), so that no product
    wraps around. Raises AttnInputError if the count's per-block temporaries (about six
    arrays of T_r·T_c numbers) would exceed the memory limit.
    """
    T_r, T_c = shape
    exact = 2 * m * D + n * (2 * D + 2) + 2 * n * m + T_r * m + T_c * n <= _INT64_MAX
    per_block = 48 if exact else 6 * 40  # bytes: six int64 temporaries, or six of objects
    check_memory(
        "a block-sparse count's per-block arithmetic",
        per_block * T_r * T_c,
        culprits="block_mask (its number of blocks T_r·T_c)",
    )
    dtype = np.int64 if exact else object
    return block_sizes(n, B_r, dtype=dtype), block_sizes(m, B_c, dtype=dtype)


def visited_blocks(mask, block_mask, n: int, m: int, B_r: int, B_c: int) -> np.ndarray:
    """The (T_r, T_c) grid of blocks a pass visits: ``block_mask`` (default: all) and, with an
    element ``mask`` (already validated), only blocks that keep at least one entry. Raises
    AttnInputError for a bad block mask."""
    bm = check_block_mask(block_mask, n, m, B_r, B_c)
    if bm is None:
        bm = np.ones((ceil_div(n, B_r), ceil_div(m, B_c)), dtype=bool)
    if mask is not None:
        bm = bm & flash_block_mask(mask, (B_r, B_c))
    return bm


# ---- the causal pattern ----------------------------------------------------------------------
#
# PyTorch's is_causal, top-left aligned: query position p keeps key j iff j <= p. A pass may
# run the g query heads of a group together, packed position by position (its row r is
# position ⌊r/g⌋); g = 1 is one head. Query block i (rows up to e_i = min((i+1)·B_r, g·n))
# then keeps the key blocks that start at or before its last position ⌊(e_i − 1)/g⌋.


def causal_blocks(n: int, m: int, B_r: int, B_c: int, g: int = 1) -> np.ndarray:
    """The (T_r, T_c) grid of blocks a causal pass over g·n packed query rows visits (T_r =
    ⌈g·n/B_r⌉, T_c = ⌈m/B_c⌉): block (i, j) iff j·B_c <= ⌊(e_i − 1)/g⌋. Sizes are validated
    by the caller. Raises AttnInputError if the grid would exceed the memory limit."""
    rows = g * n
    T_r, T_c = ceil_div(rows, B_r), ceil_div(m, B_c)
    exact = rows <= _INT64_MAX and m <= _INT64_MAX  # else Python ints, which never wrap
    check_memory("the causal block grid", T_r * T_c + 80 * (T_r + T_c), culprits="n or m")
    dtype = np.int64 if exact else object
    last = (np.cumsum(block_sizes(rows, B_r, dtype=dtype)) - 1) // g  # ⌊(e_i − 1)/g⌋
    first = np.cumsum(block_sizes(m, B_c, dtype=dtype)) - block_sizes(m, B_c, dtype=dtype)
    return first[None, :] <= last[:, None]


def causal_key_rows(n: int, m: int, B_r: int, B_c: int, g: int = 1) -> int:
    """Σ_i min(m, k_i·B_c): the key rows a causal forward pass over g·n packed query rows
    loads, summed over its query blocks, with k_i = min(T_c, ⌊(e_i − 1)/(g·B_c)⌋ + 1) the key
    blocks of query block i (see :func:`causal_blocks`).

    Closed form: the T_r − 1 full query blocks end at e = j·B_r, j = 1 … T_r − 1, and keep
    fewer than T_c key blocks exactly when j·B_r <= (T_c − 1)·g·B_c, i.e. for
    j <= J = min(T_r − 1, ⌊(T_c − 1)·g·B_c/B_r⌋); the others load all m rows. Then
    k_j = ⌊(B_r·(j − 1) + B_r + g·B_c − 1)/(g·B_c)⌋ and::

        Σ = B_c·floor_sum(J, g·B_c, B_r, B_r + g·B_c − 1) + (T_r − 1 − J)·m
            + min(m, B_c·⌈n/B_c⌉)

    the last term being the last query block's (its last position is n − 1). O(log B_c)
    integer steps: any n costs the same.

    Examples
    --------
    >>> causal_key_rows(8, 8, 4, 4)  # query block 0 keeps key block 0, block 1 both
    12
    """
    T_r, T_c, G = ceil_div(g * n, B_r), ceil_div(m, B_c), g * B_c
    J = min(T_r - 1, (T_c - 1) * G // B_r)
    partial = B_c * floor_sum(J, G, B_r, B_r + G - 1)
    return partial + (T_r - 1 - J) * m + min(m, B_c * ceil_div(n, B_c))


def causal_query_rows(n: int, m: int, B_r: int, B_c: int, g: int = 1) -> tuple[int, int]:
    """(N, Σρ) of a causal backward pass over g·n packed query rows: N = ⌈min(n, m)/B_c⌉ key
    blocks hold a kept score, and key block j (first key j·B_c) is visited by the query
    blocks from the one holding row g·j·B_c (the first of position j·B_c) to the last, the
    rows ρ_j = g·n − ⌊g·j·B_c/B_r⌋·B_r; so Σ_{j<N} ρ_j = N·g·n − B_r·floor_sum(N, B_r,
    g·B_c, 0), in O(log B_r) integer steps.

    Examples
    --------
    >>> causal_query_rows(8, 8, 4, 4)  # key block 0 sees all 8 rows, key block 1 the last 4
    (2, 12)
    """
    N = ceil_div(min(n, m), B_c)
    return N, N * g * n - B_r * floor_sum(N, B_r, g * B_c, 0)
