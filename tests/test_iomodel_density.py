"""What one segment of a schedule computes (attnlib.iomodel.density): P of lem-05-part and the mask
density bound ρ(s), by hand and against the brute-force ρ(s) of every mask up to 4×4 and of
random 6×6 masks. Bad input is in test_bad_input_iomodel.py."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from attnlib.iomodel.density import mask_density_bound, products_per_part

# ---- by hand --------------------------------------------------------------------------------


def test_products_per_part_by_hand():
    # d = 2, M = 8: s = 8, dense ρ = 4·4 = 16; cap_rows = 2·16 + 3·8·2 = 80,
    # cap_lw = 2·8 + 8·⌈√(24 + 16)⌉ = 16 + 8·7 = 72
    assert products_per_part(2, 8) == 72
    # d = 64, M = 4096: s = 128, ρ = 64² = 4096; cap_rows = 64·4096 + 3·4096·64 = 1048576,
    # cap_lw = 8192 + 4096·⌈√(12288 + 4096)⌉ = 8192 + 4096·128 = 532480
    assert products_per_part(64, 4096) == 532480
    # a given ρ: d = 4, M = 8, ρ = 3: cap_rows = 12 + 96 = 108, cap_lw = 16 + 8·⌈√27⌉ = 64
    assert products_per_part(4, 8, rho=3) == 64
    # ρ = 0 (s = 0 when d > 2M): d = 8, M = 2: cap_rows = 3·2·8 = 48, cap_lw = 4 + 2·⌈√6⌉ = 10
    assert products_per_part(8, 2) == 10
    assert isinstance(products_per_part(3, 5), Fraction)


def test_mask_density_bound_by_hand():
    band = np.abs(np.subtract.outer(np.arange(6), np.arange(6))) <= 1
    # row counts 3,3,3,3,2,2 (sorted), the same for columns; Z = 16
    # s = 4: a = b = 2 gives min(4, 6, 6, 16) = 4
    # s = 6: a = b = 3 gives min(9, 9, 9, 16) = 9; s = 12: Z = 16
    assert [mask_density_bound(band, s) for s in (0, 1, 2, 4, 6, 12)] == [0, 0, 1, 4, 9, 16]
    # the causal 4×4 mask: rows 4,3,2,1, columns 4,3,2,1; s = 4: min(4, 7, 7, 10) = 4
    assert mask_density_bound(np.tri(4, dtype=bool), 4) == 4


# ---- against brute force --------------------------------------------------------------------


def _brute_rho(masks: np.ndarray) -> np.ndarray:
    """rho[k, s]: the most kept entries of masks[k] in a rectangle with |I| + |J| <= s, for
    s = 0 … n + m, over every subset of rows and of columns (masks (K, n, m))."""
    K, n, m = masks.shape
    rows = np.array(list(itertools.product((0, 1), repeat=n)), dtype=np.int64)  # (2^n, n)
    cols = np.array(list(itertools.product((0, 1), repeat=m)), dtype=np.int64)
    kept = np.einsum("ri,kij,cj->krc", rows, masks.astype(np.int64), cols)
    size = rows.sum(1)[:, None] + cols.sum(1)[None, :]
    return np.stack(
        [np.where(size <= s, kept, 0).max(axis=(1, 2)) for s in range(n + m + 1)], axis=1
    )


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (3, 2), (3, 3), (2, 4), (4, 3), (4, 4)])
def test_density_bound_is_at_least_rho_on_every_small_mask(n, m):
    """Every boolean mask of the shape (2^(n·m) of them, 65536 at 4×4). The bound is a
    function of the sorted row and column counts, so it is called once per class of masks
    with equal sorted counts and held against the largest ρ of the class; equality holds on
    the full mask."""
    masks = (
        ((np.arange(2 ** (n * m))[:, None] >> np.arange(n * m)[None, :]) & 1)
        .astype(bool)
        .reshape(-1, n, m)
    )
    rho = _brute_rho(masks)
    keys = {}
    for k, mask in enumerate(masks):
        key = (tuple(sorted(mask.sum(1))), tuple(sorted(mask.sum(0))))
        keys.setdefault(key, []).append(k)
    for members in keys.values():
        worst = rho[members].max(axis=0)
        bounds = [mask_density_bound(masks[members[0]], s) for s in range(n + m + 1)]
        assert np.all(np.array(bounds) >= worst), (masks[members[0]], bounds, worst)
    full = np.ones((n, m), dtype=bool)
    assert [mask_density_bound(full, s) for s in range(n + m + 1)] == rho[-1].tolist()


def test_density_bound_is_at_least_rho_on_random_6x6_masks():
    rng = np.random.default_rng(11)
    masks = rng.random((300, 6, 6)) < rng.random((300, 1, 1))  # densities from 0 to 1
    rho = _brute_rho(masks)
    for k, mask in enumerate(masks):
        bounds = [mask_density_bound(mask, s) for s in range(13)]
        assert np.all(np.array(bounds) >= rho[k]), (mask.astype(int), bounds, rho[k])


def test_density_bound_of_a_dense_mask_is_the_largest_rectangle():
    for n, m in [(5, 9), (9, 5), (16, 16), (1, 40)]:
        full = np.ones((n, m), dtype=bool)
        for s in range(0, n + m + 3):
            want = max(a * min(m, s - a) for a in range(0, min(n, s) + 1))
            assert mask_density_bound(full, s) == want
