"""BLAS for the compiled kernels (attnlib._blas): the thread pin the kernels run inside, and
the gemm of a tile product, which refuses what BLAS would reject instead of calling it."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from attnlib import fast
from attnlib._blas import _gemm


def test_blas_runs_on_the_calling_thread_inside_the_kernels_only():
    """Inside the context every BLAS library runs one thread; on exit (normal, by an
    exception, or from a nested context) each gets back the count it had, here 2, which
    differs from the pin whatever thread count the test process starts with."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    assert blas_threads(), "no BLAS library found by threadpoolctl"
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        assert set(before) == {2}
        with fast.blas_on_calling_thread():
            assert set(blas_threads()) == {1}
            with fast.blas_on_calling_thread():
                assert set(blas_threads()) == {1}
            assert set(blas_threads()) == {1}
        assert blas_threads() == before
        with pytest.raises(RuntimeError, match="inside"):
            with fast.blas_on_calling_thread():
                raise RuntimeError("inside")
        assert blas_threads() == before


@numba.njit
def _call_gemm(a, b, c, ints, flts):
    _gemm(a, False, b, False, c, 1.0, 0.0, ints, flts)


def test_gemm_refuses_arguments_blas_would_reject(capfd):
    """Arguments that BLAS rejects (it says so on stderr only and computes nothing) are
    caught before the call: the parameter number goes to ints[8], c is left as it was, and
    nothing reaches stderr."""
    a, b = np.ones((2, 3)), np.ones((3, 4))
    overlapping = np.lib.stride_tricks.as_strided(np.ones(6), shape=(2, 3), strides=(8, 8))
    cases = {
        # (a, b, c): parameter number of the column-major call (its A is our b)
        5: (a, np.ones((2, 4)), np.zeros((2, 4))),  # inner dimensions differ
        8: (a, np.ones((3, 8))[:, ::2], np.zeros((2, 4))),  # b with a column stride of 2
        10: (overlapping, b, np.zeros((2, 4))),  # row stride below the row length
        13: (a, b, np.zeros((2, 8))[:, ::2]),  # c with a column stride of 2
    }
    for parameter, (x, y, c) in cases.items():
        before = c.copy()
        ints, flts = np.zeros(9, np.int32), np.zeros(2)
        _call_gemm(x, y, c, ints, flts)
        assert ints[8] == parameter
        assert np.array_equal(c, before)
    ints = np.zeros(9, np.int32)
    c = np.zeros((2, 4))
    _call_gemm(a, b, c, ints, np.zeros(2))  # and a legal call computes
    assert ints[8] == 0 and np.array_equal(c, a @ b)
    assert capfd.readouterr().err == ""
