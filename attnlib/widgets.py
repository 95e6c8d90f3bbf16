"""ipywidgets builders the chapters share.

Widgets are for readers who run a notebook. Next to each widget the book shows a static
figure of the same sweep (built by the same plotting function), so online readers see it
too. Widget cells must be tagged ``nbval-ignore-output`` (nbval cannot route their
``clear_output`` messages) and must not block: these builders only draw, never wait.
"""

from __future__ import annotations

import ipywidgets as W
import matplotlib.pyplot as plt

__all__ = ["sweep_widget", "log2_slider"]


def log2_slider(description: str, lo: int, hi: int, value: int) -> W.IntSlider:
    """A slider over exponents k with value 2**k shown in the readout (for n, d, M)."""
    return W.IntSlider(
        value=value,
        min=lo,
        max=hi,
        step=1,
        description=description,
        readout_format="d",
        continuous_update=False,
    )


def sweep_widget(draw, **controls):
    """Interactive version of a static figure: ``draw(**values) -> Figure``.

    ``controls`` maps keyword names to ipywidgets controls. The figure is redrawn whenever a
    control changes. Returns the ``ipywidgets.interactive`` object (display it, or let it be
    the cell's last expression).
    """

    def _show(**values):
        fig = draw(**values)
        plt.show()
        plt.close(fig)

    return W.interactive(_show, **controls)
