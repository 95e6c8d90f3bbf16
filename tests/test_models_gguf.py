"""The GGUF reader of Chapter 9's decoder against files written here in every block format it
reads, and its refusals of other files, unread types and truncated data."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.models import gguf


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def _write_gguf(path, meta: dict, tensors: list) -> None:
    """A GGUF v3 file: ``meta`` of strings, ints (u32) and floats (f32); ``tensors`` a list of
    (name, dims (ggml order), ggml type, raw bytes)."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(meta))]
    for k, v in meta.items():
        out.append(_string(k))
        if isinstance(v, str):
            out += [struct.pack("<I", 8), _string(v)]
        elif isinstance(v, float):
            out.append(struct.pack("<If", 6, v))
        else:
            out.append(struct.pack("<II", 4, v))
    offset, blobs = 0, []
    for name, dims, kind, raw in tensors:
        out += [_string(name), struct.pack("<I", len(dims))]
        out += [struct.pack("<Q", x) for x in dims]
        out.append(struct.pack("<IQ", kind, offset))
        pad = (-len(raw)) % 32
        blobs.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head = b"".join(out)
    head += b"\0" * ((-len(head)) % 32)
    path.write_bytes(head + b"".join(blobs))


def test_gguf_reader_decodes_every_block_format(tmp_path):
    rng = np.random.default_rng(0)
    f32 = rng.normal(size=(3, 4)).astype(np.float32)
    f16 = rng.normal(size=(2, 8)).astype(np.float16)
    # Q8_0: two blocks of 32 int8 values with float16 scales
    s8, q8 = np.array([0.5, -0.25], np.float16), rng.integers(-127, 128, (2, 32)).astype(np.int8)
    raw8 = b"".join(s8[i].tobytes() + q8[i].tobytes() for i in range(2))
    want8 = (s8.astype(np.float32)[:, None] * q8).reshape(1, 64)
    # Q4_1: two blocks; value j < 16 in the low nibble of byte j, value j + 16 in the high one
    s4, m4 = np.array([0.125, 2.0], np.float16), np.array([-1.0, 0.5], np.float16)
    q4 = rng.integers(0, 16, (2, 32)).astype(np.uint8)
    packed = (q4[:, :16] | (q4[:, 16:] << 4)).astype(np.uint8)
    raw4 = b"".join(s4[i].tobytes() + m4[i].tobytes() + packed[i].tobytes() for i in range(2))
    want4 = (s4.astype(np.float32)[:, None] * q4 + m4.astype(np.float32)[:, None]).reshape(2, 32)
    path = tmp_path / "t.gguf"
    _write_gguf(
        path,
        {"general.architecture": "test", "x.count": 7, "x.eps": 0.5},
        [
            ("a", [4, 3], 0, f32.tobytes()),
            ("b", [8, 2], 1, f16.tobytes()),
            ("c", [64, 1], 8, raw8),
            ("d", [32, 2], 3, raw4),
        ],
    )
    meta, t = gguf.read_gguf(path)
    assert meta == {"general.architecture": "test", "x.count": 7, "x.eps": 0.5}
    assert np.array_equal(t["a"], f32) and np.array_equal(t["b"], f16.astype(np.float32))
    assert np.array_equal(t["c"], want8) and np.array_equal(t["d"], want4)
    assert all(a.dtype == np.float32 for a in t.values())


def test_gguf_reader_refuses_other_files_and_types(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 40)
    with pytest.raises(AttnInputError, match="path"):
        gguf.read_gguf(bad)
    with pytest.raises(AttnInputError, match="path"):
        gguf.read_gguf(tmp_path / "missing.gguf")
    _write_gguf(bad, {}, [("q", [32], 2, b"\0" * 18)])  # Q4_0: not read
    with pytest.raises(AttnInputError, match="ggml type 2"):
        gguf.read_gguf(bad)
    _write_gguf(bad, {}, [("a", [4], 0, b"\0" * 16)])
    bad.write_bytes(bad.read_bytes()[:-20])  # the data cut short
    with pytest.raises(AttnInputError, match="truncated"):
        gguf.read_gguf(bad)
