"""The range of the logits τ·QKᵀ, bounded without forming them (Cauchy–Schwarz).

Every logit satisfies |τ⟨qᵢ, kⱼ⟩| ≤ τ·‖qᵢ‖₂·‖kⱼ‖₂ ≤ R = τ · maxᵢ‖qᵢ‖₂ · maxⱼ‖kⱼ‖₂, which costs
O((n + m)·d) instead of O(n·m·d). The polynomial method needs R to pick its polynomial, the
deep-stack experiments to pick it per layer, and the compiled kernels to rule out overflow;
all three use the functions here.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import AttnInputError, as_float_array, check_cols, check_int, check_positive_real
from .config import RANGE_STEPS_PER_OCTAVE

__all__ = ["max_row_norm", "logit_range", "round_up_to_grid"]

#: Rows per block of :func:`max_row_norm`, so that its float64 temporaries stay small.
_BLOCK_WORDS = 1 << 16


def max_row_norm(X) -> float:
    """maxᵢ‖Xᵢ‖₂ of a 2-D array, in float64, without overflow or underflow for any finite
    entries: rows are scaled by the largest |entry| first, a block of rows at a time, so the
    temporaries stay small next to X.

    Raises :class:`attnlib.AttnInputError` if X is not a finite 2-D float array.

    Examples
    --------
    >>> max_row_norm(np.array([[3.0, 4.0], [1e300, 0.0]]))
    1e+300
    """
    X = as_float_array("X", X)
    if X.strides[0] == 0:  # a broadcast row: one row holds every norm
        X = X[:1]
    # max and min need no temporary of X's size, unlike np.abs(X).max()
    top = max(float(X.max()), -float(X.min()))
    if top == 0:
        return 0.0
    rows = max(1, _BLOCK_WORDS // X.shape[1])
    best = 0.0
    for i0 in range(0, X.shape[0], rows):
        block = X[i0 : i0 + rows].astype(np.float64) / top
        best = max(best, float(np.einsum("ij,ij->i", block, block).max()))
    return top * math.sqrt(best)


def logit_range(Q, K, *, scale) -> float:
    """R = τ · maxᵢ‖Qᵢ‖₂ · maxⱼ‖Kⱼ‖₂ ≥ max |τ QKᵀ|, in O((n+m)d) time (Cauchy–Schwarz).

    With |Q|∞, |K|∞ ≤ B and τ = 1/d this is at most B² (AS24's bounded-entry regime).

    Raises :class:`attnlib.AttnInputError` if Q (n, d) or K (m, d) is not a finite float
    array, their widths differ, ``scale`` is not positive, or R overflows a float.

    Examples
    --------
    >>> logit_range(np.ones((2, 4)), np.ones((3, 4)), scale=0.25)
    1.0
    """
    Q = as_float_array("Q", Q)
    K = as_float_array("K", K)
    check_cols("K", K, Q.shape[1], "Q")
    tau = check_positive_real("scale", scale)
    with np.errstate(over="ignore"):
        R = tau * max_row_norm(Q) * max_row_norm(K)
    if not math.isfinite(R):
        raise AttnInputError(
            "the logit range scale·max‖Qᵢ‖·max‖Kⱼ‖ overflows a float: Q, K or scale is too large"
        )
    return R


def round_up_to_grid(R, steps_per_octave: int = RANGE_STEPS_PER_OCTAVE) -> float:
    """R rounded *up* to the grid 2^(k/steps_per_octave): a valid (larger) logit range, at
    most 2^(1/steps_per_octave) times R, whose polynomial can be cached and shared by nearby
    inputs. ``steps_per_octave=0`` returns R unchanged.

    The result is the least grid value, as floats compute it, that is >= R (so "at most
    2^(1/steps_per_octave) times R" holds to the rounding of 2^(k/steps_per_octave)): the
    rounded logarithm alone can land one step low (an ulp below R) or high.

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number,
    ``steps_per_octave`` is not an integer from 0 to 2²⁰, or R
    rounded up is beyond the float range.

    Examples
    --------
    >>> round_up_to_grid(3.0, 1), round_up_to_grid(4.0, 1), round_up_to_grid(3.0, 0)
    (4.0, 4.0, 3.0)
    """
    R = check_positive_real("R", R)
    steps = check_int(
        "steps_per_octave", steps_per_octave, minimum=0, maximum=_MAX_STEPS_PER_OCTAVE
    )
    if steps == 0:
        return R

    def grid(k: int) -> float:
        try:
            return 2.0 ** (k / steps)
        except OverflowError:
            raise AttnInputError(
                f"R={R!r} rounded up to the grid 2^(k/{steps}) is beyond the float range"
            ) from None

    k = math.ceil(steps * math.log2(R))
    while grid(k) < R:
        k += 1
    while grid(k - 1) >= R:
        k -= 1
    return grid(k)


#: The finest grid of :func:`round_up_to_grid`: its steps (a factor 1 + 6.6e-7) stay far above
#: the rounding of k / steps_per_octave.
_MAX_STEPS_PER_OCTAVE = 2**20


def _row_norms(X: np.ndarray) -> np.ndarray:
    """‖Xᵢ‖₂ for every row of a finite float array X (..., rows, d), as float64 (..., rows),
    without overflow or underflow: a block of rows at a time, each row scaled by the block's
    largest |entry| first, so the temporaries stay small next to X. Expects a validated
    array (no checks)."""
    flat = X.reshape(-1, X.shape[-1])
    out = np.empty(flat.shape[0])
    rows = max(1, _BLOCK_WORDS // max(1, flat.shape[1]))
    for i0 in range(0, flat.shape[0], rows):
        block = flat[i0 : i0 + rows].astype(np.float64)
        top = float(np.abs(block).max()) if block.size else 0.0
        if top == 0:
            out[i0 : i0 + rows] = 0.0
            continue
        block /= top
        # a norm beyond the float range is inf, which the callers read as "does not fit"
        with np.errstate(over="ignore"):
            out[i0 : i0 + rows] = top * np.sqrt(np.einsum("ij,ij->i", block, block))
    return out.reshape(X.shape[:-1])


def _unit_roundoff(dtype) -> float:
    return float(np.finfo(dtype).eps) / 2


def _gamma(k: int, u: float) -> float:
    """γ_k = k·u / (1 − k·u), the bound on the relative error of k rounded operations
    (Higham, Accuracy and Stability of Numerical Algorithms, Lemma 3.1); inf if k·u ≥ 1."""
    return k * u / (1 - k * u) if k * u < 1 else math.inf


def _lse_slack_terms(dtype, d: int, m: int, scale: float, kmax):
    """The terms of :func:`_lse_slack`, a·‖q_i‖ + b·|lse_i| + c, for logits of width d over
    m keys in ``dtype``: (a, b, c), a = 2γ_{d+2}·τ·kmax for kmax = max_j‖k_j‖ (a float or
    an array, one per key/value head)."""
    u = _unit_roundoff(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        a = 2 * _gamma(d + 2, u) * float(scale) * np.asarray(kmax, dtype=np.float64)
    return a, 2 * u, 2 * _gamma(m, u) + 4 * u


def _lse_slack(Q: np.ndarray, K: np.ndarray, lse: np.ndarray, scale: float) -> np.ndarray:
    """How far a recomputed logit may exceed a *correct* log-sum-exp through rounding alone,
    row by row: the backward passes refuse an lse that some logit of its row exceeds by more
    (P = exp(τ·q_i·k_j − lse_i) ≤ 1 holds exactly for the true lse).

    Q is (n, d), K (m, d), lse (n,), validated, in one float dtype with unit roundoff u;
    returns float64 (n,). The bound adds three sources, each at its worst:

    - the logit τ·q_i·k_j computed twice (once for lse, once now), each time with an error of
      at most γ_{d+2}·τ·‖q_i‖·max_j‖k_j‖ (a dot product of length d, then the scale);
    - lse_i rounded to the dtype: u·|lse_i|, twice over for the shift and log;
    - the row sum inside lse_i = max + log Σ exp(·), whose relative error is at most γ_m for
      any order of summation of m terms, so its log moves by at most γ_m (plus rounding).

    A row with lse_i = −inf (fully masked) gets the first and last terms only: any logit of
    it that is kept (finite) then exceeds lse_i by an infinite amount. The compiled kernels
    compute the same bound row by row from :func:`_lse_slack_terms`.
    """
    m, d = K.shape
    terms = _lse_slack_terms(Q.dtype, d, m, scale, _row_norms(K).max(initial=0.0))
    return _lse_slack_rows(_row_norms(Q), lse, terms)


def _lse_slack_rows(q_norms: np.ndarray, lse: np.ndarray, terms) -> np.ndarray:
    """:func:`_lse_slack` for a block of rows, from their norms ‖q_i‖ (float64), their lse and
    the terms (a, b, c) of :func:`_lse_slack_terms`: a·‖q_i‖ + b·|lse_i| + c, with |lse_i|
    taken as 0 where lse_i = −inf. The machine's schedules compute it from the rows of Q
    they hold in fast memory."""
    a, b, c = terms
    size = np.where(np.isneginf(lse), 0.0, np.abs(lse, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        return a * q_norms + b * size + c


def _probabilities_from_lse(S: np.ndarray, lse: np.ndarray, slack: np.ndarray, *, first_row=0):
    """P = min(exp(S − lse), 1) for a block of logits S (rows, cols), computed in place of S
    and returned: the backward passes' recomputation of the softmax from the forward pass's
    row log-sum-exp (FA2 Alg. 2, line 11). ``lse`` and ``slack`` (:func:`_lse_slack`) are the
    block's rows; masked logits are −inf and give 0, and so does every entry of a fully
    masked row (lse = −inf).

    A correct lse is at least every logit of its row, so P ≤ 1. A logit above lse by more
    than the row's slack means that lse is not the forward pass's for these inputs, and
    exp(S − lse) would grow without bound: refused, naming the row (``first_row`` + its
    index in the block). Within the slack, entries above 1 are set to 1, the true value to
    that rounding.

    Raises
    ------
    AttnInputError
        if some logit exceeds its row's lse by more than the slack (also a kept logit in a
        row whose lse is −inf).
    """
    top = S.max(axis=1, initial=-np.inf)
    with np.errstate(invalid="ignore"):
        above = top - lse  # NaN where a fully masked row has lse = −inf: consistent
    bad = np.flatnonzero(above > slack)
    if bad.size:
        raise AttnInputError(
            "lse is not the log-sum-exp of the logits scale * Q @ K.T: at row "
            f"{first_row + int(bad[0])} a logit exceeds it by more than rounding allows "
            "(P = exp(logit - lse) > 1); pass the lse that the forward pass returned for "
            "these Q, K, scale and mask"
        )
    dead = np.isneginf(lse)
    shift = np.where(dead, 0, lse).astype(S.dtype, copy=False)
    with np.errstate(under="ignore", over="ignore"):
        np.subtract(S, shift[:, None], out=S)
        np.exp(S, out=S)
    if (above > 0).any():
        np.minimum(S, 1, out=S)
    if dead.any():
        S[dead] = 0
    return S
