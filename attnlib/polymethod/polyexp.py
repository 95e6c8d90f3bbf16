"""Polynomial approximations of exp on [-R, R] with a guaranteed RELATIVE error (THEORY.md §4).

The softmax only ever sees ratios exp(s_ij)/Σ_j exp(s_ij), so the right accuracy notion is
relative: a polynomial p with |p(x) − eˣ| ≤ ε·eˣ on [−R, R] changes every softmax entry by a
factor in [(1−ε)/(1+ε), (1+ε)/(1−ε)] (see :mod:`attnlib.polymethod.approx`).

Two constructions:

* ``kind="chebyshev"``: interpolation of exp at the g+1 Chebyshev points of [−R, R];
* ``kind="taylor"``: the Taylor polynomial about the midpoint of [−R, R], i.e. about 0.

Neither construction *proves* the bound in floating point, so :func:`exp_poly` checks it:
the relative error is measured on a dense grid (:func:`max_relative_error`, 10⁵ points by
default) with the polynomial evaluated in the monomial basis, as the feature map of
:mod:`attnlib.polymethod.features` uses it. The least degree that passes is
:func:`least_degree`.

Rounding floor. Evaluating a monomial-basis approximation of eˣ at x = −R loses about
u·e^{2R} in relative accuracy (u = 2⁻⁵² is the double-precision spacing): the terms are of
size ~e^{R} while the value is e^{−R}. Past the degree where the approximation error meets
this floor, the measured error stops falling, within a factor 10 of u·e^{2R}, and grows again
at higher degrees (at R = 8: between 1.5e-9 and 1.4e-8 for degrees 31–41, one lucky degree
at 4e-10, then up to 1e-2 by degree 58). So a relative error
1e-9 is out of reach from R ≈ 8 on. Unreachable requests raise :class:`attnlib.AttnInputError`
instead of returning a polynomial that silently misses the bound.
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np
from numpy.polynomial import Chebyshev, Polynomial

from .._checks import (
    AttnInputError,
    check_choice,
    check_int,
    check_memory,
    check_open_unit,
    check_positive_real,
)

__all__ = [
    "KINDS",
    "exp_poly",
    "exp_poly_of_degree",
    "least_degree",
    "aa22_degree",
    "max_relative_error",
    "rounding_floor",
]

KINDS = ("chebyshev", "taylor")

#: Grid size of the guarantee check (the issue asks for 10⁵ points).
CHECK_POINTS = 100_001
#: Coarser grid used while searching the degree; the winner is re-checked on the dense grid.
_SEARCH_POINTS = 4_097
#: The dense-grid error must stay this far below eps, so that a different dense grid (e.g. a
#: reader's np.linspace(-R, R, 10**5)) cannot find a point just above eps between ours.
_MARGIN = 1e-3
_MAX_DEGREE = 400
_UNIT_ROUNDOFF = 2.0**-52
#: Requests below rounding_floor(R) / 8 are refused without a search; requests above that are
#: searched, and refused if the error stops improving before it reaches eps.
_FLOOR_SLACK = 8.0


def _check_kind(kind) -> str:
    return check_choice("kind", kind, KINDS)


def rounding_floor(R) -> float:
    """The relative error below which double precision cannot go on [−R, R]: u·e^{2R}.

    u = 2⁻⁵². An estimate of the level at which the measured error of both constructions,
    evaluated in the monomial basis, stops falling (Chapter 6 plots it for several R).
    """
    R = check_positive_real("R", R)
    return _UNIT_ROUNDOFF * math.exp(min(2.0 * R, 700.0))


def _build(R: float, g: int, kind: str) -> Polynomial:
    """The degree-g candidate, in the monomial basis of x itself (domain = window = [−1, 1])."""
    if kind == "taylor":
        # Taylor about the midpoint 0 of [-R, R]: Σ_k x^k / k!.
        return Polynomial([1.0 / math.factorial(k) for k in range(g + 1)])
    cheb = Chebyshev.interpolate(np.exp, g, domain=[-R, R])
    return cheb.convert(kind=Polynomial, domain=[-1, 1], window=[-1, 1])


def exp_poly_of_degree(R, g, *, kind: str = "chebyshev") -> Polynomial:
    """The degree-g candidate that :func:`exp_poly` tries, with NO error guarantee.

    ``kind="chebyshev"``: the interpolant of exp at the g+1 Chebyshev points of [−R, R];
    ``kind="taylor"``: Σ_{k≤g} x^k/k!. Use :func:`max_relative_error` to measure it; use
    :func:`exp_poly` to get the least degree that meets an accuracy.
    """
    R = check_positive_real("R", R)
    g = check_int("g", g, minimum=0, maximum=_MAX_DEGREE)
    with np.errstate(over="ignore", invalid="ignore"):
        poly = _build(R, g, _check_kind(kind))
    if not np.isfinite(poly.coef).all():
        raise AttnInputError(
            f"R={R:g} is too large for a degree-{g} {kind} polynomial of exp in double "
            "precision: its coefficients overflow"
        )
    return poly


def _grid(R: float, points: int) -> np.ndarray:
    return np.linspace(-R, R, points)


def max_relative_error(poly, R, *, points: int = CHECK_POINTS) -> float:
    """max |p(x)·e^{−x} − 1| over ``points`` equispaced x in [−R, R] (endpoints included).

    ``poly`` is any callable on arrays (a numpy Polynomial). Returns a float.
    """
    R = check_positive_real("R", R)
    if not callable(poly):
        raise AttnInputError(f"poly must be a callable polynomial, got {type(poly).__name__}")
    points = check_int("points", points, minimum=2)
    # the grid, the polynomial's values and about four temporaries of the same length
    check_memory("max_relative_error's grid", 6 * 8 * points, culprits="points")
    x = _grid(R, points)
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.asarray(poly(x))
        if values.shape != x.shape or values.dtype.kind not in "fiu":
            raise AttnInputError(
                f"poly must return one real value per point, shape {x.shape}; got shape "
                f"{values.shape} dtype {values.dtype}"
            )
        rel = np.abs(values.astype(np.float64) * np.exp(-x) - 1.0)
    if not np.isfinite(rel).all():
        return math.inf
    return float(rel.max())


def _refuse(R: float, eps: float, kind: str, detail: str):
    raise AttnInputError(
        f"eps={eps:g} is out of reach for a {kind} polynomial approximation of exp on "
        f"[-R, R] with R={R:g} in double precision ({detail}); the rounding floor is about "
        f"u*e^(2R) = {rounding_floor(R):.1e}. Use a larger eps or a smaller logit range R"
    )


@functools.lru_cache(maxsize=512)
def _least_degree(R: float, eps: float, kind: str) -> int:
    if eps < rounding_floor(R) / _FLOOR_SLACK:
        _refuse(R, eps, kind, "eps is far below the rounding floor")
    target = eps * (1.0 - _MARGIN)
    best, best_g = math.inf, 0
    for g in range(_MAX_DEGREE + 1):
        poly = _build(R, g, kind)
        err = max_relative_error(poly, R, points=_SEARCH_POINTS)
        if err <= target and max_relative_error(poly, R) <= target:
            return g
        if err < best:
            best, best_g = err, g
        elif best < 0.5 and g - best_g >= 8:
            # The error had started to converge, then rounding took over: raising the degree
            # only makes things worse. (Below convergence the error may grow with g at first.)
            _refuse(R, eps, kind, f"the best error found is {best:.1e} at degree {best_g}")
    _refuse(R, eps, kind, f"no degree up to {_MAX_DEGREE} reaches it")
    raise AssertionError("unreachable")


def least_degree(R, eps, *, kind: str = "chebyshev") -> int:
    """The least degree g whose ``kind`` polynomial has max relative error ≤ eps on [−R, R].

    The error is measured on a dense grid of 10⁵ points (see :func:`max_relative_error`).
    Measured values for the THEORY.md §4 table: R = 1, ε = 1e-6 gives Taylor 9, Chebyshev 7.
    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number, eps is not in
    (0, 1), or eps is below what double precision can deliver on [−R, R].
    """
    R = check_positive_real("R", R)
    eps = check_open_unit("eps", eps)
    kind = _check_kind(kind)
    return _least_degree(R, eps, kind)


def exp_poly(R, eps, *, kind: str = "chebyshev") -> Polynomial:
    """A polynomial p with max_{x∈[−R,R]} |p(x) − eˣ| / eˣ ≤ eps, checked on a dense grid.

    Parameters
    ----------
    R : positive finite real, the half-width of the interval (the logit range)
    eps : real in (0, 1), the relative accuracy
    kind : ``"chebyshev"`` (interpolation at Chebyshev points, the default: lowest degree) or
        ``"taylor"`` (Taylor about the midpoint 0)

    Returns
    -------
    numpy.polynomial.Polynomial of degree :func:`least_degree`, with ``domain == window ==
    [-1, 1]`` so that ``p.coef[k]`` is the coefficient of x^k itself.

    This is the softmax approximation of AS23 Lemma 3.1 (which quotes AA22): there, a
    polynomial of degree Θ(max{log(1/ε)/log(log(1/ε)/B), B}) with relative error ε on
    [0, B] exists; on [−R, R] (an interval of length B = 2R) we construct one explicitly.
    """
    g = least_degree(R, eps, kind=kind)
    return _build(float(R), g, kind)


def aa22_degree(R, eps) -> float:
    """AA22's order formula for the degree, with no constant: max{B, L / log(L/B)}.

    Here B = 2R is the length of [−R, R] (relative error is shift-invariant, so [−R, R] is
    [0, 2R] up to a factor e^{−R}) and L = log(1/ε) (AS23 Lemma 3.1, quoting AA22; THEORY.md
    §4, tagged [abstract]). The logarithm is clamped at 1 (L/B ≤ e), where the formula is
    only meaningful up to its constant and the B term dominates anyway.
    Returns a float: an order of growth, not a degree that is guaranteed to suffice.
    """
    R = check_positive_real("R", R)
    eps = check_open_unit("eps", eps)
    B = 2.0 * R
    if not math.isfinite(B):
        raise AttnInputError(f"R must be at most {sys.float_info.max / 2:.3g}, got {R!r}")
    L = math.log(1.0 / eps)
    return max(B, L / math.log(max(L / B, math.e)))
