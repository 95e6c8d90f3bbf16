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
parallel. Each group owns its blocks' dK_j and dV_j and its own copy of dQ (group 0 writes into
dQ itself), so one pass does FA2's 5 tile products and 1 exponential per tile; the copies are
then added in the fixed order of the groups. The groups and every sum's order depend only on the
shapes, never on the threads: results are bitwise identical for any number of threads. The
price is (DQ_GROUPS - 1)·n·d extra words, and at most DQ_GROUPS threads in the backward pass.
(With a single key block there is nothing to share, and the backward runs as two passes: key
block, then query blocks in parallel, each owning its dQ_i.)

**Numerics.** Every tile product is one BLAS gemm (:func:`_gemm`, SciPy's BLAS called directly)
on tiles small enough that OpenBLAS runs it on the calling thread. Its alpha applies the scale τ
to the logits, and its beta = 1 adds P_ijᵀdO_i, dS_ijᵀQ_i, dS_ijK_j and P_ijV_j straight into
their accumulators, in the inputs' dtype, as a naive computation's long gemm would; the row sums,
D = rowsum(dO∘O), dP - D and the final sum of the dQ copies are float64. ``exp`` is a short
vectorisable routine (:func:`_exp`) run over a whole tile at once, because the libm call does
not vectorise without fastmath; no fastmath flag is used anywhere. Logits that overflow the
dtype are refused before any kernel runs (:func:`check_logits_finite`).

**Arithmetic.** :func:`flop_count` gives the flops of the matrix products of each path, the
exact core's and these kernels'.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic, overload

from ._checks import (
    AttnInputError,
    check_backward_inputs,
    check_int,
    check_loss_inputs,
    check_mask,
    check_qkv,
    check_scale,
    float_dtype,
)
from .config import DQ_GROUPS
from .logits import max_row_norm

__all__ = ["flash_forward", "flash_backward", "flash_attention_loss_grad", "flop_count"]

# ---------------------------------------------------------------------------------------
# Block sizes
# ---------------------------------------------------------------------------------------

#: OpenBLAS runs a gemm with m·n·k ≤ 4·65536 on the calling thread (interface/gemm.c,
#: GEMM_MULTITHREAD_THRESHOLD). A larger tile product would start BLAS threads inside our own
#: parallel loop, oversubscribing the cores.
_GEMM_SINGLE_THREAD = 1 << 18


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
# Tile products: BLAS gemm with alpha and beta (compiled)
# ---------------------------------------------------------------------------------------

# SciPy's BLAS, the library numba's own np.dot calls: Fortran ?gemm, every argument by pointer.
# The compiled code calls it by symbol name, so numba can cache it on disk; the name is bound
# to this process's address at import.
for _name in ("sgemm", "dgemm"):
    llvm_binding.add_symbol(
        f"attnlib_{_name}", get_cython_function_address("scipy.linalg.cython_blas", _name)
    )


def _gemm_intrinsic(symbol):
    @intrinsic
    def call(typingctx, p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12):
        """symbol(p0, ..., p12) for 13 addresses (integers), as Fortran's ?gemm takes them."""
        sig = types.void(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12)

        def codegen(context, builder, signature, args):
            ptr = llvm_ir.IntType(8).as_pointer()
            fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [ptr] * 13)
            fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
            builder.call(fn, [builder.inttoptr(a, ptr) for a in args])
            return context.get_dummy_value()

        return sig, codegen

    return call


_sgemm = _gemm_intrinsic("attnlib_sgemm")
_dgemm = _gemm_intrinsic("attnlib_dgemm")
_N, _T = 78, 84  # 'N' and 'T' in an int32, whose first byte Fortran reads (little-endian)


@nb.njit(cache=True)
def _gemm(a, ta, b, tb, c, alpha, beta, ints, flts):
    """c = alpha·op(a)·op(b) + beta·c by one BLAS gemm, where op(x) = xᵀ if its flag is set.

    a, b and c are row-major 2-d arrays with unit column stride (each may be a block of rows
    of a larger array). ``ints`` (int32, 8) and ``flts`` (c's dtype, 2) carry the arguments
    that Fortran takes by pointer. numba's ``np.dot`` only computes c = a·b; with beta = 1 a
    tile product adds straight into its accumulator, and alpha applies the scale τ for free.
    """
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    size = c.itemsize
    # row-major c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ: swap the operands
    ints[0] = _T if tb else _N
    ints[1] = _T if ta else _N
    ints[2] = n
    ints[3] = m
    ints[4] = k
    ints[5] = b.strides[0] // size
    ints[6] = a.strides[0] // size
    ints[7] = c.strides[0] // size
    flts[0] = alpha
    flts[1] = beta
    i = ints.ctypes.data
    f = flts.ctypes.data
    if size == 4:
        _sgemm(
            i,
            i + 4,
            i + 8,
            i + 12,
            i + 16,
            f,
            b.ctypes.data,
            i + 20,
            a.ctypes.data,
            i + 24,
            f + size,
            c.ctypes.data,
            i + 28,
        )
    else:
        _dgemm(
            i,
            i + 4,
            i + 8,
            i + 12,
            i + 16,
            f,
            b.ctypes.data,
            i + 20,
            a.ctypes.data,
            i + 24,
            f + size,
            c.ctypes.data,
            i + 28,
        )


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
def _logits(Q, K, KT, i0, i1, j0, j1, bc, scale, mask, has_mask, causal, S, ints, flts):
    """S = τ·Q[i0:i1] K[j0:j1]ᵀ by one gemm (τ as its alpha), then -inf where the mask or
    causality drops a key. A full key block multiplies its blocked transpose KT (a plain NN
    gemm), the ragged last one K itself. Causal keeps key j iff j ≤ i (top-left aligned, like
    ``np.tril`` and PyTorch's ``is_causal``)."""
    if j1 - j0 == bc:
        _gemm(Q[i0:i1], False, KT[j0 // bc], False, S, scale, 0.0, ints, flts)
    else:
        _gemm(Q[i0:i1], False, K[j0:j1], True, S, scale, 0.0, ints, flts)
    rows, cols = S.shape
    if has_mask:
        for r in range(rows):
            for c in range(cols):
                if not mask[i0 + r, j0 + c]:
                    S[r, c] = -np.inf
    if causal:
        for r in range(rows):
            for c in range(max(i0 + r - j0 + 1, 0), cols):
                S[r, c] = -np.inf


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
def _probabilities(S, i0, lse, scratch, P):
    """P = exp(S - lse) for one tile of logits S, overwritten on the way (FA2 Alg. 2, line 11).
    Masked logits (-inf) and fully masked rows (lse = -inf) give 0. ``scratch`` is a flat
    buffer of the tile's size."""
    rows, cols = S.shape
    for r in range(rows):
        lr = lse[i0 + r]
        if lr == -np.inf:
            for c in range(cols):
                S[r, c] = -np.inf
        else:
            for c in range(cols):
                S[r, c] -= lr
    _exp(S.reshape(rows * cols), P.reshape(rows * cols), scratch)


@nb.njit(cache=True)
def _grad_scores(P, dP, D, i0):
    """dS = P ∘ (dP - D), in place of dP (FA2 Alg. 2, line 14); the difference in float64."""
    rows, cols = P.shape
    for r in range(rows):
        Dr = D[i0 + r]
        for c in range(cols):
            dP[r, c] = P[r, c] * (np.float64(dP[r, c]) - Dr)


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
    scratch = np.empty(br * bc, Q.dtype)
    ints = np.empty(8, np.int32)
    flts = np.empty(2, Q.dtype)
    shift = np.empty(1, Q.dtype)
    lanes = np.empty(_LANES, Q.dtype)
    ones = np.ones(bc, Q.dtype)
    tile_sum = np.empty(br, Q.dtype)
    alpha = np.empty(rows)
    acc = np.zeros((rows, dv), Q.dtype)  # Σ_j exp(S_ij - running max) V_j, added by gemm
    run_max = np.full(rows, -np.inf)
    run_sum = np.zeros(rows)
    # under causality, key blocks past the block's last row are all masked: skip them
    kend = min(m, _cdiv(i1, bc) * bc) if causal else m
    for j0 in range(0, kend, bc):
        j1 = min(j0 + bc, m)
        cols = j1 - j0
        S = sbuf[: rows * cols].reshape((rows, cols))
        _logits(Q, K, KT, i0, i1, j0, j1, bc, scale, mask, has_mask, causal, S, ints, flts)
        for r in range(rows):
            old = run_max[r]
            new = max(old, _row_max(S[r], lanes))
            # the row maximum, in the tile's dtype (it is one of the logits); a row with every
            # key so far masked keeps its -inf logits, whose exp is 0
            shift[0] = new if new > -np.inf else 0.0
            for c in range(cols):
                S[r, c] -= shift[0]
            # online softmax (FA2 Alg. 1, lines 9–10): rescale what came before
            alpha[r] = math.exp(old - new) if new > -np.inf else 1.0
            run_max[r] = new
        P = pbuf[: rows * cols].reshape((rows, cols))
        _exp(sbuf[: rows * cols], pbuf[: rows * cols], scratch[: rows * cols])
        np.dot(P, ones[:cols], tile_sum[:rows])  # row sums of P by one gemv
        for r in range(rows):
            run_sum[r] = run_sum[r] * alpha[r] + tile_sum[r]
            if alpha[r] != 1.0:
                for k in range(dv):
                    acc[r, k] *= alpha[r]
        _gemm(P, False, V[j0:j1], False, acc, 1.0, 1.0, ints, flts)  # acc += P_ij V_j
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

    dK_j and dV_j accumulate in place in the (zeroed) outputs. With ``with_dq`` it also adds
    dS_ij K_j into ``dq`` (unscaled): the fused pass, where ``dq`` is the calling group's own
    zeroed copy of dQ. Without it, dQ is left to pass 2.
    """
    n = Q.shape[0]
    m = K.shape[0]
    j0 = kb * bc
    j1 = min(j0 + bc, m)
    cols = j1 - j0
    sbuf = np.empty(br * bc, Q.dtype)
    pbuf = np.empty(br * bc, Q.dtype)
    gbuf = np.empty(br * bc, Q.dtype)
    scratch = np.empty(br * bc, Q.dtype)
    ints = np.empty(8, np.int32)
    flts = np.empty(2, Q.dtype)
    dKj = dK[j0:j1]
    dVj = dV[j0:j1]
    # under causality, rows i < j0 see none of these keys
    first = (j0 // br) * br if causal else 0
    for i0 in range(first, n, br):
        i1 = min(i0 + br, n)
        rows = i1 - i0
        tile = rows * cols
        S = sbuf[:tile].reshape((rows, cols))
        _logits(Q, K, KT, i0, i1, j0, j1, bc, scale, mask, has_mask, causal, S, ints, flts)
        P = pbuf[:tile].reshape((rows, cols))
        _probabilities(S, i0, lse, scratch[:tile], P)
        _gemm(P, True, dO[i0:i1], False, dVj, 1.0, 1.0, ints, flts)  # dV_j += P_ijᵀ dO_i
        G = gbuf[:tile].reshape((rows, cols))
        if cols == bc:  # dP_ij = dO_i V_jᵀ
            _gemm(dO[i0:i1], False, VT[kb], False, G, 1.0, 0.0, ints, flts)
        else:
            _gemm(dO[i0:i1], False, V[j0:j1], True, G, 1.0, 0.0, ints, flts)
        _grad_scores(P, G, D, i0)  # G becomes dS_ij
        _gemm(G, True, Q[i0:i1], False, dKj, scale, 1.0, ints, flts)  # dK_j += τ dS_ijᵀ Q_i
        if with_dq:  # dQ_i += dS_ij K_j, into the group's own copy
            _gemm(G, False, K[j0:j1], False, dq[i0:i1], 1.0, 1.0, ints, flts)


@nb.njit(cache=True)
def _backward_fused_group(
    Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, g, groups, dK, dV, dq
):
    """Group g of the fused backward: key blocks g, g + groups, ... in increasing order, each
    adding its dQ contributions into the group's own buffer ``dq``. Five tile products and
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
            dq,
            True,
        )


@nb.njit(parallel=True, cache=True)
def _run_fused(Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, dK, dV, dQ, dQg):
    """The fused backward: key-block groups in parallel. Group 0 adds into dQ itself, group
    g ≥ 1 into dQg[g - 1]; :func:`_sum_groups` then adds them up."""
    groups = dQg.shape[0] + 1
    for g in prange(groups):
        dq = dQ if g == 0 else dQg[g - 1]
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
            dq,
        )


@nb.njit(parallel=True, cache=True)
def _sum_groups(dQg, scale, dQ):
    """dQ ← τ·(dQ + Σ_g dQg[g]), summed in float64 in the fixed order of g for every entry."""
    groups, n, d = dQg.shape
    for i in prange(n):
        for k in range(d):
            s = np.float64(dQ[i, k])
            for g in range(groups):
                s += dQg[g, i, k]
            dQ[i, k] = s * scale


@nb.njit(cache=True)
def _backward_dq_block(Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, qb, dQ):
    """Pass 2 for query block qb: owns dQ_i (zeroed) and recomputes S, P and dP tile by tile."""
    n = Q.shape[0]
    m = K.shape[0]
    i0 = qb * br
    i1 = min(i0 + br, n)
    rows = i1 - i0
    sbuf = np.empty(br * bc, Q.dtype)
    pbuf = np.empty(br * bc, Q.dtype)
    gbuf = np.empty(br * bc, Q.dtype)
    scratch = np.empty(br * bc, Q.dtype)
    ints = np.empty(8, np.int32)
    flts = np.empty(2, Q.dtype)
    kend = min(m, _cdiv(i1, bc) * bc) if causal else m
    for j0 in range(0, kend, bc):
        j1 = min(j0 + bc, m)
        cols = j1 - j0
        tile = rows * cols
        S = sbuf[:tile].reshape((rows, cols))
        _logits(Q, K, KT, i0, i1, j0, j1, bc, scale, mask, has_mask, causal, S, ints, flts)
        P = pbuf[:tile].reshape((rows, cols))
        _probabilities(S, i0, lse, scratch[:tile], P)
        G = gbuf[:tile].reshape((rows, cols))
        if cols == bc:
            _gemm(dO[i0:i1], False, VT[j0 // bc], False, G, 1.0, 0.0, ints, flts)
        else:
            _gemm(dO[i0:i1], False, V[j0:j1], True, G, 1.0, 0.0, ints, flts)
        _grad_scores(P, G, D, i0)
        _gemm(G, False, K[j0:j1], False, dQ[i0:i1], scale, 1.0, ints, flts)  # dQ_i += τ dS K_j


# ---------------------------------------------------------------------------------------
# The parallel entry points (compiled)
# ---------------------------------------------------------------------------------------


@nb.njit(parallel=True, cache=True)
def _run_forward(Q, K, KT, V, scale, mask, has_mask, causal, br, bc, O, lse):
    """The forward pass: query blocks in parallel, each writing its own rows of O and lse."""
    nblocks = _cdiv(Q.shape[0], br)
    for t in prange(nblocks):
        qb = _interleave(t, nblocks)
        _forward_block(Q, K, KT, V, scale, mask, has_mask, causal, br, bc, qb, O, lse)


@nb.njit(parallel=True, cache=True)
def _run_two_pass(Q, K, KT, V, VT, dO, lse, D, scale, mask, has_mask, causal, br, bc, dK, dV, dQ):
    """The two-pass backward (for a single key block): the key blocks in parallel for dK and
    dV, then the query blocks in parallel, each owning its dQ_i. No block races another."""
    kblocks = _cdiv(K.shape[0], bc)
    no_dq = np.zeros((1, 1), Q.dtype)  # pass 1 leaves dQ to pass 2
    for t in prange(kblocks):
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
            _interleave(t, kblocks),
            dK,
            dV,
            no_dq,
            False,
        )
    qblocks = _cdiv(Q.shape[0], br)
    for t in prange(qblocks):
        _backward_dq_block(
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
            _interleave(t, qblocks),
            dQ,
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


#: Every compiled entry point; each has one signature per dtype (see :func:`_frozen`).
KERNELS = (_run_forward, _run_fused, _sum_groups, _run_two_pass, _rowdot)


# ---------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------


def _frozen(x: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous view of x (a copy only if x is not C-contiguous).

    numba compiles one machine-code version per combination of argument types, and an array's
    type includes its layout and whether it is writeable. Handing every kernel read-only
    C-contiguous inputs, whatever the caller passed (read-only, Fortran order, negative
    strides), keeps it at one compiled version per dtype. Only the view is frozen: the
    caller's array keeps its flags.
    """
    view = np.ascontiguousarray(x).view()
    view.flags.writeable = False
    return view


_NO_MASK = _frozen(np.ones((1, 1), dtype=np.bool_))


def _mask_args(mask, n, m, causal):
    """The validated mask (or a dummy), whether there is one, and ``causal`` as a bool."""
    mask = check_mask(mask, n, m)
    if not isinstance(causal, (bool, np.bool_)):
        raise AttnInputError(f"causal must be True or False, got {causal!r}")
    if mask is None:
        return _NO_MASK, False, bool(causal)
    return _frozen(mask), True, bool(causal)


def check_logits_finite(Q: np.ndarray, K: np.ndarray, scale: float) -> None:
    """Raise if some logit τ·q_i·k_j, or the product q_i·k_j itself, is not finite in Q's dtype.

    Cauchy–Schwarz bounds every such product by ‖q_i‖·‖k_j‖, and rounding over d terms adds
    at most a factor 1 + (d + 2)·ε; when that bound fits the dtype, which is the usual case,
    this costs O((n + m)·d). Only otherwise are the logits computed, a block of rows at a
    time, as the kernels compute them.

    Raises
    ------
    AttnInputError
        if a logit overflows the dtype (the kernels would divide by an infinite row sum).
    """
    dtype = Q.dtype
    big = float(np.finfo(dtype).max)
    d = Q.shape[1]
    bound = max_row_norm(Q) * max_row_norm(K) * (1 + (d + 2) * 2.3e-16)
    if dtype == np.float32:
        bound *= 1 + (d + 2) * float(np.finfo(np.float32).eps)
    if bound <= big and scale * bound <= big:
        return
    rows = max(1, (1 << 22) // K.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for i0 in range(0, Q.shape[0], rows):
            S = Q[i0 : i0 + rows] @ K.T
            if not (np.isfinite(S).all() and (np.abs(S, dtype=np.float64) * scale <= big).all()):
                raise AttnInputError(
                    f"the logits scale * Q @ K.T overflow {dtype}: Q, K or scale is too large"
                )


def flop_count(n: int, m: int, d: int, dv: int | None = None, *, path: str = "tiled") -> dict:
    """Floating-point operations of the matrix products of one forward and one backward pass.

    A multiply-add is 2 flops; elementwise work (exp, scaling, masking, dS = P∘(dP - D)) is not
    counted, and masks are ignored (no tile is skipped). For d_v = d, each n×m product costs
    2nmd flops:

    - ``"exact"`` (:func:`attnlib.attention_forward` / :func:`attnlib.attention_backward`):
      forward S and PV; backward S again (P is recomputed from lse), dP, dV, dK and dQ.
      Total 14·n·m·d.
    - ``"tiled"`` (:func:`flash_forward` / :func:`flash_backward`): the same products tile by
      tile, plus the forward's row sums of P by gemv (2nm). With a single key block the backward
      runs two passes and recomputes S and dP once more (FA2 Alg. 2 without the dQ groups).

    Parameters
    ----------
    n, m, d : query rows, key rows, head dimension (positive integers)
    dv : value dimension, default d
    path : "exact" or "tiled"

    Returns
    -------
    {"forward": flops, "backward": flops}, integers.

    Raises
    ------
    AttnInputError
        if a size is not a positive integer or ``path`` is unknown.
    """
    n, m, d = (check_int(name, v) for name, v in (("n", n), ("m", m), ("d", d)))
    dv = d if dv is None else check_int("dv", dv)
    if path not in ("exact", "tiled"):
        raise AttnInputError(f"path must be 'exact' or 'tiled', got {path!r}")
    products = 2 * n * m  # flops per unit of inner dimension of one n×m product
    forward = products * (d + dv)  # S = QKᵀ, then PV
    backward = products * (d + 2 * dv + 2 * d)  # S, dP = dO Vᵀ, dV, dK, dQ
    if path == "tiled":
        forward += products  # row sums of each tile of P, by gemv
        if m <= _block_sizes(d, dv)[1]:  # one key block: two passes, S and dP again
            backward += products * (d + dv)
    return {"forward": forward, "backward": backward}


def _value_shift(V: np.ndarray) -> int:
    """A power of two to divide V by before the forward kernel, 0 when none is needed.

    O is a convex combination of V's rows, but the kernel adds up to m weighted rows (each
    weight at most 1) before it divides by the row sum. When m·max|V| could overflow the
    dtype, V is scaled by 2^-shift, which is exact, and O is scaled back.
    """
    m = V.shape[0]
    vmax = float(np.abs(V).max())
    if vmax <= float(np.finfo(V.dtype).max) / (4.0 * m):
        return 0
    return int(np.ceil(np.log2(m))) + 2


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
    and lse = -inf. The first call compiles the kernels (10 to 30 s per dtype on a 2-core
    machine); numba caches them on disk, and later processes load them in under a second.

    Raises
    ------
    AttnInputError
        for invalid inputs (the messages of the exact core), or when a logit τ·q_i·k_j
        overflows the dtype.
    """
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m, dv = V.shape
    tau = check_scale(scale, d)
    mask_arr, has_mask, causal = _mask_args(mask, n, m, causal)
    dtype = float_dtype(Q, K, V)
    Q, K, V = (_frozen(x.astype(dtype, copy=False)) for x in (Q, K, V))
    check_logits_finite(Q, K, tau)
    shift = _value_shift(V)
    if shift:
        V = _frozen(np.ldexp(V, -shift))
    br, bc = _block_sizes(d, dv)
    KT = _frozen(_blocked_transpose(K, bc))
    O = np.empty((n, dv), dtype=dtype)
    lse = np.empty(n, dtype=dtype)
    _run_forward(Q, K, KT, V, tau, mask_arr, has_mask, causal, br, bc, O, lse)
    if shift:
        np.ldexp(O, shift, out=O)
    return O, lse


def flash_backward(Q, K, V, O, dO, lse, *, scale=None, mask=None, causal=False):
    """Gradients through softmax attention by FlashAttention-2's tiled backward pass.

    Same contract as :func:`attnlib.attention_backward` (FA2 Alg. 2), with P recomputed tile by
    tile from ``lse``, in O((n + m)·d) extra memory. Key blocks run in :data:`DQ_GROUPS` fixed
    groups, each with its own copy of dQ, added in a fixed order: no data races, and results
    bitwise independent of the number of threads.

    Parameters
    ----------
    Q, K, V : (n, d), (m, d), (m, d_v)
    O, lse : the outputs of :func:`flash_forward` (or :func:`attnlib.attention_forward`)
    dO : (n, d_v)
    scale, mask, causal : as in :func:`flash_forward`

    Returns
    -------
    dQ, dK, dV : (n, d), (m, d), (m, d_v). Fully masked rows contribute nothing.

    Raises
    ------
    AttnInputError
        for invalid inputs (the messages of the exact core), or when a logit τ·q_i·k_j
        overflows the dtype.
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    n, d = Q.shape
    m, dv = V.shape
    tau = check_scale(scale, d)
    mask_arr, has_mask, causal = _mask_args(mask, n, m, causal)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    Q, K, V, O, dO, lse = (_frozen(x.astype(dtype, copy=False)) for x in (Q, K, V, O, dO, lse))
    check_logits_finite(Q, K, tau)
    br, bc = _block_sizes(d, dv)
    KT = _frozen(_blocked_transpose(K, bc))
    VT = _frozen(_blocked_transpose(V, bc))
    D = np.empty(n)
    _rowdot(dO, O, D)
    D = _frozen(D)
    dQ = np.zeros((n, d), dtype=dtype)
    dK = np.zeros((m, d), dtype=dtype)
    dV = np.zeros((m, dv), dtype=dtype)
    args = (Q, K, KT, V, VT, dO, lse, D, tau, mask_arr, has_mask, causal, br, bc, dK, dV, dQ)
    groups = min(DQ_GROUPS, _cdiv(m, bc))
    if groups > 1:
        dQg = np.zeros((groups - 1, n, d), dtype=dtype)
        _run_fused(*args, dQg)
        _sum_groups(dQg, tau, dQ)
    else:
        _run_two_pass(*args)
    return dQ, dK, dV


def flash_attention_loss_grad(X, A1, A2, A3, Y, E):
    """dL/dX of AS24's loss L(X) = ½‖D⁻¹exp(A₁XA₂ᵀ/d)A₃Y − E‖²_F (Definition 1.2) through the
    compiled tiled kernels, in O((n + m)·d) extra memory: with Q = A₁X (n, d), K = A₂ (m, d),
    V = A₃Y (m, d) and scale 1/d, L = ½‖O − E‖², so dO = O − E and dL/dX = A₁ᵀ dQ.

    Returns the (d, d) gradient in the inputs' float dtype; equals
    :func:`attnlib.attention_loss_grad` to rounding.

    Raises
    ------
    AttnInputError
        for invalid arguments (see :func:`attnlib.attention_loss_grad`) or overflowing logits.

    Examples
    --------
    >>> import attnlib as al
    >>> rng = np.random.default_rng(0)
    >>> X, Y = np.eye(4), rng.standard_normal((4, 4))
    >>> A1, A2, A3, E = (rng.standard_normal((8, 4)) for _ in range(4))
    >>> G = flash_attention_loss_grad(X, A1, A2, A3, Y, E)
    >>> bool(np.allclose(G, al.attention_loss_grad(X, A1, A2, A3, Y, E), rtol=1e-12, atol=1e-12))
    True
    """
    X, A1, A2, A3, Y, E = check_loss_inputs(X, A1, A2, A3, Y, E)
    scale = 1.0 / X.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        Q, V = A1 @ X, A3 @ Y
    if not (np.isfinite(Q).all() and np.isfinite(V).all()):
        raise AttnInputError("the products A1 @ X or A3 @ Y overflow: the inputs are too large")
    O, lse = flash_forward(Q, A2, V, scale=scale)
    dQ, _, _ = flash_backward(Q, A2, V, O, O - E, lse, scale=scale)
    return A1.T @ dQ
