"""Measuring: timers, traced memory, this machine's rates, and power-law fits of what they give.

The library (:func:`attnlib.machines.measure_cpu`), the chapters and the benchmarks
time and trace with the same functions, so a number in the text and the committed benchmark
results are measured the same way:

* :func:`median_time` (CPU or wall time, stated by the caller), and :func:`round_robin_times`
  and :func:`round_robin_samples` (several calls timed in turns, so that a slow spell of a
  shared machine falls on all of them);
* :func:`traced_peak_bytes`, the peak of the memory a call allocates;
* :func:`machine_rates`, this machine's matrix-product and copy rates;
* :func:`loglog_slope` and :func:`loglog_crossover`, the power-law fits the chapters and the
  tests read such series with.
"""

from __future__ import annotations

import math
import statistics
import time
import tracemalloc

import numpy as np

from ._checks import (
    AttnInputError,
    as_real_array,
    check_choice,
    check_float_dtype,
    check_int,
    check_memory_parts,
    check_real,
    describe_int,
)
from .config import MAX_REPEATS

__all__ = [
    "median_time",
    "round_robin_samples",
    "round_robin_times",
    "traced_peak_bytes",
    "machine_rates",
    "loglog_slope",
    "loglog_crossover",
]

_CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}

#: The longest a timing of :func:`round_robin_samples` may be asked to last, in seconds (an
#: hour): beyond it the number of back-to-back runs is no longer a timing choice.
_MAX_SECONDS = 3600.0


def median_time(
    fn, *args, clock: str = "cpu", min_repeats: int = 3, min_total: float = 0.2, max_repeats=50
) -> float:
    """Median seconds of ``fn(*args)`` over at least ``min_repeats`` calls, repeated until
    ``min_total`` seconds have passed or ``max_repeats`` calls were made.

    ``clock="cpu"`` is the process's CPU time (all its threads: hold BLAS and numba to one
    thread to time one core; it does not count other processes' load), ``"wall"`` the elapsed
    time. Raises :class:`attnlib.AttnInputError` on an unknown clock, bad counts
    (``min_repeats`` from 1 to :data:`attnlib.config.MAX_REPEATS`, at most ``max_repeats``) or
    a ``min_total`` that is not a finite number of seconds >= 0.
    """
    if not callable(fn):
        raise AttnInputError(f"fn must be callable, got {type(fn).__name__}")
    check_choice("clock", clock, tuple(_CLOCKS))
    min_repeats = check_int("min_repeats", min_repeats, maximum=MAX_REPEATS)
    max_repeats = check_int("max_repeats", max_repeats)
    if max_repeats < min_repeats:
        raise AttnInputError(
            f"min_repeats={min_repeats} must be at most max_repeats={describe_int(max_repeats)}"
        )
    min_total = check_real("min_total", min_total, minimum=0.0)
    now = _CLOCKS[clock]
    times: list[float] = []
    while len(times) < min_repeats or (sum(times) < min_total and len(times) < max_repeats):
        start = now()
        fn(*args)
        times.append(now() - start)
    return statistics.median(times)


def round_robin_samples(
    calls: dict, *, rounds: int = 5, clock: str = "cpu", min_seconds: float = 0.02
) -> tuple[dict, dict]:
    """Every round's seconds per call of ``calls`` ({key: (fn, args)}), timed round-robin, and
    the back-to-back runs that make one timing: ``(samples, repeats)``, ``samples[key]`` the
    ``rounds`` timings of ``fn(*args)`` in order. A first, untimed run of each call sets
    ``repeats[key]``, how many runs last about ``min_seconds``; then each of ``rounds`` rounds
    times every call once, as the mean of that many back-to-back runs.

    On a shared machine a slow spell outlasts many calls; timing one size after another lets
    it fall on some sizes only and bend a fitted slope, while round-robin spreads it over all
    of them, so ratios and slopes between the calls survive it. ``clock`` as in
    :func:`median_time`.

    Raises :class:`attnlib.AttnInputError` on an empty or malformed ``calls``, an unknown
    clock, bad counts (``rounds`` at most :data:`attnlib.config.MAX_REPEATS`), or a
    ``min_seconds`` that is not positive or exceeds an hour (3600).

    Examples
    --------
    >>> samples, repeats = round_robin_samples({"sum": (sum, (range(10),))}, rounds=3)
    >>> len(samples["sum"]), repeats["sum"] >= 1
    (3, True)
    """
    if not isinstance(calls, dict) or not calls:
        raise AttnInputError("calls must be a non-empty dict {key: (fn, args)}")
    for key, call in calls.items():
        if not (isinstance(call, tuple) and len(call) == 2 and callable(call[0])):
            raise AttnInputError(f"calls[{key!r}] must be a pair (fn, args) with fn callable")
        if not isinstance(call[1], tuple):
            raise AttnInputError(f"calls[{key!r}]: args must be a tuple")
    check_choice("clock", clock, tuple(_CLOCKS))
    rounds = check_int("rounds", rounds, maximum=MAX_REPEATS)
    min_seconds = check_real(
        "min_seconds", min_seconds, minimum=0.0, open_minimum=True, maximum=_MAX_SECONDS
    )
    now = _CLOCKS[clock]
    repeats = {}
    for key, (fn, args) in calls.items():  # untimed for the result: it sets the repeats
        start = now()
        fn(*args)
        repeats[key] = max(1, math.ceil(min_seconds / max(now() - start, 1e-9)))
    samples: dict = {key: [] for key in calls}
    for _ in range(rounds):
        for key, (fn, args) in calls.items():
            start = now()
            for _ in range(repeats[key]):
                fn(*args)
            samples[key].append((now() - start) / repeats[key])
    return samples, repeats


def round_robin_times(
    calls: dict, *, rounds: int = 5, clock: str = "cpu", min_seconds: float = 0.02
) -> dict:
    """Median seconds of each call in ``calls`` ({key: (fn, args)}) over the rounds of
    :func:`round_robin_samples` (same arguments; it says why round-robin, and what it
    refuses).

    Examples
    --------
    >>> t = round_robin_times({"short": (sum, (range(10),)), "long": (sum, (range(10**5),))})
    >>> t["short"] < t["long"]
    True
    """
    samples, _ = round_robin_samples(calls, rounds=rounds, clock=clock, min_seconds=min_seconds)
    return {key: statistics.median(t) for key, t in samples.items()}


def traced_peak_bytes(fn, *args) -> int:
    """The peak of memory allocated while ``fn(*args)`` runs, above what was allocated before,
    in bytes, measured with ``tracemalloc``: Python objects, numpy arrays and the arrays that
    numba-compiled code allocates are seen; BLAS's internal work buffers are not.

    Raises :class:`attnlib.AttnInputError` if ``fn`` is not callable.
    """
    if not callable(fn):
        raise AttnInputError(f"fn must be callable, got {type(fn).__name__}")
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()


def machine_rates(
    n: int = 512, length: int = 2**24, repeats: int = 5, *, dtype="float64"
) -> tuple[float, float]:
    """This machine's rates in ``dtype`` as ``(flops per second, words per second)``: an
    n × n matrix product (2n³ flops, best of ``repeats``) and a copy of ``length`` words (each
    word read and written: 2·length words moved). Their ratio is the machine balance in flops
    per word. Runs on however many BLAS threads are in force.

    Raises :class:`attnlib.AttnInputError` on a size or count below 1 (``repeats`` at most
    :data:`attnlib.config.MAX_REPEATS`), a dtype other than float32 and float64 (a name,
    numpy type or dtype), or arrays that would exceed
    :data:`attnlib.config.MAX_ALLOCATION_BYTES`.
    """
    n = check_int("n", n)
    length = check_int("length", length)
    repeats = check_int("repeats", repeats, maximum=MAX_REPEATS)
    dtype = check_float_dtype("dtype", dtype)
    size = dtype.itemsize
    check_memory_parts(
        "machine_rates",
        [
            (3 * size * n**2, "the three n × n matrices", "n"),
            (2 * size * length, "the two vectors of the copy", "length"),
        ],
    )
    rng = np.random.default_rng(0)
    A, B = rng.random((n, n), dtype=dtype), rng.random((n, n), dtype=dtype)
    C = np.empty((n, n), dtype=dtype)
    x, y = rng.random(length, dtype=dtype), np.empty(length, dtype=dtype)
    t_mm = t_copy = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(A, B, out=C)
        t_mm = min(t_mm, time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.copyto(y, x)
        t_copy = min(t_copy, time.perf_counter() - t0)
    return 2 * n**3 / t_mm, 2 * length / t_copy


#: Bytes per point of the fits' temporaries (logarithms, differences, least squares).
_FIT_BYTES = 64


def _positive_pair(x, y, what: str):
    x = as_real_array("x", x)
    y = as_real_array(what, y)
    if x.shape != y.shape or x.size < 2:
        raise AttnInputError(
            f"x and {what} must be equal-length sequences of at least 2 points, "
            f"got {x.size} and {y.size}"
        )
    check_memory_parts("the fit", [(_FIT_BYTES * x.size, "its logarithms", f"x or {what}")])
    for name, v in (("x", x), (what, y)):
        if not v.min() > 0:
            raise AttnInputError(f"{name} must be positive (it is fitted on a log scale)")
    return x, y


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x: the exponent of a power law y ∝ x^slope.

    Raises :class:`attnlib.AttnInputError` unless x and y are equal-length positive sequences
    of at least two points with at least two distinct x (one x alone determines no slope).

    Examples
    --------
    >>> round(loglog_slope([1, 2, 4], [3, 12, 48]), 12)
    2.0
    """
    x, y = _positive_pair(x, y, "y")
    if x.min() == x.max():
        raise AttnInputError(f"x must hold at least two distinct values, got {x.size} × {x[0]!r}")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def loglog_crossover(x, y1, y2) -> float | None:
    """The x where series y1 and y2 cross, by linear interpolation of log y1 − log y2 against
    log x between the first pair of neighbouring points where the sign changes (from y1 < y2
    to y1 ≥ y2). None if they never cross in the measured range.

    Raises :class:`attnlib.AttnInputError` unless x, y1 and y2 are equal-length positive
    sequences of at least two points and x is strictly increasing (neighbours in the list are
    neighbours on the axis).

    Examples
    --------
    >>> loglog_crossover([1, 4], [1, 16], [4, 4])
    2.0
    """
    x, y1 = _positive_pair(x, y1, "y1")
    _, y2 = _positive_pair(x, y2, "y2")
    if not (np.diff(x) > 0).all():
        raise AttnInputError("x must be strictly increasing")
    diff = np.log(y1) - np.log(y2)
    for k in range(len(x) - 1):
        if diff[k] < 0 <= diff[k + 1]:
            lx0, lx1 = math.log(x[k]), math.log(x[k + 1])
            t = -diff[k] / (diff[k + 1] - diff[k])
            return float(math.exp(lx0 + t * (lx1 - lx0)))
    return None
