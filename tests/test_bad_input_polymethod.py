"""Bad-input rows of Part II, the polynomial method: polynomial approximations of exp, feature maps,
approximate attention and its gradient, and their error bounds.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from bad_input_cases import (
    A1,
    A2,
    A3,
    K_UNIFORM,
    LOSS,
    LOSS_SMALL,
    Q_UNIFORM,
    SMALL_D8,
    V_NORMAL,
    E,
    K,
    Q,
    Table,
    V,
    X,
    Y,
    broadcast_view,
    dO,
    finite,
    time_limit,
    word,
)

import attnlib as al
from attnlib import hardness as hd
from attnlib import polymethod as pm
from attnlib.polymethod import approx as ap
from attnlib.polymethod import features as ft
from attnlib.polymethod.approx import peak_bytes

table = Table()


# ---- reals and ints out of range ----

table.raises("polymethod.exp_poly", "R=10**400", lambda: pm.exp_poly(10**400, 1e-3), word("R"))
table.raises(
    "polymethod.least_degree", "eps=10**400", lambda: pm.least_degree(1.0, 10**400), word("eps")
)
table.raises(
    "polymethod.rounding_floor", "R=10**400", lambda: pm.rounding_floor(10**400), word("R")
)

table.raises(
    "polymethod.max_logit_range", "eps=10**400", lambda: pm.max_logit_range(10**400), word("eps")
)
table.raises("polymethod.max_logit_range", "eps=0", lambda: pm.max_logit_range(0), word("eps"))
table.valid(
    "polymethod.max_logit_range",
    "eps=1e-2",
    lambda: pm.max_logit_range(1e-2),
    lambda R: 14 < R < 15,
)

table.raises(
    "polymethod.aa22_degree", "R=-10**400", lambda: pm.aa22_degree(-(10**400), 0.1), word("R")
)
table.raises(
    "polymethod.forward_error_bound",
    "V_max=10**400",
    lambda: pm.forward_error_bound(0.1, 10**400),
    "V_max",
)

table.raises(
    "polymethod.approx_attention",
    "memory_budget=10**400",
    lambda: pm.approx_attention(Q, K, V, eps=0.1, memory_budget=10**400),
    "memory_budget",
)
table.valid(
    "polymethod.exp_poly",
    "R=np.float32",
    lambda: pm.exp_poly(np.float32(1.0), 1e-3),
    lambda p: finite(p.coef),
)
table.valid("polymethod.least_degree", "R=int", lambda: pm.least_degree(1, 1e-6), lambda g: g == 7)

table.valid(
    "polymethod.max_relative_error",
    "points=np.int64",
    lambda: pm.max_relative_error(pm.exp_poly(1.0, 1e-6), 1.0, points=np.int64(1000)),
    lambda e: 0 <= e <= 1e-6,
)

# ---- the polynomial method ----

for fname, f in [
    ("polymethod.feature_rank", pm.feature_rank),
    ("polymethod.as23_rank_bound", pm.as23_rank_bound),
]:
    table.raises(fname, "10**6-10**6", lambda f=f: f(10**6, 10**6), r"d and g are too large")
    table.raises(fname, "10**200", lambda f=f: f(10**200, 10**200), r"d and g are too large")
    table.bad_ints(fname, "d", lambda v, f=f: f(v, 3))
    table.raises(fname, "g=-1", lambda f=f: f(4, -1), word("g"))
table.valid(
    "polymethod.feature_rank",
    "d=32-g=42",
    lambda: pm.feature_rank(32, 42),
    lambda r: r == math.comb(74, 32),
)
table.valid(
    "polymethod.as23_rank_bound",
    "d=64-g=9",
    lambda: pm.as23_rank_bound(64, 9),
    lambda r: r == math.comb(146, 18),
)
table.raises(
    "polymethod.poly_features",
    "poly=ones(1001)",
    lambda: pm.poly_features(Q, K, np.ones(1001), scale=1),
    r"too large",
)
table.raises(
    "polymethod.poly_features",
    "poly='abc'",
    lambda: pm.poly_features(Q, K, "abc", scale=1),
    word("poly"),
)
table.raises(
    "polymethod.poly_features",
    "poly=[1,'a']",
    lambda: pm.poly_features(Q, K, [1, "a"], scale=1),
    word("poly"),
)
table.raises(
    "polymethod.poly_features",
    "poly=nan",
    lambda: pm.poly_features(Q, K, [1.0, np.nan], scale=1),
    word("poly"),
)
table.raises(
    "polymethod.poly_features",
    "scale=10**400",
    lambda: pm.poly_features(Q, K, [1.0, 1.0], scale=10**400),
    word("scale"),
)
table.bad_arrays(
    "polymethod.poly_features", "K", lambda v: pm.poly_features(Q, v, [1.0, 1.0], scale=1)
)
table.valid(
    "polymethod.poly_features",
    "identity",
    lambda: pm.poly_features(Q, K, [1.0, 0.5, 0.25], scale=0.5),
    lambda uv: np.allclose(uv[0] @ uv[1].T, 1 + 0.25 * (Q @ K.T) + 0.25 * 0.25 * (Q @ K.T) ** 2),
)
table.raises(
    "polymethod.multi_indices",
    "d=64-g=40",
    lambda: pm.multi_indices(64, 40),
    r"d or g is too large",
)
table.raises(
    "polymethod.multi_indices",
    "d=10**6-g=10**6",
    lambda: pm.multi_indices(10**6, 10**6),
    r"too large",
)
table.valid(
    "polymethod.multi_indices",
    "d=3-g=2",
    lambda: pm.multi_indices(3, 2),
    lambda a: a.shape == (10, 3) and a.sum(1).max() == 2,
)
table.raises(
    "polymethod.rowwise_kron",
    "10**5-columns",
    lambda: pm.rowwise_kron(np.ones((2, 10**5)), np.ones((2, 10**5))),
    r"A or B is too large",
)
table.bad_arrays("polymethod.rowwise_kron", "A", lambda v: pm.rowwise_kron(v, np.ones((3, 2))))
table.raises(
    "polymethod.rowwise_kron",
    "rows",
    lambda: pm.rowwise_kron(np.ones((3, 2)), np.ones((4, 2))),
    word("B"),
)
table.raises(
    "polymethod.max_relative_error",
    "points=10**12",
    lambda: pm.max_relative_error(np.exp, 1.0, points=10**12),
    r"points is too large",
)
table.raises(
    "polymethod.max_relative_error",
    "scalar-callable",
    lambda: pm.max_relative_error(lambda x: 1.0, 1.0),
    word("poly"),
)
table.raises(
    "polymethod.max_relative_error",
    "wrong-shape",
    lambda: pm.max_relative_error(lambda x: x[:3], 1.0),
    word("poly"),
)
table.raises(
    "polymethod.max_relative_error",
    "str-values",
    lambda: pm.max_relative_error(lambda x: np.full(x.shape, "a"), 1.0),
    word("poly"),
)
table.raises(
    "polymethod.max_relative_error",
    "points=1",
    lambda: pm.max_relative_error(np.exp, 1.0, points=1),
    word("points"),
)
table.raises(
    "polymethod.max_relative_error", "poly=3", lambda: pm.max_relative_error(3, 1.0), word("poly")
)
table.raises(
    "polymethod.exp_poly_of_degree",
    "R=1e300-g=400",
    lambda: pm.exp_poly_of_degree(1e300, 400),
    r"R=1e\+300 is too large",
)
table.raises(
    "polymethod.exp_poly_of_degree",
    "R=800-g=3",
    lambda: pm.exp_poly_of_degree(800.0, 3),
    r"R=800 is too large",
)
table.raises(
    "polymethod.exp_poly_of_degree", "g=401", lambda: pm.exp_poly_of_degree(1.0, 401), word("g")
)
table.raises(
    "polymethod.exp_poly_of_degree",
    "kind='pade'",
    lambda: pm.exp_poly_of_degree(1.0, 3, kind="pade"),
    word("kind"),
)
table.valid(
    "polymethod.exp_poly_of_degree",
    "R=700-g=10",
    lambda: pm.exp_poly_of_degree(700.0, 10),
    lambda p: finite(p.coef),
)
table.raises("polymethod.aa22_degree", "R=1e308", lambda: pm.aa22_degree(1e308, 0.1), word("R"))
table.valid(
    "polymethod.aa22_degree", "R=1e300", lambda: pm.aa22_degree(1e300, 0.1), lambda v: v == 2e300
)

table.raises(
    "polymethod.forward_error_bound",
    "V_max=1e308",
    lambda: pm.forward_error_bound(0.9, 1e308),
    "V_max",
)
table.valid(
    "polymethod.forward_error_bound",
    "V_max=1e300",
    lambda: pm.forward_error_bound(0.5, 1e300),
    lambda v: math.isclose(v, 2e300),
)
table.raises(
    "polymethod.forward_error_bound", "eps=1", lambda: pm.forward_error_bound(1.0, 1.0), word("eps")
)
table.bad_reals("polymethod.rounding_floor", "R", lambda v: pm.rounding_floor(v))
table.bad_reals("polymethod.exp_poly", "eps", lambda v: pm.exp_poly(1.0, v), extra=[("one", 1.0)])
table.raises(
    "polymethod.exp_poly", "kind=None", lambda: pm.exp_poly(1.0, 1e-3, kind=None), word("kind")
)
table.raises(
    "polymethod.exp_poly",
    "kind=array",
    lambda: pm.exp_poly(1.0, 1e-3, kind=np.array(["a", "b"])),
    word("kind"),
)
table.raises(
    "polymethod.approx_plan",
    "kind=array",
    lambda: pm.approx_plan(Q, K, eps=0.1, kind=np.array([1, 2])),
    word("kind"),
)
table.raises(
    "polymethod.least_degree",
    "out-of-reach",
    lambda: pm.least_degree(8.0, 1e-12),
    r"eps=1e-12 is out of reach",
)
# the approximate functions: argument checks, and the memory budget honoured
for fname, call in [
    ("polymethod.approx_attention", lambda **kw: pm.approx_attention(Q, K, V, **kw)),
    (
        "polymethod.approx_attention_backward",
        lambda **kw: pm.approx_attention_backward(Q, K, V, dO, **kw),
    ),
    ("polymethod.approx_plan", lambda **kw: pm.approx_plan(Q, K, **kw)),
]:
    table.bad_reals(fname, "eps", lambda v, c=call: c(eps=v), extra=[("one", 1.0)])
    table.raises(fname, "kind=3", lambda c=call: c(eps=0.1, kind=3), word("kind"))
    table.raises(
        fname, "memory_budget=-1", lambda c=call: c(eps=0.1, memory_budget=-1), "memory_budget"
    )
table.bad_arrays(
    "polymethod.approx_attention_backward",
    "dO",
    lambda v: pm.approx_attention_backward(Q, K, V, v, eps=0.1),
)
for fname, call in [
    (
        "polymethod.approx_attention_loss_grad",
        lambda **kw: pm.approx_attention_loss_grad(X, A1, A2, A3, Y, E, **kw),
    ),
    ("polymethod.loss_plan", lambda **kw: pm.loss_plan(X, A1, A2, **kw)),
]:
    table.bad_reals(fname, "eps", lambda v, c=call: c(eps=v))
    table.raises(fname, "kind='x'", lambda c=call: c(eps=0.1, kind="x"), word("kind"))
table.raises(
    "polymethod.loss_plan", "X-shape", lambda: pm.loss_plan(np.eye(3), A1, A2, eps=0.1), word("X")
)
# n = m = 8, d = 16 at eps = 1e-6, degree 9: the factors (748 MiB) fit the default 1 GiB
# budget, the backward pass's r × d·d_v products (4.9 GiB) do not; nothing is allocated.
_r6 = np.random.default_rng(3)
SMALL_N = dict(
    Q=_r6.uniform(-1, 1, (8, 16)),
    K=_r6.uniform(-1, 1, (8, 16)),
    V=_r6.standard_normal((8, 16)),
    dO=_r6.standard_normal((8, 16)),
)
table.raises(
    "polymethod.approx_attention_backward",
    "n=8-d=16-degree-9-default-budget",
    lambda: pm.approx_attention_backward(
        SMALL_N["Q"], SMALL_N["K"], SMALL_N["V"], SMALL_N["dO"], eps=1e-6
    ),
    r"rank r = 2042975 \(degree 9.* over memory_budget = 1024\.0 MiB",
)


# at a budget equal to the factors' estimate, every function still refuses when n is small
def _at_factor_budget(fn, plan):
    return fn(memory_budget=plan.bytes_needed)


for name, args, plan, planned in [
    ("approx_attention", SMALL_D8, pm.approx_plan, 2),
    ("approx_attention_backward", (*SMALL_D8, SMALL_D8[2]), pm.approx_plan, 2),
    ("approx_attention_loss_grad", LOSS_SMALL, pm.loss_plan, 3),
]:
    fn = getattr(pm, name)
    table.raises(
        f"polymethod.{name}",
        "budget=factor-estimate",
        lambda fn=fn, args=args, plan=plan, k=planned: _at_factor_budget(
            lambda **kw: fn(*args, eps=1e-3, **kw), plan(*args[:k], eps=1e-3)
        ),
        r"memory_budget",
    )
table.valid(
    "polymethod.approx_attention",
    "zero-Q",
    lambda: pm.approx_attention(np.zeros((4, 4)), K, V, eps=1e-3),
    lambda O: np.allclose(O, V.mean(axis=0)),
)
table.valid(
    "polymethod.ApproxPlan.polynomial",
    "matches-exp_poly",
    lambda: pm.approx_plan(Q, K, eps=1e-3).polynomial(),
    lambda p: pm.max_relative_error(p, pm.approx_plan(Q, K, eps=1e-3).R) <= 1e-3,
)

# the teaching variants, bounds, models and input generators of Part II
table.raises(
    "polymethod.kronecker_loss_grad",
    "lemma_d5='printed'",
    lambda: pm.kronecker_loss_grad(*LOSS, eps=0.1, lemma_d5="printed"),
    word("lemma_d5"),
)
table.raises(
    "polymethod.kronecker_loss_grad",
    "as-printed-m!=n",
    lambda: pm.kronecker_loss_grad(*LOSS, eps=0.1, lemma_d3="as_printed"),
    r"m = n",
)
table.raises(
    "polymethod.kronecker_loss_grad",
    "budget=1KiB",
    lambda: pm.kronecker_loss_grad(*LOSS, eps=0.1, memory_budget=1024),
    r"memory_budget|over the limit",
)
table.bad_reals(
    "polymethod.kronecker_loss_grad", "eps", lambda v: pm.kronecker_loss_grad(*LOSS, eps=v)
)
table.bad_arrays(
    "polymethod.kronecker_loss_grad",
    "E",
    lambda v: pm.kronecker_loss_grad(X, A1, A2, A3, Y, v, eps=0.1),
)
table.valid(
    "polymethod.kronecker_loss_grad",
    "matches-light-form",
    lambda: (
        pm.kronecker_loss_grad(*LOSS, eps=1e-6),
        pm.approx_attention_loss_grad(*LOSS, eps=1e-6),
    ),
    lambda gs: np.allclose(gs[0], gs[1], rtol=1e-9, atol=1e-12),
)
for fname, f in [
    ("polymethod.loss_grad_error_bound", lambda *a: pm.loss_grad_error_bound(*a, eps=1e-3)),
    ("polymethod.loss_grad_magnitude_bound", pm.loss_grad_magnitude_bound),
]:
    table.bad_arrays(fname, "A1", lambda v, f=f: f(X, v, A2, A3, Y, E))
    table.raises(fname, "Y-shape", lambda f=f: f(X, A1, A2, A3, Y[:2], E), word("Y"))
    table.valid(
        fname, "zero-E", lambda f=f: f(X, A1, A2, A3, Y, 0 * E), lambda b: b > 0 and finite(b)
    )
table.bad_reals(
    "polymethod.loss_grad_error_bound", "eps", lambda v: pm.loss_grad_error_bound(*LOSS, eps=v)
)
for what, value in [("negative", -1.0), ("inf", math.inf), ("bool", True), ("str", "1")]:
    table.raises(
        "polymethod.entrywise_product_bound",
        f"p_error_max={what}",
        lambda v=value: pm.entrywise_product_bound(A1, A2, v),
        word("p_error_max"),
    )
table.bad_arrays(
    "polymethod.entrywise_product_bound", "A1", lambda v: pm.entrywise_product_bound(v, A2, 0.1)
)
table.valid(
    "polymethod.entrywise_product_bound",
    "zero",
    lambda: pm.entrywise_product_bound(A1, A2, 0),
    lambda b: b == 0,
)
table.bad_reals("polymethod.relative_error_bound", "R", lambda v: pm.relative_error_bound(v, 3))
table.bad_ints(
    "polymethod.relative_error_bound",
    "g",
    lambda v: pm.relative_error_bound(1.0, v),
    minimum_bad=-1,
)
table.raises(
    "polymethod.relative_error_bound",
    "kind='pade'",
    lambda: pm.relative_error_bound(1.0, 3, kind="pade"),
    word("kind"),
)
table.valid(
    "polymethod.relative_error_bound",
    "R=1e300",
    lambda: pm.relative_error_bound(1e300, 3),
    lambda b: b == math.inf,
)
table.bad_ints("polymethod.aa22_rank", "d", lambda v: pm.aa22_rank(v, 1.0, 0.1))
table.bad_reals(
    "polymethod.aa22_rank", "eps", lambda v: pm.aa22_rank(4, 1.0, v), extra=[("one", 1.0)]
)
table.raises(
    "polymethod.aa22_rank",
    "R=1e300",
    lambda: pm.aa22_rank(4, 1e300, 0.1),
    r"R=1e\+300 is too large",
)
table.valid(
    "polymethod.aa22_rank",
    "d=4-R=1",
    lambda: pm.aa22_rank(4, 1.0, 1e-3),
    lambda r: r == math.comb(10, 4),
)
table.bad_ints("polymethod.rank_exponent", "log2_n", lambda v: pm.rank_exponent(v, 1.0))
table.raises(
    "polymethod.rank_exponent", "log2_n=1024", lambda: pm.rank_exponent(1024, 1.0), word("log2_n")
)
table.bad_reals("polymethod.rank_exponent", "R", lambda v: pm.rank_exponent(10, v))
table.valid(
    "polymethod.rank_exponent",
    "log2_n=1023",
    lambda: pm.rank_exponent(1023, 1.0),
    lambda k: 0 < k < 1,
)
for what, ks in [("fraction", [8.5]), ("48", [48]), ("0", [0]), ("repeated", [8, 8])]:
    table.raises(
        "polymethod.threshold_sweep",
        f"log2_ns={what}",
        lambda ks=ks: pm.threshold_sweep(ks, [0.5]),
        word("log2_ns"),
    )
for what, cs in [("decreasing", [0.5, 0.4]), ("zero", [0.0, 0.4]), ("nan", [math.nan])]:
    table.raises(
        "polymethod.threshold_sweep", f"cs={what}", lambda cs=cs: pm.threshold_sweep([8], cs), "cs"
    )
table.bad_reals(
    "polymethod.threshold_sweep",
    "d_per_log2_n",
    lambda v: pm.threshold_sweep([8], [0.5], d_per_log2_n=v),
)
for what, d in [("0", 0), ("-1", -1), ("fraction", 2.5), ("bool", True), ("str", "8")]:
    table.raises(
        "polymethod.threshold_sweep",
        f"d={what}",
        lambda d=d: pm.threshold_sweep([8], [0.5], d=d),
        word("d"),
    )
table.valid(
    "polymethod.threshold_sweep",
    "n=2^8-c=1/4",
    lambda: pm.threshold_sweep([8], [0.25]),
    lambda s: s.rank[0, 0] == math.comb(2 + 4, 4) and not s.refused.any(),
)
table.bad_reals(
    "polymethod.ThresholdSweep.crossing",
    "level",
    lambda v: pm.threshold_sweep([8], [0.5]).crossing(level=v),
)
for what, args in [("smallest=0", (0, 12)), ("largest=1.5", (8, 1.5)), ("empty", (30, 40))]:
    table.raises(
        "polymethod.ThresholdSweep.drift",
        what,
        lambda args=args: pm.threshold_sweep([8], [0.5]).drift(*args),
        r"smallest|largest|no size",
    )
table.valid(
    "polymethod.ThresholdSweep.drift",
    "one-size",
    lambda: pm.threshold_sweep([8], [0.25, 0.5]).drift(),
    lambda slopes: np.isnan(slopes).all(),
)
table.valid(
    "polymethod.ThresholdSweep.crossing",
    "never-reached",
    lambda: pm.threshold_sweep([8], [0.25, 0.5]).crossing(level=50.0),
    lambda c: np.isnan(c).all(),
)
for fname, f in [
    ("polymethod.bounded_loss_inputs", pm.bounded_loss_inputs),
    ("polymethod.sign_loss_inputs", pm.sign_loss_inputs),
]:
    table.bad_ints(fname, "n", lambda v, f=f: f(v, 4, 1.0, 0))
    table.bad_ints(fname, "d", lambda v, f=f: f(8, v, 1.0, 0))
    table.bad_reals(fname, "B", lambda v, f=f: f(8, 4, v, 0))
    for what, value in [("None", None), ("negative", -1), ("float", 0.5), ("bool", True)]:
        table.raises(fname, f"rng={what}", lambda v=value, f=f: f(8, 4, 1.0, v), word("rng"))
    table.raises(fname, "n=10**12", lambda f=f: f(10**12, 4, 1.0, 0), r"n, m or d is too large")
    table.valid(
        fname,
        "n=1-d=1",
        lambda f=f: f(1, 1, 1.0, 0),
        lambda a: finite(a) and a[1].shape == (1, 1),
    )
table.raises(
    "polymethod.bounded_loss_inputs",
    "m=0",
    lambda: pm.bounded_loss_inputs(8, 4, 1.0, 0, m=0),
    word("m"),
)

# ---- edge cases of Parts II-IV ----

# no logit range reaches eps ≤ 10u: max_logit_range must not return a negative R
table.raises(
    "polymethod.max_logit_range", "eps=1e-20", lambda: pm.max_logit_range(1e-20), word("eps")
)
table.valid(
    "polymethod.max_logit_range",
    "eps=1e-14",
    lambda: pm.max_logit_range(1e-14),
    lambda R: R > 0 and pm.least_degree(R / 2, 1e-14) >= 0,
)

# R < 1: the interpolant's coefficients, and the textbook bound, at tiny ranges
_TAYLOR4 = np.array([1.0, 1.0, 0.5, 1 / 6])
for _Rt, _gt in [(1e-30, 3), (1e-12, 40), (1e-300, 400)]:
    table.valid(
        "polymethod.exp_poly_of_degree",
        f"R={_Rt:g}-g={_gt}",
        lambda R=_Rt, g=_gt: pm.exp_poly_of_degree(R, g),
        lambda p, R=_Rt: (
            np.allclose(p.coef[:4], _TAYLOR4, rtol=1e-12, atol=0)
            and finite(p.coef)
            and pm.max_relative_error(p, R) <= 1e-15
        ),
    )
for _Rt in (5e-324, 1e-300):
    table.valid(
        "polymethod.relative_error_bound",
        f"R={_Rt:g}-g=400",
        lambda R=_Rt: pm.relative_error_bound(R, 400),
        lambda b: 0 < b < 1e-300,  # a bound that rounds to 0 would claim an exact polynomial
    )


# the feature map's monomials near the float range
def _identity(Qm, Km, scale):
    U, Vf = pm.poly_features(Qm, Km, [1.0, 1.0, 0.5, 1 / 6], scale=scale)
    s = scale * (Qm @ Km.T)
    return np.allclose(U @ Vf.T, 1 + s + s**2 / 2 + s**3 / 6, rtol=1e-12, atol=1e-12)


for what, args in [
    ("Q=1e200-K=1e-200", (Q_UNIFORM * 1e200, K_UNIFORM * 1e-200, 0.5)),
    ("scale=1e300-entries-1e-150", (Q_UNIFORM * 1e-150, K_UNIFORM * 1e-150, 1e300)),
    ("scale=1e-300-entries-1e150", (Q_UNIFORM * 1e150, K_UNIFORM * 1e150, 1e-300)),
]:
    table.valid("polymethod.poly_features", what, lambda a=args: _identity(*a), bool)
table.valid(
    "polymethod.poly_features",
    "scale=1e308",  # τ^k overflowed a Python float: OverflowError
    lambda: pm.poly_features(Q_UNIFORM, K_UNIFORM, [1.0, 1.0, 0.5], scale=1e308),
    lambda uv: finite(uv[0]) and finite(uv[1]),
)
table.raises(
    "polymethod.poly_features",
    "entries-1e200",
    lambda: pm.poly_features(Q_UNIFORM * 1e200, K_UNIFORM * 1e200, [1.0, 1.0, 0.5], scale=1.0),
    r"overflows float64: the monomials of Q, K and scale",
)
table.raises(
    "polymethod.rowwise_kron",
    "products-1e400",
    lambda: pm.rowwise_kron(np.full((2, 2), 1e200), np.full((2, 2), 1e200)),
    r"A or B is too large",
)
table.valid(
    "polymethod.approx_attention",
    "Q=1e100-K=1e-100",
    lambda: pm.approx_attention(Q_UNIFORM * 1e100, K_UNIFORM * 1e-100, V_NORMAL, eps=1e-3),
    lambda O: (
        finite(O)
        and np.abs(O - al.attention(Q_UNIFORM * 1e100, K_UNIFORM * 1e-100, V_NORMAL)).max()
        <= pm.forward_error_bound(1e-3, np.abs(V_NORMAL).max())
    ),
)

# V and dO near the float range: Õ is a convex combination of V's rows
table.valid(
    "polymethod.approx_attention",
    "V=1e308",
    lambda: pm.approx_attention(Q_UNIFORM, K_UNIFORM, np.full((5, 3), 1e308), eps=1e-3),
    lambda O: finite(O) and np.allclose(O, 1e308, rtol=1e-12),
)
table.valid(
    "polymethod.approx_attention_backward",
    "V=1e308",
    lambda: (
        pm.approx_attention_backward(
            Q_UNIFORM, K_UNIFORM, np.full((5, 3), 1e308), dO[:, :3], eps=1e-3
        ),
        pm.approx_attention_backward(Q_UNIFORM, K_UNIFORM, V_NORMAL, dO[:, :3], eps=1e-3),
    ),
    lambda r: finite(list(r[0])) and np.array_equal(r[0][2], r[1][2]),  # dV does not see V
)
table.raises(
    "polymethod.approx_attention_backward",
    "V=dO=1e200",
    lambda: pm.approx_attention_backward(
        Q_UNIFORM, K_UNIFORM, np.full((5, 3), 1e200), np.full((6, 3), 1e200), eps=1e-3
    ),
    r"overflows float64: V, dO",
)
table.raises_each(
    [
        ("polymethod.approx_attention_loss_grad", pm.approx_attention_loss_grad),
        ("polymethod.kronecker_loss_grad", pm.kronecker_loss_grad),
    ],
    [
        (
            "A3=1e300",
            lambda f: f(X, A1, A2, A3 * 1e300, Y, E, eps=1e-3),
            r"A3 @ Y or E is too large",
        ),
        (
            "Y=1e300",
            lambda f: f(X, A1, A2, A3, Y * 1e300, E, eps=1e-3),
            r"A3 @ Y or E is too large",
        ),
    ],
)

# the error bounds overflow a float; U(−B, B) needs 2B finite
table.raises(
    "polymethod.loss_grad_error_bound",
    "A3=1e300",
    lambda: pm.loss_grad_error_bound(X, A1, A2, A3 * 1e300, Y, E, eps=1e-3),
    r"A1, A2, A3, Y or E",
)
table.raises(
    "polymethod.loss_grad_magnitude_bound",
    "Y=1e300",
    lambda: pm.loss_grad_magnitude_bound(X, A1, A2, A3, Y * 1e300, E),
    r"A1, A2, A3, Y or E",
)
table.raises(
    "polymethod.entrywise_product_bound",
    "entries-1e200",
    lambda: pm.entrywise_product_bound(A1 * 1e200, A2 * 1e200, 1.0),
    word("A1"),
)
table.raises(
    "polymethod.entrywise_product_bound",
    "p_error_max=1e308",
    lambda: pm.entrywise_product_bound(A1, A2, 1e308),
    word("p_error_max"),
)
table.raises(
    "polymethod.bounded_loss_inputs",
    "B=1e308",
    lambda: pm.bounded_loss_inputs(4, 3, 1e308, 0),
    word("B"),
)

table.raises(
    "polymethod.loss_grad_error_bound",
    "10^8-row-views",
    lambda: pm.loss_grad_error_bound(
        np.eye(16),
        *(broadcast_view((10**8, 16)) for _ in range(3)),
        np.eye(16),
        broadcast_view((10**8, 16)),
        eps=1e-3,
    ),
    word("A3"),
)
table.valid(
    "polymethod.entrywise_product_bound",
    "10^9-row-views",
    lambda: pm.entrywise_product_bound(
        broadcast_view((10**9, 16)), broadcast_view((10**9, 16)), 0.1
    ),
    lambda b: b == 10**18 * 0.25 * 0.1 / 16,
)


# ---- the memory estimates' checks ----

table.raises(
    "polymethod.approx.peak_bytes",
    "which=unknown",
    lambda: ap.peak_bytes(pm.approx_plan(Q / 4, K / 4, eps=1e-3), "sideways"),
    word("which"),
)
table.raises(
    "polymethod.features.poly_features_bytes",
    "d=0",
    lambda: ft.poly_features_bytes(4, 4, 0, 2),
    word("d"),
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()


# ---- the memory estimates hold against measured peaks ----


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "n, m, d, dv, B, eps",
    [
        (8, 8, 8, 8, 1.0, 1e-6),
        (8, 8, 12, 12, 0.5, 1e-6),
        (64, 32, 4, 3, 1.0, 1e-3),
        (512, 512, 4, 4, 0.5, 1e-3),
    ],
)
def test_peak_memory_estimate_bounds_the_measured_peak(n, m, d, dv, B, eps):
    """The estimate each approximate function checks against memory_budget is an upper bound
    of its tracemalloc peak, and not a loose one (within a factor 2). The old estimate,
    8·(n+m)·(3r + 2d(d+1)), fell below the backward peak by up to 6x when n is small."""
    with time_limit():
        rng = np.random.default_rng(7)
        Qm, Km = rng.uniform(-B, B, (n, d)), rng.uniform(-B, B, (m, d))
        Vm, dOm = rng.standard_normal((m, dv)), rng.standard_normal((n, dv))
        plan = pm.approx_plan(Qm, Km, eps=eps, memory_budget=1e30)
        calls = {
            "forward": lambda: pm.approx_attention(Qm, Km, Vm, eps=eps, memory_budget=1e30),
            "backward": lambda: pm.approx_attention_backward(
                Qm, Km, Vm, dOm, eps=eps, memory_budget=1e30
            ),
        }
        for which, call in calls.items():
            call()  # caches the degree search
            measured = _peak(call)
            estimate = peak_bytes(plan, which, dv)
            assert measured <= estimate <= 2 * measured, (which, measured, estimate)
        if n == m and d == dv:
            Xm = rng.uniform(-1, 1, (d, d)) / math.sqrt(d)
            loss = (Xm, Qm, Km, rng.standard_normal((m, d)), np.eye(d), rng.standard_normal((n, d)))
            lplan = pm.loss_plan(Xm, Qm, Km, eps=eps, memory_budget=1e30)
            call = lambda: pm.approx_attention_loss_grad(*loss, eps=eps, memory_budget=1e30)  # noqa: E731
            call()
            measured = _peak(call)
            estimate = peak_bytes(lplan, "loss_grad")
            assert measured <= estimate <= 2 * measured, ("loss_grad", measured, estimate)


def test_guard_estimates_bound_measured_peaks():
    """The size guards of the allocating functions are upper bounds of what they allocate."""
    with time_limit():
        from attnlib.polymethod.features import poly_features_bytes

        rng = np.random.default_rng(8)
        Qm, Km = rng.standard_normal((300, 5)), rng.standard_normal((200, 5))
        coef = np.ones(7)
        measured = _peak(lambda: pm.poly_features(Qm, Km, coef, scale=0.5))
        assert measured <= poly_features_bytes(300, 200, 5, 6) <= 2 * measured
        clauses = hd.random_ksat(20, 400, 3, seed=0)
        measured = _peak(lambda: hd.sat_to_ov(clauses, 20))
        rows, larger = 2 * 2**10, 2**10
        assert measured <= rows * 400 + 16 * larger * 400 + 8 * rows + 16 * 400 <= 2 * measured
        for n_vars, n_clauses, k in [(500, 2000, 3), (10**6, 2000, 5), (40, 1000, 30)]:
            measured = _peak(lambda: hd.random_ksat(n_vars, n_clauses, k, seed=0))  # noqa: B023
            complement = n_clauses * n_vars if 2 * k > n_vars else 0  # the complement draw's table
            assert measured <= (104 + 88 * k) * n_clauses + complement <= 2 * measured
