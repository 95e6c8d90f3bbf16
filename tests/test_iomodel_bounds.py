"""The I/O lower bounds as formulas (attnlib.iomodel.bounds).

Checked here: exact values on hand-computed cases, the two branches and where they meet
(M = d², where both equal n²), the backward bound's lower-order option, the sparse bound's
recovery of the dense one, monotonicity, every bad input, and the sparse bound against
block-sparse FlashAttention's counts, which never go below it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import SPARSE_BLOCK_CASES, sparse_block_grid, thin_block_cover

import attnlib as al
from attnlib import AttnInputError
from attnlib.iomodel import (
    expand_block_mask,
    flash_backward,
    flash_backward_blocks,
    flash_backward_count,
    flash_forward_blocks,
    flash_forward_count,
)
from attnlib.iomodel.bounds import (
    backward_lower_bound,
    forward_lower_bound,
    matmul_lower_bound,
    sparse_lower_bound,
)
from attnlib.measure import loglog_slope

# ---- values --------------------------------------------------------------------------------


def test_matmul_bound_values():
    assert matmul_lower_bound(4, 9, 16, 36) == 4 * 9 * 16 / 6
    assert matmul_lower_bound(1, 1, 1, 1) == 1.0
    # symmetric in the three dimensions, and ∝ 1/√M
    assert matmul_lower_bound(3, 5, 7, 100) == matmul_lower_bound(7, 3, 5, 100)
    assert math.isclose(matmul_lower_bound(8, 8, 8, 400) / matmul_lower_bound(8, 8, 8, 100), 0.5)


@pytest.mark.parametrize("bound", [forward_lower_bound, backward_lower_bound])
def test_attention_bound_values(bound):
    n, d = 1024, 64
    # small cache (M = 1024 < d² = 4096): n²d/√M
    assert bound(n, d, 1024) == n * n * d / 32
    # large cache (M = 16384 > d²): n²d²/M
    assert bound(n, d, 16384) == n * n * d * d / 16384
    # exactly at the crossover both branches equal n²
    assert bound(n, d, d * d) == n * n


@pytest.mark.parametrize("bound", [forward_lower_bound, backward_lower_bound])
@pytest.mark.parametrize("d", [1, 8, 64, 256])
def test_branch_switches_at_d_squared(bound, d):
    n = 4096
    for M in (1, 2, d * d // 4, d * d - 1, d * d, d * d + 1, 4 * d * d, 10**9):
        if M < 1:
            continue
        small, large = n * n * d / math.sqrt(M), n * n * d * d / M
        expected = small if M <= d * d else large
        assert math.isclose(bound(n, d, M), expected, rel_tol=1e-12)
        # the min is always the tighter expression
        assert bound(n, d, M) <= min(small, large) * (1 + 1e-12)


def test_slopes_of_the_two_branches():
    n, d = 8192, 128
    Ms = np.array([2.0**k for k in range(4, 13)])  # up to d²/4
    small = [forward_lower_bound(n, d, int(M)) for M in Ms]
    slope_small = loglog_slope(Ms, small)
    assert abs(slope_small + 0.5) < 1e-9
    Ml = np.array([2.0**k for k in range(16, 24)])  # from 4d²
    large = [forward_lower_bound(n, d, int(M)) for M in Ml]
    slope_large = loglog_slope(Ml, large)
    assert abs(slope_large + 1.0) < 1e-9


def test_backward_lower_order_terms():
    # (n²d² + nd³)/M and (n²d + nd²)/√M are both the default branches times (1 + d/n)
    for n, d, M in [(1024, 64, 256), (1024, 64, 4096), (1024, 64, 10**6), (64, 64, 100)]:
        plain = backward_lower_bound(n, d, M)
        full = backward_lower_bound(n, d, M, lower_order=True)
        assert math.isclose(full, plain * (1 + d / n), rel_tol=1e-12)
        if n >= d:
            assert plain <= full <= 2 * plain
    # with n < d the extra nd³ term dominates
    n, d, M = 8, 512, 10**6
    assert backward_lower_bound(n, d, M, lower_order=True) > 10 * backward_lower_bound(n, d, M)


def test_forward_and_backward_share_the_default_shape():
    for n, d, M in [(100, 10, 7), (512, 32, 1024), (512, 32, 10**5)]:
        assert backward_lower_bound(n, d, M) == forward_lower_bound(n, d, M)


# ---- sparse --------------------------------------------------------------------------------


@pytest.mark.parametrize("n,d", [(1024, 64), (8192, 128), (300, 7)])
@pytest.mark.parametrize("M", [16, 1000, 4096, 65536, 10**7])
def test_sparse_bound_recovers_dense(n, d, M):
    # Z_in = nd nonzero inputs, Z_QK = n² kept scores: the dense forward bound
    assert math.isclose(sparse_lower_bound(n * d, n * n, M), forward_lower_bound(n, d, M))


def test_sparse_bound_values_and_branches():
    z_in, z_qk = 10_000, 250_000
    # Z_in²/M against Z_in·√Z_QK/√M: they meet at √M = Z_in/√Z_QK = 20, i.e. M = 400
    assert sparse_lower_bound(z_in, z_qk, 400) == z_in * z_in / 400
    assert math.isclose(sparse_lower_bound(z_in, z_qk, 400), z_in * math.sqrt(z_qk) / 20)
    assert sparse_lower_bound(z_in, z_qk, 100) == z_in * 500 / 10  # small cache branch
    assert sparse_lower_bound(z_in, z_qk, 10_000) == z_in * z_in / 10_000  # large cache


def test_sparse_bound_monotone():
    z_in = 64 * 512
    qks = [512 * k for k in (1, 4, 16, 64, 256, 512)]
    for M in (64, 4096, 10**6):
        vals = [sparse_lower_bound(z_in, z, M) for z in qks]
        assert all(a <= b for a, b in zip(vals[:-1], vals[1:], strict=True)), (
            "more kept scores, no smaller bound"
        )
    Ms = [2**k for k in range(2, 24)]
    vals = [sparse_lower_bound(z_in, 512 * 512, M) for M in Ms]
    assert all(a >= b for a, b in zip(vals[:-1], vals[1:], strict=True)), (
        "a bigger cache never raises the bound"
    )


# ---- bad input -----------------------------------------------------------------------------

BAD_INTS = [0, -3, 2.5, "8", None, True, np.float64(4.0)]


@pytest.mark.parametrize("bad", BAD_INTS)
def test_bad_input_matmul(bad):
    for i, name in enumerate(["m", "k", "p", "M"]):
        args = [4, 4, 4, 16]
        args[i] = bad
        with pytest.raises(AttnInputError, match=rf"^{name} must be an integer >= 1"):
            matmul_lower_bound(*args)


@pytest.mark.parametrize("bound", [forward_lower_bound, backward_lower_bound])
@pytest.mark.parametrize("bad", BAD_INTS)
def test_bad_input_attention(bound, bad):
    for i, name in enumerate(["n", "d", "M"]):
        args = [64, 8, 16]
        args[i] = bad
        with pytest.raises(AttnInputError, match=rf"^{name} must be an integer >= 1"):
            bound(*args)


@pytest.mark.parametrize("bad", BAD_INTS)
def test_bad_input_sparse(bad):
    for i, name in enumerate(["z_in", "z_qk", "M"]):
        args = [64, 64, 16]
        args[i] = bad
        with pytest.raises(AttnInputError, match=rf"^{name} must be an integer >= 1"):
            sparse_lower_bound(*args)


def test_numpy_integers_accepted():
    assert forward_lower_bound(np.int64(64), np.int32(8), np.uint16(16)) == 64 * 64 * 8 / 4


# ---- the sparse bound against block-sparse FlashAttention's counts ----------------------------
# flash_backward's ``block_mask`` skips empty blocks (attnlib.iomodel.flash). Its count is a
# function of the kept blocks (test_iomodel_flash.py checks that it drops in proportion to
# them); here, that it never goes below sparse_lower_bound(Z_in = nd, Z_QK = kept scores, M).


@pytest.mark.parametrize("d,M", SPARSE_BLOCK_CASES)
def test_block_sparse_count_never_below_the_sparse_bound(d, M):
    n, B_r, B_c, T_r, T_c = sparse_block_grid(d, M)
    base = thin_block_cover(T_r, T_c)
    rng = np.random.default_rng(7 * M)
    order = rng.permutation(T_r * T_c)
    ratios = []
    for frac in (0.0, 1 / 256, 1 / 64, 1 / 16, 1 / 4, 1 / 2, 1.0):
        bm = base.copy()
        bm.flat[order[: int(frac * T_r * T_c)]] = True
        z_qk = int(bm.sum()) * B_r * B_c  # kept scores
        total = flash_backward_count(n, d, M, block_mask=bm).total
        ratios.append(total / sparse_lower_bound(n * d, z_qk, M))
    assert min(ratios) >= 1.0, ratios
    # the gap grows with density: the count is linear in Z_QK, the bound grows like √Z_QK
    assert ratios[-1] > ratios[1]


def test_block_sparse_forward_count_never_below_the_sparse_bound():
    d, M = 64, 30000
    B_r, B_c = flash_forward_blocks(d, M)
    n = 4096
    T_r, T_c = -(-n // B_r), -(-n // B_c)
    rng = np.random.default_rng(3)
    for frac in (1 / 64, 1 / 8, 1 / 2, 1.0):
        bm = rng.random((T_r, T_c)) < frac
        bm[np.arange(T_r), np.arange(T_r) * T_c // T_r] = True
        z_qk = int(bm.sum()) * B_r * B_c
        total = flash_forward_count(n, d, M, block_mask=bm).total
        assert total >= sparse_lower_bound(n * d, z_qk, M)


def test_simulated_block_sparse_run_respects_the_bound(rng):
    n, d, M = 96, 8, 400
    B_r, B_c = flash_backward_blocks(d, M)
    T_r, T_c = -(-n // B_r), -(-n // B_c)
    bm = rng.random((T_r, T_c)) < 0.3
    bm[0, 0] = True
    Q, K, V, dO = (rng.standard_normal((n, d)) for _ in range(4))
    mask = expand_block_mask(bm, n, n, (B_r, B_c))
    O, lse = al.attention_forward(Q, K, V, mask=mask)
    *_, count = flash_backward(Q, K, V, O, dO, lse, M=M, block_mask=bm)
    assert count == flash_backward_count(n, d, M, block_mask=bm)
    assert count.total >= sparse_lower_bound(n * d, int(mask.sum()), M)


def test_the_backward_bound_at_M_equal_d_squared_is_n_squared():
    # at M = d² the bound is n²; our count there is within the stated backward band's reach
    n, d = 1024, 32
    assert math.isclose(backward_lower_bound(n, d, d * d), n * n)
