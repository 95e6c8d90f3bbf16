"""attnlib._checks: finiteness in bounded memory, the memory guards, dtypes and flags."""

from __future__ import annotations

import itertools
import math
import tracemalloc

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib._checks import (
    _blocks,
    as_float_array,
    as_real_array,
    check_float_dtype,
    check_mask,
    check_memory_parts,
    check_real,
    conversion_parts,
    distinct_view,
)


def test_distinct_view_keeps_each_memory_location_once():
    row = np.arange(4.0)
    view = np.broadcast_to(row, (10**9, 4))
    assert distinct_view(view).shape == (1, 4)
    assert distinct_view(np.broadcast_to(7.0, (3, 5))).shape == (1, 1)
    plain = np.ones((3, 4))[:, ::2]
    assert distinct_view(plain).shape == plain.shape


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
        with pytest.raises(AttnInputError, match=r"^lse must be finite \(-inf, no NaN or inf\)"):
            as_float_array("lse", np.array([0.0, -np.inf, bad]), ndim=1, allow_neg_inf=True)
    with pytest.raises(AttnInputError, match=r"found -inf at index \(1,\)"):
        as_float_array("lse", lse, ndim=1)


def test_integer_arrays_are_converted_only_within_the_memory_limit():
    assert as_real_array("x", [1, 2, 4]).dtype == np.float64
    huge = np.broadcast_to(np.int8(1), (10**10,))
    with pytest.raises(AttnInputError, match=r"x converted to float64 .*; x is too large$"):
        as_real_array("x", huge)


def test_memory_parts_sum_and_blame_the_largest():
    parts = [(2**31, "the scores", "Q or K"), (2**31 + 8, "the outputs", "Q or V")]
    with pytest.raises(AttnInputError) as refused:
        check_memory_parts("f", parts)
    assert str(refused.value) == (
        "f would need 4 GiB of working memory, over the limit of 4 GiB, most of it for the "
        "outputs (2 GiB); Q or V is too large"
    )
    assert check_memory_parts("f", parts[:1]) == 2**31
    assert check_memory_parts("f", [(10**400, "x", "n")], budget=10**401) == 10**400
    with pytest.raises(AttnInputError, match=r"~2\^1329 bytes"):
        check_memory_parts("f", [(10**400, "x", "n")])


def test_conversion_parts_count_a_broadcast_view_at_full_size():
    view = np.broadcast_to(np.float32(1), (1000, 10))
    parts = conversion_parts(np.float64, {"Q": view, "K": np.ones(3)})
    assert parts == [(80_000, "Q converted to float64", "Q")]


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
