"""Chapter 10's benchmark results and figures: the CSVs are read by the types their schema
names, rows are looked up by name, and the builders draw them or refuse bad input."""

import json
import shutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from attnlib import AttnInputError  # noqa: E402
from attnlib.plots import performance as perf  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def rows():
    return tuple(
        perf.read_benchmark_csv(RESULTS / name)
        for name in ("attention_time.csv", "attention_memory.csv", "machine.csv")
    )


def test_committed_schema_is_the_generated_one(tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.schema import write_schema
    finally:
        sys.path.remove(str(ROOT))
    written = write_schema(tmp_path)
    assert json.loads(written.read_text()) == json.loads((RESULTS / "schema.json").read_text())


def test_columns_are_parsed_by_their_schema_type(rows):
    time_rows, memory_rows, machine = rows
    ok = [r for r in time_rows if r["status"] == "ok"]
    assert ok and all(isinstance(r["n"], int) and isinstance(r["median_s"], float) for r in ok)
    skipped = [r for r in time_rows if r["status"] != "ok"]
    assert skipped and all(r["median_s"] is None for r in skipped)
    flags = {r["rss_extra_is_upper_bound"] for r in memory_rows if r["status"] == "ok"}
    assert flags <= {True, False} and flags
    assert all(isinstance(r["value"], str) for r in machine)


def test_unknown_columns_bad_values_and_missing_schemas_are_refused(tmp_path):
    shutil.copy(RESULTS / "schema.json", tmp_path)
    path = tmp_path / "attention_time.csv"
    path.write_text("impl,dtype,n,speed\nflash,float32,64,1.0\n")
    with pytest.raises(AttnInputError, match=r"columns not in .*schema\.json: \['speed'\]"):
        perf.read_benchmark_csv(path)
    path.write_text("impl,n\nflash,sixty-four\n")
    with pytest.raises(AttnInputError, match=r"line 2: a value is not its type"):
        perf.read_benchmark_csv(path)
    other = tmp_path / "other.csv"
    other.write_text("impl\nflash\n")
    with pytest.raises(AttnInputError, match=r"path must be one of the files"):
        perf.read_benchmark_csv(other)
    (tmp_path / "schema.json").unlink()
    with pytest.raises(AttnInputError, match=r"schema\.json next to it"):
        perf.read_benchmark_csv(path)


def test_lookups_by_name(rows):
    time_rows = rows[0]
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
        (lambda: perf.flash_vs_torch({"impl": "flash"}), r"rows must be a list of rows"),
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
    plt.close(fig)


def test_builders_draw_labelled_figures_and_refuse_bad_input(rows):
    time_rows, memory_rows, _ = rows
    for fig in (
        perf.benchmark_figure(time_rows, memory_rows, takeaway="one line"),
        perf.benchmark_ratio_figure(time_rows),
        perf.exact_over_tiled_figure([512, 1024], [9.0, 17.0], [1.2, 1.5], [0.99, 0.99], d=64),
    ):
        for ax in fig.axes:
            assert ax.get_xlabel() and ax.get_legend() is not None
        plt.close(fig)
    for call, message in [
        (lambda: perf.benchmark_figure(time_rows, None), r"memory_rows must be a list"),
        (lambda: perf.benchmark_figure(time_rows, memory_rows, dtype="f16"), r"dtype must be"),
        (lambda: perf.benchmark_ratio_figure("rows"), r"rows must be a list"),
        (lambda: perf.exact_over_tiled_figure([1, 2], [1.0], [1, 1], [1, 1], d=8), r"io_ratio"),
        (lambda: perf.exact_over_tiled_figure([1, 2], [1, 1], [1, -1], [1, 1], d=8), r"time_ratio"),
        (lambda: perf.exact_over_tiled_figure([1, 2], [1, 1], [1, 1], [1, 1], d=0), r"d must be"),
    ]:
        with pytest.raises(AttnInputError, match=message):
            call()
    plt.close("all")
