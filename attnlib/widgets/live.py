"""The live figure: every frame of a grid of controls drawn in advance and stored in the page,
with the few lines of JavaScript that swap them (see :mod:`attnlib.widgets`)."""

from __future__ import annotations

import base64
import html
import itertools
import json
import re

import ipywidgets as W
import matplotlib.pyplot as plt

from .._checks import AttnInputError, check_int
from .controls import _MAX_FRAMES, _GridControl
from .frames import _draw_spec, render_frame

__all__ = ["live_figure"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
#: The largest exponent of a :func:`_log2_slider`: 2**k is then still a finite float.
_MAX_EXPONENT = 1023


def _listed(labels) -> list:
    """Labels as listed in a sentence: quoted if one of them holds a comma."""
    return [repr(t) for t in labels] if any("," in t for t in labels) else list(labels)


def _json(obj) -> str:
    """JSON safe inside a <script> element and an HTML attribute's quotes."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


# Swaps the image on every input: the frame index is row-major over the controls, in order.
_SWAP_JS = """(() => {
  const root = document.currentScript.parentElement;
  const data = JSON.parse(root.querySelector('script.live-figure-data').textContent);
  const img = root.querySelector('img');
  const inputs = Array.from(root.querySelectorAll('[data-control]'));
  const show = () => {
    let k = 0;
    inputs.forEach((el, i) => {
      const j = Number(el.value), c = data.controls[i];
      k = k * c.labels.length + j;
      const text = c.description + ' = ' + c.labels[j];
      if (el.type === 'range') el.setAttribute('aria-valuetext', text);
      root.querySelector('output[for="' + el.id + '"]').textContent = c.labels[j];
    });
    const f = data.frames[k];
    img.src = f.src; img.alt = f.alt; img.dataset.point = JSON.stringify(f.point);
  };
  inputs.forEach(el => el.addEventListener('input', show));
})();"""


_STYLE = (
    "<style>.live-figure img{max-width:100%;height:auto;display:block}"
    ".live-figure-controls{display:flex;flex-wrap:wrap;gap:.3em 1.5em;margin:.4em 0}"
    ".live-figure-controls label{display:flex;align-items:center;gap:.5em}"
    ".live-figure-controls output{min-width:6em;font-variant-numeric:tabular-nums}</style>"
)


class _LiveFigure:
    """A figure over a grid of control values, every frame precomputed (see the module doc).

    Built by :func:`live_figure`. Attributes: ``name``, ``draw`` (the function), ``spec``
    (``"module:qualname"``), ``controls`` (keyword → a :func:`grid_slider` or :func:`choice`),
    ``fixed`` (keywords passed unchanged to every frame), ``alt`` (what the figure shows),
    ``points`` (the grid points, row-major over the controls) and ``frames`` (their PNG
    bytes).
    """

    def __init__(self, draw, controls: dict, *, name: str, alt: str, fixed: dict | None = None):
        fixed = _check_live(draw, controls, name, alt, fixed)
        self.draw, self.spec = draw, _draw_spec(draw)
        self.controls, self.name, self.alt, self.fixed = controls, name, alt, fixed
        grids = [c.values for c in controls.values()]
        self.points = [
            {**fixed, **dict(zip(controls, vals, strict=True))}
            for vals in itertools.product(*grids)
        ]
        self.frames = [render_frame(draw, p) for p in self.points]

    @property
    def default(self) -> dict:
        """The starting point: every control at its starting value."""
        return {**self.fixed, **{k: c.value for k, c in self.controls.items()}}

    @property
    def default_index(self) -> int:
        """The starting point's position in :attr:`points`."""
        return self.points.index(self.default)

    def alt_text(self, index: int) -> str:
        """The alt text of frame ``index``: what the figure shows, at which control values.
        Raises :class:`attnlib.AttnInputError` if ``index`` is not a frame's index."""
        index = check_int("index", index, minimum=0, maximum=len(self.points) - 1)
        point, parts = self.points[index], []
        for key, c in self.controls.items():
            parts.append(f"{c.description} = {c.labels[c.values.index(point[key])]}")
        return f"{self.alt}, for {', '.join(parts)}"

    def __repr__(self) -> str:
        grids = " × ".join(
            f"{c.description} ∈ {{{', '.join(_listed(c.labels))}}}" for c in self.controls.values()
        )
        start = ", ".join(f"{c.description} = {c.labels[c.index]}" for c in self.controls.values())
        return (
            f"live figure {self.name!r}: {len(self.frames)} frames of {self.spec} over {grids}; "
            f"shown at {start}"
        )

    def _repr_html_(self) -> str:
        e = html.escape
        uid = f"live-figure-{self.name}"
        frames = [
            {
                "point": p,
                "alt": self.alt_text(i),
                "src": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
            }
            for i, (p, png) in enumerate(zip(self.points, self.frames, strict=True))
        ]
        controls = [
            {"name": k, "description": c.description, "labels": list(c.labels)}
            for k, c in self.controls.items()
        ]
        start = frames[self.default_index]
        rows = []
        for key, c in self.controls.items():
            cid, j = f"{uid}-{key}", c.index
            common = f'id="{cid}" data-control="{e(key)}" aria-label="{e(c.description)}"'
            if c.kind == "range":
                field = (
                    f'<input type="range" {common} min="0" max="{len(c.values) - 1}" step="1" '
                    f'value="{j}" aria-valuetext="{e(c.description)} = {e(c.labels[j])}">'
                )
            else:
                opts = "".join(
                    f'<option value="{m}"{" selected" if m == j else ""}>{e(t)}</option>'
                    for m, t in enumerate(c.labels)
                )
                field = f"<select {common}>{opts}</select>"
            rows.append(
                f'<label for="{cid}">{e(c.description)} {field}</label>'
                f'<output for="{cid}" aria-live="polite">{e(c.labels[j])}</output>'
            )
        return (
            f'<div class="live-figure" id="{uid}" data-live-figure="{e(self.name)}" '
            f'data-draw="{e(self.spec)}" data-fixed="{e(_json(self.fixed))}">{_STYLE}'
            f'<img src="{start["src"]}" alt="{e(start["alt"])}" '
            f'data-point="{e(_json(start["point"]))}">'
            f'<div class="live-figure-controls">{"".join(rows)}</div>'
            f'<script type="application/json" class="live-figure-data">'
            f"{_json({'controls': controls, 'frames': frames})}</script>"
            f"<script>{_SWAP_JS}</script></div>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": repr(self), "text/html": self._repr_html_()}

    def interactive(self):
        """The ipywidgets version for a running kernel: the same controls, redrawn on change."""
        sliders = {
            k: W.SelectionSlider(
                options=list(zip(c.labels, c.values, strict=True)),
                value=c.value,
                description=c.description,
                continuous_update=False,
            )
            if c.kind == "range"
            else W.Dropdown(
                options=list(zip(c.labels, c.values, strict=True)),
                value=c.value,
                description=c.description,
            )
            for k, c in self.controls.items()
        }
        return _sweep_widget(self.draw, **sliders, **{k: W.fixed(v) for k, v in self.fixed.items()})


def live_figure(draw, *, name: str, alt: str, fixed: dict | None = None, **controls):
    """A figure the online reader can move: ``draw(**fixed, **values) -> Figure`` at every
    point of the grid of ``controls`` (keyword → :func:`grid_slider` or :func:`choice`).

    ``name`` is a short slug unique on its page (``"ch02-matmul-io"``); ``alt`` says what the
    figure shows, and each frame's alt text adds its control values. ``fixed`` keywords are
    passed unchanged to every frame. Display the result (or let it be a cell's last
    expression): see the module docstring for what the output holds.

    Raises :class:`attnlib.AttnInputError` if ``draw`` is not an importable named function,
    ``name`` is not a slug of lower-case letters, digits and hyphens, ``alt`` is empty, there
    is no control or a control is not a :func:`grid_slider` or a :func:`choice`, ``fixed`` is
    not a dict of keywords whose values JSON stores exactly (strings, bools, ints, finite
    floats, and lists and dicts of them), a fixed keyword is also a control, or the grid has
    more than 200 points (frames).
    """
    return _LiveFigure(draw, controls, name=name, alt=alt, fixed=fixed)


def _check_live(draw, controls, name, alt, fixed) -> dict:
    """The checks of :func:`live_figure`; returns ``fixed`` as a dict."""
    _draw_spec(draw)
    if not isinstance(name, str) or not _NAME.match(name):
        raise AttnInputError(f"name must be a slug like 'ch02-matmul-io', got {name!r:.60}")
    if not isinstance(alt, str) or not alt.strip():
        raise AttnInputError(f"alt must say what the figure shows, got {alt!r:.60}")
    if fixed is None:
        fixed = {}
    if not isinstance(fixed, dict):
        raise AttnInputError(f"fixed must be a dict of keywords, got {fixed!r:.60}")
    for key, v in fixed.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise AttnInputError(f"fixed must have keyword names as keys, got {key!r:.60}")
        try:  # stored in the page for the browser check, which calls draw with them
            json.dumps(v, allow_nan=False)
        except (TypeError, ValueError):
            raise AttnInputError(
                f"fixed[{key!r}] must be a value JSON stores exactly, got {v!r:.60}"
            ) from None
    if not isinstance(controls, dict) or not controls:
        raise AttnInputError("live_figure needs at least one control")
    for key, c in controls.items():
        if not isinstance(c, _GridControl):
            raise AttnInputError(
                f"control {key} must be a grid_slider or a choice, got {type(c).__name__}"
            )
    if both := sorted(set(fixed) & set(controls)):
        raise AttnInputError(f"keywords {both} are both fixed and controls")
    n = 1
    for c in controls.values():
        n *= len(c.values)
    if n > _MAX_FRAMES:
        raise AttnInputError(
            f"the grid of controls has {n} points, more than the {_MAX_FRAMES} frames a page holds"
        )
    return dict(fixed)


def _sweep_widget(draw, **controls):
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


def _log2_slider(description: str, lo: int, hi: int, value: int) -> W.IntSlider:
    """A slider over the integer exponents k = lo, …, hi of a power of two (for n, d, M).

    The slider's value and readout are the exponent k itself, starting at ``value``; the
    drawing function receives k and uses 2**k, and ``description`` should say so
    (``"log₂ M"``). The slider updates only when released.

    Raises :class:`attnlib.AttnInputError` if ``description`` is not a string or lo, hi and
    value are not integers with 0 ≤ lo ≤ value ≤ hi ≤ :data:`_MAX_EXPONENT` (2**hi is then a
    finite float).
    """
    if not isinstance(description, str):
        raise AttnInputError(f"description must be a string, got {description!r:.60}")
    lo = check_int("lo", lo, minimum=0, maximum=_MAX_EXPONENT)
    hi = check_int("hi", hi, minimum=lo, maximum=_MAX_EXPONENT)
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
