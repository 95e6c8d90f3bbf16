"""Grouped-query and multi-query attention on the machine: the K/V traffic grouping saves, and
decoding.

Shapes follow PyTorch's ``scaled_dot_product_attention`` with ``enable_gqa``: Q is
(H, n, d), K is (H_kv, m, d), V is (H_kv, m, d_v), H a multiple of H_kv, and query head h
uses key/value head h // g with g = H / H_kv. The schedules are
:func:`~attnlib.iomodel.flash_forward` and :func:`~attnlib.iomodel.flash_backward` with
``enable_gqa=True``: each group's g query heads run as one pass (:mod:`.layout`), so every
loaded K, V block serves the whole group. Without ``enable_gqa``, on K and V repeated g times
(``np.repeat(K, g, axis=0)``), the H heads run one at a time and load their K, V blocks each;
:func:`gqa_kv_reuse` is the ratio of the two. Decoding is n = 1: one new query per head
against a cache of m keys (:func:`decode_count`).
"""

from __future__ import annotations

from .._checks import check_head_counts, check_int
from .blocks import flash_forward_blocks
from .flash import flash_forward_count
from .machine import IOCount
from .tiling import ceil_div, check_dims

__all__ = ["gqa_kv_reuse", "decode_count"]


def gqa_kv_reuse(H: int, H_kv: int, n: int, d: int, M: int, *, d_v: int | None = None) -> float:
    """The K/V reuse factor of grouped-query attention's forward pass: the K/V words read head
    by head (K and V repeated per query head, ``enable_gqa=False``) over those read grouped
    (``enable_gqa=True``), g·⌈n/B_r⌉ / ⌈g·n/B_r⌉ (between 1 and g; g when g·n <= B_r).
    Raises AttnInputError for arguments below 1 or H not a multiple of H_kv.

    Examples
    --------
    >>> gqa_kv_reuse(32, 8, 1, 128, 65536)  # a decoding step: each K, V word serves 4 heads
    4.0
    """
    H, H_kv, g = check_head_counts(H, H_kv, True)
    n, d, M, _, d_v = check_dims(n, d, M, None, d_v)
    B_r, _ = flash_forward_blocks(d, M, d_v=d_v)
    return g * ceil_div(n, B_r) / ceil_div(g * n, B_r)


def decode_count(
    m: int, d: int, M: int, *, d_v: int | None = None, H: int = 1, H_kv: int = 1
) -> IOCount:
    """Exact I/O of one decoding step: H query heads, one new query each (n = 1), against a
    cache of m keys in H_kv key/value heads, i.e. :func:`~attnlib.iomodel.flash_forward_count`
    with n = 1 and ``enable_gqa=True``. With g = H/H_kv, B_r = :func:`flash_forward_blocks`
    and D = d + d_v::

        reads  = H·d + H_kv·⌈g/B_r⌉·m·D     (= H·d + H_kv·m·D once B_r >= g)
        writes = H·(d_v + 1)

    Θ(m·d) per K/V head whatever M is. Raises AttnInputError for arguments below 1 or H not
    a multiple of H_kv.

    Examples
    --------
    >>> decode_count(4096, 128, 65536, H=32, H_kv=8)
    IOCount(reads=8392704, writes=4128, total=8396832, peak_fast=28332)
    """
    m = check_int("m", m)  # required here: the count's m=None would mean m = n = 1
    return flash_forward_count(1, d, M, m=m, d_v=d_v, H=H, H_kv=H_kv, enable_gqa=True)
