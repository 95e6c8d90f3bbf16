"""The schedules' shared bookkeeping (attnlib.iomodel.tiling): block ranges and sizes,
ceiling division and floor sums, the counts' arguments, the tiled product, and the step budget
that refuses a run before it starts."""

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel import tiling


@pytest.mark.parametrize("a, b", [(1, 1), (7, 2), (8, 2), (9, 10), (10**30 + 1, 10**15)])
def test_ceil_div_exact(a, b):
    q = tiling.ceil_div(a, b)
    assert (q - 1) * b < a <= q * b


@pytest.mark.parametrize("extent, size, start", [(10, 3, 0), (10, 10, 0), (7, 20, 0), (9, 2, 4)])
def test_block_ranges_cover_in_order(extent, size, start):
    ranges = tiling.block_ranges(extent, size, start=start)
    assert ranges[0][0] == start and ranges[-1][1] == extent
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert all(0 < tiling.span(r) <= size for r in ranges)
    if start == 0:
        assert tiling.block_sizes(extent, size).tolist() == [tiling.span(r) for r in ranges]


def test_count_args_defaults_and_given_blocks():
    assert tiling.count_args(10, 4, 200, None, None, None, io.flash_forward_blocks) == (
        10,
        4,
        200,
        10,
        4,
        *io.flash_forward_blocks(4, 200),
    )
    assert tiling.count_args(10, 4, 200, 3, 2, [2, 5], io.flash_forward_blocks)[-2:] == (2, 5)
    with pytest.raises(AttnInputError, match=r"blocks must be a pair"):
        tiling.count_args(10, 4, 200, None, None, (1, 2, 3), io.flash_forward_blocks)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("b", [1, 2, 3])
def test_tiled_product_computes_and_counts(transposed, b):
    rng = np.random.default_rng(b)
    A, B = rng.standard_normal((5, 7)), rng.standard_normal((7, 4))
    left = A.T.copy() if transposed else A
    mem = tiling.start_run(3 * b * b, False, np.float64, {"L": left, "B": B}, {"C": (5, 4)})
    rows, cols, inner = (tiling.block_ranges(x, b) for x in (5, 4, 7))
    tiling.tiled_product(mem, "C", "L", "B", rows, cols, inner, np.float64, transposed=transposed)
    C, count = tiling.finish_run(mem, ("C",), False)
    assert np.allclose(C, A @ B, atol=1e-12)
    # the tiled_matmul count: each output tile reads its strips of both factors once
    assert count == io.tiled_matmul_count(5, 7, 4, 3 * b * b, tile=b)


def test_floor_sum_equals_the_sum_it_stands_for():
    for count in range(0, 13):
        for divisor in range(1, 10):
            for a in range(0, 25):
                for b in range(0, 25):
                    want = sum((a * j + b) // divisor for j in range(count))
                    assert tiling.floor_sum(count, divisor, a, b) == want
    # huge arguments in Euclid's few steps, against the closed form for a = c:
    # Σ_{j<N} ⌊(c·j + b)/c⌋ = N(N − 1)/2 + N·⌊b/c⌋
    N = 10**400
    assert tiling.floor_sum(N, 7, 7, 12) == N * (N - 1) // 2 + N
    # a slope far above the divisor and a long sum, against brute force
    assert tiling.floor_sum(10**5, 97, 10**9 + 7, 3) == sum(
        ((10**9 + 7) * j + 3) // 97 for j in range(10**5)
    )


def test_block_sizes_of_a_block_longer_than_the_extent():
    assert tiling.block_sizes(5, 10**400).tolist() == [5]
    assert tiling.block_sizes(10**30, 10**400, dtype=object).tolist() == [10**30]
    with pytest.raises(AttnInputError, match="extent"):
        tiling.block_sizes(10**12, 1)
    with pytest.raises(AttnInputError, match="stop"):
        tiling.block_ranges(10**12, 1)


def test_the_step_budget_refuses_before_the_run():
    big = tiling.MAX_MACHINE_STEPS
    tiling.check_machine_steps(big, "f")  # exactly the budget runs
    with pytest.raises(AttnInputError, match="MAX_MACHINE_STEPS.*larger M"):
        tiling.check_machine_steps(big + 1, "f")
    Q = np.ones((1100, 2))
    # M = 11 gives 1×1 blocks: 1100² = 1.21·10⁶ tiles, over the budget
    with pytest.raises(AttnInputError, match="flash_forward would take 1210000 block steps"):
        io.flash_forward(Q, Q, Q, M=11)
    with pytest.raises(AttnInputError, match="smaller A and B"):
        io.naive_matmul(np.ones((1001, 1000)), np.ones((1000, 1)), M=1002)
