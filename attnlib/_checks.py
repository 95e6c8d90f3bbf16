"""Input validation shared by every public function of attnlib.

Every check raises :class:`AttnInputError`, a :class:`ValueError` whose message names
the argument and says what was expected, e.g. ``K must have d=64 columns like Q, got 32``.
The checks never copy or modify their inputs except to convert array-likes to arrays.

Scalars: :func:`check_real` (and its forms :func:`check_positive_real`,
:func:`check_open_unit`), :func:`check_int`, :func:`check_bool` and :func:`check_choice` accept
Python and numpy numbers of any size and never raise anything but :class:`AttnInputError`
(a Python int beyond the float range included). Sizes: :func:`check_memory` refuses, before
anything is allocated, a call whose working memory exceeds :data:`MAX_ALLOCATION_BYTES` (or
the function's ``memory_budget``); :func:`check_memory_parts` names the part that dominates.

The checks themselves run in bounded memory: finiteness is tested by two reductions
(``min``, ``max``) over the array's own memory (a zero-stride broadcast view is reduced to its
distinct entries first), and an offending entry is located a block at a time.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .config import MAX_ALLOCATION_BYTES

__all__ = [
    "AttnInputError",
    "as_float_array",
    "check_cols",
    "check_rows",
    "check_shape",
    "check_scale",
    "check_mask",
    "check_int",
    "check_real",
    "check_positive_real",
    "check_open_unit",
    "check_bool",
    "check_choice",
    "check_memory",
    "check_memory_parts",
    "conversion_parts",
    "distinct_view",
    "check_float_dtype",
    "describe_int",
    "MAX_ALLOCATION_BYTES",
    "as_real_array",
    "float_dtype",
    "check_qkv",
    "check_backward_inputs",
    "check_loss_inputs",
]

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class AttnInputError(ValueError):
    """An argument of an attnlib function has the wrong shape, dtype, size or value."""


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


def distinct_view(arr: np.ndarray) -> np.ndarray:
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
    rows. They run over the distinct entries only (:func:`distinct_view`); the first offending
    index in C order is then the one reported, found a block at a time.
    """
    u = distinct_view(arr)
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
            what = "-inf, " if allow_neg_inf else ""
            raise AttnInputError(
                f"{name} must be finite ({what}no NaN or inf), found {arr[index]} at index {index}"
            )
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


def check_scale(scale, d: int) -> float:
    """The softmax scale: ``1/sqrt(d)`` if ``scale is None``, else a finite positive float."""
    if scale is None:
        return 1.0 / math.sqrt(d)
    return check_positive_real("scale", scale)


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


def _fmt_bytes(b: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{int(b)} bytes"


def check_memory(what: str, nbytes, *, budget=None, culprits: str = "") -> int:
    """Refuse, before allocating, a call whose working memory ``nbytes`` exceeds ``budget``
    (default :data:`MAX_ALLOCATION_BYTES`). ``what`` says what would be allocated and
    ``culprits`` names the arguments that set its size, e.g. ``"n_clauses or n_vars"``.

    ``nbytes`` is an exact int (no float overflow at any size). Returns it.
    """
    limit = MAX_ALLOCATION_BYTES if budget is None else budget
    nbytes = int(nbytes)
    if nbytes > limit:
        size = _size(nbytes)
        who = f"; {culprits} is too large" if culprits else ""
        raise AttnInputError(
            f"{what} would need {size}, over the limit of {_fmt_bytes(limit)}{who}"
        )
    return nbytes


def check_memory_parts(what: str, parts, *, budget=None) -> int:
    """:func:`check_memory` for working memory made of several parts, each sized by some of the
    arguments: ``parts`` holds triples ``(nbytes, description, culprits)``, e.g.
    ``(8 * n * m, "the n × m scores", "Q or K")``. A refusal says what ``what`` would need in
    all, names the largest part and blames its culprits. Returns the total in bytes.

    Examples
    --------
    >>> check_memory_parts("f", [(2**20, "the scores", "Q or K"), (8, "lse", "Q")])
    1048584
    >>> check_memory_parts("f", [(2**40, "the scores", "Q or K")])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    attnlib._checks.AttnInputError: f would need 1 TiB ... (1 TiB); Q or K is too large
    """
    parts = [(int(b), desc, who) for b, desc, who in parts]
    total = sum(b for b, _, _ in parts)
    limit = MAX_ALLOCATION_BYTES if budget is None else budget
    if total > limit:
        nbytes, desc, who = max(parts, key=lambda part: part[0])
        raise AttnInputError(
            f"{what} would need {_size(total)} of working memory, over the limit of "
            f"{_fmt_bytes(limit)}, most of it for {desc} ({_size(nbytes)}); {who} is too large"
        )
    return total


def conversion_parts(dtype, arrays: dict) -> list:
    """The :func:`check_memory_parts` parts of converting each of ``arrays`` ({argument name:
    array}) to ``dtype``: a copy of every array of another dtype, as large as the array looks
    (a broadcast view becomes a full array)."""
    dtype = np.dtype(dtype)
    return [
        (a.size * dtype.itemsize, f"{name} converted to {dtype}", name)
        for name, a in arrays.items()
        if a.dtype != dtype
    ]


def _size(nbytes: int) -> str:
    return _fmt_bytes(nbytes) if nbytes < 2**1000 else f"~2^{nbytes.bit_length()} bytes"


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


def as_real_array(name: str, a, *, ndim: int | None = 1) -> np.ndarray:
    """Like :func:`as_float_array`, but integer arrays (not booleans) are accepted and
    converted to float64 (e.g. a list ``[1, 2, 4]``)."""
    arr = _as_array(name, a)
    if arr.dtype.kind in "iu":
        check_memory(f"{name} converted to float64", 8 * arr.size, culprits=name)
        arr = arr.astype(np.float64)
    return as_float_array(name, arr, ndim=ndim)


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


# ---- argument bundles shared by every attention implementation ---------------------------


def check_qkv(Q, K, V):
    """Validate attention inputs Q (n, d), K (m, d), V (m, d_v); return them as arrays."""
    Q = as_float_array("Q", Q)
    K = as_float_array("K", K)
    V = as_float_array("V", V)
    check_cols("K", K, Q.shape[1], "Q")
    check_rows("V", V, K.shape[0], "K")
    return Q, K, V


def check_backward_inputs(Q, K, V, O, dO, lse, *, allow_masked_rows: bool = True):
    """Validate the arguments of a backward pass: Q, K, V as in :func:`check_qkv`, then
    O and dO (n, d_v) and lse (n,). ``lse`` may hold -inf (a fully masked row) only when
    ``allow_masked_rows``; it never holds NaN or +inf."""
    Q, K, V = check_qkv(Q, K, V)
    n, dv = Q.shape[0], V.shape[1]
    O = as_float_array("O", O)
    check_shape("O", O, (n, dv), "(n, d_v)")
    dO = as_float_array("dO", dO)
    check_shape("dO", dO, (n, dv), "(n, d_v) like O")
    lse = as_float_array("lse", lse, ndim=1, allow_neg_inf=allow_masked_rows)
    check_shape("lse", lse, (n,), "(n,)")
    return Q, K, V, O, dO, lse


def check_loss_inputs(X, A1, A2, A3, Y, E, *, what="the loss", working=None):
    """Validate AS24's loss arguments: A₁ (n, d), A₂ and A₃ (m, d), X and Y (d, d),
    E (n, d). Returns them converted to their common float dtype.

    Before converting, refuses (:func:`check_memory_parts`, as ``what``) a call whose
    conversions and working memory exceed the limit: ``working(n, m, d, dtype)`` returns the
    caller's own parts."""
    A1 = as_float_array("A1", A1)
    n, d = A1.shape
    A2 = as_float_array("A2", A2)
    check_cols("A2", A2, d, "A1")
    A3 = as_float_array("A3", A3)
    check_cols("A3", A3, d, "A1")
    check_rows("A3", A3, A2.shape[0], "A2")
    X = as_float_array("X", X)
    check_shape("X", X, (d, d), "(d, d)")
    Y = as_float_array("Y", Y)
    check_shape("Y", Y, (d, d), "(d, d)")
    E = as_float_array("E", E)
    check_shape("E", E, (n, d), "(n, d) like A1")
    dtype = float_dtype(X, A1, A2, A3, Y, E)
    arrays = {"X": X, "A1": A1, "A2": A2, "A3": A3, "Y": Y, "E": E}
    parts = conversion_parts(dtype, arrays)
    if working is not None:
        parts += working(n, A2.shape[0], d, dtype)
    check_memory_parts(what, parts)
    return tuple(a.astype(dtype, copy=False) for a in arrays.values())


# ---- batched, multi-head input (PyTorch's scaled_dot_product_attention layout) -----------


def is_batched(Q) -> bool:
    """Q has three or more dimensions (checked fully later; ragged input is not batched)."""
    try:
        return np.ndim(Q) >= 3
    except Exception:  # ragged lists and the like: the 2-D path reports them
        return False


def check_batched_qkv(Q, K, V, enable_gqa):
    """Q (..., H, n, d), K (..., H_kv, m, d), V (..., H_kv, m, d_v), same batch dimensions,
    H == H_kv unless ``enable_gqa`` (then H a multiple of H_kv). Returns the arrays and the
    group size g = H // H_kv: query head h uses key/value head h // g."""
    Q = as_float_array("Q", Q, ndim=None)
    K = as_float_array("K", K, ndim=None)
    V = as_float_array("V", V, ndim=None)
    for name, a, like in (("K", K, "(..., H_kv, m, d)"), ("V", V, "(..., H_kv, m, d_v)")):
        if a.ndim != Q.ndim:
            raise AttnInputError(
                f"{name} must have {Q.ndim} dimensions {like} like Q, got shape {a.shape}"
            )
        if a.shape[:-3] != Q.shape[:-3]:
            raise AttnInputError(
                f"{name} must have Q's batch dimensions {Q.shape[:-3]}, got shape {a.shape}"
            )
    H, _, d = Q.shape[-3:]
    H_kv, m, _ = K.shape[-3:]
    if K.shape[-1] != d:
        raise AttnInputError(f"K must have d={d} columns like Q, got {K.shape[-1]}")
    if V.shape[-3:-1] != (H_kv, m):
        raise AttnInputError(
            f"V must have (H_kv, m) = {(H_kv, m)} like K in (..., H_kv, m, d_v), got {V.shape}"
        )
    gqa = check_bool("enable_gqa", enable_gqa)
    if H != H_kv and not gqa:
        raise AttnInputError(
            f"K has H_kv={H_kv} heads and Q has H={H}: pass enable_gqa=True for grouped-query "
            "attention"
        )
    if H % H_kv:
        raise AttnInputError(f"Q's head count H={H} must be a multiple of K's H_kv={H_kv}")
    return Q, K, V, H // H_kv


def check_batched_outputs(O, dO, lse, rows: tuple[int, ...], d_v: int):
    """Validate a batched backward pass's O and dO (..., H, n, d_v) and lse (..., H, n), where
    ``rows`` is (..., H, n); lse may hold -inf (a fully masked row). Returns the arrays."""
    O = as_float_array("O", O, ndim=None)
    check_shape("O", O, (*rows, d_v), "(..., H, n, d_v)")
    dO = as_float_array("dO", dO, ndim=None)
    check_shape("dO", dO, (*rows, d_v), "(..., H, n, d_v) like O")
    lse = as_float_array("lse", lse, ndim=None, allow_neg_inf=True)
    check_shape("lse", lse, rows, "(..., H, n)")
    return O, dO, lse


def check_batched_mask(mask, is_causal, shape: tuple[int, ...]):
    """Validate a batched keep-mask and ``is_causal`` for scores of shape (..., H, n, m).

    Returns ``(mask, causal)``: the mask as a read-only broadcast view of that shape (or
    None) and ``is_causal`` as a bool; the two cannot be given together.
    """
    causal = check_bool("is_causal", is_causal)
    if causal and mask is not None:
        raise AttnInputError("mask and is_causal=True cannot be given together")
    if mask is None:
        return None, causal
    arr = _as_array("mask", mask)
    if arr.dtype != np.bool_:
        raise AttnInputError(f"mask must have a boolean dtype (True = keep), got dtype {arr.dtype}")
    try:
        return np.broadcast_to(arr, shape), causal
    except ValueError:
        raise AttnInputError(
            f"mask must be broadcastable to (..., H, n, m) = {shape}, got {arr.shape}"
        ) from None


def max_abs(a: np.ndarray) -> float:
    """max |a| of a non-empty real array, as a Python float, in bounded memory.

    Two reductions (``min``, ``max``) over the array's distinct entries
    (:func:`distinct_view`), where ``np.abs(a).max()`` would first allocate a copy as large as
    the array looks (a broadcast view of 10⁹ rows included). NaN propagates.

    Examples
    --------
    >>> max_abs(np.array([[-3.0, 2.0]]))
    3.0
    """
    u = distinct_view(a)
    return max(-float(u.min()), float(u.max()))
