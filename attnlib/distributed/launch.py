"""Run a sharded schedule on P MPI ranks from an ordinary Python process, and read what each
rank sent and received.

:func:`run` takes the global arrays, checks them (every refusal is an
:class:`attnlib.AttnInputError` before anything starts), writes each rank's shard
(``shard_rows(n, P, layout)[p]``, :func:`attnlib.iomodel.shards.shard_rows`) to a temporary
directory, starts ``mpiexec -n P python -m attnlib.distributed.worker DIR``
(:func:`.mpirun.run_ranks`, which stops every rank on a failure or at the timeout and raises
:class:`.mpirun.DistributedError` naming the rank at fault), and returns the outputs in global
row order with each rank's counts, measured at its MPI calls (:class:`.comm.RankCount`), and
wall time. :func:`run_jobs` runs several jobs in one launch: a launch costs the ranks'
start-up (Python, numpy and attnlib imported by every rank).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._checks import (
    AttnInputError,
    as_entries,
    check_bool,
    check_choice,
    check_head_backward,
    check_head_qkv,
    check_int,
    check_memory,
    check_positive_real,
    check_scale,
    float_dtype,
    is_batched,
)
from ..fast import check_logits_finite
from ..iomodel.grid import grid_shape
from ..iomodel.shards import check_shards, shard_rows
from ..iomodel.ulysses import ulysses_heads
from .comm import KINDS, RankCount
from .mpirun import mpiexec_command, run_ranks
from .schedules import SCHEDULES

__all__ = ["run", "run_jobs", "Job", "DistributedResult"]

#: The directions of a pass, and the arrays each takes and returns.
DIRECTIONS = ("forward", "backward")
_INPUTS = {"forward": ("Q", "K", "V"), "backward": ("Q", "K", "V", "O", "dO", "lse")}
_OUTPUTS = {"forward": ("O", "lse"), "backward": ("dQ", "dK", "dV")}

#: The most jobs one launch takes.
MAX_JOBS = 10_000


@dataclass(frozen=True)
class Job:
    """One pass to run on every rank: ``schedule`` ("ring", "ulysses", "grid"), ``direction``
    ("forward" with arrays (Q, K, V), "backward" with (Q, K, V, O, dO, lse)), global arrays as
    :func:`attnlib.attention_forward` / ``attention_backward`` take them for one sequence
    (Q (n, d) or (H, n, d), ...), and the keywords of the schedules
    (:mod:`.schedules`). Checked by :func:`run_jobs` against its P."""

    schedule: str
    direction: str
    arrays: tuple
    layout: str = "contiguous"
    scale: float | None = None
    is_causal: bool = False
    enable_gqa: bool = False
    grid: tuple | None = None


@dataclass(frozen=True)
class DistributedResult:
    """What one job returned: ``outputs`` in global row order, shaped as the single-process
    pass returns them ((O, lse) forward, (dQ, dK, dV) backward); ``counts``, one
    :class:`.comm.RankCount` per rank, measured at its MPI calls; ``wall_time`` (P,), seconds
    each rank spent in the job (machine-dependent: shown, never compared)."""

    outputs: tuple
    counts: tuple
    wall_time: np.ndarray

    @property
    def P(self) -> int:
        return len(self.counts)

    def _field(self, name: str) -> np.ndarray:
        return np.array([getattr(c, name) for c in self.counts], dtype=np.int64)

    @property
    def sent(self) -> np.ndarray:
        """Words each rank sent to other ranks, (P,)."""
        return self._field("sent")

    @property
    def received(self) -> np.ndarray:
        """Words each rank received, (P,)."""
        return self._field("received")

    @property
    def sent_bytes(self) -> np.ndarray:
        return self._field("sent_bytes")

    @property
    def received_bytes(self) -> np.ndarray:
        return self._field("received_bytes")

    @property
    def messages_sent(self) -> np.ndarray:
        return self._field("messages_sent")

    @property
    def messages_received(self) -> np.ndarray:
        return self._field("messages_received")

    @property
    def work(self) -> np.ndarray:
        """Kept score entries each rank evaluated, summed over its query heads, (P,)."""
        return self._field("work")

    @property
    def received_by_kind(self) -> dict:
        """kind -> words each rank received of that kind, (P,) (kinds that moved)."""
        kinds = [k for k in KINDS if any(k in c.received_by_kind for c in self.counts)]
        return {
            k: np.array([c.received_by_kind.get(k, 0) for c in self.counts], dtype=np.int64)
            for k in kinds
        }


def _check_job(job, P: int, index: int):
    """A job's arrays checked for P ranks: returns (Pass, job's keywords for the worker)."""
    if not isinstance(job, Job):
        raise AttnInputError(f"jobs[{index}] must be a Job, got {type(job).__name__}")
    schedule = check_choice("schedule", job.schedule, SCHEDULES)
    direction = check_choice("direction", job.direction, DIRECTIONS)
    names = _INPUTS[direction]
    arrays = job.arrays
    if not isinstance(arrays, tuple | list) or len(arrays) != len(names):
        raise AttnInputError(
            f"the {direction} pass takes the arrays ({', '.join(names)}), got "
            f"{len(arrays) if isinstance(arrays, tuple | list) else type(arrays).__name__}"
        )
    outputs = None if direction == "forward" else arrays[3:]
    ps = _check_global(*arrays[:3], outputs, P, job)
    grid = None
    if schedule == "ulysses":
        ulysses_heads(ps.H, ps.H_kv, P)
    if schedule == "grid":
        grid = list(grid_shape(job.grid, P))
    elif job.grid is not None:
        raise AttnInputError(f"grid applies to the grid schedule only, not {schedule}")
    _check_run_memory(ps, P, schedule, grid)
    keywords = {
        "schedule": schedule,
        "direction": direction,
        "layout": ps.layout,
        "scale": ps.scale,
        "is_causal": ps.is_causal,
        "enable_gqa": bool(job.enable_gqa),
        "grid": grid,
        "names": list(names),
        "one_head": ps.one_head,
    }
    return ps, keywords


class _Global(NamedTuple):
    """A job's global arrays, checked: heads first, one dtype."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    outputs: tuple  # (O, dO, lse) of a backward pass
    scale: float
    is_causal: bool
    layout: str
    rows: list  # shard_rows(n, P, layout)
    one_head: bool

    @property
    def H(self) -> int:
        return self.Q.shape[0]

    @property
    def H_kv(self) -> int:
        return self.K.shape[0]

    @property
    def n(self) -> int:
        return self.Q.shape[1]

    def back(self, x: np.ndarray) -> np.ndarray:
        return x[0] if self.one_head else x


def _check_global(Q, K, V, outputs, P: int, job: Job) -> _Global:
    """The global arrays of one sequence as the single-process pass takes them (4-D batched
    input refused, naming Q), n rows of queries and keys split among P ranks
    (:func:`attnlib.iomodel.shards.check_shards`), and logits τ Q Kᵀ that do not overflow
    the dtype (the ranks would otherwise return NaN)."""
    one_head = not is_batched(Q)
    if outputs is None:
        Q, K, V, g = check_head_qkv(Q, K, V, job.enable_gqa)
        outputs = ()
    else:
        Q, K, V, *outputs, g = check_head_backward(Q, K, V, *outputs, job.enable_gqa)
    (_, n, d), m = Q.shape, K.shape[1]
    if m != n:
        raise AttnInputError(
            f"K must have the n = {n} rows of Q (the sequence split among the ranks), got {m}"
        )
    n, P, layout = check_shards(n, P, job.layout)
    is_causal = check_bool("is_causal", job.is_causal)
    tau = check_scale(job.scale, d)
    dtype = float_dtype(Q, K, V, *outputs)
    Q, K, V, *outputs = (a.astype(dtype, copy=False) for a in (Q, K, V, *outputs))
    for kv in range(K.shape[0]):
        check_logits_finite(Q[kv * g : (kv + 1) * g].reshape(-1, d), K[kv], tau)
    rows = shard_rows(n, P, layout)
    return _Global(Q, K, V, tuple(outputs), tau, is_causal, layout, rows, one_head)


def _check_run_memory(ps: _Global, P: int, schedule: str, grid) -> None:
    """Refuse a run whose ranks together would hold more than the memory limit: every rank's
    shards, the blocks it receives and its results (a few copies of the arrays), and the
    scores of the largest block it evaluates at once with their temporaries."""
    n, b = ps.n, ps.n // P
    if schedule == "ring":
        scores = ps.H * b * b
    elif schedule == "ulysses":
        scores = ps.H // P * n * n
    else:
        scores = ps.H * (grid[1] * b) * (grid[0] * b)
    words = sum(a.size for a in (ps.Q, ps.K, ps.V, *ps.outputs))
    nbytes = ps.Q.dtype.itemsize * (8 * words + 6 * P * scores)
    check_memory(f"the {schedule} run on {P} ranks", nbytes, culprits="n (the rows of Q, K, V)")


def run(
    schedule, direction, *arrays, P, layout="contiguous", scale=None, is_causal=False,
    enable_gqa=False, grid=None, timeout=60.0,
) -> DistributedResult:  # fmt: skip
    """Run one schedule on P MPI ranks: :func:`run_jobs` with one :class:`Job`.

    Parameters
    ----------
    schedule : "ring", "ulysses" or "grid"; direction : "forward" or "backward"
    arrays : forward (Q, K, V), backward (Q, K, V, O, dO, lse), global, as
        :func:`attnlib.attention_forward` and ``attention_backward`` take them for one
        sequence (Q (n, d) or (H, n, d); K, V (H_kv, n, ·))
    P : ranks, P | n (2P | n for ``layout="zigzag"``; Ulysses: P | H)
    layout, scale, is_causal, enable_gqa, grid : as the schedules take them
    timeout : seconds before every rank is stopped

    Returns
    -------
    :class:`DistributedResult`: the outputs (global, equal to the single-process pass's up
    to rounding) and each rank's counts.

    Raises AttnInputError for invalid arguments (before anything starts) and
    :class:`DistributedError` if a rank raises, dies or has not finished by ``timeout``.

    Examples
    --------
    >>> import attnlib
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = (rng.standard_normal((2, 8, 4)) for _ in range(3))
    >>> r = run("ring", "forward", Q, K, V, P=2, is_causal=True)
    >>> r.sent.tolist()  # (P − 1) b H_kv (d + d_v) = 1 · 4 · 2 · 8 words per rank
    [64, 64]
    >>> bool(np.allclose(r.outputs[0], attnlib.attention(Q, K, V, is_causal=True)))
    True
    """
    job = Job(schedule, direction, arrays, layout, scale, is_causal, enable_gqa, grid)
    return run_jobs([job], P=P, timeout=timeout)[0]


def run_jobs(jobs, *, P, timeout=60.0) -> list[DistributedResult]:
    """Run several :class:`Job` s, one after the other, in one launch of P MPI ranks.

    Every job is checked first (AttnInputError naming the argument, and ``jobs[i]``); the
    ranks reset their counts between jobs. Returns one :class:`DistributedResult` per job.
    Raises :class:`DistributedError` as :func:`run` does (``timeout`` covers the launch).
    """
    P = check_int("P", P)
    timeout = check_positive_real("timeout", timeout)
    jobs = as_entries("jobs", jobs, of="Job records", min_len=1, max_len=MAX_JOBS, entry_type=Job)
    checked = []
    for i, job in enumerate(jobs):
        try:
            checked.append(_check_job(job, P, i))
        except AttnInputError as exc:
            raise AttnInputError(f"jobs[{i}]: {exc}" if len(jobs) > 1 else str(exc)) from None
    mpiexec_command(P)  # no mpiexec: say how to install it before writing anything
    with tempfile.TemporaryDirectory(prefix="attnlib-mpi-") as tmp:
        directory = Path(tmp)
        _write_jobs(directory, checked, P)
        worker = [sys.executable, "-m", "attnlib.distributed.worker"]
        run_ranks(worker, directory, P=P, timeout=timeout)
        return [_read_job(directory, j, ps, kw, P) for j, (ps, kw) in enumerate(checked)]


def _write_jobs(directory: Path, checked, P: int) -> None:
    """Each rank's shard of each job's arrays, and the jobs' keywords."""
    for j, (ps, kw) in enumerate(checked):
        arrays = (ps.Q, ps.K, ps.V, *ps.outputs)
        for p, rows in enumerate(ps.rows):
            shard = {
                name: np.ascontiguousarray(a[:, rows])
                for name, a in zip(kw["names"], arrays, strict=True)
            }
            np.savez(directory / f"job{j}_rank{p}_in.npz", **shard)
    spec = {"P": P, "jobs": [kw for _, kw in checked]}
    (directory / "jobs.json").write_text(json.dumps(spec))


def _read_job(directory: Path, j: int, ps: _Global, kw, P: int) -> DistributedResult:
    """A job's outputs assembled in global row order, and each rank's counts."""
    outputs = None
    counts, wall = [], []
    for p, rows in enumerate(ps.rows):
        with np.load(directory / f"job{j}_rank{p}_out.npz") as data:
            parts = [data[name] for name in _OUTPUTS[kw["direction"]]]
        if outputs is None:
            outputs = [np.empty((a.shape[0], ps.n, *a.shape[2:]), a.dtype) for a in parts]
        for out, a in zip(outputs, parts, strict=True):
            out[:, rows] = a
        record = json.loads((directory / f"rank{p}.json").read_text())[j]
        counts.append(RankCount.from_dict(record["count"]))
        wall.append(record["wall_time"])
    return DistributedResult(tuple(ps.back(o) for o in outputs), tuple(counts), np.array(wall))
