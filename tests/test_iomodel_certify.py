"""The attack on the certified bounds (attnlib.iomodel.certify): every certified
``*_lower_bound`` lies at or below every counted schedule and every exact optimum.

A count below its bound means a proof or an implementation is wrong, so the checks are exact
(int counts against int bounds, ratios as Fractions). They run on hypothesis' draws of sizes,
cache sizes and masks, on an exhaustive grid of small sizes, on the library's default grid and
on the small graphs the exact solver finishes. The same machinery refutes bounds that are
false: the worst-case sparse formula on a band mask, and twice the forward bound.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import iomodel as io


def _assert_holds(worst: dict) -> None:
    for name, w in worst.items():
        assert not w.failures and w.ratio >= 1, (name, w.ratio, w.point, w.count, w.bound)


# ---- the default grid and the exact optima -------------------------------------------------


def test_every_schedule_family_holds_on_the_default_grid():
    worst = io.attack_bounds(optima=False)
    _assert_holds(worst)
    names = set(worst)
    for kind in io.certify.MASK_KINDS:
        assert {
            f"flash_forward block-sparse {kind}",
            f"flash_backward block-sparse {kind}",
        } <= names
    for family in (
        "smallcache_backward",
        "standard_forward",
        "decode_count 8/2",
        "flash_backward gqa 4/1",
    ):
        assert family in names and worst[family].cases > 20
    # the grid reaches M below d², at d² and far above it, d_v != d and n != m
    sizes = io.default_sizes()
    assert {M < d * d for _, _, d, _, M in sizes} == {True, False}
    assert any(M == d * d for _, _, d, _, M in sizes) and any(
        M >= 64 * d * d for *_, d, _, M in sizes
    )
    assert any(dv != d for _, _, d, dv, _ in sizes) and any(m != n for n, m, *_ in sizes)


@pytest.fixture(scope="module")
def optima():
    return io.worst_ratios(io.optimum_families(extra_M=2))


def test_every_exact_optimum_is_above_its_bound(optima):
    _assert_holds(optima)
    assert any(name.startswith("optimal_io attention_forward_graph") for name in optima)
    assert sum(w.cases for w in optima.values()) >= 40


def test_the_graph_sizes_match_the_bounds():
    """The bound of a graph counts the graph's inputs and outputs: with M past the whole graph
    the optimum is its trivial_io_bound, and the certified bound equals it."""
    for G, bound in [
        (io.matmul_graph(2, 3, 2), io.matmul_lower_bound(2, 3, 2, 10**6)),
        (io.inner_product_graph(5), io.matmul_lower_bound(1, 5, 1, 10**6)),
        (io.attention_forward_graph(2, 3, 2), io.forward_lower_bound(2, 2, 10**6, m=3)),
    ]:
        assert io.trivial_io_bound(G) == bound


# ---- hypothesis and an exhaustive small grid ------------------------------------------------


def _drawn_mask_families(n, m, d, d_v, M, mask):
    """Block-sparse FlashAttention forward and backward on a drawn element mask."""
    families = []
    for name, count, rule, bound in [
        ("forward", io.flash_forward_count, io.flash_forward_blocks, io.forward_lower_bound),
        ("backward", io.flash_backward_count, io.flash_backward_blocks, io.backward_lower_bound),
    ]:

        def run(count=count, rule=rule):
            blocks = rule(d, M, d_v=d_v)
            kept = io.flash_block_mask(mask, blocks)
            return count(n, d, M, m=m, d_v=d_v, blocks=blocks, block_mask=kept).total

        families.append(
            io.Family(
                f"drawn mask {name}",
                run,
                lambda bound=bound: bound(n, d, M, m=m, d_v=d_v, mask=mask),
                ({},),
            )
        )
    return families


@settings(max_examples=300)
@given(
    n=st.integers(1, 80),
    m=st.integers(1, 80),
    d=st.integers(1, 24),
    d_v=st.integers(1, 24),
    M=st.integers(1, 3000),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_no_drawn_point_refutes_a_bound(n, m, d, d_v, M, density, seed):
    mask = np.random.default_rng(seed).random((n, m)) < density
    families = io.schedule_families([(n, m, d, d_v, M)], seed=seed)
    _assert_holds(io.worst_ratios(families + _drawn_mask_families(n, m, d, d_v, M, mask)))


def test_no_point_of_a_small_grid_refutes_a_bound():
    sizes = [
        (n, m, d, d_v, M)
        for n, m in itertools.product((1, 2, 3, 5, 8), repeat=2)
        for d, d_v in ((1, 1), (2, 3), (3, 1))
        for M in (1, 4, 12, 40, 200)
    ]
    worst = io.worst_ratios(io.schedule_families(sizes))
    _assert_holds(worst)
    assert worst["flash_forward"].cases > 100  # the schedules run at most of these points


def test_optima_of_inner_products_at_every_cache():
    """⟨a, b⟩ of length k, from the fewest pebbles (3) up: Q(G, M) >= matmul_lower_bound."""
    for k in (1, 2, 3, 5):
        G = io.inner_product_graph(k)
        for M in range(3, 2 * k + 3):
            assert io.optimal_io(G, M).io >= io.matmul_lower_bound(1, k, 1, M)


# ---- the machinery refutes false bounds ----------------------------------------------------


def test_the_worst_case_sparse_formula_is_refuted_on_a_band_mask():
    """min(Z_in²/M, Z_in·√Z_QK/√M) with Z_in = nd, taken as a bound, lies above block-sparse
    FlashAttention's count on a band of half-width 1 (n = 2048, d = 4, the smallest cache):
    the attack reports it; the certified bound of the same mask holds."""
    n, d = 2048, 4
    M = io.flash_forward_min_M(d)
    point = {"n": n, "m": n, "d": d, "d_v": d, "M": M, "mask": ("band", 1)}
    family = next(
        f
        for f in io.schedule_families([(8, 8, d, d, M)])
        if f.name == "flash_forward block-sparse band"
    )
    band = io.element_mask("band", n, n, 1)

    def formula(**p):
        return math.ceil(io.sparse_worst_case_order(n * d, int(band.sum()), M))

    false = family._replace(name="worst-case formula", bound=formula, points=(point,))
    true = family._replace(points=(point,))
    worst = io.worst_ratios([false, true])
    assert worst["worst-case formula"].failures == (point,)
    assert worst["worst-case formula"].ratio < Fraction(1, 2)
    _assert_holds({"certified": worst[family.name]})


def test_twice_the_forward_bound_is_refuted():
    families = io.schedule_families([(64, 64, 8, 8, 4096), (256, 256, 16, 16, 64 * 256)])
    doubled = [
        f._replace(name=f"2 × {f.name}", bound=lambda f=f, **p: 2 * f.bound(**p))
        for f in families
        if f.name == "flash_forward"
    ]
    worst = io.worst_ratios(doubled)
    assert worst["2 × flash_forward"].failures and worst["2 × flash_forward"].ratio < 1
    # and on an exact optimum: twice the matmul bound of a 2×2 by 2×2 product
    G = io.matmul_graph(2, 2, 2)
    assert io.optimal_io(G, 12).io < 2 * io.matmul_lower_bound(2, 2, 2, 12)


def test_a_count_below_its_bound_is_reported_where_it_occurs():
    family = io.Family("made up", lambda x: 10 - x, lambda x: 5, ({"x": 1}, {"x": 7}, {"x": 3}))
    worst = io.worst_ratios([family])["made up"]
    assert worst.failures == ({"x": 7},)
    assert (worst.ratio, worst.point, worst.count, worst.bound, worst.cases) == (
        Fraction(3, 5),
        {"x": 7},
        3,
        5,
        3,
    )
