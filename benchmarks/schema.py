"""The columns of the benchmark's CSV files and their types, defined once.

The benchmark writes its rows with :func:`write_csv` and, next to them, ``schema.json``
(:func:`write_schema`): for each file, its columns in order and each column's type (``str``,
``int``, ``float`` or ``bool``). Readers (:func:`attnlib.plots.read_benchmark_csv`) parse every
column by that type, by name. To regenerate ``schema.json`` for results already written::

    python -m benchmarks.schema [folder]      # default: benchmarks/results
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SCHEMA_FILE = "schema.json"

#: attention_time.csv: one row per (implementation, shape, thread count, pass).
TIME_COLUMNS = {
    "impl": str,  # numpy, flash, torch-math, torch-flash or gemm
    "dtype": str,
    "n": int,
    "d": int,
    "threads": int,
    "pass": str,  # fwd or fwd+bwd
    "status": str,  # ok, or why the row was skipped or failed
    "median_s": float,
    "min_s": float,
    "max_s": float,
    "repeats": int,
    "load1": float,  # the load average when the round-robin started
}

#: attention_heads.csv: one row per (implementation, multi-head shape, thread count, pass):
#: Q and dO of shape (batch, heads, n, d), K and V (batch, kv_heads, n, d).
HEADS_COLUMNS = {
    "impl": str,  # flash, torch-math or torch-flash
    "dtype": str,
    "batch": int,
    "heads": int,
    "kv_heads": int,  # < heads: grouped-query attention, each K/V head shared by heads/kv_heads
    "n": int,
    "d": int,
    "causal": bool,
    "threads": int,
    "pass": str,
    "status": str,
    "median_s": float,
    "min_s": float,
    "max_s": float,
    "repeats": int,
    "load1": float,
}

#: attention_memory.csv: one row per (implementation, n), each from a fresh process.
MEMORY_COLUMNS = {
    "impl": str,
    "dtype": str,
    "n": int,
    "d": int,
    "threads": int,
    "status": str,
    "qkvodo_bytes": int,  # Q, K, V, O and dO together
    "rss_before_bytes": int,
    "rss_peak_bytes": int,
    "rss_extra_bytes": int,  # peak minus before: what one forward+backward added
    "rss_extra_is_upper_bound": bool,  # the run did not raise the process's peak
    "peak_method": str,
    "tracemalloc_peak_bytes": int,
    "extra_over_qkvodo": float,
    "seconds": float,
}

#: machine.csv: what the run ran on and how each part went (key, value).
MACHINE_COLUMNS = {"key": str, "value": str}

#: chapters_time.csv (:mod:`benchmarks.chapters`): one row per (experiment, method, shape),
#: the timings the chapters' statements about speed are asserted against.
CHAPTERS_TIME_COLUMNS = {
    "experiment": str,  # exact-step (Ch. 1), loss-grad (Ch. 7), ov (Ch. 8), attention-step (Ch. 9)
    "method": str,  # exact, flash, approx, brute-force or polynomial
    "dtype": str,
    "n": int,
    "d": int,  # the head dimension; for ov, the vector length m
    "B": float,  # the entry bound of the inputs, where the experiment sets one
    "eps": float,  # the requested accuracy of an approximate method
    "rank": int,  # the approximate method's rank r = C(g + d, d)
    "clock": str,  # cpu: the process's CPU time (one thread); wall: elapsed time
    "threads": int,
    "status": str,  # ok, or why the row was not measured
    "median_s": float,  # the median over the rounds of the round-robin
    "min_s": float,  # the fastest round: what the chapters assert on
    "max_s": float,  # the slowest round
    "rounds": int,
    "repeats": int,  # back-to-back calls per timing (each lasting at least 0.02 s; ov 0.2 s)
    "load1": float,  # the load average when the experiment's round-robin started
}

TABLES = {
    "attention_time.csv": TIME_COLUMNS,
    "attention_heads.csv": HEADS_COLUMNS,
    "attention_memory.csv": MEMORY_COLUMNS,
    "machine.csv": MACHINE_COLUMNS,
    "chapters_time.csv": CHAPTERS_TIME_COLUMNS,
    "chapters_machine.csv": MACHINE_COLUMNS,  # the machine of chapters_time.csv
}


def write_schema(folder: Path) -> Path:
    """Write ``schema.json`` to ``folder``: {file: {column: type name}}, columns in order."""
    schema = {name: {c: t.__name__ for c, t in cols.items()} for name, cols in TABLES.items()}
    path = Path(folder) / SCHEMA_FILE
    path.write_text(json.dumps(schema, indent=1) + "\n")
    return path


def write_csv(path: Path, rows: list[dict]) -> None:
    """Write ``rows`` (dicts) to ``path``, one of :data:`TABLES`, with its columns in order;
    a missing value is an empty cell, and keys outside the schema are left out."""
    columns = list(TABLES[Path(path).name])
    with Path(path).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({c: row.get(c, "") for c in columns})


if __name__ == "__main__":
    print(write_schema(Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS))
