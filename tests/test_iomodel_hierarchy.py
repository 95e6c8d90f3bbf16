"""The three-level machine (HBM ⊃ L2 ⊃ on-chip): the replayed counts equal the closed forms on
a grid of (n, m, d, d_v, M, M_L2), the L2↔on-chip words equal the two-level count, the L2
never overfills, and the numbers the roofline section quotes."""

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib import machines as mc
from attnlib.iomodel import hierarchy as hy

# (n, m, d, d_v): n = 1, n ≠ m, d_v ≠ d, sizes that the blocks do not divide.
SHAPES = [(1, 1, 1, 1), (5, 7, 2, 2), (16, 16, 4, 4), (33, 20, 4, 3), (48, 48, 8, 8)]


def _grid():
    out = []
    for n, m, d, d_v in SHAPES:
        lo = io.flash_backward_min_M(d, d_v=d_v)
        for M in sorted({lo, 3 * lo, 6 * d * d + 20 * d}):
            row = 2 * d + d_v + 2  # words of one pinned row, the larger of the two passes
            for extra in (0, row - 1, 3 * row, 9 * row, 40 * row, (n + m) * row + M):
                out.append((n, m, d, d_v, M, M + extra))
    return out


GRID = _grid()


def _inputs(n, m, d, d_v, seed):
    rng = np.random.default_rng(seed)
    Q, K = rng.standard_normal((n, d)), rng.standard_normal((m, d))
    V, dO = rng.standard_normal((m, d_v)), rng.standard_normal((n, d_v))
    return Q, K, V, dO


def test_grid_is_large_enough():
    assert len(GRID) >= 30
    assert len({(n, m, d, M, M_l2) for n, m, d, _, M, M_l2 in GRID}) >= 30


@pytest.mark.parametrize("n,m,d,d_v,M,M_l2", GRID)
def test_forward_replay_equals_closed_form(n, m, d, d_v, M, M_l2):
    Q, K, V, _ = _inputs(n, m, d, d_v, n + 7 * m + M)
    if M < io.flash_forward_min_M(d, d_v=d_v):
        pytest.skip("below the forward's minimum")
    O, lse, count, peak = hy.flash_forward_three_level(Q, K, V, M=M, M_l2=M_l2)
    assert count == hy.flash_forward_three_level_count(n, d, M, M_l2, m=m, d_v=d_v)
    assert count.onchip == io.flash_forward_count(n, d, M, m=m, d_v=d_v)
    R = count.resident_rows
    assert peak <= M_l2 and peak >= R * (d + d_v)
    O_ref, lse_ref = al.attention_forward(Q, K, V)
    assert np.allclose(O, O_ref, atol=1e-12, rtol=0) and np.allclose(lse, lse_ref, atol=1e-12)


@pytest.mark.parametrize("n,m,d,d_v,M,M_l2", GRID)
def test_backward_replay_equals_closed_form(n, m, d, d_v, M, M_l2):
    Q, K, V, dO = _inputs(n, m, d, d_v, n + 5 * m + M)
    O, lse = al.attention_forward(Q, K, V)
    dQ, dK, dV, count, peak = hy.flash_backward_three_level(Q, K, V, O, dO, lse, M=M, M_l2=M_l2)
    assert count == hy.flash_backward_three_level_count(n, d, M, M_l2, m=m, d_v=d_v)
    assert count.onchip == io.flash_backward_count(n, d, M, m=m, d_v=d_v)
    assert peak <= M_l2 and peak >= count.resident_rows * (2 * d + d_v + 2)
    for got, ref in zip((dQ, dK, dV), al.attention_backward(Q, K, V, O, dO, lse), strict=True):
        assert np.allclose(got, ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_no_l2_is_the_two_level_model_and_a_full_l2_reads_each_input_once(which):
    n, d, M = 64, 8, 900
    count = (
        hy.flash_forward_three_level_count
        if which == "forward"
        else (hy.flash_backward_three_level_count)
    )
    two = (io.flash_forward_count if which == "forward" else io.flash_backward_count)(n, d, M)
    none = count(n, d, M, M)
    assert none.resident_rows == 0
    assert (none.hbm_reads, none.hbm_writes) == (two.reads, two.writes)
    full = count(n, d, M, M + 10 * n * (3 * d + 2))
    assert full.resident_rows == n
    if which == "forward":  # Q, K, V read once; O and lse written once
        assert (full.hbm_reads, full.hbm_writes) == (3 * n * d, n * (d + 1))
    else:  # Q, K, V, O, dO, lse read once; D, dQ, dK, dV written once
        assert (full.hbm_reads, full.hbm_writes) == (5 * n * d + n, n + 3 * n * d)


def test_resident_rows_grow_in_whole_blocks_and_stop_at_n():
    n, d, M = 100, 4, 300
    B_c = io.flash_forward_blocks(d, M)[1]
    rows = [hy._resident_rows(n, d, M, M + k) for k in range(0, 2000, 7)]
    assert all(r % B_c == 0 or r == n for r in rows)
    assert rows == sorted(rows) and rows[0] == 0 and rows[-1] == n


def test_l2_absorption_of_the_presets():
    """The numbers the roofline section quotes: one head's K, V fit every preset's L2 up to
    n = 16k at d = 128; shared among the heads in flight, the H100 and A100 L2 absorb about
    half of the forward's re-streaming at n = 64k, the MI300X's 256 MiB all of it."""
    for device in mc.GPUS:
        for d in (64, 128):
            for n in (4096, 16384, 65536):
                one = hy.l2_absorption(device, n, d)
                shared = hy.l2_absorption(device, n, d, shared=True)
                assert one.floor <= one.three_level <= one.two_level
                assert 0.0 <= shared.fraction <= one.fraction <= 1.0
                if n <= 16384:
                    assert one.fraction == 1.0
    h100 = hy.l2_absorption(mc.H100_SXM5, 65536, 128, shared=True)
    assert 0.4 < h100.fraction < 0.6
    assert hy.l2_absorption(mc.MI300X, 65536, 128, shared=True).fraction == 1.0


def test_heads_sharing_l2_counts_a_window_of_blocks():
    # One block per head (n <= B_r): every SM runs a different head.
    assert hy.heads_sharing_l2(mc.H100_SXM5, 16, 64) == mc.H100_SXM5.sms
    # Many blocks per head: the SMs' window spans two heads at most.
    assert hy.heads_sharing_l2(mc.H100_SXM5, 2**22, 64) == 2
    # the word size sets the on-chip M, so the blocks and the window: float32 halves M
    assert hy.heads_sharing_l2(mc.H100_SXM5, 2**22, 64, dtype="float32") == 2
    with pytest.raises(AttnInputError, match="^dtype must be one of"):
        hy.heads_sharing_l2(mc.H100_SXM5, 16, 64, dtype="bf16")


def test_bad_arguments():
    with pytest.raises(AttnInputError, match="M_l2"):
        hy.flash_forward_three_level_count(16, 4, 120, 119)
    with pytest.raises(AttnInputError, match="which"):
        hy._resident_rows(16, 4, 120, 400, which="sideways")
    with pytest.raises(AttnInputError, match="device"):
        hy.l2_absorption("H100", 4096, 64)
    cpu = mc.Device(name="cpu", bandwidth=1e10, peak_bfloat16=None, peak_float32=1e11)
    with pytest.raises(AttnInputError, match="cache|shared memory"):
        hy.l2_absorption(cpu, 4096, 64)


@pytest.mark.parametrize("which", ["forward", "backward"])
def test_given_blocks_replay_equals_closed_form(which):
    n, m, d, d_v, M = 40, 36, 4, 3, 400
    Q, K, V, dO = _inputs(n, m, d, d_v, 3)
    blocks = (6, 5) if which == "forward" else (5, 6)
    for M_l2 in (M, M + 3 * 5 * 7, M + 3 * 6 * 13, M + 10**4):
        if which == "forward":
            *_, count, peak = hy.flash_forward_three_level(Q, K, V, M=M, M_l2=M_l2, blocks=blocks)
            want = hy.flash_forward_three_level_count(n, d, M, M_l2, m=m, d_v=d_v, blocks=blocks)
            two = io.flash_forward_count(n, d, M, m=m, d_v=d_v, blocks=blocks)
        else:
            O, lse = al.attention_forward(Q, K, V)
            *_, count, peak = hy.flash_backward_three_level(
                Q, K, V, O, dO, lse, M=M, M_l2=M_l2, blocks=blocks
            )
            want = hy.flash_backward_three_level_count(n, d, M, M_l2, m=m, d_v=d_v, blocks=blocks)
            two = io.flash_backward_count(n, d, M, m=m, d_v=d_v, blocks=blocks)
        assert count == want and count.onchip == two and peak <= M_l2
    rule = hy.flash_forward_three_level_count(n, d, M, M + 10**4, m=m, d_v=d_v)
    assert rule != hy.flash_forward_three_level_count(
        n, d, M, M + 10**4, m=m, d_v=d_v, blocks=(6, 5)
    )
    with pytest.raises(AttnInputError, match="blocks"):
        hy.flash_forward_three_level_count(n, d, 60, 600, blocks=(6, 5))


def test_l2_absorption_at_real_tiles():
    """FlashAttention-2's forward tiles at d = 128 on the H100 (128 × 64): more query blocks
    per head, so fewer heads share the L2, and it absorbs all the K/V re-streaming up to
    n = 16384; the HBM intensity is then far above the balance."""
    h = mc.H100_SXM5
    assert hy.heads_sharing_l2(h, 16384, 128, blocks=(128, 64)) == 3  # T_r = 128
    assert hy.heads_sharing_l2(h, 16384, 128) == 6  # the rule's B_r = 557: T_r = 30
    with pytest.raises(AttnInputError, match=r"blocks=\(1024, 1024\)"):
        hy.heads_sharing_l2(h, 16384, 128, blocks=(1024, 1024))
    for n in (4096, 16384):
        assert hy.l2_absorption(h, n, 128, shared=True, blocks=(128, 64)).fraction == 1.0
    big = hy.l2_absorption(h, 65536, 128, shared=True, blocks=(128, 64))
    assert 0.7 < big.fraction < 0.8
    M = h.onchip_words("bfloat16")
    share = h.llc_words("bfloat16") // 3
    c = hy.flash_forward_three_level_count(16384, 128, M, share, blocks=(128, 64))
    flops = io.attention_flops(16384, 128)
    assert c.hbm_total == 16384 * 128 * 3 + 16384 * 129  # Q, K, V read once, O and lse written
    assert flops / c.hbm_total > 20 * mc.machine_balance(h, "bfloat16")
    assert round(flops / c.onchip.total) == 254  # the SMs still see the two-level intensity


def _forward_loads(n, d, M, seed):
    """The (array, row) reads the L2 sees in the forward run, in order."""
    Q, K, V, _ = _inputs(n, n, d, d, seed)
    *_, mem = io.flash_forward(Q, K, V, M=M, record=True)
    return [(op.name, r) for op in mem.log if op.op == "load" for r in range(*op.rows)]


def _belady_misses(accesses, capacity):
    """Misses of Belady's MIN (evict the item whose next use is furthest) with room for
    ``capacity`` items: the fewest any cache of that size can have on this sequence."""
    next_use, last = [0] * len(accesses), {}
    for t in range(len(accesses) - 1, -1, -1):
        next_use[t] = last.get(accesses[t], len(accesses))
        last[accesses[t]] = t
    cache, misses = {}, 0
    for t, a in enumerate(accesses):
        if a not in cache:
            misses += 1
            if len(cache) >= capacity:
                del cache[max(cache, key=cache.get)]
        cache[a] = next_use[t]
    return misses


@pytest.mark.parametrize("n,d,M", [(64, 4, 120), (48, 4, 200), (64, 2, 60)])
def test_pinning_is_within_M_plus_one_block_per_pass_of_belady(n, d, M):
    """Pinning is not optimal: Belady's MIN on the same reads and the same L2 reads fewer
    words. But by less than M + one K/V block per pass after the first (MIN holds at most
    M_L2 words when a pass starts; pinning all but M + less than a block of them). With
    d_v = d every row read is d words, so MIN counts rows of capacity ⌊M_L2/d⌋."""
    accesses = _forward_loads(n, d, M, n + M)
    B_r, B_c = io.flash_forward_blocks(d, M)
    T_r, block = -(-n // B_r), B_c * 2 * d
    gaps = []
    for extra in range(0, n * 2 * d + block + 1, block // 2):
        M_l2 = M + extra
        pin = hy.flash_forward_three_level_count(n, d, M, M_l2).hbm_reads
        best = _belady_misses(accesses, M_l2 // d) * d
        assert best <= pin < best + (T_r - 1) * (M + block) + 1
        gaps.append(pin - best)
    assert max(gaps) > (T_r - 1) * block  # more than one block per pass: not "optimal"
    assert gaps[-1] == 0  # everything pinned: each input read once, as MIN
