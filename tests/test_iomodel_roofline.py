"""The roofline: the presets hold their data-sheet numbers, the balance and the roof follow from
them, FlashAttention's intensity is the exact count's, and the claims of the roofline section
(balance, decode, GQA, the H100 forward near its balance point) hold."""

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from attnlib import AttnInputError, machines
from attnlib import iomodel as io
from attnlib.iomodel import hierarchy
from attnlib.iomodel import roofline as rf


def test_presets_hold_the_vendor_numbers():
    a, h, x = rf.A100_SXM_80GB, rf.H100_SXM5, rf.MI300X
    assert (a.peak_bf16, a.peak_fp32, a.bandwidth) == (312e12, 19.5e12, 2039e9)
    assert (h.peak_bf16, h.peak_fp32, h.bandwidth) == (989.4e12, 66.9e12, 3.35e12)
    assert (x.peak_bf16, x.peak_fp32, x.bandwidth) == (1307.4e12, 163.4e12, 5.3e12)
    assert (a.sms, h.sms, x.sms) == (108, 132, 304)
    assert (a.llc_bytes, h.llc_bytes, x.llc_bytes) == (40 * 2**20, 50 * 2**20, 256 * 2**20)
    assert (a.smem_bytes, h.smem_bytes, x.smem_bytes) == (164 * 1024, 228 * 1024, 64 * 1024)
    assert (a.regs_bytes, h.regs_bytes, x.regs_bytes) == (256 * 1024, 256 * 1024, 512 * 1024)
    assert (a.memory_bytes, h.memory_bytes, x.memory_bytes) == (80 * 2**30, 80 * 2**30, 192 * 2**30)
    bib = (Path(__file__).resolve().parent.parent / "references.bib").read_text()
    for device in rf.GPUS:
        for key in device.source.split(", "):
            assert f"{{{key}," in bib, key


def test_balance_and_roof():
    h = rf.H100_SXM5
    beta = rf.machine_balance(h, "bf16")
    assert math.isclose(beta, 989.4e12 / (3.35e12 / 2))
    assert math.isclose(rf.machine_balance(h, "fp32"), 66.9e12 / (3.35e12 / 4))
    x = np.geomspace(1, 1e5, 50)
    roof = rf.attainable_flops(x, h, "bf16")
    assert np.all(np.diff(roof) >= 0) and roof.max() == h.peak_bf16
    assert math.isclose(rf.attainable_flops(beta, h, "bf16"), h.peak_bf16)
    assert math.isclose(rf.no_overlap_flops(beta, h, "bf16"), h.peak_bf16 / 2)
    assert np.all(rf.no_overlap_flops(x, h, "bf16") < roof)


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
    causal = rf.flash_intensity(n, d, M, causal=True)
    assert causal == io.arithmetic_intensity(n, d, M, causal=True)


def test_forward_intensity_is_about_twice_the_query_block():
    n, d = 65536, 128
    for M in (2**14, 2**16, 2**18):
        B_r = io.flash_forward_blocks(d, M)[0]
        assert 0.9 * 2 * B_r < rf.flash_intensity(n, d, M) < 2 * B_r


def test_h100_forward_near_balance_and_decode_far_below():
    """The claims of the roofline section, at d = 128 in bf16 with one SM's on-chip memory."""
    h = rf.H100_SXM5
    for n in (4096, 16384, 65536):
        point = rf.roofline_point(h, "bf16", n, 128)
        assert 1.0 < point.over_balance < 2.0  # compute-bound, but within a factor 2
        assert point.fraction == 1.0
        assert rf.no_overlap_flops(point.intensity, h, "bf16") < 0.7 * h.peak_bf16
    decode = rf.decode_intensity(16384, 128, h.onchip_words("bf16"))
    assert 1.9 < decode < 2.0 and decode / rf.machine_balance(h, "bf16") < 0.004
    gqa = rf.decode_intensity(16384, 128, h.onchip_words("bf16"), H=8, H_kv=1)
    assert 7.9 < gqa / decode < 8.1


def test_onchip_words():
    assert rf.H100_SXM5.onchip_words("bf16") == (228 + 256) * 1024 // 2
    assert rf.MI300X.onchip_words("fp32") == (64 + 512) * 1024 // 4


def test_measured_cpu_is_a_device():
    cpu = rf.measure_cpu(n=64, length=2**12, repeats=1)
    assert cpu.peak_fp64 > 0 and cpu.peak_fp32 > 0 and cpu.bandwidth > 0
    assert rf.machine_balance(cpu, "fp64") > 0
    with pytest.raises(AttnInputError, match="bf16"):
        cpu.peak("bf16")


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: rf.machine_balance("H100", "bf16"), "device"),
        (lambda: rf.machine_balance(rf.H100_SXM5, "fp8"), "dtype"),
        (lambda: rf.attainable_flops(0.0, rf.H100_SXM5, "bf16"), "intensity"),
        (lambda: rf.attainable_flops([1.0, -1.0], rf.H100_SXM5, "bf16"), "intensity"),
        (lambda: rf.flash_intensity(16, 4, 120, which="up"), "which"),
        (lambda: rf.flash_intensity(16, 4, 120, causal="yes"), "causal"),
        (lambda: rf.decode_intensity(16, 4, 120, H=3, H_kv=2), "H"),
        (lambda: rf.Device(name="", bandwidth=1.0, peak_bf16=None, peak_fp32=1.0), "name"),
        (lambda: rf.Device(name="x", bandwidth=-1.0, peak_bf16=None, peak_fp32=1.0), "bandwidth"),
        (lambda: rf.Device(name="x", bandwidth=1.0, peak_bf16=None, peak_fp32=1.0, sms=0), "sms"),
    ],
)
def test_bad_arguments(call, pattern):
    with pytest.raises(AttnInputError, match=pattern):
        call()


def test_figure_builders_draw_and_refuse_bad_input():
    import matplotlib.pyplot as plt

    from attnlib.plots import roofline as rp

    Ms = np.array([1e3, 1e4, 1e5])
    fig = rp.intensity_figure(Ms, {"forward, d = 64": Ms / 10}, {"H100 bf16": 590.0}, takeaway="t")
    assert fig.axes[0].get_xlabel() and fig.axes[0].get_legend() is not None
    roofs = [("H100", "bf16", 989.4e12, 3.35e12), ("H100", "fp32", 66.9e12, 3.35e12)]
    fig = rp.roofline_figure(roofs, [("H100", "forward", 500.0, 989.4e12)])
    assert "FLOP/s" in fig.axes[0].get_ylabel()
    fig = rp.l2_absorption_figure([4096, 16384], {"H100": [1.0, 0.5]}, {"H100": [1.0, 0.2]})
    assert len(fig.axes[0].get_lines()) == 2
    plt.close("all")
    bad = [
        lambda: rp.intensity_figure(Ms, {}, {"x": 1.0}),
        lambda: rp.intensity_figure(Ms, {"a": Ms[:2]}, {"x": 1.0}),
        lambda: rp.intensity_figure(-Ms, {"a": Ms}, {"x": 1.0}),
        lambda: rp.roofline_figure([], [("H100", "f", 1.0, 1.0)]),
        lambda: rp.roofline_figure(roofs, [("A100", "f", 1.0, 1.0)]),
        lambda: rp.roofline_figure(roofs, [("H100", "f", -1.0, 1.0)]),
        lambda: rp.l2_absorption_figure([4096], {"H100": [1.5]}, {"H100": [1.0]}),
        lambda: rp.l2_absorption_figure([4096], {"H100": [1.0]}, {"A100": [1.0]}),
    ]
    for call in bad:
        with pytest.raises(AttnInputError):
            call()
    plt.close("all")


# ---- the cost model at extreme inputs: the right answer or a refusal naming the argument -


def _device(**fields):
    base = dict(name="test", bandwidth=1e12, peak_bf16=1e14, peak_fp32=1e13)
    base |= dict(llc_bytes=2**22, smem_bytes=2**16, regs_bytes=2**16, sms=8, memory_bytes=2**30)
    return rf.Device(**{**base, **fields})


def test_balance_and_rates_refuse_instead_of_dividing_by_zero_or_overflowing():
    with pytest.raises(AttnInputError, match=r"bandwidth = \S+ bytes/s rounds to 0 words"):
        rf.machine_balance(_device(bandwidth=5e-324), "bf16")
    with pytest.raises(AttnInputError, match=r"peak_bf16 / bandwidth .* beyond the float range"):
        rf.machine_balance(_device(bandwidth=1e-300, peak_bf16=1e300), "bf16")
    with pytest.raises(AttnInputError, match=r"beyond the float range, got 0 flops per word"):
        rf.machine_balance(_device(bandwidth=1e300, peak_bf16=1e-300), "bf16")  # underflow
    assert rf.machine_balance(_device(bandwidth=1e100, peak_bf16=1e-100), "bf16") == 2e-200


def test_no_overlap_rate_is_finite_and_accurate_at_every_intensity():
    """peak·I/(I + β) overflowed to inf (then inf/inf) for intensities near the float range;
    it is now lo/(1 + lo/hi) of the two roofs, the same value."""
    h100 = rf.H100_SXM5
    peak, balance = h100.peak("bf16"), rf.machine_balance(h100, "bf16")
    for x in (1e-300, 1e-3, 2.0, balance, 1e6, 1e300, 1e308):
        got = rf.no_overlap_flops(x, h100, "bf16")
        want = float(Fraction(peak) * Fraction(x) / (Fraction(x) + Fraction(balance)))
        assert math.isfinite(got) and math.isclose(got, want, rel_tol=4e-16), (x, got, want)
    assert rf.no_overlap_flops(balance, h100, "bf16") == pytest.approx(peak / 2, rel=1e-15)
    rates = rf.no_overlap_flops(np.array([1e-300, balance, 1e308]), h100, "bf16")
    assert np.isfinite(rates).all() and rates[-1] == pytest.approx(peak, rel=1e-15)
    assert rf.attainable_flops(1e308, h100, "bf16") == peak
    with pytest.raises(AttnInputError, match="intensity is too small"):
        rf.attainable_flops(5e-324, _device(bandwidth=1e-10), "bf16")


def test_memory_sizes_of_no_whole_word_are_refused():
    tiny = _device(smem_bytes=1, regs_bytes=1, llc_bytes=1)
    with pytest.raises(AttnInputError, match="smem_bytes \\+ regs_bytes hold no whole word"):
        tiny.onchip_words("fp64")
    with pytest.raises(AttnInputError, match="llc_bytes hold no whole word"):
        tiny.llc_words("fp64")
    assert tiny.onchip_words("bf16") == 1


def test_a_head_dimension_too_large_for_the_device_blames_d_and_the_device():
    """The on-chip M is derived from the device, so a refusal that blamed M named no argument
    of the call."""
    small = _device(smem_bytes=64, regs_bytes=64)
    for call in (
        lambda: rf.roofline_point(small, "bf16", 1024, 64),
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
    assert math.isfinite(rf.flash_intensity(10**12, 64, 10**6, causal=True))


def test_measure_cpu_refuses_before_allocating_or_running_for_hours():
    with pytest.raises(AttnInputError, match=r"\bn is too large"):
        rf.measure_cpu(n=10**6)
    with pytest.raises(AttnInputError, match=r"\blength is too large"):
        rf.measure_cpu(length=10**12)
    with pytest.raises(AttnInputError, match="repeats must be an integer <="):
        rf.measure_cpu(repeats=10**400)


def test_machine_presets_refuse_memories_of_no_whole_word():
    with pytest.raises(AttnInputError, match="memory_bytes hold no whole word of fp64"):
        machines.machine(_device(memory_bytes=1, peak_fp64=1e12), "fp64")
    with pytest.raises(AttnInputError, match="cache_bytes hold no whole word of fp64"):
        machines.machine(machines.CpuCore("core", 7, 32.0, 2**30), "fp64")
