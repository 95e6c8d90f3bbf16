"""Live figures (``attnlib.widgets.live_figure``), at each width of LIVE_WIDTHS: the page
stores one frame per point of the controls' grid; the figure is a numbered figure with a
caption ("Figure N.k", like a static one); each control has a label, a readout on the same
line as the control and (a slider) an ``aria-valuetext`` with the value as a reader writes it;
moving each control (arrow key on a slider, another option of a drop-down list) changes the
image, its readout and its alt text, which names the control values; the frame shown after
each move has exactly the pixels that ``attnlib.widgets.render_frame`` gives for the
``data-draw`` function at the frame's point, in the form the browser chose (wide or phone),
recomputed in this process (no tolerance: same code, same matplotlib and Pillow); the note
for an untrusted notebook is hidden; at the desktop width the frame shown has at least
SHARP_RATIO image pixels per CSS pixel; and no frame of the figure, in either form, is a
blank panel (data ink, drawn in colour, across less than BLANK_COLUMNS of its width). A
screenshot of each figure after the moves goes next to the page's.

:func:`check_grid`, :func:`check_live_state`, :func:`check_move`, :func:`check_caption`,
:func:`check_sharp`, :func:`readout_problems` and :func:`blank_frames` are pure functions of
the states js/live_state.js reports (or of pixels); the rest drives the page.
"""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .browser import offline_page
from .scripts import js
from .settings import FIGURE_NUMBER, LIVE_WIDTHS, TRIVIAL_ALT, UGLY_NUMBER
from .static import chapter_number

#: Image pixels per CSS pixel a frame must have at the desktop width: a 2x raster, like the
#: static figures (a little under 2 for rounding of the 1x size).
SHARP_RATIO = 1.9
#: A frame is a blank panel when the columns holding coloured ink (the data: lines, bars, a
#: refusal's hatched band; axes, ticks and text are grey or black) span less than this share
#: of its width. A drawn curve or band spans the axes, about three quarters of the image, and
#: the bars of a chart at least half.
BLANK_COLUMNS = 1 / 4
#: A pixel is coloured ink when its channels differ by more than this (grey has none).
INK_SATURATION = 60


def png_pixels(png: bytes):
    """The RGB pixels of a PNG, as a (height, width, 3) array."""
    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


class Frames:
    """Frames recomputed in this process by attnlib.widgets.render_frame, once per point and
    form."""

    def __init__(self):
        self._cache: dict[tuple[str, str, str], object] = {}

    def __len__(self) -> int:
        return len(self._cache)

    def __call__(self, spec: str, point: str, form: str = "wide"):
        import matplotlib

        matplotlib.use("Agg")
        from attnlib import widgets

        key = (spec, point, form)
        if key not in self._cache:
            draw = widgets.resolve_draw(spec)
            png = widgets.render_frame(draw, json.loads(point), form=form)
            self._cache[key] = png_pixels(png)
        return self._cache[key]


def frame_bytes(src: str) -> bytes:
    """The PNG a frame's URL names: an inline ``data:`` PNG or a file of the built book."""
    head, _, payload = src.partition(",")
    if head == "data:image/png;base64":
        return base64.b64decode(payload)
    parts = urlsplit(src)
    if parts.scheme != "file":
        raise ValueError(f"the frame is neither an inline PNG nor a file: {src[:60]}")
    return Path(unquote(parts.path)).read_bytes()


def shown_pixels(src: str):
    """The pixels of the frame a live figure shows."""
    return png_pixels(frame_bytes(src))


def ink_columns(pixels) -> float:
    """The share of an image's columns that hold coloured ink (see :data:`BLANK_COLUMNS`)."""
    rgb = pixels.astype(int)
    inked = (rgb.max(axis=2) - rgb.min(axis=2)) > INK_SATURATION
    return float(inked.any(axis=0).mean())


def blank_frames(frames: dict, where: str) -> list[str]:
    """The frames (``{label: pixels}``) that are blank panels: no data ink drawn across
    :data:`BLANK_COLUMNS` of the width, like a refused point drawn as an empty panel."""
    fails = []
    for label, pixels in frames.items():
        share = ink_columns(pixels)
        if share < BLANK_COLUMNS:
            fails.append(f"{where}: frame {label} is a blank panel (data ink across {share:.0%})")
    return fails


def check_grid(st: dict, where: str) -> list[str]:
    """The page stores one frame per point of the controls' grid, each point once."""
    grid = math.prod(st["grid"])
    if st["frames"] != grid or len(set(st["points"])) != grid:
        return [f"{where}: {st['frames']} frames for a grid of {grid} points"]
    return []


def _control_problems(c: dict, where: str) -> list[str]:
    """One control: labelled, visible, and (a slider) with an aria-valuetext."""
    fails = []
    if not c["label"] or not c["aria"]:
        fails.append(f"{where}: control {c['id']} has no label")
    if not c["visible"]:
        fails.append(f"{where}: control {c['id']} is not visible")
    if c["type"] == "range" and not c["valuetext"]:
        fails.append(f"{where}: slider {c['id']} has no aria-valuetext")
    return fails


def _value_problems(c: dict, alt: str, where: str) -> list[str]:
    """One control's value: written as a reader writes it, and named by the alt text."""
    fails = [
        f"{where}: control {c['id']} reads {text!r}"
        for text in (c["readout"], c["valuetext"])
        if text and UGLY_NUMBER.search(text)
    ]
    if not c["readout"] or c["readout"] not in alt:
        fails.append(f"{where}: the alt text does not name {c['id']} = {c['readout']!r}")
    return fails


def _frame_problems(st: dict, where: str, frames) -> list[str]:
    """The frame shown has exactly the pixels ``frames`` recomputes at its point and form."""
    import numpy as np

    form = st.get("form", "wide")
    try:
        shown = shown_pixels(st["src"])
        want = frames(st["draw"], st["point"], form)
    except Exception as e:  # noqa: BLE001 - reported as a failure
        return [f"{where}: frame at {st['point']} ({form}) not recomputed: {e}"]
    if shown.shape != want.shape or not np.array_equal(shown, want):
        return [f"{where}: the {form} frame shown at {st['point']} differs from {st['draw']}'s"]
    return []


def check_caption(st: dict, where: str, chapter: int | None) -> list[str]:
    """The live figure is a numbered figure, "Figure N.k" (N the chapter; none on the
    preface), with caption text."""
    m = FIGURE_NUMBER.match(st.get("number") or "")
    if not m or (int(m.group(1)) if m.group(1) else None) != chapter:
        want = f"Figure {chapter}.k" if chapter is not None else "Figure k"
        return [f"{where}: the live figure is not numbered {want!r} (got {st.get('number')!r})"]
    if not st.get("caption"):
        return [f"{where}: {st['number']} has a number but no caption text"]
    return []


def check_sharp(st: dict, where: str) -> list[str]:
    """The frame shown has at least :data:`SHARP_RATIO` image pixels per CSS pixel."""
    if not st["ok"] or not st["client"]:
        return []  # check_live_state reports an image that did not load
    ratio = st["natural"] / st["client"]
    if ratio < SHARP_RATIO:
        return [f"{where}: the frame is {ratio:.2f}x its shown width (< {SHARP_RATIO}x)"]
    return []


def readout_problems(c: dict, where: str) -> list[str]:
    """A control's readout sits on the control's line, after it: their boxes overlap
    vertically and the readout starts right of the control (no wrap between them)."""
    out, box = c.get("readout_box"), c.get("box")
    if not out or not box:
        return [f"{where}: control {c['id']} has no readout beside it"]
    same_line = out["top"] < box["bottom"] and box["top"] < out["bottom"]
    if not same_line or out["left"] < box["right"] - 1:
        return [f"{where}: the readout of {c['id']} is not on its control's line"]
    return []


def check_live_state(st: dict, where: str, frames) -> list[str]:
    """One state of a live figure: controls labelled, values readable, the frame recomputed.
    ``frames(draw, point)`` gives the pixels the frame must have."""
    fails = []
    if not st["ok"]:
        fails.append(f"{where}: the image did not load")
    if st["right"] > st["viewport"] + 1:
        fails.append(f"{where}: the image is wider than the viewport ({st['right']:.0f}px)")
    if TRIVIAL_ALT.search(st["alt"] or ""):
        fails.append(f"{where}: the image has no real alt text")
    if st.get("note"):
        fails.append(f"{where}: the note for an untrusted notebook shows")
    for c in st["controls"]:
        fails += _control_problems(c, where) + _value_problems(c, st["alt"] or "", where)
        fails += readout_problems(c, where)
    return fails + _frame_problems(st, where, frames)


def control(state: dict, control_id: str) -> dict:
    """The control ``control_id`` as it is in ``state``."""
    return next(x for x in state["controls"] if x["id"] == control_id)


def check_move(c: dict, st: dict, moved: dict, where: str) -> list[str]:
    """Moving control ``c`` (as it was in state ``st``) to state ``moved`` changed its value,
    the image, its readout, the alt text and (a slider) its aria-valuetext."""
    now = control(moved, c["id"])
    if now["value"] == c["value"]:
        return [f"{where}: {c['id']} did not move"]
    fails = []
    if moved["src"] == st["src"]:
        fails.append(f"{where}: moving {c['id']} did not change the image")
    if now["readout"] == c["readout"] or moved["alt"] == st["alt"]:
        fails.append(f"{where}: moving {c['id']} left its readout or alt")
    if c["type"] == "range" and now["valuetext"] == c["valuetext"]:
        fails.append(f"{where}: moving {c['id']} left its aria-valuetext")
    return fails


def _move(pw_page, fig, c: dict) -> None:
    """Move one control as a reader would: the next option of a list, an arrow key on a slider
    (back from its end)."""
    el = fig.query_selector(f"#{c['id']}")
    el.scroll_into_view_if_needed()
    if c["tag"] == "select":
        el.select_option(str((int(c["value"]) + 1) % c["options"]))
    else:
        el.focus()
        at_end = int(c["value"]) >= int(c["max"])
        pw_page.keyboard.press("ArrowLeft" if at_end else "ArrowRight")
    pw_page.wait_for_timeout(50)


def _check_figure(pw_page, fig, at: str, frames, fails: list[str]) -> tuple[int, dict]:
    """Check one figure as loaded, then move each control in turn and check again, adding
    the problems to ``fails`` as they are found (so a later browser error keeps them); return
    (states checked, the first state). ``at`` names the page and width."""
    st = first = pw_page.evaluate(js("live_state"), fig)
    where = f"{at} {first['name']}"
    fails += check_grid(st, where) + check_live_state(st, where, frames)
    fails += check_caption(st, where, chapter_number(at.split()[0]))
    if st["viewport"] >= LIVE_WIDTHS[-1]:
        fails += check_sharp(st, where) + _blank_problems(st, where)
    for c in first["controls"]:
        _move(pw_page, fig, c)
        moved = pw_page.evaluate(js("live_state"), fig)
        fails += check_move(c, st, moved, where)
        if control(moved, c["id"])["value"] != c["value"]:
            fails += check_live_state(moved, f"{where} after {c['id']}", frames)
            st = moved
    return 1 + len(first["controls"]), first


def _blank_problems(st: dict, where: str) -> list[str]:
    """:func:`blank_frames` over every frame the figure stores, in both forms."""
    pixels = {}
    for point, forms in zip(st["points"], st["files"], strict=True):
        for form, src in zip(("wide", "phone"), forms, strict=True):
            if src:
                try:
                    pixels[f"{point} ({form})"] = shown_pixels(src)
                except (OSError, ValueError) as e:
                    return [f"{where}: frame {point} ({form}) cannot be read: {e}"]
    return blank_frames(pixels, where)


def _check_page_at(browser, page: Path, rel: str, width: int, frames, shots: Path):
    """Every live figure of one page at one width: (problems, states, (rel, name, frames))."""
    fails, n, rows = [], 0, []
    stem = rel.replace("/", "__").removesuffix(".html")
    with offline_page(browser, width) as pw_page:
        try:
            pw_page.goto(page.as_uri(), wait_until="load", timeout=30_000)
            for fig in pw_page.query_selector_all("[data-live-figure]"):
                states, first = _check_figure(pw_page, fig, f"{rel} {width}px", frames, fails)
                n += states
                rows.append((rel, first["name"], first["frames"]))
                fig.screenshot(path=str(shots / f"{stem}@{width}-live-{first['name']}.png"))
        except Exception as e:  # noqa: BLE001 - reported as a failure
            fails.append(f"{rel} {width}px: live figure check failed: {str(e).splitlines()[0]}")
    return fails, n, rows


def check_live_figures(root: Path, pages: list[Path], browser, shots: Path):
    """Each live figure, at each width of LIVE_WIDTHS: its caption, then move every control,
    see the frame change, and compare the frame shown with the one recomputed from its point
    and form; at the widest width, its sharpness and every stored frame's ink. Returns
    (problems, states checked, (page, figure, frames) at the widest width, frames recomputed).
    """
    fails, n, rows = [], 0, []
    frames = Frames()
    for page in pages:
        if "data-live-figure=" not in page.read_text(encoding="utf-8", errors="replace"):
            continue
        rel = page.relative_to(root).as_posix()
        for width in LIVE_WIDTHS:
            page_fails, states, page_rows = _check_page_at(browser, page, rel, width, frames, shots)
            fails, n = fails + page_fails, n + states
            if width == LIVE_WIDTHS[-1]:
                rows += page_rows
    return fails, n, rows, len(frames)
