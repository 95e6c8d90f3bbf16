"""Checks of container arguments: sequences and dicts of a bounded number of entries.

A string is never a sequence here (its characters would become entries), and a length is
checked before anything is copied, so a broadcast view of 10⁹ rows or an endless iterator is
refused in bounded memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from ..config import MAX_ALLOCATION_BYTES
from .arrays import as_series
from .error import AttnInputError
from .memory import check_memory_parts

__all__ = ["as_entries", "as_dict", "as_curves", "check_figure"]


def as_entries(
    name: str,
    seq,
    *,
    of: str = "entries",
    length: int | None = None,
    min_len: int = 0,
    max_len: int | None = None,
    entry_bytes: int | None = None,
    what: str | None = None,
    entry_type: type | None = None,
) -> tuple:
    """The entries of ``seq`` (a list, tuple, range, array or iterator) as a tuple.

    Refused, naming ``name`` and what its entries are (``of``): a string or bytes, a dict
    (whose keys would become entries), a non-iterable (a 0-d array included), a number of
    entries other than ``length`` when it is given, fewer than ``min_len`` or more than
    ``max_len`` entries, and, with ``entry_bytes``, more entries than the memory limit holds
    at that many bytes each (:func:`check_memory_parts`, as ``what``). The limits are checked
    before the entries are copied: an iterator is read for at most one entry past them. With
    ``entry_type``, an entry of another type is refused too, naming its index.

    Examples
    --------
    >>> as_entries("ns", range(3), of="n grids", length=3)
    (0, 1, 2)
    >>> as_entries("labels", "abc", of="labels")
    Traceback (most recent call last):
        ...
    attnlib._checks.error.AttnInputError: labels must be a sequence of labels, got 'abc'
    """
    if isinstance(seq, (str, bytes, Mapping)) or (isinstance(seq, np.ndarray) and seq.ndim == 0):
        raise AttnInputError(f"{name} must be a sequence of {of}, got {seq!r:.60}")
    try:
        entries = iter(seq)
    except TypeError:
        raise AttnInputError(f"{name} must be a sequence of {of}, got {seq!r:.60}") from None
    cap = max_len
    if entry_bytes is not None:
        fits = MAX_ALLOCATION_BYTES // max(1, entry_bytes)
        cap = fits if cap is None else min(cap, fits)
    try:
        count = len(seq)
    except TypeError:  # an iterator: read one entry past the limit, if there is one
        items = tuple(entries if cap is None else itertools.islice(entries, cap + 1))
        count = len(items)
    else:
        items = None
    if length is not None and count != length:
        raise AttnInputError(f"{name} must have {length} {of}, got {count}")
    if count < min_len:
        raise AttnInputError(f"{name} must have at least {min_len} {of}, got {count}")
    if max_len is not None and count > max_len:
        got = f"more than {max_len}" if items is not None else count
        raise AttnInputError(f"{name} must have at most {max_len} {of}, got {got}")
    if entry_bytes is not None:
        check_memory_parts(what or name, [(entry_bytes * count, f"{name}'s {of}", name)])
    items = tuple(seq) if items is None else items
    if entry_type is not None:
        for k, item in enumerate(items):
            if not isinstance(item, entry_type):
                kind = entry_type.__name__
                raise AttnInputError(f"{name}[{k}] must be a {kind}, got {type(item).__name__}")
    return items


def as_dict(
    name: str,
    value,
    *,
    of: str = "entries",
    max_len: int | None = None,
    keys=None,
    like: str | None = None,
    check_value=None,
) -> dict:
    """``value`` as a new, non-empty dict of at most ``max_len`` entries (one colour each,
    say), naming ``name`` and what its entries are (``of``) when it is not.

    With ``keys`` (the keys of the argument named ``like``), its keys must be exactly those;
    with ``check_value``, the value ``v`` under each key ``k`` becomes
    ``check_value(f"{name}[{k!r}]", v)``, so that a refusal names the entry at fault.

    Examples
    --------
    >>> as_dict("errors", {1e-3: [1, 2]}, check_value=lambda label, v: (label, len(v)))
    {0.001: ('errors[0.001]', 2)}
    >>> as_dict("ranks", {1e-3: [3]}, keys={1e-2: [1]}, like="errors")
    Traceback (most recent call last):
        ...
    attnlib._checks.error.AttnInputError: ranks must have the same keys as errors, got [0.001]
    """
    if not isinstance(value, Mapping) or not value:
        raise AttnInputError(f"{name} must be a non-empty dict of {of}, got {value!r:.60}")
    if max_len is not None and len(value) > max_len:
        raise AttnInputError(f"{name} must have at most {max_len} {of}, got {len(value)}")
    if keys is not None and set(value) != set(keys):
        got = [_plain(k) for k in itertools.islice(value, 8)]
        raise AttnInputError(f"{name} must have the same keys as {like}, got {got}")
    if check_value is None:
        return dict(value)
    return {k: check_value(f"{name}[{_plain(k)!r}]", v) for k, v in value.items()}


def as_curves(
    name: str,
    value,
    *,
    size: int,
    over: str,
    of: str = "curves",
    max_len: int | None = None,
    keys=None,
    like: str | None = None,
    **series,
) -> dict:
    """``value`` as a dict of curves drawn over one grid: :func:`as_dict` (``of``,
    ``max_len``, ``keys`` and ``like`` as there) whose every value is an :func:`as_series` of
    ``size`` entries, the length of the grid argument ``over``; ``series`` passes
    ``positive`` or ``missing`` on to it.

    Examples
    --------
    >>> as_curves("errors", {4.0: [1e-3, 1e-5]}, size=2, over="degrees")
    {4.0: array([1.e-03, 1.e-05])}
    >>> as_curves("errors", {4.0: [1e-3]}, size=2, over="degrees")
    Traceback (most recent call last):
        ...
    attnlib._checks.error.AttnInputError: errors[4.0] must have 2 entries like degrees, got 1
    """

    def curve(label, v):
        return as_series(label, v, size=size, like=over, **series)

    return as_dict(name, value, of=of, max_len=max_len, keys=keys, like=like, check_value=curve)


def _plain(key):
    """A key as Python writes it: a numpy scalar becomes the Python number it holds."""
    return key.item() if isinstance(key, np.generic) else key


def check_figure(name: str, fig):
    """Require a matplotlib Figure and return it."""
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure):
        raise AttnInputError(f"{name} must be a matplotlib Figure, got {type(fig).__name__}")
    return fig
