"""I/O lower bounds as formulas.

Most functions return the leading expression of an Ω(·) statement, with the constant set to
1 because the papers state none: comparing a count with such an expression measures the
count's constant, it does not test the bound. :func:`matmul_sharp_lower_bound` is the one
bound here with its constant, the leading term 2mkp/√M (Smith et al. 2019; Kwasniewski
et al. 2019). The exact optimum on small graphs is in :mod:`attnlib.iomodel.optimal`.
"""

from __future__ import annotations

import math
import sys

from .._checks import AttnInputError, check_bool, check_int

__all__ = [
    "matmul_lower_bound",
    "matmul_sharp_lower_bound",
    "forward_lower_bound",
    "backward_lower_bound",
    "sparse_lower_bound",
]


_LOG_FLOAT_MAX = math.log(sys.float_info.max)


def _over(num: int, M: int, power: float) -> float:
    """num / M**power for ints of any size: the float expression where it fits, else by
    logarithms (inf when the quotient itself is beyond the float range)."""
    try:
        return num / M if power == 1 else num / math.sqrt(M)
    except OverflowError:  # an int beyond the float range
        log_q = math.log(num) - power * math.log(M)
        return math.inf if log_q > _LOG_FLOAT_MAX else math.exp(log_q)


def _finite(value: float, names: str) -> float:
    if not math.isfinite(value):
        raise AttnInputError(f"the bound overflows a float: {names} too large")
    return value


def matmul_lower_bound(m: int, k: int, p: int, M: int) -> float:
    """Hong–Kung bound for standard m×k by k×p matrix multiplication: mkp/√M, constant 1.

    HK81 Corollary 6.2, restated as SY24 Lemma 3.6: any schedule of the standard algorithm
    on a machine with M words of fast memory performs Ω(mkp/√M) I/Os. Raises
    AttnInputError for sizes or M below 1.
    """
    m, k, p = (check_int(name, v) for name, v in (("m", m), ("k", k), ("p", p)))
    M = check_int("M", M)
    return _finite(_over(m * k * p, M, 0.5), "m, k and p are")


def matmul_sharp_lower_bound(m: int, k: int, p: int, M: int) -> float:
    """The sharp leading term of the matmul bound: 2mkp/√M.

    Smith, Lowery, Langou and van de Geijn (2019) and Kwasniewski et al. (2019) prove
    I/O lower bounds for standard m×k by k×p multiplication whose leading term is 2mkp/√M,
    attained up to lower-order terms; their exact statements carry lower-order terms that
    this function leaves out. Raises AttnInputError for sizes or M below 1.
    """
    m, k, p = (check_int(name, v) for name, v in (("m", m), ("k", k), ("p", p)))
    M = check_int("M", M)
    return _finite(2.0 * _over(m * k * p, M, 0.5), "m, k and p are")


def forward_lower_bound(n: int, d: int, M: int) -> float:
    """Attention forward: min(n²d²/M, n²d/√M).

    SY24 Theorem 3.1 (ICML 2024): Θ(n²d²/M) for M = Ω(d²), attained by FlashAttention;
    Θ(n²d/√M) for M = o(d²), attained by square tiling (SY24 Alg. 1). The two branches meet
    at M = d², where both equal n²; the minimum is the tighter expression everywhere.
    Raises AttnInputError for arguments below 1, or a bound beyond the float range.

    Examples
    --------
    >>> forward_lower_bound(1024, 64, 1024), forward_lower_bound(1024, 64, 16384)
    (2097152.0, 262144.0)
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    return _finite(min(_over(n * n * d * d, M, 1), _over(n * n * d, M, 0.5)), "n and d are")


def backward_lower_bound(n: int, d: int, M: int, *, lower_order: bool = False) -> float:
    """Attention backward: min(n²d²/M, n²d/√M), the forward bound's shape.

    LLS+24 state in their abstract, in words, that FlashAttention's backward pass is optimal
    for M = Ω(d²) and give a small-cache algorithm for M = o(d²); the Θ(n²d²/M) and
    Θ(n²d/√M) branches are our reading of that statement for the QKV form. With
    ``lower_order=True`` the form min((n²d² + nd³)/M, (n²d + nd²)/√M) is returned, as
    summaries of the paper's later version state it; its nd³ and nd² terms count the n×d×d
    products of AS24's formulation, which the QKV backward pass does not have. It equals the
    default up to a factor 2 whenever n ≥ d. Raises AttnInputError for arguments below 1, a
    ``lower_order`` that is not a bool, or a bound beyond the float range.

    Examples
    --------
    >>> backward_lower_bound(1024, 64, 16384)
    262144.0
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    if check_bool("lower_order", lower_order):
        large, small = n * n * d * d + n * d**3, n * n * d + n * d * d
    else:
        large, small = n * n * d * d, n * n * d
    return _finite(min(_over(large, M, 1), _over(small, M, 0.5)), "n and d are")


def sparse_lower_bound(z_in: int, z_qk: int, M: int) -> float:
    """Sparse attention, forward or backward: min(Z_in²/M, Z_in·√Z_QK/√M).

    Z_in counts the nonzero entries of the inputs and Z_QK the nonzeros of the score
    matrix (the kept entries of the mask). LLS+24 state that sparse bounds exist; **this
    formula is our reading**, by analogy with Pagh and Stöckel's I/O bound for sparse
    matrix multiplication (ESA 2014). With Z_in = nd and Z_QK = n² it recovers
    :func:`forward_lower_bound`. No matching upper bound is known. Raises AttnInputError for
    arguments below 1, or a bound beyond the float range.

    Examples
    --------
    >>> sparse_lower_bound(1024 * 64, 1024**2, 16384) == forward_lower_bound(1024, 64, 16384)
    True
    """
    z_in, z_qk, M = check_int("z_in", z_in), check_int("z_qk", z_qk), check_int("M", M)
    return _sparse(z_in, z_qk, M, "z_in and z_qk are")


def _sparse(z_in: int, z_qk: int, M: int, names: str) -> float:
    """:func:`sparse_lower_bound` of validated ints; an overflow blames ``names``, the public
    arguments that set Z_in and Z_QK."""
    try:
        dense = z_in * math.sqrt(z_qk) / math.sqrt(M)
    except OverflowError:
        log_q = math.log(z_in) + 0.5 * (math.log(z_qk) - math.log(M))
        dense = math.inf if log_q > _LOG_FLOAT_MAX else math.exp(log_q)
    return _finite(min(_over(z_in * z_in, M, 1), dense), names)
