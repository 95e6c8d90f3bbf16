"""Attention across P devices, run for real under MPI (mpi4py and MPICH).

* :mod:`.schedules`: ring (Liu et al. 2023), Ulysses (Jacobs et al. 2023) and the 2-D grid,
  forward and backward, as SPMD functions each rank calls on its own shard, in the
  contiguous, striped (Brandon et al. 2023) or zig-zag layout;
* :mod:`.comm`: :class:`CountingComm`, the communicator they talk through, which counts the
  words, bytes and messages each rank sends and receives, by kind, at the MPI calls;
* :mod:`.inputs`: :func:`agree`, every rank's arguments checked on the rank and agreed on by
  all, so that a refusal anywhere is the same error everywhere and no rank waits;
* :mod:`.launch`: :func:`run` and :func:`run_jobs` run the schedules on P ranks from an
  ordinary Python process and return the outputs with each rank's counts;
* :mod:`.mpirun`: :func:`run_ranks` starts P ranks under ``mpiexec``, watches them and stops
  them (:class:`DistributedError` names a rank that raised, died or hung); :mod:`.worker` is
  what each rank runs.

The block arithmetic they share is :mod:`attnlib.blockwise`; the same schedules on the
simulated machine, with their closed-form counts, are :mod:`attnlib.iomodel.ring`,
:mod:`attnlib.iomodel.ulysses` and :mod:`attnlib.iomodel.grid`.
"""

from .comm import KINDS, CountingComm, RankCount
from .inputs import SCHEDULE_NAMES, agree, agree_finite
from .launch import DistributedResult, Job, run, run_jobs
from .mpirun import DistributedError, mpiexec_command, run_ranks
from .schedules import (
    SCHEDULES,
    grid_backward,
    grid_forward,
    ring_backward,
    ring_forward,
    ulysses_backward,
    ulysses_forward,
)

__all__ = [
    "run",
    "run_jobs",
    "Job",
    "DistributedResult",
    "DistributedError",
    "mpiexec_command",
    "run_ranks",
    "agree",
    "agree_finite",
    "SCHEDULE_NAMES",
    "CountingComm",
    "RankCount",
    "KINDS",
    "SCHEDULES",
    "ring_forward",
    "ring_backward",
    "ulysses_forward",
    "ulysses_backward",
    "grid_forward",
    "grid_backward",
]
