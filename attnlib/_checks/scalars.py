"""Checks of scalar arguments: reals in a range, integers, flags, choices, dtypes, the scale.

Every check accepts Python and numpy numbers of any size and raises nothing but
:class:`~attnlib._checks.error.AttnInputError` (a Python int beyond the float range included).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .error import AttnInputError

__all__ = [
    "check_real",
    "check_positive_real",
    "check_open_unit",
    "check_scale",
    "check_int",
    "describe_int",
    "check_bool",
    "check_choice",
    "check_float_dtype",
    "FLOAT_DTYPES",
]

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def check_real(
    name: str,
    value,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_minimum: bool = False,
    open_maximum: bool = False,
    expected: str | None = None,
    finite: bool = True,
) -> float:
    """Require a finite real number in the given range and return it as a float.

    Python ints of any size, floats and numpy scalars are accepted; bools, strings, complex
    numbers and NaN or infinite values are refused. A Python int too large for a float
    (``10**400``) is refused with the same message, never an ``OverflowError``. With
    ``finite=False`` (and no range), NaN and ±inf are returned as they are.
    """
    if expected is None:
        parts = []
        if minimum is not None:
            parts.append(f"{'>' if open_minimum else '>='} {minimum:g}")
        if maximum is not None:
            parts.append(f"{'<' if open_maximum else '<='} {maximum:g}")
        real = "a finite real number" if finite else "a real number"
        expected = real + (" " + " and ".join(parts) if parts else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise AttnInputError(f"{name} must be {expected}, got {value!r:.60}")
    try:
        v = float(value)
    except (OverflowError, ValueError, TypeError):
        raise AttnInputError(f"{name} must be {expected}, got {value!r:.60}") from None
    if not math.isfinite(v):
        if not finite and minimum is None and maximum is None:
            return v
        raise AttnInputError(f"{name} must be {expected}, got {value!r:.60}")
    if minimum is not None and (v <= minimum if open_minimum else v < minimum):
        raise AttnInputError(f"{name} must be {expected}, got {value!r:.60}")
    if maximum is not None and (v >= maximum if open_maximum else v > maximum):
        raise AttnInputError(f"{name} must be {expected}, got {value!r:.60}")
    return v


def check_positive_real(name: str, value) -> float:
    """Require a finite real number > 0 and return it as a float."""
    return check_real(
        name, value, minimum=0.0, open_minimum=True, expected="a positive finite real number"
    )


def check_open_unit(name: str, value) -> float:
    """Require a real number strictly between 0 and 1 (an accuracy such as ``eps``)."""
    return check_real(
        name,
        value,
        minimum=0.0,
        maximum=1.0,
        open_minimum=True,
        open_maximum=True,
        expected="a real number in (0, 1)",
    )


def check_scale(scale, d: int) -> float:
    """The softmax scale: ``1/sqrt(d)`` if ``scale is None``, else a finite positive float."""
    if scale is None:
        return 1.0 / math.sqrt(d)
    return check_positive_real("scale", scale)


def check_int(name: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
    """Require an integer in ``[minimum, maximum]`` (numpy integers accepted, bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise AttnInputError(f"{name} must be an integer >= {minimum}, got {value!r:.60}")
    v = int(value)
    if v < minimum:
        raise AttnInputError(f"{name} must be an integer >= {minimum}, got {describe_int(v)}")
    if maximum is not None and v > maximum:
        raise AttnInputError(f"{name} must be an integer <= {maximum}, got {describe_int(v)}")
    return v


def describe_int(v: int) -> str:
    """An int for a message: digits up to 30 of them, else its order of magnitude."""
    text = str(v) if v.bit_length() < 100 else None
    if text is not None and len(text) <= 30:
        return text
    return f"~10^{int(v.bit_length() * math.log10(2))}"


def check_bool(name: str, value) -> bool:
    """Require a bool (Python or numpy); strings such as ``"no"`` and ints are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise AttnInputError(f"{name} must be a bool (True or False), got {value!r:.60}")
    return bool(value)


def check_choice(name: str, value, choices) -> str:
    """Require one of ``choices`` (compared by equality, unhashable values refused)."""
    try:
        ok = any(isinstance(value, str) == isinstance(c, str) and value == c for c in choices)
    except Exception:  # an array compared to a string, and the like
        ok = False
    if not ok:
        raise AttnInputError(f"{name} must be one of {tuple(choices)}, got {value!r:.60}")
    return value


def check_float_dtype(name: str, dtype) -> np.dtype:
    """Require float32 or float64, given as a name (``"float32"``), a numpy type, ``float``
    or a dtype; returns the dtype. (``np.dtype(None)`` is float64, so None is refused here
    explicitly.)"""
    dt = None
    if isinstance(dtype, np.dtype):
        dt = dtype
    elif (
        isinstance(dtype, str)
        or dtype is float
        or (isinstance(dtype, type) and issubclass(dtype, np.generic))
    ):
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
    if dt is None or not any(dt == f for f in FLOAT_DTYPES):
        raise AttnInputError(f"{name} must be 'float32' or 'float64', got {dtype!r:.60}")
    return dt
