"""The counting communicator: the only way the sharded schedules talk, with every word counted
where it is handed to MPI.

:class:`CountingComm` wraps an mpi4py communicator. A message is a list of parts
``(kind, array)`` of one dtype (say the K and V blocks of a ring step), packed into one
contiguous buffer and sent as one point-to-point transfer; the calling rank counts, per kind
("Q", "K", "V", "dK", ...), the words (array entries) and bytes of every buffer it hands to MPI
for another rank and of every buffer it receives, and the messages either way. A collective is
made of such transfers, as the communication model counts it (one message per pair of devices
and round): an all-to-all, an all-gather and a reduce-scatter among k ranks are k - 1 pairwise
exchanges, so each rank sends and receives exactly k - 1 messages, and the block a rank keeps
for itself is no communication (0 words, 0 messages). An MPI library's own collectives may
route data through other ranks (trees, rings), whose traffic would not be the model's.

The schedules' cross-rank input check uses a separate control channel (messages under their
own tag, so that they never match a schedule's), counted separately: its bytes
are the pickled signatures, never mixed into the words and bytes of the schedule.

The counts of the calling rank are read with :meth:`CountingComm.count`, a :class:`RankCount`;
sub-communicators made by :meth:`CountingComm.split` (a grid's rows and columns) add to the
same counts.
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass, field

import numpy as np

from .._checks import FLOAT_DTYPES, AttnInputError, check_int

__all__ = ["CountingComm", "RankCount", "KINDS"]

#: The kinds of array a schedule sends: inputs, the forward's outputs (a partial O and lse in
#: the grid's reduce-scatter), the backward's row statistic D and the gradients.
KINDS = ("Q", "K", "V", "O", "lse", "dO", "D", "dQ", "dK", "dV")

#: Fault injection for the tests, "RANK:STEP:ACTION": the rank (of the communicator first
#: wrapped in the process) exits (os._exit), sleeps, or raises just before its STEP-th
#: point-to-point transfer (0-based, counted over the whole process). Private.
FAULT_ENV = "ATTNLIB_DISTRIBUTED_FAULT"

#: The tags of the schedules' messages and of the control channel's: distinct, so that the two
#: never match each other's receives.
DATA_TAG, CONTROL_TAG = 0, 1

#: What an injected exit returns to the launcher.
FAULT_EXIT_CODE = 17


@dataclass(frozen=True)
class RankCount:
    """What one rank sent and received through a :class:`CountingComm`.

    ``sent``, ``received``: words (array entries) handed to MPI for another rank, and received
    from one; ``sent_bytes``, ``received_bytes``: the bytes of those buffers (words times the
    item size); ``messages_sent``, ``messages_received``: point-to-point transfers;
    ``sent_by_kind``, ``received_by_kind``: words per kind of array (:data:`KINDS`), only
    kinds that moved; ``control_messages``, ``control_bytes``: the input check's messages and
    pickled bytes sent on the control channel; ``work``: the score entries this rank
    evaluated, summed over its query heads (the kept ones: a masked entry is no work).
    """

    rank: int
    sent: int = 0
    received: int = 0
    sent_bytes: int = 0
    received_bytes: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    sent_by_kind: dict = field(default_factory=dict)
    received_by_kind: dict = field(default_factory=dict)
    control_messages: int = 0
    control_bytes: int = 0
    work: int = 0

    def to_dict(self) -> dict:
        """The record as plain Python values (for JSON)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict) -> RankCount:
        """The inverse of :meth:`to_dict`. Raises AttnInputError naming ``data`` unless it is
        a dict with exactly the record's fields."""
        fields = set(cls.__dataclass_fields__)
        if not isinstance(data, dict) or set(data) != fields:
            raise AttnInputError(f"data must be a dict with the keys {sorted(fields)}")
        return cls(**data)


class _Counter:
    """The mutable counts of one process, shared by a communicator and its splits."""

    def __init__(self, rank: int):
        self.rank = rank
        self.steps = 0  # point-to-point transfers started, for fault injection
        self.fault = _parse_fault(os.environ.get(FAULT_ENV, ""))
        self.reset()

    def reset(self):
        self.words = {"sent": 0, "received": 0}
        self.bytes = {"sent": 0, "received": 0}
        self.messages = {"sent": 0, "received": 0}
        self.by_kind = {"sent": {}, "received": {}}
        self.control_messages = 0
        self.control_bytes = 0
        self.work = 0

    def add(self, way: str, parts, nbytes: int):
        self.messages[way] += 1
        self.bytes[way] += nbytes
        kinds = self.by_kind[way]
        for kind, size in parts:
            self.words[way] += size
            kinds[kind] = kinds.get(kind, 0) + size

    def step(self):
        """Before a transfer: the injected fault, if this is its rank and step."""
        if self.fault is not None and self.fault[:2] == (self.rank, self.steps):
            action = self.fault[2]
            if action == "exit":
                os._exit(FAULT_EXIT_CODE)
            if action == "sleep":
                time.sleep(3600)
            raise RuntimeError(f"injected fault on rank {self.rank} at step {self.steps}")
        self.steps += 1


def _parse_fault(text: str):
    if not text:
        return None
    rank, step, action = text.split(":")
    if action not in ("exit", "sleep", "raise"):
        raise ValueError(f"{FAULT_ENV}: action must be exit, sleep or raise, got {action!r}")
    return int(rank), int(step), action


def _check_parts(parts, name="parts"):
    """A message's parts: a non-empty list of (kind, array) with kind in KINDS and arrays of
    one float dtype. Returns them as a list of (kind, C-contiguous array)."""
    try:
        items = list(parts)
    except TypeError:
        raise AttnInputError(f"{name} must be a list of (kind, array) pairs") from None
    if not items:
        raise AttnInputError(f"{name} must hold at least one (kind, array) pair")
    out = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise AttnInputError(f"{name} must be a list of (kind, array) pairs, got {item!r:.60}")
        kind, a = item
        if kind not in KINDS:
            raise AttnInputError(f"{name}: kind must be one of {KINDS}, got {kind!r:.60}")
        if not isinstance(a, np.ndarray) or a.dtype not in FLOAT_DTYPES:
            raise AttnInputError(f"{name}: the {kind} part must be a float32 or float64 array")
        out.append((kind, a))
    if len({a.dtype for _, a in out}) > 1:
        raise AttnInputError(f"{name}: every part of a message must have one dtype")
    return out


def _pack(parts) -> np.ndarray:
    """The parts raveled into one contiguous buffer (one message)."""
    if len(parts) == 1:
        return np.ascontiguousarray(parts[0][1]).reshape(-1)
    return np.concatenate([a.reshape(-1) for _, a in parts])


def _unpack(buf: np.ndarray, shapes) -> list[np.ndarray]:
    out, at = [], 0
    for _, shape in shapes:
        size = int(np.prod(shape))
        out.append(buf[at : at + size].reshape(shape))
        at += size
    return out


def _template(parts):
    return [(kind, a.shape) for kind, a in parts]


class _Pending:
    """A started exchange: :meth:`wait` completes it and returns the received arrays."""

    def __init__(self, requests, sendbuf, recvbuf, shapes):
        # the send buffer must live until the wait: the pending exchange holds it
        self._requests, self._sendbuf = requests, sendbuf
        self._buf, self._shapes = recvbuf, shapes

    def wait(self) -> list[np.ndarray]:
        from mpi4py import MPI

        statuses = [MPI.Status(), MPI.Status()]
        MPI.Request.Waitall(self._requests, statuses)
        # MPI lets a shorter message land in the front of the buffer without an error: the
        # rest would be uninitialised memory returned as data
        got = statuses[0].Get_count(MPI.BYTE)
        if got != self._buf.nbytes:
            raise AttnInputError(
                f"recv: expected {self._buf.nbytes} bytes from the peer, got {got}: the two "
                "ranks disagree on the shapes or dtype of the message"
            )
        return _unpack(self._buf, self._shapes)


class CountingComm:
    """An mpi4py communicator whose every transfer is counted on the calling rank.

    Parameters
    ----------
    comm : an ``mpi4py.MPI.Intracomm`` (``MPI.COMM_WORLD``, ``MPI.COMM_SELF``, a split)

    Attributes ``rank`` and ``size`` are the communicator's. Messages are lists of parts
    ``(kind, array)``, one float dtype per message; what a rank receives is described by a
    template ``[(kind, shape), ...]``, by default the same kinds and shapes it sends (every
    schedule here exchanges blocks of one shape). Every method is collective over the ranks
    that take part, as the MPI call it makes.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> comm = CountingComm(MPI.COMM_SELF)
    >>> comm.count().sent, comm.size
    (0, 1)
    """

    def __init__(self, comm, *, _counter: _Counter | None = None):
        if not (hasattr(comm, "Sendrecv") and hasattr(comm, "Get_rank")):
            raise AttnInputError(f"comm must be an mpi4py communicator, got {comm!r:.60}")
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self._counter = _counter if _counter is not None else _Counter(self.rank)

    # ---- counts ----------------------------------------------------------------------------

    def count(self) -> RankCount:
        """The calling rank's counts so far (a snapshot)."""
        c = self._counter
        return RankCount(
            rank=c.rank,
            sent=c.words["sent"],
            received=c.words["received"],
            sent_bytes=c.bytes["sent"],
            received_bytes=c.bytes["received"],
            messages_sent=c.messages["sent"],
            messages_received=c.messages["received"],
            sent_by_kind=dict(c.by_kind["sent"]),
            received_by_kind=dict(c.by_kind["received"]),
            control_messages=c.control_messages,
            control_bytes=c.control_bytes,
            work=c.work,
        )

    def reset(self) -> None:
        """Set the calling rank's counts to zero (its splits' too: they share them)."""
        self._counter.reset()

    def add_work(self, entries) -> None:
        """Record ``entries`` score entries evaluated on this rank (not communication)."""
        self._counter.work += check_int("entries", entries, minimum=0)

    # ---- point-to-point ---------------------------------------------------------------------

    def _peer(self, name, value):
        v = check_int(name, value, minimum=0, maximum=self.size - 1)
        if v == self.rank:
            # sending to oneself is no communication: the schedules keep such blocks
            raise AttnInputError(f"{name} must be another rank than {self.rank}")
        return v

    def start_sendrecv(self, parts, *, dest, source, recv=None) -> _Pending:
        """Start sending ``parts`` to ``dest`` (one message) while receiving one message from
        ``source`` described by ``recv`` (default: ``parts``' kinds and shapes); both counted
        now. Returns a pending exchange whose ``wait()`` gives the received arrays."""
        parts = _check_parts(parts)
        dest, source = self._peer("dest", dest), self._peer("source", source)
        shapes = _template(parts) if recv is None else list(recv)
        dtype = parts[0][1].dtype
        sendbuf = _pack(parts)
        recvbuf = np.empty(sum(int(np.prod(s)) for _, s in shapes), dtype)
        self._counter.step()
        requests = [
            self.comm.Irecv(recvbuf, source=source, tag=DATA_TAG),
            self.comm.Isend(sendbuf, dest=dest, tag=DATA_TAG),
        ]
        self._counter.add("sent", [(k, a.size) for k, a in parts], sendbuf.nbytes)
        self._counter.add("received", [(k, int(np.prod(s))) for k, s in shapes], recvbuf.nbytes)
        return _Pending(requests, sendbuf, recvbuf, shapes)

    def sendrecv(self, parts, *, dest, source, recv=None) -> list[np.ndarray]:
        """Send ``parts`` to ``dest`` and receive from ``source`` (blocking); returns the
        received arrays, in ``recv``'s order (default: like ``parts``)."""
        return self.start_sendrecv(parts, dest=dest, source=source, recv=recv).wait()

    # ---- collectives as pairwise exchanges ---------------------------------------------------

    def alltoall(self, blocks, recv=None) -> list[list[np.ndarray]]:
        """Personalised all-to-all: ``blocks[q]`` is the message (a list of parts) for rank q.
        In round k = 1..size-1 this rank sends to rank + k and receives from rank - k (mod
        size): size - 1 messages each way. Returns ``out[s]``, the arrays received from rank s
        (``recv[s]`` describes them, default ``blocks[s]``'s kinds and shapes); ``out[rank]``
        is this rank's own block, kept, not sent."""
        if len(blocks) != self.size:
            raise AttnInputError(f"blocks must hold one message per rank ({self.size})")
        out = [None] * self.size
        out[self.rank] = [a for _, a in _check_parts(blocks[self.rank])]
        for k in range(1, self.size):
            dest, source = (self.rank + k) % self.size, (self.rank - k) % self.size
            shapes = _template(_check_parts(blocks[source])) if recv is None else recv[source]
            out[source] = self.sendrecv(blocks[dest], dest=dest, source=source, recv=shapes)
        return out

    def allgather(self, parts) -> list[list[np.ndarray]]:
        """Every rank's ``parts`` (one shape on every rank), done directly: size - 1 messages
        each way. Returns ``out[s]``, rank s's arrays (``out[rank]``: this rank's own)."""
        return self.alltoall([parts] * self.size)

    def reduce_scatter(self, blocks, reduce):
        """``blocks[q]`` is this rank's contribution to rank q's result; every rank sends its
        contributions directly (size - 1 messages each way) and folds the ones to it in rank
        order, its own at its place: ``acc = reduce(acc, next)`` over lists of arrays.
        Returns the reduced list of arrays."""
        parts = self.alltoall(blocks)
        acc = parts[0]
        for s in range(1, self.size):
            acc = reduce(acc, parts[s])
        return acc

    def split(self, color, key) -> CountingComm:
        """``MPI_Comm_split``: the ranks with the same ``color``, ordered by ``key``; the new
        communicator adds to this rank's counts."""
        color, key = check_int("color", color, minimum=0), check_int("key", key, minimum=0)
        return CountingComm(self.comm.Split(color, key), _counter=self._counter)

    # ---- the control channel -------------------------------------------------------------

    def free(self) -> None:
        """Free the wrapped communicator (a split's; never COMM_WORLD or COMM_SELF)."""
        self.comm.Free()

    # ---- the control channel -------------------------------------------------------------

    def control_allgather(self, obj) -> list:
        """Every rank's ``obj`` (picklable), on the control channel: pairwise exchanges under
        their own tag, so that they never match a schedule's messages, counted as control
        messages and bytes only."""
        try:
            nbytes = len(pickle.dumps(obj))
        except Exception as exc:  # lambdas, open files and the like
            raise AttnInputError(f"obj must be picklable ({exc!s:.100})") from None
        out = [None] * self.size
        out[self.rank] = obj
        for k in range(1, self.size):
            dest, source = (self.rank + k) % self.size, (self.rank - k) % self.size
            out[source] = self.comm.sendrecv(
                obj, dest=dest, sendtag=CONTROL_TAG, source=source, recvtag=CONTROL_TAG
            )
            self._counter.control_messages += 1
            self._counter.control_bytes += nbytes
        return out
