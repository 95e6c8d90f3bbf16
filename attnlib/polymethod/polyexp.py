"""Polynomial approximations of exp on [-R, R] with a guaranteed RELATIVE error.

The softmax only ever sees ratios exp(s_ij)/Σ_j exp(s_ij), so the right accuracy notion is
relative: a polynomial p with |p(x) − eˣ| ≤ ε·eˣ on [−R, R] changes every softmax entry by a
factor in [(1−ε)/(1+ε), (1+ε)/(1−ε)] (see :mod:`attnlib.polymethod.approx`).

Two constructions:

* ``kind="chebyshev"``: interpolation of exp at the g+1 Chebyshev points of [−R, R];
* ``kind="taylor"``: the Taylor polynomial about the midpoint of [−R, R], i.e. about 0.

:func:`relative_error_bound` gives the textbook bound on each one's error in exact arithmetic.

Neither construction *proves* an accuracy in floating point, so :func:`exp_poly` checks it:
the relative error is measured on a dense grid (:func:`max_relative_error`, 10⁵ points by
default) with the polynomial evaluated in the monomial basis, as the feature map of
:mod:`attnlib.polymethod.features` uses it. The least degree that passes is
:func:`least_degree`.

Rounding floor. Evaluating a monomial-basis approximation of eˣ at x = −R loses about
2u·e^{2R} in relative accuracy (u = 2⁻⁵³ is the unit roundoff of double precision, and
2u = 2⁻⁵² its machine epsilon, the spacing of the doubles at 1): the terms are of
size ~e^{R} while the value is e^{−R}. Past the degree where the approximation error meets
this floor, the measured error stops falling, within a factor 10 of 2u·e^{2R}, and grows again
at higher degrees.

Decisions that do not depend on the last bits. Two machines must agree on every degree and
every refusal, so:

* a request is refused by a formula, not by a measurement: when 2u·e^{2R} > ε/10
  (:data:`FLOOR_FACTOR`), i.e. when the floor is not at least ten times below ε;
* the Chebyshev coefficients are computed in decimal arithmetic with enough digits and
  rounded once to double precision, so they are the same bits on every machine (a BLAS-based
  interpolation differs in the last bits between kernels, and the monomial basis amplifies
  that by e^{2R}, up to the floor itself);
* the grid check then evaluates p by Horner's rule (exactly rounded multiplies and adds) and
  e^{−x} by numpy, whose last bit may vary between CPUs: the measured error is the same to
  about 1e-15 relative on every machine, far inside the 1e-3·ε margin a degree must clear.
"""

from __future__ import annotations

import functools
import math
import sys
from decimal import Decimal, InvalidOperation, Overflow, localcontext

import numpy as np
from numpy.polynomial import Polynomial

from .._checks import (
    AttnInputError,
    check_choice,
    check_int,
    check_memory,
    check_open_unit,
    check_positive_real,
)
from ..config import CHECK_POINTS, DEGREE_MARGIN, SEARCH_POINTS

__all__ = [
    "KINDS",
    "exp_poly",
    "exp_poly_of_degree",
    "least_degree",
    "aa22_degree",
    "relative_error_bound",
    "max_relative_error",
    "rounding_floor",
    "max_logit_range",
    "FLOOR_FACTOR",
]

KINDS = ("chebyshev", "taylor")

_MAX_DEGREE = 400
#: Machine epsilon of float64, 2u = 2⁻⁵² (u = 2⁻⁵³ is the unit roundoff): the rounding floor's
#: scale.
_MACHINE_EPSILON = 2.0**-52
_LOG_FLOAT_MAX = math.log(sys.float_info.max)
#: A request is accepted only if the rounding floor 2u·e^{2R} is at least this factor below eps.
#: The measured error plateaus between floor/10 and the floor, so every accepted request is
#: reachable, with room to spare; the rule is a formula, so every machine refuses the same set.
FLOOR_FACTOR = 10.0


def rounding_floor(R) -> float:
    """The relative error below which double precision cannot go on [−R, R]: 2u·e^{2R}.

    2u = 2⁻⁵² is machine epsilon (u = 2⁻⁵³ the unit roundoff). An estimate of the level at
    which the measured error of both constructions, evaluated in the monomial basis, stops
    falling (Chapter 6 plots it for several R).

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number.
    """
    R = check_positive_real("R", R)
    return _MACHINE_EPSILON * math.exp(min(2.0 * R, 700.0))


def max_logit_range(eps) -> float:
    """The largest R for which :func:`least_degree` accepts ``eps``: ln(eps / (10·2u)) / 2.

    Beyond it the rounding floor 2u·e^{2R} is less than :data:`FLOOR_FACTOR` times below eps
    and every request is refused. Raises :class:`attnlib.AttnInputError` if eps is not in
    (0, 1), or is at most 10·2u = 10·2⁻⁵², where no range R > 0 is accepted.

    Examples
    --------
    >>> round(max_logit_range(1e-2), 2)
    14.57
    """
    eps = check_open_unit("eps", eps)
    if eps <= FLOOR_FACTOR * _MACHINE_EPSILON:  # then even R → 0 is refused: no range reaches eps
        raise AttnInputError(
            f"eps={eps:g} is out of reach on every range [-R, R] in double precision: it must "
            f"exceed {FLOOR_FACTOR:g}·2u = {FLOOR_FACTOR * _MACHINE_EPSILON:.3g} "
            "(2u = 2^-52 is machine epsilon)"
        )
    return math.log(eps / (FLOOR_FACTOR * _MACHINE_EPSILON)) / 2.0


def _build(R: float, g: int, kind: str) -> Polynomial:
    """The degree-g candidate, in the monomial basis of x itself (domain = window = [−1, 1])."""
    if kind == "taylor":
        # Taylor about the midpoint 0 of [-R, R]: Σ_k x^k / k!.
        return Polynomial([1.0 / math.factorial(k) for k in range(g + 1)])
    return Polynomial(_chebyshev_interpolant(R, g))


def _decimal_pi() -> Decimal:
    """π to the current decimal precision (the series of the Python ``decimal`` docs)."""
    with localcontext() as ctx:
        ctx.prec += 2
        three = Decimal(3)
        lasts, t, s, n, na, d, da = 0, three, 3, 1, 0, 0, 24
        while s != lasts:
            lasts = s
            n, na = n + na, na + 8
            d, da = d + da, da + 32
            t = (t * n) / d
            s += t
    return +s


def _decimal_cos(x: Decimal) -> Decimal:
    """cos x by its Taylor series, to the current decimal precision (|x| ≤ π here)."""
    with localcontext() as ctx:
        ctx.prec += 2
        i, lasts, s, fact, num, sign = 0, 0, Decimal(1), 1, Decimal(1), 1
        while s != lasts:
            lasts = s
            i += 2
            fact *= i * (i - 1)
            num *= x * x
            sign = -sign
            s += num / fact * sign
    return +s


@functools.lru_cache(maxsize=1024)
def _chebyshev_interpolant(R: float, g: int) -> tuple[float, ...]:
    """Monomial coefficients (of x) of the degree-g interpolant of exp at the g+1 Chebyshev
    points of the first kind on [−R, R], the interpolant numpy's ``Chebyshev.interpolate``
    builds.

    Computed in decimal arithmetic and rounded once to double precision, so the coefficients
    are the same on every machine. The digits cover the growth of the Chebyshev-to-monomial
    conversion (about (1+√2)^g) with 40 to spare. For R < 1 the coefficient of x^k would lose
    k·log₁₀(1/R) more digits in the division by R^k, so a series is summed instead
    (:func:`_small_range_interpolant`).
    """
    if R < 1.0:
        return _small_range_interpolant(R, g)
    N = g + 1
    with localcontext() as ctx:
        ctx.prec = 40 + (2 * g) // 5
        # A range too large for double precision gives inf or NaN coefficients (refused by the
        # callers), not a decimal exception.
        ctx.traps[Overflow] = ctx.traps[InvalidOperation] = False
        R_dec = Decimal(R)
        pi = _decimal_pi()
        t = [_decimal_cos(pi * (2 * j + 1) / (2 * N)) for j in range(N)]
        f = [(R_dec * tj).exp() for tj in t]
        # Chebyshev coefficients a_k = (2/N) Σ_j f(t_j) T_k(t_j), with a_0 halved.
        a = [sum(f) / N]
        T_prev, T_cur = [Decimal(1)] * N, t
        for _ in range(1, N):
            a.append(2 * sum(fj * Tj for fj, Tj in zip(f, T_cur, strict=True)) / N)
            T_next = [2 * tj * Tc - Tp for tj, Tc, Tp in zip(t, T_cur, T_prev, strict=True)]
            T_prev, T_cur = T_cur, T_next
        # Σ a_k T_k(t) in the monomial basis of t, by T_{k+1} = 2t T_k − T_{k−1}.
        mono = [Decimal(0)] * N
        P_prev, P_cur = [Decimal(1)], [Decimal(0), Decimal(1)]
        mono[0] += a[0]
        for k in range(1, N):
            for i, c in enumerate(P_cur):
                mono[i] += a[k] * c
            P_next = [Decimal(0)] + [2 * c for c in P_cur]
            for i, c in enumerate(P_prev):
                P_next[i] -= c
            P_prev, P_cur = P_cur, P_next
        # t = x / R
        return tuple(float(c / R_dec**k) for k, c in enumerate(mono))


def _small_range_interpolant(R: float, g: int) -> tuple[float, ...]:
    """:func:`_chebyshev_interpolant` for R < 1, as Σ_k x^k/k! reduced modulo ω.

    Interpolation at the roots of ω(x) = Π_j (x − R t_j) = R^{g+1} T_{g+1}(x/R) / 2^g (monic)
    maps x^k to its remainder modulo ω, so the interpolant of eˣ = Σ_k x^k/k! is
    Σ_{k≤g} x^k/k! + Σ_{k>g} (x^k mod ω)/k!. ω's coefficients are T_{g+1}'s integers times
    R^{g+1−i}/2^g, so no term is divided by a power of R. For R < 1 each coefficient is 1/i!
    plus corrections far smaller than it, and 50 digits give it to far below double precision;
    the series stops when two successive terms are below 10^-52 relative.
    """
    N = g + 1
    with localcontext() as ctx:
        ctx.prec = 50
        # T_{g+1} in the monomial basis (exact integers), by T_{k+1} = 2t T_k − T_{k−1}
        t_prev, t_cur = [1], [0, 1]
        for _ in range(g):
            t_next = [0] + [2 * c for c in t_cur]
            for i, c in enumerate(t_prev):
                t_next[i] -= c
            t_prev, t_cur = t_cur, t_next
        R_dec, lead = Decimal(R), Decimal(2) ** g
        w = [Decimal(t_cur[i]) * R_dec ** (N - i) / lead for i in range(N)]  # ω below x^{g+1}
        coef = [Decimal(1) / math.factorial(i) for i in range(N)]
        rem = [-wi for wi in w]  # x^{g+1} mod ω
        k, fact, quiet = N, Decimal(math.factorial(N)), 0
        tiny = Decimal(10) ** -(ctx.prec + 2)
        while quiet < 2:
            largest = Decimal(0)
            for i in range(N):
                term = rem[i] / fact
                coef[i] += term
                largest = max(largest, abs(term) * math.factorial(i))
            quiet = quiet + 1 if largest < tiny else 0
            top = rem[-1]  # x·(x^k mod ω) has x^{g+1}-coefficient top: subtract top·ω
            rem = [-top * w[0]] + [rem[i - 1] - top * w[i] for i in range(1, N)]
            k += 1
            fact *= k
        return tuple(float(c) for c in coef)


def exp_poly_of_degree(R, g, *, kind: str = "chebyshev") -> Polynomial:
    """The degree-g candidate that :func:`exp_poly` tries, with NO error guarantee.

    ``kind="chebyshev"``: the interpolant of exp at the g+1 Chebyshev points of [−R, R];
    ``kind="taylor"``: Σ_{k≤g} x^k/k!. Use :func:`max_relative_error` to measure it; use
    :func:`exp_poly` to get the least degree that meets an accuracy.

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number, g is not an
    integer from 0 to 400, kind is not one of :data:`KINDS`, or the coefficients overflow.
    """
    R = check_positive_real("R", R)
    g = check_int("g", g, minimum=0, maximum=_MAX_DEGREE)
    kind = check_choice("kind", kind, KINDS)
    with np.errstate(over="ignore", invalid="ignore"):
        poly = _build(R, g, kind)
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

    ``poly`` is any callable on arrays (a numpy Polynomial). Returns a float (inf where p
    overflows).

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number, ``poly`` is
    not a callable returning one real value per point, or ``points`` is not an integer ≥ 2 (or
    too large for memory).
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
        f"2u*e^(2R) = {rounding_floor(R):.1e} (u = 2^-53). Use a larger eps or a smaller "
        "logit range R"
    )


@functools.lru_cache(maxsize=512)
def _least_degree(R: float, eps: float, kind: str) -> int:
    if rounding_floor(R) > eps / FLOOR_FACTOR:
        _refuse(R, eps, kind, f"eps is not {FLOOR_FACTOR:g} times above the rounding floor")
    target = eps * (1.0 - DEGREE_MARGIN)
    best, best_g = math.inf, 0
    for g in range(_MAX_DEGREE + 1):
        poly = _build(R, g, kind)
        err = max_relative_error(poly, R, points=SEARCH_POINTS)
        if err <= target and max_relative_error(poly, R) <= target:
            return g
        if err < best:
            best, best_g = err, g
        elif best < 0.5 and g - best_g >= 8:
            # The error had started to converge, then rounding took over: raising the degree
            # only makes things worse. (Below convergence the error may grow with g at first.)
            _refuse(R, eps, kind, f"the best error found is {best:.0e} at degree {best_g}")
    _refuse(R, eps, kind, f"no degree up to {_MAX_DEGREE} reaches it")
    raise AssertionError("unreachable")


def least_degree(R, eps, *, kind: str = "chebyshev") -> int:
    """The least degree g whose ``kind`` polynomial has max relative error ≤ eps on [−R, R].

    The error is measured on a dense grid of 10⁵ points (see :func:`max_relative_error`) and
    must clear eps by a margin of 1e-3·eps. For example R = 1, ε = 1e-6 gives Taylor 9,
    Chebyshev 7. The result is the same on every machine (see the module docstring).

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number, eps is not in
    (0, 1), or eps is within a factor :data:`FLOOR_FACTOR` of the rounding floor 2u·e^{2R}
    (or above it), where double precision cannot deliver it reliably.

    Examples
    --------
    >>> least_degree(1.0, 1e-6), least_degree(1.0, 1e-6, kind="taylor")
    (7, 9)
    """
    R = check_positive_real("R", R)
    eps = check_open_unit("eps", eps)
    kind = check_choice("kind", kind, KINDS)
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

    This is the softmax approximation of AS23 Lemma 3.1, which quotes AA22's theorem: there, a
    polynomial of degree Θ(max{log(1/ε)/log(log(1/ε)/B), B}) with relative error ε on
    [0, B] exists; on [−R, R] (an interval of length B = 2R) we construct one explicitly.

    Raises :class:`attnlib.AttnInputError` as :func:`least_degree` does.

    Examples
    --------
    >>> p = exp_poly(1.0, 1e-6)
    >>> p.degree(), max_relative_error(p, 1.0) <= 1e-6
    (7, True)
    """
    g = least_degree(R, eps, kind=kind)
    return _build(float(R), g, kind)


def aa22_degree(R, eps) -> float:
    """AA22's order formula for the degree, with no constant: max{B, L / log(L/B)}.

    Here B = 2R is the length of [−R, R] (relative error is shift-invariant, so [−R, R] is
    [0, 2R] up to a factor e^{−R}) and L = log(1/ε) (AA22's main theorem, as its abstract
    states it, for B ≥ 1 and ε ∈ (0, 1); AS23 quote it as their Lemma 3.1; applying it as a
    relative error on [−R, R] is our reading). For R < 1/2 (B < 1) the theorem does not apply
    and the formula is only extrapolated. The logarithm is clamped at 1 (L/B ≤ e), where the
    formula is only meaningful up to its constant and the B term dominates anyway.
    Returns a float: an order of growth, not a degree that is guaranteed to suffice.

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number (at most half
    the largest float) or eps is not in (0, 1).

    Examples
    --------
    >>> aa22_degree(20.0, 1e-3)
    40.0
    """
    R = check_positive_real("R", R)
    eps = check_open_unit("eps", eps)
    B = 2.0 * R
    if not math.isfinite(B):
        raise AttnInputError(f"R must be at most {sys.float_info.max / 2:.3g}, got {R!r}")
    L = math.log(1.0 / eps)
    return max(B, L / math.log(max(L / B, math.e)))


def relative_error_bound(R, g, *, kind: str = "chebyshev") -> float:
    """The textbook bound on the relative error |p(x)e^{−x} − 1| on [−R, R] of the degree-g
    candidate of :func:`exp_poly_of_degree` (Chapter 6's Proposition, exact arithmetic):

    * ``kind="taylor"``: e^R · R^{g+1} / (g+1)!  (Taylor's remainder about 0);
    * ``kind="chebyshev"``: 2e^{2R} · (R/2)^{g+1} / (g+1)!  (interpolation at the Chebyshev
      points, whose node polynomial is at most 2(R/2)^{g+1} on [−R, R]).

    Computed through logarithms, so it never overflows: a bound beyond the float range is
    ``inf``, and one below the smallest positive float is that float. Rounding
    (:func:`rounding_floor`) is not included.

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number, g is not an
    integer from 0 to 400, or kind is not one of :data:`KINDS`.

    Examples
    --------
    >>> f"{relative_error_bound(1.0, 6, kind='taylor'):.3e}"
    '5.393e-04'
    >>> relative_error_bound(1.0, 6) < relative_error_bound(1.0, 6, kind="taylor")
    True
    """
    R = check_positive_real("R", R)
    g = check_int("g", g, minimum=0, maximum=_MAX_DEGREE)
    kind = check_choice("kind", kind, KINDS)
    if kind == "taylor":
        log_bound = R + (g + 1) * math.log(R)
    else:
        # R/2 is exact unless R is subnormal, where halving it would round (or give 0)
        half = math.log(R / 2.0) if R >= 2 * sys.float_info.min else math.log(R) - math.log(2)
        log_bound = math.log(2.0) + 2.0 * R + (g + 1) * half
    log_bound -= math.lgamma(g + 2)
    if log_bound >= _LOG_FLOAT_MAX:
        return math.inf
    # a bound below the smallest float is rounded up to it, so that it is still a bound
    return max(math.exp(log_bound), math.ulp(0.0))
