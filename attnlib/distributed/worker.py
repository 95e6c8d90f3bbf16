"""One rank of a launched run (:mod:`.launch`): ``python -m attnlib.distributed.worker DIR``
under ``mpiexec``.

The rank p (``PMI_RANK``, read before MPI starts, so that even a rank that fails to start is
named) writes its process id to DIR/rank{p}.pid, sends its output to DIR/rank{p}.log, then
runs every job of DIR/jobs.json on its shard DIR/job{j}_rank{p}_in.npz with the schedule's SPMD
function (:mod:`.schedules`) on a :class:`.comm.CountingComm` of ``MPI.COMM_WORLD``, reset
before each job. It writes the outputs DIR/job{j}_rank{p}_out.npz, then its counts and wall
times DIR/rank{p}.json, then DIR/rank{p}.done. Every file appears whole (written under another
name, then renamed), so the launcher never reads half a file.

If the rank raises, it writes the traceback to DIR/rank{p}.error and aborts the run
(``MPI_Abort``), so that no other rank waits for it. On SIGTERM (the launcher stopping a run)
it writes where it was to its log (:mod:`faulthandler`).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from . import schedules
from .comm import CountingComm

__all__: list[str] = []  # an entry point, run by the launcher: nothing to import


def _write(path: Path, write) -> None:
    """Write a file whole: ``write(tmp)`` to a temporary name, then rename."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def _savez(path: Path, arrays: dict) -> None:
    with open(path, "wb") as f:  # a file object: np.savez would append ".npz" to a name
        np.savez(f, **arrays)


def _run_job(comm: CountingComm, spec: dict, arrays: dict) -> tuple:
    """One job of jobs.json on this rank: the schedule's SPMD function on the rank's shard
    ``arrays`` (name -> array) with the job's keywords. Returns its outputs."""
    name = f"{spec['schedule']}_{spec['direction']}"
    keywords = {k: spec[k] for k in ("layout", "scale", "is_causal", "enable_gqa")}
    if spec["schedule"] == "grid":
        keywords["grid"] = tuple(spec["grid"])
    inputs = [arrays[k] for k in spec["names"]]
    if spec["one_head"]:  # the launcher keeps a head axis; a one-head pass takes 2-D shards
        inputs = [a[0] for a in inputs]
    outputs = getattr(schedules, name)(comm, *inputs, **keywords)
    return tuple(o[None] if spec["one_head"] else o for o in outputs)


def _serve(directory, body) -> int:
    """Run ``body(comm, directory)`` as this rank, with the launcher's protocol (module
    docstring): the process id, the log, an error file and MPI_Abort if ``body`` raises, the
    done file if it returns. Returns the exit status."""
    directory = Path(directory)
    rank = int(os.environ.get("PMI_RANK", "0"))
    log = open(directory / f"rank{rank}.log", "w")  # noqa: SIM115 (open until the end)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log)
    faulthandler.register(signal.SIGTERM, file=log, chain=True)
    _write(directory / f"rank{rank}.pid", lambda t: t.write_text(str(os.getpid())))

    from mpi4py import MPI

    try:
        body(CountingComm(MPI.COMM_WORLD), directory)
    except BaseException:
        text = traceback.format_exc()
        _write(directory / f"rank{rank}.error", lambda t: t.write_text(text))
        log.flush()
        MPI.COMM_WORLD.Abort(1)
        return 1
    (directory / f"rank{rank}.done").write_text("")
    return 0


def _run_jobs(comm: CountingComm, directory: Path) -> None:
    """Every job of DIR/jobs.json on this rank's shards; outputs, counts and times written."""
    rank = comm.rank
    spec = json.loads((directory / "jobs.json").read_text())
    records = []
    for j, job in enumerate(spec["jobs"]):
        with np.load(directory / f"job{j}_rank{rank}_in.npz") as data:
            arrays = {k: data[k] for k in data.files}
        comm.reset()
        start = time.perf_counter()
        outputs = _run_job(comm, job, arrays)
        wall = time.perf_counter() - start
        names = ("O", "lse") if job["direction"] == "forward" else ("dQ", "dK", "dV")
        out = dict(zip(names, outputs, strict=True))
        _write(directory / f"job{j}_rank{rank}_out.npz", lambda t, out=out: _savez(t, out))
        records.append({"count": comm.count().to_dict(), "wall_time": wall})
    _write(directory / f"rank{rank}.json", lambda t: t.write_text(json.dumps(records)))


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1], _run_jobs))
