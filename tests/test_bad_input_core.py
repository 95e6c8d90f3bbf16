"""Bad-input rows of the core: the exact reference, the compiled kernels, their costs and probes,
one training step, the logit range, the machines' rates and the advice.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from bad_input_cases import (
    A1,
    A2,
    A3,
    H100,
    LOSS,
    LSE_REF,
    O_REF,
    RAGGED,
    E,
    K,
    Q,
    Table,
    V,
    X,
    Y,
    before_allocating,
    broadcast_view,
    d_,
    dO,
    finite,
    word,
)

import attnlib as al
from attnlib import advice as adv
from attnlib import advice_maps as advm
from attnlib import costs, fast
from attnlib import logits as lg
from attnlib import machines as mc
from attnlib import polymethod as pm

table = Table()


# ---- exact attention ----

for fname, f in [
    ("exact.attention_forward", al.attention_forward),
    ("exact.attention", al.attention),
]:
    table.bad_reals(fname, "scale", lambda v, f=f: f(Q, K, V, scale=v))
    table.raises(fname, "scale=10**400", lambda f=f: f(Q, K, V, scale=10**400), word("scale"))
    table.raises(fname, "mask=int", lambda f=f: f(Q, K, V, mask=np.ones((6, 5))), word("mask"))
    table.raises(fname, "mask=shape", lambda f=f: f(Q, K, V, mask=np.ones((5, 5), bool)), "mask")
    table.raises(fname, "is_causal=1", lambda f=f: f(Q, K, V, is_causal=1), word("is_causal"))
    table.raises(
        fname,
        "H-not-H_kv",
        lambda f=f: f(Q.reshape(1, 2, 3, 4), K[None, None], V[None, None]),
        word("enable_gqa=True"),
    )
    table.raises(
        fname,
        "enable_gqa=str",
        lambda f=f: f(Q.reshape(1, 2, 3, 4), K[None, None], V[None, None], enable_gqa="y"),
        word("enable_gqa"),
    )
    table.raises(
        fname,
        "logits-overflow-scale",
        lambda f=f: f(Q, K, V, scale=1e308),
        r"logits scale \* Q @ K\.T overflow float64: Q, K or scale is too large",
    )
    table.raises(
        fname,
        "logits-overflow-entries",
        lambda f=f: f(np.full((2, 4), 1e200), np.full((3, 4), 1e200), V[:3]),
        r"overflow float64: Q, K or scale",
    )
    table.raises(
        fname,
        "logits-overflow-float32",
        lambda f=f: f(
            np.full((2, 4), 1e30, np.float32),
            np.full((3, 4), 1e30, np.float32),
            V[:3].astype(np.float32),
        ),
        r"overflow float32: Q, K or scale",
    )

# masked-out entries do not count; V of 1e308 gives the representable convex combination
K_HUGE = K.copy()
K_HUGE[2] = 1e200
KEEP = np.ones((6, 5), bool)
KEEP[:, 2] = False
table.valid(
    "exact.attention_forward",
    "overflow-only-in-masked-entries",
    lambda: al.attention_forward(Q, K_HUGE, V, mask=KEEP)[0],
    lambda O: finite(O) and np.allclose(O, al.attention(Q, K[[0, 1, 3, 4]], V[[0, 1, 3, 4]])),
)
table.valid(
    "exact.attention",
    "V=1e308",
    lambda: al.attention(Q, K, np.full((5, 2), 1e308)),
    lambda O: finite(O) and np.allclose(O, 1e308, rtol=1e-12),
)
table.valid(
    "exact.attention",
    "V=-1e308-and-1e308",
    lambda: al.attention(
        np.zeros((2, 4)), K, np.array([[1e308], [-1e308], [1e308], [-1e308], [0]])
    ),
    lambda O: finite(O) and np.allclose(O, 0.0, atol=1e293),
)
table.valid(
    "exact.attention_forward",
    "logits-1e4",
    lambda: al.attention_forward(Q * 100, K * 100, V, scale=1.0),
    lambda r: finite(r[0]) and finite(r[1]),
)
table.valid(
    "exact.attention_forward",
    "fully-masked-row",
    lambda: al.attention_forward(Q, K, V, mask=np.zeros((6, 5), bool)),
    lambda r: np.all(r[0] == 0) and np.all(np.isneginf(r[1])),
)
table.valid(
    "exact.attention",
    "scale=np.int64",
    lambda: al.attention(Q, K, V, scale=np.int64(1)),
    lambda O: np.allclose(O, al.attention(Q, K, V, scale=1.0)),
)

table.bad_arrays(
    "exact.attention_backward", "dO", lambda v: al.attention_backward(Q, K, V, O_REF, v, LSE_REF)
)
table.bad_arrays(
    "exact.attention_backward", "O", lambda v: al.attention_backward(Q, K, V, v, dO, LSE_REF)
)
table.raises(
    "exact.attention_backward",
    "is_causal+mask",
    lambda: al.attention_backward(
        Q, K, V, O_REF, dO, LSE_REF, is_causal=True, mask=np.ones((6, 5), bool)
    ),
    r"mask and is_causal",
)
table.raises(
    "exact.attention_backward",
    "batched-lse-shape",
    lambda: al.attention_backward(
        Q[None], K[None], V[None], O_REF[None], dO[None], LSE_REF, enable_gqa=True
    ),
    word("lse"),
)
table.raises(
    "exact.attention_backward",
    "lse=+inf",
    lambda: al.attention_backward(Q, K, V, O_REF, dO, np.full(6, np.inf)),
    word("lse"),
)
table.raises(
    "exact.attention_backward",
    "scale=10**400",
    lambda: al.attention_backward(Q, K, V, O_REF, dO, LSE_REF, scale=10**400),
    word("scale"),
)
table.raises(
    "exact.attention_backward",
    "logits-overflow",
    lambda: al.attention_backward(Q, K, V, O_REF, dO, LSE_REF, scale=1e308),
    r"logits scale \* Q @ K\.T overflow float64: Q, K or scale is too large",
)

for fname, f in [
    ("exact.attention_loss", al.attention_loss),
    ("exact.attention_loss_grad", al.attention_loss_grad),
]:
    for i, arg in enumerate(("X", "A1", "A2", "A3", "Y", "E")):
        for what, value in [
            ("None", None),
            ("int", np.ones((2, 2), dtype=int)),
            ("nan", np.full((6, 4), np.nan)),
        ]:
            args = list(LOSS)
            args[i] = value
            table.raises(fname, f"{arg}={what}", lambda f=f, a=tuple(args): f(*a), word(arg))
    table.raises(
        fname,
        "A1X-overflow",
        lambda f=f: f(np.eye(d_) * 1e300, A1 * 1e10, A2, A3, Y, E),
        r"logits \(A1 @ X\) @ A2\.T / d overflow float64: A1, X or A2 is too large",
    )
    table.raises(
        fname,
        "A1X-inf-names-A1-X",
        lambda f=f: f(np.eye(d_) * 1e308, A1 * 1e10, A2, A3, Y, E),
        r"A1, X or A2 is too large",
    )
    table.raises(
        fname,
        "A3Y-overflow",
        lambda f=f: f(X, A1, A2, A3 * 1e300, Y * 1e300, E),
        r"A3 @ Y overflow float64: A3 or Y",
    )
table.valid(
    "exact.attention_loss_grad",
    "finite-at-large-but-safe-logits",
    lambda: al.attention_loss_grad(X * 100, A1, A2, A3, Y, E),
    finite,
)

# ---- the compiled kernels: the validation rows (the kernel is never reached) ----

for fname, f in [("fast.flash_forward", al.flash_forward)]:
    table.bad_reals(fname, "scale", lambda v, f=f: f(Q, K, V, scale=v))
    table.raises(fname, "scale=10**400", lambda f=f: f(Q, K, V, scale=10**400), word("scale"))
    table.raises(fname, "is_causal=str", lambda f=f: f(Q, K, V, is_causal="yes"), word("is_causal"))
    table.raises(fname, "mask=float", lambda f=f: f(Q, K, V, mask=np.ones((6, 5))), word("mask"))
QH, KH, VH = Q.reshape(1, 2, 3, 4), K[None, None], V[None, None]
table.raises(
    "fast.flash_forward",
    "H-not-H_kv",
    lambda: al.flash_forward(QH, KH, VH),
    word("enable_gqa=True"),
)
# refused as by the exact core and PyTorch: the combined keep-mask says both
BOTH = dict(is_causal=True, mask=np.ones((6, 5), bool))
table.raises(
    "fast.flash_forward", "is_causal+mask", lambda: al.flash_forward(Q, K, V, **BOTH), "^mask"
)
table.raises(
    "fast.flash_backward",
    "is_causal+mask",
    lambda: al.flash_backward(Q, K, V, O_REF, dO, LSE_REF, **BOTH),
    "^mask",
)
table.raises(
    "fast.flash_forward",
    "batched-is_causal+mask",
    lambda: al.flash_forward(
        QH, KH, VH, enable_gqa=True, is_causal=True, mask=np.ones((3, 5), bool)
    ),
    r"mask and is_causal",
)
table.valid(
    "fast.flash_forward",
    "gqa",
    lambda: al.flash_forward(QH, KH, VH, enable_gqa=True),
    lambda r: r[0].shape == (1, 2, 3, 3) and finite(r),
)
table.raises(
    "fast.flash_backward",
    "batched-lse-shape",
    lambda: al.flash_backward(
        Q[None], K[None], V[None], O_REF[None], dO[None], LSE_REF, enable_gqa=True
    ),
    word("lse"),
)
table.valid(
    "fast.flash_backward",
    "batched",
    lambda: al.flash_backward(Q[None], K[None], V[None], O_REF[None], dO[None], LSE_REF[None]),
    lambda r: r[0].shape == (1, 6, 4) and finite(r),
)
table.bad_arrays(
    "fast.flash_backward", "dO", lambda v: al.flash_backward(Q, K, V, O_REF, v, LSE_REF)
)
table.bad_arrays("fast.flash_backward", "lse", lambda v: al.flash_backward(Q, K, V, O_REF, dO, v))
table.raises(
    "fast.flash_backward",
    "scale=10**400",
    lambda: al.flash_backward(Q, K, V, O_REF, dO, LSE_REF, scale=10**400),
    word("scale"),
)

# ---- the compiled kernels' sizes, costs and probes ----

table.raises("costs.block_sizes", "d=0", lambda: costs.block_sizes(0), word("d"))
table.raises("costs.block_sizes", "d_v=str", lambda: costs.block_sizes(4, "8"), word("d_v"))
table.valid("costs.block_sizes", "d=64", lambda: costs.block_sizes(64), lambda r: r == (256, 256))


def _inside_blas_pin():
    """The BLAS thread counts seen inside :func:`fast.blas_on_calling_thread`."""
    from threadpoolctl import threadpool_info

    with fast.blas_on_calling_thread():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


table.valid("fast.blas_on_calling_thread", "pins", _inside_blas_pin, lambda r: r == {1})
table.raises("costs.dq_groups", "m=0", lambda: costs.dq_groups(0, 4), word("m"))
table.raises("costs.dq_groups", "d=float", lambda: costs.dq_groups(8, 4.0), word("d"))
table.valid("costs.dq_groups", "one block", lambda: costs.dq_groups(5, 4), lambda g: g == 1)
table.raises(
    "costs.extra_memory_bytes", "n=True", lambda: costs.extra_memory_bytes(True, 4, 4), word("n")
)
table.raises(
    "costs.extra_memory_bytes",
    "dtype=float16",
    lambda: costs.extra_memory_bytes(4, 4, 4, dtype="float16"),
    word("dtype"),
)
table.valid(
    "costs.extra_memory_bytes", "tiny", lambda: costs.extra_memory_bytes(1, 1, 1), lambda b: b > 0
)
table.raises(
    "costs.extra_memory_bytes",
    "threads=-1",
    lambda: costs.extra_memory_bytes(4, 4, 4, threads=-1),
    word("threads"),
)
table.raises(
    "costs.extra_memory_bytes",
    "threads=1.5",
    lambda: costs.extra_memory_bytes(4, 4, 4, threads=1.5),
    word("threads"),
)
table.raises("costs.flop_count", "n=0", lambda: costs.flop_count(0, 4, 4), word("n"))
table.raises(
    "costs.flop_count",
    "kernels=exact",
    lambda: costs.flop_count(4, 4, 4, kernels="exact"),
    word("kernels"),
)
table.valid(
    "costs.flop_count",
    "standard",
    lambda: costs.flop_count(1, 1, 1, kernels="standard"),
    lambda f: f["forward"] == 4,
)
table.raises(
    "fast.check_logits_finite",
    "K=widths",
    lambda: fast.check_logits_finite(Q, K[:, :2], 1.0),
    word("K"),
)
table.raises(
    "fast.check_logits_finite",
    "scale=nan",
    lambda: fast.check_logits_finite(Q, K, math.nan),
    word("scale"),
)
table.raises(
    "fast.check_logits_finite",
    "overflow",
    lambda: fast.check_logits_finite(Q * 1e200, K * 1e200, 1.0),
    "overflow",
)
table.valid(
    "fast.check_logits_finite",
    "ok",
    lambda: fast.check_logits_finite(Q, K, 1.0),
    lambda r: r is None,
)

# ---- one training step ----

POLY = dict(kernels="polynomial", eps=1e-3)
table.raises(
    "step.forward_backward",
    "kernels=torch",
    lambda: al.forward_backward(Q, K, V, dO, kernels="torch"),
    word("kernels"),
)
table.raises(
    "step.forward_backward",
    "kernels=exact",
    lambda: al.forward_backward(Q, K, V, dO, kernels="exact"),
    word("kernels"),
)
table.raises(
    "step.forward_backward", "dO=shape", lambda: al.forward_backward(Q, K, V, dO[:2]), word("dO")
)
table.raises(
    "step.forward_backward",
    "standard-dO-shape",
    lambda: al.forward_backward(Q, K, V, dO[:, :2], kernels="standard"),
    word("dO"),
)
table.raises(
    "step.forward_backward",
    "standard-V-rows",
    lambda: al.forward_backward(Q, K, V[:3], dO, kernels="standard"),
    word("V"),
)
table.valid(
    "step.forward_backward",
    "standard-matches-backward",
    lambda: al.forward_backward(Q, K, V, dO, kernels="standard"),
    lambda r: (
        len(r) == 4
        and all(
            np.array_equal(a, b)
            for a, b in zip(r[1:], al.attention_backward(Q, K, V, O_REF, dO, LSE_REF), strict=True)
        )
    ),
)
table.raises(
    "step.forward_backward",
    "standard-eps",
    lambda: al.forward_backward(Q, K, V, dO, kernels="standard", eps=1e-3),
    word("eps"),
)
table.raises(
    "step.forward_backward",
    "flash-eps",
    lambda: al.forward_backward(Q, K, V, dO, eps=0.5),
    word("eps"),
)
table.raises(
    "step.forward_backward",
    "polynomial-eps=2",
    lambda: al.forward_backward(Q, K, V, dO, kernels="polynomial", eps=2),
    word("eps"),
)
table.raises(
    "step.forward_backward",
    "polynomial-no-eps",
    lambda: al.forward_backward(Q, K, V, dO, kernels="polynomial"),
    word("eps"),
)
table.raises(
    "step.forward_backward",
    "polynomial-dO-shape",
    lambda: al.forward_backward(Q, K, V, Q, **POLY),
    "dO",
)
table.raises(
    "step.forward_backward",
    "polynomial-mask",
    lambda: al.forward_backward(Q, K, V, dO, mask=np.ones((6, 5), bool), **POLY),
    word("mask"),
)
table.raises(
    "step.forward_backward",
    "polynomial-is_causal",
    lambda: al.forward_backward(Q, K, V, dO, is_causal=True, **POLY),
    word("is_causal"),
)
table.raises(
    "step.forward_backward",
    "polynomial-enable_gqa",
    lambda: al.forward_backward(Q, K, V, dO, enable_gqa=True, **POLY),
    word("enable_gqa"),
)
table.raises(
    "step.forward_backward",
    "polynomial-batched",
    lambda: al.forward_backward(Q[None], K[None], V[None], dO[None], **POLY),
    word("Q"),
)
table.valid(
    "step.forward_backward",
    "polynomial",
    lambda: al.forward_backward(Q / 4, K / 4, V, dO, **POLY),
    lambda r: len(r) == 4 and finite(r),
)
table.raises("costs.gemm_rates", "tile=0", lambda: costs.gemm_rates(0), word("tile"))
table.raises(
    "costs.gemm_rates", "dtype=float16", lambda: costs.gemm_rates(dtype="float16"), word("dtype")
)
table.valid(
    "costs.gemm_rates", "tiny", lambda: costs.gemm_rates(4, 8, repeats=2), lambda r: min(r) > 0
)
table.raises("costs.exp_seconds", "length=0", lambda: costs.exp_seconds(0), word("length"))
table.raises(
    "costs.exp_seconds", "repeats=str", lambda: costs.exp_seconds(repeats="2"), word("repeats")
)
table.valid(
    "costs.exp_seconds", "tiny", lambda: costs.exp_seconds(8, repeats=2), lambda r: len(r) == 3
)

# ---- reals and ints out of range ----

table.raises("advice.advise", "B=10**400", lambda: al.advise(64, 8, 10**400, 1e-3, 4096), word("B"))
table.raises(
    "advice.advise", "eps=10**400", lambda: al.advise(64, 8, 1.0, 10**400, 4096), word("eps")
)

table.raises(
    "fast.flash_attention_loss_grad",
    "X shape",
    lambda: al.flash_attention_loss_grad(np.eye(3), Q, K, K, np.eye(4), Q),
    word("X"),
)
table.raises(
    "fast.flash_attention_loss_grad",
    "E=nan",
    lambda: al.flash_attention_loss_grad(np.eye(4), Q, K, K, np.eye(4), np.full_like(Q, np.nan)),
    word("E"),
)
table.raises(
    "fast.flash_attention_loss_grad",
    "overflow",
    lambda: al.flash_attention_loss_grad(np.eye(4) * 1e300, Q * 1e10, K, K, np.eye(4), Q),
    "overflow",
)
table.raises("logits.max_row_norm", "X=1d", lambda: lg.max_row_norm(np.ones(3)), word("X"))
table.raises("logits.logit_range", "scale=0", lambda: lg.logit_range(Q, K, scale=0), word("scale"))
table.raises(
    "logits.logit_range", "widths", lambda: lg.logit_range(Q, K[:, :2], scale=1.0), word("K")
)
table.raises(
    "logits.logit_range",
    "overflow",
    lambda: lg.logit_range(Q * 1e200, K * 1e200, scale=1.0),
    "overflows",
)
table.raises("logits.round_up_to_grid", "R=0", lambda: lg.round_up_to_grid(0.0), word("R"))
table.raises(
    "logits.round_up_to_grid",
    "steps=-1",
    lambda: lg.round_up_to_grid(1.0, -1),
    word("steps_per_octave"),
)

# ---- the two-level machine and its schedules ----

table.raises(
    "advice.advise", "n=10**200", lambda: al.advise(10**200, 64, 1.0, 1e-3, 4096), r"n=~10\^200"
)
table.valid(
    "advice.advise",
    "M=10**400",
    lambda: al.advise(1024, 64, 1.0, 1e-3, 10**400),
    lambda a: a.method in adv.METHODS and math.isfinite(a.cost_of(a.method).cost),
)
table.valid(
    "advice.advise",
    "d=10**200",
    lambda: al.advise(1024, 10**200, 1.0, 1e-3, 4096),
    lambda a: not a.cost_of("polynomial").feasible,
)

# ---- the polynomial method ----

table.raises(
    "logits.logit_range",
    "entries-1e200",
    lambda: pm.logit_range(np.full((2, 3), 1e200), np.full((2, 3), 1e200), scale=1.0),
    r"overflows a float: Q, K or scale",
)
table.valid(
    "logits.logit_range",
    "squares-overflow-norm-does-not",
    lambda: pm.logit_range(np.full((2, 4), 1e160), np.full((2, 4), 1e-160), scale=1.0),
    lambda r: math.isclose(r, 4.0, rel_tol=1e-12),
)
table.raises(
    "logits.logit_range", "scale=None", lambda: pm.logit_range(Q, K, scale=None), word("scale")
)

# ---- the advice ----

for what, call, pattern in [
    ("B=1e200", lambda: al.advise(1024, 64, 1e200, 1e-3, 4096), word("B")),
    (
        "flops_per_word=1e308",
        lambda: al.advise(1024, 64, 1.0, 1e-3, 4096, flops_per_word=1e308),
        "flops_per_word",
    ),
    ("eps=0", lambda: al.advise(1024, 64, 1.0, 0.0, 4096), word("eps")),
    ("M=2.5", lambda: al.advise(1024, 64, 1.0, 1e-3, 2.5), word("M")),
    ("slow_memory=0", lambda: al.advise(1024, 64, 1.0, 1e-3, 4096, slow_memory=0), "slow_memory"),
]:
    table.raises("advice.advise", what, call, pattern)
table.valid(
    "advice.advise",
    "typical",
    lambda: al.advise(4096, 64, 1.0, 1e-3, 2**16),
    lambda a: a.method in adv.METHODS and "nan" not in a.reason and a.margin >= 1,
)
table.valid(
    "advice.Advice.table",
    "text",
    lambda: al.advise(256, 16, 0.5, 1e-3, 4096).table(),
    lambda t: "*" in t and "nan" not in t,
)
table.raises(
    "advice.Advice.cost_of",
    "unknown",
    lambda: al.advise(256, 16, 0.5, 1e-3, 4096).cost_of("magic"),
    word("method"),
)
for what, ns in [
    ("str-entry", ["a"]),
    ("None", None),
    ("empty", []),
    ("str", "abc"),
    ("float-1.7", [1.7]),
    ("zero", [0]),
]:
    point = 13 if what == "float-1.7" else 12
    table.raises(
        "advice_maps.decision_map",
        f"ns={what}",
        lambda ns=ns: advm.decision_map(ns, [1.0], d=8, eps=1e-3, M=1024),
        r"\bns\b",
    )
for what, Bs in [("None", None), ("negative", [-1.0]), ("str-entry", ["x"])]:
    table.raises(
        "advice_maps.decision_map",
        f"Bs={what}",
        lambda Bs=Bs: advm.decision_map([64], Bs, d=8, eps=1e-3, M=1024),
        r"\bBs\b",
    )
table.valid(
    "advice_maps.decision_map",
    "numpy-ns",
    lambda: advm.decision_map(np.array([64, 1024]), np.array([0.5, 2.0]), d=8, eps=1e-3, M=1024),
    lambda mp: mp.shape == (2, 2) and mp.min() >= 0 and mp.max() < len(adv.METHODS),
)
table.raises(
    "advice.method_flops", "method='magic'", lambda: adv.method_flops("magic", 8, 4), word("method")
)
table.raises(
    "advice.method_flops", "rank=None", lambda: adv.method_flops("polynomial", 8, 4), word("rank")
)
table.raises(
    "advice_maps.method_boundaries",
    "n_hi<=n_lo",
    lambda: advm.method_boundaries(8, 1.0, 1e-3, 1024, n_lo=64, n_hi=32),
    "n_hi",
)
table.raises(
    "advice_maps.method_boundaries",
    "B=nan",
    lambda: advm.method_boundaries(8, math.nan, 1e-3, 1024),
    word("B"),
)

table.raises("advice.entry_bound", "K-columns", lambda: adv.entry_bound(Q, K[:, :2]), word("K"))
table.raises(
    "advice.entry_bound", "scale=0", lambda: adv.entry_bound(Q, K, scale=0.0), word("scale")
)
table.valid(
    "advice.entry_bound",
    "folds-scale",
    lambda: adv.entry_bound(Q, K),
    lambda B: np.abs(Q @ K.T / 2.0).max() <= B**2,
)
table.raises(
    "machines.machine", "device=str", lambda: mc.machine("H100", "bfloat16"), word("device")
)
table.raises(
    "machines.machine", "dtype=fp8", lambda: mc.machine(mc.H100_SXM5, "fp8"), word("dtype")
)
table.raises(
    "machines.machine",
    "cpu-float32",
    lambda: mc.machine(mc.CpuCore("x", 2**20, 16.0, 2**30), "float32"),
    word("dtype"),
)
table.raises(
    "machines.machine",
    "no-memory",
    lambda: mc.machine(mc.Device("x", 1e9, None, 1e9, smem_bytes=1, regs_bytes=1), "float32"),
    "memory_bytes",
)
table.valid(
    "machines.machine",
    "h100-bfloat16",
    lambda: mc.machine(mc.H100_SXM5, "bfloat16"),
    lambda kw: kw["M"] == 247808 and kw["slow_memory"] == 40 * 2**30,
)
table.raises("machines.CpuCore", "name=''", lambda: mc.CpuCore("", 1, 1.0, 1), word("name"))
table.bad_ints("machines.CpuCore", "cache_bytes", lambda v: mc.CpuCore("x", v, 1.0, 1))
table.bad_reals("machines.CpuCore", "flops_per_word", lambda v: mc.CpuCore("x", 1, v, 1))
table.bad_ints("machines.CpuCore", "memory_bytes", lambda v: mc.CpuCore("x", 1, 1.0, v))
table.raises(
    "machines.CpuCore", "source=1", lambda: mc.CpuCore("x", 1, 1.0, 1, source=1), word("source")
)
table.valid(
    "machines.book_cpu_core",
    "committed",
    lambda: mc.book_cpu_core().cache_bytes,
    lambda b: b >= 2**16 and b & (b - 1) == 0,
)
table.raises("machines.book_cpu_core", "start=3", lambda: mc.book_cpu_core(start=3), word("start"))
table.raises("machines.book_machines", "start=3", lambda: mc.book_machines(start=3), word("start"))

# ---- the roofline and the three-level machine ----

table.raises("machines.Device", "name=''", lambda: mc.Device("", 1e9, None, 1e9), word("name"))
table.bad_reals("machines.Device", "bandwidth", lambda v: mc.Device("x", v, None, 1e9))
table.bad_reals("machines.Device", "peak_float32", lambda v: mc.Device("x", 1e9, None, v))
table.raises(
    "machines.Device",
    "peak_bfloat16=0",
    lambda: mc.Device("x", 1e9, 0.0, 1e9),
    word("peak_bfloat16"),
)
table.raises("machines.Device", "sms=0", lambda: mc.Device("x", 1e9, None, 1e9, sms=0), word("sms"))
table.raises(
    "machines.Device", "llc_bytes=1.5", lambda: mc.Device("x", 1e9, None, 1e9, llc_bytes=1.5), "llc"
)
table.raises(
    "machines.Device", "source=1", lambda: mc.Device("x", 1e9, None, 1e9, source=1), word("source")
)
table.raises(
    "machines.Device",
    "memory_bytes=0",
    lambda: mc.Device("x", 1e9, None, 1e9, memory_bytes=0),
    "memory",
)
table.raises("machines.Device.peak", "dtype=fp8", lambda: H100.peak("fp8"), word("dtype"))
table.raises(
    "machines.Device.peak",
    "missing",
    lambda: mc.Device("x", 1e9, None, 1e9).peak("bfloat16"),
    "bfloat16",
)
table.raises(
    "machines.Device.onchip_words",
    "no-sizes",
    lambda: mc.Device("x", 1.0, None, 1.0).onchip_words("float32"),
    "shared",
)
table.raises(
    "machines.Device.llc_words",
    "no-cache",
    lambda: mc.Device("x", 1.0, None, 1.0).llc_words("float32"),
    "cache",
)
table.valid(
    "machines.Device", "h100-onchip", lambda: H100.onchip_words("bfloat16"), lambda w: w == 247808
)
table.raises("machines.check_device", "device=str", lambda: mc.check_device("H100"), word("device"))
table.raises(
    "machines.check_device", "sms=str", lambda: mc.check_device(H100, sms="yes"), word("sms")
)
table.raises(
    "machines.check_device",
    "no sms",
    lambda: mc.check_device(mc.Device("x", 1e9, None, 1e9), sms=True),
    word("device"),
)
table.valid(
    "machines.check_device", "h100", lambda: mc.check_device(H100, sms=True), lambda d: d is H100
)
table.bad_ints("machines.measure_cpu", "n", lambda v: mc.measure_cpu(n=v))
table.bad_ints(
    "machines.measure_cpu", "repeats", lambda v: mc.measure_cpu(n=8, length=8, repeats=v)
)
table.valid(
    "machines.measure_cpu",
    "tiny",
    lambda: mc.measure_cpu(8, 64, 1),
    lambda c: c.peak("float64") > 0,
)
table.raises(
    "machines.machine_balance",
    "device=str",
    lambda: mc.machine_balance("H100", "bfloat16"),
    word("device"),
)
table.raises(
    "machines.machine_balance", "dtype=int", lambda: mc.machine_balance(H100, 16), word("dtype")
)
table.valid(
    "machines.machine_balance",
    "h100",
    lambda: mc.machine_balance(H100, "float32"),
    lambda b: 79 < b < 81,
)

# ---- the compiled kernels (BLAS arguments, lse consistency) ----


def _close_to_exact(got, Qx, Kx, Vx, dOx=None, **kw):
    """The kernels' (O, lse[, dQ, dK, dV]), or a step's (O, dQ, dK, dV), equal the exact
    core's on plain float64 copies, entrywise within 1e-12·max(1, max|ref|)."""
    plain = [np.array(x, dtype=np.float64) for x in (Qx, Kx, Vx)]
    O, lse = al.attention_forward(*plain, **kw)
    refs = [O, lse]
    if dOx is not None:
        refs += al.attention_backward(*plain, O, np.array(dOx, np.float64), lse, **kw)
    if len(got) == 4:  # attnlib.forward_backward returns no lse
        del refs[1]
    for a, b in zip(got, refs, strict=True):
        fin = np.isfinite(b)
        if a.shape != b.shape or not np.array_equal(np.isneginf(a), np.isneginf(b)):
            return False
        if np.abs(a[fin] - b[fin]).max(initial=0) > 1e-12 * max(1, np.abs(b[fin]).max(initial=0)):
            return False
    return True


R_300 = np.random.default_rng(26)
Q300, K300, V300, DO300 = (R_300.standard_normal((300, 8)) for _ in range(4))
ONE_Q = np.broadcast_to(Q300[0], (1, 8))
ONE_DO = DO300[0][None]
for fname, f in [("fast.flash_forward", al.flash_forward)]:
    table.valid(
        fname,
        "one-query-broadcast",
        lambda f=f: f(ONE_Q, K300, V300),
        lambda r: _close_to_exact(r, ONE_Q, K300, V300),
    )
    table.valid(
        fname,
        "one-key-x[None]",
        lambda f=f: f(Q300, K300[0][None], V300[0][None]),
        lambda r: _close_to_exact(r, Q300, K300[:1], V300[:1]),
    )
    table.valid(
        fname,
        "d=1-m=256",
        lambda f=f: f(Q300[:, :1], K300[:256, :1], V300[:256, :1]),
        lambda r: _close_to_exact(r, Q300[:, :1], K300[:256, :1], V300[:256, :1]),
    )
O_ONE, LSE_ONE = al.attention_forward(ONE_Q, K300, V300)
table.valid(
    "fast.flash_backward",
    "one-query-broadcast",
    lambda: (
        (*al.attention_forward(ONE_Q, K300, V300),)
        + al.flash_backward(ONE_Q, K300, V300, O_ONE, ONE_DO, LSE_ONE)
    ),
    lambda r: _close_to_exact(r, ONE_Q, K300, V300, ONE_DO),
)
V_1, DO_1 = V300[:, :1], DO300[:, :1]
O_D1, LSE_D1 = al.attention_forward(Q300, K300, V_1)
table.valid(
    "fast.flash_backward",
    "d_v=1-m=300",
    lambda: (O_D1, LSE_D1, *al.flash_backward(Q300, K300, V_1, O_D1, DO_1, LSE_D1)),
    lambda r: _close_to_exact(r, Q300, K300, V_1, DO_1),
)
table.valid(
    "step.forward_backward",
    "one-query-x[None]",
    lambda: al.forward_backward(Q300[0][None], K300, V300, ONE_DO),
    lambda r: _close_to_exact(r, Q300[:1], K300, V300, ONE_DO),
)
X1, Y1 = np.full((1, 1), 0.5), np.full((1, 1), -0.7)
A300 = [R_300.standard_normal((300, 1)) for _ in range(4)]
table.valid(
    "fast.flash_attention_loss_grad",
    "d=1-m=300",
    lambda: al.flash_attention_loss_grad(X1, *A300[:3], Y1, A300[3]),
    lambda g: (
        abs(float(g[0, 0]) - float(al.attention_loss_grad(X1, *A300[:3], Y1, A300[3])[0, 0]))
        <= 1e-12 * max(1.0, abs(float(al.attention_loss_grad(X1, *A300[:3], Y1, A300[3])[0, 0])))
    ),
)
O300, LSE300 = al.attention_forward(Q300, K300, V300)
LSE_LOW = LSE300.copy()
LSE_LOW[17] = (Q300[17] @ K300.T / np.sqrt(8)).max() - 0.5
LSE_DEAD = LSE300.copy()
LSE_DEAD[3] = -np.inf
HEADS300 = [x.reshape(2, 150, 8) for x in (Q300, K300, V300, DO300)]
BACKWARD300 = (Q300, K300, V300, O300, DO300)
table.raises_each(
    [
        ("exact.attention_backward", al.attention_backward),
        ("fast.flash_backward", al.flash_backward),
    ],
    [
        ("lse-below-a-logit", lambda f: f(*BACKWARD300, LSE_LOW), r"^lse .*row 17\b"),
        ("lse--inf-on-a-kept-row", lambda f: f(*BACKWARD300, LSE_DEAD), r"^lse .*row 3\b"),
        ("lse-800-below", lambda f: f(*BACKWARD300, LSE300 - 800), r"^lse "),
        (
            "batched-causal-lse-to-non-causal",
            lambda f: f(
                *HEADS300[:3],
                *al.attention_forward(*HEADS300[:3], is_causal=True)[:1],
                HEADS300[3],
                al.attention_forward(*HEADS300[:3], is_causal=True)[1],
            ),
            r"^lse ",
        ),
    ],
)

# ---- memory guards, sizes, flags and the chapters' tools ----

# every exact-core entry point refuses, before allocating, a call whose working
# memory exceeds config.MAX_ALLOCATION_BYTES, naming the arguments that set its size. 320 KB
# of input (n = m = 40,000, d = 1) asked for 11.9 GiB of scores.
TALL = np.ones((40_000, 1))
TALL_LSE = np.zeros(40_000)
TALL_HEADS = TALL[None, None]
SCORES = r"scores.*; Q or K is too large"
table.raises_each(
    [("exact.attention_forward", al.attention_forward), ("exact.attention", al.attention)],
    [
        ("n=m=40000", lambda f: f(TALL, TALL, TALL), SCORES),
        ("causal-n=m=40000", lambda f: f(TALL, TALL, TALL, is_causal=True), SCORES),
        ("batched-n=m=40000", lambda f: f(TALL_HEADS, TALL_HEADS, TALL_HEADS), SCORES),
    ],
    wrap=before_allocating,
)
table.raises(
    "exact.attention_backward",
    "n=m=40000",
    before_allocating(lambda: al.attention_backward(TALL, TALL, TALL, TALL, TALL, TALL_LSE)),
    r"P and dP.*; Q or K is too large",
)
table.raises(
    "exact.attention_backward",
    "batched-n=m=40000",
    before_allocating(
        lambda: al.attention_backward(
            TALL_HEADS, TALL_HEADS, TALL_HEADS, TALL_HEADS, TALL_HEADS, TALL_LSE[None, None]
        )
    ),
    r"P and dP.*; Q or K is too large",
)
table.raises(
    "step.forward_backward",
    "kernels=standard-n=m=40000",
    before_allocating(lambda: al.forward_backward(TALL, TALL, TALL, TALL, kernels="standard")),
    SCORES,
)
EYE1 = np.eye(1)
TALL_LOSS = (EYE1, TALL, TALL, TALL, EYE1, TALL)
for fname, f in [
    ("exact.attention_loss", al.attention_loss),
    ("exact.attention_loss_grad", al.attention_loss_grad),
]:
    would_need = rf"^{f.__name__} would need .*; A1 or A2 is too large"
    table.raises(fname, "n=m=40000", before_allocating(lambda f=f: f(*TALL_LOSS)), would_need)
# outputs and dtype conversions count too: zero-stride views look small and convert large
ROW4 = np.ones((1, 4))
HEADS_1E7 = np.broadcast_to(ROW4, (10**7, 1, 64, 4))
table.raises(
    "exact.attention_forward",
    "batched-broadcast-outputs",
    before_allocating(lambda: al.attention_forward(HEADS_1E7, HEADS_1E7, HEADS_1E7)),
    r"the outputs O and lse.*; Q or V is too large",
)
ROW64 = np.ones((1, 64))
Q32_1E8 = np.broadcast_to(ROW64.astype(np.float32), (10**8, 64))
table.raises(
    "exact.attention_forward",
    "float32-broadcast-converted",
    before_allocating(lambda: al.attention_forward(Q32_1E8, ROW64, ROW64[:, :1])),
    r"Q converted to float64.*; Q is too large",
)
# a legal large input still works: 10⁶ broadcast rows of one query
Q_1E6 = np.broadcast_to(Q[0], (10**6, 4))
table.valid(
    "exact.attention",
    "broadcast-10**6-rows",
    lambda: al.attention(Q_1E6, K, V),
    lambda O: (
        O.shape == (10**6, 3)
        and np.array_equal(O, np.broadcast_to(O[0], O.shape))
        and np.allclose(O[0], al.attention(Q[:1], K, V)[0], rtol=1e-14, atol=0)
    ),
)

# validation runs in bounded memory (np.isfinite on a zero-copy view
# of 10⁹ rows allocated 4 GB before any check)
NAN_ROW = np.array([1.0, 2.0, np.nan, 4.0])
NAN_1E9 = np.broadcast_to(NAN_ROW, (10**9, 4))
ROW_1E9 = np.broadcast_to(np.array([3.0, 4.0]), (10**9, 2))
table.raises_each(
    [("exact.attention_forward", al.attention_forward), ("fast.flash_forward", al.flash_forward)],
    [
        (
            "Q=broadcast-10**9-rows-nan",
            lambda f: f(NAN_1E9, K, V),
            r"^Q must be finite \(no NaN or inf\), found nan at index \(0, 2\)$",
        )
    ],
    wrap=before_allocating,
)
table.raises(
    "exact.attention_backward",
    "lse=broadcast-10**9-+inf",
    before_allocating(
        lambda: al.attention_backward(Q, K, V, O_REF, dO, np.broadcast_to(np.inf, (10**9,)))
    ),
    r"^lse must be finite or -inf \(no NaN or \+inf\), found inf at index \(0,\)$",
)
table.valid(
    "logits.max_row_norm",
    "X=broadcast-10**9-rows",
    before_allocating(lambda: lg.max_row_norm(ROW_1E9)),
    lambda r: r == 5.0,
)
table.valid(
    "logits.logit_range",
    "Q-K=broadcast-10**9-rows",
    before_allocating(lambda: lg.logit_range(ROW_1E9, ROW_1E9, scale=0.5)),
    lambda r: r == 12.5,
)

# allocations sized by one argument are refused, naming it, instead of numpy's
# MemoryError
for fname, call, arg in [
    ("costs.gemm_rates", lambda: costs.gemm_rates(tile=10**6), "tile"),
    ("costs.gemm_rates", lambda: costs.gemm_rates(8, large=10**6), "large"),
    ("costs.exp_seconds", lambda: costs.exp_seconds(10**10), "length"),
]:
    table.raises(fname, f"{arg}=huge", before_allocating(call), rf"; {arg} is too large")
# and counts that could never finish are refused, naming them
for fname, call, arg in [
    ("costs.gemm_rates", lambda: costs.gemm_rates(8, 8, repeats=10**400), "repeats"),
    ("costs.exp_seconds", lambda: costs.exp_seconds(8, repeats=10**400), "repeats"),
]:
    table.raises(fname, f"{arg}=10**400", call, word(arg))

table.valid(
    "costs.gemm_rates",
    "dtype=np.float64",
    lambda: costs.gemm_rates(4, 8, repeats=2, dtype=np.float64),
    lambda r: len(r) == 2 and all(x > 0 for x in r),
)

# a ragged mask is refused naming mask (it escaped as numpy's ValueError)
for fname, call in [
    ("exact.attention_forward", lambda: al.attention_forward(Q, K, V, mask=RAGGED)),
    ("exact.attention", lambda: al.attention(Q, K, V, mask=RAGGED)),
    (
        "exact.attention_backward",
        lambda: al.attention_backward(Q, K, V, O_REF, dO, LSE_REF, mask=RAGGED),
    ),
    (
        "step.forward_backward",
        lambda: al.forward_backward(Q, K, V, dO, mask=RAGGED, kernels="standard"),
    ),
    ("fast.flash_forward", lambda: al.flash_forward(Q, K, V, mask=RAGGED)),
    ("fast.flash_backward", lambda: al.flash_backward(Q, K, V, O_REF, dO, LSE_REF, mask=RAGGED)),
]:
    table.raises(fname, "mask=ragged", call, r"^mask must be convertible")
table.raises(
    "exact.attention_forward",
    "batched-mask=ragged",
    lambda: al.attention_forward(Q[None], K[None], V[None], mask=RAGGED),
    r"^mask must be convertible",
)
table.valid(
    "exact.attention",
    "mask=list-of-lists",
    lambda: al.attention(Q, K, V, mask=KEEP.tolist()),
    lambda O: np.array_equal(O, al.attention(Q, K, V, mask=KEEP)),
)

# enable_gqa must be a bool on 2-D input too (the kernels refused "yes", the exact
# path took it), and record= is a bool wherever it appears (any truthy value added a return
# item)
for fname, call in [
    ("exact.attention_forward", lambda: al.attention_forward(Q, K, V, enable_gqa="yes")),
    ("exact.attention", lambda: al.attention(Q, K, V, enable_gqa=1)),
    (
        "exact.attention_backward",
        lambda: al.attention_backward(Q, K, V, O_REF, dO, LSE_REF, enable_gqa="yes"),
    ),
    (
        "step.forward_backward",
        lambda: al.forward_backward(Q, K, V, dO, enable_gqa=None, kernels="standard"),
    ),
]:
    table.raises(fname, "2-D-enable_gqa=non-bool", call, r"^enable_gqa must be a bool")

table.raises(
    "costs.flop_count",
    "n=-10**400",
    lambda: costs.flop_count(-(10**400), 1, 1),
    r"^n must .*got ~10\^400$",
)

# round_up_to_grid rounds *up* (the rounded logarithm landed an ulp
# below R), and refuses what leaves the float range instead of raising OverflowError
table.valid(
    "logits.round_up_to_grid",
    "never-below-R",
    lambda: lg.round_up_to_grid(3.966866922953173, 1000),
    lambda r: r >= 3.966866922953173,
)
table.raises(
    "logits.round_up_to_grid", "R=1.79e308", lambda: lg.round_up_to_grid(1.79e308), word("R")
)
table.raises(
    "logits.round_up_to_grid",
    "steps=10**400",
    lambda: lg.round_up_to_grid(3.0, 10**400),
    word("steps_per_octave"),
)


# the compiled kernels refuse, before copying or allocating anything of the
# request's size, a call whose inputs (converted, made contiguous: a broadcast of 10^9 rows
# becomes 30 GiB) and own arrays (outputs, blocked transposes, dQ copies, scratch) exceed the
# limit; numpy's MemoryError escaped before.
HUGE_Q = np.broadcast_to(np.ones(8), (10**9, 8))
HUGE_LSE = np.broadcast_to(np.zeros(1), (10**9,))
SMALL_KV = np.ones((5, 8))
table.raises(
    "fast.flash_forward",
    "broadcast-10^9-queries",
    before_allocating(lambda: al.flash_forward(HUGE_Q, SMALL_KV, SMALL_KV)),
    r"flash_forward would need .* Q, K or V is too large",
)
table.raises(
    "fast.flash_backward",
    "broadcast-10^9-queries",
    before_allocating(
        lambda: al.flash_backward(HUGE_Q, SMALL_KV, SMALL_KV, HUGE_Q, HUGE_Q, HUGE_LSE)
    ),
    r"flash_backward would need .* is too large",
)
table.raises(
    "fast.flash_forward",
    "broadcast-mask-10^5-by-10^5",
    before_allocating(
        lambda: al.flash_forward(
            np.broadcast_to(np.ones(2), (10**5, 2)),
            np.broadcast_to(np.ones(2), (10**5, 2)),
            np.broadcast_to(np.ones(2), (10**5, 2)),
            mask=np.broadcast_to(np.ones(10**5, bool), (10**5, 10**5)),
        )
    ),
    r"contiguous copy of mask.*; mask is too large",
)
table.raises(
    "fast.flash_forward",
    "batched-broadcast-heads",
    before_allocating(
        lambda: al.flash_forward(
            np.broadcast_to(np.ones(8), (10**4, 8, 10**4, 8)),
            np.broadcast_to(np.ones(8), (10**4, 8, 5, 8)),
            np.broadcast_to(np.ones(8), (10**4, 8, 5, 8)),
        )
    ),
    r"would need .* is too large",
)

# ---- edge cases of Parts II-IV ----

table.valid(
    "advice.entry_bound",
    "10^9-row-views",
    lambda: adv.entry_bound(broadcast_view((10**9, 16)), broadcast_view((10**9, 16))),
    lambda B: B == 16**0.25 * 0.5,
)

table.raises(
    "advice_maps.decision_map",
    "10^9-n-view",
    lambda: advm.decision_map(broadcast_view((10**9,), 64, np.int64), [1.0], d=8, eps=1e-3, M=1024),
    r"ns or Bs is too large",
)

# the cost model: counts beyond the float range, tiny B, machine keywords, unknown numbers
table.raises(
    "advice.method_flops",
    "n=10**400",
    lambda: adv.method_flops("standard", 10**400, 64),
    word("n"),
)
table.raises(
    "advice.method_flops",
    "n=10**160-inf",
    lambda: adv.method_flops("standard", 10**160, 1),
    word("n"),
)
table.raises(
    "advice.method_flops",
    "rank=10**300",
    lambda: adv.method_flops("polynomial", 2**40, 2**20, rank=10**300),
    word("rank"),
)
table.valid(
    "advice.advise",
    "B=1e-200",
    lambda: adv.advise(4096, 64, 1e-200, 1e-3, 2**16),
    lambda a: a.degree == 0 and a.rank == 1 and a.method in adv.METHODS,
)
table.valid(
    "advice.advise",
    "no-polynomial-numbers-unknown",
    lambda: adv.advise(4096, 64, 3.5, 1e-6, 2**16),
    lambda a: math.isnan(a.cost_of("polynomial").flops) and "0.000e+00" not in a.table(),
)
for fname, call in [
    (
        "advice_maps.decision_map",
        lambda: advm.decision_map([64], [1.0], d=8, eps=1e-3, M=1024, speed=1),
    ),
    ("advice_maps.method_boundaries", lambda: advm.method_boundaries(8, 1.0, 1e-3, 1024, speed=1)),
]:
    table.raises(fname, "unknown-keyword", call, word("speed"))
table.raises(
    "advice_maps.method_boundaries",
    "n_hi=10**400",
    lambda: advm.method_boundaries(8, 1.0, 1e-3, 1024, n_hi=10**400),
    word("n_hi"),
)
table.raises(
    "advice.entry_bound",
    "scale=1e308",
    lambda: adv.entry_bound(Q, K, scale=1e308),
    word("scale"),
)

# ---- edge cases of the machine, graphs, counts and the hardware model ----

table.raises("machines.measure_cpu", "n=1e6", lambda: mc.measure_cpu(n=10**6), word("n"))
table.raises("machines.measure_cpu", "length=1e12", lambda: mc.measure_cpu(length=10**12), "length")
table.raises(
    "machines.measure_cpu",
    "repeats=10**400",
    lambda: mc.measure_cpu(repeats=10**400),
    word("repeats"),
)

# the cost model returned inf, 0 or NaN, or divided by zero, for extreme
# devices and intensities; messages blamed the internal M (or z_in) instead of the public
# argument
TINY_DEVICE = mc.Device("tiny", 1e12, 1e12, 1e12, None, 1, 1, 1, 1, "", 1)

table.raises(
    "machines.machine_balance",
    "bandwidth=5e-324",
    lambda: mc.machine_balance(mc.Device("x", 5e-324, 1e12, 1e12), "bfloat16"),
    word("bandwidth"),
)
table.raises(
    "machines.machine_balance",
    "balance overflows",
    lambda: mc.machine_balance(mc.Device("x", 1e-300, 1e300, 1e12), "bfloat16"),
    word("peak_bfloat16"),
)

table.raises(
    "machines.Device", "no on-chip word", lambda: TINY_DEVICE.onchip_words("float64"), "smem_bytes"
)
table.raises(
    "machines.Device", "no cache word", lambda: TINY_DEVICE.llc_words("float64"), "llc_bytes"
)

table.raises(
    "machines.machine",
    "memory_bytes of no word",
    lambda: mc.machine(TINY_DEVICE, "bfloat16"),
    "memory_bytes",
)
table.raises(
    "machines.machine",
    "cache_bytes of no word",
    lambda: mc.machine(mc.CpuCore("core", 7, 32.0, 2**30), "float64"),
    "cache_bytes",
)


# ---- the machines' checks ----

table.raises(
    "machines.Device.words_per_second",
    "dtype=fp32",
    lambda: mc.H100_SXM5.words_per_second("fp32"),
    word("dtype"),
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()


# ---- the compiled kernels ----


def test_compiled_kernel_overflow_contract():
    """flash_forward/flash_backward follow the exact path's overflow contract, give the
    representable answer for V of 1e308, and dispatch read-only inputs without compiling.

    No per-case time limit: the first call may compile the kernels (about 25 s per dtype on
    2 cores); the read-only calls themselves must take under 5 s."""
    from attnlib import fast

    message = r"the logits scale \* Q @ K\.T overflow float64: Q, K or scale is too large"
    # logits that overflow raise the exact path's error, never SystemError or NaN
    paths = [
        lambda q, k, scale: al.attention_forward(q, k, V, scale=scale),
        lambda q, k, scale: al.flash_forward(q, k, V, scale=scale),
        lambda q, k, scale: al.flash_backward(q, k, V, O_REF[:4], dO[:4], LSE_REF[:4], scale=scale),
    ]
    for q, k, scale in [
        (np.full((4, 4), 1e200), np.full((5, 4), 1e200), None),
        (Q[:4], K, 1e308),
    ]:
        for path in paths:
            with pytest.raises(al.AttnInputError, match=message):
                path(q, k, scale)
    # masked-out entries do not count
    O_flash, _ = al.flash_forward(Q, K_HUGE, V, mask=KEEP)
    np.testing.assert_allclose(O_flash, al.attention(Q, K_HUGE, V, mask=KEEP), rtol=1e-12)
    # V of 1e308 gives the representable convex combination
    O_big, _ = al.flash_forward(Q, K, np.full((5, 2), 1e308))
    assert np.isfinite(O_big).all() and np.allclose(O_big, 1e308, rtol=1e-12)
    # read-only inputs reuse the signatures compiled for writable ones
    al.flash_forward(Q, K, V)
    al.flash_backward(Q, K, V, O_REF, dO, LSE_REF)
    before = {kernel: len(kernel.signatures) for kernel in fast.KERNELS}
    frozen = [a.copy() for a in (Q, K, V, O_REF, dO, LSE_REF)]
    for a in frozen:
        a.flags.writeable = False
    start = time.perf_counter()
    Of, lf = al.flash_forward(*frozen[:3])
    al.flash_backward(*frozen)
    after = {kernel: len(kernel.signatures) for kernel in fast.KERNELS}
    assert after == before, "read-only inputs compiled new kernel signatures"
    assert time.perf_counter() - start < 5
    np.testing.assert_allclose(Of, O_REF, rtol=1e-12)
