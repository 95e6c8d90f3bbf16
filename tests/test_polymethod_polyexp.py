"""exp_poly, least_degree, aa22_degree: the guarantee on a dense grid, the table of measured
degrees, and refusals of unreachable or malformed requests."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import polymethod as pm
from attnlib.config import DEGREE_MARGIN

RS = [0.25, 0.5, 1.0, 2.0, 4.0]
EPSS = [1e-2, 1e-4, 1e-6]

# Measured least degrees for relative error ε on [−R, R]: (R, ε, Taylor degree, Chebyshev degree).
DEGREE_TABLE = [
    (0.5, 1e-3, 4, 3),
    (0.5, 1e-6, 7, 6),
    (1, 1e-3, 6, 5),
    (1, 1e-6, 9, 7),
    (2, 1e-3, 10, 7),
    (2, 1e-6, 14, 10),
    (4, 1e-3, 17, 11),
    (4, 1e-6, 21, 15),
]


def _independent_rel_error(p, R):
    """Relative error on a 10⁵-point grid different from the library's own (no endpoints)."""
    x = np.linspace(-R, R, 100_002)[1:-1]
    return float(np.max(np.abs(p(x) / np.exp(x) - 1.0)))


@pytest.mark.parametrize("kind", pm.KINDS)
@pytest.mark.parametrize("R", RS)
@pytest.mark.parametrize("eps", EPSS)
def test_exp_poly_relative_error_on_dense_grid(R, eps, kind):
    p = pm.exp_poly(R, eps, kind=kind)
    assert isinstance(p, np.polynomial.Polynomial)
    assert _independent_rel_error(p, R) <= eps
    # both endpoints, where the relative error of exp approximations peaks
    ends = np.array([-R, R])
    assert np.all(np.abs(p(ends) * np.exp(-ends) - 1) <= eps)
    # least: one degree lower misses eps (on the library's grid)
    g = p.degree()
    assert g == pm.least_degree(R, eps, kind=kind)
    if g > 0:
        lower = pm.exp_poly_of_degree(R, g - 1, kind=kind)
        assert pm.max_relative_error(lower, R) > eps * (1 - DEGREE_MARGIN)


@pytest.mark.parametrize("R, eps, taylor, cheb", DEGREE_TABLE)
def test_least_degree_reproduces_the_measured_table(R, eps, taylor, cheb):
    assert abs(pm.least_degree(R, eps, kind="taylor") - taylor) <= 1
    assert abs(pm.least_degree(R, eps, kind="chebyshev") - cheb) <= 1


def test_chebyshev_never_needs_more_degree_than_taylor():
    for R in RS:
        for eps in EPSS:
            assert pm.least_degree(R, eps) <= pm.least_degree(R, eps, kind="taylor")


def test_least_degree_monotone_in_R_and_eps():
    degs = [[pm.least_degree(R, eps) for R in RS] for eps in EPSS]
    arr = np.array(degs)
    assert np.all(np.diff(arr, axis=1) >= 0)  # larger R, larger degree
    assert np.all(np.diff(arr, axis=0) >= 0)  # smaller eps, larger degree


def test_aa22_degree_is_the_order_formula():
    # B = 2R, L = log(1/eps): max{B, L / log(L/B)}
    R, eps = 0.5, 1e-6
    L = math.log(1e6)
    assert pm.aa22_degree(R, eps) == pytest.approx(L / math.log(L / 1.0))
    # large R: the B = 2R term dominates
    assert pm.aa22_degree(20.0, 1e-3) == pytest.approx(40.0)
    # grows as eps falls and as R grows
    assert pm.aa22_degree(1, 1e-9) > pm.aa22_degree(1, 1e-3)
    assert pm.aa22_degree(8, 1e-3) > pm.aa22_degree(1, 1e-3)


def test_measured_degree_tracks_aa22_within_constant_band():
    # AA22's theorem needs an interval length L = 2R >= 1: R = 1/4 is outside it
    in_range = [R for R in RS if 2 * R >= 1]
    assert in_range == [0.5, 1.0, 2.0, 4.0]
    ratios = [pm.least_degree(R, eps) / pm.aa22_degree(R, eps) for R in in_range for eps in EPSS]
    assert 0.5 <= min(ratios) and max(ratios) <= 2.0, ratios


@pytest.mark.parametrize("kind", pm.KINDS)
@pytest.mark.parametrize("R", [0.5, 1.0, 4.0])
def test_relative_error_bound_holds_above_the_rounding_floor(R, kind):
    taylor = kind == "taylor"
    for g in range(0, 31):
        bound = pm.relative_error_bound(R, g, kind=kind)
        exact = (
            math.exp(R) * R ** (g + 1) / math.factorial(g + 1)
            if taylor
            else 2 * math.exp(2 * R) * (R / 2) ** (g + 1) / math.factorial(g + 1)
        )
        assert bound == pytest.approx(exact, rel=1e-12)
        if bound > 1e3 * (pm.rounding_floor(R) + 1e-16):
            assert pm.max_relative_error(pm.exp_poly_of_degree(R, g, kind=kind), R) <= bound


@pytest.mark.parametrize("R", [0.999, 0.5, 1e-3, 1e-12, 1e-30, 1e-300, 5e-324])
@pytest.mark.parametrize("g", [1, 3, 10, 40, 400])
def test_small_range_interpolant_has_the_coefficients_of_the_interpolant(R, g):
    """For R < 1 the coefficient of x^k is 1/k! plus corrections of order R² (they vanish as
    R → 0): computed by a series, not by dividing by R^k (which left garbage, or an overflow
    refused as "R too large", at R = 1e-30)."""
    p = pm.exp_poly_of_degree(R, g)
    coef = p.coef
    assert np.isfinite(coef).all() and coef.size == g + 1
    taylor = np.array([1 / math.factorial(k) for k in range(g + 1)])
    if R <= 1e-6:  # the corrections, relative O(R²), are below 1e-9
        assert np.allclose(coef, taylor, rtol=1e-9, atol=0)
    # the textbook bound in exact arithmetic, plus the rounding of the evaluation
    bound = pm.relative_error_bound(R, g) + 8 * pm.rounding_floor(R)
    assert pm.max_relative_error(p, R, points=2001) <= bound


def _interpolant_oracle(R: float, g: int) -> list[float]:
    """The interpolant's monomial coefficients by the textbook route (Chebyshev coefficients
    from exp at the nodes, converted to the monomials of t = x/R, divided by R^k), in decimal
    arithmetic with the k·log10(1/R) digits the division by R^k loses added back."""
    from decimal import Decimal, localcontext

    from attnlib.polymethod.polyexp import _decimal_cos, _decimal_pi

    N = g + 1
    with localcontext() as ctx:
        ctx.prec = 60 + g + math.ceil(g * max(0.0, -math.log10(R)))
        R_dec, pi = Decimal(R), _decimal_pi()
        t = [_decimal_cos(pi * (2 * j + 1) / (2 * N)) for j in range(N)]
        f = [(R_dec * tj).exp() for tj in t]
        mono = [Decimal(0)] * N
        T_prev, T_cur = [Decimal(1)] * N, t  # T_k at the nodes
        P_prev, P_cur = [Decimal(1)], [Decimal(0), Decimal(1)]  # T_k's monomial coefficients
        mono[0] = sum(f) / N
        for _ in range(1, N):
            a_k = 2 * sum(fj * Tj for fj, Tj in zip(f, T_cur, strict=True)) / N
            for i, c in enumerate(P_cur):
                mono[i] += a_k * c
            T_prev, T_cur = (
                T_cur,
                [2 * tj * c - p for tj, c, p in zip(t, T_cur, T_prev, strict=True)],
            )
            P_next = [Decimal(0)] + [2 * c for c in P_cur]
            for i, c in enumerate(P_prev):
                P_next[i] -= c
            P_prev, P_cur = P_cur, P_next
        return [float(c / R_dec**k) for k, c in enumerate(mono)]


@pytest.mark.parametrize("R", [0.999, 0.3, 1e-3, 1e-8])
@pytest.mark.parametrize("g", [2, 5, 12])
def test_small_range_interpolant_matches_a_high_precision_oracle(R, g):
    """The series for R < 1 gives the interpolant's coefficients rounded once: the same bits
    as the textbook route taken with enough digits."""
    assert list(pm.exp_poly_of_degree(R, g).coef) == _interpolant_oracle(R, g)


def test_max_logit_range_refuses_eps_out_of_every_range():
    with pytest.raises(AttnInputError, match="eps=1e-20 is out of reach on every range"):
        pm.max_logit_range(1e-20)
    R = pm.max_logit_range(3e-15)  # just above 10·u: a tiny but positive range
    assert 0 < R < 0.2 and pm.least_degree(R, 3e-15) >= 0


def test_relative_error_bound_edges():
    assert pm.relative_error_bound(1e300, 3) == math.inf
    # e^{-120000}-ish is below every float: rounded *up* to the smallest one, so that it is
    # still an upper bound (0.0 would claim an exact polynomial)
    assert pm.relative_error_bound(1e-300, 400) == math.ulp(0.0)
    # R/2 underflows to 0 (and a subnormal R/2 rounds): the bound is taken through log R
    for R in (5e-324, 3 * 5e-324, 2.0**-1060):
        for kind in pm.KINDS:
            assert 0 < pm.relative_error_bound(R, 0, kind=kind) < 1e-300
    assert math.isclose(
        pm.relative_error_bound(2.0**-1060, 0),
        2 * math.exp(2 * 2.0**-1060) * 2.0**-1061,
        rel_tol=1e-12,
    )
    with pytest.raises(AttnInputError, match="g must be an integer <= 400"):
        pm.relative_error_bound(1.0, 401)
    with pytest.raises(AttnInputError, match="kind must be one of"):
        pm.relative_error_bound(1.0, 3, kind="remez")


OUT_OF_REACH = [
    (lambda: pm.exp_poly(8, 1e-9), r"out of reach.*R=8"),
    (lambda: pm.least_degree(12, 1e-7, kind="taylor"), "out of reach"),
    (lambda: pm.exp_poly(30, 0.5), "out of reach"),
]


@pytest.mark.parametrize("call,message", OUT_OF_REACH)
def test_unreachable_precision_is_refused(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()
    # just inside reach works, and is checked
    p = pm.exp_poly(8, 1e-6)
    assert _independent_rel_error(p, 8) <= 1e-6
    assert pm.rounding_floor(8) == pytest.approx(2.0**-52 * math.exp(16))


@pytest.mark.parametrize("fn", [pm.exp_poly, pm.least_degree, pm.aa22_degree])
@pytest.mark.parametrize("eps", [0, 1, -0.1, 1.5, math.nan, math.inf, True, "0.1", None])
def test_bad_eps(fn, eps):
    with pytest.raises(AttnInputError, match=r"eps must be a real number in \(0, 1\)"):
        fn(1.0, eps)


@pytest.mark.parametrize("fn", [pm.exp_poly, pm.least_degree, pm.aa22_degree])
@pytest.mark.parametrize("R", [math.nan, math.inf, -math.inf, 0, -1.0, "1", None, False])
def test_bad_R(fn, R):
    with pytest.raises(AttnInputError, match="R must be a positive finite real number"):
        fn(R, 1e-3)


BAD_KIND_AND_GRID = [
    (lambda: pm.exp_poly(1.0, 1e-3, kind="remez"), "kind must be one of"),
    (lambda: pm.least_degree(1.0, 1e-3, kind=None), "kind must be one of"),
    (lambda: pm.max_relative_error(np.exp, 1.0, points=1), "points must be an integer >= 2"),
    (lambda: pm.exp_poly_of_degree(1.0, -1), "g must be an integer >= 0"),
    (lambda: pm.exp_poly_of_degree(1.0, 3, kind="remez"), "kind must be one of"),
    (lambda: pm.max_relative_error([1.0, 1.0], 1.0), "poly must be a callable"),
]


@pytest.mark.parametrize("call,message", BAD_KIND_AND_GRID)
def test_bad_kind_and_grid(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()


# ---- decisions that do not depend on the machine ------------------------------------------


@pytest.mark.parametrize("eps", [1e-1, 1e-2, 1e-3, 1e-6])
def test_refusal_is_the_floor_formula(eps):
    """Accepted just inside max_logit_range(eps), refused just outside: a formula decides."""
    R = pm.max_logit_range(eps)
    assert pm.rounding_floor(R) == pytest.approx(eps / pm.FLOOR_FACTOR, rel=1e-12)
    g = pm.least_degree(R * (1 - 1e-6), eps)
    assert pm.max_relative_error(pm.exp_poly_of_degree(R * (1 - 1e-6), g), R * (1 - 1e-6)) <= eps
    with pytest.raises(AttnInputError, match="not 10 times above the rounding floor"):
        pm.least_degree(R * (1 + 1e-6), eps)


_COEFFICIENTS_PROBE = """
import sys
from attnlib.polymethod import polyexp
for R, g in [(1.0, 7), (4.0, 15), (8.0, 30), (12.0, 40)]:
    print(*(c.hex() for c in polyexp._chebyshev_interpolant(R, g)))
print(*(polyexp.least_degree(R, 1e-3) for R in (0.5, 2.0, 8.0, 13.0)))
"""


def test_chebyshev_coefficients_are_the_same_bits_under_other_kernels():
    """A reader's machine with another BLAS kernel and fewer SIMD extensions builds the same
    polynomials, bit for bit, and so the same least degrees."""
    import os
    import platform
    import subprocess
    import sys

    def run(extra):
        env = {**os.environ, **extra}
        out = subprocess.run(
            [sys.executable, "-c", _COEFFICIENTS_PROBE], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    native = run({})
    if platform.machine().lower() in ("x86_64", "amd64"):
        older = {
            "OPENBLAS_CORETYPE": "Sandybridge",
            "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR X86_V3",
        }
    else:
        older = {"OPENBLAS_NUM_THREADS": "1"}
    assert run(older) == native
