"""Orthogonal vectors (attnlib.hardness.ov): brute force against numpy, with the count of the
pairs it compares; planted and adversarial instances; boolean matrices refused by name by every
function that takes them."""

from __future__ import annotations

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib import hardness as hd


# ---------------------------------------------------------------- brute-force OV
@pytest.mark.parametrize("seed", range(20))
def test_brute_force_ov_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    na, nb, m = rng.integers(1, 40, size=3)
    m = int(m) + 60 * (seed % 3)  # exercise 1, 2 and 3 packed words
    A = rng.random((na, m)) < 0.15
    B = rng.random((nb, m)) < 0.15
    ortho = np.argwhere((A.astype(int) @ B.astype(int).T) == 0)
    got = hd.brute_force_ov(A, B)
    if len(ortho) == 0:
        assert got is None
    else:
        assert got == tuple(int(x) for x in ortho[0])  # row-major first pair


def _blocked_scan_comparisons(A, B, block):
    """The row pairs the blocked scan of brute_force_ov compares, counted by a plain loop."""
    A, B = A.astype(int), B.astype(int)
    best_i, pairs = len(A), 0
    for j0 in range(0, len(B), block):
        for i in range(best_i):
            for j in range(j0, min(j0 + block, len(B))):
                pairs += 1
                if not (A[i] @ B[j]):
                    best_i = i
                    break
            if best_i == i:
                break
    return pairs


@pytest.mark.parametrize("seed", range(8))
def test_brute_force_ov_counts_the_pairs_it_compares(seed):
    rng = np.random.default_rng(seed)
    block = hd.ov._OV_BLOCK_ROWS
    na, nb = int(rng.integers(1, 300)), int(rng.integers(1, 3 * block))
    A = rng.random((na, 70)) < 0.5
    B = rng.random((nb, 70)) < 0.5
    if seed % 2:  # plant one orthogonal pair somewhere
        i, j = int(rng.integers(na)), int(rng.integers(nb))
        A[i] = np.arange(70) % 2 == 0
        B[j] = ~A[i]
    pair, comparisons = hd.brute_force_ov(A, B, return_comparisons=True)
    assert pair == hd.brute_force_ov(A, B)
    assert comparisons == _blocked_scan_comparisons(A, B, block)
    if pair is None:
        assert comparisons == na * nb  # a NO instance: every pair, exactly once
    else:
        assert comparisons <= na * nb


def test_brute_force_ov_counts_no_more_than_needed():
    A, B = np.zeros((500, 9), bool), np.ones((600, 9), bool)  # (0, 0) is orthogonal
    assert hd.brute_force_ov(A, B, return_comparisons=True) == ((0, 0), 1)
    A, B = np.ones((500, 9), bool), np.ones((600, 9), bool)  # no pair is orthogonal
    assert hd.brute_force_ov(A, B, return_comparisons=True) == (None, 500 * 600)


def test_brute_force_ov_accepts_01_integers():
    assert hd.brute_force_ov([[1, 0], [1, 1]], [[1, 1], [0, 1]]) == (0, 1)
    assert hd.brute_force_ov(np.ones((3, 5), int), np.ones((4, 5), np.uint8)) is None


@pytest.mark.parametrize("orthogonal", [True, False])
def test_planted_ov(orthogonal):
    for seed in range(5):
        A, B, pair = hd.planted_ov(32, 15, orthogonal=orthogonal, seed=seed)
        assert A.shape == B.shape == (32, 15)
        ortho = np.argwhere((A.astype(int) @ B.astype(int).T) == 0)
        if orthogonal:
            assert [tuple(x) for x in ortho] == [pair]
        else:
            assert pair is None and len(ortho) == 0


# ---------------------------------------------------------------- bad input
BAD_MATRICES = [
    (None, "A must be a 2-D boolean"),
    (np.ones((2, 3)), "A must be a 2-D boolean .* got dtype float64"),
    (np.array([[0, 2]]), "A must hold only 0 and 1"),
    (np.ones(3, bool), "A must be 2-dimensional"),
    (np.ones((0, 3), bool), "A must be non-empty"),
]


@pytest.mark.parametrize("A, match", BAD_MATRICES)
@pytest.mark.parametrize(
    "fn",
    [
        hd.brute_force_ov,
        hd.ov_to_attention,
        lambda A, B: hd.gap_ann_to_attention(A, B, 1, 0.5),
    ],
)
def test_bad_matrices(fn, A, match):
    with pytest.raises(AttnInputError, match=match):
        fn(A, np.ones((2, 3), bool))


@pytest.mark.parametrize(
    "fn",
    [
        hd.brute_force_ov,
        hd.ov_to_attention,
        lambda A, B: hd.gap_ann_to_attention(A, B, 1, 0.5),
    ],
)
def test_mismatched_columns(fn):
    with pytest.raises(AttnInputError, match="B must have m=3 columns like A, got 4"):
        fn(np.ones((2, 3), bool), np.ones((2, 4), bool))
    with pytest.raises(AttnInputError, match="B must be 2-dimensional"):
        fn(np.ones((2, 3), bool), np.ones(3, bool))


BAD_PLANTED_OV = [
    (lambda: hd.planted_ov(64, 2, orthogonal=True, seed=0), "m=2 is too small for density=0.5"),
    (lambda: hd.planted_ov(4, 8, orthogonal=False, seed=0, density=1.0), "density must be in"),
    (lambda: hd.planted_ov(4, 8, orthogonal="yes", seed=0), "orthogonal must be a bool"),
    (lambda: hd.planted_ov(4, 8, orthogonal=True, seed=-2), "seed must be an integer >= 0"),
]


@pytest.mark.parametrize("call,message", BAD_PLANTED_OV)
def test_planted_ov_bad_input(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()


# ---------------------------------------------------------------- adversarial NO instances
@pytest.mark.parametrize("n, m", [(1, 1), (4, 6), (9, 4), (64, 18)])
def test_adversarial_no_ov_has_every_inner_product_one(n, m):
    A, B = hd.adversarial_no_ov(n, m)
    assert A.shape == B.shape == (n, m) and A.dtype == B.dtype == np.bool_
    assert (A.astype(int) @ B.astype(int).T == 1).all()
    assert hd.brute_force_ov(A, B) is None
    Q, K, V, thr = hd.ov_to_attention(A, B)
    assert al.attention(Q, K, V)[:, 0].max() < thr


@pytest.mark.parametrize("args", [(0, 3), (3, 0), (2.5, 3), (3, True)])
def test_adversarial_no_ov_rejects_bad_sizes(args):
    with pytest.raises(AttnInputError):
        hd.adversarial_no_ov(*args)
