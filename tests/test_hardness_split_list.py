"""The split-list reduction k-SAT -> OV (attnlib.hardness.split_list): on random 3-SAT formulas
an orthogonal pair exists iff the formula is satisfiable, orthogonal pairs are in bijection with
the models, the edge cases (one variable, an empty clause), and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import hardness as hd


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
