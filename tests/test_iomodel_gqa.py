"""Grouped-query attention and decoding on the machine (attnlib.iomodel.gqa): grouping against
running the heads one at a time (K and V repeated per head), the reuse factor, decoding's count
and the lower bounds. The simulated runs of every head layout against their closed forms are
in test_iomodel_twins.py."""

import numpy as np
import pytest

import attnlib as al
from attnlib import iomodel as io
from attnlib.iomodel.gqa import decode_count

# (H, H_kv, n, m, d, d_v): multi-head (H_kv = H), multi-query (H_kv = 1), GQA; n = 1.
SHAPES = [
    (1, 1, 1, 1, 1, 1),
    (2, 2, 5, 7, 2, 3),
    (4, 1, 1, 30, 4, 4),
    (4, 2, 7, 9, 3, 2),
    (6, 3, 5, 5, 2, 2),
    (8, 1, 16, 16, 4, 4),
    (4, 1, 33, 20, 8, 8),
    (2, 1, 3, 40, 2, 2),
    (3, 3, 1, 10, 3, 1),
]


def _levels(n, d, d_v):
    lo = io.flash_backward_min_M(d, d_v=d_v)
    return sorted({M for M in (lo, 5 * lo, 6 * d * d + 20 * d, 3 * n * (d + d_v) + 50) if M >= lo})


GRID = [s + (M,) for s in SHAPES for M in _levels(s[2], s[4], s[5])]


@pytest.mark.parametrize("H,H_kv,n,m,d,d_v,M", GRID)
def test_grouping_never_moves_more_and_saves_exactly_the_reuse_factor(H, H_kv, n, m, d, d_v, M):
    """Grouped (``enable_gqa``) against head by head (K, V repeated per query head), from the
    closed forms: the forward's K/V reads shrink by exactly :func:`gqa_kv_reuse`, and neither
    pass moves more; the grouped forward stays above the lower bound."""
    kw = dict(m=m, d_v=d_v, H=H)
    for is_causal in (False, True):
        for count in (io.flash_forward_count, io.flash_backward_count):
            grouped = count(n, d, M, H_kv=H_kv, enable_gqa=True, is_causal=is_causal, **kw)
            assert grouped.total <= count(n, d, M, is_causal=is_causal, **kw).total
    grouped = io.flash_forward_count(n, d, M, H_kv=H_kv, enable_gqa=True, **kw)
    by_head = io.flash_forward_count(n, d, M, **kw)
    kv = {"grouped": grouped.reads - H * n * d, "by head": by_head.reads - H * n * d}
    assert kv["by head"] / kv["grouped"] == io.gqa_kv_reuse(H, H_kv, n, d, M, d_v=d_v)
    if d == d_v:
        assert grouped.total >= io.forward_lower_bound(n, d, M, m=m, H=H, H_kv=H_kv)


def test_heads_one_at_a_time_are_the_schedule_on_repeated_K_and_V():
    """What grouping saves is measured against the same pass without it: K and V repeated g
    times, ``enable_gqa=False``; the results agree, the grouped run reads K, V once a group."""
    rng = np.random.default_rng(3)
    H, H_kv, n, m, d, M = 6, 2, 9, 11, 3, 200
    Q, K, V = rng.standard_normal((H, n, d)), *rng.standard_normal((2, H_kv, m, d))
    O, lse, grouped = io.flash_forward(Q, K, V, M=M, enable_gqa=True)
    g = H // H_kv
    O2, lse2, by_head = io.flash_forward(Q, np.repeat(K, g, 0), np.repeat(V, g, 0), M=M)
    assert np.abs(O - O2).max() <= 1e-12 and np.abs(lse - lse2).max() <= 1e-12
    assert by_head == io.flash_forward_count(n, d, M, m=m, H=H)
    assert grouped.reads < by_head.reads


def test_a_decoding_step_is_the_forward_pass_of_one_query_per_head():
    rng = np.random.default_rng(5)
    q, K, V = (
        rng.standard_normal((4, 8)),
        rng.standard_normal((2, 50, 8)),
        rng.standard_normal((2, 50, 8)),
    )
    o, lse, count = io.flash_forward(q[:, None, :], K, V, M=10**4, enable_gqa=True)
    assert count == decode_count(50, 8, 10**4, H=4, H_kv=2)
    for h in range(4):
        o_ref, l_ref = al.attention_forward(q[h : h + 1], K[h // 2], V[h // 2])
        assert np.abs(o[h, 0] - o_ref[0]).max() <= 1e-12 and abs(lse[h, 0] - l_ref[0]) <= 1e-12


def test_decode_io_is_the_cache_whatever_M():
    # Θ(m·d) for every M: once a query block holds the g heads of a group (B_r >= g), the
    # cache is read once and the count is the trivial bound plus one lse word per head; below
    # that, each K/V block is read ⌈g/B_r⌉ <= g times.
    H, H_kv, d = 8, 2, 64
    for m in (16, 256, 4096):
        for M in (io.flash_forward_min_M(d), 4 * io.flash_forward_min_M(d), 10**4, 10**9):
            bound = io.forward_lower_bound(1, d, M, m=m, H=H, H_kv=H_kv)
            assert bound == H * 2 * d + H_kv * m * 2 * d  # the trivial term decides
            c = decode_count(m, d, M, H=H, H_kv=H_kv)
            B_r, _ = io.flash_forward_blocks(d, M)
            assert bound <= c.total <= (H // H_kv) * bound + H
            assert (c.total == bound + H) == (B_r >= H // H_kv)


def test_reuse_factor_is_g_for_short_sequences_and_tends_to_one():
    M, d = 10**5, 64
    B_r, _ = io.flash_forward_blocks(d, M)
    assert io.gqa_kv_reuse(8, 1, 1, d, M) == 8
    assert io.gqa_kv_reuse(8, 1, B_r // 8, d, M) == 8
    long = [io.gqa_kv_reuse(8, 1, n, d, M) for n in (4 * B_r, 64 * B_r, 1024 * B_r)]
    assert all(r == 1 for r in long)
    assert 1 < io.gqa_kv_reuse(8, 1, B_r // 3, d, M) < 8


def test_gqa_lower_bound_at_extreme_sizes():
    """A huge M leaves the trivial term (every word read or written once); the bound is an
    exact int at any size."""
    H, H_kv, n, d = 8, 2, 64, 8
    trivial = (H * n + 2 * H_kv * n) * d + H * n * d
    assert io.forward_lower_bound(n, d, 10**400, H=H, H_kv=H_kv) == trivial
    assert isinstance(io.forward_lower_bound(64, 8, 4096, H=10**400, H_kv=1), int)


def test_runs_of_many_heads_are_refused_when_their_steps_add_up_past_the_budget():
    """Each head's pass is within the budget, but 40 of them are not."""
    Q, K = np.ones((40, 200, 2)), np.ones((1, 200, 2))
    with pytest.raises(al.AttnInputError, match="flash_forward would take 1600000.*fewer heads"):
        io.flash_forward(Q, np.repeat(K, 40, 0), np.repeat(K, 40, 0), M=11)
    O, lse = np.ones((40, 200, 2)), np.zeros((40, 200))
    with pytest.raises(al.AttnInputError, match="flash_backward would take"):
        io.flash_backward(Q, np.repeat(K, 40, 0), np.repeat(K, 40, 0), O, O, lse, M=18)
    # one head alone runs: 200 × 200 steps
    assert io.flash_forward(Q[0], K[0], K[0], M=11)[2] == io.flash_forward_count(200, 2, 11)
