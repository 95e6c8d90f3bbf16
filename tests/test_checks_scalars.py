"""Scalar arguments (attnlib._checks.scalars): float dtypes by name, type or dtype, other
dtypes refused, and real numbers that may be infinite when asked."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib._checks import (
    check_float_dtype,
    check_real,
)


@pytest.mark.parametrize(
    "value, expected",
    [("float32", np.float32), ("f8", np.float64), (float, np.float64), (np.float32, np.float32)],
)
def test_float_dtypes_by_name_type_or_dtype(value, expected):
    assert check_float_dtype("dtype", value) == np.dtype(expected)
    assert check_float_dtype("dtype", np.dtype(expected)) == np.dtype(expected)


@pytest.mark.parametrize("value", [None, "float16", "int8", np.int64, 3, "nope", int, [1]])
def test_other_dtypes_are_refused(value):
    # np.dtype(None) is float64: None must not slip through as the default
    with pytest.raises(AttnInputError, match=r"^dtype must be 'float32' or 'float64'"):
        check_float_dtype("dtype", value)


def test_real_numbers_that_may_be_infinite():
    assert math.isnan(check_real("v", math.nan, finite=False))
    assert check_real("v", -math.inf, finite=False) == -math.inf
    for value in (10**400, True, "1", 1j):
        with pytest.raises(AttnInputError, match=r"^v must be a real number, got"):
            check_real("v", value, finite=False)
    with pytest.raises(AttnInputError, match=r"^v must be a finite real number"):
        check_real("v", math.inf)
