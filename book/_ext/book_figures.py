"""Static figures that fit a phone, are sharp, and enlarge in place.

Loaded through ``sphinx.local_extensions`` in _config.yml.

Each figure output of a chapter notebook is a PNG at twice its CSS size, whose output metadata
(written by attnlib's notebook formatter, ``attnlib/plots/style.py``) holds its 1x ``width`` and
``height``, ``text_px`` (its smallest text, in image pixels) and, for a figure too wide for a
phone, ``phone``: the PNG of its one-column phone form, with the same three numbers. myst-nb
names the image it writes by the sha256 of its bytes, so after an HTML build this extension
finds each figure's ``<img>`` by that name and

- drops the link to its file that Sphinx puts around an image given a size (the figure
  enlarges in the page instead), and gives it ``width``/``height`` attributes (its 1x size;
  the page's style sheet lets it shrink to the column) and ``data-text-px``, which the
  browser check turns into the size of the text a reader sees;
- when there is a phone form, writes it into ``_images/`` and wraps the ``<img>`` in a
  ``<picture>`` whose ``<source>`` serves it below the viewport width at which the desktop
  form's text would fall under ``READABLE_PX`` (never at the desktop layout's widths).

``static/book-figures.js`` makes every figure open enlarged in a dialog on the page.
The single-page build the PDF is printed from keeps the desktop form.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from pathlib import Path

from sphinx.util import logging

from attnlib.plots.forms import READABLE_PX
from attnlib.plots.style import PIXEL_RATIO

logger = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
#: Below this viewport width the article column is the viewport less its padding...
COLUMN_PADDING_PX = 32
#: ...and from this width up the desktop layout shows the desktop form.
DESKTOP_WIDTH = 992
#: A figure with a phone form shows it on every phone, portrait or landscape, up to this width.
PHONE_MAX_PX = 600
# Sphinx links an image given a size to its file; the figure enlarges in the page instead.
SIZE_LINK = re.compile(
    r'<a class="reference internal image-reference" href="[^"]*?(?P<sha>[0-9a-f]{64})\.png">'
    r"(?P<inner><img\b[^>]*>)\s*</a>"
)
IMG = re.compile(r'<img\b[^>]*\bsrc="(?P<src>[^"]*?(?P<sha>[0-9a-f]{64})\.png)"[^>]*>')


def figure_outputs(notebooks) -> dict[str, dict]:
    """``{sha256 of the PNG: its output metadata}`` for every figure of ``notebooks`` whose
    metadata gives its size."""
    found = {}
    for path in notebooks:
        try:
            cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
        except (OSError, ValueError, KeyError):
            continue
        for cell in cells:
            for output in cell.get("outputs", ()):
                png = output.get("data", {}).get("image/png")
                meta = output.get("metadata", {}).get("image/png", {})
                if not png or "text_px" not in meta:
                    continue
                data = base64.b64decode("".join(png) if isinstance(png, list) else png)
                found[hashlib.sha256(data).hexdigest()] = meta
    return found


def phone_breakpoint(meta: dict) -> int:
    """The widest viewport, in CSS px, at which the phone form is served: every phone
    (``PHONE_MAX_PX``), and wider while the desktop form, shrunk to the column, would show text
    under ``READABLE_PX``; never in the desktop layout."""
    shown = float(meta["text_px"]) * float(meta["width"]) / _natural_width(meta)  # at 1x
    if shown < READABLE_PX:  # too small even at full size: the phone form wherever it fits
        return DESKTOP_WIDTH - 1
    # The desktop form is shown at min(1, column / width) of its size.
    column = float(meta["width"]) * READABLE_PX / shown
    return int(min(max(math.ceil(column) + COLUMN_PADDING_PX, PHONE_MAX_PX), DESKTOP_WIDTH - 1))


def _natural_width(meta: dict) -> float:
    """Image pixels across: 1x width times the notebook formatter's pixel ratio."""
    return float(meta["width"]) * PIXEL_RATIO


def _size_attributes(meta: dict) -> str:
    return (
        f'width="{int(meta["width"])}" height="{int(meta["height"])}" '
        f'data-text-px="{float(meta["text_px"]):g}"'
    )


def rewrite_page(text: str, figures: dict, images: Path, with_phone: bool) -> tuple[str, int]:
    """``text`` (a page's HTML) with its figures sized, marked and, with ``with_phone``, given
    their phone forms (written into ``images``). Returns the page and how many it changed."""
    changed = 0

    def one(match) -> str:
        nonlocal changed
        meta = figures.get(match["sha"])
        tag = match[0]
        if meta is None or "data-text-px" in tag:
            return tag
        changed += 1
        # The size goes in attributes: an inline style's height would not follow the width down.
        tag = re.sub(r'\sstyle="[^"]*"', "", tag)
        tag = tag.replace("<img ", f"<img {_size_attributes(meta)} ", 1)
        phone = meta.get("phone")
        if not (with_phone and phone):
            return tag
        data = base64.b64decode(phone["png"])
        name = f"{hashlib.sha256(data).hexdigest()}.png"
        target = images / name
        if not target.is_file():
            target.write_bytes(data)
        src = match["src"][: -len(match["sha"]) - 4] + name
        media = f"(max-width: {phone_breakpoint(meta)}px)"
        source = (
            f'<source media="{html.escape(media)}" srcset="{html.escape(src)}" '
            f"{_size_attributes(phone)} />"
        )
        return f'<picture class="book-figure">{source}{tag}</picture>'

    def unlink(match) -> str:
        return match["inner"] if match["sha"] in figures else match[0]

    return IMG.sub(one, SIZE_LINK.sub(unlink, text)), changed


def _rewrite(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    with_phone = app.builder.name in ("html", "dirhtml")
    notebooks = sorted(Path(app.srcdir).glob("book/**/*.ipynb"))
    figures = figure_outputs(notebooks)
    out = Path(app.outdir)
    images = out / "_images"
    images.mkdir(exist_ok=True)
    total = 0
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new, n = rewrite_page(text, figures, images, with_phone)
        if n:
            page.write_text(new, encoding="utf-8")
            total += n
    logger.info("book_figures: %d figures sized, %d with a phone form", total, _phones(figures))


def _phones(figures: dict) -> int:
    return sum(1 for meta in figures.values() if meta.get("phone"))


def _static_path(app, config) -> None:
    if str(STATIC) not in map(str, config.html_static_path):
        config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", _static_path)
    app.add_css_file("book-figures.css")
    app.add_js_file("book-figures.js", loading_method="defer")
    app.connect("build-finished", _rewrite)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
