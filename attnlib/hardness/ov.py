"""Orthogonal Vectors: the quadratic brute force, planted instances and an adversarial one.

The OV conjecture (implied by SETH) says no algorithm decides OV in n^{2-δ}·poly(m) time for
m = ω(log n); :func:`brute_force_ov` is the quadratic baseline, a compiled kernel.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._checks import (
    AttnInputError,
    check_bool,
    check_int,
    check_memory,
    check_positive_real,
)

__all__ = ["brute_force_ov", "planted_ov", "adversarial_no_ov"]

# planted_ov redraws all-zero rows of A at most this many times.
_MAX_REDRAWS = 10_000
# brute_force_ov sweeps B in blocks of this many rows, small enough to stay in L1 cache.
_OV_BLOCK_ROWS = 256


def _as_bool_matrix(name: str, X) -> np.ndarray:
    """A 2-D 0/1 matrix as a bool array: bool dtype, or integers that are all 0 or 1."""
    if X is None:
        raise AttnInputError(f"{name} must be a 2-D boolean (0/1) array, got None")
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(f"{name} must be a 2-D boolean (0/1) array ({exc})") from exc
    if arr.dtype == np.bool_:
        pass
    elif arr.dtype.kind in "iu":
        # the test and the converted copy hold a byte per entry each, as many as arr *looks*
        # to have (a broadcast view becomes a full array)
        check_memory(f"{name} converted to bool", 2 * arr.size, culprits=name)
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise AttnInputError(f"{name} must hold only 0 and 1, got values outside {{0, 1}}")
        arr = arr.astype(np.bool_)
    else:
        raise AttnInputError(f"{name} must be a 2-D boolean (0/1) array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise AttnInputError(f"{name} must be 2-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise AttnInputError(f"{name} must be non-empty, got shape {arr.shape}")
    return arr


def _as_bool_pair(A, B) -> tuple[np.ndarray, np.ndarray]:
    """Two 0/1 matrices A (n_a, m) and B (n_b, m) with the same number of columns."""
    A = _as_bool_matrix("A", A)
    B = _as_bool_matrix("B", B)
    if B.shape[1] != A.shape[1]:
        raise AttnInputError(f"B must have m={A.shape[1]} columns like A, got {B.shape[1]}")
    return A, B


def _pack_rows(X: np.ndarray) -> np.ndarray:
    """Pack each bool row into uint64 words (bit order irrelevant: both sides match)."""
    # the packed bytes, padded to whole words, and their contiguous copy
    words = -(-X.shape[1] // 64)
    check_memory("brute_force_ov's packed rows", 16 * X.shape[0] * words, culprits="A or B")
    packed = np.packbits(X, axis=1, bitorder="little")
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


@njit(cache=True)
def _first_orthogonal_pair(A, B, block):
    """Lexicographically first (i, j) with A_i & B_j = 0 over all words, or (-1, -1), and
    the number of row pairs compared.

    B is swept in blocks of ``block`` rows that stay in cache while every row of A passes
    over them. A hit (i, j) in one block is the first in that block; later blocks can only
    improve on it with a smaller i, so they scan rows below the best i found so far.
    """
    na, nw = A.shape
    nb = B.shape[0]
    best_i, best_j = na, -1
    pairs = 0
    for j0 in range(0, nb, block):
        j1 = min(j0 + block, nb)
        for i in range(best_i):
            found = -1
            for j in range(j0, j1):
                hit = False
                for w in range(nw):
                    if A[i, w] & B[j, w]:
                        hit = True
                        break
                if not hit:
                    found = j
                    break
            pairs += (found + 1 - j0) if found >= 0 else (j1 - j0)
            if found >= 0:
                best_i, best_j = i, found
                break
    if best_j < 0:
        return -1, -1, pairs
    return best_i, best_j, pairs


def brute_force_ov(A, B, *, return_comparisons: bool = False):
    """The first orthogonal pair (i, j), in row-major order, or None: the O(n_a·n_b·m) baseline.

    A is (n_a, m), B is (n_b, m), both boolean (or 0/1 integers). Rows are packed into
    64-bit words and compared by a compiled kernel that sweeps B block by block (so the time
    is quadratic at every n, not only until B falls out of cache); a NO instance costs exactly
    n_a·n_b row comparisons. The OV conjecture (implied by SETH) says no algorithm does this
    in n^{2-δ}·poly(m) for m = ω(log n).

    With ``return_comparisons=True`` returns ``(pair, comparisons)``: the answer and the
    number of row pairs the kernel compared, counted as it runs (the machine-independent
    measure of its work).

    Raises :class:`AttnInputError` if A or B is not a non-empty 2-D boolean (or 0/1 integer)
    array, their column counts differ, or ``return_comparisons`` is not a bool.

    Examples
    --------
    >>> brute_force_ov([[1, 0], [0, 1]], [[1, 1], [1, 0]])
    (1, 1)
    >>> brute_force_ov([[1, 1]], [[0, 1]]) is None
    True
    >>> brute_force_ov([[1, 0], [0, 1]], [[1, 1], [1, 0]], return_comparisons=True)
    ((1, 1), 4)
    """
    A, B = _as_bool_pair(A, B)
    return_comparisons = check_bool("return_comparisons", return_comparisons)
    i, j, pairs = _first_orthogonal_pair(_pack_rows(A), _pack_rows(B), _OV_BLOCK_ROWS)
    pair = None if i < 0 else (int(i), int(j))
    return (pair, int(pairs)) if return_comparisons else pair


def planted_ov(n, m, *, orthogonal: bool, seed, density: float = 0.5):
    """A random OV instance with a known answer.

    Rows of A and B (n rows each, m columns) are i.i.d. Bernoulli(``density``); an all-zero row
    of A (orthogonal to everything) is redrawn. Every row of B orthogonal to some row of A is
    redrawn, so no pair is orthogonal; with
    ``orthogonal=True`` one pair (i, j) is then planted by redrawing B_j inside the complement
    of A_i (and non-orthogonal to every other row of A), so (i, j) is the only orthogonal
    pair.

    Returns
    -------
    A, B : bool (n, m)
    pair : the planted (i, j), or None for a NO instance

    Raises
    ------
    AttnInputError
        if n, m or seed is not an integer in range, ``density`` is not in (0, 1),
        ``orthogonal`` is not a bool, the arrays would not fit in memory, or m and density
        make orthogonal rows too likely to draw the instance.

    Examples
    --------
    >>> A, B, pair = planted_ov(8, 12, orthogonal=True, seed=0)
    >>> brute_force_ov(A, B) == pair
    True
    """
    n = check_int("n", n)
    m = check_int("m", m)
    seed = check_int("seed", seed, minimum=0)
    density = check_positive_real("density", density)
    if density >= 1:
        raise AttnInputError(f"density must be in (0, 1), got {density!r}")
    check_bool("orthogonal", orthogonal)
    # the float64 draw, A and B, A as int64, and its copy without row i (measured ~18 B/entry)
    check_memory("planted_ov's (n, m) arrays", 32 * n * m, culprits="n or m")
    if -math.expm1(m * math.log1p(-density)) < 1.0 / _MAX_REDRAWS:
        raise AttnInputError(
            f"density={density!r} is too small for m={m}: a row of m Bernoulli(density) bits "
            "is nonzero with probability below 1e-4; raise density or m"
        )
    rng = np.random.default_rng(seed)
    A = rng.random((n, m)) < density
    for _ in range(_MAX_REDRAWS):  # a zero row of A is orthogonal to everything: redraw it
        zero = ~A.any(axis=1)
        if not zero.any():
            break
        A[zero] = rng.random((int(zero.sum()), m)) < density
    else:
        raise AttnInputError(
            f"density={density!r} is too small for m={m}: rows of A keep coming out all zero "
            f"after {_MAX_REDRAWS} redraws; raise density or m"
        )
    B = np.empty((n, m), dtype=np.bool_)
    Ai = A.astype(np.int64)

    def draw(make, others):
        for _ in range(10_000):
            row = make()
            if (others @ row.astype(np.int64) > 0).all():
                return row
        raise AttnInputError(
            f"m={m} is too small for density={density}: random rows are orthogonal too "
            "often to draw this instance; raise m or density"
        )

    for j in range(n):
        B[j] = draw(lambda: rng.random(m) < density, Ai)
    pair = None
    if orthogonal:
        j = int(rng.integers(0, n))
        for _ in range(10_000):
            # B_j inside the complement of A_i, and non-orthogonal to every other row of A
            i = int(rng.integers(0, n))
            row = (~A[i]) & (rng.random(m) < rng.uniform(density, 1.0))
            if (np.delete(Ai, i, axis=0) @ row.astype(np.int64) > 0).all():
                break
        else:
            raise AttnInputError(
                f"m={m} is too small for density={density}: could not plant a unique "
                "orthogonal pair; raise m"
            )
        B[j] = row
        pair = (i, j)
    return A, B, pair


def adversarial_no_ov(n, m) -> tuple[np.ndarray, np.ndarray]:
    """A NO instance in which every pair has inner product exactly 1: A is all ones and row j
    of B is the unit vector e_{j mod m}.

    It is the hardest NO instance for a threshold on attention mass (Chapter 8): every pair
    is as close to orthogonal as a non-orthogonal pair can be.

    Returns
    -------
    A, B : bool (n, m)

    Raises
    ------
    AttnInputError
        if n or m is not a positive integer, or the arrays would not fit in memory.

    Examples
    --------
    >>> A, B = adversarial_no_ov(3, 2)
    >>> (A.astype(int) @ B.astype(int).T).tolist()
    [[1, 1, 1], [1, 1, 1], [1, 1, 1]]
    """
    n = check_int("n", n)
    m = check_int("m", m)
    check_memory("adversarial_no_ov's (n, m) arrays", 2 * n * m + m * m, culprits="n or m")
    return np.ones((n, m), bool), np.eye(m, dtype=bool)[np.arange(n) % m]
