"""Figures of Part IV, the evidence (Chapter 9): real heads, deep stacks, the decision map."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from .._checks import AttnInputError, as_float_array, check_choice, check_int, check_open_unit
from . import add_takeaway

__all__ = [
    "DECISION_COLORS",
    "LOGIT_QUANTILES",
    "logit_distribution_figure",
    "entry_bound_figure",
    "int8_rounding_figure",
    "threshold_sweep_figure",
    "polynomial_accuracy_figure",
    "depth_error_figure",
    "decision_map_figure",
    "method_costs_figure",
    "method_costs_at",
]


#: One colour per method of attnlib.advice.METHODS (exact, flash, smallcache, polynomial).
DECISION_COLORS = ("#7f7f7f", "#1f77b4", "#d62728", "#2ca02c")

#: The quantiles of a head's logits that :func:`logit_distribution_figure` draws: whiskers at
#: 0.1% and 99.9%, the box from 25% to 75%, the median.
LOGIT_QUANTILES = (0.001, 0.25, 0.5, 0.75, 0.999)


#: The largest sequence length or word count a figure takes: held in int64, and its square a
#: float.
_MAX_N = 2**62


def _colors() -> list:
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def _vector(name: str, values, *, allow_nan: bool = False) -> np.ndarray:
    """A 1-D float64 array of numbers (NaN allowed only with ``allow_nan``)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond the floats
        raise AttnInputError(f"{name} must be a sequence of numbers, got {values!r:.60}") from None
    arr = as_float_array(name, arr, ndim=1, allow_nonfinite=allow_nan)
    if np.isinf(arr).any():
        raise AttnInputError(f"{name} must hold finite numbers (or NaN for a missing point)")
    return arr


def _range(name: str, value) -> tuple[float, float]:
    """A pair (lo, hi) of positive numbers with lo ≤ hi."""
    pair = _vector(name, value)
    if pair.size != 2 or not 0 < pair[0] <= pair[1]:
        raise AttnInputError(f"{name} must be a pair (lo, hi) with 0 < lo <= hi, got {value!r:.60}")
    return float(pair[0]), float(pair[1])


def _mapping(name: str, value) -> dict:
    if not isinstance(value, dict) or not value:
        raise AttnInputError(f"{name} must be a non-empty dict, got {type(value).__name__}")
    return value


def _per_head(name: str, table) -> dict:
    """``{n: (L, H) array}`` with one shape for every n."""
    table = _mapping(name, table)
    out = {
        check_int(f"{name} key", n, minimum=2): as_float_array(f"{name}[{n}]", a)
        for n, a in table.items()
    }
    shapes = {a.shape for a in out.values()}
    if len(shapes) != 1:
        raise AttnInputError(f"{name} must hold (L, H) arrays of one shape, got {sorted(shapes)}")
    return out


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
    B = _per_head("B_heads", B_heads)
    R = _per_head("R_observed", R_observed)
    if list(B) != list(R) or next(iter(B.values())).shape != next(iter(R.values())).shape:
        raise AttnInputError("B_heads and R_observed must have the same lengths n and shapes")
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
    B_ratio, errors = _mapping("B_ratio", B_ratio), _mapping("errors", errors)
    if list(B_ratio) != list(errors):
        raise AttnInputError("B_ratio and errors must have the same clip quantiles as keys")
    colors = _colors()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for k, c in enumerate(B_ratio):
        b, e = _vector(f"B_ratio[{c}]", B_ratio[c]), _vector(f"errors[{c}]", errors[c])
        if b.shape != e.shape or (e <= 0).any() or not 0 < c <= 1:
            raise AttnInputError(f"B_ratio[{c}] and errors[{c}] must pair positive errors per head")
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
    B = _vector("B_grid", B_grid)
    r = _vector("ranks", ranks, allow_nan=True)
    e = _vector("errors", errors)
    # n² is drawn: a sequence length held in int64 keeps it a float
    n, degree = check_int("n", n, maximum=_MAX_N), check_int("degree", degree)
    lo, hi = _range("B_range", B_range)
    eps = check_open_unit("eps", eps)
    if not (r.shape == e.shape == B.shape) or (B <= 0).any() or (e <= 0).any():
        raise AttnInputError("B_grid, ranks and errors must be equal-length positive sequences")
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
    ranges, forward, gradient = (
        _mapping(name, v)
        for name, v in (("ranges", ranges), ("forward", forward), ("gradient", gradient))
    )
    if not list(ranges) == list(forward) == list(gradient):
        raise AttnInputError("ranges, forward and gradient must have the same accuracies as keys")
    colors = _colors()
    fig, ax = plt.subplots(figsize=(6.4, 3.9))
    worst = 0.0
    for k, eps in enumerate(ranges):
        R, f, g = (
            _vector(f"{nm}[{eps}]", v[eps])
            for nm, v in (("ranges", ranges), ("forward", forward), ("gradient", gradient))
        )
        if not (R.shape == f.shape == g.shape) or not 0 < eps < 1:
            raise AttnInputError(f"ranges, forward and gradient at eps={eps} must pair up per head")
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


def depth_error_figure(errors):
    """Relative gradient error after k layers of back-propagation, one panel per stack.

    ``errors`` maps (stack name, ε) to the error curve e_1, …, e_L (see
    :func:`attnlib.models.gradient_errors`, field ``through``); the legend names each curve's
    growth class (:func:`attnlib.models.classify_growth`), dotted lines mark ε (Chapter 9).
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` unless ``errors`` is a non-empty dict keyed by
    (name, ε) pairs with curves of at least 3 positive numbers.
    """
    from ..models.depth import classify_growth

    errors = _mapping("errors", errors)
    if not all(isinstance(k, tuple) and len(k) == 2 for k in errors):
        raise AttnInputError("errors must be keyed by (stack name, eps) pairs")
    names = list(dict.fromkeys(name for name, _ in errors))
    colors = _colors()
    fig, axes = plt.subplots(
        1, len(names), figsize=(4.8 * len(names), 3.8), sharey=True, squeeze=False
    )
    ratios = []
    for ax, name in zip(axes[0], names, strict=True):
        for k, eps in enumerate(e for nm, e in errors if nm == name):
            e = _vector(f"errors[{name!r}, {eps}]", errors[name, eps])
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
        ax.set_xlabel("layers back-propagated through, k")
        ax.set_title(name)
        ax.legend(fontsize=8)
    axes[0, 0].set_ylabel("relative gradient error")
    fig.suptitle("Gradient error against depth, with ε (dotted) for scale")
    add_takeaway(
        fig,
        f"After the last layer the error is at most {max(ratios):.1f} × its value after one layer.",
    )
    return fig


def decision_map_figure(ns, Bs, maps, *, methods, eps, M, threshold=True, title=None, band=None):
    """The (n, B) plane coloured by the method :func:`attnlib.advise` recommends (Chapter 9).

    ``maps`` is ``{d: grid}`` with each grid from :func:`attnlib.advice.decision_map`
    (rows = ``Bs``, columns = ``ns``, entries = indices into ``methods``); one panel per d,
    side by side. With ``threshold=True`` the curve B = √(ln n) is drawn dashed. ``title``
    replaces the default title; ``band`` = (lo, hi) hatches a range of B (the B of MiniLM's
    heads). The takeaway gives the largest B at which the polynomial method is recommended.
    Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if ``ns`` or ``Bs`` is not a sequence of positive
    numbers, a key d of ``maps`` is not a positive integer, a grid's shape is not
    (len(Bs), len(ns)) or its entries are not indices into ``methods``, ``eps`` is not in
    (0, 1), M is not an integer from 1 to 2⁶², or ``band`` is not (lo, hi). A single n or B
    is drawn as one cell a factor 2 wide.
    """
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    ns, Bs = _vector("ns", ns), _vector("Bs", Bs)
    maps = _mapping("maps", maps)
    methods = tuple(methods)
    if not 0 < len(methods) <= len(DECISION_COLORS) or (ns <= 0).any() or (Bs <= 0).any():
        raise AttnInputError("ns and Bs must be positive and methods name at most four methods")
    for d, grid in maps.items():
        grid = np.asarray(grid)
        if (
            grid.shape != (Bs.size, ns.size)
            or grid.dtype.kind not in "iu"
            or not ((grid >= 0) & (grid < len(methods))).all()
        ):
            raise AttnInputError(f"maps[{d}] must be a (len(Bs), len(ns)) grid of method indices")
    eps, M = check_open_unit("eps", eps), check_int("M", M, maximum=_MAX_N)
    for d in maps:
        check_int("maps' key d", d)
    cmap = ListedColormap(DECISION_COLORS[: len(methods)])
    norm = BoundaryNorm(np.arange(len(methods) + 1) - 0.5, cmap.N)
    fig, axes = plt.subplots(1, len(maps), figsize=(3.4 * len(maps) + 0.6, 3.9), sharey=True)
    axes = np.atleast_1d(axes)

    def edges(v):
        if v.size == 1:  # one cell: a factor 2 either side
            return np.array([v[0] / 2, v[0] * 2])
        lv = np.log(v)
        mid = (lv[1:] + lv[:-1]) / 2
        return np.exp(np.concatenate([[2 * lv[0] - mid[0]], mid, [2 * lv[-1] - mid[-1]]]))

    for ax, (d, grid) in zip(axes, maps.items(), strict=True):
        ax.pcolormesh(edges(ns), edges(Bs), grid, cmap=cmap, norm=norm, shading="flat")
        if threshold:
            nn = np.geomspace(ns[0], ns[-1], 200)
            ax.plot(nn, np.sqrt(np.log(nn)), "k--", lw=1.4)
        if band is not None:
            lo, hi = _range("band", band)
            ax.axhspan(lo, hi, facecolor="none", edgecolor="white", hatch="//", lw=0)
            ax.text(ns[0] * 1.3, lo * 1.05, "MiniLM's heads", color="white", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n (tokens)")
        ax.set_title(f"d = {d}  (M = {M} words = {M / (d * d):g}·d²)", fontsize=10)
        ax.grid(False)
    axes[0].set_ylabel("entry bound B (AS24 convention)")
    handles = [Patch(color=DECISION_COLORS[i], label=m) for i, m in enumerate(methods)]
    if threshold:
        handles.append(plt.Line2D([], [], color="k", ls="--", label=r"$B=\sqrt{\ln n}$"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=9)
    default = f"Fastest method by the cost model of attnlib.advice (ε = {eps:g})"
    fig.suptitle(default if title is None else title, fontsize=11)
    if "polynomial" in methods:
        poly = methods.index("polynomial")
        rows = [
            i
            for grid in maps.values()
            for i in range(Bs.size)
            if (np.asarray(grid)[i] == poly).any()
        ]
        text = (
            f"The polynomial method wins only at B ≤ {Bs[max(rows)]:.2g}."
            if rows
            else "The polynomial method wins nowhere on this map."
        )
        add_takeaway(fig, text)
    return fig


def method_costs_figure(advice, *, machine: str = ""):
    """The four methods' costs at one point, as bars on a log scale (Chapter 9's widget).

    ``advice`` is the :class:`attnlib.advice.Advice` of one call of :func:`attnlib.advise`;
    the recommended method's bar is highlighted and infeasible methods are marked.
    ``machine`` names the machine in the title. Returns the Figure.

    Raises :class:`attnlib.AttnInputError` if ``advice`` is not an Advice or ``machine`` is
    not a string.
    """
    from matplotlib.patches import Patch

    from ..advice import METHODS, Advice

    if not isinstance(advice, Advice):
        raise AttnInputError(
            f"advice must be an attnlib.advice.Advice, got {type(advice).__name__}"
        )
    if not isinstance(machine, str):
        raise AttnInputError(f"machine must be a string, got {machine!r:.60}")
    colors = _colors()
    a = advice
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    # Numeric positions, so that every method keeps its place and its tick label even when it
    # has no bar; an infeasible method is labelled inside the axes, from the bottom.
    x = np.arange(len(METHODS))
    feasible = np.array([c.feasible for c in a.costs])
    costs = np.array([c.cost for c in a.costs], dtype=float)
    bar_colors = [colors[1] if m == a.method else colors[0] for m in METHODS]
    ax.bar(x[feasible], costs[feasible], color=[bar_colors[i] for i in x[feasible]])
    for i in x[~feasible]:
        ax.text(
            i,
            0.03,
            "infeasible",
            ha="center",
            va="bottom",
            rotation=90,
            fontsize=8,
            color="0.35",
            transform=ax.get_xaxis_transform(),
        )
    ax.set_xticks(x, METHODS)
    ax.set_xlim(-0.5, len(METHODS) - 0.5)
    ax.set_yscale("log")
    ax.set_ylabel("cost (flop-equivalents)")
    ax.set_xlabel("method")
    ax.legend(
        handles=[
            Patch(color=colors[1], label="recommended"),
            Patch(color=colors[0], label="other methods"),
        ],
        fontsize=8,
    )
    n_text = f"2^{int(math.log2(a.n))}" if a.n & (a.n - 1) == 0 else f"{a.n:,}"
    ax.set_title(
        f"{machine + ': ' if machine else ''}n = {n_text}, d = {a.d}, B = {a.B:g}, "
        f"eps = {a.eps:g}: use {a.method}",
        fontsize=9,
    )
    add_takeaway(fig, f"Recommended: {a.method} ({a.reason}).")
    return fig


def method_costs_at(log2_n: int, d: int, B: float, machine: str, eps_exp: int):
    """Chapter 9's live figure: :func:`method_costs_figure` of :func:`attnlib.advise` at
    n = 2**log2_n, head dimension d, entry bound B and eps = 10**-eps_exp on ``machine``, a
    name of :data:`attnlib.machines.BOOK_MACHINES`.

    Raises :class:`attnlib.AttnInputError` if ``machine`` is not such a name, ``log2_n`` not
    an integer from 1 to 62, ``eps_exp`` not one from 1 to 300, or :func:`attnlib.advise`
    refuses d or B."""
    from ..advice import advise
    from ..machines import BOOK_MACHINES

    check_choice("machine", machine, tuple(BOOK_MACHINES))
    log2_n = check_int("log2_n", log2_n, maximum=62)
    eps_exp = check_int("eps_exp", eps_exp, maximum=300)  # eps = 10^-eps_exp, a positive float
    return method_costs_figure(
        advise(2**log2_n, d, B, 10.0**-eps_exp, **BOOK_MACHINES[machine]), machine=machine
    )
