"""The decision maps of chapter 9 (attnlib.advice_maps): the sizes where the recommended method
changes and the grid of recommendations, each equal to what advise says at every point; the
machine keywords and the n range of the sweeps."""

from __future__ import annotations

import pytest

from attnlib import AttnInputError
from attnlib.advice import METHODS, advise
from attnlib.advice_maps import decision_map, method_boundaries


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


def test_machine_keywords_and_n_range_of_the_sweeps():
    with pytest.raises(AttnInputError, match="speed is not a machine keyword"):
        decision_map([64], [1.0], d=8, eps=1e-3, M=1024, speed=2)
    with pytest.raises(AttnInputError, match="speed is not a machine keyword"):
        method_boundaries(8, 1.0, 1e-3, 1024, speed=2)
    with pytest.raises(AttnInputError, match="n_hi must be an integer <= 4611686018427387904"):
        method_boundaries(8, 1.0, 1e-3, 1024, n_hi=10**400)
    with pytest.raises(AttnInputError, match="n_hi must exceed n_lo=64"):
        method_boundaries(32, 1.0, 1e-3, 4096, n_lo=64, n_hi=64)


def test_the_polynomial_island_is_where_its_factors_stop_fitting_in_fast_memory():
    """flash → polynomial → flash → polynomial along n: the polynomial's I/O jumps when the two
    n×r factors no longer fit in M (n = ⌊M/2r⌋ + 1), and FlashAttention leads again until its
    n² term catches up. An SM with the bfloat16 M and balance of an H100, if its arithmetic
    reached ε = 10⁻³, would show it at d = 32, B = 0.1 (degree 1, r = 33)."""
    from attnlib.machines import H100_SXM5, machine

    M = machine(H100_SXM5, "bfloat16")["M"]
    fpw = machine(H100_SXM5, "bfloat16")["flops_per_word"]
    changes = method_boundaries(32, 0.1, 1e-3, M, n_lo=64, n_hi=2**24, flops_per_word=fpw)
    assert [(a, b) for _, a, b in changes] == [
        ("flash", "polynomial"),
        ("polynomial", "flash"),
        ("flash", "polynomial"),
    ]
    assert changes[1][0] == M // (2 * 33) + 1
    after = advise(changes[1][0], 32, 0.1, 1e-3, M, flops_per_word=fpw)
    before = advise(changes[1][0] - 1, 32, 0.1, 1e-3, M, flops_per_word=fpw)
    assert before.cost_of("polynomial").io == 10 * (changes[1][0] - 1) * 32  # compulsory only
    assert after.cost_of("polynomial").io > 10 * before.cost_of("polynomial").io
    # the same SM in float32 (half the words of M, a lower balance): the jump comes earlier and
    # the polynomial method keeps its lead across it
    f32 = machine(H100_SXM5, "float32")
    changes = method_boundaries(32, 0.1, 1e-3, n_lo=64, n_hi=2**24, **f32)
    assert [(a, b) for _, a, b in changes] == [("flash", "polynomial")]
    assert changes[0][0] < f32["M"] // (2 * 33) + 1


def test_wherever_the_polynomial_wins_its_degree_is_low():
    """On Chapter 9's maps (its grid, d = 32, 64, 128, ε = 10⁻³): degree 0 (uniform weights: the
    mean of V, at B² < ε), mostly 1 (linear attention), at most 2 on the CPU core and at most 3
    (at the top of its region) on the float32 H100 SM."""
    import numpy as np

    from attnlib import polymethod as pm
    from attnlib.machines import book_machines

    ns = np.unique(np.geomspace(64, 2**24, 25).astype(int))
    Bs = np.geomspace(0.02, 32.0, 25)
    top = {}
    for name, mach in book_machines().items():
        counts = {}
        for d in (32, 64, 128):
            grid = decision_map(ns, Bs, d=d, eps=1e-3, **mach)
            for i, j in zip(*(grid == METHODS.index("polynomial")).nonzero(), strict=True):
                g = pm.least_degree(Bs[i] ** 2, 1e-3)
                assert advise(int(ns[j]), d, float(Bs[i]), 1e-3, **mach).degree == g
                counts[g] = counts.get(g, 0) + 1
        assert counts[1] > sum(counts.values()) / 2
        top[name] = max(counts)
    assert top == {"H100 SM, float32": 3, "CPU core, float64": 2}


def test_the_dtype_keyword_reaches_advise():
    grid = decision_map([2**20], [0.05], d=32, eps=1e-3, M=2**16, dtype="float32")
    assert METHODS[grid[0, 0]] == "polynomial"
    with pytest.raises(AttnInputError, match="no method reaches it in bfloat16"):
        decision_map([2**20], [0.05], d=32, eps=1e-3, M=2**16, dtype="bfloat16")
    with pytest.raises(AttnInputError, match="no method reaches it in bfloat16"):
        method_boundaries(32, 0.05, 1e-3, 2**16, dtype="bfloat16")
