"""Sweeps of the exact counts: over the cache size M, and over the kept blocks of a mask.

Chapters 4 and 5 hold the schedules' closed forms against each other and against the lower
bounds across many cache sizes; these functions compute those sweeps (the figures in
:mod:`attnlib.plots.iomodel` draw them). Every count is a closed form that the tests require
to equal its simulation.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._checks import (
    AttnInputError,
    as_real_array,
    check_int,
    check_memory,
    check_real,
    describe_int,
)
from .blocks import flash_backward_blocks, flash_backward_min_M
from .bounds import _profile_bound, sparse_worst_case_order
from .density import _Profile
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

#: The largest cache size an int64 array of sizes holds.
_INT64_MAX = int(np.iinfo(np.int64).max)
#: The largest count a float array of counts holds.
_FLOAT_MAX = int(np.finfo(np.float64).max)


def cache_sizes(lo: int, hi: int, *, points: int | None = None) -> np.ndarray:
    """The integer cache sizes M from ``lo`` to ``hi``, as an int64 array: all of them
    (``points=None``), or about ``points`` of them, geometrically spaced (rounded down,
    repeats dropped; ``lo`` and ``hi`` always included).

    Raises AttnInputError unless 1 <= lo <= hi <= 2⁶³ − 1 (the int64 range) and ``points``
    is None or an integer >= 2, or if the array would exceed the memory limit.

    Examples
    --------
    >>> cache_sizes(4, 8).tolist(), cache_sizes(2, 20, points=3).tolist()
    ([4, 5, 6, 7, 8], [2, 6, 20])
    """
    lo = check_int("lo", lo, maximum=_INT64_MAX)
    hi = check_int("hi", hi, minimum=lo, maximum=_INT64_MAX)
    if points is None:
        check_memory("cache_sizes' array of every M", 8 * (hi - lo + 1), culprits="hi - lo")
        return np.arange(lo, hi + 1, dtype=np.int64)
    points = check_int("points", points, minimum=2)
    # the spacing in float64, its floor as int64, and np.unique's sorted copy
    check_memory("cache_sizes' geometric grid", 32 * points, culprits="points")
    grid = np.geomspace(lo, hi, points)
    # Near 2⁶³ a float can exceed hi (or int64) by its rounding: clip in floats, then in ints.
    sizes = np.full(points, hi, dtype=np.int64)
    fits = grid < 2.0**63
    sizes[fits] = grid[fits].astype(np.int64)
    sizes = np.clip(sizes, lo, hi)
    sizes[0], sizes[-1] = lo, hi
    return np.unique(sizes)


def _backward_totals(n: int, d: int, Ms) -> tuple[list[int], list[int]]:
    """The two backward counts' totals at each M of Ms, as exact ints."""
    flash = [flash_backward_count(n, d, int(M)).total for M in Ms]
    small = [smallcache_backward_count(n, d, int(M)).total for M in Ms]
    return flash, small


def _as_floats(totals: list[int], who: str) -> np.ndarray:
    """Exact counts as a float array, refused (naming ``who``) past the float range."""
    if totals and max(totals) > _FLOAT_MAX:
        raise AttnInputError(f"the counts overflow a float: {who} too large")
    return np.array(totals, dtype=float)


def _sizes_list(name: str, Ms) -> list:
    """``Ms`` as a list (a sequence of cache sizes), or AttnInputError naming it."""
    if isinstance(Ms, str | bytes) or (isinstance(Ms, np.ndarray) and Ms.ndim != 1):
        raise AttnInputError(f"{name} must be a 1-D sequence of cache sizes, got {Ms!r:.60}")
    try:
        return list(Ms)
    except TypeError:
        raise AttnInputError(
            f"{name} must be a 1-D sequence of cache sizes, got {Ms!r:.60}"
        ) from None


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
    ``M_max`` (default min(64·d², 8·n·d, 2⁶³ − 1)); the crossover is found exactly, by
    bisection on the integers between the first grid point where FlashAttention's count is
    no larger and the point before it (the comparisons are of exact integer counts).

    Raises AttnInputError for n < 1, d < 2, M_max below 1 or beyond 2⁶³ − 1 (the int64
    range of ``Ms``), or counts beyond the float range (``flash``, ``small``).

    Examples
    --------
    >>> smallcache_crossover(1024, 64).M
    6692
    """
    n, d = check_int("n", n), check_int("d", d, minimum=2)
    lo = flash_backward_min_M(d)
    if lo > _INT64_MAX // 2:
        raise AttnInputError(
            f"d={describe_int(d)} is too large: FlashAttention's smallest cache is beyond int64"
        )
    if M_max is None:
        hi = min(64 * d * d, 8 * n * d, _INT64_MAX)
    else:
        hi = check_int("M_max", M_max, maximum=_INT64_MAX)
    Ms = cache_sizes(lo, max(hi, 2 * lo), points=160)
    flash, small = _backward_totals(n, d, Ms)
    sweep = (Ms, _as_floats(flash, "n and d are"), _as_floats(small, "n and d are"))
    wins = [k for k, (f, s) in enumerate(zip(flash, small, strict=True)) if f <= s]
    if not (wins and wins[0] > 0):
        return CrossoverSweep(*sweep, None)
    a, b = int(Ms[wins[0] - 1]), int(Ms[wins[0]])
    while b - a > 1:
        mid = (a + b) // 2
        if flash_backward_count(n, d, mid).total <= smallcache_backward_count(n, d, mid).total:
            b = mid
        else:
            a = mid
    return CrossoverSweep(*sweep, b)


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

    Raises AttnInputError for n or d below 1, ``Ms`` not a 1-D sequence, an M below
    FlashAttention's smallest cache or beyond 2⁶³ − 1 (the int64 range of ``Ms``), or counts
    beyond the float range.

    Examples
    --------
    >>> adv = smallcache_advantage(1024, 64, [1024])
    >>> round(float(adv.ratio[0]), 2), float(adv.predicted[0]), bool(adv.one_row[0])
    (2.72, 2.0, False)
    """
    n, d = check_int("n", n), check_int("d", d)
    lo = flash_backward_min_M(d)
    Ms = [check_int(f"Ms[{k}]", M, maximum=_INT64_MAX) for k, M in enumerate(_sizes_list("Ms", Ms))]
    for k, M in enumerate(Ms):
        if M < lo:
            raise AttnInputError(
                f"Ms[{k}] = {M} is below FlashAttention's smallest cache for d={describe_int(d)}, "
                f"{describe_int(lo)} words"
            )
    flash, small = _backward_totals(n, d, Ms)
    # each ratio of exact ints, rounded once (no float overflow for any count)
    ratio = np.array([f / s for f, s in zip(flash, small, strict=True)], dtype=float)
    Ms = np.array(Ms, dtype=np.int64)
    one_row = np.array([flash_backward_blocks(d, int(M))[1] == 1 for M in Ms], dtype=bool)
    return Advantage(Ms, ratio, d / np.sqrt(Ms), one_row)


def bound_ratios(count, bound, n: int, d: int, Ms) -> np.ndarray:
    """``count(n, d, M).total / bound(n, d, M)`` at each M of ``Ms``, NaN where M is below
    the schedule's smallest cache: the constant of a schedule against a bound's expression.

    ``count`` is a closed form (e.g. :func:`~attnlib.iomodel.flash_backward_count`) and
    ``bound`` a certified bound (e.g. :func:`~attnlib.iomodel.backward_lower_bound`: every
    ratio >= 1) or a Θ-expression (e.g. :func:`~attnlib.iomodel.backward_order`: the ratio
    is the schedule's constant). Raises
    AttnInputError if they are not callable, ``count`` does not return an IOCount, ``bound``
    does not return a positive finite number, the sizes are invalid, or a ratio is beyond
    the float range (a bound that underflows next to its count).
    """
    if not (callable(count) and callable(bound)):
        raise AttnInputError("count and bound must be callables (a closed form, a bound)")
    n, d = check_int("n", n), check_int("d", d)
    out = []
    for k, M in enumerate(_sizes_list("Ms", Ms)):
        M = check_int(f"Ms[{k}]", M)
        try:
            value = count(n, d, M)
        except AttnInputError:  # below the algorithm's smallest cache
            out.append(np.nan)
            continue
        if not isinstance(getattr(value, "total", None), int):
            raise AttnInputError(f"count must return an IOCount, got {value!r:.60}")
        b = check_real(
            f"bound(n, d, Ms[{k}])",
            bound(n, d, M),
            minimum=0.0,
            open_minimum=True,
            expected="a positive finite number (a lower bound)",
        )
        try:
            ratio = value.total / b
        except OverflowError:  # a count beyond the float range
            ratio = math.inf
        if not math.isfinite(ratio):
            raise AttnInputError(
                f"the ratio count / bound at Ms[{k}] is beyond the float range: n and d are "
                f"too large, or the bound underflows (bound(n, d, M) = {b:g})"
            )
        out.append(ratio)
    return np.array(out, dtype=float)


def block_cover(T_r: int, T_c: int) -> np.ndarray:
    """A thin (T_r, T_c) block mask with every block row and every block column non-empty:
    two stretched diagonals. Blocks added to it change a block-sparse count affinely.

    Raises AttnInputError for sizes below 1, or a mask beyond the memory limit.

    Examples
    --------
    >>> block_cover(2, 3).astype(int).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    T_r, T_c = check_int("T_r", T_r), check_int("T_c", T_c)
    # the mask, and three int64 index arrays along each side
    check_memory("block_cover's (T_r, T_c) mask", T_r * T_c + 24 * (T_r + T_c), culprits="T_r·T_c")
    cover = np.zeros((T_r, T_c), dtype=bool)
    cover[np.arange(T_r), np.arange(T_r) * T_c // T_r] = True
    cover[np.arange(T_c) * T_r // T_c, np.arange(T_c)] = True
    return cover


class SparseSweep(NamedTuple):
    """A sweep of block-sparse FlashAttention's backward pass over the kept fraction:
    ``fractions`` (kept blocks / all blocks), ``counts`` in words, ``bounds`` (the certified
    :func:`~attnlib.iomodel.backward_lower_bound` of the kept element mask, exact ints),
    ``orders`` (Pagh and Stöckel's worst-case shape with constant 1, never a bound: it
    exceeds the counts of thin masks), and the ``dense`` count."""

    fractions: np.ndarray
    counts: np.ndarray
    bounds: np.ndarray
    orders: np.ndarray
    dense: int


def block_sparse_sweep(n: int, d: int, M: int, targets, *, seed: int = 0) -> SparseSweep:
    """Block-sparse FlashAttention's backward count (n = m, d_v = d, our blocks) as blocks
    are kept, against the certified :func:`~attnlib.iomodel.backward_lower_bound` of the
    element mask the block mask keeps, and against
    :func:`~attnlib.iomodel.sparse_worst_case_order` with Z_in = n·d (an expression).

    The masks grow: each is :func:`block_cover` plus the first ⌊f·T_r·T_c⌋ blocks of one
    seeded random order, for each target fraction f of ``targets`` (in (0, 1]).

    Raises AttnInputError for invalid sizes, M below FlashAttention's smallest cache, a
    target outside (0, 1], a grid of blocks beyond the memory limit, or counts or bounds
    beyond the float range.
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    targets = as_real_array("targets", targets)
    if np.any((targets <= 0) | (targets > 1)):
        raise AttnInputError("targets must be fractions in (0, 1]")
    B_r, B_c = flash_backward_blocks(d, M)
    T_r, T_c = ceil_div(n, B_r), ceil_div(n, B_c)
    # the random order (int64), the cover and one mask (bool), and the count's per-block
    # temporaries (:func:`~attnlib.iomodel.blocks.grid_block_sizes`)
    check_memory("block_sparse_sweep's grid of blocks", 66 * T_r * T_c, culprits="n (for this M)")
    order = np.random.default_rng(check_int("seed", seed, minimum=0)).permutation(T_r * T_c)
    cover = block_cover(T_r, T_c)
    # kept scores Σ_ij bm_ij·r_i·c_j = r·(bm c), exact: Python ints once n² passes int64
    exact = np.int64 if n * n <= _INT64_MAX else object
    r, c = block_sizes(n, B_r, dtype=exact), block_sizes(n, B_c, dtype=exact)
    fractions, counts, bounds, orders = [], [], [], []
    for f in targets:
        bm = cover.copy()
        bm.flat[order[: int(f * T_r * T_c)]] = True
        fractions.append(bm.mean())
        counts.append(flash_backward_count(n, d, M, block_mask=bm).total)
        # the element mask's row and column counts, block row by block row (no n×n mask)
        rows = _Profile.of_groups((bm @ c).tolist(), r.tolist())
        cols = _Profile.of_groups((bm.T @ r).tolist(), c.tolist())
        bounds.append(_profile_bound(rows, cols, d, M, d, backward=True))
        orders.append(sparse_worst_case_order(n * d, int(r @ (bm @ c)), M))
    dense = flash_backward_count(n, d, M).total
    counts = _as_floats(counts, "n and d are") if max(counts) > _INT64_MAX else counts
    bounds = _as_floats(bounds, "n and d are") if max(bounds) > _INT64_MAX else bounds
    return SparseSweep(
        np.array(fractions), np.array(counts), np.array(bounds), np.array(orders), dense
    )
