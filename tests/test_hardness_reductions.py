"""attnlib.hardness: k-SAT → OV → attention, and planted Gap-ANN → attention."""

from __future__ import annotations

import math

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib import hardness as hd
from attnlib.nbtools import loglog_slope


def sat_count(clauses, n_vars):
    """Number of satisfying assignments, by vectorised enumeration (the oracle)."""
    a = np.arange(1 << n_vars)[:, None]
    bits = (a >> np.arange(n_vars)) & 1
    ok = np.ones(1 << n_vars, dtype=bool)
    for c in clauses:
        ok &= np.any([bits[:, abs(l) - 1] == (l > 0) for l in c], axis=0)
    return int(ok.sum())


# ---------------------------------------------------------------- k-SAT → OV
def test_sat_to_ov_on_500_random_3sat_formulas():
    """SAT iff an orthogonal pair exists, and the witness maps back to a model."""
    n_sat = n_unsat = 0
    for seed in range(500):
        n_vars = 4 + seed % 13  # 4..16
        f = hd.random_ksat(n_vars, round(4.26 * n_vars), 3, seed=seed)
        A, B = hd.sat_to_ov(f, n_vars)
        h = n_vars // 2
        assert A.shape == (2**h, len(f)) and B.shape == (2 ** (n_vars - h), len(f))
        assert A.dtype == B.dtype == np.bool_
        model = hd.brute_force_sat(f, n_vars)
        pair = hd.brute_force_ov(A, B)
        assert (model is None) == (pair is None), seed
        if pair is not None:
            n_sat += 1
            i, j = pair
            assert not (A[i] & B[j]).any()
            assert hd.is_satisfied(f, hd.ov_pair_to_assignment(i, j, n_vars))
        else:
            n_unsat += 1
    # near the threshold both answers occur often: the test exercises both directions
    assert n_sat > 100 and n_unsat > 100, (n_sat, n_unsat)


@pytest.mark.parametrize("seed", range(30))
def test_orthogonal_pairs_are_in_bijection_with_models(seed):
    n_vars = 3 + seed % 10
    f = hd.random_ksat(n_vars, round(3.5 * n_vars), 3, seed=1000 + seed)
    A, B = hd.sat_to_ov(f, n_vars)
    ortho = (A.astype(int) @ B.astype(int).T) == 0
    assert int(ortho.sum()) == sat_count(f, n_vars)
    for i, j in zip(*np.nonzero(ortho), strict=True):
        assert hd.is_satisfied(f, hd.ov_pair_to_assignment(int(i), int(j), n_vars))


def test_sat_to_ov_one_variable_and_empty_clause():
    A, B = hd.sat_to_ov([(1,)], 1)  # x1 lives in the second half
    assert A.shape == (1, 1) and B.tolist() == [[True], [False]]
    A, B = hd.sat_to_ov([(1, 2), ()], 2)
    assert A[:, 1].all() and B[:, 1].all()
    assert hd.brute_force_ov(A, B) is None


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


def gap_params(n):
    m, t, eps = hd.gap_ann_parameters(n)
    assert (m, t, eps) == (12 * int(math.log2(n)), m // 6, 1.0)
    return m, t, eps


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


def test_ov_to_attention_bad_scale():
    with pytest.raises(AttnInputError, match="scale must be a positive finite real"):
        hd.ov_to_attention(np.ones((2, 3), bool), np.ones((2, 3), bool), scale=-1.0)


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


BAD_SAT_TO_OV = [
    (lambda: hd.sat_to_ov([(1, 0)], 2), "literal 0"),
    (lambda: hd.sat_to_ov([(1, 3)], 2), "beyond n_vars=2"),
    (lambda: hd.sat_to_ov([], 2), "at least one clause"),
    (lambda: hd.sat_to_ov([(1,)], 41), "n_vars must be an integer <= 40"),
]


@pytest.mark.parametrize("call,message", BAD_SAT_TO_OV)
def test_sat_to_ov_bad_input(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()


BAD_OV_PAIR = [
    (lambda: hd.ov_pair_to_assignment(4, 0, 4), "i must be an integer <= 3"),
    (lambda: hd.ov_pair_to_assignment(0, -1, 4), "j must be an integer >= 0"),
    (lambda: hd.ov_pair_to_assignment(0, 0, 0), "n_vars must be an integer >= 1"),
]


@pytest.mark.parametrize("call,message", BAD_OV_PAIR)
def test_ov_pair_to_assignment_bad_input(call, message):
    assert hd.ov_pair_to_assignment(1, 2, 4) == (True, False, False, True)
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
