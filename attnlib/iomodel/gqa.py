"""Grouped-query and multi-query attention on the two-level machine, and decoding.

Shapes follow PyTorch's ``scaled_dot_product_attention`` with ``enable_gqa``: Q is
(H, n, d), K is (H_kv, m, d), V is (H_kv, m, d_v), H a multiple of H_kv, and query head h
uses key/value head h // g with g = H / H_kv. The schedules are FlashAttention-2's, run
either **grouped** (the g query heads of a group stacked into one (g·n)×d query matrix, so
each loaded K, V block serves the whole group) or **one head at a time** (as if K and V were
repeated g times); :func:`gqa_kv_reuse` is the K/V traffic the first saves. Decoding is
n = 1: one new query per head against a cache of m keys.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    check_bool,
    check_int,
    check_scale,
    check_shape,
    float_dtype,
)
from .blocks import W_f, d_pass_rows, flash_backward_blocks, flash_forward_blocks
from .bounds import _finite, _over
from .flash import flash_backward, flash_backward_count, flash_forward
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
)

__all__ = [
    "gqa_flash_forward",
    "gqa_flash_backward",
    "gqa_flash_forward_count",
    "gqa_flash_backward_count",
    "gqa_kv_reuse",
    "gqa_lower_bound",
    "decode_forward",
    "decode_count",
    "decode_lower_bound",
]


# =========================================================================================
# Input checks
# =========================================================================================


def _check_heads(Q, K, V, *, query: str = "Q"):
    """Q (H, n, d), K (H_kv, m, d), V (H_kv, m, d_v) with H a multiple of H_kv. ``query`` is
    the public name of Q when it is given otherwise (``q`` (H, d) of a decoding step, passed
    here as (H, 1, d))."""
    Q = as_float_array(query, Q, ndim=3)
    K = as_float_array("K", K, ndim=3)
    V = as_float_array("V", V, ndim=3)
    H, _, d = Q.shape
    H_kv, m, _ = K.shape
    if K.shape[2] != d:
        raise AttnInputError(f"K must have d = {d} columns like {query}, got shape {K.shape}")
    if V.shape[:2] != (H_kv, m):
        raise AttnInputError(
            f"V must have shape (H_kv, m, d_v) with (H_kv, m) = {(H_kv, m)} like K, got {V.shape}"
        )
    if H % H_kv:
        raise AttnInputError(
            f"{query}'s head count H = {H} must be a multiple of K's head count H_kv = {H_kv}"
        )
    return Q, K, V


def _check_head_counts(H, H_kv):
    H, H_kv = check_int("H", H), check_int("H_kv", H_kv)
    if H % H_kv:
        raise AttnInputError(f"H = {H} must be a multiple of H_kv = {H_kv}")
    return H, H_kv, H // H_kv


def _check_steps(H, H_kv, n, m, d, d_v, M, grouped, which):
    """Refuse, before the first run, H_kv grouped runs (g·n query rows each) or H runs by
    head whose block steps add up to more than the machine's budget. M is validated (and
    refused below the schedule's minimum) by the block rule."""
    M = check_int("M", M)
    runs, rows = (H_kv, (H // H_kv) * n) if grouped else (H, n)
    if which == "forward":
        B_r, B_c = flash_forward_blocks(d, M, d_v=d_v)
        per_run = ceil_div(rows, B_r) * ceil_div(m, B_c)
    else:
        B_r, B_c = flash_backward_blocks(d, M, d_v=d_v)
        per_run = ceil_div(rows, B_r) * ceil_div(m, B_c) + ceil_div(rows, d_pass_rows(B_r, M, d_v))
    check_machine_steps(
        runs * per_run, f"gqa_flash_{which}", "a larger M, fewer heads or shorter Q and K"
    )


def _sum_counts(counts):
    """The count of runs one after the other: reads and writes add, the peak is the largest."""
    return functools.reduce(operator.add, counts)


# =========================================================================================
# Forward
# =========================================================================================


def gqa_flash_forward(Q, K, V, *, M: int, scale=None, grouped=True):
    """Grouped-query FlashAttention-2 forward (FA2 Alg. 1) on a machine of M words.

    Parameters
    ----------
    Q : (H, n, d), K : (H_kv, m, d), V : (H_kv, m, d_v) float arrays, H a multiple of H_kv
    M : fast memory in words, at least :func:`flash_forward_min_M`
    scale : τ > 0, default 1/√d
    grouped : True stacks each group's g query heads against their shared K, V (K/V blocks
        reused across the group); False runs the H heads one at a time

    Returns
    -------
    O (H, n, d_v), lse (H, n), IOCount: the sum over the runs (reads and writes add, peak is
    the largest), equal to :func:`gqa_flash_forward_count`. O equals
    :func:`attnlib.attention_forward` with ``enable_gqa`` semantics (head h uses K[h // g]).

    Raises
    ------
    AttnInputError for arrays of the wrong shapes or dtypes, H not a multiple of H_kv, M
    below the minimum, logits that overflow the dtype, or runs of more than
    :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` block steps in all.
    """
    Q, K, V = _check_heads(Q, K, V)
    grouped = check_bool("grouped", grouped)
    H, n, d = Q.shape
    H_kv, m, d_v = V.shape
    _check_steps(H, H_kv, n, m, d, d_v, M, grouped, "forward")
    g = H // H_kv
    tau = check_scale(scale, d)
    dtype = float_dtype(Q, K, V)
    O = np.empty((H, n, d_v), dtype=dtype)
    lse = np.empty((H, n), dtype=dtype)
    counts = []
    for kv in range(H_kv):
        heads = slice(kv * g, (kv + 1) * g)
        if grouped:
            o, ls, c = flash_forward(Q[heads].reshape(g * n, d), K[kv], V[kv], M=M, scale=tau)
            O[heads] = o.reshape(g, n, d_v)
            lse[heads] = ls.reshape(g, n)
            counts.append(c)
        else:
            for h in range(kv * g, (kv + 1) * g):
                O[h], lse[h], c = flash_forward(Q[h], K[kv], V[kv], M=M, scale=tau)
                counts.append(c)
    return O, lse, _sum_counts(counts)


def gqa_flash_forward_count(
    H: int, H_kv: int, n: int, d: int, M: int, *, m=None, d_v=None, grouped=True
) -> IOCount:
    """Exact I/O of :func:`gqa_flash_forward` (closed form, no arrays).

    With g = H/H_kv, (B_r, B_c) = :func:`flash_forward_blocks`, D = d + d_v::

        grouped:  reads = H·n·d + H_kv·⌈g·n/B_r⌉·m·D,  peak = W_f(min(B_r, g·n), min(B_c, m))
        by head:  reads = H·n·d + H·⌈n/B_r⌉·m·D,       peak = W_f(min(B_r, n), min(B_c, m))
        writes = H·n·(d_v + 1) in both (O and lse)

    i.e. H_kv (or H) copies of :func:`flash_forward_count`. Raises AttnInputError for
    arguments below 1 or H not a multiple of H_kv.

    Examples
    --------
    >>> gqa_flash_forward_count(8, 2, 1024, 64, 16384)
    IOCount(reads=21233664, writes=532480, total=21766144, peak_fast=16120)
    """
    H, H_kv, g = _check_head_counts(H, H_kv)
    n, d, M, m, d_v = check_dims(n, d, M, m, d_v)
    grouped = check_bool("grouped", grouped)
    B_r, B_c = flash_forward_blocks(d, M, d_v=d_v)
    D = d + d_v
    rows = g * n if grouped else n
    runs = H_kv if grouped else H
    reads = H * n * d + runs * ceil_div(rows, B_r) * m * D
    peak = W_f(min(B_r, rows), min(B_c, m), d, d_v)
    return IOCount(reads, H * n * (d_v + 1), peak)


def gqa_kv_reuse(H: int, H_kv: int, n: int, d: int, M: int, *, d_v: int | None = None) -> float:
    """The K/V reuse factor of the grouped schedule: K/V words read head by head divided by
    K/V words read grouped, g·⌈n/B_r⌉ / ⌈g·n/B_r⌉ (between 1 and g; g when g·n <= B_r).
    Raises AttnInputError for arguments below 1 or H not a multiple of H_kv."""
    H, H_kv, g = _check_head_counts(H, H_kv)
    n, d, M, _, d_v = check_dims(n, d, M, None, d_v)
    B_r, _ = flash_forward_blocks(d, M, d_v=d_v)
    return g * ceil_div(n, B_r) / ceil_div(g * n, B_r)


def gqa_lower_bound(H: int, H_kv: int, n: int, d: int, M: int, *, m: int | None = None) -> float:
    """A lower bound on the I/O of grouped-query attention's forward pass (d_v = d):

        max( (H·n + 2·H_kv·m)·d + H·n·d,  H_kv·min(g·n·m·d²/M, g·n·m·d/√M) )

    The first term is the trivial bound (every input read once, O written once). The
    second is **our reading**; no paper we cite states a bound for grouped heads. We treat
    each group as one attention instance with g·n query rows sharing m keys (the
    computation the grouped schedule performs) and apply the shape of SY24 Theorem 3.1,
    stated there for n = m, with the rows and keys kept apart and constant 1.
    Raises AttnInputError for arguments below 1, H not a multiple of H_kv, or a bound beyond
    the float range.
    """
    H, H_kv, g = _check_head_counts(H, H_kv)
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    m = n if m is None else check_int("m", m)
    trivial = (H * n + 2 * H_kv * m) * d + H * n * d
    work = H_kv * g * n * m * d  # exact: H_kv groups of g·n·m·d
    # each quotient of ints taken by logarithms if need be, so that a huge M gives its
    # (small) value and only a bound beyond the float range is refused
    per_groups = min(_over(work * d, M, 1), _over(work, M, 0.5))
    who = "H, n, m or d is"
    return _finite(max(_over(trivial, 1, 1), per_groups), who)


# =========================================================================================
# Backward
# =========================================================================================


def _reduce_rows(M: int, d: int, d_v: int) -> int:
    """Rows per step of the reduction pass: an accumulator and one loaded block fit."""
    return max(1, M // (2 * max(d, d_v)))


def _reduce_partials(partials, M, dtype):
    """Sum g slow (m, w) arrays on the machine, row block by row block; returns sum, count."""
    m, w = partials[0].shape
    parts = {f"part{h}": p for h, p in enumerate(partials)}
    mem = start_run(M, False, dtype, parts, {"sum": (m, w)})
    for rows in block_ranges(m, _reduce_rows(M, w, w)):
        acc = mem.alloc((span(rows), w), dtype=dtype)
        for name in parts:
            blk = mem.load(name, rows)
            acc += blk
            mem.free(blk)
        mem.store("sum", rows, None, acc)
        mem.free(acc)
    return finish_run(mem, ("sum",), False)


def gqa_flash_backward(Q, K, V, O, dO, lse, *, M: int, scale=None, grouped=True):
    """Grouped-query FlashAttention-2 backward (FA2 Alg. 2) on a machine of M words.

    Parameters
    ----------
    Q : (H, n, d), K : (H_kv, m, d), V : (H_kv, m, d_v); O, dO : (H, n, d_v); lse : (H, n)
    M, scale, grouped : as in :func:`gqa_flash_forward`. Head by head, each head's dK, dV
        are written to slow memory and a reduction pass (row blocks of ⌊M/2w⌋ rows, w the
        width) sums the g partial gradients of each group.

    Returns
    -------
    dQ (H, n, d), dK (H_kv, m, d), dV (H_kv, m, d_v), IOCount equal to
    :func:`gqa_flash_backward_count`; the gradients equal the exact ones with K, V shared.

    Raises
    ------
    AttnInputError for arrays of the wrong shapes or dtypes, M below the minimum, logits that
    overflow the dtype, or runs of more than
    :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` block steps in all.
    """
    Q, K, V = _check_heads(Q, K, V)
    H, n, d = Q.shape
    H_kv, m, d_v = V.shape
    O = as_float_array("O", O, ndim=3)
    check_shape("O", O, (H, n, d_v), "(H, n, d_v)")
    dO = as_float_array("dO", dO, ndim=3)
    check_shape("dO", dO, (H, n, d_v), "(H, n, d_v) like O")
    lse = as_float_array("lse", lse, ndim=2, allow_neg_inf=True)
    check_shape("lse", lse, (H, n), "(H, n)")
    grouped = check_bool("grouped", grouped)
    _check_steps(H, H_kv, n, m, d, d_v, M, grouped, "backward")
    g = H // H_kv
    tau = check_scale(scale, d)
    dtype = float_dtype(Q, K, V, O, dO, lse)
    dQ = np.empty((H, n, d), dtype=dtype)
    dK = np.empty((H_kv, m, d), dtype=dtype)
    dV = np.empty((H_kv, m, d_v), dtype=dtype)
    counts = []
    for kv in range(H_kv):
        heads = slice(kv * g, (kv + 1) * g)
        if grouped:
            dq, dK[kv], dV[kv], c = flash_backward(
                Q[heads].reshape(g * n, d),
                K[kv],
                V[kv],
                O[heads].reshape(g * n, d_v),
                dO[heads].reshape(g * n, d_v),
                lse[heads].reshape(g * n),
                M=M,
                scale=tau,
            )
            dQ[heads] = dq.reshape(g, n, d)
            counts.append(c)
            continue
        dks, dvs = [], []
        for h in range(kv * g, (kv + 1) * g):
            dQ[h], dk, dv, c = flash_backward(
                Q[h], K[kv], V[kv], O[h], dO[h], lse[h], M=M, scale=tau
            )
            dks.append(dk)
            dvs.append(dv)
            counts.append(c)
        if g > 1:
            dK[kv], c = _reduce_partials(dks, M, dtype)
            counts.append(c)
            dV[kv], c = _reduce_partials(dvs, M, dtype)
            counts.append(c)
        else:
            dK[kv], dV[kv] = dks[0], dvs[0]
    return dQ, dK, dV, _sum_counts(counts)


def gqa_flash_backward_count(
    H: int, H_kv: int, n: int, d: int, M: int, *, m=None, d_v=None, grouped=True
) -> IOCount:
    """Exact I/O of :func:`gqa_flash_backward` (closed form, no arrays).

    Grouped: H_kv copies of :func:`flash_backward_count` with g·n query rows. Head by head:
    H copies with n rows, plus, when g > 1, the reduction of each group's g partial dK and
    dV: reads H·m·(d + d_v), writes H_kv·m·(d + d_v), peak 2·min(⌊M/2w⌋, m)·w for w = d
    and w = d_v. Raises AttnInputError for arguments below 1 or H not a multiple of H_kv.
    """
    H, H_kv, g = _check_head_counts(H, H_kv)
    n, d, M, m, d_v = check_dims(n, d, M, m, d_v)
    grouped = check_bool("grouped", grouped)
    if grouped:
        one = flash_backward_count(g * n, d, M, m=m, d_v=d_v)
        return IOCount(H_kv * one.reads, H_kv * one.writes, one.peak_fast)
    one = flash_backward_count(n, d, M, m=m, d_v=d_v)
    reads, writes, peak = H * one.reads, H * one.writes, one.peak_fast
    if g > 1:
        D = d + d_v
        reads += H * m * D
        writes += H_kv * m * D
        for w in (d, d_v):
            peak = max(peak, 2 * min(_reduce_rows(M, w, w), m) * w)
    return IOCount(reads, writes, peak)


# =========================================================================================
# Decode
# =========================================================================================


def decode_forward(q, K, V, *, M: int, scale=None):
    """One decoding step: each of H query heads (one new token, n = 1) attends to a cache of
    m keys, on a machine of M words (FA2 Alg. 1 with n = 1, the g heads of a group stacked).

    Parameters
    ----------
    q : (H, d), K : (H_kv, m, d), V : (H_kv, m, d_v) float arrays, H a multiple of H_kv
    M : fast memory in words, at least :func:`flash_forward_min_M`
    scale : τ > 0, default 1/√d

    Returns
    -------
    o (H, d_v), lse (H,), IOCount equal to :func:`decode_count`.

    Raises
    ------
    AttnInputError for arrays of the wrong shapes or dtypes, M below the minimum, or logits
    τ·q_h·K_jᵀ that overflow the dtype.
    """
    q = as_float_array("q", q, ndim=2)
    Q, K, V = _check_heads(q[:, None, :], K, V, query="q")
    # the logits are checked here, not only in each group's run, so that the message names q
    g = Q.shape[0] // K.shape[0]
    tau = check_scale(scale, Q.shape[2])
    dtype = float_dtype(Q, K, V)
    for kv in range(K.shape[0]):
        check_run_logits(q[kv * g : (kv + 1) * g], K[kv], tau, dtype, query="q")
    O, lse, c = gqa_flash_forward(Q, K, V, M=M, scale=tau, grouped=True)
    return O[:, 0, :], lse[:, 0], c


def decode_count(
    m: int, d: int, M: int, *, d_v: int | None = None, H: int = 1, H_kv: int = 1
) -> IOCount:
    """Exact I/O of :func:`decode_forward`. With g = H/H_kv, B_r = :func:`flash_forward_blocks`
    and D = d + d_v::

        reads  = H·d + H_kv·⌈g/B_r⌉·m·D     (= H·d + H_kv·m·D once B_r >= g)
        writes = H·(d_v + 1)

    Θ(m·d) per K/V head whatever M is. Raises AttnInputError for arguments below 1 or H not
    a multiple of H_kv.

    Examples
    --------
    >>> decode_count(4096, 128, 65536, H=32, H_kv=8)
    IOCount(reads=8392704, writes=4128, total=8396832, peak_fast=28332)
    """
    m = check_int("m", m)  # required here: the count's m=None would mean m = n = 1
    return gqa_flash_forward_count(H, H_kv, 1, d, M, m=m, d_v=d_v, grouped=True)


def decode_lower_bound(m: int, d: int, *, d_v: int | None = None, H: int = 1, H_kv: int = 1):
    """The trivial lower bound of a decoding step, valid for every M: the inputs q (H·d
    words) and the cache K, V (H_kv·m·(d + d_v)) must each be read and o (H·d_v) written:
    H·(d + d_v) + H_kv·m·(d + d_v). Raises AttnInputError for arguments below 1."""
    H, H_kv, _ = _check_head_counts(H, H_kv)
    m, d = check_int("m", m), check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    return H * (d + d_v) + H_kv * m * (d + d_v)
