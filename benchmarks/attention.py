"""Speed and memory of attention forward and backward: attnlib against numpy and PyTorch.

Run from the repository root::

    python -m benchmarks.attention            # the standard grid
    python -m benchmarks.attention --full     # also n = 16384 at d = 32 and 128
    python -m benchmarks.attention --quick    # a smoke run (~2 min), written to a temp folder

The standard grid is every dtype (float32, float64), d in {32, 64, 128} and n in {512, ...,
8192}, with 1 thread and with all cores, plus n = 16384 at d = 64; ``--full`` adds n = 16384 at
d = 32 and 128, the exact numpy path at every d, and the forward pass timed alone.
The standard grid took 50 minutes on 2 cores shared with other jobs (load average 6 to 8);
machine.csv records each part's minutes and load.

What is measured, for Q, K, V, dO of shape (n, d) (one attention head, batch 1):

- ``numpy``: :func:`attnlib.attention_forward` / :func:`attnlib.attention_backward`, which
  materialise the n×n score matrix;
- ``flash``: :func:`attnlib.flash_forward` / :func:`attnlib.flash_backward` (numba, tiled);
- ``torch-math`` and ``torch-flash``: PyTorch's ``scaled_dot_product_attention`` on the CPU with
  the math backend and the flash backend, backward by autograd -- when torch is installed. The
  script says so plainly when it is not, and skips those rows. "PyTorch" in the summary is the
  faster of the two on each shape.
- ``gemm`` (at n = 4096): one BLAS gemm (numpy's) of (n × 7d)·(7d × n), which does the same
  14·n²·d flops as the matrix products of forward + backward (:func:`attnlib.fast.flop_count`)
  at the machine's full matmul rate: the "matmul limit", timed in the same round-robin.

Times are medians over repeats after a warm-up call (the first call of the numba kernels
compiles them; that is measured separately, in a fresh cache, and kept out of every timing).
The implementations are timed round-robin in one process, so a ratio compares runs made under
the same machine load. Each thread setting (1, and all cores) runs in its own process with
OMP/OpenBLAS/MKL/numba thread counts set before any import.

Peak memory is measured in a fresh subprocess per configuration: the peak resident size during
one forward+backward (Linux's VmHWM, reset just before the run; ``ru_maxrss`` where /proc is
missing, which Linux carries over from the parent process, so it can only over-estimate) minus
the resident size just before it (inputs allocated, kernels loaded, BLAS buffers warmed up), and
tracemalloc's peak (which sees numpy's allocations but not torch's or numba's scratch).

Results go to ``benchmarks/results/``: ``attention_time.csv``, ``attention_memory.csv``,
``machine.csv``, ``attention.png`` (d = 64: time, ratios, memory) and ``attention_ratio.png``
(flash_* ÷ the faster PyTorch backend on every shape).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
IMPLS = ("numpy", "flash", "torch-math", "torch-flash", "gemm")
TORCH_IMPLS = ("torch-math", "torch-flash")
# numpy's exact path and torch's math backend materialise several n×n matrices: keep them to
# sizes that fit next to other users of a shared 24 GiB machine
MAX_N_MATERIALISED = 8192
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


# ---------------------------------------------------------------------------------------
# Plans
# ---------------------------------------------------------------------------------------


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
            if n < 16384 or d == 64 or args.full
        ]
    return [
        {"dtype": dt, "n": n, "d": d} for dt, n, d in grid if n <= args.max_n and d in args.dims
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


def blas_info() -> dict:
    """numpy's BLAS: library, kernel (core type) and thread count, without new dependencies."""
    info = {"blas_threads": "unknown", "blas_kernel": "unknown", "blas_library": "unknown"}
    try:
        from threadpoolctl import threadpool_info  # optional; not in requirements.txt

        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                info["blas_threads"] = str(pool.get("num_threads"))
                info["blas_kernel"] = str(pool.get("architecture"))
                info["blas_library"] = f"{pool.get('internal_api')} {pool.get('version')}"
                return info
    except ImportError:
        pass
    import ctypes
    import glob

    import numpy as np

    libdir = Path(np.__file__).resolve().parent.parent / "numpy.libs"
    for lib in glob.glob(str(libdir / "*openblas*")):
        handle = ctypes.CDLL(lib)
        for prefix, suffix in (("scipy_openblas_", "64_"), ("openblas_", "64_"), ("openblas_", "")):
            try:
                threads = getattr(handle, f"{prefix}get_num_threads{suffix}")
                corename = getattr(handle, f"{prefix}get_corename{suffix}")
            except AttributeError:
                continue
            corename.restype = ctypes.c_char_p
            info["blas_threads"] = str(threads())
            info["blas_kernel"] = corename().decode()
            info["blas_library"] = Path(lib).name
            return info
    return info


def machine_info() -> dict:
    import numba
    import numpy as np

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    info = {
        "cpu": cpu,
        "logical_cores": str(os.cpu_count()),
        "memory": mem,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "unset"),
    }
    info.update(blas_info())
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except ImportError:
        info["torch"] = "not installed"
    return info


# ---------------------------------------------------------------------------------------
# The implementations, as (forward, forward+backward) closures on fixed inputs
# ---------------------------------------------------------------------------------------


def make_inputs(n, d, dtype, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((n, d)).astype(dtype) for _ in range(4))  # Q, K, V, dO


def torch_flash_available() -> bool:
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return False
    q = torch.zeros(1, 1, 8, 8, requires_grad=True)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, q, q).sum().backward()
    except RuntimeError:
        return False
    return True


def make_impl(name, Q, K, V, dO):
    """(forward(), forward_and_backward()) for one implementation on fixed inputs."""
    if name == "gemm":
        import numpy as np

        n, d = Q.shape
        A = np.tile(Q, (1, 7))  # (n, 7d): one gemm of 2·n·7d·n = 14·n²·d flops
        B = np.ascontiguousarray(np.tile(K, (1, 7)).T)
        C = np.empty((n, n), dtype=Q.dtype)

        def matmul():
            return np.matmul(A, B, out=C)

        return matmul, matmul

    if name in ("numpy", "flash"):
        import attnlib as al

        fwd_fn, bwd_fn = (
            (al.attention_forward, al.attention_backward)
            if name == "numpy"
            else (al.flash_forward, al.flash_backward)
        )

        def fwd():
            return fwd_fn(Q, K, V)

        def fwd_bwd():
            O, lse = fwd_fn(Q, K, V)
            return bwd_fn(Q, K, V, O, dO, lse)

        return fwd, fwd_bwd

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = SDPBackend.MATH if name == "torch-math" else SDPBackend.FLASH_ATTENTION
    n, d = Q.shape
    tq, tk, tv = (torch.from_numpy(x).reshape(1, 1, n, d).requires_grad_(True) for x in (Q, K, V))
    tdo = torch.from_numpy(dO).reshape(1, 1, n, d)

    def fwd():
        with torch.no_grad(), sdpa_kernel(backend):
            return F.scaled_dot_product_attention(tq, tk, tv)

    def fwd_bwd():
        for t in (tq, tk, tv):
            t.grad = None
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(tq, tk, tv)
        out.backward(tdo)
        return tq.grad, tk.grad, tv.grad

    return fwd, fwd_bwd


def skip_reason(impl, n, d, itemsize, have_torch, have_torch_flash, max_n_materialised, full):
    if impl == "gemm" and n != 4096:
        return "skipped: the matmul limit is timed at n = 4096"
    if impl == "numpy" and d != 64 and not full:
        return "skipped: the exact numpy path is timed at d = 64 (every d with --full)"
    if impl in TORCH_IMPLS and not have_torch:
        return "skipped: torch not installed"
    if impl == "torch-flash" and not have_torch_flash:
        return "skipped: this torch build has no CPU flash backend"
    if impl in ("numpy", "torch-math") and n > max_n_materialised:
        gib = n * n * itemsize / 2**30
        return f"skipped: materialises n x n matrices ({gib:.1f} GiB each)"
    return ""


# ---------------------------------------------------------------------------------------
# Workers (run in subprocesses)
# ---------------------------------------------------------------------------------------


def emit(record: dict) -> None:
    print("RESULT " + json.dumps(record), flush=True)


def worker_time(opts) -> None:
    """Time every configuration of the plan at one thread count, implementations round-robin."""
    import numba
    import numpy as np

    threads = opts["threads"]
    have_torch = True
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        have_torch = False
    have_torch_flash = torch_flash_available()
    import attnlib as al

    # first calls compile (or load from the on-disk cache): keep that out of every timing
    for dtype in ("float32", "float64"):
        Q, K, V, dO = make_inputs(70, 8, dtype)
        O, lse = al.flash_forward(Q, K, V)
        al.flash_backward(Q, K, V, O, dO, lse)
    info = {
        "numba_threads": numba.get_num_threads(),
        "numba_threading_layer": numba.threading_layer(),
        "torch_threads": torch.get_num_threads() if have_torch else "n/a",
        **blas_info(),
    }
    emit({"kind": "threads", "threads": threads, **info})

    for cfg in opts["plan"]:
        n, d, dtype = cfg["n"], cfg["d"], cfg["dtype"]
        Q, K, V, dO = make_inputs(n, d, dtype)
        itemsize = np.dtype(dtype).itemsize
        for pass_name in opts["passes"]:
            live = {}
            for impl in opts["impls"]:
                reason = skip_reason(
                    impl,
                    n,
                    d,
                    itemsize,
                    have_torch,
                    have_torch_flash,
                    opts["max_n_materialised"],
                    opts["full"],
                )
                base = {
                    "kind": "time",
                    "impl": impl,
                    "dtype": dtype,
                    "n": n,
                    "d": d,
                    "threads": threads,
                    "pass": pass_name,
                }
                if reason:
                    emit({**base, "status": reason})
                    continue
                fwd, fwd_bwd = make_impl(impl, Q, K, V, dO)
                fn = fwd if pass_name == "fwd" else fwd_bwd
                t0 = time.perf_counter()
                fn()  # warm-up
                live[impl] = (fn, time.perf_counter() - t0, base)
            if not live:
                continue
            slowest = max(w for _, w, _ in live.values())
            reps = int(min(opts["max_reps"], max(opts["min_reps"], opts["budget"] / slowest)))
            times = {impl: [] for impl in live}
            load = os.getloadavg()[0]
            for _ in range(reps):
                for impl, (fn, _, _) in live.items():
                    t0 = time.perf_counter()
                    fn()
                    times[impl].append(time.perf_counter() - t0)
            for impl, (_, _, base) in live.items():
                ts = sorted(times[impl])
                emit(
                    {
                        **base,
                        "status": "ok",
                        "median_s": float(np.median(ts)),
                        "min_s": ts[0],
                        "max_s": ts[-1],
                        "repeats": len(ts),
                        "load1": round(load, 2),
                    }
                )


def rss_now() -> int:
    """Current resident set size in bytes (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; Linux >= 4.0 only.

    ``ru_maxrss`` alone is not enough: Linux carries the parent's peak over ``fork`` and
    ``exec``, so a worker started by a large parent would report the parent's peak.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    """Peak RSS of this process in bytes: VmHWM, or ru_maxrss where /proc is missing."""
    import resource

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker_memory(opts) -> None:
    """Peak memory of one forward+backward, in a fresh process."""
    import gc
    import tracemalloc

    import numpy as np

    impl, n, d, dtype = opts["impl"], opts["n"], opts["d"], opts["dtype"]
    if impl in TORCH_IMPLS:
        import torch

        torch.set_num_threads(opts["threads"])
    # warm up on a small problem: load the kernels, start thread pools, let BLAS allocate its
    # buffers (OpenBLAS keeps ~100 MiB per library), so that none of it counts as "extra"
    fwd, fwd_bwd = make_impl(impl, *make_inputs(512, d, dtype))
    fwd_bwd()
    Q, K, V, dO = make_inputs(n, d, dtype)
    fwd, fwd_bwd = make_impl(impl, Q, K, V, dO)
    del fwd
    gc.collect()
    exact_peak = reset_peak_rss()
    base_rss = rss_now()
    peak_before = peak_rss()
    tracemalloc.start()
    t0 = time.perf_counter()
    grads = fwd_bwd()
    seconds = time.perf_counter() - t0
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak = peak_rss()
    del grads
    itemsize = np.dtype(dtype).itemsize
    io_bytes = 5 * n * d * itemsize  # Q, K, V, O, dO
    emit(
        {
            "kind": "memory",
            "impl": impl,
            "dtype": dtype,
            "n": n,
            "d": d,
            "threads": opts["threads"],
            "status": "ok",
            "qkvodo_bytes": io_bytes,
            "rss_before_bytes": base_rss,
            "rss_peak_bytes": peak,
            # if the run did not raise the process's peak, the true extra is at most this
            "rss_extra_bytes": peak - base_rss,
            "rss_extra_is_upper_bound": peak <= peak_before,
            "peak_method": "VmHWM reset before the run" if exact_peak else "ru_maxrss",
            "tracemalloc_peak_bytes": traced_peak,
            "extra_over_qkvodo": round((peak - base_rss) / io_bytes, 3),
            "seconds": round(seconds, 3),
        }
    )


def worker_compile(opts) -> None:
    """First-call time of flash_forward + flash_backward per dtype (cold or warm cache)."""
    t0 = time.perf_counter()
    import attnlib as al

    import_s = time.perf_counter() - t0
    for dtype in ("float64", "float32"):
        Q, K, V, dO = make_inputs(70, 8, dtype)
        w0, c0 = time.perf_counter(), time.process_time()
        O, lse = al.flash_forward(Q, K, V)
        w1, c1 = time.perf_counter(), time.process_time()
        al.flash_backward(Q, K, V, O, dO, lse)
        w2, c2 = time.perf_counter(), time.process_time()
        emit(
            {
                "kind": "compile",
                "cache": opts["cache"],
                "dtype": dtype,
                "import_s": round(import_s, 2),
                "forward_wall_s": round(w1 - w0, 2),
                "forward_cpu_s": round(c1 - c0, 2),
                "backward_wall_s": round(w2 - w1, 2),
                "backward_cpu_s": round(c2 - c1, 2),
            }
        )


# ---------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------


def child_env(threads: int, args, cache_dir: str | None = None) -> dict:
    env = dict(os.environ)
    for key in THREAD_ENV:
        env[key] = str(threads)
    if args.unset_openblas_coretype:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    return env


def run_worker(kind: str, opts: dict, env: dict, timeout: float | None = None) -> list[dict]:
    cmd = [sys.executable, "-m", "benchmarks.attention", "--worker", kind, json.dumps(opts)]
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


def write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({c: row.get(c, "") for c in columns})


TIME_COLUMNS = [
    "impl",
    "dtype",
    "n",
    "d",
    "threads",
    "pass",
    "status",
    "median_s",
    "min_s",
    "max_s",
    "repeats",
    "load1",
]
MEMORY_COLUMNS = [
    "impl",
    "dtype",
    "n",
    "d",
    "threads",
    "status",
    "qkvodo_bytes",
    "rss_before_bytes",
    "rss_peak_bytes",
    "rss_extra_bytes",
    "rss_extra_is_upper_bound",
    "peak_method",
    "tracemalloc_peak_bytes",
    "extra_over_qkvodo",
    "seconds",
]


def summarise(time_rows, memory_rows) -> list[str]:
    """The headline ratios, as lines of text: flash_* against the faster PyTorch backend on
    every shape, the matmul limit at n = 4096, and the extra memory."""
    from attnlib.fast import flop_count

    med = {
        (r["impl"], r["dtype"], r["n"], r["d"], r["threads"], r["pass"]): r["median_s"]
        for r in time_rows
        if r.get("status") == "ok"
    }
    lines = [
        f"{'dtype':8s} {'n':>6s} {'d':>4s} {'thr':>3s} {'attnlib':>10s} {'PyTorch':>10s} ratio"
    ]
    for (impl, dtype, n, d, threads, pass_name), t in sorted(med.items()):
        if impl != "flash" or pass_name != "fwd+bwd":
            continue
        peers = [med.get((p, dtype, n, d, threads, pass_name)) for p in TORCH_IMPLS]
        peers = [p for p in peers if p]
        if peers:
            lines.append(
                f"{dtype:8s} {n:6d} {d:4d} {threads:3d} {t * 1e3:8.1f}ms {min(peers) * 1e3:8.1f}ms "
                f"{t / min(peers):.2f}"
            )
        gemm = med.get(("gemm", dtype, n, d, threads, pass_name))
        if gemm:
            flops = sum(flop_count(n, n, d).values())
            lines.append(
                f"  matmul limit ({dtype}, n={n}, d={d}, {threads} thr.): one gemm of the same "
                f"flops at {flops / gemm / 1e9:.0f} GFLOP/s takes {gemm * 1e3:.1f} ms; "
                f"flash_* takes {t / gemm:.2f}x that ({flops / t / 1e9:.0f} GFLOP/s)"
            )
    for r in memory_rows:
        if r.get("status") == "ok":
            lines.append(
                f"memory {r['impl']:11s} n={r['n']:5d}: extra {r['rss_extra_bytes'] / 2**20:8.1f}"
                f" MiB = {r['extra_over_qkvodo']:.2f} x |Q,K,V,O,dO|"
            )
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smoke run: n <= 4096, d = 64")
    size.add_argument(
        "--full",
        action="store_true",
        help="also n = 16384 at d = 32 and 128, numpy at every d, and the forward pass alone",
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
    p.add_argument("--no-time", action="store_true", help="skip the time sweep")
    p.add_argument("--no-memory", action="store_true", help="skip the memory run")
    p.add_argument("--no-compile", action="store_true", help="skip the compile-time run")
    p.add_argument(
        "--unset-openblas-coretype",
        action="store_true",
        help="unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE in the workers (they slow numpy)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: benchmarks/results; with --quick, a temporary folder, "
        "so that a smoke run never overwrites the committed results)",
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("opts", nargs="?", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        opts = json.loads(args.opts)
        {"time": worker_time, "memory": worker_memory, "compile": worker_compile}[args.worker](opts)
        return 0

    started = time.time()
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "attnlib_bench_quick" if args.quick else RESULTS
    args.out.mkdir(parents=True, exist_ok=True)
    info = {}
    if (args.out / "machine.csv").exists():  # keep what parts skipped this time measured before
        with (args.out / "machine.csv").open(newline="") as f:
            info = {r["key"]: r["value"] for r in csv.DictReader(f)}
    info.update(machine_info())
    threads_list = args.threads or sorted({1, os.cpu_count() or 1})
    if info["torch"] == "not installed":
        print("PyTorch is not installed: the torch-math and torch-flash rows are skipped.")
        print("To compare against it: pip install torch (a CPU build; never in requirements).")
    if info["OPENBLAS_CORETYPE"] != "unset" and not args.unset_openblas_coretype:
        print(
            f"Note: OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE']} is set and slows numpy's "
            "BLAS; rerun with --unset-openblas-coretype to benchmark numpy at full speed."
        )
    command = " ".join(["python -m benchmarks.attention", *(argv or sys.argv[1:])])

    def record_part(part: str, t0: float, load0: float) -> None:
        """Keys of machine.csv that say how and under what load one part of the run went."""
        info[f"{part}_command"] = command
        info[f"{part}_date"] = time.strftime("%Y-%m-%d")
        info[f"{part}_minutes"] = f"{(time.time() - t0) / 60:.1f}"
        info[f"{part}_load1_at_start"] = f"{load0:.2f}"
        info[f"{part}_load1_at_end"] = f"{os.getloadavg()[0]:.2f}"

    if not args.no_compile:
        t0, load0 = time.time(), os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as cache:
            env = child_env(os.cpu_count() or 1, args, cache)
            for cache_state in ("cold", "warm"):
                for r in run_worker("compile", {"cache": cache_state}, env):
                    print("compile", r)
                    if "forward_cpu_s" in r:
                        key = f"first_call_{cache_state}_cache_{r['dtype']}"
                        info[key + "_wall_s"] = r["forward_wall_s"] + r["backward_wall_s"]
                        info[key + "_cpu_s"] = r["forward_cpu_s"] + r["backward_cpu_s"]
        record_part("compile", t0, load0)

    time_rows: list[dict] = []
    if not args.no_time:
        t0, load0 = time.time(), os.getloadavg()[0]
        plan = time_plan(args)
        for threads in threads_list:
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
                else:
                    time_rows.append(r)
                    if r.get("status") == "ok":
                        print(
                            f"  {r['impl']:11s} {r['dtype']} n={r['n']:5d} d={r['d']:3d} "
                            f"{r['pass']:7s} {r['median_s']:.4f} s",
                            flush=True,
                        )
        write_csv(args.out / "attention_time.csv", time_rows, TIME_COLUMNS)
        record_part("time", t0, load0)

    memory_rows: list[dict] = []
    if not args.no_memory:
        t0, load0 = time.time(), os.getloadavg()[0]
        all_threads = max(threads_list)
        for cfg in memory_plan(args):
            if cfg["impl"] not in args.impls:
                continue
            if cfg["impl"] in TORCH_IMPLS and info["torch"] == "not installed":
                memory_rows.append({**cfg, "threads": all_threads, "status": "skipped: no torch"})
                continue
            opts = {**cfg, "threads": all_threads}
            for r in run_worker("memory", opts, child_env(all_threads, args), timeout=1800):
                memory_rows.append(r)
                print("  memory", {k: r.get(k) for k in ("impl", "n", "status", "rss_extra_bytes")})
        write_csv(args.out / "attention_memory.csv", memory_rows, MEMORY_COLUMNS)
        record_part("memory", t0, load0)

    minutes = f"{(time.time() - started) / 60:.1f}"
    write_csv(
        args.out / "machine.csv",
        [{"key": k, "value": v} for k, v in info.items()],
        ["key", "value"],
    )
    if time_rows or memory_rows:
        from attnlib.plots import benchmark_figure, benchmark_ratio_figure, read_benchmark_csv

        time_rows, memory_rows = (
            read_benchmark_csv(args.out / name) if (args.out / name).exists() else []
            for name in ("attention_time.csv", "attention_memory.csv")
        )
        fig = benchmark_figure(time_rows, memory_rows)
        fig.savefig(args.out / "attention.png", bbox_inches="tight")
        fig = benchmark_ratio_figure(time_rows)
        fig.savefig(args.out / "attention_ratio.png", bbox_inches="tight")
        for line in summarise(time_rows, memory_rows):
            print(line)
    print(f"results in {args.out} ({minutes} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
