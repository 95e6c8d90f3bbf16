"""The shared tunables (attnlib.config), each where the library uses it: the number of dQ
copies of the compiled backward pass, the logit-range grid, the memory limits, the cap on
timing repeats and the polynomial search's grids and margin. A value changed in config.py
alone, or a module that stopped reading it, fails here."""

import math

import numpy as np
import pytest

from attnlib import AttnInputError, config, costs, logits, measure
from attnlib._checks import check_memory
from attnlib.polymethod import approx, polyexp


def test_dq_groups_is_the_cap_on_the_backward_passs_copies_of_dQ():
    B_c = costs.block_sizes(64)[1]
    assert costs.dq_groups(10**6, 64) == config.DQ_GROUPS
    assert costs.dq_groups(B_c * config.DQ_GROUPS, 64) == config.DQ_GROUPS
    assert costs.dq_groups(B_c * (config.DQ_GROUPS - 1), 64) == config.DQ_GROUPS - 1
    # the outputs, the blocked transposes of K and V, DQ_GROUPS - 1 float32 copies of dQ
    # (n × d each) and D in float64
    n, m, d = 1000, 10**5, 64
    numbers = n * (d + 1) + n * d + 2 * m * 2 * d + (config.DQ_GROUPS - 1) * n * d
    assert costs.extra_memory_bytes(n, m, d) == 4 * numbers + 8 * n


@pytest.mark.parametrize("R", [1e-3, 0.7, 1.0, 3.3, 1e5])
def test_logit_ranges_are_rounded_up_to_the_grid_of_RANGE_STEPS_PER_OCTAVE(R):
    k = config.RANGE_STEPS_PER_OCTAVE
    up = logits.round_up_to_grid(R)
    assert R <= up < R * 2 ** (1 / k) * (1 + 1e-12)
    assert math.isclose(math.log2(up) * k, round(math.log2(up) * k), abs_tol=1e-9)


def test_the_polynomial_methods_default_budget_is_MEMORY_BUDGET_BYTES():
    Q = np.random.default_rng(0).standard_normal((64, 8))
    plan = approx.approx_plan(Q, Q, eps=1e-6, memory_budget=10**15)
    assert plan.bytes_needed > config.MEMORY_BUDGET_BYTES, "the case must exceed the default"
    budget = rf"{config.MEMORY_BUDGET_BYTES / 2**20:.1f} MiB"
    with pytest.raises(AttnInputError, match=budget):
        approx.approx_plan(Q, Q, eps=1e-6)
    with pytest.raises(AttnInputError, match=budget):
        approx.approx_attention(Q, Q, Q, eps=1e-6)
    assert approx.approx_plan(Q, Q, eps=1e-6, memory_budget=plan.bytes_needed) == plan


def test_MAX_ALLOCATION_BYTES_is_the_limit_of_every_check_of_memory():
    assert check_memory("the table", config.MAX_ALLOCATION_BYTES) == config.MAX_ALLOCATION_BYTES
    with pytest.raises(AttnInputError, match="the table"):
        check_memory("the table", config.MAX_ALLOCATION_BYTES + 1)


def test_MAX_REPEATS_caps_the_timing_counts():
    with pytest.raises(AttnInputError, match="min_repeats"):
        measure.median_time(lambda: None, min_repeats=config.MAX_REPEATS + 1)
    with pytest.raises(AttnInputError, match="rounds"):
        measure.round_robin_times({"f": (lambda: None, ())}, rounds=config.MAX_REPEATS + 1)


def test_the_degree_search_grids_and_margin():
    assert config.CHECK_POINTS % 2 == 1, "0 must be a grid point of the check"
    assert config.SEARCH_POINTS < config.CHECK_POINTS
    assert 0 < config.DEGREE_MARGIN < 1
    R, eps = 1.0, 1e-6
    p = polyexp.exp_poly(R, eps)
    assert polyexp.max_relative_error(p, R) <= eps * (1 - config.DEGREE_MARGIN)
    below = polyexp.exp_poly_of_degree(R, p.degree() - 1)
    assert polyexp.max_relative_error(below, R) > eps * (1 - config.DEGREE_MARGIN)
