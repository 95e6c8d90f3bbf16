"""The arithmetic and timing of the compiled kernels: the flops of their matrix products
(:func:`flop_count`), and timing probes for the two ingredients of a tile on the machine at
hand: a small gemm tile product against one large product, and an exponential per element
(attnlib's vectorisable one, numpy's, and libm's as numba calls it without fastmath).

Exported by :mod:`attnlib.fast`; chapter 10 uses them to say what limits the kernels' speed.
The numbers depend on the machine and its load: print them, never compare them in a test.
"""

from __future__ import annotations

import math
import time

import numba as nb
import numpy as np

from ._checks import check_choice, check_float_dtype, check_int, check_memory_parts
from ._exp import _exp_shifted
from ._tiles import blas_on_calling_thread
from .config import MAX_REPEATS


def flop_count(n: int, m: int, d: int, dv: int | None = None, *, path: str = "tiled") -> dict:
    """Floating-point operations of the matrix products of one forward and one backward pass.

    A multiply-add is 2 flops; elementwise work (exp, scaling, masking, dS = P∘(dP - D)) is not
    counted, and masks are ignored (no tile is skipped). For d_v = d, each n×m product costs
    2nmd flops:

    - ``"exact"`` (:func:`attnlib.attention_forward` / :func:`attnlib.attention_backward`):
      forward S and PV; backward S again (P is recomputed from lse), dP, dV, dK and dQ.
      Total 14·n·m·d.
    - ``"tiled"`` (:func:`flash_forward` / :func:`flash_backward`): the same products tile by
      tile, plus the forward's row sums of P by gemv (2nm).

    Parameters
    ----------
    n, m, d : query rows, key rows, head dimension (positive integers)
    dv : value dimension, default d
    path : "exact" or "tiled"

    Returns
    -------
    {"forward": flops, "backward": flops}, integers.

    Raises
    ------
    AttnInputError
        if a size is not a positive integer or ``path`` is unknown.

    Examples
    --------
    >>> flop_count(1024, 1024, 64, path="exact")
    {'forward': 268435456, 'backward': 671088640}
    """
    n, m, d = (check_int(name, v) for name, v in (("n", n), ("m", m), ("d", d)))
    dv = d if dv is None else check_int("dv", dv)
    check_choice("path", path, ("exact", "tiled"))
    products = 2 * n * m  # flops per unit of inner dimension of one n×m product
    forward = products * (d + dv)  # S = QKᵀ, then PV
    backward = products * (d + 2 * dv + 2 * d)  # S, dP = dO Vᵀ, dV, dK, dQ
    if path == "tiled":
        forward += products  # row sums of each tile of P, by gemv
    return {"forward": forward, "backward": backward}


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
    """Wall-clock seconds of ``fn(*args)``, the best of three calls after a warm-up call."""
    fn(*args)
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


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
    tile = check_int("tile", tile)
    large = check_int("large", large)
    repeats = check_int("repeats", repeats, maximum=MAX_REPEATS)
    dtype = check_float_dtype("dtype", dtype)
    size = dtype.itemsize
    check_memory_parts(
        "gemm_rates",
        [
            (3 * size * tile**2, "the three tile × tile matrices", "tile"),
            (2 * size * large**2, "the large × large matrix and its product", "large"),
        ],
    )
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
