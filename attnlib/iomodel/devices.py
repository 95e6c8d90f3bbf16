"""P devices that hold their own data and exchange it by counted messages.

The two-level machine (:mod:`.machine`) counts the words one processor moves between its fast
and slow memory. Across P devices the cost that matters is the words and messages that travel
between devices (the distributed-memory model of Irony, Toledo and Tiskin 2004):
:class:`DeviceMachine` runs a schedule with real arrays, device by device, and counts every
word a device sends and receives, by kind (Q, K, V, ...), in rounds of point-to-point messages.
:class:`DeviceCount` is the count, which each schedule's closed-form twin reproduces exactly.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from .._checks import AttnInputError, as_float_array, check_int
from .machine import MachineError

__all__ = ["DeviceMachine", "DeviceCount"]


def _counts(name: str, value, P: int | None) -> np.ndarray:
    """A per-device count: a 1-D array of integers >= 0 (of length P when P is given)."""
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(f"{name} must be a 1-D array of ints >= 0 ({exc})") from None
    if arr.dtype.kind not in "iu" or arr.ndim != 1 or arr.size == 0:
        raise AttnInputError(
            f"{name} must be a non-empty 1-D array of ints >= 0 (one per device), got "
            f"{arr.dtype} of shape {arr.shape}"
        )
    if P is not None and arr.shape != (P,):
        raise AttnInputError(
            f"{name} must have one entry per device, (P,) = ({P},), got {arr.shape}"
        )
    if (arr < 0).any():
        raise AttnInputError(f"{name} must be >= 0 on every device, got {arr.tolist()!r:.80}")
    out = arr.astype(np.int64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class DeviceCount:
    """What one run of a schedule on P devices communicated and computed, per device.

    Attributes (each an int64 array of shape (P,), read only)
    ----------
    sent, received : words (scalars) each device sent and received
    messages : point-to-point messages each device sent (a collective counts as the messages
        it is made of; a message carries any number of blocks to one device in one round)
    work : score entries each device evaluated, summed over query heads (kept entries only)
    received_by_kind : dict kind -> words each device received of that kind ("Q", "K", "V",
        "O", "lse", "dO", "D", "dQ", "dK", "dV", ...). Kinds with no word anywhere are
        dropped and the keys sorted, so two counts of the same run compare equal however
        they were built.

    Two counts are equal (``==``) when every field is equal exactly. Properties: ``P``,
    ``max_sent``, ``max_received``, ``imbalance`` (max work / mean work, 1.0 with no work).

    Raises AttnInputError for a field that is not a (P,) array of ints >= 0, or a kind that is
    not a non-empty string.

    Examples
    --------
    >>> c = DeviceCount([3, 3], [3, 3], [1, 1], [4, 2], {"K": [3, 3]})
    >>> c.max_sent, c.imbalance
    (3, 1.3333333333333333)
    """

    sent: np.ndarray
    received: np.ndarray
    messages: np.ndarray
    work: np.ndarray
    received_by_kind: dict = field(default_factory=dict)

    def __post_init__(self):
        sent = _counts("sent", self.sent, None)
        P = sent.shape[0]
        object.__setattr__(self, "sent", sent)
        for name in ("received", "messages", "work"):
            object.__setattr__(self, name, _counts(name, getattr(self, name), P))
        kinds = self.received_by_kind
        if not isinstance(kinds, dict):
            raise AttnInputError(
                f"received_by_kind must be a dict kind -> (P,) words, got {type(kinds).__name__}"
            )
        clean = {}
        for kind in sorted(kinds, key=str):
            if not isinstance(kind, str) or not kind:
                raise AttnInputError(
                    f"received_by_kind's kinds must be non-empty strings, got {kind!r}"
                )
            words = _counts(f"received_by_kind[{kind!r}]", kinds[kind], P)
            if words.any():
                clean[kind] = words
        object.__setattr__(self, "received_by_kind", clean)

    __hash__ = None  # equal counts need not hash equal: arrays are not hashable

    def __eq__(self, other) -> bool:
        if not isinstance(other, DeviceCount):
            return NotImplemented
        same = all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in ("sent", "received", "messages", "work")
        )
        mine, theirs = self.received_by_kind, other.received_by_kind
        return (
            same
            and mine.keys() == theirs.keys()
            and all(np.array_equal(mine[k], theirs[k]) for k in mine)
        )

    @property
    def P(self) -> int:
        """The number of devices."""
        return int(self.sent.shape[0])

    @property
    def max_sent(self) -> int:
        """The most words any device sent."""
        return int(self.sent.max())

    @property
    def max_received(self) -> int:
        """The most words any device received."""
        return int(self.received.max())

    @property
    def imbalance(self) -> float:
        """max work / mean work over the devices: 1.0 when the work is balanced (or zero)."""
        total = int(self.work.sum())
        return 1.0 if total == 0 else float(self.work.max()) * self.P / total


def _device(name: str, p, P: int) -> int:
    return check_int(name, p, minimum=0, maximum=P - 1)


def _name(argname: str, name) -> str:
    if not isinstance(name, str) or not name:
        raise AttnInputError(f"{argname} must be a non-empty string, got {name!r:.60}")
    return name


def _names(argname: str, names) -> list[str]:
    if isinstance(names, str) or not isinstance(names, list | tuple) or not names:
        raise AttnInputError(
            f"{argname} must be a non-empty list of block names, got {names!r:.60}"
        )
    out = [_name(f"{argname}[{k}]", x) for k, x in enumerate(names)]
    if len(set(out)) != len(out):
        raise AttnInputError(f"{argname} names a block twice: {out!r:.80}")
    return out


class DeviceMachine:
    """P devices, each with its own store of named arrays, and the words they exchange.

    Parameters
    ----------
    P : int >= 1, the number of devices, numbered 0 .. P-1

    **Placement and local work are free.** ``load(p, name, array, kind)`` places an input
    block on device p before the run (the initial layout); ``put(p, name, array, kind)`` stores
    a result device p computed from blocks it holds (it may replace a block of p's own, as an
    accumulator is updated); ``drop(p, name)`` frees one; ``compute(p, entries)`` records
    ``entries`` score entries of work on device p. ``get(p, name)`` returns a read-only view of a
    block p holds. Every block has a ``kind`` (a non-empty string: "Q", "K", "dK", ...), under
    which the words of it that travel are counted.

    **Communication is counted.** ``exchange(messages)`` is one round of point-to-point
    messages, each ``(src, dst, names at src, names at dst)``: device src sends copies of its
    named blocks (it keeps them) and dst stores them under the new names, with their kinds.
    The round is simultaneous, as a ring's sendrecv is: every block is read before any is
    written, so a block received in a round can be sent on only in a later round. The machine
    adds each block's words (its number of scalars) to src's ``sent`` and dst's ``received``
    and to dst's words of that kind, and one message to src's ``messages``.

    **What it enforces, and what it does not.** It refuses (:class:`MachineError`, naming the
    device and the block) a ``get``, ``drop`` or send of a block the device does not hold; a
    message from a device to itself (not communication: a device reads its own blocks with
    ``get``); a second message between the same two devices in one round; a received block
    that would overwrite one the receiver holds, or that two messages of one round give the
    same name; and a ``load`` over a block already placed. Devices out of range and malformed
    arguments raise AttnInputError. So words move between devices only through counted
    exchanges, and a device can read only what it holds. The machine cannot see how a schedule
    computes a ``put`` value: it trusts the schedule to compute it from blocks the device
    holds (the schedules of this package read their inputs only through ``get``), and it
    counts the work the schedule reports with ``compute``. Memory is not bounded; the words
    each device holds are tracked and ``peak_words`` reports the most it ever held.

    Methods: ``load``, ``put``, ``get``, ``drop``, ``holds(p, name) -> bool``,
    ``exchange(messages)``, ``compute(p, entries)``, ``count() -> DeviceCount``.
    Properties: ``P``, ``words`` (words held now, per device), ``peak_words``, ``rounds``.

    Raises AttnInputError for P below 1 or invalid arguments of a method.

    Examples
    --------
    A ring rotation: every device sends its block to the next one in one round.

    >>> m = DeviceMachine(3)
    >>> for p in range(3):
    ...     m.load(p, f"x{p}", np.full(2, float(p)), "K")
    >>> m.exchange([(p, (p + 1) % 3, [f"x{p}"], [f"x{p}"]) for p in range(3)])
    >>> m.get(1, "x0").tolist(), m.count().sent.tolist(), m.count().messages.tolist()
    ([0.0, 0.0], [2, 2, 2], [1, 1, 1])
    """

    def __init__(self, P: int):
        self._P = check_int("P", P)
        self._store: list[dict[str, tuple[np.ndarray, str]]] = [{} for _ in range(self._P)]
        self._sent = np.zeros(self._P, np.int64)
        self._received = np.zeros(self._P, np.int64)
        self._messages = np.zeros(self._P, np.int64)
        self._work = np.zeros(self._P, np.int64)
        self._by_kind: dict[str, np.ndarray] = {}
        self._words = np.zeros(self._P, np.int64)
        self._peak = np.zeros(self._P, np.int64)
        self._rounds = 0

    # ---- properties --------------------------------------------------------------------
    @property
    def P(self) -> int:
        """The number of devices."""
        return self._P

    @property
    def words(self) -> np.ndarray:
        """The words each device holds now, (P,)."""
        return self._words.copy()

    @property
    def peak_words(self) -> np.ndarray:
        """The most words each device ever held at once, (P,)."""
        return self._peak.copy()

    @property
    def rounds(self) -> int:
        """The rounds of exchange so far."""
        return self._rounds

    # ---- local, free ---------------------------------------------------------------------
    def load(self, p: int, name: str, array, kind: str) -> None:
        """Place input block ``name`` on device p (the initial layout; not counted).

        Copies ``array`` (a float array; -inf allowed, as in a masked row's lse). Refuses
        (:class:`MachineError`) a name device p already holds."""
        p, name, arr, kind = self._block_args(p, name, array, kind)
        if name in self._store[p]:
            raise MachineError(f"load: device {p} already holds a block named {name!r}")
        self._set(p, name, arr, kind)

    def put(self, p: int, name: str, array, kind: str) -> None:
        """Store a result device p computed from blocks it holds (not counted); replaces
        p's own block of that name if there is one (an accumulator updated)."""
        p, name, arr, kind = self._block_args(p, name, array, kind)
        if name in self._store[p]:
            self._remove(p, name)
        self._set(p, name, arr, kind)

    def get(self, p: int, name: str) -> np.ndarray:
        """A read-only view of block ``name`` of device p; :class:`MachineError` if p does not
        hold it."""
        p = _device("p", p, self._P)
        return self._held(p, _name("name", name), "get")[0]

    def holds(self, p: int, name: str) -> bool:
        """Whether device p holds a block named ``name``."""
        return _name("name", name) in self._store[_device("p", p, self._P)]

    def drop(self, p: int, name: str) -> None:
        """Free block ``name`` of device p; :class:`MachineError` if p does not hold it."""
        p = _device("p", p, self._P)
        self._held(p, _name("name", name), "drop")
        self._remove(p, name)

    def compute(self, p: int, entries: int) -> None:
        """Record ``entries`` (an int >= 0) score entries evaluated on device p."""
        p = _device("p", p, self._P)
        self._work[p] += check_int("entries", entries, minimum=0)

    # ---- communication, counted ----------------------------------------------------------
    def exchange(self, messages) -> None:
        """One round of point-to-point messages ``(src, dst, [names at src], [names at dst])``.

        All blocks are read before any is written (a simultaneous round). Refuses, before
        anything moves, every misuse listed in the class docstring."""
        if isinstance(messages, str | bytes) or not hasattr(messages, "__iter__"):
            raise AttnInputError(
                f"messages must be a list of (src, dst, names at src, names at dst), got "
                f"{messages!r:.60}"
            )
        messages = list(messages)
        pairs: set[tuple[int, int]] = set()
        arriving: set[tuple[int, str]] = set()
        moves = []
        for k, message in enumerate(messages):
            if not isinstance(message, tuple | list) or len(message) != 4:
                raise AttnInputError(
                    f"messages[{k}] must be (src, dst, names at src, names at dst), got "
                    f"{message!r:.60}"
                )
            src = _device(f"messages[{k}] src", message[0], self._P)
            dst = _device(f"messages[{k}] dst", message[1], self._P)
            names = _names(f"messages[{k}] names at src", message[2])
            new = _names(f"messages[{k}] names at dst", message[3])
            if len(new) != len(names):
                raise AttnInputError(
                    f"messages[{k}] gives {len(names)} names at src and {len(new)} at dst"
                )
            if src == dst:
                raise MachineError(
                    f"device {src} sends {names[0]!r} to itself: that is not communication "
                    "(a device reads its own blocks with get)"
                )
            if (src, dst) in pairs:
                raise MachineError(
                    f"a second message from device {src} to device {dst} in one round "
                    f"(with {names[0]!r}): pack the blocks into one message"
                )
            pairs.add((src, dst))
            for old, name in zip(names, new, strict=True):
                arr, kind = self._held(src, old, f"send to device {dst}")
                if name in self._store[dst] or (dst, name) in arriving:
                    raise MachineError(
                        f"device {src} sends {old!r} to device {dst} as {name!r}, which would "
                        f"overwrite a block device {dst} holds or receives in this round"
                    )
                arriving.add((dst, name))
                moves.append((src, dst, name, arr, kind))
        self._rounds += 1
        for src, dst, name, arr, kind in moves:  # every read above, now every write
            words = arr.size
            self._sent[src] += words
            self._received[dst] += words
            if kind not in self._by_kind:
                self._by_kind[kind] = np.zeros(self._P, np.int64)
            self._by_kind[kind][dst] += words
            self._set(dst, name, arr, kind)
        for src, _ in pairs:
            self._messages[src] += 1

    def count(self) -> DeviceCount:
        """The communication and work so far, as a :class:`DeviceCount`."""
        return DeviceCount(
            self._sent.copy(),
            self._received.copy(),
            self._messages.copy(),
            self._work.copy(),
            {k: v.copy() for k, v in self._by_kind.items()},
        )

    # ---- helpers -------------------------------------------------------------------------
    def _block_args(self, p, name, array, kind):
        p = _device("p", p, self._P)
        name = _name("name", name)
        kind = _name("kind", kind)
        if not isinstance(array, np.ndarray | numbers.Real | list | tuple):
            raise AttnInputError(f"array must be a float array, got {type(array).__name__}")
        arr = as_float_array("array", array, ndim=None, allow_neg_inf=True)
        return p, name, arr, kind

    def _held(self, p: int, name: str, what: str) -> tuple[np.ndarray, str]:
        try:
            return self._store[p][name]
        except KeyError:
            have = ", ".join(repr(k) for k in self._store[p]) or "nothing"
            raise MachineError(
                f"{what}: device {p} does not hold a block named {name!r} (it holds {have})"
            ) from None

    def _set(self, p: int, name: str, arr: np.ndarray, kind: str) -> None:
        # a private read-only copy: no caller can change a block behind the machine's back
        block = np.array(arr, copy=True)
        block.setflags(write=False)
        self._store[p][name] = (block, kind)
        self._words[p] += block.size
        self._peak[p] = max(self._peak[p], self._words[p])

    def _remove(self, p: int, name: str) -> None:
        block, _ = self._store[p].pop(name)
        self._words[p] -= block.size
