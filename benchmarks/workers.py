"""The benchmark's worker processes, and the implementations they time.

The driver (:mod:`benchmarks.attention`) starts each worker as
``python -m benchmarks.workers KIND OPTIONS`` in a fresh process whose thread counts are set
before any import; a worker prints one ``RESULT {json}`` line per measurement. Kinds:
``time`` (every configuration of a plan, the implementations round-robin), ``memory`` (the peak
of one forward+backward) and ``compile`` (the first call of the compiled kernels).
"""

from __future__ import annotations

import json
import os
import sys
import time

from .machine import blas_info, peak_rss, reset_peak_rss, rss_now

IMPLS = ("numpy", "flash", "torch-math", "torch-flash", "gemm")
# the keys of a multi-head configuration: batch, query heads, key/value heads, causal mask
HEAD_KEYS = ("batch", "heads", "kv_heads", "causal")
TORCH_IMPLS = ("torch-math", "torch-flash")
# numpy's exact path and torch's math backend materialise several n×n matrices: keep them to
# sizes that fit next to other users of a shared 24 GiB machine
MAX_N_MATERIALISED = 8192


def make_inputs(n, d, dtype, seed=0, *, batch=0, heads=1, kv_heads=1):
    """Q, K, V, dO: (n, d) each for one head (batch = 0), else PyTorch's layout
    (batch, heads, n, d) for Q and dO and (batch, kv_heads, n, d) for K and V."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if not batch:
        return tuple(rng.standard_normal((n, d)).astype(dtype) for _ in range(4))
    q_shape, kv_shape = (batch, heads, n, d), (batch, kv_heads, n, d)
    shapes = (q_shape, kv_shape, kv_shape, q_shape)
    return tuple(rng.standard_normal(shape).astype(dtype) for shape in shapes)


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


def make_impl(name, Q, K, V, dO, *, is_causal=False):
    """(forward(), forward_and_backward()) for one implementation on fixed inputs: one head
    (n, d), or batched heads (batch, H, n, d) with K and V (batch, H_kv, n, d), grouped query
    heads when H_kv < H; ``is_causal`` masks keys after each query."""
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

        forward = al.attention_forward if name == "numpy" else al.flash_forward
        kernels = "standard" if name == "numpy" else "flash"
        kw = dict(is_causal=is_causal, enable_gqa=Q.ndim > 2 and K.shape[-3] < Q.shape[-3])

        def fwd():
            return forward(Q, K, V, **kw)

        def fwd_bwd():
            return al.forward_backward(Q, K, V, dO, kernels=kernels, **kw)

        return fwd, fwd_bwd

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = SDPBackend.MATH if name == "torch-math" else SDPBackend.FLASH_ATTENTION

    def as_4d(x):  # one head (n, d) as (1, 1, n, d)
        return torch.from_numpy(x).reshape((1, 1) * (x.ndim == 2) + x.shape)

    tq, tk, tv = (as_4d(x).requires_grad_(True) for x in (Q, K, V))
    tdo = as_4d(dO)
    kw = dict(is_causal=is_causal, enable_gqa=tk.shape[1] < tq.shape[1])

    def fwd():
        with torch.no_grad(), sdpa_kernel(backend):
            return F.scaled_dot_product_attention(tq, tk, tv, **kw)

    def fwd_bwd():
        for t in (tq, tk, tv):
            t.grad = None
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(tq, tk, tv, **kw)
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
        heads = {k: cfg[k] for k in HEAD_KEYS if k in cfg}  # a multi-head shape, or {}
        Q, K, V, dO = make_inputs(
            n,
            d,
            dtype,
            batch=heads.get("batch", 0),
            heads=heads.get("heads", 1),
            kv_heads=heads.get("kv_heads", 1),
        )
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
                if heads and impl in ("numpy", "gemm"):
                    reason = "skipped: timed on the single-head shapes only"
                base = {
                    "kind": "time",
                    "impl": impl,
                    "dtype": dtype,
                    "n": n,
                    "d": d,
                    **heads,
                    "threads": threads,
                    "pass": pass_name,
                }
                if reason:
                    emit({**base, "status": reason})
                    continue
                fwd, fwd_bwd = make_impl(impl, Q, K, V, dO, is_causal=heads.get("causal", False))
                fn = fwd if pass_name == "fwd" else fwd_bwd
                # The first call pays one-time costs (PyTorch's lazy set-up, the first touch
                # of new buffers): untimed. The second sizes the repeats; had it been the first,
                # the first shape of a run got the minimum of repeats, all of them cold.
                fn()
                t0 = time.perf_counter()
                fn()
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
    # buffers (OpenBLAS keeps its own per library), so that none of it counts as "extra"
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


WORKERS = {"time": worker_time, "memory": worker_memory, "compile": worker_compile}

if __name__ == "__main__":
    WORKERS[sys.argv[1]](json.loads(sys.argv[2]))


def add_openblas_argument(parser) -> None:
    """The flag both benchmarks take to run their workers with OpenBLAS unpinned, as a
    reader's machine runs it."""
    parser.add_argument(
        "--unset-openblas-coretype",
        action="store_true",
        help="unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE in the workers (they slow numpy)",
    )
