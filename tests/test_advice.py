"""attnlib.advice: the cost model on hand-checked points, its consistency, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import attnlib as al
import attnlib.polymethod as pm
from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.advice import (
    BOOK_CPU_CORE,
    METHODS,
    CpuCore,
    advise,
    attention_step,
    decision_map,
    entry_bound,
    machine,
    method_boundaries,
    method_flops,
)
from attnlib.iomodel import roofline as rf


def test_tiny_entries_long_sequence_choose_polynomial():
    # R = B² = 0.0025: the constant polynomial has relative error ≈ R > 1e-3, the linear one
    # ≈ R²/2 ≈ 3e-6, so g = 1 and r = C(33, 32) = 33. Exact would need 3n² = 3.3e12 words.
    a = advise(2**20, 32, 0.05, 1e-3, 4096)
    assert a.method == "polynomial"
    assert (a.degree, a.rank) == (1, 33)
    assert not a.cost_of("exact").feasible and not a.cost_of("smallcache").feasible
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
    assert a.cost_of("exact").io == std.total
    assert min(x.cost for x in a.costs if x.feasible) == a.cost_of(a.method).cost


def test_free_data_movement_favours_the_fewest_flops():
    # With I/O priced at ~0, exact (12n²d) beats flash and smallcache (14n²d).
    a = advise(2048, 64, 3.0, 1e-3, 8192, flops_per_word=1e-9)
    assert a.method == "exact"


def test_polynomial_out_of_reach_in_double_precision():
    a = advise(1024, 16, 5.0, 1e-6, 4096)  # R = 25: the rounding floor u·e^50 ≫ 1e-6
    p = a.cost_of("polynomial")
    assert not p.feasible and "rounding floor" in p.note and a.degree is None


def test_method_flops_hand_values():
    assert method_flops("exact", 10, 4) == 12 * 100 * 4 + 700
    assert method_flops("flash", 10, 4) == method_flops("smallcache", 10, 4) == 14 * 400 + 900
    assert method_flops("polynomial", 10, 4, rank=15) == 8 * 10 * 15 * 16 + 16 * 600 + 900


def test_boundaries_agree_with_advise():
    changes = method_boundaries(32, 0.1, 1e-3, 4096, n_lo=64, n_hi=2**22)
    assert changes, "flash gives way to the polynomial method at tiny B"
    for n, before, after in changes:
        assert advise(n, 32, 0.1, 1e-3, 4096).method == after
        assert advise(n - 1, 32, 0.1, 1e-3, 4096).method == before
    assert changes[0][1:] == ("flash", "polynomial")


def test_decision_map_matches_advise():
    ns, Bs = [128, 4096, 2**18], [0.05, 2.0]
    grid = decision_map(ns, Bs, d=64, eps=1e-3, M=4096)
    assert grid.shape == (2, 3)
    for i, B in enumerate(Bs):
        for j, n in enumerate(ns):
            assert METHODS[grid[i, j]] == advise(n, 64, B, 1e-3, 4096).method


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


BAD_HELPER_INPUT = [
    (lambda: method_flops("fast", 10, 4), "method must be one of"),
    (lambda: method_flops("polynomial", 10, 4), "rank must be an integer"),
    (lambda: method_boundaries(32, 1.0, 1e-3, 4096, n_lo=64, n_hi=64), "n_hi must exceed n_lo=64"),
    (lambda: advise(64, 32, 1.0, 1e-3, 4096).cost_of("naive"), "method must be one of"),
]


@pytest.mark.parametrize("call,message", BAD_HELPER_INPUT)
def test_helpers_bad_input(call, message):
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


def test_attention_step_is_the_forward_and_backward_of_each_method(rng):
    Q, K = rng.uniform(-0.5, 0.5, (40, 4)), rng.uniform(-0.5, 0.5, (50, 4))
    V, dO = rng.normal(size=(50, 3)), rng.normal(size=(40, 3))
    O, grads = attention_step("exact", Q, K, V, dO)
    O_ref, lse = al.attention_forward(Q, K, V)
    assert np.array_equal(O, O_ref)
    for a, b in zip(grads, al.attention_backward(Q, K, V, O_ref, dO, lse), strict=True):
        assert np.array_equal(a, b)
    O_p, grads_p = attention_step("polynomial", Q, K, V, dO, 1e-4)
    assert np.array_equal(O_p, pm.approx_attention(Q, K, V, eps=1e-4))
    assert np.abs(O_p - O).max() <= pm.forward_error_bound(1e-4, np.abs(V).max())
    assert [g.shape for g in grads_p] == [(40, 4), (50, 4), (50, 3)]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda Q: entry_bound(Q, Q[:, :2]), "K must have d=4 columns like Q"),
        (lambda Q: entry_bound(Q, Q, scale=0.0), "scale must be a positive"),
        (lambda Q: entry_bound(Q.astype(int), Q), "Q must have a float32 or float64 dtype"),
        (lambda Q: attention_step("flash", Q, Q, Q, Q), "method must be one of"),
        (lambda Q: attention_step("exact", Q, Q, Q, Q, 0.0), r"eps must be a real number in"),
        (lambda Q: attention_step("polynomial", Q, Q, Q, Q[:2]), "dO must have shape"),
        (lambda Q: attention_step("exact", Q, Q, Q[:2], Q), "V must have m=5 rows like K"),
    ],
)
def test_entry_bound_and_attention_step_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call(np.ones((5, 4)))


def test_machine_of_a_gpu_preset_is_one_sm_its_balance_and_its_memory():
    for device in rf.GPUS:
        for dtype in ("bf16", "fp32"):
            kw = machine(device, dtype)
            word = rf.WORD_BYTES[dtype]
            assert kw["M"] == (device.smem_bytes + device.regs_bytes) // word
            assert kw["flops_per_word"] == device.peak(dtype) / (device.bandwidth / word)
            assert kw["slow_memory"] == device.memory_bytes // word
    h100 = machine(rf.H100_SXM5, "bf16")
    assert h100["M"] == (228 + 256) * 1024 // 2
    assert h100["flops_per_word"] == 989.4e12 / (3.35e12 / 2)
    assert h100["slow_memory"] == 80 * 2**30 // 2


def test_machine_of_the_book_cpu_core_is_its_l2_and_balance():
    kw = machine(BOOK_CPU_CORE, "fp64")
    assert kw == {"M": 2 * 2**20 // 8, "flops_per_word": 32.0, "slow_memory": 2**33}
    a = advise(4096, 64, 1.0, 1e-3, **kw)
    assert a.M == kw["M"] and a.flops_per_word == 32.0 and a.slow_memory == 2**33
    ns, Bs = [64, 2**20], [0.05, 2.0]
    assert decision_map(ns, Bs, d=32, eps=1e-3, **kw).shape == (2, 2)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: machine("H100", "bf16"), "device"),
        (lambda: machine(rf.H100_SXM5, "fp8"), "dtype"),
        (lambda: machine(BOOK_CPU_CORE, "fp32"), "dtype"),
        (
            lambda: machine(rf.Device("x", 1e9, None, 1e9, smem_bytes=1, regs_bytes=1), "fp32"),
            "memory_bytes",
        ),
        (lambda: machine(rf.Device("x", 1e9, None, 1e9, memory_bytes=8), "fp32"), "shared"),
        (lambda: machine(rf.H100_SXM5, "fp64"), "fp64"),
        (lambda: CpuCore("", 1, 1.0, 1), "name"),
        (lambda: CpuCore("x", 0, 1.0, 1), "cache_bytes"),
        (lambda: CpuCore("x", 1, -1.0, 1), "flops_per_word"),
        (lambda: CpuCore("x", 1, 1.0, 2.5), "memory_bytes"),
        (lambda: CpuCore("x", 1, 1.0, 1, source=3), "source"),
    ],
)
def test_machine_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call()


def test_counts_beyond_the_float_range_are_refused_naming_the_size():
    with pytest.raises(AttnInputError, match=r"n=~10\^400, d=64 overflows a float: n or d"):
        method_flops("exact", 10**400, 64)
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
    assert math.isnan(small.cost_of("exact").io) and small.cost_of("exact").flops > 0
    assert "0.000e+00" not in a.table() + small.table()


def test_machine_keywords_and_n_range_of_the_sweeps():
    with pytest.raises(AttnInputError, match="speed is not a machine keyword"):
        decision_map([64], [1.0], d=8, eps=1e-3, M=1024, speed=2)
    with pytest.raises(AttnInputError, match="speed is not a machine keyword"):
        method_boundaries(8, 1.0, 1e-3, 1024, speed=2)
    with pytest.raises(AttnInputError, match="n_hi must be an integer <= 4611686018427387904"):
        method_boundaries(8, 1.0, 1e-3, 1024, n_hi=10**400)
    with pytest.raises(AttnInputError, match="entry bound .* overflows a float"):
        entry_bound(np.ones((2, 4)), np.ones((3, 4)), scale=1e308)
