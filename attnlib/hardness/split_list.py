"""Williams' split-and-list reduction from k-SAT to Orthogonal Vectors (Williams 2005).

A formula on N variables becomes two sets of 2^{N/2} vectors with one coordinate per clause;
orthogonal pairs are in bijection with the satisfying assignments.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_memory
from .sat import _clause_masks, check_clauses

__all__ = ["sat_to_ov", "ov_pair_to_assignment"]

# sat_to_ov lists 2^{N/2} half-assignments per side: keep the tables to ~1M rows.
_MAX_SAT_TO_OV_VARS = 40


def _half_split(n_vars: int) -> int:
    """Number of variables in the first half: x_1..x_h go to A, x_{h+1}..x_N to B."""
    return n_vars // 2


def _check_tables_fit(n_vars: int, n_clauses: int) -> None:
    """Refuse before allocating: the two boolean tables, and the int64 and boolean
    temporaries of the larger one (about 16 bytes per entry, measured)."""
    h = _half_split(n_vars)
    rows = (1 << h) + (1 << (n_vars - h))
    larger = 1 << (n_vars - h)
    check_memory(
        "sat_to_ov's tables",
        rows * n_clauses + 16 * larger * n_clauses + 8 * rows + 16 * n_clauses,
        culprits="n_vars or the number of clauses",
    )


def _half_table(pos, neg, shift: int, n_half: int) -> np.ndarray:
    """Row a, column c: True iff half-assignment a leaves clause c unsatisfied.

    Bit b of a is the value of variable shift + b + 1; only that variable range of the
    clause masks counts.
    """
    a = np.arange(1 << n_half, dtype=np.int64)[:, None]
    window = (1 << n_half) - 1
    p = (pos >> shift) & window
    q = (neg >> shift) & window
    satisfied = ((a & p) != 0) | ((~a & q) != 0)
    return ~satisfied


def sat_to_ov(clauses, n_vars) -> tuple[np.ndarray, np.ndarray]:
    """Williams' split-and-list reduction from CNF-SAT to Orthogonal Vectors.

    The variables are split into x_1..x_h and x_{h+1}..x_N with h = ⌊N/2⌋. Row a of ``A``
    belongs to the half-assignment of the first half whose bit b is the value of x_{b+1};
    row b of ``B`` likewise for the second half. Coordinate c is 1 iff that half-assignment
    leaves clause c unsatisfied. A pair of rows is orthogonal iff every clause is satisfied by
    one half or the other, i.e. iff the joined assignment satisfies the formula
    (:func:`ov_pair_to_assignment` joins them).

    Returns
    -------
    A : bool (2^h, #clauses)
    B : bool (2^{N-h}, #clauses)
    """
    n_vars = check_int("n_vars", n_vars, maximum=_MAX_SAT_TO_OV_VARS)
    clauses = check_clauses(clauses, n_vars)
    _check_tables_fit(n_vars, len(clauses))
    pos, neg = _clause_masks(clauses)
    h = _half_split(n_vars)
    A = _half_table(pos, neg, 0, h)
    B = _half_table(pos, neg, h, n_vars - h)
    return A, B


def ov_pair_to_assignment(i, j, n_vars) -> tuple[bool, ...]:
    """Join row i of A and row j of B of :func:`sat_to_ov` into one assignment of x_1..x_N."""
    n_vars = check_int("n_vars", n_vars, maximum=_MAX_SAT_TO_OV_VARS)
    h = _half_split(n_vars)
    i = check_int("i", i, minimum=0, maximum=(1 << h) - 1)
    j = check_int("j", j, minimum=0, maximum=(1 << (n_vars - h)) - 1)
    return tuple(bool((i >> b) & 1) for b in range(h)) + tuple(
        bool((j >> b) & 1) for b in range(n_vars - h)
    )
