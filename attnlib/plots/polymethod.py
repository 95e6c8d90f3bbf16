"""Figures of Part II, the polynomial method (Chapters 6 and 7)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "exp_poly_error_figure",
    "least_degree_figure",
]


def exp_poly_error_figure(R: float, eps: float, *, ax=None):
    """Relative error p(x)e^{-x} - 1 on [-R, R] of exp_poly's Chebyshev and Taylor polynomials.

    Draws ±eps as dashed lines and puts each polynomial's degree in the legend. A request that
    double precision cannot meet is drawn as the refusal message instead (Chapter 6 widget).
    """
    from attnlib import AttnInputError
    from attnlib import polymethod as pm

    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    x = np.linspace(-R, R, 2001)
    for kind, style in (("chebyshev", "-"), ("taylor", ":")):
        try:
            p = pm.exp_poly(R, eps, kind=kind)
        except AttnInputError as exc:
            ax.text(
                0.02,
                0.9 if kind == "chebyshev" else 0.75,
                f"{kind}: refused",
                transform=ax.transAxes,
                fontsize=9,
                color="C3",
            )
            ax.set_title(str(exc)[:90] + "...", fontsize=8)
            continue
        ax.plot(x, p(x) * np.exp(-x) - 1.0, style, label=f"{kind}, degree {p.degree()}")
    ax.axhline(eps, color="gray", ls="--", lw=1, label=r"$\pm\varepsilon$")
    ax.axhline(-eps, color="gray", ls="--", lw=1)
    ax.set_xlabel("logit x")
    ax.set_ylabel(r"relative error $p(x)e^{-x} - 1$")
    if not ax.get_title():
        ax.set_title(f"R = {R:g}, eps = {eps:.0e}")
    ax.legend(loc="lower right")
    return fig


def least_degree_figure(Rs, epss, *, ax=None):
    """Measured least degree (Chebyshev solid, Taylor dotted) against R, one colour per eps,
    next to AA22's order formula max{2R, L/log(L/2R)} (dashed, constant 1)."""
    from attnlib import polymethod as pm

    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    Rs = np.asarray(Rs, dtype=float)
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
