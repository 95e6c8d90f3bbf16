"""Attention when the cache is small (M < d²): square tiling, with every word counted.

When fast memory cannot hold a d×d tile, FlashAttention's I/O, Θ(n²d²/M), exceeds the cost of
writing the n×n score-shaped matrices. The schedules here write them, and compute every
product by square b×b tiles: Θ(n²d/√M) + Θ(n²) I/O (SY24 Thm 3.1 for the forward pass; for the
backward pass, LLS+24's bound stated in words). :func:`smallcache_forward` is SY24's
Algorithm 1 made overflow-safe; :func:`smallcache_backward` is our reconstruction. Each has an
exact closed-form twin (``*_count``) that the tests require to equal the simulation.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import (
    AttnInputError,
    check_backward_inputs,
    check_bool,
    check_int,
    check_qkv,
    check_scale,
    float_dtype,
)
from ..logits import _lse_slack_rows, _lse_slack_terms, _probabilities_from_lse, max_row_norm
from .machine import IOCount
from .tiling import (
    block_ranges,
    ceil_div,
    check_dims,
    check_machine_steps,
    check_run_logits,
    finish_run,
    span,
    start_run,
    tiled_product,
)

__all__ = [
    "smallcache_forward",
    "smallcache_backward",
    "smallcache_forward_count",
    "smallcache_backward_count",
    "smallcache_forward_tile",
    "smallcache_backward_tile",
]

# The tile rules. b is the largest integer whose worst phase fits in M words:
#   forward : 3b² + 2b <= M   (three b×b tiles + running max and sum of b rows)
#   backward: 4b² + 2b <= M   (S and dP accumulators + two operand tiles + lse_I and D_I)
_FORWARD_TILES, _FORWARD_VECTORS = 3, 2
_BACKWARD_TILES, _BACKWARD_VECTORS = 4, 2


def _largest_tile(M: int, tiles: int, vectors: int) -> int:
    """The largest b >= 0 with tiles·b² + vectors·b <= M, in exact integer arithmetic.

    tiles·b² + vectors·b <= M  ⇔  (2·tiles·b + vectors)² <= vectors² + 4·tiles·M, and the
    left side is an integer, so 2·tiles·b + vectors <= isqrt(vectors² + 4·tiles·M). Exact
    for every M, with no float rounding to correct and no overflow.
    """
    root = math.isqrt(vectors * vectors + 4 * tiles * M)
    return max(0, (root - vectors) // (2 * tiles))


def _tile_for(M, tiles: int, vectors: int, who: str) -> int:
    M = check_int("M", M)
    smallest = tiles + vectors  # b = 1
    if M < smallest:
        raise AttnInputError(
            f"M must be at least {smallest} words for {who} ({tiles}b² + {vectors}b <= M "
            f"with tile side b = 1), got M={M}"
        )
    return _largest_tile(M, tiles, vectors)


def _refuse_tiled_overflow(S: np.ndarray, b: int) -> None:
    """Refuse a tile of logits τ·S_IJ that overflowed while S_IJ was summed over column
    tiles of width b. The run's logits were checked as whole dot products before it started,
    but a sum taken tile by tile adds in another order, and a partial sum can overflow where
    the whole one does not (e.g. q = (−10³⁰⁸, 0, 0.9·10³⁰⁸, 0.9·10³⁰⁸), k = 1, b = 2)."""
    if not np.isfinite(S).all():
        raise AttnInputError(
            f"the logits scale * Q @ K.T overflow {S.dtype} in their sum over column tiles of "
            f"width b = {b}: Q, K or scale is too large"
        )


def smallcache_forward_tile(M: int) -> int:
    """Tile side b of :func:`smallcache_forward`: the largest b with 3b² + 2b <= M.

    Raises AttnInputError for M below 5."""
    return _tile_for(M, _FORWARD_TILES, _FORWARD_VECTORS, "smallcache_forward")


def smallcache_backward_tile(M: int) -> int:
    """Tile side b of :func:`smallcache_backward`: the largest b with 4b² + 2b <= M.

    Raises AttnInputError for M below 6."""
    return _tile_for(M, _BACKWARD_TILES, _BACKWARD_VECTORS, "smallcache_backward")


# ---- forward: SY24 Algorithm 1, made safe -------------------------------------------------


def smallcache_forward(Q, K, V, *, M: int, scale=None, record: bool = False, unshifted=False):
    """Attention forward by square tiles (SY24 Alg. 1, with the log-sum-exp subtracted).

    Tile rule: b is the largest integer with **3b² + 2b <= M**, the capacity inequality of
    the worst phase (phase 1 holds an accumulator of S, one tile each of Q and K, and the
    running row maximum and row sum of b rows; phase 2 holds the output accumulator, one
    tile each of S and V, and lse for b rows, 3b² + b words). So the smallest M is 5.

    Phase 1, for each block I of b query rows: for each block J of b keys, accumulate
    S_IJ = τ Σ_L Q[I, L] K[J, L]ᵀ over column blocks L of width b, fold it into the running
    row max m_I and row sum l_I (FA1's online rescaling), and write S_IJ to slow memory.
    Then write lse_I = m_I + log l_I.
    Phase 2, for each tile (I, C) of O: O_IC = Σ_J exp(S_IJ − lse_I) V[J, C], written once.

    ``unshifted=True`` runs SY24's Algorithm 1 as printed, kept for the book to show its
    overflow: it writes exp(S_IJ) and the row sums and divides in phase 2, the same I/O, but
    exp overflows once a logit passes ≈ 709 in float64 (≈ 88 in float32) and the output
    turns NaN; its lse is the log of the row sums.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v) float arrays
    M : fast memory in words, >= 5
    scale : τ > 0, default 1/√d
    record : keep the machine's operation log; if True the machine is returned too
    unshifted : run SY24's unshifted exponentials (see above) instead of ours

    Returns
    -------
    (O, lse, IOCount), or (O, lse, IOCount, machine) with ``record=True``.
    O is (n, d_v) and lse (n,), as :func:`attnlib.attention_forward`. The count equals
    :func:`smallcache_forward_count` exactly: reads ≈ 4n²d/b, writes ≈ n² (square case).

    Raises
    ------
    AttnInputError for invalid arrays, scale, M below 5, ``unshifted`` not a bool, logits
    τQKᵀ that overflow the dtype (``unshifted`` overflows far earlier, in exp, by design), or
    a run of more than :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` tile steps.

    Examples
    --------
    >>> import numpy as np
    >>> Q = K = V = np.ones((4, 2))
    >>> O, lse, count = smallcache_forward(Q, K, V, M=16)
    >>> count, np.allclose(O, 1.0)
    (IOCount(reads=68, writes=28, total=96, peak_fast=16), True)
    """
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m, d_v = V.shape
    tau = check_scale(scale, d)
    b = smallcache_forward_tile(M)
    Tn, Tm, Td, Tv = (ceil_div(x, b) for x in (n, m, d, d_v))
    check_machine_steps(Tn * Tm * (Td + Tv), "smallcache_forward")  # the tiles of two phases
    unshifted = check_bool("unshifted", unshifted)
    dtype = float_dtype(Q, K, V)
    check_run_logits(Q, K, tau, dtype)
    # S holds the scores (ours) or their exponentials (SY24's, unshifted)
    outputs = {"S": (n, m), "lse": (n,), "O": (n, d_v)}
    mem = start_run(M, record, dtype, {"Q": Q, "K": K, "V": V}, outputs)
    rows, keys = block_ranges(n, b), block_ranges(m, b)
    dcols, vcols = block_ranges(d, b), block_ranges(d_v, b)

    # Phase 1: the score matrix, tile by tile, with each row's max and sum kept on the fly.
    for I in rows:
        row_max = mem.alloc(span(I), dtype=dtype, fill=-np.inf)
        row_sum = mem.alloc(span(I), dtype=dtype)
        for J in keys:
            S = mem.alloc((span(I), span(J)), dtype=dtype)
            for L in dcols:
                q, k = mem.load("Q", I, L), mem.load("K", J, L)
                S += q @ k.T
                mem.free(q, k)
            S *= tau
            _refuse_tiled_overflow(S, b)
            if unshifted:  # SY24: exp of the raw score, no shift (overflows for S > 709)
                with np.errstate(over="ignore"):
                    S[:] = np.exp(S)
                row_sum += S.sum(axis=1)
            else:  # ours: online max and rescaled sum (FA1 Alg. 1, lines 10-12)
                new_max = np.maximum(row_max, S.max(axis=1))
                rescaled = row_sum * np.exp(row_max - new_max)
                row_sum[:] = rescaled + np.exp(S - new_max[:, None]).sum(axis=1)
                row_max[:] = new_max
            mem.store("S", I, J, S)
            mem.free(S)
        lse_I = np.log(row_sum) if unshifted else row_max + np.log(row_sum)
        mem.store("lse", I, None, lse_I)
        mem.free(row_max, row_sum)

    # Phase 2: O = softmax(S) V by square tiles, normalising with lse as each tile is read.
    for I in rows:
        for C in vcols:
            lse = mem.load("lse", I)
            O = mem.alloc((span(I), span(C)), dtype=dtype)
            for J in keys:
                s, v = mem.load("S", I, J), mem.load("V", J, C)
                if unshifted:  # exp(S) / rowsum: inf/inf = NaN once a logit overflowed
                    with np.errstate(invalid="ignore"):
                        O += (s / np.exp(lse)[:, None]) @ v
                else:
                    O += np.exp(s - lse[:, None]) @ v
                mem.free(s, v)
            mem.store("O", I, C, O)
            mem.free(lse, O)
    return finish_run(mem, ("O", "lse"), record)


def smallcache_forward_count(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None
) -> IOCount:
    """Exact I/O of :func:`smallcache_forward` (closed form, no arrays).

    With b from :func:`smallcache_forward_tile`, T_x = ⌈x/b⌉ tiles along an extent x, and
    b_x = min(b, x) (m defaults to n and d_v to d)::

        reads  = d·(n·T_m + m·T_n)        phase 1: Q and K tiles, once per tile of S
               + n·m·T_dv + m·d_v·T_n     phase 2: S and V tiles, once per tile of O
               + n·T_dv                   phase 2: lse_I, once per tile of O
        writes = n·m + n + n·d_v          S, lse, O
        peak   = max(2b_n + b_n·b_m + b_n·b_d + b_m·b_d,     phase 1
                     b_n + b_n·b_dv + b_n·b_m + b_m·b_dv)   phase 2

    In the square case (m = n, d_v = d) reads ≈ 4n²d/b + n², i.e. ≈ 4√3·n²d/√M.
    Raises AttnInputError for sizes below 1 or M below 5.

    Examples
    --------
    >>> smallcache_forward_count(1024, 64, 1024)
    IOCount(reads=15405056, writes=1115136, total=16520192, peak_fast=1008)
    """
    n, d, M, m, d_v = check_dims(n, d, M, m, d_v)
    b = smallcache_forward_tile(M)
    Tn, Tm, Tv = ceil_div(n, b), ceil_div(m, b), ceil_div(d_v, b)
    bn, bm, bd, bv = min(b, n), min(b, m), min(b, d), min(b, d_v)
    reads = d * (n * Tm + m * Tn) + n * m * Tv + m * d_v * Tn + n * Tv
    writes = n * m + n + n * d_v
    peak = max(2 * bn + bn * bm + bn * bd + bm * bd, bn + bn * bv + bn * bm + bm * bv)
    return IOCount(reads, writes, peak)


# ---- backward: our reconstruction --------------------------------------------------------


def smallcache_backward(Q, K, V, O, dO, lse, *, M: int, scale=None, record: bool = False):
    """Attention backward by square tiles, for caches smaller than d² (our reconstruction).

    Our reconstruction of a small-cache backward pass consistent with LLS+24's stated
    bound Θ(n²d/√M) for M = o(d²) (their algorithm's text was not available to us). It
    materialises the two n×n intermediates in slow memory, and every product is a
    square-tiled matrix product:

    1. For each block I of b query rows: load lse_I and form D_I = rowsum(dO_I ∘ O_I).
       Then for each block J of b keys, **fuse the two score-shaped products**: accumulate
       S_IJ = Q_I K_Jᵀ over column blocks, turn it into P_IJ = exp(τS_IJ − lse_I) in place
       and write it; accumulate dP_IJ = dO_I V_Jᵀ next to it, turn it into
       dS_IJ = P_IJ ∘ (dP_IJ − D_I) in place and write it. Each of P and dS is written
       once (2n² words) and nothing score-shaped is ever read back in this phase.
    2. dV = Pᵀ dO, 3. dQ = τ·dS K, 4. dK = τ·dSᵀ Q, each by square tiles: for every b×b
       output tile, stream the matching tiles of the two factors and write the tile once.

    Tile rule: b is the largest integer with **4b² + 2b <= M**, the capacity inequality of
    phase 1 (S and dP accumulators, one dO tile and one V tile, lse_I and D_I); the
    products need only 3b². So the smallest M is 6.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v) float arrays
    O, lse : the forward outputs, (n, d_v) and (n,)
    dO : (n, d_v), the gradient of the loss with respect to O
    M : fast memory in words, >= 6
    scale : τ > 0, default 1/√d
    record : keep the machine's operation log; if True the machine is returned too

    Returns
    -------
    (dQ, dK, dV, IOCount), or with ``record=True`` also the machine. The gradients equal
    :func:`attnlib.attention_backward`'s; the count equals :func:`smallcache_backward_count`
    exactly: reads ≈ 10n²d/b, writes ≈ 2n² (square case).

    Raises AttnInputError for invalid arrays (lse with -inf included), scale, M below 6,
    logits τQKᵀ that overflow the dtype, or a run of more than
    :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` tile steps.
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse, allow_masked_rows=False)
    n, d = Q.shape
    m, d_v = V.shape
    tau = check_scale(scale, d)
    b = smallcache_backward_tile(M)
    Tn, Tm, Td, Tv = (ceil_div(x, b) for x in (n, m, d, d_v))
    # phase 1's tiles (S and dP), then the three products dV, dQ, dK
    steps = Tn * Tm * (Td + Tv) + Tm * Tv * Tn + 2 * Tn * Td * Tm + Tn * Tv
    check_machine_steps(steps, "smallcache_backward")
    dtype = float_dtype(Q, K, V, O, dO, lse)
    check_run_logits(Q, K, tau, dtype)
    slack_terms = _lse_slack_terms(dtype, d, m, tau, max_row_norm(K))
    inputs = {"Q": Q, "K": K, "V": V, "O": O, "dO": dO, "lse": lse}
    outputs = {"P": (n, m), "dS": (n, m), "dQ": (n, d), "dK": (m, d), "dV": (m, d_v)}
    mem = start_run(M, record, dtype, inputs, outputs)
    rows, keys = block_ranges(n, b), block_ranges(m, b)
    dcols, vcols = block_ranges(d, b), block_ranges(d_v, b)

    # Phase 1: P and dS, tile by tile, both score-shaped products fused per tile (I, J).
    for I in rows:
        lse_I = mem.load("lse", I)
        D_I = mem.alloc(span(I), dtype=dtype)
        for C in vcols:  # D_I = rowsum(dO_I ∘ O_I)
            o, do = mem.load("O", I, C), mem.load("dO", I, C)
            D_I += np.einsum("ij,ij->i", do, o)
            mem.free(o, do)
        for J in keys:
            P = mem.alloc((span(I), span(J)), dtype=dtype)
            q_norm2 = np.zeros(span(I))  # ‖q_i‖², for the lse check's slack
            for L in dcols:  # S_IJ = Q_I K_Jᵀ
                q, k = mem.load("Q", I, L), mem.load("K", J, L)
                P += q @ k.T
                with np.errstate(over="ignore"):  # an infinite norm only widens the slack
                    q_norm2 += np.einsum("ij,ij->i", q, q, dtype=np.float64)
                mem.free(q, k)
            P *= tau
            _refuse_tiled_overflow(P, b)
            # P_IJ = exp(S_IJ − lse_I) ≤ 1 in place of S_IJ, refusing an lse that is not the
            # forward's for these rows
            slack = _lse_slack_rows(np.sqrt(q_norm2), lse_I, slack_terms)
            _probabilities_from_lse(P, lse_I, slack, first_row=I[0])
            mem.store("P", I, J, P)
            dS = mem.alloc((span(I), span(J)), dtype=dtype)
            for C in vcols:  # dP_IJ = dO_I V_Jᵀ
                do, v = mem.load("dO", I, C), mem.load("V", J, C)
                dS += do @ v.T
                mem.free(do, v)
            dS[:] = P * (dS - D_I[:, None])  # dS_IJ, in place of dP_IJ
            mem.store("dS", I, J, dS)
            mem.free(P, dS)
        mem.free(lse_I, D_I)

    # Phases 2-4: three square-tiled products over the key/query index.
    tiled_product(mem, "dV", "P", "dO", keys, vcols, rows, dtype, transposed=True)
    tiled_product(mem, "dQ", "dS", "K", rows, dcols, keys, dtype, factor=tau)
    tiled_product(mem, "dK", "dS", "Q", keys, dcols, rows, dtype, transposed=True, factor=tau)
    return finish_run(mem, ("dQ", "dK", "dV"), record)


def smallcache_backward_count(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None
) -> IOCount:
    """Exact I/O of :func:`smallcache_backward` (closed form, no arrays).

    With b from :func:`smallcache_backward_tile`, T_x = ⌈x/b⌉ and b_x = min(b, x)
    (m defaults to n and d_v to d)::

        reads  = n + 2·n·d_v                  phase 1: lse, and O and dO for D
               + (d + d_v)·(n·T_m + m·T_n)    phase 1: Q, K, dO, V tiles, once per tile (I, J)
               + n·m·T_dv + n·d_v·T_m         dV = Pᵀ dO
               + n·m·T_d  + m·d·T_n           dQ = τ dS K
               + n·m·T_d  + n·d·T_m           dK = τ dSᵀ Q
        writes = 2·n·m + n·d + m·d + m·d_v    P, dS, dQ, dK, dV
        peak   = max over the phases of their live words (first tiles are the largest):
                 2b_n + 2b_n·b_dv,  2b_n + b_n·b_m + b_n·b_d + b_m·b_d,
                 2b_n + 2b_n·b_m + b_n·b_dv + b_m·b_dv,  and b_x·b_y + b_x·b_z + b_z·b_y
                 for each product.

    In the square case reads ≈ 10n²d/b and writes ≈ 2n², i.e. total ≈ 20n²d/√M + 2n².
    Raises AttnInputError for sizes below 1 or M below 6.

    Examples
    --------
    >>> smallcache_backward_tile(1024), smallcache_backward_count(1024, 64, 1024).total
    (15, 49808384)
    """
    n, d, M, m, d_v = check_dims(n, d, M, m, d_v)
    b = smallcache_backward_tile(M)
    Tn, Tm, Td, Tv = ceil_div(n, b), ceil_div(m, b), ceil_div(d, b), ceil_div(d_v, b)
    bn, bm, bd, bv = min(b, n), min(b, m), min(b, d), min(b, d_v)
    reads = (
        n
        + 2 * n * d_v
        + (d + d_v) * (n * Tm + m * Tn)
        + n * m * Tv
        + n * d_v * Tm
        + n * m * Td
        + m * d * Tn
        + n * m * Td
        + n * d * Tm
    )
    writes = 2 * n * m + n * d + m * d + m * d_v
    peak = max(
        2 * bn + 2 * bn * bv,  # D_I
        2 * bn + bn * bm + bn * bd + bm * bd,  # S_IJ
        2 * bn + 2 * bn * bm + bn * bv + bm * bv,  # dP_IJ next to P_IJ
        bm * bv + bn * bm + bn * bv,  # dV
        bn * bd + bn * bm + bm * bd,  # dQ
        bm * bd + bn * bm + bn * bd,  # dK
    )
    return IOCount(reads, writes, peak)
