"""Figures of Chapter 10, the compiled kernels measured against their peers."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "BENCH_IMPLS",
    "BENCH_COLORS",
    "BENCH_LABELS",
    "read_benchmark_csv",
    "benchmark_times",
    "benchmark_figure",
    "benchmark_ratio_figure",
]


BENCH_IMPLS = ("flash", "torch-flash", "torch-math", "numpy")
BENCH_COLORS = {
    "flash": "#1f77b4",
    "torch-flash": "#d62728",
    "torch-math": "#ff7f0e",
    "numpy": "#2ca02c",
}
BENCH_LABELS = {
    "flash": "attnlib.flash_* (numba)",
    "torch-flash": "torch SDPA, flash backend",
    "torch-math": "torch SDPA, math backend",
    "numpy": "attnlib exact (numpy)",
}


def read_benchmark_csv(path) -> list[dict]:
    """Rows of a ``benchmarks/results`` CSV, with integer and float columns parsed."""
    import csv
    from pathlib import Path

    ints = {"n", "d", "threads", "repeats"}
    rows = []
    with Path(path).open(newline="") as f:
        for row in csv.DictReader(f):
            for k, v in row.items():
                if v in ("", None):
                    continue
                if k in ints:
                    row[k] = int(v)
                elif k.endswith(("_s", "_bytes", "_qkvodo")) or k == "load1":
                    row[k] = float(v)
            rows.append(row)
    return rows


def benchmark_times(rows, *, dtype="float32", d=64, pass_name="fwd+bwd") -> dict:
    """{(impl, threads): (ns, median seconds)} from the rows of attention_time.csv."""
    out: dict = {}
    for r in rows:
        if r.get("status") != "ok" or r["dtype"] != dtype or r["d"] != d:
            continue
        if r["pass"] != pass_name:
            continue
        out.setdefault((r["impl"], r["threads"]), []).append((r["n"], r["median_s"]))
    return {k: tuple(np.array(v).T) for k, v in ((k, sorted(v)) for k, v in out.items())}


def benchmark_figure(time_rows, memory_rows, *, dtype="float32", d=64):
    """Three panels from the benchmark CSVs: time of forward+backward against n, the ratio of
    attnlib.flash_* to each peer, and the extra memory of one forward+backward.

    Solid lines use every core, dashed lines one thread.
    """
    fig, axes = plt.subplots(1, 3, figsize=(14.5, 4.3))
    times = benchmark_times(time_rows, dtype=dtype, d=d)
    threads = sorted({t for _, t in times})
    style = {t: ("-" if t == max(threads) else "--") for t in threads}
    ax = axes[0]
    order = {impl: k for k, impl in enumerate(BENCH_IMPLS)}
    for (impl, t), (ns, secs) in sorted(
        times.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])
    ):
        if impl not in BENCH_LABELS:  # e.g. the matmul-limit gemm, timed at one n only
            continue
        label = f"{BENCH_LABELS[impl]}, {t} thr."
        ax.loglog(ns, secs, style[t], marker="o", color=BENCH_COLORS.get(impl), label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("forward + backward time (s, median)")
    ax.set_title(f"Time, {dtype}, d = {d}")
    ax.legend(fontsize=7)

    ax = axes[1]
    for t in threads:
        if ("flash", t) not in times:
            continue
        fns, fsecs = times[("flash", t)]
        for peer in ("torch-flash", "torch-math", "numpy"):
            if (peer, t) not in times:
                continue
            pns, psecs = times[(peer, t)]
            common = [n for n in fns if n in set(pns)]
            if not common:
                continue
            ratio = [fsecs[list(fns).index(n)] / psecs[list(pns).index(n)] for n in common]
            ax.plot(
                common,
                ratio,
                style[t],
                marker="o",
                color=BENCH_COLORS[peer],
                label=f"÷ {BENCH_LABELS[peer]}, {t} thr.",
            )
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("time of flash_* ÷ time of peer")
    ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_title("Ratio (< 1: attnlib is faster)")
    ax.legend(fontsize=7)

    ax = axes[2]
    mem: dict = {}
    for r in memory_rows:
        if r.get("status") == "ok" and r["dtype"] == dtype:
            mem.setdefault(r["impl"], []).append((r["n"], r["rss_extra_bytes"], r["qkvodo_bytes"]))
    budget = {}
    for impl in BENCH_IMPLS:
        if impl not in mem:
            continue
        pts = sorted(mem[impl])
        ns = [p[0] for p in pts]
        ax.loglog(
            ns,
            [max(p[1], 1.0) / 2**20 for p in pts],
            marker="o",
            color=BENCH_COLORS[impl],
            label=BENCH_LABELS[impl],
        )
        budget.update({p[0]: 2 * p[2] / 2**20 for p in pts})
    if budget:
        bn = sorted(budget)
        ax.loglog(bn, [budget[n] for n in bn], "k:", label="2 × |Q, K, V, O, dO|")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("extra peak memory (MiB, RSS)")
    ax.set_title(f"Memory of forward + backward, {dtype}, d = {d}")
    ax.legend(fontsize=7)
    return fig


def benchmark_ratio_figure(time_rows):
    """One panel per head dimension d: forward+backward time of attnlib.flash_* divided by
    that of the faster PyTorch backend (flash or math) on the same shape, in the same run,
    against n; one line per dtype and thread count. Below 1, attnlib is faster."""
    med = {
        (r["impl"], r["dtype"], r["n"], r["d"], r["threads"]): r["median_s"]
        for r in time_rows
        if r.get("status") == "ok" and r["pass"] == "fwd+bwd"
    }
    ds = sorted({k[3] for k in med if k[0] == "flash"})
    fig, axes = plt.subplots(1, len(ds), figsize=(4.6 * len(ds), 4.0), sharey=True, squeeze=False)
    colors = {"float32": "#1f77b4", "float64": "#9467bd"}
    threads_all = max((k[4] for k in med), default=1)
    for ax, d in zip(axes[0], ds, strict=True):
        for dtype in ("float32", "float64"):
            for t in sorted({k[4] for k in med}):
                pts = []
                for (impl, dt, n, dd, tt), secs in sorted(med.items()):
                    if (impl, dt, dd, tt) != ("flash", dtype, d, t):
                        continue
                    peers = [med.get((p, dt, n, dd, tt)) for p in ("torch-flash", "torch-math")]
                    peers = [p for p in peers if p]
                    if peers:
                        pts.append((n, secs / min(peers)))
                if pts:
                    ns, ratio = zip(*pts, strict=True)
                    ax.plot(
                        ns,
                        ratio,
                        "-" if t == threads_all else "--",
                        marker="o",
                        color=colors[dtype],
                        label=f"{dtype}, {t} thr.",
                    )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())
        ax.set_xlabel("sequence length n")
        ax.set_title(f"d = {d}")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("time of flash_* ÷ faster PyTorch backend")
    fig.suptitle("Forward + backward against PyTorch's faster CPU backend (< 1: attnlib faster)")
    return fig
