"""Which attention algorithm should a training step use? A documented cost model [ours].

:func:`advise` weighs four ways of computing one attention forward *and* backward pass
(n queries, n keys, head dimension d = d_v) on a two-level machine with M words of fast
memory:

================  ===========================================================================
``exact``         the standard implementation (FA1 Alg. 0 and App. B.2): S, P, dP and dS are
                  materialised in slow memory. I/O: ``io.standard_forward_count`` +
                  ``io.standard_backward_count`` (exact counts of our schedules).
``flash``         FlashAttention-2's forward and backward (FA2 Algs. 1–2): P is recomputed in
                  fast memory. I/O: ``io.flash_forward_count`` + ``io.flash_backward_count``.
``smallcache``    square tiling: SY24 Alg. 1 forward and our small-cache backward (LLS+24's
                  bound). I/O: ``io.smallcache_forward_count`` + ``io.smallcache_backward_count``.
``polynomial``    AS23's approximate attention and AS24's almost-linear gradient: exp replaced
                  by a degree-g polynomial with relative error ε on [−B², B²], attention
                  factored through rank r = C(g+d, d) (``pm.least_degree``, ``pm.feature_rank``).
================  ===========================================================================

**The cost model** (our own; none of the papers gives constants). A method's cost, in
flop-equivalents, is

    cost = flops + flops_per_word × io

where ``io`` is the number of words moved between slow and fast memory and
``flops_per_word`` is the machine's balance: how many arithmetic operations it performs in
the time it moves one word (≈ 10–40 for one CPU core and its DRAM, ≈ 50–100 for a GPU's
FP32 units and HBM, several hundred for tensor cores). Arithmetic counts (m = n, d_v = d,
multiply and add counted separately, softmax at a few operations per score):

* exact: forward QKᵀ and PV (4n²d) + softmax (5n²); backward dV, dP, dQ, dK (8n²d) + dS (2n²):
  **12n²d + 7n²**;
* flash and smallcache: the backward recomputes S and P (+2n²d + 2n²): **14n²d + 9n²**;
* polynomial (the memory-light form of :mod:`attnlib.polymethod.approx`): building U and V
  (2nr), the row sums (4nr), Õ and dV (8nrd), D̃∘(f̃K) and f̃ᵀ(D̃∘Q) (8nrd) and the two
  Hadamard products f̃∘(dO Vᵀ), each a sum of d rank-r passes (8nrd²): **8nrd² + 16nrd + 6nr**.

The polynomial method's I/O is modelled as its compulsory traffic (inputs and outputs,
10nd words) when its two factors fit in fast memory (2nr ≤ M), and otherwise as writing both
factors once and reading them once per pass (2d + 5 passes): 10nd + 2nr(2d + 6).

**Feasibility.** The standard method keeps three n×n matrices in slow memory and the
small-cache method two; the polynomial method keeps 3·2nr words (its factors and one work
array, as in ``pm.approx_plan``). A method whose slow memory exceeds ``slow_memory`` words,
whose schedule does not fit M, or whose polynomial does not exist in double precision
(``pm.least_degree`` refuses) is infeasible. The recommendation is the feasible method of
least cost; ties go to the simpler method, in the order exact, flash, smallcache, polynomial.

B follows AS24: the entries of Q and K are bounded by B with the logits scaled by 1/d, so
every logit lies in [−B², B²]. For a model with the usual scale 1/√d, fold the scale in:
B = d^{1/4} · max(‖Q‖∞, ‖K‖∞) (:func:`entry_bound`).

:func:`machine` gives a cited preset's machine keywords. :func:`attention_step` runs one forward
and backward pass of a head by the exact core or the polynomial method, the two a CPU can time.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from . import iomodel as io
from . import polymethod as pm
from ._checks import (
    AttnInputError,
    as_float_array,
    check_choice,
    check_cols,
    check_int,
    check_memory,
    check_open_unit,
    check_positive_real,
    check_scale,
    describe_int,
    max_abs,
)
from .exact import attention_backward, attention_forward
from .machines import BOOK_CPU_CORE, CpuCore, machine

__all__ = [
    "METHODS",
    "MethodCost",
    "Advice",
    "advise",
    "method_flops",
    "decision_map",
    "method_boundaries",
    "entry_bound",
    "attention_step",
    "CpuCore",
    "BOOK_CPU_CORE",
    "machine",
]

#: The four methods, in order of simplicity (ties are broken towards the front).
METHODS = ("exact", "flash", "smallcache", "polynomial")

#: Default machine balance: flops per word of slow-memory traffic.
DEFAULT_FLOPS_PER_WORD = 64.0
#: Default slow-memory capacity in words (2³³ words = 64 GiB of float64).
DEFAULT_SLOW_MEMORY = 2**33


@dataclass(frozen=True)
class MethodCost:
    """One method's numbers at one point: ``flops``, ``io`` (words), ``slow_words`` (extra
    slow memory it holds), ``cost`` = flops + flops_per_word·io (``inf`` if infeasible),
    ``feasible`` and a short ``note`` (why infeasible, or the degree and rank). A number the
    model cannot give is ``nan``: the I/O of a schedule that does not fit in M, and every
    number of a polynomial that does not exist (or whose rank or flops overflow)."""

    method: str
    flops: float
    io: float
    slow_words: float
    cost: float
    feasible: bool
    note: str


@dataclass(frozen=True)
class Advice:
    """The recommendation of :func:`advise` and the numbers behind it.

    ``method`` is one of :data:`METHODS`; ``costs`` holds a :class:`MethodCost` for every
    method (in :data:`METHODS` order); ``R = B²`` is the logit range; ``degree`` and ``rank``
    are the polynomial method's (``None`` if no polynomial exists); ``reason`` says in one
    sentence why ``method`` won.
    """

    method: str
    n: int
    d: int
    B: float
    eps: float
    M: int
    flops_per_word: float
    slow_memory: int
    R: float
    degree: int | None
    rank: int | None
    costs: tuple
    reason: str

    def cost_of(self, method: str) -> MethodCost:
        """The :class:`MethodCost` of ``method``.

        Raises :class:`attnlib.AttnInputError` if ``method`` is not one of :data:`METHODS`.
        """
        for c in self.costs:
            if c.method == method:
                return c
        raise AttnInputError(f"method must be one of {METHODS}, got {method!r}")

    @property
    def margin(self) -> float:
        """Cost of the runner-up over the winner's (inf if no other method is feasible)."""
        best = self.cost_of(self.method).cost
        others = [c.cost for c in self.costs if c.method != self.method and c.feasible]
        return min(others) / best if others else math.inf

    def table(self) -> str:
        """A plain-text table of the four methods' numbers, the winner marked with ``*``."""
        lines = [f"{'method':<12}{'flops':>11}{'I/O words':>11}{'cost':>11}  note"]

        def cell(x: float) -> str:
            return f"{x:11.3e}" if math.isfinite(x) else f"{'—':>11}"

        for c in self.costs:
            mark = "*" if c.method == self.method else " "
            cost = cell(c.cost) if c.feasible else f"{'—':>11}"
            lines.append(f"{mark}{c.method:<11}{cell(c.flops)}{cell(c.io)}{cost}  {c.note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return (
            f"advise(n={self.n}, d={self.d}, B={self.B:g}, eps={self.eps:g}, M={self.M}): "
            f"{self.method} — {self.reason}"
        )


def method_flops(method: str, n: int, d: int, rank: int | None = None) -> float:
    """Arithmetic of one forward + backward pass by the module docstring's formulas.

    ``rank`` (r = C(g+d, d)) is required for ``"polynomial"``.

    Raises :class:`attnlib.AttnInputError` if ``method`` is not one of :data:`METHODS`, n,
    d (or the rank) is not a positive integer, or the count overflows a float.

    Examples
    --------
    >>> method_flops("exact", 1024, 64), method_flops("polynomial", 1024, 4, rank=70)
    (812646400.0, 14192640.0)
    """
    n, d = check_int("n", n), check_int("d", d)
    check_choice("method", method, METHODS)
    r = check_int("rank", rank) if method == "polynomial" else None
    try:  # float arithmetic: inf on overflow, OverflowError for an int beyond the float range
        if method == "exact":
            flops = 12.0 * n * n * d + 7.0 * n * n
        elif method in ("flash", "smallcache"):
            flops = 14.0 * n * n * d + 9.0 * n * n
        else:
            flops = 8.0 * n * r * d * d + 16.0 * n * r * d + 6.0 * n * r
    except OverflowError:
        flops = math.inf
    if not math.isfinite(flops):
        sizes = f"n={describe_int(n)}, d={describe_int(d)}"
        sizes += "" if r is None else f", rank={describe_int(r)}"
        who = "n or d" if r is None else "n, d or rank"
        raise AttnInputError(
            f"the flop count of {method} at {sizes} overflows a float: {who} is too large"
        )
    return flops


def _words(count: int) -> str:
    """A word count for a note: ``2.00e+00`` style, or its order of magnitude for an int
    beyond the float range."""
    return f"{count:.2e}" if count < 1e308 else describe_int(count)


def _polynomial_io(n: int, d: int, r: int, M: int) -> float:
    compulsory = 10.0 * n * d
    if 2 * n * r <= M:
        return compulsory
    return compulsory + 2.0 * n * r * (2 * d + 6)


def _counted(method, n, d, M):
    """(io words, note) from the iomodel closed forms, or (None, why) if it does not fit."""
    try:
        if method == "exact":
            c = io.standard_forward_count(n, d, M) + io.standard_backward_count(n, d, M)
        elif method == "flash":
            c = io.flash_forward_count(n, d, M) + io.flash_backward_count(n, d, M)
        else:
            c = io.smallcache_forward_count(n, d, M) + io.smallcache_backward_count(n, d, M)
    except AttnInputError as exc:
        return None, f"does not fit in M={M} words ({exc})"
    if c.total > sys.float_info.max:  # an exact int count beyond the float cost model
        return None, "its I/O count overflows a float"
    return float(c.total), ""


def _degree(R: float, eps: float):
    try:
        return pm.least_degree(R, eps), ""
    except AttnInputError:
        floor = pm.rounding_floor(R)
        return (
            None,
            f"no polynomial: eps={eps:g} is below the rounding floor {floor:.1e} at R={R:.3g}",
        )


def advise(
    n,
    d,
    B,
    eps,
    M,
    *,
    flops_per_word: float = DEFAULT_FLOPS_PER_WORD,
    slow_memory: int = DEFAULT_SLOW_MEMORY,
) -> Advice:
    """Recommend exact, flash, smallcache or polynomial attention for one training step.

    Parameters
    ----------
    n : sequence length (n queries, n keys), integer >= 1
    d : head dimension (d_v = d), integer >= 1
    B : AS24's entry bound, > 0: |Q|, |K| ≤ B with logits scaled by 1/d, so the logit range
        is R = B² (for scale 1/√d use B = d^{1/4}·max(‖Q‖∞, ‖K‖∞))
    eps : accuracy the polynomial method must reach, in (0, 1) (relative error of exp)
    M : fast memory in words, integer >= 1
    flops_per_word : machine balance (default 64), > 0
    slow_memory : slow-memory capacity in words (default 2³³), integer >= 1

    Returns
    -------
    :class:`Advice`, with every method's flops, I/O, cost and feasibility. The cost model
    is described in the module docstring; it is ours, not a paper's.

    Raises
    ------
    AttnInputError
        if an argument is of the wrong type or range, a cost overflows a float, or no method
        is feasible.

    Examples
    --------
    >>> advise(4096, 64, 1.0, 1e-3, 2**16).method
    'flash'
    >>> a = advise(2**20, 32, 0.05, 1e-3, 2**16)
    >>> a.method, a.degree, a.rank
    ('polynomial', 1, 33)
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    B, eps = check_positive_real("B", B), check_open_unit("eps", eps)
    balance = check_positive_real("flops_per_word", flops_per_word)
    slow_memory = check_int("slow_memory", slow_memory)
    R = B * B
    if not math.isfinite(R):
        raise AttnInputError(f"B must be at most 1.34e+154 (so that R = B² is finite), got {B!r}")
    # B² below the smallest float: a logit range of (about) 0, where degree 0 suffices
    R = max(R, math.ulp(0.0))
    return _advise(n, d, B, eps, M, balance, slow_memory, R)


def _advise(n, d, B, eps, M, balance, slow_memory, R) -> Advice:
    costs = []
    for method in ("exact", "flash", "smallcache"):
        flops = method_flops(method, n, d)  # refuses an n or d beyond the float cost model
        slow = {"exact": 3.0 * n * n, "flash": 0.0, "smallcache": 2.0 * n * n}[method]
        words, note = _counted(method, n, d, M)
        feasible = words is not None and slow <= slow_memory
        if words is not None and not feasible:
            note = f"needs {slow:.2e} words of slow memory > {_words(slow_memory)}"
        cost = flops + balance * words if feasible else math.inf
        io_words = math.nan if words is None else words
        costs.append(MethodCost(method, flops, io_words, slow, cost, feasible, note))

    g, note = _degree(R, eps)
    r = None
    nan = math.nan
    if g is None:
        costs.append(MethodCost("polynomial", nan, nan, nan, math.inf, False, note))
    else:
        try:
            r = pm.feature_rank(d, g) if g > 0 else 1
        except AttnInputError:  # a rank beyond 1e300: no array could hold the factors
            r = None
    if g is not None and r is None:
        note = f"degree {g}: the rank C(g+d, d) exceeds 1e300"
        costs.append(MethodCost("polynomial", nan, nan, nan, math.inf, False, note))
    elif g is not None:
        try:
            flops = method_flops("polynomial", n, d, r)
        except AttnInputError:  # n·r·d² beyond the float range: far from feasible
            flops = None
        if flops is None:
            note = f"degree {g}, rank {r:,}: its flop count overflows a float"
            costs.append(MethodCost("polynomial", nan, nan, 6.0 * n * r, math.inf, False, note))
        else:
            words = _polynomial_io(n, d, r, M)
            slow = 6.0 * n * r
            feasible = slow <= slow_memory
            note = f"degree {g}, rank {r:,}"
            if not feasible:
                note += f"; needs {slow:.2e} words of slow memory > {_words(slow_memory)}"
            cost = flops + balance * words if feasible else math.inf
            costs.append(MethodCost("polynomial", flops, words, slow, cost, feasible, note))

    for c in costs:
        if c.feasible and not math.isfinite(c.cost):
            raise AttnInputError(
                f"flops_per_word={balance:g} is too large: the cost of {c.method} "
                f"({c.flops:.3g} flops + flops_per_word × {c.io:.3g} words) overflows a float"
            )
    feasible = [c for c in costs if c.feasible]
    if not feasible:
        raise AttnInputError(
            f"no method is feasible at n={n}, d={d}, M={M} with slow_memory={slow_memory}: "
            + "; ".join(f"{c.method}: {c.note}" for c in costs)
        )
    best = min(feasible, key=lambda c: (c.cost, METHODS.index(c.method)))
    others = [c for c in feasible if c is not best]
    if others:
        runner = min(others, key=lambda c: c.cost)
        reason = (
            f"cost {best.cost:.3g} flop-equivalents, {runner.cost / best.cost:.3g}× below "
            f"the next feasible method ({runner.method})"
        )
    else:
        reason = "the only feasible method"
    return Advice(best.method, n, d, B, eps, M, balance, slow_memory, R, g, r, tuple(costs), reason)


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
    """The keywords passed on to :func:`advise` as the machine: only its two keywords."""
    unknown = sorted(set(machine) - {"flops_per_word", "slow_memory"})
    if unknown:
        raise AttnInputError(
            f"{unknown[0]} is not a machine keyword: pass flops_per_word and slow_memory (or "
            "M as its own argument), as attnlib.advice.machine returns them"
        )


def decision_map(ns, Bs, *, d, eps, M, **machine) -> np.ndarray:
    """The recommended method over a grid: an integer array (len(Bs), len(ns)) of indices
    into :data:`METHODS` (row i is B = Bs[i], column j is n = ns[j]). ``machine`` passes
    ``flops_per_word`` and ``slow_memory`` to :func:`advise`.

    Raises :class:`attnlib.AttnInputError` if ``ns`` is not a non-empty sequence of positive
    integers, ``Bs`` not one of positive numbers, ``machine`` holds a keyword other than
    ``flops_per_word`` and ``slow_memory``, or :func:`advise` refuses a point.

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
    2⁶², ``n_hi`` ≤ ``n_lo``, ``machine`` holds a keyword other than ``flops_per_word`` and
    ``slow_memory``, or :func:`advise` refuses the arguments.
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


def entry_bound(Q, K, *, scale=None) -> float:
    """AS24's entry bound B of one head whose logits are scale·QKᵀ.

    AS24 scale the logits by 1/d. Since scale·⟨q, k⟩ = ⟨√(scale·d)·q, √(scale·d)·k⟩ / d,
    folding the scale into the entries gives B = √(scale·d) · max(‖Q‖∞, ‖K‖∞), and every logit
    lies in [−B², B²]. With the usual scale 1/√d (the default) B = d^{1/4}·max(‖Q‖∞, ‖K‖∞):
    the B to pass to :func:`advise`.

    Raises :class:`attnlib.AttnInputError` if Q (n, d) or K (m, d) is not a finite float
    array, their widths differ, ``scale`` is not a positive number, or B overflows a float.

    Examples
    --------
    >>> entry_bound(np.full((2, 16), 0.5), np.ones((3, 16)))
    2.0
    >>> entry_bound(np.full((2, 16), 0.5), np.ones((3, 16)), scale=1 / 16)
    1.0
    """
    Q = as_float_array("Q", Q)
    K = as_float_array("K", K)
    check_cols("K", K, Q.shape[1], "Q")
    d = Q.shape[1]
    fold = d**0.25 if scale is None else math.sqrt(check_scale(scale, d) * d)
    B = fold * max(max_abs(Q), max_abs(K))
    if not math.isfinite(B):
        raise AttnInputError(
            f"the entry bound √(scale·d)·max(|Q|, |K|) overflows a float: Q, K or scale is "
            f"too large (fold √(scale·d) = {fold:.3g})"
        )
    return B


def attention_step(method: str, Q, K, V, dO, eps: float = 1e-3):
    """One forward and backward pass of one head, ``(O, (dQ, dK, dV))``, softmax scale 1/√d.

    The step :func:`advise` prices, for the two methods this machine can run and time:

    * ``"exact"``: the core, :func:`attnlib.attention_forward` then
      :func:`attnlib.attention_backward` (numpy, materialising n×n matrices);
    * ``"polynomial"``: ``pm.approx_attention`` then ``pm.approx_attention_backward`` at
      accuracy ``eps`` (the backward rebuilds its factors).

    Q (n, d), K (m, d), V (m, d_v), dO (n, d_v); ``eps`` is used by the polynomial method.

    Raises :class:`attnlib.AttnInputError` if ``method`` is neither of the two, the arrays are
    not finite float arrays of matching shapes, ``eps`` is not in (0, 1), or (polynomial) no
    polynomial exists for the logit range or its factors exceed the memory budget.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V, dO = (rng.uniform(-0.5, 0.5, (64, 4)) for _ in range(4))
    >>> O, (dQ, dK, dV) = attention_step("exact", Q, K, V, dO)
    >>> O_poly, grads = attention_step("polynomial", Q, K, V, dO, 1e-3)
    >>> bool(np.abs(O_poly - O).max() < 2e-3 * np.abs(V).max()), dK.shape
    (True, (64, 4))
    """
    check_choice("method", method, ("exact", "polynomial"))
    eps = check_open_unit("eps", eps)
    if method == "exact":
        O, lse = attention_forward(Q, K, V)
        return O, attention_backward(Q, K, V, O, dO, lse)
    return (
        pm.approx_attention(Q, K, V, eps=eps),
        pm.approx_attention_backward(Q, K, V, dO, eps=eps),
    )
