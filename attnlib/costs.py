"""What the compiled kernels cost: their tiles, memory and flops, and probes of this machine.

Counted, the same on every machine:

- :func:`block_sizes`: the B_r × B_c tiles of :func:`attnlib.flash_forward` and
  :func:`attnlib.flash_backward`, and :func:`dq_groups`, the backward's groups of key blocks;
- :func:`extra_memory_bytes`: what one forward and backward pass of the kernels allocates;
- :func:`flop_count`: the flops of the matrix products of one training step, by the
  ``"standard"`` algorithm (materialising softmax(QKᵀ)V) or the ``"flash"`` one (tiled).

Timed, on the machine at hand, for the two ingredients of a tile: :func:`gemm_rates` (a small
tile product against one large product) and :func:`exp_seconds` (an exponential per element:
the kernels' vectorisable one, numpy's, and libm's as numba calls it without fastmath). What
they return depends on the machine and its load: print it, never compare it in a test.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from ._blas import blas_on_calling_thread
from ._checks import check_choice, check_float_dtype, check_int, check_memory_parts
from ._exp import _exp_shifted
from .config import DQ_GROUPS, MAX_REPEATS
from .measure import median_time

__all__ = [
    "MAX_BLOCK",
    "TILE_MULADDS",
    "block_sizes",
    "dq_groups",
    "extra_memory_bytes",
    "flop_count",
    "gemm_rates",
    "exp_seconds",
]

#: The query and key rows of a tile, at most: 256 × 256 tiles of scores (256 KiB in float32).
#: Chosen by timing the kernels over tile shapes at d = 32, 64 and 128: smaller tiles spend
#: more of their time in BLAS's per-call work (packing the operands) and in the loops between
#: the products; larger ones leave too few blocks to share among threads at n = 512 and gain
#: nothing at large n.
MAX_BLOCK = 256

#: The most multiply-adds of one tile product, B_r·B_c·max(d, d_v) ≤ 2^23: for heads wider
#: than 128 the tiles shrink, which bounds what one thread works on (a tile of scores and its
#: blocks of Q, K, V, dO) as heads grow.
#: Products this large are ones that OpenBLAS would split over threads of its own (above 2^18,
#: interface/gemm.c), so the kernels pin BLAS to the calling thread while they run
#: (:func:`attnlib.fast.blas_on_calling_thread`): the threads are numba's, one per block.
TILE_MULADDS = 1 << 23


# ---------------------------------------------------------------------------------------
# Tile sizes, groups and extra memory
# ---------------------------------------------------------------------------------------


def block_sizes(d: int, d_v: int | None = None) -> tuple[int, int]:
    """(B_r, B_c): query rows and key rows per tile of the compiled kernels, for head
    dimensions d and d_v (default d).

    :data:`MAX_BLOCK` × :data:`MAX_BLOCK`, with B_r and then B_c halved in turn (not below 16)
    while a tile product, B_r·B_c·max(d, d_v) multiply-adds, exceeds :data:`TILE_MULADDS`.
    The sizes depend on the head dimensions only, never on the threads, so neither do the
    results.

    Raises
    ------
    AttnInputError
        if d or d_v is not a positive integer.

    Examples
    --------
    >>> block_sizes(64), block_sizes(256), block_sizes(512)
    ((256, 256), (128, 256), (128, 128))
    """
    d = check_int("d", d)
    w = max(d, d if d_v is None else check_int("d_v", d_v))
    br = bc = MAX_BLOCK
    while br * bc * w > TILE_MULADDS and (br > 16 or bc > 16):
        if br >= bc and br > 16:
            br //= 2
        else:
            bc //= 2
    return br, bc


def dq_groups(m: int, d: int, d_v: int | None = None) -> int:
    """G: the groups of key blocks of the backward pass for m keys, each with its own copy of
    dQ: :data:`attnlib.config.DQ_GROUPS`, or the number of key blocks if that is smaller.

    Raises
    ------
    AttnInputError
        if m, d or d_v is not a positive integer.

    Examples
    --------
    >>> dq_groups(4096, 64), dq_groups(300, 64), dq_groups(64, 64)
    (4, 2, 1)
    """
    m = check_int("m", m)
    return min(DQ_GROUPS, -(-m // block_sizes(d, d_v)[1]))


def extra_memory_bytes(
    n: int, m: int, d: int, d_v: int | None = None, *, dtype="float32", threads: int = 0
) -> int:
    """Bytes that :func:`attnlib.flash_forward` followed by :func:`attnlib.flash_backward`
    allocate beyond their inputs (chapter 10's proposition on extra memory):

    - the outputs O, lse, dQ, dK and dV: n(d_v + 1) + nd + m(d + d_v) numbers;
    - the blocked transposes of K and V: m(d + d_v) numbers;
    - the G - 1 extra copies of dQ (:func:`dq_groups`): (G - 1)·nd numbers;
    - D = rowsum(dO∘O): n float64 numbers;
    - with ``threads`` > 0, the scratch of that many threads, each working on one block at a
      time: the larger of the forward's (one tile, its B_r × d_v accumulator and a few rows:
      B_rB_c + B_r(d_v + 1) + B_c + 2 numbers and 3·B_r float64 numbers) and the backward's
      (two tiles: 2·B_rB_c + 2 numbers).

    Numbers take the bytes of ``dtype`` ("float32" or "float64").

    Raises
    ------
    AttnInputError
        if a size is not a positive integer, ``threads`` is negative, or ``dtype`` is not
        "float32" or "float64".

    Examples
    --------
    >>> extra_memory_bytes(4096, 4096, 64) / 2**20
    9.046875
    >>> (extra_memory_bytes(4096, 4096, 64, threads=2) - extra_memory_bytes(4096, 4096, 64)) / 2**20
    1.0000839233398438
    """
    n, m, d = (check_int(name, v) for name, v in (("n", n), ("m", m), ("d", d)))
    d_v = d if d_v is None else check_int("d_v", d_v)
    threads = check_int("threads", threads, minimum=0)
    size = np.dtype(check_choice("dtype", dtype, ("float32", "float64"))).itemsize
    words = n * (d_v + 1) + n * d + 2 * m * (d + d_v) + (dq_groups(m, d, d_v) - 1) * n * d
    br, bc = block_sizes(d, d_v)
    forward = size * (br * bc + br * (d_v + 1) + bc + 2) + 8 * 3 * br
    backward = size * (2 * br * bc + 2)
    scratch = max(forward, backward) + 36  # and 9 int32: a product's arguments, its status
    return size * words + 8 * n + threads * scratch


# ---------------------------------------------------------------------------------------
# Flops
# ---------------------------------------------------------------------------------------


def flop_count(n: int, m: int, d: int, d_v: int | None = None, *, kernels="flash") -> dict:
    """Floating-point operations of the matrix products of one forward and one backward pass.

    A multiply-add is 2 flops; elementwise work (exp, scaling, masking, dS = P∘(dP - D)) is not
    counted, and masks are ignored (no tile is skipped). For d_v = d, each n×m product costs
    2nmd flops:

    - ``"standard"`` (:func:`attnlib.attention_forward` / :func:`attnlib.attention_backward`,
      which materialise the n×m scores): forward S and PV; backward S again (P is recomputed
      from lse), dP, dV, dK and dQ. Total 14·n·m·d.
    - ``"flash"`` (:func:`attnlib.flash_forward` / :func:`attnlib.flash_backward`): the same
      products tile by tile, plus the forward's row sums of P by gemv (2nm).

    Parameters
    ----------
    n, m, d : query rows, key rows, head dimension (positive integers)
    d_v : value dimension, default d
    kernels : "standard" or "flash"

    Returns
    -------
    {"forward": flops, "backward": flops}, integers.

    Raises
    ------
    AttnInputError
        if a size is not a positive integer or ``kernels`` is unknown.

    Examples
    --------
    >>> flop_count(1024, 1024, 64, kernels="standard")
    {'forward': 268435456, 'backward': 671088640}
    """
    n, m, d = (check_int(name, v) for name, v in (("n", n), ("m", m), ("d", d)))
    d_v = d if d_v is None else check_int("d_v", d_v)
    check_choice("kernels", kernels, ("standard", "flash"))
    products = 2 * n * m  # flops per unit of inner dimension of one n×m product
    forward = products * (d + d_v)  # S = QKᵀ, then PV
    backward = products * (d + 2 * d_v + 2 * d)  # S, dP = dO Vᵀ, dV, dK, dQ
    if kernels == "flash":
        forward += products  # row sums of each tile of P, by gemv
    return {"forward": forward, "backward": backward}


# ---------------------------------------------------------------------------------------
# Probes of the machine at hand
# ---------------------------------------------------------------------------------------


@nb.njit(cache=True)
def _tile_products(A, B, C, repeats):
    for _ in range(repeats):
        np.dot(A, B, C)


@nb.njit(cache=True)
def _exp_loop(x, out, repeats):
    for _ in range(repeats):
        out[:] = x  # the routine works in place: each repeat pays for a copy too
        _exp_shifted(out, 0.0)


@nb.njit(cache=True)
def _libm_exp_loop(x, out, repeats):
    for _ in range(repeats):
        for c in range(x.size):
            out[c] = math.exp(x[c])


def _seconds(fn, *args) -> float:
    """Wall-clock seconds of ``fn(*args)``: the median of three calls
    (:func:`attnlib.measure.median_time`) after an untimed one, which loads (or compiles) a
    compiled ``fn`` outside the timing."""
    fn(*args)
    return median_time(fn, *args, clock="wall", min_repeats=3, min_total=0.0)


def gemm_rates(tile: int = 64, large: int = 2048, *, repeats: int = 2000, dtype="float32"):
    """(tile rate, large rate) in flop/s: ``repeats`` products of two tile × tile matrices
    called from compiled code with BLAS on the calling thread, as the kernels call it
    (:func:`attnlib.fast.blas_on_calling_thread`), against one large × large product by
    numpy with all of its BLAS threads.

    Raises
    ------
    AttnInputError
        if a size or ``repeats`` is not a positive integer (``repeats`` at most
        :data:`attnlib.config.MAX_REPEATS`), ``dtype`` is not float32 or float64 (a name or a
        numpy type), or the matrices would exceed :data:`attnlib.config.MAX_ALLOCATION_BYTES`.
    """
    tile, large = (check_int(name, v) for name, v in (("tile", tile), ("large", large)))
    repeats = check_int("repeats", repeats, maximum=MAX_REPEATS)
    dtype = check_float_dtype("dtype", dtype)
    matrices = [
        (3 * dtype.itemsize * tile**2, "the three tile × tile matrices", "tile"),
        (2 * dtype.itemsize * large**2, "the large × large matrix and its product", "large"),
    ]
    check_memory_parts("gemm_rates", matrices)
    A, B, C = (np.ones((tile, tile), dtype) for _ in range(3))
    X = np.random.default_rng(0).standard_normal((large, large), dtype=dtype)
    with blas_on_calling_thread():  # as the kernels call it
        tile_rate = 2 * tile**3 * repeats / _seconds(_tile_products, A, B, C, repeats)
    return tile_rate, 2 * large**3 / _seconds(np.matmul, X, X)


def exp_seconds(length: int = 4096, *, repeats: int = 2000) -> dict:
    """Seconds per float32 element of an exponential over ``length`` arguments in [-20, 0],
    ``repeats`` times: ``"attnlib"`` (the kernels' vectorisable routine, in place on a copy
    of the arguments made each time), ``"numpy"`` (``np.exp``) and ``"libm"`` (``math.exp``
    in a numba loop, as without fastmath).

    Raises
    ------
    AttnInputError
        if ``length`` or ``repeats`` is not a positive integer (``repeats`` at most
        :data:`attnlib.config.MAX_REPEATS`), or the two float32 vectors would exceed
        :data:`attnlib.config.MAX_ALLOCATION_BYTES`.
    """
    length = check_int("length", length)
    repeats = check_int("repeats", repeats, maximum=MAX_REPEATS)
    check_memory_parts("exp_seconds", [(8 * length, "the arguments and results", "length")])
    x = np.random.default_rng(0).random(length, dtype=np.float32)
    x *= -20
    out = np.empty_like(x)

    def numpy_loop(x, out, repeats):
        for _ in range(repeats):
            np.exp(x, out=out)

    seconds = {
        "attnlib": _seconds(_exp_loop, x, out, repeats),
        "numpy": _seconds(numpy_loop, x, out, repeats),
        "libm": _seconds(_libm_exp_loop, x, out, repeats),
    }
    return {name: t / (repeats * length) for name, t in seconds.items()}
