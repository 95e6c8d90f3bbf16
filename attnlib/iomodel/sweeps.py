"""Sweeps of the exact counts: over the cache size M, and over the kept blocks of a mask.

Chapters 4 and 5 hold the schedules' closed forms against each other and against the lower
bounds across many cache sizes; these functions compute those sweeps (the figures in
:mod:`attnlib.plots.iomodel` draw them). Every count is a closed form that the tests require
to equal its simulation.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import AttnInputError, as_real_array, check_int
from .blocks import flash_backward_blocks, flash_backward_min_M
from .bounds import sparse_lower_bound
from .flash import flash_backward_count
from .smallcache import smallcache_backward_count
from .tiling import block_sizes, ceil_div

__all__ = [
    "cache_sizes",
    "CrossoverSweep",
    "smallcache_crossover",
    "Advantage",
    "smallcache_advantage",
    "bound_ratios",
    "block_cover",
    "SparseSweep",
    "block_sparse_sweep",
]


def cache_sizes(lo: int, hi: int, *, points: int | None = None) -> np.ndarray:
    """The integer cache sizes M from ``lo`` to ``hi``: all of them (``points=None``), or
    about ``points`` of them, geometrically spaced (rounded down, repeats dropped).

    Raises AttnInputError unless 1 <= lo <= hi and ``points`` is None or an integer >= 2.

    Examples
    --------
    >>> cache_sizes(4, 8).tolist(), cache_sizes(2, 20, points=3).tolist()
    ([4, 5, 6, 7, 8], [2, 6, 20])
    """
    lo = check_int("lo", lo)
    hi = check_int("hi", hi, minimum=lo)
    if points is None:
        return np.arange(lo, hi + 1)
    points = check_int("points", points, minimum=2)
    return np.unique(np.geomspace(lo, hi, points).astype(np.int64))


def _backward_totals(n: int, d: int, Ms) -> tuple[np.ndarray, np.ndarray]:
    flash = np.array([flash_backward_count(n, d, int(M)).total for M in Ms], dtype=float)
    small = np.array([smallcache_backward_count(n, d, int(M)).total for M in Ms], dtype=float)
    return flash, small


class CrossoverSweep(NamedTuple):
    """FlashAttention's and the small-cache backward counts (``flash``, ``small``, words) on
    the cache sizes ``Ms``, and ``M``: the first M at which FlashAttention's is no larger
    (None if it never is in the range)."""

    Ms: np.ndarray
    flash: np.ndarray
    small: np.ndarray
    M: int | None


def smallcache_crossover(n: int, d: int, *, M_max: int | None = None) -> CrossoverSweep:
    """The backward pass's crossover between the small-cache algorithm and FlashAttention
    (self-attention, d_v = d), from their closed forms.

    The sweep runs over 160 geometrically spaced M from FlashAttention's smallest cache to
    ``M_max`` (default min(64·d², 8·n·d)); the crossover is found exactly, by bisection on the
    integers between the first grid point where FlashAttention's count is no larger and the
    point before it.

    Raises AttnInputError for n < 1, d < 2 or M_max below 1.

    Examples
    --------
    >>> smallcache_crossover(1024, 64).M
    6692
    """
    n, d = check_int("n", n), check_int("d", d, minimum=2)
    lo = flash_backward_min_M(d)
    hi = min(64 * d * d, 8 * n * d) if M_max is None else check_int("M_max", M_max)
    Ms = np.unique(np.geomspace(lo, max(hi, 2 * lo), 160).astype(int))
    flash, small = _backward_totals(n, d, Ms)
    wins = np.nonzero(flash <= small)[0]
    if not (wins.size and wins[0] > 0):
        return CrossoverSweep(Ms, flash, small, None)
    a, b = int(Ms[wins[0] - 1]), int(Ms[wins[0]])
    while b - a > 1:
        mid = (a + b) // 2
        if flash_backward_count(n, d, mid).total <= smallcache_backward_count(n, d, mid).total:
            b = mid
        else:
            a = mid
    return CrossoverSweep(Ms, flash, small, b)


class Advantage(NamedTuple):
    """The small-cache backward pass's advantage on the cache sizes ``Ms``: ``ratio``
    (FlashAttention's count over the small-cache one), ``predicted`` (d/√M) and ``one_row``
    (True where FlashAttention's key blocks have a single row)."""

    Ms: np.ndarray
    ratio: np.ndarray
    predicted: np.ndarray
    one_row: np.ndarray


def smallcache_advantage(n: int, d: int, Ms) -> Advantage:
    """FlashAttention's backward count over the small-cache one (self-attention, d_v = d) at
    each M of ``Ms``, against the predicted advantage d/√M.

    Raises AttnInputError for n or d below 1, or an M below FlashAttention's smallest cache.

    Examples
    --------
    >>> adv = smallcache_advantage(1024, 64, [1024])
    >>> round(float(adv.ratio[0]), 2), float(adv.predicted[0]), bool(adv.one_row[0])
    (2.72, 2.0, False)
    """
    n, d = check_int("n", n), check_int("d", d)
    Ms = np.array([check_int(f"Ms[{k}]", M) for k, M in enumerate(Ms)], dtype=np.int64)
    flash, small = _backward_totals(n, d, Ms)
    one_row = np.array([flash_backward_blocks(d, int(M))[1] == 1 for M in Ms], dtype=bool)
    return Advantage(Ms, flash / small, d / np.sqrt(Ms), one_row)


def bound_ratios(count, bound, n: int, d: int, Ms) -> np.ndarray:
    """``count(n, d, M).total / bound(n, d, M)`` at each M of ``Ms``, NaN where M is below
    the schedule's smallest cache: the constant of a schedule against a bound's expression.

    ``count`` is a closed form (e.g. :func:`~attnlib.iomodel.flash_backward_count`) and
    ``bound`` a lower bound (e.g. :func:`~attnlib.iomodel.backward_lower_bound`). Raises
    AttnInputError if they are not callable or the sizes are invalid.
    """
    if not (callable(count) and callable(bound)):
        raise AttnInputError("count and bound must be callables (a closed form, a bound)")
    n, d = check_int("n", n), check_int("d", d)
    out = []
    for k, M in enumerate(Ms):
        M = check_int(f"Ms[{k}]", M)
        try:
            value = count(n, d, M).total
        except AttnInputError:  # below the algorithm's smallest cache
            out.append(np.nan)
            continue
        out.append(value / bound(n, d, M))
    return np.array(out)


def block_cover(T_r: int, T_c: int) -> np.ndarray:
    """A thin (T_r, T_c) block mask with every block row and every block column non-empty:
    two stretched diagonals. Blocks added to it change a block-sparse count affinely.

    Raises AttnInputError for sizes below 1.

    Examples
    --------
    >>> block_cover(2, 3).astype(int).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    T_r, T_c = check_int("T_r", T_r), check_int("T_c", T_c)
    cover = np.zeros((T_r, T_c), dtype=bool)
    cover[np.arange(T_r), np.arange(T_r) * T_c // T_r] = True
    cover[np.arange(T_c) * T_r // T_c, np.arange(T_c)] = True
    return cover


class SparseSweep(NamedTuple):
    """A sweep of block-sparse FlashAttention's backward pass over the kept fraction:
    ``fractions`` (kept blocks / all blocks), ``counts`` and ``bounds`` (the sparse
    expression with constant 1) in words, and the ``dense`` count."""

    fractions: np.ndarray
    counts: np.ndarray
    bounds: np.ndarray
    dense: int


def block_sparse_sweep(n: int, d: int, M: int, targets, *, seed: int = 0) -> SparseSweep:
    """Block-sparse FlashAttention's backward count (n = m, d_v = d, our blocks) as blocks
    are kept, against :func:`~attnlib.iomodel.sparse_lower_bound` with Z_in = n·d.

    The masks grow: each is :func:`block_cover` plus the first ⌊f·T_r·T_c⌋ blocks of one
    seeded random order, for each target fraction f of ``targets`` (in (0, 1]).

    Raises AttnInputError for invalid sizes, M below FlashAttention's smallest cache, or a
    target outside (0, 1].
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    targets = as_real_array("targets", targets)
    if np.any((targets <= 0) | (targets > 1)):
        raise AttnInputError("targets must be fractions in (0, 1]")
    B_r, B_c = flash_backward_blocks(d, M)
    T_r, T_c = ceil_div(n, B_r), ceil_div(n, B_c)
    order = np.random.default_rng(check_int("seed", seed, minimum=0)).permutation(T_r * T_c)
    cover = block_cover(T_r, T_c)
    sizes = block_sizes(n, B_r)[:, None] * block_sizes(n, B_c)[None, :]  # scores per block
    fractions, counts, bounds = [], [], []
    for f in targets:
        bm = cover.copy()
        bm.flat[order[: int(f * T_r * T_c)]] = True
        fractions.append(bm.mean())
        counts.append(flash_backward_count(n, d, M, block_mask=bm).total)
        bounds.append(sparse_lower_bound(n * d, int((bm * sizes).sum()), M))
    dense = flash_backward_count(n, d, M).total
    return SparseSweep(np.array(fractions), np.array(counts), np.array(bounds), dense)
