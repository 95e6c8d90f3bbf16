"""The live figure: every frame of a grid of controls drawn in advance and stored in the page,
with the few lines of JavaScript that swap them (see :mod:`attnlib.widgets`)."""

from __future__ import annotations

import base64
import functools
import html
import io
import itertools
import json
import math
import re

import ipywidgets as W
import matplotlib.pyplot as plt

from .._checks import AttnInputError, as_entries, check_int
from ..plots.forms import READABLE_PX
from .controls import _MAX_FRAMES, _GridControl
from .frames import _FRAME_COLORS, _FRAME_DPI, PIXEL_RATIO, _draw_spec, _needs_phone_form, _render

__all__ = ["live_figure", "phone_breakpoint", "UNTRUSTED_NOTE"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
#: The notebook stores every frame but the starting one as a draft at this resolution (wide form
#: only): drawing each frame in both forms at the book's resolution would make a chapter with a
#: large grid run for minutes. A notebook swaps the drafts in; the book's build draws every
#: frame in both forms from its point (book/_ext/book_live.py) and serves those.
_DRAFT_DPI = 66
#: The largest exponent of a :func:`_log2_slider`: 2**k is then still a finite float.
_MAX_EXPONENT = 1023


def _listed(labels) -> list:
    """Labels as listed in a sentence: quoted if one of them holds a comma."""
    return [repr(t) for t in labels] if any("," in t for t in labels) else list(labels)


def _json(obj) -> str:
    """JSON safe inside a <script> element and an HTML attribute's quotes."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


# Hides the note for an untrusted notebook (this script running is the proof it is not needed)
# and swaps the frame on every input: its index is row-major over the controls, in order.
_SWAP_JS = """(() => {
  const root = document.currentScript.parentElement;
  const data = JSON.parse(root.querySelector('script.live-figure-data').textContent);
  const img = root.querySelector('img'), source = root.querySelector('source');
  const inputs = Array.from(root.querySelectorAll('[data-control]'));
  root.querySelectorAll('.live-figure-untrusted').forEach(el => { el.hidden = true; });
  const put = (el, f) => {
    el.setAttribute('width', f.width); el.setAttribute('height', f.height);
    el.dataset.textPx = f.text_px;
  };
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
    if (source) { const g = f.phone || f; source.srcset = g.src; put(source, g); }
    img.src = f.src; put(img, f); img.alt = f.alt; img.dataset.point = JSON.stringify(f.point);
  };
  inputs.forEach(el => el.addEventListener('input', show));
})();"""

#: What an untrusted notebook shows instead of moving sliders (its HTML runs no script).
UNTRUSTED_NOTE = (
    "The sliders work once this cell is re-run, or the notebook is trusted (Trust Notebook in"
    " the command palette, Ctrl+Shift+C)."
)

# Each control is one line that never wraps apart: label, control and readout; the slider
# gives up width first. The frame is shown at its 1x size, or narrower with the column.
_STYLE = (
    "<style>.live-figure img{max-width:100%;height:auto;display:block}"
    ".live-figure-controls{display:flex;flex-wrap:wrap;gap:.3em 1.5em;margin:.4em 0}"
    ".live-figure-control{display:flex;flex-wrap:nowrap;align-items:center;gap:.5em;"
    "max-width:100%}.live-figure-control label{flex:none;white-space:nowrap}"
    ".live-figure-control input[type=range]{flex:1 1 9em;min-width:4em;width:9em}"
    ".live-figure-control output{flex:none;min-width:3.5em;white-space:nowrap;"
    "font-variant-numeric:tabular-nums}.live-figure-untrusted{font-style:italic}</style>"
)

# A phone form is served below the viewport width at which the wide frame, shrunk with the
# column (the viewport less this padding), would show text under READABLE_PX; never from the
# width at which the book shows its desktop layout.
_COLUMN_PADDING_PX = 32
_DESKTOP_WIDTH = 992


def phone_breakpoint(frames: list[dict]) -> int:
    """The widest viewport, in CSS px, at which a live figure serves its phone frames.

    A wide frame ``width`` CSS px across shows its smallest text at ``text_px`` /
    :data:`PIXEL_RATIO` CSS px, and in a narrower column c at that times c / ``width``: under
    ``READABLE_PX`` for every column narrower than ``width`` · ``READABLE_PX`` / shown. The
    breakpoint is the widest such column over ``frames`` (dicts with ``width`` and
    ``text_px``, None for a frame without text; drafts are skipped) plus the page's padding,
    and never reaches the desktop layout.

    Raises :class:`attnlib.AttnInputError` if ``frames`` is not a list of such dicts, with a
    positive ``width`` and a ``text_px`` that is None or a number >= 0.
    """
    frames = as_entries("frames", frames, entry_type=dict, max_len=_MAX_FRAMES)
    for f in frames:
        width, text = f.get("width"), f.get("text_px")
        if isinstance(width, bool) or not isinstance(width, int | float) or not width > 0:
            raise AttnInputError(f"frames: each needs a positive width, got {width!r:.40}")
        if not math.isfinite(width):
            raise AttnInputError(f"frames: each needs a finite width, got {width!r:.40}")
        if text is not None and (not isinstance(text, int | float) or not text >= 0):
            raise AttnInputError(f"frames: text_px must be None or >= 0, got {text!r:.40}")
    column = 0.0
    for f in frames:
        if f["text_px"] is not None and not f.get(
            "draft"
        ):  # a frame with no text is readable at any width
            shown = f["text_px"] / PIXEL_RATIO
            column = max(column, f["width"] * READABLE_PX / shown if shown > 0 else math.inf)
    if math.isinf(column):
        return _DESKTOP_WIDTH - 1
    return min(math.ceil(column) + _COLUMN_PADDING_PX, _DESKTOP_WIDTH - 1)


def _frame_entry(png: bytes, text_px: float, *, dpi: int = _FRAME_DPI) -> dict:
    """A frame as the page stores it: inline PNG, 1x size in CSS px (the book's figures are
    drawn at 100 dpi, so a PNG saved at ``dpi`` is shown at 100/``dpi`` of its pixels),
    smallest text in image px."""
    from PIL import Image

    width, height = Image.open(io.BytesIO(png)).size
    return {
        "src": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
        "width": round(width * 100 / dpi),
        "height": round(height * 100 / dpi),
        "text_px": round(text_px, 2) if math.isfinite(text_px) else None,  # None: no text
    }


def _size_attributes(f: dict) -> str:
    size = f'width="{f["width"]}" height="{f["height"]}"'
    return size if f["text_px"] is None else f'{size} data-text-px="{f["text_px"]:g}"'


class _LiveFigure:
    """A figure over a grid of control values, every frame precomputed (see the module doc).

    Built by :func:`live_figure`. Attributes: ``name``, ``draw`` (the function), ``spec``
    (``"module:qualname"``), ``controls`` (keyword → a :func:`grid_slider` or :func:`choice`),
    ``fixed`` (keywords passed unchanged to every frame), ``alt`` (what the figure shows),
    ``points`` (the grid points, row-major over the controls); and, drawn when first needed,
    ``frames`` (their PNG bytes, form ``"wide"``), ``text_px`` (the smallest text of each, in
    image pixels), and ``phone_frames`` and ``phone_text_px``, the same in form ``"phone"``,
    or None when the starting frame needs no phone form
    (:func:`attnlib.plots.forms.needs_phone_form`).
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

    @functools.cached_property
    def _drawn(self) -> dict:
        """Every frame in both forms at the book's resolution, drawn once, when first asked
        for (the book's build draws the same from the page's points)."""
        wide = self._draw_all("wide")
        # Every frame has the phone form when the starting one needs it: one form per page.
        phone = self._draw_all("phone") if self._needs_phone else None
        return {"wide": wide, "phone": phone}

    @functools.cached_property
    def _needs_phone(self) -> bool:
        return _needs_phone_form(self.draw, self.default)

    @functools.cached_property
    def _start(self) -> dict:
        """The starting frame at the book's resolution, wide and (when needed) phone form."""
        draw = functools.partial(_render, self.draw, self.default, dpi=_FRAME_DPI)
        return {
            "wide": draw(colors=_FRAME_COLORS, form="wide"),
            "phone": draw(colors=_FRAME_COLORS, form="phone") if self._needs_phone else None,
        }

    @property
    def frames(self) -> list[bytes]:
        return self._drawn["wide"][0]

    @property
    def text_px(self) -> list[float]:
        return self._drawn["wide"][1]

    @property
    def phone_frames(self) -> list[bytes] | None:
        return self._drawn["phone"][0] if self._drawn["phone"] else None

    @property
    def phone_text_px(self) -> list[float] | None:
        return self._drawn["phone"][1] if self._drawn["phone"] else None

    def _draw_all(self, form: str) -> tuple[list[bytes], list[float]]:
        """Every frame in ``form``: the PNGs and their smallest text, in image pixels."""
        drawn = [
            _render(self.draw, p, dpi=_FRAME_DPI, colors=_FRAME_COLORS, form=form)
            for p in self.points
        ]
        return [png for png, _ in drawn], [px for _, px in drawn]

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
            f"live figure {self.name!r}: {len(self.points)} frames of {self.spec} over {grids}; "
            f"shown at {start}"
        )

    def _frame_data(self) -> list[dict]:
        """Every frame as the notebook stores it: point, alt text, the inline PNG, its 1x size
        and smallest text (:func:`_frame_entry`). The starting frame is at the book's
        resolution, with ``phone``, the same for its phone form (when there is one); every
        other frame is a draft (``"draft": true``), the wide form at :data:`_DRAFT_DPI`, which
        a notebook swaps in and the book's build replaces."""
        frames, start = [], self.default_index
        for i, p in enumerate(self.points):
            f = {"point": p, "alt": self.alt_text(i)}
            if i == start:
                f.update(_frame_entry(*self._start["wide"]))
                if self._start["phone"] is not None:
                    f["phone"] = _frame_entry(*self._start["phone"])
            else:
                draft = _render(self.draw, p, dpi=_DRAFT_DPI, colors=_FRAME_COLORS, form="wide")
                f.update(_frame_entry(*draft, dpi=_DRAFT_DPI), draft=True)
            frames.append(f)
        return frames

    def _control_rows(self, uid: str) -> str:
        """One line per control: its label, the control and its readout."""
        e, rows = html.escape, []
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
                f'<span class="live-figure-control"><label for="{cid}">{e(c.description)}</label>'
                f'{field}<output for="{cid}" aria-live="polite">{e(c.labels[j])}</output></span>'
            )
        return "".join(rows)

    def _repr_html_(self) -> str:
        e = html.escape
        uid = f"live-figure-{self.name}"
        frames = self._frame_data()
        controls = [
            {"name": k, "description": c.description, "labels": list(c.labels)}
            for k, c in self.controls.items()
        ]
        start = frames[self.default_index]
        image = (
            f'<img src="{start["src"]}" {_size_attributes(start)} alt="{e(start["alt"])}" '
            f'data-point="{e(_json(start["point"]))}">'
        )
        if "phone" in start:
            media = f"(max-width: {phone_breakpoint(frames)}px)"
            image = (
                f'<source media="{media}" srcset="{start["phone"]["src"]}" '
                f"{_size_attributes(start['phone'])}>{image}"
            )
        return (
            f'<div class="live-figure" id="{uid}" data-live-figure="{e(self.name)}" '
            f'data-draw="{e(self.spec)}" data-fixed="{e(_json(self.fixed))}">{_STYLE}'
            f'<p class="live-figure-untrusted">{e(UNTRUSTED_NOTE)}</p>'
            f'<picture class="live-figure-frame">{image}</picture>'
            f'<div class="live-figure-controls">{self._control_rows(uid)}</div>'
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
