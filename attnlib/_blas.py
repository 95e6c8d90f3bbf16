"""BLAS for the compiled kernels: one gemm per tile product, on the calling thread.

:func:`_gemm` computes c = alpha·op(a)·op(b) + beta·c by one call of SciPy's Fortran ?gemm from
numba-compiled code (:func:`_fortran_gemm`, an intrinsic that calls it by symbol name), after
checking every argument BLAS would reject. :func:`blas_on_calling_thread` is the context the
kernels run in: BLAS limited to one thread, since the kernels' own threads (numba's, one per
block) each call it on their own tiles.
"""

from __future__ import annotations

import functools

import numba as nb
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba import types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic
from threadpoolctl import ThreadpoolController

__all__ = ["blas_on_calling_thread"]

# ---------------------------------------------------------------------------------------
# BLAS on the calling thread
# ---------------------------------------------------------------------------------------


@functools.cache
def _blas_libraries():
    """The BLAS libraries loaded in this process (SciPy's, which the tiles call, among them:
    this module loads it on import), found once."""
    return ThreadpoolController().select(user_api="blas")


class _BlasLimit:
    """The context :func:`blas_on_calling_thread` returns: on entry, each BLAS library whose
    thread count is not 1 is set to 1; on exit, those get their count back. It reads and sets
    the counts through the libraries' own functions (``openblas_get_num_threads`` and the
    like), which threadpoolctl's controllers expose: threadpoolctl's own ``limit`` gathers
    every library's description first, work that would show in the time of a kernel call on
    a small tile grid."""

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
    its own tiles; a tile product of :data:`attnlib.costs.TILE_MULADDS` multiply-adds is large
    enough for OpenBLAS to start threads of its own, which would oversubscribe the cores.
    Inside this context BLAS is limited to one thread, and the previous limits come back on
    exit, also when the body raises. The limit is process-wide for the duration of a kernel
    call.

    Examples
    --------
    >>> with blas_on_calling_thread():
    ...     pass
    """
    return _BlasLimit()


# ---------------------------------------------------------------------------------------
# Tile products: BLAS gemm with alpha and beta
# ---------------------------------------------------------------------------------------

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
