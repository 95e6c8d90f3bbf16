"""Every rank's arguments to a sharded schedule, checked on the rank and agreed on by all.

An SPMD schedule (:mod:`.schedules`) runs on P ranks that each pass their own shard and
keywords. A rank that refused its arguments alone would leave the others waiting for its
messages, and ranks whose arguments differ (a shape, a dtype, ``is_causal``) would exchange
blocks that do not fit. So :func:`agree` checks this rank's arguments (attnlib's usual
checks), then exchanges a signature with every rank on the communicator's control channel
(:meth:`.comm.CountingComm.control_allgather`, counted apart from the schedule): shapes,
dtypes, the resolved scale, the flags, the layout, the grid and the schedule's name. If any
rank refused or any two signatures differ, every rank raises the same
:class:`attnlib.AttnInputError`, naming the argument and the ranks, before any data moves.

The rules of Ulysses' head split (Jacobs et al. 2023) and of the 2-D grid are the model's,
:func:`attnlib.iomodel.ulysses_heads` and :func:`attnlib.iomodel.grid_shape`; the launcher
(:mod:`.launch`) applies them too.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import (
    AttnInputError,
    as_dict,
    as_float_array,
    check_bool,
    check_choice,
    check_head_backward,
    check_head_qkv,
    check_scale,
    float_dtype,
    is_batched,
)
from ..blockwise import causal_keep
from ..iomodel.grid import grid_shape
from ..iomodel.shards import LAYOUTS, check_shards, shard_rows
from ..iomodel.ulysses import ulysses_heads
from .comm import CountingComm

__all__ = ["agree", "agree_finite", "SCHEDULE_NAMES"]

#: The SPMD functions :func:`agree` checks the arguments of.
SCHEDULE_NAMES = tuple(
    f"{s}_{d}" for s in ("ring", "ulysses", "grid") for d in ("forward", "backward")
)


class _Shard(NamedTuple):
    """One rank's checked arguments, heads first in one dtype: what :func:`agree` returns."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    outputs: tuple  # (O, dO, lse) for a backward pass
    scale: float
    is_causal: bool
    layout: str
    rows: list  # every rank's global rows, shard_rows(n, P, layout)
    grid: tuple | None
    one_head: bool

    @property
    def b(self) -> int:
        return self.Q.shape[1]

    def back(self, x: np.ndarray) -> np.ndarray:
        """An output (heads, ...) in the caller's layout (no head axis for 2-D input)."""
        return x[0] if self.one_head else x

    def keep(self, rows, cols):
        """The causal keep-mask of a block in global indices, or None (keep all)."""
        return causal_keep(rows, cols) if self.is_causal else None


def _check_local(name, P, Q, K, V, outputs, layout, scale, is_causal, enable_gqa, grid):
    """This rank's own arguments: returns (_Shard, signature). The signature is what must be
    the same on every rank, argument by argument."""
    one_head = not is_batched(Q)
    if outputs is not None and not (isinstance(outputs, tuple | list) and len(outputs) == 3):
        raise AttnInputError("outputs must be None or the backward's (O, dO, lse)")
    if outputs is None:
        Q, K, V, _ = check_head_qkv(Q, K, V, enable_gqa)
        outputs = ()
    else:
        Q, K, V, *outputs, _ = check_head_backward(Q, K, V, *outputs, enable_gqa)
    (H, b, d), (H_kv, m, _) = Q.shape, V.shape
    if m != b:
        raise AttnInputError(f"K must have the b = {b} rows of this device's shard of Q, got {m}")
    layout = check_choice("layout", layout, LAYOUTS)
    is_causal = check_bool("is_causal", is_causal)
    check_bool("enable_gqa", enable_gqa)
    tau = check_scale(scale, d)
    if name.startswith("grid"):  # compared resolved: grid=(2, 2) and [2, 2] agree
        grid = grid_shape(grid, P)
    names = ("Q", "K", "V", *("O", "dO", "lse")[: len(outputs)])
    arrays = (Q, K, V, *outputs)
    signature = {f"{n}'s shape": a.shape for n, a in zip(names, arrays, strict=True)}
    signature |= {f"{n}'s dtype": str(a.dtype) for n, a in zip(names, arrays, strict=True)}
    signature |= {"scale": tau, "is_causal": is_causal, "enable_gqa": bool(enable_gqa)}
    signature |= {"layout": layout, "grid": grid, "the schedule": name}
    n = b * P
    check_shards(n, P, layout)
    if name.startswith("ulysses"):
        ulysses_heads(H, H_kv, P)
    dtype = float_dtype(*arrays)
    Q, K, V, *outputs = (a.astype(dtype, copy=False) for a in arrays)
    rows = shard_rows(n, P, layout)
    shard = _Shard(Q, K, V, tuple(outputs), tau, is_causal, layout, rows, grid, one_head)
    return shard, signature


def _ranks(ranks) -> str:
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


def _verdict(gathered) -> str | None:
    """The one message every rank raises, from every rank's (error, signature); None if all
    ranks accepted the same arguments."""
    errors: dict[str, list[int]] = {}
    for rank, (error, _) in enumerate(gathered):
        if error is not None:
            errors.setdefault(error, []).append(rank)
    if errors:
        return "; ".join(f"{msg} (on {_ranks(r)})" for msg, r in errors.items())
    signatures = [s for _, s in gathered]
    differ = []
    for key in signatures[0]:
        values: dict[str, list[int]] = {}
        for rank, sig in enumerate(signatures):
            values.setdefault(repr(sig.get(key)), []).append(rank)
        if len(values) > 1:
            seen = " and ".join(f"{v} on {_ranks(r)}" for v, r in values.items())
            differ.append(f"{key} differs across ranks: {seen}")
    if differ:
        return (
            "; ".join(differ) + ". Every rank must call the same schedule with its b = n / P "
            "rows of the same arrays and the same keywords"
        )
    return None


def agree(name, comm, Q, K, V, outputs=None, *, layout, scale, is_causal, enable_gqa, grid=None):
    """Check this rank's arguments to the schedule ``name`` (one of :data:`SCHEDULE_NAMES`)
    and agree on them with every rank of ``comm`` (module docstring).

    Parameters
    ----------
    name : the schedule, e.g. ``"ring_forward"``
    comm : an mpi4py communicator, or a :class:`.comm.CountingComm`
    Q, K, V : this rank's shard; outputs : None, or (O, dO, lse) of a backward pass
    layout, scale, is_causal, enable_gqa, grid : the schedule's keywords

    Returns
    -------
    (shard, CountingComm): the shard's checked arguments (a record with Q, K, V, outputs,
    scale, is_causal, layout, rows, grid, one_head), heads first in one dtype, and the
    communicator (``comm`` wrapped if it was not counting).

    Raises AttnInputError on every rank, with the same message, if any rank's arguments are
    invalid or differ from another rank's.
    """
    if not isinstance(comm, CountingComm):
        comm = CountingComm(comm)
    try:
        name = check_choice("name", name, SCHEDULE_NAMES)
        shard, signature = _check_local(
            name, comm.size, Q, K, V, outputs, layout, scale, is_causal, enable_gqa, grid
        )
        mine = (None, signature)
    except AttnInputError as exc:
        shard, mine = None, (str(exc), None)
    # every rank reaches this exchange, refused or not, so that no rank waits for another
    message = _verdict(comm.control_allgather(mine))
    if message is not None:
        raise AttnInputError(message)
    return shard, comm


def agree_finite(name: str, comm, outputs: dict) -> None:
    """After the pass, refuse on every rank what no rank could see before it: a kept logit
    τ q·k of one rank's query rows and another rank's key rows that overflows the dtype (or a
    gradient that does not fit it) leaves some rank with outputs that are not finite.

    Parameters
    ----------
    name : the schedule, e.g. ``"ring_forward"``; comm : the pass's :class:`.comm.CountingComm`
        (an mpi4py communicator is wrapped in one)
    outputs : this rank's outputs by name (``"lse"`` may hold -inf: a row that keeps nothing)

    Raises AttnInputError on every rank, with the same message, if any rank's outputs hold a
    NaN or an infinity; the exchange is on the control channel, so the pass's counts are not
    touched.
    """
    if not isinstance(comm, CountingComm):
        comm = CountingComm(comm)
    name = check_choice("name", name, SCHEDULE_NAMES)
    outputs = as_dict("outputs", outputs, of="outputs (name -> array)", max_len=3)
    bad = []
    for key, a in outputs.items():
        a = as_float_array(key, a, ndim=None, allow_nonfinite=True)
        ok = np.isfinite(a) | np.isneginf(a) if key == "lse" else np.isfinite(a)
        if not np.all(ok):
            bad.append(key)
    gathered = comm.control_allgather(bad)
    if any(gathered):
        where = "; ".join(
            f"{', '.join(keys)} on rank {rank}" for rank, keys in enumerate(gathered) if keys
        )
        raise AttnInputError(
            f"{name}: outputs not finite ({where}): a kept logit scale * q.k between one "
            "rank's rows of Q and another rank's rows of K overflows the dtype, or a gradient "
            "does not fit it. A rank checks only its own rows before the pass; "
            "attnlib.distributed.run, which holds all of them, refuses such Q and K before it "
            "starts"
        )
