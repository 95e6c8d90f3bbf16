"""Grouped-query attention and decoding on the machine: numerics against the exact core head
by head, counts equal to the closed forms on a grid, lower bounds, reuse and intensity."""

import numpy as np
import pytest

import attnlib as al
from attnlib import iomodel as io

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


def _reference(Q, K, V, dO):
    """Exact attention head by head, head h against K[h // g]; dK, dV summed over a group."""
    H, n, _ = Q.shape
    g = H // K.shape[0]
    O = np.empty((H, n, V.shape[2]))
    lse = np.empty((H, n))
    dQ, dK, dV = np.empty_like(Q), np.zeros_like(K), np.zeros_like(V)
    for h in range(H):
        O[h], lse[h] = al.attention_forward(Q[h], K[h // g], V[h // g])
        dq, dk, dv = al.attention_backward(Q[h], K[h // g], V[h // g], O[h], dO[h], lse[h])
        dQ[h] = dq
        dK[h // g] += dk
        dV[h // g] += dv
    return O, lse, (dQ, dK, dV)


def test_grid_size():
    assert len(GRID) >= 30


@pytest.mark.parametrize("H,H_kv,n,m,d,d_v,M", GRID)
def test_gqa_counts_equal_closed_forms_and_outputs_equal_exact(H, H_kv, n, m, d, d_v, M):
    rng = np.random.default_rng(H + 3 * n + 7 * m + 31 * d + M)
    Q = rng.standard_normal((H, n, d))
    K, V = rng.standard_normal((H_kv, m, d)), rng.standard_normal((H_kv, m, d_v))
    dO = rng.standard_normal((H, n, d_v))
    O_ref, lse_ref, grads_ref = _reference(Q, K, V, dO)
    kw = dict(m=m, d_v=d_v)
    counts = {}
    for grouped in (True, False):
        O, lse, c = io.gqa_flash_forward(Q, K, V, M=M, grouped=grouped)
        assert np.abs(O - O_ref).max() <= 1e-12 and np.abs(lse - lse_ref).max() <= 1e-12
        assert c == io.gqa_flash_forward_count(H, H_kv, n, d, M, grouped=grouped, **kw)
        assert c.peak_fast <= M
        *grads, cb = io.gqa_flash_backward(Q, K, V, O_ref, dO, lse_ref, M=M, grouped=grouped)
        for got, want in zip(grads, grads_ref, strict=True):
            assert np.abs(got - want).max() <= 1e-12 * max(1.0, np.abs(want).max())
        assert cb == io.gqa_flash_backward_count(H, H_kv, n, d, M, grouped=grouped, **kw)
        assert cb.peak_fast <= M
        counts[grouped] = (c, cb)
    # grouping never moves more; the K/V reads shrink by exactly the reuse factor
    assert counts[True][0].total <= counts[False][0].total
    assert counts[True][1].total <= counts[False][1].total
    kv = {g: counts[g][0].reads - H * n * d for g in (True, False)}
    assert kv[False] / kv[True] == io.gqa_kv_reuse(H, H_kv, n, d, M, d_v=d_v)
    if d == d_v:
        bound = io.gqa_lower_bound(H, H_kv, n, d, M, m=m)
        assert counts[True][0].total >= bound

    # a decoding step with the first query of each head is row 0 of the full pass
    o, ls, c = io.decode_forward(Q[:, 0, :], K, V, M=M)
    assert np.abs(o - O_ref[:, 0, :]).max() <= 1e-12
    assert np.abs(ls - lse_ref[:, 0]).max() <= 1e-12
    assert c == io.decode_count(m, d, M, d_v=d_v, H=H, H_kv=H_kv)
    assert c.total >= io.decode_lower_bound(m, d, d_v=d_v, H=H, H_kv=H_kv)


def test_decode_matches_exact_attention_of_one_query():
    rng = np.random.default_rng(5)
    q, K, V = (
        rng.standard_normal((4, 8)),
        rng.standard_normal((2, 50, 8)),
        rng.standard_normal((2, 50, 8)),
    )
    o, lse, _ = io.decode_forward(q, K, V, M=10**4)
    for h in range(4):
        o_ref, l_ref = al.attention_forward(q[h : h + 1], K[h // 2], V[h // 2])
        assert np.abs(o[h] - o_ref[0]).max() <= 1e-12 and abs(lse[h] - l_ref[0]) <= 1e-12


def test_decode_io_is_the_cache_whatever_M():
    # Θ(m·d) for every M: once a query block holds the g heads of a group (B_r >= g), the
    # cache is read once and the count is the trivial bound plus one lse word per head; below
    # that, each K/V block is read ⌈g/B_r⌉ <= g times.
    H, H_kv, d = 8, 2, 64
    for m in (16, 256, 4096):
        bound = io.decode_lower_bound(m, d, H=H, H_kv=H_kv)
        for M in (io.flash_forward_min_M(d), 4 * io.flash_forward_min_M(d), 10**4, 10**9):
            c = io.decode_count(m, d, M, H=H, H_kv=H_kv)
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


def test_flops_and_intensity():
    assert io.attention_flops(4, 2) == 2 * 16 * 4
    assert io.attention_flops(4, 2, which="backward") == 2 * 16 * 10
    assert io.attention_flops(4, 2, kept=io.causal_score_count(4)) == 2 * 10 * 4
    c = io.flash_forward_count(128, 16, 5000)
    assert io.arithmetic_intensity(128, 16, 5000) == io.attention_flops(128, 16) / c.total
    # decode stays near 2 flops per word at every M; prefill grows with M
    prev = 0.0
    for M in (10**3, 10**4, 10**5, 10**6):
        it = io.prefill_decode_intensity(4096, 64, M)
        assert 1.9 < it.decode < 2.0
        assert it.prefill > prev and it.prefill > it.decode
        prev = it.prefill
    # causal prefill: half the useful flops over about half the words
    full = io.arithmetic_intensity(1024, 64, 10**5)
    causal = io.arithmetic_intensity(1024, 64, 10**5, causal=True)
    kept = io.causal_score_count(1024)
    want = (
        io.attention_flops(1024, 64, kept=kept)
        / io.flash_forward_causal_count(1024, 64, 10**5).total
    )
    assert causal == want and 0.5 * full < causal < full


def test_decode_names_q_not_the_internal_Q():
    """decode_forward passes q (H, d) on as Q (H, 1, d); its refusals name q."""
    K, V = np.ones((2, 5, 4)), np.ones((2, 5, 3))
    with pytest.raises(al.AttnInputError, match="q's head count H = 3"):
        io.decode_forward(np.ones((3, 4)), K, V, M=4096)
    with pytest.raises(al.AttnInputError, match="like q,"):
        io.decode_forward(np.ones((2, 3)), K, V, M=4096)
    with pytest.raises(al.AttnInputError, match="the argument q"):
        io.decode_forward(np.full((2, 4), 1e200), K * 1e200, V, M=4096)


def test_gqa_lower_bound_at_extreme_sizes():
    """A huge M gives the (finite) trivial bound instead of blaming n, m and d; a bound
    beyond the float range names H among the culprits."""
    H, H_kv, n, d = 8, 2, 64, 8
    trivial = (H * n + 2 * H_kv * n) * d + H * n * d
    assert io.gqa_lower_bound(H, H_kv, n, d, 10**400) == trivial
    with pytest.raises(al.AttnInputError, match="H, n, m or d is too large"):
        io.gqa_lower_bound(10**400, 1, 64, 8, 4096)
    # unchanged where both expressions fit
    g = H // H_kv
    want = max(trivial, H_kv * min(g * n * n * d * d / 4096, g * n * n * d / 64))
    assert io.gqa_lower_bound(H, H_kv, n, d, 4096) == pytest.approx(want, rel=1e-15)


def test_gqa_runs_are_refused_when_their_steps_add_up_past_the_budget():
    """Each head's run is within the budget, but 40 of them are not."""
    Q, K = np.ones((40, 200, 2)), np.ones((1, 200, 2))
    with pytest.raises(al.AttnInputError, match="gqa_flash_forward would take 1600000"):
        io.gqa_flash_forward(Q, K, K, M=11, grouped=False)
    O, lse = np.ones((40, 200, 2)), np.zeros((40, 200))
    with pytest.raises(al.AttnInputError, match="gqa_flash_backward would take"):
        io.gqa_flash_backward(Q, K, K, O, O, lse, M=18, grouped=False)
    # one head alone runs: 200 × 200 steps
    assert io.flash_forward(Q[0], K[0], K[0], M=11)[2] == io.flash_forward_count(200, 2, 11)
