"""The certified I/O lower bounds and the Θ-expressions (attnlib.iomodel.bounds).

Checked here: exact small values worked by hand; a dense mask gives the bound of no mask;
how the bound moves with M (a sawtooth whose teeth are the ceiling ⌈N/P⌉, falling across
decades) and its large-M constant tending to 1; the Θ-expressions' values and branches. Bad
input is in test_bad_input_iomodel.py; the attack on the bounds by every counted schedule and
exact optimum is test_iomodel_certify.py; the density bound against brute force is
test_iomodel_density.py.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from attnlib import iomodel as io
from attnlib.iomodel.bounds import (
    backward_lower_bound,
    backward_order,
    forward_lower_bound,
    forward_order,
    matmul_lower_bound,
    matmul_order,
    matmul_sharp_order,
    sparse_lower_bound,
    sparse_worst_case_order,
)
from attnlib.iomodel.density import products_per_part

# ---- exact values, by hand ---------------------------------------------------------------------


def test_attention_bounds_by_hand():
    # n = 4, d = 2, M = 8: P = 72 holds all n²d = 32 products, so the partition term is
    # 8·(1 − 1) = 0 and the trivial term decides: forward Q, K, V, O = 4·8 = 32 words,
    # backward also dO, dQ, dK, dV: 4·(2d + d) + 4·2·(2d) = 24 + 32 = 56
    assert forward_lower_bound(4, 2, 8) == 32
    assert backward_lower_bound(4, 2, 8) == 56
    # n = 64, d = 4, M = 8: s = 4, ρ = 2·2 = 4, cap_rows = 16 + 96 = 112,
    # cap_lw = 16 + 8·⌈√28⌉ = 64; N = 64²·4 = 16384 = 256·64, so 8·(256 − 1) = 2040 words,
    # above the trivial 64·16 = 1024
    assert forward_lower_bound(64, 4, 8) == 2040
    assert backward_lower_bound(64, 4, 8) == 2040
    # d_v and m enter the trivial term only: n = 4, m = 6, d = 2, d_v = 3, M = 8:
    # 4·(2 + 3) + 6·(2 + 3) = 50 (P = min(2·16 + 48, 72) and n·m·d = 48 fit one part)
    assert forward_lower_bound(4, 2, 8, m=6, d_v=3) == 50
    # heads: H = 4 query heads over H_kv = 2: 4·4·(2 + 2) + 2·4·(2 + 2) = 96
    assert forward_lower_bound(4, 2, 8, H=4, H_kv=2) == 96


def test_matmul_bound_by_hand():
    # 64³ at M = 48: s = ⌊96/64⌋ = 1, ρ = 0; P = min(3·48·64, 96 + 48·⌈√144⌉) = 672;
    # 48·(⌈262144/672⌉ − 1) = 48·390 = 18720, above the trivial 3·4096
    assert matmul_lower_bound(64, 64, 64, 48) == 18720
    # a product that fits: the trivial mk + kp + mp
    assert matmul_lower_bound(2, 3, 4, 10**6) == 6 + 12 + 8
    # symmetric in m and p (the roles of A's rows and B's columns)
    for M in (3, 17, 200):
        assert matmul_lower_bound(3, 5, 7, M) == matmul_lower_bound(7, 5, 3, M)


def test_sparse_bound_by_hand():
    # band of half-width 1 on 64×64: Z = 64 + 2·63 = 190; d = 4, M = 8: s = 4, the counts
    # bound ρ by min(2·2, 3 + 3, 3 + 3, 190) = 4; P = min(16 + 96, 16 + 8·⌈√28⌉) = 64;
    # 760 products: 8·(⌈760/64⌉ − 1) = 88
    band = io.element_mask("band", 64, 64, 1)
    assert sparse_lower_bound(band, 4, 8) == 88
    # the full bound adds the trivial term: 64 rows of Q, O, K, V at width 4
    assert forward_lower_bound(64, 4, 8, mask=band) == max(88, 64 * 16)
    # no kept entry: 0 (clamped), and the trivial term needs no word at all
    empty = np.zeros((5, 7), dtype=bool)
    assert sparse_lower_bound(empty, 4, 8) == 0
    assert forward_lower_bound(5, 4, 8, m=7, mask=empty) == 0


def test_trivial_term_skips_rows_and_columns_no_output_needs():
    # rows 0, 1 of an 8×8 mask keep keys 0..2: Q, O rows 0, 1 and K, V rows 0..2 are needed
    mask = np.zeros((8, 8), dtype=bool)
    mask[:2, :3] = True
    n, d, M = 8, 4, 10**6  # a cache that holds everything: the trivial term decides
    assert forward_lower_bound(n, d, M, mask=mask) == 2 * (4 + 4) + 3 * (4 + 4)
    assert backward_lower_bound(n, d, M, mask=mask) == 2 * (2 * 4 + 4) + 3 * 2 * (4 + 4)


# ---- masks, heads and the dense case --------------------------------------------------------


@pytest.mark.parametrize("bound", [forward_lower_bound, backward_lower_bound])
def test_a_dense_mask_is_no_mask(bound):
    for n, m, d, d_v, M in [
        (16, 16, 4, 4, 8),
        (32, 48, 2, 5, 40),
        (64, 16, 8, 8, 64),
        (7, 9, 3, 1, 5),
    ]:
        full = np.ones((n, m), dtype=bool)
        for H, H_kv in [(1, 1), (4, 2), (6, 1)]:
            kw = dict(m=m, d_v=d_v, H=H, H_kv=H_kv)
            assert bound(n, d, M, mask=full, **kw) == bound(n, d, M, **kw)


@pytest.mark.parametrize("bound", [forward_lower_bound, backward_lower_bound])
def test_is_causal_is_the_causal_mask(bound):
    for n, m, d, M in [(16, 16, 4, 8), (20, 12, 2, 30), (12, 20, 8, 64), (64, 64, 4, 16)]:
        mask = np.tri(n, m, dtype=bool)
        for H, H_kv in [(1, 1), (4, 2)]:
            kw = dict(m=m, H=H, H_kv=H_kv)
            assert bound(n, d, M, is_causal=True, **kw) == bound(n, d, M, mask=mask, **kw)


def test_a_mask_is_never_above_the_dense_bound_and_the_bounds_are_ints():
    rng = np.random.default_rng(2)
    for n, d, M in [(32, 4, 8), (64, 2, 16), (48, 8, 64)]:
        mask = rng.random((n, n)) < 0.3
        for bound in (forward_lower_bound, backward_lower_bound):
            value = bound(n, d, M, mask=mask)
            assert type(value) is int and 0 <= value <= bound(n, d, M)
    assert type(forward_lower_bound(10**300, 64, 10**5)) is int


# ---- how the bound moves with M -------------------------------------------------------------


def _partition(n, d, M):
    """(⌈N/P⌉, the partition term) of the dense bound, one head, m = n."""
    s = 2 * M // d
    rho = min(s // 2, n) * min(s - s // 2, n) if s <= 2 * n else n * n
    parts = -(-(n * n * d) // products_per_part(d, M, rho=rho))
    return parts, M * (parts - 1)


@pytest.mark.parametrize("n,d", [(64, 4), (256, 16), (4096, 64)])
def test_the_bound_falls_with_M_in_a_sawtooth(n, d):
    """The partition term of thm-05-certified is M·(⌈N/P⌉ − 1) with ⌈N/P⌉ non-increasing in
    M: from M₀ to M₁ it can rise, by at most (M₁ − M₀)·(⌈N/P(M₁)⌉ − 1) (a tooth: the factor
    M grows while the ceiling has not yet dropped), so it is not monotone at unit steps of M,
    while the least I/O of the game is. Checked exactly: every rise is the partition term and
    within that tooth; and across each doubling of M the bound falls or stays."""
    Ms = range(max(1, d // 2), 64 * d * d, max(1, d * d // 64))
    values = [forward_lower_bound(n, d, M) for M in Ms]
    rises = 0
    for (M0, b0), (M1, b1) in itertools.pairwise(zip(Ms, values, strict=True)):
        if b1 > b0:
            c1, h1 = _partition(n, d, M1)
            assert b1 == h1 > 4 * n * d and b1 - b0 <= (M1 - M0) * (c1 - 1)
            rises += 1
    assert rises > 0  # the sawtooth is real: a claim of monotonicity would be false
    for M in (d, d * d // 4, d * d, 4 * d * d, 16 * d * d):
        assert forward_lower_bound(n, d, 2 * M) <= forward_lower_bound(n, d, M)


def test_large_M_constant_tends_to_one():
    """bound / (n²d²/M) rises towards 1 as M/d² grows: 0.4 at M = d² (d = 4), above 0.99
    from M = 256 d² (n large enough that neither the trivial term nor the −M decides)."""
    n, d = 2**24, 4
    ratios = [
        Fraction(forward_lower_bound(n, d, d * d * 4**k), n * n * d * d) * d * d * 4**k
        for k in range(8)
    ]
    assert all(a < b < 1 for a, b in itertools.pairwise(ratios))
    assert ratios[0] == pytest.approx(0.4, abs=1e-6) and ratios[-1] > 0.99


def test_small_M_shape_is_n_squared_d_over_root_3M():
    """For M << d² the partition term is about n²d/√(3M)."""
    n, d = 2**14, 1024
    for M in (64, 256, 1024):
        ratio = forward_lower_bound(n, d, M) / (n * n * d / math.sqrt(3 * M))
        assert 0.8 < ratio <= 1.0, (M, ratio)


# ---- the Θ-expressions (constant 1, never bounds) --------------------------------------------


def test_order_values():
    assert matmul_order(4, 9, 16, 36) == 4 * 9 * 16 / 6
    assert matmul_sharp_order(4, 9, 16, 36) == 2 * 4 * 9 * 16 / 6
    assert math.isclose(matmul_order(8, 8, 8, 400) / matmul_order(8, 8, 8, 100), 0.5)
    n, d = 1024, 64
    for order in (forward_order, backward_order):
        assert order(n, d, 1024) == n * n * d / 32  # small cache: n²d/√M
        assert order(n, d, 16384) == n * n * d * d / 16384  # large cache: n²d²/M
        assert order(n, d, d * d) == n * n  # both branches meet at M = d²
    for M in (256, 4096, 10**5):
        plain, full = backward_order(n, d, M), backward_order(n, d, M, lower_order=True)
        assert plain <= full <= 2 * plain  # n >= d
    z_in, z_qk = 1000, 250_000
    assert sparse_worst_case_order(z_in, z_qk, 400) == z_in * z_in / 400
    assert sparse_worst_case_order(z_in, z_qk, 1) == z_in * 500  # the √Z_QK branch
    assert math.isclose(sparse_worst_case_order(64 * 8, 64 * 64, 256), forward_order(64, 8, 256))


def test_the_order_is_not_a_bound():
    """The orders have constant 1: the worst-case sparse shape exceeds block-sparse
    FlashAttention's count on a band mask (so it is no bound for that mask), while the
    certified bound of the same mask stays below the count."""
    n, d = 2048, 4
    M = io.flash_forward_min_M(d)
    band = io.element_mask("band", n, n, 1)
    blocks = io.flash_forward_blocks(d, M)
    count = io.flash_forward_count(
        n, d, M, blocks=blocks, block_mask=io.flash_block_mask(band, blocks)
    )
    assert sparse_worst_case_order(n * d, int(band.sum()), M) > 2 * count.total
    assert forward_lower_bound(n, d, M, mask=band) <= count.total
