"""Checks of array arguments: float dtypes, dimensions, shapes, finiteness, boolean masks.

The checks run in bounded memory: finiteness is tested by two reductions (``min``, ``max``)
over the array's own memory (a zero-stride broadcast view is reduced to its distinct entries
first), and an offending entry is located a block at a time. They never copy or modify their
inputs except to convert array-likes to arrays.
"""

from __future__ import annotations

import numbers

import numpy as np

from .error import AttnInputError
from .memory import check_memory
from .scalars import FLOAT_DTYPES

__all__ = [
    "as_float_array",
    "as_real_array",
    "as_series",
    "check_cols",
    "check_rows",
    "check_shape",
    "check_mask",
    "check_mask_2d",
    "check_index_array",
    "float_dtype",
    "max_abs",
]


def _describe_dtype(dt: np.dtype) -> str:
    return f"dtype {dt}"


def _as_array(name: str, a) -> np.ndarray:
    if a is None:
        raise AttnInputError(f"{name} must be an array, got None")
    try:
        return np.asarray(a)
    except Exception as exc:  # ragged lists and the like
        raise AttnInputError(
            f"{name} must be convertible to a numeric array ({str(exc):.200})"
        ) from exc


def as_float_array(
    name: str,
    a,
    *,
    ndim: int | None = 2,
    allow_nonfinite: bool = False,
    allow_neg_inf: bool = False,
) -> np.ndarray:
    """Return ``a`` as a float32/float64 ndarray, or raise :class:`AttnInputError`.

    Rejects integer, boolean, complex and object dtypes, the wrong number of dimensions,
    empty arrays, and (unless allowed) NaN or infinite entries. ``allow_neg_inf`` admits
    ``-inf`` but not NaN or ``+inf`` (used for the log-sum-exp of fully masked rows).
    """
    arr = _as_array(name, a)
    if arr.dtype not in FLOAT_DTYPES:
        kind = {
            "i": "integer",
            "u": "unsigned integer",
            "b": "boolean",
            "c": "complex",
            "O": "object",
        }.get(arr.dtype.kind, str(arr.dtype))
        raise AttnInputError(
            f"{name} must have a float32 or float64 dtype, got {kind} {_describe_dtype(arr.dtype)}"
        )
    if ndim is not None and arr.ndim != ndim:
        raise AttnInputError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise AttnInputError(f"{name} must be non-empty, got shape {arr.shape}")
    if not allow_nonfinite:
        _check_finite(name, arr, allow_neg_inf)
    return arr


#: Entries per block when an offending entry is located (a bool temporary of this size).
_BLOCK_ENTRIES = 1 << 20


def _distinct_view(arr: np.ndarray) -> np.ndarray:
    """``arr`` with every zero-stride axis (a broadcast axis) cut to length 1: a view holding
    each distinct memory location of a broadcast view once, whatever its apparent size."""
    cut = tuple(
        slice(0, 1) if stride == 0 and length > 1 else slice(None)
        for stride, length in zip(arr.strides, arr.shape, strict=True)
    )
    return arr[cut]


def _check_finite(name: str, arr: np.ndarray, allow_neg_inf: bool) -> None:
    """Refuse NaN and ±inf (only NaN and +inf with ``allow_neg_inf``) in bounded memory.

    ``min`` and ``max`` propagate NaN and need no temporary of the array's size, unlike
    ``np.isfinite(arr)``, which would allocate a byte per entry of a zero-copy view of 10⁹
    rows. They run over the distinct entries only (:func:`_distinct_view`); the first offending
    index in C order is then the one reported, found a block at a time.
    """
    u = _distinct_view(arr)
    if u.ndim == 0:
        u = u.reshape(1)
    hi = u.max()
    if allow_neg_inf:
        if hi < np.inf:  # False for NaN too
            return
    elif np.isfinite(hi) and np.isfinite(u.min()):
        return
    for start, block in _blocks(u):
        bad = ~np.isfinite(block)
        if allow_neg_inf:
            bad &= ~np.isneginf(block)
        if bad.any():
            local = np.argwhere(bad)[0]
            index = (*start[:-1], start[-1] + int(local[0]), *(int(i) for i in local[1:]))
            if arr.ndim == 0:
                index = ()
            what = "finite or -inf (no NaN or +inf)" if allow_neg_inf else "finite (no NaN or inf)"
            raise AttnInputError(f"{name} must be {what}, found {arr[index]} at index {index}")
    raise AssertionError("unreachable: min or max was not finite")  # pragma: no cover


def _blocks(a: np.ndarray, limit: int = _BLOCK_ENTRIES):
    """Pairs ``(start, block)`` covering ``a`` (ndim >= 1) in C order: ``block`` is
    ``a[start[:-1]][start[-1]:start[-1] + rows]``, at most ``limit`` entries unless a single
    entry is larger."""
    inner = a[0].size if a.shape[0] else 0
    if a.ndim == 1 or 0 < inner <= limit:
        rows = max(1, limit // max(1, inner))
        for i0 in range(0, a.shape[0], rows):
            yield (i0,), a[i0 : i0 + rows]
        return
    for i in range(a.shape[0]):
        for start, block in _blocks(a[i], limit):
            yield (i, *start), block


def check_cols(name: str, a: np.ndarray, cols: int, like: str, what: str = "d") -> None:
    """Require ``a.shape[1] == cols`` (the same inner dimension as argument ``like``)."""
    if a.shape[1] != cols:
        raise AttnInputError(
            f"{name} must have {what}={cols} columns like {like}, got {a.shape[1]}"
        )


def check_rows(name: str, a: np.ndarray, rows: int, like: str, what: str = "m") -> None:
    """Require ``a.shape[0] == rows`` (the same number of rows as argument ``like``)."""
    if a.shape[0] != rows:
        raise AttnInputError(f"{name} must have {what}={rows} rows like {like}, got {a.shape[0]}")


def check_shape(name: str, a: np.ndarray, shape: tuple[int, ...], meaning: str) -> None:
    """Require an exact shape; ``meaning`` spells it out, e.g. ``"(n, d_v) like O"``."""
    if a.shape != tuple(shape):
        raise AttnInputError(f"{name} must have shape {meaning} = {tuple(shape)}, got {a.shape}")


def float_dtype(*arrays: np.ndarray) -> np.dtype:
    """The common float dtype: float32 only if every input is float32."""
    return np.result_type(*arrays)


def as_real_array(
    name: str, a, *, ndim: int | None = 1, allow_nonfinite: bool = False
) -> np.ndarray:
    """Like :func:`as_float_array`, but integer arrays (not booleans) are accepted and
    converted to float64 (e.g. a list ``[1, 2, 4]``)."""
    arr = _as_array(name, a)
    if arr.dtype.kind in "iu":
        check_memory(f"{name} converted to float64", 8 * arr.size, culprits=name)
        arr = arr.astype(np.float64)
    return as_float_array(name, arr, ndim=ndim, allow_nonfinite=allow_nonfinite)


def as_series(
    name: str,
    values,
    *,
    size: int | None = None,
    like: str | None = None,
    min_size: int = 1,
    positive: bool = False,
    missing: bool = False,
) -> np.ndarray:
    """A 1-D series of real numbers (the x or y values of a figure, say) as a float array.

    Lists, tuples and arrays of floats or ints are accepted, Python ints of any size that fit
    a float included (a rank C(g+d, d), say); booleans, strings, complex numbers and ±inf are
    refused. The series has exactly ``size`` entries when it is given (``like`` names the
    argument that sets it), else at least ``min_size``; with ``positive`` every entry is
    > 0 (a log axis, a fit on a log scale); with ``missing`` an entry may be NaN, a point that
    is missing (never drawn). Returns a float32 array for float32 input, else float64.

    Examples
    --------
    >>> as_series("ns", [64, 128, 2**70]).tolist()
    [64.0, 128.0, 1.1805916207174113e+21]
    >>> as_series("flash", [1.0, -2.0], size=2, like="ns", positive=True)
    Traceback (most recent call last):
        ...
    attnlib._checks.error.AttnInputError: flash must be positive, got -2.0 at index 1
    """
    arr = _as_array(name, values)
    if arr.dtype == object and arr.ndim == 1:
        # Python ints beyond int64 (and mixtures with them) arrive as objects: convert the
        # real numbers among them, and leave anything else to the dtype check below
        if all(isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)) for x in arr):
            try:
                arr = arr.astype(np.float64)
            except OverflowError:
                raise AttnInputError(
                    f"{name} must hold real numbers within the float range, got {values!r:.60}"
                ) from None
    arr = as_real_array(name, arr, ndim=1, allow_nonfinite=missing)
    if size is not None and arr.size != size:
        source = f" like {like}" if like else ""
        raise AttnInputError(f"{name} must have {size} entries{source}, got {arr.size}")
    if arr.size < min_size:
        raise AttnInputError(f"{name} must have at least {min_size} entries, got {arr.size}")
    u = _distinct_view(arr)
    # fmin and fmax skip NaN (a missing point), so these two reductions see every other entry
    if missing and (np.fmax.reduce(u) == np.inf or np.fmin.reduce(u) == -np.inf):
        i = _first(arr, np.isinf)
        raise AttnInputError(
            f"{name} must be finite (NaN marks a missing point), got {arr[i]} at index {i}"
        )
    if positive and not np.fmin.reduce(u) > 0:
        i = _first(arr, lambda block: block <= 0)
        raise AttnInputError(f"{name} must be positive, got {float(arr[i])!r} at index {i}")
    return arr


def _first(arr: np.ndarray, test) -> int:
    """The first index of the 1-D ``arr`` where ``test`` (elementwise) holds, found a block at
    a time (a bool temporary of at most :data:`_BLOCK_ENTRIES`)."""
    for (start,), block in _blocks(arr):
        hits = test(block)
        if hits.any():
            return start + int(hits.argmax())  # the first True
    raise AssertionError("unreachable: a reduction found an entry that no block holds")


def check_mask(mask, n: int, m: int) -> np.ndarray | None:
    """Validate a boolean keep-mask of shape (n, m); ``True`` keeps a score."""
    if mask is None:
        return None
    arr = _as_array("mask", mask)
    if arr.dtype != np.bool_:
        raise AttnInputError(f"mask must have a boolean dtype (True = keep), got dtype {arr.dtype}")
    if arr.shape != (n, m):
        raise AttnInputError(f"mask must have shape (n, m) = {(n, m)}, got {arr.shape}")
    return arr


def check_mask_2d(mask) -> np.ndarray:
    """Validate a boolean keep-mask of any 2-D shape (True keeps a score): the mask of a
    bound or a density, whose sizes the mask itself sets."""
    arr = _as_array("mask", mask)
    if arr.dtype != np.bool_ or arr.ndim != 2:
        raise AttnInputError(
            f"mask must be a 2-D boolean array (True = keep), got {arr.dtype} {arr.shape}"
        )
    return arr


def check_index_array(name: str, a) -> np.ndarray:
    """A 1-D array of integer indices (global row numbers, say), possibly empty."""
    arr = _as_array(name, a)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise AttnInputError(f"{name} must be a 1-D integer array, got {arr.dtype} {arr.shape}")
    return arr


def max_abs(a: np.ndarray) -> float:
    """max |a| of a non-empty real array, as a Python float, in bounded memory.

    Two reductions (``min``, ``max``) over the array's distinct entries
    (:func:`_distinct_view`), where ``np.abs(a).max()`` would first allocate a copy as large as
    the array looks (a broadcast view of 10⁹ rows included). NaN propagates.

    Examples
    --------
    >>> max_abs(np.array([[-3.0, 2.0]]))
    3.0
    """
    u = _distinct_view(a)
    return max(-float(u.min()), float(u.max()))
