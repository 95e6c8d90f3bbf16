"""FlashAttention on real machines' roofs: the roofline, and the intensity of each pass.

The roofline model (Williams, Waterman and Patterson 2009) caps a kernel's speed at
min(peak FLOP/s, intensity × bandwidth): a kernel whose arithmetic intensity (flops per word
moved to and from main memory) is below the machine balance, peak / bandwidth in words, is
bound by memory; above it, by arithmetic. The machines are the :class:`~attnlib.machines.Device`
presets of :mod:`attnlib.machines` (and the measured CPU); the intensities come from the exact
I/O counts of :mod:`attnlib.iomodel` with the on-chip memory of one SM as the fast memory.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import (
    AttnInputError,
    as_real_array,
    check_bool,
    check_choice,
    check_int,
    check_positive_real,
    describe_int,
)
from ..machines import Device, check_device, machine_balance
from .blocks import flash_backward_min_M, flash_forward_min_M
from .gqa import decode_count
from .intensity import _per_word, arithmetic_intensity, attention_flops

__all__ = [
    "attainable_flops",
    "no_overlap_flops",
    "flash_intensity",
    "decode_intensity",
    "exp_roof",
    "RooflinePoint",
    "roofline_point",
]


def _intensities(intensity):
    if np.ndim(intensity) == 0:
        return check_positive_real("intensity", intensity)
    arr = as_real_array("intensity", intensity, ndim=None)
    if not np.all(arr > 0):
        raise AttnInputError("intensity must be positive everywhere")
    return arr


def _roofs(intensity, device, dtype):
    """(compute roof, memory roof) in FLOP/s: the peak, and intensity × words per second
    (inf where that product is beyond the float range: the peak is then the smaller)."""
    device, x = check_device(device), _intensities(intensity)
    with np.errstate(over="ignore"):
        memory = np.multiply(x, device.words_per_second(dtype))
    if np.any(memory == 0):  # intensity × bandwidth below the smallest float
        raise AttnInputError(
            "intensity is too small: intensity × words per second rounds to 0 FLOP/s"
        )
    return device.peak(dtype), memory


def attainable_flops(intensity, device: Device, dtype: str):
    """The roofline: min(peak, intensity × words per second), in FLOP/s, for an intensity in
    flops per word of ``dtype`` (a number or an array). Raises AttnInputError for a
    non-positive intensity (or one so small that the rate rounds to 0), a non-Device or an
    unknown dtype.

    Examples
    --------
    >>> from attnlib.machines import H100_SXM5
    >>> attainable_flops(2.0, H100_SXM5, "bfloat16") / 1e12   # decode-like: memory-bound
    3.35
    """
    peak, memory = _roofs(intensity, device, dtype)
    top = np.minimum(peak, memory)
    return float(top) if np.ndim(top) == 0 else top


def no_overlap_flops(intensity, device: Device, dtype: str):
    """FLOP/s of a kernel that never overlaps its memory traffic with its arithmetic: the time
    is the sum F/peak + W/bandwidth, so the rate is peak · I / (I + β) with β the
    :func:`~attnlib.machines.machine_balance`. At the balance point it is half the peak, where
    the roofline promises all of it. Raises AttnInputError as :func:`attainable_flops`.

    The rate is computed as lo / (1 + lo/hi), lo and hi the smaller and larger of the two
    roofs (peak and I × words per second), which equals 1/(1/peak + 1/(I·words per second))
    and stays finite and accurate for every intensity the roofline accepts.
    """
    peak, memory = _roofs(intensity, device, dtype)
    lo, hi = np.minimum(peak, memory), np.maximum(peak, memory)
    rate = lo / (1 + lo / hi)
    return float(rate) if np.ndim(rate) == 0 else rate


def _fast_memory(device: Device, dtype: str, d: int, which: str) -> int:
    """One SM's on-chip words of ``dtype`` (:meth:`~attnlib.machines.Device.onchip_words`),
    refused, naming d and the device, when FlashAttention's ``which`` pass with head dimension
    d does not fit (below :func:`~attnlib.iomodel.flash_forward_min_M` or its backward
    twin)."""
    M = device.onchip_words(dtype)
    least = (flash_forward_min_M if which == "forward" else flash_backward_min_M)(d)
    if M < least:
        raise AttnInputError(
            f"d={describe_int(d)} is too large for device {device.name}: FlashAttention's "
            f"{which} pass needs at least {describe_int(least)} words of fast memory, and its "
            f"smem_bytes + regs_bytes hold {M} words of {dtype}"
        )
    return M


def flash_intensity(
    n: int,
    d: int,
    M: int,
    *,
    which: str = "forward",
    d_v: int | None = None,
    is_causal=False,
    blocks=None,
) -> float:
    """Flops per main-memory word of FlashAttention-2's forward or backward pass on one head
    of self-attention (m = n), with a fast memory of M words: by default with the block
    rule's tiles (:func:`~attnlib.iomodel.flash_forward_blocks`, the largest that fit M), or
    with the tiles ``blocks`` = (B_r, B_c) a real kernel uses.

    Flops are :func:`attnlib.iomodel.attention_flops`: 2 per multiply-add of the matrix
    products only (forward 4·n²·d for d_v = d, backward 10·n²·d; the softmax's exponentials
    are not counted, as in FA2's benchmarks); with ``is_causal`` only the n(n+1)/2 kept
    scores' flops. Words are the exact count's total (reads + writes) of
    :func:`~attnlib.iomodel.flash_forward_count` or :func:`~attnlib.iomodel.flash_backward_count`
    (their causal form with ``is_causal``). Raises AttnInputError for sizes below 1, M below
    the schedule's minimum, blocks whose working set exceeds M, an unknown ``which``, or an
    intensity beyond the float range.

    Examples
    --------
    >>> from attnlib.machines import H100_SXM5
    >>> M = H100_SXM5.onchip_words("bfloat16")
    >>> round(flash_intensity(4096, 128, M)), round(flash_intensity(4096, 128, M, blocks=(128, 64)))
    (910, 248)
    """
    which = check_choice("which", which, ("forward", "backward"))
    is_causal = check_bool("is_causal", is_causal)
    return arithmetic_intensity(n, d, M, d_v=d_v, which=which, is_causal=is_causal, blocks=blocks)


def exp_roof(device: Device, d: int, *, which: str = "forward", d_v: int | None = None) -> float:
    """The ceiling the exponentials put on attention's counted FLOP/s: ``device.exp_rate``
    (exponentials per second) × the matrix-multiply flops per exponential.

    Every score costs one exponential, in the forward pass and again in the backward (which
    recomputes P), and 2(d + d_v) forward or 2(3d + 2d_v) backward flops
    (:func:`~attnlib.iomodel.attention_flops` of one score), so the ceiling is
    exp_rate · 2(d + d_v) forward: 512 flops per exponential at d = d_v = 128. It is a roof
    of its own, flat in the intensity; a kernel that does not overlap its exponentials with
    its products runs at most at 1/(1/peak + 1/roof). Raises AttnInputError for a device
    without an exponential rate, d or d_v below 1, or an unknown ``which``.

    Examples
    --------
    >>> from attnlib.machines import H100_SXM5
    >>> round(exp_roof(H100_SXM5, 128) / H100_SXM5.peak("bfloat16"), 2)
    2.0
    """
    device = check_device(device)
    if device.exp_rate is None:
        raise AttnInputError(f"device {device.name} has no exponential rate (exp_rate)")
    per_exp = attention_flops(1, check_int("d", d), d_v=d_v, which=which)  # one score
    return device.exp_rate * per_exp


def decode_intensity(
    m: int, d: int, M: int, *, H: int = 1, H_kv: int = 1, d_v: int | None = None
) -> float:
    """Flops per main-memory word of one decoding step (one new query per head against a
    cache of m keys, H query heads sharing H_kv key/value heads): H single-query
    :func:`~attnlib.iomodel.attention_flops` over :func:`~attnlib.iomodel.decode_count`.
    About 2·H/H_kv: grouping the heads multiplies the intensity by the group size. Raises
    AttnInputError for sizes below 1, H not a multiple of H_kv, or an intensity beyond the
    float range.

    Examples
    --------
    >>> [round(decode_intensity(8192, 128, 65536, H=H), 1) for H in (1, 8)]
    [2.0, 16.0]
    """
    count = decode_count(m, d, M, d_v=d_v, H=H, H_kv=H_kv)
    flops = H * attention_flops(1, d, m=m, d_v=d_v)
    return _per_word(flops, count.total, "H, m and M are")


class RooflinePoint(NamedTuple):
    """A kernel on a device's roofline: ``intensity`` (flops per word), ``attainable``
    (FLOP/s, :func:`attainable_flops`), ``fraction`` of the peak, ``over_balance`` =
    intensity / :func:`~attnlib.machines.machine_balance` (below 1: memory-bound)."""

    intensity: float
    attainable: float
    fraction: float
    over_balance: float


def roofline_point(
    device: Device,
    dtype: str,
    n: int,
    d: int,
    *,
    which: str = "forward",
    is_causal=False,
    blocks=None,
) -> RooflinePoint:
    """FlashAttention-2's pass on ``device`` in ``dtype``: :func:`flash_intensity` with the
    fast memory of one SM (:meth:`~attnlib.machines.Device.onchip_words`), placed on the
    roofline; with the block rule's tiles for that memory, or with ``blocks`` = (B_r, B_c).
    Raises AttnInputError for a device without on-chip sizes, a d whose pass does not fit
    one SM, blocks that do not fit it, or bad arguments."""
    device = check_device(device)
    d = check_int("d", d)
    which = check_choice("which", which, ("forward", "backward"))
    M = _fast_memory(device, dtype, d, which)
    x = flash_intensity(n, d, M, which=which, is_causal=is_causal, blocks=blocks)
    top = attainable_flops(x, device, dtype)
    return RooflinePoint(x, top, top / device.peak(dtype), x / machine_balance(device, dtype))
