"""Figures of the roofline section of Chapter 10: FlashAttention's arithmetic intensity against
the fast memory, real machines' roofs with the kernels placed under them, and the share of the
re-streaming that an L2 absorbs."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from .._checks import (
    AttnInputError,
    as_curves,
    as_dict,
    as_entries,
    as_series,
    check_positive_real,
)
from .style import add_takeaway

__all__ = ["intensity_figure", "roofline_figure", "l2_absorption_figure"]

_DTYPE_STYLE = {"bfloat16": "-", "float32": "--", "float64": ":"}
_MARKERS = "os^vD<>ph*"


def _finish(fig, ax, xlabel: str, ylabel: str, title: str, takeaway: str | None):
    """Label the axes, title the figure and add its takeaway line; return the figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if takeaway:
        add_takeaway(fig, takeaway)
    return fig


def intensity_figure(
    Ms, intensities: dict, balances: dict, *, title: str | None = None, takeaway: str | None = None
):
    """FlashAttention's arithmetic intensity against the fast memory M (Chapter 10).

    ``Ms`` : the fast-memory sizes in words, shape (k,); ``intensities`` : {label: (k,) flops
    per word}, one line each (log-log); ``balances`` : {label: flops per word}, a machine
    balance each, drawn as a horizontal dotted line; ``title`` and ``takeaway`` optional
    text. Raises AttnInputError on empty or non-positive inputs, a label that is not a string
    or mismatched lengths. Returns the Figure.
    """
    Ms = as_series("Ms", Ms, positive=True)
    of = "label -> flops per word"
    intensities = as_curves(
        "intensities", intensities, size=Ms.size, over="Ms", of=of, positive=True
    )
    as_entries("intensities' labels", list(intensities), of="labels", entry_type=str)
    balances = as_dict("balances", balances, of=of, check_value=check_positive_real)
    fig, ax = plt.subplots()
    for k, (label, y) in enumerate(intensities.items()):
        ax.loglog(Ms, y, color=f"C{k % 7}", ls="-" if "forward" in label else "--", label=label)
    for k, (label, beta) in enumerate(balances.items()):
        ax.axhline(beta, color="gray", ls=":", lw=1.2)
        offset = (-4, 3) if k % 2 == 0 else (-4, -9)  # alternate sides: close balances
        ax.annotate(
            label, (Ms[-1], beta), xytext=offset, textcoords="offset points", fontsize=7, ha="right"
        )
    ax.legend(loc="upper left")
    title = title or "FlashAttention-2: intensity against the fast memory"
    return _finish(
        fig, ax, "fast memory M (words)", "arithmetic intensity (flops per word)", title, takeaway
    )


def _rows(what: str, rows, fields: str) -> list:
    """``rows`` as a list of (label, label, positive number, positive number), refused,
    naming the row, when it is not."""
    out = []
    for k, row in enumerate(as_entries(what, rows, of=f"rows ({fields})", min_len=1)):
        name = f"{what}[{k}]"
        first, second, x, y = as_entries(name, row, of=f"fields ({fields})", length=4)
        as_entries(f"{name}'s labels", (first, second), of="labels", entry_type=str)
        out.append(
            (
                first,
                second,
                check_positive_real(f"{name}[2]", x),
                check_positive_real(f"{name}[3]", y),
            )
        )
    return out


def roofline_figure(
    roofs,
    points,
    *,
    ceilings=(),
    title: str | None = None,
    takeaway: str | None = None,
):
    """Roofs of real machines with kernels placed under them, log-log (Chapter 10).

    ``roofs`` : list of (device, dtype, peak FLOP/s, bandwidth in bytes/s); each is drawn as
    min(peak, I·bandwidth) against I in flops per byte, colour by device, line style by dtype
    (bfloat16 solid, float32 dashed, float64 dotted). ``points`` : list of (device, kernel,
    flops per byte, FLOP/s), a marker per kernel in its device's colour. ``ceilings`` : list
    of (device, label, FLOP/s), further flat roofs (the exponentials' throughput), each a
    dash-dotted line in its device's colour with its label. The legend sits under the axes,
    so the figure keeps the book's width. Raises AttnInputError on malformed or non-positive
    entries, or a point or ceiling whose device has no roof. Returns the Figure.
    """
    roofs = _rows("roofs", roofs, "device, dtype, peak FLOP/s, bytes/s")
    points = _rows("points", points, "device, kernel, flops per byte, FLOP/s")
    ceilings = _ceilings(ceilings)
    devices = list(dict.fromkeys(r[0] for r in roofs))
    color = {dev: f"C{k % 7}" for k, dev in enumerate(devices)}
    for what, rows in (("points", points), ("ceilings", ceilings)):
        for dev, *_ in rows:
            if dev not in color:
                raise AttnInputError(f"{what}: device {dev!r} has no roof")
    kernels = list(dict.fromkeys(p[1] for p in points))
    marker = {kern: _MARKERS[k % len(_MARKERS)] for k, kern in enumerate(kernels)}
    x_lo = min(min(p[2] for p in points), min(r[2] / r[3] for r in roofs)) / 4
    x_hi = max(max(p[2] for p in points), max(r[2] / r[3] for r in roofs)) * 4
    x = np.geomspace(x_lo, x_hi, 200)
    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    for dev, dtype, peak, bandwidth in roofs:
        ax.loglog(
            x, np.minimum(peak, x * bandwidth), color=color[dev], ls=_DTYPE_STYLE.get(dtype, "-.")
        )
    for dev, label, flops in ceilings:
        ax.axhline(flops, color=color[dev], ls="-.", lw=1.2)
        ax.annotate(label, (x_lo, flops), xytext=(3, 3), textcoords="offset points", fontsize=8)
    for dev, kern, xi, flops in points:
        ax.loglog([xi], [flops], marker[kern], color=color[dev], ms=7, mec="black", mew=0.6)
    handles = [Line2D([], [], color=color[d], label=d) for d in devices]
    dtypes = list(dict.fromkeys(r[1] for r in roofs))
    handles += [Line2D([], [], color="gray", ls=_DTYPE_STYLE.get(t, "-."), label=t) for t in dtypes]
    handles += [Line2D([], [], ls="", marker=marker[k], color="gray", label=k) for k in kernels]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8)
    xlabel = "arithmetic intensity (flops per byte of main memory)"
    title = title or "The roofline: peak FLOP/s or intensity × bandwidth"
    return _finish(fig, ax, xlabel, "attainable throughput (FLOP/s)", title, takeaway)


def _ceilings(ceilings) -> list:
    """``ceilings`` as a list of (device, label, positive FLOP/s), refused, naming the row,
    when it is not."""
    out = []
    for k, row in enumerate(as_entries("ceilings", ceilings, of="rows (device, label, FLOP/s)")):
        name = f"ceilings[{k}]"
        dev, label, flops = as_entries(name, row, of="fields (device, label, FLOP/s)", length=3)
        as_entries(f"{name}'s labels", (dev, label), of="labels", entry_type=str)
        out.append((dev, label, check_positive_real(f"{name}[2]", flops)))
    return out


def l2_absorption_figure(
    ns, one_head: dict, shared: dict, *, title: str | None = None, takeaway: str | None = None
):
    """The part of FlashAttention's K/V re-streaming that the L2 absorbs, against n
    (Chapter 10, the three-level model).

    ``ns`` : sequence lengths, shape (k,); ``one_head`` and ``shared`` : {label: (k,)
    fractions in [0, 1]} with the same labels, the L2 given to one head (solid) or shared
    among the heads in flight (dashed); ``title`` and ``takeaway`` optional text. Raises
    AttnInputError on mismatched labels or shapes, or fractions outside [0, 1]. Returns the
    Figure.
    """
    ns = as_series("ns", ns, positive=True)
    fractions = {"of": "label -> fractions", "size": ns.size, "over": "ns"}
    one_head = as_curves("one_head", one_head, **fractions)
    shared = as_curves("shared", shared, keys=one_head, like="one_head", **fractions)
    for name, curves in (("one_head", one_head), ("shared", shared)):
        for label, y in curves.items():
            if not np.all((y >= 0) & (y <= 1)):
                raise AttnInputError(f"{name}[{label!r}] must be fractions in [0, 1]")
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    for k, label in enumerate(one_head):
        for y, ls in ((one_head[label], "-"), (shared[label], "--")):
            ax.semilogx(ns, 100 * y, ls=ls, marker="o", color=f"C{k % 7}")
    handles = [Line2D([], [], color=f"C{k % 7}", label=label) for k, label in enumerate(one_head)]
    handles += [Line2D([], [], color="gray", ls="-", label="L2 for one head")]
    handles += [Line2D([], [], color="gray", ls="--", label="L2 shared by the heads in flight")]
    ax.legend(handles=handles, fontsize=7, loc="lower left")
    ax.set_xscale("log", base=2)
    ax.set_ylim(-3, 103)
    ylabel = "K/V re-streaming absorbed by L2 (%)"
    title = title or "HBM reads the L2 saves"
    return _finish(fig, ax, "sequence length n (tokens)", ylabel, title, takeaway)
