"""The sharded schedules run for real under MPI (attnlib.distributed.schedules).

Each schedule, forward and backward, on P = 2, 4 and 8 ranks, must give the single-process
pass's outputs within the rounding bounds of tests/helpers.py, and every rank must send and
receive EXACTLY the words, messages and work of the closed forms of attnlib.iomodel.ring,
ulysses and grid, counted at its MPI calls (bytes = words × the item size). The cases are
structured: every layout with causal masking, grouped heads (Ulysses with H_kv < P, so that a
key/value head is replicated and its gradient summed over ranks), one head given as 2-D
arrays, d_v ≠ d, non-square grids, P = n (one row per rank), logits of ±1e4.

A launch costs the ranks' start-up, so every case of one P runs in one launch (a
module-scoped fixture); the tests then judge the cases one by one.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import reference_mismatches, reference_outputs, reference_tolerances
from naive import reference_parts

import attnlib as al
from attnlib.distributed import Job, run_jobs
from attnlib.iomodel import grid as io_grid
from attnlib.iomodel import ring as io_ring
from attnlib.iomodel import ulysses as io_ulysses
from attnlib.iomodel.shards import LAYOUTS

COUNTS = {"ring": io_ring, "ulysses": io_ulysses, "grid": io_grid}


@dataclass(frozen=True)
class Case:
    P: int
    schedule: str
    direction: str
    dtype: type = np.float64
    is_causal: bool = False
    layout: str = "contiguous"
    H: int = 4
    H_kv: int = 2
    n: int = 16
    d: int = 3
    d_v: int = 5
    grid: tuple | None = None
    two_d: bool = False  # one head, given as (n, d) arrays
    size: float = 1.0  # the entries' scale: 60 makes logits of order 1e4

    @property
    def id(self) -> str:
        parts = [f"P{self.P}", self.schedule, self.direction, np.dtype(self.dtype).name]
        parts += ["causal", self.layout] if self.is_causal else []
        parts += [f"H{self.H}/{self.H_kv}", f"n{self.n}", f"d{self.d}/{self.d_v}"]
        parts += [f"grid{self.grid}"] if self.grid else []
        parts += ["2d"] if self.two_d else []
        parts += [f"size{self.size:g}"] if self.size != 1 else []
        return "-".join(parts)

    def arrays(self):
        """Q, K, V, dO in the case's dtype, and the exact forward's O, lse in it."""
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))  # the same on every run
        shapes = [(self.H, self.n, self.d), (self.H_kv, self.n, self.d)]
        shapes += [(self.H_kv, self.n, self.d_v), (self.H, self.n, self.d_v)]
        Q, K, V, dO = (rng.standard_normal(s) for s in shapes)
        Q, K = self.size * Q, self.size * K
        Q, K, V, dO = (a.astype(self.dtype) for a in (Q, K, V, dO))
        if self.two_d:
            Q, K, V, dO = Q[0], K[0], V[0], dO[0]
        O, lse = al.attention_forward(Q, K, V, is_causal=self.is_causal, enable_gqa=self.gqa)
        return Q, K, V, dO, O, lse

    @property
    def gqa(self) -> bool:
        return self.H_kv < self.H

    def job(self) -> Job:
        Q, K, V, dO, O, lse = self.arrays()
        arrays = (Q, K, V) if self.direction == "forward" else (Q, K, V, O, dO, lse)
        return Job(
            self.schedule, self.direction, arrays, layout=self.layout, is_causal=self.is_causal,
            enable_gqa=self.gqa, grid=self.grid,
        )  # fmt: skip

    def count(self):
        """The closed-form DeviceCount of the case's schedule (attnlib.iomodel)."""
        module = COUNTS[self.schedule]
        fn = getattr(module, f"{self.schedule}_{self.direction}_count")
        kw = dict(P=self.P, H=self.H, H_kv=self.H_kv, d_v=self.d_v, is_causal=self.is_causal)
        if self.schedule == "grid":
            kw["grid"] = self.grid
        return fn(self.n, self.d, layout=self.layout, **kw)


def _cases(P: int, grids) -> list[Case]:
    """Every schedule and direction in both dtypes, non-causal and causal in every layout;
    Ulysses needs P | H: H = 4 with H_kv = 2 (P = 2: whole key/value heads per rank; P = 4:
    H_kv < P, each key/value head on two ranks)."""
    out = []
    for schedule in ("ring", "ulysses", "grid"):
        for i, dtype in enumerate((np.float64, np.float32)):
            grid = grids[i] if schedule == "grid" else None
            for direction in ("forward", "backward"):
                out.append(Case(P, schedule, direction, dtype, grid=grid))
                for layout in LAYOUTS:
                    out.append(Case(P, schedule, direction, dtype, True, layout, grid=grid))
    return out


CASES = {
    2: _cases(2, [(1, 2), (2, 1)])
    + [
        # no grouping (H = H_kv), d_v = d; one head as 2-D arrays; P = n
        Case(2, s, dr, H=2, H_kv=2, d_v=3, is_causal=True, layout="zigzag", grid=g)
        for s, g in (("ring", None), ("ulysses", None), ("grid", (2, 1)))
        for dr in ("forward", "backward")
    ]
    + [
        Case(2, s, dr, H=1, H_kv=1, two_d=True, is_causal=True, layout="striped", grid=g)
        for s, g in (("ring", None), ("grid", (1, 2)))
        for dr in ("forward", "backward")
    ]
    + [Case(2, "ring", dr, n=2, is_causal=True) for dr in ("forward", "backward")],
    4: _cases(4, [None, (4, 1)])
    + [
        # logits of order ±1e4: the online-softmax merges must stay finite and exact
        Case(4, s, dr, size=60.0, is_causal=c, grid=(1, 4) if s == "grid" else None)
        for s in ("ring", "ulysses", "grid")
        for dr in ("forward", "backward")
        for c in (False, True)
    ]
    + [
        # Ulysses with P | H_kv: whole key/value heads, no replication
        Case(4, "ulysses", dr, H=8, H_kv=4, n=8, is_causal=True, layout="striped")
        for dr in ("forward", "backward")
    ],
    # one rank: the whole pass, nothing sent; three: neither a power of two nor a square
    1: [
        Case(1, s, dr, is_causal=True, layout="zigzag")
        for s in ("ring", "ulysses", "grid")
        for dr in ("forward", "backward")
    ],
    3: [
        Case(3, s, dr, H=6, H_kv=hk, n=12, is_causal=True, layout=lay, grid=g)
        for s, hk, lay, g in (
            ("ring", 2, "striped", None),
            ("ulysses", 1, "zigzag", None),
            ("ulysses", 3, "contiguous", None),
            ("grid", 2, "zigzag", (3, 1)),
            ("grid", 3, "striped", (1, 3)),
        )
        for dr in ("forward", "backward")
    ],
    8: [
        Case(8, "ring", "forward", H=2, H_kv=1, is_causal=True, layout="zigzag"),
        Case(8, "ring", "backward", H=2, H_kv=1, is_causal=True, layout="zigzag"),
        Case(8, "ring", "backward", n=8, is_causal=True),  # P = n: one row per rank
        Case(8, "ulysses", "forward", H=8, H_kv=2, is_causal=True, layout="striped"),
        Case(8, "ulysses", "backward", H=8, H_kv=2, is_causal=True, layout="striped"),
        Case(8, "grid", "forward", is_causal=True, grid=(2, 4)),
        Case(8, "grid", "backward", is_causal=True, layout="zigzag", grid=(4, 2)),
    ],
}

ALL = [case for cases in CASES.values() for case in cases]

#: Seconds one launch may take before its ranks are stopped (a hang fails, never stalls).
TIMEOUT = 120.0


@pytest.fixture(scope="module")
def results():
    """Every case run: one launch per P. Returns {case id: DistributedResult}."""
    out = {}
    for P, cases in CASES.items():
        got = run_jobs([c.job() for c in cases], P=P, timeout=TIMEOUT)
        out.update({c.id: r for c, r in zip(cases, got, strict=True)})
    return out


def test_the_cases_cover_what_they_claim():
    """Each schedule and direction at P = 2 and 4 in both dtypes, every layout causal, Ulysses
    with replicated key/value heads, P = 8 for every schedule; ids unique."""
    ids = [c.id for c in ALL]
    assert len(set(ids)) == len(ids)
    for P in (2, 4):
        for s in ("ring", "ulysses", "grid"):
            for dr in ("forward", "backward"):
                mine = [c for c in CASES[P] if (c.schedule, c.direction) == (s, dr)]
                assert {np.dtype(c.dtype) for c in mine} == {np.dtype("f4"), np.dtype("f8")}
                assert {c.layout for c in mine if c.is_causal} == set(LAYOUTS)
                assert any(not c.is_causal for c in mine)
    assert any(c.schedule == "ulysses" and c.H_kv < c.P for c in ALL)
    assert {c.schedule for c in CASES[8]} == {"ring", "ulysses", "grid"}


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.id)
def test_outputs_equal_the_reference(results, case):
    """Within the first-order rounding bounds of a pass in the case's dtype against the float64
    reference (helpers.reference_tolerances, doubled for second-order terms): the bounds hold
    for any blocking and summation order, so they apply to the sharded passes as they stand.
    A wrong block, a row put back in the wrong place, a lost or doubled gradient share, a
    merge out of order with the mask is off by far more."""
    r = results[case.id]
    Q, K, V, dO, O, lse = case.arrays()
    parts = reference_parts(Q, K, V, dO, is_causal=case.is_causal, enable_gqa=case.gqa)
    want = reference_outputs(parts)
    tol = reference_tolerances(parts, np.dtype(case.dtype))
    if case.direction == "forward":
        got = (*r.outputs, *want[2:])  # the backward's outputs are not this job's: the reference
    else:
        # the backward pass starts from the exact core's O and lse in the case's dtype, whose
        # rounding the bounds include (the error of O in D, the error of lse in P)
        got = (*want[:2], *r.outputs)
    assert not reference_mismatches(got, want, tol)
    for a in r.outputs:
        assert a.dtype == np.dtype(case.dtype)


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.id)
def test_counts_equal_the_closed_forms_exactly(results, case):
    """Words sent and received per rank, messages each way, words received per kind and the
    work, counted at the MPI calls, equal attnlib.iomodel's closed forms exactly; bytes are
    words times the item size; every kind sent is received as much (the schedules are
    symmetric). Any extra, missing or mis-sized message changes a number here."""
    r, want = results[case.id], case.count()
    itemsize = np.dtype(case.dtype).itemsize
    np.testing.assert_array_equal(r.sent, want.sent)
    np.testing.assert_array_equal(r.received, want.received)
    np.testing.assert_array_equal(r.messages_sent, want.messages)
    np.testing.assert_array_equal(r.messages_received, want.messages)
    np.testing.assert_array_equal(r.work, want.work)
    np.testing.assert_array_equal(r.sent_bytes, want.sent * itemsize)
    np.testing.assert_array_equal(r.received_bytes, want.received * itemsize)
    assert r.received_by_kind.keys() == want.received_by_kind.keys()
    for kind, words in want.received_by_kind.items():
        np.testing.assert_array_equal(r.received_by_kind[kind], words, err_msg=kind)
    for c in r.counts:
        assert c.sent_by_kind == c.received_by_kind
        assert sum(c.sent_by_kind.values()) == c.sent
        assert c.control_bytes > 0 or case.P == 1  # the input check went on its own channel
    assert r.wall_time.shape == (case.P,)
