"""ipywidgets builders the chapters share.

Widgets are for readers who run a notebook. Next to each widget the book shows a static
figure of the same sweep (built by the same plotting function), so online readers see it
too. Widget cells must be tagged ``nbval-ignore-output`` (nbval cannot route their
``clear_output`` messages) and must not block: these builders only draw, never wait.
"""

from __future__ import annotations

import ipywidgets as W
import matplotlib.pyplot as plt

from ._checks import AttnInputError, check_int

__all__ = ["sweep_widget", "log2_slider"]


def log2_slider(description: str, lo: int, hi: int, value: int) -> W.IntSlider:
    """A slider over the integer exponents k = lo, …, hi of a power of two (for n, d, M).

    The slider's value and readout are the exponent k itself, starting at ``value``; the
    drawing function receives k and uses 2**k, and ``description`` should say so
    (``"log₂ M"``). The slider updates only when released.

    Raises :class:`attnlib.AttnInputError` if ``description`` is not a string or lo, hi and
    value are not integers with 0 ≤ lo ≤ value ≤ hi.
    """
    if not isinstance(description, str):
        raise AttnInputError(f"description must be a string, got {description!r}")
    lo = check_int("lo", lo, minimum=0)
    hi = check_int("hi", hi, minimum=lo)
    value = check_int("value", value, minimum=lo, maximum=hi)
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

    Raises :class:`attnlib.AttnInputError` if ``draw`` is not callable.
    """
    if not callable(draw):
        raise AttnInputError(f"draw must be callable like a figure builder, got {draw!r}")

    def _show(**values):
        fig = draw(**values)
        plt.show()
        plt.close(fig)

    return W.interactive(_show, **controls)
