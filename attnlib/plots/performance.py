"""Chapter 10's figures, and the benchmark results they are drawn from.

``python -m benchmarks.attention`` writes CSV files and, next to them, ``schema.json``: each
file's columns and their types. :func:`read_benchmark_csv` (from :mod:`attnlib.results`, where
the other chapters' readers are) parses every column by that type; :func:`median_seconds`,
:func:`torch_seconds` and :func:`flash_vs_torch` look rows up by name.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from .._checks import as_entries, as_series, check_choice, check_int
from ..results import read_benchmark_csv
from .style import add_takeaway

__all__ = [
    "read_benchmark_csv",
    "median_seconds",
    "torch_seconds",
    "flash_vs_torch",
    "heads_vs_torch",
    "benchmark_figure",
    "benchmark_ratio_figure",
    "benchmark_heads_figure",
    "exact_over_tiled_figure",
]


_BENCH_IMPLS = ("flash", "torch-flash", "torch-math", "numpy")
_BENCH_COLORS = {
    "flash": "#1f77b4",
    "torch-flash": "#d62728",
    "torch-math": "#ff7f0e",
    "numpy": "#2ca02c",
}
_BENCH_LABELS = {
    "flash": "attnlib.flash_* (numba)",
    "torch-flash": "torch SDPA, flash backend",
    "torch-math": "torch SDPA, math backend",
    "numpy": "attnlib exact (numpy)",
}
_TIMED = (*_BENCH_IMPLS, "gemm")  # the matmul limit: one gemm of the same flops
_TORCH = ("torch-flash", "torch-math")


#: What the row arguments hold (for the messages that refuse them).
_ROWS = "rows (dicts) of read_benchmark_csv"


def median_seconds(rows, impl, dtype, n, d, threads, pass_name="fwd+bwd") -> float | None:
    """The median time of ``impl`` on one shape in the rows of ``attention_time.csv``, None if
    that row is missing or was not measured (``status`` other than "ok").

    Raises
    ------
    AttnInputError
        if ``rows`` is not a list of dicts, ``impl`` is not a timed implementation, or a size
        is not a positive integer.
    """
    rows = as_entries("rows", rows, of=_ROWS, entry_type=dict)
    check_choice("impl", impl, _TIMED)
    key = (impl, dtype, check_int("n", n), check_int("d", d), check_int("threads", threads))
    for r in rows:
        if (r["impl"], r["dtype"], r["n"], r["d"], r["threads"]) == key and (
            r["pass"] == pass_name and r["status"] == "ok"
        ):
            return r["median_s"]
    return None


def torch_seconds(rows, dtype, n, d, threads, pass_name="fwd+bwd") -> float | None:
    """The time of the faster of PyTorch's two CPU backends (flash and math) on one shape, in
    the same run; None if neither was measured.

    Raises
    ------
    AttnInputError
        as :func:`median_seconds`.
    """
    times = [median_seconds(rows, p, dtype, n, d, threads, pass_name) for p in _TORCH]
    return min((t for t in times if t), default=None)


def flash_vs_torch(rows) -> list[tuple]:
    """(dtype, n, d, threads, flash_* seconds, PyTorch seconds, ratio) for every shape of the
    forward+backward sweep where both were measured, sorted by dtype, d, threads and n; the
    PyTorch time is :func:`torch_seconds`, and a ratio below 1 means attnlib is faster.

    Raises
    ------
    AttnInputError
        if ``rows`` is not a list of dicts.
    """
    rows = as_entries("rows", rows, of=_ROWS, entry_type=dict)
    shapes = {
        (r["dtype"], r["d"], r["threads"], r["n"])
        for r in rows
        if r["impl"] == "flash" and r["status"] == "ok" and r["pass"] == "fwd+bwd"
    }
    table = []
    for dtype, d, threads, n in sorted(shapes):
        ours = median_seconds(rows, "flash", dtype, n, d, threads)
        theirs = torch_seconds(rows, dtype, n, d, threads)
        if theirs:
            table.append((dtype, n, d, threads, ours, theirs, ours / theirs))
    return table


def _heads_label(r: dict) -> str:
    """A multi-head shape in words, e.g. "1 × 32 heads (8 K/V), n = 2048, d = 128, causal"."""
    heads = f"{r['batch']} × {r['heads']} heads" if r["batch"] * r["heads"] > 1 else "one head"
    if r["kv_heads"] < r["heads"]:
        heads += f" ({r['kv_heads']} K/V)"
    return f"{heads}, n = {r['n']}, d = {r['d']}" + (", causal" if r["causal"] else "")


def heads_vs_torch(rows) -> list[tuple]:
    """(shape label, dtype, threads, flash_* seconds, PyTorch seconds, ratio) for every
    multi-head shape of ``attention_heads.csv`` where attnlib and PyTorch were both measured
    (forward + backward), in the order of the file; PyTorch is the faster of its two CPU
    backends on that shape, and a ratio below 1 means attnlib is faster.

    Raises
    ------
    AttnInputError
        if ``rows`` is not a list of dicts.
    """
    rows = as_entries("rows", rows, of=_ROWS, entry_type=dict)
    times: dict = {}
    for r in rows:
        if r["status"] == "ok" and r["pass"] == "fwd+bwd":
            key = (_heads_label(r), r["dtype"], r["threads"])
            times.setdefault(key, {})[r["impl"]] = r["median_s"]
    table = []
    for (label, dtype, threads), by_impl in times.items():
        theirs = min((by_impl[p] for p in _TORCH if p in by_impl), default=None)
        if "flash" in by_impl and theirs:
            ours = by_impl["flash"]
            table.append((label, dtype, threads, ours, theirs, ours / theirs))
    return table


def benchmark_heads_figure(rows, *, takeaway=None):
    """Chapter 10's multi-head panel: for each shape of ``attention_heads.csv`` (batched heads,
    causal, grouped-query), forward+backward time of attnlib.flash_* divided by that of the
    faster PyTorch backend, one bar per dtype and thread count. Left of 1, attnlib is faster.
    ``takeaway`` is written under the figure.

    Raises
    ------
    AttnInputError
        if ``rows`` is not a list of dicts.
    """
    table = heads_vs_torch(rows)
    labels = list(dict.fromkeys(row[0] for row in table))
    series = sorted({(row[1], row[2]) for row in table})
    fig, ax = plt.subplots(figsize=(7.5, 1.0 + 0.9 * max(1, len(labels))))
    colors = {"float32": "#1f77b4", "float64": "#9467bd"}
    height = 0.8 / max(1, len(series))
    most = max((t for _, t in series), default=1)
    for k, (dtype, threads) in enumerate(series):
        pts = [(labels.index(row[0]), row[5]) for row in table if row[1:3] == (dtype, threads)]
        ys = [i + (k - (len(series) - 1) / 2) * height for i, _ in pts]
        ax.barh(
            ys,
            [ratio for _, ratio in pts],
            height=height * 0.9,
            color=colors[dtype],
            alpha=1.0 if threads == most else 0.45,
            label=f"{dtype}, {threads} thr.",
        )
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(mpl.ticker.NullFormatter())
    ax.set_xticks([0.5, 0.7, 1, 1.5, 2])
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time of flash_* ÷ faster PyTorch backend (< 1: attnlib faster)")
    ax.set_title("Batched, causal and grouped-query shapes: forward + backward")
    if series:
        ax.legend(fontsize=7, loc="lower right")
    if takeaway:
        add_takeaway(fig, takeaway)
    return fig


def _benchmark_times(rows, *, dtype="float32", d=64, pass_name="fwd+bwd") -> dict:
    """{(impl, threads): (ns, median seconds)} from the rows of attention_time.csv.

    Raises
    ------
    AttnInputError
        if ``rows`` is not a list of dicts or ``d`` is not a positive integer.
    """
    rows = as_entries("rows", rows, of=_ROWS, entry_type=dict)
    d = check_int("d", d)
    out: dict = {}
    for r in rows:
        if r["status"] != "ok" or r["dtype"] != dtype or r["d"] != d:
            continue
        if r["pass"] != pass_name:
            continue
        out.setdefault((r["impl"], r["threads"]), []).append((r["n"], r["median_s"]))
    return {k: tuple(np.array(v).T) for k, v in ((k, sorted(v)) for k, v in out.items())}


def _ratio_axes(ax, ylabel=None) -> None:
    """A log-log ratio panel against n: the line at 1, plain-number ticks, the labels."""
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("sequence length n")
    if ylabel:
        ax.set_ylabel(ylabel)


def benchmark_figure(time_rows, memory_rows, *, dtype="float32", d=64, takeaway=None):
    """Chapter 10's three panels from the benchmark CSVs: time of forward+backward against n,
    the ratio of attnlib.flash_* to each peer, and the extra memory of one forward+backward.

    Solid lines use every core, dashed lines one thread. ``takeaway`` is the figure's one-line
    message, written under it.

    Raises
    ------
    AttnInputError
        if the rows are not lists of dicts, ``dtype`` is not "float32" or "float64", or ``d``
        is not a positive integer.
    """
    memory_rows = as_entries("memory_rows", memory_rows, of=_ROWS, entry_type=dict)
    check_choice("dtype", dtype, ("float32", "float64"))
    fig, axes = plt.subplots(1, 3, figsize=(14.5, 4.3))
    times = _benchmark_times(time_rows, dtype=dtype, d=d)
    threads = sorted({t for _, t in times})
    style = {t: ("-" if t == max(threads) else "--") for t in threads}
    ax = axes[0]
    order = {impl: k for k, impl in enumerate(_BENCH_IMPLS)}
    for (impl, t), (ns, secs) in sorted(
        times.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])
    ):
        if impl not in _BENCH_LABELS:  # e.g. the matmul-limit gemm, timed at one n only
            continue
        label = f"{_BENCH_LABELS[impl]}, {t} thr."
        ax.loglog(ns, secs, style[t], marker="o", color=_BENCH_COLORS.get(impl), label=label)
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
            label = f"÷ {_BENCH_LABELS[peer]}, {t} thr."
            ax.plot(common, ratio, style[t], marker="o", color=_BENCH_COLORS[peer], label=label)
    _ratio_axes(ax, "time of flash_* ÷ time of peer")
    ax.yaxis.set_minor_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_title("Ratio (< 1: attnlib is faster)")
    ax.legend(fontsize=7)

    ax = axes[2]
    mem: dict = {}
    for r in memory_rows:
        if r["status"] == "ok" and r["dtype"] == dtype:
            mem.setdefault(r["impl"], []).append((r["n"], r["rss_extra_bytes"], r["qkvodo_bytes"]))
    budget = {}
    for impl in _BENCH_IMPLS:
        if impl not in mem:
            continue
        pts = sorted(mem[impl])
        ns = [p[0] for p in pts]
        extra = [max(p[1], 1.0) / 2**20 for p in pts]
        ax.loglog(ns, extra, marker="o", color=_BENCH_COLORS[impl], label=_BENCH_LABELS[impl])
        budget.update({p[0]: 2 * p[2] / 2**20 for p in pts})
    if budget:
        bn = sorted(budget)
        ax.loglog(bn, [budget[n] for n in bn], "k:", label="2 × |Q, K, V, O, dO|")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("extra peak memory (MiB, RSS)")
    ax.set_title(f"Memory of forward + backward, {dtype}, d = {d}")
    ax.legend(fontsize=7)
    if takeaway:
        add_takeaway(fig, takeaway)
    return fig


def benchmark_ratio_figure(time_rows, *, takeaway=None):
    """Chapter 10's ratio panels, one per head dimension d: forward+backward time of
    attnlib.flash_* divided by that of the faster PyTorch backend (:func:`torch_seconds`) on
    the same shape, in the same run, against n; one line per dtype and thread count. Below 1,
    attnlib is faster. ``takeaway`` is written under the figure.

    Raises
    ------
    AttnInputError
        if ``time_rows`` is not a list of dicts.
    """
    table = flash_vs_torch(time_rows)
    ds = sorted({r["d"] for r in time_rows if r["impl"] == "flash"}) or [None]
    fig, axes = plt.subplots(1, len(ds), figsize=(4.6 * len(ds), 4.0), sharey=True, squeeze=False)
    colors = {"float32": "#1f77b4", "float64": "#9467bd"}
    threads = sorted({row[3] for row in table})
    for ax, d in zip(axes[0], ds, strict=True):
        for dtype in ("float32", "float64"):
            for t in threads:
                pts = [(n, r) for dt, n, dd, tt, _, _, r in table if (dt, dd, tt) == (dtype, d, t)]
                if pts:
                    ns, ratio = zip(*pts, strict=True)
                    style = "-" if t == max(threads) else "--"
                    label = f"{dtype}, {t} thr."
                    ax.plot(ns, ratio, style, marker="o", color=colors[dtype], label=label)
        _ratio_axes(ax)
        # ratios span well under one decade: label a few round values, not only the 1
        ax.yaxis.set_major_locator(mpl.ticker.FixedLocator([0.25, 0.35, 0.5, 0.7, 1, 1.4, 2, 3]))
        ax.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())
        ax.set_title(f"d = {d}" if d else "no flash_* rows")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel("time of flash_* ÷ faster PyTorch backend")
    fig.suptitle("Forward + backward against PyTorch's faster CPU backend (< 1: attnlib faster)")
    if takeaway:
        add_takeaway(fig, takeaway)
    return fig


def exact_over_tiled_figure(ns, io_ratio, time_ratio, flop_ratio, *, d, takeaway=None):
    """Chapter 10.4's comparison of the exact and the tiled path, against n (at head dimension
    ``d``): three ratios exact ÷ tiled, of the words moved on the book's I/O model, of the
    measured time, and of the flops of the matrix products. All are sequences as long as
    ``ns`` of positive numbers; ``takeaway`` is written under the figure.

    Raises
    ------
    AttnInputError
        if a sequence is not positive, finite and as long as ``ns``, or ``d`` is not a
        positive integer.
    """
    ns = as_series("ns", ns, positive=True)
    d = check_int("d", d)
    series = {
        "words moved (book's I/O model)": io_ratio,
        "measured time (1 thread, float32)": time_ratio,
        "flops of the products (costs.flop_count)": flop_ratio,
    }
    fig, ax = plt.subplots()
    names = ("io_ratio", "time_ratio", "flop_ratio")
    for (label, values), name in zip(series.items(), names, strict=True):
        values = as_series(name, values, size=ns.size, like="ns", positive=True)
        ax.loglog(ns, values, "o-", label=label)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"sequence length n (d = {d})")
    ax.set_ylabel("exact path ÷ tiled path")
    ax.set_title("Exact ÷ tiled: the same flops, far fewer words, and a time ratio in between")
    ax.legend()
    if takeaway:
        add_takeaway(fig, takeaway)
    return fig
