"""Bad-input rows of Part III, hardness: SAT, orthogonal vectors, the reductions to attention and
attention from its gradient.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from bad_input_cases import A1, A2, A3, E, K, Q, Table, V, X, Y, word

import attnlib as al
from attnlib import hardness as hd

table = Table()


# ---- inputs ----

OV_A = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)
OV_B = np.array([[0, 1, 0], [1, 1, 0]], dtype=bool)
CLAUSES = [(1, -2), (2, 3), (-1, -3)]

# ---- reals and ints out of range ----

# Gauss–Legendre's error bound
_QKV = tuple(np.random.default_rng(5).standard_normal(s) for s in ((4, 3), (5, 3), (5, 2)))
table.raises(
    "hardness.gauss_legendre_error_bound",
    "nodes=0",
    lambda: hd.gauss_legendre_error_bound(*_QKV, 0),
    word("nodes"),
)
table.raises(
    "hardness.gauss_legendre_error_bound",
    "nodes=1-no-theorem",
    lambda: hd.gauss_legendre_error_bound(*_QKV, 1),
    word("nodes"),
)
table.raises(
    "hardness.gauss_legendre_error_bound",
    "grid=0",
    lambda: hd.gauss_legendre_error_bound(*_QKV, 8, grid=0),
    word("grid"),
)
table.raises(
    "hardness.gauss_legendre_error_bound",
    "logits-overflow",
    lambda: hd.gauss_legendre_error_bound(_QKV[0] * 1e200, _QKV[1] * 1e200, _QKV[2], 8),
    "overflow",
)
table.raises(
    "hardness.gauss_legendre_error_bound",
    "V=1e200-bound-overflows",
    lambda: hd.gauss_legendre_error_bound(*_QKV[:2], _QKV[2] * 1e200, 8),
    word("V"),
)
table.valid(
    "hardness.gauss_legendre_error_bound",
    "falls-with-nodes",
    lambda: (hd.gauss_legendre_error_bound(*_QKV, 8), hd.gauss_legendre_error_bound(*_QKV, 16)),
    lambda b: 0 < b[1] < 1e-6 * b[0],
)

table.raises(
    "hardness.planted_gap_ann",
    "t=10**400",
    lambda: hd.planted_gap_ann(4, 16, 10**400, 0.5, planted=False, seed=0),
    word("t"),
)

# ---- hardness ----

table.raises(
    "hardness.planted_ov",
    "density=1e-300",
    lambda: hd.planted_ov(4, 8, orthogonal=True, seed=0, density=1e-300),
    word("density"),
)
table.raises(
    "hardness.planted_ov",
    "density=1e-6-m=8",
    lambda: hd.planted_ov(50, 8, orthogonal=False, seed=0, density=1e-6),
    word("density"),
)
table.raises(
    "hardness.planted_ov",
    "n=m=10**6",
    lambda: hd.planted_ov(10**6, 10**6, orthogonal=False, seed=0),
    r"n or m is too large",
)
table.raises(
    "hardness.planted_ov",
    "orthogonal='yes'",
    lambda: hd.planted_ov(4, 8, orthogonal="yes", seed=0),
    "orthogonal",
)
table.raises(
    "hardness.planted_ov",
    "density=1",
    lambda: hd.planted_ov(4, 8, orthogonal=False, seed=0, density=1.0),
    word("density"),
)
table.raises(
    "hardness.planted_ov",
    "seed=-1",
    lambda: hd.planted_ov(4, 8, orthogonal=False, seed=-1),
    word("seed"),
)
table.valid(
    "hardness.planted_ov",
    "planted-pair",
    lambda: hd.planted_ov(6, 24, orthogonal=True, seed=1),
    lambda r: hd.brute_force_ov(r[0], r[1]) == r[2],
)
table.raises(
    "hardness.gap_ann_to_attention",
    "eps=1e-17",
    lambda: hd.gap_ann_to_attention(OV_A, OV_B, 1.0, 1e-17),
    word("eps"),
)
table.raises(
    "hardness.planted_gap_ann",
    "eps=1e-17",
    lambda: hd.planted_gap_ann(4, 16, 4.0, 1e-17, planted=True, seed=0),
    word("eps"),
)
table.raises(
    "hardness.gap_ann_to_attention",
    "scale=1e-320",
    lambda: hd.gap_ann_to_attention(OV_A, OV_B, 1.0, 0.5, scale=1e-320),
    word("scale"),
)
table.raises(
    "hardness.gap_ann_to_attention",
    "t-too-large",
    lambda: hd.gap_ann_to_attention(OV_A, OV_B, 3.0, 0.5),
    r"t and eps",
)
table.raises(
    "hardness.planted_gap_ann",
    "planted='no'",
    lambda: hd.planted_gap_ann(4, 16, 4.0, 0.5, planted="no", seed=0),
    "planted",
)
table.raises(
    "hardness.planted_gap_ann",
    "n=m=10**6",
    lambda: hd.planted_gap_ann(10**6, 10**6, 4.0, 0.5, planted=False, seed=0),
    r"n or m is too large",
)
table.raises(
    "hardness.random_ksat",
    "10**6-vars-10**8-clauses",
    lambda: hd.random_ksat(10**6, 10**8, 3, seed=0),
    r"n_clauses or k is too large",
)
table.raises(
    "hardness.sat_to_ov",
    "40-vars-2000-clauses",
    lambda: hd.sat_to_ov(hd.random_ksat(40, 2000, 3, seed=0), 40),
    r"n_vars or the number of clauses is too large",
)
table.bad_ints("hardness.random_ksat", "n_vars", lambda v: hd.random_ksat(v, 4, 1, seed=0))
table.raises("hardness.random_ksat", "k>n_vars", lambda: hd.random_ksat(3, 4, 4, seed=0), word("k"))
table.raises(
    "hardness.random_ksat", "seed=None", lambda: hd.random_ksat(3, 4, 2, seed=None), word("seed")
)
table.raises(
    "hardness.ov_to_attention",
    "scale=1e-320",
    lambda: hd.ov_to_attention(OV_A, OV_B, scale=1e-320),
    word("scale"),
)
table.raises(
    "hardness.ov_to_attention", "ragged", lambda: hd.ov_to_attention([[1, 0], [1]], OV_B), word("A")
)
table.raises(
    "hardness.ov_to_attention",
    "values-2",
    lambda: hd.ov_to_attention(OV_A.astype(int) * 2, OV_B),
    word("A"),
)
table.raises(
    "hardness.ov_to_attention", "columns", lambda: hd.ov_to_attention(OV_A, OV_B[:, :2]), word("B")
)
table.valid(
    "hardness.ov_to_attention",
    "decides-YES",
    lambda: hd.ov_to_attention(OV_A, OV_B),
    lambda r: (
        (al.attention(r[0], r[1], r[2])[:, 0].max() >= r[3])
        == (hd.brute_force_ov(OV_A, OV_B) is not None)
    ),
)
table.raises(
    "hardness.brute_force_ov", "ragged", lambda: hd.brute_force_ov([[1, 0], [1]], OV_B), word("A")
)
table.raises(
    "hardness.brute_force_ov",
    "float",
    lambda: hd.brute_force_ov(OV_A.astype(float), OV_B),
    word("A"),
)
table.raises("hardness.brute_force_ov", "None", lambda: hd.brute_force_ov(OV_A, None), word("B"))
table.valid(
    "hardness.brute_force_ov", "pair", lambda: hd.brute_force_ov(OV_A, OV_B), lambda r: r == (0, 0)
)
table.raises(
    "hardness.check_clauses", "dict-clause", lambda: hd.check_clauses([{1: 2}], 3), r"clauses\[0\]"
)
table.raises(
    "hardness.check_clauses", "set-clause", lambda: hd.check_clauses([{1, 2}], 3), r"clauses\[0\]"
)
table.raises(
    "hardness.check_clauses",
    "dict-formula",
    lambda: hd.check_clauses({(1,): 2}, 3),
    word("clauses"),
)
table.raises(
    "hardness.check_clauses", "literal-0", lambda: hd.check_clauses([(1, 0)], 3), r"clauses\[0\]"
)
table.raises(
    "hardness.check_clauses", "beyond-n_vars", lambda: hd.check_clauses([(1, 5)], 3), r"n_vars=3"
)
table.raises(
    "hardness.check_clauses",
    "float-literal",
    lambda: hd.check_clauses([(1.0,)], 3),
    r"clauses\[0\]",
)
table.raises("hardness.check_clauses", "empty", lambda: hd.check_clauses([], 3), word("clauses"))
table.valid(
    "hardness.check_clauses",
    "numpy-row",
    lambda: hd.check_clauses([np.array([1, -2])], 2),
    lambda c: c == [(1, -2)],
)
for what, text in [
    ("underscore-digits", "p cnf 20 1\n1_0 0\n"),
    ("arabic-indic", "p cnf 3 1\n\u0661 0\n"),
    ("full-width", "p cnf 3 1\n\uff11 0\n"),
    ("header-arabic-indic", "p cnf \u0663 1\n1 0\n"),
    ("header-underscore", "p cnf 1_0 1\n1 0\n"),
]:
    table.raises("hardness.read_dimacs", what, lambda t=text: hd.read_dimacs(t), r"text line")
table.raises(
    "hardness.read_dimacs", "bytes", lambda: hd.read_dimacs(b"p cnf 1 1\n1 0\n"), word("text")
)
table.raises("hardness.read_dimacs", "no-header", lambda: hd.read_dimacs("1 0\n"), r"text line 1")
table.valid(
    "hardness.read_dimacs",
    "signs",
    lambda: hd.read_dimacs("c x\np cnf 3 1\n+1 -2\n3 0\n"),
    lambda r: r == ([(1, -2, 3)], 3),
)
table.raises(
    "hardness.write_dimacs",
    "comment=3",
    lambda: hd.write_dimacs(CLAUSES, 3, comment=3),
    word("comment"),
)
table.raises("hardness.sat_to_ov", "n_vars=41", lambda: hd.sat_to_ov(CLAUSES, 41), word("n_vars"))
table.raises("hardness.sat_to_ov", "clauses=str", lambda: hd.sat_to_ov("1 -2", 3), word("clauses"))
table.valid(
    "hardness.sat_to_ov",
    "preserves-the-answer",
    lambda: hd.sat_to_ov(CLAUSES, 3),
    lambda ab: (hd.brute_force_ov(*ab) is not None) == (hd.brute_force_sat(CLAUSES, 3) is not None),
)
table.valid(
    "hardness.write_dimacs",
    "round-trip",
    lambda: hd.read_dimacs(hd.write_dimacs(CLAUSES, 3, comment="two\nlines")),
    lambda r: r == (CLAUSES, 3),
)
table.raises(
    "hardness.write_dimacs", "n_vars=0", lambda: hd.write_dimacs(CLAUSES, 0), word("n_vars")
)
table.raises(
    "hardness.riemann_from_gradient",
    "grad_fn=None",
    lambda: hd.riemann_from_gradient(Q, K, V, None, nodes=4),
    word("grad_fn"),
)
table.raises(
    "hardness.brute_force_sat", "n_vars=31", lambda: hd.brute_force_sat(CLAUSES, 31), word("n_vars")
)
table.valid(
    "hardness.brute_force_sat",
    "sat",
    lambda: hd.brute_force_sat(CLAUSES, 3),
    lambda a: a is not None and hd.is_satisfied(CLAUSES, a),
)
table.raises(
    "hardness.is_satisfied",
    "assignment=ints",
    lambda: hd.is_satisfied(CLAUSES, [1, 0, 1]),
    r"assignment\[0\]",
)
table.raises(
    "hardness.is_satisfied",
    "assignment=str",
    lambda: hd.is_satisfied(CLAUSES, "TFT"),
    word("assignment"),
)
table.raises(
    "hardness.ov_pair_to_assignment",
    "i=out-of-range",
    lambda: hd.ov_pair_to_assignment(4, 0, 4),
    word("i"),
)
table.raises(
    "hardness.ov_pair_to_assignment",
    "n_vars=41",
    lambda: hd.ov_pair_to_assignment(0, 0, 41),
    word("n_vars"),
)
table.raises(
    "hardness.norm_derivative_from_gradient",
    "lam=1e308",
    lambda: hd.norm_derivative_from_gradient(Q, K, V, 1e308, al.attention_loss_grad),
    word("lam"),
)
table.raises(
    "hardness.norm_derivative_from_gradient",
    "lam=10**400",
    lambda: hd.norm_derivative_from_gradient(Q, K, V, 10**400, al.attention_loss_grad),
    word("lam"),
)
table.raises(
    "hardness.norm_derivative_from_gradient",
    "lam=nan",
    lambda: hd.norm_derivative_from_gradient(Q, K, V, math.nan, al.attention_loss_grad),
    word("lam"),
)
table.raises(
    "hardness.norm_derivative_from_gradient",
    "grad_fn=42",
    lambda: hd.norm_derivative_from_gradient(Q, K, V, 1.0, 42),
    word("grad_fn"),
)
table.raises(
    "hardness.attention_from_gradient",
    "nodes=0",
    lambda: hd.attention_from_gradient(Q, K, V, al.attention_loss_grad, nodes=0),
    word("nodes"),
)
table.raises(
    "hardness.attention_from_gradient",
    "bad-grad-shape",
    lambda: hd.attention_from_gradient(Q, K, V, lambda *a: np.ones(2), nodes=2),
    word("grad_fn"),
)
table.raises(
    "hardness.riemann_from_gradient",
    "nodes=str",
    lambda: hd.riemann_from_gradient(Q, K, V, al.attention_loss_grad, nodes="4"),
    word("nodes"),
)
table.valid(
    "hardness.attention_from_gradient",
    "matches-attention",
    lambda: hd.attention_from_gradient(Q, K, V, al.attention_loss_grad, nodes=16),
    lambda v: math.isclose(v, float(np.sum(al.attention(Q, K, V) ** 2)), rel_tol=1e-10),
)

table.raises("hardness.adversarial_no_ov", "n=0", lambda: hd.adversarial_no_ov(0, 3), word("n"))
table.raises("hardness.adversarial_no_ov", "m=2.5", lambda: hd.adversarial_no_ov(3, 2.5), word("m"))
table.valid(
    "hardness.adversarial_no_ov",
    "inner-products-one",
    lambda: hd.adversarial_no_ov(5, 3),
    lambda ab: bool((ab[0].astype(int) @ ab[1].astype(int).T == 1).all()),
)
table.raises("hardness.all_models", "n_vars=31", lambda: hd.all_models(CLAUSES, 31), word("n_vars"))
table.valid(
    "hardness.all_models",
    "models-satisfy",
    lambda: hd.all_models(CLAUSES, 3),
    lambda ms: len(ms) > 0 and all(hd.is_satisfied(CLAUSES, a) for a in ms),
)
table.raises(
    "hardness.count_models", "clauses=str", lambda: hd.count_models("1 -2", 3), word("clauses")
)
table.valid(
    "hardness.count_models", "matches", lambda: hd.count_models(CLAUSES, 3), lambda c: c == 2
)
table.raises(
    "hardness.assignment_bits", "ints", lambda: hd.assignment_bits([1, 0]), r"assignment\[0\]"
)
table.valid(
    "hardness.assignment_bits",
    "bits",
    lambda: hd.assignment_bits((True, False)),
    lambda b: b == "10",
)
table.raises("hardness.gap_ann_parameters", "n=1", lambda: hd.gap_ann_parameters(1), word("n"))
table.valid(
    "hardness.gap_ann_parameters",
    "n=8",
    lambda: hd.gap_ann_parameters(8),
    lambda p: p == (36, 6, 1.0),
)
table.raises(
    "hardness.lsh_close_pair", "k=0", lambda: hd.lsh_close_pair(OV_A, OV_B, 1, k=0), word("k")
)
table.raises(
    "hardness.lsh_close_pair", "t=nan", lambda: hd.lsh_close_pair(OV_A, OV_B, math.nan), word("t")
)
table.valid(
    "hardness.lsh_close_pair",
    "identical-rows",
    lambda: hd.lsh_close_pair(OV_A, OV_A, 1, k=2),
    lambda r: r[0] is not None and r[1] >= 1,
)
table.raises(
    "hardness.needed_entry_factor", "empty", lambda: hd.needed_entry_factor([], 1.0), "instances"
)
table.raises(
    "hardness.needed_entry_factor",
    "scale=0",
    lambda: hd.needed_entry_factor([(*hd.ov_to_attention(OV_A, OV_B), True)], 0.0),
    word("scale"),
)
table.valid(
    "hardness.needed_entry_factor",
    "ov-yes",
    lambda: hd.needed_entry_factor([(*hd.ov_to_attention(OV_A, OV_B, scale=1 / 3), True)], 1 / 3),
    lambda c: 0 < c <= 1,
)
table.raises(
    "hardness.attention_norm_squared",
    "lam=-1",
    lambda: hd.attention_norm_squared(Q, K, V, lam=-1.0),
    word("lam"),
)
table.valid(
    "hardness.attention_norm_squared",
    "matches-attention",
    lambda: hd.attention_norm_squared(Q, K, V),
    lambda v: v == float(np.sum(al.attention(Q, K, V) ** 2)),
)
table.raises(
    "hardness.noisy_gradient",
    "rel=-1",
    lambda: hd.noisy_gradient(al.attention_loss_grad, -1, 0),
    word("rel"),
)
table.raises(
    "hardness.noisy_gradient",
    "grad_fn=None",
    lambda: hd.noisy_gradient(None, 0.1, 0),
    word("grad_fn"),
)
table.valid(
    "hardness.noisy_gradient",
    "rel=0-is-exact",
    lambda: hd.noisy_gradient(al.attention_loss_grad, 0.0, 0)(X, A1, A2, A3, Y, E),
    lambda G: bool(np.array_equal(G, al.attention_loss_grad(X, A1, A2, A3, Y, E))),
)
table.raises(
    "hardness.gauss_legendre_nodes_needed",
    "tol=0",
    lambda: hd.gauss_legendre_nodes_needed(*_QKV, 0.0),
    word("tol"),
)
table.raises(
    "hardness.gauss_legendre_nodes_needed",
    "unreachable",
    lambda: hd.gauss_legendre_nodes_needed(*_QKV, 1e-300, max_nodes=2),
    "max_nodes",
)
table.valid(
    "hardness.gauss_legendre_nodes_needed",
    "certified",
    lambda: hd.gauss_legendre_nodes_needed(*_QKV, 1e-6),
    lambda N: (
        hd.gauss_legendre_error_bound(*_QKV, N)
        <= 1e-6
        < hd.gauss_legendre_error_bound(*_QKV, N - 1)
    ),
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
