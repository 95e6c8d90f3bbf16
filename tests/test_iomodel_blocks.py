"""The blocks of FlashAttention on the machine (attnlib.iomodel.blocks): the block rules are the
largest that fit the working sets and FA1's rule overfills; block masks from element masks and
back, their validation, the grid a pass visits and its exact block sizes; the causal pattern
and its closed-form row sums against brute force."""

import numpy as np
import pytest
from helpers import random_qkv_dO

import attnlib as al
from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel import blocks


def _inputs(n, m, d, d_v, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return random_qkv_dO(rng, n, m, d, d_v, q_scale=scale, k_scale=scale)


def test_block_rules_fit_and_are_largest():
    for d, d_v in [(1, 1), (3, 3), (8, 8), (5, 17), (64, 64)]:
        for M in range(io.flash_backward_min_M(d, d_v=d_v), 12 * d * d + 40 * d + 300, 5):
            r, c = io.flash_backward_blocks(d, M, d_v=d_v)
            assert r == min(c, d)
            assert io.flash_backward_working_set(r, c, d, d_v) <= M
            assert io.flash_backward_working_set(min(c + 1, d), c + 1, d, d_v) > M
        for M in range(io.flash_forward_min_M(d, d_v=d_v), 12 * d * d + 40 * d + 300, 5):
            r, c = io.flash_forward_blocks(d, M, d_v=d_v)
            assert c == min(r, d)
            assert io.flash_forward_working_set(r, c, d, d_v) <= M
            assert io.flash_forward_working_set(r + 1, min(r + 1, d), d, d_v) > M


def test_fa1_rule_overfills_and_the_machine_catches_it():
    for d in (1, 4, 16, 64):
        for M in (d * d, 4 * d * d, 16 * d * d, 64 * d * d, 4 * d * d + 3):
            r, c = io.fa1_blocks(d, M)
            assert c == -(-M // (4 * d)) and r == min(c, d)
            # K_j, V_j, dK_j and dV_j alone take 4·B_c·d >= M words.
            assert io.flash_backward_working_set(r, c, d) > M
    d, M = 4, 64
    Q, K, V, dO = _inputs(32, 32, d, d, seed=5)
    O, lse = al.attention_forward(Q, K, V)
    with pytest.raises(io.CapacityError, match="> M = 64"):
        io.flash_backward(Q, K, V, O, dO, lse, M=M, blocks=io.fa1_blocks(d, M))
    with pytest.raises(io.CapacityError, match="> M = 64"):  # W_f(4, 4) = 40 + 32 + 16 = 88
        io.flash_forward(Q, K, V, M=M, blocks=io.fa1_blocks(d, M))
    # Our blocks at the same M fit, and the closed form says by how much FA1's overfill.
    assert io.flash_backward(Q, K, V, O, dO, lse, M=M)[-1].peak_fast <= M
    assert io.flash_backward_count(32, d, M, blocks=io.fa1_blocks(d, M)).peak_fast > M


@pytest.mark.parametrize("B_r, M, d_v, rows", [(16, 10**4, 8, 16), (16, 100, 8, 6), (4, 3, 8, 1)])
def test_the_d_pass_takes_the_rows_of_dO_and_O_that_fit(B_r, M, d_v, rows):
    assert blocks.d_pass_rows(B_r, M, d_v) == rows
    assert rows == 1 or 2 * rows * d_v <= M


def _block_pattern(mask, B_r, B_c):
    """flash_block_mask by loops: block (i, j) keeps an entry of the element mask."""
    n, m = mask.shape
    T_r, T_c = -(-n // B_r), -(-m // B_c)
    return np.array(
        [
            [mask[i * B_r : (i + 1) * B_r, j * B_c : (j + 1) * B_c].any() for j in range(T_c)]
            for i in range(T_r)
        ]
    )


@pytest.mark.parametrize("n, m, B_r, B_c", [(7, 9, 2, 4), (8, 8, 4, 4), (5, 3, 8, 1), (1, 1, 1, 1)])
def test_block_masks_from_element_masks_and_back(rng, n, m, B_r, B_c):
    mask = rng.random((n, m)) < 0.15
    bm = io.flash_block_mask(mask, (B_r, B_c))
    assert np.array_equal(bm, _block_pattern(mask, B_r, B_c))
    full = io.expand_block_mask(bm, n, m, (B_r, B_c))
    assert full.shape == (n, m) and np.all(full[mask])  # every kept entry stays kept
    assert np.array_equal(io.flash_block_mask(full, (B_r, B_c)), bm)
    assert np.array_equal(blocks.visited_blocks(mask, None, n, m, B_r, B_c), bm)
    some = rng.random(bm.shape) < 0.5
    assert np.array_equal(blocks.visited_blocks(mask, some, n, m, B_r, B_c), bm & some)
    assert blocks.visited_blocks(None, None, n, m, B_r, B_c).all()


def test_a_block_mask_of_the_wrong_kind_is_refused_by_name():
    assert blocks.check_block_mask(None, 8, 8, 4, 4) is None
    with pytest.raises(AttnInputError, match=r"^block_mask must have a boolean dtype"):
        blocks.check_block_mask(np.ones((2, 2)), 8, 8, 4, 4)
    with pytest.raises(
        AttnInputError, match=r"^block_mask must have shape \(T_r, T_c\) = \(2, 3\)"
    ):
        blocks.check_block_mask(np.ones((2, 2), bool), 8, 9, 4, 4)
    with pytest.raises(AttnInputError, match=r"^mask must be a non-empty 2-dimensional boolean"):
        io.flash_block_mask(np.ones(4, bool), (2, 2))


def test_grid_block_sizes_are_exact_at_any_size():
    r, c = blocks.grid_block_sizes((3, 2), 10, 7, 4, 4, 8)
    assert r.tolist() == [4, 4, 2] and c.tolist() == [4, 3] and r.dtype == np.int64
    huge = 2**62
    r, c = blocks.grid_block_sizes((2, 1), huge + 1, 5, huge, 8, 8)
    assert r.dtype == object and r.tolist() == [huge, 1] and c.tolist() == [5]


@pytest.mark.parametrize("g", [1, 2, 3])
@pytest.mark.parametrize(
    "n, m, B_r, B_c", [(8, 8, 4, 4), (7, 11, 3, 2), (13, 5, 4, 3), (5, 9, 8, 2)]
)
def test_the_causal_pattern_and_its_row_sums_against_brute_force(n, m, B_r, B_c, g):
    """Packed row p·g + h holds head h's query at position p, which keeps the keys j <= p."""
    keep = np.repeat(np.tri(n, m, dtype=bool), g, axis=0)  # (g·n, m) packed rows
    pattern = _block_pattern(keep, B_r, B_c)
    assert np.array_equal(blocks.causal_blocks(n, m, B_r, B_c, g), pattern)
    key_sizes = np.diff(np.minimum(np.arange(0, m + B_c, B_c), m))[: pattern.shape[1]]
    row_sizes = np.diff(np.minimum(np.arange(0, g * n + B_r, B_r), g * n))[: pattern.shape[0]]
    assert blocks.causal_key_rows(n, m, B_r, B_c, g) == int((pattern * key_sizes).sum())
    N = int(pattern.any(axis=0).sum())
    visited = pattern[:, :N].copy()
    for j in range(N):  # a key block is visited by every query block from its first to the last
        first = np.argmax(visited[:, j])
        visited[first:, j] = True
    rho = int((visited * row_sizes[:, None]).sum())
    assert blocks.causal_query_rows(n, m, B_r, B_c, g) == (N, rho)
