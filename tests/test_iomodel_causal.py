"""Causal attention on the machine: the causal closed forms against the block-sparse form and
against the loops they replace (one head, and the g heads of a group packed), the causal
lower bound, and the constant saved. The simulated causal runs against their closed forms
are in test_iomodel_twins.py."""

import math
import time
from fractions import Fraction

import numpy as np
import pytest

from attnlib import iomodel as io
from attnlib.iomodel import blocks, causal

# (n, m, d, d_v): n = 1, n < m and n > m (PyTorch's top-left causal alignment), d_v ≠ d,
# sizes not divisible by the blocks; closed forms only, so every pair of sizes.
SHAPES = [
    (n, m, d, d_v)
    for n in (1, 2, 7, 13, 31, 64, 150)
    for m in (1, 3, 9, 33, 64, 131)
    for d, d_v in ((1, 1), (5, 2), (2, 3), (16, 16))
]


def _levels(n, d, d_v):
    lo = io.flash_backward_min_M(d, d_v=d_v)
    return sorted(
        {M for M in (lo, 5 * lo, 6 * d * d + 20 * d, n * d + 1, 3 * n * (d + d_v) + 50) if M >= lo}
    )


GRID = [(n, m, d, d_v, M) for (n, m, d, d_v) in SHAPES for M in _levels(n, d, d_v)]


@pytest.mark.parametrize("n,m,d,d_v,M", GRID)
def test_the_causal_closed_forms_are_the_block_sparse_form_with_the_causal_pattern(n, m, d, d_v, M):
    mask = io.causal_mask(n, m)
    kw = dict(m=m, d_v=d_v)
    for count, rule, bound in [
        (io.flash_forward_count, io.flash_forward_blocks, io.forward_lower_bound),
        (io.flash_backward_count, io.flash_backward_blocks, io.backward_lower_bound),
    ]:
        kept = io.flash_block_mask(mask, rule(d, M, d_v=d_v))
        c = count(n, d, M, is_causal=True, **kw)
        assert c == count(n, d, M, block_mask=kept, **kw)
        # a block mask with is_causal keeps only the blocks both keep
        assert c == count(n, d, M, block_mask=np.ones_like(kept), is_causal=True, **kw)
        if n == m and d == d_v:
            assert bound(n, d, M, is_causal=True) <= c.total <= count(n, d, M).total


def test_causal_mask_and_score_count():
    assert io.causal_mask(3, 4).tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, True, False],
    ]
    for n, m in [(1, 1), (5, 5), (5, 3), (3, 5), (100, 100)]:
        assert io.causal_mask(n, m).tolist() == np.tri(n, m, dtype=bool).tolist()
        assert causal.causal_score_count(n, m) == int(io.causal_mask(n, m).sum())
    assert causal.causal_score_count(100) == 100 * 101 // 2


def test_causal_lower_bound_is_the_bound_of_the_causal_mask():
    """is_causal=True gives the bound of the explicit mask (closed-form row and column
    counts against the mask's own), and a huge n stays an exact int."""
    for n, m, d, M in [(64, 64, 8, 200), (50, 70, 4, 64), (70, 50, 16, 10**4)]:
        mask = io.causal_mask(n, m)
        for bound in (io.forward_lower_bound, io.backward_lower_bound):
            assert bound(n, d, M, m=m, is_causal=True) == bound(n, d, M, m=m, mask=mask)
    assert isinstance(io.forward_lower_bound(10**400, 8, 4096, is_causal=True), int)


def test_counts_by_hand():
    # n = m = 8, d = d_v = 2, blocks (4, 4): forward row block 0 keeps key block 0, row block
    # 1 keeps both: reads = 8·2 + 4·(4 + 8) = 64 against 16 + 4·16 = 80 dense.
    c = io.flash_forward_count(8, 2, 10**4, blocks=(4, 4), is_causal=True)
    assert (c.reads, c.writes) == (16 + 4 * 12, 24)
    # backward: key block 0 sees all 8 query rows, key block 1 the last 4: Σρ = 12.
    cb = io.flash_backward_count(8, 2, 10**4, blocks=(4, 4), is_causal=True)
    assert cb.reads == 8 * 2 + 8 * 4 + 12 * 8
    assert cb.writes == 8 + 8 * 4 + 12 * 2
    # two heads sharing K, V, packed (row p·2 + h), blocks (4, 2): query block 0 holds
    # positions 0 and 1 of both heads and keeps key block 0 (2 key rows), query block 1
    # positions 2 and 3 and keeps both (4), against 4 + 4 dense.
    g2 = io.flash_forward_count(4, 2, 10**4, blocks=(4, 2), H=2, H_kv=1, enable_gqa=True)
    c2 = io.flash_forward_count(
        4, 2, 10**4, blocks=(4, 2), H=2, H_kv=1, enable_gqa=True, is_causal=True
    )
    assert g2.reads == 8 * 2 + 2 * 4 * 4 and c2.reads == 8 * 2 + 4 * (2 + 4)


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_causal_saving_tends_to_one_half_and_the_excess_is_the_diagonal(which):
    fractions = []
    for n in (256, 1024, 4096):
        s = io.causal_saving(n, 16, 4000, which=which)
        assert s.other_words + s.interior_words + s.diagonal_words == s.causal
        # the traffic charged to no block is the dense pass's: Q read, O and lse written
        # (forward); D pass, K, V read once, dK, dV and D written (backward, n = m, d_v = d)
        d = 16
        assert s.other_words == (n * d + n * (d + 1) if which == "forward" else 5 * n * d + n)
        assert s.interior_words > 0 and s.diagonal_words > 0
        assert s.fraction == s.causal / s.dense
        fractions.append(s.fraction)
        # without the masked half of the diagonal blocks only the untiled traffic remains
        # above one half
        assert 0.5 < s.fraction_without_diagonal < s.fraction
    assert fractions[0] > fractions[1] > fractions[2] > 0.5
    assert fractions[2] < 0.53


# ---- the closed forms against the loops they replace -------------------------------------------
#
# The causal counts were sums over blocks (a loop per query or key block, so n = 10¹² never
# finished). They are now floor sums. The loops below are the sums as first written, over the
# g·n rows of a pass that packs g heads (row p·g + h is position p): closed form == loop on an
# exhaustive grid of small sizes and every pair of blocks, and on random large sizes.


def _ends(n, B_r, g):
    """The last position of each query block of a pass over g·n packed rows."""
    return [(min(s + B_r, g * n) - 1) // g for s in range(0, g * n, B_r)]


def _loop_forward_kv_rows(n, m, B_r, B_c, g=1):
    """Σ over query blocks of the key rows they load: the kept key blocks are those starting
    at or before the block's last position."""
    T_c = -(-m // B_c)
    return sum(min(m, min(T_c, last // B_c + 1) * B_c) for last in _ends(n, B_r, g))


def _loop_backward_rows(n, m, B_r, B_c, g=1):
    """Σ over key blocks holding a kept score of the query rows that visit them."""
    return sum(g * n - (g * t // B_r) * B_r for t in range(0, min(n, m), B_c))


def _loop_forward_interior_rows(n, B_r, B_c):
    rows = 0
    for s in range(0, n, B_r):
        for j in range(min(-(-n // B_c), (min(s + B_r, n) - 1) // B_c + 1)):
            if min((j + 1) * B_c, n) - 1 <= s:  # every key of the block <= first query
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


def _loop_counts(n, m, d, d_v, B_r, B_c, g):
    """Both causal counts of a pass over g·n packed rows from the loops, as the closed forms
    state them: (forward reads, writes), (backward reads, writes)."""
    D, rows = d + d_v, g * n
    rho = _loop_backward_rows(n, m, B_r, B_c, g)
    C = min(m, len(range(0, min(n, m), B_c)) * B_c)
    return (
        (rows * d + D * _loop_forward_kv_rows(n, m, B_r, B_c, g), rows * (d_v + 1)),
        (rows * (2 * d_v - d) + C * D + rho * (2 * d + d_v + 2), rows + m * D + rho * d),
    )


def _assert_closed_forms_equal_the_loops(n, m, d, d_v, B_r, B_c, g):
    forward, backward = _loop_counts(n, m, d, d_v, B_r, B_c, g)
    kw = dict(m=m, d_v=d_v, blocks=(B_r, B_c), H=g, H_kv=1, enable_gqa=True, is_causal=True)
    f = io.flash_forward_count(n, d, 10**6, **kw)
    b = io.flash_backward_count(n, d, 10**6, **kw)
    assert (f.reads, f.writes) == forward and (b.reads, b.writes) == backward
    assert blocks.causal_key_rows(n, m, B_r, B_c, g) == _loop_forward_kv_rows(n, m, B_r, B_c, g)
    # the grid of visited blocks is the loops' pattern
    grid = blocks.causal_blocks(n, m, B_r, B_c, g)
    T_c = grid.shape[1]
    want = [[j < min(T_c, last // B_c + 1) for j in range(T_c)] for last in _ends(n, B_r, g)]
    assert grid.tolist() == want


SMALL = range(1, 23)
BLOCK_SIDES = range(1, 9)


@pytest.mark.parametrize("B_r", BLOCK_SIDES)
@pytest.mark.parametrize("B_c", BLOCK_SIDES)
def test_causal_closed_forms_equal_the_loops_on_every_small_case(B_r, B_c):
    """n, m up to 22 against blocks up to 8: n < block, n a multiple of the block or not,
    n < m and n > m; d, d_v in {1, 2, 3}; one head and 2 or 3 heads packed."""
    for n in SMALL:
        for m in SMALL:
            for d, d_v, g in ((1, 1, 1), (2, 3, 2), (3, 2, 3)):
                _assert_closed_forms_equal_the_loops(n, m, d, d_v, B_r, B_c, g)
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
        d, d_v, g = (int(x) for x in rng.integers(1, 9, size=3))
        _assert_closed_forms_equal_the_loops(n, m, d, d_v, B_r, B_c, g)
        assert causal._forward_interior_rows(n, B_r, B_c) == _loop_forward_interior_rows(
            n, B_r, B_c
        )
        assert causal._backward_interior_rows(n, B_r, B_c) == _loop_backward_interior_rows(
            n, B_r, B_c
        )


def _loop_saving(n, d, M, which):
    """causal_saving's split as first written (loops over blocks), fractions as Fractions."""
    D = 2 * d
    if which == "forward":
        B_r, B_c = io.flash_forward_blocks(d, M)
        dense = io.flash_forward_count(n, d, M).total
        causal_total = io.flash_forward_count(n, d, M, is_causal=True).total
        interior = D * _loop_forward_interior_rows(n, B_r, B_c)
        diag = D * _loop_forward_kv_rows(n, n, B_r, B_c) - interior
    else:
        B_r, B_c = io.flash_backward_blocks(d, M)
        dense = io.flash_backward_count(n, d, M).total
        causal_total = io.flash_backward_count(n, d, M, is_causal=True).total
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


@pytest.mark.parametrize("n", [10**12, 10**400])
def test_causal_closed_forms_take_constant_time_at_any_n(n):
    """Sums over blocks would never finish here; the floor sums take microseconds, and the
    forward's kept fraction is one half to within the diagonal blocks."""
    start = time.perf_counter()
    forward = io.flash_forward_count(n, 64, 16384, is_causal=True)
    backward = io.flash_backward_count(n, 64, 16384, is_causal=True)
    grouped = io.flash_forward_count(n, 64, 16384, H=8, H_kv=2, enable_gqa=True, is_causal=True)
    saving = io.causal_saving(n, 64, 16384)
    saving_b = io.causal_saving(n, 64, 16384, which="backward")
    intensity = io.arithmetic_intensity(n, 64, 16384, is_causal=True)
    assert time.perf_counter() - start < 1.0
    assert forward.total < io.flash_forward_count(n, 64, 16384).total
    assert backward.total < io.flash_backward_count(n, 64, 16384).total
    assert grouped.total < io.flash_forward_count(n, 64, 16384, H=8, H_kv=2, enable_gqa=True).total
    assert abs(saving.fraction - 0.5) < 1e-6 and abs(saving_b.fraction - 0.5) < 1e-6
    assert saving.interior_words + saving.diagonal_words + saving.other_words == saving.causal
    assert math.isfinite(intensity) and intensity > 0
