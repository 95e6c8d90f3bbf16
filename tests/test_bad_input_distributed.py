"""Bad-input rows of attention across P devices under MPI (attnlib.distributed).

The launcher's rows are refused before any rank starts (no launch happens in this file). The
SPMD schedules and the counting communicator need a communicator: their rows run on one rank,
MPI.COMM_SELF of this process (mpi4py starts MPI in the process on first use, without mpiexec),
where a refusal goes through the same cross-rank check as on P ranks.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from bad_input_cases import Q_1E200, Table, word

from attnlib import distributed as ds

table = Table()

R = np.random.default_rng(30)
Qs, Ks, Vs = R.standard_normal((6, 4)), R.standard_normal((6, 4)), R.standard_normal((6, 3))
Hs = R.standard_normal((4, 6, 4))  # four heads: Q, K of every head
Os, LSEs = np.zeros((6, 3)), np.zeros(6)


def _self():
    from mpi4py import MPI

    return ds.CountingComm(MPI.COMM_SELF)


# ---- the launcher ----


def launch(**kw):
    args = dict(schedule="ring", direction="forward", arrays=(Qs, Ks, Vs), P=2) | kw
    return ds.run(args.pop("schedule"), args.pop("direction"), *args.pop("arrays"), **args)


table.raises("distributed.run", "schedule=bad", lambda: launch(schedule="star"), word("schedule"))
table.raises("distributed.run", "direction=bad", lambda: launch(direction="up"), word("direction"))
table.bad_ints("distributed.run", "P", lambda v: launch(P=v))
table.bad_reals("distributed.run", "timeout", lambda v: launch(timeout=v))
table.raises("distributed.run", "layout=bad", lambda: launch(layout="diagonal"), word("layout"))
table.raises("distributed.run", "is_causal=str", lambda: launch(is_causal="y"), word("is_causal"))
table.raises("distributed.run", "enable_gqa=str", lambda: launch(enable_gqa=1), word("enable_gqa"))
table.raises("distributed.run", "scale=negative", lambda: launch(scale=-1.0), word("scale"))
table.bad_arrays("distributed.run", "Q", lambda v: launch(arrays=(v, Ks, Vs)))
table.bad_arrays("distributed.run", "V", lambda v: launch(arrays=(Qs, Ks, v)))
table.raises("distributed.run", "P-not-dividing-n", lambda: launch(P=4), word("P"))
table.raises(
    "distributed.run", "zigzag-2P-not-dividing-n", lambda: launch(layout="zigzag"), "zigzag"
)
table.raises(
    "distributed.run", "K-rows-not-n", lambda: launch(arrays=(Qs, Ks[:4], Vs[:4])), word("K")
)
table.raises(
    "distributed.run",
    "Q-4d-batched",
    lambda: launch(arrays=(Hs[None], Hs[None], Hs[None])),
    word("Q"),
)
table.raises(
    "distributed.run",
    "ulysses-P-not-dividing-H",
    lambda: launch(schedule="ulysses", arrays=(Hs[:3], Hs[:3], Hs[:3]), P=2),
    r"P must divide H",
)
table.raises(
    "distributed.run",
    "ulysses-H_kv-and-P",
    lambda: launch(schedule="ulysses", arrays=(Hs, Hs[:3], Hs[:3]), enable_gqa=False, P=2),
    word("enable_gqa"),
)
table.raises(
    "distributed.run", "grid-not-P", lambda: launch(schedule="grid", grid=(2, 2)), word("grid")
)
table.raises("distributed.run", "grid=str", lambda: launch(schedule="grid", grid="2x1"), "grid")
table.raises(
    "distributed.run", "grid-non-square-P", lambda: launch(schedule="grid", P=2), word("P")
)
table.raises("distributed.run", "grid-for-ring", lambda: launch(grid=(1, 2)), word("grid"))
table.raises(
    "distributed.run",
    "backward-missing-arrays",
    lambda: launch(direction="backward"),
    r"\(Q, K, V, O, dO, lse\)",
)
table.raises(
    "distributed.run",
    "backward-lse-shape",
    lambda: launch(direction="backward", arrays=(Qs, Ks, Vs, Os, Os, LSEs[:5])),
    word("lse"),
)
table.raises(
    "distributed.run",
    "logits-overflow",
    lambda: launch(arrays=(np.full((6, 4), 1e200), Q_1E200[:6], Vs)),
    word("Q"),
)
table.raises(
    "distributed.run",
    "memory",
    lambda: launch(
        schedule="ulysses",
        arrays=tuple(np.broadcast_to(np.ones((1, 1, 1)), (2, 2**15, 1)) for _ in range(3)),
    ),
    r"\bn\b",
)

JOB = ds.Job("ring", "forward", (Qs, Ks, Vs))
table.bad_ints("distributed.run_jobs", "P", lambda v: ds.run_jobs([JOB], P=v))
table.raises("distributed.run_jobs", "jobs=str", lambda: ds.run_jobs("ring", P=2), word("jobs"))
table.raises("distributed.run_jobs", "jobs=empty", lambda: ds.run_jobs([], P=2), word("jobs"))
table.raises(
    "distributed.run_jobs", "jobs-entry-dict", lambda: ds.run_jobs([JOB, {}], P=2), word("jobs")
)
table.raises(
    "distributed.run_jobs",
    "second-job-bad",
    lambda: ds.run_jobs([JOB, ds.Job("ring", "forward", (Qs, Ks, Vs), layout="x")], P=2),
    r"jobs\[1\].*\blayout\b",
)
table.bad_reals("distributed.run_jobs", "timeout", lambda v: ds.run_jobs([JOB], P=2, timeout=v))
table.bad_ints("distributed.mpiexec_command", "P", ds.mpiexec_command)
PROGRAM = [sys.executable, "-c", "pass"]
table.raises(
    "distributed.run_ranks",
    "program=str",
    lambda: ds.run_ranks("python", ".", P=2, timeout=5),
    word("program"),
)
table.raises(
    "distributed.run_ranks",
    "program-entry-int",
    lambda: ds.run_ranks([sys.executable, 3], ".", P=2, timeout=5),
    word("program"),
)
table.raises(
    "distributed.run_ranks",
    "directory-missing",
    lambda: ds.run_ranks(PROGRAM, "/nonexistent/attnlib", P=2, timeout=5),
    word("directory"),
)
table.bad_ints("distributed.run_ranks", "P", lambda v: ds.run_ranks(PROGRAM, ".", P=v, timeout=5))
table.bad_reals(
    "distributed.run_ranks", "timeout", lambda v: ds.run_ranks(PROGRAM, ".", P=2, timeout=v)
)

# ---- the rules and the agreement across ranks ----

table.raises(
    "distributed.agree",
    "name=bad",
    lambda: ds.agree("star_forward", _self(), Qs, Ks, Vs, layout="contiguous", scale=None,
                     is_causal=False, enable_gqa=False),
    word("name"),
)  # fmt: skip
table.raises(
    "distributed.agree",
    "comm=None",
    lambda: ds.agree("ring_forward", None, Qs, Ks, Vs, layout="contiguous", scale=None,
                     is_causal=False, enable_gqa=False),
    word("comm"),
)  # fmt: skip
table.raises(
    "distributed.agree",
    "outputs-short",
    lambda: ds.agree("ring_backward", _self(), Qs, Ks, Vs, (Os, Os), layout="contiguous",
                     scale=None, is_causal=False, enable_gqa=False),
    word("outputs"),
)  # fmt: skip

table.raises(
    "distributed.agree_finite",
    "O-nan",
    lambda: ds.agree_finite("ring_forward", _self(), {"O": np.full((1, 2, 2), np.nan)}),
    "not finite",
)
table.raises(
    "distributed.agree_finite",
    "lse-+inf",
    lambda: ds.agree_finite("ring_forward", _self(), {"lse": np.full((1, 2), np.inf)}),
    "not finite",
)
table.raises(
    "distributed.agree_finite", "name=bad", lambda: ds.agree_finite("x", _self(), {}), "name"
)
table.raises(
    "distributed.agree_finite",
    "comm=None",
    lambda: ds.agree_finite("ring_forward", None, {}),
    word("comm"),
)
table.raises(
    "distributed.agree_finite",
    "outputs=list",
    lambda: ds.agree_finite("ring_forward", _self(), [1]),
    word("outputs"),
)
table.raises(
    "distributed.agree_finite",
    "O-int",
    lambda: ds.agree_finite("ring_forward", _self(), {"O": np.ones((1, 2), int)}),
    word("O"),
)
table.valid(
    "distributed.agree_finite",
    "lse--inf-is-fine",
    lambda: ds.agree_finite("ring_forward", _self(), {"lse": np.full((1, 2), -np.inf)}),
    lambda r: r is None,
)

# ---- the SPMD schedules, on one rank ----

FORWARDS = [
    ("distributed.ring_forward", ds.ring_forward),
    ("distributed.ulysses_forward", ds.ulysses_forward),
    ("distributed.grid_forward", ds.grid_forward),
]
BACKWARDS = [
    ("distributed.ring_backward", ds.ring_backward),
    ("distributed.ulysses_backward", ds.ulysses_backward),
    ("distributed.grid_backward", ds.grid_backward),
]


def spmd(fn, **kw):
    args = dict(Q=Qs, K=Ks, V=Vs) | kw
    arrays = [args.pop(k) for k in ("Q", "K", "V")]
    backward = [args.pop(k, v) for k, v in (("O", Os), ("dO", Os), ("lse", LSEs))]
    if fn in dict(BACKWARDS).values():
        arrays += backward
    comm = args.pop("comm") if "comm" in args else _self()
    return fn(comm, *arrays, **args)


for name, fn in FORWARDS + BACKWARDS:
    table.raises(name, "comm=None", lambda fn=fn: spmd(fn, comm=None), word("comm"))
    table.bad_arrays(name, "Q", lambda v, fn=fn: spmd(fn, Q=v))
    table.raises(name, "K-rows", lambda fn=fn: spmd(fn, K=Ks[:5]), word("K"))
    table.raises(name, "layout=bad", lambda fn=fn: spmd(fn, layout="diag"), word("layout"))
    table.raises(name, "is_causal=str", lambda fn=fn: spmd(fn, is_causal="1"), word("is_causal"))
    table.raises(name, "scale=nan", lambda fn=fn: spmd(fn, scale=np.nan), word("scale"))
    five = dict(Q=Qs[:5], K=Ks[:5], V=Vs[:5], O=Os[:5], dO=Os[:5], lse=LSEs[:5])
    table.raises(name, "zigzag-odd-b", lambda fn=fn, five=five: spmd(fn, layout="zigzag", **five),
                 "zigzag")  # fmt: skip
    table.raises(
        name,
        "enable_gqa-needed",
        lambda fn=fn: spmd(fn, Q=Hs, K=Hs[:2], V=Hs[:2]),
        word("enable_gqa"),
    )
for name, fn in BACKWARDS:
    table.raises(name, "lse-shape", lambda fn=fn: spmd(fn, lse=LSEs[:5]), word("lse"))
    table.raises(name, "dO=nan", lambda fn=fn: spmd(fn, dO=Os + np.nan), word("dO"))
for name, fn in (FORWARDS + BACKWARDS)[2::3]:
    table.raises(name, "grid-not-P", lambda fn=fn: spmd(fn, grid=(1, 2)), word("grid"))
    table.raises(name, "grid=str", lambda fn=fn: spmd(fn, grid="1x1"), word("grid"))
table.valid(
    "distributed.ring_forward",
    "one-rank-equals-exact",
    lambda: spmd(ds.ring_forward, is_causal=True),
    lambda out: np.allclose(out[0], __import__("attnlib").attention(Qs, Ks, Vs, is_causal=True)),
)

# ---- the counting communicator, on one rank ----

table.raises("distributed.CountingComm", "comm=None", lambda: ds.CountingComm(None), word("comm"))
table.raises("distributed.CountingComm", "comm=int", lambda: ds.CountingComm(3), word("comm"))
table.bad_ints("distributed.CountingComm.add_work", "entries", lambda v: _self().add_work(v),
               minimum_bad=-1)  # fmt: skip
PART = [("Q", np.ones(2))]
table.raises(
    "distributed.CountingComm.sendrecv",
    "dest=self",
    lambda: _self().sendrecv(PART, dest=0, source=0),
    word("dest"),
)
table.raises(
    "distributed.CountingComm.sendrecv",
    "dest-out-of-range",
    lambda: _self().sendrecv(PART, dest=1, source=0),
    word("dest"),
)
table.raises(
    "distributed.CountingComm.start_sendrecv",
    "parts=empty",
    lambda: _self().start_sendrecv([], dest=0, source=0),
    word("parts"),
)
table.raises(
    "distributed.CountingComm.start_sendrecv",
    "parts-kind-bad",
    lambda: _self().start_sendrecv([("X", np.ones(2))], dest=0, source=0),
    word("parts"),
)
table.raises(
    "distributed.CountingComm.start_sendrecv",
    "parts-int-array",
    lambda: _self().start_sendrecv([("Q", np.ones(2, int))], dest=0, source=0),
    word("parts"),
)
table.raises(
    "distributed.CountingComm.alltoall",
    "blocks-wrong-count",
    lambda: _self().alltoall([PART, PART]),
    word("blocks"),
)
table.raises(
    "distributed.CountingComm.alltoall",
    "blocks-mixed-dtypes",
    lambda: _self().alltoall([[("Q", np.ones(2)), ("K", np.ones(2, np.float32))]]),
    word("parts"),
)
table.raises(
    "distributed.CountingComm.allgather",
    "parts=str",
    lambda: _self().allgather("Q"),
    word("parts"),
)
table.raises(
    "distributed.CountingComm.reduce_scatter",
    "blocks-wrong-count",
    lambda: _self().reduce_scatter([], lambda a, b: a),
    word("blocks"),
)
table.bad_ints("distributed.CountingComm.split", "color", lambda v: _self().split(v, 0),
               minimum_bad=-1)  # fmt: skip
table.raises(
    "distributed.CountingComm.control_allgather",
    "obj-unpicklable",
    lambda: _self().control_allgather(lambda: None),
    word("obj"),
)
table.raises(
    "distributed.RankCount.from_dict",
    "data-missing-keys",
    lambda: ds.RankCount.from_dict({"rank": 0}),
    word("data"),
)
table.raises(
    "distributed.RankCount.from_dict", "data=list", lambda: ds.RankCount.from_dict([]), "data"
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
