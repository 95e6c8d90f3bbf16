"""Chapter 10's benchmark figures (attnlib.plots.performance): rows of the committed results
are looked up by name, multi-head shapes are compared with the faster PyTorch backend, and the
builders draw labelled figures or refuse bad input."""

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from attnlib import AttnInputError
from attnlib.plots import performance as perf

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def test_lookups_by_name(benchmark_rows):
    time_rows = benchmark_rows[0]
    flash = perf.median_seconds(time_rows, "flash", "float32", 4096, 64, 1)
    assert flash > 0
    assert perf.median_seconds(time_rows, "flash", "float32", 4096, 64, 1, "fwd") is None
    torch = perf.torch_seconds(time_rows, "float32", 4096, 64, 1)
    peers = [perf.median_seconds(time_rows, p, "float32", 4096, 64, 1) for p in perf._TORCH]
    assert torch == min(p for p in peers if p)
    table = perf.flash_vs_torch(time_rows)
    assert ("float32", 4096, 64, 1, flash, torch, flash / torch) in table
    assert table == sorted(table, key=lambda row: (row[0], row[2], row[3], row[1]))
    for call, message in [
        (lambda: perf.median_seconds(time_rows, "jax", "float32", 64, 64, 1), r"impl must be"),
        (lambda: perf.median_seconds(time_rows, "flash", "float32", 0, 64, 1), r"n must be"),
        (
            lambda: perf.flash_vs_torch({"impl": "flash"}),
            r"rows must be a sequence of rows \(dicts\)",
        ),
    ]:
        with pytest.raises(AttnInputError, match=message):
            call()


def test_multi_head_shapes_against_the_faster_torch_backend():
    heads_rows = perf.read_benchmark_csv(RESULTS / "attention_heads.csv")
    table = perf.heads_vs_torch(heads_rows)
    assert len({row[0] for row in table}) == 4  # every multi-head shape of the benchmark
    assert {(row[1], row[2]) for row in table} == {
        (dtype, threads) for dtype in ("float32", "float64") for threads in (1, 2)
    }
    for label, dtype, threads, ours, theirs, ratio in table:
        same = [
            r
            for r in heads_rows
            if r["status"] == "ok" and (r["dtype"], r["threads"]) == (dtype, threads)
            if perf._heads_label(r) == label
        ]
        assert ours == next(r["median_s"] for r in same if r["impl"] == "flash")
        assert theirs == min(r["median_s"] for r in same if r["impl"] in perf._TORCH)
        assert ratio == ours / theirs
    fig = perf.benchmark_heads_figure(heads_rows, takeaway="one line")
    (ax,) = fig.axes
    assert ax.get_xlabel() and ax.get_legend() is not None
    assert len(ax.patches) == len(table)


def test_builders_draw_labelled_figures_and_refuse_bad_input(benchmark_rows):
    time_rows, memory_rows, _ = benchmark_rows
    for fig in (
        perf.benchmark_figure(time_rows, memory_rows, takeaway="one line"),
        perf.benchmark_ratio_figure(time_rows),
        perf.exact_over_tiled_figure([512, 1024], [9.0, 17.0], [1.2, 1.5], [0.99, 0.99], d=64),
    ):
        for ax in fig.axes:
            assert ax.get_xlabel() and ax.get_legend() is not None
        plt.close(fig)
    for call, message in [
        (lambda: perf.benchmark_figure(time_rows, None), r"memory_rows must be a sequence of rows"),
        (lambda: perf.benchmark_figure(time_rows, memory_rows, dtype="f16"), r"dtype must be"),
        (lambda: perf.benchmark_ratio_figure("rows"), r"rows must be a sequence of rows"),
        (lambda: perf.exact_over_tiled_figure([1, 2], [1.0], [1, 1], [1, 1], d=8), r"io_ratio"),
        (lambda: perf.exact_over_tiled_figure([1, 2], [1, 1], [1, -1], [1, 1], d=8), r"time_ratio"),
        (lambda: perf.exact_over_tiled_figure([1, 2], [1, 1], [1, 1], [1, 1], d=0), r"d must be"),
    ]:
        with pytest.raises(AttnInputError, match=message):
            call()
