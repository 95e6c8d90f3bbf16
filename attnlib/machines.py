"""Machine presets for the cost model of :mod:`attnlib.advice`.

:func:`machine` turns a cited GPU preset of :mod:`attnlib.iomodel.roofline` (one SM of it) or
the CPU core :data:`BOOK_CPU_CORE` into the three numbers :func:`attnlib.advice.advise`,
:func:`~attnlib.advice.decision_map` and :func:`~attnlib.advice.method_boundaries` take: the
fast memory ``M`` in words, the balance ``flops_per_word`` and the ``slow_memory`` in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._checks import AttnInputError, check_choice, check_int, check_positive_real
from .iomodel.roofline import GIB, H100_SXM5, MIB, WORD_BYTES, Device, machine_balance

__all__ = ["CpuCore", "BOOK_CPU_CORE", "BOOK_MACHINES", "machine"]


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
        if not isinstance(self.name, str) or not self.name:
            raise AttnInputError(f"name must be a non-empty string, got {self.name!r:.60}")
        object.__setattr__(self, "cache_bytes", check_int("cache_bytes", self.cache_bytes))
        balance = check_positive_real("flops_per_word", self.flops_per_word)
        object.__setattr__(self, "flops_per_word", balance)
        object.__setattr__(self, "memory_bytes", check_int("memory_bytes", self.memory_bytes))
        if not isinstance(self.source, str):
            raise AttnInputError(f"source must be a string, got {type(self.source).__name__}")


#: One core of the CPU this book was built on. Measured on the book's build machine: a 2 MiB
#: L2 cache per core, and about 32 float64 flops per word (a single-threaded float64 matrix
#: product against a memory copy, :func:`attnlib.nbtools.machine_rates`, rounded to a round
#: value so that every copy of the book draws the same maps). Main memory is taken as 64 GiB,
#: the default slow memory of :func:`attnlib.advice.advise`. The reader's own machine is
#: measured by :func:`attnlib.iomodel.roofline.measure_cpu`.
BOOK_CPU_CORE = CpuCore(
    name="one core of the CPU this book was built on",
    cache_bytes=2 * MIB,
    flops_per_word=32.0,
    memory_bytes=64 * GIB,
    source="measured on the book's build machine",
)


def machine(device, dtype: str) -> dict:
    """The machine keywords of :func:`attnlib.advice.advise` for ``device`` in ``dtype``.

    For a GPU preset (a :class:`~attnlib.iomodel.roofline.Device` such as ``H100_SXM5``):
    ``M`` = one SM's shared memory plus registers in words of ``dtype``
    (:meth:`~attnlib.iomodel.roofline.Device.onchip_words`), ``flops_per_word`` =
    :func:`~attnlib.iomodel.roofline.machine_balance` and ``slow_memory`` = its
    ``memory_bytes`` in words. For a :class:`CpuCore` (only ``"fp64"``): its cache, balance
    and memory in float64 words.

    Raises
    ------
    AttnInputError
        if ``device`` is neither a Device nor a CpuCore, ``dtype`` is unknown or has no peak
        on the device, the device lacks its on-chip or memory sizes, or its fast or slow
        memory holds no whole word of ``dtype``.

    Examples
    --------
    >>> from attnlib.iomodel.roofline import H100_SXM5
    >>> h100 = machine(H100_SXM5, "bf16")
    >>> h100["M"], round(h100["flops_per_word"], 1), h100["slow_memory"]
    (247808, 590.7, 42949672960)
    >>> machine(BOOK_CPU_CORE, "fp64")
    {'M': 262144, 'flops_per_word': 32.0, 'slow_memory': 8589934592}
    """
    check_choice("dtype", dtype, tuple(WORD_BYTES))
    word = WORD_BYTES[dtype]
    if isinstance(device, CpuCore):
        check_choice("dtype", dtype, ("fp64",))
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
    }


def _words(device, field: str, word: int, dtype: str) -> int:
    """Whole words of ``dtype`` in the device's ``field`` (bytes), refused if none."""
    words = getattr(device, field) // word
    if words == 0:
        raise AttnInputError(f"device {device.name}: {field} hold no whole word of {dtype}")
    return words


# The two machines of Chapter 9's maps, by the names its figures print.
BOOK_MACHINES = {
    "H100 SM, bf16": machine(H100_SXM5, "bf16"),
    "CPU core, fp64": machine(BOOK_CPU_CORE, "fp64"),
}
