"""The split of the rows among devices and the causal work it gives each (attnlib.iomodel.shards).

The closed forms of the causal work are held to a direct count of the kept scores (the causal
mask summed over each device's rows) for every P from 1 to 8 and several n, every layout; the
layouts to their definitions; and the imbalance of each layout to its exact value.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.iomodel import LAYOUTS, causal_work, kept_pairs, shard_rows
from attnlib.iomodel import shards as sh


def _splits():
    """(n, P, layout) for every P in 1..8, n = 2P·k for k = 1, 2, 3 (zigzag needs 2P | n) and,
    for the other layouts, odd multiples n = P·(2k + 1) too."""
    for P in range(1, 9):
        for k in (1, 2, 3):
            for layout in LAYOUTS:
                yield 2 * P * k, P, layout
                if layout != "zigzag":
                    yield P * (2 * k + 1), P, layout


SPLITS = list(_splits())


@pytest.mark.parametrize(("n", "P", "layout"), SPLITS)
def test_shard_rows_partition_the_rows(n, P, layout):
    rows = shard_rows(n, P, layout)
    b = n // P
    assert len(rows) == P
    for r in rows:
        assert r.dtype == np.int64 and r.shape == (b,) and np.all(np.diff(r) > 0)
    assert np.array_equal(np.sort(np.concatenate(rows)), np.arange(n))


def test_layouts_are_as_defined():
    n, P = 24, 3
    b, c = 8, 4
    for p, r in enumerate(shard_rows(n, P)):
        assert r.tolist() == list(range(p * b, (p + 1) * b))
    for p, r in enumerate(shard_rows(n, P, "striped")):
        assert all(i % P == p for i in r)
    for p, r in enumerate(shard_rows(n, P, "zigzag")):
        chunks = {i // c for i in r}
        assert chunks == {p, 2 * P - 1 - p}


@pytest.mark.parametrize(("n", "P", "layout"), SPLITS)
def test_causal_work_is_the_kept_scores_counted(n, P, layout):
    mask = np.tri(n, n, dtype=bool)
    direct = [int(mask[r].sum()) for r in shard_rows(n, P, layout)]
    assert causal_work(n, P, layout).tolist() == direct
    assert causal_work(n, P, layout, H=3).tolist() == [3 * w for w in direct]


def test_balance_of_each_layout():
    for P in range(1, 9):
        for b in (2, 4, 6, 10):
            n = P * b
            zig = causal_work(n, P, "zigzag")
            assert np.all(zig == zig[0])  # exactly balanced
            striped = causal_work(n, P, "striped")
            assert striped.max() - striped.min() == (P - 1) * b  # one more row's worth per p
            # contiguous: the last device's ((2P-1)b² + b)/2 against the mean b(n+1)/2
            cont = causal_work(n, P)
            ratio = Fraction(int(cont.max()) * P, int(cont.sum()))
            assert ratio == Fraction((2 * P - 1) * b + 1, P * b + 1)
            # the limit as b grows, never reached (one device: no imbalance at all)
            assert ratio < Fraction(2 * P - 1, P) or P == ratio == 1


def test_kept_pairs_counts_any_two_index_sets():
    rng = np.random.default_rng(1)
    mask = np.tri(40, 40, dtype=bool)
    for _ in range(20):
        rows = rng.permutation(40)[: rng.integers(1, 40)]
        cols = rng.permutation(40)[: rng.integers(1, 40)]
        assert kept_pairs(rows, cols) == int(mask[np.ix_(rows, cols)].sum())
    assert kept_pairs(np.array([0]), np.array([1])) == 0
    assert kept_pairs(np.array([5]), np.array([5])) == 1  # the diagonal is kept
    assert kept_pairs(np.array([], dtype=int), np.array([1])) == 0


def test_refusals():
    with pytest.raises(AttnInputError, match="P = 3 devices must divide the n = 8 rows"):
        shard_rows(8, 3)
    with pytest.raises(AttnInputError, match="into 2P = 8 chunks: 2P must divide n"):
        shard_rows(12, 4, "zigzag")
    with pytest.raises(AttnInputError, match="layout must be one of"):
        shard_rows(8, 2, "ring")
    with pytest.raises(AttnInputError, match="H must be"):
        causal_work(8, 2, H=0)
    with pytest.raises(AttnInputError, match="rows must be a 1-D integer array"):
        kept_pairs(np.array([0.5]), np.array([1]))
    with pytest.raises(AttnInputError, match="H = 3 query heads must be a multiple of H_kv"):
        sh.check_sizes(8, 2, P=2, H=3, H_kv=2)
    with pytest.raises(AttnInputError, match="K must have the n = 4 rows"):
        sh.check_pass(
            np.ones((4, 2)), np.ones((6, 2)), np.ones((6, 2)), **PASS_KW,
        )  # fmt: skip


PASS_KW = dict(
    P=2, layout="contiguous", scale=None, is_causal=False, enable_gqa=False, who="a run",
    steps=lambda s: 1, scores=lambda s: 1,
)  # fmt: skip


def test_check_pass_refuses_overflow_long_runs_and_memory():
    x = np.ones((4, 2))
    with pytest.raises(AttnInputError, match="Q"):  # logits of 1e200² overflow float64
        sh.check_pass(x * 1e200, x * 1e200, x, **PASS_KW)
    with pytest.raises(AttnInputError, match="a run would take .* block steps"):
        sh.check_pass(x, x, x, **PASS_KW | {"steps": lambda s: 10**7})
    with pytest.raises(AttnInputError, match="a run on 2 devices would need"):
        sh.check_pass(x, x, x, **PASS_KW | {"scores": lambda s: 10**12})
    # what the schedules see: sizes, scale and the split, heads first
    ps = sh.check_pass(x, x, x[:, :1], **PASS_KW)
    assert ps.sizes.b == 2 and ps.sizes.d_v == 1 and ps.one_head and ps.Q.shape == (1, 4, 2)
    assert [r.tolist() for r in ps.rows] == [[0, 1], [2, 3]]
