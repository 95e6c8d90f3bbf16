"""What one segment of a schedule can compute: the distinct products of the QKᵀ (or any
standard matmul) DAG that a segment of at most M I/Os computes (Chapter 5, lemma
lem-05-part, after the segment lemma lem-05-partition).

A segment's dominator set D_p (red at its start or read in it) holds at most 2M words. A sum
tree none of whose non-input vertices lies in D_p or is left behind by the segment is computed
wholly inside it, from its whole query row and key row in D_p, so these complete trees are kept
entries of a rectangle I × J with |I| + |J| <= s = ⌊2M/d⌋. ρ(s), the most kept entries of such a
rectangle, is bounded here from the sorted row and column counts of the keep-mask
(:func:`mask_density_bound`); a segment then computes at most :func:`products_per_part`
products. Every quantity is an exact integer or Fraction; square roots are rounded up, so that
P stays an upper bound and the bounds built on it stay certified.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

import numpy as np

from .._checks import check_int, check_mask_2d, check_memory

__all__ = ["products_per_part", "mask_density_bound"]


def _ceil_sqrt(x: int) -> int:
    """⌈√x⌉ of an int x >= 0, exactly (math.isqrt, no float).

    Examples
    --------
    >>> _ceil_sqrt(16), _ceil_sqrt(17), _ceil_sqrt(0)
    (4, 5, 0)
    """
    x = check_int("x", x, minimum=0)
    return 0 if x == 0 else math.isqrt(x - 1) + 1


def products_per_part(d: int, M: int, *, rho: int | None = None) -> Fraction:
    """P of Chapter 5's lem-05-part: the most distinct products of a standard-matmul DAG with
    inner dimension ``d`` that one segment of at most M I/Os computes (recomputation allowed),
    ``min(cap_rows, cap_lw)`` with s = ⌊2M/d⌋ and

        cap_rows = d·ρ(s) + 3·M·d                (≤ 3M touching trees, ρ(s) complete ones)
        cap_lw   = 2M + M·⌈√(3M + ρ(s))⌉          (Loomis–Whitney on the products outside D_p)

    ``rho`` is ρ(s), the most kept entries of a rectangle I × J with |I| + |J| <= s (from
    :func:`mask_density_bound`); it defaults to the dense value ⌊s/2⌋·⌈s/2⌉ of an unbounded
    matrix. The square root is rounded up, so P is never below the lemma's value.
    Raises AttnInputError for d or M below 1 or a negative ``rho``.

    Examples
    --------
    >>> # d = 2, M = 8: s = 8, rho = 16; cap_rows = 2·16 + 3·8·2 = 80,
    >>> # cap_lw = 16 + 8·⌈√40⌉ = 16 + 8·7 = 72
    >>> products_per_part(2, 8)
    Fraction(72, 1)
    """
    d, M = check_int("d", d), check_int("M", M)
    s = 2 * M // d
    rho = (s // 2) * (s - s // 2) if rho is None else check_int("rho", rho, minimum=0)
    cap_rows = d * rho + 3 * M * d
    cap_lw = 2 * M + M * _ceil_sqrt(3 * M + rho)
    return Fraction(min(cap_rows, cap_lw))


class _Profile:
    """The sorted (largest first) row or column counts of a keep-mask, as a prefix sum:
    ``top(a)`` is the sum of the ``a`` largest counts (a clipped to ``length``), exact ints.
    ``length`` is the number of rows (columns); ``kept`` the number of non-zero counts."""

    def __init__(self, length: int, kept: int, top):
        self.length, self.kept, self._top = length, kept, top

    def top(self, a: int) -> int:
        return self._top(min(a, self.length))

    @classmethod
    def uniform(cls, length: int, value: int) -> _Profile:
        """``length`` counts all equal to ``value`` (a dense mask's rows or columns)."""
        return cls(length, length if value else 0, lambda a: a * value)

    @classmethod
    def of_counts(cls, counts: np.ndarray) -> _Profile:
        """The profile of explicit counts (an array of non-negative ints)."""
        values, sizes = np.unique(np.asarray(counts, dtype=np.int64), return_counts=True)
        return cls.of_groups(values.tolist(), sizes.tolist())

    @classmethod
    def of_groups(cls, values, sizes) -> _Profile:
        """``sizes[i]`` counts equal to ``values[i]`` (Python ints of any size), without
        materialising them: a block row of a block mask is a group of equal rows."""
        groups = sorted(zip(values, sizes, strict=True), reverse=True)
        ends, sums = [0], [0]  # counts and their sum before each group
        for value, size in groups:
            ends.append(ends[-1] + size)
            sums.append(sums[-1] + value * size)

        def top(a: int) -> int:
            i = bisect.bisect_right(ends, a) - 1
            return sums[i] + (a - ends[i]) * groups[i][0] if i < len(groups) else sums[-1]

        kept = sum(size for value, size in groups if value)
        return cls(ends[-1], kept, top)

    def repeated(self, times: int, scale: int = 1) -> _Profile:
        """Every count repeated ``times`` times and multiplied by ``scale`` (the rows of H
        heads sharing one mask; the key columns a group of ``scale`` query heads shares)."""

        def top(a: int) -> int:
            q, r = divmod(a, times)
            step = self.top(q + 1) - self.top(q) if r else 0
            return scale * (times * self.top(q) + r * step)

        return _Profile(self.length * times, self.kept * times, top)


def _causal_profiles(n: int, m: int) -> tuple[_Profile, _Profile]:
    """Row and column profiles of the causal mask (query i keeps key j iff j <= i), closed
    forms for any size. With k = min(n, m) the row counts are n − k copies of m, then
    k, k − 1, ..., 1; the column counts are n, n − 1, ..., n − k + 1, then m − k zeros."""
    k = min(n, m)

    def rows(a: int) -> int:
        full = min(a, n - k)
        t = a - full  # the next t rows keep k, k − 1, ..., k − t + 1 keys
        return full * m + t * k - t * (t - 1) // 2

    def cols(b: int) -> int:
        t = min(b, k)
        return t * n - t * (t - 1) // 2

    return _Profile(n, n, rows), _Profile(m, k, cols)


def _density_bound(rows: _Profile, cols: _Profile, s: int) -> int:
    """max over a + b <= s of min(a·b, rows.top(a), cols.top(b), Z), Z = rows.top(all).

    The function of a (with b = s − a, which only helps) is a minimum of concave functions,
    so concave on the integers: its maximum is at the first a whose increment is not
    positive, found by bisection in O(log s) evaluations (s may be any int)."""
    z = rows.top(rows.length)

    def f(a: int) -> int:
        b = s - a
        return min(a * b, rows.top(a), cols.top(b), z)

    lo, hi = 0, s  # the first a in [lo, hi] with f(a + 1) <= f(a), or s
    while lo < hi:
        mid = (lo + hi) // 2
        if f(mid + 1) <= f(mid):
            hi = mid
        else:
            lo = mid + 1
    return f(lo)


def _mask_profiles(mask: np.ndarray) -> tuple[_Profile, _Profile]:
    """Row and column profiles of a validated 2-D boolean mask."""
    # two count vectors, their sorted copies and prefix lists
    check_memory("the mask's row and column counts", 48 * sum(mask.shape), culprits="the mask")
    return _Profile.of_counts(mask.sum(axis=1)), _Profile.of_counts(mask.sum(axis=0))


def mask_density_bound(mask, s: int) -> int:
    """An upper bound on ρ(s), the most kept entries of ``mask`` in a rectangle I × J of rows
    and columns with |I| + |J| <= s, from its sorted row and column counts:

        max over a + b <= s of min(a·b, sum of the a largest row counts,
                                   sum of the b largest column counts, Z)

    where Z is the number of kept entries. Each of the four terms bounds the entries of an
    a × b rectangle, so the maximum bounds ρ(s); for a dense n × m mask it equals ρ(s)
    exactly (the largest a·b with a <= n, b <= m, a + b <= s). ``mask`` is a 2-D boolean
    array (True = keep). Raises AttnInputError for another mask or a negative ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> band = np.abs(np.subtract.outer(np.arange(6), np.arange(6))) <= 1
    >>> # a = b = 2: min(4, 3 + 3, 3 + 3, 16) = 4; a = 3, b = 3 would need 9 <= 9, 9, 16
    >>> mask_density_bound(band, 4), mask_density_bound(band, 6), mask_density_bound(band, 12)
    (4, 9, 16)
    """
    arr = check_mask_2d(mask)
    s = check_int("s", s, minimum=0)
    return _density_bound(*_mask_profiles(arr), s)
