"""How many gradient calls Gauss–Legendre quadrature needs: an error bound from the logit
range (ours), through the analyticity of f' in a strip (Trefethen, ATAP Thm 19.3).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from .._checks import (
    AttnInputError,
    check_int,
    check_memory,
    check_positive_real,
    check_qkv,
    check_scale,
    max_abs,
)

__all__ = ["gauss_legendre_error_bound", "gauss_legendre_nodes_needed"]


def gauss_legendre_error_bound(Q, K, V, nodes, *, scale=None, grid: int = 256) -> float:
    """A bound on the error of :func:`attention_from_gradient` with ``nodes`` nodes (ours).

    With S = τQKᵀ, row widths w_i = max_j S_ij − min_j S_ij, W = max_i w_i and
    V_max = max|V|: f'(λ) extends analytically to the strip |Im λ| < π/W, and on
    |Im λ| ≤ y < π/W, with c = cos(yW/2),

        |f'(λ)| ≤ Φ(y) = d_v · V_max² · (Σ_i w_i) · (1 + 1/c) / c².

    The strip |Im λ| ≤ y holds the Bernstein ellipse of [0, 1] with parameter
    ρ = 2y + √(1 + 4y²). Trefethen's ATAP Thm 19.3 bounds the (k + 1)-point Gauss rule by
    (64/15)·M·ρ^{-2k}/(ρ² − 1) for k ≥ 1, so the N-node rule on [0, 1] (k = N − 1, N ≥ 2)
    errs by at most (32/15)·Φ(y)·ρ^{-2(N-1)}/(ρ² − 1), halved for the interval [0, 1].
    The error falls geometrically in N/W, and W ≤ 2R for the logit range R. The bound
    is minimised over y on ``grid`` points of (0, π/W). It holds in exact arithmetic; rounding
    adds about 1e-16 · N · max|f'| on top.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v)
    nodes : number of Gauss–Legendre nodes N, 2..4096 (the theorem has none for N = 1)
    scale : τ, default 1/√d
    grid : number of strip widths y tried, 1..10⁵

    Returns
    -------
    float, the bound on |f(1) − estimate| (0.0 when every row of S is constant or V = 0:
    f' ≡ 0; a bound below the smallest positive float is that float)

    Raises
    ------
    AttnInputError
        if an array is not a finite 2-D real array, the shapes disagree, ``nodes`` or ``grid``
        is not an integer in range, ``scale`` is not a positive finite number, the logits
        would not fit in memory or overflow, or the bound is beyond the float range.

    Examples
    --------
    >>> Q = K = V = np.eye(2)
    >>> gauss_legendre_error_bound(Q, K, V, 8) < 1e-12 < gauss_legendre_error_bound(Q, K, V, 2)
    True
    """
    nodes = check_int("nodes", nodes, minimum=2, maximum=4096)
    terms = _bound_terms(Q, K, V, scale, grid)
    if terms is None:
        return 0.0
    return _bound(terms, nodes)


def _bound_terms(Q, K, V, scale, grid):
    """The parts of :func:`gauss_legendre_error_bound` that do not depend on N, on the grid
    of strip widths: ``(log_a, log_rho, W, vmax)`` with the bound at N nodes
    exp(min over the grid of log_a − 2(N − 1)·log_rho), or None when the bound is 0."""
    Q, K, V = check_qkv(Q, K, V)
    (n, d), m = Q.shape, K.shape[0]
    grid = check_int("grid", grid, maximum=100_000)
    tau = check_scale(scale, d)
    # float64 copies of Q, K, V; the logits S and one temporary of their size
    check_memory(
        "the logits' row widths", 8 * ((n + m) * d + V.size) + 16 * n * m, culprits="Q or K"
    )
    with np.errstate(over="ignore", invalid="ignore"):
        S = tau * (Q.astype(np.float64) @ K.astype(np.float64).T)
        widths = S.max(axis=1) - S.min(axis=1)
    if not np.isfinite(widths).all():
        raise AttnInputError(
            "the logits scale * Q @ K.T overflow float64: Q, K or scale is too large"
        )
    W = float(widths.max())
    vmax = max_abs(V)
    if W == 0.0 or vmax == 0.0:
        return None
    # y = θπ/W with θ in (0, 1): a wider strip gives a larger ρ but a smaller c. W is taken
    # at least 1e-150 here so that 4y² stays finite; a larger W only shrinks the strip and
    # lowers c, so the bound still holds.
    theta = (np.arange(grid) + 0.5) / grid
    y = theta * math.pi / max(W, 1e-150)
    c = np.cos(theta * math.pi / 2)
    # ρ − 1 = 2y + (√(1 + 4y²) − 1), the second term written without cancellation, so that
    # log ρ and log(ρ² − 1) = log(ρ − 1) + log(ρ + 1) stay accurate when yW is tiny
    rho_m1 = 2 * y + 4 * y**2 / (np.sqrt(1 + 4 * y**2) + 1)
    log_rho = np.log1p(rho_m1)
    # In logs: Φ(y) overflows for large V or many rows, and ρ^(-2(N-1)) underflows long before
    # the bound stops mattering. Σ wᵢ = W·Σ(wᵢ/W), so that the sum cannot overflow.
    log_phi = (
        math.log(V.shape[1])
        + 2 * math.log(vmax)
        + math.log(W)
        + math.log(float((widths / W).sum()))
        + np.log((1 + 1 / c) / c**2)
    )
    log_a = math.log(32 / 15) + log_phi - np.log(rho_m1) - np.log(rho_m1 + 2)
    return log_a, log_rho, W, vmax


def _bound(terms, nodes: int) -> float:
    """The bound at ``nodes`` ≥ 2 nodes from :func:`_bound_terms`; refused beyond the float
    range, and rounded up to the smallest positive float below it (it stays a bound)."""
    log_a, log_rho, W, vmax = terms
    # N nodes are Trefethen's n + 1 points with n = N − 1: the exponent is 2(N − 1)
    best = float((log_a - 2 * (nodes - 1) * log_rho).min())
    if best > math.log(sys.float_info.max):
        raise AttnInputError(
            "the bound overflows a float: V is too large or the logits' rows too wide "
            f"(max |V| = {vmax:.3g}, widest row of scale * Q @ K.T: {W:.3g})"
        )
    return max(math.exp(best), math.ulp(0.0))


def gauss_legendre_nodes_needed(Q, K, V, tol, *, scale=None, max_nodes: int = 4096) -> int:
    """The fewest Gauss–Legendre nodes N whose :func:`gauss_legendre_error_bound` is at most
    ``tol``: the number of gradient calls that *guarantees* that accuracy.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v)
    tol : the error to guarantee, > 0
    scale : τ, default 1/√d
    max_nodes : the largest N tried, 2..4096

    Returns
    -------
    int, N ≥ 2 (2 also when the bound is 0: the theorem starts at two nodes)

    Raises
    ------
    AttnInputError
        as :func:`gauss_legendre_error_bound` does, if ``tol`` is not a positive number, or
        if no N up to ``max_nodes`` guarantees ``tol``.

    Examples
    --------
    >>> gauss_legendre_nodes_needed(np.eye(2), np.eye(2), np.eye(2), 1e-6)
    4
    """
    tol = check_positive_real("tol", tol)
    max_nodes = check_int("max_nodes", max_nodes, minimum=2, maximum=4096)
    terms = _bound_terms(Q, K, V, scale, 256)  # the logits are formed once, not per N
    if terms is None:
        return 2
    for nodes in range(2, max_nodes + 1):
        if _bound(terms, nodes) <= tol:
            return nodes
    raise AttnInputError(
        f"tol={tol!r} is not guaranteed by {max_nodes} nodes: raise max_nodes or tol"
    )
