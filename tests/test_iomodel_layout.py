"""What a FlashAttention pass on the machine runs over (attnlib.iomodel.layout): a group's
query heads packed position by position, the blocks a pass visits, the scores a block drops,
and the probabilities recomputed from lse, each against a direct construction."""

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.iomodel import blocks, layout


@pytest.mark.parametrize("H, g", [(1, 1), (4, 2), (6, 3), (4, 4), (3, 1)])
def test_packing_puts_query_p_of_head_h_at_row_p_g_plus_h_of_its_group(H, g):
    n, d = 5, 3
    X = np.arange(H * n * d, dtype=float).reshape(H, n, d)
    packed = layout.pack_heads(X, g)
    assert packed.shape == (H * n, d)
    for h in range(H):
        group, within = divmod(h, g)
        for p in range(n):
            assert np.array_equal(packed[group * g * n + p * g + within], X[h, p])
    assert np.array_equal(layout.unpack_heads(packed, g, H), X)
    assert np.array_equal(layout.unpack_heads(layout.pack_heads(X[..., 0], g), g, H), X[..., 0])


def test_outputs_keep_the_layout_they_were_given_in():
    a, b = np.zeros((1, 3, 2)), np.ones((1, 3))
    assert all(x is y for x, y in zip(layout.as_given(True, a, b), (a, b), strict=True))
    two_d = layout.as_given(False, a, b)
    assert two_d[0].shape == (3, 2) and two_d[1].shape == (3,)


def test_kept_blocks_are_the_flagged_ranges_in_order():
    ranges = [(0, 4), (4, 8), (8, 10)]
    assert layout.kept_blocks(ranges, [True, False, True]) == [(0, 4), (8, 10)]
    assert layout.kept_blocks(ranges, np.zeros(3, dtype=bool)) == []
    with pytest.raises(ValueError):
        layout.kept_blocks(ranges, [True, True])


@pytest.mark.parametrize("g", [1, 2, 3])
def test_a_causal_block_drops_the_keys_after_each_packed_rows_position(g):
    rows, keys = (2 * g, 5 * g), (1, 6)  # a block of packed rows and keys
    base = (0, 0)
    s = np.zeros((rows[1] - rows[0], keys[1] - keys[0]))
    layout.drop_masked(s, None, True, g, rows, keys, base)
    position = np.arange(*rows)[:, None] // g
    assert np.array_equal(np.isneginf(s), np.arange(*keys)[None, :] > position)


def test_an_element_mask_drops_what_it_does_not_keep_at_the_blocks_offset(rng):
    mask = rng.random((6, 8)) < 0.5
    base = (12, 0)  # the group starts at packed row 12
    rows, keys = (14, 17), (3, 8)
    s = np.zeros((3, 5))
    layout.drop_masked(s, mask, False, 1, rows, keys, base)
    assert np.array_equal(np.isneginf(s), ~mask[2:5, 3:8])


def test_probabilities_are_exp_of_the_scores_minus_lse_in_place(rng):
    s = rng.standard_normal((6, 4))
    lse = np.log(np.exp(s).sum(axis=1)) + 0.5
    want = np.exp(s - lse[:, None])
    layout.probabilities(s, lse, np.zeros(6), 2, (0, 6), (0, 0))
    assert np.allclose(s, want, rtol=1e-15, atol=0)


def test_an_lse_below_a_logit_is_refused_naming_the_row_within_its_head():
    g = 2
    s = np.zeros((6, 3))  # packed rows 0..5: positions 0, 0, 1, 1, 2, 2 of heads 0, 1
    lse = np.full(6, np.log(3.0))
    lse[5] = -5.0  # head 1's query at position 2
    with pytest.raises(AttnInputError, match=r"lse.*row 2\b"):
        layout.probabilities(s, lse, np.zeros(6), g, (0, 6), (0, 0))


def test_pass_setup_refuses_mask_with_is_causal_and_masks_of_several_heads():
    Q, V = np.zeros((1, 4, 2)), np.zeros((1, 5, 2))
    mask = np.ones((4, 5), dtype=bool)
    with pytest.raises(AttnInputError, match=r"^mask and is_causal=True cannot be given"):
        layout.pass_setup("flash_forward", Q, V, 1, 100, None, True, mask, None, None)
    Q2, V2 = np.zeros((2, 4, 2)), np.zeros((2, 5, 2))
    with pytest.raises(AttnInputError, match=r"^mask is for one head, Q \(n, d\): got H = 2"):
        layout.pass_setup("flash_forward", Q2, V2, 1, 100, None, False, mask, None, None)


def test_a_causal_pass_visits_a_prefix_of_key_blocks_per_query_block():
    n = m = 8
    Q, V = np.zeros((1, n, 2)), np.zeros((1, m, 2))
    out = layout.pass_setup("flash_forward", Q, V, 1, 10**4, None, True, None, None, (2, 2))
    M, tau, is_causal, mask, B_r, B_c, keep = out
    assert (M, is_causal, mask, B_r, B_c) == (10**4, True, None, 2, 2)
    assert tau == pytest.approx(1 / np.sqrt(2))
    assert np.array_equal(keep, np.tri(4, 4, dtype=bool))


def test_count_setup_defaults_H_kv_to_H_and_refuses_a_block_mask_of_several_heads():
    rule = blocks.flash_forward_blocks
    out = layout.count_setup(8, 2, 10**4, None, None, 4, None, False, False, (2, 2), None, rule)
    n, d, M, m, d_v, B_r, B_c, H_kv, g, is_causal, bm = out
    assert (n, d, m, d_v, B_r, B_c, H_kv, g, is_causal, bm) == (8, 2, 8, 2, 2, 2, 4, 1, False, None)
    two_by_two = np.ones((4, 4), dtype=bool)
    with pytest.raises(AttnInputError, match=r"^block_mask is for one head"):
        layout.count_setup(8, 2, 10**4, None, None, 2, None, False, False, (2, 2), two_by_two, rule)
