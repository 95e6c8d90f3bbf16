"""The threshold B ≈ √log n as an asymptotic: the plan of the polynomial method over n and B.

The polynomial method's rank is r = C(g+d, d) for a polynomial of degree g, and its time is
about n·r·d = n^{1+κ}·d with κ = log r / log n. Two degrees are used:

* the least degree that the library's own construction needs for relative error ε = 1/n on
  [−R, R] in double precision (:func:`attnlib.polymethod.least_degree`), refused where ε lies
  within a factor ten of the rounding floor;
* AA22's order formula with constant 1 (:func:`attnlib.polymethod.aa22_degree`), a *model*:
  :func:`aa22_rank`, :func:`rank_exponent`.

The threshold is a statement about d = Θ(log n): with d fixed, C(g+d, d) = O(g^d) is
polylog(n) for g = O(log n) and there is no threshold in B at all. :func:`threshold_sweep`
therefore ties d to log n and puts the entry bound on the scale of the threshold,
B = c·√(ln n), so that R = B² = c²·ln n; κ then depends on c alone as n grows, and the
curves κ(c) for different n collapse onto one (Chapters 6 and 7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._checks import (
    AttnInputError,
    as_series,
    check_int,
    check_open_unit,
    check_positive_real,
    check_real,
)
from .features import feature_rank
from .polyexp import FLOOR_FACTOR, aa22_degree, least_degree, rounding_floor

__all__ = ["aa22_rank", "rank_exponent", "ThresholdSweep", "threshold_sweep"]

#: Degrees and widths beyond this are refused: C(g+d, d) would have ~10⁵ digits or more.
_MAX_TERMS = 10**5
_MAX_LOG2_N = 1023  # 2.0**k is a finite float up to here


def aa22_rank(d, R, eps) -> int:
    """C(g+d, d) with g = ⌈AA22's order formula⌉ (constant 1) for relative error eps on
    [−R, R]: the model rank of the feature map at width d. An exact integer of any size.

    Raises :class:`attnlib.AttnInputError` if d is not a positive integer, R is not a
    positive finite number, eps is not in (0, 1), or d or the model degree exceeds 10⁵.

    Examples
    --------
    >>> aa22_rank(4, 1.0, 1e-3)  # g = ⌈5.6⌉ = 6, C(10, 4)
    210
    """
    d = check_int("d", d, maximum=_MAX_TERMS)
    R = check_positive_real("R", R)
    eps = check_open_unit("eps", eps)
    g = math.ceil(aa22_degree(R, eps))
    if g > _MAX_TERMS:
        raise AttnInputError(
            f"R={R:g} is too large: AA22's degree {g:.3g} would make C(g+d, d) unwieldy"
        )
    return math.comb(g + d, d)


def rank_exponent(log2_n, R) -> float:
    """κ = log r / log n for n = 2^log2_n, with d = log2_n, ε = 1/n and r = :func:`aa22_rank`
    (d, R, ε): the model rank is n^κ, so κ < 1 means r < n (a saving) and κ → 0 means the
    almost-linear regime.

    Raises :class:`attnlib.AttnInputError` if log2_n is not an integer from 1 to 1023 or R is
    not a positive finite number (at most 10⁵/2 for the model degree to stay tractable).

    Examples
    --------
    >>> round(rank_exponent(10, 1.0), 2), round(rank_exponent(1000, 1.0), 2)
    (1.3, 0.54)
    """
    k = check_int("log2_n", log2_n, maximum=_MAX_LOG2_N)
    n = 2.0**k
    return math.log(aa22_rank(k, R, 1 / n)) / math.log(n)


#: Sizes n = 2^k beyond this are refused: ε = 1/n would be below 10·2⁻⁵² at every R.
_MAX_SWEEP_LOG2_N = 47


@dataclass(frozen=True)
class ThresholdSweep:
    """The plan of the polynomial method on a grid of n = 2^k and c = B/√(ln n).

    Rows follow ``log2_n`` (N sizes), columns follow ``c`` (C values); ε = 1/n, R = c²·ln n.

    Attributes
    ----------
    log2_n : (N,) int array;  d : (N,) int array, the width used at each n
    c : (C,) float array, increasing;  R : (N, C) float array, the logit range c²·ln n
    degree : (N, C) float array, the least degree (:func:`least_degree`), NaN where refused
    rank : (N, C) object array of exact ints C(g+d, d), None where refused
    kappa : (N, C) float array, log rank / log n, NaN where refused
    refused : (N, C) bool array, True where ε = 1/n is within a factor
        :data:`FLOOR_FACTOR` of the rounding floor 2u·e^{2R} (the library refuses the request)
    aa22_degree_ : (N, C) float array, ⌈AA22's formula⌉ (constant 1), never refused
    aa22_kappa : (N, C) float array, log C(g+d, d) / log n for that degree (a model)
    """

    log2_n: np.ndarray
    d: np.ndarray
    c: np.ndarray
    R: np.ndarray
    degree: np.ndarray
    rank: np.ndarray
    kappa: np.ndarray
    refused: np.ndarray
    aa22_degree_: np.ndarray
    aa22_kappa: np.ndarray

    def crossing(self, level: float = 1.0, *, model: bool = False) -> np.ndarray:
        """Per n, the c at which κ first reaches ``level`` (r = n^level), interpolated
        linearly in c between the two grid points around it: an (N,) float array, NaN where
        κ stays below ``level`` on the grid or a refusal comes first. ``model=True`` uses
        AA22's formula instead of the least degree.

        Raises :class:`attnlib.AttnInputError` if level is not a finite positive number.
        """
        level = check_positive_real("level", level)
        kappa = self.aa22_kappa if model else self.kappa
        out = np.full(self.log2_n.size, np.nan)
        for i, row in enumerate(kappa):
            at = np.nonzero(~(row < level))[0]  # the first point at or above level, or NaN
            if at.size == 0 or np.isnan(row[at[0]]):
                continue
            j = int(at[0])
            if j == 0:
                out[i] = self.c[0] if row[0] == level else np.nan
                continue
            (c0, c1), (k0, k1) = self.c[j - 1 : j + 1], row[j - 1 : j + 1]
            out[i] = c0 + (level - k0) * (c1 - c0) / (k1 - k0)
        return out

    def drift(self, smallest=None, largest=None) -> np.ndarray:
        """Per c, the least-squares slope of κ against log₂ n over the sizes n = 2^k with
        smallest ≤ k ≤ largest (all when None), using accepted plans only: a (C,) float array,
        NaN where fewer than four plans are accepted. Near 0: the curves have settled (they
        collapse); clearly negative: they slide down as n grows (no threshold).

        Raises :class:`attnlib.AttnInputError` if smallest or largest is not a positive
        integer, or no size lies between them.
        """
        lo = self.log2_n.min() if smallest is None else check_int("smallest", smallest)
        hi = self.log2_n.max() if largest is None else check_int("largest", largest)
        rows = (self.log2_n >= lo) & (self.log2_n <= hi)
        if not rows.any():
            raise AttnInputError(f"no size 2^k with {lo} <= k <= {hi} in the sweep")
        out = np.full(self.c.size, np.nan)
        for j, col in enumerate(self.kappa[rows].T):
            ok = ~np.isnan(col)
            if ok.sum() >= 4:
                out[j] = np.polyfit(self.log2_n[rows][ok].astype(float), col[ok], 1)[0]
        return out


def threshold_sweep(log2_ns, cs, *, d_per_log2_n=0.5, d=None) -> ThresholdSweep:
    """The polynomial method's plan for n = 2^k (k in ``log2_ns``) and B = c·√(ln n) (c in
    ``cs``), at ε = 1/n: least degree, rank, exponent κ = log r / log n, and refusals.

    Parameters
    ----------
    log2_ns : 1-D sequence of distinct integers k from 1 to 47 (n = 2^k)
    cs : 1-D increasing sequence of positive reals, B / √(ln n)
    d_per_log2_n : positive real a; the width is d = ⌈a·log₂ n⌉ (default 1/2), so that
        d = Θ(log n) as the papers' regime requires
    d : a fixed width instead (a positive integer); then there is no threshold, and the
        curves for different n do not collapse (the check that the collapse can fail)

    Returns
    -------
    :class:`ThresholdSweep`. Nothing is allocated but the tables: plans are counts.

    Raises :class:`attnlib.AttnInputError` for log2_ns or cs that are not as above, a bad
    d_per_log2_n or d, or a rank beyond 10³⁰⁰.

    Examples
    --------
    >>> s = threshold_sweep([8, 12], [0.25, 2.0])
    >>> s.d.tolist(), s.degree[0].tolist(), s.rank[0].tolist(), s.refused[1].tolist()
    ([4, 6], [2.0, nan], [15, None], [False, True])
    >>> round(float(s.kappa[0, 0]), 3)  # log C(2 + 4, 4) / log 256 = log 15 / log 256
    0.488
    """
    ks = as_series("log2_ns", log2_ns, positive=True)
    if not np.all(ks == np.round(ks)) or ks.max() > _MAX_SWEEP_LOG2_N:
        raise AttnInputError(
            f"log2_ns must hold integers from 1 to {_MAX_SWEEP_LOG2_N} (beyond, eps = 1/n is "
            f"out of reach of double precision at every R), got {log2_ns!r:.60}"
        )
    ks = ks.astype(np.int64)
    if np.unique(ks).size != ks.size:
        raise AttnInputError(f"log2_ns must hold distinct sizes, got {log2_ns!r:.60}")
    cs = as_series("cs", cs, positive=True)
    if np.any(np.diff(cs) <= 0):
        raise AttnInputError(f"cs must be increasing, got {cs.tolist()!r:.60}")
    if d is None:
        a = check_real("d_per_log2_n", d_per_log2_n, minimum=0.0, open_minimum=True, maximum=64)
        widths = np.array([math.ceil(a * k) for k in ks], dtype=np.int64)
    else:
        widths = np.full(ks.size, check_int("d", d, maximum=10**4), dtype=np.int64)
    shape = (ks.size, cs.size)
    R, degree, kappa = np.empty(shape), np.full(shape, np.nan), np.full(shape, np.nan)
    rank = np.full(shape, None, dtype=object)
    refused = np.zeros(shape, dtype=bool)
    g_model, kappa_model = np.empty(shape), np.empty(shape)
    for i, (k, width) in enumerate(zip(ks.tolist(), widths.tolist(), strict=True)):
        ln_n, eps = k * math.log(2.0), 2.0**-k
        for j, c in enumerate(cs.tolist()):
            R[i, j] = c * c * ln_n
            g_model[i, j] = math.ceil(aa22_degree(R[i, j], eps))
            kappa_model[i, j] = math.log(feature_rank(width, int(g_model[i, j]))) / ln_n
            # the library's own rule (least_degree refuses exactly here), so the two agree
            if rounding_floor(R[i, j]) > eps / FLOOR_FACTOR:
                refused[i, j] = True
                continue
            g = least_degree(R[i, j], eps)
            degree[i, j], rank[i, j] = g, feature_rank(width, g)
            kappa[i, j] = math.log(rank[i, j]) / ln_n
    return ThresholdSweep(ks, widths, cs, R, degree, rank, kappa, refused, g_model, kappa_model)
