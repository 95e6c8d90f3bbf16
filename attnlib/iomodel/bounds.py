"""I/O lower bounds: the certified ones, and the Θ-expressions the papers state.

A ``*_lower_bound`` is **certified**: an exact int that every schedule of the stated game pays,
so that no counted schedule and no exact optimum may lie below it. The game is Hong and Kung's
red-blue pebble game with recomputation (fast memory of M words, reads and writes cost 1,
inputs start in slow memory, outputs end there) on the standard matmul DAG (every product its
own vertex with one successor, each entry's products summed by a binary tree of any shape).
Each is the larger of two terms:

* the trivial term: every input word some output depends on is read once and every output
  word of a row or column with a kept entry is written once;
* the partition term of Chapter 5, M·(⌈N/P⌉ − 1), with N the products of the QKᵀ (or C = AB)
  DAG and P the products one segment of M I/Os can hold
  (:func:`~attnlib.iomodel.density.products_per_part`).

A ``*_order`` is a Θ-expression with its constant set to 1: the shape of a theorem, not a
bound. Comparing a count with it measures the count's constant; it is never a bound.
"""

from __future__ import annotations

import math
import sys

from .._checks import (
    AttnInputError,
    check_bool,
    check_causal,
    check_head_counts,
    check_int,
    check_mask,
    check_mask_2d,
)
from .density import (
    _causal_profiles,
    _density_bound,
    _mask_profiles,
    _Profile,
    products_per_part,
)

__all__ = [
    "matmul_lower_bound",
    "forward_lower_bound",
    "backward_lower_bound",
    "sparse_lower_bound",
    "matmul_order",
    "matmul_sharp_order",
    "forward_order",
    "backward_order",
    "sparse_worst_case_order",
]


def _partition_term(z: int, d: int, M: int, rho: int) -> int:
    """M·(⌈z·d/P⌉ − 1) of thm-05-certified: z sum trees of d products each, P per segment."""
    parts = -(-(z * d) // products_per_part(d, M, rho=rho))  # ⌈z·d/P⌉, exact
    return M * (parts - 1)


def matmul_lower_bound(m: int, k: int, p: int, M: int) -> int:
    """Certified I/O lower bound for standard m×k by k×p matrix multiplication
    (thm-05-matmul-certified, proved in Chapter 5): red-blue pebble game with recomputation,
    standard matmul DAG.

        max( mk + kp + mp,  M·(⌈mkp / P⌉ − 1) )

    with P = min(k·ρ + 3Mk, 2M + M·⌈√(3M + ρ)⌉), s = ⌊2M/k⌋ and ρ the largest a·b with
    a <= m, b <= p, a + b <= s. For M << k² (a square product that does not fit) P is
    about √3·M^{3/2} and the partition term about mkp/√(3M) − M, against the sharp leading
    term 2mkp/√M; for M >> k², about mkp·k/(M√(1 + 3k²/M)) − M. Exact int. Raises
    AttnInputError for arguments below 1.

    Examples
    --------
    >>> # 64³ at M = 48: s = 96/64 = 1, ρ = 0, P = min(3·48·64, 96 + 48·⌈√144⌉) = 672;
    >>> # 48·(⌈262144/672⌉ − 1) = 48·390 = 18720 > 3·4096 = 12288
    >>> matmul_lower_bound(64, 64, 64, 48)
    18720
    """
    m, k, p = (check_int(name, v) for name, v in (("m", m), ("k", k), ("p", p)))
    M = check_int("M", M)
    rows, cols = _Profile.uniform(m, p), _Profile.uniform(p, m)
    rho = _density_bound(rows, cols, 2 * M // k)
    return max(m * k + k * p + m * p, _partition_term(m * p, k, M, rho))


def _attention(n, d, M, m, d_v, H, H_kv, mask, is_causal):
    """Validate the shared arguments; return (d, M, d_v, H, H_kv, rows, cols) where rows and
    cols profile the kept scores over all heads (query rows of the H heads, key columns of
    the H_kv heads, each shared by its group of g query heads)."""
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    m = n if m is None else check_int("m", m)
    d_v = d if d_v is None else check_int("d_v", d_v)
    H, H_kv, g = check_head_counts(H, H if H_kv is None else H_kv, True)
    if check_causal(mask, is_causal):
        rows, cols = _causal_profiles(n, m)
    elif mask is not None:
        rows, cols = _mask_profiles(check_mask(mask, n, m))
    else:
        rows, cols = _Profile.uniform(n, m), _Profile.uniform(m, n)
    return d, M, d_v, H, H_kv, rows.repeated(H), cols.repeated(H_kv, g)


def _profile_bound(rows: _Profile, cols: _Profile, d: int, M: int, d_v: int, backward: bool) -> int:
    """The certified bound of validated arguments: ``rows`` and ``cols`` profile the kept
    scores over all heads (profiles of :mod:`~attnlib.iomodel.density`), d is Q's and K's
    width, d_v V's; ``backward`` selects the trivial term of the backward pass."""
    z = rows.top(rows.length)  # kept scores, all heads
    # words some output needs: forward, Q rows with a kept key and their O rows, K and V
    # rows with a kept query; backward, also dO (with Q) and dQ, dK, dV written
    per_row = 2 * d + d_v if backward else d + d_v
    per_col = 2 * (d + d_v) if backward else d + d_v
    trivial = rows.kept * per_row + cols.kept * per_col
    rho = _density_bound(rows, cols, 2 * M // d)
    return max(trivial, _partition_term(z, d, M, rho))


def _bound(args, backward: bool) -> int:
    d, M, d_v, H, H_kv, rows, cols = _attention(*args)
    return _profile_bound(rows, cols, d, M, d_v, backward)


def forward_lower_bound(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None, H: int = 1,
    H_kv: int | None = None, mask=None, is_causal: bool = False,
) -> int:  # fmt: skip
    """Certified I/O lower bound for attention's forward pass (thm-05-certified and
    thm-05-small-certified, proved in Chapter 5): red-blue pebble game with recomputation,
    the QKᵀ scores by the standard matmul DAG. Q is (H, n, d), K (H_kv, m, d),
    V (H_kv, m, d_v), O (H, n, d_v); ``mask`` is a 2-D boolean (n, m) keep-mask shared by
    the heads, ``is_causal`` the top-left causal mask (not both). With Z the kept scores of
    all heads:

        max( trivial,  M·(⌈Z·d / P⌉ − 1) )

    trivial = H·n'·(d + d_v) + H_kv·m'·(d + d_v) (Q and O rows with a kept key, n' of them
    per head; K and V rows with a kept query, m'), P = min(d·ρ + 3Md, 2M + M·⌈√(3M + ρ)⌉),
    ρ a bound on the kept scores of a rectangle with |I| + |J| <= ⌊2M/d⌋ from the sorted row
    and column counts. Dense, one head: about n²d²/(M(1 + 3d²/M)) − M for M >= d² (constant
    1/4 at M = d², tending to 1 as M/d² grows), about n²d/√(3M) − M for M << d². Not
    monotone at unit steps of M: while ⌈Z·d/P⌉ stays the same the term grows with M (a
    sawtooth); the least I/O never grows with M, so a bound at any M' >= M holds at M too.
    Exact int.
    Raises AttnInputError for sizes below 1, H not a multiple of H_kv, a mask that is not
    a 2-D boolean (n, m) array, or a mask with ``is_causal=True``.

    Examples
    --------
    >>> # n = 4, d = 2, M = 8: s = 8, ρ = 4·4 = 16, P = min(2·16 + 48, 16 + 8·⌈√40⌉) = 72;
    >>> # Z·d = 32 products fit one part, so the trivial 4·4 + 4·4 = 32 words decide
    >>> forward_lower_bound(4, 2, 8)
    32
    >>> # n = 4096, d = 64, M = 16384: s = 512, ρ = 256², cap_lw = 32768 + 16384·⌈√114688⌉
    >>> # = 5586944 < cap_rows = 7340032; 16384·(⌈2³⁰/5586944⌉ − 1) = 16384·192
    >>> forward_lower_bound(4096, 64, 16384)
    3145728
    """
    args = (n, d, M, m, d_v, H, H_kv, mask, is_causal)
    return _bound(args, backward=False)


def backward_lower_bound(
    n: int, d: int, M: int, *, m: int | None = None, d_v: int | None = None, H: int = 1,
    H_kv: int | None = None, mask=None, is_causal: bool = False,
) -> int:  # fmt: skip
    """Certified I/O lower bound for attention's backward pass (cor-05-backward, proved in
    Chapter 5): red-blue pebble game with recomputation; every standard-matmul backward DAG
    contains the QKᵀ sub-DAG (S recomputed, or read as a vertex of the same DAG), so the
    partition term of :func:`forward_lower_bound` holds unchanged. Arguments as there; dO is
    (H, n, d_v) and the outputs dQ, dK, dV have the shapes of Q, K, V:

        max( trivial,  M·(⌈Z·d / P⌉ − 1) )

    trivial = H·n'·(2d + d_v) + H_kv·m'·2(d + d_v) (read Q and dO, write dQ, on rows with
    a kept key; read K, V and write dK, dV on rows with a kept query). Exact int. Raises
    AttnInputError as :func:`forward_lower_bound` does.

    Examples
    --------
    >>> # n = 4, d = 2, M = 8: one part holds all 32 products; trivial 4·6 + 4·8 = 56
    >>> backward_lower_bound(4, 2, 8)
    56
    """
    args = (n, d, M, m, d_v, H, H_kv, mask, is_causal)
    return _bound(args, backward=True)


def sparse_lower_bound(mask, d: int, M: int) -> int:
    """The partition term of thm-05-certified for the kept scores of ``mask`` (prop-05-sparse,
    proved in Chapter 5): red-blue pebble game with recomputation, standard matmul DAG for
    the kept entries of QKᵀ (one head, Q (n, d), K (m, d), ``mask`` a 2-D boolean (n, m)
    keep-mask), clamped at 0:

        max( 0,  M·(⌈Z·d / P⌉ − 1) )

    with P = min(d·ρ + 3Md, 2M + M·⌈√(3M + ρ)⌉) and ρ =
    :func:`~attnlib.iomodel.density.mask_density_bound` (mask, ⌊2M/d⌋). For a band of
    half-width w this is about nd(2w + 1)/(2w + 1 + 3d) − M, below the trivial 4nd, which
    block-sparse FlashAttention attains up to a constant. Exact int. Raises AttnInputError
    for another mask, or d or M below 1.

    Examples
    --------
    >>> import numpy as np
    >>> band = np.abs(np.subtract.outer(np.arange(64), np.arange(64))) <= 1
    >>> sparse_lower_bound(band, 4, 8)  # Z = 190, 760 products, P = min(16 + 96, 16 + 8·6)
    88
    """
    arr = check_mask_2d(mask)
    d, M = check_int("d", d), check_int("M", M)
    rows, cols = _mask_profiles(arr)
    rho = _density_bound(rows, cols, 2 * M // d)
    return max(0, _partition_term(rows.top(rows.length), d, M, rho))


# ---- Θ-expressions with constant 1 (never bounds) --------------------------------------------

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
        raise AttnInputError(f"the expression overflows a float: {names} too large")
    return value


def matmul_order(m: int, k: int, p: int, M: int) -> float:
    """mkp/√M: the Θ-expression of Hong and Kung's matmul bound (HK81 Cor. 6.2, restated as
    SY24 Lemma 3.6) with constant 1. A Θ-expression, never a bound: a count over it is the
    count's constant. The certified bound is :func:`matmul_lower_bound`. A float; raises
    AttnInputError for arguments below 1 or a value beyond the float range.

    Examples
    --------
    >>> matmul_order(4, 9, 16, 36)
    96.0
    """
    m, k, p = (check_int(name, v) for name, v in (("m", m), ("k", k), ("p", p)))
    M = check_int("M", M)
    return _finite(_over(m * k * p, M, 0.5), "m, k and p are")


def matmul_sharp_order(m: int, k: int, p: int, M: int) -> float:
    """2mkp/√M: the leading term of the sharp matmul bounds of Smith, Lowery, Langou and van
    de Geijn (2019) and Kwasniewski et al. (2019), their lower-order terms dropped. A
    Θ-expression with constant 1 on that leading term, never a bound. A float; raises
    AttnInputError for arguments below 1 or a value beyond the float range.

    Examples
    --------
    >>> matmul_sharp_order(4, 9, 16, 36)
    192.0
    """
    m, k, p = (check_int(name, v) for name, v in (("m", m), ("k", k), ("p", p)))
    M = check_int("M", M)
    return _finite(2.0 * _over(m * k * p, M, 0.5), "m, k and p are")


def forward_order(n: int, d: int, M: int) -> float:
    """min(n²d²/M, n²d/√M): the shape of SY24 Theorem 3.1 (Θ(n²d²/M) for M = Ω(d²),
    Θ(n²d/√M) for M = o(d²)) with constant 1. A Θ-expression, never a bound (the certified
    bound is :func:`forward_lower_bound`). The branches meet at M = d², both n². A float;
    raises AttnInputError for arguments below 1 or a value beyond the float range.

    Examples
    --------
    >>> forward_order(1024, 64, 1024), forward_order(1024, 64, 16384)
    (2097152.0, 262144.0)
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    return _finite(min(_over(n * n * d * d, M, 1), _over(n * n * d, M, 0.5)), "n and d are")


def backward_order(n: int, d: int, M: int, *, lower_order: bool = False) -> float:
    """min(n²d²/M, n²d/√M), the forward shape: our reading of LLS+24's abstract (FlashAttention's
    backward optimal for large caches, a small-cache algorithm below) for the QKV form, with
    constant 1. With ``lower_order=True``, min((n²d² + nd³)/M, (n²d + nd²)/√M), as summaries
    of the paper's later version state it (the extra terms count AS24's n×d×d products). A
    Θ-expression, never a bound (the certified bound is :func:`backward_lower_bound`). A
    float; raises AttnInputError for arguments below 1, a ``lower_order`` that is not a
    bool, or a value beyond the float range.

    Examples
    --------
    >>> backward_order(1024, 64, 16384)
    262144.0
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    if check_bool("lower_order", lower_order):
        large, small = n * n * d * d + n * d**3, n * n * d + n * d * d
    else:
        large, small = n * n * d * d, n * n * d
    return _finite(min(_over(large, M, 1), _over(small, M, 0.5)), "n and d are")


def sparse_worst_case_order(z_in: int, z_qk: int, M: int) -> float:
    """min(Z_in²/M, Z_in·√Z_QK/√M): the shape of Pagh and Stöckel's I/O bound for sparse
    matrix multiplication (ESA 2014), a worst case over instances with Z_in input and Z_QK
    output nonzeros, constant 1. A Θ-expression, never a bound, and not one for a given
    mask: on a band mask block-sparse FlashAttention moves far fewer words than it. The
    mask-dependent certified bound is :func:`sparse_lower_bound`. A float; raises
    AttnInputError for arguments below 1 or a value beyond the float range.

    Examples
    --------
    >>> sparse_worst_case_order(1024 * 64, 1024**2, 16384) == forward_order(1024, 64, 16384)
    True
    """
    z_in, z_qk, M = check_int("z_in", z_in), check_int("z_qk", z_qk), check_int("M", M)
    try:
        dense = z_in * math.sqrt(z_qk) / math.sqrt(M)
    except OverflowError:
        log_q = math.log(z_in) + 0.5 * (math.log(z_qk) - math.log(M))
        dense = math.inf if log_q > _LOG_FLOAT_MAX else math.exp(log_q)
    return _finite(min(_over(z_in * z_in, M, 1), dense), "z_in and z_qk are")
