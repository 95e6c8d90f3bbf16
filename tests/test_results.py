"""The committed benchmark results as the chapters read them (attnlib.results): the folder is
found from a chapter's working directory, the chapters' timings are complete and parse by their
schema, one series is picked by name, and the machine is described from its own file."""

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from attnlib import AttnInputError
from attnlib import results as res
from attnlib.measure import loglog_slope

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def timings():
    return res.read_benchmark_csv(RESULTS / "chapters_time.csv")


@pytest.fixture(scope="module")
def machine():
    return res.read_benchmark_csv(RESULTS / "chapters_machine.csv")


def test_the_folder_is_found_from_the_root_from_book_and_from_below(tmp_path):
    assert res._results_folder(ROOT) == RESULTS
    assert res._results_folder(ROOT / "book") == RESULTS
    assert res._results_folder(str(ROOT / "book" / "_ext")) == RESULTS
    # an unzipped notebooks.zip: notebooks/ next to benchmarks/results/
    (tmp_path / "notebooks").mkdir()
    (tmp_path / res._RESULTS_PATH).mkdir(parents=True)
    shutil.copy(RESULTS / "schema.json", tmp_path / res._RESULTS_PATH)
    assert res._results_folder(tmp_path / "notebooks") == tmp_path / res._RESULTS_PATH


def test_no_folder_above_is_refused_with_what_to_do(tmp_path):
    with pytest.raises(AttnInputError, match=r"start: no folder .* notebooks\.zip"):
        res._results_folder(tmp_path)
    with pytest.raises(AttnInputError, match="start must be a path"):
        res._results_folder(3)


def test_read_committed_reads_by_name_only(monkeypatch):
    monkeypatch.chdir(ROOT / "book")
    assert res.read_committed("chapters_time.csv") == res.read_benchmark_csv(
        RESULTS / "chapters_time.csv"
    )
    for bad in ("", "../results/chapters_time.csv", None):
        with pytest.raises(AttnInputError, match="name must be"):
            res.read_committed(bad)
    with pytest.raises(AttnInputError, match="path must be a benchmark CSV"):
        res.read_committed("missing.csv")
    with pytest.raises(AttnInputError, match="one of the files"):
        res.read_committed("attention.png")  # committed, but not a table of the schema


def test_every_chapter_experiment_is_committed_with_its_machine(timings, machine):
    info = {r["key"]: r["value"] for r in machine}
    for experiment in ("exact-step", "loss-grad", "ov", "attention-step", "rates"):
        assert info[f"{experiment}_blas_threads"] == "1", experiment
        assert info[f"{experiment}_numba_threads"] == "1", experiment
        assert experiment == "rates" or any(r["experiment"] == experiment for r in timings)
    assert all(r["status"] == "ok" and r["clock"] == "cpu" for r in timings)
    assert all(0 < r["min_s"] <= r["median_s"] <= r["max_s"] for r in timings)
    assert all(r["rounds"] >= 3 and r["repeats"] >= 1 for r in timings)
    assert float(info["rates_flops_per_s"]) > float(info["rates_words_per_s"]) > 0


def test_a_series_is_sorted_by_n_and_picked_by_its_columns(timings):
    for d in (4, 6, 8):
        ns, seconds = res.timing_series(timings, "loss-grad", "approx", d=d)
        assert ns.dtype == np.int64 and list(ns) == sorted(ns) and ns[0] == 64
        assert seconds.shape == ns.shape and (seconds > 0).all()
    # loss-grad holds three dimensions: without d the series is ambiguous
    with pytest.raises(AttnInputError, match="several rows at one n"):
        res.timing_series(timings, "loss-grad", "approx")
    with pytest.raises(AttnInputError, match="no measured row has .*method='numpy'"):
        res.timing_series(timings, "loss-grad", "numpy", d=4)
    with pytest.raises(AttnInputError, match=r"where: \['heads'\] are not columns"):
        res.timing_series(timings, "ov", "brute-force", heads=2)
    with pytest.raises(AttnInputError, match="rows must be"):
        res.timing_series("rows", "ov", "brute-force")
    with pytest.raises(AttnInputError, match="method must be a string"):
        res.timing_series(timings, "ov", None)


def test_a_series_is_the_rows_as_written():
    rows = [
        {"experiment": "ov", "method": "brute-force", "n": n, "d": 128, "status": s}
        | {"min_s": t, "median_s": t and 2 * t, "max_s": t and 3 * t}
        for n, s, t in ((4096, "ok", 16.0), (1024, "ok", 1.0), (2048, "failed", None))
    ]
    ns, seconds = res.timing_series(rows, "ov", "brute-force")
    assert ns.tolist() == [1024, 4096] and seconds.tolist() == [1.0, 16.0]
    assert loglog_slope(ns, seconds) == pytest.approx(2.0)
    for statistic, factor in (("min", 1), ("median", 2), ("max", 3)):
        _, chosen = res.timing_series(rows, "ov", "brute-force", statistic=statistic)
        assert chosen.tolist() == [factor * 1.0, factor * 16.0]
    with pytest.raises(AttnInputError, match="statistic"):
        res.timing_series(rows, "ov", "brute-force", statistic="mean")


def test_the_machine_summary_names_the_machine_and_the_run(machine):
    info = {r["key"]: r["value"] for r in machine}
    text = res.machine_summary(machine, "loss-grad")
    for key in ("cpu", "cpu_vector_isa", "loss-grad_date", "loss-grad_blas_kernel"):
        assert info[key] in text
    assert "1 BLAS and 1 numba thread(s)" in text
    # the BLAS of attnlib's tiles is named when the run recorded it, and only then
    tiles = [*machine, {"key": "loss-grad_tiles_blas_library", "value": "openblas 9.9"}]
    assert "openblas 9.9 for attnlib's tiles" in res.machine_summary(tiles, "loss-grad")
    unloaded = [*machine, {"key": "loss-grad_tiles_blas_library", "value": "not loaded"}]
    assert "attnlib's tiles" not in res.machine_summary(unloaded, "loss-grad")
    with pytest.raises(AttnInputError, match="describe no run of 'chapter-11'"):
        res.machine_summary(machine, "chapter-11")
    with pytest.raises(AttnInputError, match="key/value rows"):
        res.machine_summary([{"cpu": "x"}], "ov")


def test_committed_schema_lists_the_chapters_files():
    schema = json.loads((RESULTS / "schema.json").read_text())
    assert {"chapters_time.csv", "chapters_machine.csv"} <= set(schema)
    assert schema["chapters_time.csv"]["median_s"] == "float"


def test_committed_schema_is_the_generated_one(tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.schema import write_schema
    finally:
        sys.path.remove(str(ROOT))
    written = write_schema(tmp_path)
    assert json.loads(written.read_text()) == json.loads((RESULTS / "schema.json").read_text())


def test_columns_are_parsed_by_their_schema_type(benchmark_rows):
    time_rows, memory_rows, machine = benchmark_rows
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
        res.read_benchmark_csv(path)
    path.write_text("impl,n\nflash,sixty-four\n")
    with pytest.raises(AttnInputError, match=r"line 2: a value is not its type"):
        res.read_benchmark_csv(path)
    other = tmp_path / "other.csv"
    other.write_text("impl\nflash\n")
    with pytest.raises(AttnInputError, match=r"path must be one of the files"):
        res.read_benchmark_csv(other)
    (tmp_path / "schema.json").unlink()
    with pytest.raises(AttnInputError, match=r"schema\.json next to it"):
        res.read_benchmark_csv(path)


def test_the_blas_probe_tells_numpys_library_from_the_one_the_tiles_call():
    # numpy's and SciPy's wheels each ship an OpenBLAS, and attnlib loads SciPy's for its
    # tiles: the probe must name each by its own build, whatever order they were loaded in
    scipy = pytest.importorskip("scipy")
    import attnlib  # noqa: F401  (loads SciPy's BLAS)
    from benchmarks.machine import blas_info

    def built_with(package):
        blas = package.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"openblas {blas['version']}" if "openblas" in blas["name"] else None

    info = blas_info()
    if built_with(np) is None or built_with(scipy) is None:
        pytest.skip("numpy or SciPy is not built with OpenBLAS here")
    assert info["blas_library"] == built_with(np)
    assert info["tiles_blas_library"] == built_with(scipy)
    assert info["blas_libraries_loaded"] == "2" or built_with(np) == built_with(scipy)
