"""FlashAttention-2's forward and backward schedules on the two-level machine, each beside its
exact closed-form count.

Notation (FlashAttention's): Q is n×d, K is m×d, V is m×d_v, S = τQKᵀ, P = row-softmax(S),
O = PV, lse = row log-sum-exp of S, D = d + d_v. The block sizes (B_r, B_c) come from
:mod:`.blocks`. Both schedules take an element ``mask`` and a ``block_mask`` over the pass's
grid of query blocks × key blocks; a block with nothing kept is skipped entirely, and the
result equals exact attention with the mask ``mask & expand_block_mask(block_mask, ...)``.
The counts (``*_count``) take the effective block mask; the tests require them to equal the
simulation (reads, writes and peak_fast).
"""

from __future__ import annotations

import numpy as np

from .._checks import (
    check_backward_inputs,
    check_int,
    check_mask,
    check_qkv,
    check_scale,
    float_dtype,
)

# The power of two the forward pass divides each loaded V block by (0: none needed): the
# accumulator Σ_j exp(s_j − max)·v_j sums up to m rows of V and can overflow where O, their
# convex combination, does not. The compiled kernels' rule, shared; moving it costs no words.
from ..fast import _value_shift as _accumulator_shift
from ..logits import (
    _lse_slack_rows,
    _lse_slack_terms,
    _probabilities_from_lse,
    _row_norms,
    max_row_norm,
)
from .blocks import (
    W_b,
    W_f,
    check_block_mask,
    d_pass_rows,
    flash_backward_blocks,
    flash_forward_blocks,
    grid_block_sizes,
    visited_blocks,
)
from .machine import IOCount
from .tiling import (
    block_ranges,
    ceil_div,
    check_machine_steps,
    check_run_logits,
    count_args,
    finish_run,
    resolve_blocks,
    span,
    start_run,
)

__all__ = ["flash_forward", "flash_forward_count", "flash_backward", "flash_backward_count"]


def _kept(ranges, keep):
    """The ranges whose flag in ``keep`` is set: the blocks of a row or column a pass visits."""
    return [r for r, k in zip(ranges, keep, strict=True) if k]


def _store_constant(mem, rows, dtype, **blocks):
    """Store constant blocks ``name=(width, value)`` (width None: a vector) into ``rows`` of
    the slow arrays, all live at once: the outputs of a block row or column the mask empties."""
    fast = [
        (name, mem.alloc(span(rows) if w is None else (span(rows), w), dtype=dtype, fill=value))
        for name, (w, value) in blocks.items()
    ]
    for name, block in fast:
        mem.store(name, rows, None, block)
    mem.free(*(block for _, block in fast))


# ---- forward -----------------------------------------------------------------------------------


def flash_forward(
    Q, K, V, *, M: int, scale=None, blocks=None, mask=None, block_mask=None, record=False
):
    """FlashAttention-2's forward pass (FA2 Alg. 1) on a :class:`TwoLevelMemory` of M words.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v) float arrays
    M : fast memory in words; at least :func:`flash_forward_min_M`
    scale : τ > 0, default 1/√d
    blocks : (B_r, B_c); default :func:`flash_forward_blocks` (provably fits). Given blocks
        are used as they are: if they do not fit, the machine raises CapacityError.
    mask : optional boolean (n, m), True = keep (as in :func:`attnlib.attention_forward`)
    block_mask : optional boolean (T_r, T_c) over this pass's blocks; False blocks are skipped
    record : keep the operation log; if True the machine is returned last

    Returns
    -------
    (O, lse, IOCount) [, machine]: O (n, d_v), lse (n,) (-inf on fully masked rows, whose O
    row is 0). The count equals :func:`flash_forward_count` exactly.

    Schedule: for each query block Q_i, load it and allocate the accumulator and the running
    max and sum; for each kept key block, load K_j and V_j, form S = τQ_iK_jᵀ, turn it into
    exp(S − max) in place and fold it in (FA2 Alg. 1 lines 8–10); store O_i and lse_i.

    Raises
    ------
    AttnInputError for invalid arrays, scale or masks, a bad pair of blocks, M below
    :func:`flash_forward_min_M`, logits τQKᵀ that overflow the dtype (as the compiled
    kernels do), or a run of more than :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS`
    block steps; CapacityError if blocks given do not fit in M.

    Examples
    --------
    >>> import numpy as np
    >>> Q = K = V = np.ones((8, 2))
    >>> O, lse, count = flash_forward(Q, K, V, M=40)
    >>> count
    IOCount(reads=80, writes=24, total=104, peak_fast=40)
    """
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    mask = check_mask(mask, n, m)
    B_r, B_c = resolve_blocks(blocks, flash_forward_blocks, d, M, d_v)
    check_machine_steps(ceil_div(n, B_r) * ceil_div(m, B_c), "flash_forward")
    keep = visited_blocks(mask, block_mask, n, m, B_r, B_c)
    dtype = float_dtype(Q, K, V)
    check_run_logits(Q, K, tau, dtype)
    t = dtype.type(tau)
    v_shift = _accumulator_shift(V.astype(dtype, copy=False))
    mem = start_run(M, record, dtype, {"Q": Q, "K": K, "V": V}, {"O": (n, d_v), "lse": (n,)})

    key_blocks = block_ranges(m, B_c)
    for i, I in enumerate(block_ranges(n, B_r)):
        kept = _kept(key_blocks, keep[i])
        if not kept:  # nothing kept in this row block: O_i = 0, lse_i = -inf
            _store_constant(mem, I, dtype, O=(d_v, 0.0), lse=(None, -np.inf))
            continue
        r = span(I)
        q = mem.load("Q", I)
        acc = mem.alloc((r, d_v), dtype=dtype)
        mx = mem.alloc(r, dtype=dtype, fill=-np.inf)
        sm = mem.alloc(r, dtype=dtype)
        for J in kept:
            k = mem.load("K", J)
            v = mem.load("V", J)
            if v_shift:
                np.ldexp(v, -v_shift, out=v)
            s = mem.alloc((r, span(J)), dtype=dtype)
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
        if v_shift:
            np.ldexp(o, v_shift, out=o)
        ls = np.full_like(sm, -np.inf)
        np.log(sm, out=ls, where=live)
        ls[live] += mx[live]
        mem.store("O", I, None, o)
        mem.store("lse", I, None, ls)
        mem.free(q, acc, mx, sm)
    return finish_run(mem, ("O", "lse"), record)


def flash_forward_count(
    n: int, d: int, M: int, *, m=None, d_v=None, blocks=None, block_mask=None
) -> IOCount:
    """Exact I/O of :func:`flash_forward` (closed form, no arrays).

    Dense, with (B_r, B_c) the blocks and T_r = ⌈n/B_r⌉::

        reads  = n·d + T_r·m·D         (Q once; K and V once per query block)
        writes = n·(d_v + 1)           (O and lse)
        peak   = W_f(min(B_r, n), min(B_c, m))

    With our blocks, B_r ≈ M/(3d) for M >= W_f(d, d) and d_v = d, so reads ≈ 6n·m·d²/M.

    Block-sparse (``block_mask`` (T_r, T_c), the run's effective mask; r_i, c_j the sizes of
    query block i and key block j)::

        reads  = Σ_{rows i with a kept block} r_i·d + Σ_{kept (i, j)} c_j·D
        writes = n·(d_v + 1)
        peak   = max(max_{kept (i,j)} W_f(r_i, c_j), max_{empty rows i} r_i·(d_v + 1))

    so with equal blocks the reads are affine in the number z of kept blocks.

    Raises AttnInputError for sizes below 1, a bad pair of blocks or a block mask of the wrong
    shape, or, with the default blocks, M below :func:`flash_forward_min_M`.

    Examples
    --------
    >>> flash_forward_count(8, 2, 40)
    IOCount(reads=80, writes=24, total=104, peak_fast=40)
    """
    n, d, M, m, d_v, B_r, B_c = count_args(n, d, M, m, d_v, blocks, flash_forward_blocks)
    bm = check_block_mask(block_mask, n, m, B_r, B_c)
    D = d + d_v
    if bm is None:
        peak = W_f(min(B_r, n), min(B_c, m), d, d_v)
        return IOCount(n * d + ceil_div(n, B_r) * m * D, n * (d_v + 1), peak)
    r, c = grid_block_sizes(bm.shape, n, m, B_r, B_c, D)
    nz_rows = bm.any(axis=1)
    reads = int(r[nz_rows].sum()) * d + int((bm * c[None, :]).sum()) * D
    peak = max(
        int(W_f(r[:, None], c[None, :], d, d_v)[bm].max(initial=0)),
        int(r[~nz_rows].max(initial=0)) * (d_v + 1),
    )
    return IOCount(reads, n * (d_v + 1), peak)


# ---- backward ----------------------------------------------------------------------------------


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
    M : fast memory in words; at least :func:`flash_backward_min_M`
    scale : τ > 0, default 1/√d
    blocks : (B_r, B_c); default :func:`flash_backward_blocks` (provably fits). Given blocks
        are used as they are: if they do not fit, the machine raises CapacityError.
    mask, block_mask : as in :func:`flash_forward`, over this pass's block grid
    record : keep the operation log; if True the machine is returned last

    Returns
    -------
    (dQ, dK, dV, IOCount) [, machine], equal to :func:`attnlib.attention_backward`; the count
    equals :func:`flash_backward_count` exactly.

    Schedule: (1) D_i = rowsum(dO_i∘O_i) for each visited query block, in sub-blocks of at
    most ⌊M/2d_v⌋ rows; (2) for each key block j, load K_j and V_j and allocate dK_j and dV_j;
    for each kept query block i, load Q_i, dO_i, lse_i, D_i and dQ_i (allocated as zeros on the
    first visit), recompute P = exp(τQ_iK_jᵀ − lse_i) in fast memory, update dV_j, dQ_i and
    dK_j, store dQ_i; then store dK_j and dV_j; (3) query blocks no kept block touches store
    dQ_i = 0.

    Raises
    ------
    AttnInputError for invalid arrays (lse may hold -inf), scale or masks, a bad pair of
    blocks, M below :func:`flash_backward_min_M`, logits τQKᵀ that overflow the dtype, or a
    run of more than :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` block steps;
    CapacityError if blocks given do not fit.

    Examples
    --------
    >>> import numpy as np
    >>> Q = K = V = dO = np.ones((8, 2))
    >>> O, lse, _ = flash_forward(Q, K, V, M=60)
    >>> *grads, count = flash_backward(Q, K, V, O, dO, lse, M=60)
    >>> count
    IOCount(reads=240, writes=88, total=328, peak_fast=52)
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    t = dtype.type(tau)
    mask = check_mask(mask, n, m)
    B_r, B_c = resolve_blocks(blocks, flash_backward_blocks, d, M, d_v)
    # the tiles, and the D pass's row blocks
    steps = ceil_div(n, B_r) * ceil_div(m, B_c) + ceil_div(n, d_pass_rows(B_r, M, d_v))
    check_machine_steps(steps, "flash_backward")
    keep = visited_blocks(mask, block_mask, n, m, B_r, B_c)
    check_run_logits(Q, K, tau, dtype)
    slack_terms = _lse_slack_terms(dtype, d, m, tau, max_row_norm(K))
    inputs = {"Q": Q, "K": K, "V": V, "O": O, "dO": dO, "lse": lse}
    outputs = {"D": (n,), "dQ": (n, d), "dK": (m, d), "dV": (m, d_v)}
    mem = start_run(M, record, dtype, inputs, outputs)
    query_blocks, key_blocks = block_ranges(n, B_r), block_ranges(m, B_c)

    # 1. D = rowsum(dO ∘ O), for the query blocks that will be visited.
    r_D = d_pass_rows(B_r, M, d_v)
    for I in _kept(query_blocks, keep.any(axis=1)):
        for Isub in block_ranges(I[1], r_D, start=I[0]):
            o = mem.load("O", Isub)
            do = mem.load("dO", Isub)
            mem.store("D", Isub, None, np.einsum("ij,ij->i", do, o))
            mem.free(o, do)

    # 2. Outer loop over key blocks, inner over query blocks.
    touched = set()  # query blocks whose dQ_i is already in slow memory
    for j, J in enumerate(key_blocks):
        kept = _kept(query_blocks, keep[:, j])
        if not kept:  # an empty key block: its gradients are 0
            _store_constant(mem, J, dtype, dK=(d, 0.0), dV=(d_v, 0.0))
            continue
        c = span(J)
        k = mem.load("K", J)
        v = mem.load("V", J)
        dk = mem.alloc((c, d), dtype=dtype)
        dv = mem.alloc((c, d_v), dtype=dtype)
        for I in kept:
            r = span(I)
            q = mem.load("Q", I)
            do = mem.load("dO", I)
            ls = mem.load("lse", I)
            Di = mem.load("D", I)
            dq = mem.load("dQ", I) if I in touched else mem.alloc((r, d), dtype=dtype)
            touched.add(I)
            p = mem.alloc((r, c), dtype=dtype)
            ds = mem.alloc((r, c), dtype=dtype)
            np.matmul(q, k.T, out=p)
            p *= t
            if mask is not None:
                p[~mask[I[0] : I[1], J[0] : J[1]]] = -np.inf
            # P = exp(p − lse) ≤ 1, refusing an lse that is not the forward's for these rows
            slack = _lse_slack_rows(_row_norms(q), ls, slack_terms)
            _probabilities_from_lse(p, ls, slack, first_row=I[0])
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
    for I in _kept(query_blocks, ~keep.any(axis=1)):
        _store_constant(mem, I, dtype, dQ=(d, 0.0))
    return finish_run(mem, ("dQ", "dK", "dV"), record)


def flash_backward_count(
    n: int, d: int, M: int, *, m=None, d_v=None, blocks=None, block_mask=None
) -> IOCount:
    """Exact I/O of :func:`flash_backward` (closed form, no arrays).

    Dense, with (B_r, B_c) the blocks and T_c = ⌈m/B_c⌉::

        reads  = 2n·d_v + m·D + T_c·n·(2d + d_v + 2) − n·d
                 (D pass; K, V once; per key block: Q, dO, lse, D, dQ — dQ not on the first)
        writes = n + m·D + T_c·n·d       (D; dK, dV once; dQ once per key block)
        peak   = max(W_b(min(B_r, n), min(B_c, m)), 2·min(r_D, n)·d_v)

    with r_D = max(1, min(B_r, ⌊M/(2d_v)⌋)) the D pass's row block. With our blocks and
    d_v = d, B_c ≈ M/(6d) once M >= W_b(d, d) = 9d² + 2d, so the total is
    ≈ 24·n·m·d²/M + O((n + m)d).

    Block-sparse (``block_mask`` (T_r, T_c), the run's effective mask; r_i, c_j the block
    sizes; R the non-empty block rows, C the non-empty block columns)::

        reads  = Σ_{i∈R} r_i·2d_v + Σ_{j∈C} c_j·D + Σ_{kept (i,j)} r_i(2d + d_v + 2)
                 − Σ_{i∈R} r_i·d
        writes = Σ_{i∈R} r_i + m·D + Σ_{kept (i,j)} r_i·d + Σ_{i∉R} r_i·d
        peak   = the largest working set of any step that runs

    With equal blocks and z kept blocks this is affine in z: each kept block adds
    B_r(2d + d_v + 2) reads and B_r·d writes.

    Raises
    ------
    AttnInputError for sizes below 1, blocks that are not a pair of positive ints, a block
    mask of the wrong dtype or shape, or M below :func:`flash_backward_min_M` (default blocks).

    Examples
    --------
    >>> count = flash_backward_count(8, 2, 60)
    >>> count.reads, count.writes, count.peak_fast
    (240, 88, 52)
    """
    n, d, M, m, d_v, B_r, B_c = count_args(n, d, M, m, d_v, blocks, flash_backward_blocks)
    bm = check_block_mask(block_mask, n, m, B_r, B_c)
    D = d + d_v
    r_D = d_pass_rows(B_r, M, d_v)
    if bm is None:
        T_c = ceil_div(m, B_c)
        reads = 2 * n * d_v + m * D + T_c * n * (2 * d + d_v + 2) - n * d
        writes = n + m * D + T_c * n * d
        peak = max(W_b(min(B_r, n), min(B_c, m), d, d_v), 2 * min(r_D, n) * d_v)
        return IOCount(reads, writes, peak)
    r, c = grid_block_sizes(bm.shape, n, m, B_r, B_c, D)
    R, C = bm.any(axis=1), bm.any(axis=0)
    rows_R = int(r[R].sum())
    kept_r = int((bm * r[:, None]).sum())  # Σ over kept blocks of r_i
    reads = rows_R * 2 * d_v + int(c[C].sum()) * D + kept_r * (2 * d + d_v + 2) - rows_R * d
    writes = rows_R + m * D + kept_r * d + int(r[~R].sum()) * d
    peak = max(
        int(W_b(r[:, None], c[None, :], d, d_v)[bm].max(initial=0)),  # an inner step
        2 * int(np.minimum(r[R], r_D).max(initial=0)) * d_v,  # the D pass
        int(c[~C].max(initial=0)) * D,  # an empty key block's zero dK, dV
        int(r[~R].max(initial=0)) * d,  # an untouched query block's zero dQ
    )
    return IOCount(reads, writes, peak)
