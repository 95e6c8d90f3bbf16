"""What each rank runs (attnlib.distributed.worker): the files it leaves for the launcher,
and the abort that keeps a rank's error from leaving the others waiting."""

from __future__ import annotations

import time

import pytest
from spmd import run_spmd

from attnlib.distributed import DistributedError
from attnlib.distributed import worker as wk

QUIET = """
def body(comm, directory):
    (directory / f"out{comm.rank}.json").write_text(json.dumps({"size": comm.size}))
"""

RAISES_WHILE_OTHERS_WAIT = """
def body(comm, directory):
    if comm.rank == 0:
        raise ValueError("rank zero gives up")
    comm.sendrecv([("Q", np.ones(2))], dest=0, source=0)  # waits for rank 0 forever
"""


def test_a_rank_leaves_its_pid_log_and_done_file(tmp_path):
    """Each rank reports its process id and, having returned, a done file; no error file."""
    reports = run_spmd(tmp_path, 2, QUIET)
    assert reports == [{"size": 2}, {"size": 2}]
    ranks = tmp_path / "ranks"
    for p in range(2):
        assert int((ranks / f"rank{p}.pid").read_text()) > 0
        assert (ranks / f"rank{p}.done").exists() and (ranks / f"rank{p}.log").exists()
        assert not (ranks / f"rank{p}.error").exists()
    assert not list(ranks.glob("*.tmp"))  # every file was renamed into place whole


def test_a_rank_that_raises_aborts_the_ranks_waiting_for_it(tmp_path):
    """Rank 0 raises while ranks 1 and 2 wait for its message: the worker's MPI_Abort ends
    them, so the error (naming rank 0 alone, with its traceback) comes within 20 s although the
    timeout is 60 s; without the abort the run would end only at the timeout."""
    start = time.monotonic()
    with pytest.raises(DistributedError) as info:
        run_spmd(tmp_path, 3, RAISES_WHILE_OTHERS_WAIT, timeout=60)
    assert time.monotonic() - start < 20
    assert info.value.ranks == (0,)
    assert "ValueError: rank zero gives up" in str(info.value)


def test_the_worker_exports_nothing():
    """An entry point (python -m attnlib.distributed.worker DIR), not a library module."""
    assert wk.__all__ == []
