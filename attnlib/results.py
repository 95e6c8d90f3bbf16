"""The committed results of the book's benchmark (``make bench``), as the chapters read them.

How fast a cell runs depends on the reader's machine and on whatever else that machine is
doing, so no chapter asserts a live timing. What a chapter says about speed (a fitted slope, a
crossover, which method is faster at which n) is asserted instead against results that
``make bench`` measured once, on one machine, and that the repository commits in
``benchmarks/results/``: CSV files whose columns and types ``schema.json`` names, next to
``machine.csv`` and ``chapters_machine.csv``, which say what machine and what run they came
from. (A chapter still times the same calls live and shows the result as "on your machine".)

:func:`read_committed` finds that folder from a chapter's working directory (or from the
unzipped notebooks of the book's downloads) and reads a file of it by its schema
(:func:`read_benchmark_csv`); :func:`timing_series` picks one series of
``chapters_time.csv`` and :func:`machine_summary` says in one line where and how it was
measured.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ._checks import AttnInputError, as_entries, check_choice

__all__ = [
    "read_benchmark_csv",
    "read_committed",
    "timing_series",
    "machine_summary",
]

#: Where ``make bench`` writes its results, relative to the repository root.
_RESULTS_PATH = Path("benchmarks") / "results"

_PARSERS = {
    "str": str,
    "int": int,
    "float": float,
    "bool": lambda v: {"True": True, "False": False}[v],
}


def _results_folder(start=None) -> Path:
    """The folder of committed results, ``benchmarks/results``, in ``start`` (default: the
    working directory) or the nearest folder above it that has one: a chapter runs with
    ``book/`` (or, unzipped from the book's downloads, ``notebooks/``) as its working directory.

    Raises
    ------
    AttnInputError
        if ``start`` is not a path, or neither it nor a folder above it holds
        ``benchmarks/results/schema.json``.
    """
    if start is None:
        start = Path.cwd()
    if not isinstance(start, (str, Path)):
        raise AttnInputError(f"start must be a path, got {type(start).__name__}")
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / _RESULTS_PATH / "schema.json").is_file():
            return folder / _RESULTS_PATH
    raise AttnInputError(
        f"start: no folder from {start} upwards holds the committed benchmark results "
        f"({_RESULTS_PATH}/schema.json); run the chapter from the repository or from the "
        "unzipped notebooks.zip of the book's downloads, which carries them"
    )


def read_benchmark_csv(path) -> list[dict]:
    """The rows of a CSV file written by ``make bench`` (``python -m benchmarks.attention``
    or ``python -m benchmarks.chapters``), as dicts.

    Each column is parsed by the type that ``schema.json``, in the same folder, names for it
    (str, int, float or bool); an empty cell is None.

    Raises
    ------
    AttnInputError
        if the file or its schema is missing, the schema does not list the file, a column is
        not in the schema, or a value does not parse as its column's type.
    """
    path = Path(path)
    schema_path = path.parent / "schema.json"
    if not path.is_file() or not schema_path.is_file():
        raise AttnInputError(f"path must be a benchmark CSV with schema.json next to it: {path}")
    schema = json.loads(schema_path.read_text())
    if path.name not in schema:
        raise AttnInputError(f"path must be one of the files of {schema_path}, got {path.name}")
    types = schema[path.name]
    rows = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        unknown = [c for c in reader.fieldnames or [] if c not in types]
        if unknown:
            raise AttnInputError(f"{path.name} has columns not in {schema_path}: {unknown}")
        for line, row in enumerate(reader, start=2):
            try:
                rows.append({k: None if v == "" else _PARSERS[types[k]](v) for k, v in row.items()})
            except (KeyError, ValueError) as exc:
                raise AttnInputError(f"{path.name}, line {line}: a value is not its type") from exc
    return rows


def read_committed(name: str, *, start=None) -> list[dict]:
    """The rows of the committed results file ``name`` (``"chapters_time.csv"``, say):
    :func:`read_benchmark_csv` of it in ``benchmarks/results``, found in ``start`` (default:
    the working directory) or the nearest folder above it that has one: a chapter runs with
    ``book/`` (or, unzipped from the book's downloads, ``notebooks/``) as its working
    directory.

    Raises
    ------
    AttnInputError
        if ``name`` is not a bare file name, ``start`` is not a path, neither it nor a folder
        above it holds ``benchmarks/results/schema.json``, or as :func:`read_benchmark_csv`.
    """
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise AttnInputError(f"name must be the name of a file of {_RESULTS_PATH}, got {name!r}")
    return read_benchmark_csv(_results_folder(start) / name)


#: What the row arguments hold (for the messages that refuse them).
_ROWS = "rows (dicts) of read_benchmark_csv"


#: The statistics over the rounds of a timing that ``chapters_time.csv`` records.
_STATISTICS = ("min", "median", "max")


def timing_series(
    rows, experiment: str, method: str, *, statistic: str = "min", **where
) -> tuple[np.ndarray, np.ndarray]:
    """``(n, seconds)`` of one series of ``chapters_time.csv``: the measured rows (status
    "ok") of ``experiment`` and ``method`` whose other columns equal ``where`` (``d=8``, say),
    sorted by n, as an int array and a float array. The seconds are the fastest round by
    default (``statistic="min"``: other jobs on the machine only ever add time), or the
    ``"median"`` or the ``"max"`` over the rounds.

    Raises
    ------
    AttnInputError
        if ``rows`` is not a list of dicts, ``experiment`` or ``method`` is not a string,
        ``statistic`` is not "min", "median" or "max", a key of ``where`` is not a column, no
        row matches, or two matching rows have the same n (``where`` does not pick one series).

    Examples
    --------
    >>> rows = [{"experiment": "ov", "method": "brute-force", "n": n, "d": 128, "status": "ok",
    ...          "min_s": n * n * 1e-9, "median_s": n * n * 2e-9} for n in (2048, 1024)]
    >>> ns, seconds = timing_series(rows, "ov", "brute-force", d=128)
    >>> ns.tolist(), seconds.tolist()
    ([1024, 2048], [0.001048576, 0.004194304])
    >>> timing_series(rows, "ov", "brute-force", statistic="median")[1].tolist()
    [0.002097152, 0.008388608]
    """
    rows = as_entries("rows", rows, of=_ROWS, entry_type=dict)
    for name, value in (("experiment", experiment), ("method", method)):
        if not isinstance(value, str):
            raise AttnInputError(f"{name} must be a string, got {type(value).__name__}")
    column = f"{check_choice('statistic', statistic, _STATISTICS)}_s"
    columns = set().union(*(r.keys() for r in rows)) if rows else set()
    unknown = sorted(set(where) - columns)
    if unknown:
        raise AttnInputError(f"where: {unknown} are not columns of the rows ({sorted(columns)})")
    picked = sorted(
        (r["n"], r[column])
        for r in rows
        if r.get("experiment") == experiment
        and r.get("method") == method
        and r.get("status") == "ok"
        and all(r.get(k) == v for k, v in where.items())
        and r.get(column) is not None
    )
    selection = ", ".join([f"experiment={experiment!r}", f"method={method!r}"])
    selection += "".join(f", {k}={v!r}" for k, v in where.items())
    if not picked:
        raise AttnInputError(f"rows: no measured row has {selection}")
    ns = [n for n, _ in picked]
    if len(set(ns)) != len(ns):
        raise AttnInputError(f"where: {selection} matches several rows at one n; name more columns")
    return np.array(ns, dtype=np.int64), np.array([t for _, t in picked], dtype=np.float64)


def machine_summary(rows, experiment: str) -> str:
    """One line on where and how ``experiment`` of ``chapters_time.csv`` was measured, from
    the rows of ``chapters_machine.csv``: the CPU, its cores and widest vector instructions,
    numpy's BLAS and its kernel (and the BLAS of attnlib's tiles, when the run recorded it),
    the threads the experiment ran with, the command, date and load.

    Raises
    ------
    AttnInputError
        if ``rows`` is not a list of key/value rows, or they do not describe ``experiment``.
    """
    rows = as_entries("rows", rows, of=_ROWS, entry_type=dict)
    try:
        info = {r["key"]: r["value"] for r in rows}
    except KeyError as exc:
        raise AttnInputError("rows must be the key/value rows of chapters_machine.csv") from exc
    if not isinstance(experiment, str) or f"{experiment}_command" not in info:
        raise AttnInputError(f"experiment: the rows describe no run of {experiment!r}")
    get = info.get
    # attnlib's tiles call SciPy's BLAS, a build of its own: named when the run recorded it
    tiles = get(f"{experiment}_tiles_blas_library", "not loaded")
    tiles = "" if tiles == "not loaded" else f" and {tiles} for attnlib's tiles"
    return (
        f"{get('cpu', '?')} ({get('cpu_vector_isa', '?')}, {get('logical_cores', '?')} logical "
        f"cores), numpy {get('numpy', '?')} with {get(f'{experiment}_blas_library', '?')} "
        f"({get(f'{experiment}_blas_kernel', '?')} kernels){tiles}, "
        f"{get(f'{experiment}_blas_threads', '?')} BLAS and "
        f"{get(f'{experiment}_numba_threads', '?')} numba thread(s); "
        f"`{get(f'{experiment}_command')}` on {get(f'{experiment}_date', '?')}, "
        f"load average {get(f'{experiment}_load1_at_start', '?')} at the start and "
        f"{get(f'{experiment}_load1_at_end', '?')} at the end"
    )
