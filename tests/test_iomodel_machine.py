"""The two-level memory machine (attnlib.iomodel.machine): counts, copy semantics, capacity,
misuse, the operation log and the words it moved by array."""

import dataclasses

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib.iomodel import CapacityError, IOCount, MachineError, TwoLevelMemory, words_by_array
from attnlib.iomodel.machine import Op


def machine(M=100, record=False):
    mem = TwoLevelMemory(M, record=record)
    mem.put("A", np.arange(24.0).reshape(4, 6))
    mem.put("v", np.arange(5.0))
    mem.zeros("C", (4, 6))
    return mem


def test_load_counts_reads_and_copies():
    mem = machine()
    blk = mem.load("A", (1, 3), (2, 5))
    assert blk.shape == (2, 3)
    np.testing.assert_array_equal(blk, [[8, 9, 10], [14, 15, 16]])
    assert (mem.reads, mem.writes, mem.live_fast) == (6, 0, 6)
    blk[:] = -1  # a fast copy: the slow value stays (Hong–Kung copy semantics)
    assert mem.get("A")[1, 2] == 8
    mem.free(blk)
    assert mem.live_fast == 0 and mem.peak_fast == 6


def test_cols_none_means_all_columns_and_vectors_take_rows_only():
    mem = machine()
    row = mem.load("A", (3, 4))
    assert row.shape == (1, 6) and mem.reads == 6
    vec = mem.load("v", (1, 4))
    np.testing.assert_array_equal(vec, [1, 2, 3])
    assert mem.reads == 9
    mem.free(row, vec)


def test_slices_are_accepted_and_normalised_in_the_log():
    mem = machine(record=True)
    blk = mem.load("A", slice(0, 2), slice(1, 3))
    mem.store("C", slice(0, 2), slice(1, 3), blk)
    mem.free(blk)
    assert mem.log[0] == Op("load", "A", (0, 2), (1, 3), 4)
    assert mem.log[1] == Op("store", "C", (0, 2), (1, 3), 4)
    assert mem.log[2] == Op("free", "A", None, None, 4)


def test_store_counts_writes_and_get_is_a_copy():
    mem = machine()
    blk = mem.alloc((2, 6), fill=7.0)
    mem.store("C", (2, 4), None, blk)
    mem.free(blk)
    assert (mem.reads, mem.writes) == (0, 12)
    out = mem.get("C")
    np.testing.assert_array_equal(out[2:4], 7.0)
    np.testing.assert_array_equal(out[:2], 0.0)
    out[:] = 5  # get() is not a handle on slow memory
    assert mem.get("C")[0, 0] == 0.0


def test_put_copies_and_never_modifies_the_input():
    a = np.ones((3, 3))
    mem = TwoLevelMemory(10)
    mem.put("a", a)
    a[0, 0] = 9
    blk = mem.load("a", (0, 1))
    assert blk[0, 0] == 1.0
    blk[:] = 3
    assert a[0, 1] == 1.0


def test_count_is_an_iocount_with_total_and_peak():
    mem = machine()
    x = mem.load("A", (0, 4))  # 24
    y = mem.alloc(10)  # 34 live
    mem.free(x)
    mem.store("C", (0, 1), (0, 6), np.zeros((1, 6)))
    mem.free(y)
    c = mem.count
    assert c == IOCount(24, 6, 34)
    assert (c.reads, c.writes, c.total, c.peak_fast) == (24, 6, 30, 34)
    assert mem.finish() == c


def test_capacity_is_enforced_at_load_with_a_clear_message():
    mem = machine(M=20)
    a = mem.load("A", (0, 2))  # 12 words
    with pytest.raises(CapacityError, match=r"12 words live \+ 12 asked = 24 > M = 20") as e:
        mem.load("A", (2, 4))
    assert (e.value.live, e.value.asked, e.value.M) == (12, 12, 20)
    assert isinstance(e.value, RuntimeError)
    assert mem.live_fast == 12 and mem.reads == 12  # the failed load moved nothing
    mem.free(a)


def test_capacity_is_enforced_at_alloc():
    mem = TwoLevelMemory(10)
    mem.alloc((3, 3))
    with pytest.raises(CapacityError, match=r"9 words live \+ 2 asked = 11 > M = 10"):
        mem.alloc(2)
    mem.alloc(1)  # exactly M is allowed
    assert mem.peak_fast == 10


def test_an_algorithm_that_forgets_to_free_overflows():
    """A loop that loads a row per step and never frees it is stopped by the machine."""
    mem = TwoLevelMemory(30)
    mem.put("X", np.ones((10, 6)))
    with pytest.raises(CapacityError, match="> M = 30"):
        for i in range(10):
            mem.load("X", (i, i + 1))  # forgot mem.free(...)
    assert mem.live_fast == 30


def test_a_leak_that_never_overflows_is_caught_at_finish():
    mem = TwoLevelMemory(1000)
    mem.put("X", np.ones((4, 4)))
    blocks = [mem.load("X", (i, i + 1)) for i in range(4)]
    mem.free(*blocks[:3])
    with pytest.raises(MachineError, match=r"1 fast block \(4 words\) never freed \(from: X\)"):
        mem.finish()


def test_double_free_and_foreign_free_are_errors():
    mem = machine()
    blk = mem.load("A", (0, 1))
    mem.free(blk)
    with pytest.raises(MachineError, match="double free"):
        mem.free(blk)
    blk2 = mem.alloc((2, 2))
    with pytest.raises(MachineError, match="not a live fast block"):
        mem.free(blk2[:1])  # a view is not a block
    with pytest.raises(MachineError, match="not a live fast block"):
        mem.free(np.zeros(3))
    assert mem.live_fast == 4
    mem.free(blk2)
    assert mem.live_fast == 0


BAD_NAMES_AND_RANGES = [
    (lambda mem: mem.load("B", (0, 1)), r"no array named 'B' in slow memory \(it holds 'A'"),
    (lambda mem: mem.load("A", (3, 5)), r"rows \(3, 5\) out of bounds for A: need 0 <= start"),
    (lambda mem: mem.load("A", (0, 1), (2, 2)), r"cols \(2, 2\) out of bounds for A"),
    (lambda mem: mem.load("A", (-1, 2)), r"rows \(-1, 2\) out of bounds"),
    (lambda mem: mem.load("A", [0, 1]), "must be a \\(start, stop\\) pair of ints"),
    (lambda mem: mem.load("A", slice(0, 4, 2)), "explicit bounds and step 1"),
    (lambda mem: mem.load("A", slice(None, 2)), "explicit bounds"),
    (lambda mem: mem.load("v", (0, 1), (0, 1)), "v is a vector: cols must be None"),
    (lambda mem: mem.store("C", (0, 5), None, np.zeros((5, 6))), r"out of bounds for C"),
    (
        lambda mem: mem.store("C", (0, 2), (0, 3), np.zeros((2, 2))),
        r"block has shape \(2, 2\), the region has shape",
    ),
]


@pytest.mark.parametrize("call,message", BAD_NAMES_AND_RANGES)
def test_unknown_names_and_bad_ranges_are_clear_errors(call, message):
    mem = machine()
    with pytest.raises(MachineError, match=message):
        call(mem)
    assert mem.count == IOCount(0, 0, 0)


def _zeros_over_a_slow_array(mem):
    mem.put("X", np.ones(2))
    mem.zeros("X", 3)


BAD_CONSTRUCTOR_AND_SLOW_MEMORY = [
    (lambda mem: TwoLevelMemory(0), "M must be an integer >= 1"),
    (lambda mem: TwoLevelMemory(2.5), "M must be an integer >= 1"),
    (
        lambda mem: mem.put("X", np.ones((2, 2), dtype=int)),
        "X must have a float32 or float64 dtype",
    ),
    (lambda mem: mem.put("X", np.ones((2, 2, 2))), "X must be 1- or 2-dimensional"),
    (lambda mem: mem.put("", np.ones(2)), "name must be a non-empty string"),
    (_zeros_over_a_slow_array, "'X' is already in slow memory"),
    (lambda mem: mem.zeros("Y", (0, 2)), "shape must be a tuple of positive ints"),
    (lambda mem: mem.alloc(None), "shape must be an int or a tuple of ints"),
    (lambda mem: mem.alloc((2, -1)), "shape must be a tuple of positive ints"),
]


@pytest.mark.parametrize("call,message", BAD_CONSTRUCTOR_AND_SLOW_MEMORY)
def test_bad_constructor_and_slow_memory_arguments(call, message):
    mem = TwoLevelMemory(10)
    with pytest.raises(AttnInputError, match=message):
        call(mem)


def test_iocount_is_frozen_and_adds():
    c = IOCount(3, 4, 5)
    assert c.total == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.reads = 1
    assert c + IOCount(1, 1, 9) == IOCount(4, 5, 9)
    assert [f.name for f in dataclasses.fields(IOCount)] == [
        "reads",
        "writes",
        "total",
        "peak_fast",
    ]
    with pytest.raises(AttnInputError, match="IOCount.reads must be an integer >= 0"):
        IOCount(-1, 0, 0)
    with pytest.raises(AttnInputError, match="IOCount.peak_fast must be an integer >= 0"):
        IOCount(0, 0, 1.5)


def test_log_is_empty_unless_recording():
    mem = machine()
    mem.free(mem.load("A", (0, 1)))
    assert mem.log == []
    mem = machine(record=True)
    mem.free(mem.alloc(3))
    assert [op.op for op in mem.log] == ["alloc", "free"]
    assert mem.log[0] == ("alloc", None, None, None, 3)


def test_alloc_refuses_a_fill_beyond_its_dtype_and_keeps_infinities():
    mem = TwoLevelMemory(8)
    with pytest.raises(AttnInputError, match="fill = 1e\\+308 is beyond the range of float32"):
        mem.alloc(2, dtype=np.float32, fill=1e308)
    block = mem.alloc(2, dtype=np.float32, fill=-np.inf)  # a running maximum's start
    assert np.isneginf(block).all()
    mem.free(block)


@pytest.mark.parametrize("log", [None, 3, "load"])
def test_words_by_array_names_a_log_that_is_not_one(log):
    with pytest.raises(AttnInputError, match="log must be a list of Op"):
        words_by_array(log)


def test_words_by_array_adds_up_to_the_count():
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((12, 4)) for _ in range(3))
    *_, count, mem = io.flash_forward(Q, K, V, M=60, record=True)
    reads, writes = io.words_by_array(mem.log)
    assert sum(reads.values()) == count.reads and sum(writes.values()) == count.writes
    assert reads["Q"] == 12 * 4 and set(writes) == {"O", "lse"}


def test_random_runs_never_hold_more_than_M_and_a_refused_step_moves_nothing():
    """Capacity, as the docstring states it: whatever order of loads, allocs and frees, the live
    words never exceed M, and a refused load or alloc changes neither the count nor the live
    words."""
    rng = np.random.default_rng(7)
    for M in (1, 5, 17, 64):
        mem = TwoLevelMemory(M)
        mem.put("X", rng.standard_normal((9, 7)))
        live, refused = [], 0
        for _ in range(300):
            before = (mem.reads, mem.writes, mem.live_fast)
            try:
                if live and rng.random() < 0.4:
                    mem.free(live.pop(rng.integers(len(live))))
                elif rng.random() < 0.5:
                    r0 = int(rng.integers(9))
                    c0 = int(rng.integers(7))
                    rows, cols = (
                        (r0, int(rng.integers(r0 + 1, 10))),
                        (c0, int(rng.integers(c0 + 1, 8))),
                    )
                    live.append(mem.load("X", rows, cols))
                else:
                    live.append(mem.alloc(int(rng.integers(1, 2 * M + 1))))
            except CapacityError:
                refused += 1
                assert (mem.reads, mem.writes, mem.live_fast) == before
            assert mem.live_fast == sum(b.size for b in live) <= M
            assert mem.peak_fast <= M
        assert refused > 0  # the run did ask for more than M
        mem.free(*live)
        assert mem.finish().peak_fast <= M


def test_a_temporary_inside_a_step_is_not_charged():
    """What the machine does not see, as its docstring says: a numpy temporary made from fast
    blocks holds no fast words, and storing it counts only the stored words."""
    mem = machine(M=12)
    a = mem.load("A", (0, 2))  # 12 words: fast memory is full
    doubled = 2 * a + a  # temporaries of 12 words each, not charged
    assert (mem.live_fast, mem.reads, mem.writes) == (12, 12, 0)
    mem.store("C", (0, 2), None, doubled)
    assert (mem.live_fast, mem.reads, mem.writes) == (12, 12, 12)
    mem.free(a)
    assert mem.finish() == IOCount(12, 12, 12)
