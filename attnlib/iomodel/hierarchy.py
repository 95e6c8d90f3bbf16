"""A three-level memory: HBM ⊃ L2 ⊃ on-chip, with FlashAttention-2's schedules counted.

The two-level machine of :mod:`attnlib.iomodel.machine` has one fast memory. A GPU has two:
the shared memory and registers of an SM (M words, on-chip) and the L2 cache (M_L2 words)
in front of HBM. This module runs FlashAttention-2's forward and backward schedules on the
two-level machine with M = the on-chip capacity (so the L2↔on-chip words *are* the
two-level count), then replays that run's loads and stores through a second
:class:`~attnlib.iomodel.TwoLevelMemory` of M_L2 words standing for the L2, whose slow memory
is HBM. The L2 follows an explicit policy, our reconstruction rather than a description of
any GPU's cache:

* **pinning**: the operand the schedule re-streams (K and V in the forward; Q, dO, lse, D and
  dQ in the backward) keeps its first k outer blocks resident in L2 from their first use to
  the end of the run, with k the most that fit in M_L2 − M words. LRU would evict each
  block of a cyclic re-stream just before its reuse; pinning is not optimal either, but
  close: Belady's MIN (the offline optimum, for the same access sequence and L2 size)
  holds at most M_L2 words when a pass over the re-streamed operand starts, so it misses
  all but M_L2 of that pass's words, and pinning holds all but less than M words plus one
  block of them. Pinning's HBM reads thus exceed MIN's by less than M + one block per pass
  after the first (the tests check the forward pass against a simulation of MIN on small
  cases).
* **streaming**: every other block passes through L2 (it is loaded from HBM, or written to
  HBM, once per access), taking at most M words of L2 at a time.
* **write-back**: a pinned block that is written stays in L2 and is written to HBM once, at
  the end.

Closed forms (``*_three_level_count``) equal the replay exactly on the words crossing each
boundary; the tests check both on a grid of cases. Every function takes the block rule's
tiles for M by default, or a real kernel's tiles as ``blocks`` = (B_r, B_c).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import AttnInputError, check_bool, check_choice, check_int, check_qkv
from ..machines import WORD_BYTES, Device, check_device
from .blocks import flash_backward_blocks, flash_forward_blocks
from .flash import flash_backward, flash_backward_count, flash_forward, flash_forward_count
from .machine import IOCount, MachineError, TwoLevelMemory
from .roofline import _fast_memory
from .tiling import resolve_blocks

__all__ = [
    "ThreeLevelCount",
    "flash_forward_three_level",
    "flash_backward_three_level",
    "flash_forward_three_level_count",
    "flash_backward_three_level_count",
    "L2Absorption",
    "l2_absorption",
    "heads_sharing_l2",
]


class ThreeLevelCount(NamedTuple):
    """Words moved by one pass on the three-level machine: ``hbm_reads`` and ``hbm_writes``
    cross HBM↔L2; ``onchip`` (an :class:`~attnlib.iomodel.IOCount`) crosses L2↔on-chip
    and equals the two-level count with M = the on-chip capacity; ``resident_rows`` is the
    number of rows of the re-streamed operand pinned in L2."""

    hbm_reads: int
    hbm_writes: int
    onchip: IOCount
    resident_rows: int

    @property
    def hbm_total(self) -> int:
        """HBM words read and written."""
        return self.hbm_reads + self.hbm_writes


def _dims(n, d, M, M_l2, m, d_v):
    n, d, M, M_l2 = check_int("n", n), check_int("d", d), check_int("M", M), check_int("M_l2", M_l2)
    m = n if m is None else check_int("m", m)
    d_v = d if d_v is None else check_int("d_v", d_v)
    if M_l2 < M:
        raise AttnInputError(
            f"M_l2 must be at least the on-chip M = {M} words (the L2 stages every block "
            f"the SM loads), got M_l2={M_l2}"
        )
    return n, d, M, M_l2, m, d_v


def _resident_rows(
    n: int, d: int, M: int, M_l2: int, *, m=None, d_v=None, which="forward", blocks=None
):
    """Rows of the re-streamed operand that the pinning policy keeps in an L2 of M_L2 words:
    min(rows, k·B) with B the outer block of the re-stream and k = ⌊(M_L2 − M)/(B·w)⌋ whole
    blocks, w the words per row (forward: key rows, B = B_c, w = d + d_v; backward: query
    rows, B = B_r, w = 2d + d_v + 2 for Q, dO, dQ, lse and D). The M words left over
    stage the streamed blocks. ``blocks`` as in :func:`flash_forward_three_level_count`.
    Raises AttnInputError for sizes below 1, M_L2 < M, M below the schedule's minimum, a
    bad pair of blocks, or an unknown ``which``.

    Examples
    --------
    >>> _resident_rows(64, 4, 120, 120 + 2 * 4 * 8)    # two key blocks of B_c = 4 rows
    8
    """
    n, d, M, M_l2, m, d_v = _dims(n, d, M, M_l2, m, d_v)
    rows, block, width = _restream(n, d, M, m, d_v, which, blocks)
    return min(rows, (M_l2 - M) // (block * width) * block)


def _blocks(d, M, d_v, which, blocks):
    """(B_r, B_c) of the pass: ``blocks``, or the block rule's for M."""
    rule = flash_forward_blocks if which == "forward" else flash_backward_blocks
    return resolve_blocks(blocks, rule, d, M, d_v)


def _restream(n, d, M, m, d_v, which, blocks=None):
    """(rows, outer block, words per row) of the operand the schedule re-streams."""
    which = check_choice("which", which, ("forward", "backward"))
    B_r, B_c = _blocks(d, M, d_v, which, blocks)
    if which == "forward":
        return m, B_c, d + d_v
    return n, B_r, 2 * d + d_v + 2


def _fits(onchip: IOCount, M: int, blocks) -> IOCount:
    """The on-chip count, refused when given blocks overfill the M on-chip words."""
    if onchip.peak_fast > M:
        raise AttnInputError(
            f"blocks={tuple(blocks)} hold {onchip.peak_fast} words on chip, more than M={M}"
        )
    return onchip


# =========================================================================================
# The replay: the on-chip run's loads and stores through a pinning L2
# =========================================================================================


def _missing_runs(present: np.ndarray, start: int, stop: int):
    """Maximal runs [a, b) of rows in [start, stop) that are not present."""
    runs, a = [], None
    for r in range(start, stop):
        if not present[r] and a is None:
            a = r
        elif present[r] and a is not None:
            runs.append((a, r))
            a = None
    if a is not None:
        runs.append((a, stop))
    return runs


def _replay(log, shapes: dict, pinned: dict, M_l2: int) -> tuple[int, int, int]:
    """Replay the loads and stores of ``log`` through an L2 of ``M_l2`` words.

    ``shapes`` maps each array of the run to its shape; ``pinned`` maps the pinned arrays to
    the number R of leading rows that stay resident. Returns (HBM reads, HBM writes, L2 peak).
    The L2 is a TwoLevelMemory whose slow memory is HBM: its CapacityError would mean that
    the policy overfills it. Values are not moved (the on-chip run computed them).
    """
    l2 = TwoLevelMemory(M_l2)
    for name, shape in shapes.items():
        l2.zeros(name, shape)
    present = {name: np.zeros(shapes[name][0], dtype=bool) for name in pinned}
    pieces: list[list] = []  # [name, (a, b), L2 block, dirty]

    def block_shape(name, a, b):
        return (b - a, *shapes[name][1:])

    for op in log:
        if op.op not in ("load", "store"):
            continue
        name, (start, stop) = op.name, op.rows
        if op.cols is not None and op.cols != (0, shapes[name][1]):
            raise MachineError(f"the replay takes whole rows only, got cols {op.cols} of {name}")
        split = min(max(start, pinned.get(name, 0)), stop)
        if split > start:  # the pinned part: served by L2 after its first use
            for a, b in _missing_runs(present[name], start, split):
                if op.op == "load":
                    pieces.append([name, (a, b), l2.load(name, (a, b)), False])
                else:
                    pieces.append([name, (a, b), l2.alloc(block_shape(name, a, b)), True])
                present[name][a:b] = True
            if op.op == "store":
                for piece in pieces:
                    if piece[0] == name and piece[1][0] < split and start < piece[1][1]:
                        piece[3] = True
        if stop > split:  # the streamed part: through L2 to or from HBM
            if op.op == "load":
                l2.free(l2.load(name, (split, stop)))
            else:
                staged = l2.alloc(block_shape(name, split, stop))
                l2.store(name, (split, stop), None, staged)
                l2.free(staged)
    for name, rows, block, dirty in pieces:
        if dirty:
            l2.store(name, rows, None, block)
        l2.free(block)
    count = l2.finish()
    return count.reads, count.writes, count.peak_fast


def _check_M_l2(M, M_l2):
    M, M_l2 = check_int("M", M), check_int("M_l2", M_l2)
    if M_l2 < M:
        raise AttnInputError(f"M_l2 must be at least the on-chip M = {M} words, got M_l2={M_l2}")
    return M, M_l2


def flash_forward_three_level(Q, K, V, *, M: int, M_l2: int, scale=None, blocks=None):
    """FlashAttention-2's forward pass on the three-level machine: :func:`~attnlib.iomodel.
    flash_forward` on M on-chip words, its loads and stores replayed through an L2 of M_L2
    words that pins the first key/value blocks (see the module docstring).

    Returns (O, lse, :class:`ThreeLevelCount`, L2 peak words); the count equals
    :func:`flash_forward_three_level_count` and the peak is at most M_L2. ``blocks`` =
    (B_r, B_c) as in :func:`~attnlib.iomodel.flash_forward`. Raises AttnInputError for bad
    arrays, M below the schedule's minimum, a bad pair of blocks or blocks whose working set
    exceeds M (as the closed form refuses them), or M_L2 < M.
    """
    Q, K, V = check_qkv(Q, K, V)
    M, M_l2 = _check_M_l2(M, M_l2)
    (n, d), (m, d_v) = Q.shape, V.shape
    if blocks is not None:  # refused as the closed form refuses them, before any step runs
        _fits(flash_forward_count(n, d, M, m=m, d_v=d_v, blocks=blocks), M, blocks)
    O, lse, onchip, mem = flash_forward(Q, K, V, M=M, scale=scale, record=True, blocks=blocks)
    R = _resident_rows(n, d, M, M_l2, m=m, d_v=d_v, blocks=blocks)
    shapes = {"Q": (n, d), "K": (m, d), "V": (m, d_v), "O": (n, d_v), "lse": (n,)}
    reads, writes, peak = _replay(mem.log, shapes, {"K": R, "V": R}, M_l2)
    return O, lse, ThreeLevelCount(reads, writes, onchip, R), peak


def flash_backward_three_level(Q, K, V, O, dO, lse, *, M: int, M_l2: int, scale=None, blocks=None):
    """FlashAttention-2's backward pass on the three-level machine: :func:`~attnlib.iomodel.
    flash_backward` on M on-chip words, replayed through an L2 of M_L2 words that pins the
    query side (Q, dO, lse, D, dQ) of the first query blocks, writing D and dQ back once.

    Returns (dQ, dK, dV, :class:`ThreeLevelCount`, L2 peak words); the count equals
    :func:`flash_backward_three_level_count`. Raises AttnInputError as
    :func:`flash_forward_three_level`.
    """
    M, M_l2 = _check_M_l2(M, M_l2)
    if blocks is not None:  # refused as the closed form refuses them, before any step runs
        Q, K, V = check_qkv(Q, K, V)
        (n, d), (m, d_v) = Q.shape, V.shape
        _fits(flash_backward_count(n, d, M, m=m, d_v=d_v, blocks=blocks), M, blocks)
    dQ, dK, dV, onchip, mem = flash_backward(
        Q, K, V, O, dO, lse, M=M, scale=scale, record=True, blocks=blocks
    )
    (n, d), (m, d_v) = dQ.shape, dV.shape
    R = _resident_rows(n, d, M, M_l2, m=m, d_v=d_v, which="backward", blocks=blocks)
    shapes = {"Q": (n, d), "K": (m, d), "V": (m, d_v), "O": (n, d_v), "dO": (n, d_v)}
    shapes |= {"lse": (n,), "D": (n,), "dQ": (n, d), "dK": (m, d), "dV": (m, d_v)}
    pinned = dict.fromkeys(("Q", "dO", "lse", "D", "dQ"), R)
    reads, writes, peak = _replay(mem.log, shapes, pinned, M_l2)
    return dQ, dK, dV, ThreeLevelCount(reads, writes, onchip, R), peak


def flash_forward_three_level_count(
    n: int, d: int, M: int, M_l2: int, *, m: int | None = None, d_v: int | None = None,
    blocks=None,
) -> ThreeLevelCount:  # fmt: skip
    """Exact words of :func:`flash_forward_three_level` (closed form, no arrays). With
    (B_r, B_c) = ``blocks``, by default :func:`~attnlib.iomodel.flash_forward_blocks` (M)
    (a real kernel's tiles, e.g. 128 × 64 at d = 128, must fit M), T_r = ⌈n/B_r⌉,
    D = d + d_v and R the pinned key rows (the count's ``resident_rows``)::

        HBM reads  = n·d + R·D + T_r·(m − R)·D     (pinned K, V rows read once)
        HBM writes = n·(d_v + 1)
        on-chip    = flash_forward_count(n, d, M)  (reads n·d + T_r·m·D)

    so the L2 saves (T_r − 1)·R·D of the two-level model's HBM reads. Raises
    AttnInputError for sizes below 1, M below the schedule's minimum, blocks that are not a
    pair or do not fit M, or M_L2 < M.

    Examples
    --------
    >>> c = flash_forward_three_level_count(64, 4, 120, 120 + 2 * 4 * 8)
    >>> c.hbm_reads, c.onchip.reads, c.resident_rows
    (5248, 5888, 8)
    """
    n, d, M, M_l2, m, d_v = _dims(n, d, M, M_l2, m, d_v)
    onchip = _fits(flash_forward_count(n, d, M, m=m, d_v=d_v, blocks=blocks), M, blocks)
    R = _resident_rows(n, d, M, M_l2, m=m, d_v=d_v, blocks=blocks)
    T_r = -(-n // _blocks(d, M, d_v, "forward", blocks)[0])
    D = d + d_v
    return ThreeLevelCount(n * d + R * D + T_r * (m - R) * D, n * (d_v + 1), onchip, R)


def flash_backward_three_level_count(
    n: int, d: int, M: int, M_l2: int, *, m: int | None = None, d_v: int | None = None,
    blocks=None,
) -> ThreeLevelCount:  # fmt: skip
    """Exact words of :func:`flash_backward_three_level` (closed form, no arrays). With
    (B_r, B_c) = ``blocks``, by default :func:`~attnlib.iomodel.flash_backward_blocks` (M),
    T_c = ⌈m/B_c⌉,
    D = d + d_v and R the pinned query rows (the count's ``resident_rows``)::

        HBM reads  = 2n·d_v + m·D + (n − R)·(T_c·(2d + d_v + 2) − d) + R·(d + 1)
        HBM writes = n + m·D + (n − R)·T_c·d + R·d
        on-chip    = flash_backward_count(n, d, M)

    (O and dO once; K, V once; an unpinned query row re-reads Q, dO, lse, D and dQ per key
    block as in the two-level model; a pinned row reads Q and lse once, and its D and dQ are
    written back once). Raises AttnInputError as :func:`flash_forward_three_level_count`.
    """
    n, d, M, M_l2, m, d_v = _dims(n, d, M, M_l2, m, d_v)
    onchip = _fits(flash_backward_count(n, d, M, m=m, d_v=d_v, blocks=blocks), M, blocks)
    R = _resident_rows(n, d, M, M_l2, m=m, d_v=d_v, which="backward", blocks=blocks)
    T_c = -(-m // _blocks(d, M, d_v, "backward", blocks)[1])
    D = d + d_v
    reads = 2 * n * d_v + m * D + (n - R) * (T_c * (2 * d + d_v + 2) - d) + R * (d + 1)
    writes = n + m * D + (n - R) * T_c * d + R * d
    return ThreeLevelCount(reads, writes, onchip, R)


# =========================================================================================
# What a real L2 absorbs
# =========================================================================================


class L2Absorption(NamedTuple):
    """HBM words of one pass with and without the L2: ``two_level`` (the two-level count,
    no L2), ``three_level`` (with the L2's share), ``floor`` (an L2 that holds the whole
    re-streamed operand), and ``fraction`` = (two_level − three_level)/(two_level − floor),
    the part of the re-streaming the L2 absorbs (1 when there is nothing to absorb)."""

    two_level: int
    three_level: int
    floor: int
    fraction: float


def heads_sharing_l2(
    device: Device, n: int, d: int, *, dtype: str = "bfloat16", which="forward", blocks=None
) -> int:
    """How many heads' operands share the L2 at once, in our model of the launch: each SM
    runs one outer block (of the forward's T_r query blocks, the backward's T_c key blocks)
    at a time, and the blocks of one head are launched next to each other, as in
    FlashAttention-2's grid. A window of S (SMs) consecutive blocks spans at most
    ⌈(S − 1)/T⌉ + 1 heads. The blocks are the block rule's for one SM's on-chip memory, or
    ``blocks`` = (B_r, B_c). Raises AttnInputError for bad arguments, a d whose pass does
    not fit one SM's on-chip memory, or blocks that do not fit it."""
    device = check_device(device, sms=True)
    n, d = check_int("n", n), check_int("d", d)
    which = check_choice("which", which, ("forward", "backward"))
    M = _fast_memory(device, dtype, d, which)
    B_r, B_c = _blocks(d, M, d, which, blocks)
    count = flash_forward_count if which == "forward" else flash_backward_count
    _fits(count(n, d, M, blocks=(B_r, B_c)), M, (B_r, B_c))
    T = -(-n // (B_r if which == "forward" else B_c))
    return -(-(device.sms - 1) // T) + 1


def l2_absorption(
    device: Device,
    n: int,
    d: int,
    *,
    dtype: str = "bfloat16",
    which="forward",
    shared=False,
    blocks=None,
) -> L2Absorption:
    """The HBM traffic of one head of self-attention (m = n, d_v = d) on ``device``, with the
    on-chip M of :meth:`~attnlib.machines.Device.onchip_words` and an L2 of the
    device's last-level cache: all of it for one head, or with ``shared`` an equal share
    among :func:`heads_sharing_l2` heads (each pinning its own operand); with the block
    rule's tiles for that M, or a real kernel's ``blocks`` = (B_r, B_c). Raises
    AttnInputError for a device without cache or on-chip sizes, a d whose pass does not fit
    one SM's on-chip memory, blocks that do not fit it, or bad arguments."""
    device = check_device(device)
    check_choice("dtype", dtype, tuple(WORD_BYTES))
    which = check_choice("which", which, ("forward", "backward"))
    n, d = check_int("n", n), check_int("d", d)
    M, cache = _fast_memory(device, dtype, d, which), device.llc_words(dtype)
    heads = (
        heads_sharing_l2(device, n, d, dtype=dtype, which=which, blocks=blocks)
        if check_bool("shared", shared)
        else 1
    )
    share = max(M, cache // heads)
    count = (
        flash_forward_three_level_count if which == "forward" else flash_backward_three_level_count
    )
    two = count(n, d, M, M, blocks=blocks).hbm_total  # an L2 of M words pins nothing
    three = count(n, d, M, share, blocks=blocks).hbm_total
    rows, block, width = _restream(n, d, M, n, d, which, blocks)
    every_row = M + -(-rows // block) * block * width
    floor = count(n, d, M, every_row, blocks=blocks).hbm_total
    return L2Absorption(two, three, floor, 1.0 if two == floor else (two - three) / (two - floor))
