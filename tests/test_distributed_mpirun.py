"""Starting, watching and stopping P MPI ranks (attnlib.distributed.mpirun): every way a run
can fail ends in an error within its time limit.

Failures are injected with the private ATTNLIB_DISTRIBUTED_FAULT variable ("RANK:STEP:ACTION":
the rank exits, raises or sleeps just before its STEP-th transfer) into a real run of the ring's
backward pass on 3 ranks. A failing run must name the rank at fault, quote its error output,
leave no rank process behind, and end long before the timeout unless the failure is a hang
(then at the timeout). Time limits are stated per test.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib.distributed import DistributedError, mpiexec_command, run, run_ranks
from attnlib.distributed.comm import FAULT_ENV

Q6 = np.random.default_rng(4).standard_normal((2, 6, 4))


def _leftovers(marker: str) -> list[str]:
    """Processes whose command line holds ``marker`` (the run's temporary directory)."""
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if marker in line and "ps -eo" not in line]


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The launcher's temporary directories under tmp_path, so that this test's rank processes
    can be found by their command line (which holds the directory)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return str(tmp_path)


def test_no_mpiexec_says_how_to_install_it(monkeypatch, tmp_path):
    """Without an mpiexec next to the interpreter: an error naming the pinned wheels."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(DistributedError, match=r"mpich and mpi4py"):
        mpiexec_command(2)


def test_mpiexec_command_is_the_one_next_to_this_python():
    command = mpiexec_command(3)
    assert command[0].startswith(str(sys.prefix)) or "mpiexec" in command[0]
    assert command[command.index("-n") + 1] == "3"
    assert command[-3:] == [sys.executable, "-m", "attnlib.distributed.worker"]


# ---- failures: each within a stated time limit ---------------------------------------------------

#: The launch's own timeout in the failure tests that are not hangs: they must end well
#: before it (detected by the launcher, not by waiting).
LONG = 60.0
#: A failing run that is not a hang ends within this many seconds (start-up of 3 ranks included).
QUICK = 20.0


def _fail(monkeypatch, fault: str, timeout: float):
    monkeypatch.setenv(FAULT_ENV, fault)
    start = time.monotonic()
    with pytest.raises(DistributedError) as info:
        run("ring", "backward", Q6, Q6, Q6, Q6, Q6, Q6[..., 0], P=3, timeout=timeout)
    return info.value, time.monotonic() - start


def test_a_rank_that_dies_is_named_quickly(monkeypatch, private_tmp):
    """Rank 1 exits at its second transfer: the others wait for it forever, so only the
    launcher's watch ends the run; it names rank 1 alone within QUICK seconds (a timeout of 60)
    and leaves no rank running."""
    err, elapsed = _fail(monkeypatch, "1:1:exit", LONG)
    assert elapsed < QUICK, elapsed
    assert err.ranks == (1,)
    assert "rank 1 died" in str(err)
    assert not _leftovers(private_tmp)


def test_a_rank_that_raises_is_named_with_its_traceback(monkeypatch, private_tmp):
    """Rank 2 raises: its traceback's last line is quoted, within QUICK seconds."""
    err, elapsed = _fail(monkeypatch, "2:0:raise", LONG)
    assert elapsed < QUICK, elapsed
    assert err.ranks == (2,)
    assert "RuntimeError: injected fault on rank 2 at step 0" in str(err)
    assert not _leftovers(private_tmp)


def test_a_hang_is_stopped_at_the_timeout(monkeypatch, private_tmp):
    """Rank 0 sleeps before its first transfer: at the timeout of 3 s every rank is stopped
    (within 3 s + the launcher's grace + start-up: 15 s) and the error names the ranks that
    had not finished, rank 0 among them, with where each one was."""
    err, elapsed = _fail(monkeypatch, "0:0:sleep", 3.0)
    assert 3.0 <= elapsed < 15.0, elapsed
    assert "had not finished after the timeout of 3 s" in str(err)
    assert 0 in err.ranks
    assert "most recent call first" in str(err)  # the stack each rank wrote when stopped
    assert not _leftovers(private_tmp)


def test_run_ranks_refuses_a_directory_that_is_not_there(tmp_path):
    with pytest.raises(AttnInputError, match=r"\bdirectory\b"):
        run_ranks([sys.executable, "-c", "pass"], tmp_path / "missing", P=2, timeout=10)
