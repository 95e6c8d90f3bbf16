"""Which attention algorithm should a training step use? A documented cost model [ours].

:func:`advise` weighs four ways of computing one attention forward *and* backward pass
(n queries, n keys, head dimension d = d_v) on a two-level machine with M words of fast
memory:

================  ===========================================================================
``standard``      the materialising algorithm (FA1 Alg. 0 and App. B.4): S, P, dP and dS are
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
the time it moves one word (:func:`attnlib.machines.machine` gives it for the cited presets).
Arithmetic counts (m = n, d_v = d, multiply and add counted separately, softmax at a few
operations per score):

* standard: forward QKᵀ and PV (4n²d) + softmax (5n²); backward dV, dP, dQ, dK (8n²d) + dS (2n²):
  **12n²d + 7n²**;
* flash and smallcache: the backward recomputes S and P (+2n²d + 2n²): **14n²d + 9n²**;
* polynomial (the memory-light form of :mod:`attnlib.polymethod.approx`): building U and V
  (2nr), the row sums (4nr), Õ and dV (8nrd), D̃∘(f̃K) and f̃ᵀ(D̃∘Q) (8nrd) and the two
  Hadamard products f̃∘(dO Vᵀ), each a sum of d rank-r passes (8nrd²): **8nrd² + 16nrd + 6nr**.

The polynomial method's I/O is modelled as its compulsory traffic (inputs and outputs,
10nd words) when its two factors fit in fast memory (2nr ≤ M), and otherwise as writing both
factors once and reading them once per pass (2d + 5 passes): 10nd + 2nr(2d + 6).

**One precision.** Every method is priced and judged in one ``dtype`` (bfloat16, float32 or
float64: the machine's M and balance are in words of it, as :func:`attnlib.machines.machine`
gives them), and every method must reach the same accuracy ε, the relative error of the
softmax weights. A result held in a precision with unit roundoff u carries a relative error up
to u from its rounding alone, so the three exact methods reach ε only if ε ≥ 10·u (10 is
``pm.FLOOR_FACTOR``, the margin ``pm.least_degree`` asks of the polynomial's floor); the
polynomial method, evaluated in the monomial basis, stops improving at u·e^{2R} (Chapter 6's
rounding floor), so it needs ε ≥ 10·u·e^{2R}. In bfloat16 (u = 2⁻⁸) neither reaches ε = 10⁻³
at any R, and :func:`advise` refuses such a (dtype, ε) pair rather than price a method at one
precision and judge its accuracy at another. (Pricing each method at the precision its ε needs
would mix machines: on a GPU the bfloat16 and float32 units differ in rate and in M.)

**Feasibility.** The standard method keeps three n×n matrices in slow memory and the
small-cache method two; the polynomial method keeps 3·2nr words (its factors and one work
array, as in ``pm.approx_plan``). A method whose slow memory exceeds ``slow_memory`` words,
whose schedule does not fit M, or that cannot reach ε in ``dtype`` is infeasible. The
recommendation is the feasible method of least cost; ties go to the simpler method, in the
order standard, flash, smallcache, polynomial.

**Why the polynomial region has islands.** The polynomial method's I/O has two cases: while
both n×r factors fit in fast memory (2nr ≤ M) it moves only its inputs and outputs, and one
token later it writes and re-reads the factors 2d + 6 times. Its cost jumps there, at
n = ⌊M / 2r⌋ + 1, and FlashAttention, whose cost grows as n², can win again until its n² term
catches up with the jump: hence flash → polynomial → flash → polynomial along n at small B.
The jump is a feature of the model's two cases (a real kernel would stream the factors in
tiles), so the island's edges are not to be read as a prediction.

B follows AS24: the entries of Q and K are bounded by B with the logits scaled by 1/d, so
every logit lies in [−B², B²]. For a model with the usual scale 1/√d, fold the scale in:
B = d^{1/4} · max(‖Q‖∞, ‖K‖∞) (:func:`entry_bound`).

:func:`attnlib.machines.machine` gives a cited preset's machine keywords, and
:mod:`attnlib.advice_maps` draws the recommendation over n and B. :func:`attnlib.forward_backward`
runs the step that :func:`advise` prices, by the algorithms a CPU can time
(``kernels="standard"``, ``"flash"`` and ``"polynomial"``).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from . import iomodel as io
from . import polymethod as pm
from ._checks import (
    AttnInputError,
    as_float_array,
    check_choice,
    check_cols,
    check_int,
    check_open_unit,
    check_positive_real,
    check_scale,
    describe_int,
    max_abs,
)

__all__ = [
    "METHODS",
    "UNIT_ROUNDOFF",
    "MethodCost",
    "Advice",
    "advise",
    "method_flops",
    "entry_bound",
]

#: The four methods, in order of simplicity (ties are broken towards the front).
METHODS = ("standard", "flash", "smallcache", "polynomial")

#: Default machine balance: flops per word of slow-memory traffic.
_DEFAULT_FLOPS_PER_WORD = 64.0
#: Default slow-memory capacity in words (2³³ words = 64 GiB of float64): a default, not a
#: machine; :func:`attnlib.machines.machine` gives a preset's own.
_DEFAULT_SLOW_MEMORY = 2**33
#: Unit roundoff of each precision (half the distance from 1 to the next float).
UNIT_ROUNDOFF = {"bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}


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
    method (in :data:`METHODS` order); ``dtype`` is the one precision all are priced in;
    ``R = B²`` is the logit range; ``degree`` and ``rank`` are the polynomial method's
    (``None`` if no polynomial reaches ε in ``dtype``); ``reason`` says in one sentence why
    ``method`` won.
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
    dtype: str = "float64"

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
            f"advise(n={self.n}, d={self.d}, B={self.B:g}, eps={self.eps:g}, M={self.M}, "
            f"dtype={self.dtype}): "
            f"{self.method} — {self.reason}"
        )


def method_flops(method: str, n: int, d: int, rank: int | None = None) -> float:
    """Arithmetic of one forward + backward pass by the module docstring's formulas.

    ``rank`` (r = C(g+d, d)) is required for ``"polynomial"``.

    Raises :class:`attnlib.AttnInputError` if ``method`` is not one of :data:`METHODS`, n,
    d (or the rank) is not a positive integer, or the count overflows a float.

    Examples
    --------
    >>> method_flops("standard", 1024, 64), method_flops("polynomial", 1024, 4, rank=70)
    (812646400.0, 14192640.0)
    """
    n, d = check_int("n", n), check_int("d", d)
    check_choice("method", method, METHODS)
    r = check_int("rank", rank) if method == "polynomial" else None
    try:  # float arithmetic: inf on overflow, OverflowError for an int beyond the float range
        if method == "standard":
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
        if method == "standard":
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


def _degree(R: float, eps: float, dtype: str):
    """The polynomial's degree, or (None, why) if no polynomial reaches eps in ``dtype``."""
    floor = UNIT_ROUNDOFF[dtype] * math.exp(min(2.0 * R, 700.0))
    why = (
        f"no polynomial in {dtype}: eps={eps:g} is below {pm.FLOOR_FACTOR:g} × its rounding "
        f"floor {floor:.1e}"
    )
    if dtype != "float64" and pm.FLOOR_FACTOR * floor > eps:
        return None, why + f" at R={R:.3g}"
    try:
        return pm.least_degree(R, eps), ""
    except AttnInputError:  # float64: pm.least_degree's own floor decides
        floor = pm.rounding_floor(R)
        return (
            None,
            f"no polynomial: eps={eps:g} is below the rounding floor {floor:.1e} at R={R:.3g}",
        )


def _exact_reaches(eps: float, dtype: str) -> str:
    """'' if an exact method's result in ``dtype`` can carry relative error eps, else why."""
    u = UNIT_ROUNDOFF[dtype]
    if pm.FLOOR_FACTOR * u <= eps:
        return ""
    return f"does not reach eps={eps:g} in {dtype}: its result is rounded to u = {u:.1e}"


def advise(
    n,
    d,
    B,
    eps,
    M,
    *,
    flops_per_word: float = _DEFAULT_FLOPS_PER_WORD,
    slow_memory: int = _DEFAULT_SLOW_MEMORY,
    dtype: str = "float64",
) -> Advice:
    """Recommend standard, flash, smallcache or polynomial attention for one training step.

    Every method is priced and judged in one precision, ``dtype`` (module docstring): a method
    that cannot reach ``eps`` in it is infeasible, and a (dtype, eps) pair that no method
    reaches is refused. One precision, rather than each method at the precision its ε needs,
    because the machine's M and balance are themselves those of one precision.

    Parameters
    ----------
    n : sequence length (n queries, n keys), integer >= 1
    d : head dimension (d_v = d), integer >= 1
    B : AS24's entry bound, > 0: |Q|, |K| ≤ B with logits scaled by 1/d, so the logit range
        is R = B² (for scale 1/√d use B = d^{1/4}·max(‖Q‖∞, ‖K‖∞))
    eps : accuracy every method must reach, in (0, 1) (relative error of the softmax weights;
        for the polynomial method, that of exp)
    M : fast memory in words of ``dtype``, integer >= 1
    flops_per_word : machine balance (default 64), > 0
    slow_memory : slow-memory capacity in words (default 2³³), integer >= 1
    dtype : "bfloat16", "float32" or "float64" (default), the precision of every method

    Returns
    -------
    :class:`Advice`, with every method's flops, I/O, cost and feasibility. The cost model
    is described in the module docstring; it is ours, not a paper's.

    Raises
    ------
    AttnInputError
        if an argument is of the wrong type or range, a cost overflows a float, or no method
        is feasible (in particular, if no method reaches ``eps`` in ``dtype``).

    Examples
    --------
    >>> advise(4096, 64, 1.0, 1e-3, 2**16).method
    'flash'
    >>> a = advise(2**20, 32, 0.05, 1e-3, 2**16)
    >>> a.method, a.degree, a.rank
    ('polynomial', 1, 33)
    >>> advise(2**20, 32, 0.05, 5e-2, 2**16, dtype="bfloat16").method
    'polynomial'
    >>> advise(2**20, 32, 0.05, 1e-3, 2**16, dtype="bfloat16")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    attnlib._checks.error.AttnInputError: eps=0.001: no method reaches it in bfloat16 ...
    """
    n, d, M = check_int("n", n), check_int("d", d), check_int("M", M)
    B, eps = check_positive_real("B", B), check_open_unit("eps", eps)
    balance = check_positive_real("flops_per_word", flops_per_word)
    slow_memory = check_int("slow_memory", slow_memory)
    dtype = check_choice("dtype", dtype, tuple(UNIT_ROUNDOFF))
    R = B * B
    if not math.isfinite(R):
        raise AttnInputError(f"B must be at most 1.34e+154 (so that R = B² is finite), got {B!r}")
    # B² below the smallest float: a logit range of (about) 0, where degree 0 suffices
    R = max(R, math.ulp(0.0))
    return _advise(n, d, B, eps, M, balance, slow_memory, R, dtype)


def _advise(n, d, B, eps, M, balance, slow_memory, R, dtype) -> Advice:
    costs = []
    unreached = _exact_reaches(eps, dtype)
    for method in ("standard", "flash", "smallcache"):
        flops = method_flops(method, n, d)  # refuses an n or d beyond the float cost model
        slow = {"standard": 3.0 * n * n, "flash": 0.0, "smallcache": 2.0 * n * n}[method]
        words, note = _counted(method, n, d, M)
        feasible = words is not None and slow <= slow_memory and not unreached
        if words is not None and slow > slow_memory:
            note = f"needs {slow:.2e} words of slow memory > {_words(slow_memory)}"
        if unreached:
            note = unreached
        cost = flops + balance * words if feasible else math.inf
        io_words = math.nan if words is None else words
        costs.append(MethodCost(method, flops, io_words, slow, cost, feasible, note))

    g, note = _degree(R, eps, dtype)
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
    if unreached and g is None:
        raise AttnInputError(
            f"eps={eps:g}: no method reaches it in {dtype} (u = {UNIT_ROUNDOFF[dtype]:.1e}): "
            f"the exact methods' results are rounded to u, and {note}; ask for eps >= "
            f"{pm.FLOOR_FACTOR * UNIT_ROUNDOFF[dtype]:.2g} or compute in a wider dtype"
        )
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
    return Advice(
        best.method, n, d, B, eps, M, balance, slow_memory, R, g, r, tuple(costs), reason, dtype
    )


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
    >>> import numpy as np
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
