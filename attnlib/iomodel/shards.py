"""How a sequence's n rows are split among P devices, and the causal work each device then has.

Device p holds b = n / P rows of Q, K and V (and of every output) in every head. Which rows
decides how the causal work (the kept score entries j <= i) falls on the devices:

* ``"contiguous"``: device p holds rows [p b, (p+1) b): the last device has the most work;
* ``"striped"``: device p holds rows {p, p + P, p + 2P, ...} (Brandon et al. 2023, striped
  attention): the work differs by at most b between devices;
* ``"zigzag"``: the rows split into 2P chunks of c = n / (2P); device p holds chunks p and
  2P-1-p (the load-balanced layout of context-parallel training): the work is equal.

A ring schedule's device p evaluates its own query rows against every key row, so its causal
work is the number of pairs (i, j), i among its rows, j <= i (:func:`causal_work`, closed forms
below); a 2-D grid's device evaluates a block of query rows against a block of key rows
(:func:`kept_pairs`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .._checks import (
    AttnInputError,
    check_bool,
    check_choice,
    check_head_backward,
    check_head_qkv,
    check_index_array,
    check_int,
    check_memory,
    check_scale,
    float_dtype,
    is_batched,
)
from .tiling import check_machine_steps, check_run_logits

__all__ = [
    "LAYOUTS",
    "shard_rows",
    "causal_work",
    "kept_pairs",
    "check_shards",
    "check_sizes",
    "check_pass",
]

#: The layouts ``layout=`` accepts, the first the default.
LAYOUTS = ("contiguous", "striped", "zigzag")


def check_shards(n, P, layout) -> tuple[int, int, str]:
    """Validate a split of n rows among P devices: n, P ints >= 1, ``layout`` one of
    :data:`LAYOUTS`, P | n (2P | n for zigzag). Returns ``(n, P, layout)``."""
    n = check_int("n", n)
    P = check_int("P", P)
    layout = check_choice("layout", layout, LAYOUTS)
    if n % P:
        raise AttnInputError(
            f"P = {P} devices must divide the n = {n} rows (each holds n / P of them)"
        )
    if layout == "zigzag" and n % (2 * P):
        raise AttnInputError(
            f"the zigzag layout splits n = {n} rows into 2P = {2 * P} chunks: 2P must divide "
            "n; choose P or n accordingly, or use layout='striped'"
        )
    return n, P, layout


def shard_rows(n: int, P: int, layout: str = "contiguous") -> list[np.ndarray]:
    """The global rows each device holds: P sorted int64 arrays of b = n / P rows each.

    Parameters
    ----------
    n : rows (tokens); P : devices, P | n (2P | n for ``"zigzag"``)
    layout : one of :data:`LAYOUTS` (module docstring)

    Raises AttnInputError for invalid arguments (naming ``n``, ``P`` or ``layout``).

    Examples
    --------
    >>> [r.tolist() for r in shard_rows(8, 2, "zigzag")]
    [[0, 1, 6, 7], [2, 3, 4, 5]]
    >>> [r.tolist() for r in shard_rows(6, 3, "striped")]
    [[0, 3], [1, 4], [2, 5]]
    """
    n, P, layout = check_shards(n, P, layout)
    b = n // P
    if layout == "contiguous":
        return [np.arange(p * b, (p + 1) * b, dtype=np.int64) for p in range(P)]
    if layout == "striped":
        return [np.arange(p, n, P, dtype=np.int64) for p in range(P)]
    c = b // 2
    return [
        np.concatenate(
            [np.arange(p * c, (p + 1) * c), np.arange((2 * P - 1 - p) * c, (2 * P - p) * c)]
        ).astype(np.int64)
        for p in range(P)
    ]


def causal_work(n: int, P: int, layout: str = "contiguous", *, H: int = 1) -> np.ndarray:
    """The kept score entries (j <= i) of each device's query rows against all n key rows,
    summed over H query heads: a ring schedule's causal work per device, (P,) int64.

    With b = n / P and c = b / 2, device p evaluates H times

    * contiguous: p b² + b (b + 1) / 2;
    * striped: P b (b − 1) / 2 + (p + 1) b;
    * zigzag: (2P − 1) c² + c (c + 1), the same on every device.

    Raises AttnInputError for invalid arguments (as :func:`shard_rows`, and ``H``).

    Examples
    --------
    >>> causal_work(8, 2).tolist(), causal_work(8, 2, "zigzag").tolist()
    ([10, 26], [18, 18])
    """
    n, P, layout = check_shards(n, P, layout)
    H = check_int("H", H)
    b = n // P
    p = np.arange(P, dtype=np.int64)
    if layout == "contiguous":
        work = p * b * b + b * (b + 1) // 2
    elif layout == "striped":
        work = P * b * (b - 1) // 2 + (p + 1) * b
    else:
        c = b // 2
        work = np.full(P, (2 * P - 1) * c * c + c * (c + 1), dtype=np.int64)
    return H * work


def kept_pairs(rows, cols) -> int:
    """The causal pairs (i, j) with i in ``rows``, j in ``cols`` and j <= i, counted exactly
    from the two index sets (no score is formed): Σ_i #{j in cols : j <= i}, one binary search
    per row, O((|rows| + |cols|) log |cols|).

    rows, cols : 1-D integer arrays of global indices (any order; each index once).

    Examples
    --------
    >>> kept_pairs(np.array([0, 2]), np.array([1, 2]))
    2
    """
    rows = check_index_array("rows", rows)
    cols = np.sort(check_index_array("cols", cols))
    return int(np.searchsorted(cols, rows, side="right").sum())


# ---- the arguments every sharded schedule and its count check ------------------------------


class _Sizes(NamedTuple):
    """The sizes of a sharded pass, checked: b = n / P rows per device, g = H / H_kv."""

    n: int
    d: int
    d_v: int
    H: int
    H_kv: int
    P: int
    b: int
    g: int
    is_causal: bool
    layout: str


def check_sizes(n, d, *, P, H=1, H_kv=None, d_v=None, is_causal=False, layout="contiguous"):
    """Validate a count's sizes: n, d, d_v (default d), H, H_kv (default H) ints >= 1 with
    H_kv | H, ``is_causal`` a bool, and the split (:func:`check_shards`). Returns
    :class:`_Sizes`."""
    n, P, layout = check_shards(n, P, layout)
    d = check_int("d", d)
    d_v = d if d_v is None else check_int("d_v", d_v)
    H = check_int("H", H)
    H_kv = H if H_kv is None else check_int("H_kv", H_kv)
    if H % H_kv:
        raise AttnInputError(f"H = {H} query heads must be a multiple of H_kv = {H_kv}")
    return _Sizes(
        n, d, d_v, H, H_kv, P, n // P, H // H_kv, check_bool("is_causal", is_causal), layout
    )


class _Pass(NamedTuple):
    """A sharded pass's checked arguments, heads first in one float dtype."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    outputs: tuple  # (O, dO, lse) of a backward pass, else ()
    sizes: _Sizes
    scale: float
    rows: list  # shard_rows(n, P, layout)
    one_head: bool  # 2-D input: give 2-D outputs back

    def back(self, x: np.ndarray) -> np.ndarray:
        """An output (heads, ...) in the caller's layout (no head axis for 2-D input)."""
        return x[0] if self.one_head else x

    def place(self, machine, arrays: dict) -> None:
        """The initial layout on a :class:`~.devices.DeviceMachine`: device p loads rows
        ``rows[p]`` of every array (heads first), under ``name.format(p=p)``, as ``kind``.
        ``arrays`` maps name -> (array, kind)."""
        for p, r in enumerate(self.rows):
            for name, (arr, kind) in arrays.items():
                machine.load(p, name.format(p=p), arr[:, r], kind)

    def gather(self, machine, name: str, shape) -> np.ndarray:
        """Each device's block ``name`` (heads first, its rows ``rows[p]``) read back into
        one array of ``shape``, rows in global order: the outputs end in the input layout."""
        out = np.empty(shape, self.Q.dtype)
        for p, r in enumerate(self.rows):
            out[:, r] = machine.get(p, name.format(p=p))
        return out


def check_pass(
    Q, K, V, *, P, layout, scale, is_causal, enable_gqa, outputs=None, who: str,
    steps: Callable[[_Sizes], int], scores: Callable[[_Sizes], int],
) -> _Pass:  # fmt: skip
    """Validate a sharded schedule's arguments, as :func:`attnlib.attention_forward` (or
    ``attention_backward`` with ``outputs = (O, dO, lse)``) takes them for one sequence:
    Q (n, d) or (H, n, d), K (H_kv, n, d), V (H_kv, n, d_v) (batched 4-D input refused, naming
    Q), the same n rows of queries and keys (self-attention split among devices), and the
    split (:func:`check_shards`).

    Then refuses, before anything is copied, a run ``who`` whose logits τ QKᵀ overflow the
    dtype (as every schedule on a machine does), that would take more than
    :data:`~.tiling.MAX_MACHINE_STEPS` block steps (``steps(sizes)``), or whose working memory
    exceeds the limit: the devices' copies of the arrays (at most eight of each: the placed
    shards, the blocks in flight and gathered, the results) and the few score-sized
    temporaries of the largest block a device evaluates at once (``scores(sizes)`` entries)."""
    one_head = not is_batched(Q)
    if outputs is None:
        Q, K, V, _ = check_head_qkv(Q, K, V, enable_gqa)
        outputs = ()
    else:
        Q, K, V, *outputs, _ = check_head_backward(Q, K, V, *outputs, enable_gqa)
    (H, n, d), (H_kv, m, d_v) = Q.shape, V.shape
    if m != n:
        raise AttnInputError(
            f"K must have the n = {n} rows of Q (the sequence split among the devices), got {m}"
        )
    sizes = check_sizes(n, d, P=P, H=H, H_kv=H_kv, d_v=d_v, is_causal=is_causal, layout=layout)
    tau = check_scale(scale, d)
    dtype = float_dtype(Q, K, V, *outputs)
    check_machine_steps(steps(sizes), who, "fewer devices P")
    words = sum(a.size for a in (Q, K, V, *outputs))
    # a block's scores, their exponentials and (backward) dP and dS, with numpy's temporaries,
    # and its boolean causal mask
    nbytes = dtype.itemsize * (8 * words + 6 * scores(sizes)) + scores(sizes)
    check_memory(f"{who} on {P} devices", nbytes, culprits="n (the rows of Q, K and V)")
    g = H // H_kv
    for kv in range(H_kv):
        check_run_logits(Q[kv * g : (kv + 1) * g].reshape(-1, d), K[kv], tau, dtype)
    Q, K, V, *outputs = (a.astype(dtype, copy=False) for a in (Q, K, V, *outputs))
    return _Pass(Q, K, V, tuple(outputs), sizes, tau, shard_rows(n, P, layout), one_head)
