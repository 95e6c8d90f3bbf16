"""Causal FlashAttention on the machine: numerics against the exact core with a causal mask,
simulated counts equal to the closed forms on a grid, the closed forms equal to the loops
they replace, the causal lower bound, and the constant saved."""

import math
import time
from fractions import Fraction

import numpy as np
import pytest
from helpers import assert_close as _close
from helpers import random_qkv_dO

import attnlib as al
from attnlib import iomodel as io
from attnlib.iomodel import causal

# (n, m, d, d_v): n = 1, n < m and n > m (PyTorch's top-left causal alignment), d_v ≠ d,
# sizes not divisible by the blocks.
SHAPES = [
    (1, 1, 1, 1),
    (2, 3, 1, 1),
    (7, 7, 3, 3),
    (13, 9, 5, 2),
    (9, 13, 2, 3),
    (31, 31, 2, 2),
    (40, 33, 8, 8),
    (30, 50, 2, 2),
    (64, 64, 16, 16),
    (100, 100, 4, 4),
    (150, 131, 32, 32),
]


def _levels(n, d, d_v):
    lo = io.flash_backward_min_M(d, d_v=d_v)
    return sorted(
        {M for M in (lo, 5 * lo, 6 * d * d + 20 * d, n * d + 1, 3 * n * (d + d_v) + 50) if M >= lo}
    )


GRID = [(n, m, d, d_v, M) for (n, m, d, d_v) in SHAPES for M in _levels(n, d, d_v)]


def test_grid_size():
    assert len(GRID) >= 30


@pytest.mark.parametrize("n,m,d,d_v,M", GRID)
def test_causal_counts_equal_closed_forms_and_outputs_equal_exact(n, m, d, d_v, M):
    rng = np.random.default_rng(n + 7 * m + 31 * d + M)
    Q, K, V, dO = random_qkv_dO(rng, n, m, d, d_v)
    mask = io.causal_mask(n, m)
    O_ref, lse_ref = al.attention_forward(Q, K, V, mask=mask)
    grads_ref = al.attention_backward(Q, K, V, O_ref, dO, lse_ref, mask=mask)

    O, lse, c = io.flash_forward_causal(Q, K, V, M=M)
    _close(O, O_ref)
    _close(lse, lse_ref)
    assert c == io.flash_forward_causal_count(n, d, M, m=m, d_v=d_v)
    assert c.peak_fast <= M
    # the causal closed form is the block-sparse form with the causal pattern
    blocks = io.flash_forward_blocks(d, M, d_v=d_v)
    bm = io.flash_block_mask(mask, blocks)
    assert c == io.flash_forward_count(n, d, M, m=m, d_v=d_v, block_mask=bm)

    *grads, cb = io.flash_backward_causal(Q, K, V, O_ref, dO, lse_ref, M=M)
    for g, r in zip(grads, grads_ref, strict=True):
        _close(g, r)
    assert cb == io.flash_backward_causal_count(n, d, M, m=m, d_v=d_v)
    assert cb.peak_fast <= M

    if n == m and d == d_v:
        bound = io.causal_lower_bound(n, d, M)
        assert c.total >= bound and cb.total >= bound
        assert c.total <= io.flash_forward_count(n, d, M).total


def test_causal_mask_and_score_count():
    assert io.causal_mask(3, 4).tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, True, False],
    ]
    for n, m in [(1, 1), (5, 5), (5, 3), (3, 5), (100, 100)]:
        assert io.causal_score_count(n, m) == int(io.causal_mask(n, m).sum())
    assert io.causal_score_count(100) == 100 * 101 // 2


def test_causal_lower_bound_is_the_sparse_bound():
    for n, d, M in [(64, 8, 200), (1024, 64, 10**5), (4096, 128, 10**4)]:
        z = n * (n + 1) // 2
        assert io.causal_lower_bound(n, d, M) == io.sparse_lower_bound(n * d, z, M)


def test_counts_by_hand():
    # n = m = 8, d = d_v = 2, blocks (4, 4): forward row block 0 keeps key block 0, row block
    # 1 keeps both: reads = 8·2 + 4·(4 + 8) = 64 against 16 + 4·16 = 80 dense.
    c = io.flash_forward_causal_count(8, 2, 10**4, blocks=(4, 4))
    assert (c.reads, c.writes) == (16 + 4 * 12, 24)
    # backward: key block 0 sees all 8 query rows, key block 1 the last 4: Σρ = 12.
    cb = io.flash_backward_causal_count(8, 2, 10**4, blocks=(4, 4))
    assert cb.reads == 8 * 2 + 8 * 4 + 12 * 8
    assert cb.writes == 8 + 8 * 4 + 12 * 2


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_causal_saving_tends_to_one_half_and_the_excess_is_the_diagonal(which):
    fractions = []
    for n in (256, 1024, 4096):
        s = io.causal_saving(n, 16, 4000, which=which)
        assert s.other_words + s.interior_words + s.diagonal_words == s.causal
        # the traffic charged to no tile is the dense pass's: Q read, O and lse written
        # (forward); D pass, K, V read once, dK, dV and D written (backward, n = m, d_v = d)
        d = 16
        assert s.other_words == (n * d + n * (d + 1) if which == "forward" else 5 * n * d + n)
        assert s.interior_words > 0 and s.diagonal_words > 0
        assert s.fraction == s.causal / s.dense
        fractions.append(s.fraction)
        # without the masked half of the diagonal tiles only the untiled traffic remains
        # above one half
        assert 0.5 < s.fraction_without_diagonal < s.fraction
    assert fractions[0] > fractions[1] > fractions[2] > 0.5
    assert fractions[2] < 0.53


# ---- the closed forms against the loops they replace, and against the simulation ----------
#
# The causal counts were sums over blocks (a loop per query or key block, so n = 10¹² never
# finished). They are now floor sums. The loops below are the sums as first written, kept
# here as the reference: closed form == loop on an exhaustive grid of small sizes and every
# pair of blocks, == loop on random large sizes, and == the simulated run.


def _loop_forward_kv_rows(n, m, B_r, B_c):
    """Σ over query blocks of the key rows they load: the kept key blocks are those starting
    at or before the block's last query."""
    T_c = -(-m // B_c)
    return sum(min(m, min(T_c, (min(s + B_r, n) - 1) // B_c + 1) * B_c) for s in range(0, n, B_r))


def _loop_backward_rows(n, m, B_r, B_c):
    """Σ over key blocks holding a kept score of the query rows that visit them."""
    return sum(n - (t // B_r) * B_r for t in range(0, min(n, m), B_c))


def _loop_forward_interior_rows(n, B_r, B_c):
    rows = 0
    for s in range(0, n, B_r):
        for j in range(min(-(-n // B_c), (min(s + B_r, n) - 1) // B_c + 1)):
            if min((j + 1) * B_c, n) - 1 <= s:  # every key of the tile <= first query
                rows += min((j + 1) * B_c, n) - j * B_c
    return rows


def _loop_backward_interior_rows(n, B_r, B_c):
    rows = 0
    for t in range(0, n, B_c):
        last_key = min(t + B_c, n) - 1
        for s in range((t // B_r) * B_r, n, B_r):
            if last_key <= s:
                rows += min(s + B_r, n) - s
    return rows


def _loop_counts(n, m, d, d_v, M, B_r, B_c):
    """Both causal counts from the loops, as the closed forms state them."""
    D = d + d_v
    forward = io.IOCount(
        n * d + D * _loop_forward_kv_rows(n, m, B_r, B_c),
        n * (d_v + 1),
        io.flash_forward_working_set(min(B_r, n), min(B_c, m), d, d_v),
    )
    rho = _loop_backward_rows(n, m, B_r, B_c)
    C = min(m, len(range(0, min(n, m), B_c)) * B_c)
    return forward, (
        n * (2 * d_v - d) + C * D + rho * (2 * d + d_v + 2),
        n + m * D + rho * d,
    )


SMALL = range(1, 23)
BLOCK_SIDES = range(1, 9)


@pytest.mark.parametrize("B_r", BLOCK_SIDES)
@pytest.mark.parametrize("B_c", BLOCK_SIDES)
def test_causal_closed_forms_equal_the_loops_on_every_small_case(B_r, B_c):
    """n, m up to 22 against blocks up to 8: n < block, n a multiple of the block or not,
    n < m and n > m; d, d_v in {1, 2, 3}."""
    for n in SMALL:
        for m in SMALL:
            for d, d_v in ((1, 1), (2, 3), (3, 2)):
                forward, backward = _loop_counts(n, m, d, d_v, 10**6, B_r, B_c)
                kw = dict(m=m, d_v=d_v, blocks=(B_r, B_c))
                assert io.flash_forward_causal_count(n, d, 10**6, **kw) == forward
                cb = io.flash_backward_causal_count(n, d, 10**6, **kw)
                assert (cb.reads, cb.writes) == backward
        assert causal._forward_interior_rows(n, B_r, B_c) == _loop_forward_interior_rows(
            n, B_r, B_c
        )
        assert causal._backward_interior_rows(n, B_r, B_c) == _loop_backward_interior_rows(
            n, B_r, B_c
        )


def test_causal_closed_forms_equal_the_loops_on_random_large_cases():
    rng = np.random.default_rng(2024)
    for _ in range(200):
        n, m = (int(x) for x in rng.integers(1, 4000, size=2))
        B_r, B_c = (int(x) for x in rng.integers(1, 300, size=2))
        d, d_v = (int(x) for x in rng.integers(1, 9, size=2))
        forward, backward = _loop_counts(n, m, d, d_v, 10**6, B_r, B_c)
        kw = dict(m=m, d_v=d_v, blocks=(B_r, B_c))
        assert io.flash_forward_causal_count(n, d, 10**6, **kw) == forward
        cb = io.flash_backward_causal_count(n, d, 10**6, **kw)
        assert (cb.reads, cb.writes) == backward
        assert causal._forward_interior_rows(n, B_r, B_c) == _loop_forward_interior_rows(
            n, B_r, B_c
        )
        assert causal._backward_interior_rows(n, B_r, B_c) == _loop_backward_interior_rows(
            n, B_r, B_c
        )


def _loop_saving(n, d, M, which):
    """causal_saving's split as first written (loops over tiles), fractions as Fractions."""
    D = 2 * d
    if which == "forward":
        B_r, B_c = io.flash_forward_blocks(d, M)
        dense = io.flash_forward_count(n, d, M).total
        causal_total = io.flash_forward_causal_count(n, d, M).total
        interior = D * _loop_forward_interior_rows(n, B_r, B_c)
        diag = D * _loop_forward_kv_rows(n, n, B_r, B_c) - interior
    else:
        B_r, B_c = io.flash_backward_blocks(d, M)
        dense = io.flash_backward_count(n, d, M).total
        causal_total = io.flash_backward_causal_count(n, d, M).total
        per_row = 4 * d + 2
        interior = per_row * _loop_backward_interior_rows(n, B_r, B_c)
        diag = per_row * _loop_backward_rows(n, n, B_r, B_c) - interior
    return dense, causal_total, interior, diag


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_causal_saving_equals_the_loops_on_a_grid(which):
    for n in range(1, 70, 3):
        for d in (1, 2, 3, 8):
            least = io.flash_backward_min_M(d)
            for M in sorted({least, least + 1, 9 * d * d + 2 * d, 150, 400, 2000}):
                if M < least:
                    continue
                s = io.causal_saving(n, d, M, which=which)
                dense, causal_total, interior, diag = _loop_saving(n, d, M, which)
                assert (s.dense, s.causal) == (dense, causal_total)
                assert (s.interior_words, s.diagonal_words) == (interior, diag)
                assert s.other_words == causal_total - interior - diag
                # each fraction is the exact quotient, rounded once
                assert s.fraction == float(Fraction(causal_total, dense))
                assert s.fraction_without_diagonal == float(
                    Fraction(2 * causal_total - diag, 2 * dense)
                )


@pytest.mark.parametrize("B_r, B_c", [(1, 1), (2, 3), (3, 2), (4, 4), (5, 2), (8, 3)])
def test_causal_closed_forms_equal_the_simulation_on_every_small_shape(B_r, B_c):
    """Every (n, m) up to 9 with d = 2, d_v = 1: n < block, partial last blocks, n ≠ m."""
    rng = np.random.default_rng(B_r * 10 + B_c)
    d, d_v = 2, 1
    for n in range(1, 10):
        for m in range(1, 10):
            Q, K, V, dO = random_qkv_dO(rng, n, m, d, d_v)
            kw = dict(M=10**6, blocks=(B_r, B_c))
            O, lse, c = io.flash_forward_causal(Q, K, V, **kw)
            assert c == io.flash_forward_causal_count(n, d, 10**6, m=m, d_v=d_v, blocks=(B_r, B_c))
            *_, cb = io.flash_backward_causal(Q, K, V, O, dO, lse, **kw)
            assert cb == io.flash_backward_causal_count(
                n, d, 10**6, m=m, d_v=d_v, blocks=(B_r, B_c)
            )


@pytest.mark.parametrize("n", [10**12, 10**400])
def test_causal_closed_forms_take_constant_time_at_any_n(n):
    """Sums over blocks would never finish here; the floor sums take microseconds, and the
    forward's kept fraction is one half to within the diagonal tiles."""
    start = time.perf_counter()
    forward = io.flash_forward_causal_count(n, 64, 16384)
    backward = io.flash_backward_causal_count(n, 64, 16384)
    saving = io.causal_saving(n, 64, 16384)
    saving_b = io.causal_saving(n, 64, 16384, which="backward")
    intensity = io.arithmetic_intensity(n, 64, 16384, causal=True)
    assert time.perf_counter() - start < 1.0
    assert forward.total < io.flash_forward_count(n, 64, 16384).total
    assert backward.total < io.flash_backward_count(n, 64, 16384).total
    assert abs(saving.fraction - 0.5) < 1e-6 and abs(saving_b.fraction - 0.5) < 1e-6
    assert saving.interior_words + saving.diagonal_words + saving.other_words == saving.causal
    assert math.isfinite(intensity) and intensity > 0
