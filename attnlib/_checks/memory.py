"""Memory guards: refuse, before anything is allocated, a call whose working memory exceeds
:data:`~attnlib.config.MAX_ALLOCATION_BYTES` (or the function's ``memory_budget``), naming the
part that dominates and the arguments that set its size."""

from __future__ import annotations

import numpy as np

from ..config import MAX_ALLOCATION_BYTES
from .error import AttnInputError

__all__ = ["MAX_ALLOCATION_BYTES", "check_memory", "check_memory_parts", "conversion_parts"]


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
    attnlib._checks.error.AttnInputError: f would need 1 TiB ... (1 TiB); Q or K is too large
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
