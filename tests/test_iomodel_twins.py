"""Every schedule on the two-level machine against its closed-form twin.

The schedules are found, not listed: every public function of an ``attnlib.iomodel`` module
that takes the fast memory ``M`` and runs on :class:`~attnlib.iomodel.TwoLevelMemory` (its
code, or that of a function of the package it calls, uses the machine). Each must have a twin
``<name>_count`` in its module that takes the same keywords. On one shared grid of
(n, m, d, d_v, M, is_causal, heads), and on hypothesis' draws (given blocks too), the
simulated count must equal the closed form in every field (reads, writes, total, peak_fast;
for the three-level schedules every word count of the hierarchy), the results must equal
the exact core's (``attnlib.attention_forward`` and ``attention_backward`` with the same
keywords, or A @ B), and a schedule refuses exactly the sizes its twin refuses (given
blocks that do not fit: the machine's CapacityError).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import assert_close
from hypothesis import given
from hypothesis import strategies as st

import attnlib as al
from attnlib import AttnInputError, iomodel
from attnlib.iomodel.blocks import flash_backward_min_M, flash_forward_min_M
from attnlib.iomodel.machine import CapacityError, IOCount, TwoLevelMemory

# Functions that run on the machine and take M but are no schedule of an algorithm: their words
# are those of what they are given, so there is no closed form to hold them to.
NOT_SCHEDULES = {
    "attnlib.iomodel.tiling.start_run": "starts a run of any schedule",
    "attnlib.iomodel.optimal.replay_schedule": "replays the pebble-game moves it is given",
}

# The schedules the book relies on: the enumeration must find each of them.
KNOWN = {
    "flash_forward",
    "flash_backward",
    "standard_forward",
    "standard_backward",
    "smallcache_forward",
    "smallcache_backward",
    "naive_matmul",
    "tiled_matmul",
    "flash_forward_three_level",
    "flash_backward_three_level",
}

# Keywords of a run that its count does not see (the count of a masked run takes the mask's
# block pattern, ``block_mask``; ``unshifted`` changes only the exponentials).
RUN_ONLY = {"M", "scale", "mask", "record", "unshifted"}


# ---- the enumeration ---------------------------------------------------------------------------


def _code_names(fn) -> set[str]:
    """Every global or attribute name the code of fn (nested functions included) refers to."""
    names, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return names


def _uses_the_machine(fn, seen=None) -> bool:
    """Whether fn, or a function of attnlib.iomodel that it calls by name, uses the machine."""
    seen = set() if seen is None else seen
    names = _code_names(fn)
    scopes = [fn.__globals__]
    scopes += [
        vars(v)
        for v in fn.__globals__.values()
        if inspect.ismodule(v) and v.__name__.startswith("attnlib.iomodel")
    ]
    for scope in scopes:
        for name in names & scope.keys():
            obj = scope[name]
            if obj is TwoLevelMemory:
                return True
            if (
                inspect.isfunction(obj)
                and obj.__module__.startswith("attnlib.iomodel")
                and obj not in seen
            ):
                seen.add(obj)
                if _uses_the_machine(obj, seen):
                    return True
    return False


def _modules():
    return [
        importlib.import_module(f"attnlib.iomodel.{info.name}")
        for info in pkgutil.iter_modules(iomodel.__path__)
    ]


def _machine_functions():
    """{qualified name: function} of every public function that takes M and uses the machine."""
    found = {}
    for module in _modules():
        for name in module.__all__:
            fn = getattr(module, name)
            if (
                inspect.isfunction(fn)
                and "M" in inspect.signature(fn).parameters
                and _uses_the_machine(fn)
            ):
                found[f"{module.__name__}.{name}"] = fn
    return found


MACHINE = _machine_functions()
SCHEDULES = {
    qual.rsplit(".", 1)[1]: fn for qual, fn in MACHINE.items() if qual not in NOT_SCHEDULES
}


def _twin(fn):
    module = inspect.getmodule(fn)
    name = f"{fn.__name__}_count"
    return getattr(module, name) if name in module.__all__ else None


def test_the_enumeration_finds_every_schedule_and_each_has_a_twin():
    assert KNOWN <= SCHEDULES.keys(), KNOWN - SCHEDULES.keys()
    assert set(NOT_SCHEDULES) <= MACHINE.keys()  # the exceptions exist and use the machine
    unpaired = sorted(name for name, fn in SCHEDULES.items() if _twin(fn) is None)
    assert not unpaired, f"schedules without a closed-form twin <name>_count: {unpaired}"


def test_the_enumeration_sees_the_machine_through_calls_and_module_attributes():
    """A function that only calls a schedule (the three-level ones call flash_forward) or
    reaches the machine through ``module.function`` counts; arithmetic on counts does not."""
    assert _uses_the_machine(iomodel.hierarchy.flash_forward_three_level)
    assert not _uses_the_machine(iomodel.flash_forward_count)
    assert not _uses_the_machine(iomodel.gqa_kv_reuse)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_each_twin_takes_the_schedules_keywords(name):
    """The count takes every keyword of the run that shapes its words (is_causal,
    enable_gqa, blocks, block_mask, tile, M_l2, ...), and only sizes besides them."""
    run, twin = SCHEDULES[name], _twin(SCHEDULES[name])
    run_kw = {
        p.name
        for p in inspect.signature(run).parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.name not in RUN_ONLY
    }
    twin_params = set(inspect.signature(twin).parameters)
    assert run_kw <= twin_params, run_kw - twin_params
    sizes = {"n", "d", "M", "m", "d_v", "H", "H_kv", "k", "p", "M_l2"}
    assert twin_params <= run_kw | sizes, twin_params - run_kw - sizes


# ---- the families of schedules: their inputs, reference results and count arguments ----------


@dataclass(frozen=True)
class Point:
    """One case: sizes, the fast memory, causality, and the heads (None: 2-D, one head)."""

    n: int
    m: int
    d: int
    d_v: int
    M: int
    is_causal: bool = False
    heads: tuple[int, int] | None = None  # (H, H_kv)
    blocks: tuple[int, int] | None = (
        None  # given blocks (B_r, B_c), or a tile (B_r); None: the rule
    )

    @property
    def H(self):
        return 1 if self.heads is None else self.heads[0]

    @property
    def H_kv(self):
        return 1 if self.heads is None else self.heads[1]


def _attention_inputs(point: Point, seed: int):
    rng = np.random.default_rng(seed)
    lead = () if point.heads is None else (point.H,)
    kv = () if point.heads is None else (point.H_kv,)
    Q = rng.standard_normal((*lead, point.n, point.d))
    K = rng.standard_normal((*kv, point.m, point.d))
    V = rng.standard_normal((*kv, point.m, point.d_v))
    dO = rng.standard_normal((*lead, point.n, point.d_v))
    return Q, K, V, dO


def _flags(point: Point, run) -> dict:
    """The keywords of ``run`` that the point sets: is_causal, enable_gqa, M_l2, and given
    blocks or a given tile."""
    accepted = inspect.signature(run).parameters
    flags = {"is_causal": point.is_causal, "enable_gqa": point.H != point.H_kv}
    flags["M_l2"] = 2 * point.M + 64 * (point.d + point.d_v)
    if point.blocks is not None:
        flags |= {"blocks": point.blocks, "tile": point.blocks[0]}
    return {k: v for k, v in flags.items() if k in accepted}


def _core(point: Point) -> dict:
    return {"is_causal": point.is_causal, "enable_gqa": point.H != point.H_kv}


def _forward_case(point: Point, run, seed: int):
    Q, K, V, _ = _attention_inputs(point, seed)
    return (Q, K, V), al.attention_forward(Q, K, V, **_core(point))


def _backward_case(point: Point, run, seed: int):
    Q, K, V, dO = _attention_inputs(point, seed)
    O, lse = al.attention_forward(Q, K, V, **_core(point))
    return (Q, K, V, O, dO, lse), al.attention_backward(Q, K, V, O, dO, lse, **_core(point))


def _matmul_case(point: Point, run, seed: int):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((point.n, point.d)), rng.standard_normal((point.d, point.m))
    return (A, B), (A @ B,)


# A schedule's family is the names of its array arguments.
FAMILIES = {
    ("Q", "K", "V"): _forward_case,
    ("Q", "K", "V", "O", "dO", "lse"): _backward_case,
    ("A", "B"): _matmul_case,
}


def _family(run):
    arrays = tuple(
        p.name
        for p in inspect.signature(run).parameters.values()
        if p.kind is p.POSITIONAL_OR_KEYWORD
    )
    assert arrays in FAMILIES, f"{run.__name__}: no inputs for arguments {arrays}"
    return FAMILIES[arrays], arrays


def _twin_arguments(point: Point, run, twin) -> dict:
    """The twin's arguments by name: the sizes (a matmul's m, k, p are A's rows, A's columns,
    B's columns), M, and the run's flags."""
    _, arrays = _family(run)
    if arrays == ("A", "B"):
        sizes = {"m": point.n, "k": point.d, "p": point.m}
    else:
        sizes = {"n": point.n, "m": point.m, "d": point.d, "d_v": point.d_v}
        sizes |= {"H": point.H, "H_kv": point.H_kv}
    values = sizes | {"M": point.M} | _flags(point, run)
    return {k: v for k, v in values.items() if k in inspect.signature(twin).parameters}


def _applies(point: Point, run) -> bool:
    """A causal, multi-head or given-blocks point only for the schedules that take
    is_causal, enable_gqa, blocks (or a tile)."""
    accepted = inspect.signature(run).parameters
    if point.is_causal and "is_causal" not in accepted:
        return False
    if point.blocks is not None and not {"blocks", "tile"} & accepted.keys():
        return False
    return point.heads is None or "enable_gqa" in accepted


def _the_count(result, like):
    """The element of a run's result that has the twin's type (an IOCount, or a hierarchy's
    count), and the arrays before it."""
    for k, value in enumerate(result):
        if type(value) is type(like):
            return value, result[:k]
    raise AssertionError(f"no {type(like).__name__} in the run's result")


#: The most simulated block steps a case of the grid may take, estimated from its count.
MAX_STEPS = 4000


def check_twin(name: str, point: Point, seed: int = 0) -> bool:
    """Run schedule ``name`` at ``point`` and compare with its twin and the exact core.
    Returns False when the point does not apply (or would take too long to simulate)."""
    run = SCHEDULES[name]
    if not _applies(point, run):
        return False
    twin = _twin(run)
    case, _ = _family(run)
    try:
        closed = twin(**_twin_arguments(point, run, twin))
    except AttnInputError:
        arrays, _ = case(point, run, seed)
        with pytest.raises(AttnInputError):  # a size the count refuses, the run refuses too
            run(*arrays, M=point.M, **_flags(point, run))
        return True
    words = closed.onchip if not isinstance(closed, IOCount) else closed
    if 3 * words.reads > MAX_STEPS * min(point.M, 3 * words.peak_fast):
        return False  # each step loads about a third of the words it holds, or more
    arrays, reference = case(point, run, seed)
    if words.peak_fast > point.M:  # given blocks that do not fit: the machine says so
        with pytest.raises(CapacityError):
            run(*arrays, M=point.M, **_flags(point, run))
        return True
    result = run(*arrays, M=point.M, **_flags(point, run))
    count, outputs = _the_count(result, closed)
    assert count == closed, (name, point, count, closed)
    assert words.peak_fast <= point.M
    assert len(outputs) == len(reference)
    for got, want in zip(outputs, reference, strict=True):
        assert_close(got, want)
    return True


# ---- one shared grid ---------------------------------------------------------------------------

# (n, m, d, d_v): one row or key, n < m and n > m, d_v ≠ d (and d_v > 2d + 2, where the backward
# pass's D pass needs its own smaller row block), sizes not divisible by the blocks, n up to
# 300 and d up to 64.
SHAPES = [
    (1, 1, 1, 1), (2, 3, 1, 1), (7, 7, 3, 3), (13, 9, 5, 2), (9, 13, 2, 3), (20, 20, 1, 8),
    (31, 31, 2, 2), (40, 33, 8, 8), (64, 64, 16, 16), (100, 100, 4, 4), (150, 131, 32, 32),
    (300, 211, 7, 11), (300, 300, 64, 64),
]  # fmt: skip
# (H, H_kv): multi-head, grouped-query, multi-query.
HEADS = [(2, 2), (4, 2), (6, 3), (4, 1)]


def _memories(n, d, d_v):
    """From the small-cache schedules' least M (5 forward, 6 backward) to past n·(d + d_v):
    the least M of the forward and backward FlashAttention passes (below it for the other
    pass), a cache of about d², and a large one."""
    lo_f, lo_b = flash_forward_min_M(d, d_v=d_v), flash_backward_min_M(d, d_v=d_v)
    return sorted({5, 6, 24, lo_f, lo_b, 5 * lo_b, 6 * d * d + 20 * d, 3 * n * (d + d_v) + 50})


GRID = [
    Point(n, m, d, d_v, M, is_causal, heads)
    for (n, m, d, d_v) in SHAPES
    for M in _memories(n, d, d_v)
    for is_causal in (False, True)
    for heads in [None] + (HEADS if n * m <= 1000 else [])
]


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_simulated_counts_equal_their_twins_on_the_grid(name):
    ran = [point for point in GRID if check_twin(name, point, seed=GRID.index(point))]
    assert len(ran) >= 25, len(ran)  # the grid reaches every schedule


def test_the_grid_covers_the_required_ranges():
    ns, ds = [p.n for p in GRID], [p.d for p in GRID]
    assert min(ns) == 1 and max(ns) == 300 and min(ds) == 1 and max(ds) == 64
    assert any(p.M == flash_backward_min_M(p.d, d_v=p.d_v) for p in GRID)
    assert any(p.M > p.n * (p.d + p.d_v) for p in GRID)
    assert {p.heads for p in GRID if p.is_causal} >= set(HEADS)


# ---- and hypothesis' draws ---------------------------------------------------------------------


@st.composite
def points(draw):
    n, m = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    d, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    heads = draw(st.sampled_from([None, (1, 1), (2, 2), (2, 1), (3, 1), (4, 2)]))
    lo = flash_forward_min_M(d, d_v=d_v)
    M = draw(st.sampled_from([3, 6, lo, lo + 1, 2 * lo, 4 * lo + 7, 10 * lo, 10**4]))
    blocks = draw(st.none() | st.tuples(st.integers(1, 9), st.integers(1, 9)))
    return Point(n, m, d, d_v, M, draw(st.booleans()), heads, blocks)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@given(point=points(), seed=st.integers(0, 2**32 - 1))
def test_simulated_counts_equal_their_twins_on_random_cases(name, point, seed):
    check_twin(name, point, seed)
