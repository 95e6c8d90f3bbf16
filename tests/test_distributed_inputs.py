"""Every rank's arguments checked on the rank and agreed on by all (attnlib.distributed.inputs).

The adversary is a rank that disagrees: a refusal on one rank, or arguments that differ from
rank to rank, must reach every rank as the same AttnInputError naming the argument and the
ranks, and no rank may be left waiting for another (the launcher's timeout would fail the test
instead of hanging it). Checked in one SPMD script on 3 ranks; the rules of Ulysses' head split
and of the grid in this process.
"""

from __future__ import annotations

import re

import numpy as np
from spmd import run_spmd

import attnlib as al
from attnlib.distributed import inputs as ip

#: Refusals in one SPMD script on 3 ranks: (name, what rank-specific arguments, pattern). Each
#: must reach every rank as the same AttnInputError, naming the argument and the ranks; none
#: may leave a rank waiting for a message.
REFUSALS = {
    "shape-on-rank-1": r"Q's shape differs across ranks: .* on rank 1\b",
    "nan-on-rank-2": r"\bQ\b.*\(on rank 2\)",
    "dtype-on-rank-1": r"Q's dtype differs across ranks: 'float64' on ranks 0, 2 and "
    r"'float32' on rank 1",
    "causal-on-rank-0": r"is_causal differs across ranks: True on rank 0 and False on ranks 1, 2",
    "scale-on-rank-2": r"scale differs across ranks: .* on rank 2\b",
    "ulysses-P-not-dividing-H": r"P = 3 must divide H|P must divide H.*\(on ranks 0, 1, 2\)",
    "grid-not-P": r"\bgrid\b.*R \* C = P = 3.*\(on ranks 0, 1, 2\)",
    "zigzag-odd-rows": r"zigzag.*2P must divide n.*\(on ranks 0, 1, 2\)",
    "different-schedules": r"the schedule differs across ranks: 'ring_forward' on ranks 0, 2 "
    r"and 'grid_forward' on rank 1",
    # finite on every rank, but rank 0's queries against rank 2's keys overflow float64: no
    # rank can see it before the pass, so all refuse after it instead of returning NaN
    "overflow-across-ranks": r"ring_forward: outputs not finite \(O, lse on rank 0\)",
    "overflow-across-ranks-backward": r"grid_backward: outputs not finite .*rank 0",
}

SPMD_REFUSALS = """
def body(comm, directory):
    from attnlib import AttnInputError
    from attnlib.distributed import grid_backward, grid_forward, ring_forward, ulysses_forward

    r = comm.rank
    rng = np.random.default_rng(r)
    def shard(b=2, H=2, dtype=np.float64):
        return [rng.standard_normal((H, b, 3)).astype(dtype) for _ in range(3)]

    def huge():
        Q, K, V = shard()
        return (np.full_like(Q, 1e200) if r == 0 else Q, np.full_like(K, 1e200) if r == 2 else K, V)

    calls = {
        "shape-on-rank-1": lambda: ring_forward(comm, *shard(b=3 if r == 1 else 2)),
        "nan-on-rank-2": lambda: ring_forward(comm, *[
            np.where(r == 2, np.nan, a) if i == 0 else a for i, a in enumerate(shard())
        ]),
        "dtype-on-rank-1": lambda: ring_forward(
            comm, *shard(dtype=np.float32 if r == 1 else np.float64)
        ),
        "causal-on-rank-0": lambda: ring_forward(comm, *shard(), is_causal=r == 0),
        "scale-on-rank-2": lambda: ring_forward(comm, *shard(), scale=0.5 if r == 2 else 0.25),
        "ulysses-P-not-dividing-H": lambda: ulysses_forward(comm, *shard(H=4)),
        "grid-not-P": lambda: grid_forward(comm, *shard(), grid=(2, 2)),
        "zigzag-odd-rows": lambda: ring_forward(comm, *shard(b=3), layout="zigzag"),
        "different-schedules": lambda: (grid_forward(comm, *shard(), grid=(1, 3)) if r == 1
                                        else ring_forward(comm, *shard())),
        "overflow-across-ranks": lambda: ring_forward(comm, *huge()),
        "overflow-across-ranks-backward": lambda: grid_backward(
            comm, *huge(), *[np.zeros((2, 2, 3))] * 2, np.zeros((2, 2)), grid=(1, 3)
        ),
    }
    report = {}
    for name, call in calls.items():
        try:
            call()
            report[name] = None
        except AttnInputError as exc:
            report[name] = str(exc)
    # after every refusal the ranks are still in step: a valid call gives the right rows
    Q, K, V = (np.random.default_rng(9).standard_normal((2, 6, 3)) for _ in range(3))
    rows = slice(2 * r, 2 * r + 2)
    O, lse = ring_forward(comm, Q[:, rows], K[:, rows], V[:, rows], is_causal=True)
    report["after"] = [O.tolist(), lse.tolist()]
    (directory / f"out{r}.json").write_text(json.dumps(report))
"""


def test_a_refusal_on_any_rank_is_the_same_error_on_every_rank(tmp_path):
    """Each refusal reaches all 3 ranks as one message naming the argument and the ranks at
    fault, before any data moves (a rank that raised alone would leave the others waiting:
    the launcher's timeout would fail the test); then a valid call works on every rank."""
    reports = run_spmd(tmp_path, 3, SPMD_REFUSALS, timeout=60)
    for name, pattern in REFUSALS.items():
        messages = [rep[name] for rep in reports]
        assert messages[0] is not None, name
        assert messages.count(messages[0]) == 3, (name, messages)
        assert re.search(pattern, messages[0]), (name, messages[0])
    Q, K, V = (np.random.default_rng(9).standard_normal((2, 6, 3)) for _ in range(3))
    O, lse = al.attention_forward(Q, K, V, is_causal=True)
    for r, rep in enumerate(reports):
        np.testing.assert_allclose(rep["after"][0], O[:, 2 * r : 2 * r + 2], rtol=1e-12)
        np.testing.assert_allclose(rep["after"][1], lse[:, 2 * r : 2 * r + 2], rtol=1e-12)


def test_the_verdict_names_every_argument_that_differs():
    """Two ranks agree, a third differs in two arguments: both named, with the ranks."""
    sig = {"Q's shape": (2, 3), "scale": 0.5}
    other = {"Q's shape": (2, 4), "scale": 0.25}
    message = ip._verdict([(None, sig), (None, other), (None, sig)])
    assert "Q's shape differs across ranks: (2, 3) on ranks 0, 2 and (2, 4) on rank 1" in message
    assert "scale differs across ranks: 0.5 on ranks 0, 2 and 0.25 on rank 1" in message
    assert ip._verdict([(None, sig)] * 3) is None
    assert ip._verdict([(None, sig), ("K is bad", None), ("K is bad", None)]) == (
        "K is bad (on ranks 1, 2)"
    )
