"""The roofline: the roof follows from a device's peak and bandwidth, FlashAttention's intensity
is the exact count's, and the claims of the roofline section (balance, decode, GQA, the H100
forward near its balance point) hold."""

import math
from fractions import Fraction

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import iomodel as io
from attnlib import machines as mc
from attnlib.iomodel import hierarchy
from attnlib.iomodel import roofline as rf


def test_balance_and_roof():
    h = mc.H100_SXM5
    beta = mc.machine_balance(h, "bfloat16")
    x = np.geomspace(1, 1e5, 50)
    roof = rf.attainable_flops(x, h, "bfloat16")
    assert np.all(np.diff(roof) >= 0) and roof.max() == h.peak_bfloat16
    assert math.isclose(rf.attainable_flops(beta, h, "bfloat16"), h.peak_bfloat16)
    assert math.isclose(rf.no_overlap_flops(beta, h, "bfloat16"), h.peak_bfloat16 / 2)
    assert np.all(rf.no_overlap_flops(x, h, "bfloat16") < roof)
    # a word of float32 is twice a bfloat16 word: half the words per second, half the roof
    assert rf.attainable_flops(2.0, h, "float32") == rf.attainable_flops(2.0, h, "bfloat16") / 2


def test_flash_intensity_is_flops_over_the_exact_count():
    n, d, M = 1000, 64, 40000
    for which, count in (
        ("forward", io.flash_forward_count),
        ("backward", io.flash_backward_count),
    ):
        flops = io.attention_flops(n, d, which=which)
        assert rf.flash_intensity(n, d, M, which=which) == flops / count(n, d, M).total
    assert io.attention_flops(n, d) == 4 * n * n * d
    assert io.attention_flops(n, d, which="backward") == 10 * n * n * d
    causal = rf.flash_intensity(n, d, M, is_causal=True)
    assert causal == io.arithmetic_intensity(n, d, M, is_causal=True)
    kept = io.attention_flops(n, d, kept=n * (n + 1) // 2)
    assert kept == 4 * (n * (n + 1) // 2) * d and causal < rf.flash_intensity(n, d, M)


def test_forward_intensity_is_about_twice_the_query_block():
    n, d = 65536, 128
    for M in (2**14, 2**16, 2**18):
        B_r = io.flash_forward_blocks(d, M)[0]
        assert 0.9 * 2 * B_r < rf.flash_intensity(n, d, M) < 2 * B_r


def test_h100_forward_near_balance_and_decode_far_below():
    """The claims of the roofline section, at d = 128 in bfloat16 with the block rule's tiles
    for one SM's whole on-chip memory (the real kernels' smaller tiles: the test below)."""
    h = mc.H100_SXM5
    for n in (4096, 16384, 65536):
        point = rf.roofline_point(h, "bfloat16", n, 128)
        assert 1.0 < point.over_balance < 2.0  # compute-bound, but within a factor 2
        assert point.fraction == 1.0
        assert rf.no_overlap_flops(point.intensity, h, "bfloat16") < 0.7 * h.peak_bfloat16
    causal = rf.roofline_point(h, "bfloat16", 16384, 128, is_causal=True)
    assert causal.intensity < rf.roofline_point(h, "bfloat16", 16384, 128).intensity
    decode = rf.decode_intensity(16384, 128, h.onchip_words("bfloat16"))
    assert 1.9 < decode < 2.0 and decode / mc.machine_balance(h, "bfloat16") < 0.004
    gqa = rf.decode_intensity(16384, 128, h.onchip_words("bfloat16"), H=8, H_kv=1)
    assert 7.9 < gqa / decode < 8.1


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: rf.attainable_flops(2.0, "H100", "bfloat16"), "device"),
        (lambda: rf.attainable_flops(2.0, mc.H100_SXM5, "bf16"), "dtype"),
        (lambda: rf.attainable_flops(0.0, mc.H100_SXM5, "bfloat16"), "intensity"),
        (lambda: rf.attainable_flops([1.0, -1.0], mc.H100_SXM5, "bfloat16"), "intensity"),
        (lambda: rf.flash_intensity(16, 4, 120, which="up"), "which"),
        (lambda: rf.flash_intensity(16, 4, 120, is_causal="yes"), "is_causal"),
        (lambda: rf.roofline_point(mc.H100_SXM5, "bfloat16", 16, 4, is_causal=1), "is_causal"),
        (lambda: io.arithmetic_intensity(16, 4, 120, is_causal=None), "is_causal"),
        (lambda: rf.decode_intensity(16, 4, 120, H=3, H_kv=2), "H"),
    ],
)
def test_bad_arguments(call, pattern):
    with pytest.raises(AttnInputError, match=pattern):
        call()


# ---- extreme inputs: the right answer or a refusal naming the argument ----


def test_no_overlap_rate_is_finite_and_accurate_at_every_intensity():
    """peak·I/(I + β) overflowed to inf (then inf/inf) for intensities near the float range;
    it is now lo/(1 + lo/hi) of the two roofs, the same value."""
    h100 = mc.H100_SXM5
    peak, balance = h100.peak("bfloat16"), mc.machine_balance(h100, "bfloat16")
    for x in (1e-300, 1e-3, 2.0, balance, 1e6, 1e300, 1e308):
        got = rf.no_overlap_flops(x, h100, "bfloat16")
        want = float(Fraction(peak) * Fraction(x) / (Fraction(x) + Fraction(balance)))
        assert math.isfinite(got) and math.isclose(got, want, rel_tol=4e-16), (x, got, want)
    assert rf.no_overlap_flops(balance, h100, "bfloat16") == pytest.approx(peak / 2, rel=1e-15)
    rates = rf.no_overlap_flops(np.array([1e-300, balance, 1e308]), h100, "bfloat16")
    assert np.isfinite(rates).all() and rates[-1] == pytest.approx(peak, rel=1e-15)
    assert rf.attainable_flops(1e308, h100, "bfloat16") == peak
    slow = mc.Device("test", 1e-10, 1e14, 1e13)
    with pytest.raises(AttnInputError, match="intensity is too small"):
        rf.attainable_flops(5e-324, slow, "bfloat16")


def test_a_head_dimension_too_large_for_the_device_blames_d_and_the_device():
    """The on-chip M is derived from the device, so a refusal that blamed M named no argument
    of the call."""
    small = mc.Device("test", 1e12, 1e14, 1e13, llc_bytes=2**22, smem_bytes=64, regs_bytes=64)
    small = mc.Device(**{**small.__dict__, "sms": 8})
    for call in (
        lambda: rf.roofline_point(small, "bfloat16", 1024, 64),
        lambda: hierarchy.heads_sharing_l2(small, 1024, 64),
        lambda: hierarchy.l2_absorption(small, 1024, 64),
        lambda: hierarchy.l2_absorption(small, 1024, 64, which="backward"),
    ):
        with pytest.raises(AttnInputError, match=r"d=64 is too large for device test"):
            call()


def test_intensities_beyond_the_float_range_are_refused():
    with pytest.raises(AttnInputError, match="intensity is beyond the float range"):
        rf.flash_intensity(10**400, 1, 10**400)
    with pytest.raises(AttnInputError, match="intensity is beyond the float range"):
        io.prefill_decode_intensity(10**400, 1, 10**400)
    with pytest.raises(AttnInputError, match="H, m and M are too large"):
        rf.decode_intensity(10**400, 4, 10**400, H=10**400)
    # about 2·min(g, B_r) flops per word: huge H alone is finite
    assert math.isfinite(rf.decode_intensity(10**400, 4, 4096, H=10**400))
    # huge but representable
    assert math.isfinite(rf.flash_intensity(10**12, 64, 10**6, is_causal=True))


def test_h100_at_the_tiles_real_kernels_use_is_memory_bound():
    """With FlashAttention-2's tiles at d = 128 (128 × 64 forward, 64 × 128 backward) instead of
    the block rule's for a whole SM, both passes fall below the bfloat16 balance: about 254
    flops per word forward, 0.43 of the balance; the roof is then 43% of the peak and the
    no-overlap rate about 30%."""
    h = mc.H100_SXM5
    rule = rf.roofline_point(h, "bfloat16", 16384, 128)
    real = rf.roofline_point(h, "bfloat16", 16384, 128, blocks=(128, 64))
    assert io.flash_forward_blocks(128, h.onchip_words("bfloat16"))[0] == 557
    assert rule.over_balance > 1.7 and rule.fraction == 1.0
    assert round(real.intensity) == 254 and 0.42 < real.over_balance < 0.44
    assert real.fraction == pytest.approx(real.over_balance)  # on the slope
    serial = rf.no_overlap_flops(real.intensity, h, "bfloat16") / h.peak_bfloat16
    assert 0.29 < serial < 0.31
    back = rf.roofline_point(h, "bfloat16", 16384, 128, which="backward", blocks=(64, 128))
    assert 0.5 < back.over_balance < 0.6
    with pytest.raises(AttnInputError, match="blocks"):
        rf.roofline_point(h, "bfloat16", 16384, 128, blocks=(1024, 1024))


def test_exp_roof():
    """One exponential per score: 2(d + d_v) flops per exponential forward, 2(3d + 2d_v)
    backward; the H100's 16·132·1830e6 exponentials per second (FlashAttention-3) give
    twice the bfloat16 peak at d = 128 forward, the paper's 'exponential can take 50% of the
    cycle compared to matmul'."""
    h = mc.H100_SXM5
    assert h.exp_rate == 16 * 132 * 1830e6
    assert rf.exp_roof(h, 128) == h.exp_rate * 512
    assert rf.exp_roof(h, 64, d_v=32) == h.exp_rate * 192
    assert rf.exp_roof(h, 128, which="backward") == h.exp_rate * 2 * 5 * 128
    assert rf.exp_roof(h, 128) / h.peak_bfloat16 == pytest.approx(2.0, abs=1e-3)
    # without overlapping exponentials and products: 1/(1/peak + 1/roof), two thirds
    serial = 1 / (1 / h.peak_bfloat16 + 1 / rf.exp_roof(h, 128))
    assert serial / h.peak_bfloat16 == pytest.approx(2 / 3, abs=1e-3)
    for call, pattern in (
        (lambda: rf.exp_roof(mc.A100_SXM_80GB, 128), "exp_rate"),
        (lambda: rf.exp_roof("H100", 128), "device"),
        (lambda: rf.exp_roof(h, 0), "d"),
        (lambda: rf.exp_roof(h, 128, which="up"), "which"),
        (lambda: rf.exp_roof(h, 128, d_v=-1), "d_v"),
        (lambda: mc.Device("x", 1e9, None, 1e9, exp_rate=0.0), "exp_rate"),
    ):
        with pytest.raises(AttnInputError, match=pattern):
            call()
