"""Causal FlashAttention on the machine: numerics against the exact core with a causal mask,
simulated counts equal to the closed forms on a grid, the causal lower bound, and the
constant saved."""

import numpy as np
import pytest
from helpers import assert_close as _close
from helpers import random_qkv_dO

import attnlib as al
from attnlib import iomodel as io

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
