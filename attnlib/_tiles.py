"""The compiled (numba) steps on the tiles of FlashAttention-2: one block of each pass.

The logits and probabilities of a tile, dS of a tile, and one block of each pass
(:func:`_forward_block`, :func:`_backward_key_block`), every tile product one BLAS gemm
(:mod:`attnlib._blas`), every exponential and row maximum a SIMD routine
(:mod:`attnlib._exp`). The arguments that every tile needs travel together in two named
tuples, :class:`Scores` (what a tile of logits τ·Q_iK_jᵀ needs) and :class:`Upstream` (what
the backward pass reads besides). The tile sizes are :func:`attnlib.costs.block_sizes`; the
parallel loops over blocks, and the wrappers that validate and prepare the inputs, are in
:mod:`attnlib.fast`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from ._blas import _STATUS, _gemm
from ._exp import _exp_shifted, _row_max

__all__ = ["ERR_BLAS", "ERR_LSE_HEAD", "ERR_LSE_ROW", "ERR_SLOTS", "Scores", "Upstream"]


class Scores(NamedTuple):
    """What a tile of logits needs: S_ij = τ·Q_iK_jᵀ, then -inf where a key is dropped.

    ``KT`` is K's blocked transpose (``KT[b]`` is the b-th full block of B_c rows of K,
    transposed), ``mask`` a boolean (n, m) keep-mask when ``has_mask`` (else any boolean
    array, never read), and ``br``, ``bc`` the query and key rows of a tile. The arrays are
    read only, but for ``err``: the kernel's error report (:data:`ERR_SLOTS` int64, zeros),
    which a block writes to instead of raising, since an exception raised inside numba's
    parallel loops does not reach the caller.
    """

    Q: np.ndarray
    K: np.ndarray
    KT: np.ndarray
    scale: float
    mask: np.ndarray
    has_mask: bool
    is_causal: bool
    br: int
    bc: int
    err: np.ndarray


#: The slots of the kernels' error report (:class:`Scores`'s ``err``), filled by the blocks
#: and read by the wrappers after the parallel loop: the BLAS parameter number that a tile
#: product would have got illegal (then BLAS was not called), and for the backward pass one
#: head and row + 1 whose lse some logit exceeds by more than rounding allows.
ERR_BLAS, ERR_LSE_HEAD, ERR_LSE_ROW = 0, 1, 2
ERR_SLOTS = 3


class Upstream(NamedTuple):
    """What the backward pass reads besides :class:`Scores`: V and its blocked transpose VT,
    the forward's O and lse, the upstream gradient dO, D = rowsum(dO∘O) (float64, filled
    in by the backward pass itself), the head's index ``head`` (for error reports), and the
    terms of how far a logit of row i may exceed lse_i through rounding alone,
    ``slack_q``·‖q_i‖ + ``slack_lse``·|lse_i| + ``slack_abs``
    (:func:`attnlib.logits._lse_slack`, computed row by row where needed, so that the pass
    keeps no array for it)."""

    V: np.ndarray
    VT: np.ndarray
    O: np.ndarray
    dO: np.ndarray
    lse: np.ndarray
    D: np.ndarray
    head: int
    slack_q: float
    slack_lse: float
    slack_abs: float


# ---------------------------------------------------------------------------------------
# Tile steps
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
def _workspace(s, tiles):
    """Scratch of one block: ``tiles`` flat tiles (B_r·B_c numbers each, as one array of
    shape (tiles, B_r·B_c)) and the pointer arguments of :func:`_gemm`. Tiles are overwritten
    in place (S becomes P), so that a block's working set (its tiles and the blocks of Q, K,
    V, dO they multiply) stays near the L2 cache."""
    dtype = s.Q.dtype
    return (
        np.empty((tiles, s.br * s.bc), dtype),
        np.zeros(_STATUS + 1, np.int32),
        np.empty(2, dtype),
    )


@nb.njit(cache=True)
def _logits(s, i0, i1, j0, j1, S, ints, flts):
    """S = τ·Q[i0:i1] K[j0:j1]ᵀ by one gemm (τ as its alpha), then -inf where the mask or
    causality drops a key. A full key block multiplies its blocked transpose KT (a plain NN
    gemm), the ragged last one K itself. Causal keeps key j iff j ≤ i (top-left aligned, like
    ``np.tril`` and PyTorch's ``is_causal``)."""
    if j1 - j0 == s.bc:
        _gemm(s.Q[i0:i1], False, s.KT[j0 // s.bc], False, S, s.scale, 0.0, ints, flts)
    else:
        _gemm(s.Q[i0:i1], False, s.K[j0:j1], True, S, s.scale, 0.0, ints, flts)
    rows, cols = S.shape
    if s.has_mask:
        for r in range(rows):
            for c in range(cols):
                if not s.mask[i0 + r, j0 + c]:
                    S[r, c] = -np.inf
    if s.is_causal:
        for r in range(rows):
            for c in range(max(i0 + r - j0 + 1, 0), cols):
                S[r, c] = -np.inf


@nb.njit(cache=True)
def _probabilities(s, u, S, i0):
    """S ← P = min(exp(S - lse), 1) for one tile of logits S, in place (FA2 Alg. 2, line 11),
    row by row with the row's lse as the shift of :func:`_exp_shifted`. Masked logits (-inf)
    and fully masked rows (lse = -inf) give 0.

    A correct lse is at least every logit of its row, so P ≤ 1. A logit above lse by more
    than the row's slack (rounding, see :class:`Upstream`) means lse is not the forward
    pass's for these inputs: the row is reported in ``s.err``. Within the slack, the entries
    above 1 are set to 1: where rounding alone exceeds 1, the true P is 1 to that rounding.
    """
    rows, cols = S.shape
    for r in range(rows):
        lr = u.lse[i0 + r]
        top = _row_max(S[r])
        if top > lr:  # rare: rounding, or an lse that is not the forward's (-inf included)
            q = s.Q[i0 + r]
            norm2 = 0.0
            for k in range(q.shape[0]):
                norm2 += np.float64(q[k]) * np.float64(q[k])
            size = abs(np.float64(lr)) if lr > -np.inf else 0.0
            slack = u.slack_q * math.sqrt(norm2) + u.slack_lse * size + u.slack_abs
            if top - lr > slack:
                s.err[ERR_LSE_HEAD] = u.head
                s.err[ERR_LSE_ROW] = i0 + r + 1
        if lr == -np.inf:
            S[r, :] = 0.0
            continue
        _exp_shifted(S[r], lr)
        if top > lr:
            for c in range(cols):
                S[r, c] = min(S[r, c], 1.0)


@nb.njit(cache=True)
def _grad_scores(P, dP, D, i0):
    """dS = P ∘ (dP - D), in place of dP (FA2 Alg. 2, line 14); the difference in float64."""
    rows, cols = P.shape
    for r in range(rows):
        Dr = D[i0 + r]
        for c in range(cols):
            dP[r, c] = P[r, c] * (np.float64(dP[r, c]) - Dr)


# ---------------------------------------------------------------------------------------
# One block of each pass
# ---------------------------------------------------------------------------------------


@nb.njit(cache=True)
def _forward_block(s, V, qb, O, lse):
    """FA2 Alg. 1 for query block qb: stream the key/value blocks once, write O_i and lse_i."""
    n = s.Q.shape[0]
    m = s.K.shape[0]
    dv = V.shape[1]
    dtype = s.Q.dtype
    i0 = qb * s.br
    i1 = min(i0 + s.br, n)
    rows = i1 - i0
    tiles, ints, flts = _workspace(s, 1)
    sbuf = tiles[0]  # S, then P in place
    ones = np.ones(s.bc, dtype)
    tile_sum = np.empty(s.br, dtype)
    alpha = np.empty(rows)
    acc = np.zeros((rows, dv), dtype)  # Σ_j exp(S_ij - running max) V_j, added by gemm
    run_max = np.full(rows, -np.inf)
    run_sum = np.zeros(rows)
    # under causality, key blocks past the block's last row are all masked: skip them
    kend = min(m, _cdiv(i1, s.bc) * s.bc) if s.is_causal else m
    for j0 in range(0, kend, s.bc):
        j1 = min(j0 + s.bc, m)
        cols = j1 - j0
        S = sbuf[: rows * cols].reshape((rows, cols))
        _logits(s, i0, i1, j0, j1, S, ints, flts)
        for r in range(rows):
            old = run_max[r]
            new = max(old, _row_max(S[r]))
            # S_r ← P_r = exp(S_r - max), the maximum being one of the logits (exact in the
            # tile's dtype); a row with every key so far masked keeps its -inf logits, whose
            # exp is 0
            _exp_shifted(S[r], new if new > -np.inf else 0.0)
            # online softmax (FA2 Alg. 1, lines 9–10): rescale what came before
            alpha[r] = math.exp(old - new) if new > -np.inf else 1.0
            run_max[r] = new
        P = S
        np.dot(P, ones[:cols], tile_sum[:rows])  # row sums of P by one gemv
        for r in range(rows):
            run_sum[r] = run_sum[r] * alpha[r] + tile_sum[r]
            if alpha[r] != 1.0:
                for k in range(dv):
                    acc[r, k] *= alpha[r]
        _gemm(P, False, V[j0:j1], False, acc, 1.0, 1.0, ints, flts)  # acc += P_ij V_j
    if ints[_STATUS]:
        s.err[ERR_BLAS] = ints[_STATUS]
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
def _backward_key_block(s, u, kb, dKj, dVj, dq):
    """FA2 Alg. 2 for key block kb: owns dK_j and dV_j and streams the query blocks once.

    dK_j and dV_j, the block's rows of dK and dV (or zeroed arrays of their shape), accumulate
    in place, and dS_ij K_j (unscaled) adds into ``dq``, the calling group's own copy of dQ.
    Five tile products and one exp per tile.
    """
    n = s.Q.shape[0]
    m = s.K.shape[0]
    j0 = kb * s.bc
    j1 = min(j0 + s.bc, m)
    cols = j1 - j0
    tiles, ints, flts = _workspace(s, 2)
    sbuf = tiles[0]  # S, then P in place
    gbuf = tiles[1]  # dP, then dS in place
    # under causality, rows i < j0 see none of these keys
    first = (j0 // s.br) * s.br if s.is_causal else 0
    for i0 in range(first, n, s.br):
        i1 = min(i0 + s.br, n)
        rows = i1 - i0
        tile = rows * cols
        S = sbuf[:tile].reshape((rows, cols))
        _logits(s, i0, i1, j0, j1, S, ints, flts)
        _probabilities(s, u, S, i0)
        P = S
        dOi = u.dO[i0:i1]
        _gemm(P, True, dOi, False, dVj, 1.0, 1.0, ints, flts)  # dV_j += P_ijᵀ dO_i
        G = gbuf[:tile].reshape((rows, cols))
        if cols == s.bc:  # dP_ij = dO_i V_jᵀ
            _gemm(dOi, False, u.VT[kb], False, G, 1.0, 0.0, ints, flts)
        else:
            _gemm(dOi, False, u.V[j0:j1], True, G, 1.0, 0.0, ints, flts)
        _grad_scores(P, G, u.D, i0)  # G becomes dS_ij
        _gemm(G, True, s.Q[i0:i1], False, dKj, s.scale, 1.0, ints, flts)  # dK_j += τ dS_ijᵀ Q_i
        _gemm(G, False, s.K[j0:j1], False, dq[i0:i1], 1.0, 1.0, ints, flts)  # dQ_i += dS_ij K_j
    if ints[_STATUS]:
        s.err[ERR_BLAS] = ints[_STATUS]
