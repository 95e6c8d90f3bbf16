"""Real machines as numbers: cited GPU presets, one CPU core, this machine measured.

A :class:`Device` holds a machine's roofs (peak FLOP/s per dtype, main-memory bandwidth) and
its memory capacities, with the ``references.bib`` keys of the vendor documents they come
from; :func:`machine_balance` is its peak over its bandwidth in words. The three GPU presets
(:data:`GPUS`) and the measured CPU (:func:`measure_cpu`) feed the roofline and the L2 model
of :mod:`attnlib.iomodel.roofline` and :mod:`attnlib.iomodel.hierarchy`.

A :class:`CpuCore` is one CPU core as the cost model of :mod:`attnlib.advice` sees it;
:func:`book_cpu_core` builds the core of the machine the book's benchmark ran on from its
committed results. :func:`machine` turns a GPU preset (one SM of it) or a core into the
machine keywords :func:`attnlib.advice.advise` and the maps of :mod:`attnlib.advice_maps`
take: the fast memory ``M`` in words, the balance ``flops_per_word``, the ``slow_memory`` in
words and the ``dtype`` they are counted in.

Dtypes are named as numpy names them: ``"bfloat16"``, ``"float32"``, ``"float64"``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from . import results
from ._checks import AttnInputError, check_bool, check_choice, check_int, check_positive_real
from .measure import machine_rates

__all__ = [
    "WORD_BYTES",
    "Device",
    "check_device",
    "A100_SXM_80GB",
    "H100_SXM5",
    "MI300X",
    "GPUS",
    "measure_cpu",
    "machine_balance",
    "CpuCore",
    "book_cpu_core",
    "machine",
    "book_machines",
]

#: Bytes per word of each dtype the presets know.
WORD_BYTES = {"bfloat16": 2, "float32": 4, "float64": 8}

_KIB, _MIB, _GIB = 2**10, 2**20, 2**30


def _optional_int(name, value):
    return None if value is None else check_int(name, value)


def _optional_rate(name, value):
    return None if value is None else check_positive_real(name, value)


def _check_name_and_source(machine) -> None:
    if not isinstance(machine.name, str) or not machine.name:
        raise AttnInputError(f"name must be a non-empty string, got {machine.name!r:.60}")
    if not isinstance(machine.source, str):
        raise AttnInputError(f"source must be a string, got {type(machine.source).__name__}")


@dataclass(frozen=True)
class Device:
    """One machine's roofs and memories.

    Fields
    ------
    name : str
    bandwidth : main-memory (HBM, DRAM) bandwidth in bytes per second
    peak_bfloat16 : dense bfloat16 FLOP/s on the matrix units (tensor cores, float32
        accumulate), or None
    peak_float32 : float32 FLOP/s on the ordinary vector units (CUDA cores; not tensor-core
        TF32)
    peak_float64 : float64 FLOP/s, or None (given for the measured CPU only)
    llc_bytes : last-level cache before main memory (L2 on NVIDIA, the Infinity Cache on the
        MI300X), or None
    smem_bytes : shared memory (LDS) per SM (CU), the most a kernel can configure, or None
    regs_bytes : register file per SM (CU), or None
    sms : number of SMs (CUs), or cores for a CPU
    source : the ``references.bib`` keys the numbers come from
    memory_bytes : main-memory (HBM, DRAM) capacity, or None
    exp_rate : exponentials per second on the special function units (the softmax's other
        roof), or None

    Vendors state capacities in KB, MB and GB; they are binary units (1 KB = 1024 bytes), as the
    CUDA and ROCm device queries report them. Rates are decimal (1 TB/s = 10¹² bytes/s).

    Raises AttnInputError for a rate or size that is not positive, or an empty name.
    """

    name: str
    bandwidth: float
    peak_bfloat16: float | None
    peak_float32: float
    peak_float64: float | None = None
    llc_bytes: int | None = None
    smem_bytes: int | None = None
    regs_bytes: int | None = None
    sms: int | None = None
    source: str = ""
    memory_bytes: int | None = None
    exp_rate: float | None = None

    def __post_init__(self):
        _check_name_and_source(self)
        object.__setattr__(self, "bandwidth", check_positive_real("bandwidth", self.bandwidth))
        peak = check_positive_real("peak_float32", self.peak_float32)
        object.__setattr__(self, "peak_float32", peak)
        for rate in ("peak_bfloat16", "peak_float64", "exp_rate"):
            object.__setattr__(self, rate, _optional_rate(rate, getattr(self, rate)))
        for size in ("llc_bytes", "smem_bytes", "regs_bytes", "sms", "memory_bytes"):
            object.__setattr__(self, size, _optional_int(size, getattr(self, size)))

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s in ``dtype`` ("bfloat16", "float32" or "float64"). Raises
        AttnInputError for an unknown dtype or one this device has no figure for."""
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


def check_device(device, *, sms: bool = False) -> Device:
    """``device`` if it is a :class:`Device` (with an SM count when ``sms``); raises
    AttnInputError naming ``device`` otherwise."""
    if not isinstance(device, Device):
        raise AttnInputError(f"device must be a Device, got {type(device).__name__}")
    if check_bool("sms", sms) and device.sms is None:
        raise AttnInputError(f"device must be a Device with an SM count, {device.name} has none")
    return device


# The presets, one row each: name, HBM bytes/s, dense bfloat16 tensor FLOP/s, vector float32
# FLOP/s, last-level cache (MiB), shared memory and registers per SM or CU (KiB), SMs or CUs,
# HBM capacity (GiB), exponentials per second (None where no source states it), sources.
# The H100's exponential rate is FlashAttention-3's (Shah et al. 2024, §3.1 and its footnote):
# 16 special-function operations per SM per clock × 132 SMs × 1830 MHz, "3.9 TFLOPS".
A100_SXM_80GB, H100_SXM5, MI300X = (
    Device(name, bw, p16, p32, None, llc * _MIB, smem * _KIB, regs * _KIB, sms, src, hbm * _GIB,
           exp)
    for name, bw, p16, p32, llc, smem, regs, sms, hbm, exp, src in (
        ("NVIDIA A100 SXM 80GB", 2039e9, 312e12, 19.5e12, 40, 164, 256, 108, 80, None,
         "nvidia_a100_datasheet, nvidia_a100_whitepaper, nvidia_ampere_tuning"),
        ("NVIDIA H100 SXM5", 3.35e12, 989.4e12, 66.9e12, 50, 228, 256, 132, 80, 16 * 132 * 1830e6,
         "nvidia_h100_whitepaper, nvidia_hopper_tuning, fa3"),
        ("AMD Instinct MI300X", 5.3e12, 1307.4e12, 163.4e12, 256, 64, 512, 304, 192, None,
         "amd_mi300_microarchitecture, amd_gpu_specs"),
    )
)  # fmt: skip

#: The three GPU presets, in order of release.
GPUS = (A100_SXM_80GB, H100_SXM5, MI300X)


def measure_cpu(n: int = 512, length: int = 2**24, repeats: int = 5) -> Device:
    """This machine's CPU as a :class:`Device`, measured: float64 and float32 n × n matrix
    products (2n³ flops, best of ``repeats``) give ``peak_float64`` and ``peak_float32``; a
    copy of ``length`` float64 words (each read and written) gives ``bandwidth``. Runs on
    however many BLAS threads are in force; the numbers differ from machine to machine and run
    to run. Raises AttnInputError on a size or count below 1, ``repeats`` above
    :data:`attnlib.config.MAX_REPEATS`, or matrices and buffers beyond the memory limit
    (:func:`attnlib.measure.machine_rates` refuses both before it allocates or times).
    """
    n, length = check_int("n", n), check_int("length", length)
    repeats = check_int("repeats", repeats)
    flops64, words64 = machine_rates(n, length, repeats, dtype="float64")
    flops32, _ = machine_rates(n, length, repeats, dtype="float32")
    return Device(
        name="this machine's CPU (measured)",
        bandwidth=WORD_BYTES["float64"] * words64,
        peak_bfloat16=None,
        peak_float32=flops32,
        peak_float64=flops64,
        sms=os.cpu_count() or 1,
        source="measured",
    )


def machine_balance(device: Device, dtype: str) -> float:
    """The machine balance in flops per word of ``dtype``: peak FLOP/s over main-memory words
    per second. A kernel with a lower intensity is memory-bound on this device.

    Raises AttnInputError for a non-Device, an unknown dtype, or a device whose peak and
    bandwidth give a balance beyond the float range.

    Examples
    --------
    >>> round(machine_balance(H100_SXM5, "bfloat16"), 1)
    590.7
    """
    device = check_device(device)
    balance = device.peak(dtype) / device.words_per_second(dtype)
    if not (math.isfinite(balance) and balance > 0):
        raise AttnInputError(
            f"device {device.name}: peak_{dtype} / bandwidth (the machine balance) is beyond "
            f"the float range, got {balance:g} flops per word"
        )
    return balance


@dataclass(frozen=True)
class CpuCore:
    """One CPU core as the cost model sees it, in float64 words.

    Fields
    ------
    name : str
    cache_bytes : its private cache (the L2), the fast memory
    flops_per_word : float64 flops per float64 word moved to or from main memory
    memory_bytes : main-memory capacity, the slow memory
    source : where the numbers come from

    Raises AttnInputError for a size or balance that is not positive, or an empty name.
    """

    name: str
    cache_bytes: int
    flops_per_word: float
    memory_bytes: int
    source: str = ""

    def __post_init__(self):
        _check_name_and_source(self)
        object.__setattr__(self, "cache_bytes", check_int("cache_bytes", self.cache_bytes))
        balance = check_positive_real("flops_per_word", self.flops_per_word)
        object.__setattr__(self, "flops_per_word", balance)
        object.__setattr__(self, "memory_bytes", check_int("memory_bytes", self.memory_bytes))


def book_cpu_core(*, start=None) -> CpuCore:
    """One core of the machine the book's benchmark ran on, read from its committed results
    (``chapters_machine.csv``, the ``rates`` experiment of ``make bench-chapters``): the core's
    L2 cache, its single-threaded float64 balance (a matrix product's flops per second over a
    memory copy's words per second, :func:`attnlib.measure.machine_rates`) and the machine's
    main memory. ``start`` is where to look for ``benchmarks/results``, as in
    :func:`attnlib.results.read_committed` (default: the working directory and above).

    The balance varies from run to run with the machine's load, so every copy of the book
    draws its CPU map from these committed numbers; a reader's own machine is measured by
    :func:`measure_cpu` or :func:`attnlib.measure.machine_rates`.

    Raises AttnInputError if the committed results are not found or lack the rates.
    """
    rows = results.read_committed("chapters_machine.csv", start=start)
    info = {r["key"]: r["value"] for r in rows}
    keys = ("rates_flops_per_s", "rates_words_per_s", "rates_l2_bytes", "rates_memory_bytes")
    missing = [k for k in keys if k not in info]
    threads = info.get("rates_blas_threads")
    if missing or threads != "1":
        why = f"it lacks {', '.join(missing)}" if missing else f"it ran on {threads} BLAS threads"
        raise AttnInputError(
            f"start: chapters_machine.csv holds no one-thread rates run ({why}); "
            "run `make bench-chapters`"
        )
    return CpuCore(
        name="one core of the CPU this book was built on",
        cache_bytes=int(info["rates_l2_bytes"]),
        flops_per_word=float(info["rates_flops_per_s"]) / float(info["rates_words_per_s"]),
        memory_bytes=int(info["rates_memory_bytes"]),
        source=f"benchmarks/results/chapters_machine.csv (rates, {info.get('rates_date', '?')})",
    )


def machine(device, dtype: str) -> dict:
    """The machine keywords of :func:`attnlib.advice.advise` for ``device`` in ``dtype``.

    For a GPU preset (a :class:`Device` such as ``H100_SXM5``): ``M`` = one SM's shared memory
    plus registers in words of ``dtype`` (:meth:`Device.onchip_words`), ``flops_per_word`` =
    :func:`machine_balance` and ``slow_memory`` = its ``memory_bytes`` in words. For a
    :class:`CpuCore` (only ``"float64"``): its cache, balance and memory in float64 words.
    ``dtype`` is passed on too, so that :func:`attnlib.advice.advise` prices and judges every
    method in the precision the machine's numbers are counted in.

    Raises
    ------
    AttnInputError
        if ``device`` is neither a Device nor a CpuCore, ``dtype`` is unknown or has no peak
        on the device, the device lacks its on-chip or memory sizes, or its fast or slow
        memory holds no whole word of ``dtype``.

    Examples
    --------
    >>> h100 = machine(H100_SXM5, "float32")
    >>> h100["M"], round(h100["flops_per_word"], 1), h100["slow_memory"], h100["dtype"]
    (123904, 79.9, 21474836480, 'float32')
    >>> machine(CpuCore("core", 2**20, 16.0, 2**34), "float64")
    {'M': 131072, 'flops_per_word': 16.0, 'slow_memory': 2147483648, 'dtype': 'float64'}
    """
    check_choice("dtype", dtype, tuple(WORD_BYTES))
    word = WORD_BYTES[dtype]
    if isinstance(device, CpuCore):
        check_choice("dtype", dtype, ("float64",))
        M, balance = _words(device, "cache_bytes", word, dtype), device.flops_per_word
    elif isinstance(device, Device):
        if device.memory_bytes is None:
            raise AttnInputError(f"device {device.name} has no main-memory size (memory_bytes)")
        M, balance = device.onchip_words(dtype), machine_balance(device, dtype)
    else:
        raise AttnInputError(f"device must be a Device or a CpuCore, got {type(device).__name__}")
    return {
        "M": M,
        "flops_per_word": balance,
        "slow_memory": _words(device, "memory_bytes", word, dtype),
        "dtype": dtype,
    }


def _words(device, field: str, word: int, dtype: str) -> int:
    """Whole words of ``dtype`` in the device's ``field`` (bytes), refused if none."""
    words = getattr(device, field) // word
    if words == 0:
        raise AttnInputError(f"device {device.name}: {field} hold no whole word of {dtype}")
    return words


def book_machines(*, start=None) -> dict:
    """The two machines of Chapter 9's maps, by the names its figures print: one H100 SXM5 SM
    in float32 (the cheapest of its precisions in which every method reaches ε = 10⁻³; in
    bfloat16 none does) and one core of the benchmark's CPU in float64
    (:func:`book_cpu_core`, ``start`` as there).

    Raises AttnInputError as :func:`book_cpu_core`.
    """
    return {
        "H100 SM, float32": machine(H100_SXM5, "float32"),
        "CPU core, float64": machine(book_cpu_core(start=start), "float64"),
    }
