"""FlashAttention-2's forward and backward schedules on the two-level machine, each beside its
exact closed-form count.

Notation (FlashAttention's): Q is n×d, K is m×d, V is m×d_v, S = τQKᵀ, P = row-softmax(S),
O = PV, lse = row log-sum-exp of S, D = d + d_v; the block sizes (B_r, B_c) come from
:mod:`.blocks`, and what a pass runs over from :mod:`.layout`: one head with an element
``mask`` and a ``block_mask`` (a block with nothing kept is skipped entirely), or PyTorch's
heads (``enable_gqa``), each group's query heads packed into one pass that loads every K, V
block once for the whole group; ``is_causal`` skips the blocks after a query block's last
position (FA2 §3.1). The counts (``*_count``) take the sizes and the same keywords; the tests
require them to equal the simulation (reads, writes and peak_fast). What is counted is the
words of the declared blocks: the element mask and the numpy temporaries of one step are not
(see :class:`~attnlib.iomodel.TwoLevelMemory`).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_head_backward, check_head_qkv, float_dtype, is_batched

# The power of two the forward pass divides each loaded V block by (0: none needed): the
# accumulator Σ_j exp(s_j − max)·v_j sums up to m rows of V and can overflow where O, their
# convex combination, does not. The compiled kernels' rule, shared; moving it costs no words.
from .._guards import _value_shift as _accumulator_shift
from ..logits import _lse_slack_rows, _lse_slack_terms, _row_norms, max_row_norm
from .blocks import (
    W_b,
    W_f,
    causal_key_rows,
    causal_query_rows,
    d_pass_rows,
    flash_backward_blocks,
    flash_forward_blocks,
    grid_block_sizes,
)
from .layout import (
    as_given,
    count_setup,
    drop_masked,
    kept_blocks,
    pack_heads,
    pass_setup,
    probabilities,
    unpack_heads,
)
from .machine import IOCount
from .tiling import (
    block_ranges,
    ceil_div,
    check_run_logits,
    finish_run,
    span,
    start_run,
    store_constant,
)

__all__ = ["flash_forward", "flash_forward_count", "flash_backward", "flash_backward_count"]


# ---- forward -----------------------------------------------------------------------------------


# The signature in two lines, as Chapter 3 shows it: formatting is off for this function.
# fmt: off
def flash_forward(
    Q, K, V, *, M: int, scale=None, is_causal=False, enable_gqa=False,
    blocks=None, mask=None, block_mask=None, record=False,
):
    """FlashAttention-2's forward pass (FA2 Alg. 1) on a :class:`TwoLevelMemory` of M words.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v) float arrays, one head; or Q (H, n, d),
        K (H_kv, m, d), V (H_kv, m, d_v), several (see the module docstring)
    M : fast memory in words; at least :func:`flash_forward_min_M`
    scale : τ > 0, default 1/√d
    is_causal : query i keeps key j iff j <= i; the blocks above the diagonal are skipped
    enable_gqa : H a multiple of H_kv, query head h using key/value head h // (H/H_kv)
    blocks : (B_r, B_c); default :func:`flash_forward_blocks` (provably fits). Given blocks
        are used as they are: if they do not fit, the machine raises CapacityError.
    mask : optional boolean (n, m), True = keep (as in :func:`attnlib.attention_forward`).
        Read from the argument, not loaded: no word of it is counted, as for a mask computed
        from indices (causal, a band); a mask held as data in slow memory would add r·c
        reads per kept block (see :class:`~attnlib.iomodel.TwoLevelMemory`)
    block_mask : optional boolean (T_r, T_c) over this pass's blocks; False blocks are skipped
    record : keep the operation log; if True the machine is returned last

    Returns
    -------
    (O, lse, IOCount) [, machine]: O (n, d_v) or (H, n, d_v), lse (n,) or (H, n) (-inf on
    fully masked rows, whose O row is 0). The count equals :func:`flash_forward_count`.

    Schedule: for each query block Q_i (of each group), load it and allocate the accumulator
    and the running max and sum; for each kept key block, load K_j and V_j, form S = τQ_iK_jᵀ,
    turn it into exp(S − max) in place and fold it in (FA2 Alg. 1 lines 8–10); store O_i and
    lse_i.

    Raises
    ------
    AttnInputError for invalid arrays, scale or masks, a mask with is_causal or with several
    heads, a bad pair of blocks, M below :func:`flash_forward_min_M`, logits τQKᵀ that
    overflow the dtype (as the compiled kernels do), or a run of more than
    :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` block steps; CapacityError if blocks
    given do not fit in M.

    Examples
    --------
    >>> import numpy as np
    >>> Q = K = V = np.ones((8, 2))
    >>> O, lse, count = flash_forward(Q, K, V, M=40)
    >>> count
    IOCount(reads=80, writes=24, total=104, peak_fast=40)
    """
    batched = is_batched(Q)
    Q, K, V, g = check_head_qkv(Q, K, V, enable_gqa)
    (H, n, d), (H_kv, m, d_v) = Q.shape, V.shape
    M, tau, is_causal, mask, B_r, B_c, keep = pass_setup(
        "flash_forward", Q, V, g, M, scale, is_causal, mask, block_mask, blocks
    )
    dtype = float_dtype(Q, K, V)
    for kv in range(H_kv):
        check_run_logits(Q[kv * g : (kv + 1) * g].reshape(-1, d), K[kv], tau, dtype)
    v_shifts = [_accumulator_shift(V[kv].astype(dtype, copy=False)) for kv in range(H_kv)]
    t = dtype.type(tau)
    inputs = {"Q": pack_heads(Q, g), "K": K.reshape(-1, d), "V": V.reshape(-1, d_v)}
    mem = start_run(M, record, dtype, inputs, {"O": (H * n, d_v), "lse": (H * n,)})

    for kv, v_shift in enumerate(v_shifts):  # one group of g query heads: rows g·n, keys m
        base = (kv * g * n, kv * m)
        key_blocks = block_ranges(base[1] + m, B_c, start=base[1])
        for i, I in enumerate(block_ranges(base[0] + g * n, B_r, start=base[0])):
            kept = kept_blocks(key_blocks, keep[i])
            if not kept:  # nothing kept in this row block: O_i = 0, lse_i = -inf
                store_constant(mem, I, dtype, O=(d_v, 0.0), lse=(None, -np.inf))
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
                drop_masked(s, mask, is_causal, g, I, J, base)
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
    O, lse, *rest = finish_run(mem, ("O", "lse"), record)
    return (*as_given(batched, unpack_heads(O, g, H), unpack_heads(lse, g, H)), *rest)
# fmt: on


def flash_forward_count(
    n: int, d: int, M: int, *, m=None, d_v=None, H=1, H_kv=None, is_causal=False,
    enable_gqa=False, blocks=None, block_mask=None,
) -> IOCount:  # fmt: skip
    """Exact I/O of :func:`flash_forward` (closed form, no arrays).

    One head, dense, with (B_r, B_c) the blocks and T_r = ⌈n/B_r⌉::

        reads  = n·d + T_r·m·D         (Q once; K and V once per query block)
        writes = n·(d_v + 1)           (O and lse)
        peak   = W_f(min(B_r, n), min(B_c, m))

    With our blocks, B_r ≈ M/(3d) for M >= W_f(d, d) and d_v = d, so reads ≈ 6n·m·d²/M.

    Causal: the kept prefix of key blocks, Σ_i min(m, k_i·B_c) key rows
    (:func:`~attnlib.iomodel.blocks.causal_key_rows`, a floor sum: any n costs the same)
    replace T_r·m. With B_r = B_c = B dividing n = m (T = n/B), reads = n·d + D·B·T(T + 1)/2:
    one half of the dense count's tiles, plus the diagonal's.

    Block-sparse (``block_mask`` (T_r, T_c), the run's effective mask; r_i, c_j the sizes of
    query block i and key block j)::

        reads  = Σ_{rows i with a kept block} r_i·d + Σ_{kept (i, j)} c_j·D
        writes = n·(d_v + 1)
        peak   = max(max_{kept (i,j)} W_f(r_i, c_j), max_{empty rows i} r_i·(d_v + 1))

    so with equal blocks the reads are affine in the number z of kept blocks.

    Heads (``H`` query heads, ``H_kv`` key/value heads, default H; g = H/H_kv): H_kv passes,
    each the one-head count with g·n query rows; reads and writes add, the peak is one pass's.

    Raises AttnInputError for sizes below 1, H not a multiple of H_kv (or different without
    ``enable_gqa``), a bad pair of blocks, a block mask of the wrong shape or with several
    heads, or, with the default blocks, M below :func:`flash_forward_min_M`.

    Examples
    --------
    >>> flash_forward_count(8, 2, 40)
    IOCount(reads=80, writes=24, total=104, peak_fast=40)
    >>> flash_forward_count(1024, 64, 16384, is_causal=True)
    IOCount(reads=1461248, writes=66560, total=1527808, peak_fast=16120)
    """
    n, d, M, m, d_v, B_r, B_c, H_kv, g, is_causal, bm = count_setup(
        n, d, M, m, d_v, H, H_kv, is_causal, enable_gqa, blocks, block_mask, flash_forward_blocks
    )
    rows, D = g * n, d + d_v  # one pass: the g heads of a group, packed
    writes = rows * (d_v + 1)
    if bm is None:
        peak = W_f(min(B_r, rows), min(B_c, m), d, d_v)  # block (0, 0) is always kept
        kv_rows = causal_key_rows(n, m, B_r, B_c, g) if is_causal else ceil_div(rows, B_r) * m
        return IOCount(H_kv * (rows * d + kv_rows * D), H_kv * writes, peak)
    r, c = grid_block_sizes(bm.shape, n, m, B_r, B_c, D)
    nz_rows = bm.any(axis=1)
    reads = int(r[nz_rows].sum()) * d + int((bm * c[None, :]).sum()) * D
    peak = max(
        int(W_f(r[:, None], c[None, :], d, d_v)[bm].max(initial=0)),
        int(r[~nz_rows].max(initial=0)) * (d_v + 1),
    )
    return IOCount(reads, writes, peak)


# ---- backward ----------------------------------------------------------------------------------


# The signature in two lines, as Chapter 3 shows it: formatting is off for this function.
# fmt: off
def flash_backward(
    Q, K, V, O, dO, lse, *, M: int, scale=None, is_causal=False, enable_gqa=False,
    blocks=None, mask=None, block_mask=None, record=False,
):
    """FlashAttention-2's backward pass (FA2 Alg. 2) on a :class:`TwoLevelMemory` of M words.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v); O, dO : (n, d_v); lse : (n,) from the forward pass;
        or with a head axis first, Q (H, n, d), K (H_kv, m, d), ..., lse (H, n)
    M : fast memory in words; at least :func:`flash_backward_min_M`
    scale, is_causal, enable_gqa, blocks, mask, block_mask : as in :func:`flash_forward`,
        over this pass's blocks (default :func:`flash_backward_blocks`); the element mask is
        read from the argument and not counted, as there
    record : keep the operation log; if True the machine is returned last

    Returns
    -------
    (dQ, dK, dV, IOCount) [, machine], equal to :func:`attnlib.attention_backward` (a shared
    key/value head's dK, dV summed over its group); the count equals its closed form.

    Schedule (for each group): (1) D_i = rowsum(dO_i∘O_i) for each visited query block, in
    sub-blocks of at most ⌊M/2d_v⌋ rows; (2) for each key block j, load K_j and V_j and
    allocate dK_j and dV_j; for each kept query block i, load Q_i, dO_i, lse_i, D_i and dQ_i
    (allocated as zeros on the first visit), recompute P = exp(τQ_iK_jᵀ − lse_i) in fast
    memory, update dV_j, dQ_i and dK_j, store dQ_i; then store dK_j and dV_j; (3) query
    blocks no kept block touches store dQ_i = 0.

    Raises
    ------
    AttnInputError as :func:`flash_forward` (with :func:`flash_backward_min_M`), and for an
    lse that is not the forward's (it may hold -inf); CapacityError if blocks do not fit.

    Examples
    --------
    >>> import numpy as np
    >>> Q = K = V = dO = np.ones((8, 2))
    >>> O, lse, _ = flash_forward(Q, K, V, M=60)
    >>> *grads, count = flash_backward(Q, K, V, O, dO, lse, M=60)
    >>> count
    IOCount(reads=240, writes=88, total=328, peak_fast=52)
    """
    batched = is_batched(Q)
    Q, K, V, O, dO, lse, g = check_head_backward(Q, K, V, O, dO, lse, enable_gqa)
    (H, n, d), (H_kv, m, d_v) = Q.shape, V.shape
    M, tau, is_causal, mask, B_r, B_c, keep = pass_setup(
        "flash_backward", Q, V, g, M, scale, is_causal, mask, block_mask, blocks
    )
    dtype = float_dtype(Q, K, V, O, dO, lse)
    t = dtype.type(tau)
    slack_terms = []
    for kv in range(H_kv):
        check_run_logits(Q[kv * g : (kv + 1) * g].reshape(-1, d), K[kv], tau, dtype)
        slack_terms.append(_lse_slack_terms(dtype, d, m, tau, max_row_norm(K[kv])))
    inputs = {"Q": pack_heads(Q, g), "K": K.reshape(-1, d), "V": V.reshape(-1, d_v)}
    inputs |= {"O": pack_heads(O, g), "dO": pack_heads(dO, g), "lse": pack_heads(lse, g)}
    outputs = {"D": (H * n,), "dQ": (H * n, d), "dK": (H_kv * m, d), "dV": (H_kv * m, d_v)}
    mem = start_run(M, record, dtype, inputs, outputs)
    r_D = d_pass_rows(B_r, M, d_v)

    for kv, slack_kv in enumerate(slack_terms):  # one group of g query heads: rows g·n, keys m
        base = (kv * g * n, kv * m)
        query_blocks = block_ranges(base[0] + g * n, B_r, start=base[0])
        key_blocks = block_ranges(base[1] + m, B_c, start=base[1])

        # 1. D = rowsum(dO ∘ O), for the query blocks that will be visited.
        for I in kept_blocks(query_blocks, keep.any(axis=1)):
            for Isub in block_ranges(I[1], r_D, start=I[0]):
                o = mem.load("O", Isub)
                do = mem.load("dO", Isub)
                mem.store("D", Isub, None, np.einsum("ij,ij->i", do, o))
                mem.free(o, do)

        # 2. Outer loop over key blocks, inner over query blocks.
        touched = set()  # query blocks whose dQ_i is already in slow memory
        for j, J in enumerate(key_blocks):
            kept = kept_blocks(query_blocks, keep[:, j])
            if not kept:  # an empty key block: its gradients are 0
                store_constant(mem, J, dtype, dK=(d, 0.0), dV=(d_v, 0.0))
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
                drop_masked(p, mask, is_causal, g, I, J, base)
                # P = exp(p − lse) ≤ 1, refusing an lse that is not the forward's for these rows
                slack = _lse_slack_rows(_row_norms(q), ls, slack_kv)
                probabilities(p, ls, slack, g, I, base)
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
        for I in kept_blocks(query_blocks, ~keep.any(axis=1)):
            store_constant(mem, I, dtype, dQ=(d, 0.0))
    dQ, dK, dV, *rest = finish_run(mem, ("dQ", "dK", "dV"), record)
    shape = (H_kv, m, -1)
    return (*as_given(batched, unpack_heads(dQ, g, H), dK.reshape(shape), dV.reshape(shape)), *rest)
# fmt: on


def flash_backward_count(
    n: int, d: int, M: int, *, m=None, d_v=None, H=1, H_kv=None, is_causal=False,
    enable_gqa=False, blocks=None, block_mask=None,
) -> IOCount:  # fmt: skip
    """Exact I/O of :func:`flash_backward` (closed form, no arrays).

    One head, dense, with (B_r, B_c) the blocks and T_c = ⌈m/B_c⌉::

        reads  = 2n·d_v + m·D + T_c·n·(2d + d_v + 2) − n·d
                 (D pass; K, V once; per key block: Q, dO, lse, D, dQ — dQ not on the first)
        writes = n + m·D + T_c·n·d       (D; dK, dV once; dQ once per key block)
        peak   = max(W_b(min(B_r, n), min(B_c, m)), 2·min(r_D, n)·d_v)

    with r_D = max(1, min(B_r, ⌊M/(2d_v)⌋)) the D pass's row block. With our blocks and
    d_v = d, B_c ≈ M/(6d) once M >= W_b(d, d) = 9d² + 2d, so the total is
    ≈ 24·n·m·d²/M + O((n + m)d).

    Causal: key block j is visited by the query rows ρ_j from the one of position j·B_c on,
    when j·B_c < n (:func:`~attnlib.iomodel.blocks.causal_query_rows`, a floor sum); with
    Σρ over those N key blocks and C = min(m, N·B_c) their rows, Σρ replaces T_c·n, C
    replaces m in the K, V reads, and a key block past n (m > n) stores zero gradients.

    Block-sparse (``block_mask`` (T_r, T_c), the run's effective mask; r_i, c_j the block
    sizes; R the non-empty block rows, C the non-empty block columns)::

        reads  = Σ_{i∈R} r_i·2d_v + Σ_{j∈C} c_j·D + Σ_{kept (i,j)} r_i(2d + d_v + 2)
                 − Σ_{i∈R} r_i·d
        writes = Σ_{i∈R} r_i + m·D + Σ_{kept (i,j)} r_i·d + Σ_{i∉R} r_i·d
        peak   = the largest working set of any step that runs

    With equal blocks and z kept blocks this is affine in z: each kept block adds
    B_r(2d + d_v + 2) reads and B_r·d writes.

    Heads: H_kv passes of g·n query rows, as in :func:`flash_forward_count`.

    Raises
    ------
    AttnInputError as :func:`flash_forward_count`, with M below
    :func:`flash_backward_min_M` (default blocks).

    Examples
    --------
    >>> count = flash_backward_count(8, 2, 60)
    >>> count.reads, count.writes, count.peak_fast
    (240, 88, 52)
    """
    n, d, M, m, d_v, B_r, B_c, H_kv, g, is_causal, bm = count_setup(
        n, d, M, m, d_v, H, H_kv, is_causal, enable_gqa, blocks, block_mask, flash_backward_blocks
    )
    rows, D, r_D = g * n, d + d_v, d_pass_rows(B_r, M, d_v)
    if bm is None:
        peak = max(W_b(min(B_r, rows), min(B_c, m), d, d_v), 2 * min(r_D, rows) * d_v)
        if is_causal:  # every query block keeps key block 0
            N, rho = causal_query_rows(n, m, B_r, B_c, g)
            C = min(m, N * B_c)  # the rows of the key blocks with a kept score
            if m > C:  # empty key blocks: dK_j, dV_j allocated and stored as zeros
                peak = max(peak, min(B_c, m - C) * D)
        else:
            rho, C = ceil_div(m, B_c) * rows, m
        reads = rows * (2 * d_v - d) + C * D + rho * (2 * d + d_v + 2)
        return IOCount(H_kv * reads, H_kv * (rows + m * D + rho * d), peak)
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
