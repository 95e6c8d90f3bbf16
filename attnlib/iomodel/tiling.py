"""The bookkeeping every schedule on the two-level machine shares.

Index ranges of blocks and tiles, ceiling division and the floor sums that count the tiles of
a causal pass in closed form, the argument set (n, d, M, m, d_v) of a closed-form count, a pair
of block sizes given or chosen by a rule, the refusal of logits that overflow, and the start
and end of a run: inputs placed and outputs zeroed in slow memory, then the results read back
with the count. The schedules in :mod:`.flash`, :mod:`.standard`, :mod:`.smallcache` and
:mod:`.matmul` are written with these, so that each reads as its loop nest.
"""

from __future__ import annotations

import numpy as np

from .._checks import AttnInputError, check_int, check_memory, describe_int
from ..fast import check_logits_finite
from .machine import TwoLevelMemory

__all__ = [
    "ceil_div",
    "floor_sum",
    "block_ranges",
    "block_sizes",
    "span",
    "check_dims",
    "check_blocks",
    "resolve_blocks",
    "count_args",
    "check_run_logits",
    "MAX_MACHINE_STEPS",
    "check_machine_steps",
    "start_run",
    "tiled_product",
    "store_constant",
    "finish_run",
]


def ceil_div(a, b):
    """⌈a/b⌉ for positive integers (or integer arrays) a and b, in exact integer arithmetic.

    Examples
    --------
    >>> ceil_div(10, 4), ceil_div(8, 4)
    (3, 2)
    """
    return -(-a // b)


def floor_sum(count: int, divisor: int, a: int, b: int) -> int:
    """Σ_{j=0}^{count−1} ⌊(a·j + b)/divisor⌋ for integers count >= 0, divisor >= 1 and
    a, b >= 0, exactly, in O(log divisor) integer steps (no loop over j).

    The causal counts sum a floor (or ceiling) of a multiple of one block size over the
    blocks of the other, e.g. the key blocks Σ_i ⌈e_i/B_c⌉ that query block i keeps; this
    is that sum in closed form, whatever the sizes. The reduction is Euclid's (c is the
    divisor): with a >= c, ⌊(aj + b)/c⌋ = ⌊a/c⌋·j + ⌊((a mod c)·j + b)/c⌋, and likewise for
    b. With a, b < c the sum counts the lattice points (j, y), 0 <= j < count,
    1 <= y <= (aj + b)/c; counted by rows y instead of columns j they give a sum of the same
    form with count ⌊(a·count + b)/c⌋, divisor a and slope c, whose next reduction takes
    c mod a: the pair (c, a) steps as in Euclid's algorithm. Arguments are not validated
    (callers pass validated sizes).

    Examples
    --------
    >>> floor_sum(5, 3, 2, 1), sum((2 * j + 1) // 3 for j in range(5))
    (7, 7)
    """
    total = 0
    while True:
        if a >= divisor:
            total += (count - 1) * count // 2 * (a // divisor)
            a %= divisor
        if b >= divisor:
            total += count * (b // divisor)
            b %= divisor
        top = a * count + b  # the line's height at x = count
        if top < divisor:
            return total
        # the rows y = 1 .. ⌊top/c⌋ of the lattice points, as a sum over those rows
        count, b = divmod(top, divisor)
        divisor, a = a, divisor


def block_ranges(stop: int, size: int, start: int = 0) -> list[tuple[int, int]]:
    """The half-open ranges ``(s, t)`` of at most ``size`` indices that cover
    ``range(start, stop)`` in order; the last one may be short.

    Examples
    --------
    >>> block_ranges(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    >>> block_ranges(9, 2, start=6)
    [(6, 8), (8, 9)]

    Raises AttnInputError if the list would exceed the memory limit (about 150 bytes a
    range: a tuple of two ints).
    """
    check_memory("block_ranges' list", 150 * ceil_div(max(stop - start, 0), size), culprits="stop")
    return [(s, min(s + size, stop)) for s in range(start, stop, size)]


def block_sizes(extent: int, size: int, *, dtype=np.int64) -> np.ndarray:
    """The lengths of :func:`block_ranges` ``(extent, size)``, as an int64 array, or with
    ``dtype=object`` as Python ints (for sizes beyond int64).

    Examples
    --------
    >>> block_sizes(10, 4).tolist()
    [4, 4, 2]

    Raises AttnInputError if the array would exceed the memory limit.
    """
    t = ceil_div(extent, size)
    check_memory("block_sizes' array", (8 if dtype is np.int64 else 40) * t, culprits="extent")
    # a size beyond the extent is one block of the whole extent (and need not fit the dtype)
    sizes = np.full(t, min(size, extent), dtype=dtype)
    sizes[-1] = extent - size * (t - 1)
    return sizes


def span(r: tuple[int, int]) -> int:
    """The number of indices of a range ``(start, stop)``."""
    return r[1] - r[0]


def check_dims(n, d, M, m=None, d_v=None) -> tuple[int, int, int, int, int]:
    """Validate the sizes of a closed-form count: n, d, M and, defaulting to n and d, m and d_v.

    Returns ``(n, d, M, m, d_v)`` as ints. Raises AttnInputError naming the first argument
    that is not an integer >= 1.
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    m = n if m is None else check_int("m", m)
    d_v = d if d_v is None else check_int("d_v", d_v)
    return n, d, M, m, d_v


def check_blocks(blocks) -> tuple[int, int]:
    """Validate a pair ``(B_r, B_c)`` of block sizes (a tuple or list of two positive ints).

    Raises AttnInputError if ``blocks`` is not such a pair.
    """
    if not isinstance(blocks, tuple | list) or len(blocks) != 2:
        raise AttnInputError(f"blocks must be a pair (B_r, B_c) of positive ints, got {blocks!r}")
    return check_int("blocks[0] (B_r)", blocks[0]), check_int("blocks[1] (B_c)", blocks[1])


def resolve_blocks(blocks, rule, d: int, M: int, d_v: int) -> tuple[int, int]:
    """The block sizes of a run: ``blocks`` as given (validated by :func:`check_blocks`), or
    ``rule(d, M, d_v=d_v)`` when it is None. Raises AttnInputError for a bad pair or an M
    the rule refuses."""
    return rule(d, M, d_v=d_v) if blocks is None else check_blocks(blocks)


def count_args(n, d, M, m, d_v, blocks, rule) -> tuple[int, int, int, int, int, int, int]:
    """The arguments of a blocked closed-form count: :func:`check_dims` and then the blocks of
    :func:`resolve_blocks`, as ``(n, d, M, m, d_v, B_r, B_c)``. Raises AttnInputError for an
    invalid size, a bad pair of blocks or an M the rule refuses."""
    n, d, M, m, d_v = check_dims(n, d, M, m, d_v)
    return (n, d, M, m, d_v, *resolve_blocks(blocks, rule, d, M, d_v))


def check_run_logits(Q, K, tau: float, dtype, *, query: str = "Q") -> None:
    """Refuse a run whose logits τ·QKᵀ overflow ``dtype``, the dtype the run computes in,
    with the compiled kernels' error (:func:`attnlib.fast.check_logits_finite`). Q is (n, d)
    and K (m, d), already validated.

    Without this check a schedule would return, for finite inputs, O = 0 and lse = −inf (the
    output of a fully masked row: an overflowing maximum gives exp(−inf − (+inf))) or NaN.
    ``query`` is the public argument that holds Q when it is called otherwise (``q`` of a
    decoding step), so that the message names it.

    Raises AttnInputError naming Q (or ``query``), K and scale if a logit overflows.
    """
    try:
        check_logits_finite(Q.astype(dtype, copy=False), K.astype(dtype, copy=False), tau)
    except AttnInputError as err:
        if query == "Q":
            raise
        raise AttnInputError(f"{err} (here Q is the argument {query})") from None


#: The most block steps (loads of a block with the work on it) a schedule runs on the
#: machine. A step is a few numpy calls, so this bounds a run to minutes; a larger run is
#: refused before it starts. Its closed-form count (``*_count``) gives its words at
#: any size, in constant time.
MAX_MACHINE_STEPS = 10**6


def check_machine_steps(
    steps: int, who: str, change: str = "a larger M or shorter Q and K"
) -> None:
    """Refuse, before it starts, a run of ``who`` that would take more than
    :data:`MAX_MACHINE_STEPS` block steps; ``change`` names the public arguments that
    would shorten it. Raises AttnInputError."""
    if steps > MAX_MACHINE_STEPS:
        raise AttnInputError(
            f"{who} would take {describe_int(steps)} block steps on the machine, more than "
            f"MAX_MACHINE_STEPS = {MAX_MACHINE_STEPS:,} (a minute or two): choose {change}, "
            "or use the closed-form count"
        )


def start_run(M: int, record: bool, dtype, inputs: dict, outputs: dict) -> TwoLevelMemory:
    """A :class:`TwoLevelMemory` of M words with ``inputs`` ({name: array}, converted to
    ``dtype``) placed and ``outputs`` ({name: shape}) zero-filled in slow memory; neither is
    I/O. Raises AttnInputError for an invalid M or array (see the machine)."""
    mem = TwoLevelMemory(M, record=record)
    for name, array in inputs.items():
        mem.put(name, np.asarray(array).astype(dtype, copy=False))
    for name, shape in outputs.items():
        mem.zeros(name, shape, dtype=dtype)
    return mem


def tiled_product(
    mem, out, left, right, rows, cols, inner, dtype, *, transposed=False, factor=None
):
    """out[R, C] = factor · Σ_L left[R, L] · right[L, C] by blocks, for each R of ``rows`` and
    C of ``cols``: an accumulator of R × C held in fast memory while the blocks of the two
    factors stream past it along ``inner`` (one of each live at a time), then stored once.

    ``out``, ``left`` and ``right`` name slow arrays; with ``transposed`` the left factor is
    stored transposed, so its block is ``left[L, R]``. ``factor`` None stores the sum as it is.
    Raises :class:`CapacityError` if an accumulator and two blocks do not fit.
    """
    for R in rows:
        for C in cols:
            acc = mem.alloc((span(R), span(C)), dtype=dtype)
            for L in inner:
                a = mem.load(left, L, R) if transposed else mem.load(left, R, L)
                b = mem.load(right, L, C)
                acc += (a.T if transposed else a) @ b
                mem.free(a, b)
            mem.store(out, R, C, acc if factor is None else factor * acc)
            mem.free(acc)


def store_constant(mem, rows, dtype, **blocks) -> None:
    """Store constant blocks ``name=(width, value)`` (width None: a vector) into ``rows`` of
    the slow arrays ``name``, all live in fast memory at once: the outputs of a block row or
    column that a mask empties."""
    r = span(rows)
    fast = [
        (name, mem.alloc(r if w is None else (r, w), dtype=dtype, fill=value))
        for name, (w, value) in blocks.items()
    ]
    for name, block in fast:
        mem.store(name, rows, None, block)
    mem.free(*(block for _, block in fast))


def finish_run(mem: TwoLevelMemory, names, record: bool) -> tuple:
    """End a run: check that every fast block was freed (:meth:`TwoLevelMemory.finish`) and
    return the slow arrays ``names``, the :class:`IOCount`, and with ``record`` the machine.

    Raises :class:`MachineError` if a fast block is still live.
    """
    count = mem.finish()
    arrays = tuple(mem.get(name) for name in names)
    return (*arrays, count, mem) if record else (*arrays, count)
