"""Array arguments (attnlib._checks.arrays): finiteness checked in bounded memory, block by
block in C order over each distinct memory location, the first bad entry named; conversions
within the memory limit; boolean masks; 1-D series of real numbers (length, positivity,
missing points); and inputs returned as they were."""

from __future__ import annotations

import itertools
import math
import tracemalloc

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib._checks import (
    as_float_array,
    as_real_array,
    as_series,
    check_mask,
)
from attnlib._checks.arrays import _blocks, _distinct_view


def test_distinct_view_keeps_each_memory_location_once():
    row = np.arange(4.0)
    view = np.broadcast_to(row, (10**9, 4))
    assert _distinct_view(view).shape == (1, 4)
    assert _distinct_view(np.broadcast_to(7.0, (3, 5))).shape == (1, 1)
    plain = np.ones((3, 4))[:, ::2]
    assert _distinct_view(plain).shape == plain.shape


@pytest.mark.parametrize("shape", [(7,), (5, 3), (4, 3, 6), (2, 1, 3, 5)])
def test_blocks_cover_every_entry_once_in_c_order(shape):
    a = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    for limit in (1, 2, 5, 13, 10**6):
        seen = []
        for start, block in _blocks(a, limit):
            assert block.size <= max(limit, 1) or block.ndim == 1 and block.size == 1
            seen.extend(block.ravel().tolist())
            assert block.ravel()[0] == a[start[:-1]][start[-1]].ravel()[0]
        assert seen == list(range(a.size))


def test_the_first_bad_entry_is_reported_in_c_order():
    rng = np.random.default_rng(3)
    for shape in [(6,), (4, 5), (3, 4, 5)]:
        for _ in range(20):
            a = rng.standard_normal(shape)
            bad = rng.random(shape) < 0.1
            a[bad] = rng.choice([np.nan, np.inf, -np.inf], size=bad.sum())
            if not bad.any():
                continue
            first = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            with pytest.raises(AttnInputError, match=rf"at index {re_tuple(first)}$"):
                as_float_array("A", a, ndim=None)
            # a transposed view: the index is the view's own
            t = a.T
            first_t = tuple(int(i) for i in np.argwhere(~np.isfinite(t))[0])
            with pytest.raises(AttnInputError, match=rf"at index {re_tuple(first_t)}$"):
                as_float_array("A", t, ndim=None)


def re_tuple(index) -> str:
    return "\\(" + ", ".join(map(str, index)) + ("," if len(index) == 1 else "") + "\\)"


def test_finiteness_of_a_broadcast_view_takes_no_memory_of_its_size():
    view = np.broadcast_to(np.array([1.0, 2.0, np.inf]), (10**9, 3))
    tracemalloc.start()
    try:
        with pytest.raises(AttnInputError, match=r"^Q must be finite .* inf at index \(0, 2\)$"):
            as_float_array("Q", view)
        assert as_float_array("Q", view[:, :2]).shape == (10**9, 2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_minus_inf_alone_is_allowed_when_asked():
    lse = np.array([0.0, -np.inf, 1.0])
    assert as_float_array("lse", lse, ndim=1, allow_neg_inf=True) is lse
    for bad in (np.nan, np.inf):
        with pytest.raises(AttnInputError, match=r"^lse must be finite or -inf \(no NaN or \+inf"):
            as_float_array("lse", np.array([0.0, -np.inf, bad]), ndim=1, allow_neg_inf=True)
    with pytest.raises(AttnInputError, match=r"found -inf at index \(1,\)"):
        as_float_array("lse", lse, ndim=1)


def test_integer_arrays_are_converted_only_within_the_memory_limit():
    assert as_real_array("x", [1, 2, 4]).dtype == np.float64
    huge = np.broadcast_to(np.int8(1), (10**10,))
    with pytest.raises(AttnInputError, match=r"x converted to float64 .*; x is too large$"):
        as_real_array("x", huge)


def test_a_ragged_mask_is_refused_by_name():
    for ragged in ([[True, False], [True]], [[[True]], [True]]):
        with pytest.raises(AttnInputError, match=r"^mask must be convertible"):
            check_mask(ragged, 2, 2)
    keep = check_mask([[True, False], [False, True]], 2, 2)
    assert keep.dtype == np.bool_ and keep.tolist() == [[True, False], [False, True]]


def test_every_check_leaves_its_input_as_it_was():
    a = np.arange(12.0).reshape(3, 4)
    a.flags.writeable = False
    for name, call in itertools.product(["A"], [as_float_array, as_real_array]):
        assert call(name, a, ndim=2) is a


def test_a_series_takes_ints_of_any_size_that_fit_a_float():
    assert as_series("ns", [64, 2**70]).tolist() == [64.0, float(2**70)]
    assert as_series("x", (1, 2.5)).dtype == np.float64
    assert as_series("x", np.float32([1, 2])).dtype == np.float32
    with pytest.raises(AttnInputError, match=r"^ranks must hold real numbers within the float"):
        as_series("ranks", [1, 10**400])


@pytest.mark.parametrize(
    "values, match",
    [
        ([True, False], r"^x must have a float32 or float64 dtype, got boolean"),
        (["1", "2"], r"^x must have a float32 or float64 dtype"),
        ([1, None], r"^x must have a float32 or float64 dtype, got object"),
        ([1 + 2j], r"^x must have a float32 or float64 dtype, got complex"),
        (5.0, r"^x must be 1-dimensional"),
        ([[1.0, 2.0]], r"^x must be 1-dimensional"),
        ([], r"^x must be non-empty"),
        ([1.0, np.nan], r"^x must be finite \(no NaN or inf\), found nan at index \(1,\)$"),
        ([1.0, np.inf], r"^x must be finite"),
    ],
)
def test_a_series_refuses_what_is_not_real_numbers(values, match):
    with pytest.raises(AttnInputError, match=match):
        as_series("x", values)


def test_a_series_checks_its_length_positivity_and_missing_points():
    assert as_series("x", [1.0, 2.0], size=2, like="ns").size == 2
    with pytest.raises(AttnInputError, match=r"^flash must have 3 entries like ns, got 2$"):
        as_series("flash", [1.0, 2.0], size=3, like="ns")
    with pytest.raises(AttnInputError, match=r"^x must have 3 entries, got 2$"):
        as_series("x", [1.0, 2.0], size=3)
    with pytest.raises(AttnInputError, match=r"^sizes must have at least 2 entries, got 1$"):
        as_series("sizes", [1.0], min_size=2)
    with pytest.raises(AttnInputError, match=r"^Ms must be positive, got 0.0 at index 2$"):
        as_series("Ms", [1.0, 2.0, 0.0, -1.0], positive=True)
    gaps = as_series("r", [1.0, np.nan, 3.0], missing=True, positive=True)
    assert np.isnan(gaps[1]) and gaps[2] == 3.0
    with pytest.raises(AttnInputError, match=r"^r must be positive, got -3.0 at index 2$"):
        as_series("r", [np.nan, 1.0, -3.0], missing=True, positive=True)
    with pytest.raises(AttnInputError, match=r"^r must be finite \(NaN marks a missing point\), "):
        as_series("r", [np.nan, -np.inf], missing=True)


def test_a_series_is_checked_in_bounded_memory():
    view = np.broadcast_to(-1.0, (10**9,))
    tracemalloc.start()
    try:
        with pytest.raises(AttnInputError, match=r"^x must be positive, got -1.0 at index 0$"):
            as_series("x", view, positive=True)
        with pytest.raises(AttnInputError, match=r"at index 0$"):
            as_series("x", np.broadcast_to(np.inf, (10**9,)), missing=True)
        assert as_series("x", view, missing=True) is view
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 21  # one block of booleans
