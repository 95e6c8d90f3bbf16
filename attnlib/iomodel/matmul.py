"""Matrix multiplication on the two-level machine: the warm-up for attention's I/O.

Two schedules for C = A B, with A of shape (m, k) and B of shape (k, p), each with an exact
closed-form count:

* :func:`naive_matmul` goes **by rows**: for each row A_i it streams all of B, row by row,
  accumulating C_i = Σ_l A_il B_l in fast memory. Nothing of B is reused across rows, so it
  reads mk + mkp words whatever M is.
* :func:`tiled_matmul` goes **by square tiles** of side b (SY24 Alg. 1's loop structure):
  for each b×b tile of C it streams the matching b×b tiles of A and B and accumulates. Every
  word loaded is used b times, so it reads ≈ 2mkp/b and, with b = ⌊√(M/3)⌋, its I/O is within
  a constant factor of Hong and Kung's lower bound mkp/√M (HK81 Cor. 6.2; SY24 Lemma 3.6).
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import AttnInputError, as_float_array, check_int, float_dtype
from .machine import IOCount
from .tiling import block_ranges, ceil_div, check_machine_steps, finish_run, span, start_run

__all__ = [
    "naive_matmul",
    "naive_matmul_count",
    "tiled_matmul",
    "tiled_matmul_count",
    "matmul_tile_size",
]


def _check_AB(A, B):
    A = as_float_array("A", A)
    B = as_float_array("B", B)
    if B.shape[0] != A.shape[1]:
        raise AttnInputError(f"B must have k={A.shape[1]} rows like A's columns, got {B.shape[0]}")
    dtype = float_dtype(A, B)
    return A.astype(dtype, copy=False), B.astype(dtype, copy=False), dtype


def _finite_product(result: tuple) -> tuple:
    """A run's (C, count[, machine]) with C checked: an entry of A B beyond the float range
    (or a partial sum that overflowed on the way) is refused, not returned as inf or NaN."""
    C = result[0]
    if not np.isfinite(C).all():
        raise AttnInputError(f"the product A @ B overflows {C.dtype}: A or B is too large")
    return result


# ---- naive, by rows ----------------------------------------------------------------------


def _check_naive_M(M, k: int, p: int) -> int:
    """M validated against the naive schedule's need: A_i (k) + C_i (p) + one row of B (p)."""
    M = check_int("M", M)
    if M < k + 2 * p:
        raise AttnInputError(
            f"M must be at least k + 2p = {k + 2 * p} words for naive_matmul with "
            f"k={k}, p={p}, got M={M}"
        )
    return M


def naive_matmul(A, B, *, M: int, record: bool = False):
    """C = A B row by row on a :class:`TwoLevelMemory` of ``M`` words.

    Parameters
    ----------
    A : (m, k), B : (k, p) float arrays
    M : fast memory in words; needs M >= k + 2p (row A_i, accumulator C_i, one row of B)
    record : keep the machine's operation log; if True the machine is returned too

    Returns
    -------
    (C, IOCount), or (C, IOCount, machine) with ``record=True``.
    The count equals :func:`naive_matmul_count` exactly.

    Raises AttnInputError for invalid arrays, M below k + 2p, a run of more than
    :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` row steps (m·k), or a product beyond
    the float range.
    """
    A, B, dtype = _check_AB(A, B)
    m, k = A.shape
    p = B.shape[1]
    M = _check_naive_M(M, k, p)
    check_machine_steps(m * k, "naive_matmul", "smaller A and B")
    mem = start_run(M, record, dtype, {"A": A, "B": B}, {"C": (m, p)})
    for i in range(m):
        a = mem.load("A", (i, i + 1))  # (1, k)
        c = mem.alloc((1, p), dtype=dtype)
        for l in range(k):
            b = mem.load("B", (l, l + 1))  # (1, p): row l of B, used once for this row of C
            c += a[0, l] * b
            mem.free(b)
        mem.store("C", (i, i + 1), None, c)
        mem.free(a, c)
    return _finite_product(finish_run(mem, ("C",), record))


def naive_matmul_count(m: int, k: int, p: int, M: int) -> IOCount:
    """Exact I/O of :func:`naive_matmul`: reads mk + mkp, writes mp, peak k + 2p.

    Independent of M: the schedule reuses nothing of B between rows of C. Raises
    AttnInputError for sizes below 1 or M below k + 2p.

    Examples
    --------
    >>> naive_matmul_count(64, 64, 64, 200)
    IOCount(reads=266240, writes=4096, total=270336, peak_fast=192)"""
    m, k, p = check_int("m", m), check_int("k", k), check_int("p", p)
    M = _check_naive_M(M, k, p)
    return IOCount(m * k + m * k * p, m * p, k + 2 * p)


# ---- square tiles ------------------------------------------------------------------------


def matmul_tile_size(M: int) -> int:
    """The tile side b = ⌊√(M/3)⌋ used by :func:`tiled_matmul`.

    It is the largest b with 3b² <= M: one b×b tile each of A, B and the accumulator of C
    are live at once, so the schedule provably fits. Raises AttnInputError for M below 3.

    Examples
    --------
    >>> matmul_tile_size(768)
    16
    """
    M = check_int("M", M)
    if M < 3:
        raise AttnInputError(
            f"M must be at least 3 words for tiled_matmul (three 1×1 tiles), got M={M}"
        )
    return math.isqrt(M // 3)


def _tile(tile, M: int) -> int:
    return matmul_tile_size(M) if tile is None else check_int("tile", tile)


def tiled_matmul(A, B, *, M: int, tile: int | None = None, record: bool = False):
    """C = A B by square tiles on a :class:`TwoLevelMemory` of ``M`` words.

    Loop structure (SY24 Alg. 1 without the softmax): for each tile C[I, J] (I, J ranges of
    at most b rows/columns), allocate an accumulator, then for each range L of at most b
    along k load A[I, L] and B[L, J], accumulate A[I, L] B[L, J], free both; store C[I, J].

    Parameters
    ----------
    A : (m, k), B : (k, p) float arrays
    M : fast memory in words (>= 3)
    tile : side b; default :func:`matmul_tile_size` (largest b with 3b² <= M). A given
        tile is used as is: if its three tiles do not fit, the machine raises
        :class:`CapacityError`.
    record : keep the operation log; if True the machine is returned too

    Returns
    -------
    (C, IOCount), or (C, IOCount, machine) with ``record=True``; the count equals
    :func:`tiled_matmul_count` exactly.

    Raises
    ------
    AttnInputError for invalid arrays, M below 3, a tile below 1, a run of more than
    :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` tile steps, or a product beyond the
    float range; CapacityError if a given tile does not fit.

    Examples
    --------
    >>> import numpy as np
    >>> C, count = tiled_matmul(np.arange(6.0).reshape(2, 3), np.ones((3, 2)), M=12)
    >>> C.tolist(), count
    ([[3.0, 3.0], [12.0, 12.0]], IOCount(reads=12, writes=4, total=16, peak_fast=12))
    """
    A, B, dtype = _check_AB(A, B)
    m, k = A.shape
    p = B.shape[1]
    M = check_int("M", M)
    b = _tile(tile, M)
    steps = ceil_div(m, b) * ceil_div(p, b) * ceil_div(k, b)
    check_machine_steps(steps, "tiled_matmul", "a larger M or tile, or smaller A and B")
    mem = start_run(M, record, dtype, {"A": A, "B": B}, {"C": (m, p)})
    for I in block_ranges(m, b):
        for J in block_ranges(p, b):
            c = mem.alloc((span(I), span(J)), dtype=dtype)
            for L in block_ranges(k, b):
                a = mem.load("A", I, L)
                bb = mem.load("B", L, J)
                c += a @ bb
                mem.free(a, bb)
            mem.store("C", I, J, c)
            mem.free(c)
    return _finite_product(finish_run(mem, ("C",), record))


def tiled_matmul_count(m: int, k: int, p: int, M: int, *, tile: int | None = None) -> IOCount:
    """Exact I/O of :func:`tiled_matmul` (closed form, no arrays).

    With T_m = ⌈m/b⌉ and T_p = ⌈p/b⌉ tile rows and columns of C: every tile row of C reads
    all of its rows of A once per tile column, and symmetrically for B, so

        reads  = T_p·m·k + T_m·k·p          (≈ 2mkp/b)
        writes = m·p
        peak   = b_m·b_p + b_m·b_k + b_k·b_p,  b_x = min(b, x)

    (the first tiles are the largest). With b = ⌊√(M/3)⌋ the reads are ≈ 2√3·mkp/√M.
    Raises AttnInputError for sizes below 1, M below 3 or a tile below 1.

    Examples
    --------
    >>> tiled_matmul_count(64, 64, 64, 768)
    IOCount(reads=32768, writes=4096, total=36864, peak_fast=768)
    """
    m, k, p = check_int("m", m), check_int("k", k), check_int("p", p)
    M = check_int("M", M)
    b = _tile(tile, M)
    Tm, Tp = ceil_div(m, b), ceil_div(p, b)
    bm, bk, bp = min(b, m), min(b, k), min(b, p)
    return IOCount(Tp * m * k + Tm * k * p, m * p, bm * bp + bm * bk + bk * bp)
