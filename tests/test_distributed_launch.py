"""Running the schedules on P MPI ranks from Python (attnlib.distributed.launch): the round
trip in global row order, and refusals before anything starts. Every schedule's outputs and
counts are checked in test_distributed_schedules.py, the failures of a run in
test_distributed_mpirun.py."""

from __future__ import annotations

import numpy as np
import pytest

import attnlib as al
from attnlib import AttnInputError
from attnlib.distributed import Job, launch, run, run_jobs

RNG = np.random.default_rng(3)
Q3, K3, V3 = (RNG.standard_normal((2, 8, 4)) for _ in range(3))


def test_run_returns_global_outputs_and_one_count_per_rank():
    """One head as 2-D arrays comes back 2-D, rows in global order (striped layout: rank p
    holds every P-th row, so a row put back in the wrong place fails)."""
    Q, K, V = Q3[0], K3[0], V3[0]
    r = run("ring", "forward", Q, K, V, P=2, layout="striped", is_causal=True, timeout=60)
    O, lse = al.attention_forward(Q, K, V, is_causal=True)
    assert r.outputs[0].shape == O.shape and r.outputs[1].shape == lse.shape
    np.testing.assert_allclose(r.outputs[0], O, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r.outputs[1], lse, rtol=1e-12, atol=1e-14)
    assert r.P == 2 and [c.rank for c in r.counts] == [0, 1]
    assert r.sent.tolist() == [4 * 8, 4 * 8]  # (P - 1) b (d + d_v) = 1 * 4 * 8
    assert r.wall_time.shape == (2,)  # shown, never compared: machine-dependent


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: run("ring", "forward", Q3[:, :7], K3[:, :7], V3[:, :7], P=2), r"\bP\b"),
        (lambda: run("ring", "forward", Q3, K3, V3, P=8, layout="zigzag"), "zigzag"),
        (lambda: run("ulysses", "forward", Q3, K3, V3, P=4), r"P must divide H"),
        (lambda: run("grid", "forward", Q3, K3, V3, P=4, grid=(2, 3)), r"\bgrid\b"),
        (lambda: run("grid", "forward", Q3, K3, V3, P=2), r"\bP\b.*not a square"),
        (lambda: run("ring", "forward", Q3, K3, V3, P=2, grid=(1, 2)), r"\bgrid\b"),
        (lambda: run("ring", "backward", Q3, K3, V3, P=2), r"\(Q, K, V, O, dO, lse\)"),
        (lambda: run_jobs([Job("ring", "forward", (Q3, K3, V3)), "job"], P=2), r"\bjobs\b"),
        (lambda: run_jobs([Job("ring", "sideways", (Q3, K3, V3))] * 2, P=2), r"jobs\[0\]"),
    ],
    ids=["P-not-dividing-n", "zigzag", "ulysses-heads", "grid-not-P", "grid-not-square",
         "grid-for-ring", "backward-arrays", "not-a-job", "which-job"],
)  # fmt: skip
def test_bad_input_is_refused_before_anything_starts(monkeypatch, call, pattern):
    """Refused with AttnInputError naming the argument, and no rank was started (starting
    one would fail the test here)."""

    def no_launch(*args, **kwargs):
        raise AssertionError("a launch was started for refused input")

    monkeypatch.setattr(launch, "run_ranks", no_launch)
    with pytest.raises(AttnInputError, match=pattern):
        call()
