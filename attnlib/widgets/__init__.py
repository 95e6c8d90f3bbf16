"""Figures the reader can move: precomputed frames online, ipywidgets in a kernel.

The book is read online without a kernel, so a figure that recomputes on a slider would be
dead there. :func:`live_figure` therefore stores *every* point of a finite grid of control
values in the cell's output, and a frame for each:

- ``text/html``: one ``<picture>`` and one control per keyword (``<input type="range">`` for
  a :func:`grid_slider`, ``<select>`` for a :func:`choice`), each on one line with its label
  and a visible readout, and an ``aria-valuetext`` naming the value; a few lines of inline
  JavaScript swap the picture's sources between the frames, stored as palette PNGs in base64.
  The starting frame is drawn like a static figure: at twice its CSS size (``width``/
  ``height`` give the 1x size), with its smallest text in ``data-text-px``, and, when the
  figure is too wide for a phone, also in its phone form
  (:func:`attnlib.plots.forms.phone_form`), served to narrow viewports. Every other frame is
  stored as a light draft (wide form, low resolution, ``"draft": true``) that a notebook
  swaps in: drawing them all in both forms would take minutes of a chapter's run. A note
  says the sliders need a trusted notebook; the script, which an untrusted
  notebook does not run, hides it. Nothing else is loaded: no ipywidgets, no require.js. The
  wrapper carries ``data-live-figure`` (its name), ``data-draw`` (``"module:qualname"`` of
  the drawing function) and the point of every frame as JSON, so a checker can recompute any
  frame with :func:`render_frame` (of the function :func:`resolve_draw` finds, in the form
  shown) and compare pixels. The book's build (``book/_ext/book_live.py``) draws every
  draft again in both forms at the book's resolution (the same bytes as :func:`render_frame`,
  kept in a cache between builds) and moves the frames into files, so that a page loads only
  the frames a reader shows;
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
