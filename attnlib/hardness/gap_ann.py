"""Planted instances of bichromatic Gap Hamming nearest neighbour (Gap-ANN).

Gap-ANN asks whether some pair is at Hamming distance ≤ t, promised that otherwise every
pair is at distance ≥ (1+ε)t. Its SETH-hardness (Rubinstein 2018) is not constructive at
notebook sizes: the instances here are planted, with the shape of the hard ones but not their
hardness, and locality-sensitive hashing finds their close pair quickly.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import AttnInputError, check_bool, check_int, check_memory, check_positive_real
from .ov import _as_bool_pair

__all__ = ["planted_gap_ann", "gap_ann_parameters", "lsh_close_pair"]


def _hamming(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """All pairwise Hamming distances, (n_a, n_b) int64."""
    Ai, Bi = A.astype(np.int64), B.astype(np.int64)
    return Ai.sum(1)[:, None] + Bi.sum(1)[None, :] - 2 * (Ai @ Bi.T)


def _check_gap(t, eps, m):
    """t > 0 and ε > 0 with (1+ε)t ≤ m, and a mid level t + εt/2 above t in floating point."""
    t = check_positive_real("t", t)
    eps = check_positive_real("eps", eps)
    if (1 + eps) * t > m:
        raise AttnInputError(f"t and eps must satisfy (1+eps)*t <= m={m}, got t={t!r}, eps={eps!r}")
    if t + eps * t / 2 <= t:  # the mid level t' = t + εt/2 of the reduction must exceed t
        raise AttnInputError(
            f"eps={eps!r} is too small for t={t!r}: t + eps*t/2 rounds to t in double precision"
        )
    return t, eps


def planted_gap_ann(n, m, t, eps, *, planted: bool, seed, max_tries: int = 1000):
    """A planted instance of bichromatic Gap Hamming nearest neighbour.

    Rows of A and B (n each, m bits) are uniform; every row of B closer than (1+ε)t to some
    row of A is redrawn (up to ``max_tries`` times), so all pairs are *far*. With
    ``planted=True`` one pair (i, j) is then made *close*: B_j is A_i with exactly ⌊t⌋ bits
    flipped, redrawn until B_j stays far from every other row of A.

    This is the promise problem "is some pair at distance ≤ t, or are all pairs at distance
    ≥ (1+ε)t?". Hard instances of it come from Rubinstein's reduction (Rubinstein 2018), whose
    gadgets are far too large to build at the sizes of a notebook; these planted instances
    have the same shape, not the same hardness.

    Returns
    -------
    A, B : bool (n, m)
    pair : the planted (i, j), or None

    Raises
    ------
    AttnInputError
        if n, m, seed or max_tries is not an integer in range, t and eps are not positive
        with (1+eps)·t ≤ m, ``planted`` is not a bool, the arrays would not fit in memory, or
        no far rows are found in ``max_tries`` draws.

    Examples
    --------
    >>> A, B, pair = planted_gap_ann(8, 36, 6, 1.0, planted=True, seed=0)
    >>> int((A[pair[0]] != B[pair[1]]).sum())
    6
    """
    n = check_int("n", n)
    m = check_int("m", m)
    t, eps = _check_gap(t, eps, m)
    seed = check_int("seed", seed, minimum=0)
    max_tries = check_int("max_tries", max_tries)
    check_bool("planted", planted)
    # the float64 draw, A and B, and the int64 copies of _hamming (~26 B per entry)
    check_memory("planted_gap_ann's (n, m) arrays", 32 * n * m, culprits="n or m")
    far = (1 + eps) * t
    rng = np.random.default_rng(seed)
    A = rng.random((n, m)) < 0.5
    B = np.empty((n, m), dtype=np.bool_)

    def draw(make, others):
        for _ in range(max_tries):
            row = make()
            if others.shape[0] == 0 or _hamming(others, row[None, :]).min() >= far:
                return row
        raise AttnInputError(
            f"could not draw rows at Hamming distance >= (1+eps)*t={far:g} in {max_tries} "
            f"tries (n={n}, m={m}): lower t or eps, or raise m"
        )

    for j in range(n):
        B[j] = draw(lambda: rng.random(m) < 0.5, A)
    pair = None
    if planted:
        i, j = (int(x) for x in rng.integers(0, n, size=2))
        flips = int(math.floor(t))

        def near():
            row = A[i].copy()
            row[rng.choice(m, size=flips, replace=False)] ^= True
            return row

        B[j] = draw(near, np.delete(A, i, axis=0))
        pair = (i, j)
    return A, B, pair


def gap_ann_parameters(n) -> tuple[int, int, float]:
    """The Gap-ANN parameters of Chapter 8 for n vectors per side: ``(m, t, eps)`` with
    m = 12·⌊log₂ n⌋ bits, close distance t = ⌊m/6⌋ and gap ε = 1.

    The ratio t/m and the gap are fixed, so :func:`gap_ann_to_attention` builds entries with
    B² = 4(m/t)(ln n + 1)/ε, of the order √log n.

    Raises :class:`AttnInputError` if n is not an integer ≥ 2.

    Examples
    --------
    >>> gap_ann_parameters(64)
    (72, 12, 1.0)
    """
    n = check_int("n", n, minimum=2)
    m = 12 * int(math.log2(n))
    return m, m // 6, 1.0


def lsh_close_pair(A, B, t, *, k: int = 8, reps: int = 30, seed: int = 0):
    """Find a pair at Hamming distance ≤ t by bit-sampling locality-sensitive hashing.

    In each of ``reps`` rounds, k random coordinates are drawn; rows of A and B that agree on
    all k of them land in the same bucket, and only such candidate pairs are compared. Close
    pairs agree on k random bits far more often than far ones, so on planted Gap-ANN instances
    the close pair is found after comparing a small fraction of the n_a·n_b pairs.

    Returns
    -------
    pair : the first (i, j) found with Ham(A_i, B_j) ≤ t, or None after ``reps`` rounds
    comparisons : the number of candidate pairs compared

    Raises
    ------
    AttnInputError
        if A or B is not a non-empty 2-D boolean (or 0/1) array, their column counts differ,
        t is not a positive number, k is not an integer from 1 to min(m, 62), or reps or
        seed is not an integer in range.

    Examples
    --------
    >>> A, B, pair = planted_gap_ann(16, 48, 8, 1.0, planted=True, seed=1)
    >>> found, comparisons = lsh_close_pair(A, B, 8, seed=1)
    >>> found == pair and comparisons < 16 * 16
    True
    """
    A, B = _as_bool_pair(A, B)
    t = check_positive_real("t", t)
    k = check_int("k", k, maximum=min(A.shape[1], 62))
    reps = check_int("reps", reps)
    seed = check_int("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    comparisons = 0
    for _ in range(reps):
        coords = rng.choice(A.shape[1], size=k, replace=False)
        keys_a = A[:, coords] @ (1 << np.arange(k))
        keys_b = B[:, coords] @ (1 << np.arange(k))
        buckets: dict[int, list[int]] = {}
        for j, key in enumerate(keys_b):
            buckets.setdefault(int(key), []).append(j)
        for i, key in enumerate(keys_a):
            for j in buckets.get(int(key), []):
                comparisons += 1
                if (A[i] != B[j]).sum() <= t:
                    return (i, j), comparisons
    return None, comparisons
