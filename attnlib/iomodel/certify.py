"""The attack on the certified bounds: every counted schedule and every exact optimum the
library has, each held against the ``*_lower_bound`` that must lie below it.

A certified bound (:mod:`.bounds`) is proved for every schedule of the red-blue pebble game
with recomputation on the standard matmul DAG. Each schedule of this library is such a
schedule, and its ``*_count`` is its exact I/O; :func:`~attnlib.iomodel.optimal_io` is the
least I/O of any schedule of a small graph. So count / bound >= 1 at every point, or a proof
or an implementation is wrong. A :class:`Family` pairs one kind of count with its bound over
many points; :func:`worst_ratios` finds, per family, the smallest ratio and where it occurs
(a ratio below 1 refutes the bound there); :func:`attack_bounds` runs every family of the library
over a grid of sizes (:func:`default_sizes`) and the small graphs (:func:`optimum_families`).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .._checks import (
    AttnInputError,
    as_entries,
    check_bool,
    check_choice,
    check_int,
    check_memory,
)
from .attention_graphs import attention_deferred_graph
from .blocks import flash_backward_blocks, flash_block_mask, flash_forward_blocks
from .bounds import backward_lower_bound, forward_lower_bound, matmul_lower_bound
from .flash import flash_backward_count, flash_forward_count
from .gqa import decode_count
from .graphs import attention_forward_graph, inner_product_graph, least_feasible_M, matmul_graph
from .matmul import tiled_matmul_count
from .optimal import optimal_io
from .smallcache import smallcache_backward_count, smallcache_forward_count
from .standard import standard_backward_count, standard_forward_count

__all__ = [
    "MASK_KINDS",
    "element_mask",
    "Family",
    "Worst",
    "default_sizes",
    "schedule_families",
    "optimum_families",
    "worst_ratios",
    "attack_bounds",
]

#: The element masks the block-sparse schedules are attacked with, and their parameter:
#: band half-width, block side, (none), stride, keep probability in percent.
MASK_KINDS = ("band", "block_diagonal", "causal", "strided", "random")


def element_mask(kind: str, n: int, m: int, param: int = 1, *, seed: int = 0) -> np.ndarray:
    """A boolean (n, m) keep-mask of one of :data:`MASK_KINDS`:

    * ``"band"``: |i − j| <= param (a sliding window of half-width param);
    * ``"block_diagonal"``: ⌊i/param⌋ = ⌊j/param⌋;
    * ``"causal"``: j <= i (``param`` unused);
    * ``"strided"``: i − j a multiple of param (a fixed stride);
    * ``"random"``: each entry kept with probability param/100, seeded.

    Raises AttnInputError for an unknown kind, sizes or param below 1 (0 for random), or a
    mask beyond the memory limit.

    Examples
    --------
    >>> element_mask("band", 4, 4, 1).astype(int).tolist()
    [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]
    """
    kind = check_choice("kind", kind, MASK_KINDS)
    n, m = check_int("n", n), check_int("m", m)
    param = check_int("param", param, minimum=0 if kind == "random" else 1)
    check_memory("the (n, m) mask", 17 * n * m, culprits="n or m")
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    if kind == "band":
        return np.abs(i - j) <= param
    if kind == "block_diagonal":
        return i // param == j // param
    if kind == "causal":
        return j <= i
    if kind == "strided":
        return (i - j) % param == 0
    rng = np.random.default_rng(check_int("seed", seed, minimum=0))
    return rng.random((n, m)) < param / 100


class Family(NamedTuple):
    """One kind of count and the certified bound that must lie below it: ``count(**point)``
    is the exact I/O of a schedule (or an exact optimum) and ``bound(**point)`` the bound,
    at every ``point`` of ``points`` (dicts of keyword arguments). A count that raises
    AttnInputError (a cache below the schedule's smallest) skips the point."""

    name: str
    count: Callable[..., int]
    bound: Callable[..., int]
    points: tuple


class Worst(NamedTuple):
    """The smallest count / bound of a family (an exact Fraction), the ``point``, ``count``
    and ``bound`` where it occurs, the ``cases`` compared, and ``failures``: the points whose
    count lies below the bound (empty unless a proof or an implementation is wrong)."""

    family: str
    ratio: Fraction
    point: dict
    count: int
    bound: int
    cases: int
    failures: tuple


def default_sizes() -> list[tuple[int, int, int, int, int]]:
    """The grid (n, m, d, d_v, M) :func:`attack_bounds` attacks: n from 16 to 512 with m = n,
    m = n/2 and m = 2n, d from 2 to 64 with d_v = d and d_v = 2d, and M below d², at d²,
    and far above it (from the schedules' smallest caches to 64·d²)."""
    sizes = []
    for n in (16, 64, 256, 512):
        for d in (2, 4, 8, 16, 64):
            for M in sorted({max(8, d * d // 8), d * d // 2, d * d, 4 * d * d, 64 * d * d}):
                for m, d_v in ((n, d), (n // 2, d), (2 * n, 2 * d)):
                    sizes.append((n, m, d, d_v, M))
    return sizes


def _dense(count, backward: bool, **fixed):
    def run(n, m, d, d_v, M):
        return count(n, d, M, m=m, d_v=d_v, **fixed).total

    def bound(n, m, d, d_v, M):
        bound_of = backward_lower_bound if backward else forward_lower_bound
        return bound_of(n, d, M, m=m, d_v=d_v, is_causal=fixed.get("is_causal", False))

    return run, bound


def _grouped(count, backward: bool, H: int, H_kv: int):
    def run(n, m, d, d_v, M):
        return count(n, d, M, m=m, d_v=d_v, H=H, H_kv=H_kv, enable_gqa=True).total

    def bound(n, m, d, d_v, M):
        bound_of = backward_lower_bound if backward else forward_lower_bound
        return bound_of(n, d, M, m=m, d_v=d_v, H=H, H_kv=H_kv)

    return run, bound


def _sparse(backward: bool, kind: str, param: int, seed: int):
    count, rule = (
        (flash_backward_count, flash_backward_blocks)
        if backward
        else (flash_forward_count, flash_forward_blocks)
    )

    def run(n, m, d, d_v, M):
        blocks = rule(d, M, d_v=d_v)  # refuses a cache below the schedule's smallest
        block_mask = flash_block_mask(element_mask(kind, n, m, param, seed=seed), blocks)
        return count(n, d, M, m=m, d_v=d_v, blocks=blocks, block_mask=block_mask).total

    def bound(n, m, d, d_v, M):
        mask = element_mask(kind, n, m, param, seed=seed)
        bound_of = backward_lower_bound if backward else forward_lower_bound
        return bound_of(n, d, M, m=m, d_v=d_v, mask=mask)

    return run, bound


def _mask_params(n: int):
    """(kind, param) of the masks at n: thin and wide bands, blocks, causal, strides, and
    sparse and half-full random masks."""
    return (
        ("band", 1),
        ("band", max(1, n // 8)),
        ("block_diagonal", max(1, n // 4)),
        ("causal", 1),
        ("strided", 4),
        ("random", 5),
        ("random", 50),
    )


def schedule_families(sizes=None, *, seed: int = 0) -> list[Family]:
    """Every counted schedule of the library with its certified bound, over ``sizes``
    (tuples (n, m, d, d_v, M); default :func:`default_sizes`): FlashAttention's forward and
    backward passes (dense, ``is_causal``, grouped-query with (H, H_kv) = (4, 2) and (4, 1),
    block-sparse on the masks of :func:`element_mask`), the small-cache and standard
    schedules, a decoding step, and tiled matmul of the QKᵀ shape (n×d by d×m) and of a
    square (n×n by n×n). Raises AttnInputError for sizes below 1."""
    sizes = default_sizes() if sizes is None else sizes
    names = ("n", "m", "d", "d_v", "M")
    points = []
    for k, size in enumerate(as_entries("sizes", sizes, of="(n, m, d, d_v, M) tuples", min_len=1)):
        size = as_entries(f"sizes[{k}]", size, of="n, m, d, d_v, M", length=5)
        points.append(
            {a: check_int(f"sizes[{k}].{a}", v) for a, v in zip(names, size, strict=True)}
        )
    points = tuple(points)
    seed = check_int("seed", seed, minimum=0)
    families = []
    for backward, flash, small, standard in (
        (False, flash_forward_count, smallcache_forward_count, standard_forward_count),
        (True, flash_backward_count, smallcache_backward_count, standard_backward_count),
    ):
        which = "backward" if backward else "forward"
        for name, (run, bound) in (
            (f"flash_{which}", _dense(flash, backward)),
            (f"flash_{which} is_causal", _dense(flash, backward, is_causal=True)),
            (f"flash_{which} gqa 4/2", _grouped(flash, backward, 4, 2)),
            (f"flash_{which} gqa 4/1", _grouped(flash, backward, 4, 1)),
            (f"smallcache_{which}", _dense(small, backward)),
            (f"standard_{which}", _dense(standard, backward)),
        ):
            families.append(Family(name, run, bound, points))
        for kind in MASK_KINDS:
            mask_points = tuple(
                {**p, "mask": (kind, param)}
                for p in points
                for k, param in _mask_params(p["n"])
                if k == kind
            )
            families.append(
                Family(
                    f"flash_{which} block-sparse {kind}",
                    lambda mask, _b=backward, **p: _sparse(_b, *mask, seed)[0](**p),
                    lambda mask, _b=backward, **p: _sparse(_b, *mask, seed)[1](**p),
                    mask_points,
                )
            )
    for H, H_kv in ((1, 1), (8, 2), (8, 1)):
        families.append(
            Family(
                f"decode_count {H}/{H_kv}",
                lambda n, m, d, d_v, M, _h=(H, H_kv): (
                    decode_count(m, d, M, d_v=d_v, H=_h[0], H_kv=_h[1]).total
                ),
                lambda n, m, d, d_v, M, _h=(H, H_kv): forward_lower_bound(
                    1, d, M, m=m, d_v=d_v, H=_h[0], H_kv=_h[1]
                ),
                points,
            )
        )
    for label, shape in (
        ("n×d·d×m", lambda n, m, d: (n, d, m)),
        ("n×n·n×n", lambda n, m, d: (n, n, n)),
    ):
        families.append(
            Family(
                f"tiled_matmul_count {label}",
                lambda n, m, d, d_v, M, _s=shape: tiled_matmul_count(*_s(n, m, d), M).total,
                lambda n, m, d, d_v, M, _s=shape: matmul_lower_bound(*_s(n, m, d), M),
                points,
            )
        )
    return families


def _optimum(graph, **sizes):
    def run(M, tree, max_states, **ignored):
        return optimal_io(graph(**sizes, tree=tree), M, max_states=max_states).io

    return run


def optimum_families(*, max_states: int = 200_000, extra_M: int = 4) -> list[Family]:
    """The exact optima of the small graphs :func:`~attnlib.iomodel.optimal_io` finishes,
    each held against its certified bound with the graph's own sizes: ⟨a, b⟩ of length k
    (:func:`~attnlib.iomodel.inner_product_graph`, a 1×k by k×1 product) against
    :func:`~attnlib.iomodel.matmul_lower_bound` (1, k, 1, M); m×k by k×p products
    (:func:`~attnlib.iomodel.matmul_graph`) against matmul_lower_bound (m, k, p, M); and
    attention's forward graphs with d = 2 (:func:`~attnlib.iomodel.attention_forward_graph`
    at n = 1, m = 2, and FlashAttention's :func:`~attnlib.iomodel.attention_deferred_graph`
    at n = 1 and 2, m = 2; inputs Q, K, V of width d, outputs O) against
    :func:`~attnlib.iomodel.forward_lower_bound` (n, d, M, m=m). M runs from one above
    each graph's fewest pebbles (the fewest exactly for the quick graphs) to ``extra_M``
    above, both sum-tree shapes. A search that expands more than ``max_states`` configurations
    raises AttnInputError: the budget is a count, so every machine tests the same optima."""
    max_states = check_int("max_states", max_states)
    extra_M = check_int("extra_M", extra_M)
    graphs = [
        ("inner_product_graph", inner_product_graph, {"k": k}, (1, k, 1)) for k in (2, 3, 4, 6)
    ]
    graphs += [
        ("matmul_graph", matmul_graph, {"m": a, "k": b, "p": c}, (a, b, c))
        for a, b, c in ((1, 2, 2), (2, 1, 2), (2, 2, 2), (1, 3, 2))
    ]
    families = []
    for name, graph, sizes, (a, b, c) in graphs:
        G = graph(**sizes)
        lo = least_feasible_M(G) + (1 if G.n > 16 else 0)  # the fewest pebbles are slow
        points = tuple(
            {"M": M, "tree": tree, "max_states": max_states}
            for M in range(lo, lo + extra_M + 1)
            for tree in ("chain", "balanced")
        )
        families.append(
            Family(
                f"optimal_io {name}({', '.join(map(str, sizes.values()))})",
                _optimum(graph, **sizes),
                lambda M, _s=(a, b, c), **ignored: matmul_lower_bound(*_s, M),
                points,
            )
        )
    # attention graphs with d = 2, from the smallest M the search finishes quickly: the
    # softmax graph, and FlashAttention's (exp(QKᵀ)V)/l, whose QKᵀ trees the bound counts
    attention = (
        (attention_forward_graph, 1, 2, 2, least_feasible_M(attention_forward_graph(1, 2, 2)) + 1),
        (attention_deferred_graph, 1, 2, 2, 5),
        (attention_deferred_graph, 2, 2, 2, 9),
    )
    for graph, n, m, d, lo in attention:
        families.append(
            Family(
                f"optimal_io {graph.__name__}({n}, {m}, {d})",
                _optimum(graph, n=n, m=m, d=d),
                lambda M, _s=(n, m, d), **ignored: forward_lower_bound(_s[0], _s[2], M, m=_s[1]),
                tuple(
                    {"M": M, "tree": tree, "max_states": max_states}
                    for M in range(lo, lo + extra_M + 1)
                    for tree in ("chain", "balanced")
                ),
            )
        )
    return families


def worst_ratios(families) -> dict[str, Worst]:
    """Per family, the smallest count / bound over its points (exact Fractions) and where it
    occurs, with every point whose count lies below its bound. Points whose count raises
    AttnInputError (a cache below the schedule's smallest) are skipped; a family with no
    point left is left out; a bound of 0 (nothing to move) holds and gives no ratio. Raises
    AttnInputError for a family that is not a :class:`Family`, or a bound that is not an
    int >= 0."""
    out = {}
    for family in families:
        if not isinstance(family, Family):
            raise AttnInputError(f"families must hold Family tuples, got {family!r:.60}")
        worst, cases, failures = None, 0, []
        for point in family.points:
            try:
                count = family.count(**point)
            except AttnInputError:
                continue
            bound = family.bound(**point)
            if not isinstance(bound, int) or bound < 0:
                raise AttnInputError(
                    f"{family.name}: the bound at {point} must be an int >= 0, got {bound!r:.60}"
                )
            if bound == 0:  # nothing to move (a mask that keeps no score): every count holds
                cases += 1
                continue
            ratio, cases = Fraction(count, bound), cases + 1
            if count < bound:
                failures.append(point)
            if worst is None or ratio < worst[0]:
                worst = (ratio, point, count, bound)
        if worst is not None:
            out[family.name] = Worst(family.name, *worst, cases, tuple(failures))
    return out


def attack_bounds(sizes=None, *, optima: bool = True, seed: int = 0) -> dict[str, Worst]:
    """Run the attack: :func:`worst_ratios` of every :func:`schedule_families` over ``sizes``
    (default :func:`default_sizes`) and, with ``optima``, of every :func:`optimum_families`.
    A Worst with non-empty ``failures`` means a bound lies above a schedule: a proof or an
    implementation is wrong.

    Examples
    --------
    >>> worst = attack_bounds([(64, 64, 8, 8, 256)], optima=False)
    >>> all(w.ratio >= 1 and not w.failures for w in worst.values())
    True
    """
    families = schedule_families(sizes, seed=seed)
    if check_bool("optima", optima):
        families += optimum_families()
    return worst_ratios(families)
