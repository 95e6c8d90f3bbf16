"""attnlib.hardness.sat: random k-SAT, brute force, DIMACS text, and bad input."""

from __future__ import annotations

import itertools
import time
import tracemalloc

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import hardness as hd


def naive_models(clauses, n_vars):
    """Every satisfying assignment, by plain Python enumeration (the oracle)."""
    return [
        a
        for a in itertools.product([False, True], repeat=n_vars)
        if all(any(a[abs(l) - 1] == (l > 0) for l in c) for c in clauses)
    ]


def code(assignment):
    return sum(int(v) << i for i, v in enumerate(assignment))


def test_random_ksat_shape_and_reproducibility():
    f = hd.random_ksat(12, 51, 3, seed=7)
    assert len(f) == 51
    for clause in f:
        assert len(clause) == 3
        variables = [abs(l) for l in clause]
        assert len(set(variables)) == 3 and variables == sorted(variables)
        assert all(1 <= v <= 12 for v in variables)
    assert f == hd.random_ksat(12, 51, 3, seed=7)
    assert f != hd.random_ksat(12, 51, 3, seed=8)


def test_random_ksat_signs_and_variables_are_balanced():
    f = hd.random_ksat(10, 4000, 3, seed=1)
    lits = np.array([l for c in f for l in c])
    assert abs((lits > 0).mean() - 0.5) < 0.02
    counts = np.bincount(np.abs(lits), minlength=11)[1:]
    assert counts.min() > 0.9 * counts.mean()


def _distinct_sorted_variables(formula, n_vars, k):
    return all(
        len(c) == k
        and [abs(l) for l in c] == sorted({abs(l) for l in c})  # k distinct, sorted
        and all(1 <= abs(l) <= n_vars for l in c)
        for c in formula
    )


@pytest.mark.parametrize(
    "n_vars, n_clauses, k",
    [
        (10**6, 2000, 3),  # the drawn path, k ≪ n_vars
        (20, 5000, 7),  # the drawn path, redraws frequent
        (20, 5000, 13),  # the drawn path, clauses wider than n_vars/2: the complement
        (2**63 - 1, 50, 5),  # literals at the edge of int64
        (12, 51, 3),  # the matrix path
    ],
)
def test_random_ksat_clauses_have_k_distinct_variables(n_vars, n_clauses, k):
    f = hd.random_ksat(n_vars, n_clauses, k, seed=3)
    assert len(f) == n_clauses and _distinct_sorted_variables(f, n_vars, k)
    assert f == hd.random_ksat(n_vars, n_clauses, k, seed=3)  # reproducible
    assert f != hd.random_ksat(n_vars, n_clauses, k, seed=4)


def test_random_ksat_million_variables_is_fast_and_small():
    """No n_clauses × n_vars matrix: 10⁶ variables cost as little as 10."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        f = hd.random_ksat(10**6, 10**4, 3, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 5
    assert peak < 8 * 2**20  # the matrix draw needed 160 GB here
    assert _distinct_sorted_variables(f, 10**6, 3)


def test_random_ksat_drawn_subsets_are_uniform():
    """The drawn path (n_clauses·n_vars > 2¹⁶) gives every k-subset and every sign pattern
    equal probability: a chi-square test on all C(6, 3) = 20 subsets of 6 variables."""
    n_vars, n_clauses, k = 6, 20_000, 3
    f = hd.random_ksat(n_vars, n_clauses, k, seed=11)
    subsets = list(itertools.combinations(range(1, n_vars + 1), k))
    index = {s: i for i, s in enumerate(subsets)}
    counts = np.bincount([index[tuple(abs(l) for l in c)] for c in f], minlength=len(subsets))
    expected = n_clauses / len(subsets)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 45.3  # the 0.999 quantile of chi-square with 19 degrees of freedom
    positive = np.array([l > 0 for c in f for l in c])
    assert abs(positive.mean() - 0.5) < 4 * 0.5 / np.sqrt(positive.size)


def test_random_ksat_keeps_the_books_formulas():
    """Up to 2¹⁶ matrix entries the draw is the permutation one of earlier versions, so a
    seed keeps its formula: Chapter 8's formula on 6 variables, as it prints it."""
    assert hd.random_ksat(6, 16, 3, seed=0)[:4] == [
        (-2, -3, 4),
        (1, -3, 6),
        (-2, 4, -6),
        (-1, -3, -4),
    ]
    assert hd.random_ksat(4, 2, 3, seed=0) == [(2, 3, 4), (1, -3, 4)]


def test_read_dimacs_refuses_integers_too_long_to_read():
    with pytest.raises(AttnInputError, match="text line 1: the header's n_vars has 5000 digits"):
        hd.read_dimacs("p cnf " + "9" * 5000 + " 1\n1 0\n")
    with pytest.raises(AttnInputError, match="text line 2: a literal has 5000 digits"):
        hd.read_dimacs("p cnf 3 1\n-" + "9" * 5000 + " 0\n")


@pytest.mark.parametrize("seed", range(40))
def test_brute_force_sat_matches_enumeration(seed):
    n_vars = 3 + seed % 8
    f = hd.random_ksat(n_vars, round(4.26 * n_vars), 3, seed=seed)
    models = naive_models(f, n_vars)
    got = hd.brute_force_sat(f, n_vars)
    if not models:
        assert got is None
    else:
        assert got == min(models, key=code)  # the smallest code is returned
        assert hd.is_satisfied(f, got)


def test_empty_clause_is_unsatisfiable_and_tautologies_are_fine():
    assert hd.brute_force_sat([(1,), ()], 2) is None
    assert hd.brute_force_sat([(1, -1)], 1) == (False,)
    assert hd.brute_force_sat([(2,), (-1,)], 2) == (False, True)
    assert hd.brute_force_sat([(1,), (-1,)], 1) is None


def test_is_satisfied():
    f = [(1, -2), (2, 3)]
    assert hd.is_satisfied(f, (True, False, True))
    assert not hd.is_satisfied(f, (False, True, False))
    assert not hd.is_satisfied(f, (False, False, False))


def test_dimacs_round_trip():
    f = hd.random_ksat(9, 38, 3, seed=3)
    text = hd.write_dimacs(f, 9, comment="random 3-SAT\nseed 3")
    assert text.startswith("c random 3-SAT\nc seed 3\np cnf 9 38\n")
    assert text.splitlines()[3].endswith(" 0")
    assert hd.read_dimacs(text) == (f, 9)


def test_read_dimacs_satlib_style():
    text = "c a comment\np  cnf 3  2\n 1 -3\n 2 0 -1\n 2 3 0\n%\n0\n"
    assert hd.read_dimacs(text) == ([(1, -3, 2), (-1, 2, 3)], 3)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "clauses, n_vars, match",
    [
        ([], 3, "at least one clause"),
        ([(1, 0, 2)], 3, "literal 0"),
        ([(1, 4)], 3, "variable 4, beyond n_vars=3"),
        ([(1, -5)], 3, "variable 5, beyond n_vars=3"),
        ([(1, 2.0)], 3, "integer literals"),
        ([(1, True)], 3, "integer literals"),
        ([1, 2], 3, r"clauses\[0\] must be a tuple"),
        ("1 2 0", 3, "list of tuples"),
        ([(1,)], 0, "n_vars must be an integer >= 1"),
    ],
)
@pytest.mark.parametrize("fn", [hd.check_clauses, hd.brute_force_sat, hd.write_dimacs])
def test_malformed_clauses(fn, clauses, n_vars, match):
    with pytest.raises(AttnInputError, match=match):
        fn(clauses, n_vars)


def test_brute_force_sat_refuses_too_many_variables():
    with pytest.raises(AttnInputError, match="n_vars must be an integer <= 30"):
        hd.brute_force_sat([(1,)], 31)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_vars=3, n_clauses=5, k=4, seed=0), "k must be an integer <= 3"),
        (dict(n_vars=0, n_clauses=5, k=1, seed=0), "n_vars must be an integer >= 1"),
        (dict(n_vars=3, n_clauses=0, k=1, seed=0), "n_clauses must be an integer >= 1"),
        (dict(n_vars=3, n_clauses=2, k=0, seed=0), "k must be an integer >= 1"),
        (dict(n_vars=3, n_clauses=2, k=2, seed=-1), "seed must be an integer >= 0"),
        (dict(n_vars=3, n_clauses=2, k=2, seed=1.5), "seed must be an integer"),
    ],
)
def test_random_ksat_bad_input(kwargs, match):
    with pytest.raises(AttnInputError, match=match):
        hd.random_ksat(**kwargs)


def test_random_ksat_seed_is_keyword_only():
    with pytest.raises(TypeError):
        hd.random_ksat(3, 2, 2, 0)


@pytest.mark.parametrize(
    "assignment, match",
    [
        ((True, 1), r"assignment\[1\] must be a bool"),
        ((), "at least one variable"),
        (5, "sequence of booleans"),
        ((True,), "variable 2, beyond n_vars=1"),
    ],
)
def test_is_satisfied_bad_input(assignment, match):
    with pytest.raises(AttnInputError, match=match):
        hd.is_satisfied([(1, -2)], assignment)


def test_write_dimacs_bad_comment():
    with pytest.raises(AttnInputError, match="comment must be a string"):
        hd.write_dimacs([(1,)], 1, comment=3)


@pytest.mark.parametrize(
    "text, match",
    [
        (b"p cnf 1 1\n1 0\n", "text must be a str"),
        ("1 2 0\n", "no 'p cnf|clause before"),
        ("c only a comment\n", "no 'p cnf"),
        ("p cnf 3\n1 0\n", "header must be 'p cnf"),
        ("p dnf 3 1\n1 0\n", "header must be 'p cnf"),
        ("p cnf x 1\n1 0\n", "header counts must be integers"),
        ("p cnf 0 1\n", "n_vars >= 1"),
        ("p cnf 2 1\np cnf 2 1\n1 0\n", "second 'p cnf' header"),
        ("p cnf 2 1\n1 a 0\n", "literal must be an integer, got 'a'"),
        ("p cnf 2 1\n1 3 0\n", "line 2: variable 3 is beyond n_vars=2"),
        ("p cnf 2 1\n1 2\n", r"last clause \(1, 2\) is not terminated by 0"),
        ("p cnf 2 2\n1 2 0\n", "declares 2 clauses, found 1"),
    ],
)
def test_read_dimacs_bad_input(text, match):
    with pytest.raises(AttnInputError, match=match):
        hd.read_dimacs(text)


# ---------------------------------------------------------------- all models, counted
@pytest.mark.parametrize("seed", range(40))
def test_all_models_and_count_models_match_plain_enumeration(seed):
    n_vars = 1 + seed % 12
    f = hd.random_ksat(n_vars, round(4.26 * n_vars), min(3, n_vars), seed=seed)
    models = hd.all_models(f, n_vars)
    assert models == sorted(naive_models(f, n_vars), key=code)
    assert hd.count_models(f, n_vars) == len(models)
    assert (models[0] if models else None) == hd.brute_force_sat(f, n_vars)


def test_all_models_with_an_empty_clause_is_empty():
    assert hd.all_models([(1,), ()], 2) == [] and hd.count_models([()], 1) == 0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: hd.count_models([(1,)], 31), "n_vars"),
        (lambda: hd.all_models([(1, 4)], 3), r"clauses\[0\]"),
        (lambda: hd.count_models("1 2", 2), "clauses"),
    ],
)
def test_model_enumeration_rejects_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call()


def test_assignment_bits():
    assert hd.assignment_bits((True, False, np.bool_(True))) == "101"
    for bad in ("101", (), (1, 0), None):
        with pytest.raises(AttnInputError, match="assignment"):
            hd.assignment_bits(bad)
