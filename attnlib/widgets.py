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
  frame as JSON, so a checker can recompute any frame with :func:`render_frame` and compare
  pixels;
- ``text/plain``: one deterministic line naming the grid, so nbval compares it.

The stored output holds no widget: a widget view would make the book load the ipywidgets
JavaScript on the page (and would be the dead copy again). The HTML view also works in
Jupyter once the notebook is trusted; :meth:`LiveFigure.interactive` gives the ipywidgets
version that recomputes in a running kernel. Drawing functions must be importable named
functions that take the control values as keywords and return a matplotlib Figure (the
``*_at`` builders of :mod:`attnlib.plots`).

:func:`sweep_widget` and :func:`log2_slider` remain for interactive use in a kernel. Cells
that display an ipywidgets object must be tagged ``nbval-ignore-output`` (nbval cannot route
their ``clear_output`` messages).
"""

from __future__ import annotations

import base64
import html
import importlib
import io
import itertools
import json
import re
from dataclasses import dataclass

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from ._checks import AttnInputError, check_int, check_memory_parts

__all__ = [
    "FRAME_COLORS",
    "FRAME_DPI",
    "MAX_EXPONENT",
    "MAX_FRAMES",
    "GridControl",
    "LiveFigure",
    "choice",
    "draw_spec",
    "grid_slider",
    "live_figure",
    "log2_slider",
    "render_frame",
    "resolve_draw",
    "sweep_widget",
]

# Frames are drawn at this resolution and reduced to this many colours (a palette PNG without
# dithering): a two-panel figure then takes about 8 kB, so a page of 60-90 frames stays well
# under a megabyte. The browser check recomputes frames with the same settings.
FRAME_DPI = 66
FRAME_COLORS = 32
# More frames than this make a page too heavy to load.
MAX_FRAMES = 200
# The largest exponent of a log2_slider: 2**k is then still a finite float.
MAX_EXPONENT = 1023

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class GridControl:
    """One control of a :func:`live_figure`: a finite list of values and their readouts.

    Fields
    ------
    description : str, the control's label (e.g. ``"log₂ M"``)
    values : tuple, the values the drawing function receives, in slider order
    value : the starting value, one of ``values``
    labels : tuple of str, what the reader sees for each value (readout, aria-valuetext)
    kind : ``"range"`` (a slider) or ``"select"`` (a drop-down list)
    """

    description: str
    values: tuple
    value: object
    labels: tuple
    kind: str

    def __post_init__(self):
        if self.kind not in ("range", "select"):
            raise AttnInputError(f"kind must be 'range' or 'select', got {self.kind!r:.60}")
        _check_grid(self.description, self.values, self.value, self.labels, "values")

    @property
    def index(self) -> int:
        """The position of the starting value in ``values``."""
        return self.values.index(self.value)


def _human(v) -> str:
    """A value as a reader writes it: 0.3, 1e-06, 1024 (no 0.30000000000000004)."""
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _scalar(name: str, v):
    """A control value as the page stores it: a string, a bool, an int or a finite float
    (numpy scalars become Python ones), so that JSON holds it exactly and the browser check
    hands ``draw`` the same value."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, float) and np.isfinite(v):
        return v
    raise AttnInputError(
        f"{name} must be a string, a bool, an int or a finite float, got {v!r:.60}"
    )


def _sequence(name: str, seq) -> tuple:
    """``seq`` as a tuple; a string (whose characters would become entries) is refused, and so
    is a list longer than :data:`MAX_FRAMES` (a control that long can never be drawn)."""
    if isinstance(seq, (str, bytes)):
        raise AttnInputError(f"{name} must be a list, got {seq!r:.60}")
    try:
        length = len(seq)
    except TypeError:
        length = None
    try:
        items = tuple(itertools.islice(seq, MAX_FRAMES + 1)) if length is None else None
    except TypeError:  # not iterable, or a 0-d array
        raise AttnInputError(f"{name} must be a list, got {seq!r:.60}") from None
    if items is not None:
        length = len(items)
    if length > MAX_FRAMES:
        raise AttnInputError(
            f"{name} must have at most MAX_FRAMES = {MAX_FRAMES} entries, got {length}"
        )
    return items if items is not None else tuple(seq)


def _check_grid(description, values, value, labels, arg: str) -> None:
    """The checks of a control's fields (``arg`` names the values: "values" or "options")."""
    if not isinstance(description, str) or not description.strip():
        raise AttnInputError(f"description must be a non-empty string, got {description!r:.60}")
    values = _sequence(arg, values)
    if not values:
        raise AttnInputError(f"{arg} of {description!r} must not be empty")
    for k, v in enumerate(values):
        if _scalar(f"{arg}[{k}]", v) is not v:
            raise AttnInputError(f"{arg}[{k}] must be a Python scalar, got {type(v).__name__}")
    # 1 and 1.0 (or True) are equal: one would stand for the other's frame
    if len(set(values)) != len(values):
        raise AttnInputError(
            f"{arg} of {description!r} must be distinct (1, 1.0 and True are equal), "
            f"got {values!r:.80}"
        )
    if _scalar("value", value) not in values:
        raise AttnInputError(f"value {value!r:.60} of {description!r} is not in its {arg}")
    labels = _sequence("labels", labels)
    if len(labels) != len(values) or not all(isinstance(t, str) and t for t in labels):
        raise AttnInputError(
            f"labels of {description!r} must be one non-empty string per value "
            f"({len(values)}), got {labels!r:.80}"
        )


def _grid(kind: str, description, values, value, labels, arg: str) -> GridControl:
    values = tuple(_scalar(f"{arg}[{k}]", v) for k, v in enumerate(_sequence(arg, values)))
    value = _scalar("value", value)
    labels = tuple(_human(v) for v in values) if labels is None else _sequence("labels", labels)
    _check_grid(description, values, value, labels, arg)
    return GridControl(description, values, value, labels, kind)


def grid_slider(description: str, values, value, *, labels=None) -> GridControl:
    """A slider over an explicit list of values (a linear or log grid, in slider order).

    ``labels`` are the readouts, one string per value (default: ``f"{v:g}"`` for floats,
    ``str(v)`` otherwise), e.g. ``"2^10 = 1024"`` for the exponent 10.

    Values are strings, bools, ints or finite floats (numpy scalars are converted), stored
    exactly in the page.

    Raises :class:`attnlib.AttnInputError` if ``description`` is not a non-empty string,
    ``values`` is a string or empty, holds another kind of value or repeats one (``1`` and
    ``1.0`` count as one), ``value`` is not among them, or ``labels`` is not one non-empty
    string per value.

    >>> grid_slider("R", [0.5, 1.0, 2.0], 1.0).labels
    ('0.5', '1', '2')
    """
    return _grid("range", description, values, value, labels, "values")


def choice(description: str, options, value, *, labels=None) -> GridControl:
    """A drop-down list over ``options`` (e.g. machine names), starting at ``value``.

    Raises :class:`attnlib.AttnInputError` like :func:`grid_slider` (naming ``options``).
    """
    return _grid("select", description, options, value, labels, "options")


def draw_spec(draw) -> str:
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
    """The function named by ``"module:qualname"`` (see :func:`draw_spec`).

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


def render_frame(draw, point: dict, *, dpi: int = FRAME_DPI, colors: int = FRAME_COLORS) -> bytes:
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


class LiveFigure:
    """A figure over a grid of control values, every frame precomputed (see the module doc).

    Built by :func:`live_figure`. Attributes: ``name``, ``draw`` (the function), ``spec``
    (``"module:qualname"``), ``controls`` (keyword → :class:`GridControl`), ``fixed`` (keywords
    passed unchanged to every frame), ``alt`` (what the figure shows), ``points`` (the grid
    points, row-major over the controls) and ``frames`` (their PNG bytes).
    """

    def __init__(self, draw, controls: dict, *, name: str, alt: str, fixed: dict | None = None):
        fixed = _check_live(draw, controls, name, alt, fixed)
        self.draw, self.spec = draw, draw_spec(draw)
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
        return sweep_widget(self.draw, **sliders, **{k: W.fixed(v) for k, v in self.fixed.items()})


def live_figure(draw, *, name: str, alt: str, fixed: dict | None = None, **controls):
    """A figure the online reader can move: ``draw(**fixed, **values) -> Figure`` at every
    point of the grid of ``controls`` (keyword → :func:`grid_slider` or :func:`choice`).

    ``name`` is a short slug unique on its page (``"ch02-matmul-io"``); ``alt`` says what the
    figure shows, and each frame's alt text adds its control values. ``fixed`` keywords are
    passed unchanged to every frame. Display the result (or let it be a cell's last
    expression): see the module docstring for what the output holds.

    Raises :class:`attnlib.AttnInputError` if ``draw`` is not an importable named function,
    ``name`` is not a slug of lower-case letters, digits and hyphens, ``alt`` is empty, there
    is no control or a control is not a :class:`GridControl`, ``fixed`` is not a dict of
    keywords whose values JSON stores exactly (strings, bools, ints, finite floats, and
    lists and dicts of them), a fixed keyword is also a control, or the grid has more than
    :data:`MAX_FRAMES` points.
    """
    return LiveFigure(draw, controls, name=name, alt=alt, fixed=fixed)


def _check_live(draw, controls, name, alt, fixed) -> dict:
    """The checks of :func:`live_figure`; returns ``fixed`` as a dict."""
    draw_spec(draw)
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
        if not isinstance(c, GridControl):
            raise AttnInputError(
                f"control {key} must be a grid_slider or a choice, got {type(c).__name__}"
            )
    if both := sorted(set(fixed) & set(controls)):
        raise AttnInputError(f"keywords {both} are both fixed and controls")
    n = 1
    for c in controls.values():
        n *= len(c.values)
    if n > MAX_FRAMES:
        raise AttnInputError(
            f"the grid of controls has {n} points, more than MAX_FRAMES = {MAX_FRAMES} frames"
        )
    return dict(fixed)


def log2_slider(description: str, lo: int, hi: int, value: int) -> W.IntSlider:
    """A slider over the integer exponents k = lo, …, hi of a power of two (for n, d, M).

    The slider's value and readout are the exponent k itself, starting at ``value``; the
    drawing function receives k and uses 2**k, and ``description`` should say so
    (``"log₂ M"``). The slider updates only when released.

    Raises :class:`attnlib.AttnInputError` if ``description`` is not a string or lo, hi and
    value are not integers with 0 ≤ lo ≤ value ≤ hi ≤ :data:`MAX_EXPONENT` (2**hi is then a
    finite float).
    """
    if not isinstance(description, str):
        raise AttnInputError(f"description must be a string, got {description!r:.60}")
    lo = check_int("lo", lo, minimum=0, maximum=MAX_EXPONENT)
    hi = check_int("hi", hi, minimum=lo, maximum=MAX_EXPONENT)
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
