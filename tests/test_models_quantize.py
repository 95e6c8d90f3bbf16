"""int8 rounding of a head's Q and K: the grid, the step, clipping, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.models import int8_round


def test_plain_rounding_keeps_the_largest_entry_and_lands_on_the_grid(rng):
    X = rng.normal(size=(64, 32))
    Xh = int8_round(X)
    s = np.abs(X).max() / 127
    assert np.isclose(np.abs(Xh).max(), np.abs(X).max(), rtol=1e-15, atol=0)
    steps = Xh / s
    assert np.allclose(steps, np.round(steps), atol=1e-9) and np.abs(steps).max() <= 127 + 1e-9
    assert np.abs(Xh - X).max() <= s / 2 * (1 + 1e-12)  # round to nearest


def test_clipping_at_a_quantile_caps_the_entries_there(rng):
    X = rng.normal(size=(64, 32))
    c = np.quantile(np.abs(X), 0.99)
    Xh = int8_round(X, 0.99)
    assert np.isclose(np.abs(Xh).max(), c, rtol=1e-15, atol=0)
    inside = np.abs(X) <= c
    assert np.abs(Xh - X)[inside].max() <= c / 127 / 2 * (1 + 1e-12)
    assert int8_round(np.zeros((2, 3))).tolist() == [[0.0] * 3] * 2
    assert int8_round(X.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize(
    "X, q, match",
    [
        (np.ones((2, 2), dtype=int), 1.0, "X must have a float32 or float64 dtype"),
        (np.array([[np.nan]]), 1.0, "X must be finite"),
        (np.ones((2, 2)), 0.0, r"clip_quantile must be a real number in \(0, 1\]"),
        (np.ones((2, 2)), 1.5, r"clip_quantile must be a real number in \(0, 1\]"),
        (np.ones((2, 2)), "max", r"clip_quantile must be a real number in \(0, 1\]"),
    ],
)
def test_int8_round_bad_input(X, q, match):
    with pytest.raises(AttnInputError, match=match):
        int8_round(X, q)


def test_subnormal_steps_round_without_nan():
    """c/127 below the smallest normal float loses its digits (or is 0): the step is taken in
    the other order there, where X/s gave NaN."""
    X = np.array([5e-324, -5e-324, 0.0])
    assert np.array_equal(int8_round(X), X)
    Xh = int8_round(np.array([1e-310, 3e-311]))
    assert np.isfinite(Xh).all() and Xh[0] == 1e-310
    f32 = int8_round(np.array([1e-44, -1e-45], np.float32))
    assert f32.dtype == np.float32 and np.isfinite(f32).all() and f32[0] == np.float32(1e-44)
