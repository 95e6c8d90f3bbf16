"""The compiled steps on one tile (attnlib._tiles), called directly: the logits of a tile with
its mask and causality at any offset, the probabilities and their check of lse, and the order
in which the blocks are handed to the threads."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib._tiles import (
    ERR_LSE_HEAD,
    ERR_LSE_ROW,
    ERR_SLOTS,
    Scores,
    Upstream,
    _interleave,
    _logits,
    _probabilities,
    _workspace,
)

BR, BC = 8, 16  # tiles smaller than the kernels' own, so that a test has many of them


def _scores(rng, n, m, d, *, mask=None, is_causal=False, scale=0.5):
    """Scores for Q (n, d) and K (m, d), with K's blocked transpose as the kernels build it."""
    Q, K = rng.standard_normal((n, d)), rng.standard_normal((m, d))
    full = m // BC
    KT = np.ascontiguousarray(K[: full * BC].reshape(full, BC, d).swapaxes(1, 2))
    keep = np.ones((1, 1), bool) if mask is None else mask
    err = np.zeros(ERR_SLOTS, np.int64)
    return Scores(Q, K, KT, scale, keep, mask is not None, is_causal, BR, BC, err)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_logits_of_every_tile_at_its_offset(rng, masked, is_causal):
    """Every tile of a 29 × 40 grid (full and ragged key blocks, the ragged ones through K
    itself): τ·Q_iK_jᵀ, -inf exactly where the mask or causality (key j ≤ query i) drops."""
    n, m, d = 29, 40, 5
    mask = rng.random((n, m)) < 0.6 if masked else None
    s = _scores(rng, n, m, d, mask=mask, is_causal=is_causal)
    keep = np.ones((n, m), bool) if mask is None else mask.copy()
    if is_causal:
        keep &= np.tri(n, m, dtype=bool)
    want = np.where(keep, s.scale * (s.Q @ s.K.T), -np.inf)
    tiles, ints, flts = _workspace(s, 1)
    for i0 in range(0, n, BR):
        i1 = min(i0 + BR, n)
        for j0 in range(0, m, BC):
            j1 = min(j0 + BC, m)
            S = tiles[0][: (i1 - i0) * (j1 - j0)].reshape(i1 - i0, j1 - j0)
            _logits(s, i0, i1, j0, j1, S, ints, flts)
            got, ref = S, want[i0:i1, j0:j1]
            assert np.array_equal(np.isneginf(got), np.isneginf(ref))
            np.testing.assert_allclose(got[~np.isneginf(ref)], ref[~np.isneginf(ref)], rtol=1e-14)
    assert ints[-1] == 0  # no product was refused


def _upstream(lse, slack_abs, head=3):
    """Upstream with only what :func:`_probabilities` reads: lse, the head and the slack."""
    empty = np.zeros((1, 1))
    return Upstream(empty, empty[None], empty, empty, lse, np.zeros(1), head, 0.0, 0.0, slack_abs)


def test_probabilities_from_lse_check_it_and_clamp_within_rounding(rng):
    s = _scores(rng, 4, 6, 3)
    S0 = rng.standard_normal((4, 6))
    S0[1, 2] = -np.inf  # a dropped key
    lse = np.log(np.exp(S0).sum(axis=1))
    lse[3] = -np.inf  # a fully masked row
    S0[3] = -np.inf
    S = S0.copy()
    _probabilities(s, _upstream(lse, 0.0), S, 0)
    P = np.exp(S0[:3] - lse[:3, None])
    np.testing.assert_allclose(S[:3], P, rtol=1e-15)
    assert S[1, 2] == 0 and np.all(S[3] == 0) and not s.err.any()
    # a logit above its row's lse by less than the slack: P clamped to 1, nothing reported
    low = lse.copy()
    low[0] = S0[0].max() - 1e-9
    S = S0.copy()
    _probabilities(s, _upstream(low, 1e-6), S, 0)
    assert S[0].max() == 1.0 and not s.err.any()
    # by more than the slack: the head and row + 1 are reported, for the wrapper to raise
    S = S0.copy()
    _probabilities(s, _upstream(low, 1e-12), S[2:], 2)  # rows 2, 3 of the tile
    assert not s.err.any()
    low[2] = S0[2].max() - 1.0
    _probabilities(s, _upstream(low, 1e-12), S0.copy()[2:], 2)
    assert s.err[ERR_LSE_HEAD] == 3 and s.err[ERR_LSE_ROW] == 3


@pytest.mark.parametrize("nblocks", range(1, 12))
def test_interleave_hands_out_every_block_once(nblocks):
    order = [_interleave(t, nblocks) for t in range(nblocks)]
    assert sorted(order) == list(range(nblocks))
    assert order[:2] == [0, nblocks - 1][: min(2, nblocks)]
