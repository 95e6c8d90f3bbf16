"""Attention across P ranks under MPI: ring, Ulysses and the 2-D grid, forward and backward,
as SPMD functions each rank calls on its own shards.

Every rank p calls the same function with the same keywords on its shard of the sequence: the
rows ``shard_rows(n, P, layout)[p]`` (:func:`attnlib.iomodel.shards.shard_rows`) of Q (H, b, d),
K (H_kv, b, d) and V (H_kv, b, d_v) in every head, b = n / P, P the communicator's size (2-D
(b, d) arrays are one head); the backward pass also takes the same rows of the forward's O,
lse and the upstream gradient dO. Each returns its rows of the outputs. The schedules:

* **ring** (Liu, Zaharia and Abbeel 2023, Alg. 1): the key/value blocks travel around the ring
  p -> p + 1 while each rank merges its query rows' partial results with the online softmax;
  the backward pass sends each block's gradient accumulators dK, dV along with it and, after
  the last step, one hop further to the block's owner;
* **ulysses** (Jacobs et al. 2023, DeepSpeed-Ulysses §3): an all-to-all gives each rank all n
  rows of H / P query heads (and of their key/value heads), which it attends exactly; a second
  all-to-all returns each rank's rows;
* **grid** (R × C ranks, rank p = r C + c): Q is all-gathered along the grid row, K and V along
  the grid column, each rank evaluates its block of the score matrix, and the partial results
  are reduce-scattered (merged with the online softmax; summed for dQ, and for dK, dV along the
  column).

The layouts ("contiguous", "striped" as in Brandon et al. 2023's striped attention, "zigzag")
only decide which rows a rank holds; a causal mask is applied in global row indices. The words
each rank sends and receives are counted at the MPI calls (:class:`.comm.CountingComm`: pass
one to read them) and equal the closed forms of :mod:`attnlib.iomodel.ring`,
:mod:`attnlib.iomodel.ulysses` and :mod:`attnlib.iomodel.grid`.

**Input checks across ranks.** Every rank checks its own arguments and agrees on them with
the others before any data moves (:func:`.inputs.agree`): a refusal on any rank, or arguments
that differ between ranks, raise the same :class:`attnlib.AttnInputError` on every rank. A
rank sees only its own shard, so logits τ q·k that overflow the dtype between two ranks' rows
cannot be refused before the pass; every rank then checks its outputs and all agree
(:func:`.inputs.agree_finite`), so such a pass raises the same AttnInputError on every rank
instead of returning NaN. :func:`attnlib.distributed.run`, which holds all the arrays, refuses
them before it starts.

**Running them.** :func:`attnlib.distributed.run` starts P ranks from Python and hands each
its shard. In a script of your own, start it as ``mpiexec -n P python -m mpi4py script.py``:
``-m mpi4py`` aborts every rank when one raises an uncaught exception, where a plain
``python script.py`` would leave the other ranks waiting for it forever.
"""

from __future__ import annotations

import numpy as np

# unchecked: the blocks were checked where they started (agree), and a check that failed on one
# rank mid-pass would leave the others waiting; agree_finite judges the outputs instead
from ..blockwise import _block_backward, _block_forward, _merge, _row_deltas
from .comm import CountingComm
from .inputs import agree, agree_finite, ulysses_heads

__all__ = [
    "ring_forward",
    "ring_backward",
    "ulysses_forward",
    "ulysses_backward",
    "grid_forward",
    "grid_backward",
    "SCHEDULES",
]

#: The schedules, by name.
SCHEDULES = ("ring", "ulysses", "grid")


def _work(keep, heads: int, rows: int, cols: int) -> int:
    """Kept score entries of one block, summed over its query heads."""
    return heads * (rows * cols if keep is None else int(keep.sum()))


# ---- ring -------------------------------------------------------------------------------------


def ring_forward(
    comm, Q, K, V, *, layout="contiguous", scale=None, is_causal=False, enable_gqa=False
):
    """Ring attention's forward pass on this rank's shard (module docstring).

    Parameters
    ----------
    comm : an mpi4py communicator of P ranks, or a :class:`.comm.CountingComm` (to read the
        counts); every rank calls with the same keywords
    Q : (b, d) or (H, b, d); K : (H_kv, b, d); V : (H_kv, b, d_v): this rank's rows
        ``shard_rows(n, P, layout)[rank]``, n = P b (2P | n for ``"zigzag"``)
    layout : one of ``"contiguous"``, ``"striped"``, ``"zigzag"``
    scale, is_causal, enable_gqa : as in :func:`attnlib.attention_forward`

    Returns
    -------
    O : (H, b, d_v), lse : (H, b) (2-D input: (b, d_v), (b,)), this rank's rows of
    :func:`attnlib.attention_forward`'s outputs up to rounding.

    Every rank sends and receives (P − 1) b H_kv (d + d_v) words in P − 1 messages.
    Raises AttnInputError on every rank if any rank's arguments are invalid or differ.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> O, lse = ring_forward(MPI.COMM_SELF, Q, Q, Q, is_causal=True)  # one rank: the whole pass
    >>> O.tolist()[0]  # row 0 sees key 0 only
    [1.0, 0.0]
    """
    x, c = agree(
        "ring_forward", comm, Q, K, V, None,
        layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
    )  # fmt: skip
    P, p = c.size, c.rank
    O = lse = None
    Kc, Vc = x.K, x.V
    for s in range(P):
        j = (p - s) % P
        # start passing the block on before computing with it: the transfer overlaps the work
        pending = None
        if s < P - 1:
            pending = c.start_sendrecv([("K", Kc), ("V", Vc)], dest=(p + 1) % P, source=(p - 1) % P)
        keep = x.keep(x.rows[p], x.rows[j])
        part = _block_forward(x.Q, Kc, Vc, x.scale, keep)
        c.add_work(_work(keep, x.Q.shape[0], x.b, x.b))
        O, lse = part if O is None else _merge(O, lse, *part)
        if pending is not None:
            Kc, Vc = pending.wait()
    agree_finite("ring_forward", c, {"O": O, "lse": lse})
    return x.back(O), x.back(lse)


def ring_backward(
    comm, Q, K, V, O, dO, lse, *, layout="contiguous", scale=None, is_causal=False,
    enable_gqa=False,
):  # fmt: skip
    """Ring attention's backward pass on this rank's shard (module docstring).

    Parameters
    ----------
    comm, Q, K, V, layout, scale, is_causal, enable_gqa : as in :func:`ring_forward`
    O, lse : this rank's rows of the forward pass's outputs; dO : like O

    Returns
    -------
    dQ, dK, dV : this rank's rows, shaped like Q, K, V: :func:`attnlib.attention_backward`'s
    up to rounding (dK, dV of a key/value head sum its query heads' contributions).

    D = rowsum(dO ∘ O) is computed locally (FA2 Alg. 2). Every rank sends and receives
    (2P − 1) b H_kv (d + d_v) words in P messages (nothing when P = 1). Raises AttnInputError
    on every rank if any rank's arguments are invalid or differ.
    """
    x, c = agree(
        "ring_backward", comm, Q, K, V, (O, dO, lse),
        layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
    )  # fmt: skip
    P, p = c.size, c.rank
    O, dO, lse = x.outputs
    D = _row_deltas(O, dO)
    dQ = np.zeros_like(x.Q)
    Kc, Vc, dKc, dVc = x.K, x.V, np.zeros_like(x.K), np.zeros_like(x.V)
    ring = {"dest": (p + 1) % P, "source": (p - 1) % P}
    for s in range(P):
        j = (p - s) % P
        keep = x.keep(x.rows[p], x.rows[j])
        dq, dk, dv = _block_backward(x.Q, Kc, Vc, dO, lse, D, x.scale, keep)
        c.add_work(_work(keep, x.Q.shape[0], x.b, x.b))
        dQ += dq
        dKc, dVc = dKc + dk, dVc + dv
        if s < P - 1:  # the block and its accumulators travel together: one message
            Kc, Vc, dKc, dVc = c.sendrecv([("K", Kc), ("V", Vc), ("dK", dKc), ("dV", dVc)], **ring)
    if P > 1:  # this rank holds shard p + 1's finished gradients: one hop to their owner
        dKc, dVc = c.sendrecv([("dK", dKc), ("dV", dVc)], **ring)
    agree_finite("ring_backward", c, {"dQ": dQ, "dK": dKc, "dV": dVc})
    return x.back(dQ), x.back(dKc), x.back(dVc)


# ---- Ulysses ----------------------------------------------------------------------------------


def _ulysses_heads(x, P: int):
    """(query-head slice, key/value-head slice) of each rank q, and whether key/value heads
    are replicated (H_kv < P)."""
    H, H_kv = x.Q.shape[0], x.K.shape[0]
    hq, hk = ulysses_heads(H, H_kv, P)
    g = H // H_kv
    qs = [slice(q * hq, (q + 1) * hq) for q in range(P)]
    if H_kv % P == 0:
        return qs, [slice(q * hk, (q + 1) * hk) for q in range(P)], False
    return qs, [slice((q * hq) // g, (q * hq) // g + 1) for q in range(P)], True


def _assemble(received, rows, index: int, n: int) -> np.ndarray:
    """All n rows (global order) of the ``index``-th array received from every rank s, whose
    rows are rows[s]."""
    first = received[0][index]
    out = np.empty((first.shape[0], n, *first.shape[2:]), first.dtype)
    for s, arrays in enumerate(received):
        out[:, rows[s]] = arrays[index]
    return out


def ulysses_forward(
    comm, Q, K, V, *, layout="contiguous", scale=None, is_causal=False, enable_gqa=False
):
    """DeepSpeed-Ulysses' forward pass on this rank's shard (module docstring).

    Arguments and returns as :func:`ring_forward`; P must divide H, and P must divide H_kv
    or H_kv divide P (a rank's query heads then share one replicated key/value head).

    With hq = H / P query heads and hk key/value heads per rank (hk = H_kv / P, or 1 when
    H_kv < P), every rank sends and receives (P − 1) b [hq d + hk (d + d_v) + hq (d_v + 1)]
    words in 2 (P − 1) messages. Raises AttnInputError on every rank if any rank's arguments
    are invalid or differ.
    """
    x, c = agree(
        "ulysses_forward", comm, Q, K, V, None,
        layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
    )  # fmt: skip
    P = c.size
    qs, ks, _ = _ulysses_heads(x, P)
    n = P * x.b
    got = c.alltoall([[("Q", x.Q[qs[q]]), ("K", x.K[ks[q]]), ("V", x.V[ks[q]])] for q in range(P)])
    Qf, Kf, Vf = (_assemble(got, x.rows, i, n) for i in range(3))
    every = np.arange(n)
    keep = x.keep(every, every)
    Of, lsef = _block_forward(Qf, Kf, Vf, x.scale, keep)
    c.add_work(_work(keep, Qf.shape[0], n, n))
    back = c.alltoall([[("O", Of[:, x.rows[q]]), ("lse", lsef[:, x.rows[q]])] for q in range(P)])
    O = np.empty((x.Q.shape[0], x.b, x.V.shape[2]), x.Q.dtype)
    lse = np.empty((x.Q.shape[0], x.b), x.Q.dtype)
    for s in range(P):
        O[qs[s]], lse[qs[s]] = back[s]
    agree_finite("ulysses_forward", c, {"O": O, "lse": lse})
    return x.back(O), x.back(lse)


def ulysses_backward(
    comm, Q, K, V, O, dO, lse, *, layout="contiguous", scale=None, is_causal=False,
    enable_gqa=False,
):  # fmt: skip
    """DeepSpeed-Ulysses' backward pass on this rank's shard (module docstring).

    Arguments and returns as :func:`ring_backward`, heads as :func:`ulysses_forward`. D is
    computed locally before the all-to-all, so O never travels; when key/value heads are
    replicated, a head's owner sums the partial dK, dV of the ranks that share it, in rank
    order. Every rank sends and receives (P − 1) b [hq (2d + d_v + 2) + 2 hk (d + d_v)] words
    in 2 (P − 1) messages. Raises AttnInputError on every rank if any rank's arguments are
    invalid or differ.
    """
    x, c = agree(
        "ulysses_backward", comm, Q, K, V, (O, dO, lse),
        layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
    )  # fmt: skip
    P = c.size
    O, dO, lse = x.outputs
    D = _row_deltas(O, dO)
    qs, ks, replicated = _ulysses_heads(x, P)
    n = P * x.b
    got = c.alltoall([
        [("Q", x.Q[qs[q]]), ("dO", dO[qs[q]]), ("lse", lse[qs[q]]), ("D", D[qs[q]]),
         ("K", x.K[ks[q]]), ("V", x.V[ks[q]])]
        for q in range(P)
    ])  # fmt: skip
    Qf, dOf, lsef, Df, Kf, Vf = (_assemble(got, x.rows, i, n) for i in range(6))
    every = np.arange(n)
    keep = x.keep(every, every)
    dQf, dKf, dVf = _block_backward(Qf, Kf, Vf, dOf, lsef, Df, x.scale, keep)
    c.add_work(_work(keep, Qf.shape[0], n, n))
    back = c.alltoall([
        [("dQ", dQf[:, x.rows[q]]), ("dK", dKf[:, x.rows[q]]), ("dV", dVf[:, x.rows[q]])]
        for q in range(P)
    ])  # fmt: skip
    dQ = np.empty_like(x.Q)
    dK, dV = np.zeros_like(x.K), np.zeros_like(x.V)
    for s in range(P):  # rank order: the replicated heads' partials add up in a fixed order
        dQ[qs[s]] = back[s][0]
        if replicated:
            dK[ks[s]] += back[s][1]
            dV[ks[s]] += back[s][2]
        else:
            dK[ks[s]], dV[ks[s]] = back[s][1], back[s][2]
    agree_finite("ulysses_backward", c, {"dQ": dQ, "dK": dK, "dV": dV})
    return x.back(dQ), x.back(dK), x.back(dV)


# ---- the 2-D grid ---------------------------------------------------------------------------


def _grid(x, c: CountingComm):
    """The rank's grid row and column communicators and the global rows of its Q block (its
    grid row's shards, in column order) and K/V block (its column's shards, in row order)."""
    R, C = x.grid
    r, col = divmod(c.rank, C)
    row_comm = c.split(r, col)  # ranks of grid row r, ordered by their column
    col_comm = c.split(col, r)  # ranks of grid column c, ordered by their row
    qrows = np.concatenate([x.rows[r * C + j] for j in range(C)])
    krows = np.concatenate([x.rows[i * C + col] for i in range(R)])
    return row_comm, col_comm, qrows, krows


def _cat(gathered, index: int) -> np.ndarray:
    return np.concatenate([arrays[index] for arrays in gathered], axis=1)


def _pieces(x, arrays, count: int):
    """Each array (heads, count b, ...) cut into ``count`` row blocks of b."""
    b = x.b
    return [[(k, a[:, i * b : (i + 1) * b]) for k, a in arrays] for i in range(count)]


def _add(acc, more):
    return [a + m for a, m in zip(acc, more, strict=True)]


def grid_forward(
    comm, Q, K, V, *, layout="contiguous", scale=None, is_causal=False, enable_gqa=False,
    grid=None,
):  # fmt: skip
    """The 2-D grid's forward pass on this rank's shard (module docstring).

    Arguments and returns as :func:`ring_forward`, and ``grid`` = (R, C) with R C = P
    (default: (√P, √P), refused when P is not a square); rank p = r C + c.

    Every rank sends and receives b [(C − 1) H d + (R − 1) H_kv (d + d_v) + (C − 1) H (d_v + 1)]
    words in 2 (C − 1) + (R − 1) messages. Raises AttnInputError on every rank if any rank's
    arguments are invalid or differ.
    """
    x, c = agree(
        "grid_forward", comm, Q, K, V, None,
        layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa, grid=grid,
    )  # fmt: skip
    R, C = x.grid
    row_comm, col_comm, qrows, krows = _grid(x, c)
    try:
        Qb = _cat(row_comm.allgather([("Q", x.Q)]), 0)
        kv = col_comm.allgather([("K", x.K), ("V", x.V)])
        Kb, Vb = _cat(kv, 0), _cat(kv, 1)
        keep = x.keep(qrows, krows)
        Op, lsep = _block_forward(Qb, Kb, Vb, x.scale, keep)
        c.add_work(_work(keep, Qb.shape[0], C * x.b, R * x.b))
        O, lse = row_comm.reduce_scatter(
            _pieces(x, [("O", Op), ("lse", lsep)], C), lambda a, m: list(_merge(*a, *m))
        )
    finally:
        row_comm.free()
        col_comm.free()
    agree_finite("grid_forward", c, {"O": O, "lse": lse})
    return x.back(O), x.back(lse)


def grid_backward(
    comm, Q, K, V, O, dO, lse, *, layout="contiguous", scale=None, is_causal=False,
    enable_gqa=False, grid=None,
):  # fmt: skip
    """The 2-D grid's backward pass on this rank's shard (module docstring).

    Arguments and returns as :func:`ring_backward`, ``grid`` as :func:`grid_forward`. Q, dO,
    lse and D (computed locally) are all-gathered along the row, K and V along the column;
    dQ is reduce-scattered along the row, dK and dV along the column (sums in rank order).
    Every rank sends and receives b [(C − 1) H (2d + d_v + 2) + 2 (R − 1) H_kv (d + d_v)]
    words in 2 (C − 1) + 2 (R − 1) messages. Raises AttnInputError on every rank if any
    rank's arguments are invalid or differ.
    """
    x, c = agree(
        "grid_backward", comm, Q, K, V, (O, dO, lse),
        layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa, grid=grid,
    )  # fmt: skip
    R, C = x.grid
    O, dO, lse = x.outputs
    D = _row_deltas(O, dO)
    row_comm, col_comm, qrows, krows = _grid(x, c)
    try:
        rowg = row_comm.allgather([("Q", x.Q), ("dO", dO), ("lse", lse), ("D", D)])
        Qb, dOb, lseb, Db = (_cat(rowg, i) for i in range(4))
        kv = col_comm.allgather([("K", x.K), ("V", x.V)])
        Kb, Vb = _cat(kv, 0), _cat(kv, 1)
        keep = x.keep(qrows, krows)
        dQp, dKp, dVp = _block_backward(Qb, Kb, Vb, dOb, lseb, Db, x.scale, keep)
        c.add_work(_work(keep, Qb.shape[0], C * x.b, R * x.b))
        (dQ,) = row_comm.reduce_scatter(_pieces(x, [("dQ", dQp)], C), _add)
        dK, dV = col_comm.reduce_scatter(_pieces(x, [("dK", dKp), ("dV", dVp)], R), _add)
    finally:
        row_comm.free()
        col_comm.free()
    agree_finite("grid_backward", c, {"dQ": dQ, "dK": dK, "dV": dV})
    return x.back(dQ), x.back(dK), x.back(dV)
