"""Start P ranks of a program under ``mpiexec``, watch them, and stop them: no run outlives its
timeout, and every failure names the rank at fault.

:func:`run_ranks` runs ``mpiexec -n P <program> DIR`` with the ``mpiexec`` installed next to
this Python (the pinned ``mpich`` wheel; :func:`mpiexec_command` is the launcher's worker
command). The program follows the worker's protocol (:mod:`.worker`): rank p writes its process
id to DIR/rank{p}.pid, its output to DIR/rank{p}.log, DIR/rank{p}.error with its traceback if
it raises (and then aborts the run), DIR/rank{p}.done when it has finished. The launcher polls
these files and the ranks' processes:

* a rank that raises: :class:`DistributedError` names it and quotes the tail of its error;
* a rank that dies (killed, crashed, exited): its process is gone before it reported, so the
  launcher names it, stops the others and raises. ``mpiexec`` runs with
  ``-disable-auto-cleanup``: MPICH's default would kill the survivors at once, and the rank
  that died first could no longer be told from the ranks it took down;
* a hang: at ``timeout`` seconds every rank is stopped (SIGTERM, which ``mpiexec`` forwards and
  on which each rank writes where it was, then SIGKILL for what is left) and the error names
  the ranks that had not finished.

The ranks run one thread each (``OMP_NUM_THREADS=1`` and the like), and MPICH's progress loop
sleeps briefly after polling in vain, so that more ranks than cores do not spin against each
other.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .._checks import AttnInputError, as_entries, check_int, check_positive_real

__all__ = ["run_ranks", "mpiexec_command", "DistributedError"]

#: How long the ranks get to write where they were after SIGTERM, before SIGKILL.
_GRACE = 2.0
#: How often the launcher looks at the ranks, in seconds.
_POLL = 0.02
#: Characters of a rank's error output quoted in an error.
_TAIL = 2000


class DistributedError(RuntimeError):
    """A distributed run failed: a rank raised, died, or had not finished by the timeout.
    The message names the ranks and quotes the tail of their error output; ``ranks`` holds
    them."""

    def __init__(self, message: str, ranks=()):
        super().__init__(message)
        self.ranks = tuple(ranks)


def mpiexec_command(P: int) -> list[str]:
    """The command that starts P ranks of the worker (:func:`run_ranks` appends the directory):
    the ``mpiexec`` next to this Python, started with the fork launcher
    (one machine, no ssh) and without automatic clean-up (the launcher stops the ranks
    itself). Raises :class:`DistributedError` saying how to install it if there is none."""
    return [*_mpiexec(P), sys.executable, "-m", "attnlib.distributed.worker"]


def _mpiexec(P) -> list[str]:
    """mpiexec and its options for P ranks, before the program."""
    P = check_int("P", P)
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        raise DistributedError(
            f"no mpiexec next to {sys.executable}: install MPICH and mpi4py into this "
            "environment with the pinned wheels, pip install -r requirements-reader.txt "
            "(mpich and mpi4py; on Windows, use WSL)"
        )
    return [
        str(mpiexec),
        "-launcher",
        "fork",
        "-disable-auto-cleanup",
        "-n",
        str(P),
    ]


def run_ranks(program, directory, *, P, timeout) -> None:
    """Run ``mpiexec -n P *program directory`` to completion, or raise.

    Parameters
    ----------
    program : the command each rank runs, a list of strings (``mpiexec_command(P)`` without
        its ``mpiexec`` part, or ``[sys.executable, "script.py"]``); ``directory`` is appended
    directory : an existing directory, where the ranks report (module docstring)
    P : ranks; timeout : seconds before every rank is stopped

    Raises AttnInputError for invalid arguments and :class:`DistributedError` if a rank
    raises, dies or has not finished by ``timeout``; every rank is stopped either way.
    """
    program = as_entries("program", program, of="strings", min_len=1, entry_type=str)
    if not Path(directory).is_dir():
        raise AttnInputError(f"directory must be an existing directory, got {directory!r:.60}")
    P = check_int("P", P)
    timeout = check_positive_real("timeout", timeout)
    _launch([*_mpiexec(P), *program, str(directory)], Path(directory), P, timeout)


def _environment() -> dict:
    """The ranks' environment: one thread each, and MPICH's progress loop sleeping 1 µs after
    polling in vain (more ranks than cores would otherwise spin against each other)."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env[var] = "1"
    env.setdefault("MPIR_CVAR_CH4_PROGRESS_THROTTLE", "1")
    return env


def _pid(directory: Path, p: int) -> int | None:
    try:
        return int((directory / f"rank{p}.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (exited, not yet reaped by its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return text[-_TAIL:].strip()


def _launch(command, directory: Path, P: int, timeout: float) -> None:
    """Run the ranks to completion, or raise DistributedError; every rank stopped either way."""
    start = time.monotonic()
    log = open(directory / "mpiexec.log", "wb")
    try:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=_environment(), start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        log.close()
        raise DistributedError(f"could not start {command[0]}: {exc}") from exc
    failure = None
    try:
        failure = _watch(proc, directory, P, start + timeout, timeout)
    finally:
        _stop(proc, directory, P)
        log.close()
    if failure is None:
        return
    message, ranks = failure
    raise DistributedError(_describe(message, ranks, directory), ranks)


def _watch(proc, directory: Path, P: int, deadline: float, timeout: float):
    """Poll the ranks until mpiexec exits after every rank finished (None), or a failure:
    (message, ranks)."""
    while True:
        done = [p for p in range(P) if (directory / f"rank{p}.done").exists()]
        raised = [p for p in range(P) if (directory / f"rank{p}.error").exists()]
        if raised:
            return "raised an error", raised
        dead = [
            p for p in range(P)
            if p not in done and (pid := _pid(directory, p)) is not None and not _alive(pid)
        ]  # fmt: skip
        if dead:
            # a rank that raised writes its error before aborting the others: give its file
            # a moment to appear, so that the rank at fault is named, not those it took down
            time.sleep(10 * _POLL)
            raised = [p for p in range(P) if (directory / f"rank{p}.error").exists()]
            if raised:
                return "raised an error", raised
            return "died before finishing (its process is gone)", dead
        rc = proc.poll()
        if rc is not None:
            if len(done) == P and rc == 0:
                return None
            missing = [p for p in range(P) if p not in done] or list(range(P))
            return f"did not finish (mpiexec exited with status {rc})", missing
        if time.monotonic() > deadline:
            missing = [p for p in range(P) if p not in done]
            return f"had not finished after the timeout of {timeout:g} s", missing
        time.sleep(_POLL)


def _stop(proc, directory: Path, P: int) -> None:
    """Stop mpiexec and every rank still running: SIGTERM to mpiexec (it forwards it to the
    ranks, which write where they were), then SIGKILL to it and to the ranks left."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for p in range(P):
        pid = _pid(directory, p)
        if pid is not None and _alive(pid) and _is_rank(pid, directory):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _is_rank(pid: int, directory: Path) -> bool:
    """The process is one of this run's ranks, whose last argument is the run's directory
    (not a process that reused the id)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(str(directory)) in args


def _describe(message: str, ranks, directory: Path) -> str:
    lines = [f"the MPI run failed: {'rank' if len(ranks) == 1 else 'ranks'} "
             f"{', '.join(map(str, ranks))} {message}"]  # fmt: skip
    for p in ranks:
        tail = _tail(directory / f"rank{p}.error") or _tail(directory / f"rank{p}.log")
        if tail:
            lines.append(f"--- rank {p}, the end of its error output:\n{tail}")
    tail = _tail(directory / "mpiexec.log")
    if tail:
        lines.append(f"--- mpiexec:\n{tail[-_TAIL // 2 :]}")
    return "\n".join(lines)
