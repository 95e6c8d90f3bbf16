"""AS24's Appendix D taken literally: the gradient with the row-wise Kronecker factors built.

A teaching variant, kept to check the algorithm as the paper prints it. It builds
p̃₁ = (U₁ ⊘ c̃)(V₁ ⊘ h)ᵀ with factors of width r·d, so it needs O((n+m)·r·d) memory where
:func:`attnlib.polymethod.approx_attention_loss_grad` (the memory-light form) needs
O((n+m)·(r + d²)); the two agree to rounding. Its switches reproduce the two lemmas as printed
(Chapter 7 runs them):

* Lemma D.3 writes q̃ = h c̃ᵀ where Definition C.3 has q = c hᵀ: p̃₁ = (U₁ ⊘ h)(V₁ ⊘ c̃)ᵀ;
* Lemma D.5 scales the columns, U₄ = U₁, V₄ = diag(r̃)V₁, i.e. p̃₂ = f̃ diag(r̃), where the
  gradient needs the rows, diag(r̃) f̃.
"""

from __future__ import annotations

import numpy as np

from .._checks import AttnInputError, check_choice, check_memory
from .approx import _budget, _finite, _loss_parts, loss_plan, peak_bytes
from .features import rowwise_kron

__all__ = ["kronecker_loss_grad"]

#: The two readings of Lemmas D.3 and D.5: the corrected one and the one the paper prints.
_LEMMA_VERSIONS = ("fixed", "as_printed")


def kronecker_loss_grad(
    X,
    A1,
    A2,
    A3,
    Y,
    E,
    *,
    eps,
    lemma_d3="fixed",
    lemma_d5="fixed",
    kind="chebyshev",
    memory_budget=None,
):
    """AS24's dL/dX as Appendix D prints it, with the Kronecker factors built (a teaching
    variant of :func:`attnlib.polymethod.approx_attention_loss_grad`).

    p̃₁ = (U₁ ⊘ c̃)(V₁ ⊘ h)ᵀ (rank r·d) and p̃₂ = U₄V₄ᵀ with U₄ = diag(r̃)U₁, V₄ = V₁; then
    G = (1/d)·[(A₁ᵀ(U₁ ⊘ c̃))((V₁ ⊘ h)ᵀA₂) − (A₁ᵀU₄)(V₄ᵀA₂)].

    Parameters
    ----------
    X, A1, A2, A3, Y, E, eps, kind, memory_budget
        as in :func:`~attnlib.polymethod.approx_attention_loss_grad`
    lemma_d3, lemma_d5
        ``"fixed"`` (default, the corrected lemma) or ``"as_printed"`` (the paper's text:
        q̃ = hc̃ᵀ, resp. p̃₂ = f̃ diag(r̃)). The printed versions only type-check when m = n.

    Returns the (d, d) gradient in the inputs' dtype. Time O((n+m)·r·d²), memory
    O((n+m)·r·d).

    Raises
    ------
    AttnInputError
        as :func:`~attnlib.polymethod.approx_attention_loss_grad`; for a lemma version other
        than "fixed" and "as_printed"; for an as-printed lemma with m ≠ n; and if the
        Kronecker factors would exceed ``memory_budget``.

    Examples
    --------
    >>> import numpy as np
    >>> import attnlib as al
    >>> from attnlib.polymethod import bounded_loss_inputs
    >>> args = bounded_loss_inputs(12, 3, 1.0, np.random.default_rng(0))
    >>> exact = al.attention_loss_grad(*args)
    >>> fixed = kronecker_loss_grad(*args, eps=1e-8)
    >>> printed = kronecker_loss_grad(*args, eps=1e-8, lemma_d3="as_printed")
    >>> top = np.abs(exact).max()
    >>> bool(np.abs(fixed - exact).max() < 1e-6 * top), bool(np.abs(printed - exact).max() > top)
    (True, True)
    """
    d3 = check_choice("lemma_d3", lemma_d3, _LEMMA_VERSIONS)
    d5 = check_choice("lemma_d5", lemma_d5, _LEMMA_VERSIONS)
    plan = loss_plan(X, A1, A2, eps=eps, kind=kind, memory_budget=memory_budget)
    if "as_printed" in (d3, d5) and plan.n != plan.m:
        raise AttnInputError(
            f"the as-printed AS24 lemmas only type-check when m = n, got n={plan.n}, m={plan.m}"
        )
    kron = 8 * (plan.n + plan.m) * plan.rank * (plan.d + 1)  # U₁ ⊘ c̃, V₁ ⊘ h and U₄
    check_memory(
        "kronecker_loss_grad's Kronecker factors",
        peak_bytes(plan, "loss_grad") + kron,
        budget=_budget(memory_budget),
        culprits="the rank (eps, the entries of A1, X, A2) or n",
    )
    A1, A2, U1, V1, h, c, r, d, _, dtype = _loss_parts(
        X, A1, A2, A3, Y, E, eps, kind, memory_budget
    )
    if d3 == "fixed":
        L3, R3 = rowwise_kron(U1, c), rowwise_kron(V1, h)  # f̃ ∘ (c̃hᵀ)
    else:
        L3, R3 = rowwise_kron(U1, h), rowwise_kron(V1, c)  # f̃ ∘ (hc̃ᵀ)
    if d5 == "fixed":
        U4, V4 = r[:, None] * U1, V1  # diag(r̃) f̃
    else:
        U4, V4 = U1, r[:, None] * V1  # f̃ diag(r̃)
    with np.errstate(over="ignore", invalid="ignore"):
        G = (A1.T @ L3) @ (R3.T @ A2) - (A1.T @ U4) @ (V4.T @ A2)
    return _finite("the gradient", (G / d).astype(dtype, copy=False), "A1, A2, A3, Y or E")
