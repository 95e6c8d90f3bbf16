"""Bad-input rows of Part III, hardness: the edge cases (formulas, instances, the oracle's
answers, values beyond the float range) of SAT, orthogonal vectors, the reductions to attention
and attention from its gradient.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from bad_input_cases import K, Q, Table, V, broadcast_view, word

import attnlib as al
from attnlib import hardness as hd
from attnlib import polymethod as pm

table = Table()

OV_A = np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)
OV_B = np.array([[0, 1, 0], [1, 1, 0]], dtype=bool)
_QKV = tuple(np.random.default_rng(5).standard_normal(s) for s in ((4, 3), (5, 3), (5, 2)))

# ---- edge cases of Parts II-IV ----

# random_ksat draws k distinct variables per clause without an n_clauses × n_vars matrix


def _formula_ok(formula, n_vars, n_clauses, k) -> bool:
    return len(formula) == n_clauses and all(
        len(c) == k
        and len({abs(lit) for lit in c}) == k
        and all(1 <= abs(lit) <= n_vars for lit in c)
        and [abs(lit) for lit in c] == sorted(abs(lit) for lit in c)
        for c in formula
    )


table.valid(
    "hardness.random_ksat",
    "n_vars=10**6",
    lambda: hd.random_ksat(10**6, 4000, 3, seed=0),
    lambda f: _formula_ok(f, 10**6, 4000, 3),
)
table.valid(
    "hardness.random_ksat",
    "n_vars=2**63-1",
    lambda: hd.random_ksat(2**63 - 1, 5, 4, seed=1),
    lambda f: _formula_ok(f, 2**63 - 1, 5, 4),
)
table.valid(
    "hardness.random_ksat",
    "k=n_vars-1-wide-clauses",
    lambda: hd.random_ksat(10**5, 3, 10**5 - 1, seed=2),
    lambda f: _formula_ok(f, 10**5, 3, 10**5 - 1),
)
table.raises(
    "hardness.random_ksat",
    "n_vars=2**63",
    lambda: hd.random_ksat(2**63, 5, 3, seed=0),
    word("n_vars"),
)
table.raises(
    "hardness.random_ksat",
    "10**8-clauses",
    lambda: hd.random_ksat(10**6, 10**8, 3, seed=0),
    r"n_clauses or k is too large",
)

# DIMACS integers beyond Python's digit limit for int()
table.raises(
    "hardness.read_dimacs",
    "header-5000-digits",
    lambda: hd.read_dimacs("p cnf " + "9" * 5000 + " 1\n1 0\n"),
    r"text line 1",
)
table.raises(
    "hardness.read_dimacs",
    "literal-5000-digits",
    lambda: hd.read_dimacs("p cnf 3 1\n-" + "9" * 5000 + " 0\n"),
    r"text line 2",
)

# λ is named when λτ or the logits λτQKᵀ overflow, and λτ underflowing is λ = 0
table.raises(
    "hardness.attention_norm_squared",
    "lam*scale-overflows",
    lambda: hd.attention_norm_squared(Q, K, V, lam=1e300, scale=1e10),
    word("lam"),
)
table.raises(
    "hardness.attention_norm_squared",
    "lam*logits-overflow",
    lambda: hd.attention_norm_squared(Q * 1e150, K * 1e150, V, lam=1e10),
    word("lam"),
)
table.valid(
    "hardness.attention_norm_squared",
    "lam*scale-underflows",
    lambda: hd.attention_norm_squared(Q, K, V, lam=1e-300, scale=1e-100),
    lambda v: v == hd.attention_norm_squared(Q, K, V, lam=0.0),
)
table.raises(
    "hardness.attention_from_gradient",
    "scale=1e308-embedding-overflows",
    lambda: hd.attention_from_gradient(Q, K, V, al.attention_loss_grad, nodes=4, scale=1e308),
    r"Q, K or scale is too large",
)
table.raises(
    "hardness.riemann_from_gradient",
    "grad_fn-refuses",
    lambda: hd.riemann_from_gradient(
        Q, K, V, lambda *a: pm.approx_attention_loss_grad(*a, eps=1e-15), nodes=2
    ),
    word("grad_fn"),  # eps out of reach: the refusal is grad_fn's, of arguments it was given
)

# Gauss–Legendre's bound: the culprit of an overflow, and tiny logit widths
table.raises(
    "hardness.gauss_legendre_error_bound",
    "logits-1e300-wide",
    lambda: hd.gauss_legendre_error_bound(_QKV[0] * 1e150, _QKV[1] * 1e150, _QKV[2], 8),
    r"logits' rows too wide",
)
table.valid(
    "hardness.gauss_legendre_error_bound",
    "scale=5e-324",
    lambda: hd.gauss_legendre_error_bound(*_QKV, 8, scale=5e-324),
    lambda b: 0 <= b < 1e-300,
)

# needed_entry_factor names the instance at fault
table.raises(
    "hardness.needed_entry_factor",
    "Q-1-D",
    lambda: hd.needed_entry_factor([(np.ones(3), K, V, 0.5, True)], 1.0),
    r"instances\[0\]'s Q",
)
table.raises(
    "hardness.needed_entry_factor",
    "V-rows",
    lambda: hd.needed_entry_factor([(Q, K, V[:2], 0.5, True)], 1.0),
    r"instances\[0\]'s V",
)
table.raises(
    "hardness.needed_entry_factor",
    "logits-overflow",
    lambda: hd.needed_entry_factor([(*hd.ov_to_attention(OV_A, OV_B), True)], 1e308),
    r"instances\[0\] at scale=1e\+308",
)

# noisy_gradient's function: what grad_fn returns, and noise beyond the float range
table.valid(
    "hardness.noisy_gradient",
    "grad_fn-returns-a-list",
    lambda: hd.noisy_gradient(lambda *a: [[1.0, 2.0]], 0.0, 0)(),
    lambda G: np.array_equal(G, [[1.0, 2.0]]),
)
table.raises(
    "hardness.noisy_gradient",
    "grad_fn-returns-a-str",
    lambda: hd.noisy_gradient(lambda *a: "G", 0.1, 0)(),
    word("grad_fn"),
)
table.raises(
    "hardness.noisy_gradient",
    "noise-overflows",
    lambda: hd.noisy_gradient(lambda *a: np.full((2, 2), 1e300), 1e10, 0)(),
    word("rel"),
)

# sizes beyond the allocation limit, refused before allocating; zero-stride views
for fname, call in [
    (
        "hardness.ov_to_attention",
        lambda: hd.ov_to_attention(
            broadcast_view((2**16, 2**16), True, bool), OV_B[:, :1].repeat(2**16, 1)
        ),
    ),
    (
        "hardness.gap_ann_to_attention",
        lambda: hd.gap_ann_to_attention(
            broadcast_view((2**16, 2**16), True, bool), np.ones((1, 2**16), bool), 2, 1.0
        ),
    ),
    (
        "hardness.brute_force_ov",
        lambda: hd.brute_force_ov(
            broadcast_view((10**9, 64), True, bool), broadcast_view((2, 64), True, bool)
        ),
    ),
]:
    table.raises(fname, "10^9-row-view", call, r"A or B is too large")
table.raises(
    "hardness.brute_force_ov",
    "10^9-row-int-view",
    lambda: hd.brute_force_ov(broadcast_view((10**9, 64), 1, np.int64), np.ones((2, 64), int)),
    r"A converted to bool would need .* A is too large",
)
table.raises(
    "hardness.gauss_legendre_nodes_needed",
    "10^6-row-views",
    lambda: hd.gauss_legendre_nodes_needed(
        broadcast_view((10**6, 4)), broadcast_view((10**6, 4)), broadcast_view((10**6, 2)), 1e-3
    ),
    r"Q or K is too large",
)

# brute-force OV counts the pairs it compares (a chapter asserts counts, not times)
table.raises(
    "hardness.brute_force_ov",
    "return_comparisons=1",
    lambda: hd.brute_force_ov(OV_A, OV_B, return_comparisons=1),
    word("return_comparisons"),
)
table.valid(
    "hardness.brute_force_ov",
    "comparisons-of-a-no-instance",
    lambda: hd.brute_force_ov(np.ones((3, 2), int), np.ones((4, 2), int), return_comparisons=True),
    lambda r: r == (None, 12),
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
