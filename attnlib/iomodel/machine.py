"""An executable two-level memory: the red-blue pebble game with every word counted.

Hong and Kung's model (HK81; SY24 §2): a fast memory of at most M words, an unbounded slow
memory, and a cost of one I/O per word moved between them; computation is free but may only
use values in fast memory. :class:`TwoLevelMemory` runs algorithms in it, so that the words
they load and store are counted rather than estimated; its docstring states what it enforces
(capacity, counted transfers, freed blocks) and what it cannot see.
"""

from __future__ import annotations

import math
import numbers
import weakref
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .._checks import (
    FLOAT_DTYPES,
    AttnInputError,
    as_float_array,
    check_bool,
    check_int,
    check_memory,
    check_real,
)

__all__ = ["TwoLevelMemory", "IOCount", "CapacityError", "MachineError", "Op", "words_by_array"]


class MachineError(RuntimeError):
    """An algorithm misused the machine: unknown array, slice out of bounds, bad free, leak."""


class CapacityError(MachineError):
    """Fast memory would exceed M words. Attributes: ``live``, ``asked``, ``M``."""

    def __init__(self, live: int, asked: int, M: int, what: str = ""):
        self.live, self.asked, self.M = live, asked, M
        where = f" ({what})" if what else ""
        super().__init__(
            f"fast memory overflow{where}: {live} words live + {asked} asked = "
            f"{live + asked} > M = {M}"
        )


@dataclass(frozen=True)
class IOCount:
    """Words moved by one run: ``reads`` (slow → fast), ``writes`` (fast → slow),
    ``total = reads + writes``, and ``peak_fast``, the most fast words ever live at once.

    Construct as ``IOCount(reads, writes, peak_fast)``; ``total`` is computed. Two counts
    add up (``a + b``): reads and writes add, ``peak_fast`` is the larger one, as for two
    runs one after the other on the same machine.

    Raises AttnInputError for a field that is not an integer >= 0.
    """

    reads: int
    writes: int
    total: int = field(init=False)
    peak_fast: int

    def __post_init__(self):
        for name in ("reads", "writes", "peak_fast"):
            value = check_int(f"IOCount.{name}", getattr(self, name), minimum=0)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "total", self.reads + self.writes)

    def __add__(self, other: IOCount) -> IOCount:
        if not isinstance(other, IOCount):
            return NotImplemented
        return IOCount(
            self.reads + other.reads,
            self.writes + other.writes,
            max(self.peak_fast, other.peak_fast),
        )


class Op(NamedTuple):
    """One logged event of a :class:`TwoLevelMemory` run."""

    op: str
    name: str | None
    rows: tuple[int, int] | None
    cols: tuple[int, int] | None
    words: int


def words_by_array(log) -> tuple[dict[str, int], dict[str, int]]:
    """Where a run's words went: the words loaded from and stored to each slow array, as two
    dicts ``(reads, writes)`` keyed by array name, from an operation log (``record=True``).

    Raises AttnInputError if an entry of ``log`` is not an :class:`Op`.

    Examples
    --------
    >>> mem = TwoLevelMemory(4, record=True)
    >>> mem.put("x", np.ones(6))
    >>> for rows in ((0, 3), (3, 6)):
    ...     mem.free(mem.load("x", rows))
    >>> words_by_array(mem.log)
    ({'x': 6}, {})
    """
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    if isinstance(log, str | bytes) or not hasattr(log, "__iter__"):
        raise AttnInputError(f"log must be a list of Op (a machine's log), got {log!r:.60}")
    for k, op in enumerate(log):
        if not isinstance(op, Op):
            raise AttnInputError(f"log[{k}] must be an Op of a machine's log, got {op!r:.60}")
        counts = reads if op.op == "load" else writes if op.op == "store" else None
        if counts is not None:
            counts[op.name] = counts.get(op.name, 0) + op.words
    return reads, writes


def _words(shape) -> int:
    return math.prod(shape)


def _read_only(attribute: str, doc: str) -> property:
    """A read-only property returning a private attribute of the machine."""
    return property(lambda self: getattr(self, attribute), doc=doc)


class TwoLevelMemory:
    """A fast memory of ``M`` words in front of an unbounded slow memory, counting I/O.

    Parameters
    ----------
    M : int >= 1, the fast memory's capacity in words
    record : keep the operation log (:attr:`log`), for drawing a schedule

    **Slow memory** holds named arrays. ``put`` places an input and ``zeros`` allocates an
    output; neither is I/O. The algorithm reaches slow data only through ``load`` (counts the
    block's words as reads) and ``store`` (counts them as writes). Loads copy: the slow value
    stays, as in the pebble game. ``get`` returns a copy after the run, for checking; not I/O.

    **Fast memory** holds blocks: those returned by ``load`` and the scratch space returned by
    ``alloc``. ``free`` releases them. The machine tracks the live fast words and raises
    :class:`CapacityError` the moment a ``load`` or ``alloc`` would take them above M;
    ``peak_fast`` records the maximum ever reached.

    **What it enforces, and what it does not.** It refuses (raises) a ``load`` or ``alloc``
    that would take the live words above M, a ``free`` of anything but a live block it handed
    out, a ``store`` whose block does not match the addressed region, an unknown array or an
    out-of-range block, and, at ``finish``, a block never freed. It charges exactly the words
    of ``load`` (reads) and ``store`` (writes). It does not charge, and cannot see, two
    things: a numpy temporary made inside one step (such as ``s @ v`` or ``exp(s − max)``
    before it is written into a block), which stands for work a real kernel fuses in
    registers and is at most a few block-sized arrays; and data a schedule reads from its
    Python arguments instead of from slow memory. The schedules of this package read only
    one such thing: an element ``mask`` (:func:`~attnlib.iomodel.flash_forward`,
    :func:`~attnlib.iomodel.flash_backward`), which stands for a mask computed from indices,
    as the causal one is; a mask held as data would add its r·c words per kept block to the
    reads. So a count is exact for the words of the declared blocks and capacity holds for
    them; it is not a proof that a schedule has no other source of data.

    **Block addresses.** ``rows`` and ``cols`` are half-open index ranges given as
    ``(start, stop)`` pairs of ints, with ``0 <= start < stop <= extent``; a Python ``slice``
    with step 1 (or None) and explicit bounds is accepted too and normalised to
    ``(start, stop)``. ``cols=None`` means all columns; a 1-D slow array (a vector such as
    ``lse``) takes ``cols=None`` only. A block of r rows and c columns is r·c words.

    **Operation log.** With ``record=True`` every event is appended to ``log`` as an
    :class:`Op` ``(op, name, rows, cols, words)``: ``op`` is ``"load"``, ``"store"``,
    ``"alloc"`` or ``"free"``; ``name`` is the slow array involved (for a ``free`` of a loaded
    block, the array it was loaded from; ``None`` for scratch space); ``rows``/``cols`` are
    ``(start, stop)`` pairs (``None`` for scratch space and for the columns of a vector).

    Methods:

    ``put(name, array)``, ``zeros(name, shape, dtype=float64)``: place slow arrays (no I/O).
    ``load(name, rows, cols=None) -> ndarray``: copy a block to fast memory (reads).
    ``store(name, rows, cols, block)``: write a block to slow memory (writes).
    ``alloc(shape, dtype=float64, fill=0.0) -> ndarray``: fast scratch space.
    ``free(*blocks)``: release fast blocks (a second free of the same block is an error).
    ``get(name) -> ndarray``: a copy of a slow array (no I/O).
    ``finish() -> IOCount``: the count, after checking that no fast block is still live.

    Properties: ``count`` (an :class:`IOCount`), ``reads``, ``writes``, ``live_fast``,
    ``peak_fast``, ``M``, ``log``, ``names``.

    Raises AttnInputError for M below 1 or invalid arguments of a method;
    :class:`CapacityError` when fast memory would exceed M; :class:`MachineError` for misuse.

    Examples
    --------
    >>> mem = TwoLevelMemory(8)
    >>> mem.put("x", np.arange(10.0))
    >>> mem.zeros("y", (10,))
    >>> for start in range(0, 10, 4):
    ...     rows = (start, min(start + 4, 10))
    ...     block = mem.load("x", rows)
    ...     mem.store("y", rows, None, 2 * block)
    ...     mem.free(block)
    >>> mem.finish()
    IOCount(reads=10, writes=10, total=20, peak_fast=4)
    """

    def __init__(self, M: int, *, record: bool = False):
        self._M = check_int("M", M)
        self._slow: dict[str, np.ndarray] = {}
        # Live fast blocks by id(); the array itself is kept so that its id stays unique.
        self._live: dict[int, tuple[np.ndarray, int, str | None]] = {}
        # Freed blocks, held weakly: a second free of the same object is recognised while
        # the caller still holds it, and ids are never confused after it is collected.
        self._freed: weakref.WeakValueDictionary[int, np.ndarray] = weakref.WeakValueDictionary()
        self._live_words = 0
        self._peak = 0
        self._reads = 0
        self._writes = 0
        # every schedule's record= reaches here: a truthy non-bool would add a return item
        self._record = check_bool("record", record)
        self.log: list[Op] = []

    # ---- properties --------------------------------------------------------------------
    M = _read_only("_M", "The fast memory's capacity in words.")
    reads = _read_only("_reads", "Words read so far (slow → fast).")
    writes = _read_only("_writes", "Words written so far (fast → slow).")
    live_fast = _read_only("_live_words", "Words currently held in fast memory.")
    peak_fast = _read_only("_peak", "The most words ever live in fast memory at once.")

    @property
    def count(self) -> IOCount:
        """The I/O so far as an :class:`IOCount`."""
        return IOCount(self._reads, self._writes, self._peak)

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the arrays in slow memory."""
        return tuple(self._slow)

    # ---- slow memory (no I/O) ----------------------------------------------------------
    def put(self, name: str, array) -> None:
        """Place an input array (1-D or 2-D, float) in slow memory. Not I/O; copies it."""
        self._check_new_name(name)
        arr = as_float_array(name, array, ndim=None, allow_neg_inf=True)
        if arr.ndim not in (1, 2):
            raise AttnInputError(f"{name} must be 1- or 2-dimensional, got shape {arr.shape}")
        self._slow[name] = np.array(arr, copy=True)

    def zeros(self, name: str, shape, *, dtype=np.float64) -> None:
        """Allocate a zero-filled output array in slow memory. Not I/O."""
        self._check_new_name(name)
        shape = self._check_shape("shape", shape)
        dtype = _check_dtype(dtype)
        check_memory(f"zeros {name!r}", _words(shape) * dtype.itemsize, culprits="shape")
        self._slow[name] = np.zeros(shape, dtype=dtype)

    def get(self, name: str) -> np.ndarray:
        """A copy of slow array ``name`` (for checking results; not I/O)."""
        return self._array(name).copy()

    # ---- transfers (counted) -----------------------------------------------------------
    def load(self, name: str, rows, cols=None) -> np.ndarray:
        """Copy block ``name[rows, cols]`` into fast memory and return it; counts its words as
        reads. Raises :class:`CapacityError` if it does not fit next to the live blocks."""
        arr = self._array(name)
        rows, cols, index = self._index(name, arr, rows, cols)
        block_shape = arr[index].shape
        words = _words(block_shape)
        self._reserve(words, f"load {name}")
        block = np.array(arr[index], copy=True)
        self._live[id(block)] = (block, words, name)
        self._reads += words
        if self._record:
            self.log.append(Op("load", name, rows, cols, words))
        return block

    def store(self, name: str, rows, cols, block) -> None:
        """Write ``block`` into ``name[rows, cols]`` in slow memory; counts its words as writes.

        ``block`` is a fast block or a value computed from fast blocks within this step;
        its shape must equal the addressed region's."""
        arr = self._array(name)
        rows, cols, index = self._index(name, arr, rows, cols)
        target = arr[index].shape
        block = _check_block(block)
        if block.shape != target:
            raise MachineError(
                f"store into {name}[{_fmt(rows)}, {_fmt(cols)}]: block has shape "
                f"{block.shape}, the region has shape {target}"
            )
        arr[index] = block
        words = _words(target)
        self._writes += words
        if self._record:
            self.log.append(Op("store", name, rows, cols, words))

    # ---- fast memory ---------------------------------------------------------------------
    def alloc(self, shape, *, dtype=np.float64, fill=0.0) -> np.ndarray:
        """Fast scratch space of ``shape`` (int or tuple), filled with ``fill``. Not I/O.
        Raises :class:`CapacityError` if it does not fit next to the live blocks."""
        shape = self._check_shape("shape", shape)
        dtype = _check_dtype(dtype)
        if isinstance(fill, float) and np.isinf(fill):  # -inf starts a running maximum
            fill = float(fill)
        else:
            fill = check_real("fill", fill, expected="a real number (or ±inf)")
            if abs(fill) > float(np.finfo(dtype).max):  # 1e308 in float32: not a silent inf
                raise AttnInputError(f"fill = {fill:g} is beyond the range of {dtype}")
        words = _words(shape)
        check_memory(f"alloc {shape}", words * dtype.itemsize, culprits="shape")
        self._reserve(words, f"alloc {shape}")
        block = np.full(shape, fill, dtype=dtype)
        self._live[id(block)] = (block, words, None)
        if self._record:
            self.log.append(Op("alloc", None, None, None, words))
        return block

    def free(self, *blocks: np.ndarray) -> None:
        """Release fast blocks returned by ``load`` or ``alloc``. Freeing a block twice, or
        an array this machine did not hand out (a view, a temporary), raises
        :class:`MachineError`."""
        for block in blocks:
            if not isinstance(block, np.ndarray):
                raise AttnInputError(
                    f"blocks must be arrays returned by load or alloc, got {type(block).__name__}"
                )
            entry = self._live.pop(id(block), None)
            if entry is None or entry[0] is not block:
                if entry is not None:  # an id collision with another live block: put it back
                    self._live[id(block)] = entry
                if self._freed.get(id(block)) is block:
                    raise MachineError("double free: this fast block was already freed")
                raise MachineError(
                    "free of an array that is not a live fast block of this machine "
                    "(only arrays returned by load or alloc can be freed, not views or "
                    "temporaries)"
                )
            _, words, origin = entry
            self._live_words -= words
            self._freed[id(block)] = block
            if self._record:
                self.log.append(Op("free", origin, None, None, words))

    def finish(self) -> IOCount:
        """Return :attr:`count` after checking that every fast block was freed.

        Raises :class:`MachineError` naming the leaked words otherwise: an algorithm that
        forgets to free is caught even when it never overflows."""
        if self._live:
            origins = sorted({o or "scratch" for _, _, o in self._live.values()})
            blocks = f"{len(self._live)} fast block" + ("s" if len(self._live) != 1 else "")
            raise MachineError(
                f"{blocks} ({self._live_words} words) never freed (from: {', '.join(origins)})"
            )
        return self.count

    # ---- helpers -------------------------------------------------------------------------
    def _reserve(self, words: int, what: str) -> None:
        if self._live_words + words > self._M:
            raise CapacityError(self._live_words, words, self._M, what)
        self._live_words += words
        self._peak = max(self._peak, self._live_words)

    def _check_new_name(self, name) -> None:
        if not isinstance(name, str) or not name:
            raise AttnInputError(f"name must be a non-empty string, got {name!r}")
        if name in self._slow:
            raise AttnInputError(f"name {name!r} is already in slow memory")

    @staticmethod
    def _check_shape(argname: str, shape) -> tuple[int, ...]:
        if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
            shape = (shape,)
        try:
            shape = tuple(shape)
        except TypeError:
            raise AttnInputError(
                f"{argname} must be an int or a tuple of ints, got {shape!r}"
            ) from None
        try:
            if not shape:
                raise AttnInputError(f"{argname} must not be empty")
            return tuple(check_int(f"{argname}[{k}]", s) for k, s in enumerate(shape))
        except AttnInputError:
            raise AttnInputError(
                f"{argname} must be a tuple of positive ints, got {shape!r}"
            ) from None

    def _array(self, name: str) -> np.ndarray:
        try:
            return self._slow[name]
        except (KeyError, TypeError):
            have = ", ".join(repr(k) for k in self._slow) or "nothing"
            raise MachineError(
                f"no array named {name!r} in slow memory (it holds {have})"
            ) from None

    def _index(self, name, arr, rows, cols):
        rows = _range(name, "rows", rows, arr.shape[0])
        if arr.ndim == 1:
            if cols is not None:
                raise MachineError(f"{name} is a vector: cols must be None, got {cols!r}")
            return rows, None, slice(*rows)
        cols = (0, arr.shape[1]) if cols is None else _range(name, "cols", cols, arr.shape[1])
        return rows, cols, (slice(*rows), slice(*cols))


def _check_dtype(dtype) -> np.dtype:
    """The machine holds float32 or float64 words."""
    try:
        dt = np.dtype(dtype) if dtype is not None else None
    except TypeError:
        dt = None
    if dt is None or dt not in FLOAT_DTYPES:
        raise AttnInputError(f"dtype must be float32 or float64, got {dtype!r:.60}")
    return dt


def _check_block(block) -> np.ndarray:
    """A block to store: a real numeric array (complex, strings and objects refused)."""
    try:
        arr = np.asarray(block)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(f"block must be a numeric array ({exc})") from exc
    if arr.dtype.kind not in "fiub":
        raise AttnInputError(f"block must be a real numeric array, got dtype {arr.dtype}")
    return arr


def _range(name: str, what: str, r, extent: int) -> tuple[int, int]:
    """Normalise a (start, stop) pair or a step-1 slice to (start, stop), checking bounds."""
    if isinstance(r, slice):
        if r.step not in (None, 1) or r.start is None or r.stop is None:
            raise MachineError(
                f"{what} of {name} must be (start, stop) or a slice with explicit bounds and "
                f"step 1, got {r!r}"
            )
        r = (r.start, r.stop)
    if (
        not isinstance(r, tuple)
        or len(r) != 2
        or not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in r)
    ):
        raise MachineError(f"{what} of {name} must be a (start, stop) pair of ints, got {r!r}")
    start, stop = int(r[0]), int(r[1])
    if not 0 <= start < stop <= extent:
        raise MachineError(
            f"{what} ({start}, {stop}) out of bounds for {name}: need 0 <= start < stop <= {extent}"
        )
    return start, stop


def _fmt(r) -> str:
    return ":" if r is None else f"{r[0]}:{r[1]}"
