"""Bad-input rows of Part I, the two-level machine: the machine itself, the schedules on it with
their exact counts, the closed forms, block rules and the lower bounds.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from bad_input_cases import (
    K_1E200,
    LONG_Q,
    LSE_REF,
    O_REF,
    Q_1E200,
    RAGGED,
    K,
    Q,
    Table,
    V,
    before_allocating,
    dO,
    finite,
    word,
)

import attnlib as al
from attnlib import iomodel as io
from attnlib.iomodel import CapacityError, MachineError, gqa
from attnlib.iomodel import blocks as bl
from attnlib.iomodel import causal as ca
from attnlib.iomodel import layout as ly
from attnlib.iomodel import sweeps as sw
from attnlib.iomodel import tiling as tl

table = Table()


# ---- reals and ints out of range ----

table.raises(
    "iomodel.matmul_sharp_order",
    "m=0",
    lambda: io.matmul_sharp_order(0, 2, 2, 4),
    word("m"),
)
table.raises(
    "iomodel.matmul_sharp_order",
    "10**200-overflows",
    lambda: io.matmul_sharp_order(10**200, 10**200, 10**200, 4),
    "overflows",
)
table.valid(
    "iomodel.matmul_sharp_order",
    "M=10**400",
    lambda: io.matmul_sharp_order(2, 2, 2, 10**400),
    lambda b: 0 < b < 1e-190,
)

table.valid(
    "iomodel.forward_lower_bound",
    "numpy-ints",
    lambda: io.forward_lower_bound(np.int64(64), np.int32(8), np.uint16(256)),
    lambda v: v == io.forward_lower_bound(64, 8, 256) and type(v) is int,
)
table.valid(
    "iomodel.forward_order",
    "numpy-ints",
    lambda: io.forward_order(np.int64(64), np.int32(8), np.uint16(256)),
    lambda v: v == io.forward_order(64, 8, 256),
)

# ---- the two-level machine and its schedules ----


def _tile_reference(M, tiles, vectors):
    """The largest b with tiles·b² + vectors·b <= M, by bisection on exact ints."""
    lo, hi = 0, 1
    while tiles * hi * hi + vectors * hi <= M:
        hi *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if tiles * mid * mid + vectors * mid <= M else (lo, mid)
    return lo


for M in (10**45, 10**50, 10**400):
    table.valid(
        "iomodel.smallcache_forward_tile",
        f"M=1e{len(str(M)) - 1}",
        lambda M=M: io.smallcache_forward_tile(M),
        lambda b, M=M: b == _tile_reference(M, 3, 2),
    )
    table.valid(
        "iomodel.smallcache_backward_tile",
        f"M=1e{len(str(M)) - 1}",
        lambda M=M: io.smallcache_backward_tile(M),
        lambda b, M=M: b == _tile_reference(M, 4, 2),
    )
table.valid(
    "iomodel.smallcache_backward_count",
    "M=10**400",
    lambda: io.smallcache_backward_count(8, 4, 10**400),
    lambda c: c.writes == 2 * 8 * 8 + 8 * 4 + 8 * 4 + 8 * 4,
)
table.valid(
    "iomodel.smallcache_forward_count",
    "M=10**400",
    lambda: io.smallcache_forward_count(8, 4, 10**400),
    lambda c: c.writes == 8 * 8 + 8 + 8 * 4,
)
for fname, f, args in [
    ("iomodel.forward_order", io.forward_order, (10**200, 10**200, 4)),
    ("iomodel.backward_order", io.backward_order, (10**200, 10**200, 4)),
    ("iomodel.matmul_order", io.matmul_order, (10**200, 10**200, 10**200, 4)),
    ("iomodel.sparse_worst_case_order", io.sparse_worst_case_order, (10**300, 10**300, 4)),
]:
    table.raises(fname, "10**200-overflows", lambda f=f, a=args: f(*a), r"too large")
table.valid(
    "iomodel.forward_order",
    "10**200-finite",
    lambda: io.forward_order(10**200, 1, 10**400),
    lambda v: math.isclose(v, 1.0, rel_tol=1e-9),
)
table.valid(
    "iomodel.backward_order",
    "M=10**400",
    lambda: io.backward_order(10**100, 4, 10**400, lower_order=True),
    lambda v: math.isclose(v, (10**200 * 16 + 10**100 * 64) / 10**400, rel_tol=1e-9),
)
table.valid(
    "iomodel.sparse_worst_case_order",
    "M=10**400",
    lambda: io.sparse_worst_case_order(10**300, 10**300, 10**400),
    lambda v: math.isclose(v, 1e200, rel_tol=1e-9),
)
table.valid(
    "iomodel.matmul_order",
    "M=10**400",
    lambda: io.matmul_order(10**150, 10**150, 10**150, 10**400),
    lambda v: math.isclose(v, 1e250, rel_tol=1e-9),
)
table.raises(
    "iomodel.backward_order",
    "lower_order='no'",
    lambda: io.backward_order(8, 4, 64, lower_order="no"),
    "lower_order",
)
table.raises(
    "iomodel.backward_order",
    "lower_order=1",
    lambda: io.backward_order(8, 4, 64, lower_order=1),
    "lower_order",
)
for fname, f in [
    ("iomodel.forward_order", io.forward_order),
    ("iomodel.backward_order", io.backward_order),
]:
    table.bad_ints(fname, "n", lambda v, f=f: f(v, 4, 64))
    table.bad_ints(fname, "M", lambda v, f=f: f(8, 4, v))
table.bad_ints("iomodel.matmul_order", "p", lambda v: io.matmul_order(4, 4, v, 64))
table.bad_ints(
    "iomodel.sparse_worst_case_order", "z_qk", lambda v: io.sparse_worst_case_order(16, v, 64)
)

# ---- the certified bounds: exact ints at any size, masks, heads ----

_BAND = np.abs(np.subtract.outer(np.arange(8), np.arange(8))) <= 1
for fname, f in [
    ("iomodel.forward_lower_bound", io.forward_lower_bound),
    ("iomodel.backward_lower_bound", io.backward_lower_bound),
]:
    table.bad_ints(fname, "n", lambda v, f=f: f(v, 4, 64))
    table.bad_ints(fname, "M", lambda v, f=f: f(8, 4, v))
    for arg in ("m", "d_v", "H", "H_kv"):  # None is the default of m, d_v and H_kv
        for what, value in [("bool", True), ("float", 2.0), ("str", "3"), ("below-minimum", 0)]:
            table.raises(
                fname, f"{arg}={what}", lambda f=f, a=arg, v=value: f(8, 4, 64, **{a: v}), word(arg)
            )
    table.valid(
        fname,
        "10**200-exact",
        lambda f=f: f(10**200, 10**200, 4),
        lambda v: type(v) is int and v > 10**599,
    )
    table.valid(fname, "M=10**400", lambda f=f: f(8, 4, 10**400), lambda v: type(v) is int)
    table.raises(fname, "H=3-H_kv=2", lambda f=f: f(8, 4, 64, H=3, H_kv=2), "multiple")
    table.raises(
        fname, "mask-float", lambda f=f: f(8, 4, 64, mask=_BAND.astype(float)), word("mask")
    )
    table.raises(fname, "mask-shape", lambda f=f: f(8, 4, 64, mask=_BAND[:4]), word("mask"))
    table.raises(fname, "mask-3d", lambda f=f: f(8, 4, 64, mask=_BAND[None]), word("mask"))
    table.raises(
        fname, "mask-and-is_causal", lambda f=f: f(8, 4, 64, mask=_BAND, is_causal=True), "mask"
    )
    table.raises(fname, "is_causal=1", lambda f=f: f(8, 4, 64, is_causal=1), "is_causal")
table.bad_ints("iomodel.matmul_lower_bound", "p", lambda v: io.matmul_lower_bound(4, 4, v, 64))
table.valid(
    "iomodel.matmul_lower_bound",
    "M=10**400",
    lambda: io.matmul_lower_bound(10**150, 10**150, 10**150, 10**400),
    lambda v: v == 3 * 10**300,
)
table.bad_ints("iomodel.sparse_lower_bound", "d", lambda v: io.sparse_lower_bound(_BAND, v, 64))
table.bad_ints("iomodel.sparse_lower_bound", "M", lambda v: io.sparse_lower_bound(_BAND, 4, v))
for fname, f in [
    ("iomodel.sparse_lower_bound", lambda mask: io.sparse_lower_bound(mask, 4, 8)),
    ("iomodel.mask_density_bound", lambda mask: io.mask_density_bound(mask, 4)),
]:
    table.raises(fname, "mask-1d", lambda f=f: f(_BAND[0]), word("mask"))
    table.raises(fname, "mask-int", lambda f=f: f(_BAND.astype(int)), word("mask"))
    table.raises(fname, "mask-ragged", lambda f=f: f([[True], [True, False]]), word("mask"))
table.bad_ints(
    "iomodel.mask_density_bound", "s", lambda v: io.mask_density_bound(_BAND, v), minimum_bad=-1
)
table.bad_ints("iomodel.products_per_part", "d", lambda v: io.products_per_part(v, 64))
table.bad_ints("iomodel.products_per_part", "M", lambda v: io.products_per_part(4, v))
for what, value in [("bool", True), ("float", 2.0), ("str", "3"), ("below-minimum", -1)]:
    # rho=None is the default: the dense value
    table.raises(
        "iomodel.products_per_part",
        f"rho={what}",
        lambda v=value: io.products_per_part(4, 64, rho=v),
        word("rho"),
    )

# ---- the attack on the certified bounds ----

table.raises("iomodel.element_mask", "kind", lambda: io.element_mask("diagonal", 4, 4), "kind")
table.bad_ints("iomodel.element_mask", "n", lambda v: io.element_mask("band", v, 4))
table.bad_ints("iomodel.element_mask", "param", lambda v: io.element_mask("band", 4, 4, v))
table.raises(
    "iomodel.element_mask", "seed=-1", lambda: io.element_mask("random", 4, 4, 5, seed=-1), "seed"
)
table.raises(
    "iomodel.element_mask", "n=10**6", lambda: io.element_mask("band", 10**6, 10**6), "too large"
)
table.valid(
    "iomodel.element_mask",
    "random-0",
    lambda: io.element_mask("random", 4, 4, 0),
    lambda mask: mask.dtype == bool and not mask.any(),
)
table.raises("iomodel.schedule_families", "sizes=5", lambda: io.schedule_families(5), "sizes")
table.raises(
    "iomodel.schedule_families", "size-short", lambda: io.schedule_families([(4, 4, 2, 2)]), "sizes"
)
table.raises(
    "iomodel.schedule_families",
    "M=0",
    lambda: io.schedule_families([(4, 4, 2, 2, 0)]),
    word("sizes[0].M"),
)
table.raises(
    "iomodel.schedule_families",
    "seed=-1",
    lambda: io.schedule_families([(4, 4, 2, 2, 64)], seed=-1),
    "seed",
)
table.raises(
    "iomodel.optimum_families",
    "max_states=0",
    lambda: io.optimum_families(max_states=0),
    "max_states",
)
table.bad_ints("iomodel.optimum_families", "extra_M", lambda v: io.optimum_families(extra_M=v))
table.raises("iomodel.worst_ratios", "not-a-family", lambda: io.worst_ratios([3]), "Family")
table.raises(
    "iomodel.worst_ratios",
    "float-bound",
    lambda: io.worst_ratios([io.Family("f", lambda: 4, lambda: 2.0, ({},))]),
    "int >= 0",
)
table.valid("iomodel.worst_ratios", "empty", lambda: io.worst_ratios([]), lambda w: w == {})
table.raises(
    "iomodel.attack_bounds",
    "optima=1",
    lambda: io.attack_bounds([(4, 4, 2, 2, 64)], optima=1),
    "optima",
)
table.raises("iomodel.attack_bounds", "sizes=[]", lambda: io.attack_bounds([]), "sizes")
for fname, f in [
    ("iomodel.flash_forward_count", io.flash_forward_count),
    ("iomodel.flash_backward_count", io.flash_backward_count),
    ("iomodel.standard_forward_count", io.standard_forward_count),
    ("iomodel.standard_backward_count", io.standard_backward_count),
    ("iomodel.smallcache_forward_count", io.smallcache_forward_count),
    ("iomodel.smallcache_backward_count", io.smallcache_backward_count),
]:
    table.bad_ints(fname, "n", lambda v, f=f: f(v, 4, 4096))
    table.bad_ints(fname, "d", lambda v, f=f: f(16, v, 4096))
    table.raises(fname, "M=str", lambda f=f: f(16, 4, "4096"), word("M"))
    table.raises(fname, "m=0", lambda f=f: f(16, 4, 4096, m=0), word("m"))
# the functions of one int argument: a bad value is the whole call
for fname, arg, f in [
    ("iomodel.smallcache_forward_tile", "M", io.smallcache_forward_tile),
    ("iomodel.smallcache_backward_tile", "M", io.smallcache_backward_tile),
    ("iomodel.matmul_tile_size", "M", io.matmul_tile_size),
    ("iomodel.flash_forward_min_M", "d", io.flash_forward_min_M),
    ("iomodel.flash_backward_min_M", "d", io.flash_backward_min_M),
]:
    table.bad_ints(fname, arg, lambda v, f=f: f(v))
for fname, f in [
    ("iomodel.flash_forward_blocks", io.flash_forward_blocks),
    ("iomodel.flash_backward_blocks", io.flash_backward_blocks),
    ("iomodel.fa1_blocks", io.fa1_blocks),
]:
    table.bad_ints(fname, "d", lambda v, f=f: f(v, 4096))
    table.raises(fname, "M=str", lambda f=f: f(64, "4096"), word("M"))
for fname, f in [
    ("iomodel.flash_forward_working_set", io.flash_forward_working_set),
    ("iomodel.flash_backward_working_set", io.flash_backward_working_set),
]:
    table.raises(fname, "B_r=0", lambda f=f: f(0, 4, 8), "B_r")
    table.raises(fname, "d=str", lambda f=f: f(4, 4, "8"), word("d"))
for fname, f in [
    ("iomodel.naive_matmul_count", io.naive_matmul_count),
    ("iomodel.tiled_matmul_count", io.tiled_matmul_count),
]:
    table.bad_ints(fname, "k", lambda v, f=f: f(4, v, 4, 64))
for fname, f in [
    ("iomodel.naive_matmul", io.naive_matmul),
    ("iomodel.tiled_matmul", io.tiled_matmul),
]:
    table.bad_arrays(fname, "A", lambda v, f=f: f(v, np.ones((4, 3)), M=64))
    table.raises(fname, "B-shape", lambda f=f: f(np.ones((3, 4)), np.ones((3, 3)), M=64), word("B"))
    table.raises(fname, "M=0", lambda f=f: f(np.ones((3, 4)), np.ones((4, 3)), M=0), word("M"))
for fname, f in [
    ("iomodel.flash_forward", io.flash_forward),
    ("iomodel.standard_forward", io.standard_forward),
    ("iomodel.smallcache_forward", io.smallcache_forward),
]:
    table.raises(fname, "M=-1", lambda f=f: f(Q, K, V, M=-1), word("M"))
    table.raises(
        fname, "scale=10**400", lambda f=f: f(Q, K, V, M=4096, scale=10**400), word("scale")
    )
for fname, f in [
    ("iomodel.flash_backward", io.flash_backward),
    ("iomodel.standard_backward", io.standard_backward),
    ("iomodel.smallcache_backward", io.smallcache_backward),
]:
    table.bad_arrays(fname, "dO", lambda v, f=f: f(Q, K, V, O_REF, v, LSE_REF, M=4096))
    table.raises(fname, "M=None", lambda f=f: f(Q, K, V, O_REF, dO, LSE_REF, M=None), word("M"))

# ---- causal, grouped-query and decode schedules on the machine ----

table.raises(
    "iomodel.flash_forward",
    "is_causal-M=0",
    lambda: io.flash_forward(Q, K, V, M=0, is_causal=True),
    word("M"),
)
table.bad_arrays(
    "iomodel.flash_backward(is_causal)",
    "dO",
    lambda v: io.flash_backward(Q, K, V, O_REF, v, LSE_REF, M=4096, is_causal=True),
)
for fname, f in [
    ("iomodel.flash_forward_count", io.flash_forward_count),
    ("iomodel.flash_backward_count", io.flash_backward_count),
]:
    table.bad_ints(f"{fname}(is_causal)", "n", lambda v, f=f: f(v, 4, 4096, is_causal=True))
    table.raises(fname, "is_causal-m=0", lambda f=f: f(16, 4, 4096, m=0, is_causal=True), word("m"))
    table.raises(
        fname,
        "is_causal-blocks=(0,1)",
        lambda f=f: f(16, 4, 4096, blocks=(0, 1), is_causal=True),
        "blocks",
    )
    table.raises(fname, "is_causal=str", lambda f=f: f(16, 4, 4096, is_causal="y"), "is_causal")
    for _v in (0, 2.0, "2", True):
        table.raises(
            f"{fname}(enable_gqa)",
            f"H_kv={_v!r}",
            lambda f=f, v=_v: f(16, 4, 4096, H=8, H_kv=v, enable_gqa=True),
            word("H_kv"),
        )
    table.raises(
        fname,
        "H-not-multiple",
        lambda f=f: f(16, 4, 4096, H=6, H_kv=4, enable_gqa=True),
        "multiple",
    )
    table.raises(fname, "H!=H_kv", lambda f=f: f(16, 4, 4096, H=2, H_kv=1), word("enable_gqa=True"))
    table.raises(
        fname, "enable_gqa=str", lambda f=f: f(16, 4, 4096, enable_gqa="yes"), "enable_gqa"
    )
table.bad_ints("iomodel.causal_mask", "n", lambda v: io.causal_mask(v))
table.raises("iomodel.causal_mask", "m=0", lambda: io.causal_mask(4, 0), word("m"))
table.raises(
    "iomodel.causal_mask", "too-large", lambda: io.causal_mask(10**6, 10**6), "n or m is too large"
)
table.bad_ints("iomodel.causal.causal_score_count", "n", lambda v: ca.causal_score_count(v, 4))
table.raises(
    "iomodel.causal.causal_score_count", "m=2.0", lambda: ca.causal_score_count(4, 2.0), word("m")
)
table.valid(
    "iomodel.causal.causal_score_count",
    "n=m=4",
    lambda: ca.causal_score_count(4),
    lambda z: z == 10,
)
table.bad_ints("iomodel.causal_saving", "d", lambda v: io.causal_saving(16, v, 4096))
table.raises(
    "iomodel.causal_saving",
    "which=bad",
    lambda: io.causal_saving(16, 4, 4096, which="both"),
    "which",
)
Q3, K3, V3 = Q.reshape(2, 3, 4), K[None], V[None]
for fname, f in [
    ("iomodel.flash_forward", io.flash_forward),
    ("iomodel.flash_forward(n=1)", lambda q, k, v, **kw: io.flash_forward(q[:, :1], k, v, **kw)),
]:
    table.raises(fname, "K-2D", lambda f=f: f(Q3, K, V3, M=4096, enable_gqa=True), word("K"))
    table.raises(
        fname, "V-heads", lambda f=f: f(Q3, K3, V3[[0, 0]], M=4096, enable_gqa=True), word("V")
    )
    table.raises(fname, "heads-M=0", lambda f=f: f(Q3, K3, V3, M=0, enable_gqa=True), word("M"))
table.raises(
    "iomodel.flash_forward",
    "H-not-multiple",
    lambda: io.flash_forward(
        Q.reshape(3, 2, 4), np.ones((2, 5, 4)), np.ones((2, 5, 3)), M=4096, enable_gqa=True
    ),
    "multiple",
)
table.raises(
    "iomodel.flash_forward",
    "enable_gqa=1",
    lambda: io.flash_forward(Q3, K3, V3, M=4096, enable_gqa=1),
    word("enable_gqa"),
)
table.raises(
    "iomodel.flash_forward",
    "Q-4D",
    lambda: io.flash_forward(Q3[None], K3[None], V3[None], M=4096, enable_gqa=True),
    word("Q"),
)
O3, L3 = O_REF.reshape(2, 3, 3), LSE_REF.reshape(2, 3)
table.raises(
    "iomodel.flash_backward",
    "heads-lse-shape",
    lambda: io.flash_backward(Q3, K3, V3, O3, O3, LSE_REF, M=4096, enable_gqa=True),
    word("lse"),
)
table.raises(
    "iomodel.flash_backward",
    "heads-dO-nan",
    lambda: io.flash_backward(Q3, K3, V3, O3, O3 * np.nan, L3, M=4096, enable_gqa=True),
    word("dO"),
)
table.bad_ints("iomodel.gqa_kv_reuse", "H_kv", lambda v: io.gqa_kv_reuse(8, v, 16, 4, 4096))
table.raises(
    "iomodel.gqa_kv_reuse", "H-not-multiple", lambda: io.gqa_kv_reuse(6, 4, 16, 4, 4096), "multiple"
)
table.bad_decode("iomodel.gqa.decode_count", gqa.decode_count, "multiple")

table.raises(
    "iomodel.flash_forward",
    "blocks=(0,1)",
    lambda: io.flash_forward(Q, K, V, M=4096, blocks=(0, 1)),
    "blocks",
)
table.raises(
    "iomodel.flash_forward",
    "block_mask-shape",
    lambda: io.flash_forward(Q, K, V, M=4096, blocks=(2, 2), block_mask=np.ones((1, 1), bool)),
    "block_mask",
)
table.raises(
    "iomodel.flash_block_mask",
    "blocks=None",
    lambda: io.flash_block_mask(np.ones((4, 4), bool), None),
    "blocks",
)
table.raises(
    "iomodel.flash_block_mask",
    "mask=ragged",
    lambda: io.flash_block_mask([[True], [True, False]], (2, 2)),
    word("mask"),
)
table.raises(
    "iomodel.flash_block_mask",
    "mask=int",
    lambda: io.flash_block_mask(np.ones((4, 4)), (2, 2)),
    word("mask"),
)
table.raises(
    "iomodel.expand_block_mask",
    "block_mask=None",
    lambda: io.expand_block_mask(None, 4, 4, (2, 2)),
    "block_mask",
)
table.raises(
    "iomodel.expand_block_mask",
    "blocks=None",
    lambda: io.expand_block_mask(np.ones((2, 2), bool), 4, 4, None),
    "blocks",
)
table.raises(
    "iomodel.expand_block_mask",
    "n=m=10**6",
    lambda: io.expand_block_mask(np.ones((1, 1), bool), 10**6, 10**6, (10**6, 10**6)),
    r"n or m is too large",
)
table.raises(
    "iomodel.expand_block_mask",
    "n=0",
    lambda: io.expand_block_mask(np.ones((2, 2), bool), 0, 4, (2, 2)),
    word("n"),
)
table.valid(
    "iomodel.expand_block_mask",
    "edge-3x5",
    lambda: io.expand_block_mask(np.array([[True, False]]), 3, 5, (3, 3)),
    lambda mk: mk.shape == (3, 5) and mk[:, :3].all() and not mk[:, 3:].any(),
)
table.valid(
    "iomodel.flash_block_mask",
    "edge-one-entry",
    lambda: io.flash_block_mask(np.eye(4, dtype=bool)[:, ::-1], (2, 2)),
    lambda bm: (bm == np.array([[False, True], [True, False]])).all(),
)


# the machine
def _mem():
    mem = io.TwoLevelMemory(64)
    mem.put("A", np.ones((4, 4)))
    return mem


table.raises("iomodel.TwoLevelMemory", "M=0", lambda: io.TwoLevelMemory(0), word("M"))
table.raises("iomodel.TwoLevelMemory", "M=str", lambda: io.TwoLevelMemory("64"), word("M"))
table.valid(
    "iomodel.TwoLevelMemory",
    "M=10**400",
    lambda: io.TwoLevelMemory(10**400).M,
    lambda M: M == 10**400,
)
table.raises(
    "iomodel.TwoLevelMemory.zeros",
    "dtype='foo'",
    lambda: _mem().zeros("O", (2, 2), dtype="foo"),
    "dtype",
)
table.raises(
    "iomodel.TwoLevelMemory.zeros",
    "dtype=str",
    lambda: _mem().zeros("O", (2, 2), dtype=str),
    "dtype",
)
table.raises(
    "iomodel.TwoLevelMemory.zeros",
    "dtype=int",
    lambda: _mem().zeros("O", (2, 2), dtype=np.int64),
    "dtype",
)
table.raises(
    "iomodel.TwoLevelMemory.zeros",
    "shape=10**6x10**6",
    lambda: _mem().zeros("O", (10**6, 10**6)),
    r"shape is too large",
)
table.raises("iomodel.TwoLevelMemory.zeros", "shape=(0,)", lambda: _mem().zeros("O", (0,)), "shape")
table.raises("iomodel.TwoLevelMemory.zeros", "name=''", lambda: _mem().zeros("", (2,)), "name")
table.raises(
    "iomodel.TwoLevelMemory.alloc", "fill='x'", lambda: _mem().alloc((2, 2), fill="x"), "fill"
)
table.raises(
    "iomodel.TwoLevelMemory.alloc", "fill=None", lambda: _mem().alloc((2, 2), fill=None), "fill"
)
table.raises(
    "iomodel.TwoLevelMemory.alloc",
    "dtype='foo'",
    lambda: _mem().alloc((2, 2), dtype="foo"),
    "dtype",
)
table.raises(
    "iomodel.TwoLevelMemory.alloc",
    "shape=10**6x10**6",
    lambda: io.TwoLevelMemory(10**400).alloc((10**6, 10**6)),
    r"shape is too large",
)
table.raises(
    "iomodel.TwoLevelMemory.alloc",
    "over-M",
    lambda: _mem().alloc((9, 9)),
    r"fast memory overflow",
    CapacityError,
)
table.valid(
    "iomodel.TwoLevelMemory.alloc",
    "fill=-inf",
    lambda: _mem().alloc(3, fill=-np.inf),
    lambda b: np.isneginf(b).all(),
)
table.raises(
    "iomodel.TwoLevelMemory.store",
    "block=str",
    lambda: _mem().store("A", (0, 1), (0, 1), "abc"),
    "block",
)
table.raises(
    "iomodel.TwoLevelMemory.store",
    "block=complex",
    lambda: _mem().store("A", (0, 1), (0, 1), np.array([[1 + 2j]])),
    "block",
)
table.raises(
    "iomodel.TwoLevelMemory.store",
    "block-shape",
    lambda: _mem().store("A", (0, 2), (0, 2), np.ones((3, 3))),
    r"block has shape",
    MachineError,
)
table.raises(
    "iomodel.TwoLevelMemory.free", "None", lambda: _mem().free(None), "blocks must be arrays"
)
table.raises(
    "iomodel.TwoLevelMemory.free",
    "foreign-array",
    lambda: _mem().free(np.ones(2)),
    r"not a live fast block",
    MachineError,
)
table.raises(
    "iomodel.TwoLevelMemory.load",
    "unknown-name",
    lambda: _mem().load("Z", (0, 1)),
    r"no array named 'Z'",
    MachineError,
)
table.raises(
    "iomodel.TwoLevelMemory.load",
    "rows-out-of-bounds",
    lambda: _mem().load("A", (0, 9)),
    r"rows \(0, 9\) out of bounds",
    MachineError,
)
table.raises(
    "iomodel.TwoLevelMemory.put", "nan", lambda: _mem().put("B", np.array([np.nan])), word("B")
)
table.raises(
    "iomodel.TwoLevelMemory.put",
    "duplicate",
    lambda: _mem().put("A", np.ones(2)),
    r"name 'A' is already",
)
table.raises(
    "iomodel.TwoLevelMemory.get",
    "unknown",
    lambda: _mem().get("nope"),
    r"no array named",
    MachineError,
)


def _leak():
    mem = _mem()
    mem.load("A", (0, 1))
    return mem.finish()


table.raises("iomodel.TwoLevelMemory.finish", "leak", _leak, r"never freed", MachineError)
table.raises("iomodel.IOCount", "negative", lambda: io.IOCount(-1, 0, 0), "IOCount.reads")
table.raises("iomodel.IOCount", "float", lambda: io.IOCount(1, 2.5, 0), "IOCount.writes")
table.valid(
    "iomodel.IOCount.__add__",
    "sum",
    lambda: io.IOCount(1, 2, 3) + io.IOCount(4, 5, 1),
    lambda c: (c.reads, c.writes, c.total, c.peak_fast) == (5, 7, 12, 3),
)

# the chapters' sweeps, tables and schedules (Part I)
_LOG = io.tiled_matmul(np.ones((2, 2)), np.ones((2, 2)), M=12, record=True)[2].log
table.raises("iomodel.words_by_array", "log=ints", lambda: io.words_by_array([1, 2]), r"log\[0\]")
table.valid(
    "iomodel.words_by_array", "tiled", lambda: io.words_by_array(_LOG), lambda rw: rw[1] == {"C": 4}
)
table.bad_ints("iomodel.cache_sizes", "lo", lambda v: io.cache_sizes(v, 8))
table.raises("iomodel.cache_sizes", "hi<lo", lambda: io.cache_sizes(8, 4), word("hi"))
table.raises(
    "iomodel.cache_sizes", "points=1", lambda: io.cache_sizes(1, 8, points=1), word("points")
)
table.valid(
    "iomodel.cache_sizes", "all", lambda: io.cache_sizes(3, 5), lambda Ms: Ms.tolist() == [3, 4, 5]
)
table.raises(
    "iomodel.smallcache_crossover", "d=1", lambda: io.smallcache_crossover(64, 1), word("d")
)
table.raises(
    "iomodel.smallcache_crossover",
    "M_max=0",
    lambda: io.smallcache_crossover(64, 8, M_max=0),
    "M_max",
)
table.valid(
    "iomodel.sweeps.CrossoverSweep",
    "fields",
    lambda: io.smallcache_crossover(256, 8),
    lambda s: s.M > 64,
)
table.bad_ints("iomodel.smallcache_advantage", "n", lambda v: io.smallcache_advantage(v, 8, [64]))
table.raises(
    "iomodel.smallcache_advantage", "M=10", lambda: io.smallcache_advantage(64, 8, [10]), r"Ms\[0\]"
)
table.valid(
    "iomodel.sweeps.Advantage",
    "fields",
    lambda: io.smallcache_advantage(64, 8, [64]),
    lambda a: a.ratio[0] > 0,
)
table.raises(
    "iomodel.bound_ratios",
    "count=None",
    lambda: io.bound_ratios(None, io.forward_lower_bound, 64, 8, [64]),
    "count",
)
table.raises(
    "iomodel.bound_ratios",
    "Ms=0",
    lambda: io.bound_ratios(io.flash_forward_count, io.forward_lower_bound, 64, 8, [0]),
    r"Ms\[0\]",
)
table.valid(
    "iomodel.bound_ratios",
    "below-least-M",
    lambda: io.bound_ratios(io.flash_forward_count, io.forward_lower_bound, 64, 8, [2, 64]),
    lambda r: np.isnan(r[0]) and r[1] > 1,
)
table.bad_ints("iomodel.sweeps.block_cover", "T_c", lambda v: sw.block_cover(3, v))
table.valid(
    "iomodel.sweeps.block_cover",
    "1x1",
    lambda: sw.block_cover(1, 1),
    lambda c: c.tolist() == [[True]],
)
table.raises(
    "iomodel.block_sparse_sweep",
    "target=2",
    lambda: io.block_sparse_sweep(64, 8, 100, [2.0]),
    "targets",
)
table.raises(
    "iomodel.block_sparse_sweep", "M=10", lambda: io.block_sparse_sweep(64, 8, 10, [0.5]), word("M")
)
table.raises(
    "iomodel.block_sparse_sweep",
    "seed=-1",
    lambda: io.block_sparse_sweep(64, 8, 100, [1], seed=-1),
    "seed",
)
table.valid(
    "iomodel.sweeps.SparseSweep",
    "dense",
    lambda: io.block_sparse_sweep(64, 8, 100, [1.0]),
    lambda s: s.counts[-1] == s.dense and s.fractions[-1] == 1.0,
)

table.raises(
    "iomodel.smallcache_forward",
    "unshifted=str",
    lambda: io.smallcache_forward(Q, K, V, M=64, unshifted="yes"),
    word("unshifted"),
)
table.valid(
    "iomodel.smallcache_forward",
    "unshifted-small-logits",
    lambda: io.smallcache_forward(Q, K, V, M=64, unshifted=True)[0],
    lambda O: np.allclose(O, O_REF),
)

# ---- memory guards, sizes, flags and the chapters' tools ----

# the guard counts np.tri's index vectors (32 GiB for m = 2³²), not only the
# n × m mask (4 GiB, at the limit)
table.raises(
    "iomodel.causal_mask",
    "n=1-m=2**32",
    before_allocating(lambda: io.causal_mask(1, 2**32)),
    r"causal mask would need 36 GiB.*; n or m is too large",
)
table.valid(
    "iomodel.causal_mask",
    "3x5",
    lambda: io.causal_mask(3, 5),
    lambda c: (c == np.tri(3, 5, dtype=bool)).all(),
)

for fname, call in [
    ("iomodel.flash_forward", lambda: io.flash_forward(Q, K, V, M=100, mask=RAGGED)),
    (
        "iomodel.flash_backward",
        lambda: io.flash_backward(Q, K, V, O_REF, dO, LSE_REF, M=100, mask=RAGGED),
    ),
]:
    table.raises(fname, "mask=ragged", call, r"^mask must be convertible")

A22 = np.ones((2, 2))
for fname, call in [
    ("iomodel.TwoLevelMemory", lambda: io.TwoLevelMemory(8, record="yes")),
    ("iomodel.flash_forward", lambda: io.flash_forward(Q, K, V, M=100, record="yes")),
    (
        "iomodel.flash_backward",
        lambda: io.flash_backward(Q, K, V, O_REF, dO, LSE_REF, M=100, record=1),
    ),
    (
        "iomodel.flash_forward(is_causal)",
        lambda: io.flash_forward(Q, K, V, M=100, is_causal=True, record="no"),
    ),
    (
        "iomodel.flash_backward(is_causal)",
        lambda: io.flash_backward(Q, K, V, O_REF, dO, LSE_REF, M=100, is_causal=True, record=[0]),
    ),
    ("iomodel.standard_forward", lambda: io.standard_forward(Q, K, V, M=100, record=1)),
    (
        "iomodel.standard_backward",
        lambda: io.standard_backward(Q, K, V, O_REF, dO, LSE_REF, M=100, record=1),
    ),
    ("iomodel.smallcache_forward", lambda: io.smallcache_forward(Q, K, V, M=50, record="no")),
    (
        "iomodel.smallcache_backward",
        lambda: io.smallcache_backward(Q, K, V, O_REF, dO, LSE_REF, M=50, record=2),
    ),
    ("iomodel.naive_matmul", lambda: io.naive_matmul(A22, A22, M=12, record=None)),
    ("iomodel.tiled_matmul", lambda: io.tiled_matmul(A22, A22, M=12, record="yes")),
]:
    table.raises(fname, "record=non-bool", call, r"^record must be a bool")
table.valid(
    "iomodel.tiled_matmul",
    "record=np.bool_",
    lambda: io.tiled_matmul(A22, A22, M=12, record=np.bool_(True)),
    lambda r: len(r) == 3 and isinstance(r[2], io.TwoLevelMemory),
)

# ---- edge cases of the machine, graphs, counts and the hardware model ----

# finite Q, K whose logits τQKᵀ overflow gave O = 0 and lse = −inf (a fully
# masked row's output) or NaN on every schedule of the machine; now the compiled kernels'
# refusal, naming Q, K and scale (q for a decoding step).
for _name, _run in [
    ("iomodel.flash_forward", lambda: io.flash_forward(Q_1E200, K_1E200, V, M=4096)),
    (
        "iomodel.flash_backward",
        lambda: io.flash_backward(Q_1E200, K_1E200, V, O_REF, dO, LSE_REF, M=4096),
    ),
    (
        "iomodel.flash_forward(is_causal)",
        lambda: io.flash_forward(Q_1E200, K_1E200, V, M=4096, is_causal=True),
    ),
    (
        "iomodel.flash_backward(is_causal)",
        lambda: io.flash_backward(Q_1E200, K_1E200, V, O_REF, dO, LSE_REF, M=4096, is_causal=True),
    ),
    ("iomodel.standard_forward", lambda: io.standard_forward(Q_1E200, K_1E200, V, M=4096)),
    (
        "iomodel.standard_backward",
        lambda: io.standard_backward(Q_1E200, K_1E200, V, O_REF, dO, LSE_REF, M=4096),
    ),
    ("iomodel.smallcache_forward", lambda: io.smallcache_forward(Q_1E200, K_1E200, V, M=64)),
    (
        "iomodel.smallcache_backward",
        lambda: io.smallcache_backward(Q_1E200, K_1E200, V, O_REF, dO, LSE_REF, M=64),
    ),
    (
        "iomodel.flash_forward(enable_gqa)",
        lambda: io.flash_forward(Q_1E200[None], K_1E200[None], V[None], M=4096, enable_gqa=True),
    ),
    (
        "iomodel.flash_backward(enable_gqa)",
        lambda: io.flash_backward(
            Q_1E200[None],
            K_1E200[None],
            V[None],
            O_REF[None],
            dO[None],
            LSE_REF[None],
            M=4096,
            enable_gqa=True,
        ),
    ),
]:
    table.raises(_name, "logits overflow float64", _run, word("Q"))
table.raises(
    "iomodel.flash_forward",
    "logits overflow float32",
    lambda: io.flash_forward(*(np.full((3, 2), 1e20, np.float32) for _ in range(3)), M=4096),
    r"overflow float32: Q, K or scale",
)
table.raises(
    "iomodel.flash_forward",
    "by head, logits overflow",
    lambda: io.flash_forward(*(np.repeat(x[None], 2, 0) for x in (Q_1E200, K_1E200, V)), M=4096),
    word("Q"),
)
table.raises(
    "iomodel.flash_forward",
    "one query per head, logits overflow",
    lambda: io.flash_forward(Q_1E200[:2, None], K_1E200[None], V[None], M=4096, enable_gqa=True),
    word("Q"),
)
# the small-cache schedules sum each logit over column tiles: a partial sum can overflow
# where the whole dot product (checked before the run) does not
_QT = np.array([[-1e308, 0.0, 0.9e308, 0.9e308]])
_KT = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
table.raises(
    "iomodel.smallcache_forward",
    "partial sum over column tiles",
    lambda: io.smallcache_forward(_QT, _KT, np.ones((2, 1)), M=16, scale=1.0),
    r"column tiles.*Q, K or scale",
)
table.raises(
    "iomodel.smallcache_backward",
    "partial sum over column tiles",
    lambda: io.smallcache_backward(
        _QT,
        _KT,
        np.ones((2, 1)),
        np.ones((1, 1)),
        np.ones((1, 1)),
        np.array([8e307]),
        M=24,
        scale=1.0,
    ),
    r"column tiles.*Q, K or scale",
)
table.raises_each(
    [("iomodel.naive_matmul", io.naive_matmul), ("iomodel.tiled_matmul", io.tiled_matmul)],
    [
        (
            "product overflows",
            lambda r: r(np.full((3, 2), 1e300), np.full((2, 3), 1e300), M=64),
            r"A @ B overflows float64: A or B",
        )
    ],
)
table.valid(
    "iomodel.smallcache_forward",
    "column tiles of width 1: the dot product's order",
    lambda: io.smallcache_forward(_QT, _KT, np.ones((2, 1)), M=5, scale=1.0),
    lambda r: finite(r[:2]) and r[0][0, 0] == 1.0 and r[1][0] == (_QT @ _KT.T)[0, 0],
)
# the forward's unnormalised accumulator adds up to
# m rows of V, so V near the float range gave O = inf where exact attention is finite
_VX = np.full((5, 3), 1.7e308)
table.valid(
    "iomodel.flash_forward",
    "V near the float range",
    lambda: io.flash_forward(Q, K, _VX, M=4096)[0],
    lambda o: finite(o) and np.allclose(o, al.attention_forward(Q, K, _VX)[0], rtol=1e-12),
)

# the causal "closed forms" were loops over blocks, so n = 10¹² never
# returned; they are floor sums now, in constant time at any n
for _n in (10**12, 10**400):
    _e = "1e12" if _n == 10**12 else "1e400"
    for _name, _count, _dense in [
        ("iomodel.flash_forward_count", io.flash_forward_count, io.flash_forward_count),
        ("iomodel.flash_backward_count", io.flash_backward_count, io.flash_backward_count),
    ]:
        table.valid(
            _name,
            f"is_causal n={_e}",
            lambda c=_count, n=_n: c(n, 64, 16384, is_causal=True),
            lambda r, n=_n, dense=_dense: (
                dense(n, 64, 16384).total < 2 * r.total < 2 * dense(n, 64, 16384).total
            ),
        )
    for _which in ("forward", "backward"):
        table.valid(
            "iomodel.causal_saving",
            f"{_which} n={_e}",
            lambda n=_n, w=_which: io.causal_saving(n, 64, 16384, which=w),
            lambda s: (
                abs(s.fraction - 0.5) < 1e-6
                and s.other_words + s.interior_words + s.diagonal_words == s.causal
            ),
        )

# allocations sized by one argument raised numpy's MemoryError (or hung); they
# are refused before anything is allocated, naming the argument
table.raises("iomodel.cache_sizes", "hi=1e12", lambda: io.cache_sizes(1, 10**12), word("hi"))
table.raises(
    "iomodel.cache_sizes", "hi=10**400", lambda: io.cache_sizes(1, 10**400, points=5), "hi"
)
table.raises(
    "iomodel.cache_sizes",
    "points=1e9",
    lambda: io.cache_sizes(1, 10**6, points=10**9),
    word("points"),
)
table.valid(
    "iomodel.cache_sizes",
    "hi=2**63-1",
    lambda: io.cache_sizes(2**62, 2**63 - 1, points=5),
    lambda s: s.dtype == np.int64 and s[0] == 2**62 and s[-1] == 2**63 - 1,
)
table.raises("iomodel.sweeps.block_cover", "1e6 x 1e6", lambda: sw.block_cover(10**6, 10**6), "T_r")
table.raises(
    "iomodel.block_sparse_sweep",
    "n=1e7",
    lambda: io.block_sparse_sweep(10**7, 4, 64, [0.5]),
    word("n"),
)

table.raises(
    "iomodel.smallcache_crossover",
    "M_max=10**400",
    lambda: io.smallcache_crossover(64, 8, M_max=10**400),
    word("M_max"),
)
table.raises(
    "iomodel.smallcache_crossover",
    "n=10**200",
    lambda: io.smallcache_crossover(10**200, 8),
    word("n"),
)
table.raises(
    "iomodel.smallcache_advantage",
    "Ms=[10**400]",
    lambda: io.smallcache_advantage(64, 8, [10**400]),
    r"Ms\[0\]",
)
table.raises(
    "iomodel.flash_backward_count",
    "block_mask of 1e10 blocks",
    lambda: io.flash_backward_count(
        10**5, 2, 10**6, blocks=(1, 1), block_mask=np.broadcast_to(True, (10**5, 10**5))
    ),
    word("block_mask"),
)

# block-sparse counts did their per-block arithmetic in
# int64 (a peak of 7.8·10¹⁸ words for 10²⁰) or raised OverflowError; blocks longer than n
# reached numpy as indices beyond int64
table.valid_each(
    [
        ("iomodel.flash_forward_count", io.flash_forward_count),
        ("iomodel.flash_backward_count", io.flash_backward_count),
    ],
    [
        (
            "block_mask at n=1e10",
            lambda c: c(10**10, 1, 10**12, blocks=(10**10,) * 2, block_mask=[[True]]),
            lambda c, r: r == c(10**10, 1, 10**12, blocks=(10**10,) * 2),
        ),
        (
            "block_mask at d=1e30",
            lambda c: c(8, 10**30, 10**70, block_mask=[[True]]),
            lambda c, r: r == c(8, 10**30, 10**70),
        ),
    ],
)
table.valid(
    "iomodel.flash_forward",
    "is_causal-M=10**400",
    lambda: io.flash_forward(Q, K, V, M=10**400, is_causal=True),
    lambda r: np.allclose(r[0], al.attention_forward(Q, K, V, is_causal=True)[0], rtol=1e-12),
)
table.valid(
    "iomodel.flash_block_mask",
    "blocks=10**400",
    lambda: io.flash_block_mask(np.tri(6, 5, dtype=bool), (10**400, 10**400)),
    lambda b: b.tolist() == [[True]],
)
table.valid(
    "iomodel.block_sparse_sweep",
    "M=10**400",
    lambda: io.block_sparse_sweep(64, 4, 10**400, [1.0]),
    lambda s: s.counts[0] == s.dense,
)

# a simulation takes 50-120 µs per block step, so a long
# Q with a small M ran for hours; past MAX_MACHINE_STEPS it is refused before it starts
for _name, _run in [
    ("iomodel.flash_forward", lambda: io.flash_forward(LONG_Q, LONG_Q, LONG_Q, M=11)),
    (
        "iomodel.flash_backward",
        lambda: io.flash_backward(
            LONG_Q, LONG_Q, LONG_Q, LONG_Q, LONG_Q, np.full(1100, math.log(1100)), M=18
        ),
    ),
    ("iomodel.standard_forward", lambda: io.standard_forward(LONG_Q, LONG_Q, LONG_Q, M=11)),
    ("iomodel.smallcache_forward", lambda: io.smallcache_forward(LONG_Q, LONG_Q, LONG_Q, M=5)),
    ("iomodel.tiled_matmul", lambda: io.tiled_matmul(LONG_Q, LONG_Q.T.copy(), M=3)),
    (
        "iomodel.flash_forward(heads)",  # 40 heads of 40 000 steps each
        lambda: io.flash_forward(*(np.ones((40, 200, 2)) for _ in range(3)), M=11),
    ),
]:
    table.raises(_name, "1100 rows with a tiny M", _run, r"MAX_MACHINE_STEPS.*\bM\b")

table.raises(
    "iomodel.flash_forward",
    "query heads not a multiple",
    lambda: io.flash_forward(
        np.ones((3, 1, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 3)), M=4096, enable_gqa=True
    ),
    word("Q"),
)
table.raises(
    "iomodel.TwoLevelMemory",
    "alloc fill beyond float32",
    lambda: io.TwoLevelMemory(8).alloc(2, dtype=np.float32, fill=1e308),
    word("fill"),
)
table.raises("iomodel.words_by_array", "log=None", lambda: io.words_by_array(None), "log")


# ---- the schedules' shared checks and block arithmetic ----

table.raises(
    "iomodel.tiling.check_blocks", "B_r=0", lambda: tl.check_blocks((0, 1)), r"blocks\[0\]"
)
table.raises("iomodel.tiling.check_dims", "n=0", lambda: tl.check_dims(0, 2, 16), word("n"))
table.raises(
    "iomodel.tiling.resolve_blocks",
    "B_r=0",
    lambda: tl.resolve_blocks((0, 1), "fa2", 2, 16, 2),
    r"blocks\[0\]",
)
table.raises(
    "iomodel.tiling.start_run", "M=0", lambda: tl.start_run(0, False, np.float64, {}, {}), word("M")
)
table.raises(
    "iomodel.tiling.count_args",
    "n=0",
    lambda: tl.count_args(0, 2, 16, 4, 2, None, "fa2"),
    word("n"),
)
table.raises(
    "iomodel.layout.count_setup",
    "n=0",
    lambda: ly.count_setup(0, 2, 16, 4, 2, 1, 1, False, False, None, None, "fa2"),
    word("n"),
)
table.raises(
    "iomodel.tiling.check_machine_steps",
    "steps=10**12",
    lambda: tl.check_machine_steps(10**12, "flash_forward"),
    r"MAX_MACHINE_STEPS",
)
table.raises(
    "iomodel.tiling.check_run_logits",
    "logits-overflow",
    lambda: tl.check_run_logits(np.full((2, 2), 1e200), np.full((2, 2), 1e200), 1.0, np.float64),
    r"overflow float64: Q, K or scale",
)
table.raises(
    "iomodel.blocks.check_block_mask",
    "block_mask-shape",
    lambda: bl.check_block_mask(np.ones((3, 3), bool), 4, 4, 2, 2),
    word("block_mask"),
)
table.raises(
    "iomodel.blocks.check_block_mask",
    "block_mask=float",
    lambda: bl.check_block_mask(np.ones((2, 2)), 4, 4, 2, 2),
    word("block_mask"),
)
# the block arithmetic: exact integers at any size, ragged last blocks, arrays elementwise
table.valid(
    "iomodel.tiling.ceil_div",
    "10**30+1-by-10**15",
    lambda: tl.ceil_div(10**30 + 1, 10**15),
    lambda r: r == 10**15 + 1,
)
table.valid(
    "iomodel.tiling.floor_sum",
    "against-the-sum",
    lambda: tl.floor_sum(10**5, 7, 3, 5),
    lambda r: r == sum((3 * i + 5) // 7 for i in range(10**5)),
)
table.valid(
    "iomodel.tiling.block_ranges",
    "ragged-last-block",
    lambda: tl.block_ranges(5, 2),
    lambda r: list(r) == [(0, 2), (2, 4), (4, 5)],
)
table.valid(
    "iomodel.tiling.block_sizes",
    "ragged-last-block",
    lambda: tl.block_sizes(5, 2),
    lambda r: r.tolist() == [2, 2, 1],
)
table.valid("iomodel.tiling.span", "half-open", lambda: tl.span((2, 7)), lambda r: r == 5)
for fname, f in [("iomodel.blocks.W_f", bl.W_f), ("iomodel.blocks.W_b", bl.W_b)]:
    table.valid(
        fname,
        "B_r-array-elementwise",
        lambda f=f: f(np.array([2, 4]), 3, 4, 5),
        lambda r, f=f: np.array_equal(r, [f(2, 3, 4, 5), f(4, 3, 4, 5)]),
    )
table.valid(
    "iomodel.blocks.causal_blocks",
    "square-lower-triangle",
    lambda: bl.causal_blocks(6, 6, 2, 2),
    lambda r: np.array_equal(r, np.tril(np.ones((3, 3), bool))),
)
table.valid(
    "iomodel.blocks.visited_blocks",
    "dense-visits-all",
    lambda: bl.visited_blocks(None, None, 5, 3, 2, 2),
    lambda r: r.shape == (3, 2) and r.all(),
)
table.valid(
    "iomodel.layout.pack_heads",
    "unpack-inverts",
    lambda: ly.unpack_heads(ly.pack_heads(np.arange(24.0).reshape(2, 3, 4), 2), 2, 2),
    lambda r: np.array_equal(r, np.arange(24.0).reshape(2, 3, 4)),
)
table.valid(
    "iomodel.layout.unpack_heads",
    "inverts-pack-one-group",
    lambda: ly.unpack_heads(ly.pack_heads(np.arange(18.0).reshape(3, 3, 2), 1), 1, 3),
    lambda r: np.array_equal(r, np.arange(18.0).reshape(3, 3, 2)),
)
table.valid(
    "iomodel.layout.as_given",
    "one-head-unbatched",
    lambda: ly.as_given(False, np.ones((1, 2, 3)), np.zeros((1, 2))),
    lambda r: [a.shape for a in r] == [(2, 3), (2,)],
)
table.valid(
    "iomodel.layout.kept_blocks",
    "flags-select",
    lambda: ly.kept_blocks([(0, 2), (2, 4), (4, 5)], [False, True, True]),
    lambda r: r == [(2, 4), (4, 5)],
)
table.valid(
    "iomodel.blocks.d_pass_rows",
    "M-below-one-row",
    lambda: bl.d_pass_rows(64, 10, 8),
    lambda r: r == 1,
)


def _causal_rows_by_blocks(n, m, B_r, B_c):
    """(key rows loaded, (key blocks kept, query rows visiting them)) of a causal pass,
    counted over the block grid of causal_blocks."""
    keep = bl.causal_blocks(n, m, B_r, B_c)
    rows, cols = tl.block_sizes(n, B_r), tl.block_sizes(m, B_c)
    key_rows = sum(min(m, int(cols[k].sum())) for k in keep)
    visited = keep.any(axis=0)
    return key_rows, (int(visited.sum()), int((keep[:, visited] * rows[:, None]).sum()))


table.valid(
    "iomodel.blocks.causal_key_rows",
    "closed-form-equals-blocks",
    lambda: bl.causal_key_rows(103, 103, 7, 5),
    lambda r: r == _causal_rows_by_blocks(103, 103, 7, 5)[0],
)
table.valid(
    "iomodel.blocks.causal_query_rows",
    "closed-form-equals-blocks",
    lambda: bl.causal_query_rows(103, 103, 7, 5),
    lambda r: tuple(r) == _causal_rows_by_blocks(103, 103, 7, 5)[1],
)
table.valid(
    "iomodel.blocks.grid_block_sizes",
    "ragged-beyond-int64",
    lambda: bl.grid_block_sizes((2, 2), 10**12, 10**12, 6 * 10**11, 6 * 10**11, 10**12),
    lambda r: [x.tolist() for x in r] == [[6 * 10**11, 4 * 10**11]] * 2,
)


# the partition lemma's options, and the pruning of useless computations
_G_IP2 = io.inner_product_graph(2)
_MOVES_IP2 = list(io.optimal_io(_G_IP2, 4).moves)
table.raises(
    "iomodel.schedule_segments",
    "prune=yes",
    lambda: io.schedule_segments(_G_IP2, _MOVES_IP2, 4, prune="yes"),
    word("prune"),
)
table.raises("iomodel.prune_schedule", "G=None", lambda: io.prune_schedule(None, []), word("G"))
table.raises(
    "iomodel.prune_schedule",
    "compute without reads",
    lambda: io.prune_schedule(_G_IP2, [("compute", "s")] + _MOVES_IP2),
    r"moves\[0\]",
)
table.valid(
    "iomodel.prune_schedule",
    "an optimal schedule keeps its I/O",
    lambda: io.prune_schedule(_G_IP2, _MOVES_IP2),
    lambda r: (
        [mv for mv in r if mv[0] in ("read", "write")]
        == [mv for mv in _MOVES_IP2 if mv[0] in ("read", "write")]
    ),
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
