"""Compiled tiled attention: FlashAttention-2's forward and backward on the CPU, in numba.

The exact core (:mod:`attnlib.exact`) materialises the n×m score matrix. The kernels here never
do: they walk (B_r × B_c) tiles of it, like the schedules that :mod:`attnlib.iomodel` runs on the
two-level machine, and keep only O((n + m)·d) extra memory.

- **Forward** (FA2 Alg. 1): each query block streams every key/value block once, keeps a running
  row maximum and row sum (the online softmax), and rescales its output accumulator.
- **Backward** (FA2 Alg. 2): P is *recomputed* tile by tile from the stored row log-sum-exp
  instead of being stored, trading about twice the forward's arithmetic for n×m memory.

**Threads, and why the result does not depend on their number.** Query blocks are independent
in the forward pass, so ``prange`` runs them in parallel. In the backward pass FA2 loops over key
blocks, and every key block adds into every row of dQ: running key blocks in parallel is a data
race on dQ (GPUs use atomic adds, whose order is not fixed). We split the key blocks into
:data:`DQ_GROUPS` fixed groups (block j goes to group j mod DQ_GROUPS) and run the groups in
parallel. Each group owns its blocks' dK_j and dV_j and its own float64 copy of dQ, so one pass
does FA2's 5 tile products and 1 exponential per tile; the copies are then added in the fixed
order of the groups. The groups and every sum's order depend only on the shapes, never on the
threads: results are bitwise identical for any number of threads. The price is
DQ_GROUPS·n·d extra float64 words, and at most DQ_GROUPS threads in the backward pass. (With a
single key block there is nothing to share, and the backward runs as two passes: key block, then
query blocks in parallel, each owning its dQ_i.)

**Numerics.** Tile products are BLAS gemm calls (numba's ``np.dot`` with ``out=``) on tiles
small enough that OpenBLAS runs them on the calling thread. The accumulators of the row sums, O,
dQ, dK and dV are float64 even for float32 inputs, so long sums over keys or queries lose less
than a naive float32 computation does. ``exp`` is a short vectorisable routine
(:func:`_exp`) run over a whole tile at once, because the libm call does not vectorise without
fastmath; no fastmath flag is used anywhere.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from numba import prange, types
from numba.extending import overload

from ._checks import (
    AttnInputError,
    check_backward_inputs,
    check_mask,
    check_qkv,
    check_scale,
    float_dtype,
)

__all__ = ["flash_forward", "flash_backward"]

# ---------------------------------------------------------------------------------------
# Block sizes
# ---------------------------------------------------------------------------------------

#: OpenBLAS runs a gemm with m·n·k ≤ 4·65536 on the calling thread (interface/gemm.c,
#: GEMM_MULTITHREAD_THRESHOLD). A larger tile product would start BLAS threads inside our own
#: parallel loop, oversubscribing the cores.
_GEMM_SINGLE_THREAD = 1 << 18

#: Key-block groups of the fused backward pass. Each group keeps its own float64 copy of dQ
#: (DQ_GROUPS·n·d words), and the copies are added in a fixed order, so the result does not
#: depend on the number of threads. It also caps the backward's parallelism at DQ_GROUPS.
DQ_GROUPS = 4


def _block_sizes(d: int, dv: int) -> tuple[int, int]:
    """(B_r, B_c): query rows and key rows per tile, for head dimensions d and d_v.

    A 64 × 64 tile of scores (16 KiB in float32) sits in L1 next to the 64 × d blocks of Q, K
    and V in L2 (48 KiB L1d and 2 MiB L2 per core on the machine we tuned on). B_r shrinks for
    wide heads so that every tile product stays below :data:`_GEMM_SINGLE_THREAD`, and grows for
    narrow ones (fewer, larger gemm calls).
    """
    w = max(d, dv)
    br, bc = 64, 64
    while br * bc * w * 2 <= _GEMM_SINGLE_THREAD and br < 256:
        br *= 2
    while br * bc * w > _GEMM_SINGLE_THREAD and br > 16:
        br //= 2
    while br * bc * w > _GEMM_SINGLE_THREAD and bc > 16:
        bc //= 2
    return br, bc


def _blocked_transpose(X: np.ndarray, bc: int) -> np.ndarray:
    """XT[b] = X[b·bc:(b+1)·bc]ᵀ for every full block b: shape (m // bc, cols, bc), contiguous.

    With it, Q_i K_jᵀ is a plain (NN) gemm, which OpenBLAS runs faster on small tiles than the
    transposed (NT) form. Costs one extra copy of X (O(m·d) memory).
    """
    nfull = X.shape[0] // bc
    blocks = X[: nfull * bc].reshape(nfull, bc, X.shape[1])
    return np.ascontiguousarray(blocks.transpose(0, 2, 1))


# ---------------------------------------------------------------------------------------
# exp without libm
# ---------------------------------------------------------------------------------------

_LOG2E = 1.4426950408889634
# ln 2 split so that k·_LN2_HI is exact for the k that occur (fdlibm's constants)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# adding then subtracting 1.5·2⁵² rounds a double of magnitude < 2⁵¹ to the nearest integer
_ROUND = 6755399441055744.0
# below this, exp(t) < 2⁻¹⁰²¹ ≈ 4e-308 and is returned as exactly 0
_EXP_MIN = -708.0
_EXP_MAX = 708.0

# float32 versions: Cephes' expf (ln 2 split, degree-5 minimax polynomial, ~1 ulp)
_LN2_HI32 = np.float32(0.693359375)
_LN2_LO32 = np.float32(-2.12194440e-4)
_LOG2E32 = np.float32(1.44269504088896341)
_ROUND32 = np.float32(12582912.0)  # 1.5·2²³
_EXP_MIN32 = np.float32(-87.0)  # exp(-87) ≈ 1.6e-38, just above the smallest normal float32
_EXP_MAX32 = np.float32(88.0)
_EXPF_POLY = tuple(
    np.float32(c)
    for c in (
        1.9875691500e-4,
        1.3981999507e-3,
        8.3334519073e-3,
        4.1665795894e-2,
        1.6666665459e-1,
        5.0000001201e-1,
    )
)
_ZERO32 = np.float32(0.0)
_ONE32 = np.float32(1.0)


def _exp(x, out, scratch):
    """out = exp(x) for 1-d arrays of one float dtype, without libm (compiled via the overload).

    ``scratch`` is a buffer like ``out``. Arguments below about -708 (float64) or -87
    (float32), including -inf, give exactly 0. Called on whole tiles: on 64-element rows the
    loop set-up costs as much as the arithmetic.
    """
    raise NotImplementedError("only callable from compiled code")


@overload(_exp, jit_options={"cache": True})
def _exp_impl(x, out, scratch):
    if out.dtype == types.float32:

        def exp32(x, out, scratch):
            # Cody–Waite reduction t = k·ln2 + r, |r| ≤ ln2/2, in float32 (8 lanes per AVX2
            # vector), Cephes' polynomial for e^r, then 2^k from exponent bits
            n = out.shape[0]
            bits = scratch.view(np.int32)
            for c in range(n):
                t = x[c]
                tc = t if t > _EXP_MIN32 else _EXP_MIN32
                tc = tc if tc < _EXP_MAX32 else _EXP_MAX32
                kf = (tc * _LOG2E32 + _ROUND32) - _ROUND32
                r = (tc - kf * _LN2_HI32) - kf * _LN2_LO32
                p = _EXPF_POLY[0]
                p = p * r + _EXPF_POLY[1]
                p = p * r + _EXPF_POLY[2]
                p = p * r + _EXPF_POLY[3]
                p = p * r + _EXPF_POLY[4]
                p = p * r + _EXPF_POLY[5]
                p = (p * r) * r + r + _ONE32
                out[c] = p if t >= _EXP_MIN32 else _ZERO32
                bits[c] = (np.int32(kf) + np.int32(127)) << np.int32(23)
            for c in range(n):
                out[c] *= scratch[c]

        return exp32

    def exp64(x, out, scratch):
        # same reduction in float64; Taylor polynomial of degree 13 for e^r (truncation error
        # < 2e-16 relative on |r| ≤ ln2/2)
        n = out.shape[0]
        bits = scratch.view(np.int64)
        for c in range(n):
            t = x[c]
            tc = t if t > _EXP_MIN else _EXP_MIN
            tc = tc if tc < _EXP_MAX else _EXP_MAX
            kf = (tc * _LOG2E + _ROUND) - _ROUND
            r = (tc - kf * _LN2_HI) - kf * _LN2_LO
            p = 1.0 / 6227020800.0
            p = p * r + 1.0 / 479001600.0
            p = p * r + 1.0 / 39916800.0
            p = p * r + 1.0 / 3628800.0
            p = p * r + 1.0 / 362880.0
            p = p * r + 1.0 / 40320.0
            p = p * r + 1.0 / 5040.0
            p = p * r + 1.0 / 720.0
            p = p * r + 1.0 / 120.0
            p = p * r + 1.0 / 24.0
            p = p * r + 1.0 / 6.0
            p = p * r + 0.5
            p = p * r + 1.0
            p = p * r + 1.0
            out[c] = p if t >= _EXP_MIN else 0.0
            bits[c] = (np.int64(kf) + 1023) << 52
        for c in range(n):
            out[c] *= scratch[c]

    return exp64


# ---------------------------------------------------------------------------------------
# Tile steps (compiled)
# ---------------------------------------------------------------------------------------


@nb.njit(cache=True)
def _cdiv(a, b):
    return (a + b - 1) // b


@nb.njit(cache=True)
def _interleave(t, nblocks):
    """Map loop index t to block 0, last, 1, last-1, ...

    prange hands each thread a contiguous range of t, so each thread gets a mix of early and
    late blocks. Under a causal mask early query blocks are cheap and late ones dear; this keeps
    the threads balanced. Any order of blocks gives the same results.
    """
    if t % 2 == 0:
        return t // 2
    return nblocks - 1 - t // 2


@nb.njit(cache=True)
def _scores(Q, K, KT, i0, i1, j0, j1, bc, S):
    """S = Q[i0:i1] K[j0:j1]ᵀ by one gemm: through the blocked transpose KT for a full key
    block, from K itself for the ragged last one."""
    if j1 - j0 == bc:
        np.dot(Q[i0:i1], KT[j0 // bc], S)
    else:
        np.dot(Q[i0:i1], K[j0:j1].T, S)


@nb.njit(cache=True)
def _logit_row(S, r, i, j0, scale, mask, has_mask, causal, out):
    """out[c] = τ·S[r, c], or -inf where the mask or causality drops key j0 + c.

    Row r of the tile is query row i. Causal keeps key j iff j ≤ i (top-left aligned, like
    ``np.tril`` and PyTorch's ``is_causal``).
    """
    cols = S.shape[1]
    for c in range(cols):
        out[c] = S[r, c] * scale
    if has_mask:
        for c in range(cols):
            if not mask[i, j0 + c]:
                out[c] = -np.inf
    if causal:
        for c in range(max(i - j0 + 1, 0), cols):
            out[c] = -np.inf


_LANES = 16


@nb.njit(cache=True)
def _row_max(x, lanes):
    """max(x) for a 1-d array, -inf if empty or all -inf.

    A plain running maximum is a chain of dependent compares that LLVM does not vectorise
    without fastmath; 16 independent running maxima (combined in a fixed order) do vectorise.
    """
    n = x.shape[0]
    for k in range(_LANES):
        lanes[k] = -np.inf
    c0 = 0
    while c0 + _LANES <= n:
        for k in range(_LANES):
            v = x[c0 + k]
            lanes[k] = v if v > lanes[k] else lanes[k]
        c0 += _LANES
    best = -np.inf
    for k in range(_LANES):
        if lanes[k] > best:
            best = lanes[k]
    for c in range(c0, n):
        if x[c] > best:
            best = x[c]
    return best


@nb.njit(cache=True)
def _probabilities(S, i0, j0, lse, scale, mask, has_mask, causal, xbuf, scratch, P):
    """P = exp(τ·S - lse) for one tile (FA2 Alg. 2, line 11). Masked entries and fully masked
    rows (lse = -inf) give 0. ``xbuf`` and ``scratch`` are flat buffers of the tile's size."""
    rows, cols = S.shape
    X = xbuf.reshape((rows, cols))
    for r in range(rows):
        lr = lse[i0 + r]
        if lr == -np.inf:
            for c in range(cols):
                X[r, c] = -np.inf
            continue
        _logit_row(S, r, i0 + r, j0, scale, mask, has_mask, causal, X[r])
        for c in range(cols):
            X[r, c] -= lr
    _exp(xbuf, P.reshape(rows * cols), scratch)


@nb.njit(cache=True)
def _grad_scores(P, dP, D, i0):
    """dS = P ∘ (dP - D), in place of dP (FA2 Alg. 2, line 14); the difference in float64."""
    rows, cols = P.shape
    for r in range(rows):
        Dr = D[i0 + r]
        for c in range(cols):
            dP[r, c] = P[r, c] * (np.float64(dP[r, c]) - Dr)


@nb.njit(cache=True)
def _accumulate(acc, tile):
    """acc += tile (acc float64, tile in the inputs' dtype)."""
    rows, cols = acc.shape
    for r in range(rows):
        for c in range(cols):
            acc[r, c] += tile[r, c]


# ---------------------------------------------------------------------------------------
# One block of each pass (compiled)
# ---------------------------------------------------------------------------------------


@nb.njit(cache=True)
def _forward_block(Q, K, KT, V, scale, mask, has_mask, causal, br, bc, qb, O, lse):
    """FA2 Alg. 1 for query block qb: stream the key/value blocks once, write O_i and lse_i."""
    n = Q.shape[0]
    m = K.shape[0]
    dv = V.shape[1]
    i0 = qb * br
    i1 = min(i0 + br, n)
    rows = i1 - i0
    sbuf = np.empty(br * bc, Q.dtype)
    pbuf = np.empty(br * bc, Q.dtype)
    obuf = np.empty(br * dv, Q.dtype)
    xbuf = np.empty(br * bc, Q.dtype)
    scratch = np.empty(br * bc, Q.dtype)
    shift = np.empty(1, Q.dtype)
    lanes = np.empty(_LANES, Q.dtype)
    ones = np.ones(bc, Q.dtype)
    tile_sum = np.empty(br, Q.dtype)
    alpha = np.empty(rows)
    acc = np.zeros((rows, dv))
    run_max = np.full(rows, -np.inf)
    run_sum = np.zeros(rows)
    # under causality, key blocks past the block's last row are all masked: skip them
    kend = min(m, _cdiv(i1, bc) * bc) if causal else m
    for j0 in range(0, kend, bc):
        j1 = min(j0 + bc, m)
        cols = j1 - j0
        S = sbuf[: rows * cols].reshape((rows, cols))
        _scores(Q, K, KT, i0, i1, j0, j1, bc, S)
        X = xbuf[: rows * cols].reshape((rows, cols))
        for r in range(rows):
            _logit_row(S, r, i0 + r, j0, scale, mask, has_mask, causal, X[r])
            tile_max = _row_max(X[r], lanes)
            old = run_max[r]
            new = max(old, tile_max)
            if new == -np.inf:  # every key so far is masked for this row: P row = exp(-inf) = 0
                alpha[r] = 1.0
                continue
            shift[0] = new  # the row maximum, in the tile's dtype (it is one of the logits)
            for c in range(cols):
                X[r, c] -= shift[0]
            # online softmax (FA2 Alg. 1, lines 9–10): rescale what came before
            alpha[r] = math.exp(old - new)
            run_max[r] = new
        P = pbuf[: rows * cols].reshape((rows, cols))
        _exp(xbuf[: rows * cols], pbuf[: rows * cols], scratch[: rows * cols])
        np.dot(P, ones[:cols], tile_sum[:rows])  # row sums of P by one gemv
        for r in range(rows):
            run_sum[r] = run_sum[r] * alpha[r] + tile_sum[r]
            if alpha[r] != 1.0:
                for k in range(dv):
                    acc[r, k] *= alpha[r]
        PV = obuf[: rows * dv].reshape((rows, dv))
        np.dot(P, V[j0:j1], PV)
        _accumulate(acc, PV)
    for r in range(rows):
        if run_max[r] == -np.inf:  # fully masked row: O = 0, lse = -inf
            for k in range(dv):
                O[i0 + r, k] = 0.0
            lse[i0 + r] = -np.inf
        else:
            for k in range(dv):
                O[i0 + r, k] = acc[r, k] / run_sum[r]
            lse[i0 + r] = run_max[r] + math.log(run_sum[r])


@nb.njit(cache=True)
def _backward_key_block(
    Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, kb, dK, dV, dq, with_dq
):
    """FA2 Alg. 2 for key block kb: owns dK_j and dV_j and streams the query blocks once.

    With ``with_dq`` it also adds dS_ij K_j into ``dq`` (unscaled, float64): the fused pass,
    where ``dq`` is the calling group's own copy of dQ. Without it, dQ is left to pass 2.
    """
    n, d = Q.shape
    m = K.shape[0]
    dv = V.shape[1]
    j0 = kb * bc
    j1 = min(j0 + bc, m)
    cols = j1 - j0
    sbuf = np.empty(br * bc, Q.dtype)
    pbuf = np.empty(br * bc, Q.dtype)
    gbuf = np.empty(br * bc, Q.dtype)
    kvbuf = np.empty(bc * max(d, dv), Q.dtype)
    qbuf = np.empty(br * d, Q.dtype)
    xbuf = np.empty(br * bc, Q.dtype)
    scratch = np.empty(br * bc, Q.dtype)
    dk_acc = np.zeros((cols, d))
    dv_acc = np.zeros((cols, dv))
    # under causality, rows i < j0 see none of these keys
    first = (j0 // br) * br if causal else 0
    for i0 in range(first, n, br):
        i1 = min(i0 + br, n)
        rows = i1 - i0
        tile = rows * cols
        S = sbuf[:tile].reshape((rows, cols))
        _scores(Q, K, KT, i0, i1, j0, j1, bc, S)
        P = pbuf[:tile].reshape((rows, cols))
        _probabilities(
            S, i0, j0, lse, scale, mask, has_mask, causal, xbuf[:tile], scratch[:tile], P
        )
        tv = kvbuf[: cols * dv].reshape((cols, dv))
        np.dot(P.T, dO[i0:i1], tv)  # dV_j += P_ijᵀ dO_i
        _accumulate(dv_acc, tv)
        G = gbuf[:tile].reshape((rows, cols))
        _scores(dO, V, VT, i0, i1, j0, j1, bc, G)  # dP_ij = dO_i V_jᵀ
        _grad_scores(P, G, D, i0)  # G becomes dS_ij
        tk = kvbuf[: cols * d].reshape((cols, d))
        np.dot(G.T, Q[i0:i1], tk)  # dK_j += dS_ijᵀ Q_i
        _accumulate(dk_acc, tk)
        if with_dq:
            tq = qbuf[: rows * d].reshape((rows, d))
            np.dot(G, K[j0:j1], tq)  # dQ_i += dS_ij K_j, into the group's own copy
            _accumulate(dq[i0:i1], tq)
    for c in range(cols):
        for k in range(d):
            dK[j0 + c, k] = dk_acc[c, k] * scale
        for k in range(dv):
            dV[j0 + c, k] = dv_acc[c, k]


@nb.njit(cache=True)
def _backward_fused_group(
    Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, g, groups, dK, dV, dQg
):
    """Group g of the fused backward: key blocks g, g + groups, ... in increasing order, each
    adding its dQ contributions into the group's own buffer ``dQg[g]``. Five tile products and
    one exp per tile, against seven and two for the two-pass schedule."""
    for kb in range(g, _cdiv(K.shape[0], bc), groups):
        _backward_key_block(
            Q,
            K,
            KT,
            V,
            VT,
            dO,
            lse,
            D,
            scale,
            mask,
            has_mask,
            causal,
            br,
            bc,
            kb,
            dK,
            dV,
            dQg[g],
            True,
        )


@nb.njit(parallel=True, cache=True)
def _run_fused(Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, dK, dV, dQg):
    """The fused backward: key-block groups in parallel, then dQ = τ·Σ_g dQg[g] in order g."""
    groups = dQg.shape[0]
    for g in prange(groups):
        _backward_fused_group(
            Q,
            K,
            KT,
            V,
            VT,
            dO,
            lse,
            D,
            scale,
            mask,
            has_mask,
            causal,
            br,
            bc,
            g,
            groups,
            dK,
            dV,
            dQg,
        )


@nb.njit(parallel=True, cache=True)
def _sum_groups(dQg, scale, dQ):
    """dQ = τ·Σ_g dQg[g], summed in the fixed order g = 0, 1, ... for every entry."""
    groups, n, d = dQg.shape
    for i in prange(n):
        for k in range(d):
            s = 0.0
            for g in range(groups):
                s += dQg[g, i, k]
            dQ[i, k] = s * scale


@nb.njit(cache=True)
def _backward_dq_block(Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, qb, dQ):
    """Pass 2 for query block qb: owns dQ_i and recomputes S, P and dP tile by tile."""
    n, d = Q.shape
    m = K.shape[0]
    i0 = qb * br
    i1 = min(i0 + br, n)
    rows = i1 - i0
    sbuf = np.empty(br * bc, Q.dtype)
    pbuf = np.empty(br * bc, Q.dtype)
    gbuf = np.empty(br * bc, Q.dtype)
    qbuf = np.empty(br * d, Q.dtype)
    xbuf = np.empty(br * bc, Q.dtype)
    scratch = np.empty(br * bc, Q.dtype)
    dq_acc = np.zeros((rows, d))
    kend = min(m, _cdiv(i1, bc) * bc) if causal else m
    for j0 in range(0, kend, bc):
        j1 = min(j0 + bc, m)
        cols = j1 - j0
        S = sbuf[: rows * cols].reshape((rows, cols))
        _scores(Q, K, KT, i0, i1, j0, j1, bc, S)
        P = pbuf[: rows * cols].reshape((rows, cols))
        tile = rows * cols
        _probabilities(
            S, i0, j0, lse, scale, mask, has_mask, causal, xbuf[:tile], scratch[:tile], P
        )
        G = gbuf[: rows * cols].reshape((rows, cols))
        _scores(dO, V, VT, i0, i1, j0, j1, bc, G)
        _grad_scores(P, G, D, i0)
        tq = qbuf[: rows * d].reshape((rows, d))
        np.dot(G, K[j0:j1], tq)  # dQ_i += dS_ij K_j
        _accumulate(dq_acc, tq)
    for r in range(rows):
        for k in range(d):
            dQ[i0 + r, k] = dq_acc[r, k] * scale


# ---------------------------------------------------------------------------------------
# The parallel entry points (compiled)
# ---------------------------------------------------------------------------------------

_FORWARD, _BACKWARD_DKDV, _BACKWARD_DQ = 0, 1, 2


@nb.njit(parallel=True, cache=True)
def _run_blocks(task, Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, A, B):
    """Run one pass with its independent blocks in parallel.

    - ``_FORWARD``: query blocks; writes O into A, and lse.
    - ``_BACKWARD_DKDV``: key blocks; writes dK into A and dV into B.
    - ``_BACKWARD_DQ``: query blocks; writes dQ into A.

    Every block writes only its own rows of the outputs, so the blocks never race.
    """
    if task == _BACKWARD_DKDV:
        nblocks = _cdiv(K.shape[0], bc)
    else:
        nblocks = _cdiv(Q.shape[0], br)
    no_dq = np.zeros((1, 1))  # pass 1 of the two-pass schedule leaves dQ to pass 2
    for t in prange(nblocks):
        blk = _interleave(t, nblocks)
        if task == _FORWARD:
            _forward_block(Q, K, KT, V, scale, mask, has_mask, causal, br, bc, blk, A, lse)
        elif task == _BACKWARD_DKDV:
            _backward_key_block(
                Q,
                K,
                KT,
                V,
                VT,
                dO,
                lse,
                D,
                scale,
                mask,
                has_mask,
                causal,
                br,
                bc,
                blk,
                A,
                B,
                no_dq,
                False,
            )
        else:
            _backward_dq_block(
                Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, blk, A
            )


@nb.njit(parallel=True, cache=True)
def _rowdot(dO, O, D):
    """D_i = Σ_k dO_ik·O_ik in float64 (FA2 Alg. 2, line 4)."""
    n, dv = O.shape
    for i in prange(n):
        s = 0.0
        for k in range(dv):
            s += np.float64(dO[i, k]) * np.float64(O[i, k])
        D[i] = s


# ---------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------

_NO_MASK = np.ones((1, 1), dtype=np.bool_)
_NO_D = np.zeros(1)


def _mask_args(mask, n, m, causal):
    """The validated mask (or a dummy), whether there is one, and ``causal`` as a bool."""
    mask = check_mask(mask, n, m)
    if not isinstance(causal, (bool, np.bool_)):
        raise AttnInputError(f"causal must be True or False, got {causal!r}")
    if mask is None:
        return _NO_MASK, False, bool(causal)
    return np.ascontiguousarray(mask), True, bool(causal)


def flash_forward(Q, K, V, *, scale=None, mask=None, causal=False):
    """Softmax attention by FlashAttention-2's tiled forward pass, in O((n + m)·d) extra memory.

    Same contract as :func:`attnlib.attention_forward` (FA2 Alg. 1, run on a CPU).

    Parameters
    ----------
    Q : (n, d) float32 or float64
    K : (m, d)
    V : (m, d_v)
    scale : τ > 0, default 1/√d
    mask : optional boolean (n, m); True keeps a score
    causal : if True, query i attends to keys j ≤ i only (combined with ``mask`` by "and")

    Returns
    -------
    O : (n, d_v) and lse : (n,), in the inputs' common dtype. A fully masked row gives O = 0
    and lse = -inf. The first call compiles the kernels (10 to 20 s per dtype on a 2-core
    machine); numba caches them on disk, and later processes load them in under a second.
    """
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m, dv = V.shape
    tau = check_scale(scale, d)
    mask_arr, has_mask, causal = _mask_args(mask, n, m, causal)
    dtype = float_dtype(Q, K, V)
    Q, K, V = (np.ascontiguousarray(x, dtype=dtype) for x in (Q, K, V))
    br, bc = _block_sizes(d, dv)
    KT = _blocked_transpose(K, bc)
    O = np.empty((n, dv), dtype=dtype)
    lse = np.empty(n, dtype=dtype)
    # dO, VT and D are not used by the forward pass: pass placeholders of the right types
    _run_blocks(
        _FORWARD, Q, K, KT, V, KT, O, lse, _NO_D, tau, mask_arr, has_mask, causal, br, bc, O, O
    )
    return O, lse


def flash_backward(Q, K, V, O, dO, lse, *, scale=None, mask=None, causal=False):
    """Gradients through softmax attention by FlashAttention-2's tiled backward pass.

    Same contract as :func:`attnlib.attention_backward` (FA2 Alg. 2), with P recomputed tile by
    tile from ``lse``, in O((n + m)·d) extra memory. Key blocks run in :data:`DQ_GROUPS` fixed
    groups, each with its own float64 copy of dQ, added in a fixed order: no data races, and
    results bitwise independent of the number of threads.

    Parameters
    ----------
    Q, K, V : (n, d), (m, d), (m, d_v)
    O, lse : the outputs of :func:`flash_forward` (or :func:`attnlib.attention_forward`)
    dO : (n, d_v)
    scale, mask, causal : as in :func:`flash_forward`

    Returns
    -------
    dQ, dK, dV : (n, d), (m, d), (m, d_v). Fully masked rows contribute nothing.
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    n, d = Q.shape
    m, dv = V.shape
    tau = check_scale(scale, d)
    mask_arr, has_mask, causal = _mask_args(mask, n, m, causal)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    Q, K, V, O, dO, lse = (np.ascontiguousarray(x, dtype=dtype) for x in (Q, K, V, O, dO, lse))
    br, bc = _block_sizes(d, dv)
    KT = _blocked_transpose(K, bc)
    VT = _blocked_transpose(V, bc)
    D = np.empty(n)
    _rowdot(dO, O, D)
    dQ = np.empty((n, d), dtype=dtype)
    dK = np.empty((m, d), dtype=dtype)
    dV = np.empty((m, dv), dtype=dtype)
    args = (Q, K, KT, V, VT, dO, lse, D, tau, mask_arr, has_mask, causal, br, bc)
    groups = min(DQ_GROUPS, _cdiv(m, bc))
    if groups > 1:
        dQg = np.zeros((groups, n, d))
        _run_fused(*args, dK, dV, dQg)
        _sum_groups(dQg, tau, dQ)
    else:
        _run_blocks(_BACKWARD_DKDV, *args, dK, dV)
        _run_blocks(_BACKWARD_DQ, *args, dQ, dQ)
    return dQ, dK, dV
