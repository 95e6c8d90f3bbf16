"""I/O lower bounds as formulas, with no hidden constant (THEORY.md §3).

Each function returns the bound's leading expression as a float. The papers prove
Ω(·) statements, so a constant factor is free: the book compares counted I/O against these
expressions and reports the ratio band, never claims the expression itself is attained.
"""

from __future__ import annotations

import math
import sys

from .._checks import AttnInputError, check_bool, check_int

__all__ = [
    "matmul_lower_bound",
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
    """Hong–Kung bound for standard m×k by k×p matrix multiplication: mkp/√M.

    HK81 (red-blue pebble game), restated as SY24 Theorem 2.3 / Lemma 3.4: any schedule on a
    machine with M words of fast memory performs Ω(mkp/√M) I/Os.
    """
    m, k, p = (check_int(name, v) for name, v in (("m", m), ("k", k), ("p", p)))
    M = check_int("M", M)
    return _finite(_over(m * k * p, M, 0.5), "m, k and p are")


def forward_lower_bound(n: int, d: int, M: int) -> float:
    """Attention forward: min(n²d²/M, n²d/√M).

    SY24 Theorem 3.1 (ICML 2024): Θ(n²d²/M) for M = Ω(d²), attained by FlashAttention;
    Θ(n²d/√M) for M = o(d²), attained by square tiling (SY24 Alg. 1). The two branches meet
    at M = d², where both equal n²; the minimum is the tighter expression everywhere.
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    return _finite(min(_over(n * n * d * d, M, 1), _over(n * n * d, M, 0.5)), "n and d are")


def backward_lower_bound(n: int, d: int, M: int, *, lower_order: bool = False) -> float:
    """Attention backward: min(n²d²/M, n²d/√M), the forward bound's shape.

    LLS+24 Theorems 1.1 and 4.1–4.4 (as given in the abstract; THEORY.md tags this
    [abstract]): Θ(n²d²/M) for M = Ω(d²), attained by FlashAttention's backward pass, and
    Θ(n²d/√M) for M = o(d²). With ``lower_order=True`` the later version's form
    min((n²d² + nd³)/M, (n²d + nd²)/√M) is returned; it equals the default up to a factor 2
    whenever n ≥ d.
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
    matrix (the kept entries of the mask). LLS+24 states that such a bound exists; **this
    formula is our reading** (THEORY.md §3, tagged [ours]). With Z_in = nd and Z_QK = n² it
    recovers :func:`forward_lower_bound`. No matching upper bound is known.
    """
    z_in, z_qk, M = check_int("z_in", z_in), check_int("z_qk", z_qk), check_int("M", M)
    try:
        dense = z_in * math.sqrt(z_qk) / math.sqrt(M)
    except OverflowError:
        log_q = math.log(z_in) + 0.5 * (math.log(z_qk) - math.log(M))
        dense = math.inf if log_q > _LOG_FLOAT_MAX else math.exp(log_q)
    return _finite(min(_over(z_in * z_in, M, 1), dense), "z_in and z_qk are")
