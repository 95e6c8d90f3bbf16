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
    top = float(np.abs(X).max()) if X.size else 0.0
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

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number or
    ``steps_per_octave`` is not an integer ≥ 0.

    Examples
    --------
    >>> round_up_to_grid(3.0, 1), round_up_to_grid(4.0, 1), round_up_to_grid(3.0, 0)
    (4.0, 4.0, 3.0)
    """
    R = check_positive_real("R", R)
    steps = check_int("steps_per_octave", steps_per_octave, minimum=0)
    if steps == 0:
        return R
    return 2.0 ** (math.ceil(steps * math.log2(R)) / steps)
