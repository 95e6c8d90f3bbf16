"""One contract for both cores: the exact core (attention_forward, attention_backward) and the
compiled kernels (flash_forward, flash_backward) accept and refuse the same calls.

Every row of the table below is one call, 2-D (n, d) or batched (..., H, n, d), and the test
runs it on each core. A row that is accepted is one training step, the forward pass and then
the backward pass on that core's own O and lse (or the forward pass alone where dO is not
given): both cores must return results that agree entry by entry within a bound derived
from the dtype, twice the sum of the two computations' first-order rounding bounds
(helpers.rounding_bounds, in the inputs' dtype, from the float64 reference of naive.py), with
-inf in the same places. A row that is refused must raise AttnInputError on both cores, the
message naming the argument at fault, in the same words (but where a row says otherwise:
which row of an inconsistent lse is reported depends on the order the kernels' blocks ran).
Neither core may modify its inputs.

Not in the table: the memory limits, which differ by design (the exact core holds the n × m
scores, the kernels O((n + m)·d)); their refusals are in the bad-input tables
(test_bad_input_<part>.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from helpers import reference_mismatches, rounding_bounds
from naive import reference_parts

import attnlib as al
from attnlib import AttnInputError

CORES = {
    "standard": (al.attention_forward, al.attention_backward),
    "flash": (al.flash_forward, al.flash_backward),
}
OTHER = {"standard": "flash", "flash": "standard"}


@dataclass(frozen=True)
class Call:
    """One call of a core: the forward pass on (Q, K, V) with ``kw``, then the backward pass
    for ``dO`` on its own outputs; or, with ``outputs`` = (O, dO, lse), the backward pass
    alone. ``refused`` names the argument a refusal must name (None: accepted); ``words``
    whether both cores must refuse in the same words."""

    id: str
    qkv: tuple
    kw: dict = field(default_factory=dict)
    dO: Any = None
    outputs: tuple | None = None
    refused: str | None = None
    words: bool = True


ROWS: list[Call] = []


def accepted(id, Q, K, V, dO, **kw):
    ROWS.append(Call(id, (Q, K, V), kw, dO=dO))


def refused(id, arg, Q, K, V, outputs, *, words=True, **kw):
    """The same bad call as a forward pass and as a backward pass (with ``outputs``)."""
    ROWS.append(Call(f"{id}/forward", (Q, K, V), kw, refused=arg, words=words))
    ROWS.append(Call(f"{id}/backward", (Q, K, V), kw, outputs=outputs, refused=arg, words=words))


def refused_backward(id, arg, Q, K, V, outputs, *, words=True, **kw):
    ROWS.append(Call(id, (Q, K, V), kw, outputs=outputs, refused=arg, words=words))


rng = np.random.default_rng(2024)
# 2-D: Q (6, 4), K (5, 4), V (5, 3); batched: batch 2, H = 4 query heads over H_kv = 2
Q, K, V, dO = (rng.standard_normal(s) for s in [(6, 4), (5, 4), (5, 3), (6, 3)])
QB, KB, VB, dOB = (
    rng.standard_normal(s) for s in [(2, 4, 6, 4), (2, 2, 5, 4), (2, 2, 5, 3)] + [(2, 4, 6, 3)]
)
GQA = dict(enable_gqa=True)
O, LSE = al.attention_forward(Q, K, V)
OB, LSEB = al.attention_forward(QB, KB, VB, **GQA)
OUT, OUTB = (O, dO, LSE), (OB, dOB, LSEB)
MASK = rng.random((6, 5)) < 0.6
MASK[2] = False  # a fully masked row
TRI = np.tri(6, 5, dtype=bool)


def f32(*arrays):
    return tuple(a.astype(np.float32) for a in arrays)


# ---- accepted: 2-D ---------------------------------------------------------------------------

accepted("2d", Q, K, V, dO)
accepted("2d-float32", *f32(Q, K, V, dO))
accepted("2d-mixed-dtypes", Q.astype(np.float32), K, V, dO)
accepted("2d-mask", Q, K, V, dO, mask=MASK)
accepted("2d-causal", Q, K, V, dO, is_causal=True)
accepted("2d-mask-with-causality-as-one-keep-mask", Q, K, V, dO, mask=MASK & TRI)
accepted("2d-every-key-masked", Q, K, V, dO, mask=np.zeros((6, 5), bool))
accepted("2d-scale-0.37", Q, K, V, dO, scale=0.37)
accepted("2d-scale-int", Q, K, V, dO, scale=2)
accepted("2d-scale-numpy-float32", Q, K, V, dO, scale=np.float32(0.5))
accepted("2d-enable_gqa-has-no-effect", Q, K, V, dO, enable_gqa=True)
accepted("2d-logits-of-1e4", 100 * Q, 100 * K, V, dO, scale=1.0)
accepted("2d-V-near-the-float-range", Q, K, np.full((5, 3), 1e307), dO * 1e-3)
accepted(
    "2d-layouts",  # Fortran order, a row stride of 2, negative strides, a transposed view
    np.asfortranarray(Q),
    np.repeat(K, 2, axis=0)[::2],
    V[::-1].copy()[::-1],
    dO.T.copy().T,
    mask=np.asfortranarray(MASK),
)
accepted(
    "2d-broadcast-query-rows", np.broadcast_to(Q[0], (6, 4)), K, V, np.broadcast_to(dO[0], (6, 3))
)
accepted("2d-one-query-as-x[None]", Q[0][None], K, V, dO[0][None])
accepted("2d-one-key-as-x[None]", Q, K[0][None], V[0][None], dO)
accepted(
    "2d-across-tiles-n300-m260-mask",
    *(rng.standard_normal(s) for s in [(300, 8), (260, 8), (260, 8), (300, 8)]),
    mask=rng.random((300, 260)) < 0.7,
)
# a logit beyond the float range where a key is dropped counts for neither core
K_HUGE = np.vstack([K, np.full((1, 4), 1e308)])  # q·k_5 = 4e308 for q = 1
V_HUGE = np.vstack([V, V[:1]])
DROP_LAST = np.broadcast_to(np.arange(6) < 5, (6, 6))  # a row stride of 0
accepted("2d-overflow-only-in-masked-keys", np.ones((6, 4)), K_HUGE, V_HUGE, dO, mask=DROP_LAST)
accepted(
    "2d-overflow-only-past-the-diagonal", np.ones((5, 4)), K_HUGE, V_HUGE, dO[:5], is_causal=True
)
# ‖q‖·‖k‖ overflows, so Cauchy–Schwarz cannot clear the logits; they are 0 (q ⟂ k)
Q_WIDE, K_WIDE = np.zeros((6, 4)), K.copy()
Q_WIDE[:, 0], K_WIDE[:, 0] = 1e308, 0.0
accepted("2d-large-orthogonal-logits", Q_WIDE, K_WIDE * 1e10, V, dO * 1e-3)

# ---- accepted: batched -----------------------------------------------------------------------

accepted("batched-mha", QB[:, :2], KB, VB, dOB[:, :2])
accepted("batched-gqa", QB, KB, VB, dOB, **GQA)
accepted("batched-gqa-causal", QB, KB, VB, dOB, is_causal=True, **GQA)
accepted("batched-mqa", QB, KB[:, :1], VB[:, :1], dOB, **GQA)
accepted("batched-float32-gqa", *f32(QB, KB, VB, dOB), **GQA)
accepted("batched-no-batch-axes", QB[0], KB[0], VB[0], dOB[0], **GQA)
accepted("batched-enable_gqa-with-equal-heads", QB[:, :2], KB, VB, dOB[:, :2], **GQA)
accepted("batched-mask-of-every-head", QB, KB, VB, dOB, mask=MASK, **GQA)
accepted("batched-mask-per-query-head", QB, KB, VB, dOB, mask=rng.random((2, 4, 6, 5)) < 0.6, **GQA)
accepted(
    "batched-mask-per-head-shared-by-the-batch",
    QB,
    KB,
    VB,
    dOB,
    mask=rng.random((4, 6, 5)) < 0.6,
    **GQA,
)
accepted(
    "batched-key-padding",
    QB,
    KB,
    VB,
    dOB,
    mask=np.arange(5) < np.array([3, 5])[:, None, None, None],
    **GQA,
)
accepted(
    "batched-broadcast-batch", *(np.broadcast_to(x[:1], x.shape) for x in (QB, KB, VB, dOB)), **GQA
)
accepted(
    "batched-across-tiles-n300-m260-causal",
    *(
        rng.standard_normal(s).astype(np.float32)
        for s in [(1, 4, 300, 8), (1, 2, 260, 8), (1, 2, 260, 8), (1, 4, 300, 8)]
    ),
    is_causal=True,
    **GQA,
)

# ---- refused: flags, scale, mask -------------------------------------------------------------

refused("2d-mask-and-is_causal", "mask", Q, K, V, OUT, mask=MASK, is_causal=True)
refused("batched-mask-and-is_causal", "mask", QB, KB, VB, OUTB, mask=MASK, is_causal=True, **GQA)
for what, value in [("int", 1), ("str", "yes"), ("None", None), ("array", np.array([True]))]:
    refused(f"2d-is_causal={what}", "is_causal", Q, K, V, OUT, is_causal=value)
refused("batched-is_causal=int", "is_causal", QB, KB, VB, OUTB, is_causal=1, **GQA)
refused("2d-enable_gqa=str", "enable_gqa", Q, K, V, OUT, enable_gqa="y")
refused("batched-enable_gqa=None", "enable_gqa", QB, KB, VB, OUTB, enable_gqa=None)
for what, value in [
    ("0", 0.0),
    ("-1", -1),
    ("nan", np.nan),
    ("inf", np.inf),
    ("str", "0.5"),
    ("True", True),
    ("10**400", 10**400),
]:
    refused(f"2d-scale={what}", "scale", Q, K, V, OUT, scale=value)
refused("batched-scale=0", "scale", QB, KB, VB, OUTB, scale=0.0, **GQA)
for what, value in [
    ("shape", np.ones((6, 6), bool)),
    ("broadcastable-but-2d", np.ones((1, 5), bool)),  # 2-D input takes the (n, m) mask only
    ("float", np.ones((6, 5))),
    ("int", np.ones((6, 5), int)),
    ("ragged", [[True, False], [True]]),
]:
    refused(f"2d-mask={what}", "mask", Q, K, V, OUT, mask=value)
refused(
    "batched-mask=not-broadcastable", "mask", QB, KB, VB, OUTB, mask=np.ones((3, 6, 5), bool), **GQA
)
refused("batched-mask=float", "mask", QB, KB, VB, OUTB, mask=np.ones((6, 5)), **GQA)

# ---- refused: Q, K, V -------------------------------------------------------------------------

for arg, i in [("Q", 0), ("K", 1), ("V", 2)]:
    for what, make in [
        ("None", lambda x: None),
        ("ragged", lambda x: [[1.0, 2.0], [3.0]]),
        ("str", lambda x: "abc"),
        ("int", lambda x: x.astype(int)),
        ("bool", lambda x: x > 0),
        ("complex", lambda x: x.astype(complex)),
        ("float16", lambda x: x.astype(np.float16)),
        ("object", lambda x: x.astype(object)),
        ("no-rows", lambda x: x[:0]),
        ("nan", lambda x: np.where(np.arange(x.shape[-1]) == 1, np.nan, x)),
        ("inf", lambda x: np.where(np.arange(x.shape[-1]) == 1, np.inf, x)),
        ("-inf", lambda x: np.where(np.arange(x.shape[-1]) == 1, -np.inf, x)),
    ]:
        args = [Q, K, V]
        args[i] = make(args[i])
        refused(f"2d-{arg}={what}", arg, *args, OUT)
    batched = [QB, KB, VB]
    batched[i] = np.where(np.arange(batched[i].shape[-1]) == 1, np.nan, batched[i])
    refused(f"batched-{arg}=nan", arg, *batched, OUTB, **GQA)
refused("2d-Q=1-D", "Q", Q[0], K, V, OUT)
refused("2d-K=3-D", "K", Q, K[None], V, OUT)
refused("2d-K=other-d", "K", Q, K[:, :2], V, OUT)
refused("2d-V=other-m", "V", Q, K, V[:4], OUT)
refused("2d-V=no-columns", "V", Q, K, V[:, :0], OUT)
refused("batched-K=other-ndim", "K", QB, KB[0], VB, OUTB, **GQA)
refused("batched-K=other-batch", "K", QB, KB[:1], VB[:1], OUTB, **GQA)
refused("batched-K=other-d", "K", QB, KB[..., :2], VB, OUTB, **GQA)
refused("batched-V=other-m", "V", QB, KB, VB[..., :4, :], OUTB, **GQA)
refused("batched-H-not-a-multiple-of-H_kv", "Q", QB[:, :3], KB, VB, OUTB, **GQA)
refused("batched-grouped-heads-without-enable_gqa", "enable_gqa", QB, KB, VB, OUTB)

# ---- refused: O, dO, lse ---------------------------------------------------------------------

for arg, i in [("O", 0), ("dO", 1), ("lse", 2)]:
    for what, make in [
        ("None", lambda x: None),
        ("int", lambda x: x.astype(int)),
        ("nan", lambda x: np.where(np.arange(x.shape[-1]) == 1, np.nan, x)),
        ("+inf", lambda x: np.where(np.arange(x.shape[-1]) == 1, np.inf, x)),
        ("shape", lambda x: x[:-1]),
    ]:
        for layout, args, outputs in [("2d", (Q, K, V), OUT), ("batched", (QB, KB, VB), OUTB)]:
            bad = list(outputs)
            bad[i] = make(bad[i])
            kw = GQA if layout == "batched" else {}
            refused_backward(f"{layout}-{arg}={what}", arg, *args, tuple(bad), **kw)
refused_backward("2d-dO=other-d_v", "dO", Q, K, V, (O, dO[:, :2], LSE))
refused_backward("batched-dO=other-d_v", "dO", QB, KB, VB, (OB, dOB[..., :2], LSEB), **GQA)
refused_backward("batched-lse=other-heads", "lse", QB, KB, VB, (OB, dOB, LSEB[:, :2]), **GQA)

# an lse that is not the forward pass's: a logit of its row exceeds it by more than rounding
LSE_LOW = LSE.copy()
LSE_LOW[3] -= 2.0
LSE_DEAD = LSE.copy()
LSE_DEAD[1] = -np.inf  # a fully masked row's lse on a row with kept keys
LSEB_LOW = LSEB.copy()
LSEB_LOW[1, 3] -= 2.0  # the second query head of a group
LSE_CAUSAL = al.attention_forward(Q, K, V, is_causal=True)[1]
O_EYE, LSE_EYE = al.attention_forward(Q, K, V, mask=np.eye(6, 5, dtype=bool))
for id, args, outputs, kw in [
    ("2d-lse-below-a-logit", (Q, K, V), (O, dO, LSE_LOW), {}),
    ("2d-lse=-inf-on-a-kept-row", (Q, K, V), (O, dO, LSE_DEAD), {}),
    ("2d-lse-of-the-causal-pass", (Q, K, V), (O, dO, LSE_CAUSAL), {}),
    ("2d-lse-of-a-masked-pass", (Q, K, V), (O_EYE, dO, LSE_EYE), {}),
    ("batched-lse-of-a-grouped-head-below-a-logit", (QB, KB, VB), (OB, dOB, LSEB_LOW), GQA),
]:
    refused_backward(id, "lse", *args, outputs, words=False, **kw)

# ---- refused: results beyond the dtype -------------------------------------------------------

QX, KX = np.full((6, 4), 1e200), np.full((5, 4), 1e200)
refused("2d-logits-overflow", "Q", QX, KX, V, OUT)
refused("2d-logits-overflow-by-scale", "scale", Q, K, V, OUT, scale=1e308)
refused("2d-logits-overflow-float32", "Q", *f32(Q * 1e20, K * 1e20, V), tuple(f32(*OUT)))
KEEP_ONE = np.ones((6, 6), bool)
KEEP_ONE[1:, 5] = False  # query 0 keeps the overflowing key
refused(
    "2d-logits-overflow-in-a-kept-key", "Q", np.ones((6, 4)), K_HUGE, V_HUGE, OUT, mask=KEEP_ONE
)
QB_X, KB_X = QB.copy(), KB.copy()
KB_X[1, 1] = 1e200  # the key/value head of query heads 2 and 3 of batch 1: finite logits
O_X, LSE_X = al.attention_forward(QB_X, KB_X, VB, **GQA)
QB_X[1, 3] = 1e200  # and query head 3's overflow (the only fault: the other heads' lse fit)
refused("batched-logits-overflow-in-one-head", "Q", QB_X, KB_X, VB, (O_X, dOB, LSE_X), **GQA)
# the backward pass is linear in dO; these gradients do not fit float64 however dO is scaled
O_BIG, LSE_BIG = al.attention_forward(Q * 1e3, K, V * 1e300)
refused_backward("2d-gradients-overflow", "dO", Q * 1e3, K, V * 1e300, (O_BIG, dO * 1e300, LSE_BIG))

BY_ID = {row.id: row for row in ROWS}
assert len(BY_ID) == len(ROWS), "row ids must be unique"


# ---- running a row ---------------------------------------------------------------------------


@functools.cache
def outcome(core: str, row_id: str):
    """What ``core`` does with the row: its results (a tuple of arrays) or the exception."""
    row = BY_ID[row_id]
    forward, backward = CORES[core]
    inputs = [*row.qkv, *(row.outputs or ()), row.dO, row.kw.get("mask")]
    before = [x.copy() if isinstance(x, np.ndarray) else None for x in inputs]
    try:
        if row.outputs is not None:
            result = backward(*row.qkv, *row.outputs, **row.kw)
        else:
            result = forward(*row.qkv, **row.kw)
            if row.dO is not None:
                O, lse = result
                result = (O, lse, *backward(*row.qkv, O, row.dO, lse, **row.kw))
    except Exception as exc:  # an unexpected one fails below, with its type
        result = exc
    for x, copy in zip(inputs, before, strict=True):
        if copy is not None:
            assert np.array_equal(x, copy, equal_nan=copy.dtype.kind in "fc"), f"{core} changed it"
    return result


def names(message: str, arg: str) -> bool:
    """Whether ``message`` names the argument ``arg`` as a word of its own."""
    return re.search(rf"(?<![\w.]){re.escape(arg)}(?![\w(])", message) is not None


def tolerances(row: Call):
    """What the two cores' results may differ by, entry by entry: twice (for second-order
    terms) the sum of the two computations' first-order rounding bounds in the dtype they
    ran in (helpers.rounding_bounds), for (O, lse, dQ, dK, dV)."""
    Q, K, V = row.qkv
    kw = {k: v for k, v in row.kw.items() if k in ("scale", "mask", "is_causal", "enable_gqa")}
    dtype = np.result_type(*(np.asarray(x) for x in (Q, K, V, row.dO)))
    with np.errstate(over="ignore"):  # the rows whose dropped keys' logits overflow
        parts = reference_parts(Q, K, V, row.dO, **kw)
        return tuple(2 * (b + b) for b in rounding_bounds(parts, dtype))


@pytest.mark.parametrize("core", list(CORES))
@pytest.mark.parametrize("row_id", list(BY_ID))
def test_both_cores_accept_and_refuse_the_same_calls(row_id, core):
    row = BY_ID[row_id]
    ours, theirs = outcome(core, row_id), outcome(OTHER[core], row_id)
    if row.refused is not None:
        assert isinstance(ours, AttnInputError), f"{core} did not refuse: {ours!r:.200}"
        assert isinstance(theirs, AttnInputError), f"{OTHER[core]} did not refuse: {theirs!r:.200}"
        assert names(str(ours), row.refused), str(ours)
        if row.words:
            assert str(ours) == str(theirs)
        else:
            assert names(str(theirs), row.refused), str(theirs)
        return
    assert not isinstance(ours, BaseException), f"{core} refused: {ours!r}"
    assert not isinstance(theirs, BaseException), f"{OTHER[core]} refused: {theirs!r}"
    assert [x.dtype for x in ours] == [x.dtype for x in theirs]
    bad = reference_mismatches(ours, theirs, tolerances(row))
    assert not bad, bad
