"""Matmul schedules on the machine: the closed forms by hand, the tile rule, capacity and
asymptotics. The simulated counts against their closed forms, with the products against
A @ B, are in test_iomodel_twins.py."""

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.iomodel import (
    CapacityError,
    matmul_order,
    matmul_tile_size,
    naive_matmul,
    naive_matmul_count,
    tiled_matmul,
    tiled_matmul_count,
)
from attnlib.measure import loglog_slope


def test_closed_forms_by_hand():
    # 4×4 by 4×4 with 2×2 tiles: 4 output tiles, each reading 2·(2·4) words.
    assert tiled_matmul_count(4, 4, 4, 12) == tiled_matmul_count(4, 4, 4, 14)
    c = tiled_matmul_count(4, 4, 4, 12)
    assert matmul_tile_size(12) == 2
    assert (c.reads, c.writes, c.peak_fast) == (64, 16, 12)
    assert naive_matmul_count(4, 4, 4, 12) == naive_matmul_count(4, 4, 4, 10**6)
    n = naive_matmul_count(4, 4, 4, 12)
    assert (n.reads, n.writes, n.peak_fast) == (16 + 64, 16, 12)


def test_tile_rule_is_the_largest_that_fits():
    for M in range(3, 2000):
        b = matmul_tile_size(M)
        assert 3 * b * b <= M < 3 * (b + 1) ** 2


def test_a_tile_that_does_not_fit_is_caught_by_the_machine():
    A = np.ones((8, 8))
    with pytest.raises(CapacityError, match="> M = 40"):
        tiled_matmul(A, A, M=40, tile=4)  # 3·16 = 48 > 40
    C, count = tiled_matmul(A, A, M=48, tile=4)
    assert count.peak_fast == 48
    np.testing.assert_allclose(C, A @ A)


def test_record_returns_the_machine_with_a_log():
    A = np.ones((4, 2))
    C, count, mem = tiled_matmul(A, A.T, M=12, record=True)
    loads = [op for op in mem.log if op.op == "load"]
    assert sum(op.words for op in loads) == count.reads
    assert sum(op.words for op in mem.log if op.op == "store") == count.writes


def test_tiled_slope_is_minus_half_and_within_a_constant_of_hong_kung():
    """From the closed form: reads ≈ 2√3·mkp/√M, so the slope against M is −1/2 and the ratio
    to mkp/√M stays in [3.4, 4.5] (2√3 ≈ 3.46, plus the mp writes and rounding of b)."""
    for m, k, p in [(1024, 1024, 1024), (4096, 512, 2048)]:
        Ms = np.unique(np.geomspace(48, 3 * 256**2, 20).astype(int))
        tot = np.array([tiled_matmul_count(m, k, p, int(M)).total for M in Ms])
        slope = loglog_slope(Ms, tot)
        assert -0.55 <= slope <= -0.45, slope
        ratio = tot / np.array([matmul_order(m, k, p, int(M)) for M in Ms])
        assert 3.4 <= ratio.min() and ratio.max() <= 4.5, (ratio.min(), ratio.max())
        naive = {naive_matmul_count(m, k, p, int(M)).total for M in Ms if M >= k + 2 * p}
        assert len(naive) <= 1  # the naive schedule does not use the cache at all


BAD_INPUTS = [
    (lambda A: naive_matmul(A, np.ones((4, 3)), M=9), r"M must be at least k \+ 2p = 10 words"),
    (lambda A: naive_matmul_count(3, 4, 3, 9), r"M must be at least k \+ 2p = 10 words"),
    (lambda A: tiled_matmul(A, np.ones((3, 3)), M=30), "B must have k=4 rows"),
    (
        lambda A: tiled_matmul(np.ones((3, 4), dtype=int), np.ones((4, 2)), M=30),
        "A must have a float32 or float64 dtype",
    ),
    (lambda A: naive_matmul(A, np.full((4, 2), np.nan), M=30), "B must be finite"),
    (
        lambda A: tiled_matmul(A, np.ones((4, 2)), M=2),
        "M must be at least 3 words for tiled_matmul",
    ),
    (lambda A: tiled_matmul(A, np.ones((4, 2)), M=30, tile=0), "tile must be an integer >= 1"),
    (lambda A: tiled_matmul(A, np.ones((4, 2)), M=None), "M must be an integer >= 1"),
    (lambda A: tiled_matmul_count(3, 0, 3, 30), "k must be an integer >= 1"),
    (lambda A: matmul_tile_size(2), "M must be at least 3 words"),
    (lambda A: naive_matmul_count(3, 3, -1, 30), "p must be an integer >= 1"),
]


@pytest.mark.parametrize("call,message", BAD_INPUTS)
def test_bad_inputs(call, message):
    A = np.ones((3, 4))
    with pytest.raises(AttnInputError, match=message):
        call(A)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # then refused
@pytest.mark.parametrize("run", [naive_matmul, tiled_matmul])
def test_a_product_beyond_the_float_range_is_refused_not_returned_as_inf(run):
    A, B = np.full((3, 2), 1e300), np.full((2, 3), 1e300)
    with pytest.raises(AttnInputError, match="A @ B overflows float64: A or B"):
        run(A, B, M=64)
    C, _ = run(A, B / 1e300, M=64)  # large but finite: exact
    assert np.array_equal(C, np.full((3, 3), 2e300))
