"""FlashAttention's forward and backward schedules on the two-level machine, with exact counts.

Notation (FlashAttention's): Q is n×d, K is m×d, V is m×d_v, S = τQKᵀ, P = row-softmax(S),
O = PV, lse = row log-sum-exp of S; D = d + d_v below is the width of one key row of K and V
together.

* :func:`flash_forward` is FlashAttention-2's forward (FA2 Alg. 1): the outer loop runs over
  query blocks Q_i (B_r rows), the inner loop streams key blocks K_j, V_j (B_c rows) and keeps
  an online softmax (running max and sum) and the output accumulator in fast memory. Neither
  S nor P ever reaches slow memory.
* :func:`flash_backward` is FlashAttention-2's backward (FA2 Alg. 2; FA1 Alg. 4): after a
  pass computing D = rowsum(dO∘O), the outer loop runs over key blocks (K_j, V_j loaded once;
  dK_j, dV_j accumulate in fast memory and are written once), the inner loop over query
  blocks, recomputing P = exp(τQ_iK_jᵀ − lse_i) in fast memory and updating dQ_i in slow
  memory.
* :func:`standard_forward` and :func:`standard_backward` are the *standard* implementation
  (FA1 Alg. 0 and App. B.2, Alg. 3): every n×m intermediate (S, P; P, dP, dS) is written to
  slow memory and read back, so their I/O has an n·m term: Θ(nd + nm) when M = Ω(d²).

Every schedule has a closed-form twin (``*_count``) derived from its loop structure; the
tests require the two to be **equal** (reads, writes and peak_fast).

**Block sizes** (our rule; :func:`flash_forward_blocks`, :func:`flash_backward_blocks`). In
each pass the *outer* block is as large as fits and the *inner* block is min(outer, d), the
shape of FA1's rule B_c = ⌈M/4d⌉, B_r = min(⌈M/4d⌉, d) with constants that provably fit. FA1's
own rule overfills a cache of exactly M words (:func:`fa1_blocks`); see the chapter.

**Block sparsity.** ``flash_forward`` and ``flash_backward`` take ``block_mask``, a boolean
(T_r, T_c) array over *that pass's* grid of query blocks × key blocks (T_r = ⌈n/B_r⌉,
T_c = ⌈m/B_c⌉, with the pass's (B_r, B_c)), and/or an element ``mask`` (n, m), True = keep, as
in :func:`attnlib.attention_forward`. A block that is False in ``block_mask`` or has no kept
entry in ``mask`` is skipped: nothing of it is loaded or computed. The result equals exact
attention with the element mask ``mask & expand_block_mask(block_mask, ...)``. The closed
forms take the (effective) block mask; :func:`flash_block_mask` builds it from an element mask.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import (
    AttnInputError,
    check_backward_inputs,
    check_int,
    check_mask,
    check_memory,
    check_qkv,
    check_scale,
    float_dtype,
)
from .machine import IOCount, TwoLevelMemory

__all__ = [
    "flash_forward",
    "flash_backward",
    "flash_forward_count",
    "flash_backward_count",
    "standard_forward",
    "standard_backward",
    "standard_forward_count",
    "standard_backward_count",
    "flash_forward_blocks",
    "flash_backward_blocks",
    "flash_forward_min_M",
    "flash_backward_min_M",
    "fa1_blocks",
    "flash_forward_working_set",
    "flash_backward_working_set",
    "flash_block_mask",
    "expand_block_mask",
]


# =========================================================================================
# Working sets and the block-size rule
# =========================================================================================


def flash_forward_working_set(B_r: int, B_c: int, d: int, d_v: int | None = None) -> int:
    """Fast words live in :func:`flash_forward`'s inner step with blocks (B_r, B_c):

        W_f = B_r·(d + d_v + 2) + B_c·(d + d_v) + B_r·B_c

    (Q_i and the output accumulator, the running max and sum, K_j and V_j, the score block).
    """
    B_r, B_c, d = check_int("B_r", B_r), check_int("B_c", B_c), check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    D = d + d_v
    return B_r * (D + 2) + B_c * D + B_r * B_c


def flash_backward_working_set(B_r: int, B_c: int, d: int, d_v: int | None = None) -> int:
    """Fast words live in :func:`flash_backward`'s inner step with blocks (B_r, B_c):

        W_b = 2·B_c·(d + d_v) + B_r·(2d + d_v + 2) + 2·B_r·B_c

    (K_j, V_j and the accumulators dK_j, dV_j; Q_i, dO_i, dQ_i, lse_i, D_i; the P and dS
    blocks).
    """
    B_r, B_c, d = check_int("B_r", B_r), check_int("B_c", B_c), check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    D = d + d_v
    return 2 * B_c * D + B_r * (D + d + 2) + 2 * B_r * B_c


def flash_forward_min_M(d: int, *, d_v: int | None = None) -> int:
    """The least M in which :func:`flash_forward` runs: W_f(1, 1) = 2(d + d_v) + 3."""
    d = check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    return flash_forward_working_set(1, 1, d, d_v)


def flash_backward_min_M(d: int, *, d_v: int | None = None) -> int:
    """The least M in which :func:`flash_backward` runs: W_b(1, 1) = 3(d + d_v) + d + 4."""
    d = check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    return flash_backward_working_set(1, 1, d, d_v)


def flash_forward_blocks(d: int, M: int, *, d_v: int | None = None) -> tuple[int, int]:
    """Our block sizes (B_r, B_c) for the forward pass: B_c = min(B_r, d) and B_r is the
    **largest** integer with

        W_f(B_r, B_c) = B_r(D + 2) + B_c·D + B_r·B_c <= M,      D = d + d_v,

    so the schedule provably fits in M words. In closed form: if M >= W_f(d, d), then
    B_r = ⌊(M − dD) / (D + d + 2)⌋ (>= d); otherwise B_c = B_r < d and
    B_r = isqrt(M + (D+1)²) − (D+1), the largest r with r² + 2r(D+1) <= M.

    The forward's I/O depends on B_r only (T_r = ⌈n/B_r⌉ passes over K and V), so the outer
    block is made large and the inner block kept at most d, which caps the score block
    B_r·B_c at B_r·d. Raises AttnInputError if M < :func:`flash_forward_min_M`.
    """
    d = check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    M = check_int("M", M)
    need = flash_forward_working_set(1, 1, d, d_v)
    if M < need:
        raise AttnInputError(
            f"M must be at least {need} words for flash_forward with d={d}, d_v={d_v} "
            f"(the working set of 1×1 blocks, 2(d + d_v) + 3), got M={M}"
        )
    D = d + d_v
    if M >= flash_forward_working_set(d, d, d, d_v):
        r = (M - d * D) // (D + d + 2)
    else:
        r = math.isqrt(M + (D + 1) ** 2) - (D + 1)
    return r, min(r, d)


def flash_backward_blocks(d: int, M: int, *, d_v: int | None = None) -> tuple[int, int]:
    """Our block sizes (B_r, B_c) for the backward pass: B_r = min(B_c, d) and B_c is the
    **largest** integer with

        W_b(B_r, B_c) = 2·B_c·D + B_r(D + d + 2) + 2·B_r·B_c <= M,      D = d + d_v,

    so the schedule provably fits in M words. In closed form: if M >= W_b(d, d), then
    B_c = ⌊(M − d(D + d + 2)) / (2D + 2d)⌋ (>= d); otherwise B_r = B_c < d and, with
    a = 3D + d + 2, B_c = ⌊(isqrt(8M + a²) − a) / 4⌋, the largest c with 2c² + ac <= M.

    The backward's I/O depends on B_c only (T_c = ⌈m/B_c⌉ passes over the query side), so
    the outer (key) block is made large. FA1's B_c = ⌈M/4d⌉ alone already fills M with
    K_j, V_j, dK_j, dV_j (:func:`fa1_blocks`). Raises AttnInputError if
    M < :func:`flash_backward_min_M`.
    """
    d = check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    M = check_int("M", M)
    need = flash_backward_working_set(1, 1, d, d_v)
    if M < need:
        raise AttnInputError(
            f"M must be at least {need} words for flash_backward with d={d}, d_v={d_v} "
            f"(the working set of 1×1 blocks, 3(d + d_v) + d + 4), got M={M}"
        )
    D = d + d_v
    if M >= flash_backward_working_set(d, d, d, d_v):
        c = (M - d * (D + d + 2)) // (2 * D + 2 * d)
    else:
        a = 3 * D + d + 2
        c = (math.isqrt(8 * M + a * a) - a) // 4
    return min(c, d), c


def fa1_blocks(d: int, M: int) -> tuple[int, int]:
    """FlashAttention-1's block sizes (FA1 Alg. 1 line 1): B_c = ⌈M/4d⌉, B_r = min(B_c, d).

    Returned as (B_r, B_c). They are Θ-correct but do not fit a cache of exactly M words on
    a strict machine: in the backward pass K_j, V_j, dK_j and dV_j alone take
    4·B_c·d >= M words, before any query block is loaded.
    """
    d = check_int("d", d)
    M = check_int("M", M)
    c = -(-M // (4 * d))
    return min(c, d), c


def _check_required_blocks(blocks):
    if blocks is None:
        raise AttnInputError("blocks must be a pair (B_r, B_c) of positive ints, got None")
    return _check_blocks(blocks)


def _check_blocks(blocks):
    if blocks is None:
        return None
    if not isinstance(blocks, tuple | list) or len(blocks) != 2:
        raise AttnInputError(f"blocks must be a pair (B_r, B_c) of positive ints, got {blocks!r}")
    return check_int("blocks[0] (B_r)", blocks[0]), check_int("blocks[1] (B_c)", blocks[1])


# =========================================================================================
# Block masks
# =========================================================================================


def _ranges(extent: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(s + size, extent)) for s in range(0, extent, size)]


def _sizes(extent: int, size: int) -> np.ndarray:
    t = -(-extent // size)
    s = np.full(t, size, dtype=np.int64)
    s[-1] = extent - size * (t - 1)
    return s


def flash_block_mask(mask, blocks) -> np.ndarray:
    """The (T_r, T_c) block pattern of an element mask: block (i, j) is True iff it keeps at
    least one entry. ``mask`` is boolean (n, m); ``blocks`` is (B_r, B_c) of the pass (from
    :func:`flash_forward_blocks` or :func:`flash_backward_blocks`)."""
    try:
        arr = np.asarray(mask)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(f"mask must be a boolean array ({exc})") from exc
    if arr.dtype != np.bool_ or arr.ndim != 2 or arr.size == 0:
        raise AttnInputError(
            f"mask must be a non-empty 2-dimensional boolean array, got {arr.dtype} {arr.shape}"
        )
    B_r, B_c = _check_required_blocks(blocks)
    n, m = arr.shape
    rows = np.add.reduceat(arr, np.arange(0, n, B_r), axis=0)
    return np.add.reduceat(rows, np.arange(0, m, B_c), axis=1) > 0


def expand_block_mask(block_mask, n: int, m: int, blocks) -> np.ndarray:
    """The (n, m) element mask of a (T_r, T_c) block mask: every entry of block (i, j) takes
    the block's value. Use it to compare a block-sparse run with exact attention."""
    n, m = check_int("n", n), check_int("m", m)
    B_r, B_c = _check_required_blocks(blocks)
    if block_mask is None:
        raise AttnInputError("block_mask must be a boolean (T_r, T_c) array, got None")
    bm = _check_block_mask(block_mask, n, m, B_r, B_c)
    # the result is n×m booleans, plus the n×T_c array repeated along the rows first
    check_memory("expand_block_mask's (n, m) mask", n * m + n * bm.shape[1], culprits="n or m")
    return np.repeat(np.repeat(bm, _sizes(n, B_r), axis=0), _sizes(m, B_c), axis=1)


def _check_block_mask(block_mask, n, m, B_r, B_c):
    if block_mask is None:
        return None
    try:
        arr = np.asarray(block_mask)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(f"block_mask must be a boolean array ({exc})") from exc
    shape = (-(-n // B_r), -(-m // B_c))
    if arr.dtype != np.bool_:
        raise AttnInputError(f"block_mask must have a boolean dtype, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise AttnInputError(
            f"block_mask must have shape (T_r, T_c) = {shape} (⌈n/B_r⌉, ⌈m/B_c⌉ with blocks "
            f"(B_r, B_c) = ({B_r}, {B_c})), got {arr.shape}"
        )
    return arr


def _effective_block_mask(mask, block_mask, n, m, B_r, B_c):
    """Blocks to visit: block_mask (default all) AND 'the element mask keeps something'."""
    bm = _check_block_mask(block_mask, n, m, B_r, B_c)
    if mask is not None:
        from_mask = flash_block_mask(mask, (B_r, B_c))
        bm = from_mask if bm is None else (bm & from_mask)
    return bm


# =========================================================================================
# Input checks
# =========================================================================================


def _dims(n, d, M, m, d_v):
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    m = n if m is None else check_int("m", m)
    d_v = d if d_v is None else check_int("d_v", d_v)
    return n, d, M, m, d_v


def _d_pass_rows(B_r: int, M: int, d_v: int) -> int:
    """Row block of the D = rowsum(dO∘O) pass: B_r rows, fewer if 2·B_r·d_v would exceed M."""
    return max(1, min(B_r, M // (2 * d_v)))


def _finish(mem, outputs, record):
    count = mem.finish()
    return (*outputs, count, mem) if record else (*outputs, count)


# =========================================================================================
# FlashAttention forward
# =========================================================================================


def flash_forward(
    Q, K, V, *, M: int, scale=None, blocks=None, mask=None, block_mask=None, record=False
):
    """FlashAttention-2's forward pass (FA2 Alg. 1) on a :class:`TwoLevelMemory` of M words.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v) float arrays
    M : fast memory in words; at least :func:`flash_forward_min_M` (AttnInputError names it)
    scale : τ > 0, default 1/√d
    blocks : (B_r, B_c); default :func:`flash_forward_blocks` (provably fits). Given blocks
        are used as they are: if they do not fit, the machine raises CapacityError.
    mask : optional boolean (n, m), True = keep (as in :func:`attnlib.attention_forward`)
    block_mask : optional boolean (T_r, T_c) over this pass's blocks; False blocks are
        skipped (see the module docstring)
    record : keep the operation log; if True the machine is returned last

    Returns
    -------
    (O, lse, IOCount) [, machine]: O (n, d_v), lse (n,) (-inf on fully masked rows, whose O
    row is 0). The count equals :func:`flash_forward_count` exactly.

    Schedule: for each query block Q_i: load Q_i; allocate the accumulator (B_r×d_v), running
    max and sum; for each kept key block: load K_j, V_j, allocate the score block
    S = τQ_iK_jᵀ, turn it into exp(S − max) in place and fold it in (FA2 Alg. 1 lines 8–10);
    then store O_i = acc/sum and lse_i = max + log(sum). A query block with no kept key block
    stores O_i = 0 and lse_i = -inf without loading anything.
    """
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    mask = check_mask(mask, n, m)
    given = _check_blocks(blocks)
    B_r, B_c = given if given is not None else flash_forward_blocks(d, M, d_v=d_v)
    bm = _effective_block_mask(mask, block_mask, n, m, B_r, B_c)
    dtype = float_dtype(Q, K, V)
    t = dtype.type(tau)

    mem = TwoLevelMemory(M, record=record)
    mem.put("Q", Q.astype(dtype, copy=False))
    mem.put("K", K.astype(dtype, copy=False))
    mem.put("V", V.astype(dtype, copy=False))
    mem.zeros("O", (n, d_v), dtype=dtype)
    mem.zeros("lse", (n,), dtype=dtype)

    for i, I in enumerate(_ranges(n, B_r)):
        r = I[1] - I[0]
        cols = [j for j in range(-(-m // B_c)) if bm is None or bm[i, j]]
        if not cols:  # nothing kept in this row block: O_i = 0, lse_i = -inf
            o = mem.alloc((r, d_v), dtype=dtype)
            ls = mem.alloc(r, dtype=dtype, fill=-np.inf)
            mem.store("O", I, None, o)
            mem.store("lse", I, None, ls)
            mem.free(o, ls)
            continue
        q = mem.load("Q", I)
        acc = mem.alloc((r, d_v), dtype=dtype)
        mx = mem.alloc(r, dtype=dtype, fill=-np.inf)
        sm = mem.alloc(r, dtype=dtype)
        for j in cols:
            J = (j * B_c, min((j + 1) * B_c, m))
            k = mem.load("K", J)
            v = mem.load("V", J)
            s = mem.alloc((r, J[1] - J[0]), dtype=dtype)
            np.matmul(q, k.T, out=s)
            s *= t
            if mask is not None:
                s[~mask[I[0] : I[1], J[0] : J[1]]] = -np.inf
            # Online softmax (FA2 Alg. 1 lines 8-10); a row with nothing kept yet has
            # max -inf and is shifted by 0 so that exp gives 0, never NaN.
            m_new = np.maximum(mx, s.max(axis=1))
            shift = np.where(np.isneginf(m_new), 0, m_new)
            corr = np.exp(mx - shift)
            np.exp(s - shift[:, None], out=s)
            sm *= corr
            sm += s.sum(axis=1)
            acc *= corr[:, None]
            acc += s @ v
            mx[:] = m_new
            mem.free(k, v, s)
        live = sm > 0
        o = np.zeros_like(acc)
        np.divide(acc, sm[:, None], out=o, where=live[:, None])
        ls = np.full_like(sm, -np.inf)
        np.log(sm, out=ls, where=live)
        ls[live] += mx[live]
        mem.store("O", I, None, o)
        mem.store("lse", I, None, ls)
        mem.free(q, acc, mx, sm)
    return _finish(mem, (mem.get("O"), mem.get("lse")), record)


def flash_forward_count(
    n: int,
    d: int,
    M: int,
    *,
    m: int | None = None,
    d_v: int | None = None,
    blocks=None,
    block_mask=None,
) -> IOCount:
    """Exact I/O of :func:`flash_forward` (closed form, no arrays).

    Dense, with (B_r, B_c) the blocks, T_r = ⌈n/B_r⌉, D = d + d_v::

        reads  = n·d + T_r·m·D         (Q once; K and V once per query block)
        writes = n·(d_v + 1)           (O and lse)
        peak   = W_f(min(B_r, n), min(B_c, m))       (:func:`flash_forward_working_set`)

    With our blocks, B_r ≈ M/(3d) for M >= W_f(d, d) and d_v = d, so reads ≈ 6n·m·d²/M.

    Block-sparse (``block_mask`` (T_r, T_c), the effective mask of the run; r_i, c_j the
    sizes of query block i and key block j)::

        reads  = Σ_{rows i with a kept block} r_i·d + Σ_{kept (i, j)} c_j·D
        writes = n·(d_v + 1)
        peak   = max(max_{kept (i,j)} W_f(r_i, c_j), max_{empty rows i} r_i·(d_v + 1))

    so with equal blocks the reads are affine in the number z of kept blocks:
    reads = R·B_r·d + z·B_c·D with R the number of non-empty block rows.
    """
    n, d, M, m, d_v = _dims(n, d, M, m, d_v)
    given = _check_blocks(blocks)
    B_r, B_c = given if given is not None else flash_forward_blocks(d, M, d_v=d_v)
    bm = _check_block_mask(block_mask, n, m, B_r, B_c)
    D = d + d_v
    if bm is None:
        T_r = -(-n // B_r)
        peak = flash_forward_working_set(min(B_r, n), min(B_c, m), d, d_v)
        return IOCount(n * d + T_r * m * D, n * (d_v + 1), peak)
    r, c = _sizes(n, B_r), _sizes(m, B_c)
    nz_rows = bm.any(axis=1)
    reads = int(r[nz_rows].sum()) * d + int((bm * c[None, :]).sum()) * D
    peak = 0
    if bm.any():
        W = r[:, None] * (D + 2) + c[None, :] * D + r[:, None] * c[None, :]
        peak = int(W[bm].max())
    if not nz_rows.all():
        peak = max(peak, int(r[~nz_rows].max()) * (d_v + 1))
    return IOCount(reads, n * (d_v + 1), peak)


# =========================================================================================
# FlashAttention backward
# =========================================================================================


def flash_backward(
    Q,
    K,
    V,
    O,
    dO,
    lse,
    *,
    M: int,
    scale=None,
    blocks=None,
    mask=None,
    block_mask=None,
    record=False,
):
    """FlashAttention-2's backward pass (FA2 Alg. 2) on a :class:`TwoLevelMemory` of M words.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v); O, dO : (n, d_v); lse : (n,) from the forward pass
    M : fast memory in words; at least :func:`flash_backward_min_M` (AttnInputError names it)
    scale : τ > 0, default 1/√d
    blocks : (B_r, B_c); default :func:`flash_backward_blocks` (provably fits). Given blocks
        are used as they are: if they do not fit, the machine raises CapacityError.
    mask, block_mask : as in :func:`flash_forward`, over this pass's block grid
    record : keep the operation log; if True the machine is returned last

    Returns
    -------
    (dQ, dK, dV, IOCount) [, machine], equal to :func:`attnlib.attention_backward`; the count
    equals :func:`flash_backward_count` exactly.

    Schedule:

    1. D pass: for each query block with a kept block, load O_i and dO_i, store
       D_i = rowsum(dO_i∘O_i) (in sub-blocks of at most ⌊M/2d_v⌋ rows).
    2. For each key block j: load K_j and V_j, allocate dK_j and dV_j. For each kept query
       block i: load Q_i, dO_i, lse_i, D_i and dQ_i (on the first visit of row block i,
       dQ_i is allocated as zeros instead of loaded), allocate P and dS (B_r×B_c); recompute
       P = exp(τQ_iK_jᵀ − lse_i); dV_j += Pᵀ dO_i; dS = P∘(dO_i V_jᵀ − D_i);
       dQ_i += τ dS K_j; dK_j += τ dSᵀ Q_i; store dQ_i. Then store dK_j and dV_j.
    3. Query blocks with no kept block store dQ_i = 0.
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    mask = check_mask(mask, n, m)
    given = _check_blocks(blocks)
    B_r, B_c = given if given is not None else flash_backward_blocks(d, M, d_v=d_v)
    bm = _effective_block_mask(mask, block_mask, n, m, B_r, B_c)
    T_r, T_c = -(-n // B_r), -(-m // B_c)
    if bm is None:
        bm = np.ones((T_r, T_c), dtype=bool)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    t = dtype.type(tau)

    mem = TwoLevelMemory(M, record=record)
    for name, a in (("Q", Q), ("K", K), ("V", V), ("O", O), ("dO", dO), ("lse", lse)):
        mem.put(name, a.astype(dtype, copy=False))
    mem.zeros("D", (n,), dtype=dtype)
    mem.zeros("dQ", (n, d), dtype=dtype)
    mem.zeros("dK", (m, d), dtype=dtype)
    mem.zeros("dV", (m, d_v), dtype=dtype)

    row_ranges, col_ranges = _ranges(n, B_r), _ranges(m, B_c)
    nz_rows = bm.any(axis=1)

    # 1. D = rowsum(dO ∘ O), for the query blocks that will be visited.
    r_D = _d_pass_rows(B_r, M, d_v)
    for i, I in enumerate(row_ranges):
        if nz_rows[i]:
            for sub in _ranges(I[1] - I[0], r_D):
                Isub = (I[0] + sub[0], I[0] + sub[1])
                o = mem.load("O", Isub)
                do = mem.load("dO", Isub)
                mem.store("D", Isub, None, np.einsum("ij,ij->i", do, o))
                mem.free(o, do)

    # 2. Outer loop over key blocks, inner over query blocks.
    touched = np.zeros(T_r, dtype=bool)
    for j, J in enumerate(col_ranges):
        c = J[1] - J[0]
        if not bm[:, j].any():  # an empty key block: its gradients are 0
            dk = mem.alloc((c, d), dtype=dtype)
            dv = mem.alloc((c, d_v), dtype=dtype)
            mem.store("dK", J, None, dk)
            mem.store("dV", J, None, dv)
            mem.free(dk, dv)
            continue
        k = mem.load("K", J)
        v = mem.load("V", J)
        dk = mem.alloc((c, d), dtype=dtype)
        dv = mem.alloc((c, d_v), dtype=dtype)
        for i, I in enumerate(row_ranges):
            if not bm[i, j]:
                continue
            r = I[1] - I[0]
            q = mem.load("Q", I)
            do = mem.load("dO", I)
            ls = mem.load("lse", I)
            Di = mem.load("D", I)
            # dQ_i is read back only if an earlier key block already wrote to it.
            dq = mem.load("dQ", I) if touched[i] else mem.alloc((r, d), dtype=dtype)
            touched[i] = True
            p = mem.alloc((r, c), dtype=dtype)
            ds = mem.alloc((r, c), dtype=dtype)
            np.matmul(q, k.T, out=p)
            p *= t
            if mask is not None:
                p[~mask[I[0] : I[1], J[0] : J[1]]] = -np.inf
            shift = np.where(np.isneginf(ls), 0, ls)  # fully masked rows: P = 0
            np.exp(p - shift[:, None], out=p)
            dv += p.T @ do
            np.matmul(do, v.T, out=ds)
            ds -= Di[:, None]
            ds *= p
            dq += t * (ds @ k)
            dk += t * (ds.T @ q)
            mem.store("dQ", I, None, dq)
            mem.free(q, do, ls, Di, dq, p, ds)
        mem.store("dK", J, None, dk)
        mem.store("dV", J, None, dv)
        mem.free(k, v, dk, dv)

    # 3. Query blocks that no kept block touched: dQ_i = 0.
    for i, I in enumerate(row_ranges):
        if not nz_rows[i]:
            dq = mem.alloc((I[1] - I[0], d), dtype=dtype)
            mem.store("dQ", I, None, dq)
            mem.free(dq)
    return _finish(mem, (mem.get("dQ"), mem.get("dK"), mem.get("dV")), record)


def flash_backward_count(
    n: int,
    d: int,
    M: int,
    *,
    m: int | None = None,
    d_v: int | None = None,
    blocks=None,
    block_mask=None,
) -> IOCount:
    """Exact I/O of :func:`flash_backward` (closed form, no arrays).

    Dense, with (B_r, B_c) the blocks, T_c = ⌈m/B_c⌉, D = d + d_v::

        reads  = 2n·d_v + m·D + T_c·n·(2d + d_v + 2) − n·d
                 (D pass; K, V once; per key block: Q, dO, lse, D, dQ — dQ not on the first)
        writes = n + m·D + T_c·n·d       (D; dK, dV once; dQ once per key block)
        peak   = max(W_b(min(B_r, n), min(B_c, m)), 2·min(r_D, n)·d_v)
                 with r_D = max(1, min(B_r, ⌊M/(2d_v)⌋)) the D pass's row block

    With our blocks and d_v = d, B_c ≈ M/(6d) once M >= W_b(d, d) = 9d² + 2d, so the total
    is ≈ 24·n·m·d²/M + O((n + m)d): the Θ(n²d²/M) of FA2 / LLS+24.

    Block-sparse (``block_mask`` (T_r, T_c), the run's effective mask; r_i, c_j the block
    sizes; R the non-empty block rows, C the non-empty block columns)::

        reads  = Σ_{i∈R} r_i·2d_v + Σ_{j∈C} c_j·D + Σ_{kept (i,j)} r_i(2d + d_v + 2)
                 − Σ_{i∈R} r_i·d
        writes = Σ_{i∈R} r_i + m·D + Σ_{kept (i,j)} r_i·d + Σ_{i∉R} r_i·d
        peak   = the largest working set of any step that runs

    With equal blocks (B_r | n, B_c | m) and z kept blocks this is affine in z:
    reads = |R|·B_r(2d_v − d) + |C|·B_c·D + z·B_r(2d + d_v + 2),
    writes = |R|·B_r + m·D + (z + T_r − |R|)·B_r·d.
    """
    n, d, M, m, d_v = _dims(n, d, M, m, d_v)
    given = _check_blocks(blocks)
    B_r, B_c = given if given is not None else flash_backward_blocks(d, M, d_v=d_v)
    bm = _check_block_mask(block_mask, n, m, B_r, B_c)
    D = d + d_v
    r_D = _d_pass_rows(B_r, M, d_v)
    if bm is None:
        T_c = -(-m // B_c)
        reads = 2 * n * d_v + m * D + T_c * n * (2 * d + d_v + 2) - n * d
        writes = n + m * D + T_c * n * d
        peak = max(
            flash_backward_working_set(min(B_r, n), min(B_c, m), d, d_v), 2 * min(r_D, n) * d_v
        )
        return IOCount(reads, writes, peak)
    r, c = _sizes(n, B_r), _sizes(m, B_c)
    R, C = bm.any(axis=1), bm.any(axis=0)
    kept_r = int((bm * r[:, None]).sum())  # Σ over kept blocks of r_i
    reads = (
        int(r[R].sum()) * 2 * d_v
        + int(c[C].sum()) * D
        + kept_r * (2 * d + d_v + 2)
        - int(r[R].sum()) * d
    )
    writes = int(r[R].sum()) + m * D + kept_r * d + int(r[~R].sum()) * d
    peak = 0
    if bm.any():
        W = 2 * c[None, :] * D + r[:, None] * (D + d + 2) + 2 * r[:, None] * c[None, :]
        peak = int(W[bm].max())
        peak = max(peak, 2 * int(np.minimum(r[R], r_D).max()) * d_v)
    if not C.all():
        peak = max(peak, int(c[~C].max()) * D)
    if not R.all():
        peak = max(peak, int(r[~R].max()) * d)
    return IOCount(reads, writes, peak)


# =========================================================================================
# Standard attention: S, P (and dP, dS) materialised in slow memory
# =========================================================================================


def _standard_blocks(d, M, d_v):
    # The forward rule's blocks: every step below has a working set <= W_f(B_r, B_c).
    return flash_forward_blocks(d, M, d_v=d_v)


def standard_forward(Q, K, V, *, M: int, scale=None, record=False):
    """Standard attention's forward pass (FA1 Alg. 0) on a :class:`TwoLevelMemory` of M words.

    Three kernels, each materialising its n×m result in slow memory:

    1. S = τQKᵀ by blocks (query block Q_i held, key blocks K_j streamed), S written;
    2. the softmax, row block by row block: S read twice (once for the running max and sum,
       giving lse, once to form P = exp(S − lse)), P and lse written;
    3. O = PV by blocks (accumulator O_i held, P_ij and V_j streamed), O written.

    Blocks are :func:`flash_forward_blocks` (B_r for query rows, B_c for keys), so each step
    provably fits and the difference from :func:`flash_forward` is only the materialisation.
    Arguments and return as :func:`flash_forward` (no mask). The count equals
    :func:`standard_forward_count` exactly.
    """
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    B_r, B_c = _standard_blocks(d, M, d_v)
    dtype = float_dtype(Q, K, V)
    t = dtype.type(tau)
    mem = TwoLevelMemory(M, record=record)
    mem.put("Q", Q.astype(dtype, copy=False))
    mem.put("K", K.astype(dtype, copy=False))
    mem.put("V", V.astype(dtype, copy=False))
    for name in ("S", "P"):
        mem.zeros(name, (n, m), dtype=dtype)
    mem.zeros("lse", (n,), dtype=dtype)
    mem.zeros("O", (n, d_v), dtype=dtype)
    rows, cols = _ranges(n, B_r), _ranges(m, B_c)

    for I in rows:  # 1. S = τ Q Kᵀ
        q = mem.load("Q", I)
        for J in cols:
            k = mem.load("K", J)
            s = mem.alloc((I[1] - I[0], J[1] - J[0]), dtype=dtype)
            np.matmul(q, k.T, out=s)
            s *= t
            mem.store("S", I, J, s)
            mem.free(k, s)
        mem.free(q)
    for I in rows:  # 2. lse and P = exp(S − lse), two passes over each row block of S
        r = I[1] - I[0]
        mx = mem.alloc(r, dtype=dtype, fill=-np.inf)
        sm = mem.alloc(r, dtype=dtype)
        for J in cols:
            s = mem.load("S", I, J)
            m_new = np.maximum(mx, s.max(axis=1))
            sm *= np.exp(mx - m_new)
            sm += np.exp(s - m_new[:, None]).sum(axis=1)
            mx[:] = m_new
            mem.free(s)
        mx += np.log(sm)  # mx now holds lse
        mem.store("lse", I, None, mx)
        for J in cols:
            s = mem.load("S", I, J)
            mem.store("P", I, J, np.exp(s - mx[:, None]))
            mem.free(s)
        mem.free(mx, sm)
    for I in rows:  # 3. O = P V
        acc = mem.alloc((I[1] - I[0], d_v), dtype=dtype)
        for J in cols:
            p = mem.load("P", I, J)
            v = mem.load("V", J)
            acc += p @ v
            mem.free(p, v)
        mem.store("O", I, None, acc)
        mem.free(acc)
    return _finish(mem, (mem.get("O"), mem.get("lse")), record)


def standard_forward_count(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None
) -> IOCount:
    """Exact I/O of :func:`standard_forward`. With (B_r, B_c) = :func:`flash_forward_blocks`,
    T_r = ⌈n/B_r⌉, r = min(B_r, n), c = min(B_c, m)::

        reads  = n·d + T_r·m·d      (S = τQKᵀ)
               + 2·n·m              (softmax: S read twice)
               + n·m + T_r·m·d_v    (O = PV)
        writes = n·m + (n·m + n) + n·d_v           (S; P and lse; O)
        peak   = max(r·d + c·d + r·c, 2r + r·c, r·d_v + r·c + c·d_v)

    The 3nm reads and 2nm writes are the n×m traffic FlashAttention avoids.
    """
    n, d, M, m, d_v = _dims(n, d, M, m, d_v)
    B_r, B_c = _standard_blocks(d, M, d_v)
    T_r = -(-n // B_r)
    r, c = min(B_r, n), min(B_c, m)
    reads = n * d + T_r * m * d + 3 * n * m + T_r * m * d_v
    writes = 2 * n * m + n + n * d_v
    peak = max(r * d + c * d + r * c, 2 * r + r * c, r * d_v + r * c + c * d_v)
    return IOCount(reads, writes, peak)


def standard_backward(Q, K, V, O, dO, lse, *, M: int, scale=None, record=False):
    """Standard attention's backward pass (FA1 App. B.2, Alg. 3) on a machine of M words.

    Each kernel materialises its n×m result in slow memory:

    0. P = exp(τQKᵀ − lse), written (the standard forward leaves P in slow memory; here it
       is rebuilt from lse so that the signature matches :func:`flash_backward`);
    1. D = rowsum(dO∘O) (FA2's form of FA1's rowsum(P∘dP); in row blocks of at most
       ⌊M/2d_v⌋);
    2. dV = Pᵀ dO (key block of dV held, P and dO streamed);
    3. dP = dO Vᵀ, written;
    4. dS = P∘(dP − D), written (P and dP read);
    5. dQ = τ dS K (query block of dQ held);
    6. dK = τ dSᵀ Q (key block of dK held).

    Row-outer steps use (B_r, B_c) = :func:`flash_forward_blocks` as (query, key) blocks;
    the key-outer steps 2 and 6 use B_r keys × B_c queries. Arguments and return as
    :func:`flash_backward` (no mask); the count equals :func:`standard_backward_count`.
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    B_r, B_c = _standard_blocks(d, M, d_v)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    t = dtype.type(tau)
    mem = TwoLevelMemory(M, record=record)
    for name, a in (("Q", Q), ("K", K), ("V", V), ("O", O), ("dO", dO), ("lse", lse)):
        mem.put(name, a.astype(dtype, copy=False))
    for name in ("P", "dP", "dS"):
        mem.zeros(name, (n, m), dtype=dtype)
    mem.zeros("D", (n,), dtype=dtype)
    mem.zeros("dQ", (n, d), dtype=dtype)
    mem.zeros("dK", (m, d), dtype=dtype)
    mem.zeros("dV", (m, d_v), dtype=dtype)
    q_rows, k_cols = _ranges(n, B_r), _ranges(m, B_c)  # row-outer steps
    k_outer, q_inner = _ranges(m, B_r), _ranges(n, B_c)  # key-outer steps

    for I in q_rows:  # 0. P = exp(τ Q Kᵀ − lse)
        q = mem.load("Q", I)
        ls = mem.load("lse", I)
        shift = np.where(np.isneginf(ls), 0, ls)
        for J in k_cols:
            k = mem.load("K", J)
            p = mem.alloc((I[1] - I[0], J[1] - J[0]), dtype=dtype)
            np.matmul(q, k.T, out=p)
            p *= t
            np.exp(p - shift[:, None], out=p)
            mem.store("P", I, J, p)
            mem.free(k, p)
        mem.free(q, ls)
    for I in _ranges(n, _d_pass_rows(B_r, M, d_v)):  # 1. D = rowsum(dO ∘ O)
        o = mem.load("O", I)
        do = mem.load("dO", I)
        mem.store("D", I, None, np.einsum("ij,ij->i", do, o))
        mem.free(o, do)
    for J in k_outer:  # 2. dV = Pᵀ dO
        acc = mem.alloc((J[1] - J[0], d_v), dtype=dtype)
        for I in q_inner:
            p = mem.load("P", I, J)
            do = mem.load("dO", I)
            acc += p.T @ do
            mem.free(p, do)
        mem.store("dV", J, None, acc)
        mem.free(acc)
    for I in q_rows:  # 3. dP = dO Vᵀ
        do = mem.load("dO", I)
        for J in k_cols:
            v = mem.load("V", J)
            dp = mem.alloc((I[1] - I[0], J[1] - J[0]), dtype=dtype)
            np.matmul(do, v.T, out=dp)
            mem.store("dP", I, J, dp)
            mem.free(v, dp)
        mem.free(do)
    for I in q_rows:  # 4. dS = P ∘ (dP − D)
        Di = mem.load("D", I)
        for J in k_cols:
            p = mem.load("P", I, J)
            dp = mem.load("dP", I, J)
            mem.store("dS", I, J, p * (dp - Di[:, None]))
            mem.free(p, dp)
        mem.free(Di)
    for I in q_rows:  # 5. dQ = τ dS K
        acc = mem.alloc((I[1] - I[0], d), dtype=dtype)
        for J in k_cols:
            ds = mem.load("dS", I, J)
            k = mem.load("K", J)
            acc += ds @ k
            mem.free(ds, k)
        mem.store("dQ", I, None, t * acc)
        mem.free(acc)
    for J in k_outer:  # 6. dK = τ dSᵀ Q
        acc = mem.alloc((J[1] - J[0], d), dtype=dtype)
        for I in q_inner:
            ds = mem.load("dS", I, J)
            q = mem.load("Q", I)
            acc += ds.T @ q
            mem.free(ds, q)
        mem.store("dK", J, None, t * acc)
        mem.free(acc)
    return _finish(mem, (mem.get("dQ"), mem.get("dK"), mem.get("dV")), record)


def standard_backward_count(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None
) -> IOCount:
    """Exact I/O of :func:`standard_backward`. With (B_r, B_c) = :func:`flash_forward_blocks`,
    T_r = ⌈n/B_r⌉ (query blocks of the row-outer steps), T'_c = ⌈m/B_r⌉ (key blocks of the
    key-outer steps), D = d + d_v::

        reads  = 5·n·m                       (P in 2, 4; dP in 4; dS in 5, 6)
               + n·(d + 1) + T_r·m·(2d + d_v)  (Q, lse in 0; K in 0, 5; V in 3)
               + 3·n·d_v + n                 (O, dO in 1; dO in 3; D in 4)
               + T'_c·n·D                    (dO in 2; Q in 6)
        writes = 3·n·m + n + n·d + m·D       (P, dP, dS; D; dQ; dK, dV)
        peak   = the largest working set of the seven steps

    The 5nm reads and 3nm writes are what recomputing P in fast memory saves.
    """
    n, d, M, m, d_v = _dims(n, d, M, m, d_v)
    B_r, B_c = _standard_blocks(d, M, d_v)
    D = d + d_v
    T_r, T_ck = -(-n // B_r), -(-m // B_r)
    reads = 5 * n * m + n * (d + 1) + T_r * m * (2 * d + d_v) + 3 * n * d_v + n + T_ck * n * D
    writes = 3 * n * m + n + n * d + m * D
    r, c = min(B_r, n), min(B_c, m)  # row-outer steps
    R2, C2 = min(B_r, m), min(B_c, n)  # key-outer steps
    r_D = min(_d_pass_rows(B_r, M, d_v), n)
    peak = max(
        r * (d + 1) + c * d + r * c,  # 0
        2 * r_D * d_v,  # 1
        R2 * d_v + C2 * R2 + C2 * d_v,  # 2
        r * d_v + c * d_v + r * c,  # 3
        r + 2 * r * c,  # 4
        r * d + r * c + c * d,  # 5
        R2 * d + C2 * R2 + C2 * d,  # 6
    )
    return IOCount(reads, writes, peak)
