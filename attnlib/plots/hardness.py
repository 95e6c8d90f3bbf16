"""Figures of Part III, hardness (Chapter 8): the reductions at work, entry sizes, quadrature."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .._checks import (
    AttnInputError,
    as_curves,
    as_dict,
    as_entries,
    as_series,
    check_int,
    check_positive_real,
    check_real,
)
from ..hardness.ov import _as_bool_pair
from ..measure import loglog_slope
from .style import add_takeaway

__all__ = [
    "split_list_figure",
    "satisfiable_fraction_figure",
    "ov_margins_figure",
    "entry_sizes_figure",
    "derivative_figure",
    "quadrature_errors_figure",
    "noisy_estimates_figure",
]

_NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _finish(fig, ax, xlabel: str, ylabel: str, takeaway: str, **legend):
    """Label the axes, draw the legend and write the takeaway; returns the figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(**legend)
    add_takeaway(fig, takeaway)
    return fig


def split_list_figure(A, B):
    """Chapter 8: the inner products ⟨a, b⟩ of :func:`attnlib.hardness.sat_to_ov`'s tables.

    ``A`` (2^h, C) and ``B`` (2^{h'}, C) are the tables of a formula on h + h' variables (at
    most 6 per side), one row per half-assignment. Each cell is the number of clauses both
    halves leave unsatisfied; the zeros, outlined in red, are the satisfying assignments.
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if A or B is not a 0/1 matrix, their column counts
    differ, or a row count is not a power of two from 2 to 64.
    """
    A, B = _as_bool_pair(A, B)
    bits = []
    for name, X in (("A", A), ("B", B)):
        rows = X.shape[0]
        if rows < 2 or rows > 64 or rows & (rows - 1):
            raise AttnInputError(f"{name} must have 2^h rows with 1 <= h <= 6, got {rows}")
        bits.append(rows.bit_length() - 1)
    inner = A.astype(int) @ B.astype(int).T
    pairs = np.argwhere(inner == 0)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    im = ax.imshow(inner, cmap="Blues")
    for i, j in pairs:
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="#d62728", lw=2.5))
    h, hb = bits
    ax.set_xticks(range(1 << hb), [format(r, f"0{hb}b")[::-1] for r in range(1 << hb)], rotation=90)
    ax.set_yticks(range(1 << h), [format(r, f"0{h}b")[::-1] for r in range(1 << h)])
    names_b = " ".join(f"x{v}" for v in range(h + 1, h + hb + 1))
    ax.set_xlabel(f"half-assignment of {names_b} (row of B)")
    ax.set_ylabel(f"half-assignment of {' '.join(f'x{v}' for v in range(1, h + 1))} (row of A)")
    ax.set_title("⟨a, b⟩ = clauses both halves leave unsatisfied")
    fig.colorbar(im, ax=ax, label="inner product")
    count = _NUMBER_WORDS[len(pairs)] if len(pairs) < len(_NUMBER_WORDS) else str(len(pairs))
    add_takeaway(fig, f"The red zeros are exactly the {count} satisfying assignments.")
    return fig


def satisfiable_fraction_figure(n_vars, fractions):
    """Chapter 8: the fraction of random 3-SAT formulas (clauses = round(4.26 N)) that are
    satisfiable, against the number of variables N. ``n_vars`` and ``fractions`` are equal-
    length sequences. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless both are equal-length real sequences with
    every fraction in [0, 1].
    """
    ns = as_series("n_vars", n_vars)
    frac = as_series("fractions", fractions, size=ns.size, like="n_vars")
    if ((frac < 0) | (frac > 1)).any():
        raise AttnInputError("fractions must lie in [0, 1]")
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    ax.plot(ns, frac, marker="o", label="satisfiable fraction (both brute forces agree)")
    ax.axhline(0.5, color="gray", lw=1, ls=":")
    ax.set_ylim(0, 1.05)
    return _finish(
        fig,
        ax,
        "number of variables N (clauses = round(4.26 N))",
        "fraction satisfiable",
        "Both answers are common: both directions of the reduction get exercised.",
        loc="lower left",
    )


def ov_margins_figure(ns, yes_min, no_max):
    """Chapter 8: the OV → attention decisions against the proof's margins, on log-log axes.

    For each n of ``ns``, the smallest max-row mass on real keys over the YES instances
    (``yes_min``) and the largest over the NO instances (``no_max``), with the threshold
    1/(4n) and the proof's bounds YES ≥ 1/(n+1) and NO < n⁻³ (n floored at 3, as in
    :func:`attnlib.hardness.ov_to_attention`). Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless the three are equal-length positive
    sequences.
    """
    ns = as_series("ns", ns, positive=True)
    yes = as_series("yes_min", yes_min, size=ns.size, like="ns", positive=True)
    no = as_series("no_max", no_max, size=ns.size, like="ns", positive=True)
    nn = np.maximum(ns, 3)
    fig, ax = plt.subplots()
    ax.loglog(ns, yes, "o-", label="YES: smallest max-row mass")
    ax.loglog(ns, no, "s-", label="NO: largest max-row mass")
    ax.loglog(ns, 1 / (4 * nn), "k--", lw=1, label="threshold 1/(4n)")
    ax.loglog(ns, 1 / (nn + 1), ":", color="#2ca02c", label="proof: YES ≥ 1/(n+1)")
    ax.loglog(ns, nn**-3.0, ":", color="#9467bd", label="proof: NO < n⁻³")
    return _finish(
        fig,
        ax,
        "n (vectors per side)",
        "max_i Att[i, 0] (mass on real keys)",
        "YES and NO straddle 1/(4n) within the proof's margins; the gap is not constant.",
        fontsize=8,
    )


def entry_sizes_figure(log_n, ov_built, ov_needed, gap_built, gap_needed):
    """Chapter 8: the entry size B the OV and Gap-ANN reductions build, and the size they
    need (bisection), against ln n on log-log axes, each with its fitted slope, next to
    √(24 ln n). All five are equal-length positive sequences (AS convention, τ = 1/d).
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless all five are equal-length positive
    sequences of at least two points.
    """
    logn = as_series("log_n", log_n, min_size=2, positive=True)  # two points fit a slope
    series = {
        name: as_series(
            name.replace(" ", "_").lower(), vals, size=logn.size, like="log_n", positive=True
        )
        for name, vals in (
            ("OV built", ov_built),
            ("OV needed", ov_needed),
            ("Gap built", gap_built),
            ("Gap needed", gap_needed),
        )
    }
    styles = {"OV built": "o--", "OV needed": "o-", "Gap built": "s--", "Gap needed": "s-"}
    fig, ax = plt.subplots()
    for name, vals in series.items():
        color = "#1f77b4" if name.startswith("OV") else "#d62728"
        alpha = 0.6 if name.endswith("built") else 1.0
        label = f"{name} (slope {loglog_slope(logn, vals):.2f})"
        ax.loglog(logn, vals, styles[name], color=color, alpha=alpha, label=label)
    ax.loglog(logn, np.sqrt(24 * logn), "k:", lw=1, label="√(24 ln n)")
    return _finish(
        fig,
        ax,
        "ln n",
        "entry size B (AS convention, τ = 1/d)",
        "OV needs entries ~ log n; Gap-ANN needs only √(24 ln n), the threshold's order.",
        fontsize=8,
    )


def derivative_figure(lams, derivatives):
    """Chapter 8: f'(λ) = 2 tr(dL/dX at λI) on [0, 1], one panel per instance.

    ``lams`` is the grid of λ and ``derivatives`` a dict of 1 to 7 instance names to the
    values of f' on that grid. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless ``lams`` is a real sequence and
    ``derivatives`` a dict of 1 to 7 real sequences of its length.
    """
    lams = as_series("lams", lams)
    curves = as_curves(
        "derivatives", derivatives, size=lams.size, over="lams", of="instances", max_len=7
    )  # one colour each
    fig, axes = plt.subplots(1, len(curves), figsize=(10 / 3 * len(curves), 3.2), squeeze=False)
    for ax, (name, values) in zip(axes[0], curves.items(), strict=True):
        ax.plot(lams, values)
        ax.set_title(str(name), fontsize=9)
        ax.set_xlabel("λ")
    axes[0][0].set_ylabel("f'(λ) = 2 tr(dL/dX at λI)")
    add_takeaway(fig, "f' is smooth but spikes near λ = 0: a uniform grid wastes its nodes.")
    return fig


def quadrature_errors_figure(gl_nodes, rm_nodes, errors):
    """Chapter 8: the relative error of f(1) recovered from gradient calls, Gauss–Legendre
    (solid) against the left Riemann sum (dashed), by number of calls.

    ``errors`` maps each instance name (1 to 7) to ``(gl, rm)``, the errors at ``gl_nodes``
    and at ``rm_nodes``; errors of exactly 0 are drawn at 1e-17. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if the node counts are not sequences of positive
    integers, ``errors`` is not a dict of 1 to 7 pairs, or an error list does not match its
    nodes (the Riemann errors, drawn on a log scale, must be positive).
    """
    # the node counts attention_from_gradient and riemann_from_gradient accept
    gl_nodes = [check_int("gl_nodes", N, maximum=4096) for N in as_entries("gl_nodes", gl_nodes)]
    rm_nodes = [check_int("rm_nodes", N, maximum=1 << 16) for N in as_entries("rm_nodes", rm_nodes)]

    def pair(label, value):
        gl, rm = as_entries(label, value, of="error lists (gl, rm)", length=2)
        gl = as_series(f"{label} (gl)", gl, size=len(gl_nodes), like="gl_nodes")
        return gl, as_series(
            f"{label} (rm)", rm, size=len(rm_nodes), like="rm_nodes", positive=True
        )

    errors = as_dict("errors", errors, of="instances", max_len=7, check_value=pair)
    fig, ax = plt.subplots()
    for k, (name, (gl, rm)) in enumerate(errors.items()):
        color = f"C{k}"
        label_gl, label_rm = f"Gauss–Legendre, {name}", f"left Riemann, {name}"
        ax.semilogy(gl_nodes, np.maximum(gl, 1e-17), "o-", color=color, label=label_gl)
        ax.semilogy(rm_nodes, rm, "s--", color=color, alpha=0.7, label=label_rm)
    ax.axhline(1e-6, color="gray", lw=1, ls=":")
    ax.set_xscale("log", base=2)
    return _finish(
        fig,
        ax,
        "gradient calls (quadrature nodes)",
        "|estimate − f(1)| / max(1, |f(1)|)",
        "Gauss–Legendre hits rounding level by 64 calls; Riemann falls only like 1/N.",
        fontsize=7,
    )


def noisy_estimates_figure(estimates, thresholds, *, rel: float = 1e-3):
    """Chapter 8: histograms of f(1) recovered from noisy gradients, YES against NO, one
    panel per construction.

    ``estimates`` maps ``(construction, yes)`` to the estimates of f(1) (both answers for each
    construction), ``thresholds`` each construction to its threshold² on f(1); ``rel`` is the
    relative size of the noise, for the titles. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if ``thresholds`` is not a dict of 1 to 4 real
    numbers, a construction lacks the estimates of one of its answers, or ``rel`` is not a
    positive number.
    """
    noise = f"{check_positive_real('rel', rel):.0e}".replace("e-0", "e-")
    thresholds = as_dict(
        "thresholds", thresholds, of="constructions", max_len=4, check_value=check_real
    )
    estimates = as_dict(
        "estimates", estimates, of="(construction, yes) -> estimates", check_value=as_series
    )
    for key in ((kind, yes) for kind in thresholds for yes in (True, False)):
        if key not in estimates:
            raise AttnInputError(f"estimates must hold the key {key!r}")
    fig, axes = plt.subplots(
        1, len(thresholds), figsize=(4.5 * len(thresholds), 3.2), squeeze=False
    )
    for ax, (kind, threshold) in zip(axes[0], thresholds.items(), strict=True):
        values = {yes: estimates[kind, yes] for yes in (True, False)}
        both = np.concatenate([values[True], values[False]])
        bins = np.linspace(both.min(), both.max(), 41)
        for yes, color in ((True, "#2ca02c"), (False, "#d62728")):
            label = "YES" if yes else "NO"
            ax.hist(values[yes], bins=bins, color=color, alpha=0.7, label=label)
        ax.axvline(threshold, color="k", ls="--", lw=1, label="threshold²")
        ax.set_title(f"{kind}: f(1) from gradients + {noise} noise", fontsize=9)
        ax.set_xlabel("estimated f(1) = ‖Att‖²_F")
        ax.set_ylabel("instances")
        ax.legend()
    add_takeaway(
        fig, "Gap-ANN keeps YES ≈ 1 and NO ≈ 0 apart; the OV instances drown in the noise."
    )
    return fig
