"""FlashAttention on the machine (attnlib.iomodel.flash): counts by hand, explicit blocks,
capacity, block sparsity (its count affine in the kept blocks and in proportion to them), the
refusals, stability and asymptotics. Every simulated count against its closed form, with the
results against the exact core, is in test_iomodel_twins.py; the block rules are in
test_iomodel_blocks.py."""

import numpy as np
import pytest
from helpers import SPARSE_BLOCK_CASES, random_qkv_dO, sparse_block_grid, thin_block_cover
from helpers import assert_close as _close

import attnlib as al
from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel import (
    flash_backward_count,
)
from attnlib.measure import loglog_slope


def _inputs(n, m, d, d_v, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return random_qkv_dO(rng, n, m, d, d_v, q_scale=scale, k_scale=scale)


@pytest.mark.parametrize("n,m,d,d_v", [(1, 1, 1, 1), (9, 5, 3, 2), (17, 23, 4, 4)])
def test_the_forward_minimum_runs_the_forward_passes_only(n, m, d, d_v):
    M = io.flash_forward_min_M(d, d_v=d_v)
    assert M == 2 * (d + d_v) + 3
    Q, K, V, _ = _inputs(n, m, d, d_v, seed=3)
    O_ref, lse_ref = al.attention_forward(Q, K, V)
    for run in (io.flash_forward, io.standard_forward):
        assert run(Q, K, V, M=M)[-1].peak_fast <= M
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
    # heads, packed group by group into slow memory: from copies, never in place
    heads = (np.stack([Q, 2 * Q]), K[None], V[None], np.stack([dO, dO]))
    O, lse = al.attention_forward(*heads[:3], enable_gqa=True, is_causal=True)
    copies = [x.copy() for x in (*heads, O, lse)]
    kw = dict(M=100, enable_gqa=True, is_causal=True)
    io.flash_forward(*heads[:3], **kw)
    io.flash_backward(*heads[:3], O, heads[3], lse, **kw)
    for a, b in zip((*heads, O, lse), copies, strict=True):
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


def test_an_element_mask_is_read_from_the_argument_and_costs_no_word():
    """The element mask is not loaded (the machine's docstring says so): a mask that drops
    scores but empties no block moves exactly the dense count, forward and backward, while
    the results follow the mask."""
    n, m, d, M = 30, 26, 3, 80
    Q, K, V, dO = _inputs(n, m, d, d, seed=5)
    mask = np.random.default_rng(5).random((n, m)) < 0.3
    for blocks, run, count in [
        (io.flash_forward_blocks(d, M), io.flash_forward, io.flash_forward_count),
        (io.flash_backward_blocks(d, M), io.flash_backward, io.flash_backward_count),
    ]:
        keep = mask.copy()
        keep[:: blocks[0], :: blocks[1]] = True  # one kept score in every block
        keep[np.arange(n), np.arange(n) % m] = True  # and in every row
        O, lse = al.attention_forward(Q, K, V, mask=keep)
        args = (Q, K, V) if run is io.flash_forward else (Q, K, V, O, dO, lse)
        *out, c = run(*args, M=M, mask=keep)
        ref = (O, lse) if run is io.flash_forward else al.attention_backward(*args, mask=keep)
        for a, b in zip(out, ref, strict=True):
            _close(a, b)
        assert not np.allclose(O, al.attention_forward(Q, K, V)[0])  # the mask acts
        assert c == count(n, d, M, m=m)


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
def test_flash_backward_slope_and_band_against_the_order(n, d):
    """For d² <= M <= nd/4: log-log slope −1 ± 0.1 against M, and
    24 <= flash_backward_count / backward_order <= 40 (ours: B_c ≈ M/6d gives ≈ 24 at
    large M; near M = d² the inner block is below d and the ratio rises to ≈ 38); and never
    below the certified backward_lower_bound."""
    Ms = np.unique(np.geomspace(d * d, n * d / 4, 25).astype(int))
    tot = np.array([io.flash_backward_count(n, d, int(M)).total for M in Ms])
    slope = loglog_slope(Ms, tot)
    assert -1.1 <= slope <= -0.9, slope
    ratio = tot / np.array([io.backward_order(n, d, int(M)) for M in Ms])
    assert all(t >= io.backward_lower_bound(n, d, int(M)) for t, M in zip(tot, Ms, strict=True))
    assert 24 <= ratio.min() and ratio.max() <= 40, (ratio.min(), ratio.max())


@pytest.mark.parametrize("n,d", LARGE)
def test_flash_forward_slope_and_band_against_the_order(n, d):
    """Same range: slope −1 ± 0.1 and 6 <= flash_forward_count / forward_order <= 11 (the
    Θ-expression n²d²/M with constant 1), and never below the certified forward_lower_bound."""
    Ms = np.unique(np.geomspace(d * d, n * d / 4, 25).astype(int))
    tot = np.array([io.flash_forward_count(n, d, int(M)).total for M in Ms])
    assert -1.1 <= loglog_slope(Ms, tot) <= -0.9
    ratio = tot / np.array([io.forward_order(n, d, int(M)) for M in Ms])
    assert all(t >= io.forward_lower_bound(n, d, int(M)) for t, M in zip(tot, Ms, strict=True))
    assert 6 <= ratio.min() and ratio.max() <= 11, (ratio.min(), ratio.max())


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
    (
        lambda a: _fwd(io.flash_forward, a, M=100, is_causal=True, mask=np.ones((6, 5), bool)),
        r"^mask and is_causal=True cannot be given together",
    ),
    (
        lambda a: _bwd(io.flash_backward, a, M=100, is_causal=1),
        "is_causal must be a bool",
    ),
    (
        lambda a: io.flash_forward(
            *(np.stack([a[x], a[x]]) for x in "QKV"), M=100, mask=np.ones((6, 5), bool)
        ),
        r"^mask is for one head, Q \(n, d\): got H = 2 heads",
    ),
    (
        lambda a: io.flash_forward(a["Q"][None], a["K"], a["V"], M=100),
        r"K must have 3 dimensions",
    ),
    (
        lambda a: io.flash_forward(
            np.stack([a["Q"]] * 3), a["K"][None], a["V"][None], M=100, enable_gqa="yes"
        ),
        "enable_gqa must be a bool",
    ),
    (
        lambda a: io.flash_forward(np.stack([a["Q"]] * 3), a["K"][None], a["V"][None], M=100),
        r"pass enable_gqa=True",
    ),
    (
        lambda a: io.flash_forward(
            a["Q"][None, None], a["K"][None, None], a["V"][None, None], M=100
        ),
        r"^Q must be \(n, d\) or \(H, n, d\)",
    ),
    (lambda a: io.flash_forward_count(4, 2, 100, H=6, H_kv=4, enable_gqa=True), "multiple"),
    (lambda a: io.flash_backward_count(4, 2, 100, H=2, H_kv=1), r"pass enable_gqa=True"),
    (lambda a: io.flash_forward_count(4, 2, 100, H=0), "H must be an integer >= 1"),
    (
        lambda a: io.flash_forward_count(4, 2, 100, H=2, block_mask=np.ones((1, 1), bool)),
        r"^block_mask is for one head",
    ),
    (lambda a: io.flash_backward_count(4, 2, 100, is_causal="no"), "is_causal must be a bool"),
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


def _heads(*arrays, copies=1):
    """The arrays with a head axis: one head, or ``copies`` equal heads."""
    return [np.repeat(x[None], copies, axis=0) for x in arrays]


OVERFLOWING_RUNS = {
    "flash_forward": lambda Q, K: io.flash_forward(Q, K, _V3, M=4096),
    "flash_forward(is_causal)": lambda Q, K: io.flash_forward(Q, K, _V3, M=4096, is_causal=True),
    "standard_forward": lambda Q, K: io.standard_forward(Q, K, _V3, M=4096),
    "smallcache_forward": lambda Q, K: io.smallcache_forward(Q, K, _V3, M=64),
    "smallcache_forward_unshifted": lambda Q, K: io.smallcache_forward(
        Q, K, _V3, M=64, unshifted=True
    ),
    "three_level_forward": lambda Q, K: _three_level_forward(Q, K, _V3, M=4096),
    "gqa_forward": lambda Q, K: io.flash_forward(
        *_heads(Q, copies=2), *_heads(K, _V3), M=4096, enable_gqa=True
    ),
    "multihead_forward": lambda Q, K: io.flash_forward(*_heads(Q, K, _V3, copies=2), M=4096),
    "flash_backward": lambda Q, K: io.flash_backward(Q, K, _V3, _O4, _O4, _LSE4, M=4096),
    "flash_backward(is_causal)": lambda Q, K: io.flash_backward(
        Q, K, _V3, _O4, _O4, _LSE4, M=4096, is_causal=True
    ),
    "standard_backward": lambda Q, K: io.standard_backward(Q, K, _V3, _O4, _O4, _LSE4, M=4096),
    "smallcache_backward": lambda Q, K: io.smallcache_backward(Q, K, _V3, _O4, _O4, _LSE4, M=64),
    "three_level_backward": lambda Q, K: _three_level_backward(Q, K, _V3, _O4, _O4, _LSE4),
    "gqa_backward": lambda Q, K: io.flash_backward(
        *_heads(Q, copies=2),
        *_heads(K, _V3),
        *_heads(_O4, _O4, _LSE4, copies=2),
        M=4096,
        enable_gqa=True,
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


def test_a_group_of_heads_refuses_overflowing_logits_of_its_own():
    """Each group's logits are checked against its own K: the second group overflows."""
    Q = np.ones((2, 3, 4))
    K = np.stack([np.ones((3, 4)), np.full((3, 4), 1e200)])
    Q[1] *= 1e200
    with pytest.raises(AttnInputError, match=r"overflow float64.*Q, K or scale"):
        io.flash_forward(Q, K, np.ones((2, 3, 2)), M=4096)
    Q[1] /= 1e200  # then every logit fits
    assert np.isfinite(io.flash_forward(Q, K, np.ones((2, 3, 2)), M=4096)[1]).all()


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
        blocks = (10**400, 10**400)
        O2, lse2, count = io.flash_forward(Q, K, V, M=M, blocks=blocks, is_causal=True)
        _close(O2, O)
        assert count == io.flash_forward_count(3, 2, M, blocks=blocks, is_causal=True)
    assert io.flash_block_mask(mask, (10**400, 10**400)).tolist() == [[True]]


@pytest.mark.parametrize("d,M", SPARSE_BLOCK_CASES)
def test_block_sparse_count_is_affine_in_kept_blocks(d, M):
    n, B_r, B_c, T_r, T_c = sparse_block_grid(d, M)
    rng = np.random.default_rng(d + M)
    bm = thin_block_cover(T_r, T_c)
    # every extra kept block costs the same: one visit of a query block, B_r(4d + 2) words
    # (Q_i, dO_i, lse_i, D_i and dQ_i read, dQ_i written)
    step = B_r * (4 * d + 2)
    total = flash_backward_count(n, d, M, block_mask=bm).total
    for k in rng.permutation(T_r * T_c)[:40]:
        i, j = divmod(int(k), T_c)
        if bm[i, j]:
            continue
        bm[i, j] = True
        new = flash_backward_count(n, d, M, block_mask=bm).total
        assert new - total == step
        total = new


@pytest.mark.parametrize("d,M", SPARSE_BLOCK_CASES)
def test_block_sparse_count_drops_in_proportion(d, M):
    n, B_r, B_c, T_r, T_c = sparse_block_grid(d, M)
    full = flash_backward_count(n, d, M).total
    assert flash_backward_count(n, d, M, block_mask=np.ones((T_r, T_c), bool)).total == full
    # the part that does not scale with the kept blocks: K, V read and dK, dV written once,
    # D's pass, dQ's zero rows: what the count keeps with z = (the cover) blocks, minus them
    base = thin_block_cover(T_r, T_c)
    z0 = int(base.sum())
    fixed = flash_backward_count(n, d, M, block_mask=base).total - z0 * B_r * (4 * d + 2)
    assert 0 < fixed < 0.1 * full  # at full density, under a tenth of the count
    rng = np.random.default_rng(M)
    order = rng.permutation(T_r * T_c)
    for frac in (1 / 64, 1 / 16, 1 / 4, 1 / 2, 1.0):
        bm = base.copy()
        bm.flat[order[: int(frac * T_r * T_c)]] = True
        z = int(bm.sum())
        total = flash_backward_count(n, d, M, block_mask=bm).total
        # exactly proportional once the fixed part is taken out
        assert total - fixed == z * (full - fixed) // (T_r * T_c)
        assert total >= full * z / (T_r * T_c)
