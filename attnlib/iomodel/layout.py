"""What a FlashAttention pass on the machine runs over: its arguments validated, the heads
packed into slow memory, the blocks it visits and the scores a block drops.

The arguments are those of PyTorch's ``scaled_dot_product_attention``. One head is Q (n, d),
K (m, d), V (m, d_v), with an element ``mask`` and a ``block_mask`` over the pass's grid of
query blocks × key blocks. Several heads are Q (H, n, d), K (H_kv, m, d), V (H_kv, m, d_v),
H = H_kv unless ``enable_gqa`` (then query head h uses key/value head h // g, g = H/H_kv): the
pass runs the H_kv groups one after the other on one machine, and packs a group's g query
heads position by position into one g·n-row query matrix (row p·g + h is head h's query p).
Every K, V block it loads then serves the whole group, and under ``is_causal`` (query position
p keeps key j iff j <= p, top-left aligned) a query block still keeps a prefix of key blocks,
those up to its last position (:func:`~attnlib.iomodel.blocks.causal_blocks`).
"""

from __future__ import annotations

import numpy as np

from .._checks import (
    AttnInputError,
    check_bool,
    check_causal,
    check_head_counts,
    check_int,
    check_mask,
    check_scale,
)
from ..logits import _probabilities_from_lse
from .blocks import (
    causal_blocks,
    check_block_mask,
    d_pass_rows,
    flash_backward_blocks,
    flash_forward_blocks,
    visited_blocks,
)
from .tiling import ceil_div, check_machine_steps, count_args, resolve_blocks

__all__ = [
    "pass_setup",
    "count_setup",
    "pack_heads",
    "unpack_heads",
    "as_given",
    "kept_blocks",
    "drop_masked",
    "probabilities",
]


def _one_head(what: str, H: int) -> None:
    raise AttnInputError(f"{what} is for one head, Q (n, d): got H = {H} heads")


def pass_setup(who, Q, V, g, M, scale, is_causal, mask, block_mask, blocks):
    """Validate what a pass takes besides its arrays (validated: Q (H, n, d), V (H_kv, m, d_v),
    g = H/H_kv) and return ``(M, τ, is_causal, mask, B_r, B_c, keep)``: keep is the
    (T_r, T_c) grid of blocks a group's pass visits, ``who`` the pass ("flash_forward" or
    "flash_backward", whose block rule gives the default blocks). A run of more than
    :data:`~attnlib.iomodel.tiling.MAX_MACHINE_STEPS` block steps is refused before the grid
    is built. Raises AttnInputError naming the argument at fault."""
    (H, n, d), (H_kv, m, d_v) = Q.shape, V.shape
    M, tau = check_int("M", M), check_scale(scale, d)
    is_causal = check_bool("is_causal", is_causal)
    if H > 1 and (mask is not None or block_mask is not None):
        _one_head("mask" if mask is not None else "block_mask", H)
    is_causal = check_causal(mask, is_causal)
    mask = check_mask(mask, n, m)
    rule = flash_forward_blocks if who == "flash_forward" else flash_backward_blocks
    B_r, B_c = resolve_blocks(blocks, rule, d, M, d_v)
    steps = ceil_div(g * n, B_r) * ceil_div(m, B_c)
    if who == "flash_backward":  # and its D pass
        steps += ceil_div(g * n, d_pass_rows(B_r, M, d_v))
    fewer = (
        "a larger M, fewer heads or shorter Q and K" if H > 1 else "a larger M or shorter Q and K"
    )
    check_machine_steps(H_kv * steps, who, fewer)
    keep = visited_blocks(mask, block_mask, g * n, m, B_r, B_c)
    if is_causal:  # not in place: keep may be the caller's block_mask
        keep = keep & causal_blocks(n, m, B_r, B_c, g)
    return M, tau, is_causal, mask, B_r, B_c, keep


def count_setup(n, d, M, m, d_v, H, H_kv, is_causal, enable_gqa, blocks, block_mask, rule):
    """The arguments of a pass's closed-form count validated (H_kv defaults to H):
    ``(n, d, M, m, d_v, B_r, B_c, H_kv, g, is_causal, bm)``, bm the block mask with the
    causal pattern applied (None: dense or causal). Raises AttnInputError naming the argument
    at fault, or ``block_mask`` with several heads."""
    n, d, M, m, d_v, B_r, B_c = count_args(n, d, M, m, d_v, blocks, rule)
    H, H_kv, g = check_head_counts(H, H if H_kv is None else H_kv, enable_gqa)
    is_causal = check_bool("is_causal", is_causal)
    if block_mask is not None and H > 1:
        _one_head("block_mask", H)
    bm = check_block_mask(block_mask, n, m, B_r, B_c)
    if bm is not None and is_causal:
        bm = bm & causal_blocks(n, m, B_r, B_c)
    return n, d, M, m, d_v, B_r, B_c, H_kv, g, is_causal, bm


def pack_heads(X, g: int):
    """(H, n, ...) → (H·n, ...): the g heads of each group packed position by position."""
    H, n, *rest = X.shape
    return X.reshape(H // g, g, n, *rest).swapaxes(1, 2).reshape(H * n, *rest)


def unpack_heads(X, g: int, H: int):
    """The inverse of :func:`pack_heads`: (H·n, ...) → (H, n, ...)."""
    n, rest = X.shape[0] // H, X.shape[1:]
    return X.reshape(H // g, n, g, *rest).swapaxes(1, 2).reshape(H, n, *rest)


def as_given(batched: bool, *arrays):
    """A pass's outputs in its inputs' layout: with their head axis, or as one head's arrays
    when Q was given 2-D (``batched`` False)."""
    return arrays if batched else tuple(a[0] for a in arrays)


def drop_masked(s, mask, is_causal: bool, g: int, I, J, base) -> None:
    """Set to −inf, in place, the scores of block (I, J) that the pass drops: the element
    mask's, or, causal, those of keys after the query's position ⌊row/g⌋, computed from the
    indices (no word is loaded). I and J are the block's packed rows and keys; ``base`` is the
    (row, key) at which its group starts."""
    (i0, i1), (j0, j1) = (I[0] - base[0], I[1] - base[0]), (J[0] - base[1], J[1] - base[1])
    if mask is not None:
        s[~mask[i0:i1, j0:j1]] = -np.inf
    elif is_causal:
        s[np.arange(i0, i1)[:, None] // g < np.arange(j0, j1)] = -np.inf


def kept_blocks(ranges, keep):
    """The ranges whose flag in ``keep`` is set: the blocks of a row or column a pass visits."""
    return [r for r, k in zip(ranges, keep, strict=True) if k]


def probabilities(s, lse, slack, g: int, I, base) -> None:
    """P = exp(s − lse) <= 1 in place of a block's scores s (FA2 Alg. 2 line 11), refusing an
    lse that is not the forward's (:func:`attnlib.logits._probabilities_from_lse`, with the
    rows' ``slack``). The g heads packed in the block are taken one by one, each on its own
    rows (every g-th, a view), so that a refusal names the row by its position in its head."""
    for h in range(min(g, I[1] - I[0])):
        first = I[0] - base[0] + h  # the view's first row, counted in its group
        _probabilities_from_lse(s[h::g], lse[h::g], slack[h::g], first_row=first // g)
