"""Compiled tiled attention: FlashAttention-2's forward and backward on the CPU, in numba.

The exact core (:mod:`attnlib.exact`) materialises the n×m score matrix. The kernels here never
do: they walk (B_r × B_c) tiles of it (:func:`block_sizes`), like the schedules that
:mod:`attnlib.iomodel` runs on the two-level machine, and keep only O((n + m)·d) extra memory
(:func:`extra_memory_bytes`).

- **Forward** (FA2 Alg. 1): each query block streams every key/value block once, keeps a running
  row maximum and row sum (the online softmax), and rescales its output accumulator.
- **Backward** (FA2 Alg. 2): P is *recomputed* tile by tile from the stored row log-sum-exp
  instead of being stored, trading about twice the forward's arithmetic for n×m memory.

**Threads, and why the result does not depend on their number.** Query blocks are independent
in the forward pass, so ``prange`` runs them in parallel. In the backward pass FA2 loops over key
blocks, and every key block adds into every row of dQ: running key blocks in parallel is a data
race on dQ (GPUs use atomic adds, whose order is not fixed). The key blocks go to
:data:`DQ_GROUPS` fixed groups (block j to group j mod DQ_GROUPS, :func:`dq_groups`) that run in
parallel. Each group owns its blocks' dK_j and dV_j and its own copy of dQ (group 0 writes into
dQ itself), so one pass does FA2's 5 tile products and 1 exponential per tile; the copies are
then added in the fixed order of the groups. The groups and every sum's order depend only on the
shapes, never on the threads: results are bitwise identical for any number of threads. The
price is (DQ_GROUPS - 1)·n·d extra numbers, and at most DQ_GROUPS threads in the backward pass.

**Numerics.** Every tile product is one BLAS gemm (SciPy's BLAS called directly, see
:mod:`attnlib._tiles`), run on the calling thread (:func:`blas_on_calling_thread`). Its
alpha applies the scale τ to the logits, and its beta = 1 adds P_ijᵀdO_i, dS_ijᵀQ_i, dS_ijK_j and
P_ijV_j straight into their accumulators, in the inputs' dtype, as a naive computation's long
gemm would; the row sums, D = rowsum(dO∘O), dP - D and the final sum of the dQ copies are
float64. ``exp`` is a short vectorisable routine (:mod:`attnlib._exp`) run in place on each row
of a tile, the row's shift (maximum or lse) subtracted in the same pass; its fused multiply-adds
(``contract``) are the only fast-math flag used anywhere. Logits that overflow the dtype are
refused before any kernel runs (:func:`check_logits_finite`).

**Arithmetic and timing.** :func:`flop_count` gives the flops of the matrix products of each
path, the exact core's and these kernels'; :func:`gemm_rates` and :func:`exp_seconds` time the
two ingredients of a tile on the machine at hand.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import prange

from ._checks import (
    AttnInputError,
    as_float_array,
    check_backward_inputs,
    check_bool,
    check_choice,
    check_cols,
    check_loss_inputs,
    check_mask,
    check_memory_parts,
    check_positive_real,
    check_qkv,
    check_scale,
    conversion_parts,
    float_dtype,
    is_batched,
)
from ._heads import backward_heads, forward_heads
from ._probes import exp_seconds, flop_count, gemm_rates
from ._tiles import (
    DQ_GROUPS,
    ERR_BLAS,
    ERR_LSE_HEAD,
    ERR_LSE_ROW,
    ERR_SLOTS,
    TILE_MULADDS,
    Scores,
    Upstream,
    _backward_key_block,
    _cdiv,
    _forward_block,
    _interleave,
    blas_on_calling_thread,
    block_sizes,
    dq_groups,
    extra_memory_bytes,
)
from .exact import _finite_in_dO
from .logits import _lse_slack_terms, _row_norms, max_row_norm

__all__ = [
    "flash_forward",
    "flash_backward",
    "flash_attention_loss_grad",
    "forward_backward",
    "flop_count",
    "check_logits_finite",
    "block_sizes",
    "dq_groups",
    "extra_memory_bytes",
    "gemm_rates",
    "exp_seconds",
    "DQ_GROUPS",
    "TILE_MULADDS",
    "blas_on_calling_thread",
]


def _blocked_transpose(X: np.ndarray, bc: int) -> np.ndarray:
    """XT[b] = X[b·bc:(b+1)·bc]ᵀ for every full block b: shape (m // bc, cols, bc), read only;
    for X of shape (heads, m, cols), the same for each head: (heads, m // bc, cols, bc).

    With it, Q_i K_jᵀ is a plain (NN) gemm, which OpenBLAS runs faster on small tiles than the
    transposed (NT) form. Costs one extra copy of X (O(m·d) memory).
    """
    *heads, m, cols = X.shape
    nfull = m // bc
    blocks = X[..., : nfull * bc, :].reshape(*heads, nfull, bc, cols)
    return _frozen(np.swapaxes(blocks, -1, -2))


# ---------------------------------------------------------------------------------------
# The parallel entry points (compiled), one per pass
# ---------------------------------------------------------------------------------------


@nb.njit(parallel=True, cache=True)
def _run_forward(Q, K, KT, V, keep, has_mask, tau, causal, br, bc, g, O, lse, err):
    """The forward pass of every head at once: Q (heads, n, d), K, its blocked transpose KT
    and V of the key/value heads, head h reading key/value head h // g; ``keep`` an (n, m)
    keep-mask for every head when ``has_mask``. The (head, query block) pairs run in
    parallel, each writing its own rows of O (heads, n, d_v) and lse (heads, n); errors go
    to ``err`` (see :class:`attnlib._tiles.Scores`). A single head is the case
    heads = g = 1."""
    nblocks = _cdiv(Q.shape[1], br)
    for t in prange(Q.shape[0] * nblocks):
        h = t // nblocks
        j = h // g
        s = Scores(Q[h], K[j], KT[j], tau, keep, has_mask, causal, br, bc, err)
        _forward_block(s, V[j], _interleave(t % nblocks, nblocks), O[h], lse[h])


@nb.njit(parallel=True, cache=True)
def _run_backward(
    Q,
    K,
    KT,
    V,
    VT,
    O,
    dO,
    lse,
    D,
    slack,
    keep,
    has_mask,
    tau,
    causal,
    br,
    bc,
    g,
    dK,
    dV,
    dQ,
    dQg,
    err,
):
    """The backward pass of every head at once (shapes as in :func:`_run_forward`; ``slack``
    the terms (a, one per head, then b and c) of the lse check's slack, see
    :class:`attnlib._tiles.Upstream`; ``err`` as in :func:`_run_forward`), in three parallel
    steps.

    (1) D = rowsum(dO∘O) in float64, rows of every head in parallel. (2) The (key/value head
    j, group) pairs in parallel: pair (j, G') runs the query heads h = j·g, ..., j·g + g - 1
    in order, and for each the key blocks G', G' + G, ... in increasing order, adding into
    head h's copy of dQ for its group (dQ[h] for group 0, dQg[G' - 1, h] after). It owns
    those blocks of dK[j] and dV[j]: with g > 1 each head's block is computed in zeroed
    scratch and then added, so dK and dV are the per-head gradients summed in the order of
    the heads, bit for bit what :func:`attnlib._heads.backward_heads` adds head by head.
    (3) dQ ← τ·(dQ + Σ copies), summed in float64 in the fixed order of the groups for every
    entry, rows in parallel.
    """
    # each prange loop has names of its own (prange takes a name that lives on after the loop
    # for a reduction) and stores through plain names (a store through a tuple's field is lost)
    heads, n, dv = O.shape
    for r in prange(heads * n):
        h = r // n
        i = r % n
        dot = 0.0
        for k in range(dv):
            dot += np.float64(dO[h, i, k]) * np.float64(O[h, i, k])
        D[h, i] = dot
    groups = dQg.shape[0] + 1
    slack_q, b, c = slack
    m, d = K.shape[1], K.shape[2]
    kblocks = _cdiv(m, bc)
    scratch_rows = bc if g > 1 else 0
    for t in prange(K.shape[0] * groups):
        j = t // groups
        grp = t % groups
        dKh = np.empty((scratch_rows, d), dK.dtype)  # one head's block of dK (and dV), g > 1
        dVh = np.empty((scratch_rows, dv), dV.dtype)
        for h in range(j * g, (j + 1) * g):
            s = Scores(Q[h], K[j], KT[j], tau, keep, has_mask, causal, br, bc, err)
            u = Upstream(V[j], VT[j], O[h], dO[h], lse[h], D[h], h, slack_q[h], b, c)
            dq = dQ[h] if grp == 0 else dQg[grp - 1, h]
            for kb in range(grp, kblocks, groups):
                j0 = kb * bc
                j1 = min(j0 + bc, m)
                if g == 1:
                    _backward_key_block(s, u, kb, dK[j, j0:j1], dV[j, j0:j1], dq)
                    continue
                dk = dKh[: j1 - j0]
                dvh = dVh[: j1 - j0]
                dk[:] = 0
                dvh[:] = 0
                _backward_key_block(s, u, kb, dk, dvh, dq)
                for r in range(j1 - j0):
                    for c in range(d):
                        dK[j, j0 + r, c] += dk[r, c]
                    for c in range(dv):
                        dV[j, j0 + r, c] += dvh[r, c]
    d = dQ.shape[2]
    for r in prange(heads * n):
        h = r // n
        i = r % n
        for c in range(d):
            total = np.float64(dQ[h, i, c])
            for copy in range(groups - 1):
                total += dQg[copy, h, i, c]
            dQ[h, i, c] = total * tau


#: Every compiled entry point; each has one signature per dtype (see :func:`_frozen`).
KERNELS = (_run_forward, _run_backward)


# ---------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------


def _frozen(x: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous view of x with the canonical strides of its shape (a copy
    only if x is not C-contiguous).

    numba compiles one machine-code version per combination of argument types, and an array's
    type includes its layout and whether it is writeable. Handing every kernel read-only
    C-contiguous inputs, whatever the caller passed (read-only, Fortran order, negative
    strides), keeps it at one compiled version per dtype. Only the view is frozen: the
    caller's array keeps its flags.

    Numpy leaves the stride of a length-1 axis arbitrary and still flags the array
    C-contiguous (``x[None]`` and ``np.broadcast_to`` give 0), so ``np.ascontiguousarray``
    returns it as it is. Such a stride is never used to reach an element, so the same
    memory is viewed with the canonical strides instead, without a copy: every row of a
    tile then has the row stride that BLAS is told.
    """
    view = np.ascontiguousarray(x)
    canonical = _c_strides(view.shape, view.itemsize)
    if view.strides != canonical:
        view = np.lib.stride_tricks.as_strided(view, strides=canonical, writeable=False)
    else:
        view = view.view()
    view.flags.writeable = False
    return view


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-ordered array of ``shape``."""
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


_NO_MASK = _frozen(np.ones((1, 1), dtype=np.bool_))


def _keep(mask, is_causal, n: int, m: int):
    """The kernels' mask arguments: (keep, has_mask, is_causal), the mask checked against
    (n, m) and frozen, causality a bool."""
    mask = check_mask(mask, n, m)
    is_causal = check_bool("is_causal", is_causal)
    if mask is None:
        return _NO_MASK, False, is_causal
    return _frozen(mask), True, is_causal


def _refuse_oversized(what: str, arrays: dict, dtype, heads: int) -> None:
    """Refuse, before anything is copied or allocated, a kernel call whose working memory
    would exceed :data:`attnlib.config.MAX_ALLOCATION_BYTES`: the inputs ({name: array},
    Q, K, V first, a mask or None among them) converted to ``dtype`` or made contiguous
    (a broadcast view becomes a full array), and ``heads`` times :func:`extra_memory_bytes`
    with the scratch of every numba thread (the outputs, blocked transposes, copies of dQ)."""
    dtype = np.dtype(dtype)
    Q, K, V = arrays["Q"], arrays["K"], arrays["V"]
    floats = {k: a for k, a in arrays.items() if a is not None and k != "mask"}
    parts = conversion_parts(dtype, floats)
    parts += [
        (a.size * a.itemsize, f"a contiguous copy of {name}", name)
        for name, a in arrays.items()
        if a is not None and a.dtype in (dtype, np.bool_) and not a.flags.c_contiguous
    ]
    n, m, d, dv = Q.shape[-2], K.shape[-2], Q.shape[-1], V.shape[-1]
    threads = nb.get_num_threads()
    kernel = extra_memory_bytes(n, m, d, dv, dtype=dtype.name, threads=threads) * heads
    parts.append((kernel, "the kernels' outputs, blocked transposes and scratch", "Q, K or V"))
    check_memory_parts(what, parts)


def _logits_bounded(Q: np.ndarray, K: np.ndarray, scale: float) -> bool:
    """Whether Cauchy–Schwarz alone shows that no logit τ·q_i·k_j, nor q_i·k_j, overflows the
    dtype, for every row q_i of Q and k_j of K (arrays of any number of dimensions, rows
    along the last)."""
    dtype = Q.dtype
    big = float(np.finfo(dtype).max)
    d = Q.shape[-1]
    slack = 1 + (d + 2) * 2.3e-16
    if dtype == np.float32:
        slack *= 1 + (d + 2) * float(np.finfo(np.float32).eps)

    def fits(bound: float) -> bool:
        bound *= slack
        return bound <= big and scale * bound <= big

    # first from the largest entries alone (‖q‖₂ ≤ √d·max|q_k|): two passes over each array
    # without temporaries, enough for all but huge entries; then from the row norms
    if fits(d * _max_abs(Q) * _max_abs(K)):
        return True
    return fits(max_row_norm(Q.reshape(-1, d)) * max_row_norm(K.reshape(-1, d)))


def _max_abs(X: np.ndarray) -> float:
    """max |x| over a finite float array, as a Python float."""
    return max(float(X.max()), -float(X.min()))


def _refuse_overflow(Q: np.ndarray, K: np.ndarray, scale: float) -> None:
    """:func:`check_logits_finite` on arrays already validated."""
    if _logits_bounded(Q, K, scale):
        return
    dtype = Q.dtype
    big = float(np.finfo(dtype).max)
    rows = max(1, (1 << 22) // K.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for i0 in range(0, Q.shape[0], rows):
            S = Q[i0 : i0 + rows] @ K.T
            if not (np.isfinite(S).all() and (np.abs(S, dtype=np.float64) * scale <= big).all()):
                raise AttnInputError(
                    f"the logits scale * Q @ K.T overflow {dtype}: Q, K or scale is too large"
                )


def check_logits_finite(Q, K, scale) -> None:
    """Raise if some logit τ·q_i·k_j, or the product q_i·k_j itself, is not finite in the
    common dtype of Q (n, d) and K (m, d); τ is ``scale``.

    Cauchy–Schwarz bounds every such product by ‖q_i‖·‖k_j‖, and rounding over d terms adds
    at most a factor 1 + (d + 2)·ε; when that bound fits the dtype, which is the usual case,
    this costs O((n + m)·d). Only otherwise are the logits computed, a block of rows at a
    time, as the kernels compute them.

    Raises
    ------
    AttnInputError
        if Q or K is not a finite 2-D float array, their widths differ, ``scale`` is not
        positive, or a logit overflows the dtype (the kernels would divide by an infinite row
        sum).

    Examples
    --------
    >>> check_logits_finite(np.ones((2, 3)), np.ones((4, 3)), 0.5)  # passes silently
    """
    Q = as_float_array("Q", Q)
    K = as_float_array("K", K)
    check_cols("K", K, Q.shape[1], "Q")
    tau = check_positive_real("scale", scale)
    dtype = float_dtype(Q, K)
    _refuse_overflow(Q.astype(dtype, copy=False), K.astype(dtype, copy=False), tau)


def _value_shift(V: np.ndarray) -> int:
    """A power of two to divide V by before the forward kernel, 0 when none is needed.

    O is a convex combination of V's rows, but the kernel adds up to m weighted rows (each
    weight at most 1) before it divides by the row sum. When m·max|V| could overflow the
    dtype, V is scaled by 2^-shift, which is exact, and O is scaled back.
    """
    m = V.shape[-2]
    vmax = _max_abs(V)
    if vmax <= float(np.finfo(V.dtype).max) / (4.0 * m):
        return 0
    return int(np.ceil(np.log2(m))) + 2


def flash_forward(Q, K, V, *, scale=None, mask=None, is_causal=False, enable_gqa=False):
    """Softmax attention by FlashAttention-2's tiled forward pass, in O((n + m)·d) extra memory.

    Same contract as :func:`attnlib.attention_forward` (FA2 Alg. 1, run on a CPU). Batched,
    multi-head input has PyTorch's ``scaled_dot_product_attention`` layout; without a mask
    every head runs in one parallel call (the (head, query block) pairs), with a mask head by
    head; either way each head's result is bit for bit that of the 2-D kernel.

    Parameters
    ----------
    Q, K, V, scale, mask, enable_gqa : as in :func:`attnlib.attention_forward`: Q (n, d),
        K (m, d), V (m, d_v) in float32 or float64, or batched multi-head (..., H, n, d),
        (..., H_kv, m, d), (..., H_kv, m, d_v)
    is_causal : if True, query i attends to keys j ≤ i only (top-left aligned, as PyTorch's);
        for 2-D input combined with ``mask`` by "and", for batched input not with ``mask``

    Returns
    -------
    O : (n, d_v) (batched: (..., H, n, d_v)) and lse : (n,) (batched: (..., H, n)), in the
    inputs' common dtype. A fully masked row gives O = 0 and lse = -inf. The first call
    compiles the kernels (10 to 30 s per dtype on a 2-core machine); numba caches them on
    disk, and later processes load them in under a second.

    Raises
    ------
    AttnInputError
        for invalid inputs (the messages of the exact core), or when a logit τ·q_i·k_j
        overflows the dtype.

    Examples
    --------
    >>> import attnlib as al
    >>> Q, K, V = (np.random.default_rng(0).standard_normal((70, 8)) for _ in range(3))
    >>> O, lse = flash_forward(Q, K, V, is_causal=True)
    >>> bool(np.allclose(O, al.attention(Q, K, V, is_causal=True), rtol=1e-12, atol=1e-14))
    True
    >>> Qh = np.random.default_rng(1).standard_normal((2, 4, 70, 8))  # batch 2, 4 heads
    >>> Kh, Vh = Qh[:, :2], Qh[:, 2:]  # 2 key/value heads, each shared by 2 query heads
    >>> O, lse = flash_forward(Qh, Kh, Vh, enable_gqa=True)
    >>> O.shape, lse.shape
    ((2, 4, 70, 8), (2, 4, 70))
    """
    if is_batched(Q):
        kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
        return forward_heads(Q, K, V, **kw, forward=_forward, all_heads=_forward_all_heads)
    check_bool("enable_gqa", enable_gqa)
    Q, K, V = check_qkv(Q, K, V)
    tau = check_scale(scale, Q.shape[1])
    return _forward(Q, K, V, tau, mask, is_causal)


def _forward(Q, K, V, tau, mask, is_causal):
    """The forward kernel on validated 2-D float arrays (converted to their common dtype
    here): one head."""
    mask = check_mask(mask, Q.shape[0], K.shape[0])
    dtype = float_dtype(Q, K, V)
    _refuse_oversized("flash_forward", dict(Q=Q, K=K, V=V, mask=mask), dtype, 1)
    Q, K, V = (_frozen(x.astype(dtype, copy=False)) for x in (Q, K, V))
    keep = _keep(mask, is_causal, Q.shape[0], K.shape[0])
    _refuse_overflow(Q, K, tau)
    O, lse = _run_forward_kernel(Q[None], K[None], V[None], tau, *keep, 1)
    return O[0], lse[0]


def _forward_all_heads(Q, K, V, tau, is_causal, g):
    """The forward kernel on every head at once, for validated arrays of one float dtype:
    Q (heads, n, d), K (heads // g, m, d), V (heads // g, m, d_v), no mask. None when the
    logits' overflow check needs each head's own products (the caller then goes head by
    head)."""
    _refuse_oversized("flash_forward", dict(Q=Q, K=K, V=V), Q.dtype, Q.shape[0])
    Q, K, V = (_frozen(x) for x in (Q, K, V))
    if not _logits_bounded(Q, K, tau):
        return None
    return _run_forward_kernel(Q, K, V, tau, _NO_MASK, False, bool(is_causal), g)


def _run_forward_kernel(Q, K, V, tau, keep, has_mask, is_causal, g):
    """O (heads, n, d_v) and lse (heads, n) by :func:`_run_forward` on frozen 3-D arrays,
    with V scaled down first when its rows could overflow the accumulator
    (:func:`_value_shift`), and BLAS on the calling thread."""
    heads, n, d = Q.shape
    dv = V.shape[2]
    br, bc = block_sizes(d, dv)
    shift = _value_shift(V)
    if shift:
        V = _frozen(np.ldexp(V, -shift))
    O = np.empty((heads, n, dv), dtype=Q.dtype)
    lse = np.empty((heads, n), dtype=Q.dtype)
    KT = _blocked_transpose(K, bc)
    err = np.zeros(ERR_SLOTS, np.int64)
    with blas_on_calling_thread():
        _run_forward(Q, K, KT, V, keep, has_mask, tau, is_causal, br, bc, g, O, lse, err)
    _raise_reported(err)
    if shift:
        np.ldexp(O, shift, out=O)
    return O, lse


def _backward_all_heads(Q, K, V, O, dO, lse, tau, is_causal, g):
    """The backward kernel on every head at once (arrays as in :func:`_forward_all_heads`,
    O, dO (heads, n, d_v) and lse (heads, n)); None as there. Needs (G - 1) extra copies of
    the whole dQ, as :func:`flash_backward` needs of one head's."""
    arrays = dict(Q=Q, K=K, V=V, O=O, dO=dO, lse=lse)
    _refuse_oversized("flash_backward", arrays, Q.dtype, Q.shape[0])
    Q, K, V, O, dO, lse = (_frozen(x) for x in (Q, K, V, O, dO, lse))
    if not _logits_bounded(Q, K, tau):
        return None
    return _run_backward_kernel(Q, K, V, O, dO, lse, tau, _NO_MASK, False, bool(is_causal), g)


def _run_backward_kernel(Q, K, V, O, dO, lse, tau, keep, has_mask, is_causal, g):
    """dQ, dK, dV by :func:`_run_backward` on frozen 3-D arrays (heads first), with BLAS on
    the calling thread, made finite where the gradients are by
    :func:`attnlib.exact._finite_in_dO` (the pass is linear in dO)."""

    def backward(dO):
        return _backward_kernel(Q, K, V, O, _frozen(dO), lse, tau, keep, has_mask, is_causal, g)

    return _finite_in_dO(backward, dO)


def _backward_kernel(Q, K, V, O, dO, lse, tau, keep, has_mask, is_causal, g):
    """One run of :func:`_run_backward` (see :func:`_run_backward_kernel`)."""
    heads, n, d = Q.shape
    m, dv = V.shape[1:]
    dtype = Q.dtype
    br, bc = block_sizes(d, dv)
    # the terms of the lse check's slack, max‖k_j‖ of each query head's key head (first: the
    # norms' temporaries are freed before the large allocations, so they add nothing to the
    # peak)
    kmax = np.repeat(_row_norms(K).max(axis=1, initial=0.0), g)
    slack = _lse_slack_terms(dtype, d, m, tau, kmax)
    dQ = np.zeros(Q.shape, dtype=dtype)
    dK = np.zeros(K.shape, dtype=dtype)
    dV = np.zeros(V.shape, dtype=dtype)
    dQg = np.zeros((dq_groups(m, d, dv) - 1, heads, n, d), dtype=dtype)
    D = np.empty((heads, n))
    KT, VT = _blocked_transpose(K, bc), _blocked_transpose(V, bc)
    args = (Q, K, KT, V, VT, O, dO, lse, D, slack, keep, has_mask, tau, is_causal, br, bc, g)
    err = np.zeros(ERR_SLOTS, np.int64)
    with blas_on_calling_thread():
        _run_backward(*args, dK, dV, dQ, dQg, err)
    _raise_reported(err, heads)
    return dQ, dK, dV


def _raise_reported(err: np.ndarray, heads: int = 1) -> None:
    """Turn what a kernel reported in ``err`` (see :class:`attnlib._tiles.Scores`) into an
    exception; its outputs are then discarded, never returned."""
    if err[ERR_BLAS]:
        raise RuntimeError(
            f"a tile product of the compiled kernel would have passed BLAS an illegal "
            f"argument (gemm parameter {int(err[ERR_BLAS])}); no result is returned. "
            "Please report this with the shapes and strides of the inputs."
        )
    if err[ERR_LSE_ROW]:
        row = int(err[ERR_LSE_ROW]) - 1
        where = f"row {row}" if heads == 1 else f"row {row} of head {int(err[ERR_LSE_HEAD])}"
        raise AttnInputError(
            f"lse is not the log-sum-exp of the logits scale * Q @ K.T: at {where} a logit "
            "exceeds it by more than rounding allows (P = exp(logit - lse) > 1); pass the lse "
            "that the forward pass returned for these Q, K, scale and mask"
        )


def flash_backward(
    Q, K, V, O, dO, lse, *, scale=None, mask=None, is_causal=False, enable_gqa=False
):
    """Gradients through softmax attention by FlashAttention-2's tiled backward pass.

    Same contract as :func:`attnlib.attention_backward` (FA2 Alg. 2), with P recomputed tile by
    tile from ``lse``, in O((n + m)·d) extra memory. Key blocks run in :func:`dq_groups` fixed
    groups, each with its own copy of dQ, added in a fixed order: no data races, and results
    bitwise independent of the number of threads. Batched input without a mask runs every head
    in one parallel call (with a mask, head by head), each head's result bit for bit the 2-D
    kernel's; dK and dV of a key/value head shared by grouped query heads are the sums over
    those heads, added in the order of the heads.

    Parameters
    ----------
    Q, K, V : (n, d), (m, d), (m, d_v), or batched (..., H, n, d), (..., H_kv, m, d),
        (..., H_kv, m, d_v)
    O, lse : the outputs of :func:`flash_forward` (or :func:`attnlib.attention_forward`)
    dO : shaped like O, (n, d_v) or (..., H, n, d_v)
    scale, mask, is_causal, enable_gqa : as in :func:`flash_forward`

    Returns
    -------
    dQ, dK, dV : shaped like Q, K, V. Fully masked rows contribute nothing.

    Raises
    ------
    AttnInputError
        as :func:`flash_forward`; when O, dO or lse does not match Q and V; when lse is not
        the forward pass's (a logit of its row exceeds it by more than rounding allows, so
        P = exp(S − lse) > 1); when a gradient does not fit the dtype.
    RuntimeError
        if a tile product would pass BLAS an illegal argument (a defect, never a result).

    Examples
    --------
    >>> from attnlib import attention_backward
    >>> rng = np.random.default_rng(1)
    >>> Q, K, V, dO = (rng.standard_normal((70, 8)) for _ in range(4))
    >>> O, lse = flash_forward(Q, K, V)
    >>> pairs = zip(flash_backward(Q, K, V, O, dO, lse), attention_backward(Q, K, V, O, dO, lse))
    >>> all(np.allclose(ours, exact, rtol=1e-10, atol=1e-12) for ours, exact in pairs)
    True
    """
    if is_batched(Q):
        kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
        return backward_heads(
            Q, K, V, O, dO, lse, **kw, backward=_backward, all_heads=_backward_all_heads
        )
    check_bool("enable_gqa", enable_gqa)
    Q, K, V, O, dO, lse = check_backward_inputs(Q, K, V, O, dO, lse)
    tau = check_scale(scale, Q.shape[1])
    return _backward(Q, K, V, O, dO, lse, tau, mask, is_causal)


def _backward(Q, K, V, O, dO, lse, tau, mask, is_causal):
    """The backward kernel on validated 2-D float arrays (converted to their common dtype
    here): one head."""
    mask = check_mask(mask, Q.shape[0], K.shape[0])
    dtype = float_dtype(Q, K, V, O, dO, lse)
    arrays = dict(Q=Q, K=K, V=V, O=O, dO=dO, lse=lse, mask=mask)
    _refuse_oversized("flash_backward", arrays, dtype, 1)
    Q, K, V, O, dO, lse = (_frozen(x.astype(dtype, copy=False)) for x in (Q, K, V, O, dO, lse))
    keep = _keep(mask, is_causal, Q.shape[0], K.shape[0])
    _refuse_overflow(Q, K, tau)
    arrays = (x[None] for x in (Q, K, V, O, dO, lse))
    dQ, dK, dV = _run_backward_kernel(*arrays, tau, *keep, 1)
    return dQ[0], dK[0], dV[0]


def forward_backward(
    Q, K, V, dO, *, scale=None, mask=None, is_causal=False, enable_gqa=False, kernels="flash"
):
    """One training step of attention: the forward pass, then the backward pass for the
    upstream gradient dO, shaped like O. ``kernels="flash"`` runs :func:`flash_forward` and
    :func:`flash_backward`; ``"exact"`` runs :func:`attnlib.attention_forward` and
    :func:`attnlib.attention_backward`, which materialise the n×m scores. The other arguments
    are those of :func:`flash_forward`.

    Returns
    -------
    (O, lse, dQ, dK, dV)

    Raises
    ------
    AttnInputError
        if ``kernels`` is unknown, or for the arguments' errors (see :func:`flash_backward`).

    Examples
    --------
    >>> Q = K = V = dO = np.eye(3)
    >>> flash, exact = (forward_backward(Q, K, V, dO, kernels=k) for k in ("flash", "exact"))
    >>> all(np.allclose(a, b, rtol=1e-12, atol=1e-15) for a, b in zip(flash, exact))
    True
    """
    check_choice("kernels", kernels, ("flash", "exact"))
    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    if kernels == "flash":
        forward, backward = flash_forward, flash_backward
    else:
        from .exact import attention_backward as backward
        from .exact import attention_forward as forward
    O, lse = forward(Q, K, V, **kw)
    return (O, lse, *backward(Q, K, V, O, dO, lse, **kw))


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
