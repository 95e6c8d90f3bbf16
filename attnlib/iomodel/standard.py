"""Standard attention on the two-level machine: every n×m intermediate (S, P; P, dP, dS)
materialised in slow memory, with exact counts.

These are FA1's Algorithm 0 (forward) and Algorithm 3 of its Appendix B.4 (backward), run
with the blocks of :func:`~attnlib.iomodel.flash_forward_blocks`, so that the difference from
FlashAttention's schedules is only the materialisation: their I/O has an n·m term,
Θ(nd + nm) when M = Ω(d²).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_backward_inputs, check_int, check_qkv, check_scale, float_dtype
from ..logits import (
    _lse_slack_rows,
    _lse_slack_terms,
    _probabilities_from_lse,
    _row_norms,
    max_row_norm,
)
from .blocks import d_pass_rows, flash_forward_blocks
from .machine import IOCount
from .tiling import (
    block_ranges,
    ceil_div,
    check_machine_steps,
    check_run_logits,
    count_args,
    finish_run,
    span,
    start_run,
    tiled_product,
)

__all__ = [
    "standard_forward",
    "standard_forward_count",
    "standard_backward",
    "standard_backward_count",
]


def _standard_blocks(d, M, *, d_v):
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
    provably fits. Arguments and return as :func:`~attnlib.iomodel.flash_forward` (no mask);
    the count equals :func:`standard_forward_count` exactly.

    Raises
    ------
    AttnInputError for invalid arrays, scale or M (at least
    :func:`~attnlib.iomodel.flash_forward_min_M`), logits τQKᵀ that overflow the dtype, or
    a run of more than :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` block steps.
    """
    Q, K, V = check_qkv(Q, K, V)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    B_r, B_c = _standard_blocks(d, M, d_v=d_v)
    check_machine_steps(4 * ceil_div(n, B_r) * ceil_div(m, B_c), "standard_forward")  # 4 passes
    dtype = float_dtype(Q, K, V)
    check_run_logits(Q, K, tau, dtype)
    t = dtype.type(tau)
    outputs = {"S": (n, m), "P": (n, m), "lse": (n,), "O": (n, d_v)}
    mem = start_run(M, record, dtype, {"Q": Q, "K": K, "V": V}, outputs)
    rows, cols = block_ranges(n, B_r), block_ranges(m, B_c)

    for I in rows:  # 1. S = τ Q Kᵀ
        q = mem.load("Q", I)
        for J in cols:
            k = mem.load("K", J)
            s = mem.alloc((span(I), span(J)), dtype=dtype)
            np.matmul(q, k.T, out=s)
            s *= t
            mem.store("S", I, J, s)
            mem.free(k, s)
        mem.free(q)
    for I in rows:  # 2. lse and P = exp(S − lse), two passes over each row block of S
        mx = mem.alloc(span(I), dtype=dtype, fill=-np.inf)
        sm = mem.alloc(span(I), dtype=dtype)
        for J in cols:
            s = mem.load("S", I, J)
            m_new = np.maximum(mx, s.max(axis=1))
            sm *= np.exp(mx - m_new)
            sm += np.exp(s - m_new[:, None]).sum(axis=1)
            mx[:] = m_new
            mem.free(s)
        mx += np.log(sm)  # mx holds lse from here on
        mem.store("lse", I, None, mx)
        for J in cols:
            s = mem.load("S", I, J)
            mem.store("P", I, J, np.exp(s - mx[:, None]))
            mem.free(s)
        mem.free(mx, sm)
    # 3. O = P V
    tiled_product(mem, "O", "P", "V", rows, [(0, d_v)], cols, dtype)
    return finish_run(mem, ("O", "lse"), record)


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

    Raises AttnInputError for sizes below 1 or M below
    :func:`~attnlib.iomodel.flash_forward_min_M`.

    Examples
    --------
    >>> standard_forward_count(8, 2, 40)
    IOCount(reads=272, writes=152, total=424, peak_fast=20)
    """
    n, d, M, m, d_v, B_r, B_c = count_args(n, d, M, m, d_v, None, _standard_blocks)
    T_r = ceil_div(n, B_r)
    r, c = min(B_r, n), min(B_c, m)
    reads = n * d + T_r * m * d + 3 * n * m + T_r * m * d_v
    writes = 2 * n * m + n + n * d_v
    peak = max(r * d + c * d + r * c, 2 * r + r * c, r * d_v + r * c + c * d_v)
    return IOCount(reads, writes, peak)


def standard_backward(Q, K, V, O, dO, lse, *, M: int, scale=None, record=False):
    """Standard attention's backward pass (FA1 App. B.4, Alg. 3) on a machine of M words.

    Each kernel materialises its n×m result in slow memory:

    0. P = exp(τQKᵀ − lse), written (rebuilt from lse so that the signature matches
       :func:`~attnlib.iomodel.flash_backward`);
    1. D = rowsum(dO∘O) (in row blocks of at most ⌊M/2d_v⌋);
    2. dV = Pᵀ dO (key block of dV held, P and dO streamed);
    3. dP = dO Vᵀ, written;
    4. dS = P∘(dP − D), written (P and dP read);
    5. dQ = τ dS K (query block of dQ held);
    6. dK = τ dSᵀ Q (key block of dK held).

    Row-outer steps use (B_r, B_c) = :func:`flash_forward_blocks` as (query, key) blocks;
    the key-outer steps 2 and 6 use B_r keys × B_c queries. Arguments and return as
    :func:`~attnlib.iomodel.flash_backward` (no mask); the count equals
    :func:`standard_backward_count`.

    Raises
    ------
    AttnInputError for invalid arrays, scale or M (at least
    :func:`~attnlib.iomodel.flash_forward_min_M`), logits τQKᵀ that overflow the dtype, or
    a run of more than :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` block steps.
    """
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    n, d = Q.shape
    m, d_v = V.shape
    M = check_int("M", M)
    tau = check_scale(scale, d)
    B_r, B_c = _standard_blocks(d, M, d_v=d_v)
    # P, dP, dS and dQ by row-outer tiles, dV and dK by key-outer tiles, and the D pass
    steps = 4 * ceil_div(n, B_r) * ceil_div(m, B_c) + 2 * ceil_div(m, B_r) * ceil_div(n, B_c)
    check_machine_steps(steps + ceil_div(n, d_pass_rows(B_r, M, d_v)), "standard_backward")
    dtype = float_dtype(Q, K, V, O, dO, lse)
    check_run_logits(Q, K, tau, dtype)
    slack_terms = _lse_slack_terms(dtype, d, m, tau, max_row_norm(K))
    t = dtype.type(tau)
    inputs = {"Q": Q, "K": K, "V": V, "O": O, "dO": dO, "lse": lse}
    outputs = {"P": (n, m), "dP": (n, m), "dS": (n, m), "D": (n,)}
    outputs |= {"dQ": (n, d), "dK": (m, d), "dV": (m, d_v)}
    mem = start_run(M, record, dtype, inputs, outputs)
    q_rows, k_cols = block_ranges(n, B_r), block_ranges(m, B_c)  # row-outer steps
    k_outer, q_inner = block_ranges(m, B_r), block_ranges(n, B_c)  # key-outer steps

    for I in q_rows:  # 0. P = exp(τ Q Kᵀ − lse)
        q = mem.load("Q", I)
        ls = mem.load("lse", I)
        # P = exp(p − lse) ≤ 1, refusing an lse that is not the forward's for these rows
        slack = _lse_slack_rows(_row_norms(q), ls, slack_terms)
        for J in k_cols:
            k = mem.load("K", J)
            p = mem.alloc((span(I), span(J)), dtype=dtype)
            np.matmul(q, k.T, out=p)
            p *= t
            _probabilities_from_lse(p, ls, slack, first_row=I[0])
            mem.store("P", I, J, p)
            mem.free(k, p)
        mem.free(q, ls)
    for I in block_ranges(n, d_pass_rows(B_r, M, d_v)):  # 1. D = rowsum(dO ∘ O)
        o = mem.load("O", I)
        do = mem.load("dO", I)
        mem.store("D", I, None, np.einsum("ij,ij->i", do, o))
        mem.free(o, do)
    # 2. dV = Pᵀ dO
    tiled_product(mem, "dV", "P", "dO", k_outer, [(0, d_v)], q_inner, dtype, transposed=True)
    for I in q_rows:  # 3. dP = dO Vᵀ
        do = mem.load("dO", I)
        for J in k_cols:
            v = mem.load("V", J)
            dp = mem.alloc((span(I), span(J)), dtype=dtype)
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
    # 5. dQ = τ dS K and 6. dK = τ dSᵀ Q
    tiled_product(mem, "dQ", "dS", "K", q_rows, [(0, d)], k_cols, dtype, factor=t)
    tiled_product(
        mem, "dK", "dS", "Q", k_outer, [(0, d)], q_inner, dtype, transposed=True, factor=t
    )
    return finish_run(mem, ("dQ", "dK", "dV"), record)


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

    Raises AttnInputError for sizes below 1 or M below
    :func:`~attnlib.iomodel.flash_forward_min_M`.
    """
    n, d, M, m, d_v, B_r, B_c = count_args(n, d, M, m, d_v, None, _standard_blocks)
    D = d + d_v
    T_r, T_ck = ceil_div(n, B_r), ceil_div(m, B_r)
    reads = 5 * n * m + n * (d + 1) + T_r * m * (2 * d + d_v) + 3 * n * d_v + n + T_ck * n * D
    writes = 3 * n * m + n + n * d + m * D
    r, c = min(B_r, n), min(B_c, m)  # row-outer steps
    R2, C2 = min(B_r, m), min(B_c, n)  # key-outer steps
    r_D = min(d_pass_rows(B_r, M, d_v), n)
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
