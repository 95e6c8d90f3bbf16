"""How much fast memory a GPU has, in words: the numbers Chapter 4 turns into M/d².

Per streaming multiprocessor (SM), the fast memory a FlashAttention kernel tiles into is the
shared memory (its largest carve-out) plus the register file; the L2 cache is shared by all
SMs. The sizes are NVIDIA's (A100 and H100 whitepapers and tuning guides), each entry with
the bibliography key of its source.
"""

from __future__ import annotations

from typing import NamedTuple

from .._checks import check_choice, check_int

__all__ = ["GPUMemory", "GPU_MEMORY", "WORD_BYTES", "gpu_fast_words"]

_KB, _MB = 1024, 1024**2


class GPUMemory(NamedTuple):
    """The on-chip memory of one GPU: bytes of ``shared`` memory (the largest carve-out) and
    of ``registers`` per SM, the most 32-bit registers one thread may use
    (``thread_registers``), bytes of ``l2`` cache (all SMs), and the ``source`` (a
    bibliography key)."""

    shared: int
    registers: int
    thread_registers: int
    l2: int
    source: str


GPU_MEMORY = {
    "A100": GPUMemory(164 * _KB, 256 * _KB, 255, 40 * _MB, "nvidia_a100_whitepaper"),
    "H100": GPUMemory(228 * _KB, 256 * _KB, 255, 50 * _MB, "nvidia_h100_whitepaper"),
}

#: Bytes per word: bfloat16, the usual training type, and float32.
WORD_BYTES = {"bfloat16": 2, "float32": 4}


def gpu_fast_words(gpu: str, dtype: str = "bfloat16", blocks_per_sm: int = 1) -> int:
    """Words of fast memory (shared memory + registers of one SM) that each of
    ``blocks_per_sm`` thread blocks sharing the SM can use, for words of ``dtype``.

    Raises AttnInputError for a GPU not in :data:`GPU_MEMORY`, a dtype not in
    :data:`WORD_BYTES`, or ``blocks_per_sm`` below 1.

    Examples
    --------
    >>> gpu_fast_words("A100"), gpu_fast_words("H100", "float32", 2)
    (215040, 61952)
    """
    spec = GPU_MEMORY[check_choice("gpu", gpu, tuple(GPU_MEMORY))]
    word = WORD_BYTES[check_choice("dtype", dtype, tuple(WORD_BYTES))]
    blocks_per_sm = check_int("blocks_per_sm", blocks_per_sm)
    return (spec.shared + spec.registers) // (word * blocks_per_sm)
