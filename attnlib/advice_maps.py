"""The recommendation of :func:`attnlib.advice.advise` over a grid, and where it changes.

:func:`decision_map` asks :func:`~attnlib.advice.advise` at every point of an (n, B) grid, the
maps of Chapter 9; :func:`method_boundaries` finds the n where the recommendation changes at a
fixed B, by bisection down to consecutive integers. Both take the machine as
:func:`attnlib.machines.machine` returns it.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import AttnInputError, check_int, check_memory, check_positive_real
from .advice import METHODS, advise

__all__ = ["decision_map", "method_boundaries"]


def _length(name: str, values) -> int:
    """The length of a sequence argument (0 if it has none: :func:`_sequence` refuses it)."""
    try:
        return len(values)
    except TypeError:
        return 0


def _sequence(name: str, values) -> list:
    """A non-empty 1-D sequence (list, tuple or array) as a list of its items."""
    if isinstance(values, (str, bytes, dict, set)) or not hasattr(values, "__len__"):
        raise AttnInputError(f"{name} must be a non-empty sequence of numbers, got {values!r:.60}")
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise AttnInputError(f"{name} must be 1-dimensional, got shape {values.shape}")
    values = list(values)
    if not values:
        raise AttnInputError(f"{name} must be a non-empty sequence of numbers, got []")
    return values


#: method_boundaries' largest n: the grid is built in floats and held in int64.
_MAX_N = 2**62


def _check_machine(machine: dict) -> None:
    """The keywords passed on to :func:`advise` as the machine: only its three keywords."""
    unknown = sorted(set(machine) - {"flops_per_word", "slow_memory", "dtype"})
    if unknown:
        raise AttnInputError(
            f"{unknown[0]} is not a machine keyword: pass flops_per_word, slow_memory and dtype "
            "(and M as its own argument), as attnlib.machines.machine returns them"
        )


def decision_map(ns, Bs, *, d, eps, M, **machine) -> np.ndarray:
    """The recommended method over a grid: an integer array (len(Bs), len(ns)) of indices
    into :data:`METHODS` (row i is B = Bs[i], column j is n = ns[j]). ``machine`` passes
    ``flops_per_word``, ``slow_memory`` and ``dtype`` to :func:`advise`.

    Raises :class:`attnlib.AttnInputError` if ``ns`` is not a non-empty sequence of positive
    integers, ``Bs`` not one of positive numbers, ``machine`` holds a keyword other than
    ``flops_per_word``, ``slow_memory`` and ``dtype``, or :func:`advise` refuses a point.

    Examples
    --------
    >>> decision_map([64, 2**20], [0.05, 2.0], d=32, eps=1e-3, M=2**16).tolist()
    [[1, 3], [1, 1]]
    """
    # the int64 grid, and a Python list of each axis (a pointer and a number per point)
    check_memory(
        "decision_map's grid",
        8 * _length("ns", ns) * _length("Bs", Bs) + 40 * (_length("ns", ns) + _length("Bs", Bs)),
        culprits="ns or Bs",
    )
    ns = [check_int(f"ns[{j}]", v) for j, v in enumerate(_sequence("ns", ns))]
    Bs = [check_positive_real(f"Bs[{i}]", v) for i, v in enumerate(_sequence("Bs", Bs))]
    _check_machine(machine)
    out = np.empty((len(Bs), len(ns)), dtype=np.int64)
    for i, B in enumerate(Bs):
        for j, n in enumerate(ns):
            out[i, j] = METHODS.index(advise(n, d, float(B), eps, M, **machine).method)
    return out


def method_boundaries(d, B, eps, M, *, n_lo: int = 16, n_hi: int = 2**26, **machine):
    """Where the recommendation changes along n at fixed (d, B, eps, M).

    Evaluates n on a geometric grid (8 points per octave) from ``n_lo`` to ``n_hi`` and
    bisects every change down to consecutive integers. Returns a list of
    ``(n, before, after)``: ``after`` is recommended at n and ``before`` at n − 1. (A
    change and its reversal inside one grid step would be missed; the grid is fine enough
    for the cost model's smooth formulas.)

    Raises :class:`attnlib.AttnInputError` if ``n_lo`` or ``n_hi`` is not an integer from 1 to
    2⁶², ``n_hi`` ≤ ``n_lo``, ``machine`` holds a keyword other than ``flops_per_word``,
    ``slow_memory`` and ``dtype``, or :func:`advise` refuses the arguments.
    """
    # n on a float geometric grid: both ends must be floats, and sequence lengths fit in int64
    n_lo = check_int("n_lo", n_lo, maximum=_MAX_N)
    n_hi = check_int("n_hi", n_hi, maximum=_MAX_N)
    if n_hi <= n_lo:
        raise AttnInputError(f"n_hi must exceed n_lo={n_lo}, got {n_hi}")
    _check_machine(machine)

    def method(n):
        return advise(n, d, B, eps, M, **machine).method

    def split(lo, hi, m_lo, m_hi):
        if m_lo == m_hi:
            return []
        if hi - lo == 1:
            return [(hi, m_lo, m_hi)]
        mid = (lo + hi) // 2
        m_mid = method(mid)
        return split(lo, mid, m_lo, m_mid) + split(mid, hi, m_mid, m_hi)

    octaves = math.log2(n_hi / n_lo)
    grid = sorted({int(round(x)) for x in np.geomspace(n_lo, n_hi, int(8 * octaves) + 2)})
    methods = [method(n) for n in grid]
    out = []
    for k in range(len(grid) - 1):
        out += split(grid[k], grid[k + 1], methods[k], methods[k + 1])
    return out
