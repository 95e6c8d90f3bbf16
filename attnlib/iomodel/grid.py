"""Attention on an R × C grid of devices: each device evaluates one block of the score matrix,
the query rows of its grid row against the key rows of its grid column (the 2-D
decomposition of matrix multiplication, applied to S = Q Kᵀ and O = softmax(S) V).

Device p = r C + c holds its shard of the rows (:func:`~.shards.shard_rows`) in every head. The
query block of grid row r is the rows of shards r C + c', c' = 0 .. C−1 (in that order); the
key/value block of grid column c is the rows of shards r' C + c, r' = 0 .. R−1. The forward
pass all-gathers Q along the grid row and K, V along the grid column, evaluates its block's
partial (O, lse) with :func:`attnlib.blockwise.block_forward`, and reduce-scatters the
partials along the row, merging them with the online softmax in column order. Per device, with
b = n / P::

    forward:  sent = received = b [(C−1) H d + (R−1) H_kv (d + d_v) + (C−1) H (d_v + 1)]
              messages = 2 (C−1) + (R−1)
    backward: sent = received = b [(C−1) H (2d + d_v + 2) + 2 (R−1) H_kv (d + d_v)]
              messages = 2 (C−1) + 2 (R−1)

The backward pass all-gathers Q, dO, lse and D = rowsum(dO ∘ O) (computed locally) along the
row and K, V along the column, evaluates its block's shares of dQ, dK, dV, and reduce-scatters
dQ along the row and dK, dV along the column (summed in grid order). Every device evaluates
(C b)(R b) = b n entries in each head; causally, the kept pairs of its two row sets
(:func:`~.shards.kept_pairs`). A collective among k devices is done directly, k − 1 messages.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._checks import AttnInputError, check_int
from ..blockwise import block_backward, block_forward, causal_keep, merge, row_deltas
from .devices import DeviceCount, DeviceMachine
from .shards import check_pass, check_sizes, kept_pairs, shard_rows

__all__ = [
    "grid_shape",
    "grid_forward",
    "grid_backward",
    "grid_forward_count",
    "grid_backward_count",
]


def grid_shape(grid, P: int) -> tuple[int, int]:
    """The grid (R, C) of P devices, device p = r C + c: ``grid`` if given (R C = P, else
    refused naming ``grid``), else the square (√P, √P) (P not a square: refused naming ``P``).

    Examples
    --------
    >>> grid_shape(None, 4), grid_shape((2, 3), 6)
    ((2, 2), (2, 3))
    """
    P = check_int("P", P)
    if grid is None:
        R = math.isqrt(P)
        if R * R != P:
            raise AttnInputError(
                f"P = {P} devices is not a square: pass grid=(R, C) with R * C = P "
                "(e.g. grid=(1, P)), or use P = 1, 4, 9, 16, ..."
            )
        return R, R
    if (
        not isinstance(grid, tuple | list)
        or len(grid) != 2
        or not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in grid)
        or min(grid) < 1
    ):
        raise AttnInputError(f"grid must be a pair (R, C) of ints >= 1, got {grid!r:.60}")
    R, C = int(grid[0]), int(grid[1])
    if R * C != P:
        raise AttnInputError(
            f"grid = ({R}, {C}) must have R * C = P = {P} devices, got R * C = {R * C}"
        )
    return R, C


def _blocks(s, R: int, C: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per device, the global rows of its query block and of its key/value block."""
    rows = shard_rows(s.n, s.P, s.layout)
    q = [np.concatenate([rows[(p // C) * C + c] for c in range(C)]) for p in range(s.P)]
    kv = [np.concatenate([rows[r * C + p % C] for r in range(R)]) for p in range(s.P)]
    return q, kv


def _steps(s) -> int:
    """Block steps on the machine (blocks evaluated, over all devices)."""
    return s.P


def _scores(s) -> int:
    """Score entries of the largest block one device evaluates at once (all its heads)."""
    return s.H * s.b * s.n


def _full(P: int, value: int) -> np.ndarray:
    return np.full(P, value, dtype=np.int64)


def _work(s, R: int, C: int) -> np.ndarray:
    """Each device's kept score entries, summed over the H query heads: b n, or causally the
    kept pairs of its query and key/value blocks, counted exactly from the two index sets."""
    if not s.is_causal:
        return _full(s.P, s.H * s.b * s.n)
    q, kv = _blocks(s, R, C)
    return np.array([s.H * kept_pairs(q[p], kv[p]) for p in range(s.P)], dtype=np.int64)


def _count(s, R: int, C: int, row: dict, col: dict, messages: int) -> DeviceCount:
    """Words per kind: ``row`` kinds travel to the C − 1 row peers, ``col`` kinds to the R − 1
    column peers, each b rows of the given words per row."""
    kinds = {k: _full(s.P, (C - 1) * s.b * w) for k, w in row.items()}
    for k, w in col.items():
        kinds[k] = kinds.get(k, 0) + _full(s.P, (R - 1) * s.b * w)
    words = sum(int(v[0]) for v in kinds.values())
    return DeviceCount(
        _full(s.P, words), _full(s.P, words), _full(s.P, messages), _work(s, R, C), kinds
    )


def grid_forward_count(
    n: int, d: int, *, P: int, H: int = 1, H_kv=None, d_v=None, is_causal=False,
    layout="contiguous", grid=None,
) -> DeviceCount:  # fmt: skip
    """The closed form of :func:`grid_forward`'s count (module docstring).

    Parameters
    ----------
    n, d, P, H, H_kv, d_v, is_causal, layout : as in :func:`~.ring.ring_forward_count`
    grid : (R, C) with R C = P, or None for √P × √P (P a square)

    Raises AttnInputError for invalid arguments (naming ``P`` or ``grid``).

    Examples
    --------
    >>> c = grid_forward_count(8, 2, P=4)
    >>> c.sent.tolist(), c.messages.tolist(), c.work.tolist()
    ([18, 18, 18, 18], [3, 3, 3, 3], [16, 16, 16, 16])
    """
    s = check_sizes(n, d, P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout)
    R, C = grid_shape(grid, s.P)
    row = {"Q": s.H * s.d, "O": s.H * s.d_v, "lse": s.H}
    col = {"K": s.H_kv * s.d, "V": s.H_kv * s.d_v}
    return _count(s, R, C, row, col, 2 * (C - 1) + (R - 1))


def grid_backward_count(
    n: int, d: int, *, P: int, H: int = 1, H_kv=None, d_v=None, is_causal=False,
    layout="contiguous", grid=None,
) -> DeviceCount:  # fmt: skip
    """The closed form of :func:`grid_backward`'s count (module docstring).

    Arguments and errors as :func:`grid_forward_count`.

    Examples
    --------
    >>> grid_backward_count(8, 2, P=4).sent.tolist()
    [32, 32, 32, 32]
    """
    s = check_sizes(n, d, P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout)
    R, C = grid_shape(grid, s.P)
    row = {"Q": s.H * s.d, "dO": s.H * s.d_v, "lse": s.H, "D": s.H, "dQ": s.H * s.d}
    col = {"K": s.H_kv * s.d, "V": s.H_kv * s.d_v, "dK": s.H_kv * s.d, "dV": s.H_kv * s.d_v}
    return _count(s, R, C, row, col, 2 * (C - 1) + 2 * (R - 1))


def _peers(p: int, R: int, C: int) -> tuple[list[int], list[int]]:
    """Device p's grid row (in column order) and grid column (in row order), itself included."""
    r, c = divmod(p, C)
    return [r * C + k for k in range(C)], [k * C + c for k in range(R)]


def _all_gather(m: DeviceMachine, R: int, C: int, row: list[str], col: list[str]) -> None:
    """One round: device p sends its blocks ``row`` to its row peers and ``col`` to its column
    peers; a peer keeps them as ``name@p`` (its own as ``name@p`` too, a local copy)."""
    messages = []
    for p in range(m.P):
        rows, cols = _peers(p, R, C)
        for names, peers in ((row, rows), (col, cols)):
            for name in names:
                m.put(p, f"{name}@{p}", m.get(p, name), name)
            messages += [
                (p, q, [f"{x}@{p}" for x in names], [f"{x}@{p}" for x in names])
                for q in peers
                if q != p and names
            ]
    m.exchange(messages)


def _stack(m: DeviceMachine, p: int, name: str, sources: list[int]) -> np.ndarray:
    """Device p's blocks ``name@q`` of ``sources``, rows concatenated in that order."""
    out = np.concatenate([m.get(p, f"{name}@{q}") for q in sources], axis=1)
    for q in sources:
        m.drop(p, f"{name}@{q}")
    return out


def _scatter(m: DeviceMachine, R: int, C: int, parts: dict, b: int) -> None:
    """One round of reduce-scatter messages: device p holds ``name`` over its row block (for
    ``parts[name] == "row"``) or its column block (``"col"``); it sends each peer the b rows of
    the peer's shard, kept there as ``name<p``."""
    messages = []
    for p in range(m.P):
        rows, cols = _peers(p, R, C)
        for axis, peers in (("row", rows), ("col", cols)):
            names = [x for x, a in parts.items() if a == axis]
            for k, q in enumerate(peers):
                for name in names:
                    piece = m.get(p, name)[:, k * b : (k + 1) * b]
                    m.put(p, f"{name}>{q}" if q != p else f"{name}<{p}", piece, name)
            messages += [
                (p, q, [f"{x}>{q}" for x in names], [f"{x}<{p}" for x in names])
                for q in peers
                if q != p and names
            ]
        for name in parts:
            m.drop(p, name)
    m.exchange(messages)
    for src, _dst, names, _ in messages:
        for name in names:
            m.drop(src, name)


def grid_forward(
    Q, K, V, *, P: int, layout="contiguous", scale=None, is_causal=False, enable_gqa=False,
    grid=None,
):  # fmt: skip
    """The 2-D grid's forward pass, run on a :class:`~.devices.DeviceMachine`.

    Parameters
    ----------
    Q, K, V, P, layout, scale, is_causal, enable_gqa : as in :func:`~.ring.ring_forward`;
        ``layout`` splits the rows into the shards that make up the row and column blocks
    grid : (R, C) with R C = P, or None for √P × √P (P a square)

    Returns
    -------
    O, lse, count : as in :func:`~.ring.ring_forward`; count equals
    :func:`grid_forward_count`'s.

    Raises AttnInputError for invalid arguments (naming ``P`` or ``grid`` for a bad grid).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = (rng.standard_normal((8, 4)) for _ in range(3))
    >>> O, lse, count = grid_forward(Q, K, V, P=4, is_causal=True)
    >>> count == grid_forward_count(8, 4, P=4, is_causal=True)
    True
    """
    ps = check_pass(
        Q, K, V, P=P, layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
        who="grid_forward", steps=_steps, scores=_scores,
    )  # fmt: skip
    s = ps.sizes
    R, C = grid_shape(grid, s.P)
    q_rows, kv_rows = _blocks(s, R, C)
    m = DeviceMachine(s.P)
    ps.place(m, {"Q": (ps.Q, "Q"), "K": (ps.K, "K"), "V": (ps.V, "V")})
    _all_gather(m, R, C, ["Q"], ["K", "V"])
    for p in range(s.P):
        rows, cols = _peers(p, R, C)
        Qb, Kb, Vb = _stack(m, p, "Q", rows), _stack(m, p, "K", cols), _stack(m, p, "V", cols)
        keep = causal_keep(q_rows[p], kv_rows[p]) if s.is_causal else None
        O_b, lse_b = block_forward(Qb, Kb, Vb, scale=ps.scale, keep=keep)
        m.compute(p, s.H * (Qb.shape[1] * Kb.shape[1] if keep is None else int(keep.sum())))
        m.put(p, "O", O_b, "O")
        m.put(p, "lse", lse_b, "lse")
    _scatter(m, R, C, {"O": "row", "lse": "row"}, s.b)
    for p in range(s.P):
        rows, _ = _peers(p, R, C)
        O_p, lse_p = m.get(p, f"O<{rows[0]}"), m.get(p, f"lse<{rows[0]}")
        for q in rows[1:]:  # the online softmax, in column order
            O_p, lse_p = merge(O_p, lse_p, m.get(p, f"O<{q}"), m.get(p, f"lse<{q}"))
        m.put(p, "O", O_p, "O")
        m.put(p, "lse", lse_p, "lse")
    O = ps.gather(m, "O", (s.H, s.n, s.d_v))
    lse = ps.gather(m, "lse", (s.H, s.n))
    return ps.back(O), ps.back(lse), m.count()


def grid_backward(
    Q, K, V, O, dO, lse, *, P: int, layout="contiguous", scale=None, is_causal=False,
    enable_gqa=False, grid=None,
):  # fmt: skip
    """The 2-D grid's backward pass, run on a :class:`~.devices.DeviceMachine`.

    Parameters
    ----------
    Q, K, V, O, dO, lse, P, layout, scale, is_causal, enable_gqa : as in
        :func:`~.ring.ring_backward`; grid : as in :func:`grid_forward`

    Returns
    -------
    dQ, dK, dV, count : as in :func:`~.ring.ring_backward`; count equals
    :func:`grid_backward_count`'s.

    Raises AttnInputError for invalid arguments (naming ``P`` or ``grid`` for a bad grid).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V, dO = (rng.standard_normal((8, 4)) for _ in range(4))
    >>> O, lse, _ = grid_forward(Q, K, V, P=2, grid=(1, 2))
    >>> grid_backward(Q, K, V, O, dO, lse, P=2, grid=(1, 2))[3] == grid_backward_count(
    ...     8, 4, P=2, grid=(1, 2))
    True
    """
    ps = check_pass(
        Q, K, V, P=P, layout=layout, scale=scale, is_causal=is_causal, enable_gqa=enable_gqa,
        outputs=(O, dO, lse), who="grid_backward", steps=_steps, scores=_scores,
    )  # fmt: skip
    s = ps.sizes
    R, C = grid_shape(grid, s.P)
    q_rows, kv_rows = _blocks(s, R, C)
    O, dO, lse = ps.outputs
    m = DeviceMachine(s.P)
    ps.place(m, {
        "Q": (ps.Q, "Q"), "K": (ps.K, "K"), "V": (ps.V, "V"),
        "O": (O, "O"), "dO": (dO, "dO"), "lse": (lse, "lse"),
    })  # fmt: skip
    for p in range(s.P):  # D = rowsum(dO ∘ O): local, so O never travels
        m.put(p, "D", row_deltas(m.get(p, "O"), m.get(p, "dO")), "D")
    _all_gather(m, R, C, ["Q", "dO", "lse", "D"], ["K", "V"])
    for p in range(s.P):
        rows, cols = _peers(p, R, C)
        Qb, dOb, lse_b, Db = (_stack(m, p, x, rows) for x in ("Q", "dO", "lse", "D"))
        Kb, Vb = _stack(m, p, "K", cols), _stack(m, p, "V", cols)
        keep = causal_keep(q_rows[p], kv_rows[p]) if s.is_causal else None
        dQ_b, dK_b, dV_b = block_backward(Qb, Kb, Vb, dOb, lse_b, Db, scale=ps.scale, keep=keep)
        m.compute(p, s.H * (Qb.shape[1] * Kb.shape[1] if keep is None else int(keep.sum())))
        m.put(p, "dQ", dQ_b, "dQ")
        m.put(p, "dK", dK_b, "dK")
        m.put(p, "dV", dV_b, "dV")
    _scatter(m, R, C, {"dQ": "row", "dK": "col", "dV": "col"}, s.b)
    for p in range(s.P):
        rows, cols = _peers(p, R, C)
        for name, peers in (("dQ", rows), ("dK", cols), ("dV", cols)):
            total = m.get(p, f"{name}<{peers[0]}")
            for q in peers[1:]:  # summed in grid order
                total = total + m.get(p, f"{name}<{q}")
            m.put(p, name, total, name)
    dQ = ps.gather(m, "dQ", (s.H, s.n, s.d))
    dK = ps.gather(m, "dK", (s.H_kv, s.n, s.d))
    dV = ps.gather(m, "dV", (s.H_kv, s.n, s.d_v))
    return ps.back(dQ), ps.back(dK), ps.back(dV), m.count()
