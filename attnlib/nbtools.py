"""What the chapters share: numbers that reproduce, sources, tables, timing, memory, fits.

Printing numbers that reproduce on every reader's machine.

A chapter's committed output is compared, digit for digit, with a re-execution on the reader's
machine, whose CPU, BLAS kernel and thread count round differently. So a number is printed
only to the precision that survives such a change:

* a quantity at round-off level (an agreement between two exact formulas, say) is printed as a
  bound, ``< 1e-13``, next to an ``assert`` of that bound: :func:`below`;
* a measured error that may or may not be at round-off level is printed with two significant
  digits above a floor and as ``< floor`` below it: :func:`error_text`;
* a value glued into the prose (``myst_nb.glue``) is rounded first, so the stored value carries
  no digit the prose does not use: :func:`significant`, :func:`glue_number`.

Showing code from the library, never pasted: :func:`source`, :func:`listing`, :func:`show` (a
function with or without its docstring, collapsed when long); :func:`markdown_table`,
:func:`show_table`.

Measuring: :func:`rel_err`, :func:`central_difference`, :func:`median_time` (CPU or wall
time, stated by the caller), :func:`traced_peak_bytes`, :func:`machine_rates`; fitting a power
law: :func:`loglog_slope`, :func:`loglog_crossover`. The tests use the same fits.
"""

from __future__ import annotations

import ast
import inspect
import math
import numbers
import re
import statistics
import textwrap
import time
import tracemalloc

import numpy as np

from ._checks import AttnInputError, as_real_array, check_choice, check_int, check_positive_real

__all__ = [
    "below",
    "error_text",
    "significant",
    "glue_number",
    "source",
    "show",
    "listing",
    "markdown_table",
    "show_table",
    "rel_err",
    "central_difference",
    "median_time",
    "round_robin_times",
    "traced_peak_bytes",
    "machine_rates",
    "loglog_slope",
    "loglog_crossover",
]


def _real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise AttnInputError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        x = float(value)
    except OverflowError as exc:
        raise AttnInputError(f"{name} must fit in a float, got {value!r}") from exc
    return x


def below(value, bound) -> str:
    """``"< bound"`` after checking that ``value < bound``: the printed form of round-off.

    Raises :class:`attnlib.AttnInputError` if ``bound`` is not a positive finite number, and
    :class:`AssertionError` if ``value`` is not below it (the claim the text makes is false).

    Examples
    --------
    >>> below(2.2e-16, 1e-13)
    '< 1e-13'
    """
    x = _real("value", value)
    b = _real("bound", bound)
    if not (math.isfinite(b) and b > 0):
        raise AttnInputError(f"bound must be a positive finite number, got {bound!r}")
    assert x < b, f"{x!r} is not below {b:g}"
    return f"< {b:.0e}"


def error_text(value, floor=1e-12) -> str:
    """Two significant digits (``"3.1e-07"``) at or above ``floor``, ``"< floor"`` below it.

    Use it for a measured error that is a result at some settings and round-off at others: the
    digits of round-off differ between machines, its being below the floor does not.

    Raises :class:`attnlib.AttnInputError` if ``value`` is not a real number or ``floor`` is
    not positive.

    Examples
    --------
    >>> error_text(3.14159e-7), error_text(4e-16)
    ('3.1e-07', '< 1e-12')
    """
    x = _real("value", value)
    f = _real("floor", floor)
    if not (math.isfinite(f) and f > 0):
        raise AttnInputError(f"floor must be a positive finite number, got {floor!r}")
    return f"< {f:.0e}" if abs(x) < f else f"{x:.1e}"


def significant(value, digits: int = 3) -> float:
    """``value`` rounded to ``digits`` significant digits: the form in which a measured number
    is glued into the prose.

    Raises :class:`attnlib.AttnInputError` if ``value`` is not a finite real number or
    ``digits`` is not an integer from 1 to 15.

    Examples
    --------
    >>> significant(7.962867387297144), significant(0.0006547701978833, 2)
    (7.96, 0.00065)
    """
    x = _real("value", value)
    if not math.isfinite(x):
        raise AttnInputError(f"value must be finite, got {value!r}")
    if (
        isinstance(digits, bool)
        or not isinstance(digits, numbers.Integral)
        or not 1 <= digits <= 15
    ):
        raise AttnInputError(f"digits must be an integer from 1 to 15, got {digits!r}")
    return float(f"{x:.{int(digits) - 1}e}")


def glue_number(name: str, value, digits: int = 3) -> None:
    """Glue ``value`` into the prose under ``name`` (``myst_nb.glue``, not displayed): a float
    rounded to ``digits`` significant digits (:func:`significant`), an integer as it is.

    Raises :class:`attnlib.AttnInputError` if ``name`` is not a non-empty string or ``value``
    is not a finite real number.
    """
    from myst_nb import glue

    if not isinstance(name, str) or not name:
        raise AttnInputError(f"name must be a non-empty string, got {name!r}")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        glue(name, int(value), display=False)
    else:
        glue(name, significant(value, digits), display=False)


def _unwrap(fn):
    if not callable(fn):
        raise AttnInputError(f"fn must be a function or class, got {type(fn).__name__}")
    fn = getattr(fn, "py_func", fn)  # a numba dispatcher shows its Python source
    return inspect.unwrap(fn)


def source(fn, *, docstring: bool = True) -> str:
    """The source code of ``fn`` as written in the library (a numba kernel's Python source).

    With ``docstring=False`` the docstring is left out, so a listing shows the signature and
    the body only. Raises :class:`attnlib.AttnInputError` if ``fn`` is not a function or
    class defined in Python source.

    Examples
    --------
    >>> print(source(significant, docstring=False).splitlines()[1])
        x = _real("value", value)
    """
    fn = _unwrap(fn)
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise AttnInputError(f"fn must be defined in Python source, got {fn!r}") from exc
    if docstring:
        return text
    tree = ast.parse(text)
    node = tree.body[0]
    body = getattr(node, "body", [])
    first = body[0] if body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[: first.lineno - 1] + lines[first.end_lineno :])


#: A listing longer than this many lines is shown collapsed, under a one-line summary.
COLLAPSE_LINES = 25


class Listing:
    """A code listing as a notebook shows it: highlighted HTML, collapsed under a one-line
    summary when longer than :data:`COLLAPSE_LINES`; its plain-text form is the code itself
    (so a re-executed notebook compares the source, line by line)."""

    def __init__(self, code: str, summary: str):
        self.code = code
        self.summary = summary

    def __repr__(self) -> str:
        return self.code

    def _repr_html_(self) -> str:
        import html

        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        body = highlight(self.code, PythonLexer(), HtmlFormatter(cssclass="highlight"))
        lines = self.code.count("\n") + 1
        if lines <= COLLAPSE_LINES:
            return f'<div class="book-listing">{body}</div>'
        summary = html.escape(f"{self.summary} ({lines} lines)")
        return f'<details class="book-listing"><summary>{summary}</summary>{body}</details>'


def listing(fn, *, docstring: bool = True, summary: str | None = None) -> Listing:
    """The library source of ``fn`` (see :func:`source`) as a :class:`Listing`. The summary
    defaults to the function's qualified name and the first line of its docstring.

    Raises :class:`attnlib.AttnInputError` if ``fn`` has no Python source or ``summary`` is
    not a string.
    """
    code = source(fn, docstring=docstring).rstrip("\n")
    if summary is None:
        target = _unwrap(fn)
        doc = (inspect.getdoc(target) or "").strip().split("\n\n")[0].replace("\n", " ")
        doc = re.sub(r":\w+:`~?([^`]*)`", r"\1", doc).replace("``", "")  # plain text
        name = f"{target.__module__}.{target.__qualname__}"
        summary = f"{name}: {doc}" if doc else name
    elif not isinstance(summary, str):
        raise AttnInputError(f"summary must be a string, got {type(summary).__name__}")
    return Listing(code, summary)


def show(*functions, docstring: bool = True) -> None:
    """Display the library source of each function as a :class:`Listing` (collapsed when it
    is longer than :data:`COLLAPSE_LINES` lines).

    Raises :class:`attnlib.AttnInputError` if a function has no Python source.
    """
    from IPython.display import display

    for fn in functions:
        display(listing(fn, docstring=docstring))


def markdown_table(header, rows) -> str:
    """A Markdown table: ``header`` is a sequence of column titles, ``rows`` of equal-length
    rows (cells are formatted with ``str``).

    Raises :class:`attnlib.AttnInputError` if a row's length differs from the header's.

    Examples
    --------
    >>> print(markdown_table(["n", "ok"], [(1, True)]))
    | n | ok |
    |---|---|
    | 1 | True |
    """
    header = [str(h) for h in header]
    if not header:
        raise AttnInputError("header must name at least one column")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for k, row in enumerate(rows):
        row = list(row)
        if len(row) != len(header):
            raise AttnInputError(
                f"rows[{k}] must have {len(header)} cells like the header, got {len(row)}"
            )
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    return "\n".join(lines)


def show_table(header, rows) -> None:
    """Display :func:`markdown_table` ``(header, rows)`` as rendered Markdown."""
    from IPython.display import Markdown, display

    display(Markdown(markdown_table(header, rows)))


def rel_err(a, b) -> float:
    """max|a − b| / max|b|: the max-norm relative error of ``a`` against the reference ``b``.

    Raises :class:`attnlib.AttnInputError` if the shapes differ, an entry is not finite, or
    ``b`` is zero everywhere.

    Examples
    --------
    >>> rel_err([1.0, 2.5], [1.0, 2.0])
    0.25
    """
    a = as_real_array("a", a, ndim=None)
    b = as_real_array("b", b, ndim=None)
    if a.shape != b.shape:
        raise AttnInputError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    scale = float(np.abs(b).max()) if b.size else 0.0
    if scale == 0.0:
        raise AttnInputError("b must have a nonzero entry (the error is relative to max|b|)")
    return float(np.abs(a - b).max()) / scale


def central_difference(f, x, h: float = 1e-6) -> np.ndarray:
    """∂f/∂x entry by entry, (f(x + h·e) − f(x − h·e)) / 2h, for a scalar function ``f`` of
    an array ``x``; ``x`` itself is never modified. The truncation error is O(h²), the
    rounding error about u·|f|/h.

    Raises :class:`attnlib.AttnInputError` if ``x`` is not a finite real array or ``h`` is not
    a positive number.
    """
    x = as_real_array("x", x, ndim=None).astype(np.float64)
    h = check_positive_real("h", h)
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        grad[idx] = (f(xp) - f(xm)) / (2 * h)
    return grad


_CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def median_time(
    fn, *args, clock: str = "cpu", min_repeats: int = 3, min_total: float = 0.2, max_repeats=50
) -> float:
    """Median seconds of ``fn(*args)`` over at least ``min_repeats`` calls, repeated until
    ``min_total`` seconds have passed or ``max_repeats`` calls were made.

    ``clock="cpu"`` is the process's CPU time (all its threads: hold BLAS and numba to one
    thread to time one core; it does not count other processes' load), ``"wall"`` the elapsed
    time. Raises :class:`attnlib.AttnInputError` on an unknown clock or bad counts.
    """
    if not callable(fn):
        raise AttnInputError(f"fn must be callable, got {type(fn).__name__}")
    check_choice("clock", clock, tuple(_CLOCKS))
    min_repeats = check_int("min_repeats", min_repeats)
    max_repeats = check_int("max_repeats", max_repeats, minimum=min_repeats)
    min_total = float(check_positive_real("min_total", min_total)) if min_total else 0.0
    now = _CLOCKS[clock]
    times: list[float] = []
    while len(times) < min_repeats or (sum(times) < min_total and len(times) < max_repeats):
        start = now()
        fn(*args)
        times.append(now() - start)
    return statistics.median(times)


def round_robin_times(
    calls: dict, *, rounds: int = 5, clock: str = "cpu", min_seconds: float = 0.02
) -> dict:
    """Median seconds of each call in ``calls`` ({key: (fn, args)}), timed round-robin: in
    each of ``rounds`` rounds every call is timed once, as the mean of enough back-to-back
    runs to last about ``min_seconds`` (counted from a first, untimed run).

    On a shared machine a slow spell lasts seconds to minutes; timing one size after another
    lets it fall on some sizes only and bend a fitted slope, while round-robin spreads it over
    all of them, so ratios and slopes between the calls survive it. ``clock`` as in
    :func:`median_time`.

    Raises :class:`attnlib.AttnInputError` on an empty or malformed ``calls``, an unknown
    clock or bad counts.

    Examples
    --------
    >>> t = round_robin_times({"short": (sum, (range(10),)), "long": (sum, (range(10**5),))})
    >>> t["short"] < t["long"]
    True
    """
    if not isinstance(calls, dict) or not calls:
        raise AttnInputError("calls must be a non-empty dict {key: (fn, args)}")
    for key, call in calls.items():
        if not (isinstance(call, tuple) and len(call) == 2 and callable(call[0])):
            raise AttnInputError(f"calls[{key!r}] must be a pair (fn, args) with fn callable")
        if not isinstance(call[1], tuple):
            raise AttnInputError(f"calls[{key!r}]: args must be a tuple")
    check_choice("clock", clock, tuple(_CLOCKS))
    rounds = check_int("rounds", rounds)
    min_seconds = float(check_positive_real("min_seconds", min_seconds))
    now = _CLOCKS[clock]
    repeats = {}
    for key, (fn, args) in calls.items():  # untimed for the result: it sets the repeats
        start = now()
        fn(*args)
        repeats[key] = max(1, math.ceil(min_seconds / max(now() - start, 1e-9)))
    times: dict = {key: [] for key in calls}
    for _ in range(rounds):
        for key, (fn, args) in calls.items():
            start = now()
            for _ in range(repeats[key]):
                fn(*args)
            times[key].append((now() - start) / repeats[key])
    return {key: statistics.median(t) for key, t in times.items()}


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

    Raises :class:`attnlib.AttnInputError` on a size or count below 1 or a dtype other than
    float32 and float64.
    """
    n = check_int("n", n)
    length = check_int("length", length)
    repeats = check_int("repeats", repeats)
    try:
        name = np.dtype(dtype).name
    except (TypeError, ValueError):
        name = repr(dtype)
    dtype = np.dtype(check_choice("dtype", name, ("float32", "float64")))
    rng = np.random.default_rng(0)
    A, B = rng.random((n, n)).astype(dtype), rng.random((n, n)).astype(dtype)
    C = np.empty((n, n), dtype=dtype)
    x, y = rng.random(length).astype(dtype), np.empty(length, dtype=dtype)
    t_mm = t_copy = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(A, B, out=C)
        t_mm = min(t_mm, time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.copyto(y, x)
        t_copy = min(t_copy, time.perf_counter() - t0)
    return 2 * n**3 / t_mm, 2 * length / t_copy


def _positive_pair(x, y, what: str):
    x = as_real_array("x", x)
    y = as_real_array(what, y)
    if x.shape != y.shape or x.size < 2:
        raise AttnInputError(
            f"x and {what} must be equal-length sequences of at least 2 points, "
            f"got {x.size} and {y.size}"
        )
    if (x <= 0).any() or (y <= 0).any():
        raise AttnInputError(f"x and {what} must be positive (they are fitted on log scales)")
    return x, y


def loglog_slope(x, y) -> float:
    """Least-squares slope of log y against log x: the exponent of a power law y ∝ x^slope.

    Raises :class:`attnlib.AttnInputError` unless x and y are equal-length positive sequences
    of at least two points.

    Examples
    --------
    >>> round(loglog_slope([1, 2, 4], [3, 12, 48]), 12)
    2.0
    """
    x, y = _positive_pair(x, y, "y")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def loglog_crossover(x, y1, y2) -> float | None:
    """The x where series y1 and y2 cross, by linear interpolation of log y1 − log y2 against
    log x between the first pair of neighbouring points where the sign changes (from y1 < y2
    to y1 ≥ y2). None if they never cross in the measured range.

    Raises :class:`attnlib.AttnInputError` unless x, y1 and y2 are equal-length positive
    sequences of at least two points.

    Examples
    --------
    >>> loglog_crossover([1, 4], [1, 16], [4, 4])
    2.0
    """
    x, y1 = _positive_pair(x, y1, "y1")
    _, y2 = _positive_pair(x, y2, "y2")
    diff = np.log(y1) - np.log(y2)
    for k in range(len(x) - 1):
        if diff[k] < 0 <= diff[k + 1]:
            lx0, lx1 = math.log(x[k]), math.log(x[k + 1])
            t = -diff[k] / (diff[k + 1] - diff[k])
            return float(math.exp(lx0 + t * (lx1 - lx0)))
    return None
