"""Arithmetic intensity: flops per word moved, from the exact counts of the schedules.

A pass's intensity is its matrix-multiply flops (:func:`attention_flops`) over the words its
FlashAttention-2 schedule moves. Prefill (n = m queries at once) reuses each loaded K, V row
for B_r queries; a decoding step (n = 1) for one, so its intensity stays near 2 at every M.
"""

from __future__ import annotations

from typing import NamedTuple

from .._checks import AttnInputError, check_bool, check_choice, check_int
from .causal import causal_score_count
from .flash import flash_backward_count, flash_forward_count
from .tiling import check_dims

__all__ = ["attention_flops", "arithmetic_intensity", "Intensity", "prefill_decode_intensity"]


def _per_word(flops: int, words: int, who: str) -> float:
    """flops / words for exact ints, rounded once; refused, naming ``who`` (the arguments
    that set the sizes), when the quotient is beyond the float range."""
    try:
        return flops / words
    except OverflowError:
        raise AttnInputError(f"the intensity is beyond the float range: {who} too large") from None


def attention_flops(n: int, d: int, *, m=None, d_v=None, which: str = "forward", kept=None) -> int:
    """Matrix-multiply flops of one attention head (2 per multiply-add; the softmax's O(n·m)
    exponentials are left out, as in FA2's benchmark flop count).

    forward: S = QKᵀ and O = PV, 2·z·(d + d_v); backward: S recomputed, dV, dP, dQ, dK,
    2·z·(3d + 2d_v); z is the number of computed scores, n·m by default or ``kept`` (e.g.
    :func:`causal_score_count` for the useful flops of causal attention). Raises
    AttnInputError for arguments below 1 or an unknown ``which``.
    """
    n, d = check_int("n", n), check_int("d", d)
    m = n if m is None else check_int("m", m)
    d_v = d if d_v is None else check_int("d_v", d_v)
    which = check_choice("which", which, ("forward", "backward"))
    z = n * m if kept is None else check_int("kept", kept, maximum=n * m)
    return 2 * z * (d + d_v) if which == "forward" else 2 * z * (3 * d + 2 * d_v)


def arithmetic_intensity(
    n: int,
    d: int,
    M: int,
    *,
    m=None,
    d_v=None,
    which: str = "forward",
    is_causal=False,
    blocks=None,
) -> float:
    """Flops per word moved of one FlashAttention-2 pass on a machine of M words:
    :func:`attention_flops` over the exact count's ``.total`` (:func:`flash_forward_count` or
    :func:`flash_backward_count`, with ``is_causal`` and ``blocks`` passed on; a causal pass
    counts the useful flops of the :func:`causal_score_count` kept scores). Roughly 2·B_r for
    the forward when n >> B_r: the number of query rows sharing each loaded K, V row.

    ``blocks`` = (B_r, B_c) fixes the tiles (a real kernel's, e.g. FlashAttention-2's 128 × 64
    forward at d = 128) instead of the block rule's largest tiles for M; their working set
    must fit in M. Raises AttnInputError for arguments below 1, an unknown ``which``, blocks
    whose working set exceeds M, or an intensity beyond the float range.

    Examples
    --------
    >>> round(arithmetic_intensity(16384, 128, 247808, blocks=(128, 64)))
    254
    """
    n, d, M, m, d_v = check_dims(n, d, M, m, d_v)
    which = check_choice("which", which, ("forward", "backward"))
    is_causal = check_bool("is_causal", is_causal)
    kept = causal_score_count(n, m) if is_causal else None
    count = flash_forward_count if which == "forward" else flash_backward_count
    flops = attention_flops(n, d, m=m, d_v=d_v, which=which, kept=kept)
    run = count(n, d, M, m=m, d_v=d_v, is_causal=is_causal, blocks=blocks)
    if run.peak_fast > M:  # the block rule's tiles always fit; given ones may not
        raise AttnInputError(
            f"blocks={tuple(blocks)} hold {run.peak_fast} words in the {which} pass's inner "
            f"step with d={d}, d_v={d_v}: more than M={M}"
        )
    return _per_word(flops, run.total, "n, m and M are")


class Intensity(NamedTuple):
    """Arithmetic intensity (flops per word) of prefill (n = m) and of one decoding step
    (n = 1) against the same m keys, forward pass, one head."""

    prefill: float
    decode: float


def prefill_decode_intensity(m: int, d: int, M: int, *, d_v: int | None = None) -> Intensity:
    """Prefill (all m queries at once, n = m) against decode (n = 1) intensity, from the exact
    counts of :func:`flash_forward_count` and the flops of :func:`attention_flops`. Decode
    stays near 2 flops per word for every M (each loaded K/V word meets one query); prefill
    grows with M (≈ 2·B_r). Raises AttnInputError for arguments below 1, or an intensity
    beyond the float range.

    Examples
    --------
    >>> intensity = prefill_decode_intensity(4096, 64, 65536)
    >>> round(intensity.prefill), round(intensity.decode, 2)
    (546, 2.0)
    """
    m, d, M = check_int("m", m), check_int("d", d), check_int("M", M)
    d_v = d if d_v is None else check_int("d_v", d_v)
    return Intensity(
        arithmetic_intensity(m, d, M, m=m, d_v=d_v),
        arithmetic_intensity(1, d, M, m=m, d_v=d_v),
    )
