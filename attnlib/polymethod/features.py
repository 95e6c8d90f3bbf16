"""The exact polynomial feature map of AS23 and its rank; the row-wise Kronecker product ⊘.

For a polynomial P(s) = Σ_{k≤g} c_k s^k and rows q, k ∈ ℝ^d, the multinomial theorem gives

    P(τ⟨q, k⟩) = Σ_{|α|≤g} c_{|α|} · (|α|!/α!) · τ^{|α|} q^α · k^α,

a sum over the multi-indices α ∈ ℕ^d with |α| ≤ g. Hence, with one column per α,

    U[i, α] = c_{|α|} (|α|!/α!) τ^{|α|} Q_i^α,     V[j, α] = K_j^α,

we have U Vᵀ = P(τ QKᵀ) exactly (up to rounding) with rank r = C(g+d, d) [ours, an exact
identity]. AS23 (Lemma 3.1 and §3) quotes the looser count C(2(g+d), 2g);
both are exposed so the book can compare them.

The map is built degree by degree, vectorised over rows: a degree-k monomial is a degree-(k−1)
monomial times one more column of Q, so each degree costs one gather and one product of an
(n × N_k) array, written in place into U. There is no Python loop over rows (nor over
multi-indices), and the peak memory is U, V and one gathered block.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    check_cols,
    check_int,
    check_memory,
    check_positive_real,
    check_rows,
    describe_int,
    float_dtype,
    max_abs,
)

__all__ = [
    "feature_rank",
    "as23_rank_bound",
    "multi_indices",
    "poly_features",
    "rowwise_kron",
    "poly_features_bytes",
]


#: Ranks are refused beyond this: no array has that many columns, and every rank below it
#: converts to a finite float.
_MAX_RANK = 10**300


def _binomial(N: int, k: int, names: str) -> int:
    """C(N, k) exactly, in O(min(k, N − k)) steps, or AttnInputError once it passes _MAX_RANK.

    C(N, i) grows with i up to N/2, so the loop stops after at most ~1000 steps whatever N."""
    k = min(k, N - k)
    c = 1
    for i in range(k):
        c = c * (N - i) // (i + 1)  # = C(N, i + 1), exact
        if c > _MAX_RANK:
            raise AttnInputError(
                f"{names} too large: the rank C({describe_int(N)}, {describe_int(k)}) exceeds "
                "1e300, far beyond any array (and beyond the float range)"
            )
    return c


def feature_rank(d, g) -> int:
    """r = C(g+d, d): the number of multi-indices α ∈ ℕ^d with |α| ≤ g (the width of U, V).

    Raises :class:`attnlib.AttnInputError` for invalid d or g, or if r > 10³⁰⁰.

    Examples
    --------
    >>> feature_rank(8, 4), as23_rank_bound(8, 4)
    (495, 735471)
    """
    d = check_int("d", d)
    g = check_int("g", g, minimum=0)
    return _binomial(g + d, d, "d and g are")


def as23_rank_bound(d, g) -> int:
    """AS23's looser count of the feature dimension: C(2(g+d), 2g) ≥ C(g+d, d).

    Raises :class:`attnlib.AttnInputError` for invalid d or g, or if it exceeds 10³⁰⁰."""
    d = check_int("d", d)
    g = check_int("g", g, minimum=0)
    return _binomial(2 * (g + d), 2 * g, "d and g are")


def _tree_bytes(d: int, g: int) -> int:
    """Peak bytes of :func:`_graded_tree`: three int64/float64 arrays per monomial kept, and
    about eight more of the last degree's size while it is built."""
    last = _binomial(g + d - 1, g, "d and g are") if g else 1
    return 24 * _binomial(g + d, d, "d and g are") + 64 * last


def _graded_tree(d: int, g: int):
    """Multi-indices of degree 0..g as sorted index tuples t₁ ≤ … ≤ t_k, degree by degree.

    Returns, for each degree k ≥ 1, ``(parent, last, weight)``: column ``parent[a]`` of the
    degree-(k−1) block times variable ``last[a]`` gives monomial a of degree k, and
    ``weight[a] = k!/α!`` is its multinomial coefficient. Appending t to a tuple whose last
    entry is l creates the tuples with last entry t ∈ [l, d); the multinomial coefficient
    gains a factor k / (new multiplicity of t). Everything is vectorised with np.repeat.
    """
    blocks = []
    last = np.array([-1], dtype=np.int64)  # the empty tuple: every t >= 0 may follow
    run = np.zeros(1, dtype=np.int64)  # multiplicity of the last entry
    weight = np.ones(1, dtype=np.float64)
    for k in range(1, g + 1):
        start = np.maximum(last, 0)
        counts = d - start
        parent = np.repeat(np.arange(last.size), counts)
        offsets = np.arange(parent.size) - np.repeat(np.cumsum(counts) - counts, counts)
        new_last = start[parent] + offsets
        new_run = np.where(new_last == last[parent], run[parent] + 1, 1)
        new_weight = weight[parent] * k / new_run
        blocks.append((parent, new_last, new_weight))
        last, run, weight = new_last, new_run, new_weight
    return blocks


def multi_indices(d, g) -> np.ndarray:
    """All α ∈ ℕ^d with |α| ≤ g, as an (r, d) integer array, in the column order of U and V.

    Graded order: degree 0, then degree 1, …; r = :func:`feature_rank` (d, g).

    Raises :class:`attnlib.AttnInputError` for invalid d or g, or a table too large for memory.
    """
    d = check_int("d", d)
    g = check_int("g", g, minimum=0)
    r = feature_rank(d, g)
    # the degree blocks and their concatenation, int64 (r, d) each, and the index tree
    check_memory("multi_indices' (r, d) table", 16 * r * d + _tree_bytes(d, g), culprits="d or g")
    out = [np.zeros((1, d), dtype=np.int64)]
    prev = out[0]
    for parent, last, _ in _graded_tree(d, g):
        cur = prev[parent].copy()
        cur[np.arange(last.size), last] += 1
        out.append(cur)
        prev = cur
    return np.concatenate(out, axis=0)


def _fill_monomials(X: np.ndarray, blocks, out: np.ndarray) -> list[slice]:
    """Write [X^α for |α| = k], k = 0..g, into the columns of ``out`` (n, r), block by block.

    One gather-and-multiply per degree, written in place: the peak is ``out`` plus one
    gathered block. Returns the column slice of each degree.
    """
    out[:, 0] = 1.0
    slices = [slice(0, 1)]
    for parent, last, _ in blocks:
        prev = slices[-1]
        cur = slice(prev.stop, prev.stop + parent.size)
        np.multiply(out[:, prev][:, parent], X[:, last], out=out[:, cur])
        slices.append(cur)
    return slices


def _coefficients(poly) -> np.ndarray:
    """Monomial coefficients c_0..c_g of P(s) = Σ c_k s^k, from a numpy Polynomial or sequence."""
    if hasattr(poly, "convert") and hasattr(poly, "coef"):
        try:
            coef = poly.convert(kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1]).coef
        except Exception as exc:
            raise AttnInputError(
                f"poly could not be converted to the monomial basis ({exc})"
            ) from exc
    else:
        coef = poly
    if isinstance(coef, (str, bytes)):
        raise AttnInputError(
            f"poly must be a numpy Polynomial or a 1-D sequence of coefficients, got {coef!r:.60}"
        )
    try:
        coef = np.asarray(coef, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise AttnInputError(
            f"poly must be a numpy Polynomial or a 1-D sequence of real coefficients ({exc})"
        ) from None
    return as_float_array("poly coefficients", coef, ndim=1)


def poly_features_bytes(n: int, m: int, d: int, g: int, itemsize: int = 8) -> int:
    """Peak bytes of :func:`poly_features`: U (n, r) and V (m, r), the index tree, the two
    gathered (rows × N_g) blocks of the top degree (N_g = C(g+d−1, g) monomials), and
    numpy's ufunc buffers for the strided products (256 KiB)."""
    r = feature_rank(d, g)
    top = _binomial(g + d - 1, g, "d and g are") if g else 1
    gathered = 2 * max(n, m) * top * itemsize
    return (n + m) * r * itemsize + gathered + _tree_bytes(d, g) + _UFUNC_BUFFERS


_UFUNC_BUFFERS = 2**18


def poly_features(Q, K, poly, *, scale):
    """U (n, r) and V (m, r) with U @ V.T == poly(scale * Q @ K.T), r = C(g+d, d).

    Parameters
    ----------
    Q : (n, d) float array
    K : (m, d) float array
    poly : numpy.polynomial.Polynomial (any basis/domain, converted to x's monomials) or a
        1-D sequence of monomial coefficients c_0..c_g; g is its degree
    scale : τ > 0 (the AS papers use 1/d; the QKV form 1/√d)

    Returns
    -------
    U : (n, r), U[i, α] = c_{|α|} (|α|!/α!) τ^{|α|} Q_i^α
    V : (m, r), V[j, α] = K_j^α
    The columns follow :func:`multi_indices` (d, g). An exact identity (the multinomial
    theorem; our derivation, AS23 §3 uses the same construction).

    When a plain factor's monomials would leave the float range (τ^k, max|Q|^k or max|K|^k
    beyond 2^(±maxexp/2) for some k ≤ g), the map is built for τ' = 1, Q' = 2^-a·τQ and
    K' = 2^a·K instead, with a chosen to give Q' and K' entries of equal size: U and V then
    differ from the formulas above, but U @ V.T is the same.

    Raises
    ------
    AttnInputError
        for invalid Q, K or scale, a ``poly`` that is not a real polynomial, U and V too
        large for memory, or an entry of U or V beyond the float range.

    Examples
    --------
    >>> Q, K = np.array([[1.0, 2.0]]), np.array([[3.0, -1.0], [0.5, 0.5]])
    >>> U, V = poly_features(Q, K, [1.0, 1.0, 0.5], scale=0.5)  # 1 + s + s²/2
    >>> s = 0.5 * Q @ K.T
    >>> bool(np.allclose(U @ V.T, 1 + s + s**2 / 2)), U.shape
    (True, (1, 6))
    """
    Q = as_float_array("Q", Q)
    K = as_float_array("K", K)
    check_cols("K", K, Q.shape[1], "Q")
    tau = check_positive_real("scale", scale)
    coef = _coefficients(poly)
    dtype = float_dtype(Q, K)
    d = Q.shape[1]
    g = coef.size - 1
    (n, m), copies = (Q.shape[0], K.shape[0]), 0
    shift = _balancing_shift(Q, K, tau, g, dtype)
    if shift is not None:  # the balanced factors are two new (rows, d) arrays
        copies = (n + m) * d * dtype.itemsize
    check_memory(
        "poly_features' U and V",
        poly_features_bytes(n, m, d, g, dtype.itemsize) + copies,
        culprits="the degree of poly or the width d of Q",
    )
    if shift is not None:
        # τQKᵀ = (2^-a·τQ)(2^a·K)ᵀ: factors of equal size, τ folded into the first
        mant, e = math.frexp(tau)
        Q, K, tau = np.ldexp(Q * dtype.type(mant), e - shift), np.ldexp(K, shift), 1.0
    blocks = _graded_tree(d, g)
    r = 1 + sum(parent.size for parent, _, _ in blocks)
    U = np.empty((n, r), dtype=dtype)
    V = np.empty((m, r), dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        slices = _fill_monomials(Q.astype(dtype, copy=False), blocks, U)
        _fill_monomials(K.astype(dtype, copy=False), blocks, V)
        # Weights last: every degree-k block above was built from the raw degree-(k-1) block.
        weights = [np.ones(1)] + [w for _, _, w in blocks]
        for k, cols in enumerate(slices):
            U[:, cols] *= (coef[k] * tau**k * weights[k]).astype(dtype)
    if not (np.isfinite(U).all() and np.isfinite(V).all()):
        raise AttnInputError(
            f"poly_features' U or V overflows {dtype}: the monomials of Q, K and scale, or the "
            "coefficients of poly, are too large"
        )
    return U, V


def _balancing_shift(Q, K, tau: float, g: int, dtype) -> int | None:
    """The a of the balanced factors 2^-a·τQ and 2^a·K, or None when the plain factors τ^k·Q^α
    and K^α of degree ≤ g stay well inside ``dtype``'s exponent range (then U and V are the
    documented ones, unchanged).

    The logits are unchanged by the shift. It makes both factors' largest entries about
    (τ·max|Q|·max|K|)^(1/2), so that a monomial is near a power of the logits' size, where
    τ^k, max|Q|^k or max|K|^k alone could overflow or underflow (Q of 1e100 against K of
    1e-100, or a scale of 1e300).
    """
    top_q, top_k = max_abs(Q), max_abs(K)
    if g == 0 or top_q == 0.0 or top_k == 0.0:
        return None
    lt, lq, lk = math.log2(tau), math.log2(top_q), math.log2(top_k)
    # half of the exponent range: the weights k!/α! and the coefficients need room too
    if g * max(abs(lt), abs(lq), abs(lk)) <= np.finfo(dtype).maxexp // 2:
        return None
    return round((lt + lq - lk) / 2)


def rowwise_kron(A, B) -> np.ndarray:
    """The row-wise Kronecker product A ⊘ B (AS24 Def. of ⊘): row i is kron(A_i, B_i).

    A : (n, a), B : (n, b) → (n, a·b) with (A ⊘ B)[i, p·b + t] = A[i, p] · B[i, t].
    Key identity: (A ⊘ B)(C ⊘ D)ᵀ = (A Cᵀ) ∘ (B Dᵀ), which turns a Hadamard product of two
    low-rank matrices into one low-rank product (AS24 §D).

    Raises :class:`attnlib.AttnInputError` for invalid arrays, different row counts, a
    product too large for memory, or products beyond the float range.
    """
    A = as_float_array("A", A)
    B = as_float_array("B", B)
    check_rows("B", B, A.shape[0], "A", what="n")
    n = A.shape[0]
    dtype = np.result_type(A, B)
    check_memory(
        "rowwise_kron's (n, a·b) product",
        n * A.shape[1] * B.shape[1] * dtype.itemsize,
        culprits="A or B",
    )
    top_a, top_b = max_abs(A), max_abs(B)
    if top_a * top_b > float(np.finfo(dtype).max):  # a product beyond the float range
        raise AttnInputError(
            f"rowwise_kron's products overflow {dtype}: max|A|·max|B| = {top_a:.3g}·{top_b:.3g}; "
            "A or B is too large"
        )
    return (A[:, :, None] * B[:, None, :]).reshape(n, A.shape[1] * B.shape[1])
