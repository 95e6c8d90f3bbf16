"""The device machine (attnlib.iomodel.devices): what it refuses, what it counts, and its
simultaneous rounds.

A count is only as good as the machine's refusals: a schedule that could read a block it does
not hold, or move words outside an exchange, would be counted as cheaper than it is. So every
refusal is made to fire here, with the device and block named, and a refused round must leave
the machine as it was.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.iomodel import DeviceCount, DeviceMachine, MachineError


def _machine(P=3):
    m = DeviceMachine(P)
    for p in range(P):
        m.load(p, f"x{p}", np.full((2, 3), float(p)), "K")
    return m


def test_ring_rotation_in_one_round():
    # every device sends and receives in the same round, as a ring's sendrecv
    m = _machine(4)
    m.exchange([(p, (p + 1) % 4, [f"x{p}"], [f"x{p}"]) for p in range(4)])
    for p in range(4):
        assert m.get((p + 1) % 4, f"x{p}").tolist() == [[float(p)] * 3] * 2
        assert m.holds(p, f"x{p}")  # a send copies: the sender keeps its block
    c = m.count()
    assert c.sent.tolist() == c.received.tolist() == [6] * 4
    assert c.messages.tolist() == [1] * 4 and c.received_by_kind["K"].tolist() == [6] * 4
    assert m.rounds == 1


def test_a_block_received_in_a_round_cannot_be_sent_on_in_it():
    # simultaneous semantics: all reads happen before any write, so 0 -> 1 -> 2 takes two rounds
    m = _machine()
    with pytest.raises(MachineError, match="device 1 does not hold a block named 'x0'"):
        m.exchange([(0, 1, ["x0"], ["x0"]), (1, 2, ["x0"], ["y"])])
    m.exchange([(0, 1, ["x0"], ["x0"])])
    m.exchange([(1, 2, ["x0"], ["y"])])
    assert m.get(2, "y").tolist() == [[0.0] * 3] * 2
    assert m.count().sent.tolist() == [6, 6, 0] and m.rounds == 2


REFUSED_ROUNDS = [
    ([(0, 1, ["nope"], ["a"])], "device 0 does not hold a block named 'nope'"),
    ([(1, 1, ["x1"], ["a"])], "device 1 sends 'x1' to itself"),
    ([(0, 1, ["x0"], ["a"]), (0, 1, ["x0"], ["b"])], "second message from device 0 to device 1"),
    ([(0, 1, ["x0"], ["x1"])], "device 0 sends 'x0' to device 1 as 'x1', which would overwrite"),
    ([(0, 2, ["x0"], ["a"]), (1, 2, ["x1"], ["a"])], "device 1 sends 'x1' to device 2 as 'a'"),
]


@pytest.mark.parametrize(("messages", "pattern"), REFUSED_ROUNDS)
def test_refused_rounds_name_the_device_and_block_and_change_nothing(messages, pattern):
    m = _machine()
    m.exchange([(2, 0, ["x2"], ["z"])])  # something counted already
    before = m.count(), m.words, m.peak_words, m.rounds
    with pytest.raises(MachineError, match=pattern):
        m.exchange(messages)
    assert m.count() == before[0] and m.rounds == before[3]
    assert np.array_equal(m.words, before[1]) and np.array_equal(m.peak_words, before[2])
    assert not m.holds(1, "a") and not m.holds(2, "a")


def test_local_refusals():
    m = _machine()
    with pytest.raises(MachineError, match="get: device 1 does not hold a block named 'x0'"):
        m.get(1, "x0")
    with pytest.raises(MachineError, match="drop: device 2 does not hold a block named 'x0'"):
        m.drop(2, "x0")
    with pytest.raises(MachineError, match="device 0 already holds a block named 'x0'"):
        m.load(0, "x0", np.ones(1), "K")
    m.drop(0, "x0")
    with pytest.raises(MachineError, match="device 0 does not hold"):
        m.get(0, "x0")


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda m: DeviceMachine(0), "P must be an integer >= 1"),
        (lambda m: m.get(3, "x0"), "p must be an integer <= 2"),
        (lambda m: m.get(-1, "x0"), "p must be an integer >= 0"),
        (lambda m: m.load(0, "y", "abc", "K"), "array must be a float array"),
        (lambda m: m.load(0, "y", np.array([1, 2]), "K"), "array must have a float32"),
        (lambda m: m.load(0, "y", np.ones(2), ""), "kind must be a non-empty string"),
        (lambda m: m.put(0, "", np.ones(2), "K"), "name must be a non-empty string"),
        (lambda m: m.compute(0, -1), "entries must be an integer >= 0"),
        (lambda m: m.exchange("x"), "messages must be a list"),
        (lambda m: m.exchange([(0, 1, ["x0"])]), r"messages\[0\] must be"),
        (lambda m: m.exchange([(0, 3, ["x0"], ["a"])]), r"messages\[0\] dst must be"),
        (lambda m: m.exchange([(0, 1, "x0", ["a"])]), "names at src must be a non-empty list"),
        (lambda m: m.exchange([(0, 1, ["x0"], ["a", "b"])]), "1 names at src and 2 at dst"),
        (lambda m: m.exchange([(0, 1, ["x0", "x0"], ["a", "b"])]), "names a block twice"),
    ],
)
def test_argument_refusals(call, pattern):
    with pytest.raises(AttnInputError, match=pattern):
        call(_machine())


def test_counting_by_kind_and_messages():
    m = DeviceMachine(3)
    m.load(0, "q", np.ones((2, 5)), "Q")
    m.load(0, "k", np.ones(4), "K")
    m.load(1, "v", np.ones(3), "V")
    # one message with two blocks, and a message of another device in the same round
    m.exchange([(0, 2, ["q", "k"], ["q", "k"]), (1, 2, ["v"], ["v"]), (0, 1, ["k"], ["k"])])
    m.compute(2, 7)
    m.compute(2, 0)
    c = m.count()
    assert c.sent.tolist() == [18, 3, 0] and c.received.tolist() == [0, 4, 17]
    assert c.messages.tolist() == [2, 1, 0] and c.work.tolist() == [0, 0, 7]
    assert {k: v.tolist() for k, v in c.received_by_kind.items()} == {
        "K": [0, 4, 4],
        "Q": [0, 0, 10],
        "V": [0, 0, 3],
    }


def test_words_held_and_peak():
    m = DeviceMachine(2)
    m.load(0, "a", np.ones(3), "K")
    m.load(0, "b", np.ones(5), "K")
    m.drop(0, "a")
    m.put(0, "c", np.ones(1), "dK")
    m.put(0, "c", np.ones(2), "dK")  # replaces its own block: 5 + 2 words, not 5 + 1 + 2
    assert m.words.tolist() == [7, 0] and m.peak_words.tolist() == [8, 0]
    m.exchange([(0, 1, ["b"], ["b"])])
    assert m.words.tolist() == [7, 5] and m.peak_words.tolist() == [8, 5]


def test_blocks_are_private_copies():
    m = DeviceMachine(2)
    x = np.zeros(3)
    m.load(0, "x", x, "K")
    x[:] = 1  # the caller's array changes; the device's block does not
    got = m.get(0, "x")
    assert got.tolist() == [0.0] * 3
    with pytest.raises(ValueError):
        got[0] = 5.0  # read only: a schedule cannot write a block behind the machine's back
    m.put(0, "lse", np.array([-np.inf, 0.0]), "lse")  # a masked row's lse is allowed


def _count(**change):
    fields = dict(sent=[3, 3], received=[3, 3], messages=[1, 1], work=[4, 2], kinds={"K": [3, 3]})
    fields.update(change)
    kinds = fields.pop("kinds")
    return DeviceCount(**fields, received_by_kind=kinds)


def test_device_count_equality_sees_every_field():
    base = _count()
    assert base == _count() and base == _count(kinds={"K": [3, 3], "V": [0, 0]})
    for change in (
        dict(sent=[3, 4]),
        dict(received=[4, 3]),
        dict(messages=[1, 0]),
        dict(work=[4, 3]),
        dict(kinds={"K": [3, 2]}),
        dict(kinds={"V": [3, 3]}),
        dict(kinds={"K": [3, 3], "V": [1, 0]}),
    ):
        assert base != _count(**change), change
    assert base != "a count"


def test_device_count_properties():
    c = _count()
    assert (c.P, c.max_sent, c.max_received) == (2, 3, 3)
    assert c.imbalance == 4 / 3
    assert _count(work=[0, 0]).imbalance == 1.0
    assert c.sent.dtype == np.int64 and not c.sent.flags.writeable


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (dict(sent=[1.5, 2.0]), "sent must be a non-empty 1-D array of ints"),
        (dict(received=[3]), r"received must have one entry per device, \(P,\) = \(2,\)"),
        (dict(work=[-1, 2]), "work must be >= 0"),
        (dict(kinds=[3, 3]), "received_by_kind must be a dict"),
        (dict(kinds={"": [1, 1]}), "kinds must be non-empty strings"),
        (dict(kinds={"K": [1]}), "received_by_kind\\['K'\\] must have one entry per device"),
    ],
)
def test_device_count_refusals(change, pattern):
    with pytest.raises(AttnInputError, match=pattern):
        _count(**change)
