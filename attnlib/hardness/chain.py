"""The whole chain Gap-ANN → attention → gradient as one decision procedure (ours).

A Gap-ANN instance (A, B, t, ε) becomes an attention instance by
:func:`~attnlib.hardness.gap_ann_to_attention` at AS24's scale τ = 1/d (d = 2m, one value
column), f(1) = ‖Att‖²_F is recovered from N gradient calls by
:func:`~attnlib.hardness.attention_from_gradient`, and the answer is YES iff the estimate is at
least 1/4, the square of the reduction's mass threshold 1/2.

Why an error ε_grad per gradient entry costs at most 2d·ε_grad in f(1): the estimate is
f(0) + Σ_k w_k·2·tr(G̃_k) with Gauss–Legendre weights w_k > 0 summing to 1, and a (d, d)
error matrix with entries at most ε_grad changes each trace by at most d·ε_grad. A shift of
every diagonal entry by the same ε_grad (:func:`shifted_gradient`) moves the estimate by
exactly 2d·ε_grad, so the tolerance cannot be improved.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import check_int, check_real
from .gap_ann import _check_gap
from .gradient import _check_grad_fn, _returned_gradient, attention_from_gradient
from .ov import _as_bool_pair
from .quadrature import gauss_legendre_error_bound
from .to_attention import _instance_size, gap_ann_to_attention

__all__ = ["gap_ann_by_gradient", "gradient_noise_tolerance", "shifted_gradient"]

#: YES iff the estimate of f(1) = ‖Att‖²_F is at least the square of the mass threshold 1/2
F_THRESHOLD = 0.25


def _instance(A, B, t, eps):
    """The attention instance of a Gap-ANN instance at τ = 1/(2m): (Q, K, V, τ, n, m)."""
    A, B = _as_bool_pair(A, B)
    m = A.shape[1]
    t, eps = _check_gap(t, eps, m)
    tau = 1 / (2 * m)
    Q, K, V, _ = gap_ann_to_attention(A, B, t, eps, scale=tau)
    return Q, K, V, tau, _instance_size(A.shape[0], B.shape[0]), m


def gap_ann_by_gradient(A, B, t, eps, grad_fn, *, nodes: int = 32) -> tuple[bool, float]:
    """Decide a Gap-ANN instance from ``nodes`` calls of a gradient oracle (ours).

    Parameters
    ----------
    A, B : bool or 0/1, (n_a, m) and (n_b, m)
    t, eps : the promise: YES if some pair is at Hamming distance ≤ t, NO if every pair is
        at distance ≥ (1+ε)t, with (1+ε)t ≤ m
    grad_fn : callable with the signature of attnlib.attention_loss_grad, returning a
        (2m, 2m) array; exact, or approximate (:func:`shifted_gradient`,
        :func:`~attnlib.hardness.noisy_gradient`)
    nodes : Gauss–Legendre nodes N, 2..4096

    Returns
    -------
    (yes, estimate) : the answer, and the estimate of f(1) = ‖Att‖²_F it thresholds at 1/4

    Raises
    ------
    AttnInputError
        as :func:`~attnlib.hardness.gap_ann_to_attention` and
        :func:`~attnlib.hardness.attention_from_gradient` do, and if ``nodes`` is below 2.

    Examples
    --------
    >>> import attnlib
    >>> from attnlib.hardness import planted_gap_ann
    >>> A, B, pair = planted_gap_ann(8, 36, 6, 1.0, planted=True, seed=0)
    >>> gap_ann_by_gradient(A, B, 6, 1.0, attnlib.attention_loss_grad)[0]
    True
    """
    nodes = check_int("nodes", nodes, minimum=2, maximum=4096)
    Q, K, V, tau, _, _ = _instance(A, B, t, eps)
    estimate = attention_from_gradient(Q, K, V, grad_fn, nodes=nodes, scale=tau)
    return estimate >= F_THRESHOLD, estimate


def gradient_noise_tolerance(A, B, t, eps, *, nodes: int = 32) -> float:
    """The gradient error ε_grad under which :func:`gap_ann_by_gradient` is guaranteed right.

    With n = max(n_a, n_b, 3), a YES instance has f(1) > (n e²/(1 + n e²))² and a NO
    instance f(1) < n·(e^{-2}/n²)² ≤ e^{-4}/n³ (the margins of the reduction). The estimate
    errs by at most δ_N + 2d·ε_grad, δ_N the Gauss–Legendre bound at N nodes and d = 2m, so
    the answer is right whenever

        ε_grad < (1/4 − e^{-4}/n³ − δ_N) / (2d)

    (the NO side is the tighter one). That right-hand side is returned; a value ≤ 0 means
    that N nodes guarantee nothing. It uses only the promise, not how the instance was made.

    Raises
    ------
    AttnInputError
        as :func:`gap_ann_by_gradient` does.

    Examples
    --------
    >>> from attnlib.hardness import planted_gap_ann
    >>> A, B, _ = planted_gap_ann(8, 36, 6, 1.0, planted=False, seed=0)
    >>> 0 < gradient_noise_tolerance(A, B, 6, 1.0, nodes=64) < 1 / (8 * 36)
    True
    """
    nodes = check_int("nodes", nodes, minimum=2, maximum=4096)
    Q, K, V, tau, n, m = _instance(A, B, t, eps)
    delta = gauss_legendre_error_bound(Q, K, V, nodes, scale=tau)
    return (F_THRESHOLD - math.exp(-4) / n**3 - delta) / (2 * (2 * m))


def shifted_gradient(grad_fn, shift):
    """``grad_fn`` with ``shift`` added to every diagonal entry: G + shift·I.

    Its entrywise error is exactly |shift|, and it moves each trace, hence the estimate of
    :func:`gap_ann_by_gradient`, by exactly 2d·shift: the worst error of that size.

    Raises :class:`AttnInputError` if ``grad_fn`` is not callable or ``shift`` is not a
    finite number; the returned function raises it if ``grad_fn`` returns no finite square
    real array.

    Examples
    --------
    >>> shifted_gradient(lambda *args: np.zeros((2, 2)), 0.5)().tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    _check_grad_fn(grad_fn)
    shift = check_real("shift", shift)

    def square(G):
        return G.ndim == 2 and G.shape[0] == G.shape[1]

    def shifted(*args):
        G = _returned_gradient(grad_fn(*args), "finite square", square)
        return G + shift * np.eye(G.shape[0])

    return shifted
