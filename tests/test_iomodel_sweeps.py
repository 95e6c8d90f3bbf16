"""The sweeps, tables and logs the chapters of Part I compute: cache-size grids, the
small-cache crossover and advantage, ratios to the bounds, block-sparse sweeps and the words of
a run per array."""

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel.sweeps import block_cover


def test_cache_sizes_all_or_geometric():
    assert io.cache_sizes(5, 9).tolist() == [5, 6, 7, 8, 9]
    Ms = io.cache_sizes(10, 10**6, points=50)
    assert Ms[0] == 10 and Ms[-1] == 10**6 and np.all(np.diff(Ms) > 0) and len(Ms) <= 50
    with pytest.raises(AttnInputError, match="hi must be an integer >= 9"):
        io.cache_sizes(9, 8)


@pytest.mark.parametrize("n, d", [(256, 8), (1024, 16), (512, 32)])
def test_smallcache_crossover_is_the_first_winning_M_near_the_grid(n, d):
    sweep = io.smallcache_crossover(n, d)
    M = sweep.M
    flash = io.flash_backward_count(n, d, M).total
    small = io.smallcache_backward_count(n, d, M).total
    assert flash <= small
    assert (
        io.flash_backward_count(n, d, M - 1).total > io.smallcache_backward_count(n, d, M - 1).total
    )
    # the sweep's arrays are the closed forms on its grid
    k = len(sweep.Ms) // 2
    assert sweep.flash[k] == io.flash_backward_count(n, d, int(sweep.Ms[k])).total
    assert sweep.small[k] == io.smallcache_backward_count(n, d, int(sweep.Ms[k])).total
    assert d * d / 2 <= M <= 4 * d * d


def test_smallcache_crossover_none_when_the_range_has_no_win():
    d = 16
    sweep = io.smallcache_crossover(4096, d, M_max=io.flash_backward_min_M(d) + 1)
    assert sweep.M is None


def test_smallcache_advantage_is_the_ratio_of_the_counts():
    n, d = 1024, 32
    Ms = [io.flash_backward_min_M(d), 250, 1024]
    adv = io.smallcache_advantage(n, d, Ms)
    for k, M in enumerate(Ms):
        ratio = io.flash_backward_count(n, d, M).total / io.smallcache_backward_count(n, d, M).total
        assert adv.ratio[k] == ratio and adv.predicted[k] == d / np.sqrt(M)
        assert adv.one_row[k] == (io.flash_backward_blocks(d, M)[1] == 1)
    assert adv.one_row[0] and not adv.one_row[-1]


def test_bound_ratios_nan_below_the_least_cache():
    Ms = [3, 5, 64, 4096]
    r = io.bound_ratios(io.smallcache_backward_count, io.backward_order, 128, 16, Ms)
    assert np.isnan(r[:2]).all()  # the small-cache backward pass needs M >= 6
    assert r[2] == io.smallcache_backward_count(128, 16, 64).total / io.backward_order(128, 16, 64)
    # against the certified bound every ratio is at least 1
    certified = io.bound_ratios(io.smallcache_backward_count, io.backward_lower_bound, 128, 16, Ms)
    assert np.all(certified[2:] >= 1)


@pytest.mark.parametrize("T_r, T_c", [(1, 1), (3, 7), (7, 3), (5, 5), (1, 9)])
def test_block_cover_hits_every_row_and_column_thinly(T_r, T_c):
    cover = block_cover(T_r, T_c)
    assert cover.shape == (T_r, T_c) and cover.dtype == bool
    assert cover.any(axis=1).all() and cover.any(axis=0).all()
    assert cover.sum() <= T_r + T_c


def test_block_sparse_sweep_counts_equal_the_closed_forms():
    n, d, M = 96, 8, 400
    sweep = io.block_sparse_sweep(n, d, M, [0.1, 0.5, 1.0], seed=3)
    assert sweep.dense == io.flash_backward_count(n, d, M).total
    assert sweep.counts[-1] == sweep.dense and sweep.fractions[-1] == 1.0
    assert np.all(np.diff(sweep.counts) >= 0) and np.all(np.diff(sweep.fractions) >= 0)
    assert np.all(sweep.counts >= sweep.bounds)
    # the same mask rebuilt by hand
    B_r, B_c = io.flash_backward_blocks(d, M)
    T_r, T_c = -(-n // B_r), -(-n // B_c)
    mask = block_cover(T_r, T_c)
    mask.flat[np.random.default_rng(3).permutation(T_r * T_c)[: int(0.5 * T_r * T_c)]] = True
    assert sweep.counts[1] == io.flash_backward_count(n, d, M, block_mask=mask).total
    element = io.expand_block_mask(mask, n, n, (B_r, B_c))
    assert sweep.bounds[1] == io.backward_lower_bound(n, d, M, mask=element)
    assert sweep.orders[1] == io.sparse_worst_case_order(n * d, int(element.sum()), M)


# ---- memory guards and the int64 range of the sweeps' arrays ------------------------------


def test_cache_sizes_refuse_before_allocating_and_keep_their_endpoints():
    with pytest.raises(AttnInputError, match="hi - lo is too large"):
        io.cache_sizes(1, 10**12)  # 8 TB of int64, refused before numpy is asked
    with pytest.raises(AttnInputError, match="points is too large"):
        io.cache_sizes(1, 10**6, points=10**9)
    with pytest.raises(AttnInputError, match=r"hi must be an integer <= 9223372036854775807"):
        io.cache_sizes(1, 10**400, points=5)
    top = 2**63 - 1  # the largest int64: float64 rounds it up to 2⁶³, which int64 cannot hold
    sizes = io.cache_sizes(2**62, top, points=7)
    assert sizes[0] == 2**62 and sizes[-1] == top and (np.diff(sizes) > 0).all()
    assert sizes.dtype == np.int64
    sizes = io.cache_sizes(3, 10**15, points=50)
    assert sizes[0] == 3 and sizes[-1] == 10**15 and (np.diff(sizes) > 0).all()


def test_block_cover_and_sparse_sweep_refuse_grids_beyond_memory():
    with pytest.raises(AttnInputError, match=r"T_r·T_c is too large"):
        block_cover(10**6, 10**6)
    with pytest.raises(AttnInputError, match=r"n \(for this M\) is too large"):
        io.block_sparse_sweep(10**7, 4, 64, [0.5])


def test_block_sparse_sweep_kept_scores_are_exact_at_any_size():
    """The expression's Z_QK, Σ over kept blocks of r_i·c_j, used an int64 product of block
    sizes; with blocks longer than n it reached numpy as a huge int."""
    sweep = io.block_sparse_sweep(64, 4, 10**400, [1.0])
    assert sweep.counts[0] == sweep.dense
    assert sweep.orders[0] == io.sparse_worst_case_order(64 * 4, 64 * 64, 10**400)
    assert sweep.bounds[0] == io.backward_lower_bound(64, 4, 10**400)


def test_crossover_compares_exact_counts_and_refuses_what_a_float_cannot_hold():
    with pytest.raises(AttnInputError, match="M_max must be an integer <="):
        io.smallcache_crossover(64, 8, M_max=10**400)
    with pytest.raises(AttnInputError, match="n and d are too large"):
        io.smallcache_crossover(10**200, 8)
    # the default range is capped at the int64 range, not refused
    sweep = io.smallcache_crossover(10**12, 2**31)
    assert sweep.Ms[-1] == 2**63 - 1 and np.isfinite(sweep.flash).all()
    # the crossover is the first M at which FlashAttention's exact count is no larger
    sweep = io.smallcache_crossover(1024, 64)
    M = sweep.M
    assert (
        io.flash_backward_count(1024, 64, M).total
        <= io.smallcache_backward_count(1024, 64, M).total
    )
    assert (
        io.flash_backward_count(1024, 64, M - 1).total
        > io.smallcache_backward_count(1024, 64, M - 1).total
    )


def test_advantage_and_ratios_name_the_sizes_at_fault():
    with pytest.raises(AttnInputError, match=r"Ms\[0\] must be an integer <="):
        io.smallcache_advantage(64, 8, [10**400])
    with pytest.raises(AttnInputError, match=r"Ms\[1\] = 10 is below FlashAttention's smallest"):
        io.smallcache_advantage(64, 8, [1024, 10])
    with pytest.raises(AttnInputError, match="Ms must be a 1-D sequence"):
        io.smallcache_advantage(64, 8, 1024)
    # a bound that underflows to 0 next to its count: the ratio is not a float
    with pytest.raises(AttnInputError, match=r"bound\(n, d, Ms\[0\]\) must be a positive"):
        io.bound_ratios(io.flash_backward_count, io.backward_order, 64, 8, [10**400])
    with pytest.raises(AttnInputError, match="count must return an IOCount"):
        io.bound_ratios(lambda n, d, M: 3, io.backward_order, 64, 8, [1024])
    ratio = io.bound_ratios(io.flash_backward_count, io.backward_order, 64, 8, [1024])
    assert ratio.dtype == float and np.isfinite(ratio).all()
