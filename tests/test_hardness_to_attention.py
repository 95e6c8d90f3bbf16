"""The reductions to attention (attnlib.hardness.to_attention): OV -> attention decides planted
and random instances and SAT-derived ones, with entries that grow like log n; Gap-ANN ->
attention separates the YES and NO masses with entries that grow like sqrt(log n); the least
entry factor that still decides is the bisection's boundary; bad input is named."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import gap_params

import attnlib as al
from attnlib import AttnInputError
from attnlib import hardness as hd
from attnlib.measure import loglog_slope


def test_needed_entry_factor_names_the_instance():
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal(s) for s in ((3, 4), (5, 4), (5, 1)))
    with pytest.raises(AttnInputError, match=r"instances\[1\]'s V must have m=5 rows"):
        hd.needed_entry_factor([(Q, K, V, 0.5, True), (Q, K, V[:2], 0.5, True)], 1.0)
    A = np.array([[1, 0, 1], [0, 1, 1]], bool)
    instance = (*hd.ov_to_attention(A, ~A), True)
    with pytest.raises(AttnInputError, match=r"instances\[0\] at scale=1e\+308"):
        hd.needed_entry_factor([instance], 1e308)


# ---------------------------------------------------------------- OV → attention
OV_SIZES = [(4, 6), (8, 9), (16, 12), (32, 15), (64, 18), (128, 21), (256, 24)]


@pytest.mark.parametrize("n, m", OV_SIZES)
@pytest.mark.parametrize("as24_scale", [False, True])
def test_ov_to_attention_decides_planted_and_random(n, m, as24_scale):
    scale = 1.0 / m if as24_scale else None
    for seed in range(4):
        for orthogonal in (True, False):
            A, B, _ = hd.planted_ov(n, m, orthogonal=orthogonal, seed=seed)
            Q, K, V, thr = hd.ov_to_attention(A, B, scale=scale)
            assert Q.shape == (n, m) and K.shape == (2 * n, m) and V.shape == (2 * n, 1)
            assert thr == pytest.approx(1 / (4 * max(n, 3)))
            mass = al.attention(Q, K, V, scale=scale)[:, 0]
            yes = hd.brute_force_ov(A, B) is not None
            assert yes == orthogonal
            assert (mass.max() >= thr) == yes
            # the margins of the proof: >= 1/(n+1) on YES rows, < n^-3 everywhere on NO
            nn = max(n, 3)
            if yes:
                assert mass.max() >= 1 / (nn + 1) - 1e-12
            else:
                assert mass.max() < nn**-3.0


def test_ov_to_attention_on_sat_instances():
    for seed in range(60):
        n_vars = 6 + seed % 9
        f = hd.random_ksat(n_vars, round(4.26 * n_vars), 3, seed=seed)
        A, B = hd.sat_to_ov(f, n_vars)
        Q, K, V, thr = hd.ov_to_attention(A, B)
        decided = al.attention(Q, K, V)[:, 0].max() >= thr
        assert decided == (hd.brute_force_sat(f, n_vars) is not None)


def test_ov_entries_grow_like_log_n():
    """AS24 scale 1/d, m = 3 log2 n: the largest entry is Θ(log n), not O(√log n)."""
    logn, entry = [], []
    for n, m in OV_SIZES:
        A, B, _ = hd.planted_ov(n, m, orthogonal=True, seed=0)
        Q, K, V, _ = hd.ov_to_attention(A, B, scale=1.0 / m)
        logn.append(math.log(max(n, 3)))
        entry.append(max(np.abs(Q).max(), np.abs(K).max()))
    logn, entry = np.array(logn), np.array(entry)
    slope = loglog_slope(logn, entry)
    assert 0.9 < slope < 1.1, slope
    ratio = entry / logn
    assert ratio.max() / ratio.min() < 1.3
    assert (np.diff(entry / np.sqrt(logn)) > 0).all()  # strictly faster than √log n


def test_ov_to_attention_does_not_modify_inputs():
    A = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)
    B = A.copy()
    hd.ov_to_attention(A, B)
    assert (A == B).all()


# ---------------------------------------------------------------- Gap-ANN → attention
GAP_SIZES = [8, 16, 32, 64, 128, 256]


def test_gap_ann_masses_are_separated_and_entries_grow_like_sqrt_log_n():
    logn, entry, yes_min, no_max = [], [], [], []
    for n in GAP_SIZES:
        m, t, eps = gap_params(n)
        for seed in range(2):
            for planted in (True, False):
                A, B, _ = hd.planted_gap_ann(n, m, t, eps, planted=planted, seed=seed)
                Q, K, V, thr = hd.gap_ann_to_attention(A, B, t, eps, scale=1 / (2 * m))
                assert thr == 0.5 and Q.shape == (n, 2 * m) and K.shape == (2 * n, 2 * m)
                mass = al.attention(Q, K, V, scale=1 / (2 * m))[:, 0].max()
                (yes_min if planted else no_max).append(mass)
                # the default scale (that of attnlib.attention) decides the same instance
                Q2, K2, V2, _ = hd.gap_ann_to_attention(A, B, t, eps)
                assert (al.attention(Q2, K2, V2)[:, 0].max() >= 0.5) == planted
        logn.append(math.log(n))
        entry.append(max(np.abs(Q).max(), np.abs(K).max()))
    # proven margins: > n e²/(1 + n e²) >= 0.93 against < e^-2/n² <= 0.003
    assert min(yes_min) > 0.93 and max(no_max) < 0.003
    assert min(yes_min) - max(no_max) > 0.9
    logn, entry = np.array(logn), np.array(entry)
    ratio = entry / np.sqrt(logn)
    assert ratio.max() / ratio.min() < 1.25  # Θ(√log n) ...
    assert (np.diff(entry / logn) < 0).all()  # ... hence o(log n)
    slope = loglog_slope(logn, entry)
    assert 0.3 < slope < 0.6, slope


def test_ov_to_attention_bad_scale():
    with pytest.raises(AttnInputError, match="scale must be a positive finite real"):
        hd.ov_to_attention(np.ones((2, 3), bool), np.ones((2, 3), bool), scale=-1.0)


# ---------------------------------------------------------------- needed entry sizes
def ov_cases(n, m, scale):
    cases = [
        (*hd.ov_to_attention(*hd.planted_ov(n, m, orthogonal=yes, seed=s)[:2], scale=scale), yes)
        for s in range(3)
        for yes in (True, False)
    ]
    return cases + [(*hd.ov_to_attention(*hd.adversarial_no_ov(n, m), scale=scale), False)]


def test_needed_entry_factor_is_the_bisection_boundary():
    n, m = 16, 12
    cases = ov_cases(n, m, 1 / m)
    c = hd.needed_entry_factor(cases, 1 / m, steps=20)
    assert 0 < c <= 1

    def decided(f):
        return all(
            (al.attention(Q, K, V, scale=f * f / m)[:, 0].max() >= thr) == yes
            for Q, K, V, thr, yes in cases
        )

    assert decided(c) and not decided(c - 2.0**-19)
    # the adversarial NO instance needs β c² ≥ about ln(4n), so c is well below 1
    assert c < 0.95


def test_needed_entry_factor_rejects_bad_input():
    cases = ov_cases(8, 9, 1 / 9)
    with pytest.raises(AttnInputError, match="instances"):
        hd.needed_entry_factor([], 1 / 9)
    with pytest.raises(AttnInputError, match=r"instances\[0\]"):
        hd.needed_entry_factor([cases[0][:4]], 1 / 9)
    with pytest.raises(AttnInputError, match="yes"):
        hd.needed_entry_factor([(*cases[0][:4], "yes")], 1 / 9)
    with pytest.raises(AttnInputError, match="scale"):
        hd.needed_entry_factor(cases, 0.0)
    with pytest.raises(AttnInputError, match="steps"):
        hd.needed_entry_factor(cases, 1 / 9, steps=0)
    wrong = [(*cases[0][:4], not cases[0][4])]
    with pytest.raises(AttnInputError, match="factor 1"):
        hd.needed_entry_factor(wrong, 1 / 9)
