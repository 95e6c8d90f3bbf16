"""attnlib.advice: the cost model on hand-checked points, its consistency, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.advice import METHODS, advise, entry_bound, method_flops


def test_tiny_entries_long_sequence_choose_polynomial():
    # R = B² = 0.0025: the constant polynomial has relative error ≈ R > 1e-3, the linear one
    # ≈ R²/2 ≈ 3e-6, so g = 1 and r = C(33, 32) = 33. Standard would need 3n² = 3.3e12 words.
    a = advise(2**20, 32, 0.05, 1e-3, 4096)
    assert a.method == "polynomial"
    assert (a.degree, a.rank) == (1, 33)
    assert not a.cost_of("standard").feasible and not a.cost_of("smallcache").feasible
    assert a.cost_of("flash").feasible and a.margin > 100
    n, d, r = 2**20, 32, 33
    assert a.cost_of("polynomial").flops == 8 * n * r * d * d + 16 * n * r * d + 6 * n * r


def test_cache_versus_head_size_decides_flash_or_small_cache():
    # M = 4096 words: d = 32 has M = 4d² (large cache), d = 128 has M = d²/4 (small cache).
    big = advise(4096, 32, 2.0, 1e-3, 4096)
    small = advise(4096, 128, 2.0, 1e-3, 4096)
    assert big.method == "flash" and small.method == "smallcache"
    # B = 2 needs degree 11: rank C(43, 32) ≈ 5.8e9, far beyond any memory.
    assert big.degree == 11 and big.rank == math.comb(43, 32)
    assert not big.cost_of("polynomial").feasible


def test_costs_are_flops_plus_balance_times_counted_io():
    n, d, M = 1000, 64, 20000
    a = advise(n, d, 1.0, 1e-2, M, flops_per_word=10.0)
    flash = io.flash_forward_count(n, d, M) + io.flash_backward_count(n, d, M)
    c = a.cost_of("flash")
    assert c.io == flash.total
    assert c.flops == 14 * n * n * d + 9 * n * n
    assert c.cost == c.flops + 10.0 * c.io
    std = io.standard_forward_count(n, d, M) + io.standard_backward_count(n, d, M)
    assert a.cost_of("standard").io == std.total
    assert min(x.cost for x in a.costs if x.feasible) == a.cost_of(a.method).cost


def test_free_data_movement_favours_the_fewest_flops():
    # With I/O priced at ~0, standard (12n²d) beats flash and smallcache (14n²d).
    a = advise(2048, 64, 3.0, 1e-3, 8192, flops_per_word=1e-9)
    assert a.method == "standard"


def test_polynomial_out_of_reach_in_double_precision():
    a = advise(1024, 16, 5.0, 1e-6, 4096)  # R = 25: the rounding floor u·e^50 ≫ 1e-6
    p = a.cost_of("polynomial")
    assert not p.feasible and "rounding floor" in p.note and a.degree is None


def test_methods_are_the_algorithm_names():
    """The word exact means "not approximate", never one algorithm: the materialising one is
    "standard", as in attnlib.forward_backward's kernels and the iomodel schedules."""
    assert METHODS == ("standard", "flash", "smallcache", "polynomial")
    with pytest.raises(AttnInputError, match="method must be one of"):
        method_flops("exact", 10, 4)
    with pytest.raises(AttnInputError, match="method must be one of"):
        advise(64, 8, 1.0, 1e-3, 1024).cost_of("exact")


def test_method_flops_hand_values():
    assert method_flops("standard", 10, 4) == 12 * 100 * 4 + 700
    assert method_flops("flash", 10, 4) == method_flops("smallcache", 10, 4) == 14 * 400 + 900
    assert method_flops("polynomial", 10, 4, rank=15) == 8 * 10 * 15 * 16 + 16 * 600 + 900


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((0, 32, 1.0, 1e-3, 4096), {}, "n must be an integer >= 1"),
        ((64, 32.5, 1.0, 1e-3, 4096), {}, "d must be an integer"),
        ((64, 32, 0.0, 1e-3, 4096), {}, "B must be a positive finite real"),
        ((64, 32, float("nan"), 1e-3, 4096), {}, "B must be a positive finite real"),
        ((64, 32, 1.0, 1.0, 4096), {}, r"eps must be a real number in \(0, 1\)"),
        ((64, 32, 1.0, 1e-3, 0), {}, "M must be an integer >= 1"),
        ((64, 32, 1.0, 1e-3, 4096), {"flops_per_word": -1}, "flops_per_word must be a posi"),
        ((64, 32, 1.0, 1e-3, 4096), {"slow_memory": 0}, "slow_memory must be an integer"),
        ((64, 32, 3.0, 1e-3, 10), {"slow_memory": 1}, "no method is feasible at n=64"),
    ],
)
def test_advise_bad_input(args, kwargs, match):
    with pytest.raises(AttnInputError, match=match):
        advise(*args, **kwargs)


BAD_COST_INPUT = [
    (lambda: method_flops("fast", 10, 4), "method must be one of"),
    (lambda: method_flops("polynomial", 10, 4), "rank must be an integer"),
    (lambda: advise(64, 32, 1.0, 1e-3, 4096).cost_of("naive"), "method must be one of"),
]


@pytest.mark.parametrize("call,message", BAD_COST_INPUT)
def test_method_costs_bad_input(call, message):
    with pytest.raises(AttnInputError, match=message):
        call()


def test_entry_bound_folds_the_scale_so_that_every_logit_is_within_b_squared(rng):
    Q, K = rng.normal(size=(20, 16)), rng.normal(size=(30, 16))
    B = entry_bound(Q, K)
    assert B == 16**0.25 * max(np.abs(Q).max(), np.abs(K).max())
    assert np.abs(Q @ K.T / 4.0).max() <= B**2
    # any scale: logits scale·QKᵀ lie in [−B², B²]; at AS24's own scale 1/d, B = max(|Q|, |K|)
    assert np.abs(0.7 * Q @ K.T).max() <= entry_bound(Q, K, scale=0.7) ** 2
    assert entry_bound(Q, K, scale=1 / 16) == max(np.abs(Q).max(), np.abs(K).max())
    # attained when a query and a key are equal with all entries at the maximum
    c = np.full((1, 16), 0.5)
    assert math.isclose((c @ c.T / 4.0).item(), entry_bound(c, c) ** 2)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda Q: entry_bound(Q, Q[:, :2]), "K must have d=4 columns like Q"),
        (lambda Q: entry_bound(Q, Q, scale=0.0), "scale must be a positive"),
        (lambda Q: entry_bound(Q.astype(int), Q), "Q must have a float32 or float64 dtype"),
    ],
)
def test_entry_bound_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call(np.ones((5, 4)))


def test_counts_beyond_the_float_range_are_refused_naming_the_size():
    with pytest.raises(AttnInputError, match=r"n=~10\^400, d=64 overflows a float: n or d"):
        method_flops("standard", 10**400, 64)
    with pytest.raises(AttnInputError, match="n or d is too large"):
        method_flops("flash", 10**160, 1)  # a float inf, not an OverflowError
    with pytest.raises(AttnInputError, match="n, d or rank is too large"):
        method_flops("polynomial", 2**40, 2**20, rank=10**300)
    with pytest.raises(AttnInputError, match="n or d is too large"):
        advise(10**400, 64, 1.0, 1e-3, 4096)


def test_entries_whose_square_underflows_have_degree_zero():
    a = advise(4096, 64, 1e-200, 1e-3, 2**16)  # B² = 1e-400 is below every float
    assert a.degree == 0 and a.rank == 1 and a.R > 0


def test_numbers_the_model_cannot_give_are_nan_not_zero():
    a = advise(4096, 64, 3.5, 1e-6, 2**16)  # R = 12.25: no polynomial at 1e-6
    poly = a.cost_of("polynomial")
    assert not poly.feasible and math.isnan(poly.flops) and math.isnan(poly.io)
    small = advise(2**20, 2**20, 0.1, 1e-3, 2**16, slow_memory=2**200)  # d too wide for M
    assert math.isnan(small.cost_of("standard").io) and small.cost_of("standard").flops > 0
    assert "0.000e+00" not in a.table() + small.table()


def test_an_entry_bound_beyond_the_float_range_is_refused():
    with pytest.raises(AttnInputError, match="entry bound .* overflows a float"):
        entry_bound(np.ones((2, 4)), np.ones((3, 4)), scale=1e308)


# ---- one precision: every method priced and judged in the machine's dtype ----


def test_bfloat16_reaches_eps_1e3_with_no_method_and_is_refused():
    """bfloat16's unit roundoff is 2⁻⁸: the exact methods' results carry 3.9e-3 and the
    polynomial's floor u·e^{2R} is higher still, so ε = 10⁻³ is out of reach at every B. The
    H100 SM's bfloat16 machine used to be judged by the float64 floor and picked the
    polynomial method here."""
    from attnlib.machines import H100_SXM5, machine

    h100 = machine(H100_SXM5, "bfloat16")
    for B in (1e-6, 0.05, 0.1, 0.3, 1.0):
        with pytest.raises(AttnInputError, match="eps=0.001: no method reaches it in bfloat16"):
            advise(2**20, 32, B, 1e-3, **h100)
    # the same point priced in float32, where ε = 10⁻³ is within reach of every method
    a = advise(2**20, 32, 0.05, 1e-3, **machine(H100_SXM5, "float32"))
    assert a.method == "polynomial" and a.dtype == "float32"
    assert all(c.feasible for c in a.costs if c.method in ("flash", "polynomial"))


def test_a_dtype_limits_every_method_to_the_eps_it_can_reach():
    # bfloat16 at ε = 0.05 ≥ 10u: the exact methods reach it; the polynomial only while
    # 10·u·e^{2R} ≤ ε, that is R ≤ ln(0.05·2⁸/10)/2 ≈ 0.12
    low = advise(2**20, 32, 0.3, 0.05, 2**16, dtype="bfloat16")  # R = 0.09
    high = advise(2**20, 32, 0.4, 0.05, 2**16, dtype="bfloat16")  # R = 0.16
    assert low.cost_of("polynomial").feasible and low.method == "polynomial"
    assert not high.cost_of("polynomial").feasible and high.degree is None
    assert "no polynomial in bfloat16" in high.cost_of("polynomial").note
    assert high.method == "flash"
    # in float64 the same R = 0.16 has a polynomial
    assert advise(2**20, 32, 0.4, 0.05, 2**16).cost_of("polynomial").feasible
    # float32 (u = 2⁻²⁴): the exact methods stop at 10u ≈ 6e-7, the polynomial above it
    f32 = advise(4096, 64, 1.0, 1e-6, 2**16, dtype="float32")
    assert f32.method == "flash" and not f32.cost_of("polynomial").feasible
    with pytest.raises(AttnInputError, match="no method reaches it in float32"):
        advise(4096, 64, 1.0, 1e-7, 2**16, dtype="float32")
    assert advise(4096, 64, 1.0, 1e-7, 2**16).method == "flash"  # float64 reaches it


def test_the_winner_always_reaches_eps_in_its_dtype():
    """Over a grid of precisions, accuracies and entry bounds: whatever advise recommends has
    a rounding floor 10 times below ε in the dtype it was priced in, or advise refuses."""
    from attnlib.advice import UNIT_ROUNDOFF

    for dtype, u in UNIT_ROUNDOFF.items():
        for eps in (1e-1, 5e-2, 1e-2, 1e-3, 1e-6, 1e-9):
            for B in (0.01, 0.1, 0.3, 1.0, 2.0):
                try:
                    a = advise(2**16, 32, B, eps, 2**16, dtype=dtype)
                except AttnInputError as exc:
                    assert "no method reaches it" in str(exc) and 10 * u > eps
                    continue
                floor = u * math.exp(2 * B * B) if a.method == "polynomial" else u
                assert 10 * floor <= eps, (dtype, eps, B, a.method)
                assert a.dtype == dtype and dtype in str(a)


def test_dtype_is_refused_unless_a_known_precision():
    with pytest.raises(AttnInputError, match="dtype must be one of"):
        advise(64, 32, 1.0, 1e-3, 4096, dtype="float16")
