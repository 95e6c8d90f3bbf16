"""What the chapters share: numbers that reproduce, sources, tables, errors and gradients.

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

Checking a computation: :func:`rel_err`, :func:`central_difference`. Timers, traced memory,
machine rates and power-law fits are in :mod:`attnlib.measure`.
"""

from __future__ import annotations

import ast
import inspect
import math
import numbers
import re
import textwrap

import numpy as np

from ._checks import (
    AttnInputError,
    as_entries,
    as_real_array,
    check_bool,
    check_int,
    check_memory_parts,
    check_positive_real,
    check_real,
)

__all__ = [
    "below",
    "error_text",
    "significant",
    "glue_number",
    "source",
    "show",
    "listing",
    "Listing",
    "COLLAPSE_LINES",
    "markdown_table",
    "show_table",
    "rel_err",
    "central_difference",
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
    header = as_entries("header", header, of="cells", entry_bytes=_CELL_BYTES, what=_TABLE)
    header = [_cell("header", j, h) for j, h in enumerate(header)]
    if not header:
        raise AttnInputError("header must name at least one column")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    # every row holds len(header) cells: a bound on the rows before any is read
    rows = as_entries("rows", rows, of="rows", entry_bytes=_CELL_BYTES * len(header), what=_TABLE)
    cells = len(header)
    for k, row in enumerate(rows):
        row = as_entries(f"rows[{k}]", row, of="cells", entry_bytes=_CELL_BYTES, what=_TABLE)
        cells += len(row)
        check_memory_parts(_TABLE, [(_CELL_BYTES * cells, "its cells", "rows")])
        if len(row) != len(header):
            raise AttnInputError(
                f"rows[{k}] must have {len(header)} cells like the header, got {len(row)}"
            )
        lines.append("| " + " | ".join(_cell(f"rows[{k}]", j, x) for j, x in enumerate(row)) + " |")
    return "\n".join(lines)


#: Bytes per cell of a table (its Python object and text), for the memory guard.
_CELL_BYTES = 128
_TABLE = "markdown_table"


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
