"""The counting communicator (attnlib.distributed.comm): what it delivers and what it counts.

The schedules' counts are only as good as this: every word handed to MPI for another rank is
counted once on the sender and once on the receiver, by kind, with the bytes of the very
buffer; a rank's block for itself is not communication; the control channel is counted apart.
Checked on 3 ranks with blocks of a different shape for every pair of ranks (so a count that
used the wrong block's size, or counted the self block, is off), and on a single rank
(MPI.COMM_SELF) in this process.
"""

from __future__ import annotations

import numpy as np
import pytest
from spmd import run_spmd

from attnlib import AttnInputError
from attnlib.distributed import CountingComm, RankCount
from attnlib.distributed import comm as cm

P = 3

SPMD_COMM = """
def body(comm, directory):
    r, P = comm.rank, comm.size
    rep = {}
    # all-to-all: rank r sends rank q a (q + 1) x (r + 1) block of 10 r + q, float64
    blocks = [[("Q", np.full((q + 1, r + 1), 10.0 * r + q))] for q in range(P)]
    recv = [[("Q", (r + 1, s + 1))] for s in range(P)]
    got = comm.alltoall(blocks, recv)
    rep["alltoall"] = [a[0].tolist() for a in got]
    rep["alltoall_count"] = comm.count().to_dict()
    comm.reset()
    # one ring step of a float32 message of two kinds
    parts = [("K", np.full((2, 3), r, np.float32)), ("V", np.full(4, r, np.float32))]
    K, V = comm.sendrecv(parts, dest=(r + 1) % P, source=(r - 1) % P)
    rep["ring"] = [K.tolist(), V.tolist(), str(K.dtype)]
    rep["ring_count"] = comm.count().to_dict()
    comm.reset()
    # all-gather and reduce-scatter among all ranks, then in a split (ranks 0, 2 | rank 1)
    rep["allgather"] = [a[0].tolist() for a in comm.allgather([("lse", np.full(2, float(r)))])]
    blocks = [[("dQ", np.full(2, 10.0 * r + q))] for q in range(P)]
    rep["reduce"] = comm.reduce_scatter(blocks, lambda a, b: [a[0] + b[0]])[0].tolist()
    sub = comm.split(r % 2, r)
    rep["sub"] = [sub.rank, sub.size]
    rep["sub_allgather"] = [a[0].tolist() for a in sub.allgather([("D", np.full(1, float(r)))])]
    sub.free()
    rep["collective_count"] = comm.count().to_dict()
    comm.reset()
    rep["control"] = comm.control_allgather({"rank": r, "pad": "x" * r})
    rep["control_count"] = comm.count().to_dict()
    # a message shorter than the receiver expects: MPI delivers it without an error
    try:
        comm.sendrecv([("K", np.zeros(3))], dest=(r + 1) % P, source=(r - 1) % P,
                      recv=[("K", (4,))])
        rep["short"] = None
    except Exception as exc:
        rep["short"] = f"{type(exc).__name__}: {exc}"
    (directory / f"out{r}.json").write_text(json.dumps(rep))
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return run_spmd(tmp_path_factory.mktemp("comm"), P, SPMD_COMM, timeout=60)


def test_alltoall_delivers_each_block_and_counts_only_the_others(reports):
    """Rank r receives from s the (r + 1) x (s + 1) block of 10 s + r, keeps its own, and
    counts exactly the words of the blocks to and from the other ranks: one message each."""
    for r, rep in enumerate(reports):
        for s, block in enumerate(rep["alltoall"]):
            assert np.array_equal(block, np.full((r + 1, s + 1), 10.0 * s + r))
        c = RankCount.from_dict(rep["alltoall_count"])
        sent = sum((q + 1) * (r + 1) for q in range(P) if q != r)
        received = sum((r + 1) * (s + 1) for s in range(P) if s != r)
        assert (c.sent, c.received) == (sent, received)
        assert (c.sent_bytes, c.received_bytes) == (8 * sent, 8 * received)
        assert (c.messages_sent, c.messages_received) == (P - 1, P - 1)
        assert c.sent_by_kind == {"Q": sent} and c.received_by_kind == {"Q": received}


def test_sendrecv_packs_two_kinds_in_one_message(reports):
    """A float32 message of K (6 words) and V (4 words) arrives whole from the previous rank:
    1 message, 10 words, 40 bytes each way, 6 + 4 by kind."""
    for r, rep in enumerate(reports):
        K, V, dtype = rep["ring"]
        assert dtype == "float32"
        assert np.array_equal(K, np.full((2, 3), (r - 1) % P)) and V == [(r - 1) % P] * 4
        c = RankCount.from_dict(rep["ring_count"])
        assert (c.sent, c.received, c.sent_bytes, c.received_bytes) == (10, 10, 40, 40)
        assert (c.messages_sent, c.messages_received) == (1, 1)
        assert c.sent_by_kind == c.received_by_kind == {"K": 6, "V": 4}


def test_collectives_and_splits_count_on_the_calling_rank(reports):
    """All-gather and reduce-scatter give every rank's data and the sums in rank order; a
    split's transfers add to the same counts: 2 + 2 words of lse and dQ in P - 1 messages
    each, plus the split's all-gather (1 word to the one other rank of its half, none for
    rank 1, alone in its half)."""
    for r, rep in enumerate(reports):
        assert rep["allgather"] == [[float(s)] * 2 for s in range(P)]
        assert rep["reduce"] == [float(sum(10 * s + r for s in range(P)))] * 2
        half = [s for s in range(P) if s % 2 == r % 2]
        assert rep["sub"] == [half.index(r), len(half)]
        assert rep["sub_allgather"] == [[float(s)] for s in half]
        c = RankCount.from_dict(rep["collective_count"])
        extra = len(half) - 1
        assert c.sent_by_kind == {
            "lse": 2 * (P - 1),
            "dQ": 2 * (P - 1),
            **({"D": 1} if extra else {}),
        }
        assert c.received_by_kind == c.sent_by_kind
        assert c.messages_sent == c.messages_received == 2 * (P - 1) + extra


def test_the_control_channel_is_counted_apart(reports):
    """The input check's exchange delivers every rank's object and counts P - 1 control
    messages of its pickled size, and not one word or message of the schedule's counts."""
    import pickle

    for r, rep in enumerate(reports):
        assert rep["control"] == [{"rank": s, "pad": "x" * s} for s in range(P)]
        c = RankCount.from_dict(rep["control_count"])
        assert (c.sent, c.received, c.messages_sent, c.messages_received) == (0, 0, 0, 0)
        assert c.control_messages == P - 1
        assert c.control_bytes == (P - 1) * len(pickle.dumps({"rank": r, "pad": "x" * r}))


# ---- one rank, in this process ---------------------------------------------------------------


@pytest.fixture
def self_comm():
    from mpi4py import MPI

    return CountingComm(MPI.COMM_SELF)


def test_a_short_message_is_refused_not_padded_with_garbage(reports):
    """Each rank sends 3 words where its peer expects 4: without the check of the received
    size, the fourth word would be whatever the buffer held."""
    for rep in reports:
        assert rep["short"].startswith("AttnInputError: recv: expected 32 bytes"), rep["short"]
        assert "got 24" in rep["short"]


def test_one_rank_keeps_its_own_blocks_and_counts_nothing(self_comm):
    """A single rank's collectives return its own blocks and are no communication."""
    a = np.arange(6.0).reshape(2, 3)
    assert self_comm.alltoall([[("Q", a)]])[0][0] is a
    assert self_comm.allgather([("K", a)])[0][0] is a
    assert self_comm.reduce_scatter([[("dK", a)]], lambda x, y: None)[0] is a
    assert self_comm.control_allgather("sig") == ["sig"]
    self_comm.add_work(5)
    assert self_comm.count() == RankCount(rank=0, work=5)
    self_comm.reset()
    assert self_comm.count() == RankCount(rank=0)


def test_sending_to_oneself_is_refused(self_comm):
    """A message to the sender itself would be counted as communication: refused."""
    with pytest.raises(AttnInputError, match=r"\bdest\b"):
        self_comm.sendrecv([("Q", np.ones(2))], dest=0, source=0)


def test_a_message_has_one_dtype_and_known_kinds(self_comm):
    with pytest.raises(AttnInputError, match="one dtype"):
        cm._check_parts([("Q", np.ones(2)), ("K", np.ones(2, np.float32))])
    with pytest.raises(AttnInputError, match="kind"):
        cm._check_parts([("X", np.ones(2))])


def test_rank_count_round_trips_through_a_dict():
    c = RankCount(rank=2, sent=3, sent_by_kind={"K": 3}, control_bytes=7, work=11)
    assert RankCount.from_dict(c.to_dict()) == c


def test_the_fault_variable_is_parsed_and_refused_when_malformed():
    """The tests' fault injection: rank, step and action, or an error (never ignored)."""
    assert cm._parse_fault("") is None
    assert cm._parse_fault("1:2:exit") == (1, 2, "exit")
    with pytest.raises(ValueError, match="action"):
        cm._parse_fault("1:2:explode")
