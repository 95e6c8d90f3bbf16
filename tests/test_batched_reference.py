"""The batched, grouped-query and causal paths of the exact core (attention_forward,
attention_backward) and of the compiled kernels (flash_forward, flash_backward,
attnlib.forward_backward), each checked against the float64 reference of naive.py, which is
written from the definitions and shares no code with attnlib, never against each other.

The reference is first checked itself: against the loop oracles run head by head, against
central differences of ⟨O, dO⟩, and against closed forms; and the comparison is shown to
reject deliberately wrong implementations (the mutants at the end of the file).

Tolerances are rounding-error bounds, entry by entry, derived in helpers.rounding_bounds:
about (d + m)·u times the magnitude of each quantity's terms, plus (d + 2)·u times the
logits' magnitude for the softmax's sensitivity to its logits (so logits of 1e4 loosen the
bound on P in float32 by design). Float32 results are compared with the float64 reference on
the same float32 inputs.
"""

from __future__ import annotations

import functools
import math
import zlib
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import (
    OUTPUTS,
    reference_mismatches,
    reference_outputs,
    reference_tolerances,
    rel_err,
)
from naive import (
    naive_batched_backward,
    naive_batched_forward,
    reference_backward,
    reference_forward,
    reference_parts,
)

import attnlib as al
from attnlib.nbtools import central_difference

TILE = 256  # the kernels' B_r = B_c for d, d_v <= 128 (attnlib.costs.block_sizes)


@dataclass(frozen=True)
class Case:
    """One structured input. ``batch`` None is 2-D input (n, d); otherwise Q is
    (*batch, H, n, d) and K, V are (*batch, H_kv, m, ·)."""

    id: str
    batch: tuple[int, ...] | None
    H: int
    H_kv: int
    n: int
    m: int
    d: int
    dv: int
    causal: bool = False
    mask: str | None = None  # a key of MASKS
    logits: str = "normal"  # "normal", "1e4" (Q and K times 100: |τ q·k| ~ 1e4), "equal" (Q = 0)
    scale: float | None = None
    layout: str | None = None  # a key of LAYOUTS

    @property
    def gqa(self) -> bool:
        return self.H != self.H_kv

    def kwargs(self, mask):
        kw = dict(scale=self.scale, mask=mask, is_causal=self.causal)
        return kw if self.batch is None else dict(kw, enable_gqa=self.gqa)


# ---- masks: (case, rng) -> boolean keep-mask broadcastable to (..., H, n, m) ----------------


def _ij(c):
    return np.arange(c.n)[:, None], np.arange(c.m)[None, :]


def _band(c, rng):
    i, j = _ij(c)
    return np.abs(i - j) <= 3


def _sliding_window(c, rng):  # causal sliding window of 4 keys, given as a mask
    i, j = _ij(c)
    return (j <= i) & (i - j < 4)


def _block_diagonal(c, rng):  # 3 diagonal blocks, scaled to n × m
    i, j = _ij(c)
    return i * 3 // c.n == j * 3 // c.m


def _random_per_head(c, rng):  # a different mask for every batch index and query head
    lead = () if c.batch is None else (*c.batch, c.H)
    return rng.random((*lead, c.n, c.m)) < 0.5


def _key_padding(c, rng):  # (*batch, 1, 1, m): the last keys of each sequence masked
    keep = np.ones((*c.batch, 1, 1, c.m), dtype=bool)
    for k, b in enumerate(np.ndindex(*c.batch)):
        keep[b][..., c.m - 3 - 5 * k :] = False  # fully masked columns
    return keep


def _rows_and_columns(c, rng):
    """Random, with fully masked rows n // 3 and min(n − 1, 256) and fully masked columns
    m // 2 and min(m − 1, 255): at the tile boundaries when n or m crosses 256."""
    keep = rng.random((c.n, c.m)) < 0.6
    keep[[c.n // 3, min(c.n - 1, TILE)], :] = False
    keep[:, [c.m // 2, min(c.m - 1, TILE - 1)]] = False
    return keep


def _other_tile(c, rng):
    """Even rows keep only keys >= 256, odd rows only keys < 256 (a row's first key tile, or
    its last, fully masked), and row 3 keeps only the last key."""
    i, j = _ij(c)
    keep = (j >= TILE) == (i % 2 == 0)
    keep[3] = False
    keep[3, -1] = True
    return keep


def _nothing(c, rng):
    return np.zeros((c.n, c.m), dtype=bool)


MASKS = {
    "band": _band,
    "window": _sliding_window,
    "block-diagonal": _block_diagonal,
    "random-per-head": _random_per_head,
    "key-padding": _key_padding,
    "masked-rows-columns": _rows_and_columns,
    "other-tile": _other_tile,
    "all-masked": _nothing,
}


# ---- memory layouts: (Q, K, V, dO) -> the same values in another layout ----------------------


def _broadcast_batch(Q, K, V, dO):  # zero stride along the first batch axis
    return tuple(np.broadcast_to(x[:1], x.shape) for x in (Q, K, V, dO))


def _broadcast_rows(Q, K, V, dO):  # every query row the same, by a zero row stride
    return np.broadcast_to(Q[..., :1, :], Q.shape), K, V, np.broadcast_to(dO[..., :1, :], dO.shape)


def _one_row_none(Q, K, V, dO):  # n = 1 as x[..., None, :]: a length-1 axis of stride 0
    return Q[..., 0, :][..., None, :], K, V, dO[..., 0, :][..., None, :]


def _one_key_none(Q, K, V, dO):  # m = 1 as x[..., None, :]
    return Q, K[..., 0, :][..., None, :], V[..., 0, :][..., None, :], dO


def _strided(Q, K, V, dO):
    """Q with a column stride of 2, K in Fortran order, V with negative row strides, dO a
    transposed view."""
    wide = np.zeros((*Q.shape[:-1], 2 * Q.shape[-1]), dtype=Q.dtype)
    wide[..., ::2] = Q
    V = V[..., ::-1, :].copy()[..., ::-1, :]
    dO = np.swapaxes(np.swapaxes(dO, -1, -2).copy(), -1, -2)
    return wide[..., ::2], np.asfortranarray(K), V, dO


def _read_only(Q, K, V, dO):
    for x in (Q, K, V, dO):
        x.flags.writeable = False
    return Q, K, V, dO


LAYOUTS = {
    "broadcast-batch": _broadcast_batch,
    "broadcast-rows": _broadcast_rows,
    "none-row": _one_row_none,
    "none-key": _one_key_none,
    "strided": _strided,
    "read-only": _read_only,
}


# ---- the structured families ---------------------------------------------------------------

# head structure: H = H_kv, GQA with g = 2 and 4, MQA; with and without causality
HEADS = [
    Case(f"heads-{name}{'-causal' if causal else ''}", (2,), H, H_kv, 20, 29, 6, 4, causal)
    for name, H, H_kv in [("mha-H3", 3, 3), ("gqa-g2", 4, 2), ("gqa-g4", 8, 2), ("mqa-H4", 4, 1)]
    for causal in (False, True)
]
# batch dimensions: 2-D input, and 0, 1 and 2 batch levels (GQA g = 2, causal)
BATCH = [
    Case("batch-2d-causal", None, 1, 1, 9, 11, 4, 3, True),
    Case("batch-0-levels", (), 4, 2, 9, 11, 4, 3, True),
    Case("batch-1-level", (3,), 4, 2, 9, 11, 4, 3, True),
    Case("batch-2-levels", (2, 3), 4, 2, 9, 11, 4, 3, True),
]
# causal shapes around the 256-row tiles: n < m, n = m, n > m (rows past the last key keep
# every key: top-left alignment leaves no row fully masked)
CAUSAL = [
    Case(f"causal-n{n}-m{m}", (1,), 2, 1, n, m, 8, 8, True)
    for n, m in [(5, 300), (257, 257), (300, 7), (256, 255), (255, 256), (1, 300), (300, 1)]
] + [Case("causal-2d-n260-m40", None, 1, 1, 260, 40, 8, 8, True)]
TILES = [
    Case("full-gqa-n257-m300", (), 4, 2, 257, 300, 8, 8),
    Case("full-mha-n256-m256", (), 2, 2, 256, 256, 8, 8),
    Case("full-2d-n255-m257", None, 1, 1, 255, 257, 8, 8),
    # 3 query blocks, 4 key blocks: every group of key blocks of the backward pass in use
    Case("full-gqa-causal-n520-m800", (), 4, 2, 520, 800, 8, 8, True),
]
# masks (a mask and is_causal are never given together: the call is refused)
MASKED = [
    Case(f"mask-{kind}", (2,), 4, 2, 40, 50, 8, 6, mask=kind)
    for kind in [
        "band",
        "window",
        "block-diagonal",
        "random-per-head",
        "key-padding",
        "masked-rows-columns",
        "all-masked",
    ]
] + [
    Case("mask-block-diagonal-n300-m300", (), 2, 1, 300, 300, 8, 8, mask="block-diagonal"),
    Case(
        "mask-masked-rows-columns-n300-m257", (), 2, 1, 300, 257, 8, 8, mask="masked-rows-columns"
    ),
    Case("mask-other-tile-n270-m300", (), 2, 1, 270, 300, 8, 8, mask="other-tile"),
    Case("mask-2d-random-n257-m260", None, 1, 1, 257, 260, 8, 8, mask="random-per-head"),
    Case("mask-random-per-head-n300-m520", (2,), 2, 1, 300, 520, 8, 8, mask="random-per-head"),
]
# head widths: d ≠ d_v, d = 1 and d_v = 1 (also at m >= 256), d > 128 (tiles of 128 rows)
WIDTHS = [
    Case("width-d1-dv1", (2,), 2, 1, 7, 9, 1, 1, True),
    Case("width-d1-m300", (), 2, 1, 40, 300, 1, 8, True),
    Case("width-dv1-m300", (), 2, 1, 40, 300, 8, 1, True),
    Case("width-d1-dv1-n257-m257", (), 1, 1, 257, 257, 1, 1),
    Case("width-d2-dv16", (2,), 4, 2, 30, 33, 2, 16, True),
    Case("width-d256-n130", (), 1, 1, 130, 40, 256, 4),
    Case("width-scale-0.37", (2,), 4, 2, 30, 33, 8, 8, True, scale=0.37),
]
# logits of magnitude 1e4 (the softmax nearly one-hot) and equal logits (uniform weights)
LOGITS = [
    Case("logits-1e4-gqa-causal-n300-m300", (), 4, 2, 300, 300, 8, 8, True, logits="1e4"),
    Case("logits-1e4-masked", (2,), 4, 2, 40, 50, 8, 8, mask="masked-rows-columns", logits="1e4"),
    Case("logits-1e4-2d-n40-m260", None, 1, 1, 40, 260, 8, 8, logits="1e4"),
    Case("logits-equal-causal", (2,), 4, 1, 30, 20, 8, 8, True, logits="equal"),
]
# memory layouts: zero strides, one query row or key as x[None], non-contiguous, read-only
LAYOUT = [
    Case("layout-broadcast-batch", (3,), 4, 2, 20, 30, 8, 8, True, layout="broadcast-batch"),
    Case("layout-broadcast-rows", (2,), 2, 1, 20, 30, 8, 8, layout="broadcast-rows"),
    Case("layout-2d-none-row", None, 1, 1, 1, 30, 8, 8, layout="none-row"),
    Case("layout-2d-none-row-m300", None, 1, 1, 1, 300, 8, 8, layout="none-row"),
    Case("layout-none-row-gqa", (2,), 4, 2, 1, 30, 8, 8, True, layout="none-row"),
    Case("layout-2d-none-key", None, 1, 1, 30, 1, 8, 8, layout="none-key"),
    Case("layout-none-key-gqa", (2,), 4, 2, 30, 1, 8, 8, layout="none-key"),
    Case("layout-strided", (2,), 4, 2, 20, 30, 8, 6, True, layout="strided"),
    Case("layout-read-only", (2,), 4, 2, 20, 30, 8, 6, layout="read-only"),
]
CASES = HEADS + BATCH + CAUSAL + TILES + MASKED + WIDTHS + LOGITS + LAYOUT
BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES)


def make_inputs(case: Case, dtype):
    """(Q, K, V, dO, mask) of ``case`` in ``dtype``, seeded by the case's id."""
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    q_lead = () if case.batch is None else (*case.batch, case.H)
    kv_lead = () if case.batch is None else (*case.batch, case.H_kv)
    Q = rng.standard_normal((*q_lead, case.n, case.d))
    K = rng.standard_normal((*kv_lead, case.m, case.d))
    V = rng.standard_normal((*kv_lead, case.m, case.dv))
    dO = rng.standard_normal((*q_lead, case.n, case.dv))
    if case.logits == "1e4":
        Q, K = 100 * Q, 100 * K
    elif case.logits == "equal":
        Q = np.zeros_like(Q)
    mask = None if case.mask is None else MASKS[case.mask](case, rng)
    Q, K, V, dO = (x.astype(dtype) for x in (Q, K, V, dO))
    if case.layout is not None:
        Q, K, V, dO = LAYOUTS[case.layout](Q, K, V, dO)
    return Q, K, V, dO, mask


@functools.cache
def prepared(case_id: str, dtype: str):
    """A case's inputs, copies of them, the reference's outputs and the tolerances for
    results computed in ``dtype``; computed once per case and dtype."""
    case = BY_ID[case_id]
    Q, K, V, dO, mask = make_inputs(case, np.dtype(dtype))
    kw = case.kwargs(mask)
    parts = reference_parts(Q, K, V, dO, **kw)
    return SimpleNamespace(
        args=(Q, K, V, dO),
        copies=tuple(np.array(x) for x in (Q, K, V, dO, mask) if x is not None),
        kw=kw,
        want=reference_outputs(parts),
        tol=reference_tolerances(parts, np.dtype(dtype)),
    )


# ---- the implementations under test: (Q, K, V, dO, **kw) -> (O, lse, dQ, dK, dV) ----------


def _exact(Q, K, V, dO, **kw):
    O, lse = al.attention_forward(Q, K, V, **kw)
    return (O, lse, *al.attention_backward(Q, K, V, O, dO, lse, **kw))


def _flash(Q, K, V, dO, **kw):
    O, lse = al.flash_forward(Q, K, V, **kw)
    return (O, lse, *al.flash_backward(Q, K, V, O, dO, lse, **kw))


def _forward_backward(Q, K, V, dO, **kw):
    # the step returns no lse: flash_forward's, which _flash checks, stands in its place
    O, dQ, dK, dV = al.forward_backward(Q, K, V, dO, **kw)
    return (O, al.flash_forward(Q, K, V, **kw)[1], dQ, dK, dV)


IMPLEMENTATIONS = {"exact": _exact, "flash": _flash, "forward_backward": _forward_backward}


@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case_id", list(BY_ID))
def test_matches_the_reference(case_id, dtype, impl):
    p = prepared(case_id, dtype)
    got = IMPLEMENTATIONS[impl](*p.args, **p.kw)
    inputs = (*p.args, p.kw["mask"]) if p.kw["mask"] is not None else p.args
    assert all(np.array_equal(x, c) for x, c in zip(inputs, p.copies, strict=True)), "modified"
    assert [x.dtype for x in got] == [np.dtype(dtype)] * 5
    bad = reference_mismatches(got, p.want, p.tol)
    assert not bad, bad


# ---- the reference itself --------------------------------------------------------------------

SMALL = [c.id for c in CASES if math.prod(c.batch or ()) * c.H * c.n * c.m <= 20000]


@pytest.mark.parametrize("case_id", SMALL)
def test_reference_equals_the_loop_oracles(case_id):
    """The vectorised reference against naive.py's loops over heads, rows and keys (the
    head mapping h // g, the masks and the group sums written out), within the float64
    rounding bound of two float64 computations."""
    case = BY_ID[case_id]
    Q, K, V, dO, mask = make_inputs(case, np.float64)
    copies = [np.array(x) for x in (Q, K, V, dO)]
    parts = reference_parts(Q, K, V, dO, **case.kwargs(mask))
    want = reference_outputs(parts)
    tau = 1 / math.sqrt(case.d) if case.scale is None else case.scale
    loops = naive_batched_forward(Q, K, V, tau, mask, case.causal)
    loops += naive_batched_backward(Q, K, V, dO, tau, mask, case.causal)
    bad = reference_mismatches(loops, want, reference_tolerances(parts, np.float64))
    assert not bad, bad
    assert all(np.array_equal(x, c) for x, c in zip((Q, K, V, dO), copies, strict=True))
    kw = case.kwargs(mask)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(reference_forward(Q, K, V, **kw), want[:2], strict=True)
    )
    grads = reference_backward(Q, K, V, dO, **kw)
    assert all(np.array_equal(a, b) for a, b in zip(grads, want[2:], strict=True))


FD_CASES = [
    Case("fd-gqa-causal", (2,), 4, 2, 3, 4, 2, 3, True),
    Case("fd-mqa-masked", (1, 2), 2, 1, 4, 3, 3, 2, mask="masked-rows-columns"),
    Case("fd-2d-scale", None, 1, 1, 4, 5, 3, 2, scale=1.7),
]


@pytest.mark.parametrize("case", FD_CASES, ids=lambda c: c.id)
def test_reference_gradient_matches_central_differences(case):
    """The gradient of f = ⟨O, dO⟩ against central differences with h = 1e-6: the truncation
    error is about h²·|f'''| ≈ 1e-12 and the rounding error about u·|f|/h ≈ 1e-9, so a
    relative agreement of 1e-7 leaves two orders of magnitude (as in test_naive.py)."""
    Q, K, V, dO, mask = make_inputs(case, np.float64)
    kw = case.kwargs(mask)

    def f(Q, K, V):
        return float(np.sum(reference_forward(Q, K, V, **kw)[0] * dO))

    dQ, dK, dV = reference_backward(Q, K, V, dO, **kw)
    assert rel_err(dQ, central_difference(lambda x: f(x, K, V), Q)) < 1e-7
    assert rel_err(dK, central_difference(lambda x: f(Q, x, V), K)) < 1e-7
    assert rel_err(dV, central_difference(lambda x: f(Q, K, x), V)) < 1e-7


def test_reference_closed_forms():
    """Equal logits (Q = 0): query i of a causal head averages V's rows 0..i and
    lse_i = log(i + 1); a fully masked row gives O = 0, lse = -inf and no gradient; with
    g = 2, dV of a key/value head is the sum of its two query heads' Pᵀ dO."""
    rng = np.random.default_rng(0)
    n, m = 6, 4
    Q = np.zeros((2, n, 3))
    K, V = rng.standard_normal((1, m, 3)), rng.standard_normal((1, m, 2))
    dO = rng.standard_normal((2, n, 2))
    O, lse = reference_forward(Q, K, V, is_causal=True, enable_gqa=True)
    rows = np.minimum(np.arange(n), m - 1) + 1  # keys kept by row i
    mean = np.cumsum(V[0], axis=0)[rows - 1] / rows[:, None]
    assert np.allclose(O, mean, rtol=1e-15, atol=1e-15)
    assert np.allclose(lse, np.log(rows), rtol=1e-15, atol=0)
    _, _, dV = reference_backward(Q, K, V, dO, is_causal=True, enable_gqa=True)
    P = np.tri(n, m) / rows[:, None]
    assert np.allclose(dV[0], P.T @ (dO[0] + dO[1]), rtol=1e-14, atol=1e-14)

    mask = np.ones((n, m), dtype=bool)
    mask[2] = False
    O, lse = reference_forward(Q, K, V, mask=mask, enable_gqa=True)
    assert np.all(O[:, 2] == 0) and np.all(np.isneginf(lse[:, 2]))
    dO_row = np.zeros_like(dO)
    dO_row[:, 2] = 1.0  # only the masked row has an upstream gradient
    grads = reference_backward(
        rng.standard_normal(Q.shape), K, V, dO_row, mask=mask, enable_gqa=True
    )
    assert all(not np.any(x) for x in grads)


# ---- mutants: deliberately wrong implementations the comparison must reject -----------------


def _repeat_heads(x, g):  # key/value head h // g for query head h: the right mapping
    return np.repeat(x, g, axis=-3)


def _exact_on_expanded(Q, K, V, dO, g, expand, **kw):
    """The exact core with every query head given its own copy of a key/value head, chosen
    by ``expand``; returns the per-query-head dK and dV unsummed."""
    kw = dict(kw, enable_gqa=False)
    return _exact(Q, expand(K, g), expand(V, g), dO, **kw)


def _sum_groups(x, g):  # (..., H, r, c) -> (..., H // g, r, c), consecutive heads summed
    return x.reshape(*x.shape[:-3], x.shape[-3] // g, g, *x.shape[-2:]).sum(axis=-3)


def mutant_causal_shifted(k):
    """is_causal as the mask np.tri(n, m, k): k = 1 keeps the next key, k = -1 drops the
    diagonal, k = None aligns bottom-right (k = m − n, FlashAttention's convention)."""

    def run(Q, K, V, dO, **kw):
        n, m = Q.shape[-2], K.shape[-2]
        tri = np.tri(n, m, m - n if k is None else k, dtype=bool)
        return _exact(Q, K, V, dO, **dict(kw, is_causal=False, mask=tri))

    return run


def mutant_head_modulo(Q, K, V, dO, **kw):
    """Query head h reads key/value head h % H_kv (np.tile) instead of h // g."""
    g = Q.shape[-3] // K.shape[-3]
    O, lse, dQ, dK, dV = _exact_on_expanded(
        Q, K, V, dO, g, lambda x, g: np.tile(x, (g, 1, 1)), **kw
    )

    def back(x):  # the gradients summed back with the same (wrong) mapping
        return x.reshape(*x.shape[:-3], g, x.shape[-3] // g, *x.shape[-2:]).sum(axis=-4)

    return O, lse, dQ, back(dK), back(dV)


def mutant_dk_first_head(Q, K, V, dO, **kw):
    """dK of a key/value head is its first query head's, not the sum over the group."""
    g = Q.shape[-3] // K.shape[-3]
    O, lse, dQ, dK, dV = _exact_on_expanded(Q, K, V, dO, g, _repeat_heads, **kw)
    return O, lse, dQ, dK[..., ::g, :, :], _sum_groups(dV, g)


def mutant_dv_mean(Q, K, V, dO, **kw):
    """dV of a key/value head is the mean over the group, not the sum."""
    g = Q.shape[-3] // K.shape[-3]
    O, lse, dQ, dK, dV = _exact_on_expanded(Q, K, V, dO, g, _repeat_heads, **kw)
    return O, lse, dQ, _sum_groups(dK, g), _sum_groups(dV, g) / g


def mutant_scale_over_d(Q, K, V, dO, **kw):
    """The default scale 1/d instead of 1/√d."""
    return _exact(Q, K, V, dO, **dict(kw, scale=1 / Q.shape[-1]))


def mutant_mask_at_kv_head(Q, K, V, dO, **kw):
    """The mask of query head h read at key/value head h // g."""
    g = Q.shape[-3] // K.shape[-3]
    mask = kw["mask"][..., np.arange(Q.shape[-3]) // g, :, :]
    return _exact(Q, K, V, dO, **dict(kw, mask=mask))


def mutant_masked_row_attends_everywhere(Q, K, V, dO, **kw):
    """A fully masked row keeps every key instead of giving O = 0."""
    mask = kw["mask"] | ~kw["mask"].any(axis=-1, keepdims=True)
    return _exact(Q, K, V, dO, **dict(kw, mask=mask))


def mutant_lse_unmasked(Q, K, V, dO, **kw):
    """lse over every key, the mask applied to O only."""
    O, _, dQ, dK, dV = _exact(Q, K, V, dO, **kw)
    _, lse = al.attention_forward(Q, K, V, **dict(kw, mask=None))
    return O, lse, dQ, dK, dV


def mutant_no_rowsum(Q, K, V, dO, **kw):
    """dS = P ∘ dP, without − rowsum(dP ∘ P) (the backward pass given O = 0)."""
    O, lse = al.attention_forward(Q, K, V, **kw)
    return (O, lse, *al.attention_backward(Q, K, V, np.zeros_like(O), dO, lse, **kw))


def mutant_first_batch_kv(Q, K, V, dO, **kw):
    """Every batch index reads the key/value heads of batch index 0."""
    O, lse, dQ, _, _ = _exact(Q, *(np.broadcast_to(x[:1], x.shape) for x in (K, V)), dO, **kw)
    _, _, _, dK, dV = _exact(Q, K, V, dO, **kw)
    return O, lse, dQ, dK, dV


def mutant_unshifted_softmax(Q, K, V, dO, **kw):
    """O and lse from exp(S) without subtracting the row maximum (overflows at 1e4)."""
    _, _, dQ, dK, dV = _exact(Q, K, V, dO, **kw)
    g = Q.shape[-3] // K.shape[-3]
    S = (Q @ np.swapaxes(_repeat_heads(K, g), -1, -2)) / math.sqrt(Q.shape[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        E = np.exp(S)
        O = (E / E.sum(axis=-1, keepdims=True)) @ _repeat_heads(V, g)
        lse = np.log(E.sum(axis=-1))
    return O, lse, dQ, dK, dV


def mutant_float16_inputs(Q, K, V, dO, **kw):
    """Inputs rounded to float16 before a float32 computation (u = 2^-11 instead of 2^-24)."""
    return _exact(*(x.astype(np.float16).astype(np.float32) for x in (Q, K, V, dO)), **kw)


GQA_CAUSAL = Case("mutant-gqa-causal", (2,), 4, 2, 5, 8, 3, 2, True)
GQA_TALL = Case("mutant-gqa-causal-tall", (2,), 4, 2, 8, 5, 3, 2, True)
GQA_MASKED = Case("mutant-gqa-masked", (2,), 4, 2, 6, 8, 3, 2, mask="masked-rows-columns")
GQA_PER_HEAD = Case("mutant-gqa-per-head-mask", (2,), 4, 2, 6, 8, 3, 2, mask="random-per-head")
LARGE = Case("mutant-logits-1e4", (2,), 4, 2, 6, 8, 8, 2, logits="1e4")

MUTANTS = [
    # (id, wrong implementation, case, dtype, outputs that must be rejected)
    ("causal-keeps-next-key", mutant_causal_shifted(1), GQA_CAUSAL, "float64", {"O", "lse"}),
    ("causal-drops-diagonal", mutant_causal_shifted(-1), GQA_CAUSAL, "float64", {"O", "lse"}),
    ("causal-bottom-right-wide", mutant_causal_shifted(None), GQA_CAUSAL, "float64", {"O"}),
    ("causal-bottom-right-tall", mutant_causal_shifted(None), GQA_TALL, "float64", {"O"}),
    ("gqa-head-h-mod-H_kv", mutant_head_modulo, GQA_CAUSAL, "float64", {"O", "dK", "dV"}),
    ("gqa-dK-not-summed", mutant_dk_first_head, GQA_CAUSAL, "float64", {"dK"}),
    ("gqa-dV-averaged", mutant_dv_mean, GQA_CAUSAL, "float64", {"dV"}),
    ("scale-one-over-d", mutant_scale_over_d, GQA_CAUSAL, "float64", {"O", "lse", "dQ"}),
    ("mask-at-kv-head", mutant_mask_at_kv_head, GQA_PER_HEAD, "float64", {"O", "lse"}),
    ("masked-row-not-zero", mutant_masked_row_attends_everywhere, GQA_MASKED, "float64", {"O"}),
    ("lse-ignores-mask", mutant_lse_unmasked, GQA_MASKED, "float64", {"lse"}),
    ("dS-without-rowsum", mutant_no_rowsum, GQA_MASKED, "float64", {"dQ", "dK"}),
    ("kv-of-batch-0", mutant_first_batch_kv, GQA_CAUSAL, "float64", {"O"}),
    ("softmax-unshifted", mutant_unshifted_softmax, LARGE, "float64", {"O", "lse"}),
    ("float16-rounding", mutant_float16_inputs, GQA_MASKED, "float32", {"O", "dQ", "dK", "dV"}),
]


@pytest.mark.parametrize(
    "mutant,case,dtype,rejected", [m[1:] for m in MUTANTS], ids=[m[0] for m in MUTANTS]
)
def test_the_comparison_rejects_wrong_implementations(mutant, case, dtype, rejected):
    Q, K, V, dO, mask = make_inputs(case, np.dtype(dtype))
    kw = case.kwargs(mask)
    parts = reference_parts(Q, K, V, dO, **kw)
    want = reference_outputs(parts)
    tol = reference_tolerances(parts, np.dtype(dtype))
    assert not reference_mismatches(_exact(Q, K, V, dO, **kw), want, tol)  # the right one passes
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        got = mutant(Q, K, V, dO, **kw)
    failed = {line.split("[")[0].split(":")[0] for line in reference_mismatches(got, want, tol)}
    assert rejected <= failed, failed
    assert set(OUTPUTS) >= failed
