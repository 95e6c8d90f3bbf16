"""AA22's order formula turned into a rank: the model of the threshold B ≈ √log n.

The polynomial method's rank is r = C(g+d, d) for a polynomial of degree g. Taking g from
AA22's order formula with constant 1 (:func:`attnlib.polymethod.aa22_degree`) gives a *model*
of the rank, not a measurement: :func:`aa22_rank`. In the regime of the papers, d = log₂ n
and ε = 1/n, the rank is n^κ with κ = log r / log n (:func:`rank_exponent`); κ decays
towards 0 when the logit range R = B² grows more slowly than log n, and stays large when
R = Θ(log n) (Chapters 6 and 7).
"""

from __future__ import annotations

import math

from .._checks import AttnInputError, check_int, check_open_unit, check_positive_real
from .polyexp import aa22_degree

__all__ = ["aa22_rank", "rank_exponent"]

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
