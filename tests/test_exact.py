"""The exact core (attnlib.exact) against slow oracles, scipy, finite differences and
hypothesis; on batched, multi-head input (..., H, n, d) with grouped K/V heads and causal
masking, equal to the 2-D computation head by head and to PyTorch's
scaled_dot_product_attention (when PyTorch is installed); and its bad input, each refusal
naming the argument (the bad Q, K and V that every implementation shares are in
test_qkv_inputs.py; values against the float64 reference on structured families in
test_batched_reference.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
from helpers import BATCHED_CASES, assert_within_flash_rule, batched_qkv_dO, random_qkv, rel_err
from hypothesis import given
from hypothesis import strategies as st
from naive import naive_backward, naive_forward, naive_loss, naive_loss_grad

import attnlib as al
from attnlib import AttnInputError
from attnlib.nbtools import central_difference

# FlashAttention's awkward (n, m) shapes, scaled to stay fast, crossed with d of 1, 3 and 64.
SHAPES = [(1, 1), (239, 1), (113, 203), (127, 128), (128, 127)]
DIMS = [1, 3, 64]


def loss_inputs(rng, n, d, m=None, scale=0.5):
    m = n if m is None else m
    return (
        scale * rng.standard_normal((d, d)),  # X
        rng.standard_normal((n, d)),  # A1
        rng.standard_normal((m, d)),  # A2
        rng.standard_normal((m, d)),  # A3
        rng.standard_normal((d, d)),  # Y
        rng.standard_normal((n, d)),  # E
    )


# ----------------------------------------------------------------------------- oracles


@pytest.mark.parametrize("n,m", SHAPES)
@pytest.mark.parametrize("d", DIMS)
def test_forward_and_backward_match_loop_oracles(rng, n, m, d):
    Q, K, V = random_qkv(rng, n, m, d, dv=max(1, d // 2))
    scale = 1 / math.sqrt(d)
    O, lse = al.attention_forward(Q, K, V)
    O_ref, lse_ref = naive_forward(Q, K, V, scale)
    assert rel_err(O, O_ref) < 1e-12
    assert rel_err(lse, lse_ref) < 1e-12
    dO = rng.standard_normal(O.shape)
    grads = al.attention_backward(Q, K, V, O, dO, lse)
    # Errors are measured against the magnitude of the summed terms (the same equations
    # evaluated on absolute values), the standard yardstick for rounding. It differs from
    # max|g| only when the terms cancel: with m = 1 the softmax is constant, dQ = dK = 0.
    for g, g_ref, g_abs in zip(
        grads, naive_backward(Q, K, V, dO, scale), abs_terms(Q, K, V, dO, scale), strict=True
    ):
        assert g.shape == g_ref.shape
        assert np.abs(g - g_ref).max() <= 1e-12 * g_abs.max()
        assert rel_err(g, g_ref) < 1e-12 or np.abs(g_ref).max() < 1e-10 * g_abs.max()


def abs_terms(Q, K, V, dO, scale):
    """The backward equations evaluated on absolute values: the size of what is summed."""
    P = al.attention(Q, K, np.eye(K.shape[0]), scale=scale)
    O = P @ V
    dS = P * (np.abs(dO) @ np.abs(V).T + np.sum(np.abs(dO * O), axis=1, keepdims=True))
    return scale * dS @ np.abs(K), scale * dS.T @ np.abs(Q), P.T @ np.abs(dO)


@pytest.mark.parametrize("n,m,d", [(1, 1, 1), (7, 5, 3), (16, 16, 4), (9, 23, 6)])
def test_loss_and_grad_match_loop_oracles(rng, n, m, d):
    args = loss_inputs(rng, n, d, m)
    assert abs(al.attention_loss(*args) - naive_loss(*args)) <= 1e-12 * naive_loss(*args)
    assert rel_err(al.attention_loss_grad(*args), naive_loss_grad(*args)) < 1e-12


def test_row_statistics_match_scipy(rng):
    Q, K, _ = random_qkv(rng, 50, 70, 8)
    scale = 0.7
    S = scale * Q @ K.T
    # With V = I the output rows are the softmax rows themselves.
    O, lse = al.attention_forward(Q, K, np.eye(70), scale=scale)
    assert rel_err(lse, scipy.special.logsumexp(S, axis=1)) < 1e-14
    assert rel_err(O, scipy.special.softmax(S, axis=1)) < 1e-14


# ----------------------------------------------------------------------- finite differences


def test_qkv_gradients_match_finite_differences(rng):
    Q, K, V = random_qkv(rng, 6, 9, 4, dv=3)
    mask = rng.random((6, 9)) < 0.7
    mask[2] = False  # one fully masked row
    dO = rng.standard_normal((6, 3))

    def objective(Q, K, V):
        return float(np.sum(al.attention(Q, K, V, mask=mask) * dO))

    O, lse = al.attention_forward(Q, K, V, mask=mask)
    dQ, dK, dV = al.attention_backward(Q, K, V, O, dO, lse, mask=mask)
    h = 1e-6
    assert rel_err(dQ, central_difference(lambda x: objective(x, K, V), Q, h)) < 1e-7
    assert rel_err(dK, central_difference(lambda x: objective(Q, x, V), K, h)) < 1e-7
    assert rel_err(dV, central_difference(lambda x: objective(Q, K, x), V, h)) < 1e-7


def test_loss_grad_matches_finite_differences(rng):
    X, A1, A2, A3, Y, E = loss_inputs(rng, 10, 5)
    G = al.attention_loss_grad(X, A1, A2, A3, Y, E)
    G_fd = central_difference(lambda x: al.attention_loss(x, A1, A2, A3, Y, E), X, 1e-6)
    assert rel_err(G, G_fd) < 1e-7


def test_loss_grad_is_the_flash_backward_pass(rng):
    """Chapter 1's dictionary: dL/dX = A₁ᵀ dQ, Q = A₁X, K = A₂, V = A₃Y, dO = O − E, τ = 1/d."""
    X, A1, A2, A3, Y, E = loss_inputs(rng, 12, 6, 15)
    d = 6
    O, lse = al.attention_forward(A1 @ X, A2, A3 @ Y, scale=1 / d)
    dQ, _, _ = al.attention_backward(A1 @ X, A2, A3 @ Y, O, O - E, lse, scale=1 / d)
    assert rel_err(al.attention_loss_grad(X, A1, A2, A3, Y, E), A1.T @ dQ) < 1e-12


def test_the_papers_missing_one_over_d_is_wrong(rng):
    """AS24 App. B–C drop the 1/d: the gradient without it is d times too large."""
    X, A1, A2, A3, Y, E = loss_inputs(rng, 8, 4)
    G = al.attention_loss_grad(X, A1, A2, A3, Y, E)
    G_fd = central_difference(lambda x: al.attention_loss(x, A1, A2, A3, Y, E), X, 1e-6)
    assert rel_err(4 * G, G_fd) > 1.0  # the paper's form is far off
    assert rel_err(G, G_fd) < 1e-7


# ------------------------------------------------------------------------------- stability


def test_fully_masked_rows_give_zero_not_nan(rng):
    Q, K, V = random_qkv(rng, 5, 4, 3)
    mask = np.ones((5, 4), dtype=bool)
    mask[[0, 3]] = False
    O, lse = al.attention_forward(Q, K, V, mask=mask)
    assert np.all(O[[0, 3]] == 0) and np.all(np.isneginf(lse[[0, 3]]))
    assert np.all(np.isfinite(O)) and np.all(np.isfinite(lse[[1, 2, 4]]))
    grads = al.attention_backward(Q, K, V, O, np.ones_like(O), lse, mask=mask)
    for g in grads:
        assert np.all(np.isfinite(g))
    assert np.all(grads[0][[0, 3]] == 0)


def test_everything_masked(rng):
    Q, K, V = random_qkv(rng, 3, 4, 2)
    mask = np.zeros((3, 4), dtype=bool)
    O, lse = al.attention_forward(Q, K, V, mask=mask)
    assert np.all(O == 0) and np.all(np.isneginf(lse))
    for g in al.attention_backward(Q, K, V, O, np.ones_like(O), lse, mask=mask):
        assert np.all(g == 0)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_logits_of_1e4_keep_the_softmax(sign):
    """One logit 1e4 above the rest: the softmax is one-hot, not overflowed or NaN."""
    Q = np.array([[sign * 1e4, 0.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    V = np.array([[1.0], [2.0], [3.0]])
    O, lse = al.attention_forward(Q, K, V, scale=1.0)
    winner = 0 if sign > 0 else 2
    assert O[0, 0] == V[winner, 0]
    assert lse[0] == pytest.approx(1e4)
    grads = al.attention_backward(Q, K, V, O, np.ones_like(O), lse, scale=1.0)
    assert all(np.all(np.isfinite(g)) for g in grads)
    # A near-tie at 1e4 still splits evenly: the shift, not the magnitude, decides.
    O2, _ = al.attention_forward(np.array([[1e4, 1e4]]), K[:2], V[:2], scale=1.0)
    assert O2[0, 0] == pytest.approx(1.5, rel=1e-12)


@st.composite
def attention_cases(draw):
    n = draw(st.integers(1, 12))
    m = draw(st.integers(1, 12))
    d = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    magnitude = draw(st.sampled_from([1e-3, 1.0, 30.0, 1e2]))
    rng = np.random.default_rng(seed)
    Q = magnitude * rng.standard_normal((n, d))
    K = magnitude * rng.standard_normal((m, d))
    V = rng.standard_normal((m, draw(st.integers(1, 4))))
    mask = None
    if draw(st.booleans()):
        mask = rng.random((n, m)) < draw(st.sampled_from([0.0, 0.3, 0.8, 1.0]))
    return Q, K, V, mask


@given(attention_cases())
def test_property_matches_oracle_and_stays_in_hull(case):
    """Random shapes and magnitudes (logits up to ~1e4 and beyond), masks with empty rows."""
    Q, K, V, mask = case
    scale = 1 / math.sqrt(Q.shape[1])
    O, lse = al.attention_forward(Q, K, V, mask=mask)
    O_ref, lse_ref = naive_forward(Q, K, V, scale, mask)
    assert np.all(np.isfinite(O))
    assert not np.any(np.isnan(lse))
    assert np.allclose(O, O_ref, rtol=1e-10, atol=1e-12)
    assert np.array_equal(np.isneginf(lse), np.isneginf(lse_ref))
    live = np.isfinite(lse_ref)
    assert np.allclose(lse[live], lse_ref[live], rtol=1e-12, atol=1e-12)
    # each output row is a convex combination of the rows of V
    assert np.all(O[live] <= V.max(axis=0) + 1e-12) and np.all(O[live] >= V.min(axis=0) - 1e-12)
    dO = np.ones_like(O)
    for g, g_ref in zip(
        al.attention_backward(Q, K, V, O, dO, lse, mask=mask),
        naive_backward(Q, K, V, dO, scale, mask),
        strict=True,
    ):
        assert np.all(np.isfinite(g))
        assert np.allclose(g, g_ref, rtol=1e-8, atol=1e-8 * max(1.0, np.abs(g_ref).max()))


# ----------------------------------------------------------------------------------- dtype


def test_float32_obeys_the_differential_rule(rng):
    """FlashAttention's rule (assert_within_flash_rule) for the exact core in float32.

    The naive float32 computation materialises exp(S) without the max shift, normalises, and
    multiplies; the reference is the float64 result on the same (float32-rounded) inputs.
    """
    for n, m, d in [(64, 80, 16), (127, 128, 64)]:
        Q, K, V = random_qkv(rng, n, m, d, dtype=np.float32)
        O32, lse32 = al.attention_forward(Q, K, V)
        assert O32.dtype == np.float32 and lse32.dtype == np.float32
        O64, lse64 = al.attention_forward(*(x.astype(np.float64) for x in (Q, K, V)))
        S = (Q @ K.T) * np.float32(1 / math.sqrt(d))
        P = np.exp(S)
        naive32 = (P / P.sum(axis=1, keepdims=True)) @ V
        assert_within_flash_rule(O32, naive32, O64)
        dO = rng.standard_normal(O32.shape).astype(np.float32)
        g32 = al.attention_backward(Q, K, V, O32, dO, lse32)
        g64 = al.attention_backward(
            *(x.astype(np.float64) for x in (Q, K, V)), O64, dO.astype(np.float64), lse64
        )
        # naive float32 backward: same equations, P from the unshifted float32 softmax
        P32 = P / P.sum(axis=1, keepdims=True)
        dS = P32 * (dO @ V.T - np.sum(dO * naive32, axis=1, keepdims=True))
        tau = np.float32(1 / math.sqrt(d))
        naive_grads = (tau * dS @ K, tau * dS.T @ Q, P32.T @ dO)
        assert [g.dtype for g in g32] == [np.float32] * 3
        for g, ref, naive in zip(g32, g64, naive_grads, strict=True):
            assert_within_flash_rule(g, naive, ref)


def test_mixed_precision_promotes_to_float64(rng):
    Q, K, V = random_qkv(rng, 4, 5, 3)
    O, lse = al.attention_forward(Q.astype(np.float32), K, V)
    assert O.dtype == np.float64 and lse.dtype == np.float64


def test_inputs_are_never_modified(rng):
    Q, K, V = random_qkv(rng, 6, 7, 3)
    mask = rng.random((6, 7)) < 0.5
    mask[0] = False
    dO = rng.standard_normal((6, 3))
    copies = [x.copy() for x in (Q, K, V, mask, dO)]
    O, lse = al.attention_forward(Q, K, V, mask=mask)
    O_copy, lse_copy = O.copy(), lse.copy()
    al.attention_backward(Q, K, V, O, dO, lse, mask=mask)
    for x, c in zip((Q, K, V, mask, dO), copies, strict=True):
        assert np.array_equal(x, c)
    assert np.array_equal(O, O_copy) and np.array_equal(lse, lse_copy)
    args = loss_inputs(rng, 5, 3)
    before = [a.copy() for a in args]
    al.attention_loss(*args)
    al.attention_loss_grad(*args)
    for a, b in zip(args, before, strict=True):
        assert np.array_equal(a, b)


# ------------------------------------------------------------------- the memory guards


def _guarded_and_peak(monkeypatch, call):
    """(the largest total the memory guards computed, the traced peak) of ``call()``: every
    call of check_memory_parts from attnlib's modules, the guard of the attention passes
    (attnlib._heads.normalise) and of the loss functions (through check_loss_inputs)."""
    import sys
    import tracemalloc

    from attnlib import _checks

    totals, guard = [], _checks.check_memory_parts

    def recording(what, parts, **kw):
        totals.append(guard(what, parts, **kw))
        return totals[-1]

    for name, module in list(sys.modules.items()):
        if name.startswith("attnlib") and getattr(module, "check_memory_parts", None) is guard:
            monkeypatch.setattr(module, "check_memory_parts", recording)
    call()  # warm: numpy's first calls allocate caches that are not the call's
    totals.clear()
    tracemalloc.start()
    try:
        call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return max(totals), peak


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["plain", "mask", "causal", "batched", "converted"])
def test_memory_guards_bound_the_measured_peak(monkeypatch, rng, dtype, kind):
    """The working memory each exact pass checks against the limit, before allocating, is an
    upper bound of its tracemalloc peak, and not a loose one (within a factor 2)."""
    n, m, d, dv = 700, 900, 8, 4
    Q, K, V = (x.astype(dtype) for x in random_qkv(rng, n, m, d, dv))
    dO = rng.standard_normal((n, dv)).astype(dtype)
    kw = {}
    if kind == "mask":
        kw["mask"] = rng.random((n, m)) < 0.7
    if kind == "causal":
        kw["is_causal"] = True
    if kind == "batched":
        Q, K, V, dO = (x.reshape(2, 1, x.shape[0] // 2, x.shape[1]) for x in (Q, K, V, dO))
    if kind == "converted":
        Q = Q.astype(np.float32 if dtype == np.float64 else np.float64)
    O, lse = al.attention_forward(Q, K, V, **kw)
    calls = {
        "forward": lambda: al.attention_forward(Q, K, V, **kw),
        "backward": lambda: al.attention_backward(Q, K, V, O, dO, lse, **kw),
    }
    for name, call in calls.items():
        guarded, measured = _guarded_and_peak(monkeypatch, call)
        assert measured <= guarded <= 2 * measured, (name, measured, guarded)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_loss_memory_guards_bound_the_measured_peak(monkeypatch, rng, dtype):
    args = tuple(a.astype(dtype) for a in loss_inputs(rng, 700, 8, m=900))
    for f in (al.attention_loss, al.attention_loss_grad):
        guarded, measured = _guarded_and_peak(monkeypatch, lambda f=f: f(*args))
        assert measured <= guarded <= 2 * measured, (f.__name__, measured, guarded)


def test_memory_guard_refuses_before_allocating_and_names_the_arguments():
    import tracemalloc

    tall = np.ones((40_000, 1))
    tracemalloc.start()
    try:
        with pytest.raises(al.AttnInputError) as refused:
            al.attention_forward(tall, tall, tall)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 16
    assert str(refused.value) == (
        "the exact forward pass would need 11.9 GiB of working memory, over the limit of "
        "4 GiB, most of it for the n × m = 40000 × 40000 scores (11.9 GiB); Q or K is too large"
    )
    with pytest.raises(al.AttnInputError, match=r"; A1 or A2 is too large$"):
        al.attention_loss_grad(np.eye(1), tall, tall, tall, np.eye(1), tall)


def test_a_broadcast_query_block_is_computed_without_copies(rng):
    """Zero-stride views are legal input: validated on their distinct entries, multiplied
    without a copy, and the answer is the one-row answer repeated."""
    Q, K, V = random_qkv(rng, 1, 9, 4, 3)
    many = np.broadcast_to(Q, (200_000, 4))
    O, lse = al.attention_forward(many, K, V)
    O1, lse1 = al.attention_forward(Q, K, V)
    assert np.allclose(O, O1, rtol=1e-14, atol=0) and np.allclose(lse, lse1, rtol=1e-14, atol=0)


def test_in_place_passes_give_the_out_of_place_values(rng):
    """The passes work in place to hold fewer n × m arrays; each value is the product of
    the same operations, so the results equal those of plain numpy expressions bit for bit."""
    Q, K, V = random_qkv(rng, 37, 41, 5, 3)
    dO = rng.standard_normal((37, 3))
    tau = 1 / math.sqrt(5)
    S = (Q @ K.T) * tau
    E = np.exp(S - S.max(axis=1)[:, None])
    rs = E.sum(axis=1)
    O_ref = (E / rs[:, None]) @ V
    O, lse = al.attention_forward(Q, K, V)
    assert np.array_equal(O, O_ref)
    assert np.array_equal(lse, np.log(rs) + S.max(axis=1))
    P = np.exp(S - lse[:, None])
    D = np.einsum("ij,ij->i", dO, O)
    dS = P * (dO @ V.T - D[:, None])
    refs = ((dS @ K) * tau, (dS.T @ Q) * tau, P.T @ dO)
    for got, ref in zip(al.attention_backward(Q, K, V, O, dO, lse), refs, strict=True):
        assert np.array_equal(got, ref)
    X, A1, A2, A3, Y, E_ = loss_inputs(rng, 37, 5, m=41)
    S = (A1 @ X @ A2.T) / 5
    S -= S.max(axis=1, keepdims=True)
    f = np.exp(S)
    f /= f.sum(axis=1, keepdims=True)
    h = A3 @ Y
    c = f @ h - E_
    p = f * (c @ h.T) - np.einsum("ij,ij->i", c, c + E_)[:, None] * f
    assert np.array_equal(al.attention_loss_grad(X, A1, A2, A3, Y, E_), (A1.T @ p @ A2) / 5)


def test_the_causal_mask_guard_counts_np_tri_s_index_vectors():
    """np.tri builds two index vectors besides the mask: at n = 1 they outweigh it 16 to 1,
    so the guard of causal_mask (and of is_causal=True) counts them."""
    import tracemalloc

    from attnlib._heads import causal_mask_bytes
    from attnlib.iomodel import causal_mask

    for n, m in [(1, 200_000), (300, 400), (50_000, 1)]:
        tracemalloc.start()
        try:
            mask = causal_mask(n, m)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert np.array_equal(mask, np.tri(n, m, dtype=bool))
        assert peak <= causal_mask_bytes(n, m) <= 2 * peak + 2**17
    with pytest.raises(al.AttnInputError, match=r"would need 36 GiB.*; n or m is too large$"):
        causal_mask(1, 2**32)  # a 4 GiB mask, at the limit, and 32 GiB of int64 indices


@pytest.mark.parametrize("backward", [al.attention_backward, al.flash_backward])
@pytest.mark.parametrize("big", [1e300, 1e307])
def test_backward_with_dO_near_the_float_range(rng, backward, big):
    """The backward pass is linear in dO: with dO near the float range (dP = dO Vᵀ would
    overflow) the gradients are those of dO / big times big, to rounding, not NaN. A result
    that does not fit the dtype is refused, naming dO."""
    Q, K, V = random_qkv(rng, 300, 280, 8)
    dO = rng.standard_normal((300, 8))
    O, lse = al.attention_forward(Q, K, V)
    scaled = backward(Q, K, V, O, dO * big, lse)
    for got, ref in zip(scaled, backward(Q, K, V, O, dO, lse), strict=True):
        assert np.isfinite(got).all()
        assert rel_err(got / big, ref) <= 1e-14
    with pytest.raises(al.AttnInputError, match=r"gradients .* overflow .*dO"):
        backward(
            Q * 1e3, K, V * 1e300, O * 1e300, dO * 1e300, al.attention_forward(Q * 1e3, K, V)[1]
        )


def call_forward(a):
    return al.attention_forward(a["Q"], a["K"], a["V"], **a.get("kw", {}))


def call_attention(a):
    return al.attention(a["Q"], a["K"], a["V"], **a.get("kw", {}))


def call_backward(a):
    return al.attention_backward(
        a["Q"], a["K"], a["V"], a["O"], a["dO"], a["lse"], **a.get("kw", {})
    )


QKV_FUNCTIONS = [call_forward, call_attention, call_backward]

KEYWORD_CASES = [
    (dict(scale=0.0), r"scale must be a positive finite real number, got 0.0"),
    (dict(scale=-1), r"scale must be a positive finite real number, got -1"),
    (dict(scale=float("nan")), r"scale must be a positive finite real number, got nan"),
    (dict(scale=float("inf")), r"scale must be a positive finite real number, got inf"),
    (dict(scale="0.5"), r"scale must be a positive finite real number, got '0.5'"),
    (
        dict(mask=np.ones((4, 4), dtype=bool)),
        r"mask must have shape \(n, m\) = \(4, 5\), got \(4, 4\)",
    ),
    (
        dict(mask=np.ones((4, 5))),
        r"mask must have a boolean dtype \(True = keep\), got dtype float64",
    ),
    (dict(mask=np.ones((4, 5), dtype=int)), r"mask must have a boolean dtype"),
]


@pytest.mark.parametrize("func", QKV_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kw,message", KEYWORD_CASES)
def test_bad_scale_and_mask(qkv, func, kw, message):
    qkv["kw"] = kw
    with pytest.raises(AttnInputError, match=message):
        func(qkv)


BACKWARD_CASES = [
    ("O", lambda a: a["O"][:3], r"O must have shape \(n, d_v\) = \(4, 2\), got \(3, 2\)"),
    ("dO", lambda a: a["dO"][:, :1], r"dO must have shape \(n, d_v\) like O = \(4, 2\)"),
    ("dO", lambda a: np.full_like(a["dO"], np.nan), r"dO must be finite"),
    ("O", lambda a: a["O"].astype(np.int32), r"O must have a float32 or float64 dtype"),
    ("lse", lambda a: a["lse"][:, None], r"lse must be 1-dimensional"),
    ("lse", lambda a: a["lse"][:2], r"lse must have shape \(n,\) = \(4,\), got \(2,\)"),
    ("lse", lambda a: np.full_like(a["lse"], np.inf), r"lse must be finite or -inf \(no NaN"),
    ("lse", lambda a: np.full_like(a["lse"], np.nan), r"lse must be finite"),
]


@pytest.mark.parametrize("arg,make,message", BACKWARD_CASES)
def test_bad_backward_inputs(qkv, arg, make, message):
    qkv[arg] = make(qkv)
    with pytest.raises(AttnInputError, match=message):
        call_backward(qkv)


@pytest.fixture
def loss_args():
    rng = np.random.default_rng(1)
    n, d = 6, 3
    return dict(
        X=rng.standard_normal((d, d)),
        A1=rng.standard_normal((n, d)),
        A2=rng.standard_normal((n, d)),
        A3=rng.standard_normal((n, d)),
        Y=rng.standard_normal((d, d)),
        E=rng.standard_normal((n, d)),
    )


LOSS_CASES = [
    ("X", lambda a: a["X"][:2], r"X must have shape \(d, d\) = \(3, 3\), got \(2, 3\)"),
    ("Y", lambda a: a["Y"].ravel(), r"Y must be 2-dimensional"),
    ("A2", lambda a: a["A2"][:, :2], r"A2 must have d=3 columns like A1, got 2"),
    ("A3", lambda a: a["A3"][:5], r"A3 must have m=6 rows like A2, got 5"),
    ("E", lambda a: a["E"][:5], r"E must have shape \(n, d\) like A1 = \(6, 3\), got \(5, 3\)"),
    ("A1", lambda a: a["A1"].astype(np.int8), r"A1 must have a float32 or float64 dtype"),
    ("X", lambda a: np.full((3, 3), np.nan), r"X must be finite"),
    ("A1", lambda a: np.zeros((0, 3)), r"A1 must be non-empty"),
]


@pytest.mark.parametrize("func", [al.attention_loss, al.attention_loss_grad])
@pytest.mark.parametrize("arg,make,message", LOSS_CASES)
def test_bad_loss_inputs(loss_args, func, arg, make, message):
    loss_args[arg] = make(loss_args)
    with pytest.raises(AttnInputError, match=message):
        func(**loss_args)


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", BATCHED_CASES)
def test_batched_equals_two_dimensional_head_by_head(batch, H, H_kv, n, m, d, d_v, causal):
    Q, K, V, dO = batched_qkv_dO(batch, H, H_kv, n, m, d, d_v)
    g = H // H_kv
    kw = dict(is_causal=causal, enable_gqa=g > 1)
    O, lse = al.attention_forward(Q, K, V, **kw)
    dQ, dK, dV = al.attention_backward(Q, K, V, O, dO, lse, **kw)
    assert O.shape == (*batch, H, n, d_v) and lse.shape == (*batch, H, n)
    assert dQ.shape == Q.shape and dK.shape == K.shape and dV.shape == V.shape
    assert np.array_equal(al.attention(Q, K, V, **kw), O)
    mask = np.tri(n, m, dtype=bool) if causal else None
    dK_ref, dV_ref = np.zeros_like(K), np.zeros_like(V)
    for b in np.ndindex(*batch):
        for h in range(H):
            i, kv = (*b, h), (*b, h // g)
            o, ls = al.attention_forward(Q[i], K[kv], V[kv], mask=mask)
            assert np.array_equal(O[i], o) and np.array_equal(lse[i], ls)
            dq, dk, dv = al.attention_backward(Q[i], K[kv], V[kv], o, dO[i], ls, mask=mask)
            assert np.array_equal(dQ[i], dq)
            dK_ref[kv] += dk
            dV_ref[kv] += dv
    assert np.abs(dK - dK_ref).max() <= 1e-13 and np.abs(dV - dV_ref).max() <= 1e-13


def test_is_causal_in_two_dimensions_equals_the_causal_mask():
    Q, K, V, dO = batched_qkv_dO((), 1, 1, 6, 8, 3, 2)
    Q, K, V, dO = Q[0], K[0], V[0], dO[0]
    mask = np.tri(6, 8, dtype=bool)
    O, lse = al.attention_forward(Q, K, V, is_causal=True)
    O_ref, lse_ref = al.attention_forward(Q, K, V, mask=mask)
    assert np.array_equal(O, O_ref) and np.array_equal(lse, lse_ref)
    got = al.attention_backward(Q, K, V, O, dO, lse, is_causal=True)
    want = al.attention_backward(Q, K, V, O, dO, lse, mask=mask)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_batched_mask_broadcasts():
    Q, K, V, _ = batched_qkv_dO((2,), 2, 2, 4, 5, 3, 3)
    keep = np.random.default_rng(1).random((4, 5)) > 0.3
    O, _ = al.attention_forward(Q, K, V, mask=keep)
    for b in range(2):
        for h in range(2):
            assert np.array_equal(O[b, h], al.attention(Q[b, h], K[b, h], V[b, h], mask=keep))


BAD = [
    (lambda Q, K, V: (Q, K[..., 0, :, :], V), {}, r"K must have 4 dimensions"),
    (lambda Q, K, V: (Q, K[:1], V[:1]), {}, r"K must have Q's batch dimensions"),
    (lambda Q, K, V: (Q, K[..., :2], V), {}, r"K must have d=3 columns like Q"),
    (lambda Q, K, V: (Q, K, V[..., :4, :]), {}, r"V must have \(H_kv, m\)"),
    (lambda Q, K, V: (Q, K[:, :1], V[:, :1]), {}, r"enable_gqa=True"),
    (lambda Q, K, V: (Q[:, :3], K[:, :2], V[:, :2]), dict(enable_gqa=True), r"multiple"),
    (lambda Q, K, V: (Q, K, V), dict(enable_gqa="yes"), r"enable_gqa must be a bool"),
    (lambda Q, K, V: (Q, K, V), dict(is_causal=1, enable_gqa=True), r"is_causal must be a bool"),
    (
        lambda Q, K, V: (Q, K, V),
        dict(is_causal=True, mask=np.ones((4, 5), bool), enable_gqa=True),
        r"mask and is_causal",
    ),
    (
        lambda Q, K, V: (Q, K, V),
        dict(mask=np.ones((3, 5), bool), enable_gqa=True),
        r"mask must be broadcastable",
    ),
    (
        lambda Q, K, V: (Q, K, V),
        dict(mask=np.ones((4, 5)), enable_gqa=True),
        r"mask must have a boolean dtype",
    ),
    (lambda Q, K, V: (Q * np.nan, K, V), {}, r"Q must be finite"),
]


@pytest.mark.parametrize("make,kw,message", BAD)
@pytest.mark.parametrize("func", ["forward", "backward"])
def test_batched_input_errors(make, kw, message, func):
    Q, K, V, dO = batched_qkv_dO((2,), 4, 2, 4, 5, 3, 3)
    Q, K, V = make(Q, K, V)
    with pytest.raises(AttnInputError, match=message):
        if func == "forward":
            al.attention_forward(Q, K, V, **kw)
        else:
            al.attention_backward(Q, K, V, dO, dO, dO[..., 0], **kw)


def test_batched_backward_shape_errors():
    Q, K, V, dO = batched_qkv_dO((2,), 4, 2, 4, 5, 3, 3)
    O, lse = al.attention_forward(Q, K, V, enable_gqa=True)
    with pytest.raises(AttnInputError, match=r"dO must have shape \(\.\.\., H, n, d_v\)"):
        al.attention_backward(Q, K, V, O, dO[..., :2], lse, enable_gqa=True)
    with pytest.raises(AttnInputError, match=r"lse must have shape \(\.\.\., H, n\)"):
        al.attention_backward(Q, K, V, O, dO, lse[..., :2], enable_gqa=True)


@pytest.mark.parametrize("batch,H,H_kv,n,m,d,d_v,causal", BATCHED_CASES)
def test_matches_pytorch_sdpa(batch, H, H_kv, n, m, d, d_v, causal):
    torch = pytest.importorskip("torch")
    Q, K, V, dO = batched_qkv_dO(batch, H, H_kv, n, m, d, d_v)
    kw = dict(is_causal=causal, enable_gqa=H != H_kv)
    O, lse = al.attention_forward(Q, K, V, **kw)
    dQ, dK, dV = al.attention_backward(Q, K, V, O, dO, lse, **kw)
    q, k, v = (torch.tensor(x, requires_grad=True) for x in (Q, K, V))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
    o.backward(torch.tensor(dO))
    # float64 on both sides: agreement to round-off (FA2's rule compares against a
    # reference at the same precision)
    for ours, theirs in [(O, o), (dQ, q.grad), (dK, k.grad), (dV, v.grad)]:
        theirs = theirs.detach().numpy()
        assert np.abs(ours - theirs).max() <= 1e-12 * max(1.0, np.abs(theirs).max())
