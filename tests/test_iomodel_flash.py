"""FlashAttention and standard attention on the machine: numerics against attnlib.exact,
simulated counts equal to the closed forms, capacity, block sparsity and asymptotics."""

import numpy as np
import pytest
from helpers import assert_close as _close
from helpers import random_qkv_dO

import attnlib as al
from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.nbtools import loglog_slope

# (n, m, d, d_v): n = 1, n ≠ m, d_v ≠ d, sizes not divisible by the blocks, d_v > 2d + 2
# (where the D pass needs its own smaller row block).
SHAPES = [
    (1, 1, 1, 1),
    (2, 3, 1, 1),
    (7, 7, 3, 3),
    (13, 9, 5, 2),
    (31, 31, 2, 2),
    (40, 33, 8, 8),
    (20, 20, 1, 8),
    (64, 64, 16, 16),
    (100, 100, 4, 4),
    (150, 131, 32, 32),
    (257, 257, 1, 1),
    (300, 300, 64, 64),
    (300, 211, 7, 11),
]


def _levels(n, m, d, d_v):
    """M from the backward's minimum to beyond n·(d + d_v), thinned where the simulation would
    take more than ~3000 block steps (the closed forms are checked there by the asymptotics)."""
    lo = io.flash_backward_min_M(d, d_v=d_v)
    out = []
    for M in sorted({lo, 5 * lo, 6 * d * d + 20 * d, n * d + 1, 3 * n * (d + d_v) + 50}):
        if M < lo:
            continue
        br, bc = io.flash_backward_blocks(d, M, d_v=d_v)
        fr, fc = io.flash_forward_blocks(d, M, d_v=d_v)
        steps = -(-n // br) * -(-m // bc) + 3 * -(-n // fr) * -(-m // fc)
        if steps <= 3000:
            out.append(M)
    return out


GRID = [(n, m, d, d_v, M) for (n, m, d, d_v) in SHAPES for M in _levels(n, m, d, d_v)]


def _inputs(n, m, d, d_v, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return random_qkv_dO(rng, n, m, d, d_v, q_scale=scale, k_scale=scale)


def test_grid_covers_the_required_ranges():
    assert len(GRID) >= 30
    ns = [g[0] for g in GRID]
    ds = [g[2] for g in GRID]
    assert min(ns) == 1 and max(ns) == 300 and min(ds) == 1 and max(ds) == 64
    assert any(M == io.flash_backward_min_M(d, d_v=dv) for (_, _, d, dv, M) in GRID)
    assert any(M > n * (d + dv) for (n, _, d, dv, M) in GRID)


@pytest.mark.parametrize("n,m,d,d_v,M", GRID)
def test_counts_equal_closed_forms_and_outputs_equal_exact(n, m, d, d_v, M):
    Q, K, V, dO = _inputs(n, m, d, d_v, seed=n + 7 * m + 31 * d + M)
    O_ref, lse_ref = al.attention_forward(Q, K, V)
    grads_ref = al.attention_backward(Q, K, V, O_ref, dO, lse_ref)
    kw = dict(m=m, d_v=d_v)

    O, lse, c = io.flash_forward(Q, K, V, M=M)
    _close(O, O_ref)
    _close(lse, lse_ref)
    assert c == io.flash_forward_count(n, d, M, **kw)
    assert c.peak_fast <= M

    *grads, c = io.flash_backward(Q, K, V, O_ref, dO, lse_ref, M=M)
    for g, r in zip(grads, grads_ref, strict=True):
        _close(g, r)
    assert c == io.flash_backward_count(n, d, M, **kw)
    assert c.peak_fast <= M

    O, lse, c = io.standard_forward(Q, K, V, M=M)
    _close(O, O_ref)
    _close(lse, lse_ref)
    assert c == io.standard_forward_count(n, d, M, **kw)
    assert c.peak_fast <= M

    *grads, c = io.standard_backward(Q, K, V, O_ref, dO, lse_ref, M=M)
    for g, r in zip(grads, grads_ref, strict=True):
        _close(g, r)
    assert c == io.standard_backward_count(n, d, M, **kw)
    assert c.peak_fast <= M


@pytest.mark.parametrize("n,m,d,d_v", [(1, 1, 1, 1), (9, 5, 3, 2), (17, 23, 4, 4)])
def test_forward_schedules_run_at_the_forward_minimum(n, m, d, d_v):
    M = io.flash_forward_min_M(d, d_v=d_v)
    assert M == 2 * (d + d_v) + 3
    Q, K, V, _ = _inputs(n, m, d, d_v, seed=3)
    O_ref, lse_ref = al.attention_forward(Q, K, V)
    for run, count in [
        (io.flash_forward, io.flash_forward_count),
        (io.standard_forward, io.standard_forward_count),
    ]:
        O, lse, c = run(Q, K, V, M=M)
        _close(O, O_ref)
        _close(lse, lse_ref)
        assert c == count(n, d, M, m=m, d_v=d_v)
        assert c.peak_fast <= M
    lo_b = io.flash_backward_min_M(d, d_v=d_v)
    assert lo_b == M + (d + d_v) + d + 1
    with pytest.raises(AttnInputError, match=f"M must be at least {lo_b} words"):
        io.flash_backward(Q, K, V, O_ref, np.ones_like(O_ref), lse_ref, M=M)


def test_counts_by_hand():
    # n = m = 8, d = d_v = 2, M = 40: forward blocks (4, 2) since W_f(4, 2) = 24 + 8 + 8 = 40.
    assert io.flash_forward_blocks(2, 40) == (4, 2)
    c = io.flash_forward_count(8, 2, 40)
    # Q once (16) + K, V once per query block (2 · 8 · 4); writes O and lse (8 · 3).
    assert (c.reads, c.writes, c.peak_fast) == (16 + 2 * 32, 24, 40)
    # Backward: W_b(2, 2) = 2·2·4 + 2·8 + 2·4 = 40, so M = 40 is the first with B_c = B_r = 2.
    assert io.flash_backward_working_set(2, 2, 2) == 40
    assert io.flash_backward_blocks(2, 39) == (1, 1)
    assert io.flash_backward_blocks(2, 40) == (2, 2)
    b = io.flash_backward_count(8, 2, 40)
    # D pass 2·8·2; K, V once 8·4; 4 key blocks × 8 rows × (Q, dO, dQ 2 each + lse, D),
    # minus the first visit's dQ (8·2). Writes: D 8; dK, dV 32; dQ 4 × 16.
    assert (b.reads, b.writes, b.peak_fast) == (32 + 32 + 4 * 8 * 8 - 16, 8 + 32 + 64, 40)


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


def test_explicit_blocks_are_used_as_given():
    Q, K, V, dO = _inputs(19, 14, 3, 5, seed=11)
    O, lse = al.attention_forward(Q, K, V)
    for blocks in [(1, 1), (5, 3), (19, 14), (4, 7)]:
        o, ls, c = io.flash_forward(Q, K, V, M=10**6, blocks=blocks)
        _close(o, O)
        assert c == io.flash_forward_count(19, 3, 10**6, m=14, d_v=5, blocks=blocks)
        *g, c = io.flash_backward(Q, K, V, O, dO, lse, M=10**6, blocks=blocks)
        for a, b in zip(g, al.attention_backward(Q, K, V, O, dO, lse), strict=True):
            _close(a, b)
        assert c == io.flash_backward_count(19, 3, 10**6, m=14, d_v=5, blocks=blocks)


def test_large_logits_are_stable():
    Q, K, V, dO = _inputs(24, 17, 4, 4, seed=2, scale=70.0)  # logits up to ~1e4
    O_ref, lse_ref = al.attention_forward(Q, K, V)
    assert np.abs(lse_ref).max() > 1e3
    for run in (io.flash_forward, io.standard_forward):
        O, lse, _ = run(Q, K, V, M=200)
        assert np.isfinite(O).all()
        _close(O, O_ref)
        _close(lse, lse_ref)
    *g, _ = io.flash_backward(Q, K, V, O_ref, dO, lse_ref, M=200)
    for a, b in zip(g, al.attention_backward(Q, K, V, O_ref, dO, lse_ref), strict=True):
        assert np.isfinite(a).all()
        _close(a, b, tol=1e-10)


def test_float32_inputs_stay_float32():
    Q, K, V, dO = (x.astype(np.float32) for x in _inputs(21, 21, 4, 4, seed=4))
    O, lse, _ = io.flash_forward(Q, K, V, M=150)
    assert O.dtype == np.float32 and lse.dtype == np.float32
    O_ref, lse_ref = al.attention_forward(Q.astype(float), K.astype(float), V.astype(float))
    np.testing.assert_allclose(O, O_ref, atol=1e-5)
    dQ, dK, dV, _ = io.flash_backward(Q, K, V, O, dO, lse, M=150)
    assert dQ.dtype == np.float32
    ref = al.attention_backward(*(x.astype(float) for x in (Q, K, V, O, dO, lse)))
    for a, b in zip((dQ, dK, dV), ref, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_inputs_are_not_modified():
    Q, K, V, dO = _inputs(9, 9, 3, 3, seed=6)
    O, lse = al.attention_forward(Q, K, V)
    copies = [x.copy() for x in (Q, K, V, O, dO, lse)]
    io.flash_forward(Q, K, V, M=100)
    io.flash_backward(Q, K, V, O, dO, lse, M=100)
    io.standard_backward(Q, K, V, O, dO, lse, M=100)
    for a, b in zip((Q, K, V, O, dO, lse), copies, strict=True):
        np.testing.assert_array_equal(a, b)


# ---- block sparsity ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,m,d,d_v,M", [(23, 19, 3, 4, 60), (40, 40, 4, 4, 300), (9, 30, 2, 2, 40)]
)
def test_block_sparse_runs_equal_masked_exact_and_their_closed_forms(n, m, d, d_v, M):
    rng = np.random.default_rng(n * m)
    Q, K, V, dO = _inputs(n, m, d, d_v, seed=n + m)
    mask = rng.random((n, m)) < 0.3
    mask[2] = False  # a fully masked row: O = 0, lse = -inf, no gradient
    mask[:, 5:9] = False
    fb = io.flash_forward_blocks(d, M, d_v=d_v)
    bb = io.flash_backward_blocks(d, M, d_v=d_v)
    bmf = rng.random((-(-n // fb[0]), -(-m // fb[1]))) < 0.6
    bmb = rng.random((-(-n // bb[0]), -(-m // bb[1]))) < 0.6
    bmb[0] = False  # an empty query block row
    bmb[:, 1] = False  # an empty key block column
    ones = np.ones((n, m), dtype=bool)
    for mk, f_mask, b_mask in [(mask, None, None), (None, bmf, bmb), (mask, bmf, bmb)]:
        el = ones if mk is None else mk
        elem_f = el & (io.expand_block_mask(f_mask, n, m, fb) if f_mask is not None else ones)
        O, lse, c = io.flash_forward(Q, K, V, M=M, mask=mk, block_mask=f_mask)
        O_ref, lse_ref = al.attention_forward(Q, K, V, mask=elem_f)
        _close(O, O_ref)
        _close(lse, lse_ref)
        eff = io.flash_block_mask(elem_f, fb)
        assert c == io.flash_forward_count(n, d, M, m=m, d_v=d_v, block_mask=eff)
        assert c.peak_fast <= M

        elem_b = el & (io.expand_block_mask(b_mask, n, m, bb) if b_mask is not None else ones)
        O_b, lse_b = al.attention_forward(Q, K, V, mask=elem_b)
        *g, c = io.flash_backward(Q, K, V, O_b, dO, lse_b, M=M, mask=mk, block_mask=b_mask)
        ref = al.attention_backward(Q, K, V, O_b, dO, lse_b, mask=elem_b)
        for a, b in zip(g, ref, strict=True):
            _close(a, b)
        eff = io.flash_block_mask(elem_b, bb)
        assert c == io.flash_backward_count(n, d, M, m=m, d_v=d_v, block_mask=eff)
        assert c.peak_fast <= M


def test_all_true_block_mask_counts_as_dense_and_empty_mask_moves_only_outputs():
    n, m, d, M = 37, 29, 4, 400
    for blocks_of, count, outputs in [
        (io.flash_forward_blocks, io.flash_forward_count, n * (d + 1)),  # O, lse
        (io.flash_backward_blocks, io.flash_backward_count, n * d + 2 * m * d),  # dQ, dK, dV
    ]:
        B_r, B_c = blocks_of(d, M)
        shape = (-(-n // B_r), -(-m // B_c))
        dense = count(n, d, M, m=m)
        assert count(n, d, M, m=m, block_mask=np.ones(shape, dtype=bool)) == dense
        empty = count(n, d, M, m=m, block_mask=np.zeros(shape, dtype=bool))
        assert empty.reads == 0 and empty.writes == outputs <= dense.writes


def test_block_sparse_count_is_affine_in_the_number_of_kept_blocks():
    """With equal blocks and every block row and column kept, each extra kept block costs
    exactly B_r(2d + d_v + 2) reads and B_r·d writes in the backward, B_c(d + d_v) reads
    in the forward."""
    d, M = 16, 4 * 16 * 16 * 6
    B_r, B_c = io.flash_backward_blocks(d, M)
    T = 8
    n, m = T * B_r, T * B_c
    base = np.eye(T, dtype=bool)  # every block row and column non-empty
    rng = np.random.default_rng(0)
    order = rng.permutation(np.argwhere(~base))
    zs, reads, writes = [], [], []
    for extra in range(0, len(order) + 1, 7):
        bm = base.copy()
        for i, j in order[:extra]:
            bm[i, j] = True
        c = io.flash_backward_count(n, d, M, m=m, block_mask=bm)
        zs.append(int(bm.sum()))
        reads.append(c.reads)
        writes.append(c.writes)
    assert np.all(np.diff(reads) == np.diff(zs) * B_r * (3 * d + 2))
    assert np.all(np.diff(writes) == np.diff(zs) * B_r * d)
    F_r, F_c = io.flash_forward_blocks(d, M)
    bm = np.ones((3, 5), dtype=bool)
    c1 = io.flash_forward_count(3 * F_r, d, M, m=5 * F_c, block_mask=bm)
    bm[1, 2] = False
    c2 = io.flash_forward_count(3 * F_r, d, M, m=5 * F_c, block_mask=bm)
    assert c1.reads - c2.reads == F_c * 2 * d


# ---- asymptotics from the closed forms -------------------------------------------------------

LARGE = [(65536, 64), (16384, 32), (8192, 128)]


@pytest.mark.parametrize("n,d", LARGE)
def test_flash_backward_slope_and_band_against_the_lower_bound(n, d):
    """For d² <= M <= nd/4: log-log slope −1 ± 0.1 against M, and
    24 <= flash_backward_count / backward_lower_bound <= 40 (ours: B_c ≈ M/6d gives ≈ 24 at
    large M; near M = d² the inner block is below d and the ratio rises to ≈ 38)."""
    Ms = np.unique(np.geomspace(d * d, n * d / 4, 25).astype(int))
    tot = np.array([io.flash_backward_count(n, d, int(M)).total for M in Ms])
    slope = loglog_slope(Ms, tot)
    assert -1.1 <= slope <= -0.9, slope
    ratio = tot / np.array([io.backward_lower_bound(n, d, int(M)) for M in Ms])
    assert 24 <= ratio.min() and ratio.max() <= 40, (ratio.min(), ratio.max())


@pytest.mark.parametrize("n,d", LARGE)
def test_flash_forward_slope_and_band_against_the_lower_bound(n, d):
    """Same range: slope −1 ± 0.1 and 6 <= flash_forward_count / forward_lower_bound <= 11."""
    Ms = np.unique(np.geomspace(d * d, n * d / 4, 25).astype(int))
    tot = np.array([io.flash_forward_count(n, d, int(M)).total for M in Ms])
    assert -1.1 <= loglog_slope(Ms, tot) <= -0.9
    ratio = tot / np.array([io.forward_lower_bound(n, d, int(M)) for M in Ms])
    assert 6 <= ratio.min() and ratio.max() <= 11, (ratio.min(), ratio.max())


def test_standard_pays_n_squared_and_flash_beats_it_once_M_exceeds_2d2():
    n, d = 4096, 64
    prev = (1.0, 1.0)
    for k in (2, 4, 16, 64):
        M = k * d * d
        sf, sb = io.standard_forward_count(n, d, M), io.standard_backward_count(n, d, M)
        assert sf.total >= 5 * n * n and sb.total >= 8 * n * n  # 3nm + 2nm, 5nm + 3nm
        rf = io.flash_forward_count(n, d, M).total / sf.total
        rb = io.flash_backward_count(n, d, M).total / sb.total
        assert rf < 1 and rb < 1 and rf < prev[0] and rb < prev[1]
        prev = (rf, rb)
    assert prev[0] < 0.05 and prev[1] < 0.1


# ---- bad inputs --------------------------------------------------------------------------


def _fwd(f, a, **kw):
    return f(a["Q"], a["K"], a["V"], **kw)


def _bwd(f, a, **kw):
    return f(a["Q"], a["K"], a["V"], a["O"], a["dO"], a["lse"], **kw)


BAD_INPUTS = [
    (lambda a: _fwd(io.flash_forward, a, M=12), r"M must be at least 13 words for flash_forward"),
    (lambda a: _bwd(io.flash_backward, a, M=20), r"M must be at least 21 words for flash_backward"),
    (
        lambda a: _fwd(io.standard_forward, a, M=12),
        r"M must be at least 13 words for flash_forward",
    ),
    (lambda a: _bwd(io.standard_backward, a, M=12), r"M must be at least 13 words"),
    (
        lambda a: io.flash_backward(a["Q"], a["K"], a["V"], a["O"], a["dO"], a["lse"][:3], M=100),
        r"lse must have shape \(n,\)",
    ),
    (
        lambda a: io.standard_backward(
            a["Q"], a["K"], a["V"], a["O"], a["dO"][:, :2], a["lse"], M=100
        ),
        r"dO must have shape \(n, d_v\) like O",
    ),
    (
        lambda a: _fwd(io.flash_forward, a, M=100, scale=0.0),
        "scale must be a positive finite real",
    ),
    (lambda a: _fwd(io.flash_forward, a, M="big"), "M must be an integer >= 1"),
    (
        lambda a: _fwd(io.flash_forward, a, M=100, blocks=4),
        r"blocks must be a pair \(B_r, B_c\)",
    ),
    (
        lambda a: _bwd(io.flash_backward, a, M=100, blocks=(2, 0)),
        r"blocks\[1\] \(B_c\) must be an integer >= 1",
    ),
    (
        lambda a: _fwd(io.flash_forward, a, M=100, mask=np.ones((5, 5), dtype=bool)),
        r"mask must have shape \(n, m\) = \(6, 5\)",
    ),
    (
        lambda a: _fwd(io.flash_forward, a, M=100, block_mask=np.ones((2, 2), dtype=bool)),
        r"block_mask must have shape \(T_r, T_c\)",
    ),
    (
        lambda a: _bwd(io.flash_backward, a, M=100, block_mask=np.ones((1, 1))),
        "block_mask must have a boolean dtype",
    ),
    (lambda a: io.flash_forward_count(0, 2, 100), "n must be an integer >= 1"),
    (lambda a: io.flash_backward_count(4, 2, 100, d_v=0), "d_v must be an integer >= 1"),
    (lambda a: io.standard_forward_count(4, 2, 100, m=-2), "m must be an integer >= 1"),
    (lambda a: io.flash_backward_count(4, 2, 17), "M must be at least 18 words for flash_backward"),
    (
        lambda a: io.standard_backward_count(4, 2, 10),
        "M must be at least 11 words for flash_forward",
    ),
    (lambda a: io.flash_forward_blocks(0, 100), "d must be an integer >= 1"),
    (lambda a: io.flash_backward_blocks(2, 0), "M must be an integer >= 1"),
    (lambda a: io.flash_forward_min_M(2, d_v=0), "d_v must be an integer >= 1"),
    (lambda a: io.flash_backward_min_M(-1), "d must be an integer >= 1"),
    (lambda a: io.fa1_blocks(4, 0), "M must be an integer >= 1"),
    (lambda a: io.flash_forward_working_set(0, 1, 2), "B_r must be an integer >= 1"),
    (lambda a: io.flash_backward_working_set(1, 1, 0), "d must be an integer >= 1"),
    (
        lambda a: io.flash_block_mask(np.ones((3, 3)), (1, 1)),
        "mask must be a non-empty 2-dimensional boolean",
    ),
    (
        lambda a: io.flash_block_mask(np.ones((3, 3), dtype=bool), (0, 1)),
        r"blocks\[0\] \(B_r\) must be an integer >= 1",
    ),
    (
        lambda a: io.expand_block_mask(np.ones((2, 1), dtype=bool), 6, 5, (2, 5)),
        r"block_mask must have shape \(T_r, T_c\) = \(3, 1\)",
    ),
]


@pytest.mark.parametrize("call,message", BAD_INPUTS)
def test_bad_inputs(call, message):
    Q, K, V, dO = _inputs(6, 5, 2, 3, seed=1)
    O, lse = al.attention_forward(Q, K, V)
    with pytest.raises(AttnInputError, match=message):
        call(dict(Q=Q, K=K, V=V, O=O, dO=dO, lse=lse))


# ---- logits that overflow the dtype are refused by every schedule -----------------------
#
# Finite Q and K whose logits τQKᵀ pass the float range used to give O = 0 and lse = −inf
# (a fully masked row's output) or NaN. Every schedule refuses them with the compiled
# kernels' error, naming Q, K and scale.

_BIG_Q = np.full((4, 2), 1e200)
_BIG_K = np.full((3, 2), 1e200)
_V3 = np.ones((3, 2))
_O4, _LSE4 = np.ones((4, 2)), np.zeros(4)


def _three_level_forward(Q, K, V, **kw):
    from attnlib.iomodel import hierarchy

    return hierarchy.flash_forward_three_level(Q, K, V, M_l2=2 * kw.pop("M"), M=4096, **kw)


def _three_level_backward(Q, K, V, O, dO, lse, **kw):
    from attnlib.iomodel import hierarchy

    return hierarchy.flash_backward_three_level(Q, K, V, O, dO, lse, M=4096, M_l2=8192)


OVERFLOWING_RUNS = {
    "flash_forward": lambda Q, K: io.flash_forward(Q, K, _V3, M=4096),
    "flash_forward_causal": lambda Q, K: io.flash_forward_causal(Q, K, _V3, M=4096),
    "standard_forward": lambda Q, K: io.standard_forward(Q, K, _V3, M=4096),
    "smallcache_forward": lambda Q, K: io.smallcache_forward(Q, K, _V3, M=64),
    "smallcache_forward_unshifted": lambda Q, K: io.smallcache_forward(
        Q, K, _V3, M=64, unshifted=True
    ),
    "three_level_forward": lambda Q, K: _three_level_forward(Q, K, _V3, M=4096),
    "gqa_forward": lambda Q, K: io.gqa_flash_forward(Q[None], K[None], _V3[None], M=4096),
    "gqa_forward_by_head": lambda Q, K: io.gqa_flash_forward(
        Q[None], K[None], _V3[None], M=4096, grouped=False
    ),
    "flash_backward": lambda Q, K: io.flash_backward(Q, K, _V3, _O4, _O4, _LSE4, M=4096),
    "flash_backward_causal": lambda Q, K: io.flash_backward_causal(
        Q, K, _V3, _O4, _O4, _LSE4, M=4096
    ),
    "standard_backward": lambda Q, K: io.standard_backward(Q, K, _V3, _O4, _O4, _LSE4, M=4096),
    "smallcache_backward": lambda Q, K: io.smallcache_backward(Q, K, _V3, _O4, _O4, _LSE4, M=64),
    "three_level_backward": lambda Q, K: _three_level_backward(Q, K, _V3, _O4, _O4, _LSE4),
    "gqa_backward": lambda Q, K: io.gqa_flash_backward(
        Q[None], K[None], _V3[None], _O4[None], _O4[None], _LSE4[None], M=4096
    ),
}


@pytest.mark.parametrize("name", sorted(OVERFLOWING_RUNS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_schedule_refuses_logits_that_overflow(name, dtype, monkeypatch):
    """In the run's dtype: float32 throughout overflows at 10²⁰·10²⁰·2 > 3.4·10³⁸."""
    size = 1e200 if dtype == np.float64 else 1e20
    Q, K = (_BIG_Q / 1e200 * size).astype(dtype), (_BIG_K / 1e200 * size).astype(dtype)
    for name_, value in (("_V3", _V3), ("_O4", _O4), ("_LSE4", _LSE4)):
        monkeypatch.setitem(globals(), name_, value.astype(dtype))
    with pytest.raises(AttnInputError, match=rf"overflow {np.dtype(dtype).name}.*Q, K or scale"):
        OVERFLOWING_RUNS[name](Q, K)


def test_a_float32_pair_run_in_float64_is_not_refused():
    """The logits are checked in the dtype the run computes in: float32 Q and K with a
    float64 V run in float64, where 10²⁰·10²⁰ fits."""
    Q = np.full((2, 2), 1e20, dtype=np.float32)
    O, lse, _ = io.flash_forward(Q, Q, np.ones((2, 1)), M=4096)
    assert O.dtype == np.float64 and np.isfinite(lse).all()


def test_decode_refuses_overflowing_logits_naming_q():
    q = np.full((2, 4), 1e200)
    K = np.full((1, 3, 4), 1e200)
    with pytest.raises(AttnInputError, match=r"overflow.*the argument q"):
        io.decode_forward(q, K, np.ones((1, 3, 2)), M=4096)


def test_logits_just_inside_the_range_still_run():
    """Large but finite logits (the kernels' own limit is the float range) run and equal the
    exact core: the check refuses only what overflows."""
    Q = np.array([[1e154, 0.0], [0.0, 1.0]])
    K = np.array([[1e154, 0.0], [1.0, 1.0]])
    V = np.array([[1.0, 2.0], [3.0, 4.0]])
    O, lse = al.attention_forward(Q, K, V, scale=1.0)
    for run in (io.flash_forward, io.standard_forward):
        O2, lse2, _ = run(Q, K, V, M=4096, scale=1.0)
        _close(O2, O)
        _close(lse2, lse)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # then refused
def test_smallcache_refuses_a_partial_sum_that_overflows_over_column_tiles():
    """The whole dot product is finite (the check before the run passes), but summed over
    column tiles of width b = 2 the partial (0.9 + 0.9)·10³⁰⁸ overflows; with b = 1 the
    order is the dot product's and the run is exact."""
    Q = np.array([[-1e308, 0.0, 0.9e308, 0.9e308]])
    K = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    V = np.ones((2, 1))
    O, lse = al.attention_forward(Q, K, V, scale=1.0)
    O1, lse1, _ = io.smallcache_forward(Q, K, V, M=5, scale=1.0)  # b = 1
    _close(O1, O)
    _close(lse1, lse)
    assert io.smallcache_forward_tile(16) == 2 and io.smallcache_backward_tile(24) == 2
    with pytest.raises(AttnInputError, match="column tiles of width b = 2"):
        io.smallcache_forward(Q, K, V, M=16, scale=1.0)
    with pytest.raises(AttnInputError, match="column tiles of width b = 2"):
        io.smallcache_backward(Q, K, V, O, np.ones((1, 1)), lse, M=24, scale=1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forward_accumulator_does_not_overflow_for_values_near_the_float_range(dtype):
    """Σ_j exp(s_j − max)·v_j adds up to m rows of V before dividing by the row sum: with
    entries near the largest float it used to reach inf although O does not. V is scaled by
    a power of two inside the step, exactly, and O back; the counts are unchanged."""
    rng = np.random.default_rng(3)
    big = float(np.finfo(dtype).max)
    Q, K = (rng.standard_normal((7, 3)).astype(dtype) for _ in range(2))
    V = (np.clip(rng.standard_normal((7, 2)), -1, 1) * 0.99 * big).astype(dtype)
    V[:, 0] = 0.99 * big  # every key row at the top: the plain sum would overflow
    O, lse = al.attention_forward(Q, K, V)
    tol = 1e-12 if dtype == np.float64 else 1e-5  # relative to max|O|, as the float32 tests
    for M in (io.flash_forward_min_M(3, d_v=2), 4096):
        O2, lse2, count = io.flash_forward(Q, K, V, M=M)
        assert np.isfinite(O2).all() and O2.dtype == dtype
        _close(O2, O, tol=tol)
        _close(lse2, lse, tol=tol)
        assert count == io.flash_forward_count(7, 3, M, d_v=2)


def test_block_sparse_counts_are_exact_beyond_int64():
    """The per-block arithmetic of a block-sparse count used int64, which wrapped around
    (a peak of 7.8·10¹⁸ for 10²⁰ words). A full block mask counts as the dense pass at every
    size, and the Python-int path equals the int64 path where both apply."""
    from attnlib.iomodel import blocks

    n = 10**10
    full = np.ones((1, 1), dtype=bool)
    for count in (io.flash_forward_count, io.flash_backward_count):
        assert count(n, 1, 10**12, blocks=(n, n), block_mask=full) == count(
            n, 1, 10**12, blocks=(n, n)
        )
        assert count(8, 10**30, 10**70, block_mask=full) == count(8, 10**30, 10**70)
    rng = np.random.default_rng(0)
    for n, m, B_r, B_c in [(9, 11, 2, 4), (16, 4, 5, 1), (5, 11, 3, 2)]:
        bm = rng.random((-(-n // B_r), -(-m // B_c))) < 0.5
        kw = dict(m=m, blocks=(B_r, B_c), block_mask=bm)
        small = [
            count(n, 2, 10**6, **kw) for count in (io.flash_forward_count, io.flash_backward_count)
        ]
        limit = blocks._INT64_MAX
        try:
            blocks._INT64_MAX = 0  # force the Python-int path
            exact = [
                count(n, 2, 10**6, **kw)
                for count in (io.flash_forward_count, io.flash_backward_count)
            ]
        finally:
            blocks._INT64_MAX = limit
        assert exact == small


def test_block_sparse_count_refuses_a_grid_beyond_memory():
    bm = np.ones((1, 1), dtype=bool)
    grid = np.broadcast_to(bm, (10**5, 10**5))  # a read-only view: no memory of its own
    with pytest.raises(AttnInputError, match="block_mask"):
        io.flash_backward_count(10**5, 2, 10**6, blocks=(1, 1), block_mask=grid)


def test_causal_runs_accept_blocks_longer_than_the_inputs():
    """A block larger than n used to reach numpy as an index beyond int64."""
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal((3, 2)) for _ in range(3))
    mask = io.causal_mask(3)
    O, lse = al.attention_forward(Q, K, V, mask=mask)
    for M in (10**400, 4096):
        O2, lse2, count = io.flash_forward_causal(Q, K, V, M=M, blocks=(10**400, 10**400))
        _close(O2, O)
        assert count == io.flash_forward_causal_count(3, 2, M, blocks=(10**400, 10**400))
    assert io.flash_block_mask(mask, (10**400, 10**400)).tolist() == [[True]]
