"""attnlib.logits: the logits' range, row norms, and the backward passes' recomputation of P
from the forward pass's lse, which must refuse an lse that no forward pass could return.

Every backward pass (the exact core, the compiled kernels, the machine's schedules) recomputes
P = exp(τQKᵀ − lse). A correct lse is at least every logit of its row, so P ≤ 1; an lse below
some logit by more than rounding makes exp grow without bound (inf, then NaN gradients). The
tests hold each implementation to refusing such an lse and accepting every correct one: its
own, the other implementation's, in both dtypes, at logits of ±1e4, with masks, causality and
grouped heads.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import random_qkv, rel_err

import attnlib as al
from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.logits import _lse_slack, _probabilities_from_lse, _row_norms, max_row_norm

# (name, forward, backward): each backward pass is fed lse from each forward pass
BACKWARDS = {
    "exact": al.attention_backward,
    "kernels": al.flash_backward,
}
FORWARDS = {
    "exact": al.attention_forward,
    "kernels": al.flash_forward,
}


def test_row_norms_do_not_overflow_or_underflow(rng):
    X = rng.standard_normal((300, 7))
    np.testing.assert_allclose(_row_norms(X), np.linalg.norm(X, axis=1), rtol=1e-15)
    for big in (1e300, 1e-300):
        np.testing.assert_allclose(_row_norms(X * big) / big, np.linalg.norm(X, axis=1), 1e-14)
    assert _row_norms(X).max() == pytest.approx(max_row_norm(X), rel=1e-15)
    assert np.array_equal(_row_norms(np.zeros((3, 2))), np.zeros(3))
    heads = rng.standard_normal((2, 3, 5, 4))
    assert _row_norms(heads).shape == (2, 3, 5)


def _keep(n, m, rng, kind):
    """Masks of the structured families: none, causal, a band, one fully masked row."""
    if kind == "none":
        return None
    if kind == "causal":
        return np.tri(n, m, dtype=bool)
    if kind == "band":
        i, j = np.indices((n, m))
        return np.abs(i - j) <= 3
    keep = rng.random((n, m)) < 0.7
    keep[n // 2] = False  # a fully masked row: lse = -inf there
    return keep


@pytest.mark.parametrize("mask_kind", ["none", "causal", "band", "masked row"])
@pytest.mark.parametrize("logit_scale", [1.0, 1e4])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_backward_accepts_every_forwards_lse(rng, dtype, logit_scale, mask_kind):
    """The slack admits the lse of either forward pass, in either dtype, at logits of order 1
    and of ±1e4 (a nearly one-hot softmax, where a recomputed logit may exceed lse by its
    rounding), and the gradients stay finite with P ≤ 1."""
    n, m, d = 300, 280, 16
    Q, K, V = random_qkv(rng, n, m, d, dtype=dtype)
    Q *= dtype(np.sqrt(logit_scale))
    K *= dtype(np.sqrt(logit_scale))
    dO = rng.standard_normal((n, d)).astype(dtype)
    mask = _keep(n, m, rng, mask_kind)
    for forward in FORWARDS.values():
        O, lse = forward(Q, K, V, mask=mask)
        grads = {
            name: backward(Q, K, V, O, dO, lse, mask=mask) for name, backward in BACKWARDS.items()
        }
        for g in grads.values():
            assert all(np.isfinite(x).all() for x in g)
        if logit_scale == 1.0:  # well conditioned: the two agree to rounding
            tol = 1e-12 if dtype == np.float64 else 1e-4
            for a, b in zip(grads["exact"], grads["kernels"], strict=True):
                assert np.abs(a - b).max() <= tol * max(1.0, float(np.abs(b).max()))


@pytest.mark.parametrize("backward", list(BACKWARDS), ids=list(BACKWARDS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_backward_refuses_an_lse_below_a_logit(rng, dtype, backward):
    """An lse that a logit of its row exceeds is refused with the row named, whichever row
    and however little beyond rounding: half a unit below the row's largest logit at one
    row; −inf at a row with kept keys; 800 below everywhere (exp would overflow)."""
    n, m, d = 300, 280, 16
    Q, K, V = random_qkv(rng, n, m, d, dtype=dtype)
    dO = rng.standard_normal((n, d)).astype(dtype)
    O, lse = al.attention_forward(Q, K, V)
    top = (Q.astype(np.float64) @ K.T.astype(np.float64) / np.sqrt(d)).max(axis=1)
    run = BACKWARDS[backward]
    for row in (0, 137, n - 1):
        bad = lse.copy()
        bad[row] = top[row] - 0.5
        with pytest.raises(AttnInputError, match=rf"^lse .* row {row}\b"):
            run(Q, K, V, O, dO, bad)
        bad[row] = -np.inf
        with pytest.raises(AttnInputError, match=rf"^lse .* row {row}\b"):
            run(Q, K, V, O, dO, bad)
    with pytest.raises(AttnInputError, match=r"^lse "):
        run(Q, K, V, O, dO, lse - dtype(800))
    run(Q, K, V, O, dO, lse)  # and the true lse passes


@pytest.mark.parametrize("backward", list(BACKWARDS), ids=list(BACKWARDS))
def test_batched_grouped_backward_names_the_head(rng, backward):
    """Batched, grouped heads: the refusal names the row (and, for the kernels, which run
    every head at once, the flattened head)."""
    Q = rng.standard_normal((2, 4, 40, 8))
    K, V = rng.standard_normal((2, 2, 50, 8)), rng.standard_normal((2, 2, 50, 8))
    dO = rng.standard_normal((2, 4, 40, 8))
    O, lse = al.attention_forward(Q, K, V, enable_gqa=True, is_causal=True)
    bad = lse.copy()
    bad[1, 2, 7] = -1e3
    with pytest.raises(AttnInputError, match=r"^lse .* row 7\b"):
        BACKWARDS[backward](Q, K, V, O, dO, bad, enable_gqa=True, is_causal=True)
    # causality changes the lse: the forward's causal lse refused for a non-causal backward
    with pytest.raises(AttnInputError, match=r"^lse "):
        BACKWARDS[backward](Q, K, V, O, dO, lse, enable_gqa=True)


def test_the_slack_is_rounding_sized(rng):
    """The slack is not vacuous: for standard normal inputs it is a few hundred units of
    roundoff, so an lse off by 1e-9 (float64) or 1e-2 (float32) below a logit is refused."""
    for dtype, bound in ((np.float64, 1e-11), (np.float32, 5e-3)):
        Q, K, _ = random_qkv(rng, 64, 4096, 64, dtype=dtype)
        lse = al.attention_forward(Q, K, K)[1]
        slack = _lse_slack(Q, K, lse, 1 / 8)
        assert slack.shape == lse.shape and slack.max() < bound, slack.max()


def test_probabilities_are_at_most_one_and_masked_entries_zero():
    """Within the slack, P is cut to 1; masked entries and fully masked rows give 0."""
    S = np.array([[0.0, -np.inf, -1.0], [-np.inf, -np.inf, -np.inf], [2.0, 1.0, 0.0]])
    lse = np.array([np.log1p(np.exp(-1.0)), -np.inf, 2.0 - 1e-15])
    P = _probabilities_from_lse(S.copy(), lse, np.full(3, 1e-12))
    assert P.max() == 1.0 and P[2, 0] == 1.0
    assert P[0, 1] == 0 and np.array_equal(P[1], np.zeros(3))
    np.testing.assert_allclose(P[0].sum(), 1.0, rtol=1e-15)
    with pytest.raises(AttnInputError, match=r"row 7\b"):  # named in the caller's rows
        _probabilities_from_lse(S.copy(), lse - 1, np.full(3, 1e-12), first_row=7)


@pytest.mark.parametrize(
    "schedule",
    ["flash", "flash_causal", "three_level", "smallcache", "standard", "gqa"],
)
def test_machine_schedules_refuse_an_lse_below_a_logit(rng, schedule):
    """The two-level machine's backward schedules recompute P as the kernels do, and refuse
    the same lse."""
    n, d, M = 32, 4, 256
    Q, K, V, dO = (rng.standard_normal((n, d)) for _ in range(4))
    causal = schedule == "flash_causal"
    O, lse = al.attention_forward(Q, K, V, is_causal=causal)
    heads = [x[None].repeat(2, 0) for x in (Q, K, V, O, dO, lse)]

    def run(L):
        if schedule == "flash":
            return io.flash_backward(Q, K, V, O, dO, L, M=M)
        if schedule == "flash_causal":
            return io.flash_backward(Q, K, V, O, dO, L, M=M, is_causal=True)
        if schedule == "three_level":
            return io.flash_backward_three_level(Q, K, V, O, dO, L, M=M, M_l2=4096)
        if schedule == "smallcache":
            return io.smallcache_backward(Q, K, V, O, dO, L, M=M)
        if schedule == "standard":
            return io.standard_backward(Q, K, V, O, dO, L, M=M)
        Qh, Kh, Vh, Oh, dOh, _ = heads
        return io.flash_backward(
            Qh, Kh[:1], Vh[:1], Oh, dOh, np.stack([L, L]), M=M, enable_gqa=True
        )

    got = run(lse)
    want = al.attention_backward(Q, K, V, O, dO, lse, is_causal=causal)
    if schedule != "gqa":
        for g, w in zip(got[:3], want, strict=True):
            assert rel_err(g, w) <= 1e-10
    bad = lse.copy()
    bad[5] -= 800.0
    with pytest.raises(AttnInputError, match=r"^lse .* row 5\b"):
        run(bad)
