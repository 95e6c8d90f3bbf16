"""Run an SPMD test script on P MPI ranks, as a reader runs their own mpiexec script: the
script's ``body(comm, directory)`` runs on every rank under the launcher's watch
(attnlib.distributed.worker's protocol), so a hang or a dead rank fails within the timeout
instead of stalling the suite. Each rank reports by writing files into ``directory``."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from attnlib.distributed import run_ranks

HEADER = """\
import json
import sys
from pathlib import Path

import numpy as np

from attnlib.distributed.worker import _serve
"""

FOOTER = """
if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1], body))
"""


def run_spmd(tmp_path: Path, P: int, body: str, *, timeout: float = 60.0) -> list:
    """Run ``body`` (the source of ``def body(comm, directory): ...``, which may write
    ``directory / f"out{comm.rank}.json"``) on P ranks; returns each rank's JSON report (None
    for a rank that wrote none). Raises DistributedError as the launcher does."""
    directory = tmp_path / "ranks"
    directory.mkdir()
    script = tmp_path / "script.py"
    script.write_text(HEADER + "\n\n" + textwrap.dedent(body) + "\n" + FOOTER)
    run_ranks([sys.executable, str(script)], directory, P=P, timeout=timeout)
    reports = []
    for p in range(P):
        path = directory / f"out{p}.json"
        reports.append(json.loads(path.read_text()) if path.exists() else None)
    return reports
