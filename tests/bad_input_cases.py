"""The bad-input table's machinery, and the inputs that rows of several parts share.

The table is one file of rows per part of attnlib, test_bad_input_<part>.py. Each row calls one
public function or method and expects either

* an :class:`attnlib.AttnInputError` whose message matches a pattern naming the argument at
  fault (:meth:`Table.raises`), or, for the machine's documented misuse errors, a
  ``MachineError``; or
* for valid edge input, a finite and correct result (:meth:`Table.valid`, with a check).

A row's id is the public path of its callable below attnlib, then what the row passes:
``iomodel.flash_backward-lse-not-from-forward``, ``exact.attention-scale=nan``,
``iomodel.TwoLevelMemory.load-rows=str``. test_bad_input_coverage.py finds attnlib's public
callables by introspection and checks that each has a row.

Every row runs under a time limit (SIGALRM), so that a hang fails its row instead of stalling
the suite. The bad Q, K and V of every attention implementation are one table of their own, in
test_qkv_inputs.py.
"""

from __future__ import annotations

import math
import re
import signal
import tracemalloc
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import numpy as np
import pytest

import attnlib as al
from attnlib import iomodel as io
from attnlib import machines as mc
from attnlib import models as mm

TIME_LIMIT_S = 10.0


class CaseTimeout(BaseException):
    """A case ran past its time limit (a BaseException, so ``except Exception`` in the code
    under test cannot swallow it)."""


@contextmanager
def time_limit(seconds: float = TIME_LIMIT_S):
    """Raise :class:`CaseTimeout` in the running code after ``seconds`` instead of letting it
    hang."""

    def expire(signum, frame):
        raise CaseTimeout(f"case exceeded its {seconds} s time limit")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@cache
def warm_up() -> None:
    """Load the model and compile the kernels once, outside any row's time limit.

    A fresh clone has no on-disk numba cache, and a cold compile takes 10-15 s per kernel and
    dtype on 2 cores. That is not a hang, and an alarm raised inside the compiler leaves numba
    half-way through writing its cache, so no row may be the first to compile.
    """
    loaded_minilm()
    for dtype in (np.float32, np.float64):
        for shape in ((3, 4), (1, 2, 3, 4)):  # one head, and every head at once
            q = np.arange(np.prod(shape), dtype=dtype).reshape(shape) / 12
            O, lse = al.flash_forward(q, q, q)
            al.flash_backward(q, q, q, O, np.ones_like(O), lse)


@dataclass(frozen=True)
class Case:
    id: str
    # the callable's path below attnlib, "exact.attention" or "iomodel.IOCount.__add__", and
    # a variant in parentheses where rows of one callable are repeated: "(is_causal)"
    callable: str
    fn: Callable[[], Any]
    pattern: str | None = None  # regex the error message must match; None: a valid case
    error: type = al.AttnInputError
    check: Callable[[Any], bool] | None = None

    def run(self) -> None:
        """Call the row's function under the time limit and check what it raises or returns."""
        warm_up()
        with time_limit():
            if self.pattern is None:
                result = self.fn()
                assert self.check(result), f"{self.id}: unexpected result {result!r:.200}"
                return
            with pytest.raises(self.error) as info:
                self.fn()
        assert type(info.value) is self.error or self.error is al.AttnInputError
        assert re.search(self.pattern, str(info.value)), (
            f"{self.id}: message {str(info.value)!r:.300} does not match {self.pattern!r}"
        )


class Table:
    """The rows of one part: each call adds rows for one callable, named by its public path."""

    def __init__(self):
        self.cases: list[Case] = []

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.cases]

    def raises(self, callable_name, what, fn, pattern, error=al.AttnInputError):
        self.cases.append(Case(f"{callable_name}-{what}", callable_name, fn, pattern, error))

    def valid(self, callable_name, what, fn, check):
        self.cases.append(Case(f"{callable_name}-{what}", callable_name, fn, None, check=check))

    def raises_each(self, callables, rows, *, wrap=None):
        """The same rows for several callables: for each ``(callable_name, fn)`` in
        ``callables``, one row per ``(what, call, pattern)`` in ``rows``, where ``call(fn)``
        runs the function (inside ``wrap``, such as :func:`before_allocating`, when given)."""
        for name, fn in callables:
            for what, call, pattern in rows:
                run = partial(call, fn)
                self.raises(name, what, run if wrap is None else wrap(run), pattern)

    def valid_each(self, callables, rows):
        """Valid rows for several callables: for each ``(callable_name, fn)`` in ``callables``,
        one row per ``(what, call, check)`` in ``rows``, where ``call(fn)`` runs the function
        and ``check(fn, result)`` judges what it returned."""
        for name, fn in callables:
            for what, call, check in rows:
                self.valid(name, what, partial(call, fn), partial(check, fn))

    def bad_decode(self, name, fn, pattern):
        """The rows of a decode step ``fn(m, d, M, H=..., H_kv=...)``: a bad int ``m``, and a
        head count H that is no multiple of H_kv (the message matching ``pattern``)."""
        self.bad_ints(name, "m", lambda v: fn(v, 4, 4096))
        self.raises(name, "H-not-multiple", lambda: fn(8, 4, 4096, H=3, H_kv=2), pattern)

    def bad_arrays(self, name, arg, call):
        """The standard wrong arrays for argument ``arg``: ``call(value)`` runs the function."""
        good = {"Q": Q, "K": K, "V": V}.get(arg, None)
        base = np.ones((3, 4)) if good is None else good
        for what, value in [
            ("None", None),
            ("int-dtype", base.astype(np.int64)),
            ("complex", base.astype(np.complex128)),
            ("1-D", base[0]),
            ("empty", base[:0]),
            ("nan", np.where(np.arange(base.size).reshape(base.shape) == 0, np.nan, base)),
            ("inf", np.where(np.arange(base.size).reshape(base.shape) == 0, np.inf, base)),
            ("ragged", [[1.0, 2.0], [3.0]]),
        ]:
            self.raises(name, f"{arg}={what}", lambda v=value: call(v), word(arg))

    def bad_reals(self, name, arg, call, *, extra=()):
        """Wrong values for a positive real argument (``None`` too unless it means a default)."""
        none = [] if arg == "scale" or arg == "memory_budget" else [("None", None)]
        for what, value in [
            ("bool", True),
            ("str", "1"),
            *none,
            ("complex", 1j),
            ("zero", 0.0),
            ("negative", -1.0),
            ("nan", math.nan),
            ("inf", math.inf),
            *extra,
        ]:
            self.raises(name, f"{arg}={what}", lambda v=value: call(v), word(arg))

    def bad_ints(self, name, arg, call, *, minimum_bad=0):
        """Wrong values for a positive int argument."""
        for what, value in [
            ("bool", True),
            ("float", 2.0),
            ("str", "3"),
            ("None", None),
            ("below-minimum", minimum_bad),
        ]:
            self.raises(name, f"{arg}={what}", lambda v=value: call(v), word(arg))


def finite(x) -> bool:
    """Every number in x (arrays, tuples, dataclass-free scalars) is finite."""
    if isinstance(x, (tuple, list)):
        return all(finite(v) for v in x if not isinstance(v, (io.IOCount, type(None))))
    return bool(np.all(np.isfinite(np.asarray(x, dtype=np.float64))))


def word(name: str) -> str:
    """A pattern matching the argument name as a whole word."""
    return rf"(?<![\w]){re.escape(name)}(?![\w])"


# ---- inputs the parts share ----

# every random input comes from R, drawn in one fixed order, so each keeps its value
R = np.random.default_rng(20241201)
Q = R.standard_normal((6, 4))
K = R.standard_normal((5, 4))
V = R.standard_normal((5, 3))
dO = R.standard_normal((6, 3))
O_REF, LSE_REF = al.attention_forward(Q, K, V)
d_ = 4
X = R.standard_normal((d_, d_)) / 2
A1 = R.standard_normal((6, d_))
A2 = R.standard_normal((5, d_))
A3 = R.standard_normal((5, d_))
Y = R.standard_normal((d_, d_))
E = R.standard_normal((6, d_))

LOSS = (X, A1, A2, A3, Y, E)

SMALL_D8 = (R.uniform(-1, 1, (8, 8)), R.uniform(-1, 1, (8, 8)), R.standard_normal((8, 8)))

LOSS_SMALL = (np.eye(8), *SMALL_D8[:2], SMALL_D8[2], np.eye(8), R.standard_normal((8, 8)))

SX = R.standard_normal((5, 8))
SG = R.standard_normal((5, 8))


@cache
def loaded_minilm():
    """The MiniLM model, loaded once (by :func:`warm_up`, outside any row's time limit)."""
    return mm.load_minilm()


H100 = mc.H100_SXM5


def before_allocating(fn, limit=1 << 20):
    """``fn`` run under tracemalloc, failing if its traced peak reaches ``limit`` bytes: a
    refusal (or an answer) that came before anything the size of the request was allocated.
    The arguments are built outside, so only the call's own allocations count."""

    def call():
        tracemalloc.start()
        try:
            return fn()
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < limit, f"the call allocated {peak} bytes before refusing or returning"

    return call


RAGGED = [[True] * 5] * 5 + [[True]]

Q_UNIFORM, K_UNIFORM = R.uniform(-1, 1, (6, 4)), R.uniform(-1, 1, (5, 4))
V_NORMAL = R.standard_normal((5, 3))


def broadcast_view(shape, value=0.5, dtype=np.float64):
    """A read-only view of ``shape`` with every entry ``value``, held in one element: sizes
    beyond the memory limit that cost nothing to build."""
    return np.broadcast_to(np.full((1,) * len(shape), value, dtype), shape)


Q_1E200, K_1E200 = np.full((6, 4), 1e200), np.full((5, 4), 1e200)

LONG_Q = np.ones((1100, 2))
