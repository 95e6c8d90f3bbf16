"""Compiled tiled attention: FlashAttention-2's forward and backward on the CPU, in numba.

The exact core (:mod:`attnlib.exact`) materialises the n×m score matrix. The kernels here never
do: they walk (B_r × B_c) tiles of it (:func:`attnlib.costs.block_sizes`), like the schedules
that :mod:`attnlib.iomodel` runs on the two-level machine, and keep only O((n + m)·d) extra
memory (:func:`attnlib.costs.extra_memory_bytes`).

- **Forward** (FA2 Alg. 1): each query block streams every key/value block once, keeps a running
  row maximum and row sum (the online softmax), and rescales its output accumulator.
- **Backward** (FA2 Alg. 2): P is *recomputed* tile by tile from the stored row log-sum-exp
  instead of being stored, trading about twice the forward's arithmetic for n×m memory.

**Threads, and why the result does not depend on their number.** Query blocks are independent in
the forward pass, so ``prange`` runs them in parallel. In the backward pass FA2 loops over key
blocks, and every key block adds into every row of dQ: running key blocks in parallel is a data
race on dQ (GPUs use atomic adds, whose order is not fixed). The key blocks go to :data:`DQ_GROUPS`
fixed groups (block j to group j mod DQ_GROUPS, :func:`attnlib.costs.dq_groups`) that run in
parallel. Each group owns its blocks' dK_j and dV_j and its own copy of dQ (group 0 writes into dQ
itself), so one pass does FA2's 5 tile products and 1 exponential per tile; the copies are then
added in the fixed order of the groups. The groups and every sum's order depend only on the shapes,
never on the threads: results are bitwise identical for any number of threads. The price is
(DQ_GROUPS - 1)·n·d extra numbers, and at most DQ_GROUPS threads in the backward pass.

**Numerics.** Every tile product is one BLAS gemm (SciPy's BLAS called directly, see
:mod:`attnlib._blas`), run on the calling thread (:func:`blas_on_calling_thread`). Its
alpha applies the scale τ to the logits, and its beta = 1 adds P_ijᵀdO_i, dS_ijᵀQ_i, dS_ijK_j and
P_ijV_j straight into their accumulators, in the inputs' dtype, as a naive computation's long
gemm would; the row sums, D = rowsum(dO∘O), dP - D and the final sum of the dQ copies are
float64. ``exp`` is a short vectorisable routine (:mod:`attnlib._exp`) run in place on each row
of a tile, the row's shift (maximum or lse) subtracted in the same pass; its fused multiply-adds
(``contract``) are the only fast-math flag used anywhere. Logits that overflow the dtype are
refused before any kernel runs (:func:`check_logits_finite`).

**Inputs.** :func:`flash_forward` and :func:`flash_backward` take the exact core's arguments
and refuse the same ones: both describe the call once with :func:`attnlib._heads.normalise`,
then run. What the kernels need beyond that (their memory, logits in range, frozen strides)
is checked by :mod:`attnlib._guards`.

**Costs.** :mod:`attnlib.costs` counts the kernels' tiles, extra memory and flops, and times the
two ingredients of a tile on the machine at hand. :func:`attnlib.forward_backward` runs one
training step by these kernels or another algorithm.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba import prange

from ._blas import blas_on_calling_thread
from ._checks import (
    AttnInputError,
    as_float_array,
    check_cols,
    check_loss_inputs,
    check_positive_real,
    float_dtype,
)
from ._guards import _frozen, _kernel_parts, _refuse_overflow, _refuse_overflow_2d, _value_shift
from ._heads import normalise
from ._tiles import (
    ERR_BLAS,
    ERR_LSE_HEAD,
    ERR_LSE_ROW,
    ERR_SLOTS,
    Scores,
    Upstream,
    _backward_key_block,
    _cdiv,
    _forward_block,
    _interleave,
)
from .config import DQ_GROUPS
from .costs import block_sizes, dq_groups
from .exact import _finite_in_dO
from .logits import _lse_slack_terms, _row_norms

__all__ = [
    "flash_forward",
    "flash_backward",
    "flash_attention_loss_grad",
    "check_logits_finite",
    "DQ_GROUPS",
    "KERNELS",
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
def _run_forward(Q, K, KT, V, keep, has_mask, tau, is_causal, br, bc, g, O, lse, err):
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
        s = Scores(Q[h], K[j], KT[j], tau, keep, has_mask, is_causal, br, bc, err)
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
    is_causal,
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
    the heads, bit for bit what running each query head alone and adding its gradients in
    that order gives.
    (3) dQ ← τ·(dQ + Σ copies), summed in float64 in the fixed order of the groups for every
    entry, rows in parallel.
    """
    # each prange loop has names of its own (prange takes a name that lives on after the loop
    # for a reduction) and stores through plain names (a store through a tuple's field is lost)
    heads, n, d_v = O.shape
    for r in prange(heads * n):
        h = r // n
        i = r % n
        dot = 0.0
        for k in range(d_v):
            dot += np.float64(dO[h, i, k]) * np.float64(O[h, i, k])
        D[h, i] = dot
    groups = dQg.shape[0] + 1
    slack_q, slack_lse, slack_abs = slack
    m, d = K.shape[1], K.shape[2]
    kblocks = _cdiv(m, bc)
    scratch_rows = bc if g > 1 else 0
    for t in prange(K.shape[0] * groups):
        j = t // groups
        grp = t % groups
        dKh = np.empty((scratch_rows, d), dK.dtype)  # one head's block of dK (and dV), g > 1
        dVh = np.empty((scratch_rows, d_v), dV.dtype)
        for h in range(j * g, (j + 1) * g):
            s = Scores(Q[h], K[j], KT[j], tau, keep, has_mask, is_causal, br, bc, err)
            u = Upstream(
                V[j], VT[j], O[h], dO[h], lse[h], D[h], h, slack_q[h], slack_lse, slack_abs
            )
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
                    for c in range(d_v):
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


#: Every compiled entry point; each has one signature per dtype (see
#: :func:`attnlib._guards._frozen`).
KERNELS = (_run_forward, _run_backward)


# ---------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------


_NO_MASK = _frozen(np.ones((1, 1), dtype=np.bool_))


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
    _refuse_overflow_2d(Q.astype(dtype, copy=False), K.astype(dtype, copy=False), tau)


def flash_forward(Q, K, V, *, scale=None, mask=None, is_causal=False, enable_gqa=False):
    """Softmax attention by FlashAttention-2's tiled forward pass, in O((n + m)·d) extra memory.

    Same contract as :func:`attnlib.attention_forward` (FA2 Alg. 1, run on a CPU): the same
    arguments, accepted and refused alike with the same messages, and the same results to
    rounding. Batched, multi-head input has PyTorch's ``scaled_dot_product_attention``
    layout; the (head, query block) pairs of every head run in one parallel call, or of each
    run of heads that share a keep-mask (:meth:`attnlib._heads.Problem.runs`), each head's
    result bit for bit that of the 2-D kernel.

    Parameters
    ----------
    Q, K, V, scale, mask, is_causal, enable_gqa : as in :func:`attnlib.attention_forward`:
        Q (n, d), K (m, d), V (m, d_v) in float32 or float64, or batched multi-head
        (..., H, n, d), (..., H_kv, m, d), (..., H_kv, m, d_v); ``is_causal`` keeps key j of
        query i only if j ≤ i (top-left aligned, as PyTorch's) and is refused together with
        ``mask``: pass the combined keep-mask ``mask & np.tri(n, m, dtype=bool)`` instead

    Returns
    -------
    O : (n, d_v) (batched: (..., H, n, d_v)) and lse : (n,) (batched: (..., H, n)), in the
    inputs' common dtype. A fully masked row gives O = 0 and lse = -inf. The first call
    compiles the kernels for the dtype; numba caches them on disk for later processes.

    Raises
    ------
    AttnInputError
        as :func:`attnlib.attention_forward`, with its messages: for invalid arguments, when
        a kept logit τ·q_i·k_j overflows the dtype, and, before anything is converted or
        allocated, when the working memory (conversions, copies and
        :func:`attnlib.costs.extra_memory_bytes` for every head) would exceed
        :data:`attnlib.config.MAX_ALLOCATION_BYTES`.

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
    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    p = normalise(Q, K, V, **kw, what="flash_forward", working=_kernel_parts, contiguous=True)
    _refuse_overflow(p)
    O = np.empty((p.heads, p.n, p.d_v), dtype=p.dtype)
    lse = np.empty((p.heads, p.n), dtype=p.dtype)
    Q, K, V = (_frozen(x) for x in (p.Q, p.K, p.V))
    for q, kv, g in p.runs():
        args = (Q[q], K[kv], V[kv], p.scale, p.keep(q.start), p.is_causal, g)
        _forward_kernel(*args, O[q], lse[q])
    return p.unflatten(O), p.unflatten(lse)


def _forward_kernel(Q, K, V, tau, keep, is_causal, g, O, lse):
    """:func:`_run_forward` on frozen 3-D arrays (heads first) and the keep-mask or None,
    written into O (heads, n, d_v) and lse (heads, n), with V scaled down first when its
    rows could overflow the accumulator (:func:`attnlib._guards._value_shift`)."""
    br, bc = block_sizes(Q.shape[2], V.shape[2])
    shift = _value_shift(V)
    if shift:
        V = _frozen(np.ldexp(V, -shift))
    KT = _blocked_transpose(K, bc)
    has_mask = keep is not None
    keep = _frozen(keep) if has_mask else _NO_MASK
    err = np.zeros(ERR_SLOTS, np.int64)
    with blas_on_calling_thread():
        _run_forward(Q, K, KT, V, keep, has_mask, tau, is_causal, br, bc, g, O, lse, err)
    _raise_reported(err)
    if shift:
        np.ldexp(O, shift, out=O)


def _backward_kernel(Q, K, V, O, dO, lse, tau, keep, is_causal, g, kmax, grads, heads):
    """:func:`_run_backward` on frozen 3-D arrays (heads first) and the keep-mask or None,
    adding into the zeroed ``grads`` = (dQ, dK, dV); ``kmax`` is max‖k_j‖ of each key/value
    head (for the lse check), ``heads`` (the first head's index, how many in all)."""
    run, n, d = Q.shape
    m, d_v = V.shape[1:]
    br, bc = block_sizes(d, d_v)
    slack = _lse_slack_terms(Q.dtype, d, m, tau, np.repeat(kmax, g))
    dQg = np.zeros((dq_groups(m, d, d_v) - 1, run, n, d), dtype=Q.dtype)
    D = np.empty((run, n))
    KT, VT = _blocked_transpose(K, bc), _blocked_transpose(V, bc)
    has_mask = keep is not None
    keep = _frozen(keep) if has_mask else _NO_MASK
    args = (Q, K, KT, V, VT, O, dO, lse, D, slack, keep, has_mask, tau, is_causal, br, bc, g)
    dQ, dK, dV = grads
    err = np.zeros(ERR_SLOTS, np.int64)
    with blas_on_calling_thread():
        _run_backward(*args, dK, dV, dQ, dQg, err)
    _raise_reported(err, *heads)


def _raise_reported(err: np.ndarray, first: int = 0, heads: int = 1) -> None:
    """Turn what a kernel reported in ``err`` (see :class:`attnlib._tiles.Scores`) into an
    exception, its head counted from ``first`` of ``heads``: the outputs are never returned."""
    if err[ERR_BLAS]:
        raise RuntimeError(
            f"a tile product of the compiled kernel would have passed BLAS an illegal "
            f"argument (gemm parameter {int(err[ERR_BLAS])}); no result is returned. "
            "Please report this with the shapes and strides of the inputs."
        )
    if err[ERR_LSE_ROW]:
        row = int(err[ERR_LSE_ROW]) - 1
        head = first + int(err[ERR_LSE_HEAD])
        where = f"row {row}" if heads == 1 else f"row {row} of head {head}"
        raise AttnInputError(
            f"lse is not the log-sum-exp of the logits scale * Q @ K.T: at {where} a logit "
            "exceeds it by more than rounding allows (P = exp(logit - lse) > 1); pass the lse "
            "that the forward pass returned for these Q, K, scale and mask"
        )


def flash_backward(
    Q, K, V, O, dO, lse, *, scale=None, mask=None, is_causal=False, enable_gqa=False
):
    """Gradients through softmax attention by FlashAttention-2's tiled backward pass.

    Same contract as :func:`attnlib.attention_backward` (FA2 Alg. 2): the same arguments,
    accepted and refused alike with the same messages, and the same results to rounding,
    with P recomputed tile by tile from ``lse``, in O((n + m)·d) extra memory. Key blocks run
    in :func:`attnlib.costs.dq_groups` fixed groups, each with its own copy of dQ, added in a
    fixed order: no data races, and results bitwise independent of the number of threads.
    The heads run as in :func:`flash_forward`, each head's result bit for bit the 2-D
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
    kw = dict(scale=scale, mask=mask, is_causal=is_causal, enable_gqa=enable_gqa)
    what, outputs = "flash_backward", (O, dO, lse)
    p = normalise(Q, K, V, **kw, outputs=outputs, what=what, working=_kernel_parts, contiguous=True)
    _refuse_overflow(p)
    Q, K, V, O, lse = (_frozen(x) for x in (p.Q, p.K, p.V, p.O, p.lse))
    # max‖k_j‖ of each key/value head, first: the norms' temporaries are freed before the
    # large allocations, so they add nothing to the peak (beyond the float range: inf)
    kmax = _row_norms(K).max(axis=1, initial=0.0)

    def backward(dO):
        dO = _frozen(dO)
        dQ = np.zeros(Q.shape, dtype=p.dtype)
        dK, dV = np.zeros(K.shape, dtype=p.dtype), np.zeros(V.shape, dtype=p.dtype)
        for q, kv, g in p.runs():
            # one query head of a group adds its share to its key/value head's, in head order
            share = g != p.g
            dK_run = np.zeros((1, p.m, p.d), dtype=p.dtype) if share else dK[kv]
            dV_run = np.zeros((1, p.m, p.d_v), dtype=p.dtype) if share else dV[kv]
            keep = p.keep(q.start)
            args = (Q[q], K[kv], V[kv], O[q], dO[q], lse[q], p.scale, keep, p.is_causal, g)
            _backward_kernel(*args, kmax[kv], (dQ[q], dK_run, dV_run), (q.start, p.heads))
            if share:
                dK[kv] += dK_run
                dV[kv] += dV_run
        return dQ, dK, dV

    dQ, dK, dV = _finite_in_dO(backward, p.dO)  # the pass is linear in dO
    return p.unflatten(dQ), p.unflatten(dK, kv=True), p.unflatten(dV, kv=True)


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
