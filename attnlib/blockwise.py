"""The arithmetic every sharded schedule shares: attention over one block of keys, the merge of
two partial results, and one key block's share of the gradients.

A device that holds some query rows and, in turn, some blocks of keys computes attention block
by block and merges the partial results with the online softmax (FA1 Alg. 1, lines 10–12; ring
attention, Liu et al. 2023, §3): a partial result of a row is its output O normalised over the
keys seen so far and their log-sum-exp lse, and two partials of the same row combine exactly as

    lse = log(exp(lse_a) + exp(lse_b)),   O = exp(lse_a - lse) O_a + exp(lse_b - lse) O_b.

Carrying lse instead of the pair (m, ℓ) of the running maximum and sum sends one number per row
instead of two; the pair is recovered as m = lse, ℓ = 1. The backward pass needs only the
forward's lse and D = rowsum(dO ∘ O) of each query row (FlashAttention's differential rule,
FA2 Alg. 2), so a key block's share of the gradients is computed from its own scores alone and
the shares add up.

Arrays are per head: Q (H, r, d) against K (H_kv, c, d), V (H_kv, c, d_v), query head h using
key/value head h // (H / H_kv) (PyTorch's grouped-query convention). A ``keep`` mask (r, c),
the same for every head, keeps a score where True (a causal block: :func:`causal_keep`). A
row that keeps nothing has lse = -inf and O = 0, and merges as the identity.
"""

from __future__ import annotations

import numpy as np

from ._checks import (
    AttnInputError,
    as_float_array,
    check_block,
    check_index_array,
    check_partials,
    check_positive_real,
    check_shape,
)

__all__ = ["block_forward", "merge", "row_deltas", "block_backward", "causal_keep"]


def _quiet(fn):
    """No overflow warnings on stderr: a block's overflow is refused by the check of the
    outputs (:func:`_refuse_nonfinite`, or the devices' agreement on them) instead."""
    return np.errstate(over="ignore", invalid="ignore")(fn)


def _grouped_scores(Q, K, scale, keep):
    """τ Q Kᵀ per head as (H_kv, g, r, c), -inf where ``keep`` is False: a group's g query
    heads share one key head, so one batched product serves them all."""
    H, r, d = Q.shape
    H_kv = K.shape[0]
    S = np.matmul(Q.reshape(H_kv, H // H_kv * r, d), K.transpose(0, 2, 1))
    S = S.reshape(H_kv, H // H_kv, r, K.shape[1])
    S *= scale
    if keep is not None:
        S[:, :, ~keep] = -np.inf
    return S


def block_forward(Q, K, V, *, scale, keep=None):
    """Attention of the query rows Q over one block of keys: the partial result (O, lse).

    Parameters
    ----------
    Q : (H, r, d); K : (H_kv, c, d); V : (H_kv, c, d_v); H a multiple of H_kv
    scale : τ > 0 (the pass's softmax scale, 1/√d by default there)
    keep : None or bool (r, c): the scores kept (True) in every head

    Returns
    -------
    O : (H, r, d_v), softmax(τ Q Kᵀ) V over this block's kept keys; 0 for a row that keeps none
    lse : (H, r), the log-sum-exp of the row's kept logits; -inf for a row that keeps none

    The row maximum is subtracted before exponentiating (FA1 Alg. 1, line 10), so logits of
    ±1e4 stay finite. Raises :class:`attnlib.AttnInputError` for invalid arguments.

    Examples
    --------
    >>> Q, K, V = np.zeros((1, 1, 2)), np.eye(2)[None], np.array([[[1.0], [3.0]]])
    >>> O, lse = block_forward(Q, K, V, scale=1.0)
    >>> O.tolist(), round(float(lse[0, 0]), 6)  # equal scores: the mean of V's rows; log 2
    ([[[2.0]]], 0.693147)
    """
    Q, K, V, keep, *_ = check_block(Q, K, V, keep)
    O, lse = _block_forward(Q, K, V, check_positive_real("scale", scale), keep)
    _refuse_nonfinite("block_forward", O=O, lse=lse)
    return O, lse


@_quiet
def _block_forward(Q, K, V, scale, keep):
    """:func:`block_forward` on checked arguments. The sharded schedules call it on blocks
    they received, whose values were checked where they started: a pass must never stop on
    one device alone (the others would wait for it), so what goes wrong mid-pass is caught by
    the check of the outputs that all devices agree on."""
    H, r, _ = Q.shape
    H_kv, _, d_v = V.shape
    S = _grouped_scores(Q, K, scale, keep)
    m = S.max(axis=-1, keepdims=True)
    # a row keeps nothing only when its maximum is -inf; +inf or nan (a logit that overflowed
    # on a block that was never checked) must stay visible as nan, never pass as an empty row
    kept = m != -np.inf
    # a row that keeps nothing subtracts 0, so exp(-inf - 0) = 0 with no nan
    E = np.exp(S - np.where(kept, m, 0))
    ell = E.sum(axis=-1, keepdims=True)
    O = np.matmul(E, V[:, None]) / np.where(kept, ell, 1)
    with np.errstate(divide="ignore"):  # log 0 = -inf is the intended lse of an empty row
        lse = np.where(kept, m + np.log(np.where(kept, ell, 1)), -np.inf)[..., 0]
    return O.reshape(H, r, d_v), lse.reshape(H, r)


def merge(O_a, lse_a, O_b, lse_b):
    """The online-softmax merge of two partial results of the same rows.

    Parameters
    ----------
    O_a, O_b : (H, r, d_v); lse_a, lse_b : (H, r), -inf for a part that kept nothing

    Returns
    -------
    (O, lse): the partial result over both parts' keys, exp-weighted by each part's share
    (module docstring). Exact when a part is empty: it contributes weight 0.

    Examples
    --------
    >>> O, lse = merge(np.ones((1, 1, 1)), np.zeros((1, 1)), np.zeros((1, 1, 1)), np.zeros((1, 1)))
    >>> float(O[0, 0, 0]), round(float(lse[0, 0]), 6)  # two equal shares: the mean, log 2
    (0.5, 0.693147)
    """
    return _merge(*check_partials(O_a, lse_a, O_b, lse_b))


@_quiet
def _merge(O_a, lse_a, O_b, lse_b):
    """:func:`merge` on checked arguments (see :func:`_block_forward`)."""
    lse = np.logaddexp(lse_a, lse_b)
    kept = lse != -np.inf  # nan or +inf propagate (see _block_forward)
    base = np.where(kept, lse, 0)
    # exp(-inf - base) = 0: an empty part weighs nothing, and a row empty in both stays 0
    w_a = np.exp(lse_a - base)[..., None]
    w_b = np.exp(lse_b - base)[..., None]
    return w_a * O_a + w_b * O_b, lse


def row_deltas(O, dO):
    """D = rowsum(dO ∘ O), (H, r): the one number per query row that, with lse, lets each key
    block compute its share of the gradients alone (FA2 Alg. 2, line 4).

    O, dO : (H, r, d_v), one dtype. Raises :class:`attnlib.AttnInputError` for invalid
    arguments.

    Examples
    --------
    >>> row_deltas(np.ones((1, 1, 2)), np.full((1, 1, 2), 3.0)).tolist()
    [[6.0]]
    """
    O = as_float_array("O", O, ndim=3)
    dO = as_float_array("dO", dO, ndim=3)
    check_shape("dO", dO, O.shape, "(H, r, d_v) like O")
    return _row_deltas(O, dO)


def _row_deltas(O, dO):
    """:func:`row_deltas` on checked arguments (see :func:`_block_forward`)."""
    return np.einsum("hrv,hrv->hr", dO, O)


def block_backward(Q, K, V, dO, lse, D, *, scale, keep=None):
    """One key block's share of the gradients, from the forward pass's lse and D.

    With P = exp(τ Q Kᵀ - lse) over the block's kept scores (0 elsewhere; FA2 Alg. 2)::

        dV = Pᵀ dO,   dP = dO Vᵀ,   dS = P ∘ (dP - D),   dQ = τ dS K,   dK = τ dSᵀ Q

    Parameters
    ----------
    Q : (H, r, d); K : (H_kv, c, d); V : (H_kv, c, d_v); dO : (H, r, d_v)
    lse : (H, r), the forward pass's log-sum-exp over ALL the row's keys (-inf: row keeps none)
    D : (H, r), :func:`row_deltas` of the forward's O and dO
    scale, keep : as in :func:`block_forward`

    Returns
    -------
    dQ : (H, r, d), this block's share of the query rows' gradient (the shares over all key
        blocks add up to dQ)
    dK : (H_kv, c, d), dV : (H_kv, c, d_v), the block's gradients from these query rows, each
        key/value head summing its g = H / H_kv query heads

    Raises :class:`attnlib.AttnInputError` for invalid arguments.

    Examples
    --------
    >>> Q, K, V = np.zeros((1, 1, 2)), np.eye(2)[None], np.array([[[1.0], [3.0]]])
    >>> O, lse = block_forward(Q, K, V, scale=1.0)
    >>> dO = np.ones((1, 1, 1))
    >>> dQ, dK, dV = block_backward(Q, K, V, dO, lse, row_deltas(O, dO), scale=1.0)
    >>> dQ.tolist(), dV.tolist()
    ([[[-0.5, 0.5]]], [[[0.5], [0.5]]])
    """
    Q, K, V, keep, dO, lse, D, _ = check_block(Q, K, V, keep, backward=(dO, lse, D))
    grads = _block_backward(Q, K, V, dO, lse, D, check_positive_real("scale", scale), keep)
    _refuse_nonfinite("block_backward", **dict(zip(("dQ", "dK", "dV"), grads, strict=True)))
    return grads


@_quiet
def _block_backward(Q, K, V, dO, lse, D, scale, keep):
    """:func:`block_backward` on checked arguments (see :func:`_block_forward`)."""
    H, r, d = Q.shape
    g = H // K.shape[0]
    H_kv, c, d_v = V.shape
    S = _grouped_scores(Q, K, scale, keep)
    lse_g = lse.reshape(H_kv, g, r, 1)
    # a row that keeps nothing has lse = -inf and no kept score: its P row is 0, not nan
    P = np.exp(S - np.where(lse_g == -np.inf, 0, lse_g))
    dO_g = dO.reshape(H_kv, g, r, d_v)
    dV = np.matmul(P.transpose(0, 1, 3, 2), dO_g).sum(axis=1)
    dP = np.matmul(dO_g, V[:, None].transpose(0, 1, 3, 2))
    dS = P * (dP - D.reshape(H_kv, g, r, 1))
    dQ = scale * np.matmul(dS, K[:, None])
    dK = scale * np.matmul(dS.transpose(0, 1, 3, 2), Q.reshape(H_kv, g, r, d)).sum(axis=1)
    return dQ.reshape(H, r, d), dK, dV


def _refuse_nonfinite(who: str, **outputs) -> None:
    """Finite inputs gave a NaN or an infinity: a kept logit τ q·k, or a gradient, overflowed
    the dtype. Refused, as the exact core refuses it, rather than returned."""
    for name, a in outputs.items():
        ok = np.isfinite(a) | np.isneginf(a) if name == "lse" else np.isfinite(a)
        if not np.all(ok):
            raise AttnInputError(
                f"{who}: {name} is not finite: a kept logit scale * q.k of Q and K (or a "
                f"gradient) overflows {a.dtype}"
            )


def causal_keep(rows, cols):
    """The causal keep-mask of a block: (len(rows), len(cols)), True where cols[j] <= rows[i].

    rows, cols : 1-D integer arrays, the block's global query and key indices (any order: a
    striped or zig-zag shard's rows are not contiguous). Top-left aligned, as PyTorch's
    ``is_causal``.

    Examples
    --------
    >>> causal_keep(np.array([0, 2]), np.array([1, 2])).tolist()
    [[False, False], [True, True]]
    """
    rows, cols = check_index_array("rows", rows), check_index_array("cols", cols)
    return rows[:, None] >= cols[None, :]
