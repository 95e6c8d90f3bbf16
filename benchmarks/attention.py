"""Speed and memory of attention forward and backward: attnlib against numpy and PyTorch.

Run from the repository root::

    python -m benchmarks.attention            # the standard grid (make bench)
    python -m benchmarks.attention --full     # also numpy at every d, and the forward alone
    python -m benchmarks.attention --quick    # a smoke run, written to a temp folder

The standard grid is every dtype (float32, float64), d in {32, 64, 128} and n in {512, ...,
16384}, with 1 thread and with all cores; then the multi-head shapes of :data:`HEAD_SHAPES`
(batched heads, causal masks, grouped-query and multi-query attention) at the same dtypes and
thread counts. machine.csv records each part's minutes and load.

What is measured, for Q, K, V, dO of shape (n, d) (one attention head, batch 1), or, for the
multi-head shapes, Q and dO of shape (batch, heads, n, d) and K, V of (batch, kv_heads, n, d)
(attnlib with ``enable_gqa`` and ``is_causal`` as PyTorch's SDPA takes them):

- ``numpy``: :func:`attnlib.attention_forward` / :func:`attnlib.attention_backward`, which
  materialise the n×n score matrix;
- ``flash``: :func:`attnlib.flash_forward` / :func:`attnlib.flash_backward` (numba, tiled);
- ``torch-math`` and ``torch-flash``: PyTorch's ``scaled_dot_product_attention`` on the CPU with
  the math backend and the flash backend, backward by autograd -- when torch is installed. The
  script says so plainly when it is not, and skips those rows. "PyTorch" in the summary is the
  faster of the two on each shape.
- ``gemm`` (at n = 4096): one BLAS gemm (numpy's) of (n × 7d)·(7d × n), which does the same
  14·n²·d flops as the matrix products of forward + backward (:func:`attnlib.costs.flop_count`)
  at the machine's full matmul rate: the "matmul limit", timed in the same round-robin.

Times are medians over repeats after two untimed calls (the first call of the numba kernels
compiles them; that is measured separately, in a fresh cache, and kept out of every timing);
the second call's time sets the number of repeats, between ``--min-reps`` and ``--max-reps``,
to fit ``--budget`` seconds.
The implementations are timed round-robin in one process, so a ratio compares runs made under
the same machine load. Each thread setting (1, and all cores) runs in its own process with
OMP/OpenBLAS/MKL/numba thread counts set before any import, and with OpenBLAS's threads set to
sleep as soon as a call ends (``OPENBLAS_THREAD_TIMEOUT``): otherwise they spin on, taking a
core from whatever runs next in the round-robin.

Peak memory is measured in a fresh subprocess per configuration: the peak resident size during
one forward+backward (Linux's VmHWM, reset just before the run; ``ru_maxrss`` where /proc is
missing, which Linux carries over from the parent process, so it can only over-estimate) minus
the resident size just before it (inputs allocated, kernels loaded, BLAS buffers warmed up), and
tracemalloc's peak (which sees numpy's and numba's allocations but not torch's).

Results go to ``benchmarks/results/``: ``attention_time.csv``, ``attention_heads.csv`` (the
multi-head shapes), ``attention_memory.csv``,
``machine.csv`` (their columns and types in ``schema.json``, see :mod:`benchmarks.schema`),
``attention.png`` (d = 64: time, ratios, memory) and ``attention_ratio.png`` (flash_* ÷ the
faster PyTorch backend on every shape). The workers are in :mod:`benchmarks.workers`, the
machine probes in :mod:`benchmarks.machine`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .machine import machine_info
from .schema import RESULTS, write_csv, write_schema
from .workers import IMPLS, MAX_N_MATERIALISED, TORCH_IMPLS, add_openblas_argument

THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
# After each call, OpenBLAS's worker threads spin for 2^28 cycles (its default) before they
# sleep. In the round-robin, numpy's exact path and the gemm (numpy's OpenBLAS, all threads)
# come right before flash_*, whose threads then share the cores with a spinning one and time
# the spinning too. 2^4 cycles puts them to sleep at once, and leaves numpy's own gemm as
# fast as it was (both measured in this benchmark's round-robin when the value was chosen).
OPENBLAS_THREAD_TIMEOUT = "4"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smoke run: n <= 4096, d = 64")
    size.add_argument(
        "--full",
        action="store_true",
        help="also the exact numpy path at every d, and the forward pass alone",
    )
    p.add_argument("--forward", action="store_true", help="also time the forward pass alone")
    p.add_argument("--max-n", type=int, default=16384, help="largest n in the time sweep")
    p.add_argument("--max-n-memory", type=int, default=65536, help="largest n, memory run")
    p.add_argument("--dims", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--threads", type=int, nargs="+", default=None, help="default: 1 and all")
    p.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    p.add_argument("--budget", type=float, default=2.0, help="seconds per measurement")
    p.add_argument("--min-reps", type=int, default=3)
    p.add_argument("--max-reps", type=int, default=9)
    p.add_argument("--max-n-materialised", type=int, default=MAX_N_MATERIALISED)
    p.add_argument("--no-time", action="store_true", help="skip the single-head time sweep")
    p.add_argument("--no-heads", action="store_true", help="skip the multi-head time sweep")
    p.add_argument("--no-memory", action="store_true", help="skip the memory run")
    p.add_argument("--no-compile", action="store_true", help="skip the compile-time run")
    add_openblas_argument(p)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: benchmarks/results; with --quick, a temporary folder, "
        "so that a smoke run never overwrites the committed results)",
    )
    args = p.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "attnlib_bench_quick" if args.quick else RESULTS
    args.threads = args.threads or sorted({1, os.cpu_count() or 1})
    args.command = " ".join(["python -m benchmarks.attention", *(argv or sys.argv[1:])])
    return args


def time_plan(args) -> list[dict]:
    """(impl-independent) configurations to time: dtype, n, d."""
    if args.quick:
        grid = [(dt, n, 64) for dt in ("float32", "float64") for n in (512, 1024, 2048, 4096)]
    else:
        grid = [
            (dt, n, d)
            for dt in ("float32", "float64")
            for d in (32, 64, 128)
            for n in (512, 1024, 2048, 4096, 8192, 16384)
        ]
    return [
        {"dtype": dt, "n": n, "d": d} for dt, n, d in grid if n <= args.max_n and d in args.dims
    ]


#: The multi-head shapes, as (batch, heads, kv_heads, n, d, causal): a BERT-base layer's
#: attention (12 heads, n = 512), one causal head, a Llama-style grouped-query layer (32
#: query heads over 8 key/value heads, causal) and multi-query attention (one K/V head).
HEAD_SHAPES = (
    (8, 12, 12, 512, 64, False),
    (1, 1, 1, 4096, 64, True),
    (1, 32, 8, 2048, 128, True),
    (2, 16, 1, 1024, 64, True),
)


def heads_plan(args) -> list[dict]:
    """Multi-head configurations to time: every dtype and :data:`HEAD_SHAPES` (--quick: the
    BERT shape only)."""
    shapes = HEAD_SHAPES[:1] if args.quick else HEAD_SHAPES
    return [
        {"dtype": dt, "batch": b, "heads": h, "kv_heads": hk, "n": n, "d": d, "causal": c}
        for dt in ("float32", "float64")
        for b, h, hk, n, d, c in shapes
        if d in args.dims
    ]


def memory_plan(args) -> list[dict]:
    if args.quick:
        ns = (1024, 4096)
    elif args.full:
        ns = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
    else:
        ns = (1024, 4096, 16384, 65536)
    plan = []
    for n in ns:
        if n > args.max_n_memory:
            continue
        for impl in IMPLS:
            if impl == "gemm" or impl in ("numpy", "torch-math") and n > MAX_N_MATERIALISED:
                continue
            plan.append({"impl": impl, "dtype": "float32", "n": n, "d": 64})
    return plan


# ---------------------------------------------------------------------------------------
# Machine and thread information
# ---------------------------------------------------------------------------------------


def child_env(threads: int, args, cache_dir: str | None = None) -> dict:
    env = dict(os.environ)
    for key in THREAD_ENV:
        env[key] = str(threads)
    env["OPENBLAS_THREAD_TIMEOUT"] = OPENBLAS_THREAD_TIMEOUT
    if args.unset_openblas_coretype:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    return env


def run_worker(kind: str, opts: dict, env: dict, timeout: float | None = None) -> list[dict]:
    """The records of one worker process (:mod:`benchmarks.workers`), plus a failure record
    if it failed or timed out."""
    cmd = [sys.executable, "-m", "benchmarks.workers", kind, json.dumps(opts)]
    root = Path(__file__).resolve().parent.parent
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=root, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return [{"kind": kind, **opts, "status": f"failed: timeout after {timeout} s"}]
    out = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no message"]
        out.append({"kind": kind, **opts, "status": f"failed: {tail[0][:200]}"})
        sys.stderr.write(proc.stderr[-2000:])
    return out


def record_part(info: dict, part: str, args, t0: float, load0: float) -> None:
    """Keys of machine.csv that say how and under what load one part of the run went."""
    info[f"{part}_command"] = args.command
    info[f"{part}_date"] = time.strftime("%Y-%m-%d")
    info[f"{part}_minutes"] = f"{(time.time() - t0) / 60:.1f}"
    info[f"{part}_load1_at_start"] = f"{load0:.2f}"
    info[f"{part}_load1_at_end"] = f"{os.getloadavg()[0]:.2f}"


def run_compile(args, info: dict) -> None:
    """First-call times of the compiled kernels, with an empty and then a warm disk cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = child_env(os.cpu_count() or 1, args, cache)
        for cache_state in ("cold", "warm"):
            for r in run_worker("compile", {"cache": cache_state}, env):
                print("compile", r)
                if "forward_cpu_s" in r:
                    key = f"first_call_{cache_state}_cache_{r['dtype']}"
                    info[key + "_wall_s"] = r["forward_wall_s"] + r["backward_wall_s"]
                    info[key + "_cpu_s"] = r["forward_cpu_s"] + r["backward_cpu_s"]


def run_time(args, info: dict) -> list[dict]:
    """The time sweep of single heads: one worker per thread count, each timing the plan."""
    return _timed(args, info, time_plan(args))


def run_heads(args, info: dict) -> list[dict]:
    """The time sweep of multi-head shapes (batched, causal, grouped-query), as run_time."""
    return _timed(args, info, heads_plan(args))


def _timed(args, info: dict, plan: list[dict]) -> list[dict]:
    rows: list[dict] = []
    for threads in args.threads:
        opts = {
            "threads": threads,
            "plan": plan,
            "impls": args.impls,
            "budget": args.budget,
            "min_reps": args.min_reps,
            "max_reps": args.max_reps,
            "max_n_materialised": args.max_n_materialised,
            "full": args.full,
            "passes": ["fwd", "fwd+bwd"] if args.full or args.forward else ["fwd+bwd"],
        }
        print(f"timing {len(plan)} configurations with {threads} thread(s) ...", flush=True)
        for r in run_worker("time", opts, child_env(threads, args)):
            if r.get("kind") == "threads":
                for k, v in r.items():
                    if k not in ("kind", "threads"):
                        info[f"threads{threads}_{k}"] = str(v)
                continue
            rows.append(r)
            if r.get("status") == "ok":
                print(f"  {r['impl']:11s} {_shape(r)} {r['pass']:7s} {r['median_s']:.4f} s")
    return rows


def _shape(r: dict) -> str:
    """A row's shape in words: dtype, sizes, and for a multi-head row its heads and mask."""
    text = f"{r['dtype']} n={r['n']:5d} d={r['d']:3d}"
    if "heads" in r:
        text += f" {r['batch']}x{r['heads']}/{r['kv_heads']} heads"
        text += " causal" if r["causal"] else ""
    return text


def run_memory(args, info: dict) -> list[dict]:
    """The memory run: one fresh worker per configuration, with every core."""
    rows: list[dict] = []
    all_threads = max(args.threads)
    for cfg in memory_plan(args):
        if cfg["impl"] not in args.impls:
            continue
        if cfg["impl"] in TORCH_IMPLS and info["torch"] == "not installed":
            rows.append({**cfg, "threads": all_threads, "status": "skipped: no torch"})
            continue
        opts = {**cfg, "threads": all_threads}
        for r in run_worker("memory", opts, child_env(all_threads, args), timeout=1800):
            rows.append(r)
            print("  memory", {k: r.get(k) for k in ("impl", "n", "status", "rss_extra_bytes")})
    return rows


def summarise(time_rows, memory_rows, heads_rows=()) -> list[str]:
    """The headline ratios, as lines of text: flash_* against the faster PyTorch backend on
    every shape, single-head and multi-head, the matmul limit at n = 4096, and the extra
    memory."""
    from attnlib.costs import flop_count
    from attnlib.plots import heads_vs_torch, median_seconds, torch_seconds

    lines = [
        f"{'dtype':8s} {'n':>6s} {'d':>4s} {'thr':>3s} {'attnlib':>10s} {'PyTorch':>10s} ratio"
    ]
    shapes = sorted(
        (r["dtype"], r["n"], r["d"], r["threads"])
        for r in time_rows
        if r["impl"] == "flash" and r["pass"] == "fwd+bwd" and r["status"] == "ok"
    )
    for dtype, n, d, threads in shapes:
        t = median_seconds(time_rows, "flash", dtype, n, d, threads)
        peer = torch_seconds(time_rows, dtype, n, d, threads)
        if peer:
            lines.append(
                f"{dtype:8s} {n:6d} {d:4d} {threads:3d} {t * 1e3:8.1f}ms {peer * 1e3:8.1f}ms "
                f"{t / peer:.2f}"
            )
        gemm = median_seconds(time_rows, "gemm", dtype, n, d, threads)
        if gemm:
            flops = sum(flop_count(n, n, d).values())
            lines.append(
                f"  matmul limit ({dtype}, n={n}, d={d}, {threads} thr.): one gemm of the same "
                f"flops at {flops / gemm / 1e9:.0f} GFLOP/s takes {gemm * 1e3:.1f} ms; "
                f"flash_* takes {t / gemm:.2f}x that ({flops / t / 1e9:.0f} GFLOP/s)"
            )
    for label, dtype, threads, ours, theirs, ratio in heads_vs_torch(list(heads_rows)):
        lines.append(
            f"{dtype:8s} {label} {threads} thr.: {ours * 1e3:8.1f}ms {theirs * 1e3:8.1f}ms "
            f"{ratio:.2f}"
        )
    for r in memory_rows:
        if r["status"] == "ok":
            lines.append(
                f"memory {r['impl']:11s} n={r['n']:5d}: extra {r['rss_extra_bytes'] / 2**20:8.1f}"
                f" MiB = {r['extra_over_qkvodo']:.2f} x |Q,K,V,O,dO|"
            )
    return lines


def report(out: Path) -> None:
    """Draw the two figures from the CSVs in ``out`` and print the summary."""
    from attnlib.plots import (
        benchmark_figure,
        benchmark_heads_figure,
        benchmark_ratio_figure,
        read_benchmark_csv,
    )

    time_rows, heads_rows, memory_rows = (
        read_benchmark_csv(out / name) if (out / name).exists() else []
        for name in ("attention_time.csv", "attention_heads.csv", "attention_memory.csv")
    )
    benchmark_figure(time_rows, memory_rows).savefig(out / "attention.png", bbox_inches="tight")
    fig = benchmark_ratio_figure(time_rows)
    fig.savefig(out / "attention_ratio.png", bbox_inches="tight")
    fig = benchmark_heads_figure(heads_rows)
    fig.savefig(out / "attention_heads.png", bbox_inches="tight")
    for line in summarise(time_rows, memory_rows, heads_rows):
        print(line)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    write_schema(args.out)
    info = {}
    if (args.out / "machine.csv").exists():  # keep what parts skipped this time measured before
        with (args.out / "machine.csv").open(newline="") as f:
            info = {r["key"]: r["value"] for r in csv.DictReader(f)}
    info.update(machine_info())
    info["workers_OPENBLAS_THREAD_TIMEOUT"] = OPENBLAS_THREAD_TIMEOUT
    if args.unset_openblas_coretype:  # what the workers saw, not this process
        info["OPENBLAS_CORETYPE"] = info["OPENBLAS_L2_SIZE"] = "unset in the workers"
    if info["torch"] == "not installed":
        print("PyTorch is not installed: the torch-math and torch-flash rows are skipped.")
        print("To compare against it: pip install torch (a CPU build; never in requirements).")
    if info["OPENBLAS_CORETYPE"] != "unset" and not args.unset_openblas_coretype:
        print(
            f"Note: OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE']} is set and slows numpy's "
            "BLAS; rerun with --unset-openblas-coretype to benchmark numpy at full speed."
        )
    parts = [
        ("compile", args.no_compile, run_compile, None),
        ("time", args.no_time, run_time, "attention_time.csv"),
        ("heads", args.no_heads, run_heads, "attention_heads.csv"),
        ("memory", args.no_memory, run_memory, "attention_memory.csv"),
    ]
    for part, skip, run, csv_name in parts:
        if skip:
            continue
        t0, load0 = time.time(), os.getloadavg()[0]
        rows = run(args, info)
        if csv_name:
            write_csv(args.out / csv_name, rows)
        record_part(info, part, args, t0, load0)
    write_csv(args.out / "machine.csv", [{"key": k, "value": v} for k, v in info.items()])
    if not (args.no_time and args.no_memory):
        report(args.out)
    print(f"results in {args.out} ({(time.time() - started) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
