"""The frames of a live figure: a drawing function named ``"module:qualname"``, and the PNG
of one of its figures, the same bytes whenever it is drawn again (the browser check recomputes
the frames a page shows with :func:`resolve_draw` and :func:`render_frame`)."""

from __future__ import annotations

import importlib
import io

import matplotlib.pyplot as plt
import numpy as np

from .._checks import AttnInputError, check_int, check_memory_parts

__all__ = ["resolve_draw", "render_frame"]

# Frames are drawn at this resolution and reduced to this many colours (a palette PNG without
# dithering): a two-panel figure then takes about 8 kB, so a page of 60-90 frames stays well
# under a megabyte. The browser check recomputes frames with the same settings.
_FRAME_DPI = 66
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


def render_frame(draw, point: dict, *, dpi: int = _FRAME_DPI, colors: int = _FRAME_COLORS) -> bytes:
    """The PNG of one frame: ``draw(**point)`` saved at ``dpi`` (tight box, no metadata that
    varies) and reduced to ``colors`` palette colours without dithering.

    The same call gives the same bytes for the same matplotlib and Pillow, which is how the
    browser check recomputes a frame shown on a page.

    Raises :class:`attnlib.AttnInputError` if ``draw`` is not callable or does not return a
    matplotlib Figure, ``point`` is not a dict of keywords, ``dpi`` is not a positive
    integer, ``colors`` is not an integer from 2 to 256, or the image at that ``dpi`` would
    exceed :data:`attnlib.config.MAX_ALLOCATION_BYTES`.
    """
    from matplotlib.figure import Figure
    from PIL import Image

    if not callable(draw):
        raise AttnInputError(f"draw must be callable like a figure builder, got {draw!r:.60}")
    if not isinstance(point, dict) or not all(isinstance(k, str) for k in point):
        raise AttnInputError(f"point must be a dict of keyword arguments, got {point!r:.60}")
    dpi = check_int("dpi", dpi)
    colors = check_int("colors", colors, minimum=2, maximum=256)
    fig = draw(**point)
    if not isinstance(fig, Figure):
        raise AttnInputError(f"draw must return a matplotlib Figure, got {type(fig).__name__}")
    try:
        width, height = fig.get_size_inches()
        # RGBA canvas, its PNG and the RGB and palette copies: 4 + 3 + 3 + 1 bytes a pixel at
        # most (a tight box only crops); the canvas size is fixed by the figure, not the dpi
        pixels = int(np.ceil(width * dpi)) * int(np.ceil(height * dpi))
        check_memory_parts("render_frame", [(12 * pixels, f"the image at dpi={dpi}", "dpi")])
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    finally:
        plt.close(fig)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    image = image.quantize(colors=colors, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue()
