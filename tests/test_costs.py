"""The compiled kernels' costs (attnlib.costs): tile sizes, groups of key blocks, extra memory
against tracemalloc's peak, the flops of each algorithm, and the timing probes' contract."""

from __future__ import annotations

import ast
import inspect
import math

import numba
import numpy as np
import pytest
from helpers import random_qkv

import attnlib as al
from attnlib import AttnInputError, costs, measure
from attnlib.config import DQ_GROUPS


def test_block_sizes_bound_the_tile_products():
    for d, dv in [(1, 1), (3, 5), (32, 32), (64, 64), (128, 128), (100, 17), (512, 512)]:
        br, bc = costs.block_sizes(d, dv)
        assert br * bc * max(d, dv) <= costs.TILE_MULADDS
        assert 16 <= br <= 256 and 16 <= bc <= 256
    assert costs.block_sizes(64, 64) == costs.block_sizes(64) == (256, 256)
    assert costs.block_sizes(64, 512) == costs.block_sizes(512) == (128, 128)


def test_dq_groups_and_the_extra_memory_formula(rng):
    """G = min(DQ_GROUPS, key blocks), and the proposition's arrays bound what flash_forward
    and flash_backward allocate through numpy (tracemalloc sees no per-thread scratch)."""
    bc = costs.block_sizes(16)[1]
    assert [costs.dq_groups(m, 16) for m in (1, bc, bc + 1, 3 * bc, 100 * bc)] == [
        1,
        1,
        2,
        3,
        DQ_GROUPS,
    ]
    # the slack: numba's allocation headers, and the float64 blocks of the overflow check
    # (1 MiB at most)
    threads = numba.get_num_threads()
    for n, m, d, dv in [(4096, 3000, 32, 16), (4096, 40, 32, 32)]:
        Q, K, V = random_qkv(rng, n, m, d, dv, dtype=np.float32)
        dO = rng.standard_normal((n, dv)).astype(np.float32)
        al.forward_backward(Q, K, V, dO)  # compiles outside the measurement
        peak = measure.traced_peak_bytes(al.forward_backward, Q, K, V, dO)
        formula = costs.extra_memory_bytes(n, m, d, dv, threads=threads)
        assert costs.extra_memory_bytes(n, m, d, dv) <= peak <= 1.1 * formula + 2**20
    assert costs.extra_memory_bytes(10, 10, 2, dtype="float64") == 8 * (10 * 3 + 20 + 80) + 80


def test_flop_count_of_each_algorithm():
    n, m, d = 1000, 700, 64
    standard = costs.flop_count(n, m, d, kernels="standard")
    assert standard == {"forward": 4 * n * m * d, "backward": 10 * n * m * d}  # 2 and 5 products
    flash = costs.flop_count(n, m, d)
    assert flash == costs.flop_count(n, m, d, d, kernels="flash")
    assert flash["backward"] == standard["backward"]  # the same five products, tile by tile
    assert flash["forward"] - standard["forward"] == 2 * n * m  # the row sums by gemv
    assert costs.flop_count(n, m, d, 16)["backward"] == 2 * n * m * (3 * d + 2 * 16)
    assert costs.flop_count(n, m, d, d_v=16)["forward"] == 2 * n * m * (d + 16 + 1)
    for bad, message in [
        (dict(n=0), r"n must be an integer >= 1"),
        (dict(d_v=0), r"d_v must be an integer >= 1"),
        (dict(kernels="exact"), r"kernels must be one of \('standard', 'flash'\)"),
        (dict(kernels="tiled"), r"kernels must be one of \('standard', 'flash'\)"),
    ]:
        with pytest.raises(AttnInputError, match=message):
            costs.flop_count(**{"n": 4, "m": 4, "d": 2, **bad})


def test_timing_probes_return_rates_and_seconds():
    tile_rate, large_rate = costs.gemm_rates(8, 32, repeats=10)
    assert tile_rate > 0 and large_rate > 0 and math.isfinite(tile_rate + large_rate)
    per_element = costs.exp_seconds(64, repeats=5)
    assert set(per_element) == {"attnlib", "numpy", "libm"}
    assert all(0 < t < 1e-3 for t in per_element.values())
    for call, message in [
        (lambda: costs.gemm_rates(0), r"tile must be an integer >= 1"),
        (lambda: costs.gemm_rates(dtype="float16"), r"dtype must be 'float32' or 'float64'"),
        (lambda: costs.exp_seconds(repeats=0), r"repeats must be an integer >= 1"),
    ]:
        with pytest.raises(AttnInputError, match=message):
            call()


def test_sizes_name_the_value_width_d_v():
    assert costs.block_sizes(64, d_v=512) == costs.block_sizes(512)
    for call in (
        lambda: costs.block_sizes(4, "8"),
        lambda: costs.dq_groups(8, 4, 0),
        lambda: costs.extra_memory_bytes(4, 4, 4, 1.5),
    ):
        with pytest.raises(AttnInputError, match=r"^d_v must be an integer >= 1"):
            call()


def test_every_public_name_is_in_all():
    """What the module defines without a leading underscore, functions and constants, is
    exactly its ``__all__``."""
    tree = ast.parse(inspect.getsource(costs))
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    defined |= {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert {name for name in defined if not name.startswith("_")} == set(costs.__all__)
    assert all(callable(getattr(costs, name)) or name.isupper() for name in costs.__all__)
