"""The compiled tiled kernels (attnlib.fast) against the exact core.

float64 agreement to ~1e-10 (masks, causal, n ≠ m, shapes that are not multiples of the block),
float32 by FlashAttention's differential rule, and bitwise-identical results with 1 and 2 numba
threads; on batched, multi-head input (..., H, n, d) with grouped K/V heads, the 2-D kernels
head by head (bitwise), the exact core's batched result and PyTorch's
scaled_dot_product_attention (when PyTorch is installed). That the kernels accept and refuse
the exact core's calls is test_contract.py's; their values against the float64 reference on
structured families, test_batched_reference.py's.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from helpers import (
    BATCHED_CASES,
    assert_within_flash_rule,
    batched_qkv_dO,
    one_row_layouts,
    random_qkv,
    rel_err,
)

import attnlib as al
from attnlib import AttnInputError, fast


def keep_mask(n, m, mask=None, causal=False):
    """The boolean mask the exact core needs for what flash_* computes with is_causal=True."""
    keep = np.ones((n, m), dtype=bool) if mask is None else mask.copy()
    if causal:
        keep &= np.tril(np.ones((n, m), dtype=bool))
    return keep


def assert_close_to_exact(Q, K, V, dO, *, tol, scale=None, mask=None, causal=False):
    """flash_* against attention_forward/attention_backward with the equivalent mask."""
    O, lse = al.flash_forward(Q, K, V, scale=scale, mask=mask, is_causal=causal)
    keep = keep_mask(Q.shape[0], K.shape[0], mask, causal)
    O_ref, lse_ref = al.attention_forward(Q, K, V, scale=scale, mask=keep)
    assert O.dtype == O_ref.dtype and lse.dtype == lse_ref.dtype
    assert rel_err(O, O_ref) <= tol
    dead = np.isneginf(lse_ref)
    assert np.array_equal(np.isneginf(lse), dead)
    if not dead.all():
        assert rel_err(lse[~dead], lse_ref[~dead]) <= tol
    grads = al.flash_backward(Q, K, V, O, dO, lse, scale=scale, mask=mask, is_causal=causal)
    refs = al.attention_backward(Q, K, V, O_ref, dO, lse_ref, scale=scale, mask=keep)
    for g, ref in zip(grads, refs, strict=True):
        assert g.shape == ref.shape and g.dtype == ref.dtype
        assert np.all(np.isfinite(g))
        assert np.abs(g - ref).max() <= tol * max(np.abs(ref).max(), 1.0)
    return O, lse, grads


# ------------------------------------------------------------------------- float64 vs exact

# (n, m, d, d_v): FlashAttention's awkward shapes, n ≠ m both ways, and sizes that straddle the
# blocks (64 × 64 for d = 64; 256 × 64 for d = 3, so n = 300 gives two query blocks).
SHAPES = [
    (1, 1, 1, 1),
    (239, 1, 3, 3),
    (113, 203, 64, 32),
    (127, 128, 64, 64),
    (128, 127, 64, 64),
    (300, 333, 3, 5),
    (70, 150, 100, 17),
]


@pytest.mark.parametrize("n,m,d,dv", SHAPES)
@pytest.mark.parametrize("variant", ["plain", "mask", "causal", "mask&tri"])
def test_float64_matches_exact(rng, n, m, d, dv, variant):
    Q, K, V = random_qkv(rng, n, m, d, dv)
    dO = rng.standard_normal((n, dv))
    mask = None
    if "mask" in variant:
        mask = rng.random((n, m)) < 0.6
        mask[n // 2] = False  # a fully masked row
    if variant == "mask&tri":  # a mask with causality, as the one keep-mask that says both
        mask &= np.tri(n, m, dtype=bool)
    assert_close_to_exact(Q, K, V, dO, tol=1e-10, mask=mask, causal=variant == "causal")


def test_custom_scale_and_as24_scale(rng):
    Q, K, V = random_qkv(rng, 90, 77, 8)
    dO = rng.standard_normal((90, 8))
    for scale in (1 / 8, 2.5):
        assert_close_to_exact(Q, K, V, dO, tol=1e-10, scale=scale)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_logits_of_1e4_are_stable(rng, sign):
    # every logit is ±1e4 times a number in [0.5, 1]: naive exp overflows or underflows
    n, m, d = 70, 90, 4
    Q = np.full((n, d), 1.0)
    K = sign * rng.uniform(0.5, 1.0, (m, d)) * 1e4 / 2
    V = rng.standard_normal((m, 3))
    dO = rng.standard_normal((n, 3))
    O, lse, grads = assert_close_to_exact(Q, K, V, dO, tol=1e-10)
    assert np.all(np.abs(lse) > 1e3)
    # the winning key takes all the weight: O is that key's value row
    top = np.argmax(K.sum(axis=1))
    np.testing.assert_allclose(O, np.broadcast_to(V[top], O.shape), atol=1e-10)


def test_fully_masked_rows_give_zero_output_and_gradients(rng):
    n, m = 80, 70
    Q, K, V = random_qkv(rng, n, m, 16)
    mask = rng.random((n, m)) < 0.5
    dead = [0, 33, 79]
    mask[dead] = False
    O, lse = al.flash_forward(Q, K, V, mask=mask)
    assert np.all(O[dead] == 0) and np.all(np.isneginf(lse[dead]))
    assert np.all(np.isfinite(O)) and not np.isnan(lse).any()
    dQ, dK, dV = al.flash_backward(Q, K, V, O, rng.standard_normal(O.shape), lse, mask=mask)
    assert np.all(dQ[dead] == 0)
    assert all(np.all(np.isfinite(g)) for g in (dQ, dK, dV))
    # everything masked: all zeros, nothing NaN
    none = np.zeros((n, m), dtype=bool)
    O, lse = al.flash_forward(Q, K, V, mask=none)
    assert np.all(O == 0) and np.all(np.isneginf(lse))
    for g in al.flash_backward(Q, K, V, O, np.ones_like(O), lse, mask=none):
        assert np.all(g == 0)


def test_causal_is_top_left_aligned(rng):
    # query 0 sees only key 0, so its output is V[0]; the last query of a short block sees all
    Q, K, V = random_qkv(rng, 5, 9, 4)
    O, _ = al.flash_forward(Q, K, V, is_causal=True)
    np.testing.assert_allclose(O[0], V[0], rtol=1e-14)
    O_ref, _ = al.attention_forward(Q, K, V, mask=np.tril(np.ones((5, 9), dtype=bool)))
    np.testing.assert_allclose(O, O_ref, rtol=1e-12)


# ------------------------------------------------------------------------------ float32


@pytest.mark.parametrize(
    "n,m,d,variant",
    [
        (130, 200, 64, "plain"),
        (127, 128, 64, "mask"),
        (300, 150, 16, "causal"),
        # long float32 sums: 24 key blocks add into each row of dQ, 8 query blocks into dK, dV
        (1024, 1536, 32, "plain"),
    ],
)
def test_float32_obeys_the_differential_rule(rng, n, m, d, variant):
    """FlashAttention's rule (assert_within_flash_rule): the naive float32 computation is
    attnlib.exact run in float32; the reference is float64 on the same float32-rounded
    inputs."""
    Q, K, V = random_qkv(rng, n, m, d, dtype=np.float32)
    Q *= 2.0  # logits of a few units: a softmax that is neither flat nor one-hot
    dO = rng.standard_normal((n, d)).astype(np.float32)
    mask = rng.random((n, m)) < 0.7 if variant == "mask" else None
    causal = variant == "causal"
    keep = keep_mask(n, m, mask, causal)
    up = [x.astype(np.float64) for x in (Q, K, V, dO)]

    O32, lse32 = al.flash_forward(Q, K, V, mask=mask, is_causal=causal)
    assert O32.dtype == np.float32 and lse32.dtype == np.float32
    naive_O, naive_lse = al.attention_forward(Q, K, V, mask=keep)
    O64, lse64 = al.attention_forward(*up[:3], mask=keep)
    for got, naive, ref in [(O32, naive_O, O64), (lse32, naive_lse, lse64)]:
        assert_within_flash_rule(got, naive, ref)

    g32 = al.flash_backward(Q, K, V, O32, dO, lse32, mask=mask, is_causal=causal)
    naive_g = al.attention_backward(Q, K, V, naive_O, dO, naive_lse, mask=keep)
    g64 = al.attention_backward(*up[:3], O64, up[3], lse64, mask=keep)
    for got, naive, ref in zip(g32, naive_g, g64, strict=True):
        assert got.dtype == np.float32
        assert_within_flash_rule(got, naive, ref)


def test_mixed_precision_promotes_to_float64(rng):
    Q, K, V = random_qkv(rng, 9, 7, 3)
    O, lse = al.flash_forward(Q.astype(np.float32), K, V)
    assert O.dtype == np.float64 and lse.dtype == np.float64
    np.testing.assert_allclose(O, al.attention(Q.astype(np.float32), K, V), rtol=1e-12)


# --------------------------------------------------------------------------------- threads


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 numba threads")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_results_do_not_depend_on_the_number_of_threads(rng, dtype):
    n, m, d = 333, 290, 32  # 3 query blocks of 128 and 5 key blocks of 64
    Q, K, V = random_qkv(rng, n, m, d, dtype=dtype)
    dO = rng.standard_normal((n, d)).astype(dtype)
    mask = rng.random((n, m)) < 0.8
    runs = []
    before = numba.get_num_threads()
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            for kw in (dict(mask=mask), dict(is_causal=True)):
                O, lse = al.flash_forward(Q, K, V, **kw)
                grads = al.flash_backward(Q, K, V, O, dO, lse, **kw)
                runs.append((O, lse, *grads))
    finally:
        numba.set_num_threads(before)
    one, two = runs[:2], runs[2:]
    for a_run, b_run in zip(one, two, strict=True):
        for a, b in zip(a_run, b_run, strict=True):
            assert np.array_equal(a, b)  # bitwise, not just close


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "forward, backward",
    [(al.attention_forward, al.attention_backward), (al.flash_forward, al.flash_backward)],
    ids=["exact", "flash"],
)
def test_backward_accepts_minus_inf_lse_of_masked_rows(qkv, forward, backward):
    mask = np.ones((4, 5), dtype=bool)
    mask[1] = False
    O, lse = forward(qkv["Q"], qkv["K"], qkv["V"], mask=mask)
    dQ, _, _ = backward(qkv["Q"], qkv["K"], qkv["V"], O, qkv["dO"], lse, mask=mask)
    assert np.all(dQ[1] == 0)


def test_inputs_are_never_modified_and_any_layout_works(rng):
    Q, K, V = random_qkv(rng, 70, 90, 8)
    Qf = np.asfortranarray(Q)
    Ks = np.repeat(K, 2, axis=0)[::2]  # a strided view
    mask = rng.random((70, 90)) < 0.5
    dO = rng.standard_normal((70, 8))
    copies = [x.copy() for x in (Qf, Ks, V, mask, dO)]
    O, lse = al.flash_forward(Qf, Ks, V, mask=mask)
    saved = O.copy(), lse.copy()
    grads = al.flash_backward(Qf, Ks, V, O, dO, lse, mask=mask)
    for x, c in zip((Qf, Ks, V, mask, dO), copies, strict=True):
        assert np.array_equal(x, c)
    assert np.array_equal(O, saved[0]) and np.array_equal(lse, saved[1])
    refs = al.attention_backward(Q, K, V, O, dO, lse, mask=mask)
    for g, ref in zip(grads, refs, strict=True):
        assert rel_err(g, ref) < 1e-10
    np.testing.assert_allclose(O, al.attention(Q, K, V, mask=mask), rtol=1e-10, atol=1e-14)


def test_default_scale_is_one_over_sqrt_d(rng):
    Q, K, V = random_qkv(rng, 20, 30, 16)
    O1, _ = al.flash_forward(Q, K, V)
    O2, _ = al.flash_forward(Q, K, V, scale=1 / math.sqrt(16))
    assert np.array_equal(O1, O2)


# ------------------------------------------------------------------------- logit overflow

OVERFLOW = r"the logits scale \* Q @ K\.T overflow {}: Q, K or scale is too large"


def overflowing_cases(rng):
    """(Q, K, scale, dtype name) whose logits are not all finite, though every input is."""
    Q, K, _ = random_qkv(rng, 70, 90, 8)
    one = Q.copy()
    one[3] = 1e155  # q_3·k_0 = 8e310: a single +inf logit
    K1 = K.copy()
    K1[0] = 1e155
    return [
        (Q * 1e200, K * 1e200, None, "float64"),  # Q K^T itself overflows
        (Q, K, 1e308, "float64"),  # the scale pushes every logit past 1.8e308
        (one, K1, None, "float64"),
        (Q.astype(np.float32) * 1e20, K.astype(np.float32) * 1e20, None, "float32"),
    ]


@pytest.mark.parametrize("case", range(4))
def test_overflowing_logits_are_refused_by_forward_and_backward(rng, case):
    Q, K, scale, name = overflowing_cases(rng)[case]
    V = np.ones((K.shape[0], 3), dtype=Q.dtype)
    with pytest.raises(AttnInputError, match=OVERFLOW.format(name)):
        al.flash_forward(Q, K, V, scale=scale)
    O, lse = np.zeros((Q.shape[0], 3), Q.dtype), np.zeros(Q.shape[0], Q.dtype)
    with pytest.raises(AttnInputError, match=OVERFLOW.format(name)):
        al.flash_backward(Q, K, V, O, np.ones_like(O), lse, scale=scale)


def test_large_but_finite_logits_pass_the_overflow_check(rng):
    # ‖q_i‖·‖k_j‖ = 1e308·1e10 overflows, so the Cauchy–Schwarz bound cannot clear these
    # inputs; computed exactly, the logits are 0 (q and k are orthogonal) and finite
    n, m, d = 20, 30, 4
    Q = np.zeros((n, d))
    Q[:, 0] = 1e308
    K = rng.standard_normal((m, d))
    K[:, 0] = 0.0
    K *= 1e10
    V = rng.standard_normal((m, 2))
    fast.check_logits_finite(Q, K, 0.5)
    O, lse = al.flash_forward(Q, K, V)
    np.testing.assert_allclose(O, np.broadcast_to(V.mean(axis=0), O.shape), rtol=1e-12)


# --------------------------------------------------------------------- compiled versions


def test_one_compiled_version_per_dtype_for_every_layout(rng):
    """Read-only, Fortran-order and negative-stride inputs reuse the kernels compiled for
    plain C-contiguous arrays: each entry point has one signature per dtype."""
    n, d = 70, 8

    def read_only(x):
        y = x.copy()
        y.flags.writeable = False
        return y

    layouts = [lambda x: x, read_only, np.asfortranarray, lambda x: x[::-1].copy()[::-1]]
    for m in (90, 40):  # several key blocks and one
        Q, K, V = random_qkv(rng, n, m, d)
        dO = rng.standard_normal((n, d))
        mask = rng.random((n, m)) < 0.8
        for layout in layouts:
            q, k, v, do, msk = (layout(x) for x in (Q, K, V, dO, mask))
            for kw in (dict(mask=msk), dict(is_causal=True)):
                O, lse = al.flash_forward(q, k, v, **kw)
                O, lse = layout(O), layout(lse)
                al.flash_backward(q, k, v, O, do, lse, **kw)
        # batched heads (every head at once), grouped-query
        Qh, Kh, Vh, dOh = (x.reshape(2, -1, x.shape[-1]) for x in (Q, K, V, dO))
        for layout in layouts:
            q, k, v, do = (layout(x) for x in (Qh, Kh[:1], Vh[:1], dOh))
            O, lse = al.flash_forward(q, k, v, is_causal=True, enable_gqa=True)
            # the same is_causal as the forward pass: its lse is refused otherwise
            al.flash_backward(q, k, v, layout(O), do, layout(lse), is_causal=True, enable_gqa=True)
    assert any(layout(Q).strides[0] < 0 for layout in layouts)

    def dtype_of(signature):
        # the 2-D kernels take the tile arguments (attnlib._tiles.Scores) first, Q first in
        # them; the all-heads kernels take Q itself
        first = signature[0]
        return (first.types[0] if isinstance(first, numba.types.BaseTuple) else first).dtype

    for kernel in fast.KERNELS:
        float64 = [sig for sig in kernel.signatures if dtype_of(sig) == numba.float64]
        assert len(float64) == 1, (kernel, float64)


# -------------------------------------------------------------------------- loss gradient


def test_flash_attention_loss_grad_equals_the_closed_form():
    rng = np.random.default_rng(11)
    n, m, d = 70, 50, 6
    X, Y = np.eye(d) + 0.1 * rng.standard_normal((d, d)), rng.standard_normal((d, d))
    A1, E = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    A2, A3 = rng.standard_normal((m, d)), rng.standard_normal((m, d))
    G = al.flash_attention_loss_grad(X, A1, A2, A3, Y, E)
    G_ref = al.attention_loss_grad(X, A1, A2, A3, Y, E)
    assert np.abs(G - G_ref).max() <= 1e-12 * np.abs(G_ref).max()


def test_check_logits_finite_validates_its_arguments():
    Q = np.ones((3, 4))
    for args, message in [
        ((Q[0], Q, 1.0), r"Q must be 2-dimensional"),
        ((Q, Q[:, :2], 1.0), r"K must have d=4 columns like Q, got 2"),
        ((Q, Q, 0.0), r"scale must be a positive finite real number"),
    ]:
        with pytest.raises(AttnInputError, match=message):
            fast.check_logits_finite(*args)
    with pytest.raises(AttnInputError, match=OVERFLOW.format("float32")):
        fast.check_logits_finite(Q.astype(np.float32) * 1e19, Q.astype(np.float32) * 1e19, 1.0)


# ------------------------------------------------- one-row layouts, d = 1, BLAS's arguments


def _assert_kernels_equal_exact(Q, K, V, dO, **kw):
    """flash_forward, flash_backward and attnlib.forward_backward on (Q, K, V, dO) as given against
    the exact core in float64 on plain copies, entrywise within tol·max(1, max|ref|): tol =
    1e-12 in float64; in float32 γ_{n+m+d} = (n+m+d)·u/(1 − (n+m+d)·u), u = 2⁻²⁴, the
    worst-case rounding of a sum of that many terms (each output sums at most n + m + d
    products of entries bounded by the outputs' scale). An error from stale BLAS scratch is
    of the order of the outputs themselves, far above either."""
    plain = [np.array(x) for x in (Q, K, V, dO)]
    exact64 = [x.astype(np.float64) for x in plain]
    O_ref, lse_ref = al.attention_forward(*exact64[:3], **kw)
    refs = (O_ref, lse_ref, *al.attention_backward(*exact64[:3], O_ref, exact64[3], lse_ref, **kw))
    O, lse = al.flash_forward(Q, K, V, **kw)
    ours = (O, lse, *al.flash_backward(Q, K, V, O, dO, lse, **kw))
    both = al.forward_backward(Q, K, V, dO, **kw)
    for a, b in zip((ours[0], *ours[2:]), both, strict=True):
        assert np.array_equal(a, b)
    (n, d), m = Q.shape, K.shape[0]
    if Q.dtype == np.float64:
        tol = 1e-12
    else:
        k, u = n + m + d, 2.0**-24
        tol = k * u / (1 - k * u)
    for got, ref in zip(ours, refs, strict=True):
        assert got.dtype == Q.dtype and got.shape == ref.shape
        assert np.array_equal(np.isneginf(got), np.isneginf(ref))
        fin = np.isfinite(ref)
        err = float(np.abs(got[fin] - ref[fin]).max(initial=0.0))
        assert err <= tol * max(1.0, float(np.abs(ref[fin]).max(initial=0.0))), err
    return ours


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("which", ["Q and dO", "K and V", "all four"])
def test_one_row_inputs_of_every_layout_equal_the_exact_core(rng, which, dtype, capfd):
    """A single query (with its dO) or a single key (with its value), made every way numpy
    allows: numpy leaves a length-1 axis's stride arbitrary, and BLAS must never be told it.
    Many keys (or queries) on the other side, so the tiles are full ones and ragged ones."""
    n, m, d = 300, 300, 8
    Q, K, V = random_qkv(rng, n, m, d, dtype=dtype)
    dO = rng.standard_normal((n, d)).astype(dtype)
    one_query = which != "K and V"
    one_key = which != "Q and dO"
    for name in one_row_layouts(Q[0]):
        q, do = (one_row_layouts(x[0])[name] for x in (Q, dO)) if one_query else (Q, dO)
        k, v = (one_row_layouts(x[0])[name] for x in (K, V)) if one_key else (K, V)
        copies = [np.array(x) for x in (q, k, v, do)]
        for causal in (False, True):
            ours = _assert_kernels_equal_exact(q, k, v, do, is_causal=causal)
            # and bit for bit what the same rows give as plain C arrays
            again = _assert_kernels_equal_exact(*copies, is_causal=causal)
            for a, b in zip(ours, again, strict=True):
                assert np.array_equal(a, b), name
        for x, c in zip((q, k, v, do), copies, strict=True):
            assert np.array_equal(x, c)  # never modified
    assert "illegal" not in capfd.readouterr().err


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m", [255, 256, 257, 1000])
@pytest.mark.parametrize("d,dv", [(1, 1), (1, 8), (8, 1)])
def test_head_widths_of_one_across_a_full_key_block(rng, d, dv, m, dtype, capfd):
    """d = 1 or d_v = 1 where the key blocks become full (256 keys): a full block's K and V
    are multiplied through their blocked transposes, (1, 256) arrays whose row stride numpy
    leaves arbitrary."""
    Q, K, V = random_qkv(rng, 300, m, d, dv, dtype=dtype)
    dO = rng.standard_normal((300, dv)).astype(dtype)
    _assert_kernels_equal_exact(Q, K, V, dO)
    _assert_kernels_equal_exact(Q, K, V, dO, is_causal=True)
    assert "illegal" not in capfd.readouterr().err


def test_loss_gradient_with_head_width_one(rng, capfd):
    """AS24's dL/dX through the kernels at d = 1 with m = 300 keys: K = A2 and V = A3·Y are
    (300, 1), a full key block and a ragged one."""
    X, Y = rng.standard_normal((1, 1)), rng.standard_normal((1, 1))
    A1, A2, A3, E = (rng.standard_normal((300, 1)) for _ in range(4))
    got = al.flash_attention_loss_grad(X, A1, A2, A3, Y, E)
    assert rel_err(got, al.attention_loss_grad(X, A1, A2, A3, Y, E)) <= 1e-12
    assert "illegal" not in capfd.readouterr().err


def test_a_reported_kernel_error_raises_instead_of_returning():
    """What the kernels report becomes an exception: a BLAS argument error as RuntimeError,
    an inconsistent lse as AttnInputError naming lse and the row."""
    err = np.zeros(fast.ERR_SLOTS, np.int64)
    fast._raise_reported(err)  # nothing reported: returns
    err[fast.ERR_BLAS] = 8
    with pytest.raises(RuntimeError, match="gemm parameter 8"):
        fast._raise_reported(err)
    err[:] = 0
    err[fast.ERR_LSE_HEAD], err[fast.ERR_LSE_ROW] = 3, 5
    with pytest.raises(AttnInputError, match=r"lse .* row 4 of head 3"):
        fast._raise_reported(err, heads=4)
    with pytest.raises(AttnInputError, match=r"lse .* row 4 of head 5"):  # a run from head 2
        fast._raise_reported(err, first=2, heads=8)


KERNEL_CASES = [
    *BATCHED_CASES,
    # batch 2 × 4 query heads over 2 K/V heads
    ((2,), 4, 2, 70, 90, 8, 8, True),
    ((2,), 4, 2, 70, 90, 8, 8, False),
    # several query and key blocks per head (256 x 256 tiles), grouped and not
    ((), 4, 2, 600, 530, 8, 8, True),
    ((), 4, 1, 520, 700, 8, 4, False),
    ((2,), 2, 2, 300, 520, 4, 4, False),
]


def _flash(Q, K, V, dO, causal, g):
    kw = dict(is_causal=causal, enable_gqa=g > 1)
    O, lse = al.flash_forward(Q, K, V, **kw)
    return (O, lse, *al.flash_backward(Q, K, V, O, dO, lse, **kw))


def _assert_heads_are_the_2d_kernels(Q, K, V, dO, outputs, keep=None, **kw):
    """The batched outputs (O, lse, dQ, dK, dV) are bit for bit the 2-D kernels' head by
    head, each head with its own (n, m) keep-mask ``keep[(*b, h)]`` (None: none), and dK, dV
    their sums in the fixed order of the query heads h = j·g, j·g + 1, ... of K/V head j."""
    O, lse, dQ, dK, dV = outputs
    *batch, H, n, _ = Q.shape
    g = H // K.shape[-3]
    assert O.shape == (*batch, H, n, V.shape[-1]) and lse.shape == (*batch, H, n)
    assert dQ.shape == Q.shape and dK.shape == K.shape and dV.shape == V.shape
    dK_ref, dV_ref = np.zeros_like(K), np.zeros_like(V)
    for b in np.ndindex(*batch):
        for h in range(H):
            i, kv = (*b, h), (*b, h // g)
            mask = None if keep is None else keep[i]
            o, ls = al.flash_forward(Q[i], K[kv], V[kv], mask=mask, **kw)
            assert np.array_equal(O[i], o) and np.array_equal(lse[i], ls)
            dq, dk, dv = al.flash_backward(Q[i], K[kv], V[kv], o, dO[i], ls, mask=mask, **kw)
            assert np.array_equal(dQ[i], dq)
            dK_ref[kv] += dk
            dV_ref[kv] += dv
    assert np.array_equal(dK, dK_ref) and np.array_equal(dV, dV_ref)


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", KERNEL_CASES)
def test_batched_equals_the_2d_kernels_head_by_head(batch, H, H_kv, n, m, d, d_v, causal):
    Q, K, V, dO = batched_qkv_dO(batch, H, H_kv, n, m, d, d_v)
    outputs = _flash(Q, K, V, dO, causal, H // H_kv)
    _assert_heads_are_the_2d_kernels(Q, K, V, dO, outputs, is_causal=causal)


@pytest.mark.parametrize(
    "shape",
    [(300, 270), (2, 1, 1, 270), (2, 1, 300, 270), (4, 300, 270), (2, 4, 300, 270)],
    ids=["every-head", "key-padding", "per-batch", "per-head", "per-query-head"],
)
def test_batched_masks_equal_the_2d_kernels_head_by_head(shape):
    """A keep-mask that every head shares, or each run of heads (a batch index), or each
    query head, which then runs alone though its key/value head serves two."""
    Q, K, V, dO = batched_qkv_dO((2,), 4, 2, 300, 270, 8, 8, seed=7)
    mask = np.random.default_rng(8).random(shape) < 0.7
    kw = dict(mask=mask, enable_gqa=True)
    O, lse = al.flash_forward(Q, K, V, **kw)
    outputs = (O, lse, *al.flash_backward(Q, K, V, O, dO, lse, **kw))
    keep = np.broadcast_to(mask, (2, 4, 300, 270))
    _assert_heads_are_the_2d_kernels(Q, K, V, dO, outputs, keep)


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", KERNEL_CASES)
def test_batched_equals_the_exact_core(batch, H, H_kv, n, m, d, d_v, causal):
    Q, K, V, dO = batched_qkv_dO(batch, H, H_kv, n, m, d, d_v)
    g = H // H_kv
    ours = _flash(Q, K, V, dO, causal, g)
    kw = dict(is_causal=causal, enable_gqa=g > 1)
    O, lse = al.attention_forward(Q, K, V, **kw)
    exact = (O, lse, *al.attention_backward(Q, K, V, O, dO, lse, **kw))
    for a, b in zip(ours, exact, strict=True):
        assert a.dtype == b.dtype and rel_err(a, b) <= 1e-10


def test_batched_mask_broadcasts_and_matches_the_exact_core():
    Q, K, V, dO = batched_qkv_dO((2,), 4, 2, 40, 50, 8, 8, seed=3)
    keep = np.random.default_rng(1).random((40, 50)) > 0.3
    keep[7] = False  # a fully masked row in every head
    O, lse = al.flash_forward(Q, K, V, mask=keep, enable_gqa=True)
    assert np.all(O[..., 7, :] == 0) and np.all(np.isneginf(lse[..., 7]))
    grads = al.flash_backward(Q, K, V, O, dO, lse, mask=keep, enable_gqa=True)
    O_ref, lse_ref = al.attention_forward(Q, K, V, mask=keep, enable_gqa=True)
    refs = al.attention_backward(Q, K, V, O_ref, dO, lse_ref, mask=keep, enable_gqa=True)
    live = ~np.isneginf(lse_ref)
    assert np.array_equal(np.isneginf(lse), ~live)
    assert rel_err(O, O_ref) <= 1e-10 and rel_err(lse[live], lse_ref[live]) <= 1e-10
    for a, b in zip(grads, refs, strict=True):
        assert rel_err(a, b) <= 1e-10


def test_batched_float32_obeys_the_differential_rule():
    """FlashAttention's rule (assert_within_flash_rule), the naive float32 computation
    being the exact core in float32 and the reference float64 on the same float32-rounded
    inputs."""
    Q, K, V, dO = (
        x.astype(np.float32) for x in batched_qkv_dO((2,), 4, 2, 130, 150, 16, 16, seed=5)
    )
    Q *= 2.0
    kw = dict(is_causal=True, enable_gqa=True)
    ours = _flash(Q, K, V, dO, True, 2)
    O, lse = al.attention_forward(Q, K, V, **kw)
    naive = (O, lse, *al.attention_backward(Q, K, V, O, dO, lse, **kw))
    up = [x.astype(np.float64) for x in (Q, K, V, dO)]
    O64, lse64 = al.attention_forward(*up[:3], **kw)
    ref = (O64, lse64, *al.attention_backward(*up[:3], O64, up[3], lse64, **kw))
    for got, nv, r in zip(ours, naive, ref, strict=True):
        assert got.dtype == np.float32
        assert_within_flash_rule(got, nv, r)


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", KERNEL_CASES)
def test_matches_pytorch_sdpa(batch, H, H_kv, n, m, d, d_v, causal):
    torch = pytest.importorskip("torch")
    Q, K, V, dO = batched_qkv_dO(batch, H, H_kv, n, m, d, d_v)
    O, _, dQ, dK, dV = _flash(Q, K, V, dO, causal, H // H_kv)
    q, k, v = (torch.tensor(x, requires_grad=True) for x in (Q, K, V))
    kw = dict(is_causal=causal, enable_gqa=H != H_kv)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    o.backward(torch.tensor(dO))
    # float64 on both sides: agreement to round-off
    for ours, theirs in [(O, o), (dQ, q.grad), (dK, k.grad), (dV, v.grad)]:
        assert rel_err(ours, theirs.detach().numpy()) <= 1e-10
