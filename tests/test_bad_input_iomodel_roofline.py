"""Bad-input rows of Part I's hardware model: devices, the roofline, arithmetic intensity and the
three-level machine.

The rows' machinery, their ids and the inputs the parts share: bad_input_cases.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from bad_input_cases import (
    H100,
    K_1E200,
    LONG_Q,
    LSE_REF,
    O_REF,
    Q_1E200,
    K,
    Q,
    Table,
    V,
    dO,
    finite,
    word,
)

from attnlib import iomodel as io
from attnlib import machines as mc
from attnlib.iomodel import hierarchy as hy
from attnlib.iomodel import roofline as rf

table = Table()


# ---- causal, grouped-query and decode schedules on the machine ----

table.bad_ints("iomodel.attention_flops", "n", lambda v: io.attention_flops(v, 4))
table.raises(
    "iomodel.attention_flops", "which=bad", lambda: io.attention_flops(4, 4, which="x"), "which"
)
table.raises(
    "iomodel.attention_flops", "kept>n*m", lambda: io.attention_flops(4, 4, kept=17), word("kept")
)
table.bad_ints("iomodel.arithmetic_intensity", "M", lambda v: io.arithmetic_intensity(16, 4, v))
table.raises(
    "iomodel.arithmetic_intensity",
    "which=bad",
    lambda: io.arithmetic_intensity(16, 4, 4096, which="sideways"),
    "which",
)
table.raises(
    "iomodel.arithmetic_intensity",
    "is_causal=str",
    lambda: io.arithmetic_intensity(16, 4, 4096, is_causal="yes"),
    word("is_causal"),
)
table.bad_ints(
    "iomodel.prefill_decode_intensity", "m", lambda v: io.prefill_decode_intensity(v, 4, 4096)
)

# ---- the roofline and the three-level machine ----

for fname, f in [
    ("iomodel.attainable_flops", rf.attainable_flops),
    ("iomodel.no_overlap_flops", rf.no_overlap_flops),
]:
    table.bad_reals(
        fname,
        "intensity",
        lambda v, f=f: f(v, H100, "bfloat16"),
        extra=[("list-neg", [1.0, -2.0])],
    )
    table.raises(fname, "device=None", lambda f=f: f(1.0, None, "bfloat16"), word("device"))
    table.valid(
        fname,
        "array",
        lambda f=f: f(np.array([1.0, 1e6]), H100, "bfloat16"),
        lambda a: a.shape == (2,),
    )
table.bad_ints("iomodel.flash_intensity", "n", lambda v: rf.flash_intensity(v, 4, 4096))
table.bad_ints("iomodel.flash_intensity", "M", lambda v: rf.flash_intensity(16, 4, v))
table.raises(
    "iomodel.flash_intensity",
    "which",
    lambda: rf.flash_intensity(16, 4, 4096, which="x"),
    word("which"),
)
table.raises(
    "iomodel.flash_intensity",
    "is_causal",
    lambda: rf.flash_intensity(16, 4, 4096, is_causal=1),
    word("is_causal"),
)
table.raises(
    "iomodel.flash_intensity",
    "blocks over M",
    lambda: rf.flash_intensity(16, 4, 120, blocks=(16, 16)),
    word("blocks"),
)
table.raises(
    "iomodel.arithmetic_intensity",
    "blocks=int",
    lambda: io.arithmetic_intensity(16, 4, 4096, blocks=8),
    word("blocks"),
)
table.bad_decode("iomodel.decode_intensity", rf.decode_intensity, "H")
table.bad_ints("iomodel.exp_roof", "d", lambda v: rf.exp_roof(H100, v))
table.raises("iomodel.exp_roof", "device=str", lambda: rf.exp_roof("H100", 4), word("device"))
table.raises("iomodel.exp_roof", "no exp_rate", lambda: rf.exp_roof(mc.MI300X, 4), word("exp_rate"))
table.raises("iomodel.exp_roof", "which", lambda: rf.exp_roof(H100, 4, which=2), word("which"))
table.raises(
    "iomodel.roofline_point",
    "blocks over one SM",
    lambda: rf.roofline_point(H100, "bfloat16", 4096, 128, blocks=(4096, 4096)),
    word("blocks"),
)
table.raises(
    "iomodel.l2_absorption",
    "blocks over one SM",
    lambda: hy.l2_absorption(H100, 4096, 128, blocks=(4096, 4096)),
    word("blocks"),
)
table.raises(
    "iomodel.roofline_point",
    "device",
    lambda: rf.roofline_point("H100", "bfloat16", 16, 4),
    word("device"),
)
table.raises(
    "iomodel.roofline_point",
    "dtype",
    lambda: rf.roofline_point(H100, "float16", 16, 4),
    word("dtype"),
)
table.valid(
    "iomodel.roofline_point",
    "h100",
    lambda: rf.roofline_point(H100, "bfloat16", 4096, 128),
    lambda p: p.fraction == 1.0,
)
table.bad_ints(
    "iomodel.flash_forward_three_level_count",
    "n",
    lambda v: hy.flash_forward_three_level_count(v, 4, 120, 400),
)
table.bad_ints(
    "iomodel.flash_backward_three_level_count",
    "M_l2",
    lambda v: hy.flash_backward_three_level_count(16, 4, 120, v),
)
table.raises(
    "iomodel.l2_absorption", "which", lambda: hy.l2_absorption(H100, 16, 4, which=1), word("which")
)
for fname, f in [
    ("iomodel.flash_forward_three_level_count", hy.flash_forward_three_level_count),
    ("iomodel.flash_backward_three_level_count", hy.flash_backward_three_level_count),
]:
    table.bad_ints(fname, "d", lambda v, f=f: f(16, v, 120, 400))
    table.raises(fname, "M_l2<M", lambda f=f: f(16, 4, 120, 119), word("M_l2"))
    table.raises(fname, "M-too-small", lambda f=f: f(16, 4, 3, 400), word("M"))
    table.valid(fname, "no-l2", lambda f=f: f(16, 4, 120, 120), lambda c: c.resident_rows == 0)
table.bad_arrays(
    "iomodel.flash_forward_three_level",
    "Q",
    lambda v: hy.flash_forward_three_level(v, K, V, M=120, M_l2=400),
)
table.raises(
    "iomodel.flash_forward_three_level",
    "M_l2<M",
    lambda: hy.flash_forward_three_level(Q, K, V, M=120, M_l2=1),
    word("M_l2"),
)
table.raises(
    "iomodel.flash_forward_three_level",
    "M=str",
    lambda: hy.flash_forward_three_level(Q, K, V, M="1", M_l2=400),
    word("M"),
)
table.valid(
    "iomodel.flash_forward_three_level",
    "exact",
    lambda: hy.flash_forward_three_level(Q, K, V, M=120, M_l2=400),
    lambda r: (
        np.allclose(r[0], O_REF)
        and r[2] == hy.flash_forward_three_level_count(6, 4, 120, 400, m=5, d_v=3)
    ),
)
table.bad_arrays(
    "iomodel.flash_backward_three_level",
    "dO",
    lambda v: hy.flash_backward_three_level(Q, K, V, O_REF, v, LSE_REF, M=120, M_l2=400),
)
table.raises(
    "iomodel.flash_backward_three_level",
    "M_l2<M",
    lambda: hy.flash_backward_three_level(Q, K, V, O_REF, dO, LSE_REF, M=120, M_l2=1),
    word("M_l2"),
)
table.valid(
    "iomodel.flash_backward_three_level",
    "exact",
    lambda: hy.flash_backward_three_level(Q, K, V, O_REF, dO, LSE_REF, M=120, M_l2=400),
    lambda r: r[3] == hy.flash_backward_three_level_count(6, 4, 120, 400, m=5, d_v=3),
)
table.raises(
    "iomodel.l2_absorption", "device", lambda: hy.l2_absorption(None, 4096, 64), word("device")
)
table.raises(
    "iomodel.l2_absorption",
    "shared",
    lambda: hy.l2_absorption(H100, 4096, 64, shared="yes"),
    word("shared"),
)
table.raises(
    "iomodel.l2_absorption",
    "dtype",
    lambda: hy.l2_absorption(H100, 4096, 64, dtype="float16"),
    word("dtype"),
)
table.valid(
    "iomodel.l2_absorption",
    "h100",
    lambda: hy.l2_absorption(H100, 4096, 64),
    lambda a: a.fraction == 1.0,
)
table.raises(
    "iomodel.heads_sharing_l2",
    "device",
    lambda: hy.heads_sharing_l2("H100", 4096, 64),
    word("device"),
)
table.raises(
    "iomodel.heads_sharing_l2",
    "which",
    lambda: hy.heads_sharing_l2(H100, 4096, 64, which="x"),
    word("which"),
)
table.bad_ints("iomodel.heads_sharing_l2", "n", lambda v: hy.heads_sharing_l2(H100, v, 64))
table.valid(
    "iomodel.heads_sharing_l2",
    "h100",
    lambda: hy.heads_sharing_l2(H100, 16, 64),
    lambda h: h == 132,
)

# ---- edge cases of the machine, graphs, counts and the hardware model ----

for _name, _run in [
    (
        "iomodel.flash_forward_three_level",
        lambda: hy.flash_forward_three_level(Q_1E200, K_1E200, V, M=4096, M_l2=8192),
    ),
    (
        "iomodel.flash_backward_three_level",
        lambda: hy.flash_backward_three_level(
            Q_1E200, K_1E200, V, O_REF, dO, LSE_REF, M=4096, M_l2=8192
        ),
    ),
]:
    table.raises(_name, "logits overflow float64", _run, word("Q"))

table.valid(
    "iomodel.arithmetic_intensity",
    "causal n=1e12",
    lambda: io.arithmetic_intensity(10**12, 64, 16384, is_causal=True),
    lambda x: math.isfinite(x) and x > 0,
)
table.valid(
    "iomodel.flash_intensity",
    "causal backward n=1e12",
    lambda: rf.flash_intensity(10**12, 64, 16384, which="backward", is_causal=True),
    lambda x: math.isfinite(x) and x > 0,
)
table.valid(
    "iomodel.roofline_point",
    "causal n=1e12",
    lambda: rf.roofline_point(H100, "bfloat16", 10**12, 128, is_causal=True),
    lambda p: finite(p) and p.fraction == 1.0,
)

for _name, _run in [
    (
        "iomodel.flash_forward_three_level",
        lambda: hy.flash_forward_three_level(LONG_Q, LONG_Q, LONG_Q, M=11, M_l2=100),
    ),
]:
    table.raises(_name, "1100 rows with a tiny M", _run, r"MAX_MACHINE_STEPS.*\bM\b")

_SMALL = mc.Device("small", 1e12, 1e12, 1e12, None, 4096, 64, 64, 4, "", 2**20)

table.valid(
    "iomodel.no_overlap_flops",
    "intensity=1e308",
    lambda: rf.no_overlap_flops(1e308, H100, "bfloat16"),
    lambda r: math.isclose(r, H100.peak_bfloat16, rel_tol=1e-15),
)
table.valid(
    "iomodel.no_overlap_flops",
    "intensity=1e-300",
    lambda: rf.no_overlap_flops(1e-300, H100, "bfloat16"),
    lambda r: math.isclose(r, 1e-300 * H100.words_per_second("bfloat16"), rel_tol=1e-12),
)
table.raises(
    "iomodel.attainable_flops",
    "rate underflows",
    lambda: rf.attainable_flops(5e-324, mc.Device("x", 1e-10, 1e12, 1e12), "bfloat16"),
    word("intensity"),
)

for _name, _call in [
    ("iomodel.roofline_point", lambda: rf.roofline_point(_SMALL, "bfloat16", 1024, 64)),
    ("iomodel.heads_sharing_l2", lambda: hy.heads_sharing_l2(_SMALL, 1024, 64)),
    ("iomodel.l2_absorption", lambda: hy.l2_absorption(_SMALL, 1024, 64)),
]:
    table.raises(_name, "d too large for the device", _call, r"d=64.*device small")
table.raises(
    "iomodel.flash_intensity",
    "n=M=10**400",
    lambda: rf.flash_intensity(10**400, 1, 10**400),
    word("n"),
)
table.raises(
    "iomodel.decode_intensity",
    "H=m=M=10**400",
    lambda: rf.decode_intensity(10**400, 4, 10**400, H=10**400),
    word("H"),
)
table.raises(
    "iomodel.prefill_decode_intensity",
    "m=M=10**400",
    lambda: io.prefill_decode_intensity(10**400, 1, 10**400),
    word("M"),
)


# ---- the tests ----


@pytest.mark.parametrize("case", table.cases, ids=table.ids)
def test_row(case):
    case.run()
