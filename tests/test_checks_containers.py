"""Container arguments (attnlib._checks.containers): sequences of a bounded number of entries
(never a string, counted before they are copied, refused beyond memory, of one type), non-empty
bounded dicts with the keys asked for, and curves: series over one grid."""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib._checks import (
    as_curves,
    as_dict,
    as_entries,
)


@pytest.mark.parametrize("seq", ["abc", b"ab", {"a": 1}, 5, None, np.array(1.0)])
def test_entries_refuse_what_is_not_a_sequence(seq):
    with pytest.raises(AttnInputError, match=r"^v must be a sequence of cells, got "):
        as_entries("v", seq, of="cells")


def test_entries_count_before_they_copy():
    assert as_entries("v", range(3)) == (0, 1, 2)
    assert as_entries("v", (x for x in "ab")) == ("a", "b")
    assert as_entries("v", np.arange(2)) == (0, 1)
    with pytest.raises(AttnInputError, match=r"^v must have 3 n grids, got 2$"):
        as_entries("v", [1, 2], of="n grids", length=3)
    with pytest.raises(AttnInputError, match=r"^v must have at least 1 segments, got 0$"):
        as_entries("v", [], of="segments", min_len=1)
    with pytest.raises(AttnInputError, match=r"^v must have at most 5 values, got 1000000000$"):
        as_entries("v", range(10**9), of="values", max_len=5)
    endless = itertools.count()
    with pytest.raises(AttnInputError, match=r"^v must have at most 5 values, got more than 5$"):
        as_entries("v", endless, of="values", max_len=5)
    assert next(endless) == 6  # read one entry past the limit, no further


def test_entries_beyond_memory_are_refused_before_they_are_copied():
    tracemalloc.start()
    try:
        with pytest.raises(AttnInputError, match=r"^table would need .*; header is too large$"):
            as_entries("header", np.broadcast_to("a", (10**9,)), entry_bytes=128, what="table")
        with pytest.raises(AttnInputError, match=r"^table would need .*; rows is too large$"):
            as_entries("rows", itertools.repeat(1), entry_bytes=2**20, what="table")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_entries_of_a_type():
    assert as_entries("rows", [{"a": 1}], entry_type=dict) == ({"a": 1},)
    with pytest.raises(AttnInputError, match=r"^rows\[1\] must be a dict, got list$"):
        as_entries("rows", [{}, []], entry_type=dict)


def test_a_dict_is_non_empty_bounded_and_keyed_as_asked():
    table = {1e-3: [1.0], np.float64(1e-2): [2.0]}
    out = as_dict("errors", table, max_len=2)
    assert out == table and out is not table
    for value in ({}, [1, 2], "ab", None):
        with pytest.raises(AttnInputError, match=r"^errors must be a non-empty dict of eps"):
            as_dict("errors", value, of="eps -> errors")
    with pytest.raises(AttnInputError, match=r"^errors must have at most 1 entries, got 2$"):
        as_dict("errors", table, max_len=1)
    with pytest.raises(AttnInputError, match=r"^ranks must have the same keys as errors, got "):
        as_dict("ranks", {1e-3: [1.0]}, keys=table, like="errors")
    labels = as_dict("errors", table, check_value=lambda label, v: label)
    assert list(labels.values()) == ["errors[0.001]", "errors[0.01]"]  # numpy keys as numbers
    assert table == {1e-3: [1.0], 1e-2: [2.0]}  # the argument is not modified


def test_curves_are_series_over_one_grid():
    curves = as_curves("kappa", {"a": [1, 2], "b": (3.0, 4.0)}, size=2, over="log2_ns")
    assert [c.tolist() for c in curves.values()] == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(AttnInputError, match=r"^kappa\['b'\] must have 2 entries like log2_ns"):
        as_curves("kappa", {"a": [1, 2], "b": [1]}, size=2, over="log2_ns")
    with pytest.raises(AttnInputError, match=r"^kappa\['a'\] must be positive"):
        as_curves("kappa", {"a": [1, -2]}, size=2, over="log2_ns", positive=True)
    with pytest.raises(AttnInputError, match=r"^kappa must have at most 1 regimes"):
        as_curves("kappa", {"a": [1], "b": [2]}, size=1, over="x", of="regimes", max_len=1)
