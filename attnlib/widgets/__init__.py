"""Figures the reader can move: precomputed frames online, ipywidgets in a kernel.

The book is read online without a kernel, so a figure that recomputes on a slider would be
dead there. :func:`live_figure` therefore draws *every* point of a finite grid of control
values when the notebook is executed and stores the frames in the cell's output:

- ``text/html``: one ``<img>`` and one control per keyword (``<input type="range">`` for a
  :func:`grid_slider`, ``<select>`` for a :func:`choice`), each with a label, a visible
  readout and an ``aria-valuetext`` naming the value; a few lines of inline JavaScript swap
  the image's ``src`` between the frames, stored as small palette PNGs in base64. Nothing else
  is loaded: no ipywidgets, no require.js. The wrapper carries ``data-live-figure`` (its
  name), ``data-draw`` (``"module:qualname"`` of the drawing function) and the point of every
  frame as JSON, so a checker can recompute any frame with :func:`render_frame` (of the
  function :func:`resolve_draw` finds) and compare pixels;
- ``text/plain``: one deterministic line naming the grid, so nbval compares it.

The stored output holds no widget: a widget view would make the book load the ipywidgets
JavaScript on the page (and would be the dead copy again). The HTML view also works in
Jupyter once the notebook is trusted; the live figure's ``interactive()`` gives the
ipywidgets version that recomputes in a running kernel (display it in a cell tagged
``nbval-ignore-output``: nbval cannot route its ``clear_output`` messages). Drawing functions
must be importable named functions that take the control values as keywords and return a
matplotlib Figure (the ``*_at`` builders of :mod:`attnlib.plots`).

One idea per module: :mod:`.controls` (the grid of values of each control), :mod:`.frames`
(drawing functions by name, and one frame's PNG), :mod:`.live` (the page that shows the
frames, and its kernel twin).
"""

from __future__ import annotations

from . import controls, frames, live
from .controls import *  # noqa: F403
from .frames import *  # noqa: F403
from .live import *  # noqa: F403

__all__ = [*controls.__all__, *frames.__all__, *live.__all__]
