"""The book's figure style and the pieces every builder shares.

:func:`use_book_style` sets matplotlib's defaults (it runs when :mod:`attnlib.plots` is
imported); :func:`loglog_figure` is the shared log-log builder; :func:`add_takeaway` writes a
figure's one-line takeaway under its axes; :func:`label_ticks` puts plain-number ticks on a
log axis.
"""

from __future__ import annotations

import base64
import io

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .._checks import as_dict, as_entries, as_series
from ..measure import loglog_slope

__all__ = ["use_book_style", "loglog_figure", "add_takeaway", "label_ticks"]

#: The book's matplotlib style, applied on import.
_BOOK_STYLE = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "figure.constrained_layout.use": True,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
    "font.family": "DejaVu Sans",
    "axes.prop_cycle": mpl.cycler(
        color=["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]
    ),
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (idempotent). In a notebook, figures are also shown as
    256-colour PNGs at twice their resolution, with a phone form where one is needed
    (``_notebook_png``)."""
    mpl.rcParams.update(_BOOK_STYLE)
    try:
        from IPython import get_ipython
    except ImportError:  # plain Python: nothing is displayed
        return
    shell = get_ipython()
    if shell is None or "image/png" not in shell.display_formatter.formatters:
        return
    if "inline" in mpl.get_backend(auto_select=False):
        # The inline backend registers its own PNG formatter once, when its module is imported
        # (matplotlib imports it lazily, at the first figure): import it now, so that the
        # book's formatter is registered after it and is the one that stays.
        import matplotlib_inline.backend_inline  # noqa: F401

    shell.display_formatter.formatters["image/png"].for_type(Figure, _notebook_png)


#: A notebook figure is drawn at this many image pixels per CSS pixel: sharp on a phone's or a
#: laptop's high-density screen, where a 1x image is blurred.
PIXEL_RATIO = 2


def _notebook_png(fig) -> tuple[bytes, dict]:
    """``fig`` as the notebook shows it: a palette PNG at ``PIXEL_RATIO`` times the figure's
    dpi, and its metadata.

    The metadata's ``width`` and ``height`` (CSS px) make JupyterLab and the book show the
    image at its 1x size; ``text_px`` is its smallest text, in image pixels
    (:func:`~attnlib.plots.forms.min_text_px`). A figure too wide for a phone's column
    (:func:`~attnlib.plots.forms.needs_phone_form`) also gets ``phone``: the PNG of its
    :func:`~attnlib.plots.forms.phone_form` (base64) with its own ``width``, ``height`` and
    ``text_px``. A figure that carries ``attnlib_phone_builder`` (a function of no arguments
    returning a Figure) gets that figure as its phone form instead. The figure itself is left
    as it was.
    """
    from .forms import needs_phone_form, phone_layout

    dpi = fig.dpi * PIXEL_RATIO
    png, metadata = _png_with_size(fig, dpi)
    # A figure whose labels sit at data positions (a diagram, an annotated map) brings its
    # own phone form: re-gridding it would overlap them.
    build = getattr(fig, "attnlib_phone_builder", None)
    if build is not None:
        phone_fig = build()
        try:
            phone, phone_metadata = _png_with_size(phone_fig, phone_fig.dpi * PIXEL_RATIO)
        finally:
            plt.close(phone_fig)
        metadata["phone"] = {"png": base64.b64encode(phone).decode("ascii"), **phone_metadata}
    elif needs_phone_form(fig):
        with phone_layout(fig):
            phone, phone_metadata = _png_with_size(fig, dpi)
        metadata["phone"] = {"png": base64.b64encode(phone).decode("ascii"), **phone_metadata}
    return png, metadata


def _png_with_size(fig, dpi: float) -> tuple[bytes, dict]:
    from PIL import Image

    from .forms import min_text_px

    png = _palette_png(fig, dpi)
    width, height = Image.open(io.BytesIO(png)).size
    return png, {
        "width": round(width / PIXEL_RATIO),
        "height": round(height / PIXEL_RATIO),
        "text_px": round(min_text_px(fig, dpi), 2),
    }


def _palette_png(fig, dpi: float) -> bytes:
    """``fig`` at ``dpi`` as a PNG of at most 256 colours, cropped as the notebook crops it.

    The book's figures are line art on white: a palette of 256 colours draws them without a
    visible change, in about a third of the bytes of a full-colour PNG, which keeps every page
    light enough for a phone. Returns the PNG's bytes.
    """
    from PIL import Image

    buffer = io.BytesIO()
    engine = fig.get_layout_engine()
    try:
        fig.savefig(
            buffer,
            format="png",
            dpi=dpi,
            bbox_inches="tight",
            facecolor=fig.get_facecolor(),
            edgecolor=fig.get_edgecolor(),
        )
    finally:
        # savefig gives a figure drawn with no layout engine the rc default (constrained), which
        # the next draw of a hand-placed figure would then run and warn about: put it back
        if engine is None and fig.get_layout_engine() is not None:
            fig.set_layout_engine("none")
    buffer.seek(0)
    rgba = Image.open(buffer).convert("RGBA")
    # a transparent figure is shown on the page's white, as the notebook shows it
    image = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)
    image = image.convert("RGB").quantize(256)
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue()


def loglog_figure(
    series: dict,
    *,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    fit: bool = False,
    markers: bool = True,
    ax=None,
):
    """Plot ``{label: (x, y)}`` on log-log axes; with ``fit=True`` each label gains its slope.

    Returns the figure. Axis labels are required: every plot in the book says its units.
    The shared log-log builder: Chapters 8 and 9 call it directly, and Part I's builders
    through it.

    Raises :class:`attnlib.AttnInputError` unless ``series`` is a non-empty dict of pairs of
    equal-length positive sequences (as :func:`attnlib.measure.loglog_slope` with ``fit``).
    """

    def xy(label, pair):
        x, y = as_entries(label, pair, of="sequences (x, y)", length=2)
        x = as_series(f"{label}[0]", x, positive=True)
        return x, as_series(f"{label}[1]", y, size=x.size, like=f"{label}[0]", positive=True)

    series = as_dict("series", series, of="label -> (x, y)", check_value=xy)
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    for label, (x, y) in series.items():
        text = label
        if fit:
            text = f"{label} (slope {loglog_slope(x, y):.2f})"
        ax.loglog(x, y, marker="o" if markers else None, label=text)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    return fig


def add_takeaway(fig, text: str) -> None:
    """Write the figure's one-line takeaway under the axes."""
    fig.text(0.5, -0.02, text, ha="center", va="top", fontsize=9, style="italic", wrap=True)


use_book_style()


def label_ticks(ax, values, axis: str = "x") -> None:
    """Put major ticks exactly at ``values`` with plain-number labels and hide minor labels.

    Log axes otherwise label minor ticks as ``3×10²`` and the labels collide.
    """
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(list(values)))
    target.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())
