"""What the compiled kernels (:mod:`attnlib.fast`) require of their inputs before they run.

- **Memory**: :func:`_kernel_parts`, the kernels' own arrays for every head, which
  :func:`attnlib._heads.normalise` adds to the inputs' conversions and copies before it
  refuses a call over the limit.
- **Overflow**: a logit τ·q_i·k_j beyond the dtype would give an infinite row sum; such
  inputs are refused (:func:`_refuse_overflow`), in the exact core's words, and a key that
  the mask or causality drops never counts. An accumulator of up to m value rows is kept in
  range by scaling V by a power of two (:func:`_value_shift`).
- **Frozen strides**: every array a kernel sees is a read-only, C-contiguous view with the
  canonical strides of its shape (:func:`_frozen`), so that numba compiles one version per
  dtype and BLAS is told the strides the memory has.
"""

from __future__ import annotations

import functools

import numba as nb
import numpy as np

from ._checks import AttnInputError
from ._heads import Problem
from .costs import extra_memory_bytes
from .logits import max_row_norm


def _kernel_parts(p: Problem) -> list:
    """The kernels' working memory for problem ``p``, as
    :func:`attnlib._checks.check_memory_parts` parts: :func:`attnlib.costs.extra_memory_bytes`
    for every head (the outputs, blocked transposes and copies of dQ), with the scratch of
    every numba thread, and a contiguous copy of the mask when its (n, m) rows are not (a
    broadcast view becomes a full array)."""
    kernel = _kernel_bytes(p.n, p.m, p.d, p.d_v, p.dtype.name, nb.get_num_threads()) * p.heads
    parts = [(kernel, "the kernels' outputs, blocked transposes and scratch", "Q, K or V")]
    if p.mask is not None and not p.keep(0).flags.c_contiguous:
        parts.append((p.n * p.m, "a contiguous copy of mask", "mask"))
    return parts


@functools.lru_cache(maxsize=256)
def _kernel_bytes(n: int, m: int, d: int, d_v: int, dtype: str, threads: int) -> int:
    """:func:`attnlib.costs.extra_memory_bytes` of one head, remembered: every call of the
    kernels asks for it, mostly for sizes asked before."""
    return extra_memory_bytes(n, m, d, d_v, dtype=dtype, threads=threads)


def _frozen(x: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous view of x with the canonical strides of its shape (a copy
    only if x is not C-contiguous).

    numba compiles one machine-code version per combination of argument types, and an array's
    type includes its layout and whether it is writeable. Handing every kernel read-only
    C-contiguous inputs, whatever the caller passed (read-only, Fortran order, negative
    strides), keeps it at one compiled version per dtype. Only the view is frozen: the
    caller's array keeps its flags.

    Numpy leaves the stride of a length-1 axis arbitrary and still flags the array
    C-contiguous (``x[None]`` and ``np.broadcast_to`` give 0), so ``np.ascontiguousarray``
    returns it as it is. Such a stride is never used to reach an element, so the same
    memory is viewed with the canonical strides instead, without a copy: every row of a
    tile then has the row stride that BLAS is told.
    """
    view = np.ascontiguousarray(x)
    canonical = _c_strides(view.shape, view.itemsize)
    if view.strides != canonical:
        view = np.lib.stride_tricks.as_strided(view, strides=canonical, writeable=False)
    else:
        view = view.view()
    view.flags.writeable = False
    return view


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-ordered array of ``shape``."""
    strides, step = [], itemsize
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _logits_bounded(Q: np.ndarray, K: np.ndarray, scale: float) -> bool:
    """Whether Cauchy–Schwarz alone shows that no logit τ·q_i·k_j, nor q_i·k_j, overflows the
    dtype, for every row q_i of Q and k_j of K (arrays of any number of dimensions, rows
    along the last)."""
    dtype = Q.dtype
    big = float(np.finfo(dtype).max)
    d = Q.shape[-1]
    slack = 1 + (d + 2) * 2.3e-16
    if dtype == np.float32:
        slack *= 1 + (d + 2) * float(np.finfo(np.float32).eps)

    def fits(bound: float) -> bool:
        bound *= slack
        return bound <= big and scale * bound <= big

    # first from the largest entries alone (‖q‖₂ ≤ √d·max|q_k|): two passes over each array
    # without temporaries, enough for all but huge entries; then from the row norms
    if fits(d * _max_abs(Q) * _max_abs(K)):
        return True
    return fits(max_row_norm(Q.reshape(-1, d)) * max_row_norm(K.reshape(-1, d)))


def _max_abs(X: np.ndarray) -> float:
    """max |x| over a finite float array, as a Python float."""
    return max(float(X.max()), -float(X.min()))


def _refuse_overflow(p: Problem) -> None:
    """Refuse problem ``p`` if a kept logit of some head overflows its dtype: the bound of
    :func:`_logits_bounded` over every head at once, else head by head (query head h with
    key/value head h // g)."""
    if _logits_bounded(p.Q, p.K, p.scale):
        return
    for h in range(p.heads):
        _refuse_overflow_2d(p.Q[h], p.K[h // p.g], p.scale, p.keep(h), p.is_causal)


def _refuse_overflow_2d(Q, K, scale: float, keep=None, is_causal: bool = False) -> None:
    """Refuse Q (n, d) and K (m, d), validated and of one dtype, if a logit τ·q_i·k_j, or
    q_i·k_j itself, is not finite in their dtype where the (n, m) keep-mask ``keep`` (None:
    every key) and ``is_causal`` (j <= i) keep it. Unless the Cauchy–Schwarz bound clears
    them, the logits are computed a block of rows at a time, as the kernels compute them."""
    if _logits_bounded(Q, K, scale):
        return
    dtype = Q.dtype
    big = float(np.finfo(dtype).max)
    rows = max(1, (1 << 22) // K.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for i0 in range(0, Q.shape[0], rows):
            S = Q[i0 : i0 + rows] @ K.T
            bad = ~(np.isfinite(S) & (np.abs(S, dtype=np.float64) * scale <= big))
            if keep is not None:
                bad &= keep[i0 : i0 + rows]
            if is_causal:
                bad &= np.tri(S.shape[0], S.shape[1], i0, dtype=bool)
            if bad.any():
                raise AttnInputError(
                    f"the logits scale * Q @ K.T overflow {dtype}: Q, K or scale is too large"
                )


def _value_shift(V: np.ndarray) -> int:
    """A power of two to divide V by before the forward kernel, 0 when none is needed.

    O is a convex combination of V's rows, but the kernel adds up to m weighted rows (each
    weight at most 1) before it divides by the row sum. When m·max|V| could overflow the
    dtype, V is scaled by 2^-shift, which is exact, and O is scaled back.
    """
    m = V.shape[-2]
    vmax = _max_abs(V)
    if vmax <= float(np.finfo(V.dtype).max) / (4.0 * m):
        return 0
    return int(np.ceil(np.log2(m))) + 2
