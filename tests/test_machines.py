"""Real machines: the presets hold their data-sheet numbers, the balance follows from them, the
measured CPU is a Device, and the cost model's machine keywords are one SM (or one core), its
balance and its memory; bad sizes and rates are refused naming the field."""

import math
from pathlib import Path

import pytest

from attnlib import AttnInputError
from attnlib import machines as mc
from attnlib.advice import advise
from attnlib.advice_maps import decision_map
from attnlib.results import read_committed


def _device(**fields):
    base = dict(name="test", bandwidth=1e12, peak_bfloat16=1e14, peak_float32=1e13)
    base |= dict(llc_bytes=2**22, smem_bytes=2**16, regs_bytes=2**16, sms=8, memory_bytes=2**30)
    return mc.Device(**{**base, **fields})


def test_presets_hold_the_vendor_numbers():
    a, h, x = mc.A100_SXM_80GB, mc.H100_SXM5, mc.MI300X
    assert (a.peak_bfloat16, a.peak_float32, a.bandwidth) == (312e12, 19.5e12, 2039e9)
    assert (h.peak_bfloat16, h.peak_float32, h.bandwidth) == (989.4e12, 66.9e12, 3.35e12)
    assert (x.peak_bfloat16, x.peak_float32, x.bandwidth) == (1307.4e12, 163.4e12, 5.3e12)
    assert (a.sms, h.sms, x.sms) == (108, 132, 304)
    assert (a.llc_bytes, h.llc_bytes, x.llc_bytes) == (40 * 2**20, 50 * 2**20, 256 * 2**20)
    assert (a.smem_bytes, h.smem_bytes, x.smem_bytes) == (164 * 1024, 228 * 1024, 64 * 1024)
    assert (a.regs_bytes, h.regs_bytes, x.regs_bytes) == (256 * 1024, 256 * 1024, 512 * 1024)
    assert (a.memory_bytes, h.memory_bytes, x.memory_bytes) == (80 * 2**30, 80 * 2**30, 192 * 2**30)
    bib = (Path(__file__).resolve().parent.parent / "references.bib").read_text()
    for device in mc.GPUS:
        for key in device.source.split(", "):
            assert f"{{{key}," in bib, key


def test_dtypes_are_numpy_names_and_words_have_their_size():
    assert mc.WORD_BYTES == {"bfloat16": 2, "float32": 4, "float64": 8}
    h = mc.H100_SXM5
    assert math.isclose(mc.machine_balance(h, "bfloat16"), 989.4e12 / (3.35e12 / 2))
    assert math.isclose(mc.machine_balance(h, "float32"), 66.9e12 / (3.35e12 / 4))
    assert h.words_per_second("float32") == 3.35e12 / 4
    assert h.onchip_words("bfloat16") == (228 + 256) * 1024 // 2
    assert mc.MI300X.onchip_words("float32") == (64 + 512) * 1024 // 4
    assert mc.MI300X.llc_words("bfloat16") == 256 * 2**20 // 2
    for old in ("bf16", "fp32", "fp64", "float16"):
        with pytest.raises(AttnInputError, match="^dtype must be one of"):
            h.peak(old)


def test_measured_cpu_is_a_device():
    cpu = mc.measure_cpu(n=64, length=2**12, repeats=1)
    assert cpu.peak_float64 > 0 and cpu.peak_float32 > 0 and cpu.bandwidth > 0
    assert mc.machine_balance(cpu, "float64") > 0
    with pytest.raises(AttnInputError, match="bfloat16"):
        cpu.peak("bfloat16")


def test_measure_cpu_refuses_before_allocating_or_running_for_hours():
    with pytest.raises(AttnInputError, match=r"\bn is too large"):
        mc.measure_cpu(n=10**6)
    with pytest.raises(AttnInputError, match=r"\blength is too large"):
        mc.measure_cpu(length=10**12)
    with pytest.raises(AttnInputError, match="repeats must be an integer <="):
        mc.measure_cpu(repeats=10**400)


def test_balance_and_rates_refuse_instead_of_dividing_by_zero_or_overflowing():
    with pytest.raises(AttnInputError, match=r"bandwidth = \S+ bytes/s rounds to 0 words"):
        mc.machine_balance(_device(bandwidth=5e-324), "bfloat16")
    with pytest.raises(
        AttnInputError, match=r"peak_bfloat16 / bandwidth .* beyond the float range"
    ):
        mc.machine_balance(_device(bandwidth=1e-300, peak_bfloat16=1e300), "bfloat16")
    with pytest.raises(AttnInputError, match=r"beyond the float range, got 0 flops per word"):
        mc.machine_balance(_device(bandwidth=1e300, peak_bfloat16=1e-300), "bfloat16")
    assert mc.machine_balance(_device(bandwidth=1e100, peak_bfloat16=1e-100), "bfloat16") == 2e-200


def test_memory_sizes_of_no_whole_word_are_refused():
    tiny = _device(smem_bytes=1, regs_bytes=1, llc_bytes=1)
    with pytest.raises(AttnInputError, match="smem_bytes \\+ regs_bytes hold no whole word"):
        tiny.onchip_words("float64")
    with pytest.raises(AttnInputError, match="llc_bytes hold no whole word"):
        tiny.llc_words("float64")
    assert tiny.onchip_words("bfloat16") == 1


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: mc.machine_balance("H100", "bfloat16"), "device"),
        (lambda: mc.machine_balance(mc.H100_SXM5, "fp8"), "dtype"),
        (lambda: mc.check_device(_device(sms=None), sms=True), "device must be a Device with"),
        (lambda: _device(name=""), "name"),
        (lambda: _device(bandwidth=-1.0), "bandwidth"),
        (lambda: _device(sms=0), "sms"),
        (lambda: _device(peak_bfloat16=0.0), "peak_bfloat16"),
        (lambda: _device(peak_float32=math.nan), "peak_float32"),
        (lambda: _device(source=3), "source"),
    ],
)
def test_bad_device_arguments(call, pattern):
    with pytest.raises(AttnInputError, match=pattern):
        call()


# ---- the cost model's machines ----


def test_machine_of_a_gpu_preset_is_one_sm_its_balance_and_its_memory():
    for device in mc.GPUS:
        for dtype in ("bfloat16", "float32"):
            kw = mc.machine(device, dtype)
            word = mc.WORD_BYTES[dtype]
            assert kw["M"] == (device.smem_bytes + device.regs_bytes) // word
            assert kw["flops_per_word"] == device.peak(dtype) / (device.bandwidth / word)
            assert kw["slow_memory"] == device.memory_bytes // word
    h100 = mc.machine(mc.H100_SXM5, "bfloat16")
    assert h100["M"] == (228 + 256) * 1024 // 2
    assert h100["flops_per_word"] == 989.4e12 / (3.35e12 / 2)
    assert h100["slow_memory"] == 80 * 2**30 // 2


def _committed_folder(tmp_path, **rates):
    """A benchmarks/results folder holding the committed schema and a chapters_machine.csv of
    ``rates`` (keys without the ``rates_`` prefix)."""
    folder = tmp_path / "benchmarks" / "results"
    folder.mkdir(parents=True)
    real = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "schema.json"
    (folder / "schema.json").write_text(real.read_text())
    lines = ["key,value"] + [f"rates_{k},{v}" for k, v in rates.items()]
    (folder / "chapters_machine.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_book_cpu_core_is_built_from_the_committed_rates(tmp_path):
    start = _committed_folder(
        tmp_path,
        blas_threads=1,
        flops_per_s="4e+10",
        words_per_s="2.5e+09",
        l2_bytes=2**20,
        memory_bytes=3 * 2**33,
        date="2026-01-01",
    )
    core = mc.book_cpu_core(start=start)
    assert (core.cache_bytes, core.flops_per_word, core.memory_bytes) == (2**20, 16.0, 3 * 2**33)
    kw = mc.machine(core, "float64")
    assert kw == {"M": 2**17, "flops_per_word": 16.0, "slow_memory": 3 * 2**30, "dtype": "float64"}
    a = advise(4096, 64, 1.0, 1e-3, **kw)
    assert (a.M, a.flops_per_word, a.slow_memory, a.dtype) == (2**17, 16.0, 3 * 2**30, "float64")
    assert decision_map([64, 2**20], [0.05, 2.0], d=32, eps=1e-3, **kw).shape == (2, 2)


def test_book_cpu_core_refuses_results_without_a_one_thread_rates_run(tmp_path):
    start = _committed_folder(tmp_path / "a", blas_threads=1, flops_per_s="4e+10")
    with pytest.raises(AttnInputError, match="no one-thread rates run"):
        mc.book_cpu_core(start=start)
    start = _committed_folder(
        tmp_path / "b", blas_threads=2, flops_per_s=1, words_per_s=1, l2_bytes=8, memory_bytes=8
    )
    with pytest.raises(AttnInputError, match="no one-thread rates run"):
        mc.book_cpu_core(start=start)
    with pytest.raises(AttnInputError, match="start"):
        mc.book_cpu_core(start=tmp_path / "a" / "nowhere")


def test_the_committed_cpu_core_is_no_larger_than_its_machine():
    """The map's slow memory is the benchmark machine's memory, not a default larger than it."""
    core = mc.book_cpu_core()
    rows = {r["key"]: r["value"] for r in read_committed("chapters_machine.csv")}
    assert core.memory_bytes == int(rows["rates_memory_bytes"])
    gib = float(rows["memory"].split()[0])  # the machine probe's "23.5 GiB"
    assert abs(core.memory_bytes / 2**30 - gib) < 0.1
    assert mc.machine(core, "float64")["slow_memory"] * 8 <= core.memory_bytes


def test_book_machines_are_the_two_presets_by_their_printed_names():
    assert mc.book_machines() == {
        "H100 SM, float32": mc.machine(mc.H100_SXM5, "float32"),
        "CPU core, float64": mc.machine(mc.book_cpu_core(), "float64"),
    }


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: mc.machine("H100", "bfloat16"), "device"),
        (lambda: mc.machine(mc.H100_SXM5, "fp8"), "dtype"),
        (lambda: mc.machine(mc.H100_SXM5, "bf16"), "dtype"),
        (lambda: mc.machine(mc.CpuCore("x", 2**20, 16.0, 2**30), "float32"), "dtype"),
        (
            lambda: mc.machine(
                mc.Device("x", 1e9, None, 1e9, smem_bytes=1, regs_bytes=1), "float32"
            ),
            "memory_bytes",
        ),
        (lambda: mc.machine(mc.Device("x", 1e9, None, 1e9, memory_bytes=8), "float32"), "shared"),
        (lambda: mc.machine(mc.H100_SXM5, "float64"), "float64"),
        (lambda: mc.CpuCore("", 1, 1.0, 1), "name"),
        (lambda: mc.CpuCore("x", 0, 1.0, 1), "cache_bytes"),
        (lambda: mc.CpuCore("x", 1, -1.0, 1), "flops_per_word"),
        (lambda: mc.CpuCore("x", 1, 1.0, 2.5), "memory_bytes"),
        (lambda: mc.CpuCore("x", 1, 1.0, 1, source=3), "source"),
    ],
)
def test_machine_bad_input(call, match):
    with pytest.raises(AttnInputError, match=match):
        call()


def test_machine_presets_refuse_memories_of_no_whole_word():
    with pytest.raises(AttnInputError, match="memory_bytes hold no whole word of float64"):
        mc.machine(_device(memory_bytes=1, peak_float64=1e12), "float64")
    with pytest.raises(AttnInputError, match="cache_bytes hold no whole word of float64"):
        mc.machine(mc.CpuCore("core", 7, 32.0, 2**30), "float64")
