"""The chain of reductions behind AS24's lower bound, each link a runnable function.

k-SAT → Orthogonal Vectors → attention → attention gradient:

- :func:`sat_to_ov` is Williams' split-and-list reduction (Williams 2005): a formula on N
  variables becomes two sets of 2^{N/2} vectors with one coordinate per clause.
- :func:`brute_force_ov` is the quadratic baseline (a compiled kernel).
- :func:`ov_to_attention` builds an attention instance whose output decides OV. It is **our**
  construction (ours); its entries are Θ(log n) when d = Θ(log n).
- :func:`gap_ann_to_attention` does the same for planted Gap Hamming nearest-neighbour
  instances with entries Θ(√log n): **our variant** of the instance shape of AS23 Lemma 4.7 /
  AS24 Lemma E.2, with dummy keys at a mid level. Only planted instances are available:
  the Gap-ANN hardness itself (Rubinstein 2018) is not constructive at these sizes.
- :func:`attention_from_gradient` recovers ‖Att(Q, K, V)‖²_F from gradient calls alone, the
  step of AS24 Theorem E.5, with Gauss–Legendre quadrature (ours) in place of AS24 Lemma E.4's
  left Riemann sum (kept as :func:`riemann_from_gradient`).

Scale convention. attnlib.attention uses τ = 1/√d by default; AS23/AS24 (and
attnlib.attention_loss) use τ = 1/d, and "entries bounded by B" refers to that convention,
where every logit lies in [-B², B²]. The attention reductions take ``scale`` (default 1/√d, so
that ``attnlib.attention(Q, K, V)`` decides the instance); pass ``scale=1/d`` to build the
instance in the AS convention, where the entry-size statements hold, and then call
``attnlib.attention(Q, K, V, scale=1/d)``. Only τ·QKᵀ matters, so the two instances are the
same problem with Q and K rescaled by √(τ·d).
"""

from __future__ import annotations

import math
import sys

import numpy as np
from numba import njit

from .._checks import (
    AttnInputError,
    as_float_array,
    check_bool,
    check_cols,
    check_int,
    check_memory,
    check_positive_real,
    check_real,
    check_rows,
    check_scale,
)
from .sat import _clause_masks, check_clauses

__all__ = [
    "sat_to_ov",
    "ov_pair_to_assignment",
    "brute_force_ov",
    "planted_ov",
    "ov_to_attention",
    "planted_gap_ann",
    "gap_ann_to_attention",
    "norm_derivative_from_gradient",
    "attention_from_gradient",
    "gauss_legendre_error_bound",
    "riemann_from_gradient",
]

# planted_ov redraws all-zero rows of A at most this many times.
_MAX_REDRAWS = 10_000
# sat_to_ov lists 2^{N/2} half-assignments per side: keep the tables to ~1M rows.
MAX_SAT_TO_OV_VARS = 40
# brute_force_ov sweeps B in blocks of this many rows, small enough to stay in L1 cache.
_OV_BLOCK_ROWS = 256


# ---------------------------------------------------------------------------------------
# k-SAT → OV
# ---------------------------------------------------------------------------------------


def _half_split(n_vars: int) -> int:
    """Number of variables in the first half: x_1..x_h go to A, x_{h+1}..x_N to B."""
    return n_vars // 2


def _check_tables_fit(n_vars: int, n_clauses: int) -> None:
    """Refuse before allocating: the two boolean tables, and the int64 and boolean
    temporaries of the larger one (about 16 bytes per entry, measured)."""
    h = _half_split(n_vars)
    rows = (1 << h) + (1 << (n_vars - h))
    larger = 1 << (n_vars - h)
    check_memory(
        "sat_to_ov's tables",
        rows * n_clauses + 16 * larger * n_clauses + 8 * rows + 16 * n_clauses,
        culprits="n_vars or the number of clauses",
    )


def _half_table(pos, neg, shift: int, n_half: int) -> np.ndarray:
    """Row a, column c: True iff half-assignment a leaves clause c unsatisfied.

    Bit b of a is the value of variable shift + b + 1; only that variable range of the
    clause masks counts.
    """
    a = np.arange(1 << n_half, dtype=np.int64)[:, None]
    window = (1 << n_half) - 1
    p = (pos >> shift) & window
    q = (neg >> shift) & window
    satisfied = ((a & p) != 0) | ((~a & q) != 0)
    return ~satisfied


def sat_to_ov(clauses, n_vars) -> tuple[np.ndarray, np.ndarray]:
    """Williams' split-and-list reduction from CNF-SAT to Orthogonal Vectors.

    The variables are split into x_1..x_h and x_{h+1}..x_N with h = ⌊N/2⌋. Row a of ``A``
    belongs to the half-assignment of the first half whose bit b is the value of x_{b+1};
    row b of ``B`` likewise for the second half. Coordinate c is 1 iff that half-assignment
    leaves clause c unsatisfied. A pair of rows is orthogonal iff every clause is satisfied by
    one half or the other, i.e. iff the joined assignment satisfies the formula
    (:func:`ov_pair_to_assignment` joins them).

    Returns
    -------
    A : bool (2^h, #clauses)
    B : bool (2^{N-h}, #clauses)
    """
    n_vars = check_int("n_vars", n_vars, maximum=MAX_SAT_TO_OV_VARS)
    clauses = check_clauses(clauses, n_vars)
    _check_tables_fit(n_vars, len(clauses))
    pos, neg = _clause_masks(clauses)
    h = _half_split(n_vars)
    A = _half_table(pos, neg, 0, h)
    B = _half_table(pos, neg, h, n_vars - h)
    return A, B


def ov_pair_to_assignment(i, j, n_vars) -> tuple[bool, ...]:
    """Join row i of A and row j of B of :func:`sat_to_ov` into one assignment of x_1..x_N."""
    n_vars = check_int("n_vars", n_vars, maximum=MAX_SAT_TO_OV_VARS)
    h = _half_split(n_vars)
    i = check_int("i", i, minimum=0, maximum=(1 << h) - 1)
    j = check_int("j", j, minimum=0, maximum=(1 << (n_vars - h)) - 1)
    return tuple(bool((i >> b) & 1) for b in range(h)) + tuple(
        bool((j >> b) & 1) for b in range(n_vars - h)
    )


# ---------------------------------------------------------------------------------------
# OV: brute force and planted instances
# ---------------------------------------------------------------------------------------


def _as_bool_matrix(name: str, X) -> np.ndarray:
    """A 2-D 0/1 matrix as a bool array: bool dtype, or integers that are all 0 or 1."""
    if X is None:
        raise AttnInputError(f"{name} must be a 2-D boolean (0/1) array, got None")
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(f"{name} must be a 2-D boolean (0/1) array ({exc})") from exc
    if arr.dtype == np.bool_:
        pass
    elif arr.dtype.kind in "iu":
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise AttnInputError(f"{name} must hold only 0 and 1, got values outside {{0, 1}}")
        arr = arr.astype(np.bool_)
    else:
        raise AttnInputError(f"{name} must be a 2-D boolean (0/1) array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise AttnInputError(f"{name} must be 2-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise AttnInputError(f"{name} must be non-empty, got shape {arr.shape}")
    return arr


def _pack_rows(X: np.ndarray) -> np.ndarray:
    """Pack each bool row into uint64 words (bit order irrelevant: both sides match)."""
    packed = np.packbits(X, axis=1, bitorder="little")
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


@njit(cache=True)
def _first_orthogonal_pair(A, B, block):
    """Lexicographically first (i, j) with A_i & B_j = 0 over all words, or (-1, -1).

    B is swept in blocks of ``block`` rows that stay in cache while every row of A passes
    over them. A hit (i, j) in one block is the first in that block; later blocks can only
    improve on it with a smaller i, so they scan rows below the best i found so far.
    """
    na, nw = A.shape
    nb = B.shape[0]
    best_i, best_j = na, -1
    for j0 in range(0, nb, block):
        j1 = min(j0 + block, nb)
        for i in range(best_i):
            found = -1
            for j in range(j0, j1):
                hit = False
                for w in range(nw):
                    if A[i, w] & B[j, w]:
                        hit = True
                        break
                if not hit:
                    found = j
                    break
            if found >= 0:
                best_i, best_j = i, found
                break
    if best_j < 0:
        return -1, -1
    return best_i, best_j


def brute_force_ov(A, B) -> tuple[int, int] | None:
    """The first orthogonal pair (i, j), in row-major order, or None: the O(n_a·n_b·m) baseline.

    A is (n_a, m), B is (n_b, m), both boolean (or 0/1 integers). Rows are packed into
    64-bit words and compared by a compiled kernel that sweeps B block by block (so the time
    is quadratic at every n, not only until B falls out of cache); a NO instance costs exactly
    n_a·n_b row comparisons. The
    OV conjecture (implied by SETH) says no algorithm does this in n^{2-δ}·poly(m) for
    m = ω(log n).
    """
    A = _as_bool_matrix("A", A)
    B = _as_bool_matrix("B", B)
    if B.shape[1] != A.shape[1]:
        raise AttnInputError(f"B must have m={A.shape[1]} columns like A, got {B.shape[1]}")
    i, j = _first_orthogonal_pair(_pack_rows(A), _pack_rows(B), _OV_BLOCK_ROWS)
    if i < 0:
        return None
    return int(i), int(j)


def planted_ov(n, m, *, orthogonal: bool, seed, density: float = 0.5):
    """A random OV instance with a known answer.

    Rows of A and B (n rows each, m columns) are i.i.d. Bernoulli(``density``); an all-zero row
    of A (orthogonal to everything) is redrawn. Every row of B orthogonal to some row of A is
    redrawn, so no pair is orthogonal; with
    ``orthogonal=True`` one pair (i, j) is then planted by redrawing B_j inside the complement
    of A_i (and non-orthogonal to every other row of A), so (i, j) is the only orthogonal
    pair.

    Returns
    -------
    A, B : bool (n, m)
    pair : the planted (i, j), or None for a NO instance
    """
    n = check_int("n", n)
    m = check_int("m", m)
    seed = check_int("seed", seed, minimum=0)
    density = check_positive_real("density", density)
    if density >= 1:
        raise AttnInputError(f"density must be in (0, 1), got {density!r}")
    check_bool("orthogonal", orthogonal)
    # the float64 draw, A and B, A as int64, and its copy without row i (measured ~18 B/entry)
    check_memory("planted_ov's (n, m) arrays", 32 * n * m, culprits="n or m")
    if -math.expm1(m * math.log1p(-density)) < 1.0 / _MAX_REDRAWS:
        raise AttnInputError(
            f"density={density!r} is too small for m={m}: a row of m Bernoulli(density) bits "
            "is nonzero with probability below 1e-4; raise density or m"
        )
    rng = np.random.default_rng(seed)
    A = rng.random((n, m)) < density
    for _ in range(_MAX_REDRAWS):  # a zero row of A is orthogonal to everything: redraw it
        zero = ~A.any(axis=1)
        if not zero.any():
            break
        A[zero] = rng.random((int(zero.sum()), m)) < density
    else:
        raise AttnInputError(
            f"density={density!r} is too small for m={m}: rows of A keep coming out all zero "
            f"after {_MAX_REDRAWS} redraws; raise density or m"
        )
    B = np.empty((n, m), dtype=np.bool_)
    Ai = A.astype(np.int64)

    def draw(make, others):
        for _ in range(10_000):
            row = make()
            if (others @ row.astype(np.int64) > 0).all():
                return row
        raise AttnInputError(
            f"m={m} is too small for density={density}: random rows are orthogonal too "
            "often to draw this instance; raise m or density"
        )

    for j in range(n):
        B[j] = draw(lambda: rng.random(m) < density, Ai)
    pair = None
    if orthogonal:
        j = int(rng.integers(0, n))
        for _ in range(10_000):
            # B_j inside the complement of A_i, and non-orthogonal to every other row of A
            i = int(rng.integers(0, n))
            row = (~A[i]) & (rng.random(m) < rng.uniform(density, 1.0))
            if (np.delete(Ai, i, axis=0) @ row.astype(np.int64) > 0).all():
                break
        else:
            raise AttnInputError(
                f"m={m} is too small for density={density}: could not plant a unique "
                "orthogonal pair; raise m"
            )
        B[j] = row
        pair = (i, j)
    return A, B, pair


# ---------------------------------------------------------------------------------------
# OV → attention, entries Θ(log n)   [ours]
# ---------------------------------------------------------------------------------------


def _entry_size(beta: float, tau: float) -> float:
    """s = √(β/τ), the entry size for logits β at scale τ; refused if it overflows."""
    s = math.sqrt(beta / tau)
    if not math.isfinite(s):
        raise AttnInputError(
            f"scale={tau!r} is too small: the instance's entries √(β/scale) overflow "
            f"(β = {beta:.3g})"
        )
    return s


def _instance_size(na: int, nb: int) -> int:
    """The n of the logit scales: the larger side, at least 3 (so that ln n > 1)."""
    return max(na, nb, 3)


def ov_to_attention(A, B, *, scale=None):
    """Attention instance deciding OV: YES iff ``max(attention(Q, K, V)[:, 0]) >= threshold``.

    Our construction. With n = max(n_a, n_b, 3) and
    β = 3 ln n:

    - query i is s·A_i; real key j is -s·B_j; then n zero "dummy" keys;
    - s = √(β/τ), so the logit τ⟨q_i, k_j⟩ of a real pair is -β⟨A_i, B_j⟩ and every dummy
      logit is 0;
    - V (one column) is 1 on the real keys and 0 on the dummies, so Att[i, 0] is the
      attention mass row i puts on real keys.

    If A_i is orthogonal to some B_j, that key alone has weight 1 against n dummies:
    Att[i, 0] ≥ 1/(n+1). If no pair is orthogonal, every real weight is ≤ e^{-β} = n^{-3}:
    Att[i, 0] < n·n^{-3}/n = n^{-3}. The threshold 1/(4n) lies strictly between for n ≥ 3.

    Entries: max|Q|, max|K| = s. In AS24's convention τ = 1/d (pass ``scale=1/m``) this is
    √(3 m ln n): Θ(log n) when the dimension m is Θ(log n), as in OV from k-SAT.

    Parameters
    ----------
    A : bool or 0/1 (n_a, m)
    B : bool or 0/1 (n_b, m)
    scale : the softmax scale τ the instance is built for; default 1/√m, that of
        attnlib.attention

    Returns
    -------
    Q : (n_a, m) float64
    K : (n_b + n, m) float64
    V : (n_b + n, 1) float64
    threshold : float, 1/(4n)
    """
    A = _as_bool_matrix("A", A)
    B = _as_bool_matrix("B", B)
    if B.shape[1] != A.shape[1]:
        raise AttnInputError(f"B must have m={A.shape[1]} columns like A, got {B.shape[1]}")
    (na, m), nb = A.shape, B.shape[0]
    tau = check_scale(scale, m)
    n = _instance_size(na, nb)
    beta = 3.0 * math.log(n)
    s = _entry_size(beta, tau)
    Q = s * A.astype(np.float64)
    K = np.zeros((nb + n, m))
    K[:nb] = -s * B
    V = np.zeros((nb + n, 1))
    V[:nb] = 1.0
    return Q, K, V, 1.0 / (4 * n)


# ---------------------------------------------------------------------------------------
# planted Gap Hamming nearest neighbour → attention, entries Θ(√log n)   [ours]
# ---------------------------------------------------------------------------------------


def _hamming(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """All pairwise Hamming distances, (n_a, n_b) int64."""
    Ai, Bi = A.astype(np.int64), B.astype(np.int64)
    return Ai.sum(1)[:, None] + Bi.sum(1)[None, :] - 2 * (Ai @ Bi.T)


def _check_gap(t, eps, m):
    t = check_positive_real("t", t)
    eps = check_positive_real("eps", eps)
    if (1 + eps) * t > m:
        raise AttnInputError(f"t and eps must satisfy (1+eps)*t <= m={m}, got t={t!r}, eps={eps!r}")
    if t + eps * t / 2 <= t:  # the mid level t' = t + εt/2 of the reduction must exceed t
        raise AttnInputError(
            f"eps={eps!r} is too small for t={t!r}: t + eps*t/2 rounds to t in double precision"
        )
    return t, eps


def planted_gap_ann(n, m, t, eps, *, planted: bool, seed, max_tries: int = 1000):
    """A planted instance of bichromatic Gap Hamming nearest neighbour.

    Rows of A and B (n each, m bits) are uniform; every row of B closer than (1+ε)t to some
    row of A is redrawn (up to ``max_tries`` times), so all pairs are *far*. With
    ``planted=True`` one pair (i, j) is then made *close*: B_j is A_i with exactly ⌊t⌋ bits
    flipped, redrawn until B_j stays far from every other row of A.

    This is the promise problem "is some pair at distance ≤ t, or are all pairs at distance
    ≥ (1+ε)t?". Hard instances of it come from Rubinstein's reduction (Rubinstein 2018), whose
    gadgets are far too large to build at the sizes of a notebook; these planted instances
    have the same shape, not the same hardness.

    Returns
    -------
    A, B : bool (n, m)
    pair : the planted (i, j), or None
    """
    n = check_int("n", n)
    m = check_int("m", m)
    t, eps = _check_gap(t, eps, m)
    seed = check_int("seed", seed, minimum=0)
    max_tries = check_int("max_tries", max_tries)
    check_bool("planted", planted)
    # the float64 draw, A and B, and the int64 copies of _hamming (~26 B per entry)
    check_memory("planted_gap_ann's (n, m) arrays", 32 * n * m, culprits="n or m")
    far = (1 + eps) * t
    rng = np.random.default_rng(seed)
    A = rng.random((n, m)) < 0.5
    B = np.empty((n, m), dtype=np.bool_)

    def draw(make, others):
        for _ in range(max_tries):
            row = make()
            if others.shape[0] == 0 or _hamming(others, row[None, :]).min() >= far:
                return row
        raise AttnInputError(
            f"could not draw rows at Hamming distance >= (1+eps)*t={far:g} in {max_tries} "
            f"tries (n={n}, m={m}): lower t or eps, or raise m"
        )

    for j in range(n):
        B[j] = draw(lambda: rng.random(m) < 0.5, A)
    pair = None
    if planted:
        i, j = (int(x) for x in rng.integers(0, n, size=2))
        flips = int(math.floor(t))

        def near():
            row = A[i].copy()
            row[rng.choice(m, size=flips, replace=False)] ^= True
            return row

        B[j] = draw(near, np.delete(A, i, axis=0))
        pair = (i, j)
    return A, B, pair


def gap_ann_to_attention(A, B, t, eps, *, scale=None):
    """Attention instance deciding planted Gap Hamming NN with entries Θ(√log n).

    **Our variant** of the instance shape of AS23 Lemma 4.7 (restated as AS24 Lemma E.2):
    bounded entries, V ∈ {0, 1}, and logits on a few levels. The promise: YES if some pair
    (A_i, B_j) has Hamming distance ≤ t, NO if every pair has distance ≥ (1+ε)t.

    Our construction, with n = max(n_a, n_b, 3):

    - encode a' = (a, 1-a) and b' = (b, 1-b) in {0,1}^{2m}, so ⟨a', b'⟩ = m - Ham(a, b);
    - a mid level t' = t + εt/2 and β = (2 ln n + 2)/(t' - t);
    - query i is s·a'_i, real key j is s·b'_j, and n dummy keys equal s·α·(1, …, 1) with
      α = (m - t')/m, so that ⟨a', α·1⟩ = m - t' for every a';
    - s = √(β/τ): a real logit is β(m - Ham), a dummy logit β(m - t');
    - V (one column) is 1 on real keys, 0 on dummies; Att[i, 0] is row i's mass on real keys.

    A close pair outweighs the n dummies by e^{β(t'-t)}/n = n·e²: Att[i, 0] ≥ n e²/(1 + n e²)
    > 0.93. In a NO instance all n real keys together weigh at most
    n·e^{-β((1+ε)t - t')}/n = e^{-2}/n² of the dummies: Att[i, 0] < 0.02. The threshold is 1/2.

    Entries: max|Q|, max|K| = s. In AS24's convention τ = 1/d = 1/(2m) this is
    s = √(8 (m/t)(ln n + 1)/ε): Θ(√log n) for a fixed ratio t/m and gap ε, whatever m is.

    Parameters
    ----------
    A, B : bool or 0/1, (n_a, m) and (n_b, m)
    t : the "close" distance, > 0
    eps : the gap ε > 0, with (1+ε)t ≤ m
    scale : the softmax scale τ the instance is built for; default 1/√(2m), that of
        attnlib.attention on these 2m-dimensional vectors

    Returns
    -------
    Q : (n_a, 2m), K : (n_b + n, 2m), V : (n_b + n, 1), threshold = 0.5
    """
    A = _as_bool_matrix("A", A)
    B = _as_bool_matrix("B", B)
    if B.shape[1] != A.shape[1]:
        raise AttnInputError(f"B must have m={A.shape[1]} columns like A, got {B.shape[1]}")
    (na, m), nb = A.shape, B.shape[0]
    t, eps = _check_gap(t, eps, m)
    d = 2 * m
    tau = check_scale(scale, d)
    n = _instance_size(na, nb)
    t_mid = t + eps * t / 2
    beta = (2 * math.log(n) + 2) / (t_mid - t)
    s = _entry_size(beta, tau)
    alpha = (m - t_mid) / m
    Q = s * np.hstack([A, ~A]).astype(np.float64)
    K = np.empty((nb + n, d))
    K[:nb] = s * np.hstack([B, ~B])
    K[nb:] = s * alpha
    V = np.zeros((nb + n, 1))
    V[:nb] = 1.0
    return Q, K, V, 0.5


# ---------------------------------------------------------------------------------------
# attention → gradient   [paper: AS24 App. E; the quadrature is ours]
# ---------------------------------------------------------------------------------------


def _gradient_oracle(Q, K, V, grad_fn, scale):
    """AS24 Thm E.5's embedding of an attention instance into the loss L(X).

    Returns (f0, fprime) where f(λ) = ‖softmax(λτQKᵀ)V‖²_F, f0 = f(0) computed directly, and
    fprime(λ) = 2·tr(dL/dX at X = λI) from one call of grad_fn.

    The loss is L(X) = ½‖softmax(A₁XA₂ᵀ/D)A₃Y - E‖²_F with scale 1/D. With A₁ = τD·Q,
    A₂ = K, A₃ = V, Y = I and E = 0 (zero columns pad Q, K or V to a common width D), the
    logits at X = λI are λτQKᵀ, so L(λI) = f(λ)/2 and, by the chain rule,
    f'(λ) = 2·⟨dL/dX, dX/dλ⟩ = 2·⟨dL/dX, I⟩ = 2·tr(dL/dX), with no extra factor. In AS24's
    own convention τ = 1/d (and d_v ≤ d, so D = d), A₁ = Q exactly. Parametrising X = λdI
    instead, with A₁ = Q, would give f'(λ) = 2d·tr(dL/dX).
    """
    Q = as_float_array("Q", Q).astype(np.float64)
    K = as_float_array("K", K).astype(np.float64)
    V = as_float_array("V", V).astype(np.float64)
    check_cols("K", K, Q.shape[1], "Q")
    check_rows("V", V, K.shape[0], "K")
    if not callable(grad_fn):
        raise AttnInputError(
            f"grad_fn must be callable like attnlib.attention_loss_grad, got {grad_fn!r}"
        )
    (n, d), dv = Q.shape, V.shape[1]
    tau = check_scale(scale, d)
    D = max(d, dv)
    A1 = np.zeros((n, D))
    A1[:, :d] = (tau * D) * Q
    A2 = np.zeros((K.shape[0], D))
    A2[:, :d] = K
    A3 = np.zeros((V.shape[0], D))
    A3[:, :dv] = V
    Y, E = np.eye(D), np.zeros((n, D))
    # At λ = 0 the softmax is uniform: every output row is the mean of V's rows.
    f0 = float(n * np.sum(V.mean(axis=0) ** 2))

    def fprime(lam: float) -> float:
        G = grad_fn(lam * np.eye(D), A1, A2, A3, Y, E)
        G = np.asarray(G)
        if G.shape != (D, D) or G.dtype.kind not in "fiu" or not np.isfinite(G).all():
            raise AttnInputError(
                f"grad_fn must return a finite ({D}, {D}) real array like "
                f"attnlib.attention_loss_grad, got shape {G.shape} dtype {G.dtype}"
            )
        return 2.0 * float(np.trace(G))

    return f0, fprime


def norm_derivative_from_gradient(Q, K, V, lam, grad_fn, *, scale=None) -> float:
    """f'(λ) for f(λ) = ‖softmax(λτQKᵀ)V‖²_F, from one call of ``grad_fn``: 2·tr(dL/dX at λI).

    See :func:`attention_from_gradient` for the embedding (AS24 Theorem E.5's proof).
    """
    lam = check_real("lam", lam)
    _, fprime = _gradient_oracle(Q, K, V, grad_fn, scale)
    _check_lambda_logits(Q, K, V, lam, scale)
    return fprime(lam)


def _check_lambda_logits(Q, K, V, lam: float, scale) -> None:
    """The embedded logits (A₁·λI)·A₂ᵀ, A₁ = τD·Q, must be finite, or the gradient oracle
    cannot be asked (the loss raises, blaming its own arguments instead of lam)."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    D = max(Q.shape[1], np.shape(V)[1])
    tau = check_scale(scale, Q.shape[1])
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite((lam * ((tau * D) * Q)) @ K.T).all()
    if not finite:
        raise AttnInputError(
            f"lam={lam!r} is too large: the logits lam * scale * Q @ K.T overflow float64"
        )


def attention_from_gradient(Q, K, V, grad_fn, *, nodes=32, scale=None) -> float:
    """‖Att(Q, K, V)‖²_F from gradient calls alone, by Gauss–Legendre quadrature.

    AS24 Theorem E.5 (proof) embeds attention into the loss: A₁ = Q, A₂ = K, A₃ = V, Y = I,
    E = 0 (the theorem's "B = 0" is an erratum for E = 0) and X = λI. Then
    f(λ) = ‖softmax(λτQKᵀ)V‖²_F = 2 L(λI), f(0) is computed directly (uniform weights), and
    f'(λ) = 2·tr(dL/dX at λI) (derived in ``_gradient_oracle``; checked against finite
    differences in tests/test_hardness_gradient.py). So

        f(1) = f(0) + ∫₀¹ f'(λ) dλ ≈ f(0) + Σ_k w_k f'(λ_k)

    with the ``nodes``-point Gauss–Legendre rule mapped to [0, 1] (ours). AS24 Lemma E.4
    uses a left Riemann sum instead (:func:`riemann_from_gradient`), whose error is only
    O(max|f''|/nodes).

    attnlib.attention_loss has scale 1/d built in, so λ enters the logits as λ·A₁A₂ᵀ/d. To
    recover attention at scale τ (default 1/√d, that of attnlib.attention), A₁ is τd·Q; for
    AS24's τ = 1/d this is A₁ = Q.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v)
    grad_fn : callable with the signature of attnlib.attention_loss_grad
        (X, A1, A2, A3, Y, E) -> (D, D) array; called ``nodes`` times
    nodes : number of quadrature nodes, 1..4096
    scale : τ, default 1/√d

    Returns
    -------
    float, the estimate of ‖attention(Q, K, V, scale=τ)‖²_F
    """
    nodes = check_int("nodes", nodes, maximum=4096)
    f0, fprime = _gradient_oracle(Q, K, V, grad_fn, scale)
    x, w = np.polynomial.legendre.leggauss(nodes)
    lams, weights = (x + 1) / 2, w / 2
    return f0 + float(sum(wk * fprime(float(lk)) for lk, wk in zip(lams, weights, strict=True)))


def riemann_from_gradient(Q, K, V, grad_fn, *, nodes=256, scale=None) -> float:
    """AS24 Lemma E.4's recipe: f(1) ≈ f(0) + (1/N)·Σ_{i<N} f'(i/N), a left Riemann sum.

    Same embedding as :func:`attention_from_gradient`; kept to compare against it. Its error
    is bounded by max|f''|/N, which is large when the logits are Θ(log n) wide.
    """
    nodes = check_int("nodes", nodes, maximum=1 << 16)
    f0, fprime = _gradient_oracle(Q, K, V, grad_fn, scale)
    return f0 + float(sum(fprime(i / nodes) for i in range(nodes))) / nodes


def gauss_legendre_error_bound(Q, K, V, nodes, *, scale=None, grid: int = 256) -> float:
    """A bound on the error of :func:`attention_from_gradient` with ``nodes`` nodes (ours).

    With S = τQKᵀ, row widths w_i = max_j S_ij − min_j S_ij, W = max_i w_i and
    V_max = max|V|: f'(λ) extends analytically to the strip |Im λ| < π/W, and on
    |Im λ| ≤ y < π/W, with c = cos(yW/2),

        |f'(λ)| ≤ Φ(y) = d_v · V_max² · (Σ_i w_i) · (1 + 1/c) / c².

    The strip |Im λ| ≤ y holds the Bernstein ellipse of [0, 1] with parameter
    ρ = 2y + √(1 + 4y²), so the N-node Gauss–Legendre rule on [0, 1] errs by at most
    (32/15)·Φ(y)·ρ^{-2N}/(ρ² − 1) (Trefethen, ATAP Thm 19.3, halved for the interval
    [0, 1]). The error falls geometrically in N/W, and W ≤ 2R for the logit range R. The bound
    is minimised over y on ``grid`` points of (0, π/W). It holds in exact arithmetic; rounding
    adds about 1e-16 · N · max|f'| on top.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v)
    nodes : number of Gauss–Legendre nodes N, 1..4096
    scale : τ, default 1/√d
    grid : number of strip widths y tried, 1..10⁵

    Returns
    -------
    float, the bound on |f(1) − estimate| (0.0 when every row of S is constant: f' ≡ 0)

    Raises
    ------
    AttnInputError
        if an array is not a finite 2-D real array, the shapes disagree, ``nodes`` or ``grid``
        is not an integer in range, or ``scale`` is not a positive finite number.
    """
    Q = as_float_array("Q", Q).astype(np.float64)
    K = as_float_array("K", K).astype(np.float64)
    V = as_float_array("V", V).astype(np.float64)
    check_cols("K", K, Q.shape[1], "Q")
    check_rows("V", V, K.shape[0], "K")
    nodes = check_int("nodes", nodes, maximum=4096)
    grid = check_int("grid", grid, maximum=100_000)
    tau = check_scale(scale, Q.shape[1])
    with np.errstate(over="ignore", invalid="ignore"):
        S = tau * (Q @ K.T)
        widths = S.max(axis=1) - S.min(axis=1)
    if not np.isfinite(widths).all():
        raise AttnInputError(
            "the logits scale * Q @ K.T overflow float64: Q, K or scale is too large"
        )
    W = float(widths.max())
    vmax = float(np.abs(V).max())
    if W == 0.0 or vmax == 0.0:
        return 0.0
    # y = θπ/W with θ in (0, 1): a wider strip gives a larger ρ but a smaller c.
    theta = (np.arange(grid) + 0.5) / grid
    y = theta * math.pi / W
    c = np.cos(theta * math.pi / 2)
    rho = 2 * y + np.sqrt(1 + 4 * y**2)
    # In logs: Φ(y) overflows for large V, and ρ^(-2N) underflows long before the bound
    # stops mattering.
    log_phi = (
        math.log(V.shape[1])
        + 2 * math.log(vmax)
        + math.log(float(widths.sum()))
        + np.log((1 + 1 / c) / c**2)
    )
    with np.errstate(divide="ignore"):
        log_bound = math.log(32 / 15) + log_phi - 2 * nodes * np.log(rho) - np.log(rho**2 - 1)
    best = float(log_bound.min())
    if best > math.log(sys.float_info.max):
        raise AttnInputError(f"the bound overflows a float: V is too large (max |V| = {vmax:.3g})")
    return math.exp(best)
