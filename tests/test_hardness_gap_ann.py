"""Planted Gap-ANN instances (attnlib.hardness.gap_ann): the promise holds (the planted pair at
distance t, every other pair at least (1 + eps)·t), LSH finds the planted pair with few
comparisons and nothing in a NO instance, and bad input is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import gap_params

from attnlib import AttnInputError
from attnlib import hardness as hd


def test_planted_gap_ann_meets_the_promise():
    for n in (8, 32, 128):
        m, t, eps = gap_params(n)
        for planted in (True, False):
            A, B, pair = hd.planted_gap_ann(n, m, t, eps, planted=planted, seed=n)
            H = (A[:, None, :] != B[None, :, :]).sum(-1)
            if planted:
                i, j = pair
                assert H[i, j] == t
                H[i, j] = m
            assert H.min() >= (1 + eps) * t


@pytest.mark.parametrize(
    "t, eps, match",
    [
        (0, 0.5, "t must be a positive finite real"),
        (1, 0, "eps must be a positive finite real"),
        (2, 1.0, r"\(1\+eps\)\*t <= m=3"),
        (float("nan"), 0.5, "t must be a positive finite real"),
    ],
)
def test_gap_ann_bad_gap(t, eps, match):
    A = np.ones((2, 3), bool)
    with pytest.raises(AttnInputError, match=match):
        hd.gap_ann_to_attention(A, A, t, eps)
    with pytest.raises(AttnInputError, match=match):
        hd.planted_gap_ann(4, 3, t, eps, planted=True, seed=0)


BAD_PLANTED_GAP_ANN = [
    (
        lambda: hd.planted_gap_ann(64, 10, 4, 1.0, planted=False, seed=0, max_tries=3),
        "could not draw rows",
    ),
    (lambda: hd.planted_gap_ann(4, 40, 4, 1.0, planted=1, seed=0), "planted must be a bool"),
    (lambda: hd.planted_gap_ann(0, 40, 4, 1.0, planted=True, seed=0), "n must be an integer >= 1"),
    (
        lambda: hd.planted_gap_ann(4, 40, 4, 1.0, planted=True, seed=0, max_tries=0),
        "max_tries must be an integer >= 1",
    ),
]


@pytest.mark.parametrize("call,message", BAD_PLANTED_GAP_ANN)
def test_planted_gap_ann_bad_input(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()


# ---------------------------------------------------------------- LSH on planted Gap-ANN
@pytest.mark.parametrize("n", [16, 64, 256])
def test_lsh_finds_every_planted_pair_with_few_comparisons(n):
    m, t, eps = gap_params(n)
    for seed in range(3):
        A, B, planted = hd.planted_gap_ann(n, m, t, eps, planted=True, seed=seed)
        pair, comparisons = hd.lsh_close_pair(A, B, t, seed=seed)
        assert pair == planted
        assert comparisons < n * n / 4 or n == 16


def test_lsh_finds_nothing_in_a_no_instance_and_counts_its_comparisons():
    m, t, eps = gap_params(32)
    A, B, _ = hd.planted_gap_ann(32, m, t, eps, planted=False, seed=0)
    pair, comparisons = hd.lsh_close_pair(A, B, t, k=2, reps=3, seed=0)
    assert pair is None
    # with k = 2 bits every pair lands in one of 4 buckets: about a quarter of all pairs
    assert 3 * 32 * 32 / 8 < comparisons < 3 * 32 * 32 / 2


@pytest.mark.parametrize(
    "kwargs, match",
    [({"k": 0}, "k"), ({"k": 63}, "k"), ({"reps": 0}, "reps"), ({"seed": -1}, "seed")],
)
def test_lsh_rejects_bad_arguments(kwargs, match):
    A, B, _ = hd.planted_gap_ann(8, 36, 6, 1.0, planted=True, seed=0)
    with pytest.raises(AttnInputError, match=match):
        hd.lsh_close_pair(A, B, 6, **kwargs)
    with pytest.raises(AttnInputError, match="t"):
        hd.lsh_close_pair(A, B, 0)
    with pytest.raises(AttnInputError, match="B"):
        hd.lsh_close_pair(A, B[:, :5], 6)


def test_gap_ann_parameters_rejects_n_below_two():
    for n in (1, 0, 2.0):
        with pytest.raises(AttnInputError, match="n"):
            hd.gap_ann_parameters(n)
