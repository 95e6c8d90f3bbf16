"""Symmetric int8 rounding of a head's Q and K, with the usual percentile clipping.

The evidence chapter asks whether quantisation makes the entry bound B small: it rounds the
Q and K of real heads with :func:`int8_round` and measures B and the attention error.
"""

from __future__ import annotations

import numpy as np

from .._checks import as_float_array, check_memory, check_real

__all__ = ["int8_round"]


def int8_round(X, clip_quantile: float = 1.0) -> np.ndarray:
    """X rounded to the int8 grid, returned in X's float dtype: X̂ = s·clip(round(X/s), ±127).

    The step is s = c/127, with c = max|X| for ``clip_quantile=1`` (plain rounding: the
    largest entry is a grid point, so max|X̂| = max|X| up to rounding) or else the
    ``clip_quantile`` quantile of |X| (the usual calibration: entries beyond ±c are clipped to
    ±c). An X with c = 0 rounds to zeros.

    Raises :class:`attnlib.AttnInputError` if X is not a finite float array,
    ``clip_quantile`` is not in (0, 1], or its copies would not fit in memory.

    Examples
    --------
    >>> int8_round(np.array([0.5, -1.27, 0.004])).tolist()
    [0.5, -1.27, 0.0]
    >>> float(np.abs(int8_round(np.array([1.0, 2.0, 100.0]), 0.5)).max())
    2.0
    """
    X = as_float_array("X", X, ndim=None)
    q = check_real(
        "clip_quantile",
        clip_quantile,
        minimum=0.0,
        maximum=1.0,
        open_minimum=True,
        expected="a real number in (0, 1]",
    )
    # |X| (and the quantile's partitioned copy), then X/s, its rounding and the result
    check_memory("int8_round's copies of X", 4 * X.size * X.itemsize, culprits="X")
    c = np.abs(X).max() if q >= 1 else np.quantile(np.abs(X), q)
    if c == 0:
        return np.zeros_like(X)
    s = c / 127.0
    if s >= np.finfo(X.dtype).tiny:
        return np.clip(np.round(X / s), -127, 127) * s
    # A subnormal step loses its digits (or is 0): scale by 127/c and back in the other order.
    return (np.clip(np.round(X * 127.0 / c), -127, 127) * c / 127.0).astype(X.dtype, copy=False)
