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

from ._checks import (
    AttnInputError,
    as_real_array,
    check_bool,
    check_choice,
    check_float_dtype,
    check_int,
    check_memory_parts,
    check_positive_real,
    check_real,
    describe_int,
)
from .config import MAX_REPEATS

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
    "MAX_SECONDS",
]


def below(value, bound) -> str:
    """``"< bound"`` after checking that ``value < bound``: the printed form of round-off.

    Raises :class:`attnlib.AttnInputError` if ``value`` is not a real number that fits a float
    or ``bound`` is not a positive finite number, and :class:`AssertionError` if ``value`` is
    not below it (NaN and inf included: the claim the text makes is false).

    Examples
    --------
    >>> below(2.2e-16, 1e-13)
    '< 1e-13'
    """
    x = check_real("value", value, finite=False)
    b = check_positive_real("bound", bound)
    assert x < b, f"{x!r} is not below {b:g}"
    return f"< {b:.0e}"


def error_text(value, floor=1e-12) -> str:
    """Two significant digits (``"3.1e-07"``) at or above ``floor``, ``"< floor"`` below it.

    Use it for a measured error that is a result at some settings and round-off at others: the
    digits of round-off differ between machines, its being below the floor does not.

    Raises :class:`attnlib.AttnInputError` if ``value`` is not a finite real number (a NaN
    or infinite error is a broken computation, not a measurement) or ``floor`` is not a
    positive finite number.

    Examples
    --------
    >>> error_text(3.14159e-7), error_text(4e-16)
    ('3.1e-07', '< 1e-12')
    """
    x = check_real("value", value)
    f = check_positive_real("floor", floor)
    return f"< {f:.0e}" if abs(x) < f else f"{x:.1e}"


def significant(value, digits: int = 3) -> float:
    """``value`` rounded to ``digits`` significant digits: the form in which a measured number
    is glued into the prose.

    Raises :class:`attnlib.AttnInputError` if ``value`` is not a finite real number,
    ``digits`` is not an integer from 1 to 15, or the rounded value overflows a float (a value
    near the float maximum rounded up).

    Examples
    --------
    >>> significant(7.962867387297144), significant(0.0006547701978833, 2)
    (7.96, 0.00065)
    """
    x = check_real("value", value)
    digits = check_int("digits", digits, minimum=1, maximum=15)
    rounded = float(f"{x:.{digits - 1}e}")
    if not math.isfinite(rounded):
        raise AttnInputError(
            f"value rounded to {digits} significant digits overflows a float, got {value!r:.60}"
        )
    return rounded


def glue_number(name: str, value, digits: int = 3) -> None:
    """Glue ``value`` into the prose under ``name`` (``myst_nb.glue``, not displayed): a float
    rounded to ``digits`` significant digits (:func:`significant`), an integer as it is.

    Raises :class:`attnlib.AttnInputError` if ``name`` is not a non-empty string, ``value``
    is not a finite real number or ``digits`` is not an integer from 1 to 15.
    """
    from myst_nb import glue

    if not isinstance(name, str) or not name:
        raise AttnInputError(f"name must be a non-empty string, got {name!r:.60}")
    digits = check_int("digits", digits, minimum=1, maximum=15)
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
    the body only (a docstring that shares a line with other code is kept). Raises
    :class:`attnlib.AttnInputError` if ``fn`` is not a function or class defined in Python
    source, or ``docstring`` is not a bool.

    Examples
    --------
    >>> print(source(significant, docstring=False).splitlines()[1])
        x = check_real("value", value)
    """
    docstring = check_bool("docstring", docstring)
    fn = _unwrap(fn)
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise AttnInputError(f"fn must be defined in Python source, got {fn!r:.60}") from exc
    if docstring:
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:  # a lambda inside a larger expression: its lines do not parse alone
        raise AttnInputError(
            f"fn must be a function or class whose source parses on its own, got {fn!r:.60}"
        ) from None
    node = tree.body[0]
    body = getattr(node, "body", [])
    first = body[0] if isinstance(body, list) and body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return text
    shared = {node.lineno} | {stmt.lineno for stmt in body[1:2]}
    if shared & set(range(first.lineno, first.end_lineno + 1)):
        return text  # the docstring shares a line with code: cutting its lines would cut code
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

    Raises :class:`attnlib.AttnInputError` if ``fn`` has no Python source, ``docstring`` is
    not a bool or ``summary`` is not a string.
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

    Raises :class:`attnlib.AttnInputError` if a function has no Python source or ``docstring``
    is not a bool; nothing is displayed then.
    """
    from IPython.display import display

    shown = [listing(fn, docstring=docstring) for fn in functions]
    for item in shown:
        display(item)


def markdown_table(header, rows) -> str:
    """A Markdown table: ``header`` is a sequence of column titles, ``rows`` of equal-length
    rows (cells are formatted with ``str``; a ``|`` in a cell is escaped, so it shows as
    itself instead of starting a new column).

    Raises :class:`attnlib.AttnInputError` if ``header`` or a row is not a sequence (a string
    is not: its characters would become cells), a row's length differs from the header's, a
    cell's text holds a line break (a table row is one line), or the table would exceed
    :data:`attnlib.config.MAX_ALLOCATION_BYTES`.

    Examples
    --------
    >>> print(markdown_table(["n", "ok"], [(1, True)]))
    | n | ok |
    |---|---|
    | 1 | True |
    >>> print(markdown_table(["norm"], [["|x|"]]).splitlines()[-1])
    | \\|x\\| |
    """
    header = [_cell("header", j, h) for j, h in enumerate(_cells("header", header))]
    if not header:
        raise AttnInputError("header must name at least one column")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise AttnInputError(f"rows must be a sequence of rows, got {rows!r:.60}")
    try:
        rows = iter(rows)
    except TypeError:  # a 0-d array
        raise AttnInputError(f"rows must be a sequence of rows, got {rows!r:.60}") from None
    cells = len(header)
    for k, row in enumerate(rows):
        row = _cells(f"rows[{k}]", row)
        cells += len(row)
        check_memory_parts("markdown_table", [(_CELL_BYTES * cells, "its cells", "rows")])
        if len(row) != len(header):
            raise AttnInputError(
                f"rows[{k}] must have {len(header)} cells like the header, got {len(row)}"
            )
        lines.append("| " + " | ".join(_cell(f"rows[{k}]", j, x) for j, x in enumerate(row)) + " |")
    return "\n".join(lines)


#: Bytes per cell of a table (its Python object and text), for the memory guard.
_CELL_BYTES = 128


def _cells(name: str, row) -> list:
    """A header or row as a list of cells; a string or a non-iterable is refused, and so is a
    row too long for memory (a broadcast view of 10⁹ entries, say)."""
    if isinstance(row, (str, bytes)):
        raise AttnInputError(f"{name} must be a sequence of cells, got {row!r:.60}")
    try:
        length = len(row)
    except TypeError:
        length = None
    if length is not None:
        check_memory_parts("markdown_table", [(_CELL_BYTES * length, f"{name}'s cells", name)])
    try:
        return list(row)
    except TypeError:  # not iterable, or a 0-d array
        raise AttnInputError(f"{name} must be a sequence of cells, got {row!r:.60}") from None


def _cell(name: str, j: int, value) -> str:
    """A cell's text, its ``|`` escaped; a line break is refused (it would end the row)."""
    text = str(value)
    if "\n" in text or "\r" in text:
        raise AttnInputError(f"{name}[{j}] must be one line of text, got {text!r:.60}")
    return text.replace("|", "\\|")


def show_table(header, rows) -> None:
    """Display :func:`markdown_table` ``(header, rows)`` as rendered Markdown."""
    from IPython.display import Markdown, display

    display(Markdown(markdown_table(header, rows)))


def rel_err(a, b) -> float:
    """max|a − b| / max|b|: the max-norm relative error of ``a`` against the reference ``b``.

    The differences are taken in float64 (float32 inputs included), and without overflow:
    ``rel_err([1e308], [-1e308])`` is 2.0. A result beyond the float range is inf.

    Raises :class:`attnlib.AttnInputError` if the shapes differ, an entry is not finite,
    ``b`` is zero everywhere, or the float64 differences would exceed
    :data:`attnlib.config.MAX_ALLOCATION_BYTES`.

    Examples
    --------
    >>> rel_err([1.0, 2.5], [1.0, 2.0])
    0.25
    """
    a = as_real_array("a", a, ndim=None)
    b = as_real_array("b", b, ndim=None)
    if a.shape != b.shape:
        raise AttnInputError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    check_memory_parts("rel_err", [(16 * a.size, "the differences a - b", "a or b")])
    scale = max(float(b.max()), -float(b.min()))
    if scale == 0.0:
        raise AttnInputError("b must have a nonzero entry (the error is relative to max|b|)")
    with np.errstate(over="ignore"):
        diff = np.subtract(a, b, dtype=np.float64)
    err = float(np.abs(diff, out=diff).max())
    if math.isinf(err):  # a - b overflowed: halving is exact for such large numbers
        np.multiply(a, 0.5, out=diff, dtype=np.float64)
        diff -= np.multiply(b, 0.5, dtype=np.float64)
        return float(np.abs(diff, out=diff).max()) / scale * 2
    return err / scale


def central_difference(f, x, h: float = 1e-6) -> np.ndarray:
    """∂f/∂x entry by entry, (f(x + h·e) − f(x − h·e)) / 2h, for a scalar function ``f`` of
    an array ``x``; ``x`` itself is never modified. The truncation error is O(h²), the
    rounding error about u·|f|/h.

    Raises :class:`attnlib.AttnInputError` if ``f`` is not callable or does not return a
    finite real number, ``x`` is not a finite real array, ``h`` is not a positive number, or
    x ± h rounds back to x (h too small for that entry) or overflows (h too large).
    """
    if not callable(f):
        raise AttnInputError(f"f must be a function of an array, got {f!r:.60}")
    x = as_real_array("x", x, ndim=None)
    h = check_positive_real("h", h)
    # x in float64, its two shifted copies and the gradient, as large as x looks
    check_memory_parts("central_difference", [(32 * x.size, "x, x ± h and the gradient", "x")])
    x = x.astype(np.float64)
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        with np.errstate(over="ignore"):  # refused just below
            xp[idx] += h
            xm[idx] -= h
        if not (np.isfinite(xp[idx]) and np.isfinite(xm[idx])):
            raise AttnInputError(f"h={h:g} is too large: x{list(idx)} ± h overflows")
        if xp[idx] == x[idx] or xm[idx] == x[idx]:
            raise AttnInputError(
                f"h={h:g} is too small for x{list(idx)} = {x[idx]!r}: x ± h rounds back to x"
            )
        step = _value("f", f(xp)) - _value("f", f(xm))
        grad[idx] = step / (2 * h)
        if not math.isfinite(grad[idx]):
            raise AttnInputError(
                f"the difference quotient at x{list(idx)} overflows: f's values are too large for h"
            )
    return grad


def _value(name: str, v) -> float:
    """A function's value as a float: a finite real number, or a 0-d array of one."""
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    return check_real(name, v, expected="a function returning a finite real number")


_CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}

#: The longest a timed call of :func:`round_robin_times` may be asked to last, in seconds
#: (an hour): beyond it the number of back-to-back runs is no longer a timing choice.
MAX_SECONDS = 3600.0


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
    clock, bad counts (``rounds`` at most :data:`attnlib.config.MAX_REPEATS`), or a
    ``min_seconds`` that is not positive or exceeds :data:`MAX_SECONDS`.

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
    rounds = check_int("rounds", rounds, maximum=MAX_REPEATS)
    min_seconds = check_real(
        "min_seconds", min_seconds, minimum=0.0, open_minimum=True, maximum=MAX_SECONDS
    )
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
