"""How many gradient calls Gauss–Legendre quadrature needs: an error bound from the logit
range (ours), through the analyticity of f' in a strip (Trefethen, ATAP Thm 19.3).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from .._checks import (
    AttnInputError,
    as_float_array,
    check_cols,
    check_int,
    check_positive_real,
    check_rows,
    check_scale,
)

__all__ = ["gauss_legendre_error_bound", "gauss_legendre_nodes_needed"]


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

    Examples
    --------
    >>> Q = K = V = np.eye(2)
    >>> gauss_legendre_error_bound(Q, K, V, 8) < 1e-12 < gauss_legendre_error_bound(Q, K, V, 2)
    True
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


def gauss_legendre_nodes_needed(Q, K, V, tol, *, scale=None, max_nodes: int = 4096) -> int:
    """The fewest Gauss–Legendre nodes N whose :func:`gauss_legendre_error_bound` is at most
    ``tol``: the number of gradient calls that *guarantees* that accuracy.

    Parameters
    ----------
    Q : (n, d), K : (m, d), V : (m, d_v)
    tol : the error to guarantee, > 0
    scale : τ, default 1/√d
    max_nodes : the largest N tried, 1..4096

    Raises
    ------
    AttnInputError
        as :func:`gauss_legendre_error_bound` does, if ``tol`` is not a positive number, or
        if no N up to ``max_nodes`` guarantees ``tol``.

    Examples
    --------
    >>> gauss_legendre_nodes_needed(np.eye(2), np.eye(2), np.eye(2), 1e-6)
    3
    """
    tol = check_positive_real("tol", tol)
    max_nodes = check_int("max_nodes", max_nodes, maximum=4096)
    for nodes in range(1, max_nodes + 1):
        if gauss_legendre_error_bound(Q, K, V, nodes, scale=scale) <= tol:
            return nodes
    raise AttnInputError(
        f"tol={tol!r} is not guaranteed by {max_nodes} nodes: raise max_nodes or tol"
    )
