"""What the chapters share: printing numbers that reproduce on every reader's machine.

A chapter's committed output is compared, digit for digit, with a re-execution on the reader's
machine, whose CPU, BLAS kernel and thread count round differently. So a number is printed
only to the precision that survives such a change:

* a quantity at round-off level (an agreement between two exact formulas, say) is printed as a
  bound, ``< 1e-13``, next to an ``assert`` of that bound: :func:`below`;
* a measured error that may or may not be at round-off level is printed with two significant
  digits above a floor and as ``< floor`` below it: :func:`error_text`;
* a value glued into the prose (``myst_nb.glue``) is rounded first, so the stored value carries
  no digit the prose does not use: :func:`significant`.
"""

from __future__ import annotations

import math
import numbers

from ._checks import AttnInputError

__all__ = ["below", "error_text", "significant"]


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
