"""Real machines as roofs: device presets, machine balance, and FlashAttention's intensity.

The roofline model (Williams, Waterman and Patterson 2009) caps a kernel's speed at
min(peak FLOP/s, intensity × bandwidth): a kernel whose arithmetic intensity (flops per word
moved to and from main memory) is below the machine balance, peak / bandwidth in words, is
bound by memory; above it, by arithmetic. :class:`Device` holds a machine's roofs and its
memory capacities, with the ``references.bib`` keys of the vendor documents they come from;
:func:`measure_cpu` measures the machine the book runs on. The intensities come from the exact
I/O counts of :mod:`attnlib.iomodel` with the on-chip memory of one SM as the fast memory.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
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
from ..nbtools import machine_rates

# The package's public names (not its modules), so that this module follows them if they move.
from . import (
    arithmetic_intensity,
    attention_flops,
    decode_count,
    flash_backward_min_M,
    flash_forward_min_M,
)
from .intensity import _per_word

__all__ = [
    "WORD_BYTES",
    "Device",
    "A100_SXM_80GB",
    "H100_SXM5",
    "MI300X",
    "GPUS",
    "measure_cpu",
    "machine_balance",
    "attainable_flops",
    "no_overlap_flops",
    "flash_intensity",
    "decode_intensity",
    "RooflinePoint",
    "roofline_point",
]

#: Bytes per word of each dtype the presets know.
WORD_BYTES = {"bf16": 2, "fp32": 4, "fp64": 8}

KIB, MIB, GIB = 2**10, 2**20, 2**30


def _optional_int(name, value):
    return None if value is None else check_int(name, value)


def _optional_rate(name, value):
    return None if value is None else check_positive_real(name, value)


@dataclass(frozen=True)
class Device:
    """One machine's roofs and memories.

    Fields
    ------
    name : str
    bandwidth : main-memory (HBM, DRAM) bandwidth in bytes per second
    peak_bf16 : dense bf16 FLOP/s on the matrix units (tensor cores, FP32 accumulate), or None
    peak_fp32 : FP32 FLOP/s on the ordinary vector units (CUDA cores; not tensor-core TF32)
    peak_fp64 : FP64 FLOP/s, or None (given for the measured CPU only)
    llc_bytes : last-level cache before main memory (L2 on NVIDIA, the Infinity Cache on the
        MI300X), or None
    smem_bytes : shared memory (LDS) per SM (CU), the most a kernel can configure, or None
    regs_bytes : register file per SM (CU), or None
    sms : number of SMs (CUs), or cores for a CPU
    source : the ``references.bib`` keys the numbers come from
    memory_bytes : main-memory (HBM, DRAM) capacity, or None

    Vendors state capacities in KB, MB and GB; they are binary units (1 KB = 1024 bytes), as the
    CUDA and ROCm device queries report them. Rates are decimal (1 TB/s = 10¹² bytes/s).

    Raises AttnInputError for a rate or size that is not positive, or an empty name.
    """

    name: str
    bandwidth: float
    peak_bf16: float | None
    peak_fp32: float
    peak_fp64: float | None = None
    llc_bytes: int | None = None
    smem_bytes: int | None = None
    regs_bytes: int | None = None
    sms: int | None = None
    source: str = ""
    memory_bytes: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise AttnInputError(f"name must be a non-empty string, got {self.name!r:.60}")
        object.__setattr__(self, "bandwidth", check_positive_real("bandwidth", self.bandwidth))
        object.__setattr__(self, "peak_fp32", check_positive_real("peak_fp32", self.peak_fp32))
        for rate in ("peak_bf16", "peak_fp64"):
            object.__setattr__(self, rate, _optional_rate(rate, getattr(self, rate)))
        for size in ("llc_bytes", "smem_bytes", "regs_bytes", "sms", "memory_bytes"):
            object.__setattr__(self, size, _optional_int(size, getattr(self, size)))
        if not isinstance(self.source, str):
            raise AttnInputError(f"source must be a string, got {type(self.source).__name__}")

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s in ``dtype`` ("bf16", "fp32" or "fp64"). Raises AttnInputError for
        an unknown dtype or one this device has no figure for."""
        check_choice("dtype", dtype, tuple(WORD_BYTES))
        value = getattr(self, f"peak_{dtype}")
        if value is None:
            raise AttnInputError(f"dtype {dtype!r}: {self.name} has no peak FLOP/s for it")
        return value

    def words_per_second(self, dtype: str) -> float:
        """Main-memory bandwidth in words of ``dtype`` per second. Raises AttnInputError for
        an unknown dtype, or a bandwidth so small that it rounds to 0 words per second."""
        check_choice("dtype", dtype, tuple(WORD_BYTES))
        rate = self.bandwidth / WORD_BYTES[dtype]
        if rate == 0:
            raise AttnInputError(
                f"device {self.name}: bandwidth = {self.bandwidth:g} bytes/s rounds to 0 words "
                f"of {dtype} per second"
            )
        return rate

    def onchip_words(self, dtype: str) -> int:
        """Words of ``dtype`` in one SM's shared memory and registers together: the fast
        memory M of the two-level model for a kernel that runs one block per SM. Raises
        AttnInputError for an unknown dtype or a device without these sizes, or with less
        than one word of ``dtype``."""
        check_choice("dtype", dtype, tuple(WORD_BYTES))
        if self.smem_bytes is None or self.regs_bytes is None:
            raise AttnInputError(f"device {self.name} has no shared memory or register size")
        words = (self.smem_bytes + self.regs_bytes) // WORD_BYTES[dtype]
        if words == 0:
            raise AttnInputError(
                f"device {self.name}: smem_bytes + regs_bytes hold no whole word of {dtype}"
            )
        return words

    def llc_words(self, dtype: str) -> int:
        """Words of ``dtype`` in the last-level cache. Raises AttnInputError for an unknown
        dtype or a device without a cache size, or with less than one word of ``dtype``."""
        check_choice("dtype", dtype, tuple(WORD_BYTES))
        if self.llc_bytes is None:
            raise AttnInputError(f"device {self.name} has no last-level cache size")
        words = self.llc_bytes // WORD_BYTES[dtype]
        if words == 0:
            raise AttnInputError(f"device {self.name}: llc_bytes hold no whole word of {dtype}")
        return words


# The presets, one row each: name, HBM bytes/s, dense bf16 tensor FLOP/s, vector FP32 FLOP/s,
# last-level cache (MiB), shared memory and registers per SM or CU (KiB), SMs or CUs,
# HBM capacity (GiB), sources.
A100_SXM_80GB, H100_SXM5, MI300X = (
    Device(name, bw, bf16, fp32, None, llc * MIB, smem * KIB, regs * KIB, sms, source, hbm * GIB)
    for name, bw, bf16, fp32, llc, smem, regs, sms, hbm, source in (
        ("NVIDIA A100 SXM 80GB", 2039e9, 312e12, 19.5e12, 40, 164, 256, 108, 80,
         "nvidia_a100_datasheet, nvidia_a100_whitepaper, nvidia_ampere_tuning"),
        ("NVIDIA H100 SXM5", 3.35e12, 989.4e12, 66.9e12, 50, 228, 256, 132, 80,
         "nvidia_h100_whitepaper, nvidia_hopper_tuning"),
        ("AMD Instinct MI300X", 5.3e12, 1307.4e12, 163.4e12, 256, 64, 512, 304, 192,
         "amd_mi300_microarchitecture, amd_gpu_specs"),
    )
)  # fmt: skip

#: The three GPU presets, in order of release.
GPUS = (A100_SXM_80GB, H100_SXM5, MI300X)


def measure_cpu(n: int = 512, length: int = 2**24, repeats: int = 5) -> Device:
    """This machine's CPU as a :class:`Device`, measured: float64 and float32 n × n matrix
    products (2n³ flops, best of ``repeats``) give ``peak_fp64`` and ``peak_fp32``; a copy of
    ``length`` float64 words (each read and written) gives ``bandwidth``. Runs on however many
    BLAS threads are in force; the numbers differ from machine to machine and run to run.
    Raises AttnInputError on a size or count below 1, ``repeats`` above
    :data:`attnlib.config.MAX_REPEATS`, or matrices and buffers beyond the memory limit
    (:func:`attnlib.nbtools.machine_rates` refuses both before it allocates or times).
    """
    n, length = check_int("n", n), check_int("length", length)
    repeats = check_int("repeats", repeats)
    flops64, words64 = machine_rates(n, length, repeats, dtype="float64")
    flops32, _ = machine_rates(n, length, repeats, dtype="float32")
    rates = {np.float64: flops64, np.float32: flops32}
    copy_bytes = 8 * words64
    return Device(
        name="this machine's CPU (measured)",
        bandwidth=copy_bytes,
        peak_bf16=None,
        peak_fp32=rates[np.float32],
        peak_fp64=rates[np.float64],
        sms=os.cpu_count() or 1,
        source="measured",
    )


def _check_device(device) -> Device:
    if not isinstance(device, Device):
        raise AttnInputError(f"device must be a Device, got {type(device).__name__}")
    return device


def machine_balance(device: Device, dtype: str) -> float:
    """The machine balance in flops per word of ``dtype``: peak FLOP/s over main-memory words
    per second. A kernel with a lower intensity is memory-bound on this device.

    Raises AttnInputError for a non-Device, an unknown dtype, or a device whose peak and
    bandwidth give a balance beyond the float range.

    Examples
    --------
    >>> round(machine_balance(H100_SXM5, "bf16"), 1)
    590.7
    """
    device = _check_device(device)
    balance = device.peak(dtype) / device.words_per_second(dtype)
    if not (math.isfinite(balance) and balance > 0):
        raise AttnInputError(
            f"device {device.name}: peak_{dtype} / bandwidth (the machine balance) is beyond "
            f"the float range, got {balance:g} flops per word"
        )
    return balance


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
    device, x = _check_device(device), _intensities(intensity)
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
    >>> attainable_flops(2.0, H100_SXM5, "bf16") / 1e12   # decode-like: memory-bound
    3.35
    """
    peak, memory = _roofs(intensity, device, dtype)
    top = np.minimum(peak, memory)
    return float(top) if np.ndim(top) == 0 else top


def no_overlap_flops(intensity, device: Device, dtype: str):
    """FLOP/s of a kernel that never overlaps its memory traffic with its arithmetic: the time
    is the sum F/peak + W/bandwidth, so the rate is peak · I / (I + β) with β the
    :func:`machine_balance`. At the balance point it is half the peak, where the roofline
    promises all of it. Raises AttnInputError as :func:`attainable_flops`.

    The rate is computed as lo / (1 + lo/hi), lo and hi the smaller and larger of the two
    roofs (peak and I × words per second), which equals 1/(1/peak + 1/(I·words per second))
    and stays finite and accurate for every intensity the roofline accepts.
    """
    peak, memory = _roofs(intensity, device, dtype)
    lo, hi = np.minimum(peak, memory), np.maximum(peak, memory)
    rate = lo / (1 + lo / hi)
    return float(rate) if np.ndim(rate) == 0 else rate


def _fast_memory(device: Device, dtype: str, d: int, which: str) -> int:
    """One SM's on-chip words of ``dtype`` (:meth:`Device.onchip_words`), refused, naming d
    and the device, when FlashAttention's ``which`` pass with head dimension d does not fit
    (below :func:`~attnlib.iomodel.flash_forward_min_M` or its backward twin)."""
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
    causal=False,
) -> float:
    """Flops per main-memory word of FlashAttention-2's forward or backward pass on one head
    of self-attention (m = n), with a fast memory of M words.

    Flops are :func:`attnlib.iomodel.attention_flops`: 2 per multiply-add of the matrix
    products only (forward 4·n²·d for d_v = d, backward 10·n²·d; the softmax's exponentials
    are not counted, as in FA2's benchmarks); with ``causal`` only the n(n+1)/2 kept scores'
    flops. Words are the exact count's total (reads + writes) of
    :func:`~attnlib.iomodel.flash_forward_count`, :func:`~attnlib.iomodel.flash_backward_count`
    or their causal twins. Raises AttnInputError for sizes below 1, M below the schedule's
    minimum, an unknown ``which``, or an intensity beyond the float range.

    Examples
    --------
    >>> round(flash_intensity(4096, 128, H100_SXM5.onchip_words("bf16")))
    910
    """
    which = check_choice("which", which, ("forward", "backward"))
    return arithmetic_intensity(n, d, M, d_v=d_v, which=which, causal=check_bool("causal", causal))


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
    intensity / :func:`machine_balance` (below 1: memory-bound)."""

    intensity: float
    attainable: float
    fraction: float
    over_balance: float


def roofline_point(
    device: Device, dtype: str, n: int, d: int, *, which: str = "forward", causal=False
) -> RooflinePoint:
    """FlashAttention-2's pass on ``device`` in ``dtype``: :func:`flash_intensity` with the
    fast memory of one SM (:meth:`Device.onchip_words`), placed on the roofline. Raises
    AttnInputError for a device without on-chip sizes, a d whose pass does not fit one SM,
    or bad arguments."""
    device = _check_device(device)
    d = check_int("d", d)
    which = check_choice("which", which, ("forward", "backward"))
    M = _fast_memory(device, dtype, d, which)
    x = flash_intensity(n, d, M, which=which, causal=causal)
    top = attainable_flops(x, device, dtype)
    return RooflinePoint(x, top, top / device.peak(dtype), x / machine_balance(device, dtype))
