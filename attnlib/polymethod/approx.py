"""AS23's approximate attention and AS24's almost-linear gradient, never forming n×m.

Both replace exp on the logits by a polynomial p with relative error ≤ ε on [−R, R]
(:func:`attnlib.polymethod.exp_poly`) and factor p(τQKᵀ) = U₀V₀ᵀ exactly with the feature map
(:func:`attnlib.polymethod.poly_features`), of rank r = C(g+d, d). The approximate softmax is

    f̃ = diag(s)⁻¹ U₀ V₀ᵀ,  s = U₀ (V₀ᵀ 1),        i.e. f̃ = U₁ V₁ᵀ with U₁ = diag(s)⁻¹U₀, V₁ = V₀,

and every product with f̃ is taken through the factors: O((n+m)·r·d) time, O((n+m)·r) memory.

**Degree and rank.** Each function chooses the degree from the *actual* logit range of its
input, R = τ · maxᵢ‖Qᵢ‖₂ · maxⱼ‖Kⱼ‖₂ (Cauchy–Schwarz: every |τ⟨qᵢ, kⱼ⟩| ≤ R, at O((n+m)d)
cost). With entries bounded by B and τ = 1/d this is ≤ B², the AS papers' logit range.
:func:`approx_plan` returns the degree, rank and memory estimate that a call would use (a
frozen dataclass); every approximate function returns it too with ``return_plan=True``.

**Memory budget.** The factors need about ``(n+m)·(3r + 2d(d+1))`` doubles (U₁, V₁, one work
array of the same size, and the thin products of the batched gradient); this is the plan's
``bytes_needed``. Each function then checks its own peak, :func:`peak_bytes`, which adds the
products that do not shrink with n (r × d·d_v in the backward pass, r × d(d+1) in the
gradient) and is checked against tracemalloc in the tests. If either exceeds
``memory_budget`` bytes (default :data:`MEMORY_BUDGET_BYTES` = 1 GiB) the call raises
:class:`attnlib.AttnInputError` *before* allocating anything larger than the O((n+m)d) inputs:
above the √log n threshold the rank explodes and the method is not worth running.

**Accuracy of the forward pass** (used by the tests and Chapter 7). Let every logit lie in
[−R, R] and p(x) = eˣ(1 + δ(x)) with |δ| ≤ ε there. Then Ã_ij = A_ij(1 + δ_ij), the row sums
are s̃ᵢ = sᵢ(1 + δ̄ᵢ) with δ̄ᵢ a convex combination of the δ_ij (so |δ̄ᵢ| ≤ ε), and

    f̃_ij / f_ij = (1 + δ_ij) / (1 + δ̄ᵢ) ∈ [(1−ε)/(1+ε), (1+ε)/(1−ε)],
    so |f̃_ij − f_ij| ≤ f_ij · 2ε/(1−ε)  and  Σⱼ |f̃_ij − f_ij| ≤ 2ε/(1−ε).

Hence ‖Õ − O‖_max ≤ (2ε/(1−ε)) · ‖V‖_max, row by row (plus rounding, ~1e-13 here) [ours].
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    check_choice,
    check_cols,
    check_loss_inputs,
    check_open_unit,
    check_positive_real,
    check_real,
    check_rows,
    check_scale,
    check_shape,
    float_dtype,
    max_abs,
)
from ..config import MEMORY_BUDGET_BYTES, RANGE_STEPS_PER_OCTAVE
from ..logits import logit_range, round_up_to_grid
from .features import feature_rank, poly_features, poly_features_bytes, rowwise_kron
from .polyexp import KINDS, exp_poly, least_degree

__all__ = [
    "MEMORY_BUDGET_BYTES",
    "ApproxPlan",
    "logit_range",
    "approx_plan",
    "loss_plan",
    "approx_attention",
    "approx_attention_backward",
    "approx_attention_loss_grad",
    "forward_error_bound",
    "peak_bytes",
]

#: R is floored here so that an all-zero Q or K still has a (degree-0) polynomial.
_MIN_RANGE = 1e-12
_WORK_ARRAYS = 3  # U₁, V₁ and one work array of the same size


@dataclass(frozen=True)
class ApproxPlan:
    """What an approximate call uses: the logit range, polynomial degree and rank.

    Attributes: ``R`` (every logit lies in [−R, R]; :func:`logit_range` rounded up to a power
    of 2^(1/16), so that nearby inputs share one degree search), ``eps``, ``kind``, ``degree`` g,
    ``rank`` r = C(g+d, d), shapes ``n, m, d``, and ``bytes_needed`` = 8·(n+m)·(3r + 2d(d+1)),
    the memory of the factors in float64 (U₁, V₁, one work array of their size, and the thin
    (d+1)·d-column products of the batched gradient). The peak of a call, which also counts
    the products with r rows, is :func:`peak_bytes`.
    """

    R: float
    eps: float
    kind: str
    degree: int
    rank: int
    n: int
    m: int
    d: int
    bytes_needed: int

    def polynomial(self):
        """The polynomial p ≈ exp on [−R, R] (relative error ≤ eps) this plan uses."""
        return exp_poly(self.R, self.eps, kind=self.kind)


def forward_error_bound(eps, V_max) -> float:
    """The bound ‖Õ − O‖_max ≤ 2ε/(1−ε) · ‖V‖_max derived in the module docstring.

    Raises :class:`attnlib.AttnInputError` if eps is not in (0, 1), V_max is not a finite
    number ≥ 0, or the bound overflows a float.

    Examples
    --------
    >>> forward_error_bound(0.5, 3.0)
    6.0
    """
    eps = check_open_unit("eps", eps)
    V_max = check_real("V_max", V_max, minimum=0.0, expected="a finite number >= 0")
    bound = 2.0 * eps / (1.0 - eps) * V_max
    if not math.isfinite(bound):
        raise AttnInputError(
            f"the bound 2·eps/(1−eps)·V_max overflows a float: V_max={V_max:g} is too large "
            f"at eps={eps:g}"
        )
    return bound


def _budget(memory_budget) -> int:
    if memory_budget is None:
        return MEMORY_BUDGET_BYTES
    return int(check_positive_real("memory_budget", memory_budget))


def _plan(Q, K, tau, eps, kind, memory_budget) -> ApproxPlan:
    """Degree from the logit range, rank, and the budget check; allocates O(1) memory."""
    eps = check_open_unit("eps", eps)
    kind = check_choice("kind", kind, KINDS)
    budget = _budget(memory_budget)
    n, d = Q.shape
    m = K.shape[0]
    R = max(logit_range(Q, K, scale=tau), _MIN_RANGE)
    if not math.isfinite(R):
        raise AttnInputError(f"the logit range of Q and K overflows (R = {R}); rescale them")
    # Round R up to the grid 2^(k/16): the interval only grows (≤ 4.4%), so the guarantee
    # holds, and nearby inputs share one cached degree search.
    R = round_up_to_grid(R, RANGE_STEPS_PER_OCTAVE)
    try:
        g = least_degree(R, eps, kind=kind)
    except AttnInputError as exc:
        raise AttnInputError(
            f"the inputs' logit range R = {R:.4g} (= scale·max‖Qᵢ‖·max‖Kⱼ‖) is too large for "
            f"the polynomial method at eps={eps:g}: {exc}"
        ) from None
    r = feature_rank(d, g)
    need = 8 * (n + m) * (_WORK_ARRAYS * r + 2 * d * (d + 1))
    if need > budget:
        raise AttnInputError(
            f"the polynomial method needs rank r = C(g+d, d) = C({g}+{d}, {d}) = {r} for the "
            f"logit range R = {R:.4g} at eps={eps:g} (degree g = {g}); its factors would take "
            f"about {need / 2**20:.1f} MiB, over the memory budget of {budget / 2**20:.1f} MiB. "
            "Use a larger eps, smaller entries, or raise memory_budget"
        )
    return ApproxPlan(R=R, eps=eps, kind=kind, degree=g, rank=r, n=n, m=m, d=d, bytes_needed=need)


def peak_bytes(plan: ApproxPlan, which: str, d_v: int | None = None) -> int:
    """Peak working memory, in bytes, of one approximate call with this plan's shapes.

    ``which`` is ``"forward"`` (:func:`approx_attention`), ``"backward"``
    (:func:`approx_attention_backward`) or ``"loss_grad"`` (:func:`approx_attention_loss_grad`);
    ``d_v`` defaults to d. Everything is float64: the float64 copies of the inputs, the
    feature map (:func:`~attnlib.polymethod.features.poly_features_bytes`), and the largest
    products after it: V₁ᵀV and Õ (forward); the r × d·d_v product W of the Hadamard trick
    next to its (rows × d·d_v) factors (backward); the (n + m) × (d+1)·d batched factors and
    their two r × (d+1)·d products (gradient). These last terms do not shrink with n, so for
    small n they dominate (tested against tracemalloc).

    Raises :class:`attnlib.AttnInputError` on an unknown ``which``.
    """
    n, m, d, r = plan.n, plan.m, plan.d, plan.rank
    dv = d if d_v is None else d_v
    rows = max(n, m)
    features = poly_features_bytes(n, m, d, plan.degree)
    inputs = 8 * (n * d + m * d + m * dv + n * dv)
    if which == "forward":
        after = 8 * (r * dv + n * dv + n)
    elif which == "backward":
        k = d * dv
        after = 8 * (r * k + 2 * rows * k + 3 * rows * max(d, dv) + 2 * r * max(d, dv))
    elif which == "loss_grad":
        k = (d + 1) * d
        after = 8 * ((n + m) * k + rows * d * d + 2 * r * k + 2 * (n + m) * d + d * d)
    else:
        raise AttnInputError(f"which must be 'forward', 'backward' or 'loss_grad', got {which!r}")
    return inputs + features + after


def _check_peak(plan: ApproxPlan, which: str, d_v, memory_budget) -> None:
    """Refuse the call before the feature map is built if its peak exceeds the budget."""
    need = peak_bytes(plan, which, d_v)
    budget = _budget(memory_budget)
    if need > budget:
        raise AttnInputError(
            f"the polynomial method at rank r = {plan.rank} (degree {plan.degree}, n={plan.n}, "
            f"m={plan.m}, d={plan.d}) would need about {need / 2**20:.1f} MiB at its peak, "
            f"over memory_budget = {budget / 2**20:.1f} MiB. Use a larger eps, smaller "
            "entries, or raise memory_budget"
        )


def _check_qk(Q, K):
    Q = as_float_array("Q", Q)
    K = as_float_array("K", K)
    check_cols("K", K, Q.shape[1], "Q")
    return Q, K


def approx_plan(Q, K, *, eps, scale=None, kind="chebyshev", memory_budget=None) -> ApproxPlan:
    """The :class:`ApproxPlan` (R, degree, rank, bytes) that approximate attention on Q, K uses.

    Q : (n, d), K : (m, d); ``scale`` defaults to 1/√d as in :func:`attnlib.attention`.
    Raises :class:`attnlib.AttnInputError` if eps ∉ (0, 1), if the logit range is beyond what
    double precision can reach at eps, or if the factors exceed ``memory_budget`` bytes.

    Examples
    --------
    >>> plan = approx_plan(np.ones((5, 4)), np.ones((3, 4)), eps=1e-3, scale=0.25)
    >>> plan.R, plan.degree, plan.rank
    (1.0, 5, 126)
    """
    Q, K = _check_qk(Q, K)
    tau = check_scale(scale, Q.shape[1])
    return _plan(Q, K, tau, eps, kind, memory_budget)


def _factors(Q, K, tau, plan):
    """U₁ = diag(s)⁻¹U₀ and V₁ = V₀ in float64, so that f̃ = U₁V₁ᵀ (AS23 §3; AS24 §D)."""
    poly = plan.polynomial()
    U0, V0 = poly_features(Q.astype(np.float64), K.astype(np.float64), poly, scale=tau)
    s = U0 @ V0.sum(axis=0)  # s = U₀(V₀ᵀ1): the approximate row sums, > 0 since p > 0
    U0 /= s[:, None]
    return U0, V0


def approx_attention(
    Q, K, V, *, eps, scale=None, kind="chebyshev", memory_budget=None, return_plan=False
):
    """AS23's approximate attention Õ = f̃ V, computed as U₁(V₁ᵀV), never forming n×m.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v) float arrays
    eps : relative accuracy of the exp approximation, in (0, 1)
    scale : τ, default 1/√d (the AS papers use 1/d: pass ``scale=1/d``)
    kind : ``"chebyshev"`` (default) or ``"taylor"``, see :func:`exp_poly`
    memory_budget : bytes allowed for the factors, default :data:`MEMORY_BUDGET_BYTES`
    return_plan : also return the :class:`ApproxPlan`

    Returns
    -------
    O : (n, d_v) in the inputs' dtype (computed in float64); or ``(O, plan)``.

    Guarantee: ‖Õ − O‖_max ≤ 2ε/(1−ε)·‖V‖_max (module docstring; AS23 Thm 3.8 states an
    entrywise ε‖V‖_max-type bound for its version). Time O((n+m) r d_v), memory O((n+m) r).

    Raises
    ------
    AttnInputError
        for invalid arrays, scale, eps or kind, a logit range out of reach at eps, or a peak
        memory (:func:`peak_bytes`) over ``memory_budget``.

    Examples
    --------
    >>> import attnlib as al
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.uniform(-1, 1, (40, 4)), rng.uniform(-1, 1, (30, 4)), np.eye(30)[:, :3]
    >>> O = approx_attention(Q, K, V, eps=1e-3)
    >>> bool(np.abs(O - al.attention(Q, K, V)).max() <= forward_error_bound(1e-3, 1.0))
    True
    """
    Q, K = _check_qk(Q, K)
    V = as_float_array("V", V)
    check_rows("V", V, K.shape[0], "K")
    tau = check_scale(scale, Q.shape[1])
    plan = _plan(Q, K, tau, eps, kind, memory_budget)
    _check_peak(plan, "forward", V.shape[1], memory_budget)
    U1, V1 = _factors(Q, K, tau, plan)
    # V scaled by a power of 2 (exact) to entries below 1, so that the sums V₁ᵀV cannot
    # overflow for V near the float range; Õ is linear in V, and a convex combination of
    # its rows, so it is scaled back within V's range.
    e = _exponent(V)
    O = np.ldexp(U1 @ (V1.T @ np.ldexp(V.astype(np.float64), -e)), e)
    O = _finite("approx_attention's output", O.astype(float_dtype(Q, K, V), copy=False), "V")
    return (O, plan) if return_plan else O


def _exponent(A: np.ndarray) -> int:
    """The e with max|A| < 2^e (0 for an all-zero A): A·2^-e has entries below 1, exactly."""
    return math.frexp(max_abs(A))[1]


def _finite(what: str, A: np.ndarray, culprits: str) -> np.ndarray:
    """A itself if every entry is finite; otherwise refuse: the result is beyond A's dtype."""
    if not np.isfinite(A).all():
        raise AttnInputError(f"{what} overflows {A.dtype}: {culprits} is too large")
    return A


def _light_hadamard_times(U1, V1, A, B, right):
    """(f̃ ∘ (A Bᵀ)) · right without the rank-r·k Kronecker factors of AS24 Lemma D.4.

    f̃ = U₁V₁ᵀ (n×m), A (n, k), B (m, k), right (m, p) → (n, p). Uses the memory-light form
    f̃ ∘ (ABᵀ) = Σ_t diag(A_{:,t}) f̃ diag(B_{:,t}) [ours], with the k terms
    batched into two matrix products: W = V₁ᵀ(B ⊘ right) is r × kp, and U₁W is n × kp.
    The ⊘ here joins two thin matrices (n × kp extra memory), never U₁ with anything.
    Time O((n+m) r k p).
    """
    k, p = A.shape[1], right.shape[1]
    W = V1.T @ rowwise_kron(B, right)  # (r, k·p): column t·p + c is V₁ᵀ(B_t ∘ right_c)
    T = (U1 @ W).reshape(U1.shape[0], k, p)
    return np.einsum("it,itc->ic", A, T)


def approx_attention_backward(
    Q, K, V, dO, *, eps, scale=None, kind="chebyshev", memory_budget=None, return_plan=False
):
    """The backward pass with P replaced by the low-rank f̃ = U₁V₁ᵀ: AS24 §D in QKV form.

    The FlashAttention backward equations (FA2 Alg. 2) with f̃ for P, all through factors::

        Õ  = f̃ V = U₁(V₁ᵀV)                                   (n, d_v)
        dV = f̃ᵀ dO = V₁(U₁ᵀ dO)                                (m, d_v)
        D̃  = rowsum(dO ∘ Õ)                                    (n,)     AS24's r̃
        dS̃ = f̃ ∘ (dO Vᵀ) − diag(D̃) f̃                           (n, m)   never formed
        dQ = τ dS̃ K = τ[Σ_t diag(dO_t) f̃ diag(V_t) K − D̃ ∘ (f̃K)]
        dK = τ dS̃ᵀ Q = τ[Σ_t diag(V_t) f̃ᵀ diag(dO_t) Q − f̃ᵀ(D̃ ∘ Q)]

    Dictionary to AS24 (Chapter 1): Q = A₁X, K = A₂, V = h = A₃Y, dO = c̃, D̃ = r̃,
    dS̃ = p̃, τ = 1/d; then AS24's gradient is A₁ᵀ dQ (see
    :func:`approx_attention_loss_grad`).

    Parameters
    ----------
    Q, K, V : (n, d), (m, d), (m, d_v);  dO : (n, d_v)
    eps, scale, kind, memory_budget, return_plan : as in :func:`approx_attention`

    Returns
    -------
    dQ, dK, dV : (n, d), (m, d), (m, d_v) in the inputs' dtype; or ``(dQ, dK, dV, plan)``.
    Time O((n+m) r d d_v), memory O((n+m) r).

    Raises
    ------
    AttnInputError
        as :func:`approx_attention`, and if dO is not (n, d_v).
    """
    Q, K = _check_qk(Q, K)
    V = as_float_array("V", V)
    check_rows("V", V, K.shape[0], "K")
    n, d = Q.shape
    dO = as_float_array("dO", dO)
    check_shape("dO", dO, (n, V.shape[1]), "(n, d_v)")
    tau = check_scale(scale, d)
    plan = _plan(Q, K, tau, eps, kind, memory_budget)
    _check_peak(plan, "backward", V.shape[1], memory_budget)
    dtype = float_dtype(Q, K, V, dO)
    Q64, K64 = (a.astype(np.float64, copy=False) for a in (Q, K))
    # V and dO scaled by powers of 2 (exact) to entries below 1, so that no product of the
    # two overflows for inputs near the float range: dV is linear in dO, dQ and dK bilinear
    # in (V, dO), so they are scaled back by 2^b and 2^(a+b) at the end.
    a, b = _exponent(V), _exponent(dO)
    V64, dO64 = np.ldexp(V.astype(np.float64), -a), np.ldexp(dO.astype(np.float64), -b)

    U1, V1 = _factors(Q64, K64, tau, plan)
    O = U1 @ (V1.T @ V64)
    D = np.einsum("ij,ij->i", dO64, O)
    dV = V1 @ (U1.T @ dO64)
    # f̃ ∘ (dO Vᵀ), applied to K (for dQ) and, transposed, to Q (for dK); f̃ᵀ = V₁U₁ᵀ.
    dQ = _light_hadamard_times(U1, V1, dO64, V64, K64) - D[:, None] * (U1 @ (V1.T @ K64))
    dK = _light_hadamard_times(V1, U1, V64, dO64, Q64) - V1 @ (U1.T @ (D[:, None] * Q64))
    with np.errstate(over="ignore"):
        dQ, dK, dV = np.ldexp(tau * dQ, a + b), np.ldexp(tau * dK, a + b), np.ldexp(dV, b)
        out = tuple(g.astype(dtype, copy=False) for g in (dQ, dK, dV))
    for name, g in zip(("dQ", "dK", "dV"), out, strict=True):
        _finite(f"approx_attention_backward's {name}", g, "V, dO, Q or K")
    return (*out, plan) if return_plan else out


# ---------------------------------------------------------------------------------------
# AS24's formulation: L(X) = ½‖D(X)⁻¹ exp(A₁XA₂ᵀ/d) A₃Y − E‖²_F
# ---------------------------------------------------------------------------------------


def _check_loss_inputs(X, A1, A2, A3, Y, E):
    """Validate (attnlib._checks) and compute in float64; the caller returns ``dtype``.

    Also refuses inputs whose gradient's intermediates would overflow float64 before the
    factors are built: with H = max|A₃Y| and C = H + max|E|, |f̃h| ≤ H (the rows of f̃ are
    probability vectors), so |c̃| ≤ C and |r̃| = |rowsum(c̃ ∘ f̃h)| ≤ d·C·H, and the products
    c̃ ⊘ A₁, h ⊘ A₂ and r̃ ∘ A₁ of the gradient's batched form must be finite."""
    arrays = check_loss_inputs(X, A1, A2, A3, Y, E)
    dtype = arrays[0].dtype
    X, A1, A2, A3, Y, E = (a.astype(np.float64, copy=False) for a in arrays)
    with np.errstate(over="ignore", invalid="ignore"):
        H = max_abs(A3 @ Y)
    e, a1, a2 = (max_abs(a) for a in (E, A1, A2))
    C = H + e
    d = A1.shape[1]
    largest = max(C * a1, H * a2, d * C * H * a1)  # Python floats: inf on overflow
    if not largest <= sys.float_info.max:
        raise AttnInputError(
            "the gradient's intermediate products overflow float64: A3 @ Y or E is too large "
            f"(max|A3 @ Y| = {H:.3g}, max|E| = {e:.3g}, against max|A1| = {a1:.3g})"
        )
    return (X, A1, A2, A3, Y, E), dtype


def loss_plan(X, A1, A2, *, eps, kind="chebyshev", memory_budget=None) -> ApproxPlan:
    """The :class:`ApproxPlan` of :func:`approx_attention_loss_grad`: Q = A₁X, K = A₂, τ = 1/d.

    Note AS24 Lemma D.1 bounds ‖A₁X‖∞ (the paper writes ‖A₁ᵀX‖∞, an erratum).

    Raises :class:`attnlib.AttnInputError` as :func:`approx_plan` does, and if X is not
    (d, d) or A2's width differs from A1's.
    """
    A1 = as_float_array("A1", A1)
    d = A1.shape[1]
    X = as_float_array("X", X)
    check_shape("X", X, (d, d), "(d, d)")
    A2 = as_float_array("A2", A2)
    check_cols("A2", A2, d, "A1")
    return _plan(A1 @ X, A2, 1.0 / d, eps, kind, memory_budget)


def _loss_parts(X, A1, A2, A3, Y, E, eps, kind, memory_budget):
    """Shared by the light and the Kronecker forms: factors, h, c̃, r̃ (AS24 §D.1–D.4)."""
    (X, A1, A2, A3, Y, E), dtype = _check_loss_inputs(X, A1, A2, A3, Y, E)
    d = A1.shape[1]
    Q = A1 @ X
    plan = _plan(Q, A2, 1.0 / d, eps, kind, memory_budget)
    U1, V1 = _factors(Q, A2, 1.0 / d, plan)  # f̃ = U₁V₁ᵀ (Lemma D.2)
    h = A3 @ Y
    c = U1 @ (V1.T @ h) - E  # c̃ = f̃h − E
    r = np.einsum("ij,ij->i", c, c + E)  # r̃ = rowsum(c̃ ∘ (c̃ + E)) = rowsum(c̃ ∘ f̃h)
    return A1, A2, U1, V1, h, c, r, d, plan, dtype


def approx_attention_loss_grad(
    X, A1, A2, A3, Y, E, *, eps, kind="chebyshev", memory_budget=None, return_plan=False
):
    """AS24's almost-linear dL/dX (AS24 App. D, errata fixed), memory-light form.

    With f̃ = U₁V₁ᵀ (rank r = C(g+d, d)), h = A₃Y, c̃ = f̃h − E, r̃ = rowsum(c̃ ∘ (c̃ + E))::

        p̃₁ = f̃ ∘ (c̃hᵀ)            q̃ = c̃hᵀ (Lemma D.3 with the erratum fixed: not hc̃ᵀ)
           = Σ_t diag(c̃_{:,t}) f̃ diag(h_{:,t})            [ours: memory-light form]
        p̃₂ = diag(r̃) f̃ = (diag(r̃)U₁) V₁ᵀ                 (Lemma D.5 fixed: U₄ = diag(r̃)U₁)
        G  = (1/d) · A₁ᵀ (p̃₁ − p̃₂) A₂                      (the 1/d restored)
           = (1/d) · [Σ_t (U₁ᵀ(c̃_t ∘ A₁))ᵀ (V₁ᵀ(h_t ∘ A₂)) − (U₁ᵀ(r̃ ∘ A₁))ᵀ (V₁ᵀA₂)]

    The d + 1 terms are batched: U₁ᵀ[c̃ ⊘ A₁, r̃ ∘ A₁] and V₁ᵀ[h ⊘ A₂, −A₂] are two matrix
    products with (d+1)·d columns, so U₁ and V₁ are each read once.
    Shapes: A₁ (n, d), A₂ and A₃ (m, d), E (n, d), X and Y (d, d). Time O((n+m) r d²),
    memory O((n+m)(r + d²)): the Kronecker factors U₁ ⊘ c̃ (n × rd) are never built.
    The degree comes from the logit range of Q = A₁X, K = A₂ at τ = 1/d (:func:`loss_plan`).

    Returns the (d, d) gradient in the inputs' dtype, or ``(G, plan)``. Equal (to rounding)
    to ``A1.T @ approx_attention_backward(A1 @ X, A2, A3 @ Y, c̃, eps=eps, scale=1/d)[0]``.
    Raises :class:`attnlib.AttnInputError` for invalid inputs, a logit range out of reach at
    eps, or a peak memory (:func:`peak_bytes`) over ``memory_budget``.

    Examples
    --------
    >>> import attnlib as al
    >>> from attnlib.polymethod import bounded_loss_inputs
    >>> args = bounded_loss_inputs(64, 4, 1.0, np.random.default_rng(0))
    >>> G = approx_attention_loss_grad(*args, eps=1e-4)
    >>> exact = al.attention_loss_grad(*args)
    >>> bool(np.abs(G - exact).max() < 1e-4 * np.abs(exact).max())
    True
    """
    plan = loss_plan(X, A1, A2, eps=eps, kind=kind, memory_budget=memory_budget)
    _check_peak(plan, "loss_grad", None, memory_budget)
    A1, A2, U1, V1, h, c, r, d, plan, dtype = _loss_parts(
        X, A1, A2, A3, Y, E, eps, kind, memory_budget
    )
    # Σ_t (U₁ᵀ(c̃_t ∘ A₁))ᵀ(V₁ᵀ(h_t ∘ A₂)) − (U₁ᵀ(r̃ ∘ A₁))ᵀ(V₁ᵀA₂), with the d + 1 terms
    # batched into one product per factor: U₁ and V₁ are each read once.
    left = np.concatenate([rowwise_kron(c, A1), r[:, None] * A1], axis=1)  # (n, (d+1)·d)
    right = np.concatenate([rowwise_kron(h, A2), -A2], axis=1)  # (m, (d+1)·d)
    L = (U1.T @ left).reshape(-1, d)  # rows (ρ, t), columns a
    Rt = (V1.T @ right).reshape(-1, d)  # rows (ρ, t), columns b
    G = L.T @ Rt  # Σ over ρ and t
    G /= d
    G = _finite("the gradient", G.astype(dtype, copy=False), "A1, A2, A3, Y or E")
    return (G, plan) if return_plan else G
