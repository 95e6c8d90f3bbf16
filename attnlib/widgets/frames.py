"""The frames of a live figure: a drawing function named ``"module:qualname"``, and the PNG
of one of its figures, the same bytes whenever it is drawn again (the browser check recomputes
the frames a page shows with :func:`resolve_draw` and :func:`render_frame`).

A frame is drawn as the book's static figures are: at twice their 100 dpi, to be shown at half
its pixel size, in one of two forms (:data:`FORMS`): ``"wide"`` as drawn, or ``"phone"``,
the figure's :func:`attnlib.plots.forms.phone_form` for a phone's column."""

from __future__ import annotations

import importlib
import io

import matplotlib.pyplot as plt
import numpy as np

from .._checks import AttnInputError, check_choice, check_int, check_memory_parts
from ..plots.style import PIXEL_RATIO  # a frame is as sharp as a static figure

__all__ = ["resolve_draw", "render_frame", "FORMS", "PIXEL_RATIO"]

#: The forms a frame is drawn in: as the drawing function returns it, and for a phone.
FORMS = ("wide", "phone")
# Frames are drawn at PIXEL_RATIO times the book's 100 dpi and reduced to this many colours (a
# palette PNG without dithering: line art on white). The page loads only the frames shown, so
# their number no longer weighs on it. The browser check recomputes frames with the same settings.
_FRAME_DPI = 100 * PIXEL_RATIO
_FRAME_COLORS = 32


def _draw_spec(draw) -> str:
    """``"module:qualname"`` of a drawing function, checked to import back to ``draw``.

    Raises :class:`attnlib.AttnInputError` if ``draw`` is not callable, or is a lambda, a
    nested function or anything else that cannot be imported by that name.
    """
    if not callable(draw):
        raise AttnInputError(f"draw must be callable like a figure builder, got {draw!r:.60}")
    module, qualname = getattr(draw, "__module__", None), getattr(draw, "__qualname__", "")
    spec = f"{module}:{qualname}"
    if not module or not qualname or "<" in qualname:
        raise AttnInputError(f"draw must be an importable named function, got {spec}")
    try:
        found = resolve_draw(spec)
    except AttnInputError:
        found = None
    if found is not draw:
        raise AttnInputError(f"draw must be an importable named function: {spec} is not it")
    return spec


def resolve_draw(spec: str):
    """The function named by ``"module:qualname"`` (see :func:`_draw_spec`).

    Raises :class:`attnlib.AttnInputError` if the module or the name does not exist.
    """
    if not isinstance(spec, str):
        raise AttnInputError(f"spec must be a string 'module:qualname', got {spec!r:.60}")
    module, _, qualname = spec.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise AttnInputError(f"spec {spec!r:.80} cannot be imported: {exc}") from None
    return obj


def render_frame(
    draw, point: dict, *, dpi: int = _FRAME_DPI, colors: int = _FRAME_COLORS, form: str = "wide"
) -> bytes:
    """The PNG of one frame: ``draw(**point)`` in ``form`` (one of :data:`FORMS`) saved at
    ``dpi`` (tight box, no metadata that varies) and reduced to ``colors`` palette colours
    without dithering.

    The same call gives the same bytes for the same matplotlib and Pillow, which is how the
    browser check recomputes a frame shown on a page.

    Raises :class:`attnlib.AttnInputError` if ``draw`` is not callable or does not return a
    matplotlib Figure, ``point`` is not a dict of keywords, ``dpi`` is not a positive
    integer, ``colors`` is not an integer from 2 to 256, ``form`` is not one of
    :data:`FORMS`, or the image at that ``dpi`` would exceed
    :data:`attnlib.config.MAX_ALLOCATION_BYTES`.
    """
    return _render(draw, point, dpi=dpi, colors=colors, form=form)[0]


def _render(draw, point: dict, *, dpi: int, colors: int, form: str) -> tuple[bytes, float]:
    """:func:`render_frame`'s PNG and the height of its smallest text in image pixels
    (:func:`attnlib.plots.forms.min_text_px`)."""
    from matplotlib.figure import Figure
    from PIL import Image

    from ..plots.forms import min_text_px, phone_form

    if not callable(draw):
        raise AttnInputError(f"draw must be callable like a figure builder, got {draw!r:.60}")
    if not isinstance(point, dict) or not all(isinstance(k, str) for k in point):
        raise AttnInputError(f"point must be a dict of keyword arguments, got {point!r:.60}")
    dpi = check_int("dpi", dpi)
    colors = check_int("colors", colors, minimum=2, maximum=256)
    check_choice("form", form, FORMS)
    fig = draw(**point)
    if not isinstance(fig, Figure):
        raise AttnInputError(f"draw must return a matplotlib Figure, got {type(fig).__name__}")
    try:
        if form == "phone":
            phone_form(fig)
        width, height = fig.get_size_inches()
        # RGBA canvas, its PNG and the RGB and palette copies: 4 + 3 + 3 + 1 bytes a pixel at
        # most (a tight box only crops); the canvas size is fixed by the figure, not the dpi
        pixels = int(np.ceil(width * dpi)) * int(np.ceil(height * dpi))
        check_memory_parts("render_frame", [(12 * pixels, f"the image at dpi={dpi}", "dpi")])
        text_px = min_text_px(fig, dpi)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    finally:
        plt.close(fig)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    image = image.quantize(colors=colors, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue(), text_px


def _render_spec(job: tuple) -> tuple[bytes, float]:
    """:func:`_render` of ``job = (spec, point, form)`` at the book's resolution, the drawing
    function named by its spec: a module-level function, so that a process pool can run it
    (the book's build draws a live figure's frames on every core)."""
    spec, point, form = job
    return _render(resolve_draw(spec), point, dpi=_FRAME_DPI, colors=_FRAME_COLORS, form=form)


def _needs_phone_form(draw, point: dict) -> bool:
    """Whether ``draw(**point)`` needs a phone form
    (:func:`attnlib.plots.forms.needs_phone_form`)."""
    from ..plots.forms import needs_phone_form

    fig = draw(**point)
    try:
        return needs_phone_form(fig)
    finally:
        plt.close(fig)
