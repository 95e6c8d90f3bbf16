"""Figures of Part II, the polynomial method (Chapters 6 and 7).

Chapter 6: the error of the two constructions of p ≈ exp, the least degree, the rounding floor,
the rank exponent over n and B/√(ln n). Chapter 7: the approximate gradient's error, time,
memory and rank above the threshold. The chapters compute and check the numbers; these
builders only draw.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from .. import polymethod as pm
from .._checks import (
    AttnInputError,
    as_curves,
    as_dict,
    as_entries,
    as_real_array,
    as_series,
    check_int,
    check_open_unit,
    check_positive_real,
    check_real,
)
from .style import add_takeaway

__all__ = [
    "exp_poly_error_figure",
    "least_degree_figure",
    "degree_error_figure",
    "rounding_floor_figure",
    "threshold_collapse_figure",
    "least_degree_grid_figure",
    "gradient_error_figure",
    "error_and_rank_figure",
    "gradient_time_figure",
    "gradient_memory_figure",
    "threshold_figure",
]


def _axes(ax):
    """A new figure and axes, or ``ax`` (a matplotlib Axes) and its figure."""
    if ax is None:
        return plt.subplots()
    if not isinstance(ax, Axes):
        raise AttnInputError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax.figure, ax


#: The most curves a figure draws in one colour each.
_COLORS = 7


def _pairs(name: str, table, keys, *, of: str, like: str) -> dict:
    """``table``: the same keys as ``keys`` (those of the argument ``like``), each value a
    pair of real numbers (two fitted slopes, say)."""

    def pair(label, value):
        return tuple(check_real(label, v) for v in as_entries(label, value, of=of, length=2))

    return as_dict(name, table, of=of, keys=keys, like=like, check_value=pair)


def _curves(of: str, grids: list, **kw):
    """The check of one value of a dict of curves (for :func:`as_dict`): ``len(grids)``
    series, the k-th as long as ``grids[k]``, a pair (size, name of the grid)."""

    def check(label, value):
        value = as_entries(label, value, of=of, length=len(grids))
        return tuple(
            as_series(f"{label}[{k}]", y, size=size, like=like, **kw)
            for k, (y, (size, like)) in enumerate(zip(value, grids, strict=True))
        )

    return check


def exp_poly_error_figure(R, eps, *, ax=None):
    """Relative error p(x)e^{-x} - 1 on [-R, R] of exp_poly's Chebyshev and Taylor polynomials.

    Draws ±eps as dashed lines and puts each polynomial's degree in the legend. A request that
    double precision cannot meet keeps these axes: the ±eps band hatched, and the reason written
    in the plot (Chapter 6 and its live figure). Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if R is not a positive finite number, eps is not
    in (0, 1), or ax is neither None nor a matplotlib Axes.
    """
    R, eps = check_positive_real("R", R), check_open_unit("eps", eps)
    fig, ax = _axes(ax)
    x, refused, why = np.linspace(-R, R, 2001), [], ""
    for kind, style in (("chebyshev", "-"), ("taylor", ":")):
        try:
            p = pm.exp_poly(R, eps, kind=kind)
        except AttnInputError as exc:  # the message's parenthesis says why
            refused, why = [*refused, kind], str(exc).partition(" (")[2].partition(");")[0]
            continue
        ax.plot(x, p(x) * np.exp(-x) - 1.0, style, label=f"{kind}, degree {p.degree()}")
    if refused:  # on the axes an accepted point has: the ±eps band no polynomial reaches
        ax.fill_between(x, -eps, eps, color="C3", alpha=0.15, hatch="//", label="refused")
        why = f"{' and '.join(refused)} refused:\n{why}\n(floor {pm.rounding_floor(R):.0e})"
        ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center",
                va="center", fontsize=9, bbox={"fc": "white", "ec": "C3"})  # fmt: skip
    ax.axhline(eps, color="gray", ls="--", lw=1, label=r"$\pm\varepsilon$")
    ax.axhline(-eps, color="gray", ls="--", lw=1)
    ax.set_xlim(-R, R)
    ax.set_xlabel("logit x")
    ax.set_ylabel(r"relative error $p(x)e^{-x} - 1$")
    if not ax.get_title():
        ax.set_title(f"R = {R:g}, eps = {eps:.0e}" + (": refused" if refused else ""))
    ax.legend(loc="lower right")
    return fig


def least_degree_figure(Rs, epss, *, ax=None):
    """Measured least degree (Chebyshev solid, Taylor dotted) against R, one colour per eps,
    next to AA22's order formula max{2R, L/log(L/2R)} (dashed, constant 1). Chapter 6.

    Rs: positive logit ranges; epss: accuracies in (0, 1), at most seven. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on a bad R, eps or ax, or a request out of reach.
    """
    Rs = as_series("Rs", Rs, positive=True)
    epss = as_series("epss", epss)
    if epss.size > _COLORS:
        raise AttnInputError(f"epss must have at most {_COLORS} entries (one colour each)")
    epss = [check_open_unit(f"epss[{i}]", e) for i, e in enumerate(epss)]
    fig, ax = _axes(ax)
    for i, eps in enumerate(epss):
        color = f"C{i}"
        cheb = [pm.least_degree(R, eps) for R in Rs]
        tay = [pm.least_degree(R, eps, kind="taylor") for R in Rs]
        aa22 = [pm.aa22_degree(R, eps) for R in Rs]
        ax.plot(Rs, cheb, "o-", color=color, label=f"Chebyshev, eps={eps:.0e}")
        ax.plot(Rs, tay, "s:", color=color, label=f"Taylor, eps={eps:.0e}")
        ax.plot(Rs, aa22, "--", color=color, alpha=0.6, label=f"AA22 formula, eps={eps:.0e}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("logit range R (logits in [-R, R])")
    ax.set_ylabel("polynomial degree g")
    ax.legend(fontsize=7, ncol=len(epss))
    return fig


def degree_error_figure(R_values, degrees, measured, bounds):
    """Chapter 6: measured relative error of the degree-g Taylor and Chebyshev candidates
    against g, next to the bounds of :func:`attnlib.polymethod.relative_error_bound` and the
    rounding floor, one panel per R.

    ``measured`` and ``bounds`` map each of ``"taylor"``, ``"chebyshev"`` to an array of shape
    (len(R_values), len(degrees)). Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on a bad R, a missing kind or a wrong shape.
    """
    Rs = as_series("R_values", R_values, positive=True).tolist()
    degrees = as_series("degrees", degrees)
    data = {}
    for name, table in (("measured", measured), ("bounds", bounds)):
        table = as_dict(name, table, of="kind -> errors")
        for kind in ("taylor", "chebyshev"):
            if kind not in table:
                raise AttnInputError(f"{name} must have an entry for {kind!r}")
            arr = as_real_array(f"{name}[{kind!r}]", table[kind], ndim=2)
            if arr.shape != (len(Rs), degrees.size):
                raise AttnInputError(
                    f"{name}[{kind!r}] must have shape (len(R_values), len(degrees)) = "
                    f"{(len(Rs), degrees.size)}, got {arr.shape}"
                )
            data[name, kind] = arr
    fig, axes = plt.subplots(1, len(Rs), figsize=(5.5 * len(Rs), 3.8), sharey=True, squeeze=False)
    for i, (ax, R) in enumerate(zip(axes[0], Rs, strict=True)):
        for kind, style in (("taylor", ":"), ("chebyshev", "-")):
            (line,) = ax.semilogy(
                degrees, data["measured", kind][i], "o" + style, ms=3, label=f"{kind}, measured"
            )
            ax.semilogy(
                degrees,
                data["bounds", kind][i],
                style,
                color=line.get_color(),
                alpha=0.4,
                label=f"{kind}, bound",
            )
        floor = pm.rounding_floor(R)
        ax.axhline(floor, color="gray", lw=1, ls="--", label=r"rounding floor $2^{-52}e^{2R}$")
        ax.set_ylim(1e-17, 1e3)
        ax.set_xlabel("degree g")
        ax.set_title(f"R = {R:g}")
    axes[0, 0].set_ylabel("max relative error on [-R, R]")
    axes[0, -1].legend(fontsize=8)
    add_takeaway(
        fig,
        "Chebyshev reaches a given accuracy with a markedly lower degree than Taylor; "
        "rounding stops both near 2^-52 e^(2R).",
    )
    return fig


def rounding_floor_figure(degrees, errors):
    """Chapter 6: measured error of the Chebyshev candidate against its degree for several R
    (``errors`` maps R to one error per degree), each with its floor u·e^{2R} dashed.
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on a bad R or a length that differs from degrees'.
    """
    degrees = as_series("degrees", degrees)
    errors = as_curves(
        "errors", errors, size=degrees.size, over="degrees", of="R -> errors", max_len=_COLORS
    )
    fig, ax = plt.subplots()
    for R, errs in errors.items():
        R = check_positive_real("R", R)
        (line,) = ax.semilogy(degrees, errs, label=f"R = {R:g}")
        ax.axhline(pm.rounding_floor(R), color=line.get_color(), ls="--", lw=1)
    ax.set_xlabel("degree g (Chebyshev)")
    ax.set_ylabel("max relative error on [-R, R]")
    ax.legend()
    ax.set_title("Rounding floor (dashed: $2^{-52}e^{2R}$)")
    add_takeaway(
        fig,
        "In double precision the relative error cannot go below about 2^-52 e^(2R): "
        "at R = 8, 1e-9 is out of reach.",
    )
    return fig


def threshold_collapse_figure(sweep, fixed):
    """Chapter 6: the exponent κ = log r / log n of the plan against c = B/√(ln n), one curve
    per n, for d ∝ log n (left, ``sweep``) and for one fixed d (right, ``fixed``), both
    :class:`attnlib.polymethod.ThresholdSweep`. Solid: the library's least degree; dashed:
    AA22's formula (constant 1) at the smallest and largest n; crosses: refused requests
    (ε = 1/n below the double-precision floor), drawn at the formula's κ. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if either argument is not a ThresholdSweep.
    """
    for name, value in (("sweep", sweep), ("fixed", fixed)):
        if not isinstance(value, pm.ThresholdSweep):
            raise AttnInputError(
                f"{name} must be a ThresholdSweep (pm.threshold_sweep), got {type(value).__name__}"
            )
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, sw in zip(axes, (sweep, fixed), strict=True):
        what = f"d = {sw.d[0]} at every n" if sw.d.min() == sw.d.max() else "d grows with log n"
        colors = plt.cm.viridis(np.linspace(0.0, 0.9, sw.log2_n.size))
        for i, (k, color) in enumerate(zip(sw.log2_n, colors, strict=True)):
            label = f"n = 2^{k}, d = {sw.d[i]}" if i in (0, sw.log2_n.size - 1) else None
            ax.semilogx(sw.c, sw.kappa[i], "-", color=color, lw=1.2, label=label)
            gone = sw.refused[i]
            ax.semilogx(sw.c[gone], sw.aa22_kappa[i][gone], "x", color=color, ms=4)
            if i in (0, sw.log2_n.size - 1):
                ax.semilogx(sw.c, sw.aa22_kappa[i], "--", color=color, lw=0.8)
        ax.axhline(1.0, color="gray", ls=":", lw=1, label="r = n: time n²·d, as exact")
        ax.set_xlabel(r"$c = B/\sqrt{\ln n}$  (logit range $R = c^2 \ln n$)")
        ax.set_title(f"{what}, ε = 1/n", fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel(r"exponent $\kappa = \log r / \log n$ (time $n^{1+\kappa} d$)")
    add_takeaway(
        fig,
        "With d proportional to log n the curves for n = 2^8 ... 2^20 fall on one another and "
        "cross r = n near one c; with d fixed they slide down as n grows.",
    )
    return fig


def least_degree_grid_figure(grid_R, grid_eps, degrees):
    """Chapter 6: the least Chebyshev degree over a grid of (R, eps) as a heat map with the
    degree written in each cell, × where the request is refused (NaN in ``degrees``, of shape
    (len(grid_eps), len(grid_R))). Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on a wrong shape or an eps outside (0, 1).
    """
    grid_R = as_series("grid_R", grid_R)
    grid_eps = [
        check_open_unit(f"grid_eps[{i}]", e) for i, e in enumerate(as_series("grid_eps", grid_eps))
    ]
    deg = as_real_array("degrees", degrees, ndim=2, allow_nonfinite=True)
    if deg.shape != (len(grid_eps), grid_R.size):
        raise AttnInputError(
            f"degrees must have shape (len(grid_eps), len(grid_R)) = "
            f"{(len(grid_eps), grid_R.size)}, got {deg.shape}"
        )
    fig, ax = plt.subplots(figsize=(7, 4))
    im = ax.imshow(deg, aspect="auto", origin="upper", cmap="viridis")
    top = np.nanmax(deg) if not np.isnan(deg).all() else 0.0
    for (a, b), g in np.ndenumerate(deg):
        dark = np.isnan(g) or g > top / 2
        text = "×" if np.isnan(g) else int(g)
        ax.text(
            b, a, text, ha="center", va="center", fontsize=7, color="black" if dark else "white"
        )
    ax.set_xticks(range(grid_R.size), [f"{R:g}" for R in grid_R])
    ax.set_yticks(range(len(grid_eps)), [f"{e:.0e}" for e in grid_eps])
    ax.set_xlabel("logit range R")
    ax.set_ylabel("relative accuracy eps")
    fig.colorbar(im, label="least Chebyshev degree g")
    ax.set_title("Least degree over the widget's sweep (× = refused)")
    add_takeaway(
        fig,
        "The degree grows with R and with log(1/eps); the corner of large R and small eps is "
        "out of reach.",
    )
    return fig


def gradient_error_figure(eps_ladder, errors, *, n, d):
    """Chapter 7: relative error of the approximate dL/dX against the requested eps, one curve
    per entry bound B (``errors`` maps B to one error per eps), next to error = eps.
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on a bad eps, length, n or d.
    """
    eps_ladder = as_series("eps_ladder", eps_ladder, positive=True)
    n, d = check_int("n", n), check_int("d", d)
    grid = {"size": eps_ladder.size, "over": "eps_ladder", "positive": True}
    errors = as_curves("errors", errors, of="B -> errors", max_len=_COLORS, **grid)
    fig, ax = plt.subplots()
    for B, errs in errors.items():
        ax.loglog(eps_ladder, errs, "o-", label=f"B = {B}")
    ax.loglog(eps_ladder, eps_ladder, "k--", lw=1, label="error = eps")
    ax.set_xlabel("requested relative accuracy eps of exp")
    ax.set_ylabel("relative error of dL/dX (max-abs)")
    ax.invert_xaxis()
    ax.legend()
    ax.set_title(f"Gradient error against eps (n = {n}, d = {d})")
    add_takeaway(
        fig, "The gradient error falls with eps and stays below it on these random inputs."
    )
    return fig


def error_and_rank_figure(B_grid, errors, ranks):
    """Chapter 7: at fixed eps, the gradient's relative error (left) and the rank of the
    polynomial method (right) against the entry bound B; ``errors`` and ``ranks`` map each
    eps to one value per B. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on mismatched eps keys or lengths.
    """
    B_grid = as_series("B_grid", B_grid)
    grid = {"size": B_grid.size, "over": "B_grid", "positive": True}
    errors = as_curves("errors", errors, of="eps -> errors", max_len=_COLORS, **grid)
    ranks = as_curves("ranks", ranks, of="eps -> ranks", keys=errors, like="errors", **grid)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for eps, errs in errors.items():
        label = f"eps = {check_open_unit('eps', eps):.0e}"
        ax1.semilogy(B_grid, errs, "o-", label=label)
        ax2.semilogy(B_grid, ranks[eps], "o-", label=label)
    for ax, what in ((ax1, "relative error of dL/dX"), (ax2, "rank r = C(g+d, d)")):
        ax.set_xlabel("entry bound B")
        ax.set_ylabel(what)
        ax.legend()
    add_takeaway(
        fig,
        "At fixed eps the error stays below eps for every B; the rank, and with it time and "
        "memory, grows.",
    )
    return fig


def gradient_time_figure(ns, times, *, ranks, slopes, crossovers, eps, R):
    """Chapter 7: CPU time of dL/dX against n (the fastest round of the book's benchmark),
    exact (numpy, materialising; tiled compiled kernel) and approximate, one colour per d.

    ``ns`` is the triple of n grids (numpy, tiled kernel, approximate); ``times`` maps d to
    the triple of times in seconds on those grids; ``ranks`` maps d to the rank, ``slopes`` to
    the fitted (numpy, approximate) slopes, ``crossovers`` to the n where the approximate
    gradient overtakes the numpy one (or None, not drawn). Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on mismatched keys or lengths, or bad eps or R.
    """
    grids = "n grids (numpy, tiled kernel, approximate)"
    ns = [
        as_series(f"ns[{k}]", x, positive=True)
        for k, x in enumerate(as_entries("ns", ns, of=grids, length=3))
    ]
    of = "time series (numpy, tiled kernel, approximate)"
    triple = _curves(of, [(x.size, f"ns[{k}]") for k, x in enumerate(ns)], positive=True)
    times = as_dict("times", times, of="d -> time series", max_len=_COLORS, check_value=triple)
    ranks = as_dict("ranks", ranks, of="d -> ranks", keys=times, like="times")
    slopes = _pairs("slopes", slopes, times, of="fitted slopes (numpy, approximate)", like="times")
    crossovers = as_dict(
        "crossovers",
        crossovers,
        of="d -> n or None",
        keys=times,
        like="times",
        check_value=lambda label, n: None if n is None else check_positive_real(label, n),
    )
    eps, R = check_open_unit("eps", eps), check_positive_real("R", R)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (d, (t_exact, t_tiled, t_approx)) in enumerate(times.items()):
        slope_e, slope_a = slopes[d]
        color = f"C{i}"
        ax.loglog(
            ns[0], t_exact, "s-", color=color, label=f"exact numpy, d={d} (slope {slope_e:.2f})"
        )
        ax.loglog(ns[1], t_tiled, "^:", color=color, label=f"exact tiled kernel, d={d}")
        label = f"approx, d={d}, r={ranks[d]} (slope {slope_a:.2f})"
        ax.loglog(ns[2], t_approx, "o--", color=color, label=label)
        cross = crossovers[d]
        if cross is not None:
            ax.axvline(cross, color=color, lw=0.8, alpha=0.6)
            ax.annotate(
                f"n*≈{cross:.0f}",
                (cross, t_exact.min()),
                color=color,
                rotation=90,
                fontsize=8,
                va="bottom",
            )
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("CPU time for dL/dX (s), fastest round")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(
        f"Exact (numpy; tiled kernel) against approximate gradient, eps = {eps:g}, R = {R:g}"
    )
    add_takeaway(
        fig,
        "Exact grows like n^2, approximate like n; vertical lines: crossovers against numpy. "
        "The tiled kernel narrows the margin.",
    )
    return fig


def gradient_memory_figure(ns, peaks, *, slopes, fit_from, eps):
    """Chapter 7: peak traced memory of one gradient against n, exact and approximate, one
    colour per d. ``ns`` is the pair of n grids (exact, approximate), ``peaks`` maps d to the
    pair of peaks in MiB on those grids, ``slopes`` to the fitted (exact, approximate) slopes,
    the approximate one fitted from n = ``fit_from``. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on mismatched keys or lengths, or a bad eps.
    """
    ns = [
        as_series(f"ns[{k}]", x, positive=True)
        for k, x in enumerate(as_entries("ns", ns, of="n grids (exact, approximate)", length=2))
    ]
    of = "peak series (exact, approximate)"
    pair = _curves(of, [(x.size, f"ns[{k}]") for k, x in enumerate(ns)], positive=True)
    peaks = as_dict("peaks", peaks, of="d -> peak series", max_len=_COLORS, check_value=pair)
    slopes = _pairs("slopes", slopes, peaks, of="fitted slopes (exact, approximate)", like="peaks")
    fit_from, eps = check_int("fit_from", fit_from), check_open_unit("eps", eps)
    fig, ax = plt.subplots()
    for i, (d, (peak_e, peak_a)) in enumerate(peaks.items()):
        s_e, s_a = slopes[d]
        # The exact peaks hardly depend on d: draw each later line thinner so both show.
        size = {"lw": 3.0 - 1.2 * i, "ms": 8.0 - 2.5 * i}
        label = f"exact, d={d} (slope {s_e:.2f})"
        ax.loglog(ns[0], peak_e, "s-", color=f"C{i}", label=label, **size)
        label = f"approx, d={d} (slope {s_a:.2f}, n >= {fit_from})"
        ax.loglog(ns[1], peak_a, "o--", color=f"C{i}", label=label)
    ax.set_xscale("log", base=2)  # n runs over powers of two: label them, without minor ticks
    ax.minorticks_off()
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("peak traced memory (MiB)")
    ax.legend()
    ax.set_title(f"Peak memory of one gradient, eps = {eps:g}")
    add_takeaway(
        fig, "Exact memory grows like n^2, approximate like n·r; the ratio is n/r up to constants."
    )
    return fig


def threshold_figure(cs, measured, model, *, n):
    """Chapter 7: degree (left) and rank (right) of the polynomial method at eps = 1/n against
    the entry bound B in units of √(ln n): ``measured`` maps d to (degrees, ranks) of the
    library's plan (NaN where refused), ``model`` to those of AA22's formula with constant 1.
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` on mismatched keys or lengths, or a bad n.
    """
    cs = as_series("cs", cs)
    n = check_int("n", n, minimum=2)
    of, grids = "series (degrees, ranks)", [(cs.size, "cs")] * 2
    measured = as_dict(
        "measured", measured, of=of, max_len=_COLORS, check_value=_curves(of, grids, missing=True)
    )
    model = as_dict(
        "model", model, of=of, keys=measured, like="measured", check_value=_curves(of, grids)
    )
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, d in enumerate(measured):
        (g_meas, r_meas), (g_model, r_model) = measured[d], model[d]
        style = {"color": f"C{i}", "alpha": 0.6}
        ax1.plot(cs, g_meas, "o-", color=f"C{i}", label=f"measured, d={d}")
        ax1.plot(cs, g_model, "--", **style, label=f"AA22 formula, d={d}")
        ax2.semilogy(cs, r_meas, "o-", color=f"C{i}", label=f"measured, d={d}")
        ax2.semilogy(cs, r_model, "--", **style, label=f"AA22 formula, d={d}")
    ax2.axhline(n, color="gray", ls=":", label="r = n (no saving)")
    for ax, what in ((ax1, "degree g"), (ax2, "rank r = C(g+d, d)")):
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_xlabel(r"entry bound $B / \sqrt{\ln n}$")
        ax.set_ylabel(what)
        ax.legend(fontsize=7)
    add_takeaway(
        fig,
        f"n = {n}, eps = 1/n: as B passes sqrt(ln n) the degree climbs and the rank overtakes n; "
        "soon after, double precision gives up.",
    )
    return fig
