"""The element-wise SIMD routines of the compiled kernels (attnlib._exp): exp without libm,
accurate to about 1 ulp, and the row maximum, exact at every length and position."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from attnlib._exp import _exp_shifted, _row_max


@numba.njit
def _run_exp_shifted(x, shift):
    _exp_shifted(x, shift)


@pytest.mark.parametrize("shift", [0.0, 2.5, -1.0 / 3.0])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-15), (np.float32, 3e-7)])
def test_exp_without_libm_is_accurate(dtype, tol, shift):
    x = np.linspace(-80, 0.5, 4001).astype(dtype)
    x[:3] = [-np.inf, -1e4, -745.0]
    out = x.copy()
    _run_exp_shifted(out, shift)  # in place; a float64 shift is rounded to x's dtype
    t = x - np.asarray(shift, dtype)  # the argument, rounded to the dtype
    ref = np.exp(t.astype(np.float64))
    assert np.all(out[:3] == 0)
    assert np.max(np.abs(out[3:] - ref[3:]) / ref[3:]) <= tol
    # the shift is the subtraction done first: exactly exp(x - shift) with shift 0
    unshifted = t.copy()
    _run_exp_shifted(unshifted, 0.0)
    assert np.array_equal(out, unshifted)


@numba.njit
def _run_row_max(x):
    return _row_max(x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_max_is_the_maximum_at_every_length_and_position(rng, dtype):
    # lengths around the vector loop's step (32 float32, 16 float64 elements) and its tail
    for n in [*range(70), 255, 256, 257]:
        x = rng.standard_normal(n).astype(dtype)
        if n > 3:
            x[rng.integers(0, n, 2)] = -np.inf  # dropped keys
        assert _run_row_max(x) == (x.max() if n else -np.inf)
        for pos in range(n):  # the maximum in every lane, vector and tail position
            one_hot = np.full(n, -np.inf, dtype)
            one_hot[pos] = 2.5
            assert _run_row_max(one_hot) == 2.5
        if n:
            assert _run_row_max(np.full(n, -np.inf, dtype)) == -np.inf
    rows = rng.standard_normal((4, 300)).astype(dtype)
    assert [_run_row_max(r) for r in rows] == list(rows.max(axis=1))  # rows of a 2-d tile
