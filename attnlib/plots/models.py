"""Figures of Part IV, the evidence (Chapter 9): real heads and deep stacks. The decision map
and the methods' costs are in :mod:`attnlib.plots.advice`."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from .._checks import (
    AttnInputError,
    as_dict,
    as_float_array,
    as_series,
    check_int,
    check_open_unit,
    check_real,
)
from .style import add_takeaway

__all__ = [
    "LOGIT_QUANTILES",
    "logit_distribution_figure",
    "entry_bound_figure",
    "int8_rounding_figure",
    "threshold_sweep_figure",
    "polynomial_accuracy_figure",
    "depth_error_figure",
]


#: The quantiles of a head's logits that :func:`logit_distribution_figure` draws: whiskers at
#: 0.1% and 99.9%, the box from 25% to 75%, the median.
LOGIT_QUANTILES = (0.001, 0.25, 0.5, 0.75, 0.999)


#: The largest sequence length or word count a figure takes: held in int64, and its square a
#: float.
_MAX_N = 2**62


def _colors() -> list:
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def logit_distribution_figure(quantiles, extremes, *, n: int):
    """Box plots of every head's logits, layer by layer (Chapter 9, the logits of MiniLM).

    ``quantiles`` (L, H, 5): each head's logits at :data:`LOGIT_QUANTILES` (whiskers, box,
    median); ``extremes`` (L, H, 2): each head's smallest and largest logit (drawn as dots);
    ``n`` the sequence length, for the title. The takeaway quotes the range of each layer's
    most extreme logit. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if the arrays are not finite of shapes (L, H, 5)
    and (L, H, 2), or n is not an integer ≥ 1.
    """
    q = as_float_array("quantiles", quantiles, ndim=3)
    ext = as_float_array("extremes", extremes, ndim=3)
    n = check_int("n", n)
    L, H, k = q.shape
    if k != len(LOGIT_QUANTILES) or ext.shape != (L, H, 2):
        raise AttnInputError(
            f"quantiles and extremes must have shapes (L, H, {len(LOGIT_QUANTILES)}) and "
            f"(L, H, 2), got {q.shape} and {ext.shape}"
        )
    colors = _colors()
    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    for layer in range(L):
        stats = [
            dict(zip(("whislo", "q1", "med", "q3", "whishi"), q[layer, h], strict=True))
            | {"fliers": list(ext[layer, h])}
            for h in range(H)
        ]
        bp = ax.bxp(
            stats,
            positions=layer * (H + 2) + np.arange(H),
            widths=0.7,
            patch_artist=True,
            flierprops={"marker": ".", "markersize": 3},
        )
        for box in bp["boxes"]:
            box.set_facecolor(colors[layer % len(colors)])
            box.set_alpha(0.5)
    ax.set_xticks([layer * (H + 2) + (H - 1) / 2 for layer in range(L)])
    ax.set_xticklabels([f"layer {layer}\n(heads 0–{H - 1})" for layer in range(L)])
    ax.set_ylabel(r"logit $\langle q_i, k_j\rangle/\sqrt{d}$ (dimensionless)")
    ax.set_title(
        f"Logits of every head of all-MiniLM-L6-v2 (n = {n}): boxes 25–75%, "
        "whiskers 0.1–99.9%, dots min/max"
    )
    largest = np.abs(ext).max(axis=(1, 2))
    add_takeaway(
        fig,
        f"Most logits are small, but each layer's most extreme logit reaches {largest.min():.0f}"
        f" to {largest.max():.0f}: the range R, not the typical logit, sets the polynomial degree.",
    )
    return fig


def entry_bound_figure(B_heads, R_observed):
    """The entry bound B of every head against √(ln n), per layer (Chapter 9).

    ``B_heads`` and ``R_observed`` map each sequence length n to an (L, H) array: the AS24
    entry bound of each head and the largest |logit| it produced. Bars span min–max of B over
    the heads; triangles mark √R_obs (max and min over heads), the smallest B that could
    explain the logits; dashed lines are √(ln n). Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless both are non-empty dicts with the same
    integer keys ≥ 2 and finite (L, H) arrays of one shape.
    """
    B, R = (
        as_dict(name, table, of="n -> (L, H) arrays", check_value=as_float_array)
        for name, table in (("B_heads", B_heads), ("R_observed", R_observed))
    )
    B = {check_int("B_heads key", n, minimum=2): a for n, a in B.items()}
    if list(B) != list(R) or len({a.shape for a in (*B.values(), *R.values())}) != 1:
        raise AttnInputError(
            "B_heads and R_observed must have the same lengths n and one (L, H) shape"
        )
    colors = _colors()
    L = next(iter(B.values())).shape[0]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for k, n in enumerate(B):
        x = np.arange(L) + (k - (len(B) - 1) / 2) * 0.22
        lo, hi = B[n].min(axis=1), B[n].max(axis=1)
        ax.vlines(
            x, lo, hi, color=colors[k], lw=6, alpha=0.7, label=f"B, min–max over heads, n = {n}"
        )
        ax.plot(x, np.sqrt(R[n]).max(axis=1), "v", color=colors[k], ms=5)
        ax.plot(x, np.sqrt(R[n]).min(axis=1), "^", color=colors[k], ms=5)
        ax.axhline(math.sqrt(math.log(n)), color=colors[k], ls="--", lw=1)
    ax.plot([], [], "kv", label=r"$\sqrt{R_{\rm obs}}$, max / min over heads ($\wedge$)")
    ax.plot([], [], "k--", lw=1, label=r"$\sqrt{\ln n}$ (the threshold)")
    ax.set_yscale("log")
    ax.set_xticks(range(L))
    ax.set_xlabel("layer")
    ax.set_ylabel("entry bound B (AS24 convention, dimensionless)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(r"B of every head, with $\sqrt{\ln n}$ as a yardstick (it has no constant)")
    ratio = min(B[n].min() / math.sqrt(math.log(n)) for n in B)
    add_takeaway(fig, f"The smallest B of any head is {ratio:.1f} × √(ln n) at its length.")
    return fig


def int8_rounding_figure(B_ratio, errors):
    """Per head: B after int8 rounding over B before, against the attention error (Chapter 9).

    ``B_ratio`` and ``errors`` map each clip quantile c (1 = no clipping, see
    :func:`attnlib.models.int8_round`) to one value per head. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless both are non-empty dicts with the same keys
    in (0, 1] and equal-length sequences of positive numbers.
    """
    B_ratio = as_dict("B_ratio", B_ratio, of="clip quantile -> ratios", check_value=as_series)
    errors = as_dict("errors", errors, of="clip quantile -> errors", keys=B_ratio, like="B_ratio")
    for c, b in B_ratio.items():
        check_real("B_ratio's key c", c, minimum=0, maximum=1, open_minimum=True)
        errors[c] = as_series(
            f"errors[{c!r}]", errors[c], size=b.size, like=f"B_ratio[{c!r}]", positive=True
        )
    colors = _colors()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for k, (c, b) in enumerate(B_ratio.items()):
        e = errors[c]
        label = "no clipping" if c == 1 else f"clip at {100 * c:g}th pct."
        ax.scatter(b, e, s=10, color=colors[k], label=label, alpha=0.7)
    ax.set_yscale("log")
    ax.set_xlabel("B after int8 rounding / B before (per head)")
    ax.set_ylabel(r"attention output error $\max|\hat O - O|/\max|V|$")
    ax.legend()
    ax.set_title("int8 rounding leaves B unchanged; only clipping shrinks it, at a cost")
    c = min(B_ratio)
    add_takeaway(
        fig,
        f"Clipping at the {100 * c:g}th percentile: median B × {np.median(B_ratio[c]):.2f}, "
        f"median error {np.median(errors[c]):.0e}.",
    )
    return fig


def threshold_sweep_figure(B_grid, ranks, errors, *, n: int, degree: int, eps: float, B_range):
    """One real head rescaled so that B sweeps across √(ln n) (Chapter 9), two panels.

    Left, the rank C(g+d, d) of the least degree g for accuracy ``eps`` at each B of
    ``B_grid`` (NaN where no double-precision polynomial exists), against n²; right, the
    attention error with the degree held at ``degree``, against ``eps``. The dashed line is
    √(ln n); the shaded band ``B_range`` = (lo, hi) is the B of the real heads. Returns the
    Figure.

    Raises :class:`attnlib.AttnInputError` on sequences of different lengths, non-positive
    B or errors, n (at most 2⁶²) or degree not a positive integer, or a B_range that is not
    (lo, hi).
    """
    B = as_series("B_grid", B_grid, positive=True)
    r = as_series("ranks", ranks, positive=True, missing=True)
    e = as_series("errors", errors, positive=True)
    if not r.size == e.size == B.size:
        raise AttnInputError("B_grid, ranks and errors must be sequences of one length")
    # n² is drawn: a sequence length held in int64 keeps it a float
    n, degree = check_int("n", n, maximum=_MAX_N), check_int("degree", degree)
    lo, hi = as_series("B_range", B_range, size=2, positive=True)
    if lo > hi:
        raise AttnInputError(f"B_range must be (lo, hi) with lo <= hi, got {B_range!r:.60}")
    eps = check_open_unit("eps", eps)
    colors = _colors()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    a1.semilogy(B, r, "o-", label=rf"rank $\binom{{g+d}}{{d}}$, $\varepsilon={eps:g}$")
    a1.axhline(n * n, color="gray", ls=":", label=r"$n^2$ (exact attention's scores)")
    a2.loglog(B, e, "o-", color=colors[1], label=f"degree fixed at {degree}")
    a2.axhline(eps, color="gray", ls=":", label=rf"$\varepsilon = {eps:g}$")
    for ax in (a1, a2):
        ax.axvline(
            math.sqrt(math.log(n)),
            color="black",
            ls="--",
            lw=1,
            label=rf"$\sqrt{{\ln n}}$, n = {n}",
        )
        ax.axvspan(lo, hi, color=colors[3], alpha=0.15, label="B of MiniLM's heads")
        ax.set_xlabel("entry bound B (rescaled real head)")
        ax.legend(fontsize=7.5)
    a1.set_xscale("log")
    a1.set_ylabel("rank r (features per row)")
    a2.set_ylabel(r"output error $\max|\tilde O - O|/\max|V|$")
    fig.suptitle(f"One real head rescaled: the rank for ε = {eps:g}, the error at degree {degree}")
    add_takeaway(fig, "Past B ≈ √ln n the rank explodes, or, at fixed rank, the error does.")
    return fig


def polynomial_accuracy_figure(ranges, forward, gradient):
    """Forward and gradient error of the polynomial method on real heads (Chapter 9).

    Each argument maps an accuracy ε to one value per head: the head's logit range R, its
    forward error max|Õ − O|/max|V| and its relative gradient error. Dotted lines are the
    forward bound 2ε/(1−ε). Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless the three are dicts with the same keys ε in
    (0, 1) and equal-length sequences of positive numbers.
    """
    ranges = as_dict("ranges", ranges, of="eps -> ranges", check_value=as_series)
    forward, gradient = (
        as_dict(name, v, of="eps -> errors", keys=ranges, like="ranges")
        for name, v in (("forward", forward), ("gradient", gradient))
    )
    for eps, R in ranges.items():
        check_open_unit("ranges' key eps", eps)
        for name, errs in (("forward", forward), ("gradient", gradient)):
            errs[eps] = as_series(
                f"{name}[{eps!r}]", errs[eps], size=R.size, like=f"ranges[{eps!r}]", positive=True
            )
    colors = _colors()
    fig, ax = plt.subplots(figsize=(6.4, 3.9))
    worst = 0.0
    for k, (eps, R) in enumerate(ranges.items()):
        f, g = forward[eps], gradient[eps]
        ax.scatter(
            R, f, s=14, color=colors[k], marker="o", label=rf"forward, $\varepsilon={eps:g}$"
        )
        ax.scatter(
            R, g, s=14, color=colors[k], marker="x", label=rf"gradient, $\varepsilon={eps:g}$"
        )
        ax.axhline(2 * eps / (1 - eps), color=colors[k], ls=":", lw=1)
        worst = max(worst, float(f.max()) / (2 * eps / (1 - eps)))
    ax.set_yscale("log")
    ax.set_xlabel(r"logit range R of the head (Cauchy–Schwarz)")
    ax.set_ylabel("error against exact attention")
    ax.legend(fontsize=8, ncol=2)
    ax.set_title("Where it exists, the polynomial is far more accurate than its bound (dotted)")
    add_takeaway(fig, f"The largest forward error is {worst:.0e} × its bound 2ε/(1−ε).")
    return fig


def depth_error_figure(errors, extra=None, *, bounds=None):
    """Relative gradient error after k layers of back-propagation, one panel per stack.

    ``errors`` maps (stack name, ε) to the error curve e_1, …, e_L (see
    :func:`attnlib.models.gradient_errors`, field ``through``); the legend names each curve's
    growth class (:func:`attnlib.models.classify_growth`), dotted lines mark ε (Chapter 9).
    ``extra`` (optional) maps (stack name, legend label) to further curves of positive
    numbers, drawn in grey in that stack's panel, solid and dashed in turn: a stress test that
    is not the method at an ε, and its bound. ``bounds`` (optional) maps some keys of
    ``errors`` to a bound on that curve, drawn dashed in the curve's colour. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless ``errors`` is a non-empty dict keyed by
    (name, ε) pairs with curves of at least 3 positive numbers, and ``extra`` is None or a
    dict keyed by (name, label) pairs of strings, each name a stack of ``errors``, with curves
    of at least 3 positive numbers, and ``bounds`` is None or a dict whose keys are keys of
    ``errors``, each with a curve of positive numbers as long as that key's errors.
    """
    from ..models.depth import classify_growth

    errors = as_dict(
        "errors",
        errors,
        of="(stack name, eps) -> errors",
        check_value=lambda label, e: as_series(label, e, min_size=3, positive=True),
    )
    if not all(isinstance(k, tuple) and len(k) == 2 for k in errors):
        raise AttnInputError("errors must be keyed by (stack name, eps) pairs")
    for _, eps in errors:
        check_open_unit("errors' key eps", eps)
    names = list(dict.fromkeys(name for name, _ in errors))
    extra = _extra_curves(extra, names)
    bounds = (
        {}
        if bounds is None
        else as_dict(
            "bounds",
            bounds,
            of="(stack name, eps) -> bound curve",
            check_value=lambda label, e: as_series(label, e, min_size=3, positive=True),
        )
    )
    for key, b in bounds.items():
        if key not in errors or b.size != errors[key].size:
            raise AttnInputError(
                "bounds must be keyed by keys of errors, each as long as its errors; "
                f"{key!r} is not"
            )
    colors = _colors()
    width = 4.8 * len(names) + (3.6 * len(names) if extra or bounds else 0)
    fig, axes = plt.subplots(1, len(names), figsize=(width, 3.8), sharey=True, squeeze=False)
    ratios = []
    for ax, name in zip(axes[0], names, strict=True):
        for k, eps in enumerate(e for nm, e in errors if nm == name):
            e = errors[name, eps]
            growth = classify_growth(e)
            ratios.append(growth.ratio)
            ax.semilogy(
                np.arange(1, e.size + 1),
                e,
                "o-",
                color=colors[k],
                label=rf"$\varepsilon = {eps:g}$ ({growth.kind})",
            )
            ax.axhline(eps, color=colors[k], ls=":", lw=1)
            if (name, eps) in bounds:
                b = bounds[name, eps]
                ax.semilogy(np.arange(1, b.size + 1), b, "--", color=colors[k], lw=1.2)
        if any(nm == name for nm, _ in bounds):
            ax.plot([], [], "k--", lw=1.2, label="dashed: the bound on the curve of its colour")
        mine = [(label, e) for (nm, label), e in extra.items() if nm == name]
        for j, (label, e) in enumerate(mine):
            style = "x-" if j % 2 == 0 else "x--"  # alternating, so that a pair reads apart
            ax.semilogy(np.arange(1, e.size + 1), e, style, color="0.45", lw=1.2, label=label)
        ax.set_xlabel("layers back-propagated through, k")
        ax.set_title(name)
        if extra or bounds:  # more curves: the legend goes beside the panel, not over it
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        else:
            ax.legend(fontsize=8)
    axes[0, 0].set_ylabel("relative gradient error")
    fig.suptitle("Gradient error against depth, with ε (dotted) for scale")
    add_takeaway(
        fig,
        f"After the last layer the error is at most {max(ratios):.1f} × its value after one layer.",
    )
    return fig


def _extra_curves(extra, names) -> dict:
    """:func:`depth_error_figure`'s ``extra``, validated: {} for None."""
    if extra is None:
        return {}
    extra = as_dict(
        "extra",
        extra,
        of="(stack name, legend label) -> curve",
        check_value=lambda label, e: as_series(label, e, min_size=3, positive=True),
    )
    for key in extra:
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(x, str) for x in key)):
            raise AttnInputError(f"extra must be keyed by (stack name, label) strings, got {key!r}")
        if key[0] not in names:
            raise AttnInputError(f"extra names the stack {key[0]!r}, which errors does not have")
    return extra
