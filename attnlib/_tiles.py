"""The tiles of the compiled kernels: their sizes, and the compiled (numba) steps on them.

Sizes: :func:`block_sizes` (B_r × B_c), :func:`dq_groups` (the backward's groups of key blocks)
and :func:`extra_memory_bytes` (what the kernels allocate), exported by :mod:`attnlib.fast`.
Steps: one BLAS gemm per tile product, the logits and probabilities of a tile, and one block of
each pass of FlashAttention-2. The arguments that every tile needs travel together in two named
tuples, :class:`Scores` (what a tile of logits τ·Q_iK_jᵀ needs) and :class:`Upstream` (what the
backward pass reads besides). The parallel loops over blocks, and the wrappers that validate and
prepare the inputs, are in :mod:`attnlib.fast`.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numba as nb
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba import types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic
from threadpoolctl import ThreadpoolController

from ._checks import check_choice, check_int
from ._exp import _exp_shifted
from .config import DQ_GROUPS


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
# Tile sizes, groups and extra memory
# ---------------------------------------------------------------------------------------

#: The query and key rows of a tile, at most: 256 × 256 tiles of scores (256 KiB in float32).
#: Chosen by timing the kernels over tile shapes at d = 32, 64 and 128 on a 2-core machine
#: (chapter 10): smaller tiles spend more of their time in BLAS's per-call work (packing the
#: operands) and in the loops between the products; larger ones leave too few blocks to share
#: among threads at n = 512 and gain nothing at large n.
MAX_BLOCK = 256

#: The most multiply-adds of one tile product, B_r·B_c·max(d, d_v) ≤ 2^23: for heads wider
#: than 128 the tiles shrink, which bounds what one thread works on (a tile of scores and its
#: blocks of Q, K, V, dO) as heads grow.
#: Products this large are ones that OpenBLAS would split over threads of its own (above 2^18,
#: interface/gemm.c), so the kernels pin BLAS to the calling thread while they run
#: (:func:`blas_on_calling_thread`): the threads are numba's, one per block.
TILE_MULADDS = 1 << 23


def block_sizes(d: int, dv: int | None = None) -> tuple[int, int]:
    """(B_r, B_c): query rows and key rows per tile of the compiled kernels, for head
    dimensions d and d_v (default d).

    :data:`MAX_BLOCK` × :data:`MAX_BLOCK`, with B_r and then B_c halved in turn (not below 16)
    while a tile product, B_r·B_c·max(d, d_v) multiply-adds, exceeds :data:`TILE_MULADDS`.
    The sizes depend on the head dimensions only, never on the threads, so neither do the
    results.

    Raises
    ------
    AttnInputError
        if d or dv is not a positive integer.

    Examples
    --------
    >>> block_sizes(64), block_sizes(256), block_sizes(512)
    ((256, 256), (128, 256), (128, 128))
    """
    d = check_int("d", d)
    w = max(d, d if dv is None else check_int("dv", dv))
    br = bc = MAX_BLOCK
    while br * bc * w > TILE_MULADDS and (br > 16 or bc > 16):
        if br >= bc and br > 16:
            br //= 2
        else:
            bc //= 2
    return br, bc


def dq_groups(m: int, d: int, dv: int | None = None) -> int:
    """G: the groups of key blocks of the backward pass for m keys, each with its own copy of
    dQ: :data:`DQ_GROUPS`, or the number of key blocks if that is smaller.

    Raises
    ------
    AttnInputError
        if m, d or dv is not a positive integer.

    Examples
    --------
    >>> dq_groups(4096, 64), dq_groups(300, 64), dq_groups(64, 64)
    (4, 2, 1)
    """
    m = check_int("m", m)
    return min(DQ_GROUPS, -(-m // block_sizes(d, dv)[1]))


def extra_memory_bytes(
    n: int, m: int, d: int, dv: int | None = None, *, dtype="float32", threads: int = 0
) -> int:
    """Bytes that :func:`flash_forward` followed by :func:`flash_backward` allocate beyond
    their inputs (chapter 10's proposition on extra memory):

    - the outputs O, lse, dQ, dK and dV: n(d_v + 1) + nd + m(d + d_v) numbers;
    - the blocked transposes of K and V: m(d + d_v) numbers;
    - the G - 1 extra copies of dQ (:func:`dq_groups`): (G - 1)·nd numbers;
    - D = rowsum(dO∘O): n float64 numbers;
    - with ``threads`` > 0, the scratch of that many threads, each working on one block at a
      time: the larger of the forward's (one tile, its B_r × d_v accumulator and a few rows:
      B_rB_c + B_r(d_v + 1) + B_c + 2 numbers and 3·B_r float64 numbers) and the backward's
      (two tiles: 2·B_rB_c + 2 numbers).

    Numbers take the bytes of ``dtype`` ("float32" or "float64").

    Raises
    ------
    AttnInputError
        if a size is not a positive integer, ``threads`` is negative, or ``dtype`` is not
        "float32" or "float64".

    Examples
    --------
    >>> extra_memory_bytes(4096, 4096, 64) / 2**20
    9.046875
    >>> (extra_memory_bytes(4096, 4096, 64, threads=2) - extra_memory_bytes(4096, 4096, 64)) / 2**20
    1.0000839233398438
    """
    n, m, d = (check_int(name, v) for name, v in (("n", n), ("m", m), ("d", d)))
    dv = d if dv is None else check_int("dv", dv)
    threads = check_int("threads", threads, minimum=0)
    size = np.dtype(check_choice("dtype", dtype, ("float32", "float64"))).itemsize
    words = n * (dv + 1) + n * d + 2 * m * (d + dv) + (dq_groups(m, d, dv) - 1) * n * d
    br, bc = block_sizes(d, dv)
    forward = size * (br * bc + br * (dv + 1) + bc + 2) + 8 * 3 * br
    backward = size * (2 * br * bc + 2)
    scratch = max(forward, backward) + 36  # and 9 int32: a product's arguments, its status
    return size * words + 8 * n + threads * scratch


# ---------------------------------------------------------------------------------------
# Tile products: BLAS gemm with alpha and beta
# ---------------------------------------------------------------------------------------


@functools.cache
def _blas_libraries():
    """The BLAS libraries loaded in this process (SciPy's, which the tiles call, among them:
    :mod:`attnlib._tiles` loads it on import), found once."""
    return ThreadpoolController().select(user_api="blas")


class _BlasLimit:
    """The context :func:`blas_on_calling_thread` returns: on entry, each BLAS library whose
    thread count is not 1 is set to 1; on exit, those get their count back. It reads and sets
    the counts through the libraries' own functions (``openblas_get_num_threads`` and the
    like), which threadpoolctl's controllers expose, a microsecond each: a kernel call on a
    small tile grid is short enough for threadpoolctl's own ``limit`` (which gathers every
    library's description first, about 10 µs) to show in its time."""

    __slots__ = ("_restore",)

    def __enter__(self):
        self._restore = []
        for lib in _blas_libraries().lib_controllers:
            threads = lib.get_num_threads()
            if threads is not None and threads != 1:
                lib.set_num_threads(1)
                self._restore.append((lib, threads))
        return self

    def __exit__(self, *exc):
        for lib, threads in reversed(self._restore):
            lib.set_num_threads(threads)
        return False


def blas_on_calling_thread():
    """A context in which BLAS runs every call on the thread that makes it.

    The kernels parallelise over blocks with numba's threads, and each thread calls BLAS on
    its own tiles; a tile product of :data:`TILE_MULADDS` multiply-adds is large enough for
    OpenBLAS to start threads of its own, which would oversubscribe the cores. Inside this
    context BLAS is limited to one thread, and the previous limits come back on exit, also
    when the body raises. The limit is process-wide for the duration of a kernel call.

    Examples
    --------
    >>> with blas_on_calling_thread():
    ...     pass
    """
    return _BlasLimit()


# SciPy's BLAS, the library numba's own np.dot calls: Fortran ?gemm, every argument by pointer.
# The compiled code calls it by symbol name, so numba can cache it on disk; the name is bound
# to this process's address at import.
for _name in ("sgemm", "dgemm"):
    llvm_binding.add_symbol(
        f"attnlib_{_name}", get_cython_function_address("scipy.linalg.cython_blas", _name)
    )


@intrinsic
def _fortran_gemm(typingctx, c, pointers):
    """sgemm or dgemm (by the dtype of the array ``c``) on a tuple of 13 addresses (integers),
    the arguments that Fortran's ?gemm takes by pointer, in its order."""
    symbol = "attnlib_sgemm" if c.dtype == types.float32 else "attnlib_dgemm"
    sig = types.void(c, pointers)

    def codegen(context, builder, signature, args):
        ptr = llvm_ir.IntType(8).as_pointer()
        fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [ptr] * 13)
        fn = cgutils.get_or_insert_function(builder.module, fnty, symbol)
        addresses = cgutils.unpack_tuple(builder, args[1], 13)
        builder.call(fn, [builder.inttoptr(a, ptr) for a in addresses])
        return context.get_dummy_value()

    return sig, codegen


_N, _T = 78, 84  # 'N' and 'T' in an int32, whose first byte Fortran reads (little-endian)

#: The slot of :func:`_gemm`'s ``ints`` where it reports an argument BLAS would reject.
_STATUS = 8


@nb.njit(cache=True)
def _leading_dim(x):
    """BLAS's leading dimension of a row-major 2-d array x (rows, cols): its row stride in
    elements, or -1 if x cannot be handed to BLAS as it is (a column stride other than one
    element, or a row stride that is not a whole number of elements or is below cols).

    A single row's stride is never used, and numpy leaves it arbitrary (0 after ``x[None]``
    or ``np.broadcast_to``, while still flagging x C-contiguous): any leading dimension
    ≥ cols is valid there, and cols is the one returned. The same holds for a column's
    stride when cols = 1."""
    rows, cols = x.shape
    size = x.itemsize
    if cols > 1 and x.strides[1] != size:
        return -1
    if rows <= 1:
        return max(cols, 1)
    stride = x.strides[0]
    if stride % size != 0 or stride // size < max(cols, 1):
        return -1
    return stride // size


@nb.njit(cache=True)
def _gemm(a, ta, b, tb, c, alpha, beta, ints, flts):
    """c = alpha·op(a)·op(b) + beta·c by one BLAS gemm, where op(x) = xᵀ if its flag is set.

    a, b and c are row-major 2-d arrays with unit column stride (each may be a block of rows
    of a larger array). ``ints`` (int32, 9) and ``flts`` (c's dtype, 2) carry the arguments
    that Fortran takes by pointer. numba's ``np.dot`` only computes c = a·b; with beta = 1 a
    tile product adds straight into its accumulator, and alpha applies the scale τ for free.

    BLAS reports an illegal argument on stderr only and returns without computing, which
    would leave c stale. So the arguments are checked here first, as BLAS checks them (and
    the shapes, which it cannot see): on the first bad one, BLAS is not called and its
    parameter number (5 for shapes that do not match) goes to ``ints[8]``, which the
    kernels turn into an exception.
    """
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    kb, nb_ = (b.shape[1], b.shape[0]) if tb else b.shape
    size = c.itemsize
    ldb, lda, ldc = _leading_dim(b), _leading_dim(a), _leading_dim(c)
    # the parameter numbers of the column-major call below, whose A is b and whose B is a
    bad = 5 if (kb != k or nb_ != n or (a.shape[1] if ta else a.shape[0]) != m) else 0
    if bad == 0 and ldb < 0:
        bad = 8
    elif bad == 0 and lda < 0:
        bad = 10
    elif bad == 0 and ldc < 0:
        bad = 13
    if bad:
        if ints[_STATUS] == 0:
            ints[_STATUS] = bad
        return
    # row-major c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ: swap the operands
    ints[0] = _T if tb else _N
    ints[1] = _T if ta else _N
    ints[2] = n
    ints[3] = m
    ints[4] = k
    ints[5] = ldb
    ints[6] = lda
    ints[7] = ldc
    flts[0] = alpha
    flts[1] = beta
    i = ints.ctypes.data
    f = flts.ctypes.data
    A, B, C = a.ctypes.data, b.ctypes.data, c.ctypes.data
    # transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc (of the column-major call)
    _fortran_gemm(
        c, (i, i + 4, i + 8, i + 12, i + 16, f, B, i + 20, A, i + 24, f + size, C, i + 28)
    )


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


#: Bytes of one SIMD vector of :func:`_row_max` (AVX2's 256 bits), and vectors per step.
_VECTOR_BYTES = 32
_MAX_VECTORS = 4


@intrinsic
def _row_max(typingctx, x):
    """max(x) for a contiguous 1-d float array x, -inf if x is empty or all -inf; x holds no
    NaN (logits, or -inf for dropped keys).

    A plain running maximum is a chain of dependent compares that LLVM does not vectorise
    without fast-math flags, and numba's loops over a few running maxima stay scalar too (the
    select does not vectorise). Written in LLVM IR instead: ``_MAX_VECTORS`` vectors of
    running maxima, the vectors then the lanes combined in a fixed order, a scalar loop for the
    last elements. A maximum is exact, so the order changes nothing: the result is a plain
    loop's. On a 256 × 256 float32 tile, row by row: 4.4 µs against 31 µs for 16 running
    maxima in a numba loop (one Zen 3 core).
    """
    if not (isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C"):
        return None
    if x.dtype not in (types.float32, types.float64):
        return None
    sig = x.dtype(x)

    def codegen(context, builder, signature, args):
        dtype = signature.args[0].dtype
        scalar = context.get_data_type(dtype)
        width = _VECTOR_BYTES // (4 if dtype == types.float32 else 8)
        vec = llvm_ir.VectorType(scalar, width)
        i64 = llvm_ir.IntType(64)
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        data = arr.data
        n = builder.extract_value(arr.shape, 0)
        step = _MAX_VECTORS * width
        main = builder.sub(n, builder.srem(n, llvm_ir.Constant(i64, step)))

        def larger(a, b):  # a if a > b else b, lane by lane or scalar
            return builder.select(builder.fcmp_ordered(">", a, b), a, b)

        # main loop: step elements at a time into _MAX_VECTORS running maxima
        entry = builder.block
        head = builder.append_basic_block("max_head")
        body = builder.append_basic_block("max_body")
        lanes = builder.append_basic_block("max_lanes")
        builder.branch(head)
        builder.position_at_end(head)
        i = builder.phi(i64)
        i.add_incoming(llvm_ir.Constant(i64, 0), entry)
        accs = [builder.phi(vec) for _ in range(_MAX_VECTORS)]
        for a in accs:
            a.add_incoming(llvm_ir.Constant(vec, [float("-inf")] * width), entry)
        builder.cbranch(builder.icmp_signed("<", i, main), body, lanes)
        builder.position_at_end(body)
        new = []
        for u, a in enumerate(accs):
            at = builder.gep(data, [builder.add(i, llvm_ir.Constant(i64, u * width))])
            new.append(larger(builder.load(builder.bitcast(at, vec.as_pointer()), align=1), a))
        i.add_incoming(builder.add(i, llvm_ir.Constant(i64, step)), builder.block)
        for a, v in zip(accs, new, strict=True):
            a.add_incoming(v, builder.block)
        builder.branch(head)

        # combine the vectors, then their lanes, in a fixed order
        builder.position_at_end(lanes)
        m = accs[0]
        for a in accs[1:]:
            m = larger(a, m)
        best = builder.extract_element(m, llvm_ir.Constant(i64, 0))
        for lane in range(1, width):
            best = larger(builder.extract_element(m, llvm_ir.Constant(i64, lane)), best)

        # the last n - main elements, one by one
        tail_head = builder.append_basic_block("max_tail_head")
        tail_body = builder.append_basic_block("max_tail_body")
        done = builder.append_basic_block("max_done")
        start = builder.block
        builder.branch(tail_head)
        builder.position_at_end(tail_head)
        j = builder.phi(i64)
        j.add_incoming(main, start)
        b = builder.phi(scalar)
        b.add_incoming(best, start)
        builder.cbranch(builder.icmp_signed("<", j, n), tail_body, done)
        builder.position_at_end(tail_body)
        b_next = larger(builder.load(builder.gep(data, [j])), b)
        j.add_incoming(builder.add(j, llvm_ir.Constant(i64, 1)), builder.block)
        b.add_incoming(b_next, builder.block)
        builder.branch(tail_head)
        builder.position_at_end(done)
        return b

    return sig, codegen


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
