"""Reading a GGUF model file (the format of llama.cpp) with numpy, for the decoder of Chapter 9.

A GGUF file (version 2 or 3) is a header, key–value metadata, a table of tensors (name,
shape, type, offset) and the tensors' bytes, aligned to ``general.alignment`` (32 by
default). :func:`read_gguf` returns the metadata and every tensor as a float32 array of
numpy shape (ne_{k−1}, …, ne_0) (GGUF lists the fastest-varying dimension first, so a linear
layer's weight comes out as (out, in)). It dequantises the block formats the decoder's file
uses: F32, F16, Q8_0 (32 int8 values q and one float16 scale s: x = s·q) and Q4_1 (32
4-bit values q, a float16 scale s and minimum m: x = s·q + m; the low nibbles of the 16
bytes hold values 0–15, the high ones 16–31), as ggml defines them.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .._checks import AttnInputError

__all__ = ["read_gguf"]

_MAGIC = b"GGUF"
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9
#: ggml type id: (name, values per block, bytes per block)
_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 3: ("Q4_1", 32, 20), 8: ("Q8_0", 32, 34)}


class _Reader:
    """Little-endian reads from a bytes buffer, refusing a read past its end."""

    def __init__(self, buf: bytes, path: str):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise AttnInputError(f"path {self.path!r} is a truncated or corrupt GGUF file")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def scalar(self, code: str):
        return struct.unpack("<" + code, self.take(struct.calcsize(code)))[0]

    def string(self) -> str:
        return self.take(self.scalar("Q")).decode("utf-8", errors="replace")

    def value(self, kind: int):
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item, count = self.scalar("I"), self.scalar("Q")
            if item in _SCALARS:  # a numeric array in one read
                dt = np.dtype("<" + _SCALARS[item])
                return np.frombuffer(self.take(count * dt.itemsize), dtype=dt).copy()
            return [self.value(item) for _ in range(count)]
        if kind not in _SCALARS:
            raise AttnInputError(f"path {self.path!r}: unknown GGUF value type {kind}")
        return self.scalar(_SCALARS[kind])


def _dequantize(raw: bytes, kind: int, count: int) -> np.ndarray:
    """``count`` float32 values from the bytes of one tensor of ggml type ``kind``."""
    if kind == 0:
        return np.frombuffer(raw, dtype="<f4", count=count).copy()
    if kind == 1:
        return np.frombuffer(raw, dtype="<f2", count=count).astype(np.float32)
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(count // 32, -1)
    scale = blocks[:, 0:2].copy().view("<f2").astype(np.float32)
    if kind == 8:
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
        return (scale * q).ravel()
    out = np.empty((blocks.shape[0], 32), dtype=np.float32)
    np.bitwise_and(blocks[:, 4:], 0x0F, out=out[:, :16], casting="unsafe")
    np.right_shift(blocks[:, 4:], 4, out=out[:, 16:], casting="unsafe")
    out *= scale
    out += blocks[:, 2:4].copy().view("<f2").astype(np.float32)
    return out.ravel()


def read_gguf(path) -> tuple[dict, dict]:
    """(metadata, tensors) of the GGUF file at ``path``; tensors as float32 numpy arrays.

    Raises :class:`attnlib.AttnInputError` if ``path`` is not a readable GGUF file of version
    2 or 3, is truncated, or holds a tensor type other than F32, F16, Q8_0 and Q4_1 (named).
    """
    p = Path(path) if isinstance(path, (str, Path)) else None
    if p is None or not p.is_file():
        raise AttnInputError(f"path must name an existing GGUF file, got {path!r}")
    buf = p.read_bytes()
    r = _Reader(buf, str(p))
    if r.take(4) != _MAGIC:
        raise AttnInputError(f"path {str(p)!r} is not a GGUF file (no GGUF magic)")
    version = r.scalar("I")
    if version not in (2, 3):
        raise AttnInputError(f"path {str(p)!r}: GGUF version {version}, expected 2 or 3")
    n_tensors, n_meta = r.scalar("Q"), r.scalar("Q")
    meta = {}
    for _ in range(n_meta):
        key = r.string()
        meta[key] = r.value(r.scalar("I"))
    table = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.scalar("Q") for _ in range(r.scalar("I"))]
        kind, offset = r.scalar("I"), r.scalar("Q")
        table.append((name, dims, kind, offset))
    align = int(meta.get("general.alignment", 32))
    start = -(-r.pos // align) * align
    tensors = {}
    for name, dims, kind, offset in table:
        if kind not in _TYPES:
            raise AttnInputError(
                f"path {str(p)!r}: tensor {name!r} has ggml type {kind}; read_gguf reads "
                f"{', '.join(t[0] for t in _TYPES.values())}"
            )
        count = int(np.prod(dims))
        _, per_block, block_bytes = _TYPES[kind]
        nbytes = count // per_block * block_bytes
        r.pos = start + offset
        values = _dequantize(r.take(nbytes), kind, count)
        tensors[name] = values.reshape(tuple(reversed(dims)))
    return meta, tensors
